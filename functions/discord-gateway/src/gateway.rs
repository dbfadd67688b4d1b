//! The shard and its read loop, shared by the relay and `kuuki serve` (which runs the
//! gateway in process). twilight-gateway answers HELLO with IDENTIFY (or RESUME when it
//! has a session), heartbeats, tracks the sequence, follows RECONNECT and
//! INVALID_SESSION, and reconnects after a drop (to READY's `resume_gateway_url`, with
//! exponential back-off between failed connects: 1, 2, 4 … s, at most about 4 min).
//! A resumable close (4000 and the like, or a dropped connection) keeps the session, so
//! the next connection RESUMEs it; a fatal one (4004, 4014 …) ends the stream. This
//! loop only looks at what the shard hands back: the raw text of each gateway payload.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde::Deserialize;
use thiserror::Error;
use tokio::sync::mpsc;
use twilight_gateway::{CloseFrame, ConfigBuilder, Intents, Message, Shard, ShardId, ShardState};

use crate::settings::Settings;
use crate::stats::Stats;

/// The dispatches ingress takes (docs/design.md §12.3).
pub const FORWARDED_EVENTS: [&str; 5] =
    ["MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE", "MESSAGE_REACTION_ADD", "MESSAGE_REACTION_REMOVE"];

/// Guild and DM messages, with their content (a privileged intent: turn it on under
/// the application's "Bot" settings), and the reactions on them (how people take
/// kuuki's posts, docs/design.md §7.6). Interactions need no intent.
pub fn intents() -> Intents {
    Intents::GUILD_MESSAGES
        | Intents::DIRECT_MESSAGES
        | Intents::MESSAGE_CONTENT
        | Intents::GUILD_MESSAGE_REACTIONS
        | Intents::DIRECT_MESSAGE_REACTIONS
}

/// The relay's one shard (a bot in fewer than 2,500 guilds needs no more).
pub fn shard(settings: &Settings) -> Shard {
    new_shard(settings.bot_token.clone(), settings.gateway_url.clone())
}

/// One shard with kuuki's [`intents`]: `bot_token` with or without the `Bot ` prefix;
/// `gateway_url` another gateway than Discord's (a `ws://` or `wss://` URL, checked
/// by the caller: twilight panics on an unparsable one).
pub fn new_shard(bot_token: String, gateway_url: Option<String>) -> Shard {
    resuming_shard(bot_token, gateway_url, None)
}

/// A session another process (or an earlier run) had, to take up where it was left:
/// the first connection RESUMEs it at `resume_url` from `sequence` (Discord replays
/// what came since) instead of identifying anew; one Discord no longer has is
/// refused (INVALID_SESSION) and the shard identifies anew.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct SavedSession {
    pub session_id: String,
    pub sequence: u64,
    pub resume_url: String,
}

/// [`new_shard`], resuming `saved` when there is one.
pub fn resuming_shard(bot_token: String, gateway_url: Option<String>, saved: Option<SavedSession>) -> Shard {
    // rustls picks its crypto from crate features; say which, so it never has to guess.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = ConfigBuilder::new(bot_token, intents());
    if let Some(url) = gateway_url {
        config = config.proxy_url(url);
    }
    if let Some(saved) = saved {
        config = config
            .session(twilight_gateway::Session::new(saved.sequence, saved.session_id))
            .resume_url(saved.resume_url);
    }
    Shard::with_config(ShardId::ONE, config.build())
}

/// What one gateway payload is to kuuki.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// A message dispatch: forward it.
    Forward,
    /// INTERACTION_CREATE: a `/kuuki` command, sent over the gateway when the
    /// application has no Interactions Endpoint URL (the relay leaves these alone).
    Interaction,
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
        (0, Some("INTERACTION_CREATE")) => Dispatch::Interaction,
        (0, Some("READY")) => Dispatch::Session { resumed: false },
        (0, Some("RESUMED")) => Dispatch::Session { resumed: true },
        _ => Dispatch::Other,
    }
}

#[derive(Debug, Error)]
pub enum GatewayError {
    #[error("{}", fatal_close_reason(*.0))]
    FatallyClosed(Option<u16>),
    #[error("the forwarding task stopped")]
    ForwarderGone,
}

/// Why Discord closed the gateway for good, and what to change.
pub fn fatal_close_reason(code: Option<u16>) -> String {
    let portal = "in the developer portal (https://discord.com/developers/applications)";
    match code {
        Some(4004) => format!(
            "Discord refused the bot token (gateway close code 4004, authentication failed): check DISCORD_BOT_TOKEN (the application's Bot page {portal}; a reset token must be copied again)"
        ),
        Some(4014) => format!(
            "Discord refused a privileged intent (gateway close code 4014, disallowed intents): turn on the Message Content Intent under Bot, Privileged Gateway Intents {portal}"
        ),
        Some(4011) => "Discord wants more than one shard (gateway close code 4011): kuuki runs one, which serves up to 2,500 servers".into(),
        Some(code) => format!(
            "Discord closed the gateway for good (close code {code}): 4004 is a bad DISCORD_BOT_TOKEN, 4014 the Message Content intent not turned on for the bot"
        ),
        None => "the gateway connection ended for good without a close code".into(),
    }
}

