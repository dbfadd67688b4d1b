//! `kuuki eval`: replays labelled conversations and measures judgment against the
//! labels: precision and recall of speaking, reaction accuracy, timing, LLM cost.
//!
//! An eval file is a transcript (docs/design.md §15) with a header line and labels on the
//! messages kuuki should act on:
//!
//! ```json
//! {"eval": {"title": "git question left hanging", "situation": "left-hanging"}}
//! {"t": 0, "user": "alice", "text": "how do I undo my last commit?", "expect": "speak", "within": [90, 900]}
//! ```
//!
//! `expect` is `speak` (a post), `react` (an emoji only) or `silent`; `within` is the
//! window, in seconds after the labelled message, in which the action should come.
//! Every message without a label is a point where kuuki should stay quiet; a person's
//! own follow-up lines right after their labelled message belong to that label.
//! Lines starting with `#` are comments.

pub mod irc;
pub mod report;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::replay::{self, LogWriter, ReplayError, ReplayOptions, Stats, TranscriptLine};

/// Seconds after a labelled message: the earliest and the latest fitting moment.
pub type Window = (f64, f64);

/// What kuuki should do at a decision point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    Speak,
    React,
    Silent,
}

/// A labelled decision point: a message of the transcript and what should follow it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Label {
    /// The line of the eval file.
    pub line: usize,
    /// Index of the message in the transcript.
    #[serde(skip)]
    pub message: usize,
    pub t: f64,
    pub expect: Expect,
    /// Seconds after the message: the earliest and latest fitting moment to act.
    pub within: Option<(f64, f64)>,
}

/// One labelled conversation.
#[derive(Debug, Clone)]
pub struct EvalCase {
    /// The file's name relative to the eval directory, e.g. `en/03-git-hanging.jsonl`.
    pub name: String,
    pub title: String,
    pub situation: String,
    pub transcript: Vec<TranscriptLine>,
    pub labels: Vec<Label>,
}

impl EvalCase {
    /// The language: the first folder of the name (`en/…`, `ja/…`), else `-`.
    pub fn language(&self) -> &str {
        self.name.split_once('/').map_or("-", |(dir, _)| dir)
    }
}

#[derive(Debug, Error, PartialEq)]
#[error("{name} line {line}: {reason}")]
pub struct EvalFileError {
    pub name: String,
    pub line: usize,
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    title: String,
    situation: String,
}

/// Parses one eval file: the header, then transcript lines with optional labels.
pub fn parse_case(name: &str, text: &str) -> Result<EvalCase, EvalFileError> {
    let err = |line: usize, reason: String| EvalFileError { name: name.to_owned(), line, reason };
    let mut header: Option<Header> = None;
    // The transcript text keeps one line per file line, so its errors name the file's lines.
    let mut transcript_text = String::with_capacity(text.len());
    // (line, expect, within) of each labelled line, until the transcript is parsed.
    let mut pending: Vec<(usize, Expect, Option<Window>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            transcript_text.push('\n');
            continue;
        }
        let mut value: Value = serde_json::from_str(trimmed).map_err(|e| err(line, e.to_string()))?;
        let Some(object) = value.as_object_mut() else {
            return Err(err(line, "expected a JSON object".into()));
        };
        if let Some(h) = object.remove("eval") {
            if header.is_some() || !transcript_text.trim().is_empty() {
                return Err(err(line, "the `eval` header must be the first line, and only once".into()));
            }
            header = Some(serde_json::from_value(h).map_err(|e| err(line, format!("header: {e}")))?);
            transcript_text.push('\n');
            continue;
        }
        if header.is_none() {
            return Err(err(
                line,
                "the first line must be the header {\"eval\": {\"title\": …, \"situation\": …}}".into(),
            ));
        }
        let expect = object
            .remove("expect")
            .map(serde_json::from_value::<Expect>)
            .transpose()
            .map_err(|e| err(line, format!("expect: {e} (speak, react or silent)")))?;
        let within = object
            .remove("within")
            .map(serde_json::from_value::<(f64, f64)>)
            .transpose()
            .map_err(|e| err(line, format!("within: {e} (expected [earliest, latest] seconds)")))?;
        match (expect, within) {
            (None, Some(_)) => return Err(err(line, "`within` without `expect`".into())),
            (Some(Expect::Speak | Expect::React), None) => {
                return Err(err(line, "a speak or react label needs `within`: [earliest, latest] seconds".into()));
            }
            (Some(Expect::Silent), Some(_)) => return Err(err(line, "a silent label takes no `within`".into())),
            (_, Some((from, to))) if !(from.is_finite() && to.is_finite() && 0.0 <= from && from <= to) => {
                return Err(err(line, format!("within [{from}, {to}]: expected 0 <= earliest <= latest")));
            }
            (Some(expect), within) => pending.push((line, expect, within)),
            (None, None) => {}
        }
        transcript_text.push_str(&value.to_string());
        transcript_text.push('\n');
    }
    let Some(header) = header else {
        return Err(err(1, "empty file: expected the header and messages".into()));
    };
    let transcript = replay::parse_transcript(&transcript_text).map_err(|e| err(e.line, e.reason))?;
    if transcript.is_empty() {
        return Err(err(1, "no messages".into()));
    }
    if let Some(command) = transcript.iter().find(|m| m.command.is_some()) {
        return Err(err(command.line, "an eval conversation holds messages, not commands".into()));
    }
    // Actions name the message they answer by channel and time, so those must be unique.
    let mut seen: HashMap<(&str, i64), usize> = HashMap::new();
    for m in &transcript {
        if let Some(first) = seen.insert((m.channel.as_str(), millis(m.t)), m.line) {
            return Err(err(m.line, format!("another message of #{} has the same t (line {first})", m.channel)));
        }
    }
    let labels = pending
        .into_iter()
        .map(|(line, expect, within)| {
            let message = transcript.iter().position(|m| m.line == line).expect("every labelled line is a message");
            Label { line, message, t: transcript[message].t, expect, within }
        })
        .collect();
    Ok(EvalCase { name: name.to_owned(), title: header.title, situation: header.situation, transcript, labels })
}

