//! The `/kuuki` slash command. Everyone may ask `status`, `why` and `memory`, and have
//! kuuki forget them (`forget-me`); changing how kuuki takes part (`mute [duration]`,
//! `unmute`, `shadow [all] [duration]`, `shadow off`) and forgetting someone else
//! (`forget @user`) is for channel managers ([`caller_may_manage`]), and each change is
//! announced in the channel once. Anyone may ask kuuki to be `quieter` or `louder`
//! here; `talkativeness reset` is for managers. Answers are ephemeral (only the caller
//! sees them).

mod talkativeness;

use std::fmt::Write as _;
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

use crate::deps::Deps;
use crate::domain::{ChannelId, CommandReply, Decision, Familiarity, Platform, Timestamp, UserId};
use crate::ports::{ClaimOutcome, PortResult, Post, Shadow};

/// The form fields of a slash command request that kuuki reads.
#[derive(Clone, Deserialize)]
pub struct SlashCommand {
    pub command: String,
    #[serde(default)]
    pub text: String,
    pub channel_id: String,
    pub user_id: String,
    /// What the request itself says about the caller's right to manage the channel
    /// (a Discord interaction's member permissions, or a DM, which its one person may
    /// manage); `None` asks the platform (Slack's `users.info`). Never read from a
    /// request's form: a caller cannot vouch for themselves.
    #[serde(skip)]
    pub may_manage_channel: Option<bool>,
    /// The Slack workspace (and org) the command was given in: which installation it
    /// is for, serving many workspaces.
    #[serde(default)]
    pub team_id: Option<String>,
    #[serde(default)]
    pub enterprise_id: Option<String>,
    #[serde(default, deserialize_with = "slack_bool")]
    pub is_enterprise_install: bool,
    /// Slack's way back to the caller for an answer that takes longer than the
    /// request may (see [`SlashCommand::reply`]).
    #[serde(default)]
    pub response_url: Option<String>,
    /// Discord's way back (the interaction's webhook); Slack's is `response_url`.
    #[serde(skip)]
    pub discord_reply: Option<CommandReply>,
    /// The Discord server the command was given in (the interaction's `guild_id`): the
    /// Manage Channels permission of `may_manage_channel` holds there only.
    #[serde(skip)]
    pub server: Option<String>,
}

/// A form's `true`/`false` (Slack sends booleans as words).
fn slack_bool<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    let word = <String as serde::Deserialize>::deserialize(deserializer)?;
    Ok(word.eq_ignore_ascii_case("true") || word == "1")
}

// The way back is a credential to answer as kuuki: never in a log line.
impl std::fmt::Debug for SlashCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlashCommand")
            .field("command", &self.command)
            .field("text", &self.text)
            .field("channel_id", &self.channel_id)
            .field("user_id", &self.user_id)
            .field("may_manage_channel", &self.may_manage_channel)
            .field("server", &self.server)
            .field("reply", &self.reply())
            .finish()
    }
}

impl SlashCommand {
    /// How to answer the caller later: a command without one (a replay's) is answered
    /// in full at once.
    pub fn reply(&self) -> Option<CommandReply> {
        self.discord_reply
            .clone()
            .or_else(|| self.response_url.clone().map(|response_url| CommandReply::Slack { response_url }))
    }
}

#[derive(Debug, Error, PartialEq)]
#[error("malformed slash command: {0}")]
pub struct CommandError(pub String);

pub fn parse_command(body: &[u8]) -> Result<SlashCommand, CommandError> {
    serde_urlencoded::from_bytes(body).map_err(|e| CommandError(e.to_string()))
}

/// The same command from Socket Mode, where Slack sends the form's fields as a JSON
/// object (the `slash_commands` envelope's `payload`): the same fields, read the same way.
pub fn parse_command_json(payload: &serde_json::Value) -> Result<SlashCommand, CommandError> {
    SlashCommand::deserialize(payload).map_err(|e| CommandError(e.to_string()))
}

