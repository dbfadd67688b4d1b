//! Summarization (spec 001 tier two): a channel's memory is brought up to date from
//! the messages since the last summary, every `SUMMARIZE_EVERY_N_MESSAGES` or
//! `SUMMARIZE_EVERY_N_MINUTES`, whichever comes first; the workspace memory follows
//! from the channel summaries on a slower schedule.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::{
    Author, ChannelId, ChannelLine, ChannelMemory, EventKind, Job, Message, Stage, Ts, WorkspaceMemory,
};
use crate::ports::{ChannelState, LlmRequest, LlmRole, MemoryTask, PortResult};
use crate::prompts::answers::{AnswerError, answer_object, answer_strings, read_answer};
use crate::prompts::fence::fence_safe;
use crate::record::record;

/// Most new messages one summary reads (the rest wait for the next one).
const MAX_NEW_MESSAGES: usize = 200;
/// How long an N-messages summary holds its mark, so the messages handled around it
/// do not queue it again.
const IMMEDIATE_MARK: Duration = Duration::from_secs(60);
/// The workspace memory is refreshed at most once per this many summary periods.
const WORKSPACE_PERIODS: u32 = 4;
const CLAIM_KEEP: Duration = Duration::from_secs(24 * 3600);

/// Called for each handled message (`memory::queue_due`): queue a summary now when N
/// messages piled up since the last one, else one N minutes out unless one is queued
/// already.
pub async fn maybe_queue(
    deps: &Deps,
    window: &Window,
    channel: &ChannelId,
    newest: &Message,
    state: &ChannelState,
) -> PortResult<()> {
    let now = deps.clock.now();
    if deps.llm.is_none()
        || !deps.settings.memory.enabled
        || state.retry_after(MemoryTask::Summary).is_some_and(|t| t > now)
    {
        return Ok(());
    }
    let every = deps.settings.memory.summarize_every_n_messages as usize;
    // Counted in the window the caller read, not queried: at most `every` matter.
    let new = window.count_after(deps, channel, state.memory.watermark.as_ref(), &newest.ts, every).await?;
    if new == 0 {
        return Ok(());
    }
    let job = Job::Summarize { channel: channel.clone(), ts: newest.ts.clone() };
    // N messages: now (marked for a moment, so the next judgments do not queue it
    // again); otherwise N minutes out. A mark only gives way to an earlier one.
    let wait = if new >= every {
        IMMEDIATE_MARK
    } else {
        Duration::from_secs(u64::from(deps.settings.memory.summarize_every_n_minutes) * 60)
    };
    // A mark the state shows would block this one: no write. (The state may be a
    // moment old; the store's own check decides whenever a mark is written.)
    if state.mark_blocked(MemoryTask::Summary, now + wait, now) {
        return Ok(());
    }
    if deps.channels.mark_due(channel, MemoryTask::Summary, now + wait, now).await? {
        let delay = if new >= every { Duration::ZERO } else { wait };
        deps.enqueue_after(job, delay).await?;
    }
    Ok(())
}

/// Messages after the memory's watermark, oldest first, at most `limit`: a summary
/// reads forward, so nothing is skipped when more piled up than it reads at once.
async fn new_messages(
    deps: &Deps,
    channel: &ChannelId,
    memory: &ChannelMemory,
    limit: usize,
) -> PortResult<Vec<Arc<Message>>> {
    deps.messages.messages_after(channel, memory.watermark.as_ref(), limit).await
}

#[derive(Serialize)]
struct SummaryContext<'a> {
    persona_name: &'a str,
    memory: &'a ChannelMemory,
    messages: Vec<String>,
}

#[derive(Serialize)]
struct WorkspaceContext<'a> {
    workspace: &'a WorkspaceMemory,
    channel: &'a str,
    memory: &'a ChannelMemory,
}

/// Handles a SUMMARIZE job. Errors are backend failures; the queue delivers again.
pub async fn handle(deps: &Deps, channel: &ChannelId, ts: &Ts) -> PortResult<()> {
    if deps.llm.is_none() {
        return Ok(());
    }
    let state = deps.channels.channel_state(channel).await?;
    if state.retry_after(MemoryTask::Summary).is_some_and(|t| t > deps.clock.now()) {
        // Queued before the last failure; the next trigger after the wait tries again.
        return Ok(());
    }
    let memory = state.memory.clone();
    let new = new_messages(deps, channel, &memory, MAX_NEW_MESSAGES).await?;
    let now = deps.clock.now();
    let period = Duration::from_secs(u64::from(deps.settings.memory.summarize_every_n_minutes) * 60);
    // Whichever comes first: N new messages, or N minutes since the last summary.
    let due = new.len() >= deps.settings.memory.summarize_every_n_messages as usize
        || memory.updated_at.is_none_or(|at| now.seconds_since(at) >= period.as_secs_f64());
    let Some(newest) = new.last().map(|m| m.ts.clone()).filter(|_| due) else {
        // Nothing new, or summarized lately by the other trigger: clear the mark so the
        // next message sets a new one (the memory itself is left alone). A state with
        // no mark (a twin's summary cleared it) is not written: the channel's item is
        // large, and read first to be written whole.
        if state.summary_due.is_none() && state.summary_retry_after.is_none() {
            return Ok(());
        }
        return deps.channels.clear_marks(channel, MemoryTask::Summary).await;
    };
    let watermark = memory.watermark.as_ref().map_or("-", Ts::as_str);
    // A memory wiped to be made anew (a forget request) starts from no watermark again.
    let key = match memory.generation {
        0 => format!("summarize:{channel}:{watermark}"),
        generation => format!("summarize:{channel}:{generation}:{watermark}"),
    };
    match deps.ledger.claim(&key, deps.clock.now(), deps.budget.claim_lease()).await? {
        // Another delivery holds it and will do the work (or its lease runs out and
        // the next message queues it again).
        outcome if outcome.holds() => {}
        _ => return Ok(()),
    }
    let result = summarize_claimed(deps, channel, ts, memory, new, newest, &key).await;
    if result.is_err() {
        // Give the claim back so the redelivery can do the work.
        deps.ledger.release(&key).await?;
    }
    result
}

