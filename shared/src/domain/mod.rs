//! Pure data: what a message, a conversation, a judgment and a queued job are.
//! Nothing here does I/O or reads the clock.

mod by_ts;
pub mod talkativeness;
mod time;
mod ts;

pub use by_ts::{SortedByTs, TsMap, search as search_by_ts};
pub use time::Timestamp;
pub use ts::{DISCORD_EPOCH_MS, NotASlackTs, Ts};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A channel on one platform (a Slack channel id, a Discord channel id, a replay name).
/// The text is shared: every stored message, job, claim and log event holds its
/// channel, and a clone costs a reference count, not an allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChannelId(pub Arc<str>);

/// A user on one platform (shared text, like [`ChannelId`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserId(pub Arc<str>);

impl ChannelId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl UserId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One conversation: the top level of a channel (`root == None`) or one thread,
/// named by the `ts` of the message that started it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ThreadKey {
    pub channel: ChannelId,
    pub root: Option<Ts>,
}

impl ThreadKey {
    pub fn top_level(channel: ChannelId) -> Self {
        Self { channel, root: None }
    }

    pub fn thread(channel: ChannelId, root: Ts) -> Self {
        Self { channel, root: Some(root) }
    }
}

/// Who wrote a message, as far as kuuki's decisions are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Author {
    Human,
    /// kuuki itself: stored, never judged.
    OwnBot,
    /// Another bot: stored, ignored by default (loop prevention).
    OtherBot,
}

/// Why a message is a direct trigger that is answered at once without scoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectTrigger {
    /// `<@bot>`: score 100.
    Mention,
    /// A reply to the bot (Discord reply, or a Slack thread whose parent is the bot's): 100.
    Reply,
    /// The bot's name or an alias appears: 80.
    Name,
    /// A direct message to the bot: 100.
    DirectMessage,
}

impl DirectTrigger {
    pub fn score(self) -> i32 {
        match self {
            DirectTrigger::Mention | DirectTrigger::Reply | DirectTrigger::DirectMessage => 100,
            DirectTrigger::Name => 80,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DirectTrigger::Mention => "mention",
            DirectTrigger::Reply => "reply",
            DirectTrigger::Name => "name",
            DirectTrigger::DirectMessage => "direct_message",
        }
    }
}

/// A stored chat message, normalized from any platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub channel: ChannelId,
    pub ts: Ts,
    /// The thread this message replies in; `None` for a top-level message.
    pub thread_root: Option<Ts>,
    pub user: UserId,
    pub user_name: String,
    pub text: String,
    pub author: Author,
    /// The platform said this is a reply to one of the bot's messages (a Discord reply,
    /// a Slack thread reply under the bot's message).
    #[serde(default)]
    pub replies_to_bot: bool,
    /// The message this one replies to, where the platform says so apart from a
    /// thread (a Discord reply), or, for kuuki's own posts, the message it answered;
    /// it answers that message (§7.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies_to: Option<Ts>,
    /// Written in a direct-message conversation with the bot.
    #[serde(default)]
    pub in_dm: bool,
    /// Written where not everyone in the workspace can read: a private channel, a group
    /// DM or a DM (Slack's channel_type `group`, `mpim`, `im`, or a `G`/`D` channel id).
    /// The summarizer carries it into the channel's memory, so what kuuki remembers of
    /// the channel never reaches another channel's prompt.
    #[serde(default)]
    pub private_channel: bool,
    pub at: Timestamp,
}

/// The first `n` characters of `text` (all of it when it is shorter), cut without
/// collecting characters.
pub fn first_chars(text: &str, n: usize) -> &str {
    text.char_indices().nth(n).map_or(text, |(cut, _)| &text[..cut])
}

/// Where `needle` (not empty) starts in `text`, overlapping matches included. Chat
/// lines are short: finding the needle's first byte and comparing there is quicker
/// than preparing a substring searcher for each line, as `str::contains` does.
pub fn positions_of<'t>(text: &'t str, needle: &'t str) -> impl Iterator<Item = usize> + 't {
    let (text, needle) = (text.as_bytes(), needle.as_bytes());
    let first = needle.first().copied();
    first
        .into_iter()
        .flat_map(move |first| memchr::memchr_iter(first, text))
        .filter(move |&at| text[at..].starts_with(needle))
}

