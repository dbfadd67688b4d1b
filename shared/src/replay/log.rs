//! The decision log as JSON lines, with the transcript's channel and thread names.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use serde::Serialize;
use serde_json::{Value, json};

use super::REPLAY_EPOCH;
use crate::adapters::llm::RoleUsage;
use crate::domain::{Decision, Event, EventKind, ResponseType, Timestamp, Ts};
use crate::ports::LlmRole;

/// What a replay did, for the final `stats` line and the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    pub messages: u64,
    pub judgments: u64,
    pub llm_judgments: u64,
    /// LLM judge answers that were not the JSON asked for (or calls that failed).
    pub llm_unusable: u64,
    pub summaries: u64,
    pub reflections: u64,
    pub superseded: u64,
    pub dropped: u64,
    pub respond_failed: u64,
    /// Job deliveries that failed (each is retried, or dead-lettered at the last).
    pub failed_deliveries: u64,
    pub llm_calls: BTreeMap<&'static str, u64>,
    pub llm_tokens: BTreeMap<&'static str, u64>,
    pub responses: BTreeMap<&'static str, u64>,
    /// Seconds of transcript time replayed.
    pub duration_seconds: f64,
    /// Input and output tokens apart, by role (for cost estimates; not in the log).
    #[serde(skip)]
    pub llm_usage: BTreeMap<&'static str, RoleUsage>,
}

#[derive(Serialize)]
struct Line<'a> {
    t: f64,
    kind: &'a str,
    channel: &'a str,
    thread: Option<&'a str>,
    /// When the message a judgment or response is about was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    msg_t: Option<Value>,
    #[serde(flatten)]
    body: Value,
}

/// Turns events into decision-log lines and hands them on: to a writer, and to a list
/// when a report wants them.
pub struct LogWriter<'a> {
    out: &'a mut dyn Write,
    keep: Option<Vec<Value>>,
    thread_names: HashMap<(String, Ts), String>,
    stats: Stats,
    io_error: Option<std::io::Error>,
}

impl<'a> LogWriter<'a> {
    pub fn new(out: &'a mut dyn Write, keep_lines: bool) -> Self {
        Self {
            out,
            keep: keep_lines.then(Vec::new),
            thread_names: HashMap::new(),
            stats: Stats::default(),
            io_error: None,
        }
    }

    /// The lines written so far, when made with `keep_lines`.
    pub fn kept(&self) -> &[Value] {
        self.keep.as_deref().unwrap_or_default()
    }

    /// The first write error, if the output failed (a closed pipe).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.io_error.as_ref()
    }

    pub(crate) fn name_thread(&mut self, channel: &str, root: &Ts, name: &str) {
        self.thread_names.entry((channel.to_owned(), root.clone())).or_insert_with(|| name.to_owned());
    }

    pub(crate) fn count_message(&mut self) {
        self.stats.messages += 1;
    }

    pub(crate) fn count_failed_deliveries(&mut self, failed: u32) {
        self.stats.failed_deliveries += u64::from(failed);
    }

    pub(crate) fn write_events(&mut self, events: Vec<Event>) {
        for event in events {
            self.tally(&event.kind);
            let thread_root = match &event.kind {
                EventKind::Respond { posted_in, .. } => posted_in.as_ref(),
                _ => event.thread_root.as_ref(),
            };
            let thread = thread_root.map(|root| {
                self.thread_names
                    .get(&(event.channel.0.clone(), root.clone()))
                    .cloned()
                    .unwrap_or_else(|| root.as_str().to_owned())
            });
            let line = Line {
                t: seconds(event.at),
                kind: event.kind.name(),
                channel: &event.channel.0,
                thread: thread.as_deref(),
                msg_t: (!matches!(event.kind, EventKind::Message { .. })).then(|| ts_seconds(&event.ts)),
                body: body(&event),
            };
            self.emit(&line);
        }
    }

    fn emit(&mut self, line: &impl Serialize) {
        if self.io_error.is_none() {
            let written = serde_json::to_writer(&mut *self.out, line)
                .map_err(std::io::Error::from)
                .and_then(|_| self.out.write_all(b"\n"));
            if let Err(e) = written {
                self.io_error = Some(e);
            }
        }
        if let Some(keep) = &mut self.keep {
            keep.push(serde_json::to_value(line).expect("log lines serialize"));
        }
    }

    fn tally(&mut self, kind: &EventKind) {
        let s = &mut self.stats;
        match kind {
            EventKind::Judge { llm_called, llm_error, .. } => {
                s.judgments += 1;
                s.llm_judgments += u64::from(*llm_called);
                s.llm_unusable += u64::from(llm_error.is_some());
            }
            EventKind::Superseded { .. } => s.superseded += 1,
            EventKind::Dropped { .. } => s.dropped += 1,
            EventKind::RespondFailed { .. } => s.respond_failed += 1,
            EventKind::Respond { response_type, .. } => *s.responses.entry(response_type.as_str()).or_default() += 1,
            EventKind::Summary { .. } => s.summaries += 1,
            EventKind::Reflect { .. } => s.reflections += 1,
            _ => {}
        }
    }

    pub(crate) fn finish(&mut self, now: Timestamp, usage: BTreeMap<LlmRole, RoleUsage>) -> Stats {
        let mut stats = std::mem::take(&mut self.stats);
        for role in LlmRole::ALL {
            let u = usage.get(&role).cloned().unwrap_or_default();
            stats.llm_calls.insert(role.as_str(), u.calls);
            stats.llm_tokens.insert(role.as_str(), u.input_tokens + u.output_tokens);
            stats.llm_usage.insert(role.as_str(), u);
        }
        for t in [ResponseType::ReactOnly, ResponseType::ShortAck, ResponseType::FullResponse] {
            stats.responses.entry(t.as_str()).or_default();
        }
        stats.duration_seconds = seconds(now);
        let mut body = serde_json::to_value(&stats).expect("stats serialize");
        if let Some(map) = body.as_object_mut() {
            map.remove("duration_seconds");
        }
        self.emit(&Line { t: stats.duration_seconds, kind: "stats", channel: "*", thread: None, msg_t: None, body });
        let _ = self.out.flush();
        stats
    }
}

