//! The decision log read back as typed lines: the report's input.
//!
//! Why typed log lines and not the `Event`s themselves: the report draws a decision
//! log, and a decision log is a file as often as it is a replay in progress (the
//! golden logs in `examples/`, a CI artefact, a log cut short by a failed replay).
//! Much of what the writer puts in a line is not in the `Event` (the transcript's
//! thread names, times as transcript seconds, the `stats` totals), and a log read back
//! from a file has no `Event`s at all. So the report reads the log's own schema, once,
//! into these structs, reusing the domain's enums (`ResponseType`, `Decision`, `Stage`,
//! …) so a new variant there is a compile error here, and the tests check that every
//! kind the `LogWriter` writes reads back typed (`every_event_kind_reads_back_typed`).
//!
//! Reading is lenient on purpose: a field that is missing or of the wrong type is
//! `None` and shows as "?", a kind this file does not know is kept raw and shown as it
//! was logged, because the report is most useful exactly when the log looks odd.

use std::ops::Deref;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::domain::{Author, Decision, DirectTrigger, RespondMode, ResponseType, Stage};

/// A field that is `None` when missing, null, or not of the expected type, so one odd
/// field does not hide the rest of its line.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Lenient<T>(Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(Lenient(serde_json::from_value(v).ok()))
    }
}

impl<T> From<Option<T>> for Lenient<T> {
    fn from(v: Option<T>) -> Self {
        Lenient(v)
    }
}

impl<T> Deref for Lenient<T> {
    type Target = Option<T>;
    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

/// The fields every line has.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Head {
    t: Lenient<f64>,
    kind: Lenient<String>,
    channel: Option<Value>,
    thread: Lenient<String>,
    /// When the message a judgment or response is about was written.
    msg_t: Lenient<f64>,
}

/// One line of the log, other than `stats`.
pub(super) struct Line<'a> {
    /// The line as logged, for kinds shown raw.
    pub raw: &'a Value,
    /// `t` as logged; `None` when missing or not a number.
    pub t: Option<f64>,
    pub channel: String,
    pub thread: Option<String>,
    pub msg_t: Option<f64>,
    pub body: Body,
}

/// What a line says, by kind (`EventKind::name()`).
pub(super) enum Body {
    Message(MessageLine),
    Edited(EditedLine),
    Deleted,
    Judge(JudgeLine),
    Superseded(SupersededLine),
    Dropped(DroppedLine),
    Respond(RespondLine),
    RespondFailed(RespondFailedLine),
    Summary(SummaryLine),
    Reflect(ReflectLine),
    Command(CommandLine),
    Forget(ForgetLine),
    SlackAccess(SlackAccessLine),
    Purge(PurgeLine),
    Feedback(FeedbackLine),
    /// A kind the report does not know (kept as the kind's name).
    Other(String),
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ForgetLine {
    /// `None` for a deleted message's facts.
    pub user: Lenient<String>,
    pub messages: Lenient<u64>,
    pub facts_removed: Lenient<u64>,
    pub facts_edited: Lenient<u64>,
    pub notes: Lenient<u64>,
    pub summaries: Lenient<u64>,
    /// A forget's second look.
    pub late: Lenient<bool>,
}

/// Slack took kuuki's access away (`gone`) or it came back.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct SlackAccessLine {
    pub gone: Lenient<bool>,
    pub reason: Lenient<String>,
}

/// A Slack workspace's data purged after an uninstall.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct PurgeLine {
    pub channels: Lenient<u64>,
    pub messages: Lenient<u64>,
    pub facts: Lenient<u64>,
    pub notes: Lenient<u64>,
    pub profiles: Lenient<u64>,
}