/// Mute lasts this long when no duration is given.
const DEFAULT_MUTE: Duration = Duration::from_secs(60 * 60);
/// Shadow mode is for trying kuuki out quietly: a day unless told.
const DEFAULT_SHADOW: Duration = Duration::from_secs(24 * 60 * 60);
/// Neither is meant to be forgotten about: a week at most, then ask again.
const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// An announcement is claimed for this long while it is posted.
const ANNOUNCE_LEASE: Duration = Duration::from_secs(60);
/// Announced changes are remembered past the longest change, so none is announced twice.
const ANNOUNCED_KEEP: Duration = Duration::from_secs(8 * 24 * 60 * 60);

const USAGE: &str = "Usage: /kuuki status | why | memory | forget-me | quieter | louder | talkativeness [reset] | \
     forget @user | mute [duration] | unmute | shadow [all] [duration] | shadow off (a duration is like 30m, 2h or \
     1d; a bare number is minutes)";

/// Runs the command, records it and its answer (and announcement) in the decision log,
/// and returns the ephemeral text to show.
pub async fn run_command(deps: &Deps, command: &SlashCommand) -> PortResult<String> {
    let Answer { text: answer, announced } = answer_command(deps, command).await?;
    let channel = ChannelId(command.channel_id.as_str().into());
    let text = command.text.trim();
    crate::record::record(
        deps,
        &channel,
        None,
        crate::domain::Ts::from_timestamp(deps.clock.now()),
        crate::domain::EventKind::Command {
            user: crate::domain::UserId(command.user_id.as_str().into()),
            command: if text.is_empty() { command.command.clone() } else { format!("{} {text}", command.command) },
            answer: answer.clone(),
            announced,
        },
    );
    Ok(answer)
}

/// Whether the caller may change how kuuki takes part in the command's channel: they
/// are in `COMMAND_MANAGERS`, or the platform says they manage it (Discord: Manage
/// Channels or Administrator, or their own DM; Slack: a workspace admin or owner). An
/// error when the platform cannot say: callers refuse then, never grant.
pub async fn caller_may_manage(deps: &Deps, command: &SlashCommand) -> PortResult<bool> {
    if is_command_manager(deps, command) {
        return Ok(true);
    }
    match command.may_manage_channel {
        Some(answer) => Ok(answer),
        None => {
            let channel = ChannelId(command.channel_id.as_str().into());
            deps.chat.is_workspace_admin(&channel, &UserId(command.user_id.as_str().into())).await
        }
    }
}

/// Whether `COMMAND_MANAGERS` lists the caller: by their id, or in a Slack workspace
/// among several by `T…/U…` only (a bare id would grant in every workspace).
fn is_command_manager(deps: &Deps, command: &SlashCommand) -> bool {
    let managers = &deps.settings.people.command_managers;
    match ChannelId(command.channel_id.as_str().into()).workspace() {
        crate::domain::Workspace::Shared => managers.contains(&command.user_id),
        workspace => managers.contains(&workspace.qualify(&command.user_id)),
    }
}

/// Forgets `user`: queued for a worker when the command has a way back for the answer
/// (forgetting someone who wrote much, in many channels, takes longer than the 3 s a
/// platform waits), at once otherwise.
/// `server`: only that Discord server's (or the Slack workspace's) channels; `None`
/// everywhere (see [`crate::domain::Job::Forget`]).
async fn forget(
    deps: &Deps,
    command: &SlashCommand,
    channel: &ChannelId,
    user: UserId,
    whom: &str,
    server: Option<String>,
) -> PortResult<Answer> {
    let Some(reply) = command.reply() else {
        let forgotten = crate::memory::forget::forget_user(deps, &user, channel, server.as_deref()).await?;
        crate::memory::forget::record_forgotten(deps, channel, &user, &forgotten, server.as_deref(), false);
        return Ok(crate::memory::forget::answer(&forgotten, whom, server.as_deref()).into());
    };
    let job = crate::domain::Job::Forget {
        channel: channel.clone(),
        user,
        whom: whom.to_owned(),
        ts: crate::domain::Ts::from_timestamp(deps.clock.now()),
        reply,
        server: server.clone(),
    };
    deps.enqueue_after(job, Duration::ZERO).await?;
    let here = if crate::domain::discord_server(server.as_deref()).is_some() { " in this server" } else { "" };
    Ok(format!("kuuki is forgetting {whom}{here}; what was removed will show here in a moment.").into())
}

