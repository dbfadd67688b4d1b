//! The shard and its read loop. twilight-gateway answers HELLO with IDENTIFY (or RESUME
//! when it has a session), heartbeats, tracks the sequence, follows RECONNECT and
//! INVALID_SESSION, and reconnects after a drop (to READY's `resume_gateway_url`, with
//! exponential back-off between failed connects). This loop only looks at what it
//! hands back: the raw text of each gateway payload.

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::StreamExt;
use serde::Deserialize;
use thiserror::Error;
use tokio::sync::mpsc;
use twilight_gateway::{ConfigBuilder, Intents, Message, Shard, ShardId, ShardState};

use crate::settings::Settings;
use crate::stats::Stats;

/// The dispatches ingress takes (DESIGN §3).
pub const FORWARDED_EVENTS: [&str; 3] = ["MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE"];

/// Guild and DM messages, with their content (a privileged intent: turn it on under
/// the application's "Bot" settings).
pub fn intents() -> Intents {
    Intents::GUILD_MESSAGES | Intents::DIRECT_MESSAGES | Intents::MESSAGE_CONTENT
}

/// The relay's one shard (a bot in fewer than 2,500 guilds needs no more).
pub fn shard(settings: &Settings) -> Shard {
    // rustls picks its crypto from crate features; say which, so it never has to guess.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = ConfigBuilder::new(settings.bot_token.clone(), intents());
    if let Some(url) = &settings.gateway_url {
        config = config.proxy_url(url.clone());
    }
    Shard::with_config(ShardId::ONE, config.build())
}

/// What one gateway payload is to the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// A message dispatch: forward it.
    Forward,
    /// READY (a new session) or RESUMED (the old one, continued).
    Session { resumed: bool },
    /// Anything else: heartbeats, HELLO, other dispatches.
    Other,
}

#[derive(Deserialize)]
struct Head<'a> {
    op: u8,
    #[serde(borrow)]
    t: Option<Cow<'a, str>>,
}

/// Reads only `op` and `t` of a payload.
pub fn classify(json: &str) -> Dispatch {
    let Ok(head) = serde_json::from_str::<Head>(json) else { return Dispatch::Other };
    match (head.op, head.t.as_deref()) {
        (0, Some(t)) if FORWARDED_EVENTS.contains(&t) => Dispatch::Forward,
        (0, Some("READY")) => Dispatch::Session { resumed: false },
        (0, Some("RESUMED")) => Dispatch::Session { resumed: true },
        _ => Dispatch::Other,
    }
}

#[derive(Debug, Error)]
pub enum GatewayError {
    #[error(
        "Discord closed the gateway for good (close code {0:?}): 4004 is a bad DISCORD_BOT_TOKEN, 4014 the Message Content intent not turned on for the bot, 4011 a bot in too many guilds for one shard"
    )]
    FatallyClosed(Option<u16>),
    #[error("the forwarding task stopped")]
    ForwarderGone,
}

/// Reads the shard until it closes for good, queueing each message dispatch unchanged.
pub async fn relay_gateway(mut shard: Shard, tx: mpsc::Sender<String>, stats: Arc<Stats>) -> Result<(), GatewayError> {
    let mut last_close = None;
    while let Some(item) = shard.next().await {
        match item {
            Ok(Message::Text(json)) => match classify(&json) {
                Dispatch::Forward => match tx.try_send(json) {
                    Ok(()) => stats.queued_one(),
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        stats.dropped_one();
                        tracing::error!("the forwarding queue is full (ingress is down?): a dispatch was dropped");
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return Err(GatewayError::ForwarderGone),
                },
                Dispatch::Session { resumed } => {
                    stats.session_started(resumed);
                    tracing::info!(resumed, "gateway session {}", if resumed { "resumed" } else { "ready" });
                }
                Dispatch::Other => {}
            },
            Ok(Message::Close(frame)) => {
                last_close = frame.as_ref().map(|f| f.code);
                stats.set_disconnected();
                tracing::info!(code = ?last_close, state = ?shard.state(), "gateway connection closed");
            }
            Err(error) => {
                if matches!(shard.state(), ShardState::Disconnected { .. }) {
                    stats.set_disconnected();
                }
                tracing::warn!(error = %error, state = ?shard.state(), "gateway error");
            }
        }
    }
    stats.set_disconnected();
    Err(GatewayError::FatallyClosed(last_close))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_message_dispatches_are_forwarded() {
        assert_eq!(classify(r#"{"op":0,"t":"MESSAGE_CREATE","s":3,"d":{"id":"1"}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"t":"MESSAGE_UPDATE","s":4,"op":0,"d":{}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"op":0,"t":"MESSAGE_DELETE","s":5,"d":{}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"op":0,"t":"TYPING_START","s":6,"d":{}}"#), Dispatch::Other);
        assert_eq!(classify(r#"{"op":0,"t":"READY","s":1,"d":{}}"#), Dispatch::Session { resumed: false });
        assert_eq!(classify(r#"{"op":0,"t":"RESUMED","s":9,"d":{}}"#), Dispatch::Session { resumed: true });
        assert_eq!(classify(r#"{"op":11,"t":null,"s":null,"d":null}"#), Dispatch::Other);
        assert_eq!(classify("not json"), Dispatch::Other);
    }

    #[test]
    fn the_intents_include_message_content() {
        assert_eq!(intents().bits(), (1 << 9) | (1 << 12) | (1 << 15));
    }
}