/// The people `text` mentions by id, in order: `<@id>` (Slack, transcripts) and
/// `<@!id>` (Discord), with Slack's legacy `<@id|name>` cut at the bar. Discord role
/// mentions (`<@&id>`) name no one person and are left out.
pub fn mentioned_ids(text: &str) -> impl Iterator<Item = &str> {
    positions_of(text, "<@").filter_map(|i| {
        let rest = &text[i + 2..];
        let rest = rest.strip_prefix('!').unwrap_or(rest);
        let id = &rest[..rest.find('>')?];
        let id = id.split('|').next().unwrap_or(id);
        (!id.is_empty() && !id.starts_with('&') && !id.contains(char::is_whitespace)).then_some(id)
    })
}

impl Message {
    pub fn thread_key(&self) -> ThreadKey {
        ThreadKey { channel: self.channel.clone(), root: self.thread_root.clone() }
    }

    pub fn is_human(&self) -> bool {
        self.author == Author::Human
    }
}

/// The three ways kuuki can take part, from lightest to heaviest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseType {
    ReactOnly,
    ShortAck,
    FullResponse,
}

impl ResponseType {
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseType::ReactOnly => "react_only",
            ResponseType::ShortAck => "short_ack",
            ResponseType::FullResponse => "full_response",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "react_only" => Some(ResponseType::ReactOnly),
            "short_ack" => Some(ResponseType::ShortAck),
            "full_response" => Some(ResponseType::FullResponse),
            _ => None,
        }
    }
}

/// A rule's name in a score's breakdown: the rules' own names are static (no
/// allocation per judgment); one read back from a store is owned.
pub type RuleName = std::borrow::Cow<'static, str>;

/// Points each rule added or removed, in the order the rules ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown(pub Vec<(RuleName, i32)>);

impl Breakdown {
    pub fn add(&mut self, rule: &'static str, points: i32) {
        self.0.push((RuleName::Borrowed(rule), points));
    }

    pub fn total(&self) -> i32 {
        self.0.iter().map(|(_, p)| p).sum()
    }

    pub fn has(&self, rule: &str) -> bool {
        self.0.iter().any(|(r, _)| r == rule)
    }

    /// As a JSON-friendly ordered map.
    pub fn to_map(&self) -> BTreeMap<RuleName, i32> {
        self.0.iter().cloned().collect()
    }
}

/// What the rule-based judge concluded for one message.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleScore {
    /// Clamped to 0..=100.
    pub score: i32,
    pub breakdown: Breakdown,
    /// Inside the engagement window of the bot's last response in this channel.
    pub engaged: bool,
    /// The message asks something (ends with `?` or `？`).
    pub question: bool,
    /// Who the turn is meant for when it is someone else's (`addressed_to_other`).
    pub for_other: Option<String>,
    /// A rule that depends on the turn's age settles later (see [`Pending`]).
    pub pending: Option<Pending>,
}

/// A time-dependent rule that has not settled yet: `unanswered_question` before the
/// question has stood its wait, or `addressed_to_other` before the person addressed
/// has had theirs.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub at: Timestamp,
    /// Why the judgment waits, for the decision log.
    pub reason: String,
    /// The question's own pick-up judges it then ([`Job::PickUp`], queued when the
    /// question came), so no JUDGE is queued again for it.
    pub picked_up: bool,
}

/// The first decision the thresholds make from a rule score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Respond,
    Skip,
    /// The band between the thresholds: ask the LLM judge.
    Llm,
    /// Not yet: a rule that depends on how long the turn has stood settles later, and
    /// then kuuki might speak; the judgment is queued again for that moment.
    Wait,
}

/// What the LLM judge answered (docs/design.md §7.4), already validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmVerdict {
    pub should_respond: bool,
    pub reason: String,
    pub confidence: f64,
    pub delay_seconds: Option<u32>,
    pub response_type: Option<ResponseType>,
    pub conversation_state: ConversationState,
    /// For react_only: a Slack emoji name the judge chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// At a question's pick-up shown the lines that may answer it: whether one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already_answered: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationState {
    Active,
    Ending,
    Misunderstanding,
    Conflict,
}

/// Whether a respond job answers a direct trigger (always answered) or an ambient judgment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RespondMode {
    Direct,
    Ambient,
    /// kuuki opens a conversation itself (a proactive opener).
    Opener,
    /// kuuki takes up a question left open (issue 34, docs/design.md §7.7): said
    /// unasked, in a thread under the question (a reply to it on Discord).
    PickUp,
}