async fn summarize_claimed(
    deps: &Deps,
    channel: &ChannelId,
    ts: &Ts,
    memory: ChannelMemory,
    new: Vec<Arc<Message>>,
    newest: Ts,
    key: &str,
) -> PortResult<()> {
    let Some(llm) = &deps.llm else {
        return Ok(());
    };
    let lines: Vec<String> = new.iter().map(|m| line(deps, m)).collect();
    let prompt =
        deps.prompts.summarize(&SummaryContext { persona_name: &deps.persona.name, memory: &memory, messages: lines });
    let answer = llm
        .complete(LlmRequest {
            role: LlmRole::Summarize,
            model: deps.settings.llm.summarize_model.clone(),
            system: prompt.system,
            user: prompt.user,
            max_tokens: 800,
            temperature: deps.settings.temperature(LlmRole::Summarize),
            schema: Some(crate::prompts::answers::channel_summary()),
            subject: format!("summary of {channel}"),
        })
        .await;
    let parsed = read_answer(answer, parse_summary);
    let mut updated = match parsed {
        Ok(updated) => updated,
        Err(reason) => {
            // The next try waits a summary period.
            let period = Duration::from_secs(u64::from(deps.settings.memory.summarize_every_n_minutes) * 60);
            let task = (MemoryTask::Summary, Stage::Summarize);
            let reason = format!("unusable summary: {reason}");
            return super::give_up_for_now(deps, key, channel, ts, task, period, reason).await;
        }
    };
    let now = deps.clock.now();
    updated.updated_at = Some(now);
    updated.watermark = Some(newest);
    updated.private = memory.private || new.iter().any(|m| m.private_channel);
    updated.generation = memory.generation;
    if !deps.channels.set_channel_memory(channel, updated.clone()).await? {
        // A forget wiped the memory this summary grew from (and queued its remake):
        // what was made from it is dropped.
        tracing::info!(%channel, "a summary made before a forget wiped the memory was dropped");
        return deps.ledger.complete(key, now, CLAIM_KEEP).await;
    }
    deps.ledger.complete(key, now, CLAIM_KEEP).await?;
    // The other channels' judges read this line; a private channel's is removed. A
    // failure leaves the old line until the next summary.
    let line = (!updated.private).then(|| ChannelLine {
        channel: channel.clone(),
        line: one_line(&updated.summary),
        updated_at: now,
    });
    if let Err(error) = deps.channels.set_channel_line(channel, line).await {
        tracing::warn!(%error, "the channel's line in the workspace memory was not updated");
    }
    // The channel's summary stands whatever happens to the workspace's. A private
    // channel never feeds the workspace memory, which every channel's prompts read.
    let workspace = if updated.private {
        false
    } else {
        refresh_workspace(deps, channel, &updated).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "the workspace memory was not refreshed");
            false
        })
    };
    record(
        deps,
        channel,
        None,
        ts.clone(),
        EventKind::Summary {
            messages: new.len(),
            summary: updated.summary,
            mood: updated.mood,
            topic_keywords: updated.topic_keywords,
            active_users: updated.active_users,
            workspace,
        },
    );
    Ok(())
}