fn millis(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

/// A speak label whose window opens this late is a question left hanging (kuuki lets
/// a question stand `UNANSWERED_QUESTION_WAIT_SECONDS` first); one opening earlier is
/// a mention or name call.
pub const HANGING_FROM_SECONDS: f64 = 60.0;

fn is_hanging(expect: Expect, within: Option<Window>) -> bool {
    expect == Expect::Speak && within.is_some_and(|(from, _)| from >= HANGING_FROM_SECONDS)
}

/// What kuuki did: a post or a reaction, about one message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    pub t: f64,
    /// The message it was about (the judged or answered one).
    pub msg_t: f64,
    pub react: bool,
    pub mode: String,
    /// The post's text or the reaction's emoji.
    pub content: String,
}

/// How a decision point went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Did what the label asks, inside the window.
    Right,
    /// Did what the label asks, outside the window.
    Mistimed,
    /// Stayed quiet where it should have spoken or reacted.
    Missed,
    /// Reacted where it should have spoken.
    ReactedInstead,
    /// Spoke where a reaction was the right thing.
    SpokeInstead,
    /// Spoke or reacted where it should have stayed quiet (a labelled or an unlabelled point).
    Intruded,
    /// More than one post or reaction for one point.
    Repeated,
}

impl Verdict {
    pub fn is_miss(self) -> bool {
        !matches!(self, Verdict::Right)
    }
}

/// One scored point: a label, or an action at a point nobody labelled.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Index of the message in the transcript.
    pub message: usize,
    pub expect: Expect,
    pub within: Option<(f64, f64)>,
    pub verdict: Verdict,
    pub action: Option<Action>,
    /// Seconds outside the window (0 inside it); only for actions the label asked for.
    pub timing_error: Option<f64>,
}

/// One conversation's result: its outcomes, the replay's counts and decision log.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub case: EvalCase,
    pub outcomes: Vec<Outcome>,
    pub stats: Stats,
    pub log: Vec<Value>,
}

/// Replays one case and scores it.
pub async fn run_case(case: EvalCase, options: ReplayOptions) -> Result<CaseResult, ReplayError> {
    let mut sink = std::io::sink();
    let mut writer = LogWriter::new(&mut sink, true);
    let stats = replay::replay(&case.transcript, options, &mut writer).await?;
    let log = writer.kept().to_vec();
    drop(writer);
    let outcomes = score(&case, &log);
    Ok(CaseResult { case, outcomes, stats, log })
}