impl RespondMode {
    /// Said without being asked: the answers the cap on unasked posts counts and the
    /// channel's talkativeness learns from.
    pub fn unasked(self) -> bool {
        matches!(self, RespondMode::Ambient | RespondMode::PickUp)
    }
}

/// Work queued for a worker. Carries the `ts` of the message it was made for so a
/// worker can see that a newer message superseded it (debounce without deleting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "snake_case")]
pub enum Job {
    Judge {
        thread: ThreadKey,
        ts: Ts,
    },
    /// A question that has stood `UNANSWERED_QUESTION_WAIT_SECONDS`: judged on its own
    /// if still open (docs/design.md §7.7); only events about it supersede it.
    PickUp {
        thread: ThreadKey,
        ts: Ts,
    },
    Respond {
        thread: ThreadKey,
        ts: Ts,
        mode: RespondMode,
        response_type: ResponseType,
        /// For react_only: the emoji the judge chose (else a small rule picks one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        emoji: Option<String>,
    },
    /// Reflect on a channel's quiet conversation: facts and notes about people.
    Reflect {
        channel: ChannelId,
        /// The newest message when the job was made: a newer one means the channel
        /// was not quiet after all.
        ts: Ts,
    },
    /// The daily clean-up: facts faded under the floor are forgotten (a schedule sends it).
    SweepFacts,
    /// Bring a channel's memory up to date (every N messages or N minutes).
    Summarize {
        channel: ChannelId,
        /// The newest message when the job was made (for logs and dedup).
        ts: Ts,
    },
    /// A message nothing else handles (ambient participation off) still counts for the
    /// channel's memory: queued after the judge's wait, it only runs the summary and
    /// reflection triggers, and a newer message in the conversation supersedes it.
    Remember {
        thread: ThreadKey,
        ts: Ts,
    },
    /// A channel came back after a silence with the message `ts`: kuuki may open with a
    /// fresh shareable fact that matches it (`PROACTIVE_CONVERSATION_ENABLED`).
    Open {
        thread: ThreadKey,
        ts: Ts,
    },
    /// Forget a person (`/kuuki forget-me`, or a manager's `/kuuki forget @user`) asked
    /// in `channel`: done by a worker, not within the platform's 3 s for an answer, and
    /// what was removed is then shown to whoever asked.
    Forget {
        channel: ChannelId,
        user: UserId,
        /// How the answer names them: "you", or `<@U…>`.
        whom: String,
        /// When it was asked: each request is carried out and answered once.
        ts: Ts,
        reply: CommandReply,
        /// Only the channels of this Discord server (or of the Slack workspace,
        /// [`SLACK_WORKSPACE`]): someone who manages channels there asked, and their
        /// right reaches no further. `None`: everywhere (the person themselves, or
        /// someone in `COMMAND_MANAGERS`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    /// A forget's second look, queued by the forget as it starts, to run once the forget
    /// has ended, every job that read the person's messages before then has too (a
    /// reflection's facts and notes, an answer's topics written after the forget
    /// looked), and their messages posted before it have all arrived: what those stored
    /// of them goes. Answers nobody. The forget's end is read from the ledger entry its
    /// run writes as it ends (`forget-ended:<channel>:<user>:<ts>`).
    ForgetLate {
        /// Where the forget was asked, and when the run that queued this began (the key
        /// of its end's entry).
        channel: ChannelId,
        ts: Ts,
        user: UserId,
        /// The display name the forget looked for (older facts name people by it).
        name: String,
        /// The channels the forget reached, and its bound (as [`Job::Forget`]'s).
        channels: Vec<ChannelId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    /// Slack took kuuki's access away (`app_uninstalled`, or `tokens_revoked` naming its
    /// bot) at `gone_at` (a Slack ts: the event's time): once `UNINSTALL_PURGE_GRACE_HOURS`
    /// have passed, if access is still gone (no reinstall since), everything stored of
    /// the Slack workspace goes (`PURGE_ON_UNINSTALL`). Queued by the ingress for that
    /// moment; Discord's data is left alone.
    PurgeSlack {
        /// The workspace Slack named (for logs).
        team: String,
        gone_at: Ts,
        /// The workspace among several whose data goes (its channels `T…/C…`); `None`:
        /// the one a deployment serves alone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<String>,
    },
}

/// The one Slack workspace a deployment serves, as the reach of a Slack admin's forget
/// (its channels, not those of a Discord server the same deployment serves).
pub const SLACK_WORKSPACE: &str = "slack";

/// The Discord server a forget's reach (`Job::Forget`'s `server`) names, if it names
/// one rather than everywhere or the Slack workspace.
pub fn discord_server(reach: Option<&str>) -> Option<&str> {
    reach.filter(|reach| *reach != SLACK_WORKSPACE)
}

impl Job {
    /// A forget request in a test, reaching `server` (`None`: everywhere); its way back
    /// holds the word "secret".
    #[cfg(test)]
    pub(crate) fn sample_forget(server: Option<&str>) -> Job {
        Job::Forget {
            channel: ChannelId("C1".into()),
            user: UserId("U1".into()),
            whom: "you".into(),
            ts: Ts::new("1.000001"),
            reply: CommandReply::Slack { response_url: "https://hooks.slack.com/commands/T1/2/secret".into() },
            server: server.map(str::to_owned),
        }
    }
}

/// Where the answer to a slash command goes when a worker has it: the command's own
/// way back to the caller, valid for a while after the command.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "platform", rename_all = "snake_case")]
pub enum CommandReply {
    /// Slack's `response_url` (30 minutes, 5 uses): an ephemeral message to the caller.
    Slack { response_url: String },
    /// Discord's interaction webhook (15 minutes): the answer replaces the command's
    /// first reply.
    Discord { application_id: String, token: String },
}

impl CommandReply {
    /// Whether sending the answer again leaves one answer (Discord edits the reply in
    /// place; Slack would show a second message).
    pub fn safe_to_repeat(&self) -> bool {
        matches!(self, CommandReply::Discord { .. })
    }
}

// Both carry a credential to answer as kuuki: never in a log line.
impl fmt::Debug for CommandReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandReply::Slack { .. } => f.write_str("CommandReply::Slack { response_url: <hidden> }"),
            CommandReply::Discord { application_id, .. } => {
                write!(f, "CommandReply::Discord {{ application_id: {application_id:?}, token: <hidden> }}")
            }
        }
    }
}