/// The polite no for someone who may not change this, naming who can.
pub fn refusal(deps: &Deps, command: &SlashCommand) -> String {
    let platform_managers = if Platform::of_id(&command.channel_id) == Platform::Discord {
        "members with the Manage Channels permission"
    } else {
        "workspace admins and owners"
    };
    let listed: Vec<String> = deps.settings.people.command_managers.iter().map(|user| format!("<@{user}>")).collect();
    let who = match listed.as_slice() {
        [] => platform_managers.to_owned(),
        listed => format!("{platform_managers}, and {}", listed.join(", ")),
    };
    format!(
        "Sorry, only {who} can change how kuuki takes part here, so nothing changed. `/kuuki status` shows how it is now."
    )
}

/// The ephemeral answer, and what was announced in the channel.
struct Answer {
    text: String,
    announced: Option<String>,
}

impl From<String> for Answer {
    fn from(text: String) -> Self {
        Answer { text, announced: None }
    }
}

impl From<&str> for Answer {
    fn from(text: &str) -> Self {
        Answer { text: text.to_owned(), announced: None }
    }
}

async fn answer_command(deps: &Deps, command: &SlashCommand) -> PortResult<Answer> {
    let channel = ChannelId(command.channel_id.as_str().into());
    let mut words = command.text.split_whitespace();
    let verb = words.next().unwrap_or("status").to_ascii_lowercase();
    // Lowercased for these verbs only: a user id in a later argument keeps its case.
    let args: Vec<String> = words.map(str::to_ascii_lowercase).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let verb = verb.as_str();
    let now = deps.clock.now();
    match verb {
        "status" => return Ok(status(deps, &channel, now).await?.into()),
        "why" => return Ok(why(deps, &channel).await?.into()),
        "memory" => return Ok(memory(deps, &channel, &UserId(command.user_id.as_str().into()), now).await?.into()),
        "forget-me" => {
            let user = UserId(command.user_id.as_str().into());
            // Their own request reaches everywhere they wrote.
            return forget(deps, command, &channel, user, "you", None).await;
        }
        "quieter" | "louder" if args.is_empty() => {
            let kind = if verb == "quieter" {
                crate::domain::talkativeness::SignalKind::Quieter
            } else {
                crate::domain::talkativeness::SignalKind::Louder
            };
            let user = UserId(command.user_id.as_str().into());
            return Ok(talkativeness::nudge(deps, &channel, &user, kind, now).await?.into());
        }
        "talkativeness" if args.is_empty() => {
            let state = deps.channels.channel_state(&channel).await?;
            return Ok(talkativeness::describe(deps, &state, now).into());
        }
        "talkativeness" if args != ["reset"] => return Ok(USAGE.into()),
        "mute" | "unmute" | "shadow" | "forget" | "talkativeness" => {}
        _ => return Ok(USAGE.into()),
    }
    match caller_may_manage(deps, command).await {
        Ok(true) => {}
        Ok(false) => return Ok(refusal(deps, command).into()),
        Err(error) => {
            tracing::warn!(%error, user = %command.user_id, "could not tell whether the caller manages the channel");
            return Ok("Sorry, kuuki could not check whether you may change this just now, so nothing changed. \
                 Please try again in a moment."
                .into());
        }
    }
    if verb == "talkativeness" {
        let user = UserId(command.user_id.as_str().into());
        return Ok(talkativeness::reset(deps, &channel, &user, now).await?.into());
    }
    if verb == "forget" {
        // The id keeps its case (the arguments above are lowercased).
        let Some(user) = command.text.split_whitespace().nth(1).and_then(mentioned_user) else {
            return Ok(format!("Whom should kuuki forget? {USAGE}").into());
        };
        let whom = format!("<@{}>", user.0);
        // Managing channels in one Discord server (or administering the Slack
        // workspace) is no right over what the person said elsewhere; an operator's
        // (COMMAND_MANAGERS) forget reaches everywhere.
        let server = if is_command_manager(deps, command) {
            None
        } else if Platform::of_id(&command.channel_id) == Platform::Discord {
            // A Discord manager's right is their server's: none named, none granted.
            let Some(server) = command.server.clone() else { return Ok(refusal(deps, command).into()) };
            Some(server)
        } else {
            Some(crate::domain::SLACK_WORKSPACE.to_owned())
        };
        return forget(deps, command, &channel, user, &whom, server).await;
    }
    let Some(change) = parse_change(verb, &args) else { return Ok(USAGE.into()) };
    let state = deps.channels.channel_state(&channel).await?;
    let by = format!("<@{}>", command.user_id);
    let (key, answer, announcement) = match change {
        Change::Mute(duration) => {
            let until = minute_after(now + duration);
            deps.channels.set_muted(&channel, Some(until)).await?;
            let until = until_text(until);
            (
                format!("mute:{until}"),
                format!("Muted here until {until}: kuuki will not join in unasked, and still answers mentions."),
                format!(
                    "kuuki is muted here until {until} (set by {by}): it will not join in unasked, and still answers mentions."
                ),
            )
        }
        Change::Unmute => {
            let Some(until) = state.muted_until.filter(|until| *until > now) else {
                return Ok("kuuki is not muted here.".into());
            };
            deps.channels.set_muted(&channel, None).await?;
            (
                format!("unmute:{}", until_text(until)),
                "Unmuted: kuuki may join in here again.".to_owned(),
                format!("kuuki may join in here again (unmuted by {by})."),
            )
        }
        Change::Shadow { all, duration } => {
            let until = minute_after(now + duration);
            deps.channels.set_shadow(&channel, Some(Shadow { until: Some(until), all })).await?;
            let until = until_text(until);
            let what = if all {
                "it posts nothing at all, mentions included"
            } else {
                "it still answers mentions and DMs, and only judges the rest without posting"
            };
            (
                format!("shadow{}:{until}", if all { "-all" } else { "" }),
                format!("Shadow mode on until {until}: {what}."),
                format!("kuuki is in shadow mode here until {until} (set by {by}): {what}."),
            )
        }
        Change::ShadowOff => {
            let Some(shadow) = state.shadow_at(now) else {
                return Ok("kuuki is not in shadow mode here.".into());
            };
            deps.channels.set_shadow(&channel, None).await?;
            (
                format!("shadow-off:{}", shadow.until.map_or_else(|| "unset".to_owned(), until_text)),
                "Shadow mode off: kuuki posts here again.".to_owned(),
                format!("kuuki posts here again (shadow mode ended by {by})."),
            )
        }
    };
    // Shadow mode's own announcement goes out too: it is not one of kuuki's answers.
    let key = format!("announce:{channel}:{key}");
    Ok(match announce(deps, &channel, &key, &announcement).await {
        Ok(Announced::Now) => {
            Answer { text: format!("{answer} Announced in the channel."), announced: Some(announcement) }
        }
        Ok(Announced::Before) => {
            Answer { text: format!("{answer} (Announced in the channel already.)"), announced: None }
        }
        Ok(Announced::Unknown) => {
            Answer { text: format!("{answer} (It may have been announced in the channel already.)"), announced: None }
        }
        Err(error) => {
            tracing::warn!(%error, %key, "could not announce a change in the channel");
            Answer { text: format!("{answer} (kuuki could not announce it in the channel: {error}.)"), announced: None }
        }
    })
}