/// The posts and reactions of a decision log (shadowed ones are not seen by anyone).
pub fn actions(log: &[Value]) -> Vec<(String, Action)> {
    log.iter()
        .filter(|l| l["kind"] == "respond" && l["shadow"] != true)
        .filter_map(|l| {
            let react = l["type"] == "react_only";
            let content = if react { &l["emoji"] } else { &l["text"] };
            Some((
                l["channel"].as_str()?.to_owned(),
                Action {
                    t: l["t"].as_f64()?,
                    msg_t: l["msg_t"].as_f64()?,
                    react,
                    mode: l["mode"].as_str().unwrap_or_default().to_owned(),
                    content: content.as_str().unwrap_or_default().to_owned(),
                },
            ))
        })
        .collect()
}

/// Scores a decision log against a case's labels.
pub fn score(case: &EvalCase, log: &[Value]) -> Vec<Outcome> {
    let messages = &case.transcript;
    let by_time: HashMap<(&str, i64), usize> =
        messages.iter().enumerate().map(|(i, m)| ((m.channel.as_str(), millis(m.t)), i)).collect();
    let label_at: HashMap<usize, &Label> = case.labels.iter().map(|l| (l.message, l)).collect();
    // Each action goes to the point it answered: its message's label, or the label of
    // the same person's message just before (a follow-up line), else an unlabelled point.
    let mut at_point: BTreeMap<usize, Vec<Action>> = BTreeMap::new();
    for (channel, action) in actions(log) {
        let Some(&index) = by_time.get(&(channel.as_str(), millis(action.msg_t))) else {
            continue; // about no transcript message (kuuki's own or a command): nothing to score
        };
        at_point.entry(point_of(messages, &label_at, index)).or_default().push(action);
    }

    let mut outcomes = Vec::new();
    for label in &case.labels {
        let acted = at_point.remove(&label.message).unwrap_or_default();
        outcomes.extend(judge_point(label.message, label.expect, label.within, messages[label.message].t, acted));
    }
    for (message, acted) in at_point {
        outcomes.extend(judge_point(message, Expect::Silent, None, messages[message].t, acted));
    }
    outcomes.sort_by_key(|o| o.message);
    outcomes
}

/// The labelled message an action about `index` counts for: `index` itself, or the
/// labelled message its author wrote just before in the same conversation with nobody
/// else in between.
fn point_of(messages: &[TranscriptLine], labels: &HashMap<usize, &Label>, index: usize) -> usize {
    let m = &messages[index];
    let same_conversation = |o: &TranscriptLine| o.channel == m.channel && o.thread == m.thread;
    let mut i = index;
    while !labels.contains_key(&i) {
        let Some(previous) = (0..i).rev().find(|&j| same_conversation(&messages[j])) else {
            return index;
        };
        if messages[previous].user != m.user {
            return index;
        }
        i = previous;
    }
    i
}

fn judge_point(message: usize, expect: Expect, within: Option<(f64, f64)>, t: f64, acted: Vec<Action>) -> Vec<Outcome> {
    let outcome = |verdict, action: Option<Action>, timing_error| Outcome {
        message,
        expect,
        within,
        verdict,
        action,
        timing_error,
    };
    let mut acted = acted.into_iter();
    let Some(first) = acted.next() else {
        let verdict = if expect == Expect::Silent { Verdict::Right } else { Verdict::Missed };
        return vec![outcome(verdict, None, None)];
    };
    let mut out = Vec::new();
    let wanted = match expect {
        Expect::Speak => !first.react,
        Expect::React => first.react,
        Expect::Silent => false,
    };
    if wanted {
        let delay = first.t - t;
        let (from, to) = within.unwrap_or((0.0, f64::INFINITY));
        let error = if delay < from { from - delay } else { (delay - to).max(0.0) };
        let verdict = if error > 0.0 { Verdict::Mistimed } else { Verdict::Right };
        out.push(outcome(verdict, Some(first), Some(error)));
    } else {
        let verdict = match expect {
            Expect::Speak => Verdict::ReactedInstead,
            Expect::React => Verdict::SpokeInstead,
            Expect::Silent => Verdict::Intruded,
        };
        out.push(outcome(verdict, Some(first), None));
    }
    out.extend(acted.map(|a| outcome(Verdict::Repeated, Some(a), None)));
    out
}

/// Prices for the cost projection, in dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    pub input: f64,
    pub output: f64,
}

