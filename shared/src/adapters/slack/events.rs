//! Slack Events API payloads as Slack sends them, normalized into [`Incoming`].

use serde::Deserialize;
use thiserror::Error;

use crate::domain::{Author, ChannelId, Message, Timestamp, Ts, UserId};
use crate::ingest::Incoming;

/// Who kuuki is on this Slack workspace, from `auth.test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackIdentity {
    /// The bot's user id (`U…`): `<@U…>` mentions it, its posts carry it.
    pub user_id: String,
    /// The bot's bot id (`B…`), on messages the app posts.
    pub bot_id: Option<String>,
}

/// The outer envelope of an Events API request.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Envelope {
    UrlVerification {
        challenge: String,
    },
    EventCallback {
        #[serde(default)]
        event_id: Option<String>,
        event: Box<RawEvent>,
    },
    /// Slack stopped delivering for a while; nothing to do but acknowledge.
    AppRateLimited {},
    #[serde(other)]
    Other,
}

/// The fields of a message or app_mention event kuuki reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawEvent {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub subtype: Option<String>,
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default)]
    pub channel_type: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub bot_id: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub ts: Option<String>,
    #[serde(default)]
    pub thread_ts: Option<String>,
    #[serde(default)]
    pub parent_user_id: Option<String>,
    #[serde(default)]
    pub deleted_ts: Option<String>,
    #[serde(default)]
    pub message: Option<Box<RawEvent>>,
    #[serde(default)]
    pub previous_message: Option<Box<RawEvent>>,
}

/// What an event means for kuuki.
#[derive(Debug, Clone, PartialEq)]
pub enum Normalized {
    Incoming(Incoming),
    /// Acknowledged and not acted on, with the reason (joins, topics, other event types).
    Ignored(String),
}

#[derive(Debug, Error, PartialEq)]
#[error("malformed Slack event: {0}")]
pub struct EventError(pub String);

/// Parses the body of an Events API request.
pub fn parse_envelope(body: &[u8]) -> Result<Envelope, EventError> {
    serde_json::from_slice(body).map_err(|e| EventError(e.to_string()))
}

/// Subtypes that are ordinary messages from a person.
const PLAIN_SUBTYPES: &[&str] = &["thread_broadcast", "file_share", "me_message"];

pub fn normalize(event: &RawEvent, me: &SlackIdentity) -> Result<Normalized, EventError> {
    if event.kind != "message" && event.kind != "app_mention" {
        return Ok(Normalized::Ignored(format!("event type {}", event.kind)));
    }
    let channel = || {
        event
            .channel
            .clone()
            .map(ChannelId)
            .ok_or_else(|| EventError("a message event without a channel".into()))
    };
    match event.subtype.as_deref() {
        None | Some("bot_message") => new_message(event, channel()?, me),
        Some(s) if PLAIN_SUBTYPES.contains(&s) => new_message(event, channel()?, me),
        Some("message_changed") => {
            let edited = event
                .message
                .as_deref()
                .ok_or_else(|| EventError("message_changed without a message".into()))?;
            let ts = edited
                .ts
                .clone()
                .ok_or_else(|| EventError("message_changed without the message's ts".into()))?;
            let text = edited.text.clone().unwrap_or_default();
            // Slack also sends message_changed when a reply is added under a message.
            if event.previous_message.as_ref().is_some_and(|p| p.text.as_deref() == Some(text.as_str())) {
                return Ok(Normalized::Ignored("message_changed without a new text".into()));
            }
            Ok(Normalized::Incoming(Incoming::Edited {
                channel: channel()?,
                ts: Ts::new(ts),
                text,
            }))
        }
        Some("message_deleted") => {
            let ts = event
                .deleted_ts
                .clone()
                .or_else(|| event.previous_message.as_ref().and_then(|p| p.ts.clone()))
                .ok_or_else(|| EventError("message_deleted without deleted_ts".into()))?;
            Ok(Normalized::Incoming(Incoming::Deleted {
                channel: channel()?,
                ts: Ts::new(ts),
            }))
        }
        Some(other) => Ok(Normalized::Ignored(format!("message subtype {other}"))),
    }
}