/// A change to how kuuki takes part, as asked.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    Mute(Duration),
    Unmute,
    Shadow { all: bool, duration: Duration },
    ShadowOff,
}

/// `mute [duration]`, `unmute`, `shadow [on|all] [duration]`, `shadow off`; `None` for
/// anything else.
fn parse_change(verb: &str, args: &[&str]) -> Option<Change> {
    match (verb, args) {
        ("mute", []) => Some(Change::Mute(DEFAULT_MUTE)),
        ("mute", [duration]) => parse_duration(duration).map(Change::Mute),
        ("unmute", []) => Some(Change::Unmute),
        ("shadow", ["off"]) => Some(Change::ShadowOff),
        ("shadow", args) => {
            let (all, rest) = match args {
                ["all", rest @ ..] => (true, rest),
                ["on", rest @ ..] => (false, rest),
                rest => (false, rest),
            };
            let duration = match rest {
                [] => DEFAULT_SHADOW,
                [duration] => parse_duration(duration)?,
                _ => return None,
            };
            Some(Change::Shadow { all, duration })
        }
        _ => None,
    }
}

/// `30m`, `90min`, `2h`, `1d`, or a bare number of minutes; from a minute to
/// [`MAX_DURATION`].
pub fn parse_duration(word: &str) -> Option<Duration> {
    let word = word.trim().to_ascii_lowercase();
    let digits = word.find(|c: char| !c.is_ascii_digit()).unwrap_or(word.len());
    let (number, unit) = word.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let minutes_per = match unit {
        "" | "m" | "min" | "mins" | "minute" | "minutes" => 1,
        "h" | "hr" | "hrs" | "hour" | "hours" => 60,
        "d" | "day" | "days" => 24 * 60,
        _ => return None,
    };
    let duration = Duration::from_secs(number.checked_mul(minutes_per)?.checked_mul(60)?);
    (Duration::from_secs(60)..=MAX_DURATION).contains(&duration).then_some(duration)
}