/// A job as it travels through a queue: versioned JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEnvelope {
    pub v: u32,
    #[serde(flatten)]
    pub job: Job,
}

impl JobEnvelope {
    /// The version jobs travel as, unless they need a newer one (see [`JobEnvelope::NEWEST`]).
    pub const VERSION: u32 = 1;
    /// The newest version this build reads. 2: a FORGET bounded to one server or
    /// workspace, which a build from before the bound would carry out everywhere (it
    /// ignores a field it does not know), so it must refuse it and leave it for a newer
    /// worker instead. 3: a forget's second look ([`Job::ForgetLate`]), which a build
    /// from before it cannot read. 4: a Slack workspace's purge after an uninstall
    /// ([`Job::PurgeSlack`]). 5: a question's pick-up ([`Job::PickUp`]) and its answer
    /// ([`RespondMode::PickUp`]), which a build from before them cannot read. 6: a job
    /// of a Slack workspace among several (its channel `T…/C…`, a purge of that
    /// workspace alone), which a build from before them would take for the one
    /// workspace it serves.
    pub const NEWEST: u32 = 6;

    pub fn new(job: Job) -> Self {
        let v = match job {
            Job::PurgeSlack { workspace: Some(_), .. } => 6,
            _ if job.channel().workspace() != crate::domain::Workspace::Shared => 6,
            Job::PickUp { .. } | Job::Respond { mode: RespondMode::PickUp, .. } => 5,
            Job::PurgeSlack { .. } => 4,
            Job::ForgetLate { .. } => 3,
            Job::Forget { server: Some(_), .. } => 2,
            _ => Self::VERSION,
        };
        Self { v, job }
    }
}

/// A job as a queue message body (SQS, the embedded store's queue).
pub fn encode_job(job: &Job) -> String {
    serde_json::to_string(&JobEnvelope::new(job.clone())).expect("jobs serialize")
}

/// Why a queue message body is not a job this build can run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobDecodeError {
    /// Damaged, or not kuuki's.
    #[error("not a kuuki job: {0}")]
    NotAJob(String),
    /// Written by another build (a newer one, after a rollback).
    #[error("job version {found} (this build reads {oldest} to {newest})")]
    Version { found: u32, oldest: u32, newest: u32 },
}

