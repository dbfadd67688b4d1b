//! Slack Events API payloads as Slack sends them, normalized into [`Incoming`].

use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

use crate::domain::Incoming;
use crate::domain::{Author, ChannelId, Message, Timestamp, Ts, UserId};

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
        /// The workspace the event is from.
        #[serde(default)]
        team_id: Option<String>,
        /// Its Enterprise Grid org, if any.
        #[serde(default)]
        enterprise_id: Option<String>,
        /// Which installation the event is delivered for (Slack sends one).
        #[serde(default)]
        authorizations: Vec<Authorization>,
        /// When the event happened (seconds since the epoch, Slack's clock).
        #[serde(default)]
        event_time: Option<i64>,
        /// Kept as JSON: an inner event kuuki cannot read is acknowledged, not refused
        /// (see [`normalize_json`]).
        event: Value,
    },
    /// Slack stopped delivering for a while; nothing to do but acknowledge.
    AppRateLimited {},
    #[serde(other)]
    Other,
}

/// An installation an event is delivered for.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Authorization {
    #[serde(default)]
    pub enterprise_id: Option<String>,
    #[serde(default)]
    pub team_id: Option<String>,
    #[serde(default)]
    pub is_enterprise_install: bool,
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
    // The ts fields are any JSON, so a number or an object is refused as a bad ts
    // with its value rather than read as an event of an unknown shape.
    #[serde(default)]
    pub ts: Option<Value>,
    #[serde(default)]
    pub thread_ts: Option<Value>,
    #[serde(default)]
    pub parent_user_id: Option<String>,
    #[serde(default)]
    pub deleted_ts: Option<Value>,
    #[serde(default)]
    pub message: Option<Box<RawEvent>>,
    #[serde(default)]
    pub previous_message: Option<Box<RawEvent>>,
}