/// The next whole minute at or after `at`: a change lasts at least as long as asked,
/// and reads (and is announced) as the minute it ends.
fn minute_after(at: Timestamp) -> Timestamp {
    let minute = 60 * Timestamp::MICROS_PER_SECOND;
    Timestamp((at.as_micros() + minute - 1).div_euclid(minute) * minute)
}

/// `2026-01-05 10:30 UTC`.
fn until_text(at: Timestamp) -> String {
    let full = at.to_utc_string();
    match full.strip_suffix(":00 UTC") {
        Some(minutes) => format!("{minutes} UTC"),
        None => full,
    }
}

enum Announced {
    Now,
    /// This change was announced already, or is being announced by another request.
    Before,
    /// An earlier attempt began to post and its outcome is unknown: not posted again
    /// (never twice, even at the cost of once).
    Unknown,
}

/// Posts `text` in the channel, once per `key` however often the change is asked for
/// or the request is retried: claimed in the ledger, marked as posting before the post.
async fn announce(deps: &Deps, channel: &ChannelId, key: &str, text: &str) -> PortResult<Announced> {
    match deps.ledger.claim(key, deps.clock.now(), ANNOUNCE_LEASE).await? {
        ClaimOutcome::Claimed => {}
        ClaimOutcome::Resumed => return Ok(Announced::Unknown),
        ClaimOutcome::InProgress { .. } | ClaimOutcome::Completed => return Ok(Announced::Before),
    }
    deps.ledger.mark_posting(key).await?;
    let post = Post {
        channel: channel.clone(),
        thread_root: None,
        text: text.to_owned(),
        tag: Some(key.to_owned()),
        reply_to: None,
        completes: None,
    };
    if let Err(error) = deps.chat.post_message(&post).await {
        deps.ledger.release(key).await?;
        return Err(error);
    }
    deps.ledger.complete(key, deps.clock.now(), ANNOUNCED_KEEP).await?;
    Ok(Announced::Now)
}