/// Seconds since the replay started, to the millisecond.
fn seconds(at: Timestamp) -> f64 {
    (at.seconds_since(REPLAY_EPOCH) * 1000.0).round() / 1000.0
}

fn body(event: &Event) -> Value {
    match &event.kind {
        EventKind::Message { user, text, author, trigger, .. } => {
            let mut v = json!({"user": user, "text": text});
            if *author != crate::domain::Author::Human {
                v["author"] = json!(author);
            }
            if let Some(trigger) = trigger {
                v["trigger"] = json!(trigger);
            }
            v
        }
        EventKind::Edited { text } => json!({"text": text}),
        EventKind::Deleted => json!({}),
        EventKind::Judge {
            user,
            score,
            breakdown,
            decision,
            llm_called,
            respond,
            response_type,
            delay_seconds,
            llm,
            llm_error,
            llm_cached,
            llm_usage,
            reason,
        } => {
            let mut v = json!({
                "user": user, "score": score, "breakdown": breakdown, "decision": decision,
                "llm_called": llm_called, "respond": respond, "reason": reason,
            });
            if let Some(rt) = response_type {
                v["response_type"] = json!(rt);
                v["delay_seconds"] = json!(delay_seconds);
            } else if *decision == Decision::Wait {
                v["delay_seconds"] = json!(delay_seconds);
            }
            if let Some(llm) = llm {
                v["llm"] = json!(llm);
            }
            if let Some(e) = llm_error {
                v["llm_error"] = json!(e);
            }
            if *llm_cached {
                v["llm_cached"] = json!(true);
            }
            if let Some(u) = llm_usage {
                v["llm_tokens"] = json!({"input": u.input_tokens, "output": u.output_tokens});
            }
            v
        }
        EventKind::Superseded { stage, by } => json!({"stage": stage, "by_t": ts_seconds(by)}),
        EventKind::Dropped { stage, reason } => json!({"stage": stage, "reason": reason}),
        EventKind::Respond { mode, response_type, text, emoji, shadow, facts, .. } => {
            let mut v = json!({"type": response_type, "mode": mode});
            if !facts.is_empty() {
                v["facts"] = json!(facts);
            }
            if *shadow {
                v["shadow"] = json!(true);
            }
            if let Some(text) = text {
                v["text"] = json!(text);
            }
            if let Some(emoji) = emoji {
                v["emoji"] = json!(emoji);
            }
            v
        }
        EventKind::RespondFailed { mode, response_type, reason, notice } => {
            let mut v = json!({"type": response_type, "mode": mode, "reason": reason});
            if let Some(notice) = notice {
                v["notice"] = json!(notice);
            }
            v
        }
        EventKind::Reflect { messages, facts_new, facts_strengthened, profiles, embedding_error } => {
            let mut v = json!({"messages": messages, "facts_new": facts_new, "facts_strengthened": facts_strengthened, "profiles": profiles});
            if let Some(error) = embedding_error {
                v["embedding_error"] = json!(error);
            }
            v
        }
        EventKind::Forget { user, messages, facts_removed, facts_edited, notes, summaries } => json!({
            "user": user, "messages": messages, "facts_removed": facts_removed, "facts_edited": facts_edited,
            "notes": notes, "summaries": summaries,
        }),
        EventKind::Command { user, command, answer, announced } => {
            let mut v = json!({"user": user, "command": command, "answer": answer});
            if let Some(announced) = announced {
                v["announced"] = json!(announced);
            }
            v
        }
        EventKind::Summary { messages, summary, mood, topic_keywords, active_users, workspace } => json!({
            "messages": messages, "summary": summary, "mood": mood,
            "topic_keywords": topic_keywords, "active_users": active_users, "workspace": workspace,
        }),
    }
}

/// A replay ts back to transcript seconds (replay ts are minted from the virtual clock).
fn ts_seconds(ts: &Ts) -> Value {
    let (int, frac) = ts.as_str().split_once('.').unwrap_or((ts.as_str(), "0"));
    match (int.parse::<i64>(), format!("0.{frac}").parse::<f64>()) {
        (Ok(secs), Ok(frac)) => json!(seconds(Timestamp::from_secs_f64(secs as f64 + frac))),
        _ => json!(ts.as_str()),
    }
}
