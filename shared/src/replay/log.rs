//! The decision log as JSON lines, with the transcript's channel and thread names.

use std::collections::BTreeMap;

// foldhash, not SipHash: every line of a thread looks up the thread's name.
use foldhash::{HashMap, HashMapExt};
use std::io::Write;

use serde::Serialize;
use serde_json::Value;
use smol_str::SmolStr;

use super::REPLAY_EPOCH;
use crate::adapters::llm::RoleUsage;
use crate::domain::{
    Author, Decision, DirectTrigger, Event, EventKind, FactUse, LlmVerdict, RespondMode, ResponseType, Stage,
    Timestamp, Ts, TsMap, UserId,
};
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
struct Line<'a, B> {
    t: f64,
    kind: &'a str,
    channel: &'a str,
    thread: Option<&'a str>,
    /// When the message a judgment or response is about was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    msg_t: Option<MsgT<'a>>,
    #[serde(flatten)]
    body: B,
}

/// Turns events into decision-log lines and hands them on: to a writer, and to a list
/// when a report wants them.
pub struct LogWriter<'a> {
    out: &'a mut dyn Write,
    keep: Option<Vec<Value>>,
    /// Channel -> the transcript's names for its threads, by root (named at a
    /// thread's first line, so nearly in order).
    thread_names: HashMap<String, TsMap<SmolStr>>,
    stats: Stats,
    io_error: Option<std::io::Error>,
    /// One line at a time, reused: the output is written once a line, not once a token.
    line: Vec<u8>,
}

