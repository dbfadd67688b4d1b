//! The ports of docs/design.md §3. Logic in `shared/` talks only to these traits; each has an
//! in-process adapter (`adapters::memory`, `adapters::llm::script`) and an AWS or
//! platform adapter (DynamoDB, SQS, the Scheduler; Slack, Discord; the LLM providers);
//! the stores and queues pass one contract suite (`adapters::contract`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::domain::talkativeness::{FeedbackChange, FeedbackOutcome, Talkativeness, TalkativenessLimits};
use crate::domain::{
    ChannelId, ChannelLine, ChannelMemory, Fact, Intervention, Job, JudgmentNote, Message, ThreadKey, Timestamp, Ts,
    UserId, UserNote, UserProfile, Workspace, WorkspaceMemory,
};

mod installations;
pub use installations::{
    Installation, InstallationKey, Installations, OAuthError, RefreshedGrant, RefreshedTokens, Sealed, SlackGrant,
    SlackOAuth, SlackTokens, TokenSealer,
};

/// A backend failed. `Backend` may pass (queues redeliver the job); `Rejected` will
/// not (the platform said no: a missing channel, a revoked token), so the work is
/// given up and logged instead of retried; `Busy` is work another delivery holds, or
/// a service that said when to ask again (a rate limit): the job is delivered again
/// after `retry_after`.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PortError {
    #[error("{backend}: {message}")]
    Backend { backend: &'static str, message: String },
    #[error("{backend} refused: {message}")]
    Rejected { backend: &'static str, message: String },
    #[error("busy: {message} (try again in {} s)", retry_after.as_secs())]
    Busy { message: String, retry_after: Duration },
}

pub type PortResult<T> = Result<T, PortError>;

/// All timing logic reads this: the system clock in production, a virtual clock in replay.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    Inserted,
    /// The (channel, ts) was stored already: a platform retry or a double delivery.
    AlreadyExists,
}