/// The figures over a set of results.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub conversations: usize,
    pub messages: u64,
    /// Speak labels, and the posts made at them (in or out of the window).
    pub speak_labels: usize,
    pub speak_hits: usize,
    /// Speak labels on questions left hanging (a window opening at
    /// [`HANGING_FROM_SECONDS`] or later), and the posts made at them.
    pub hanging_labels: usize,
    pub hanging_hits: usize,
    /// Every post kuuki made.
    pub posts: usize,
    pub react_labels: usize,
    pub react_hits: usize,
    /// Reactions where no reaction was asked for.
    pub stray_reactions: usize,
    pub silent_labels: usize,
    pub silent_kept: usize,
    /// Actions the labels asked for, and those of them outside their window.
    pub timed: usize,
    pub mistimed: usize,
    /// Mean seconds outside the window over the mistimed ones.
    pub mean_timing_error: f64,
    pub llm_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub dollars: f64,
}

impl Summary {
    pub fn of<'a>(results: impl IntoIterator<Item = &'a CaseResult>, prices: Prices) -> Self {
        let mut s = Summary::default();
        let mut error_sum = 0.0;
        for r in results {
            s.conversations += 1;
            s.messages += r.stats.messages;
            s.llm_calls += r.stats.llm_calls.values().sum::<u64>();
            for usage in r.stats.llm_usage.values() {
                s.input_tokens += usage.input_tokens;
                s.output_tokens += usage.output_tokens;
            }
            for label in &r.case.labels {
                s.hanging_labels += usize::from(is_hanging(label.expect, label.within));
                match label.expect {
                    Expect::Speak => s.speak_labels += 1,
                    Expect::React => s.react_labels += 1,
                    Expect::Silent => s.silent_labels += 1,
                }
            }
            for o in &r.outcomes {
                let react = o.action.as_ref().map(|a| a.react);
                if react == Some(false) {
                    s.posts += 1;
                }
                if react == Some(true) && o.expect != Expect::React {
                    s.stray_reactions += 1;
                }
                match (o.expect, o.verdict) {
                    (Expect::Speak, Verdict::Right | Verdict::Mistimed) => {
                        s.speak_hits += 1;
                        s.hanging_hits += usize::from(is_hanging(o.expect, o.within));
                    }
                    (Expect::React, Verdict::Right | Verdict::Mistimed) => s.react_hits += 1,
                    (Expect::React, Verdict::Repeated) if react == Some(true) => s.stray_reactions += 1,
                    _ => {}
                }
                if let Some(error) = o.timing_error {
                    s.timed += 1;
                    if error > 0.0 {
                        s.mistimed += 1;
                        error_sum += error;
                    }
                }
            }
            // Unlabelled points show up only when kuuki acted, so these are labelled ones.
            s.silent_kept +=
                r.outcomes.iter().filter(|o| o.expect == Expect::Silent && o.verdict == Verdict::Right).count();
        }
        if s.mistimed > 0 {
            s.mean_timing_error = error_sum / s.mistimed as f64;
        }
        s.dollars = (s.input_tokens as f64 * prices.input + s.output_tokens as f64 * prices.output) / 1e6;
        s
    }

    /// Of kuuki's posts, the share made where a post was wanted (1 when it never posted).
    pub fn precision(&self) -> f64 {
        ratio(self.speak_hits, self.posts)
    }

    /// Of the points that wanted a post, the share that got one.
    pub fn recall(&self) -> f64 {
        ratio(self.speak_hits, self.speak_labels)
    }

    /// Of the questions left hanging that wanted a post, the share that got one.
    pub fn hanging_recall(&self) -> f64 {
        ratio(self.hanging_hits, self.hanging_labels)
    }

    /// Of the points that wanted a reaction, the share that got one.
    pub fn reaction_accuracy(&self) -> f64 {
        ratio(self.react_hits, self.react_labels)
    }

    pub fn per_hundred_messages(&self, n: u64) -> f64 {
        if self.messages == 0 { 0.0 } else { n as f64 * 100.0 / self.messages as f64 }
    }

    pub fn dollars_per_thousand_messages(&self) -> f64 {
        if self.messages == 0 { 0.0 } else { self.dollars * 1000.0 / self.messages as f64 }
    }
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 { 1.0 } else { part as f64 / whole as f64 }
}

#[cfg(test)]
mod tests;
