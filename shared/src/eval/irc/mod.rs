//! `kuuki eval irc`: the measure the project is judged by (`../shared/irc/README.md`),
//! in process. Each annotated IRC log (Kummerfeld et al., ACL 2019, CC-BY-4.0) is
//! replayed through the whole pipeline and scored as the reference `measure.py` scores
//! it: questions people answered and kuuki posted on (barge-ins), questions left
//! hanging that kuuki took up (pick-ups), posts and LLM judge calls per 1,000 messages.
//!
//! - `corpus.rs`: the log and annotation files (public, for training on the logs too);
//! - `transcript.rs`: a log's lines as a replay transcript;
//! - `questions.rs`: answered and hanging questions;
//! - `attribution.rs`: which question each post was about;
//! - `report.rs`: the reference's lines and a table.

pub mod attribution;
pub mod boosting;
pub mod corpus;
pub mod questions;
pub mod report;
pub mod training;
pub mod transcript;

pub use corpus::{ChatLine, CorpusError, IrcLog, IrcMessage, SHARED_TRAIN_DIR, read_log, read_logs};
pub use questions::{Fate, Question};

use std::ops::AddAssign;

use serde::Serialize;
use thiserror::Error;

use crate::ports::LlmRole;
use crate::replay::{self, LogWriter, MAX_T, ReplayError, ReplayOptions};

/// The reference's scripted model: the judge says "respond" to every line with `?` it is
/// asked about (`eval/irc/policy.llm.jsonl`, line for line the measure's script).
pub const POLICY: &str = include_str!("../../../../eval/irc/policy.llm.jsonl");
/// The reference's seed for the judge's jitter.
pub const SEED: u64 = 7;
/// The settings the reference replays with, before the caller's own.
pub const SETTINGS: [&str; 2] = ["AUTONOMOUS_RESPONSE_ENABLED=true", "PROMPT_LANGUAGE=en"];

/// A log's figures, or the sums over logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Replayed messages (the context lines included).
    pub messages: u64,
    /// kuuki's posts (replies and acknowledgements; not reactions).
    pub posts: u64,
    pub reactions: u64,
    pub answered_qs: u64,
    /// Answered questions kuuki posted on, before or after the people.
    pub barge_ins: u64,
    pub hanging_qs: u64,
    /// Hanging questions kuuki posted on.
    pub pick_ups: u64,
    pub llm_judge_calls: u64,
}

impl AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.messages += o.messages;
        self.posts += o.posts;
        self.reactions += o.reactions;
        self.answered_qs += o.answered_qs;
        self.barge_ins += o.barge_ins;
        self.hanging_qs += o.hanging_qs;
        self.pick_ups += o.pick_ups;
        self.llm_judge_calls += o.llm_judge_calls;
    }
}

impl Counts {
    pub fn posts_per_thousand_messages(&self) -> f64 {
        per_thousand(self.posts, self.messages)
    }

    pub fn judge_calls_per_thousand_messages(&self) -> f64 {
        per_thousand(self.llm_judge_calls, self.messages)
    }

    /// Barge-ins in percent of the answered questions (0 without any, as the reference).
    pub fn barge_in_percent(&self) -> f64 {
        percent(self.barge_ins, self.answered_qs)
    }

    /// Pick-ups in percent of the hanging questions (0 without any).
    pub fn pick_up_percent(&self) -> f64 {
        percent(self.pick_ups, self.hanging_qs)
    }
}

fn per_thousand(n: u64, messages: u64) -> f64 {
    1000.0 * n as f64 / messages.max(1) as f64
}

fn percent(n: u64, of: u64) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

/// One log replayed and scored.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRun {
    pub name: String,
    pub counts: Counts,
    /// The answered questions kuuki posted on, and the hanging ones, in line order.
    pub barge_ins: Vec<Question>,
    pub pick_ups: Vec<Question>,
    /// What kuuki last decided about each hanging question it did not take up, counted
    /// by reason ([`attribution::last_decisions`]).
    pub left_hanging: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Error)]
pub enum IrcError {
    #[error("no chat lines between lines {from} and {until}")]
    NoMessages { from: usize, until: usize },
    #[error("line {line}: {reason}")]
    Unreplayable { line: usize, reason: String },
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// Replays `log` with `options` (the reference's: [`SETTINGS`], [`SEED`], [`POLICY`]) and
/// scores it.
pub async fn run_log(log: &IrcLog, options: ReplayOptions) -> Result<LogRun, IrcError> {
    let (from, until) = (transcript::CONTEXT_FROM, transcript::REPLAYED_UNTIL);
    let built = transcript::build_transcript(&log.lines, from, until);
    if built.said.is_empty() {
        return Err(IrcError::NoMessages { from, until });
    }
    // What `kuuki replay` refuses in a transcript file, refused here too.
    for s in &built.said {
        let reason = if !(0.0..=MAX_T).contains(&s.t) {
            format!("t {} is not from 0 to {MAX_T} seconds (a clock that goes back)", s.t)
        } else if s.nick.trim().is_empty() {
            "the nick is blank".to_owned()
        } else {
            continue;
        };
        return Err(IrcError::Unreplayable { line: s.line, reason });
    }
    let questions = questions::classify(&built.said, &log.replies, transcript::ANNOTATED_FROM);

    let mut sink = std::io::sink();
    let mut writer = LogWriter::new(&mut sink, true);
    let stats = replay::replay(&built.transcript, options, &mut writer).await?;
    let done = attribution::responses(writer.kept());
    let hit = attribution::attribute(&done.post_msg_t, &built.said, &questions);

    let (answered, hanging): (Vec<Question>, Vec<Question>) =
        questions.into_iter().partition(|q| matches!(q.fate, Fate::Answered { .. }));
    let posted_on =
        |qs: &[Question]| -> Vec<Question> { qs.iter().filter(|q| hit.contains(&q.line)).cloned().collect() };
    let (barge_ins, pick_ups) = (posted_on(&answered), posted_on(&hanging));
    let not_taken: Vec<&Question> = hanging.iter().filter(|q| !hit.contains(&q.line)).collect();
    let left_hanging = attribution::last_decisions(writer.kept(), &not_taken);
    let counts = Counts {
        messages: built.transcript.len() as u64,
        posts: done.post_msg_t.len() as u64,
        reactions: done.reactions,
        answered_qs: answered.len() as u64,
        barge_ins: barge_ins.len() as u64,
        hanging_qs: hanging.len() as u64,
        pick_ups: pick_ups.len() as u64,
        llm_judge_calls: stats.llm_calls.get(LlmRole::Judge.as_str()).copied().unwrap_or(0),
    };
    Ok(LogRun { name: log.name.clone(), counts, barge_ins, pick_ups, left_hanging })
}

#[cfg(test)]
mod tests;