/// Reads the shard until it closes for good (then an error with the close code),
/// counting sessions and handing each message dispatch and interaction to `handle`,
/// unchanged and in order. `handle` must not wait: a shard that is not polled sends no
/// heartbeats. Cancel-safe between payloads: a caller may stop reading and then
/// [`close_shard`] it.
pub async fn read_gateway(
    shard: &mut Shard,
    stats: &Stats,
    mut handle: impl FnMut(Dispatch, String) -> Result<(), GatewayError>,
) -> Result<(), GatewayError> {
    let mut last_close = None;
    while let Some(item) = shard.next().await {
        match item {
            Ok(Message::Text(json)) => match classify(&json) {
                Dispatch::Session { resumed } => {
                    stats.session_started(resumed);
                    tracing::info!(resumed, "gateway session {}", if resumed { "resumed" } else { "ready" });
                    handle(Dispatch::Session { resumed }, json)?;
                }
                Dispatch::Other => {}
                dispatch => handle(dispatch, json)?,
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

/// Closes the connection with `frame` and reads until the gateway answers the close,
/// for at most `within`. What arrives meanwhile is dropped. [`CloseFrame::NORMAL`]
/// ends the session (Discord shows the bot offline at once, nothing can resume it);
/// [`CloseFrame::RESUME`] keeps it for a next process to resume.
pub async fn close_shard(shard: &mut Shard, frame: CloseFrame<'static>, within: Duration) {
    shard.close(frame);
    let closed = tokio::time::timeout(within, async {
        while let Some(item) = shard.next().await {
            // After a close the shard is disconnected; connected again (the gateway
            // dropped the connection instead of answering), it would identify anew.
            if matches!(item, Ok(Message::Close(_))) || !matches!(shard.state(), ShardState::Disconnected { .. }) {
                break;
            }
        }
    })
    .await;
    if closed.is_err() {
        tracing::warn!("the gateway did not answer the close in time");
    }
}

/// Reads the shard until it closes for good, queueing each message dispatch unchanged.
pub async fn relay_gateway(mut shard: Shard, tx: mpsc::Sender<String>, stats: Arc<Stats>) -> Result<(), GatewayError> {
    read_gateway(&mut shard, &stats, |dispatch, json| {
        if dispatch != Dispatch::Forward {
            return Ok(());
        }
        match tx.try_send(json) {
            Ok(()) => stats.queued_one(),
            Err(mpsc::error::TrySendError::Full(_)) => {
                stats.dropped_one();
                tracing::error!("the forwarding queue is full (ingress is down?): a dispatch was dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(GatewayError::ForwarderGone),
        }
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_message_and_reaction_dispatches_are_forwarded() {
        assert_eq!(classify(r#"{"op":0,"t":"MESSAGE_CREATE","s":3,"d":{"id":"1"}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"t":"MESSAGE_UPDATE","s":4,"op":0,"d":{}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"op":0,"t":"MESSAGE_DELETE","s":5,"d":{}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"op":0,"t":"MESSAGE_REACTION_ADD","s":5,"d":{}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"op":0,"t":"MESSAGE_REACTION_REMOVE","s":5,"d":{}}"#), Dispatch::Forward);
        assert_eq!(classify(r#"{"op":0,"t":"TYPING_START","s":6,"d":{}}"#), Dispatch::Other);
        assert_eq!(classify(r#"{"op":0,"t":"INTERACTION_CREATE","s":7,"d":{}}"#), Dispatch::Interaction);
        assert_eq!(classify(r#"{"op":0,"t":"READY","s":1,"d":{}}"#), Dispatch::Session { resumed: false });
        assert_eq!(classify(r#"{"op":0,"t":"RESUMED","s":9,"d":{}}"#), Dispatch::Session { resumed: true });
        assert_eq!(classify(r#"{"op":11,"t":null,"s":null,"d":null}"#), Dispatch::Other);
        assert_eq!(classify("not json"), Dispatch::Other);
    }

    #[test]
    fn fatal_closes_name_what_to_fix() {
        assert!(fatal_close_reason(Some(4004)).contains("DISCORD_BOT_TOKEN"));
        assert!(fatal_close_reason(Some(4014)).contains("Message Content Intent"));
        assert!(fatal_close_reason(Some(4013)).contains("4013"));
        assert!(GatewayError::FatallyClosed(Some(4004)).to_string().contains("DISCORD_BOT_TOKEN"));
    }

    #[test]
    fn the_intents_include_message_content_and_reactions() {
        // GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT; GUILD_MESSAGE_REACTIONS and
        // DIRECT_MESSAGE_REACTIONS (talkativeness signals).
        assert_eq!(intents().bits(), (1 << 9) | (1 << 12) | (1 << 15) | (1 << 10) | (1 << 13));
    }
}
