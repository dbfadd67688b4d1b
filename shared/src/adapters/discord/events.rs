//! Gateway dispatches as the relay forwards them (`{"op": 0, "t": "MESSAGE_CREATE",
//! "d": {…}}`, unchanged), normalized into [`Incoming`] like Slack events are.
//!
//! Discord facts that shape this: a message id is a snowflake (a number whose top
//! bits are its creation time), so it is the message's [`Ts`] and its time; a thread
//! is a channel of its own, so a thread's messages are that channel's conversation; a
//! DM has no `guild_id`; a reply carries `message_reference` and, on create, the
//! `referenced_message` with its author.

use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

use crate::domain::Incoming;
use crate::domain::{Author, ChannelId, Message, Timestamp, Ts, UserId};

/// Discord's epoch (2015-01-01), in unix milliseconds: snowflake times count from it.
use crate::domain::DISCORD_EPOCH_MS;

/// Who kuuki is on Discord, from `GET /users/@me`, and the roles Discord made for it
/// in each server (a managed role: mentioning it is mentioning kuuki).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscordIdentity {
    pub user_id: String,
    pub managed_roles: Vec<String>,
}

/// What a relayed dispatch means for kuuki.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "nearly every event is a message: boxing it would allocate for the common case to shrink the rare ones"
)]
pub enum Normalized {
    Incoming(Incoming),
    /// Acknowledged and not acted on, with the reason (other dispatches, system messages).
    Ignored(String),
}

/// A body that is not a Gateway dispatch kuuki can read (answered 400: the relay is
/// ours, so this is a bug to see, not a platform quirk to tolerate).
#[derive(Debug, Error, PartialEq)]
#[error("malformed relayed Discord event: {0}")]
pub struct DiscordEventError(pub String);

#[derive(Debug, Deserialize)]
struct Dispatch {
    t: Option<String>,
    #[serde(default)]
    d: Value,
}

#[derive(Debug, Default, Deserialize)]
struct User {
    id: String,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    global_name: Option<String>,
    #[serde(default)]
    bot: bool,
}

#[derive(Debug, Default, Deserialize)]
struct Member {
    #[serde(default)]
    nick: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Referenced {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    author: Option<User>,
}

#[derive(Debug, Deserialize)]
struct RawMessage {
    id: String,
    channel_id: String,
    #[serde(default)]
    guild_id: Option<String>,
    #[serde(default)]
    author: Option<User>,
    #[serde(default)]
    member: Option<Member>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default, rename = "type")]
    kind: u8,
    #[serde(default)]
    webhook_id: Option<String>,
    #[serde(default)]
    referenced_message: Option<Box<Referenced>>,
    #[serde(default)]
    mention_roles: Vec<String>,
}

/// Message types that are people (or bots) talking: DEFAULT and REPLY.
const TALK_TYPES: [u8; 2] = [0, 19];

/// Parses and normalizes one relayed dispatch.
pub fn normalize_dispatch(body: &[u8], me: &DiscordIdentity) -> Result<Normalized, DiscordEventError> {
    let dispatch: Dispatch = serde_json::from_slice(body).map_err(|e| DiscordEventError(e.to_string()))?;
    let kind = dispatch.t.unwrap_or_default();
    let message = || RawMessage::deserialize(&dispatch.d).map_err(|e| DiscordEventError(format!("{kind}: {e}")));
    match kind.as_str() {
        "MESSAGE_CREATE" => new_message(message()?, me),
        "MESSAGE_UPDATE" => {
            let m = message()?;
            let ts = snowflake_ts(&m.id)?;
            // An update without content is an embed or a pin being added: no new text.
            match m.content {
                Some(text) => {
                    Ok(Normalized::Incoming(Incoming::Edited { channel: ChannelId(m.channel_id.into()), ts, text }))
                }
                None => Ok(Normalized::Ignored("MESSAGE_UPDATE without content".into())),
            }
        }
        "MESSAGE_DELETE" => {
            let m = message()?;
            Ok(Normalized::Incoming(Incoming::Deleted {
                ts: snowflake_ts(&m.id)?,
                channel: ChannelId(m.channel_id.into()),
            }))
        }
        "MESSAGE_REACTION_ADD" | "MESSAGE_REACTION_REMOVE" => reaction(&dispatch.d, kind == "MESSAGE_REACTION_REMOVE"),
        "" => Err(DiscordEventError("not a dispatch: no `t`".into())),
        other => Ok(Normalized::Ignored(format!("dispatch {other}"))),
    }
}

/// The fields of a reaction dispatch kuuki reads.
#[derive(Debug, Deserialize)]
struct RawReaction {
    user_id: String,
    channel_id: String,
    message_id: String,
    emoji: RawEmoji,
}

/// A unicode emoji has its character as `name`; a custom one its own name (and an id).
#[derive(Debug, Deserialize)]
struct RawEmoji {
    #[serde(default)]
    name: Option<String>,
}