/// What an event means for kuuki.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "nearly every event is a message: boxing it would allocate for the common case to shrink the rare ones"
)]
pub enum Normalized {
    Incoming(Incoming),
    /// Acknowledged and not acted on, with the reason (joins, topics, other event types).
    Ignored(String),
    /// Acknowledged and not acted on, but worth a warning: an event kuuki should be able
    /// to use and cannot (a message without a channel or an author, an unknown shape).
    Unusable(String),
    /// Slack took kuuki's access to the workspace away, as the named event said:
    /// `app_uninstalled`, or `tokens_revoked` listing kuuki's bot among the revoked
    /// bot tokens (one listing only other users' tokens is ignored).
    AccessGone(String),
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

/// The inner event of an `event_callback`, as JSON. Slack retries a refusal and turns off
/// an endpoint that keeps failing, so an event of a shape kuuki cannot read is
/// acknowledged as [`Normalized::Unusable`]; see [`normalize`] for the rest.
pub fn normalize_json(event: &Value, me: &SlackIdentity) -> Result<Normalized, EventError> {
    let Some(kind) = event.get("type").and_then(Value::as_str) else {
        return Ok(Normalized::Unusable("an event without a type".into()));
    };
    match kind {
        "message" | "app_mention" => {}
        "app_uninstalled" => return Ok(Normalized::AccessGone(kind.into())),
        "tokens_revoked" => return Ok(tokens_revoked(event, me)),
        "reaction_added" | "reaction_removed" => return reaction(event, kind == "reaction_removed"),
        _ => return Ok(Normalized::Ignored(format!("event type {kind}"))),
    }
    match RawEvent::deserialize(event) {
        Ok(raw) => normalize(&raw, me),
        Err(error) => Ok(Normalized::Unusable(format!("a {kind} event of a shape kuuki cannot read: {error}"))),
    }
}

/// A `tokens_revoked` event (`tokens: {oauth: [user ids], bot: [user ids]}`): access is
/// gone when kuuki's own bot user is among the revoked bot tokens; users' own tokens
/// (kuuki holds none) change nothing.
fn tokens_revoked(event: &Value, me: &SlackIdentity) -> Normalized {
    let bots = event.pointer("/tokens/bot").and_then(Value::as_array);
    if bots.is_some_and(|bots| bots.iter().any(|id| id.as_str() == Some(me.user_id.as_str()))) {
        Normalized::AccessGone("tokens_revoked".into())
    } else {
        Normalized::Ignored("tokens_revoked for other users' tokens".into())
    }
}

/// A `reaction_added` or `reaction_removed` (`user`, `reaction`: the emoji's name,
/// `item: {type: "message", channel, ts}`): a reaction on a file or anything but a
/// message is ignored; a message's ts that is not a Slack timestamp is refused.
fn reaction(event: &Value, removed: bool) -> Result<Normalized, EventError> {
    let item = event.get("item");
    if item.and_then(|i| i.get("type")).and_then(Value::as_str) != Some("message") {
        return Ok(Normalized::Ignored("a reaction on something other than a message".into()));
    }
    let ts = slack_ts("the reaction's item ts", item.and_then(|i| i.get("ts")))?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let (Some(channel), Some(user), Some(emoji)) =
        (text(item.and_then(|i| i.get("channel"))), text(event.get("user")), text(event.get("reaction")))
    else {
        return Ok(Normalized::Unusable("a reaction without its channel, user or emoji".into()));
    };
    Ok(Normalized::Incoming(Incoming::Reaction {
        channel: ChannelId(channel.into()),
        ts,
        user: UserId(user.into()),
        emoji,
        removed,
    }))
}

/// What an event means, or why it is refused.
///
/// Refused ([`EventError`], answered 400): a message kuuki would store, edit or delete
/// whose ts (`ts`, `thread_ts`, `deleted_ts`, the edited message's ts) is missing or not a
/// Slack timestamp. Stored, it would sort after every real message.
///
/// Acknowledged and logged ([`Normalized::Unusable`], answered 200), because Slack
/// retries refusals and disables an endpoint that keeps failing:
/// - a message without a channel;
/// - a new message without a user, bot id or username;
/// - a `message_changed` without its `message`.
///
/// Ignored ([`Normalized::Ignored`]): other event types and subtypes, whatever their
/// fields, and a `message_changed` that keeps the text (a reply added under it).
pub fn normalize(event: &RawEvent, me: &SlackIdentity) -> Result<Normalized, EventError> {
    if event.kind != "message" && event.kind != "app_mention" {
        return Ok(Normalized::Ignored(format!("event type {}", event.kind)));
    }
    let subtype = event.subtype.as_deref();
    let handled = matches!(subtype, None | Some("bot_message" | "message_changed" | "message_deleted"))
        || subtype.is_some_and(|s| PLAIN_SUBTYPES.contains(&s));
    if !handled {
        return Ok(Normalized::Ignored(format!("message subtype {}", subtype.unwrap_or_default())));
    }
    // Each kind checks its ts before the rest: a bad ts is refused even when the event
    // is unusable for another reason too.
    match subtype {
        Some("message_changed") => edited_message(event),
        Some("message_deleted") => {
            // Slack documents deleted_ts; previous_message carries the same ts.
            let ts = event.deleted_ts.as_ref().or_else(|| event.previous_message.as_ref().and_then(|p| p.ts.as_ref()));
            let ts = slack_ts("message_deleted's deleted_ts", ts)?;
            let Some(channel) = channel_of(event) else { return Ok(without_channel(event)) };
            Ok(Normalized::Incoming(Incoming::Deleted { channel, ts }))
        }
        _ => new_message(event, me),
    }
}

fn channel_of(event: &RawEvent) -> Option<ChannelId> {
    event.channel.clone().map(|c| ChannelId(c.into()))
}

fn without_channel(event: &RawEvent) -> Normalized {
    Normalized::Unusable(format!("a {} event without a channel", event.kind))
}

fn edited_message(event: &RawEvent) -> Result<Normalized, EventError> {
    let Some(edited) = event.message.as_deref() else {
        return Ok(Normalized::Unusable("message_changed without a message".into()));
    };
    // Slack's own Bolt tests send a message_changed whose message has no ts; the
    // previous message is the same message, with its ts.
    let ts = edited.ts.as_ref().or_else(|| event.previous_message.as_ref().and_then(|p| p.ts.as_ref()));
    let ts = slack_ts("message_changed's message ts", ts)?;
    let Some(channel) = channel_of(event) else { return Ok(without_channel(event)) };
    let text = edited.text.clone().unwrap_or_default();
    // Slack also sends message_changed when a reply is added under a message.
    if event.previous_message.as_ref().is_some_and(|p| p.text.as_deref() == Some(text.as_str())) {
        return Ok(Normalized::Ignored("message_changed without a new text".into()));
    }
    Ok(Normalized::Incoming(Incoming::Edited { channel, ts, text }))
}

/// A ts field of a request: present, a string, and a Slack timestamp.
fn slack_ts(field: &str, raw: Option<&Value>) -> Result<Ts, EventError> {
    let raw = raw.ok_or_else(|| EventError(format!("{field} is missing")))?;
    let text = raw
        .as_str()
        .ok_or_else(|| EventError(format!("{field} {raw} is not a Slack timestamp (digits, a dot, digits)")))?;
    Ts::parse_slack(text).map_err(|e| EventError(format!("{field} {e}")))
}

fn new_message(event: &RawEvent, me: &SlackIdentity) -> Result<Normalized, EventError> {
    let ts = slack_ts("the message's ts", event.ts.as_ref())?;
    let at = slack_time(&ts).ok_or_else(|| EventError(format!("the message's ts {ts} is too far in the future")))?;
    // A thread reply has thread_ts present and different from its own ts.
    let thread_root = match &event.thread_ts {
        Some(raw) => Some(slack_ts("the message's thread_ts", Some(raw))?).filter(|root| *root != ts),
        None => None,
    };
    let Some(channel) = channel_of(event) else { return Ok(without_channel(event)) };
    let own =
        event.user.as_deref() == Some(me.user_id.as_str()) || (event.bot_id.is_some() && event.bot_id == me.bot_id);
    let author = if own {
        Author::OwnBot
    } else if event.bot_id.is_some() || event.subtype.as_deref() == Some("bot_message") {
        Author::OtherBot
    } else {
        Author::Human
    };
    let Some(user) = event.user.clone().or_else(|| event.bot_id.clone()).or_else(|| event.username.clone()) else {
        return Ok(Normalized::Unusable(format!("a {} event without a user, bot id or username", event.kind)));
    };
    let in_dm = event.channel_type.as_deref() == Some("im");
    // Privacy costs no API call: the event's channel_type, else the id's prefix (legacy
    // private channels are `G…`, DMs `D…`; an app_mention has no channel_type).
    let private_channel = match event.channel_type.as_deref() {
        Some(kind) => matches!(kind, "group" | "mpim" | "im"),
        None => channel.0.starts_with('G') || channel.0.starts_with('D'),
    };
    let replies_to_bot = thread_root.is_some() && event.parent_user_id.as_deref() == Some(me.user_id.as_str());
    Ok(Normalized::Incoming(Incoming::Message(Message {
        channel,
        ts,
        thread_root,
        user_name: event.username.clone().unwrap_or_else(|| user.clone()),
        user: UserId(user.into()),
        text: event.text.clone().unwrap_or_default(),
        author,
        replies_to_bot,
        // Slack's replies are thread replies (`thread_root`).
        replies_to: None,
        in_dm,
        private_channel,
        at,
    })))
}

/// A Slack ts is the message's time: seconds and microseconds since the epoch.
pub fn slack_time(ts: &Ts) -> Option<Timestamp> {
    let (secs, frac) = ts.as_str().split_once('.').unwrap_or((ts.as_str(), "0"));
    let secs: i64 = secs.parse().ok()?;
    let micros: i64 = format!("{frac:0<6}").get(..6)?.parse().ok()?;
    Some(Timestamp(secs.checked_mul(Timestamp::MICROS_PER_SECOND)?.checked_add(micros)?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn me() -> SlackIdentity {
        SlackIdentity { user_id: "UKUUKI".into(), bot_id: Some("BKUUKI".into()) }
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
            let m = new_message(
                json!({"type": "message", "channel": "G1", "channel_type": kind, "user": "U1", "text": "x", "ts": "1.000001"}),
            );
            assert!(!m.in_dm, "{kind}");
            assert_eq!(m.private_channel, kind != "channel", "{kind}");
        }
        let m = new_message(
            json!({"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": "x", "ts": "1.000001"}),
        );
        assert!(m.in_dm && m.private_channel);
        let public =
            new_message(json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "x", "ts": "1.000001"}));
        assert!(!public.private_channel);
        let legacy_private =
            new_message(json!({"type": "app_mention", "channel": "G1", "user": "U1", "text": "x", "ts": "1.000001"}));
        assert!(legacy_private.private_channel, "a G id is private without a channel_type");
    }

