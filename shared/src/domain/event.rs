//! The decision log: one record per thing kuuki noticed or did. Replay prints these as
//! JSON lines; in Lambda they become structured log lines.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ChannelId, Decision, DirectTrigger, LlmVerdict, RespondMode, ResponseType, Timestamp, Ts, UserId};

/// Which worker noticed that its job no longer applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Judge,
    /// A question's pick-up (docs/design.md §7.7).
    PickUp,
    Respond,
    Summarize,
    Reflect,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub at: Timestamp,
    pub channel: ChannelId,
    /// The conversation the record concerns: `None` for the top level.
    pub thread_root: Option<Ts>,
    /// The message the record is about (for `respond`, the message answered).
    pub ts: Ts,
    pub kind: EventKind,
}

/// A stored message as the decision log shows it: the message itself is shared (a
/// record costs a reference count, not a copy of its text).
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedMessage(pub std::sync::Arc<super::Message>);

impl Serialize for LoggedMessage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let m = &self.0;
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("user", &m.user)?;
        map.serialize_entry("user_name", &m.user_name)?;
        map.serialize_entry("text", &m.text)?;
        map.serialize_entry("author", &m.author)?;
        map.end()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// Logged as its `user`, `user_name`, `text` and `author`.
    Message {
        #[serde(flatten)]
        message: LoggedMessage,
        trigger: Option<DirectTrigger>,
    },
    Edited {
        text: String,
    },
    Deleted,
    Judge {
        user: UserId,
        score: i32,
        breakdown: BTreeMap<super::RuleName, i32>,
        /// What the thresholds said: respond, skip, or ask the LLM.
        decision: Decision,
        llm_called: bool,
        /// The end result after the LLM, if it was asked.
        respond: bool,
        response_type: Option<ResponseType>,
        delay_seconds: u32,
        llm: Option<LlmVerdict>,
        /// Why the LLM's answer could not be used (then kuuki does not respond).
        llm_error: Option<String>,
        /// The LLM's answer came from the judgment cache.
        llm_cached: bool,
        /// Tokens the LLM judge used for this judgment (its cost).
        llm_usage: Option<super::Usage>,
        reason: String,
        /// Made by a question's pick-up (docs/design.md §7.7), not the JUDGE of a message.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        pick_up: bool,
    },
    Superseded {
        stage: Stage,
        by: Ts,
    },
    Dropped {
        stage: Stage,
        reason: String,
    },
    Respond {
        mode: RespondMode,
        response_type: ResponseType,
        /// Where the answer went: the thread it was posted in, `None` for the top level.
        posted_in: Option<Ts>,
        posted_ts: Option<Ts>,
        text: Option<String>,
        emoji: Option<String>,
        /// The channel is in shadow mode: decided and logged, not posted.
        shadow: bool,
        /// The facts the answer was given.
        facts: Vec<super::FactUse>,
    },
    /// A quiet stretch of a channel was reflected on.
    Reflect {
        messages: usize,
        facts_new: usize,
        facts_strengthened: usize,
        profiles: usize,
        /// Vector search is on and the facts could not be embedded: they were stored
        /// without, and rank by keywords alone.
        #[serde(skip_serializing_if = "Option::is_none")]
        embedding_error: Option<String>,
    },
    /// A channel's memory was brought up to date.
    Summary {
        messages: usize,
        summary: String,
        mood: String,
        topic_keywords: Vec<String>,
        active_users: Vec<String>,
        /// The workspace memory was updated too.
        workspace: bool,
    },
    /// Something was forgotten: a person on request (`user`), or the facts learned
    /// from a deleted message (`user` is `None`).
    Forget {
        user: Option<UserId>,
        messages: usize,
        facts_removed: usize,
        facts_edited: usize,
        notes: usize,
        summaries: usize,
        /// A request bounded to one Discord server (its id) or the Slack workspace
        /// (`slack`), and the channels it could not place there; `None` everywhere.
        server: Option<String>,
        unplaced: usize,
        /// A forget's second look ([`crate::domain::Job::ForgetLate`]): what work in
        /// flight wrote after the forget, not a request of its own.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        late: bool,
    },
    /// A `/kuuki` command someone ran in the channel, and kuuki's answer to them.
    Command {
        user: UserId,
        command: String,
        answer: String,
        /// What kuuki posted in the channel about a change the command made.
        announced: Option<String>,
    },
    RespondFailed {
        mode: RespondMode,
        response_type: ResponseType,
        reason: String,
        /// The short line posted instead of an answer (a direct mention, with
        /// `DIRECT_FAILURE_NOTICE`).
        notice: Option<String>,
    },
    /// Slack took kuuki's access to the workspace away (`gone`: `app_uninstalled`, or
    /// `tokens_revoked` naming its bot), or it came back (a message posted since was
    /// delivered: the app was installed again). Logged once each way.
    SlackAccess {
        gone: bool,
        /// The workspace Slack named, when it did.
        team: Option<String>,
        /// The event that said so, or the message that showed access was back.
        reason: String,
        /// When the workspace's data is purged unless access comes back first
        /// (`PURGE_ON_UNINSTALL`); `None` when nothing is purged.
        purge_at: Option<Timestamp>,
    },
    /// A signal of how the channel takes kuuki's words moved its talkativeness
    /// (docs/design.md §7.6): which, from whom, about which post, by how much, and the
    /// offset after it. Logged once per signal (a repeat changes nothing).
    Feedback {
        signal: super::talkativeness::SignalKind,
        /// Who gave it, when someone did (a reaction, words); none for being ignored.
        user: Option<UserId>,
        /// kuuki's post it is about, when it is about one.
        post: Option<Ts>,
        /// What the offset moved by (inside its bounds).
        weight: f64,
        offset: f64,
        /// Taken back: a removed reaction, an ignored post taken up after all.
        undone: bool,
    },
    /// A Slack workspace's stored data went, after an uninstall's grace period: how
    /// many of each (ids and counts, never content).
    Purge {
        team: String,
        channels: usize,
        messages: usize,
        facts: usize,
        notes: usize,
        profiles: usize,
    },
}

impl Event {
    /// The record as one structured log line (serve's stdout, Lambda's JSON logs).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "time": self.at.to_utc_string(),
            "kind": self.kind.name(),
            "channel": self.channel,
            "thread": self.thread_root,
            "ts": self.ts,
            "event": self.kind,
        })
    }
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Message { .. } => "message",
            EventKind::Edited { .. } => "edited",
            EventKind::Deleted => "deleted",
            EventKind::Judge { .. } => "judge",
            EventKind::Superseded { .. } => "superseded",
            EventKind::Dropped { .. } => "dropped",
            EventKind::Respond { .. } => "respond",
            EventKind::RespondFailed { .. } => "respond_failed",
            EventKind::Summary { .. } => "summary",
            EventKind::Reflect { .. } => "reflect",
            EventKind::Command { .. } => "command",
            EventKind::Forget { .. } => "forget",
            EventKind::SlackAccess { .. } => "slack_access",
            EventKind::Purge { .. } => "purge",
            EventKind::Feedback { .. } => "feedback",
        }
    }
}
