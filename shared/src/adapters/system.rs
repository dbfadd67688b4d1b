//! The real clock.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::domain::Timestamp;
use crate::ports::Clock;

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(since.as_micros() as i64)
    }
}