/// A queue message body back to a job; a body of another version or shape is an error.
pub fn decode_job(body: &str) -> Result<Job, JobDecodeError> {
    let envelope: JobEnvelope = serde_json::from_str(body).map_err(|e| JobDecodeError::NotAJob(e.to_string()))?;
    if !(JobEnvelope::VERSION..=JobEnvelope::NEWEST).contains(&envelope.v) {
        return Err(JobDecodeError::Version {
            found: envelope.v,
            oldest: JobEnvelope::VERSION,
            newest: JobEnvelope::NEWEST,
        });
    }
    Ok(envelope.job)
}

impl Job {
    /// The channel the job is about; the sweep is about all of them.
    pub fn channel(&self) -> &ChannelId {
        static ALL: std::sync::LazyLock<ChannelId> = std::sync::LazyLock::new(|| ChannelId("*".into()));
        match self {
            Job::SweepFacts | Job::PurgeSlack { .. } => &ALL,
            Job::Judge { thread, .. }
            | Job::PickUp { thread, .. }
            | Job::Respond { thread, .. }
            | Job::Remember { thread, .. }
            | Job::Open { thread, .. } => &thread.channel,
            Job::Summarize { channel, .. }
            | Job::Reflect { channel, .. }
            | Job::Forget { channel, .. }
            | Job::ForgetLate { channel, .. } => channel,
        }
    }

    /// The conversation the job is about; a summary is about the channel's top level.
    pub fn thread(&self) -> ThreadKey {
        match self {
            Job::Judge { thread, .. }
            | Job::PickUp { thread, .. }
            | Job::Respond { thread, .. }
            | Job::Remember { thread, .. }
            | Job::Open { thread, .. } => thread.clone(),
            Job::Summarize { channel, .. }
            | Job::Reflect { channel, .. }
            | Job::Forget { channel, .. }
            | Job::ForgetLate { channel, .. } => ThreadKey::top_level(channel.clone()),
            Job::SweepFacts | Job::PurgeSlack { .. } => ThreadKey::top_level(self.channel().clone()),
        }
    }

    pub fn ts(&self) -> &Ts {
        static NONE: std::sync::LazyLock<Ts> = std::sync::LazyLock::new(|| Ts::new("0"));
        match self {
            Job::SweepFacts => &NONE,
            Job::Judge { ts, .. }
            | Job::PickUp { ts, .. }
            | Job::Respond { ts, .. }
            | Job::Summarize { ts, .. }
            | Job::Reflect { ts, .. }
            | Job::Remember { ts, .. }
            | Job::Open { ts, .. }
            | Job::Forget { ts, .. }
            | Job::ForgetLate { ts, .. }
            | Job::PurgeSlack { gone_at: ts, .. } => ts,
        }
    }

    /// The key under which a queue may deduplicate this job.
    pub fn dedup_key(&self) -> String {
        let thread = self.thread();
        // A forget request is one person's: two asked at once are two requests.
        let root = match self {
            Job::Forget { user, .. } | Job::ForgetLate { user, .. } => user.as_str(),
            // Each workspace's purge is its own (their marks may share a time).
            Job::PurgeSlack { workspace: Some(workspace), .. } => workspace.as_str(),
            _ => thread.root.as_ref().map(Ts::as_str).unwrap_or("-"),
        };
        format!("{}:{}:{root}:{}", self.kind_name(), thread.channel, self.ts())
    }

    /// The job's kind, as its envelope names it.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Job::Judge { .. } => "judge",
            Job::PickUp { .. } => "pick_up",
            Job::Respond { .. } => "respond",
            Job::Summarize { .. } => "summarize",
            Job::Reflect { .. } => "reflect",
            Job::Remember { .. } => "remember",
            Job::SweepFacts => "sweep_facts",
            Job::Open { .. } => "open",
            Job::Forget { .. } => "forget",
            Job::ForgetLate { .. } => "forget_late",
            Job::PurgeSlack { .. } => "purge_slack",
        }
    }
}