/// Folds a fresh channel memory into the workspace memory, at most once per
/// `WORKSPACE_PERIODS` summary periods. Returns whether it did.
async fn refresh_workspace(deps: &Deps, channel: &ChannelId, memory: &ChannelMemory) -> PortResult<bool> {
    let Some(llm) = &deps.llm else { return Ok(false) };
    let workspace = deps.channels.workspace_memory_without_lines(channel.workspace()).await?;
    let now = deps.clock.now();
    let period = Duration::from_secs(
        u64::from(deps.settings.memory.summarize_every_n_minutes) * 60 * u64::from(WORKSPACE_PERIODS),
    );
    if workspace.updated_at.is_some_and(|at| now.seconds_since(at) < period.as_secs_f64()) {
        return Ok(false);
    }
    let prompt = deps.prompts.workspace(&WorkspaceContext { workspace: &workspace, channel: &channel.0, memory });
    let answer = llm
        .complete(LlmRequest {
            role: LlmRole::Summarize,
            model: deps.settings.llm.summarize_model.clone(),
            system: prompt.system,
            user: prompt.user,
            max_tokens: 600,
            temperature: deps.settings.temperature(LlmRole::Summarize),
            schema: Some(crate::prompts::answers::workspace_summary()),
            subject: "workspace summary".into(),
        })
        .await;
    let Ok(updated) =
        answer.map_err(|e| e.to_string()).and_then(|a| parse_workspace(&a.text).map_err(|e| e.to_string()))
    else {
        return Ok(false);
    };
    // A forget that wiped this channel's memory meanwhile may have cleared the
    // workspace's too: what was made from the wiped memory is not written over it.
    if deps.channels.channel_state(channel).await?.memory.generation != memory.generation {
        return Ok(false);
    }
    deps.channels
        .set_workspace_memory(channel.workspace(), WorkspaceMemory { updated_at: Some(now), ..updated })
        .await?;
    Ok(true)
}

/// Characters kept of a channel's summary for the channel list.
const CHANNEL_LINE_CHARS: usize = 120;

/// The first sentence of `summary` on one line, clipped to `CHANNEL_LINE_CHARS`.
pub fn one_line(summary: &str) -> String {
    let flat = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = flat
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '。' | '！' | '？') || (matches!(c, '.' | '!' | '?') && flat[i + 1..].starts_with(' '))
        })
        .map_or(flat.len(), |(i, c)| i + c.len_utf8());
    let sentence = &flat[..end];
    if sentence.chars().count() <= CHANNEL_LINE_CHARS {
        return sentence.to_owned();
    }
    let clipped: String = sentence.chars().take(CHANNEL_LINE_CHARS - 1).collect();
    format!("{clipped}…")
}

fn line(deps: &Deps, m: &Message) -> String {
    let name = match m.author {
        Author::OwnBot => deps.persona.name.clone(),
        _ => m.user_name.clone(),
    };
    fence_safe(&format!("{name}: {}", m.text))
}

fn text(o: &serde_json::Map<String, Value>, key: &str) -> Result<String, AnswerError> {
    o.get(key).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| AnswerError::must_be(key, "be a string"))
}

/// A list of strings that must be there (a summary's lists are never left out).
fn list(o: &serde_json::Map<String, Value>, key: &str) -> Result<Vec<String>, AnswerError> {
    match o.get(key) {
        Some(v @ Value::Array(_)) => answer_strings(Some(v), key),
        _ => Err(AnswerError::must_be(key, "be a list")),
    }
}

/// `{"summary", "history", "mood", "topic_keywords", "active_users"}`; anything else is
/// an error and changes nothing.
pub fn parse_summary(raw: &str) -> Result<ChannelMemory, AnswerError> {
    let o = answer_object(raw)?;
    Ok(ChannelMemory {
        summary: text(&o, "summary")?,
        history: text(&o, "history")?,
        mood: text(&o, "mood")?,
        topic_keywords: list(&o, "topic_keywords")?,
        active_users: list(&o, "active_users")?,
        updated_at: None,
        watermark: None,
        generation: 0,
        private: false,
    })
}

/// `{"history", "recent_events"}`.
pub fn parse_workspace(raw: &str) -> Result<WorkspaceMemory, AnswerError> {
    let o = answer_object(raw)?;
    Ok(WorkspaceMemory {
        history: text(&o, "history")?,
        recent_events: text(&o, "recent_events")?,
        updated_at: None,
        channel_lines: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_strict_json() {
        let m = parse_summary(
            r#"```json
{"summary": "デプロイの話", "history": "毎週金曜にリリース", "mood": "落ち着いている", "topic_keywords": ["デプロイ"], "active_users": ["alice"]}
```"#,
        )
        .unwrap();
        assert_eq!(m.topic_keywords, vec!["デプロイ"]);
        for bad in [
            "a summary in prose",
            r#"{"summary": "x", "history": "y", "mood": "z", "topic_keywords": "deploy", "active_users": []}"#,
            r#"{"summary": "x", "mood": "z", "topic_keywords": [], "active_users": []}"#,
            r#"[{"summary": "x"}]"#,
        ] {
            assert!(parse_summary(bad).is_err(), "{bad}");
        }
        assert!(parse_workspace(r#"{"history": "h", "recent_events": "r"}"#).is_ok());
        assert!(parse_workspace(r#"{"history": "h"}"#).is_err());
    }

    #[test]
    fn a_channels_line_is_its_summarys_first_sentence_clipped() {
        assert_eq!(one_line("デプロイが止まった。bob が調べている。"), "デプロイが止まった。");
        assert_eq!(one_line("The deploy stalled.  Bob is on it."), "The deploy stalled.");
        assert_eq!(one_line("v1.2 shipped\non Friday"), "v1.2 shipped on Friday", "a dot inside a word is no end");
        let long = "あ".repeat(300);
        let clipped = one_line(&long);
        assert_eq!(clipped.chars().count(), CHANNEL_LINE_CHARS);
        assert!(clipped.ends_with('…'));
        assert_eq!(one_line(""), "");
    }
}