async fn status(deps: &Deps, channel: &ChannelId, now: Timestamp) -> PortResult<String> {
    let s = &deps.settings;
    let state = deps.channels.channel_state(channel).await?;
    let mut out = String::new();
    let participation = if !s.ambient_enabled() {
        "answers mentions only (AUTONOMOUS_RESPONSE_ENABLED or MEMORY_ENABLED is off)".to_owned()
    } else if let Some(until) = state.muted_until.filter(|u| *u > now) {
        format!("muted until {} (mentions still answered)", until_text(until))
    } else {
        "joins in when the room calls for it".to_owned()
    };
    let shadow = match state.shadow_at(now) {
        None => String::new(),
        Some(Shadow { until, all }) => format!(
            "; in shadow mode {} ({})",
            until.map_or_else(|| "until turned off".to_owned(), |until| format!("until {}", until_text(until))),
            if all { "posts nothing" } else { "answers mentions and DMs, posts nothing else" }
        ),
    };
    let _ = writeln!(out, "kuuki here: {participation}{shadow}");
    if let Some(workspace) = channel.workspace().id() {
        let _ = writeln!(out, "Workspace: {workspace} (its memory, people and settings are its own)");
    }
    // The ingress that answers this holds no model client (the workers do): the setting says.
    if s.judge.llm_enabled && (deps.llm.is_some() || s.llm.provider != crate::config::LlmProvider::None) {
        let _ = writeln!(
            out,
            "Judge: rules, then the LLM for scores between {} and {} (at or above {} responds, at or below {} skips)",
            s.judge.llm_threshold_low,
            s.judge.llm_threshold_high,
            s.judge.llm_threshold_high,
            s.judge.llm_threshold_low
        );
    } else {
        let _ = writeln!(out, "Judge: rules only, responds at a score of {} or more", s.judge.score_threshold);
    }
    match state.last_response_at {
        None => {
            let _ = writeln!(out, "No response here yet: no cooldown, no engagement.");
        }
        Some(at) => {
            let ago = now.seconds_since(at).max(0.0);
            let cooldown_left = s.judge.cooldown.as_secs_f64() - ago;
            let engaged_left = s.judge.engagement_duration.as_secs_f64() - ago;
            let _ = write!(out, "Last response here {} ago", human_duration(ago));
            if cooldown_left > 0.0 {
                let _ = write!(out, "; cooldown (-50) for {} more", human_duration(cooldown_left));
            }
            if engaged_left > 0.0 {
                let _ =
                    write!(out, "; engaged (+{}) for {} more", s.judge.engagement_boost, human_duration(engaged_left));
            }
            let _ = writeln!(out, ".");
        }
    }
    let _ = writeln!(
        out,
        "Responses in the last 30 minutes: {}",
        state.interventions_within(now, Duration::from_secs(30 * 60))
    );
    let _ = writeln!(out, "{}", talkativeness::describe(deps, &state, now));
    let memory = &state.memory;
    match memory.updated_at {
        Some(at) => {
            let _ = writeln!(
                out,
                "What kuuki remembers here (summarized {} ago): {}\nMood: {} · Topics: {} · People: {}",
                human_duration(now.seconds_since(at).max(0.0)),
                memory.summary,
                memory.mood,
                memory.topic_keywords.join(", "),
                memory.active_users.join(", ")
            );
        }
        None => {
            let _ = writeln!(out, "No summary of this channel yet.");
        }
    }
    Ok(out.trim_end().to_owned())
}

/// The last judgment here and the facts the last answer was given (a direct answer
/// has no judgment, and still its facts).
async fn why(deps: &Deps, channel: &ChannelId) -> PortResult<String> {
    let state = deps.channels.channel_state(channel).await?;
    let mut out = match &state.last_judgment {
        Some(j) => judgment_text(j),
        None => "No judgment in this channel yet.".to_owned(),
    };
    // Only a channel whose talkativeness moved has one to explain.
    if !state.talkativeness.is_empty() && deps.settings.talkativeness.enabled {
        let _ = write!(out, "\n{}", talkativeness::describe(deps, &state, deps.clock.now()));
    }
    if let Some(last) = state.interventions.last() {
        let _ = write!(out, "\nLast answer here ({}, {}): ", last.at.to_utc_string(), last.response_type.as_str());
        if last.facts.is_empty() {
            out.push_str("no remembered facts were used.");
        } else {
            out.push_str("given these facts:");
            for f in &last.facts {
                let _ = write!(out, "\n- {} (score {:.3}, fact {})", f.content, f.score, f.id);
            }
        }
    }
    Ok(out)
}

fn judgment_text(j: &crate::domain::JudgmentNote) -> String {
    let quoted: String = j.text.chars().take(80).collect();
    let decision = match j.decision {
        Decision::Respond => "at or above the threshold",
        Decision::Skip => "below the threshold",
        Decision::Llm => "between the thresholds, so the LLM was asked",
        Decision::Wait => "not settled yet",
    };
    let outcome = match (j.respond, j.response_type) {
        (true, Some(t)) => format!("respond ({})", t.as_str()),
        (true, None) => "respond".into(),
        (false, _) if j.decision == Decision::Wait => "judge again later".into(),
        (false, _) => "stay quiet".into(),
    };
    let breakdown = if j.breakdown.is_empty() {
        "(none)".to_owned()
    } else {
        j.breakdown.iter().map(|(rule, p)| format!("{rule} {p:+}")).collect::<Vec<_>>().join(", ")
    };
    format!(
        "Last judgment here ({}) on <@{}>'s message \"{quoted}\": score {} ({decision}) -> {outcome}.\nRules: {breakdown}\nReason: {}",
        j.at.to_utc_string(),
        j.user,
        j.score,
        j.reason
    )
}

