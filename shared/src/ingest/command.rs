//! The `/kuuki` slash command: `status`, `why`, `memory`, `forget-me`, `mute [minutes]`,
//! `unmute`, `shadow on|off`. Answers are ephemeral (only the caller sees them).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

use crate::deps::Deps;
use crate::domain::{ChannelId, Decision, Familiarity, Timestamp, UserId};
use crate::ports::PortResult;

/// The form fields of a slash command request that kuuki reads.
#[derive(Debug, Clone, Deserialize)]
pub struct SlashCommand {
    pub command: String,
    #[serde(default)]
    pub text: String,
    pub channel_id: String,
    pub user_id: String,
}

#[derive(Debug, Error, PartialEq)]
#[error("malformed slash command: {0}")]
pub struct CommandError(pub String);

pub fn parse_command(body: &[u8]) -> Result<SlashCommand, CommandError> {
    serde_urlencoded::from_bytes(body).map_err(|e| CommandError(e.to_string()))
}

/// Mute lasts this long when no minutes are given.
const DEFAULT_MUTE_MINUTES: u64 = 60;
const MAX_MUTE_MINUTES: u64 = 7 * 24 * 60;

const USAGE: &str = "Usage: /kuuki status | why | memory | forget-me | mute [minutes] | unmute | shadow on|off";

/// Runs the command, records it and its answer in the decision log, and returns the
/// ephemeral text to show.
pub async fn run_command(deps: &Deps, command: &SlashCommand) -> PortResult<String> {
    let answer = answer_command(deps, command).await?;
    let channel = ChannelId(command.channel_id.clone());
    let text = command.text.trim();
    crate::record::record(
        deps,
        &channel,
        None,
        crate::domain::Ts::from_timestamp(deps.clock.now()),
        crate::domain::EventKind::Command {
            user: crate::domain::UserId(command.user_id.clone()),
            command: if text.is_empty() { command.command.clone() } else { format!("{} {text}", command.command) },
            answer: answer.clone(),
        },
    );
    Ok(answer)
}

async fn answer_command(deps: &Deps, command: &SlashCommand) -> PortResult<String> {
    let channel = ChannelId(command.channel_id.clone());
    let mut words = command.text.split_whitespace();
    let verb = words.next().unwrap_or("status").to_ascii_lowercase();
    let arg = words.next();
    let now = deps.clock.now();
    Ok(match (verb.as_str(), arg) {
        ("status", _) => status(deps, &channel, now).await?,
        ("why", _) => why(deps, &channel).await?,
        ("memory", _) => memory(deps, &channel, &UserId(command.user_id.clone()), now).await?,
        ("forget-me", _) => {
            let user = UserId(command.user_id.clone());
            crate::memory::forget::forget_user(deps, &user, &channel).await?.describe("you")
        }
        ("mute", minutes) => {
            let minutes = match minutes.map(str::parse::<u64>) {
                None => DEFAULT_MUTE_MINUTES,
                Some(Ok(m)) if (1..=MAX_MUTE_MINUTES).contains(&m) => m,
                Some(_) => return Ok(format!("mute takes minutes from 1 to {MAX_MUTE_MINUTES}. {USAGE}")),
            };
            let until = now + Duration::from_secs(minutes * 60);
            deps.channels.set_muted(&channel, Some(until)).await?;
            format!(
                "Muted here until {}: kuuki will not join in unasked, and still answers mentions.",
                until.to_utc_string()
            )
        }
        ("unmute", _) => {
            deps.channels.set_muted(&channel, None).await?;
            "Unmuted: kuuki may join in here again.".into()
        }
        ("shadow", Some(on @ ("on" | "off"))) => {
            let on = on == "on";
            deps.channels.set_shadow(&channel, on).await?;
            if on {
                "Shadow mode on: kuuki judges and logs here but posts nothing.".into()
            } else {
                "Shadow mode off: kuuki posts here again.".into()
            }
        }
        _ => USAGE.into(),
    })
}

async fn status(deps: &Deps, channel: &ChannelId, now: Timestamp) -> PortResult<String> {
    let s = &deps.settings;
    let state = deps.channels.channel_state(channel).await?;
    let mut out = String::new();
    let participation = if !s.ambient_enabled() {
        "answers mentions only (AUTONOMOUS_RESPONSE_ENABLED or MEMORY_ENABLED is off)".to_owned()
    } else if let Some(until) = state.muted_until.filter(|u| *u > now) {
        format!("muted until {} (mentions still answered)", until.to_utc_string())
    } else {
        "joins in when the room calls for it".to_owned()
    };
    let _ = writeln!(
        out,
        "kuuki here: {participation}{}",
        if state.shadow { ", in shadow mode (posts nothing)" } else { "" }
    );
    if s.llm_judge_enabled && deps.llm.is_some() {
        let _ = writeln!(
            out,
            "Judge: rules, then the LLM for scores between {} and {} (at or above {} responds, at or below {} skips)",
            s.judge_llm_threshold_low,
            s.judge_llm_threshold_high,
            s.judge_llm_threshold_high,
            s.judge_llm_threshold_low
        );
    } else {
        let _ = writeln!(out, "Judge: rules only, responds at a score of {} or more", s.judge_score_threshold);
    }
    match state.last_response_at {
        None => {
            let _ = writeln!(out, "No response here yet: no cooldown, no engagement.");
        }
        Some(at) => {
            let ago = now.seconds_since(at).max(0.0);
            let cooldown_left = s.cooldown.as_secs_f64() - ago;
            let engaged_left = s.engagement_duration.as_secs_f64() - ago;
            let _ = write!(out, "Last response here {} ago", human_duration(ago));
            if cooldown_left > 0.0 {
                let _ = write!(out, "; cooldown (-50) for {} more", human_duration(cooldown_left));
            }
            if engaged_left > 0.0 {
                let _ = write!(out, "; engaged (+{}) for {} more", s.engagement_boost, human_duration(engaged_left));
            }
            let _ = writeln!(out, ".");
        }
    }
    let _ = writeln!(
        out,
        "Responses in the last 30 minutes: {}",
        state.interventions_within(now, Duration::from_secs(30 * 60))
    );
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

async fn why(deps: &Deps, channel: &ChannelId) -> PortResult<String> {
    let state = deps.channels.channel_state(channel).await?;
    let Some(j) = &state.last_judgment else {
        return Ok("No judgment in this channel yet.".into());
    };
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
    let mut out = format!(
        "Last judgment here ({}) on <@{}>'s message \"{quoted}\": score {} ({decision}) -> {outcome}.\nRules: {breakdown}\nReason: {}",
        j.at.to_utc_string(),
        j.user,
        j.score,
        j.reason
    );
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
    let half_life = deps.settings.fact_decay_half_life_days;
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
    if !deps.settings.user_profile_enabled {
        let _ = writeln!(out, "kuuki keeps no profiles (USER_PROFILE_ENABLED is off).");
        return Ok(out.trim_end().to_owned());
    }
    let profile = deps.facts.profile(caller).await?;
    let interactions = profile.as_ref().map_or(0, |p| p.interactions);
    let familiarity = Familiarity::of(interactions, deps.settings.familiarity_thresholds);
    let _ = writeln!(
        out,
        "About you: {interactions} message(s) seen, {} calling kuuki, familiarity {}.",
        profile.as_ref().map_or(0, |p| p.bot_mentions),
        familiarity.as_str()
    );
    match deps.facts.user_note(channel, caller).await? {
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