fn new_message(event: &RawEvent, channel: ChannelId, me: &SlackIdentity) -> Result<Normalized, EventError> {
    let ts = event
        .ts
        .clone()
        .ok_or_else(|| EventError("a message event without ts".into()))?;
    let own = event.user.as_deref() == Some(me.user_id.as_str())
        || (event.bot_id.is_some() && event.bot_id == me.bot_id);
    let author = if own {
        Author::OwnBot
    } else if event.bot_id.is_some() || event.subtype.as_deref() == Some("bot_message") {
        Author::OtherBot
    } else {
        Author::Human
    };
    let user = event
        .user
        .clone()
        .or_else(|| event.bot_id.clone())
        .or_else(|| event.username.clone())
        .ok_or_else(|| EventError("a message event without a user".into()))?;
    let ts = Ts::new(ts);
    // A thread reply has thread_ts present and different from its own ts.
    let thread_root = event
        .thread_ts
        .as_ref()
        .map(|t| Ts::new(t.clone()))
        .filter(|root| *root != ts);
    let in_dm = event.channel_type.as_deref() == Some("im");
    let replies_to_bot = thread_root.is_some() && event.parent_user_id.as_deref() == Some(me.user_id.as_str());
    let at = slack_time(&ts).ok_or_else(|| EventError(format!("ts {ts} is not a Slack timestamp")))?;
    Ok(Normalized::Incoming(Incoming::Message(Message {
        channel,
        ts,
        thread_root,
        user_name: event.username.clone().unwrap_or_else(|| user.clone()),
        user: UserId(user),
        text: event.text.clone().unwrap_or_default(),
        author,
        replies_to_bot,
        in_dm,
        at,
    })))
}

/// A Slack ts is the message's time: seconds and microseconds since the epoch.
pub fn slack_time(ts: &Ts) -> Option<Timestamp> {
    let (secs, frac) = ts.as_str().split_once('.').unwrap_or((ts.as_str(), "0"));
    let secs: i64 = secs.parse().ok()?;
    let micros: i64 = format!("{frac:0<6}").get(..6)?.parse().ok()?;
    Some(Timestamp(secs * Timestamp::MICROS_PER_SECOND + micros))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn me() -> SlackIdentity {
        SlackIdentity {
            user_id: "UKUUKI".into(),
            bot_id: Some("BKUUKI".into()),
        }
    }

    fn normalized(event: serde_json::Value) -> Normalized {
        normalize(&serde_json::from_value(event).unwrap(), &me()).unwrap()
    }

    fn new_message(event: serde_json::Value) -> Message {
        match normalized(event) {
            Normalized::Incoming(Incoming::Message(m)) => m,
            other => panic!("not a new message: {other:?}"),
        }
    }

    #[test]
    fn a_thread_broadcast_is_a_thread_reply() {
        let m = new_message(json!({"type": "message", "subtype": "thread_broadcast", "channel": "C1", "user": "U1",
            "text": "also here", "ts": "1700000100.000001", "thread_ts": "1700000000.000001"}));
        assert_eq!(m.thread_root, Some(Ts::new("1700000000.000001")));
        assert_eq!(m.author, Author::Human);
    }

    #[test]
    fn a_threads_opening_message_is_top_level() {
        let m = new_message(json!({"type": "message", "channel": "C1", "user": "U1", "text": "start",
            "ts": "1700000000.000001", "thread_ts": "1700000000.000001"}));
        assert_eq!(m.thread_root, None, "thread_ts equal to ts is the parent");
        assert_eq!(m.at, Timestamp(1_700_000_000_000_001));
    }

    #[test]
    fn group_and_multi_person_dms_are_channels_and_dms_are_direct() {
        for kind in ["channel", "group", "mpim"] {
            let m = new_message(json!({"type": "message", "channel": "G1", "channel_type": kind, "user": "U1", "text": "x", "ts": "1.000001"}));
            assert!(!m.in_dm, "{kind}");
        }
        let m = new_message(json!({"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": "x", "ts": "1.000001"}));
        assert!(m.in_dm);
    }

    #[test]
    fn a_reply_added_under_a_message_is_not_an_edit() {
        let event = json!({"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "2.000001",
            "message": {"type": "message", "user": "U1", "text": "same", "ts": "1.000001", "reply_count": 1},
            "previous_message": {"type": "message", "user": "U1", "text": "same", "ts": "1.000001"}});
        assert!(matches!(normalized(event), Normalized::Ignored(_)));
    }

    #[test]
    fn other_event_types_and_subtypes_are_ignored_and_missing_fields_are_errors() {
        assert!(matches!(normalized(json!({"type": "reaction_added"})), Normalized::Ignored(_)));
        assert!(matches!(
            normalized(json!({"type": "message", "subtype": "channel_topic", "channel": "C1", "ts": "1.1"})),
            Normalized::Ignored(_)
        ));
        let no_user: RawEvent = serde_json::from_value(json!({"type": "message", "channel": "C1", "ts": "1.1", "text": "x"})).unwrap();
        assert!(normalize(&no_user, &me()).is_err());
        let bad_ts: RawEvent = serde_json::from_value(json!({"type": "message", "channel": "C1", "user": "U1", "ts": "soon"})).unwrap();
        assert!(normalize(&bad_ts, &me()).is_err());
    }
}
