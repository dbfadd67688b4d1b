//! What the relay has done: counters for `GET /healthz` and the EMF metrics lines.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

use crate::forward::Outcome;

/// The `Function` dimension of the relay's metrics.
pub const FUNCTION: &str = "discord-gateway";

/// Whether a platform connection is up, since when it is down, and how often it was
/// (re)established: the relay's gateway session, and in `kuuki serve` the Gateway and
/// Slack's Socket Mode too. Down from the start until the first connection.
#[derive(Debug)]
pub struct ConnectionState {
    connected: AtomicBool,
    sessions: AtomicU64,
    disconnected_since: Mutex<Option<Instant>>,
}

impl Default for ConnectionState {
    fn default() -> Self {
        ConnectionState {
            connected: AtomicBool::new(false),
            sessions: AtomicU64::new(0),
            disconnected_since: Mutex::new(Some(Instant::now())),
        }
    }
}

impl ConnectionState {
    /// A connection (a session) is established.
    pub fn up(&self) {
        self.sessions.fetch_add(1, Relaxed);
        self.connected.store(true, Relaxed);
        *self.disconnected_since.lock().expect("stats lock") = None;
    }

    pub fn down(&self) {
        if self.connected.swap(false, Relaxed) {
            *self.disconnected_since.lock().expect("stats lock") = Some(Instant::now());
        }
    }

    pub fn connected(&self) -> bool {
        self.connected.load(Relaxed)
    }

    pub fn sessions(&self) -> u64 {
        self.sessions.load(Relaxed)
    }

    /// Connections after the first: each a reconnect.
    pub fn reconnects(&self) -> u64 {
        self.sessions().saturating_sub(1)
    }

    /// Healthy while connected, or not disconnected for longer than `unhealthy_after`.
    pub fn healthy(&self, unhealthy_after: Duration) -> bool {
        match *self.disconnected_since.lock().expect("stats lock") {
            None => true,
            Some(since) => since.elapsed() < unhealthy_after,
        }
    }
}

/// Counters since start-up. Every method is cheap and lock-free but the
/// disconnected-since instant and the metrics snapshot.
#[derive(Debug)]
pub struct Stats {
    /// The gateway session: READY and RESUMED dispatches each (re)establish it.
    pub connection: ConnectionState,
    resumes: AtomicU64,
    queued: AtomicU64,
    forwarded: AtomicU64,
    /// Retries beyond the first attempt, over all dispatches.
    retries: AtomicU64,
    refused: AtomicU64,
    gave_up: AtomicU64,
    /// Dropped because the queue was full.
    dropped: AtomicU64,
    /// The counters at the last metrics line: (forwarded, failed, reconnects).
    reported: Mutex<(u64, u64, u64)>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            connection: ConnectionState::default(),
            resumes: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            reported: Mutex::new((0, 0, 0)),
        }
    }
}

impl Stats {
    pub fn session_started(&self, resumed: bool) {
        if resumed {
            self.resumes.fetch_add(1, Relaxed);
        }
        self.connection.up();
    }

    pub fn set_disconnected(&self) {
        self.connection.down();
    }

    pub fn queued_one(&self) {
        self.queued.fetch_add(1, Relaxed);
    }