/// Short-term memory: every message, keyed by (channel, ts).
#[async_trait]
pub trait MessageStore: Send + Sync {
    // Reads hand out shared messages: the in-process store keeps each message once, so
    // a read costs a reference count, not a copy of its strings.
    /// Whether each read is an index lookup in this process (no call over a network):
    /// then a job asks the store each question instead of reading a whole window of the
    /// channel first, which would only cost it more (see `conversation::Window`).
    fn reads_in_process(&self) -> bool {
        false
    }
    /// Stores `message` unless (channel, ts) exists already (a conditional put). Shared:
    /// the in-process store keeps this very message.
    async fn put_message(&self, message: &Arc<Message>) -> PortResult<PutOutcome>;
    async fn get_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<Option<Arc<Message>>>;
    /// The message that opened thread `root` when it is kept outside the thread, at the
    /// top level (as Slack keeps a thread's parent); `None` when the root is one of the
    /// thread's own messages (a replay's thread) or is not stored.
    async fn thread_opener(&self, channel: &ChannelId, root: &Ts) -> PortResult<Option<Arc<Message>>> {
        Ok(self.get_message(channel, root).await?.filter(|m| m.thread_root.is_none()))
    }
    /// Replaces the text of a stored message; false when there is none.
    async fn update_text(&self, channel: &ChannelId, ts: &Ts, text: &str) -> PortResult<bool>;
    /// Removes a stored message; false when there was none.
    async fn delete_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<bool>;
    /// The newest `limit` messages of one conversation written at or after `since`,
    /// oldest first.
    async fn recent_in_thread(
        &self,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>>;
    /// The newest `limit` messages of the whole channel (every conversation) written at
    /// or after `since`, oldest first.
    async fn recent_in_channel(
        &self,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>>;
    /// The oldest `limit` messages of the whole channel newer than `after` (all of them
    /// from the start when `None`), oldest first.
    async fn messages_after(
        &self,
        channel: &ChannelId,
        after: Option<&Ts>,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>>;
    /// The newest `limit` messages of the whole channel (every conversation), oldest
    /// first, and whether they are all it holds: one read that answers most of what a
    /// worker asks about a channel (see `conversation::Window`).
    async fn channel_window(&self, channel: &ChannelId, limit: usize) -> PortResult<ChannelWindow>;
    /// Like [`MessageStore::channel_window`], the newest `limit` messages older than
    /// `before` (by ts): the page before a window, in a channel that window does not
    /// reach back far enough in.
    async fn channel_window_before(&self, channel: &ChannelId, before: &Ts, limit: usize) -> PortResult<ChannelWindow>;
    /// The newest message anywhere in the channel (any conversation) older than `before`.
    async fn previous_in_channel(&self, channel: &ChannelId, before: &Ts) -> PortResult<Option<Arc<Message>>>;
    /// Removes every stored message `user` wrote in `channel` (a forget request), or
    /// those of them posted before `posted_before`; returns how many there were. Safe
    /// to repeat.
    async fn delete_messages_by(
        &self,
        channel: &ChannelId,
        user: &UserId,
        posted_before: Option<Timestamp>,
    ) -> PortResult<usize>;
    /// Every channel with stored messages (a workspace's purge after an uninstall;
    /// DynamoDB: a scan of the keys, rare and paged).
    async fn message_channels(&self) -> PortResult<Vec<ChannelId>>;
    /// Removes every stored message of `channel`; returns how many there were. Safe to
    /// repeat.
    async fn delete_channel_messages(&self, channel: &ChannelId) -> PortResult<usize>;
}

/// The newest messages of a channel, oldest first (expired ones left out).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelWindow {
    pub messages: Vec<Arc<Message>>,
    /// No older message is stored: what the window lacks does not exist.
    pub complete: bool,
}

/// What kuuki did in each channel lately: cooldown, engagement, intervention history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelState {
    pub last_response_at: Option<Timestamp>,
    /// Newest last, at most [`ChannelState::KEPT_INTERVENTIONS`].
    pub interventions: Vec<Intervention>,
    /// Ambient participation is off until then (`/kuuki mute`); direct triggers are
    /// still answered.
    pub muted_until: Option<Timestamp>,
    /// Judge and log instead of posting, until it ends (`/kuuki shadow`). Reads the
    /// `shadow: true|false` stored before shadow mode expired, too.
    #[serde(default, deserialize_with = "shadow_or_legacy_flag")]
    pub shadow: Option<Shadow>,
    pub last_judgment: Option<JudgmentNote>,
    /// The channel's memory (summary, history, mood, topics, people).
    #[serde(default)]
    pub memory: ChannelMemory,
    /// A summary is queued for then (the N-minutes trigger), so no second one is.
    #[serde(default)]
    pub summary_due: Option<Timestamp>,
    /// The last summary failed: no new one is queued before then.
    #[serde(default)]
    pub summary_retry_after: Option<Timestamp>,
    /// The newest message already reflected on.
    #[serde(default)]
    pub reflection_watermark: Option<Ts>,
    /// An immediate (full-buffer) reflection is queued until then.
    #[serde(default)]
    pub reflection_due: Option<Timestamp>,
    /// The last reflection failed: none is queued before then.
    #[serde(default)]
    pub reflection_retry_after: Option<Timestamp>,
    /// A lull's reflection is queued to run then or later (see
    /// `memory::reflect::maybe_queue`): a judgment before then queues none. Written
    /// with the judgment's note, in its item (never in the channel's JSON).
    #[serde(skip)]
    pub reflection_lull_at: Option<Timestamp>,
    /// Proactive openers here: when the last was, how long until the next may come.
    #[serde(default)]
    pub opener: OpenerState,
    /// When Slack took kuuki's access to the workspace away (an uninstall, its bot's
    /// token revoked), for a Slack channel while that stands: read with the state, so
    /// the jobs that read it anyway learn it without a call of their own; never
    /// written with it ([`ChannelStateStore::mark_slack_gone`]).
    #[serde(skip)]
    pub slack_gone: Option<Timestamp>,
    /// How talkative kuuki is here, learned from how its unasked words were taken
    /// ([`ChannelStateStore::apply_feedback`]).
    #[serde(default, skip_serializing_if = "Talkativeness::is_empty")]
    pub talkativeness: Talkativeness,
}

/// What kuuki keeps about its proactive openers in a channel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenerState {
    pub last_at: Option<Timestamp>,
    /// The last opener's post, until how people took it is known (then `None`).
    pub pending: Option<Ts>,
    /// Days the next opener waits after the last one: 1, doubled for each opener
    /// nobody answered (at most [`OpenerState::MAX_WAIT_DAYS`]). 0 reads as 1.
    pub wait_days: u32,
    /// Someone answered an opener with a clear no: no more openers here.
    pub stopped: bool,
    /// Facts already shared (never opened with twice), newest last, bounded.
    pub shared_facts: Vec<String>,
}

impl OpenerState {
    pub const MAX_WAIT_DAYS: u32 = 32;
    pub const KEPT_SHARED_FACTS: usize = 50;
}

impl ChannelState {
    pub const KEPT_INTERVENTIONS: usize = 20;

    /// When `task` is queued for, and when it may be queued again after a failure.
    fn marks(&mut self, task: MemoryTask) -> (&mut Option<Timestamp>, &mut Option<Timestamp>) {
        match task {
            MemoryTask::Summary => (&mut self.summary_due, &mut self.summary_retry_after),
            MemoryTask::Reflection => (&mut self.reflection_due, &mut self.reflection_retry_after),
        }
    }

    /// `task` failed lately: nothing is queued before this.
    pub fn retry_after(&self, task: MemoryTask) -> Option<Timestamp> {
        match task {
            MemoryTask::Summary => self.summary_retry_after,
            MemoryTask::Reflection => self.reflection_retry_after,
        }
    }