/// `MESSAGE_REACTION_ADD` / `MESSAGE_REACTION_REMOVE`.
fn reaction(d: &serde_json::Value, removed: bool) -> Result<Normalized, DiscordEventError> {
    let r = RawReaction::deserialize(d).map_err(|e| DiscordEventError(format!("a reaction: {e}")))?;
    let Some(emoji) = r.emoji.name.filter(|n| !n.is_empty()) else {
        return Ok(Normalized::Ignored("a reaction whose emoji has no name".into()));
    };
    Ok(Normalized::Incoming(Incoming::Reaction {
        channel: ChannelId(r.channel_id.into()),
        ts: snowflake_ts(&r.message_id)?,
        user: crate::domain::UserId(r.user_id.into()),
        emoji,
        removed,
    }))
}

fn new_message(m: RawMessage, me: &DiscordIdentity) -> Result<Normalized, DiscordEventError> {
    let ts = snowflake_ts(&m.id)?;
    if !TALK_TYPES.contains(&m.kind) {
        return Ok(Normalized::Ignored(format!("message type {}", m.kind)));
    }
    let Some(author) = m.author else {
        return Err(DiscordEventError("MESSAGE_CREATE without an author".into()));
    };
    let at = snowflake_time(&ts).ok_or_else(|| DiscordEventError(format!("message id {ts} is not a snowflake")))?;
    let kind = if author.id == me.user_id {
        Author::OwnBot
    } else if author.bot || m.webhook_id.is_some() {
        Author::OtherBot
    } else {
        Author::Human
    };
    let replies_to_bot =
        m.referenced_message.as_ref().and_then(|r| r.author.as_ref()).is_some_and(|a| a.id == me.user_id);
    let replies_to = m
        .referenced_message
        .as_ref()
        .and_then(|r| r.id.as_deref())
        .and_then(|id| snowflake_ts(id).ok())
        .filter(|_| !replies_to_bot);
    let user_name =
        m.member.and_then(|mb| mb.nick).or(author.global_name).or(author.username).unwrap_or_else(|| author.id.clone());
    let in_dm = m.guild_id.is_none();
    let mut text = m.content.unwrap_or_default();
    // A mention of kuuki's managed role is a mention of kuuki: written as one, so every
    // rule that looks for `<@id>` sees it.
    for role in m.mention_roles.iter().filter(|r| me.managed_roles.contains(r)) {
        text = text.replace(&format!("<@&{role}>"), &format!("<@{}>", me.user_id));
    }
    Ok(Normalized::Incoming(Incoming::Message(Message {
        channel: ChannelId(m.channel_id.into()),
        ts,
        thread_root: None,
        user: UserId(author.id.into()),
        user_name,
        text,
        author: kind,
        replies_to_bot,
        replies_to,
        in_dm,
        // A DM is private; a guild channel's visibility is not in the message (its
        // permission overwrites are), so it counts as public.
        private_channel: in_dm,
        at,
    })))
}

/// A snowflake id as a [`Ts`]: digits only, or the dispatch is refused.
fn snowflake_ts(id: &str) -> Result<Ts, DiscordEventError> {
    if id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DiscordEventError(format!("{id:?} is not a snowflake id")));
    }
    Ok(Ts::new(id))
}

/// When a snowflake was made: its top 42 bits are milliseconds since Discord's epoch.
pub fn snowflake_time(ts: &Ts) -> Option<Timestamp> {
    let id: u64 = ts.as_str().parse().ok()?;
    let ms = i64::try_from(id >> 22).ok()?.checked_add(DISCORD_EPOCH_MS)?;
    Some(Timestamp(ms.checked_mul(1000)?))
}

