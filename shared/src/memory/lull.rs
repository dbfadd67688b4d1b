//! The lull reflections this process queued: state [`crate::deps::Deps`] holds and
//! `reflect::maybe_queue` reads, kept here, below both, so neither imports the other
//! for it.

use std::collections::HashMap;

use crate::domain::{ChannelId, Timestamp};

/// The lull reflections this process queued, by channel, until they run (see
/// `memory::reflect::maybe_queue`).
#[derive(Default)]
pub struct LullReflections {
    queued: tokio::sync::Mutex<HashMap<ChannelId, Timestamp>>,
}

impl LullReflections {
    /// The queued lull reflections, held while a trigger decides and queues.
    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, HashMap<ChannelId, Timestamp>> {
        self.queued.lock().await
    }
}