    pub fn dequeued(&self) {
        let _ = self.queued.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    pub fn dropped_one(&self) {
        self.dropped.fetch_add(1, Relaxed);
    }

    pub fn record(&self, outcome: &Outcome) {
        match outcome {
            Outcome::Delivered { attempts } => {
                self.forwarded.fetch_add(1, Relaxed);
                self.retries.fetch_add(u64::from(attempts.saturating_sub(1)), Relaxed);
            }
            Outcome::Refused { .. } => {
                self.refused.fetch_add(1, Relaxed);
            }
            Outcome::GaveUp { attempts } => {
                self.gave_up.fetch_add(1, Relaxed);
                self.retries.fetch_add(u64::from(attempts.saturating_sub(1)), Relaxed);
            }
        }
    }

    pub fn queued(&self) -> u64 {
        self.queued.load(Relaxed)
    }

    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Relaxed)
    }

    /// Dispatches lost: refused by ingress, given up on, or dropped from a full queue.
    pub fn failed(&self) -> u64 {
        self.refused.load(Relaxed) + self.gave_up.load(Relaxed) + self.dropped.load(Relaxed)
    }

    pub fn resumes(&self) -> u64 {
        self.resumes.load(Relaxed)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "connected": self.connection.connected(),
            "sessions": self.connection.sessions(),
            "reconnects": self.connection.reconnects(),
            "resumes": self.resumes(),
            "forwarded": self.forwarded(),
            "retries": self.retries.load(Relaxed),
            "failed": self.failed(),
            "refused": self.refused.load(Relaxed),
            "gave_up": self.gave_up.load(Relaxed),
            "dropped": self.dropped.load(Relaxed),
            "queued": self.queued(),
        })
    }
}

/// `GET /healthz`: the counters as JSON; 503 once the relay has been without a gateway
/// session for `unhealthy_after` (a container health check restarts it then).
pub fn health_router(stats: Arc<Stats>, unhealthy_after: Duration) -> Router {
    Router::new()
        .route(
            "/healthz",
            get(move |State(stats): State<Arc<Stats>>| async move {
                let status = if stats.connection.healthy(unhealthy_after) {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                (status, axum::Json(stats.to_json()))
            }),
        )
        .with_state(stats)
}

/// The EMF line for the interval since the last one: `Forwarded`, `ForwardFailures` and
/// `Reconnects` as counts in the interval, `Connected` as 1 or 0 now.
pub fn metrics_line(stats: &Stats, timestamp_ms: i64) -> Value {
    let now = (stats.forwarded(), stats.failed(), stats.connection.reconnects());
    let mut reported = stats.reported.lock().expect("stats lock");
    let delta = (now.0 - reported.0, now.1 - reported.1, now.2 - reported.2);
    *reported = now;
    kuuki::adapters::aws::emf::line(
        timestamp_ms,
        &[("Function", FUNCTION)],
        &[
            ("Forwarded", delta.0 as f64, "Count"),
            ("ForwardFailures", delta.1 as f64, "Count"),
            ("Reconnects", delta.2 as f64, "Count"),
            ("Connected", if stats.connection.connected() { 1.0 } else { 0.0 }, "None"),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_line_counts_the_interval() {
        let stats = Stats::default();
        stats.session_started(false);
        stats.record(&Outcome::Delivered { attempts: 1 });
        stats.record(&Outcome::Delivered { attempts: 3 });
        stats.record(&Outcome::Refused { status: 401 });
        stats.set_disconnected();
        stats.session_started(true);
        let line = metrics_line(&stats, 1_700_000_000_000);
        assert_eq!(line["Forwarded"], 2.0);
        assert_eq!(line["ForwardFailures"], 1.0);
        assert_eq!(line["Reconnects"], 1.0);
        assert_eq!(line["Connected"], 1.0);
        assert_eq!(line["Function"], "discord-gateway");
        assert_eq!(line["_aws"]["CloudWatchMetrics"][0]["Namespace"], "kuuki");
        let again = metrics_line(&stats, 1_700_000_060_000);
        assert_eq!((again["Forwarded"].as_f64(), again["Reconnects"].as_f64()), (Some(0.0), Some(0.0)));
        let health = stats.to_json();
        assert_eq!((health["retries"].as_u64(), health["resumes"].as_u64()), (Some(2), Some(1)));
    }

    #[test]
    fn unhealthy_only_after_a_long_disconnection() {
        let stats = Stats::default();
        assert!(stats.connection.healthy(Duration::from_secs(60)));
        assert!(!stats.connection.healthy(Duration::ZERO));
        stats.session_started(false);
        assert!(stats.connection.healthy(Duration::ZERO));
    }
}