/// Facts `/kuuki memory` lists, the strongest first.
const MEMORY_FACTS: usize = 10;

/// What kuuki remembers in this channel: the summary, the facts, and what it knows
/// about the caller (here only, and the counters).
async fn memory(deps: &Deps, channel: &ChannelId, caller: &UserId, now: Timestamp) -> PortResult<String> {
    let state = deps.channels.channel_state(channel).await?;
    let mut out = String::new();
    let m = &state.memory;
    if m.updated_at.is_some() {
        let _ =
            writeln!(out, "Summary: {}\nHistory: {}\nTopics: {}", m.summary, m.history, m.topic_keywords.join(", "));
    } else {
        let _ = writeln!(out, "No summary of this channel yet.");
    }
    let mut facts = deps.facts.facts(channel).await?;
    let half_life = deps.settings.memory.fact_decay_half_life_days;
    let weight = |f: &crate::domain::Fact| f.confidence * crate::memory::reflect::decay(f, now, half_life);
    facts.sort_by(|a, b| weight(b).total_cmp(&weight(a)));
    if facts.is_empty() {
        let _ = writeln!(out, "No facts remembered here.");
    } else {
        let _ = writeln!(out, "Facts remembered here ({}):", facts.len());
        for f in facts.iter().take(MEMORY_FACTS) {
            let _ = writeln!(out, "- {} (weight {:.2}, from {})", f.content, weight(f), f.source_users.join(", "));
        }
    }
    if !deps.settings.people.user_profile_enabled {
        let _ = writeln!(out, "kuuki keeps no profiles (USER_PROFILE_ENABLED is off).");
        return Ok(out.trim_end().to_owned());
    }
    let (profile, note) = deps.facts.profile_and_note(channel, caller).await?;
    let interactions = profile.as_ref().map_or(0, |p| p.interactions);
    let familiarity = Familiarity::of(interactions, deps.settings.people.familiarity_thresholds);
    let _ = writeln!(
        out,
        "About you: {interactions} message(s) seen, {} calling kuuki, familiarity {}.",
        profile.as_ref().map_or(0, |p| p.bot_mentions),
        familiarity.as_str()
    );
    match note {
        Some(note) => {
            let _ = writeln!(
                out,
                "Noted about you here: tags {}; last time: {}; topics: {}",
                if note.tags.is_empty() { "(none)".to_owned() } else { note.tags.join(", ") },
                if note.summary.is_empty() { "(nothing)" } else { &note.summary },
                note.last_topics.join(", ")
            );
        }
        None => {
            let _ = writeln!(out, "Nothing noted about you in this channel.");
        }
    }
    let _ = writeln!(out, "/kuuki forget-me removes all of it.");
    Ok(out.trim_end().to_owned())
}