    /// The one marking rule for both tasks: mark `task` as queued for `due` unless a
    /// mark is still ahead of `now` and comes no later than `due` (an earlier time
    /// takes a later mark's place: the N-messages summary overtakes the N-minutes
    /// one). A full-buffer reflection always marks `now` + the same moment, so a mark
    /// still ahead always comes no later and blocks it. Returns whether it marked.
    pub fn mark_due(&mut self, task: MemoryTask, due: Timestamp, now: Timestamp) -> bool {
        if self.mark_blocked(task, due, now) {
            return false;
        }
        *self.marks(task).0 = Some(due);
        true
    }

    /// Whether a mark still ahead of `now` and no later than `due` keeps
    /// [`ChannelState::mark_due`] from marking `task` for `due`.
    pub fn mark_blocked(&self, task: MemoryTask, due: Timestamp, now: Timestamp) -> bool {
        let marked = match task {
            MemoryTask::Summary => self.summary_due,
            MemoryTask::Reflection => self.reflection_due,
        };
        marked.is_some_and(|m| m > now && m <= due)
    }

    pub fn defer(&mut self, task: MemoryTask, until: Timestamp) {
        let (marked, retry_after) = self.marks(task);
        *marked = None;
        *retry_after = Some(until);
    }

    pub fn clear_marks(&mut self, task: MemoryTask) {
        let (marked, retry_after) = self.marks(task);
        *marked = None;
        *retry_after = None;
    }

    pub fn muted_at(&self, now: Timestamp) -> bool {
        self.muted_until.is_some_and(|until| until > now)
    }

    /// The shadow mode in force at `now`, if any.
    pub fn shadow_at(&self, now: Timestamp) -> Option<Shadow> {
        self.shadow.filter(|shadow| shadow.until.is_none_or(|until| until > now))
    }

    /// Whether an answer in `mode` is judged and logged but not posted at `now`: any
    /// answer in `shadow all`, only ambient ones in plain shadow mode.
    pub fn silenced_at(&self, now: Timestamp, mode: crate::domain::RespondMode) -> bool {
        self.shadow_at(now).is_some_and(|shadow| shadow.all || mode != crate::domain::RespondMode::Direct)
    }

    /// Records a response: the last response time, and the intervention in the history
    /// in time order. A repeat (a redelivered answer) is the same intervention, kept
    /// once; only the newest keeps its excerpt and facts (the only ones read), so the
    /// history stays small to write.
    pub fn record_intervention(&mut self, intervention: Intervention) {
        self.last_response_at = Some(self.last_response_at.map_or(intervention.at, |t| t.max(intervention.at)));
        if self.interventions.iter().any(|i| i.at == intervention.at && i.thread == intervention.thread) {
            return;
        }
        // A resumed answer may be recorded after a newer one.
        let place = self.interventions.partition_point(|i| i.at <= intervention.at);
        if place == self.interventions.len() {
            for older in &mut self.interventions {
                older.excerpt.clear();
                older.facts.clear();
            }
            self.interventions.push(intervention);
        } else {
            self.interventions
                .insert(place, Intervention { excerpt: String::new(), facts: Vec::new(), ..intervention });
        }
        let excess = self.interventions.len().saturating_sub(ChannelState::KEPT_INTERVENTIONS);
        self.interventions.drain(..excess);
    }

    /// Takes a new channel memory and clears the pending summary; false (nothing
    /// changes) when the memory held is of a newer generation (a forget wiped it while
    /// this one was being made).
    pub fn replace_memory(&mut self, memory: ChannelMemory) -> bool {
        if memory.generation < self.memory.generation {
            return false;
        }
        self.memory = memory;
        self.clear_marks(MemoryTask::Summary);
        true
    }

    /// Interventions in the `window` before `now`.
    pub fn interventions_within(&self, now: Timestamp, window: Duration) -> usize {
        let since = now - window;
        self.interventions.iter().filter(|i| i.at >= since && i.at <= now).count()
    }
}

/// Shadow mode (`/kuuki shadow [all] [duration]`): kuuki judges and logs, and posts
/// only answers to direct mentions and DMs, or nothing at all with `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shadow {
    /// It ends by itself then. `None` only for a shadow mode stored before shadow mode
    /// expired: it lasts until someone turns it off, as it did then.
    pub until: Option<Timestamp>,
    /// Direct mentions are not answered either.
    pub all: bool,
}

/// Reads `shadow` as stored now (`null` or a [`Shadow`]) or as stored before it
/// expired (`true`: posted nothing, mentions included, until turned off).
fn shadow_or_legacy_flag<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Shadow>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Legacy(bool),
        Current(Option<Shadow>),
    }
    Ok(match Stored::deserialize(deserializer)? {
        Stored::Legacy(true) => Some(Shadow { until: None, all: true }),
        Stored::Legacy(false) => None,
        Stored::Current(shadow) => shadow,
    })
}

