//! In-process adapters: maps behind a lock, a timer heap on the clock, a recording chat.

mod chat;
mod clock;
mod log;
pub(crate) mod queue;
mod store;

pub use chat::{ChatCall, RecordingChat};
pub use clock::{TsMint, VirtualClock};
pub use log::MemoryLog;
pub use queue::MemoryQueue;
pub use store::MemoryStore;
pub(crate) use store::newest_first;

use std::sync::Arc;

use crate::deps::{Adapters, Surroundings};
use crate::ports::{Chat, Clock, DecisionLog, Llm};

/// How many of the next calls a test told to fail. Read without a locked instruction
/// while it is zero, as it always is outside tests: every write asks.
#[derive(Default)]
pub(crate) struct FaultsToInject(std::sync::atomic::AtomicU32);

impl FaultsToInject {
    pub(crate) fn set(&self, n: u32) {
        self.0.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether this call is one of those to fail (and counts it).
    pub(crate) fn take(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.0.load(Relaxed) > 0 && self.0.fetch_update(Relaxed, Relaxed, |left| left.checked_sub(1)).is_ok()
    }
}

/// The in-process adapters wired together: one store for every memory tier, one timer
/// queue that is also the scheduler (replay, serve, tests, benchmarks).
pub struct InProcess {
    pub clock: Arc<dyn Clock>,
    pub store: Arc<MemoryStore>,
    pub queue: Arc<MemoryQueue>,
}

impl InProcess {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        InProcess { store: Arc::new(MemoryStore::new()), queue: Arc::new(MemoryQueue::new(clock.clone())), clock }
    }

    /// For long runs (`kuuki serve`): messages older than `retention` are forgotten.
    pub fn with_retention(clock: Arc<dyn Clock>, retention: std::time::Duration) -> Self {
        InProcess {
            store: Arc::new(MemoryStore::with_retention(retention, clock.clone())),
            queue: Arc::new(MemoryQueue::new(clock.clone())),
            clock,
        }
    }

    /// Every port, with the platform, the model and the decision log given.
    pub fn adapters(&self, chat: Arc<dyn Chat>, llm: Option<Arc<dyn Llm>>, log: Arc<dyn DecisionLog>) -> Adapters {
        let around = Surroundings { chat, llm, clock: self.clock.clone(), log };
        Adapters::from_store(self.store.clone(), self.queue.clone(), self.queue.clone(), around)
    }
}
