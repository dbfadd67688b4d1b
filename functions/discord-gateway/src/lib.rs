//! kuuki's Discord Gateway relay: one long-running shard (twilight-gateway: heartbeats,
//! identify, resume, reconnects with exponential back-off) whose `MESSAGE_CREATE`,
//! `MESSAGE_UPDATE`, `MESSAGE_DELETE`, `MESSAGE_REACTION_ADD` and
//! `MESSAGE_REACTION_REMOVE` dispatches are forwarded unchanged, as the
//! gateway sent them, to ingress's `POST /discord/events`, signed with the relay secret
//! (docs/design.md §12.3, "Discord relay contract").
//!
//! The shard is read without pause (a shard that is not polled sends no heartbeats),
//! so forwarding runs in a task of its own behind a bounded queue, in order, one
//! dispatch at a time, retrying a failed POST with back-off.
//!
//! `kuuki serve` runs the same shard and read loop in process ([`new_shard`],
//! [`read_gateway`], [`close_shard`]), without the relay (`DISCORD_GATEWAY`).

mod forward;
mod gateway;
mod settings;
mod stats;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

pub use forward::{Forwarder, Outcome, RETRY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, unix_seconds};
pub use gateway::{
    Dispatch, FORWARDED_EVENTS, GatewayError, SavedSession, classify, close_shard, fatal_close_reason, intents,
    new_shard, read_gateway, relay_gateway, resuming_shard, shard,
};
pub use settings::{RetryPolicy, Settings, SettingsError};
pub use stats::{ConnectionState, FUNCTION, Stats, health_router, metrics_line};
/// How a connection is closed (`close_shard`): ending the session or keeping it.
pub use twilight_gateway::CloseFrame;

/// Dispatches waiting for ingress while it is slow or down; beyond this the newest
/// are dropped (and counted) rather than stalling the shard.
pub const QUEUE_CAPACITY: usize = 10_000;

/// How long a stopping relay keeps forwarding what it has already read.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the relay until the gateway closes fatally (an error: a bad token or a
/// disallowed intent) or `shutdown` resolves (then it drains the queue for at most
/// [`DRAIN_TIMEOUT`]).
pub async fn run(
    settings: &Settings,
    stats: Arc<Stats>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), GatewayError> {
    let forwarder = Forwarder::new(&settings.ingress_url, settings.relay_secret.clone(), settings.retry);
    let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
    let forwarding = tokio::spawn(forward_all(forwarder, rx, stats.clone()));
    let shard = shard(settings);
    let result = tokio::select! {
        result = relay_gateway(shard, tx, stats.clone()) => result,
        () = shutdown => {
            tracing::info!("stopping: forwarding what was read");
            Ok(())
        }
    };
    stats.set_disconnected();
    if tokio::time::timeout(DRAIN_TIMEOUT, forwarding).await.is_err() {
        tracing::warn!(queued = stats.queued(), "stopped before every dispatch was forwarded");
    }
    result
}

/// Forwards each queued dispatch in order, counting the outcomes.
pub async fn forward_all(forwarder: Forwarder, mut rx: mpsc::Receiver<String>, stats: Arc<Stats>) {
    while let Some(body) = rx.recv().await {
        stats.dequeued();
        let outcome = forwarder.forward(&body).await;
        stats.record(&outcome);
    }
}