    #[test]
    fn a_reply_added_under_a_message_is_not_an_edit() {
        let event = json!({"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "2.000001",
            "message": {"type": "message", "user": "U1", "text": "same", "ts": "1.000001", "reply_count": 1},
            "previous_message": {"type": "message", "user": "U1", "text": "same", "ts": "1.000001"}});
        assert!(matches!(normalized(event), Normalized::Ignored(_)));
    }

    fn refusal(event: serde_json::Value) -> String {
        match normalize_json(&event, &me()) {
            Err(EventError(reason)) => reason,
            other => panic!("not refused: {other:?}"),
        }
    }

    fn unusable(event: serde_json::Value) -> String {
        match normalize_json(&event, &me()) {
            Ok(Normalized::Unusable(reason)) => reason,
            other => panic!("not unusable: {other:?}"),
        }
    }

    #[test]
    fn other_event_types_and_subtypes_are_ignored_whatever_their_fields() {
        assert!(matches!(normalized(json!({"type": "reaction_added"})), Normalized::Ignored(_)));
        assert!(matches!(
            normalized(json!({"type": "message", "subtype": "channel_topic", "channel": "C1", "ts": "1.1"})),
            Normalized::Ignored(_)
        ));
        // channel_created carries its channel as an object.
        let created = json!({"type": "channel_created", "channel": {"id": "C2", "name": "new"}});
        assert!(matches!(normalize_json(&created, &me()), Ok(Normalized::Ignored(_))));
        let join_with_bad_ts =
            json!({"type": "message", "subtype": "channel_join", "channel": "C1", "user": "U1", "ts": "soon"});
        assert!(matches!(normalize_json(&join_with_bad_ts, &me()), Ok(Normalized::Ignored(_))));
    }

