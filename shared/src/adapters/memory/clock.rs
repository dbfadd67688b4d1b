use std::sync::atomic::{AtomicI64, Ordering};

use crate::domain::{Timestamp, Ts};
use crate::ports::Clock;

/// A clock that only moves when told: replay jumps from event to event instead of sleeping.
pub struct VirtualClock {
    now: AtomicI64,
}

impl VirtualClock {
    pub fn new(start: Timestamp) -> Self {
        Self { now: AtomicI64::new(start.0) }
    }

    /// Moves the clock forward to `at`; it never goes back.
    pub fn advance_to(&self, at: Timestamp) {
        self.now.fetch_max(at.0, Ordering::SeqCst);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.now.load(Ordering::SeqCst))
    }
}

/// Hands out message ts that are unique and increasing even when several messages are
/// written at the same instant (users and kuuki share one channel timeline).
#[derive(Default)]
pub struct TsMint {
    /// The last ts handed out, in microseconds.
    last: AtomicI64,
}

impl TsMint {
    pub fn mint(&self, at: Timestamp) -> Ts {
        let next = |last: i64| at.0.max(last + 1);
        let last = self.last.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| Some(next(last)));
        Ts::from_timestamp(Timestamp(next(last.expect("the update always answers"))))
    }
}