/// A channel's memory (spec 001 tier two): the recent flow, the long-term history,
/// the mood, topic keywords and who is active. Summarized incrementally.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelMemory {
    pub summary: String,
    pub history: String,
    pub mood: String,
    pub topic_keywords: Vec<String>,
    pub active_users: Vec<String>,
    pub updated_at: Option<Timestamp>,
    /// The newest message already summarized.
    pub watermark: Option<Ts>,
    /// Bumped each time the memory is wiped to be made anew (a forget request), so the
    /// summary made anew is not taken for one done before.
    #[serde(default)]
    pub generation: u32,
    /// Some summarized message was written privately (see `Message::private_channel`).
    /// Once private, always: a message that came without the platform's privacy
    /// (a Slack app_mention carries no channel_type) cannot make the channel public.
    #[serde(default)]
    pub private: bool,
}

/// One line of what kuuki remembers of a public channel, for the other channels' judge
/// prompts (seed 004's channel list). Kept beside the workspace memory, one entry per
/// channel, so a judgment reads them with the workspace memory it reads anyway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelLine {
    pub channel: ChannelId,
    pub line: String,
    pub updated_at: Timestamp,
}

/// What happened across channels: the workspace's history and recent events, from
/// the channel memories, on a slower schedule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceMemory {
    pub history: String,
    pub recent_events: String,
    pub updated_at: Option<Timestamp>,
    /// The public channels' one-line memories, most recently updated first. Stored
    /// apart from the rest (`ChannelStateStore::set_channel_line`), so summaries of two
    /// channels at once do not overwrite each other's line.
    #[serde(skip)]
    pub channel_lines: Vec<ChannelLine>,
}

/// Something worth remembering, learned by reflecting on a channel's conversation. It
/// stays in that channel: nothing learned in one channel is said in another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// Stable for the same content, so restating a fact finds it again.
    pub id: String,
    pub channel: ChannelId,
    pub content: String,
    pub keywords: Vec<String>,
    pub source_users: Vec<String>,
    pub confidence: f64,
    /// Fit to bring up unasked (a proactive opener).
    pub shareable: bool,
    pub created_at: Timestamp,
    /// When it was last learned or restated (decay runs from here).
    pub confirmed_at: Timestamp,
    /// How often it was learned: restating strengthens instead of duplicating.
    pub strength: u32,
    /// The messages it was learned from: deleting the last of them forgets it (facts
    /// stored before this was kept have none and stay until they fade).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_messages: Vec<Ts>,
    /// The content's embedding (`VECTOR_SEARCH_ENABLED`), for search by meaning; `None`
    /// with vector search off or when the embedding call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
}

impl Fact {
    /// Whether `user` (by id, or by the name reflection may have used) is a source.
    pub fn is_from(&self, user: &UserId, name: &str) -> bool {
        self.source_users.iter().any(|u| **u == *user.0 || (!name.is_empty() && u == name))
    }
}

/// What kuuki noted about a person in one channel: reflection's tags and summary, and
/// the topics they spoke of last. Kept per channel, so what someone said in one
/// channel (a private one, a DM) never shapes a reply in another.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserNote {
    pub channel: ChannelId,
    pub user: UserId,
    /// What reflections noted about them, each once (added as a set: DynamoDB keeps no
    /// order, and gives the tags added since 2026-11-27 sorted after older ones).
    pub tags: Vec<String>,
    /// The last conversation with them, as reflection summed it up.
    pub summary: String,
    /// Keywords of what they said last here (spec 001's `last_topic`).
    #[serde(default)]
    pub last_topics: Vec<String>,
    pub updated_at: Option<Timestamp>,
}

/// Who someone is to kuuki across the workspace: counters only, no content (notes are
/// per channel, [`UserNote`]). One item per person; the counters grow by blind
/// increments, so counting a message reads nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserProfile {
    pub user: UserId,
    /// Messages they wrote where kuuki reads along (spec 001's interaction count).
    pub interactions: u64,
    /// Messages of theirs that called kuuki directly (mention, DM, reply).
    pub bot_mentions: u64,
    /// Channels they wrote in: where a forget request has to look.
    pub channels: Vec<ChannelId>,
    pub first_interaction: Option<Timestamp>,
    pub last_interaction: Option<Timestamp>,
}

impl UserNote {
    /// What a reflection noted: `tags` added to theirs (each once), `summary` replacing
    /// theirs unless empty, at `at`.
    pub fn add_reflection(&mut self, tags: &[String], summary: &str, at: Timestamp) {
        for tag in tags {
            if !self.tags.contains(tag) {
                self.tags.push(tag.clone());
            }
        }
        if !summary.is_empty() {
            self.summary = summary.to_owned();
        }
        self.updated_at = Some(at);
    }
}