    #[test]
    fn a_message_whose_ts_is_not_a_slack_timestamp_is_refused() {
        for bad in ["abc", "-5.1", "", "1e9", "12"] {
            let reason = refusal(json!({"type": "message", "channel": "C1", "user": "U1", "text": "x", "ts": bad}));
            assert!(reason.contains("ts") && reason.contains("not a Slack timestamp"), "{reason}");
            assert!(reason.contains(&format!("{bad:?}")), "names the value: {reason}");
        }
        let as_number =
            refusal(json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "x", "ts": 1700000000.5}));
        assert!(as_number.contains("1700000000.5 is not a Slack timestamp"), "{as_number}");
        let missing = refusal(json!({"type": "message", "channel": "C1", "user": "U1", "text": "x"}));
        assert!(missing.contains("ts is missing"), "{missing}");
        let thread =
            refusal(json!({"type": "message", "channel": "C1", "user": "U1", "ts": "1.000001", "thread_ts": "root"}));
        assert!(thread.contains("thread_ts \"root\""), "{thread}");
        let deleted =
            refusal(json!({"type": "message", "subtype": "message_deleted", "channel": "C1", "deleted_ts": "-5.1"}));
        assert!(deleted.contains("deleted_ts \"-5.1\""), "{deleted}");
        let edited = refusal(json!({"type": "message", "subtype": "message_changed", "channel": "C1",
            "message": {"type": "message", "text": "new", "ts": "1e9"}, "previous_message": {"type": "message", "text": "old", "ts": "1.1"}}));
        assert!(edited.contains("message_changed's message ts \"1e9\""), "{edited}");
        // A bad ts is refused even when the channel is missing too.
        refusal(json!({"type": "message", "user": "U1", "ts": "abc"}));
    }

    #[test]
    fn a_message_changed_without_the_messages_ts_edits_the_previous_messages_ts() {
        // As Slack's Bolt for Python tests send it.
        let event = json!({"type": "message", "subtype": "message_changed", "channel": "C111", "hidden": true,
            "ts": "1665102362.013600", "event_ts": "1665102362.013600", "channel_type": "channel",
            "message": {"type": "message", "text": "updated message", "user": "U111", "edited": {"user": "U111", "ts": "1665102362.000000"}},
            "previous_message": {"type": "message", "text": "original message", "user": "U222", "ts": "1665102338.901939"}});
        assert_eq!(
            normalized(event),
            Normalized::Incoming(Incoming::Edited {
                channel: ChannelId("C111".into()),
                ts: Ts::new("1665102338.901939"),
                text: "updated message".into(),
            })
        );
        let no_ts_anywhere = refusal(json!({"type": "message", "subtype": "message_changed", "channel": "C1",
            "message": {"type": "message", "text": "new"}}));
        assert!(no_ts_anywhere.contains("message_changed's message ts is missing"), "{no_ts_anywhere}");
    }

    #[test]
    fn events_kuuki_cannot_use_are_unusable_not_refused() {
        let no_channel = unusable(json!({"type": "message", "user": "U1", "text": "x", "ts": "1.000001"}));
        assert!(no_channel.contains("without a channel"), "{no_channel}");
        let no_user = unusable(json!({"type": "message", "channel": "C1", "text": "x", "ts": "1.000001"}));
        assert!(no_user.contains("without a user"), "{no_user}");
        let no_message =
            unusable(json!({"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "1.000001"}));
        assert!(no_message.contains("without a message"), "{no_message}");
        let odd_shape = unusable(json!({"type": "message", "channel": {"id": "C1"}, "user": "U1", "ts": "1.000001"}));
        assert!(odd_shape.contains("shape"), "{odd_shape}");
        assert!(unusable(json!({"text": "no type"})).contains("without a type"));
        assert!(unusable(json!("not an object")).contains("without a type"));
    }

    #[test]
    fn an_uninstall_and_kuukis_revoked_bot_token_take_access_away_and_other_revocations_do_not() {
        let gone = |event| normalize_json(&event, &me()).unwrap();
        assert_eq!(gone(json!({"type": "app_uninstalled"})), Normalized::AccessGone("app_uninstalled".into()));
        let ours = json!({"type": "tokens_revoked", "tokens": {"oauth": ["U1"], "bot": ["UOTHER", "UKUUKI"]}});
        assert_eq!(gone(ours), Normalized::AccessGone("tokens_revoked".into()));
        for others in [
            json!({"type": "tokens_revoked", "tokens": {"oauth": ["UKUUKI"], "bot": ["UOTHER"]}}),
            json!({"type": "tokens_revoked", "tokens": {"oauth": ["U1"]}}),
            json!({"type": "tokens_revoked"}),
        ] {
            assert!(matches!(gone(others.clone()), Normalized::Ignored(_)), "{others}");
        }
    }

    #[test]
    fn a_ts_beyond_the_clock_is_refused_not_overflowed() {
        let reason = refusal(json!({"type": "message", "channel": "C1", "user": "U1", "ts": "99999999999999999.1"}));
        assert!(reason.contains("too far in the future"), "{reason}");
    }
}
