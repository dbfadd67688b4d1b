//! The real clock, and decision records as JSON lines.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::domain::{LogText, Timestamp};
use crate::ports::Clock;

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(since.as_micros() as i64)
    }
}

/// Writes each decision record as one JSON line (`kuuki serve`; the Lambdas use
/// `aws::emf::EmfLog`, which adds metrics), with people's words or without
/// ([`LogText`]).
pub struct JsonLinesLog<W: std::io::Write + Send> {
    out: std::sync::Mutex<W>,
    text: LogText,
}

impl<W: std::io::Write + Send> JsonLinesLog<W> {
    pub fn new(out: W, text: LogText) -> Self {
        Self { out: std::sync::Mutex::new(out), text }
    }
}

impl<W: std::io::Write + Send> crate::ports::DecisionLog for JsonLinesLog<W> {
    fn record(&self, event: crate::domain::Event) {
        let line = event.to_log_json(self.text);
        let mut out = self.out.lock().expect("log lock");
        if let Err(error) = writeln!(out, "{line}").and_then(|_| out.flush()) {
            tracing::warn!(%error, "could not write a decision record");
        }
    }
}