#[async_trait]
pub trait ChannelStateStore: Send + Sync {
    /// Shared, so an in-process store hands out its copy without cloning it (it is
    /// read on every judgment and every answer).
    async fn channel_state(&self, channel: &ChannelId) -> PortResult<std::sync::Arc<ChannelState>>;
    /// Records a response: sets the last response time and appends to the history.
    /// Only the one recorded last keeps its excerpt and facts (the only ones read: the
    /// next prompt's context, `/kuuki why`), so the history stays small to write.
    async fn record_intervention(&self, channel: &ChannelId, intervention: Intervention) -> PortResult<()>;
    /// Keeps the channel's last judgment (`/kuuki why`), and with it, when given, the
    /// time a lull's reflection is queued for ([`ChannelState::reflection_lull_at`];
    /// `None` leaves the one stored): one write.
    async fn record_judgment(
        &self,
        channel: &ChannelId,
        note: JudgmentNote,
        reflection_lull_at: Option<Timestamp>,
    ) -> PortResult<()>;
    /// Notes when a lull's reflection is queued for ([`ChannelState::reflection_lull_at`])
    /// where no judgment's note carries it (a direct answer, a REMEMBER job): one small
    /// write, beside the last judgment.
    async fn note_lull_reflection(&self, channel: &ChannelId, at: Timestamp) -> PortResult<()>;
    /// Mutes ambient participation until `until`; `None` unmutes.
    async fn set_muted(&self, channel: &ChannelId, until: Option<Timestamp>) -> PortResult<()>;
    /// Stores what kuuki keeps about its openers in the channel.
    async fn set_opener(&self, channel: &ChannelId, opener: OpenerState) -> PortResult<()>;
    /// Starts or replaces shadow mode; `None` ends it.
    async fn set_shadow(&self, channel: &ChannelId, shadow: Option<Shadow>) -> PortResult<()>;
    /// Stores a new channel memory and clears the pending summary; false (nothing
    /// changes) when the stored memory is of a newer generation: a forget wiped it
    /// while this one was being made from what it had.
    async fn set_channel_memory(&self, channel: &ChannelId, memory: ChannelMemory) -> PortResult<bool>;
    /// The newest message reflected on: the same messages never yield facts twice.
    /// Leaves the reflection's marks (a reflection that finds one clears them).
    async fn set_reflection_watermark(&self, channel: &ChannelId, ts: Ts) -> PortResult<()>;
    /// Marks `task` as queued for `due` by [`ChannelState::mark_due`]'s one rule;
    /// returns whether this call marked it (and so should queue the job).
    async fn mark_due(&self, channel: &ChannelId, task: MemoryTask, due: Timestamp, now: Timestamp)
    -> PortResult<bool>;
    /// After a failed `task`: none is queued before `until`.
    async fn defer(&self, channel: &ChannelId, task: MemoryTask, until: Timestamp) -> PortResult<()>;
    /// Forgets a queued or deferred `task`, leaving the memory as it is.
    async fn clear_marks(&self, channel: &ChannelId, task: MemoryTask) -> PortResult<()>;
    /// `workspace`'s memory with the one-line memory of each of its channels (most
    /// recently updated first; never another workspace's), read together (DynamoDB: one
    /// Query, and a GetItem of the item it was kept in before until the memory is
    /// written anew).
    async fn workspace_memory(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory>;
    /// The workspace memory without the channels' lines (what its refresh and a forget
    /// read): one small read, however many channels there are.
    async fn workspace_memory_without_lines(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory>;
    /// Stores the history and recent events; the channel lines are left as they are.
    async fn set_workspace_memory(&self, workspace: Workspace<'_>, memory: WorkspaceMemory) -> PortResult<()>;
    /// Sets `channel`'s one-line memory in its workspace's memory, or removes it (`None`:
    /// a private channel), leaving the other channels' lines alone.
    async fn set_channel_line(&self, channel: &ChannelId, line: Option<ChannelLine>) -> PortResult<()>;
    /// Applies `change` to the channel's talkativeness at `now` in one conditional
    /// write ([`Talkativeness::apply`]); `None`, and nothing written, when it changes
    /// nothing (a redelivered signal, an undo of what is not counted).
    async fn apply_feedback(
        &self,
        channel: &ChannelId,
        change: &FeedbackChange,
        now: Timestamp,
        limits: &TalkativenessLimits,
    ) -> PortResult<Option<FeedbackOutcome>>;
    /// Every channel with a stored state (a workspace's purge; DynamoDB: a scan).
    async fn state_channels(&self) -> PortResult<Vec<ChannelId>>;
    /// Removes `channel`'s whole state (memory, last judgment, answers, mute, shadow
    /// mode, openers) and its line in the workspace memory. Safe to repeat.
    async fn delete_channel_state(&self, channel: &ChannelId) -> PortResult<()>;
    /// When Slack took kuuki's access to `workspace` away, while no reinstall has
    /// cleared it (see [`ChannelState::slack_gone`]: the state of each of the
    /// workspace's Slack channels carries it too).
    async fn slack_gone(&self, workspace: Workspace<'_>) -> PortResult<Option<Timestamp>>;
    /// Marks Slack's access to `workspace` gone since `at` unless it is marked already
    /// (a conditional write, so of two deliveries one marks); returns whether this call
    /// marked it.
    async fn mark_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool>;
    /// Clears the mark if it still says `at` (conditional: a newer mark stays); returns
    /// whether this call cleared it.
    async fn clear_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool>;
}

/// Facts and notes about people (docs/design.md §9, long-term memory).
#[async_trait]
pub trait FactStore: Send + Sync {
    /// The channel's facts (at most `FACT_STORE_MAX_FACTS_PER_CHANNEL` are kept).
    async fn facts(&self, channel: &ChannelId) -> PortResult<Vec<Fact>>;
    /// The channel's facts, each with its revision, for [`FactStore::put_fact_if_unchanged`].
    async fn facts_as_read(&self, channel: &ChannelId) -> PortResult<Vec<(Fact, FactRevision)>>;
    /// Stores `fact`, replacing one with the same id (a new revision).
    async fn put_fact(&self, fact: &Fact) -> PortResult<()>;
    /// Stores `fact` only if the stored one is still as read: at revision `read`, or
    /// none with its id (`None`). False, and nothing changes, when another write came
    /// between (a forget's edit while a reflection waited for the model, a reflection's
    /// write while a forget or a deleted message's edit was made).
    async fn put_fact_if_unchanged(&self, fact: &Fact, read: Option<FactRevision>) -> PortResult<bool>;
    async fn delete_fact(&self, channel: &ChannelId, id: &str) -> PortResult<()>;
    /// Every channel that has facts (for the daily clean-up).
    async fn fact_channels(&self) -> PortResult<Vec<ChannelId>>;
    /// What kuuki noted about `user` in `channel` (notes never cross channels).
    async fn user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<Option<UserNote>>;
    /// What a reflection noted about `user` in `channel`: `tags` added to theirs (a set:
    /// the order is not kept), `summary` replacing theirs unless empty, `at` the time.
    /// One write, nothing read: the note is made if there is none, and whatever else
    /// is in it (the topics an answer noted meanwhile) stays.
    async fn note_reflection(
        &self,
        channel: &ChannelId,
        user: &UserId,
        tags: &[String],
        summary: &str,
        at: Timestamp,
    ) -> PortResult<()>;
    /// The topics `user` speaks of now in `channel` (replacing the last ones), at `at`:
    /// one write, the rest of the note left as it is.
    async fn note_topics(&self, channel: &ChannelId, user: &UserId, topics: &[String], at: Timestamp)
    -> PortResult<()>;
    async fn delete_user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<()>;
    /// Someone's counters across `workspace` (never another's).
    async fn profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<Option<UserProfile>>;
    /// The profile in `channel`'s workspace and the note in `channel`
    /// ([`FactStore::profile`], [`FactStore::user_note`]) read together (an answer
    /// reads both; DynamoDB: one BatchGetItem).
    async fn profile_and_note(
        &self,
        channel: &ChannelId,
        user: &UserId,
    ) -> PortResult<(Option<UserProfile>, Option<UserNote>)> {
        Ok((self.profile(channel.workspace(), user).await?, self.user_note(channel, user).await?))
    }
    /// Counts a message `user` wrote in `channel` at `at` (and whether it called kuuki)
    /// in their profile of `channel`'s workspace, with blind increments: nothing is read.
    /// Count each stored message once.
    async fn count_message(
        &self,
        user: &UserId,
        channel: &ChannelId,
        at: Timestamp,
        called_bot: bool,
    ) -> PortResult<()>;
    async fn delete_profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<()>;
    /// Everyone with a note in `channel` (a workspace's purge).
    async fn noted_users(&self, channel: &ChannelId) -> PortResult<Vec<UserId>>;
    /// Everyone with a profile in `workspace` (its purge).
    async fn profiled_users(&self, workspace: Workspace<'_>) -> PortResult<Vec<UserId>>;
}

/// Which write of a stored fact was read: every write makes a new one. `FactRevision(0)`:
/// a fact stored before revisions were kept, until its next write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactRevision(pub u64);

/// Memory work a channel queues for itself, one at a time, through marks in its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryTask {
    Summary,
    Reflection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This caller holds the claim until it completes or the lease runs out.
    Claimed,
    /// Like `Claimed`, but an earlier holder had started to post and never completed:
    /// whether its post went out is unknown, so look for it before posting again.
    Resumed,
    /// Someone else holds an unexpired claim, until then.
    InProgress { until: Timestamp },
    /// The work was done already.
    Completed,
}

impl ClaimOutcome {
    /// Whether this caller now holds the claim.
    pub fn holds(self) -> bool {
        matches!(self, ClaimOutcome::Claimed | ClaimOutcome::Resumed)
    }

    /// A claim another delivery holds as the error that makes the queue try again
    /// after it has run out (never a drop: that delivery may die).
    pub fn busy(key: &str, until: Timestamp, now: Timestamp) -> PortError {
        let left = until.as_micros().saturating_sub(now.as_micros()).max(0) as u64;
        PortError::Busy {
            message: format!("another delivery holds {key}"),
            retry_after: Duration::from_micros(left) + Duration::from_secs(1),
        }
    }
}

/// Idempotency: claims on work so a redelivered job never posts twice.
#[async_trait]
pub trait Ledger: Send + Sync {
    /// Claims `key` for `lease` unless it is held or completed. An expired claim can
    /// be taken again.
    async fn claim(&self, key: &str, now: Timestamp, lease: Duration) -> PortResult<ClaimOutcome>;
    /// Notes on a held claim that posting begins: a later holder of the claim (after a
    /// crash, a timeout, a post whose answer never came) gets `Resumed`.
    async fn mark_posting(&self, key: &str) -> PortResult<()>;
    /// Marks `key` done; it stays done for `keep`.
    async fn complete(&self, key: &str, now: Timestamp, keep: Duration) -> PortResult<()>;
    /// Gives up a claim after a failure, so a redelivery can try again (a posting mark
    /// stays).
    async fn release(&self, key: &str) -> PortResult<()>;
    /// A cached value (the judgment cache), if it has not expired by `now`.
    async fn cache_get(&self, key: &str, now: Timestamp) -> PortResult<Option<String>>;
    /// [`Ledger::cache_get`] of each of `keys`, in their order: one read where the
    /// store reads several items at once, and a consistent one (what was just put is
    /// found: a forget's marks are read this way).
    async fn cache_get_many(&self, keys: &[String], now: Timestamp) -> PortResult<Vec<Option<String>>> {
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            values.push(self.cache_get(key, now).await?);
        }
        Ok(values)
    }
    /// Caches `value` under `key` until `until`, replacing what was there.
    async fn cache_put(&self, key: &str, value: &str, until: Timestamp) -> PortResult<()>;
}

/// Delayed work with at-least-once delivery.
#[async_trait]
pub trait Queue: Send + Sync {
    async fn enqueue(&self, job: Job, delay: Duration) -> PortResult<()>;
    /// Queues several jobs, each with its delay (at most [`MAX_QUEUE_DELAY`]); where the
    /// queue bills by request (SQS), in one request per queue. Ingress queues a
    /// message's judgment and its question's pick-up together.
    async fn enqueue_all(&self, jobs: Vec<(Job, Duration)>) -> PortResult<()> {
        for (job, delay) in jobs {
            self.enqueue(job, delay).await?;
        }
        Ok(())
    }
}

/// The longest delay a queue message can carry (SQS `DelaySeconds`); longer waits go
/// through the [`Scheduler`].
pub const MAX_QUEUE_DELAY: Duration = Duration::from_secs(900);

/// One-time jobs at a moment beyond the queue's reach (EventBridge Scheduler `at()`).
#[async_trait]
pub trait Scheduler: Send + Sync {
    async fn schedule_once(&self, job: Job, at: Timestamp) -> PortResult<()>;
}

/// One delivery of a queued job to an in-process worker.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Shared with the queue's copy of the message: handing a job out copies nothing.
    pub job: std::sync::Arc<Job>,
    /// Deliveries of this job before this one.
    pub deliveries: u32,
    /// Which queue message this is, for the queue that handed it out.
    pub receipt: u64,
}

/// A queue whose deliveries are taken and settled in this process (replay, `kuuki
/// serve`, tests): the worker takes each job as it comes due and acknowledges it or
/// puts it back, which SQS and Lambda do between them in AWS. Like SQS, a delivered job
/// stays in the queue, invisible for the visibility timeout, until it is settled.
#[async_trait]
pub trait InProcessQueue: Send + Sync {
    /// How long a delivered job stays invisible before it comes back unless settled.
    fn set_visibility_timeout(&self, timeout: Duration);
    /// When the earliest job is due.
    fn next_due(&self) -> Option<Timestamp>;
    /// Delivers the earliest job due at or before `now`.
    fn pop_due(&self, now: Timestamp) -> Option<Delivery>;
    /// The delivery is done: the job leaves the queue.
    fn ack(&self, delivery: &Delivery);
    /// Puts a job back `after` a failed delivery, like a message becoming visible again.
    fn redeliver(&self, delivery: Delivery, after: Duration);
    /// Returns a delivery that never started (its worker stopped first): visible again
    /// at once, its delivery not counted.
    fn put_back(&self, delivery: Delivery);
    /// Completes when a job was added since the last call (or is added now).
    async fn arrived(&self);
}

/// An in-process queue's jobs at a moment (`kuuki serve`'s metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Visible and due: waiting for a worker (a delivery past its visibility timeout too).
    pub due: u64,
    /// Waiting for their time (a judgment's wait, a redelivery's back-off, a schedule).
    pub delayed: u64,
    /// Taken by a worker and not settled yet.
    pub in_delivery: u64,
    /// How long the earliest due job has been due; zero when none is.
    pub oldest_due: Duration,
}

/// How one delivery of a job to an in-process worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobOutcome {
    Done,
    /// It failed and comes back after a while.
    Failed,
    /// It failed (or its workers died) too often: set aside, never run again.
    DeadLettered,
    /// It ran past the worker timeout and was stopped; it comes back.
    TimedOut,
}