impl UserProfile {
    /// Counts a message they wrote in `channel` at `at`; `listed`: `channel` is among
    /// their channels already (a store may know it quicker than the list).
    pub fn count(&mut self, channel: &ChannelId, at: Timestamp, called_bot: bool, listed: bool) {
        self.interactions += 1;
        self.bot_mentions += u64::from(called_bot);
        if !listed {
            self.channels.push(channel.clone());
        }
        self.first_interaction.get_or_insert(at);
        self.last_interaction = Some(self.last_interaction.map_or(at, |t| t.max(at)));
    }
}

/// How well kuuki knows someone, from their interaction count and
/// `FAMILIARITY_THRESHOLDS` (spec 001: stranger 0-5, acquaintance 6-30, regular 31-100,
/// close 101 and more). It sets the tone of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Familiarity {
    Stranger,
    Acquaintance,
    Regular,
    Close,
}

impl Familiarity {
    pub const ALL: [Familiarity; 4] =
        [Familiarity::Stranger, Familiarity::Acquaintance, Familiarity::Regular, Familiarity::Close];

    /// The level for `interactions`: each threshold is the last count of the level below.
    pub fn of(interactions: u64, thresholds: [u32; 3]) -> Self {
        match thresholds.iter().filter(|t| interactions > u64::from(**t)).count() {
            0 => Familiarity::Stranger,
            1 => Familiarity::Acquaintance,
            2 => Familiarity::Regular,
            _ => Familiarity::Close,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Familiarity::Stranger => "stranger",
            Familiarity::Acquaintance => "acquaintance",
            Familiarity::Regular => "regular",
            Familiarity::Close => "close",
        }
    }
}

/// A fact a reply was given, and how well it matched (the decision log, `/kuuki why`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactUse {
    pub id: String,
    pub content: String,
    pub score: f64,
}

/// The last judgment in a channel, for `/kuuki why`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgmentNote {
    pub at: Timestamp,
    pub ts: Ts,
    pub user: UserId,
    pub text: String,
    pub score: i32,
    pub breakdown: BTreeMap<RuleName, i32>,
    pub decision: Decision,
    pub respond: bool,
    pub response_type: Option<ResponseType>,
    pub reason: String,
}

/// One response kuuki made in a channel: cooldown, engagement and the intervention
/// history all read these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intervention {
    pub at: Timestamp,
    pub thread: ThreadKey,
    pub response_type: ResponseType,
    /// The conversation as it was when kuuki stepped in (at most 200 chars).
    pub excerpt: String,
    /// The facts the answer was given (`/kuuki why`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<FactUse>,
    /// kuuki's post, when it spoke unasked: how the channel takes it moves its
    /// talkativeness (`talkativeness::settle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unasked_post: Option<Ts>,
    /// The post answered a question kuuki picked up (§7.7): on Slack it sits in a thread
    /// under the question, on Discord it replies to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pick_up: bool,
}

mod event;
pub use event::{Event, EventKind, LoggedMessage, Stage};
mod place;
pub use place::{Place, Platform, Workspace, is_snowflake};
mod incoming;
mod log_text;
pub use incoming::Incoming;

/// Tokens an LLM call used (its cost), as the provider counted them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}
pub use log_text::{LogText, without_quotes};

/// Where a deferred Discord interaction's `application_id/token` is kept (in the ledger's
/// cache, for the 15 minutes Discord lets it be completed) until the answer to the
/// message `ts` completes it.
pub fn deferred_interaction_key(channel: &ChannelId, ts: &Ts) -> String {
    format!("interaction:{}:{}", channel.0, ts.as_str())
}

/// Who kuuki is: its user id on each platform it serves (for `<@id>` mentions and its
/// own stored posts) and the names people call it by. The patterns are prepared once:
/// every judgment looks for them.
///
/// The fields are private, so the searchers made from the names, and the mention
/// patterns (which all begin `<@`), cannot fall out of step with the ids and names.
#[derive(Debug, Clone)]
pub struct BotIdentity {
    /// The first platform's id, then any other's ([`BotIdentity::also`]).
    user_ids: Vec<UserId>,
    /// `<@id>` (Slack, Discord) and `<@!id>` (Discord nickname mentions) of each id.
    mention_patterns: Vec<String>,
    /// The name and the aliases, lowercased, empty ones left out.
    names_lowercase: Vec<String>,
    /// A searcher for each of `names_lowercase`, in its order.
    name_finders: NameFinders,
}