impl<'a> LogWriter<'a> {
    pub fn new(out: &'a mut dyn Write, keep_lines: bool) -> Self {
        Self {
            out,
            keep: keep_lines.then(Vec::new),
            thread_names: HashMap::new(),
            stats: Stats::default(),
            io_error: None,
            line: Vec::new(),
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

    /// Makes room for the names of `threads` more threads in `channel`.
    pub(crate) fn make_room_for_threads(&mut self, channel: &str, threads: usize) {
        self.names_in(channel).reserve(threads);
    }

    pub(crate) fn name_thread(&mut self, channel: &str, root: &Ts, name: &str) {
        self.names_in(channel).get_or_insert_with(root, || name.into());
    }

    /// The thread names of `channel`, made when missing (the name copied only then).
    fn names_in(&mut self, channel: &str) -> &mut TsMap<SmolStr> {
        if !self.thread_names.contains_key(channel) {
            self.thread_names.insert(channel.to_owned(), TsMap::default());
        }
        self.thread_names.get_mut(channel).expect("present or just made")
    }

    pub(crate) fn count_message(&mut self) {
        self.stats.messages += 1;
    }

    pub(crate) fn count_failed_deliveries(&mut self, failed: u32) {
        self.stats.failed_deliveries += u64::from(failed);
    }

    /// Writes `events` and empties the list (its room is kept for the next).
    pub(crate) fn write_events(&mut self, events: &mut Vec<Event>) {
        // Read in place and dropped together: an event is a few hundred bytes, and
        // draining would move each out first.
        for event in events.iter() {
            self.tally(&event.kind);
            let thread_root = match &event.kind {
                EventKind::Respond { posted_in, .. } => posted_in.as_ref(),
                _ => event.thread_root.as_ref(),
            };
            let thread = thread_root.map(|root| {
                self.thread_names
                    .get(event.channel.as_str())
                    .and_then(|names| names.get(root))
                    .map_or(root.as_str(), SmolStr::as_str)
            });
            let line = Line {
                t: seconds(event.at),
                kind: event.kind.name(),
                channel: &event.channel.0,
                thread,
                msg_t: (!matches!(event.kind, EventKind::Message { .. })).then(|| ts_seconds(&event.ts)),
                body: body(event),
            };
            emit(&mut *self.out, &mut self.line, &mut self.keep, &mut self.io_error, &line);
        }
        events.clear();
    }

    fn emit(&mut self, line: &impl Serialize) {
        emit(&mut *self.out, &mut self.line, &mut self.keep, &mut self.io_error, line);
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

/// Writes one line (the first write error is kept; later lines are not written) and
/// keeps it as a value when asked. Takes the writer's parts, so a line may borrow the
/// writer's thread names.
fn emit(
    out: &mut dyn Write,
    buffer: &mut Vec<u8>,
    keep: &mut Option<Vec<Value>>,
    io_error: &mut Option<std::io::Error>,
    line: &impl Serialize,
) {
    if io_error.is_none() {
        buffer.clear();
        let written = serde_json::to_writer(&mut *buffer, line).map_err(std::io::Error::from).and_then(|_| {
            buffer.push(b'\n');
            out.write_all(buffer)
        });
        if let Err(e) = written {
            *io_error = Some(e);
        }
    }
    if let Some(keep) = keep {
        keep.push(serde_json::to_value(line).expect("log lines serialize"));
    }
}

/// Seconds since the replay started, to the millisecond.
fn seconds(at: Timestamp) -> f64 {
    (at.seconds_since(REPLAY_EPOCH) * 1000.0).round() / 1000.0
}

/// A decision-log line's fields after the common ones, typed and borrowed from the
/// event: written straight to the output (no `serde_json::Value` built per line).
#[derive(Serialize)]
#[serde(untagged)]
enum Body<'a> {
    Message {
        user: &'a UserId,
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        author: Option<Author>,
        #[serde(skip_serializing_if = "Option::is_none")]
        trigger: Option<&'a DirectTrigger>,
    },
    Edited {
        text: &'a str,
    },
    Deleted {},
    Judge {
        user: &'a UserId,
        score: i32,
        breakdown: &'a BTreeMap<crate::domain::RuleName, i32>,
        decision: Decision,
        llm_called: bool,
        respond: bool,
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        response_type: Option<ResponseType>,
        #[serde(skip_serializing_if = "Option::is_none")]
        delay_seconds: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        llm: Option<&'a LlmVerdict>,
        #[serde(skip_serializing_if = "Option::is_none")]
        llm_error: Option<&'a str>,
        #[serde(skip_serializing_if = "is_false")]
        llm_cached: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        llm_tokens: Option<Tokens>,
        /// Made by a question's pick-up (docs/design.md §7.7).
        #[serde(skip_serializing_if = "is_false")]
        pick_up: bool,
    },
    Superseded {
        stage: Stage,
        by_t: MsgT<'a>,
    },
    Dropped {
        stage: Stage,
        reason: &'a str,
    },
    Respond {
        #[serde(rename = "type")]
        response_type: ResponseType,
        mode: RespondMode,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        facts: &'a [FactUse],
        #[serde(skip_serializing_if = "is_false")]
        shadow: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        emoji: Option<&'a str>,
    },
    RespondFailed {
        #[serde(rename = "type")]
        response_type: ResponseType,
        mode: RespondMode,
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        notice: Option<&'a str>,
    },
    Reflect {
        messages: usize,
        facts_new: usize,
        facts_strengthened: usize,
        profiles: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        embedding_error: Option<&'a str>,
    },
    Forget {
        user: Option<&'a UserId>,
        messages: usize,
        facts_removed: usize,
        facts_edited: usize,
        notes: usize,
        summaries: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        server: Option<&'a str>,
        #[serde(skip_serializing_if = "is_zero")]
        unplaced: usize,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        late: bool,
    },
    Command {
        user: &'a UserId,
        command: &'a str,
        answer: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        announced: Option<&'a str>,
    },
    Summary {
        messages: usize,
        summary: &'a str,
        mood: &'a str,
        topic_keywords: &'a [String],
        active_users: &'a [String],
        workspace: bool,
    },
    SlackAccess {
        gone: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        team: Option<&'a str>,
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        purge_at: Option<Timestamp>,
    },
    Purge {
        team: &'a str,
        channels: usize,
        messages: usize,
        facts: usize,
        notes: usize,
        profiles: usize,
    },
    Feedback {
        signal: crate::domain::talkativeness::SignalKind,
        #[serde(skip_serializing_if = "Option::is_none")]
        user: Option<&'a UserId>,
        /// When kuuki's post it is about was written (transcript seconds).
        #[serde(skip_serializing_if = "Option::is_none")]
        post_t: Option<MsgT<'a>>,
        weight: f64,
        offset: f64,
        #[serde(skip_serializing_if = "is_false")]
        undone: bool,
    },
}

#[derive(Serialize)]
struct Tokens {
    input: u64,
    output: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn body(event: &Event) -> Body<'_> {
    match &event.kind {
        EventKind::Message { message, trigger } => Body::Message {
            user: &message.0.user,
            text: &message.0.text,
            author: (message.0.author != Author::Human).then_some(message.0.author),
            trigger: trigger.as_ref(),
        },
        EventKind::Edited { text } => Body::Edited { text },
        EventKind::Deleted => Body::Deleted {},
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
            pick_up,
        } => Body::Judge {
            user,
            score: *score,
            breakdown,
            decision: *decision,
            llm_called: *llm_called,
            respond: *respond,
            reason,
            response_type: *response_type,
            delay_seconds: (response_type.is_some() || *decision == Decision::Wait).then_some(*delay_seconds),
            llm: llm.as_ref(),
            llm_error: llm_error.as_deref(),
            llm_cached: *llm_cached,
            llm_tokens: llm_usage.as_ref().map(|u| Tokens { input: u.input_tokens, output: u.output_tokens }),
            pick_up: *pick_up,
        },
        EventKind::Superseded { stage, by } => Body::Superseded { stage: *stage, by_t: ts_seconds(by) },
        EventKind::Dropped { stage, reason } => Body::Dropped { stage: *stage, reason },
        EventKind::Respond { mode, response_type, text, emoji, shadow, facts, .. } => Body::Respond {
            response_type: *response_type,
            mode: *mode,
            facts,
            shadow: *shadow,
            text: text.as_deref(),
            emoji: emoji.as_deref(),
        },
        EventKind::RespondFailed { mode, response_type, reason, notice } => {
            Body::RespondFailed { response_type: *response_type, mode: *mode, reason, notice: notice.as_deref() }
        }
        EventKind::Reflect { messages, facts_new, facts_strengthened, profiles, embedding_error } => Body::Reflect {
            messages: *messages,
            facts_new: *facts_new,
            facts_strengthened: *facts_strengthened,
            profiles: *profiles,
            embedding_error: embedding_error.as_deref(),
        },
        EventKind::Forget { user, messages, facts_removed, facts_edited, notes, summaries, server, unplaced, late } => {
            Body::Forget {
                user: user.as_ref(),
                messages: *messages,
                facts_removed: *facts_removed,
                facts_edited: *facts_edited,
                notes: *notes,
                summaries: *summaries,
                server: server.as_deref(),
                unplaced: *unplaced,
                late: *late,
            }
        }
        EventKind::Command { user, command, answer, announced } => {
            Body::Command { user, command, answer, announced: announced.as_deref() }
        }
        EventKind::Summary { messages, summary, mood, topic_keywords, active_users, workspace } => {
            Body::Summary { messages: *messages, summary, mood, topic_keywords, active_users, workspace: *workspace }
        }
        EventKind::SlackAccess { gone, team, reason, purge_at } => {
            Body::SlackAccess { gone: *gone, team: team.as_deref(), reason, purge_at: *purge_at }
        }
        EventKind::Purge { team, channels, messages, facts, notes, profiles } => Body::Purge {
            team,
            channels: *channels,
            messages: *messages,
            facts: *facts,
            notes: *notes,
            profiles: *profiles,
        },
        EventKind::Feedback { signal, user, post, weight, offset, undone } => Body::Feedback {
            signal: *signal,
            user: user.as_ref(),
            post_t: post.as_ref().map(ts_seconds),
            weight: rounded(*weight),
            offset: rounded(*offset),
            undone: *undone,
        },
    }
}

/// Two decimals: an offset decays continuously, and a log line reads better without
/// a float's tail.
fn rounded(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// When the message a line is about was written: transcript seconds, or the raw ts
/// when it is not a number.
#[derive(Serialize)]
#[serde(untagged)]
enum MsgT<'a> {
    Seconds(f64),
    Raw(&'a str),
}

/// A replay ts back to transcript seconds (replay ts are minted from the virtual clock),
/// from the number the ts holds (no text parsed: every line has one).
fn ts_seconds(ts: &Ts) -> MsgT<'_> {
    match ts.approximate() {
        // Past i64 seconds a time cannot be a replay's.
        Some(secs) if secs < i64::MAX as f64 => MsgT::Seconds(seconds(Timestamp::from_secs_f64(secs))),
        _ => MsgT::Raw(ts.as_str()),
    }
}

/// Leaves a zero count out of a line (`serde(skip_serializing_if)`).
fn is_zero(n: &usize) -> bool {
    *n == 0
}
