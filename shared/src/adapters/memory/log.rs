use std::sync::Mutex;

use crate::domain::Event;
use crate::ports::DecisionLog;

/// Keeps decision records until someone takes them.
#[derive(Default)]
pub struct MemoryLog {
    events: Mutex<Vec<Event>>,
}

impl MemoryLog {
    /// Everything recorded since the last call, oldest first.
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().expect("log lock"))
    }

    /// Swaps the records for `buffer`'s (empty, its room reused): a replay takes the
    /// records after every message.
    pub fn swap(&self, buffer: &mut Vec<Event>) {
        std::mem::swap(&mut *self.events.lock().expect("log lock"), buffer);
    }
}

impl DecisionLog for MemoryLog {
    fn record(&self, event: Event) {
        self.events.lock().expect("log lock").push(event);
    }
}