/// The searchers of [`BotIdentity`]'s names (shown as their number: the names are
/// shown beside them).
#[derive(Clone)]
struct NameFinders(Vec<memchr::memmem::Finder<'static>>);

impl std::fmt::Debug for NameFinders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} searchers", self.0.len())
    }
}

/// Equal when the ids and names are (the searchers are made from the names).
impl PartialEq for BotIdentity {
    fn eq(&self, other: &Self) -> bool {
        (&self.user_ids, &self.mention_patterns, &self.names_lowercase)
            == (&other.user_ids, &other.mention_patterns, &other.names_lowercase)
    }
}

impl BotIdentity {
    pub fn new(user_id: UserId, name: &str, aliases: &[String]) -> Self {
        let names_lowercase: Vec<String> = std::iter::once(name)
            .chain(aliases.iter().map(String::as_str))
            .filter(|n| !n.trim().is_empty())
            .map(str::to_lowercase)
            .collect();
        let name_finders =
            NameFinders(names_lowercase.iter().map(|n| memchr::memmem::Finder::new(n).into_owned()).collect());
        BotIdentity { user_ids: Vec::new(), mention_patterns: Vec::new(), names_lowercase, name_finders }.also(user_id)
    }

    /// Each name (lowercase) with where it starts in `text_lower`.
    pub fn names_in<'t>(&'t self, text_lower: &'t str) -> impl Iterator<Item = (&'t str, usize)> + 't {
        self.names_lowercase
            .iter()
            .zip(&self.name_finders.0)
            .flat_map(move |(name, finder)| finder.find_iter(text_lower.as_bytes()).map(move |at| (name.as_str(), at)))
    }

    /// The same bot under another platform's id.
    pub fn also(mut self, user_id: UserId) -> Self {
        self.mention_patterns.push(format!("<@{}>", user_id.0));
        self.mention_patterns.push(format!("<@!{}>", user_id.0));
        self.user_ids.push(user_id);
        self
    }

    /// `text` holds one of [`BotIdentity::mention_patterns`]. Each begins `<@`, so
    /// only the places of that pair are tried (most lines have none).
    pub fn is_mentioned_in(&self, text: &str) -> bool {
        positions_of(text, "<@").any(|at| self.mention_patterns.iter().any(|p| text[at..].starts_with(p.as_str())))
    }

    /// The name and the aliases, lowercased.
    pub fn names_lowercase(&self) -> &[String] {
        &self.names_lowercase
    }

    pub fn is_me(&self, id: &str) -> bool {
        self.user_ids.iter().any(|u| u.as_str() == id)
    }

    /// kuuki's id on the platform `channel` belongs to (its first id if it has none there).
    pub fn user_in(&self, channel: &ChannelId) -> &UserId {
        let platform = channel.platform();
        self.user_ids.iter().find(|u| u.platform() == platform).unwrap_or(&self.user_ids[0])
    }
}

/// Who kuuki is in conversation: its name, how it talks, what it knows about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Persona {
    pub name: String,
    pub system_prompt: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub topics: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's debug form (logged when it fails) hides the way back to the caller.
    #[test]
    fn a_command_reply_keeps_its_credential_out_of_logs() {
        let job = Job::sample_forget(None);
        let logged = format!("{job:?}");
        assert!(!logged.contains("secret") && logged.contains("<hidden>"), "{logged}");
        let discord = CommandReply::Discord { application_id: "1".into(), token: "tok-secret".into() };
        assert!(!format!("{discord:?}").contains("tok-secret"));
        // The queue carries it in full, as version 1 (builds before the bound read it).
        let json = serde_json::to_string(&JobEnvelope::new(job.clone())).unwrap();
        assert!(json.starts_with(r#"{"v":1,"#) && !json.contains("server"), "{json}");
        assert_eq!(serde_json::from_str::<JobEnvelope>(&json).unwrap().job, job);
        // Bounded to a server: version 2, which a build that would forget everywhere refuses.
        let bounded = Job::sample_forget(Some("G1"));
        let json = serde_json::to_string(&JobEnvelope::new(bounded.clone())).unwrap();
        assert!(json.starts_with(r#"{"v":2,"#) && json.contains(r#""server":"G1""#), "{json}");
        assert_eq!(serde_json::from_str::<JobEnvelope>(&json).unwrap().job, bounded);
    }
}