fn human_duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min", s / 60)
    } else {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn durations_take_units_and_a_bare_number_is_minutes() {
        assert_eq!(parse_duration("30"), Some(30 * MINUTE));
        assert_eq!(parse_duration("30m"), Some(30 * MINUTE));
        assert_eq!(parse_duration("90min"), Some(90 * MINUTE));
        assert_eq!(parse_duration("2h"), Some(120 * MINUTE));
        assert_eq!(parse_duration("1D"), Some(24 * 60 * MINUTE));
        assert_eq!(parse_duration("7d"), Some(MAX_DURATION));
        for bad in ["0", "0m", "8d", "10081", "h", "2x", "-5", "1.5h", "", "99999999999999999999d"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn changes_parse_with_their_defaults() {
        assert_eq!(parse_change("mute", &[]), Some(Change::Mute(DEFAULT_MUTE)));
        assert_eq!(parse_change("mute", &["45"]), Some(Change::Mute(45 * MINUTE)));
        assert_eq!(parse_change("mute", &["soon"]), None);
        assert_eq!(parse_change("unmute", &[]), Some(Change::Unmute));
        assert_eq!(parse_change("shadow", &[]), Some(Change::Shadow { all: false, duration: DEFAULT_SHADOW }));
        assert_eq!(parse_change("shadow", &["on"]), Some(Change::Shadow { all: false, duration: DEFAULT_SHADOW }));
        assert_eq!(parse_change("shadow", &["2h"]), Some(Change::Shadow { all: false, duration: 120 * MINUTE }));
        assert_eq!(parse_change("shadow", &["all"]), Some(Change::Shadow { all: true, duration: DEFAULT_SHADOW }));
        assert_eq!(parse_change("shadow", &["all", "3h"]), Some(Change::Shadow { all: true, duration: 180 * MINUTE }));
        assert_eq!(parse_change("shadow", &["off"]), Some(Change::ShadowOff));
        assert_eq!(parse_change("shadow", &["off", "2h"]), None);
        assert_eq!(parse_change("shadow", &["all", "2h", "more"]), None);
    }

    #[test]
    fn a_change_ends_on_the_next_whole_minute() {
        let minute = 60 * Timestamp::MICROS_PER_SECOND;
        assert_eq!(minute_after(Timestamp(10 * minute)), Timestamp(10 * minute), "already whole");
        assert_eq!(minute_after(Timestamp(10 * minute + 1)), Timestamp(11 * minute));
        assert_eq!(until_text(Timestamp(1_767_603_600 * Timestamp::MICROS_PER_SECOND)), "2026-01-05 09:00 UTC");
    }
}

/// The person a `forget` argument names: a mention (`<@U123>`, `<@U123|name>`,
/// Discord's `<@!123>`) or a bare id.
fn mentioned_user(arg: &str) -> Option<UserId> {
    let id = match arg.strip_prefix("<@").and_then(|rest| rest.strip_suffix('>')) {
        Some(inner) => inner.trim_start_matches('!').split('|').next().unwrap_or_default(),
        None => arg,
    };
    let valid = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then(|| UserId(id.to_owned().into()))
}

#[cfg(test)]
mod forget_argument_tests {
    use super::{CommandReply, mentioned_user, parse_command, parse_command_json};
    use crate::domain::UserId;

    /// Socket Mode's JSON fields make the command the form makes, way back included.
    #[test]
    fn a_socket_mode_command_reads_as_its_form_does() {
        let body =
            "command=%2Fkuuki&text=forget-me&channel_id=C1&user_id=U1&response_url=https%3A%2F%2Fhooks.slack.com%2Fx";
        let payload = serde_json::json!({
            "token": "t", "team_id": "T1", "command": "/kuuki", "text": "forget-me", "channel_id": "C1",
            "user_id": "U1", "response_url": "https://hooks.slack.com/x", "is_enterprise_install": "false",
        });
        let (form, json) = (parse_command(body.as_bytes()).unwrap(), parse_command_json(&payload).unwrap());
        assert_eq!(format!("{json:?}"), format!("{form:?}"));
        assert_eq!(json.reply(), form.reply());
        assert!(parse_command_json(&serde_json::json!({"command": "/kuuki"})).is_err(), "no channel, no command");
    }

    /// A Slack command's `response_url` becomes its way back, and stays out of logs.
    #[test]
    fn a_slash_command_keeps_its_response_url_for_the_answer_and_out_of_logs() {
        let body = "command=%2Fkuuki&text=forget-me&channel_id=C1&user_id=U1&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1%2F2%2Fsecret";
        let command = parse_command(body.as_bytes()).unwrap();
        let expected = "https://hooks.slack.com/commands/T1/2/secret".to_owned();
        assert_eq!(command.reply(), Some(CommandReply::Slack { response_url: expected }));
        let logged = format!("{command:?}");
        assert!(!logged.contains("secret") && logged.contains("forget-me"), "{logged}");
    }

    #[test]
    fn reads_mentions_and_ids() {
        for (arg, id) in [("<@U123ABC>", "U123ABC"), ("<@U1|alice>", "U1"), ("<@!8123>", "8123"), ("alice", "alice")] {
            assert_eq!(mentioned_user(arg), Some(UserId(id.into())), "{arg}");
        }
        for bad in ["<@>", "<@U1 x>", "@", "<#C1>"] {
            assert_eq!(mentioned_user(bad), None, "{bad}");
        }
    }
}