/// A talkativeness signal and the offset after it.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct FeedbackLine {
    pub signal: Lenient<String>,
    pub user: Lenient<String>,
    pub weight: Lenient<f64>,
    pub offset: Lenient<f64>,
    pub undone: Lenient<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct CommandLine {
    pub user: Lenient<String>,
    pub command: Lenient<String>,
    pub answer: Lenient<String>,
    pub announced: Lenient<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct MessageLine {
    pub user: Lenient<String>,
    pub text: Lenient<String>,
    /// Written only for bots.
    pub author: Lenient<Author>,
    pub trigger: Lenient<DirectTrigger>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct EditedLine {
    pub text: Lenient<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct JudgeLine {
    pub user: Lenient<String>,
    pub score: Lenient<f64>,
    /// Rule name -> points, in the log's order (values shown as logged).
    pub breakdown: Lenient<Map<String, Value>>,
    pub decision: Lenient<Decision>,
    pub llm_called: Lenient<bool>,
    pub respond: Lenient<bool>,
    pub response_type: Lenient<ResponseType>,
    pub delay_seconds: Lenient<f64>,
    pub reason: Lenient<String>,
    pub llm_error: Lenient<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct SupersededLine {
    pub stage: Lenient<Stage>,
    pub by_t: Lenient<f64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct DroppedLine {
    pub stage: Lenient<Stage>,
    pub reason: Lenient<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RespondLine {
    #[serde(rename = "type")]
    pub response_type: Lenient<ResponseType>,
    pub mode: Lenient<RespondMode>,
    pub shadow: Lenient<bool>,
    pub text: Lenient<String>,
    pub emoji: Lenient<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct RespondFailedLine {
    #[serde(rename = "type")]
    pub response_type: Lenient<ResponseType>,
    pub mode: Lenient<RespondMode>,
    pub reason: Lenient<String>,
    pub notice: Lenient<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct SummaryLine {
    pub messages: Lenient<u64>,
    pub summary: Lenient<String>,
    pub mood: Lenient<String>,
    pub topic_keywords: Lenient<Vec<Value>>,
    pub workspace: Lenient<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ReflectLine {
    pub messages: Lenient<u64>,
    pub facts_new: Lenient<u64>,
    pub facts_strengthened: Lenient<u64>,
    pub profiles: Lenient<u64>,
}

/// The final line: the replay's totals (`Stats`).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct StatsLine {
    pub t: Lenient<f64>,
    pub messages: Lenient<u64>,
    pub judgments: Lenient<u64>,
    pub llm_judgments: Lenient<u64>,
    pub superseded: Lenient<u64>,
    pub dropped: Lenient<u64>,
    pub respond_failed: Lenient<u64>,
    /// Name -> count, in the log's order.
    pub responses: Lenient<Map<String, Value>>,
    pub llm_calls: Lenient<Map<String, Value>>,
    pub llm_tokens: Lenient<Map<String, Value>>,
}

/// A log line, read.
pub(super) enum Read<'a> {
    Line(Line<'a>),
    Stats(StatsLine),
    /// Not a JSON object: left out, and counted.
    NotAnObject,
}

/// Reads one line. Never fails: see the module's comment.
pub(super) fn read(raw: &Value) -> Read<'_> {
    if !raw.is_object() {
        return Read::NotAnObject;
    }
    let head = Head::deserialize(raw).unwrap_or_default();
    let kind = head.kind.0.unwrap_or_else(|| "?".to_owned());
    // Bodies are all-lenient structs, so reading one from an object cannot fail.
    fn body<T: DeserializeOwned + Default>(raw: &Value) -> T {
        T::deserialize(raw).unwrap_or_default()
    }
    let body = match kind.as_str() {
        "stats" => return Read::Stats(body(raw)),
        "message" => Body::Message(body(raw)),
        "edited" => Body::Edited(body(raw)),
        "deleted" => Body::Deleted,
        "judge" => Body::Judge(body(raw)),
        "superseded" => Body::Superseded(body(raw)),
        "dropped" => Body::Dropped(body(raw)),
        "respond" => Body::Respond(body(raw)),
        "respond_failed" => Body::RespondFailed(body(raw)),
        "summary" => Body::Summary(body(raw)),
        "reflect" => Body::Reflect(body(raw)),
        "command" => Body::Command(body(raw)),
        "forget" => Body::Forget(body(raw)),
        "slack_access" => Body::SlackAccess(body(raw)),
        "purge" => Body::Purge(body(raw)),
        "feedback" => Body::Feedback(body(raw)),
        _ => Body::Other(kind),
    };
    let channel = match head.channel {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => "(no channel)".to_owned(),
        Some(other) => other.to_string(),
    };
    Read::Line(Line {
        raw,
        t: head.t.0.filter(|t| t.is_finite()),
        channel,
        thread: head.thread.0,
        msg_t: head.msg_t.0.filter(|t| t.is_finite()),
        body,
    })
}

impl Body {
    /// The kind as logged.
    pub fn kind(&self) -> &str {
        match self {
            Body::Message(_) => "message",
            Body::Edited(_) => "edited",
            Body::Deleted => "deleted",
            Body::Judge(_) => "judge",
            Body::Superseded(_) => "superseded",
            Body::Dropped(_) => "dropped",
            Body::Respond(_) => "respond",
            Body::RespondFailed(_) => "respond_failed",
            Body::Summary(_) => "summary",
            Body::Reflect(_) => "reflect",
            Body::Command(_) => "command",
            Body::Forget(_) => "forget",
            Body::SlackAccess(_) => "slack_access",
            Body::Purge(_) => "purge",
            Body::Feedback(_) => "feedback",
            Body::Other(kind) => kind,
        }
    }
}

/// A domain enum's name as it is logged ("full_response", "judge").
pub(super) fn name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}