impl JobOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::Failed => "failed",
            JobOutcome::DeadLettered => "dead_letter",
            JobOutcome::TimedOut => "timed_out",
        }
    }
}

/// Told of each job the in-process workers ran, how it ended and how long it took
/// (`kuuki serve`'s metrics).
pub trait JobObserver: Send + Sync {
    fn job_finished(&self, kind: crate::budget::JobKind, outcome: JobOutcome, took: Duration);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmRole {
    Judge,
    Generate,
    Summarize,
    Reflect,
}

impl LlmRole {
    pub const ALL: [LlmRole; 4] = [LlmRole::Judge, LlmRole::Generate, LlmRole::Summarize, LlmRole::Reflect];

    pub fn as_str(self) -> &'static str {
        match self {
            LlmRole::Judge => "judge",
            LlmRole::Generate => "generate",
            LlmRole::Summarize => "summarize",
            LlmRole::Reflect => "reflect",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LlmRequest {
    pub role: LlmRole,
    pub model: String,
    /// kuuki's instructions and persona: never a person's words (the system message;
    /// docs/design.md §7.5).
    pub system: String,
    /// The conversation, memories and facts, fenced as data, and the question (the
    /// user message).
    pub user: String,
    pub max_tokens: u32,
    /// The sampling temperature (`LLM_TEMPERATURE` and the roles' own); `None` leaves
    /// it to the server.
    pub temperature: Option<f64>,
    /// The JSON the answer must be, for the roles that answer JSON: the providers ask
    /// for structured output with it (`LLM_STRUCTURED_OUTPUT`). `None`: free text.
    pub schema: Option<&'static AnswerSchema>,
    /// The text of the message this call is about (logs, scripted answers).
    pub subject: String,
}

/// Tokens of one call (in the domain: the decision log records them).
pub use crate::domain::Usage;

impl LlmRequest {
    /// Both messages as one text, as the model reads them.
    pub fn prompt(&self) -> String {
        format!("{}\n\n{}", self.system, self.user)
    }
}

/// The JSON Schema of one kind of answer (the judge's verdict, a summary, a
/// reflection), as the providers send it: `name` names it to the server.
#[derive(Debug, PartialEq)]
pub struct AnswerSchema {
    pub name: &'static str,
    pub schema: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LlmResponse {
    pub text: String,
    pub usage: Usage,
    /// Why the model stopped writing.
    pub finish: Finish,
}

/// Why a model stopped: only a normal stop gives text fit to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The model finished its answer (OpenAI `stop`, Anthropic `end_turn`).
    Complete,
    /// Cut off at the token limit (`length`, `max_tokens`).
    Truncated,
    /// Withheld by the provider's filter or a refusal (`content_filter`, `refusal`).
    Filtered,
    /// Any other reason, as the provider named it.
    Other(String),
}

impl std::fmt::Display for Finish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finish::Complete => f.write_str("complete"),
            Finish::Truncated => f.write_str("cut off at the token limit"),
            Finish::Filtered => f.write_str("withheld by the provider's filter"),
            Finish::Other(reason) => write!(f, "stopped for {reason:?}"),
        }
    }
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum LlmError {
    #[error("the LLM call failed: {0}")]
    Failed(String),
    #[error("no scripted answer for the {0} call")]
    NoScriptedAnswer(&'static str),
}

#[async_trait]
pub trait Llm: Send + Sync {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError>;
}

/// Text embeddings for fact search (`VECTOR_SEARCH_ENABLED`, `EMBEDDING_MODEL`).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// One vector per text, in the order given, from one call (a reflection's new facts
    /// are embedded together).
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError>;
}

/// A message kuuki posts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Post {
    pub channel: ChannelId,
    /// Post in this thread; `None` posts at the top level.
    pub thread_root: Option<Ts>,
    pub text: String,
    /// Marks the post as kuuki's answer to one piece of work (Slack message metadata),
    /// so an attempt whose outcome is unknown can be found before posting again.
    pub tag: Option<String>,
    /// The message this answers directly: Discord posts it as a reply to that message;
    /// Slack has no replies outside threads and ignores it.
    pub reply_to: Option<Ts>,
    /// A deferred Discord interaction this post completes (`application_id/token`, see
    /// [`crate::domain::deferred_interaction_key`]): the answer replaces its "thinking"
    /// message instead of being posted anew. Slack ignores it.
    pub completes: Option<String>,
}