/// The snowflake a moment would start with (for `after=` queries and tests).
pub fn snowflake_at(at: Timestamp) -> u64 {
    let ms = (at.as_micros() / 1000 - DISCORD_EPOCH_MS).max(0) as u64;
    ms << 22
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn me() -> DiscordIdentity {
        DiscordIdentity { user_id: "900".into(), managed_roles: vec!["555".into()] }
    }

    fn dispatch(t: &str, d: Value) -> Normalized {
        let body = json!({"op": 0, "s": 7, "t": t, "d": d}).to_string();
        normalize_dispatch(body.as_bytes(), &me()).unwrap()
    }

    fn message(d: Value) -> Message {
        match dispatch("MESSAGE_CREATE", d) {
            Normalized::Incoming(Incoming::Message(m)) => m,
            other => panic!("not a message: {other:?}"),
        }
    }

    // 175928847299117063 is Discord's documented example: 2016-04-30 11:18:25.796 UTC.
    const ID: &str = "175928847299117063";

    #[test]
    fn a_guild_message_is_a_public_human_message_at_its_snowflake_time() {
        let m = message(json!({
            "id": ID, "channel_id": "41771983423143937", "guild_id": "41771983423143937", "type": 0,
            "content": "<@900> deploy?", "author": {"id": "80351110224678912", "username": "nelly", "global_name": "Nelly"},
            "member": {"nick": "nel"}
        }));
        assert_eq!(m.ts, Ts::new(ID));
        assert_eq!(m.at, Timestamp(1_462_015_105_796 * 1000));
        assert_eq!((m.user.as_str(), m.user_name.as_str()), ("80351110224678912", "nel"));
        assert_eq!(m.author, Author::Human);
        assert!(!m.in_dm && !m.private_channel && !m.replies_to_bot);
        assert_eq!(m.thread_root, None);
        assert_eq!(m.text, "<@900> deploy?");
    }

    #[test]
    fn dms_replies_bots_webhooks_and_kuuki_itself() {
        let dm = message(
            json!({"id": ID, "channel_id": "5", "type": 0, "content": "hi", "author": {"id": "1", "username": "a"}}),
        );
        assert!(dm.in_dm && dm.private_channel);
        assert_eq!(dm.user_name, "a");
        let reply = message(json!({"id": ID, "channel_id": "5", "guild_id": "9", "type": 19, "content": "thanks",
            "author": {"id": "1"}, "message_reference": {"message_id": "3"}, "referenced_message": {"id": "3", "author": {"id": "900", "bot": true}}}));
        assert!(reply.replies_to_bot);
        let reply_to_person =
            message(json!({"id": ID, "channel_id": "5", "guild_id": "9", "type": 19, "content": "ok",
            "author": {"id": "1"}, "referenced_message": {"id": "3", "author": {"id": "2"}}}));
        assert!(!reply_to_person.replies_to_bot);
        let bot = message(
            json!({"id": ID, "channel_id": "5", "guild_id": "9", "type": 0, "content": "beep", "author": {"id": "7", "bot": true}}),
        );
        assert_eq!(bot.author, Author::OtherBot);
        let hook = message(
            json!({"id": ID, "channel_id": "5", "guild_id": "9", "type": 0, "content": "ci", "webhook_id": "8", "author": {"id": "8"}}),
        );
        assert_eq!(hook.author, Author::OtherBot);
        let own = message(
            json!({"id": ID, "channel_id": "5", "guild_id": "9", "type": 0, "content": "me", "author": {"id": "900", "bot": true}}),
        );
        assert_eq!(own.author, Author::OwnBot);
    }

    #[test]
    fn a_mention_of_kuukis_managed_role_is_a_mention_of_kuuki() {
        let m = message(json!({"id": ID, "channel_id": "5", "guild_id": "9", "type": 0, "author": {"id": "1"},
            "content": "<@&555> and <@&777> please look", "mention_roles": ["555", "777"]}));
        assert_eq!(m.text, "<@900> and <@&777> please look", "only kuuki's own role");
    }

    #[test]
    fn edits_deletes_and_what_is_ignored() {
        assert_eq!(
            dispatch("MESSAGE_UPDATE", json!({"id": ID, "channel_id": "5", "content": "fixed"})),
            Normalized::Incoming(Incoming::Edited {
                channel: ChannelId("5".into()),
                ts: Ts::new(ID),
                text: "fixed".into()
            })
        );
        assert!(matches!(dispatch("MESSAGE_UPDATE", json!({"id": ID, "channel_id": "5"})), Normalized::Ignored(_)));
        assert_eq!(
            dispatch("MESSAGE_DELETE", json!({"id": ID, "channel_id": "5", "guild_id": "9"})),
            Normalized::Incoming(Incoming::Deleted { channel: ChannelId("5".into()), ts: Ts::new(ID) })
        );
        assert!(matches!(dispatch("TYPING_START", json!({})), Normalized::Ignored(_)));
        let join = dispatch(
            "MESSAGE_CREATE",
            json!({"id": ID, "channel_id": "5", "guild_id": "9", "type": 7, "author": {"id": "1"}}),
        );
        assert_eq!(join, Normalized::Ignored("message type 7".into()));
    }

    #[test]
    fn bodies_kuuki_cannot_read_are_refused_with_the_reason() {
        let refuse = |body: &str| normalize_dispatch(body.as_bytes(), &me()).unwrap_err().0;
        assert!(refuse("not json").contains("expected"));
        assert!(refuse(r#"{"op": 0, "d": {}}"#).contains("no `t`"));
        assert!(
            refuse(r#"{"op": 0, "t": "MESSAGE_CREATE", "d": {"id": "x1", "channel_id": "5", "author": {"id": "1"}}}"#)
                .contains("not a snowflake")
        );
        assert!(
            refuse(r#"{"op": 0, "t": "MESSAGE_CREATE", "d": {"id": "1", "channel_id": "5"}}"#)
                .contains("without an author")
        );
        assert!(refuse(r#"{"op": 0, "t": "MESSAGE_DELETE", "d": {"id": "1"}}"#).contains("channel_id"));
    }

    #[test]
    fn snowflakes_and_moments_round_trip_to_the_millisecond() {
        let at = snowflake_time(&Ts::new(ID)).unwrap();
        assert_eq!(snowflake_time(&Ts::new(snowflake_at(at).to_string())), Some(at));
    }
}
