//! In-process adapters: maps behind a lock, a timer heap on the clock, a recording chat.

mod chat;
mod clock;
mod log;
mod queue;
mod store;

pub use chat::{ChatCall, RecordingChat};
pub use clock::{TsMint, VirtualClock};
pub use log::MemoryLog;
pub use queue::MemoryQueue;
pub use store::MemoryStore;