/// kuuki's own earlier post, found by its tag.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundPost {
    pub ts: Ts,
    pub text: String,
}

/// The chat platform's API.
#[async_trait]
pub trait Chat: Send + Sync {
    /// Posts and returns the new message's ts.
    async fn post_message(&self, post: &Post) -> PortResult<Ts>;
    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()>;
    /// kuuki's own post tagged `tag` in the conversation (`thread_root`, or the top
    /// level) written after `after`, if there is one.
    async fn find_post(
        &self,
        channel: &ChannelId,
        thread_root: Option<&Ts>,
        after: &Ts,
        tag: &str,
    ) -> PortResult<Option<FoundPost>>;
    /// A display name for prompts of `user`, as seen from `channel` (whose workspace
    /// knows them); the id itself when the platform has none.
    async fn user_name(&self, channel: &ChannelId, user: &UserId) -> PortResult<String>;
    /// Answers a slash command after the fact, the way back it gave
    /// ([`crate::domain::CommandReply`]): the caller alone sees the answer.
    async fn answer_command(&self, reply: &crate::domain::CommandReply, text: &str) -> PortResult<()>;
    /// Whether the platform says `user` administers the workspace of `channel` (Slack:
    /// admin or owner), which lets them change how kuuki takes part. An error when it cannot
    /// tell (never a guess). Platforms whose requests carry the caller's permissions
    /// (Discord interactions) and the replay say no: there, only `COMMAND_MANAGERS`.
    async fn is_workspace_admin(&self, _channel: &ChannelId, _user: &UserId) -> PortResult<bool> {
        Ok(false)
    }
    /// The server (a Discord guild) `channel` belongs to, where one deployment serves
    /// several; `None` where the platform is one workspace (Slack) or for a DM.
    /// `Rejected` for a channel the platform no longer shows (deleted, or access taken
    /// away); another error when it cannot say just now.
    async fn server_of(&self, _channel: &ChannelId) -> PortResult<Option<String>> {
        Ok(None)
    }
    /// The longest message the platform takes in `channel`; longer replies are split.
    fn max_message_chars(&self, _channel: &ChannelId) -> Option<usize> {
        None
    }
    /// Whether a post can open a thread under a message in `channel` (Slack's
    /// `thread_ts`); where not (Discord, whose threads are channels of their own), a
    /// post replies to the message instead ([`Post::reply_to`]).
    fn threads(&self, _channel: &ChannelId) -> bool {
        true
    }
}

