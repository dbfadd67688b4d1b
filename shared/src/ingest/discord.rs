//! Verified Discord requests: a relayed Gateway dispatch (stored and queued exactly
//! like a Slack event), and an interaction (PING, the `/kuuki` application command).
//! Verification happens before this, on the raw bytes.

use serde::Deserialize;
use serde_json::{Value, json};
use thiserror::Error;

use super::command::{SlashCommand, run_command};
use super::{Incoming, ingest, ingest_retry};
use crate::adapters::discord::{DiscordEventError, DiscordIdentity, Normalized, normalize_dispatch};
use crate::deps::Deps;
use crate::domain::{Author, ChannelId, CommandReply, Message, Ts, UserId, deferred_interaction_key};
use crate::ports::PortError;

#[derive(Debug, Error)]
pub enum DiscordIngressError {
    /// A signed body kuuki cannot read (400).
    #[error(transparent)]
    Malformed(#[from] DiscordEventError),
    #[error("malformed interaction: {0}")]
    MalformedInteraction(String),
    /// A store or queue failed (500; the relay retries, and retries are idempotent).
    #[error(transparent)]
    Backend(#[from] PortError),
}

/// Stores and queues one relayed dispatch; returns what was done, for the log.
/// `retry` is the relay's redelivery of a request that failed before.
pub async fn handle_relay_event(
    deps: &Deps,
    me: &DiscordIdentity,
    body: &[u8],
    retry: bool,
) -> Result<String, DiscordIngressError> {
    let incoming = match normalize_dispatch(body, me)? {
        Normalized::Incoming(incoming) => incoming,
        Normalized::Ignored(reason) => return Ok(format!("ignored: {reason}")),
    };
    let outcome = if retry { ingest_retry(deps, incoming).await? } else { ingest(deps, incoming).await? };
    Ok(outcome.describe())
}

/// Interaction callback types (Discord's numbers).
const PONG: u8 = 1;
const CHANNEL_MESSAGE_WITH_SOURCE: u8 = 4;
/// "kuuki is thinking…" until the answer completes it (within 15 minutes).
const DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: u8 = 5;
/// Discord accepts a deferred interaction's completion for 15 minutes; kuuki keeps its
/// token a little less, so an answer after that posts in the channel instead.
const INTERACTION_TOKEN_MINUTES: u64 = 14;
/// Only the caller sees the answer.
const EPHEMERAL: u32 = 1 << 6;

#[derive(Debug, Deserialize)]
struct Interaction {
    #[serde(rename = "type")]
    kind: u8,
    id: String,
    #[serde(default)]
    application_id: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    guild_id: Option<String>,
    #[serde(default)]
    member: Option<MemberUser>,
    #[serde(default)]
    user: Option<InteractionUser>,
    #[serde(default)]
    data: Option<CommandData>,
    /// Where the command was run: 0 a server, 1 the bot's DM, 2 a group DM or another
    /// private channel (absent from older payloads).
    #[serde(default)]
    context: Option<u8>,
}

#[derive(Debug, Deserialize)]
struct MemberUser {
    user: InteractionUser,
    #[serde(default)]
    nick: Option<String>,
    /// The member's permissions in the channel, a bit set as a decimal string.
    #[serde(default)]
    permissions: Option<String>,
}

/// Discord's permission bits that make someone a manager of a channel.
const ADMINISTRATOR: u64 = 1 << 3;
const MANAGE_CHANNELS: u64 = 1 << 4;
/// The interaction context of a group DM or another private channel.
const PRIVATE_CHANNEL_CONTEXT: u8 = 2;

/// Whether the caller manages the channel: in a server, Manage Channels or
/// Administrator there (unreadable permissions grant nothing); in their DM with kuuki
/// (no member), the one person in it; in a group DM, nobody (but `COMMAND_MANAGERS`).
fn may_manage_channel(member: Option<&MemberUser>, context: Option<u8>) -> bool {
    match member {
        Some(member) => member
            .permissions
            .as_deref()
            .and_then(|bits| bits.parse::<u64>().ok())
            .is_some_and(|bits| bits & (MANAGE_CHANNELS | ADMINISTRATOR) != 0),
        None => context != Some(PRIVATE_CHANNEL_CONTEXT),
    }
}

#[derive(Debug, Deserialize)]
struct InteractionUser {
    id: String,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    global_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CommandData {
    name: String,
    #[serde(default)]
    options: Vec<CommandOption>,
}

#[derive(Debug, Deserialize)]
struct CommandOption {
    name: String,
    #[serde(default)]
    value: Option<Value>,
    #[serde(default)]
    options: Vec<CommandOption>,
}

/// Answers one interaction with the JSON Discord expects within 3 s: PONG for a PING;
/// for `/kuuki`, the subcommand's text, shown to the caller only. `/kuuki ask` hands the
/// question to kuuki as a message from the caller and is deferred: kuuki's answer
/// completes it (the respond worker edits the interaction's original message).
pub async fn handle_interaction(deps: &Deps, body: &[u8]) -> Result<Value, DiscordIngressError> {
    let bad = |e: String| DiscordIngressError::MalformedInteraction(e);
    let interaction: Interaction = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    match interaction.kind {
        1 => return Ok(json!({ "type": PONG })),
        2 => {}
        other => return Ok(reply(&format!("kuuki does not handle interactions of type {other}."))),
    }
    let data = interaction.data.ok_or_else(|| bad("an application command without data".into()))?;
    if data.name != "kuuki" {
        return Ok(reply(&format!("kuuki does not know the command /{}.", data.name)));
    }
    let channel_id = interaction.channel_id.ok_or_else(|| bad("an application command without a channel".into()))?;
    let may_manage = may_manage_channel(interaction.member.as_ref(), interaction.context);
    // In a server (a member), not in a DM: forgetting someone else is not a DM's business.
    let in_server = interaction.member.is_some();
    let server = interaction.guild_id.clone();
    let (user, nick) = match (interaction.member, interaction.user) {
        (Some(member), _) => (member.user, member.nick),
        (None, Some(user)) => (user, None),
        (None, None) => return Err(bad("an application command without a user".into())),
    };
    // The interaction's webhook: a slow command's answer replaces its first reply.
    let way_back = match (&interaction.application_id, &interaction.token) {
        (Some(application_id), Some(token)) => {
            Some(CommandReply::Discord { application_id: application_id.clone(), token: token.clone() })
        }
        _ => None,
    };
    let Some(sub) = data.options.into_iter().next() else {
        return Ok(reply(&run(deps, &channel_id, &user.id, may_manage, "status", way_back, server).await?));
    };
    let text = match sub.name.as_str() {
        "ask" => {
            let question = option_text(&sub.options, "question").unwrap_or_default();
            if question.trim().is_empty() {
                return Ok(reply("Ask what? `/kuuki ask question: …`"));
            }
            let name = nick.or(user.global_name).or(user.username).unwrap_or_else(|| user.id.clone());
            let (Some(application_id), Some(token)) = (interaction.application_id, interaction.token) else {
                return Err(bad("an application command without application_id or token".into()));
            };
            let channel = ChannelId(channel_id.into());
            let ts = Ts::new(&interaction.id);
            // Kept before the question is queued, so its answer finds it.
            let until = deps.clock.now() + std::time::Duration::from_secs(INTERACTION_TOKEN_MINUTES * 60);
            let completes = format!("{application_id}/{token}");
            deps.ledger.cache_put(&deferred_interaction_key(&channel, &ts), &completes, until).await?;
            ask(deps, ts, channel, interaction.guild_id.is_none(), &user.id, &name, &question).await?;
            return Ok(json!({ "type": DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE }));
        }
        // `minutes` is the option as registered before durations took units.
        "mute" => format!("mute {}", duration_option(&sub.options).unwrap_or_default()),
        "shadow" => format!(
            "shadow {} {}",
            option_text(&sub.options, "state").unwrap_or_default(),
            duration_option(&sub.options).unwrap_or_default()
        ),
        "talkativeness" => format!("talkativeness {}", option_text(&sub.options, "action").unwrap_or_default()),
        // A USER option's value is the person's snowflake. Forgetting someone reaches
        // every channel they wrote in this server, so managing a DM (one's own) is not
        // enough.
        "forget" => {
            let text = format!("forget {}", option_text(&sub.options, "user").unwrap_or_default());
            // The server bounds what a manager's forget reaches: none named, none done.
            let may_forget = may_manage && in_server && server.is_some();
            return Ok(reply(&run(deps, &channel_id, &user.id, may_forget, &text, way_back, server).await?));
        }
        other => other.to_owned(),
    };
    Ok(reply(&run(deps, &channel_id, &user.id, may_manage, &text, way_back, server).await?))
}

fn duration_option(options: &[CommandOption]) -> Option<String> {
    option_text(options, "duration").or_else(|| option_text(options, "minutes"))
}

async fn run(
    deps: &Deps,
    channel: &str,
    user: &str,
    may_manage: bool,
    text: &str,
    way_back: Option<CommandReply>,
    server: Option<String>,
) -> Result<String, PortError> {
    let command = SlashCommand {
        server,
        command: "/kuuki".into(),
        text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        channel_id: channel.to_owned(),
        user_id: user.to_owned(),
        may_manage_channel: Some(may_manage),
        response_url: None,
        team_id: None,
        enterprise_id: None,
        is_enterprise_install: false,
        discord_reply: way_back,
    };
    run_command(deps, &command).await
}

/// The question as a message to kuuki: stored under the interaction's id (a snowflake,
/// so a repeated interaction is stored once) and answered as a mention.
async fn ask(
    deps: &Deps,
    ts: Ts,
    channel: ChannelId,
    in_dm: bool,
    user: &str,
    user_name: &str,
    question: &str,
) -> Result<(), DiscordIngressError> {
    let at = crate::adapters::discord::snowflake_time(&ts)
        .ok_or_else(|| DiscordIngressError::MalformedInteraction(format!("interaction id {ts} is not a snowflake")))?;
    let me = deps.bot.user_in(&channel).clone();
    let message = Message {
        channel,
        ts,
        thread_root: None,
        user: UserId(user.to_owned().into()),
        user_name: user_name.to_owned(),
        text: format!("<@{}> {question}", me.0),
        author: Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm,
        private_channel: in_dm,
        at,
    };
    ingest(deps, Incoming::Message(message)).await?;
    Ok(())
}

fn option_text(options: &[CommandOption], name: &str) -> Option<String> {
    let value = options.iter().find(|o| o.name == name)?.value.as_ref()?;
    Some(match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn reply(content: &str) -> Value {
    json!({
        "type": CHANNEL_MESSAGE_WITH_SOURCE,
        "data": {"content": content, "flags": EPHEMERAL, "allowed_mentions": {"parse": []}},
    })
}

/// The `/kuuki` command as `kuuki discord register` installs it (a bulk overwrite of
/// the application's global commands).
pub fn command_definitions() -> Value {
    const SUB_COMMAND: u8 = 1;
    const STRING: u8 = 3;
    const USER: u8 = 6;
    json!([{
        "name": "kuuki",
        "description": "kuuki, the colleague who reads the room",
        "type": 1,
        "options": [
            {"type": SUB_COMMAND, "name": "status", "description": "How kuuki takes part in this channel"},
            {"type": SUB_COMMAND, "name": "why", "description": "Why kuuki last spoke or stayed quiet here"},
            {"type": SUB_COMMAND, "name": "mute", "description": "Stop joining in unasked here for a while (channel managers)", "options": [
                {"type": STRING, "name": "duration", "description": "How long: 30m, 2h, 1d, or minutes (default 1h, at most 7d)", "required": false, "max_length": 12}
            ]},
            {"type": SUB_COMMAND, "name": "unmute", "description": "Join in here again (channel managers)"},
            {"type": SUB_COMMAND, "name": "shadow", "description": "Judge and log here without posting, for a while (channel managers)", "options": [
                {"type": STRING, "name": "state", "description": "on: still answer mentions; all: post nothing; off: end it (default on)", "required": false,
                 "choices": [{"name": "on", "value": "on"}, {"name": "all", "value": "all"}, {"name": "off", "value": "off"}]},
                {"type": STRING, "name": "duration", "description": "How long: 30m, 2h, 1d, or minutes (default 1d, at most 7d)", "required": false, "max_length": 12}
            ]},
            {"type": SUB_COMMAND, "name": "ask", "description": "Ask kuuki something; it answers in this channel", "options": [
                {"type": STRING, "name": "question", "description": "Your question", "required": true}
            ]},
            {"type": SUB_COMMAND, "name": "memory", "description": "What kuuki remembers here, and about you"},
            {"type": SUB_COMMAND, "name": "forget-me", "description": "Make kuuki forget everything about you"},
            {"type": SUB_COMMAND, "name": "forget", "description": "Make kuuki forget everything about someone (channel managers)", "options": [
                {"type": USER, "name": "user", "description": "Whom to forget", "required": true}
            ]},
            {"type": SUB_COMMAND, "name": "quieter", "description": "Ask kuuki to join in unasked less often here"},
            {"type": SUB_COMMAND, "name": "louder", "description": "Ask kuuki to join in unasked more often here"},
            {"type": SUB_COMMAND, "name": "talkativeness", "description": "How talkative kuuki has learned to be here, and why", "options": [
                {"type": STRING, "name": "action", "description": "reset: back to 0 (channel managers)", "required": false,
                 "choices": [{"name": "reset", "value": "reset"}]}
            ]}
        ]
    }])
}