/// Where decision records go: stdout in replay, structured logs in Lambda.
pub trait DecisionLog: Send + Sync {
    fn record(&self, event: crate::domain::Event);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RespondMode;

    fn state_from(shadow: &str) -> ChannelState {
        let json = format!(
            r#"{{"last_response_at": null, "interventions": [], "muted_until": null, "shadow": {shadow}, "last_judgment": null}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn a_shadow_stored_before_it_expired_still_silences_everything() {
        let now = Timestamp(1_000);
        let legacy = state_from("true");
        assert_eq!(legacy.shadow, Some(Shadow { until: None, all: true }));
        assert!(legacy.silenced_at(now, RespondMode::Direct), "as before: mentions too");
        assert_eq!(state_from("false").shadow, None);
        assert_eq!(state_from("null").shadow, None);
        let without: ChannelState = serde_json::from_str(r#"{"interventions": []}"#).unwrap();
        assert_eq!(without.shadow, None);
    }

    #[test]
    fn plain_shadow_lets_direct_answers_through_until_it_ends() {
        let state = state_from(r#"{"until": 2000, "all": false}"#);
        assert!(state.silenced_at(Timestamp(1_999), RespondMode::Ambient));
        assert!(!state.silenced_at(Timestamp(1_999), RespondMode::Direct));
        assert!(!state.silenced_at(Timestamp(2_000), RespondMode::Ambient), "over by itself");
        let all = state_from(r#"{"until": 2000, "all": true}"#);
        assert!(all.silenced_at(Timestamp(1_999), RespondMode::Direct));
        let round_trip: ChannelState = serde_json::from_str(&serde_json::to_string(&all).unwrap()).unwrap();
        assert_eq!(round_trip, all);
    }
}
