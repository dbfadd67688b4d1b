mod purge;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

// Hashed with foldhash, not SipHash: the store hashes ids on every read and write.
use foldhash::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{
    ChannelId, ChannelLine, ChannelMemory, Fact, Intervention, JudgmentNote, Message, SortedByTs, ThreadKey, Timestamp,
    Ts, TsMap, UserId, UserNote, UserProfile, WorkspaceMemory, search_by_ts,
};
use crate::ports::{
    ChannelState, ChannelStateStore, ChannelWindow, ClaimOutcome, FactRevision, FactStore, Ledger, MemoryTask,
    MessageStore, OpenerState, PortResult, PutOutcome, Shadow,
};

/// One channel's messages, each stored once and indexed three ways, so every read is
/// a walk over the messages it returns, however long the history.
#[derive(Default)]
struct ChannelMessages {
    by_ts: ByTs,
    /// The messages outside threads, by ts.
    top_level: ByTs,
    /// Each thread's messages, under its root.
    threads: TsMap<ByTs>,
    /// By (written at, ts), oldest first: what the retention forgets, without a scan.
    /// Messages are written as the clock moves on, so a new one goes at the back; one
    /// that does not (an edit keeps its time) is put in its place.
    by_time: VecDeque<Arc<Message>>,
}

impl ChannelMessages {
    /// Stores `message`; false (and nothing changes) when its ts is stored already.
    fn insert(&mut self, message: Arc<Message>) -> bool {
        let Err(place) = self.by_ts.search(&message.ts) else {
            return false;
        };
        let entry = (message.at, &message.ts);
        match self.by_time.back() {
            Some(last) if (last.at, &last.ts) > entry => {
                let at = self.by_time.partition_point(|e| (e.at, &e.ts) < entry);
                self.by_time.insert(at, message.clone());
            }
            _ => self.by_time.push_back(message.clone()),
        }
        match &message.thread_root {
            None => self.top_level.insert(message.clone()),
            Some(root) => self.threads.get_or_insert_with(root, ByTs::default).insert(message.clone()),
        }
        self.by_ts.insert_at(place, message);
        true
    }

    /// The messages of the conversation `root` (`None`: the top level), if any.
    fn conversation(&self, root: &Option<Ts>) -> Option<&ByTs> {
        match root {
            None => Some(&self.top_level),
            Some(root) => self.threads.get(root),
        }
    }

    fn remove(&mut self, ts: &Ts) -> Option<Arc<Message>> {
        let message = self.by_ts.remove(ts)?;
        let entry = (message.at, &message.ts);
        if let Ok(at) = self.by_time.binary_search_by(|e| (e.at, &e.ts).cmp(&entry)) {
            self.by_time.remove(at);
        }
        match &message.thread_root {
            None => drop(self.top_level.remove(ts)),
            Some(root) => {
                if let Some(thread) = self.threads.get_mut(root) {
                    thread.remove(ts);
                    if thread.is_empty() {
                        self.threads.remove(root);
                    }
                }
            }
        }
        Some(message)
    }

    /// Removes every message `forget` picks; how many went.
    fn remove_where(&mut self, forget: impl Fn(&Message) -> bool) -> usize {
        let before = self.by_ts.len();
        self.by_ts.retain(|m| !forget(m));
        self.by_time.retain(|m| !forget(m));
        self.top_level.retain(|m| !forget(m));
        self.threads.retain(|thread| {
            thread.retain(|m| !forget(m));
            !thread.is_empty()
        });
        before - self.by_ts.len()
    }
}

/// A message in a [`ByTs`].
struct Entry {
    hint: u64,
    message: Arc<Message>,
}

impl Entry {
    fn new(message: Arc<Message>) -> Self {
        Entry { hint: message.ts.order_hint(), message }
    }
}

/// Messages in ts order. They arrive nearly in order, so a new one goes at the back
/// without allocating a node, and nearly every question is about the newest ones: a
/// search starts there.
#[derive(Default)]
struct ByTs(VecDeque<Entry>);

impl SortedByTs for ByTs {
    #[inline]
    fn sorted_len(&self) -> usize {
        self.0.len()
    }

    #[inline]
    fn hint_at(&self, i: usize) -> u64 {
        self.0[i].hint
    }

    #[inline]
    fn ts_at(&self, i: usize) -> &Ts {
        &self.0[i].message.ts
    }
}

impl ByTs {
    fn search(&self, ts: &Ts) -> Result<usize, usize> {
        search_by_ts(self, ts)
    }

    fn get(&self, ts: &Ts) -> Option<&Arc<Message>> {
        self.search(ts).ok().map(|i| self.at(i))
    }

    fn insert(&mut self, message: Arc<Message>) {
        if let Err(place) = self.search(&message.ts) {
            self.insert_at(place, message);
        }
    }

    /// Puts `message` at `place`, where [`ByTs::search`] said it goes.
    fn insert_at(&mut self, place: usize, message: Arc<Message>) {
        self.0.insert(place, Entry::new(message));
    }

    /// The message at index `i`.
    fn at(&self, i: usize) -> &Arc<Message> {
        &self.0[i].message
    }

    fn remove(&mut self, ts: &Ts) -> Option<Arc<Message>> {
        self.search(ts).ok().and_then(|i| self.0.remove(i)).map(|entry| entry.message)
    }

    /// The index of the first message after `ts`.
    fn after(&self, ts: &Ts) -> usize {
        self.search(ts).map_or_else(|place| place, |found| found + 1)
    }

    fn newest_first(&self) -> impl Iterator<Item = &Arc<Message>> {
        self.0.iter().rev().map(|entry| &entry.message)
    }

    /// The messages from index `first` on, oldest first.
    fn starting_at(&self, first: usize) -> impl Iterator<Item = &Arc<Message>> {
        self.0.range(first..).map(|entry| &entry.message)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn retain(&mut self, keep: impl Fn(&Message) -> bool) {
        self.0.retain(|entry| keep(&entry.message));
    }
}

/// The value of `key`, made when missing: the key is cloned only then (a lookup by
/// reference does not allocate, `entry` would clone every time).
fn slot<'m, K: Eq + std::hash::Hash + Clone, V: Default>(map: &'m mut HashMap<K, V>, key: &K) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.clone(), V::default());
    }
    map.get_mut(key).expect("present or just made")
}

#[derive(Debug, Clone, Copy)]
enum Claim {
    /// `posting`: the holder began to post (see [`Ledger::mark_posting`]).
    InProgress {
        until: Timestamp,
        posting: bool,
    },
    Completed {
        until: Timestamp,
    },
}

/// A claim's key as 128 bits of two differently seeded hashes of its text: kept
/// inline in the table and compared there, so a claim costs no allocation and a
/// lookup no pointer to follow into a table of a day's claims (a collision among the
/// claims one process holds is out of reach at 128 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct ClaimKey(u128);

/// Makes [`ClaimKey`]s with seeds drawn for each store: claims live only in the
/// process, and keys nobody can compute ahead are keys nobody can make collide.
#[derive(Default)]
struct ClaimKeys([foldhash::quality::RandomState; 2]);

impl ClaimKeys {
    fn of(&self, key: &str) -> ClaimKey {
        use std::hash::BuildHasher;
        let [low, high] = [&self.0[0], &self.0[1]].map(|state| state.hash_one(key));
        ClaimKey(u128::from(high) << 64 | u128::from(low))
    }
}

/// The claims: the newest in a small table of their own, moved into the large one
/// together every so often. A claim is made and completed within a job, so both find it
/// in the small table, which stays in cache; writing each new claim straight into a
/// table of a day's claims had every job wait for that write to reach memory.
#[derive(Default)]
struct Claims {
    recent: HashMap<ClaimKey, Claim>,
    older: HashMap<ClaimKey, Claim>,
}

/// Claims the recent table takes before they are moved on, when no prune moves them.
const RECENT_CLAIMS: usize = 4096;

impl Claims {
    fn get(&self, key: &ClaimKey) -> Option<&Claim> {
        self.recent.get(key).or_else(|| self.older.get(key))
    }

    fn get_mut(&mut self, key: &ClaimKey) -> Option<&mut Claim> {
        match self.recent.get_mut(key) {
            Some(claim) => Some(claim),
            None => self.older.get_mut(key),
        }
    }

    /// Sets the claim under `key` where it is (a key is in one table only), or among
    /// the recent ones.
    fn set(&mut self, key: ClaimKey, claim: Claim) {
        if let Some(held) = self.get_mut(&key) {
            *held = claim;
            return;
        }
        self.recent.insert(key, claim);
        if self.recent.len() >= RECENT_CLAIMS {
            self.move_on();
        }
    }

    /// Drops the claims expired by `now` (all moved on first), in one pass over the
    /// table in memory order. An abandoned post is kept for whoever takes the work over.
    fn sweep(&mut self, now: Timestamp) {
        self.move_on();
        self.older.retain(|_, claim| match claim {
            Claim::InProgress { posting: true, .. } => true,
            Claim::InProgress { until, .. } | Claim::Completed { until } => *until > now,
        });
    }

    /// Moves the recent claims into the large table, one write after another.
    fn move_on(&mut self) {
        self.older.extend(self.recent.drain());
    }

    fn len(&self) -> usize {
        self.recent.len() + self.older.len()
    }
}

/// A profile with its channels also as a set: every message asks whether its channel
/// is listed, and a person may write in many.
#[derive(Default)]
struct StoredProfile {
    profile: UserProfile,
    channels: foldhash::HashSet<ChannelId>,
}

#[derive(Default)]
struct Inner {
    channels: HashMap<ChannelId, ChannelMessages>,
    /// Shared with readers; a write copies a state only while a reader still holds it.
    states: HashMap<ChannelId, Arc<ChannelState>>,
    /// Expired claims stay until a sweep (a claim asks whether one is still current):
    /// removing each as it expired looked it up again in a table of a day's claims.
    /// Until then `mark_posting` still marks an expired claim in progress, so the next
    /// holder resumes (looks for the post first), as on DynamoDB, whose mark checks
    /// the status alone and whose expired items go late.
    claims: Claims,
    /// Messages stored, for pruning every [`PRUNE_EVERY`].
    puts: u64,
    /// How many claims the last sweep left: the next comes when as many more were made.
    claims_after_sweep: usize,
    cache: HashMap<Arc<str>, (String, Timestamp)>,
    /// (expiry, key) of the cache entries, soonest first; keys shared with `cache`.
    cache_expiries: BinaryHeap<Reverse<(Timestamp, Arc<str>)>>,
    workspace: WorkspaceMemory,
    channel_lines: HashMap<ChannelId, ChannelLine>,
    /// Each fact with its revision (from `fact_revisions`).
    facts: HashMap<ChannelId, BTreeMap<String, (Fact, u64)>>,
    fact_revisions: u64,
    notes: HashMap<(ChannelId, UserId), UserNote>,
    profiles: HashMap<UserId, StoredProfile>,
    /// Since when Slack's access is gone (see [`ChannelStateStore::mark_slack_gone`]).
    slack_gone: Option<Timestamp>,
}

/// Every memory tier in maps behind one lock: the embedded store of replay and serve.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// Channel-state writes that fail before succeeding again (tests of redelivery).
    failing_writes: super::FaultsToInject,
    /// Conditional fact writes refused as if another write came between (tests).
    refused_fact_writes: super::FaultsToInject,
    /// For a long-running `kuuki serve`: messages older than this are forgotten, and
    /// expired claims and cache entries with them (DynamoDB's TTL does this in AWS).
    retention: Option<(Duration, Arc<dyn crate::ports::Clock>)>,
    claim_keys: ClaimKeys,
}

/// Claims held before the first sweep of expired ones.
const CLAIMS_BEFORE_SWEEPING: usize = 4096;

/// How often (in stored messages) a store with a retention prunes itself.
const PRUNE_EVERY: u64 = 1024;

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Changes a channel's state in place (a copy only while a reader still holds it).
    fn update<T>(&self, channel: &ChannelId, change: impl FnOnce(&mut ChannelState) -> T) -> T {
        change(Arc::make_mut(slot(&mut self.lock().states, channel)))
    }

    /// A store that forgets messages older than `retention` (`MESSAGE_RETENTION_DAYS`).
    pub fn with_retention(retention: Duration, clock: Arc<dyn crate::ports::Clock>) -> Self {
        MemoryStore { retention: Some((retention, clock)), ..Self::default() }
    }

    /// Drops what has expired: messages past the retention and cache entries past their
    /// time, walking only what expired (the time index, the expiry heap); expired claims
    /// in a sweep over the table every so many claims.
    fn prune(&self, inner: &mut Inner) {
        let Some((retention, clock)) = &self.retention else { return };
        let now = clock.now();
        let oldest = now - *retention;
        for messages in inner.channels.values_mut() {
            while let Some(ts) = messages.by_time.front().filter(|m| m.at < oldest).map(|m| m.ts.clone()) {
                if messages.remove(&ts).is_none() {
                    // Not stored under its ts (cannot happen): the time index lets go too.
                    messages.by_time.pop_front();
                }
            }
        }
        inner.channels.retain(|_, messages| !messages.by_ts.is_empty());
        if inner.claims.len() >= 2 * inner.claims_after_sweep.max(CLAIMS_BEFORE_SWEEPING) {
            inner.claims.sweep(now);
            inner.claims_after_sweep = inner.claims.len();
        } else {
            inner.claims.move_on();
        }
        while inner.cache_expiries.peek().is_some_and(|Reverse((until, _))| *until <= now) {
            let Reverse((_, key)) = inner.cache_expiries.pop().expect("just seen");
            if inner.cache.get(&key).is_some_and(|(_, until)| *until <= now) {
                inner.cache.remove(&key);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("store lock")
    }

    /// The next `n` channel-state writes fail as if the table were unavailable.
    pub fn fail_next_writes(&self, n: u32) {
        self.failing_writes.set(n);
    }

    /// The next `n` conditional fact writes are refused as if another write had come
    /// between ([`FactStore::put_fact_if_unchanged`]).
    pub fn refuse_next_fact_writes(&self, n: u32) {
        self.refused_fact_writes.set(n);
    }

    fn check_write(&self) -> PortResult<()> {
        if self.failing_writes.take() {
            return Err(crate::ports::PortError::Backend {
                backend: "memory store",
                message: "simulated write failure".into(),
            });
        }
        Ok(())
    }
}

/// The first `limit` of newest-first messages written at or after `since`, oldest first.
fn newest_since<'a>(
    newest_first: impl Iterator<Item = &'a Arc<Message>>,
    since: Timestamp,
    limit: usize,
) -> Vec<Arc<Message>> {
    let mut out: Vec<Arc<Message>> = newest_first.take_while(|m| m.at >= since).take(limit).cloned().collect();
    out.reverse();
    out
}

#[async_trait]
impl MessageStore for MemoryStore {
    fn reads_in_process(&self) -> bool {
        true
    }

    async fn put_message(&self, message: &Arc<Message>) -> PortResult<PutOutcome> {
        let mut inner = self.lock();
        let channel = slot(&mut inner.channels, &message.channel);
        if !channel.insert(message.clone()) {
            return Ok(PutOutcome::AlreadyExists);
        }
        inner.puts += 1;
        if inner.puts.is_multiple_of(PRUNE_EVERY) {
            self.prune(&mut inner);
        }
        Ok(PutOutcome::Inserted)
    }

    async fn get_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<Option<Arc<Message>>> {
        Ok(self.lock().channels.get(channel).and_then(|c| c.by_ts.get(ts)).cloned())
    }

    async fn thread_opener(&self, channel: &ChannelId, root: &Ts) -> PortResult<Option<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(None);
        };
        // A root in its own thread is found in the thread's few messages, which the
        // caller has just read, and not searched for among the channel's: a reply to a
        // thread begun long ago asks for a root no cache holds.
        if messages.threads.get(root).is_some_and(|thread| thread.get(root).is_some()) {
            return Ok(None);
        }
        Ok(messages.top_level.get(root).cloned())
    }

    async fn update_text(&self, channel: &ChannelId, ts: &Ts, text: &str) -> PortResult<bool> {
        let mut inner = self.lock();
        let Some(messages) = inner.channels.get_mut(channel) else {
            return Ok(false);
        };
        let Some(old) = messages.remove(ts) else {
            return Ok(false);
        };
        messages.insert(Arc::new(Message { text: text.to_owned(), ..Message::clone(&old) }));
        Ok(true)
    }

    async fn delete_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<bool> {
        let mut inner = self.lock();
        let Some(messages) = inner.channels.get_mut(channel) else {
            return Ok(false);
        };
        Ok(messages.remove(ts).is_some())
    }

    async fn recent_in_thread(
        &self,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(&thread.channel) else {
            return Ok(Vec::new());
        };
        let Some(conversation) = messages.conversation(&thread.root) else {
            return Ok(Vec::new());
        };
        Ok(newest_since(conversation.newest_first(), since, limit))
    }

    async fn recent_in_channel(
        &self,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(Vec::new());
        };
        Ok(newest_since(messages.by_ts.newest_first(), since, limit))
    }

    async fn messages_after(
        &self,
        channel: &ChannelId,
        after: Option<&Ts>,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(Vec::new());
        };
        let first = after.map_or(0, |after| messages.by_ts.after(after));
        Ok(messages.by_ts.starting_at(first).take(limit).cloned().collect())
    }

    async fn channel_window(&self, channel: &ChannelId, limit: usize) -> PortResult<ChannelWindow> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(ChannelWindow { messages: Vec::new(), complete: true });
        };
        let mut newest: Vec<Arc<Message>> = messages.by_ts.newest_first().take(limit).cloned().collect();
        newest.reverse();
        Ok(ChannelWindow { messages: newest, complete: messages.by_ts.len() <= limit })
    }

    async fn channel_window_before(&self, channel: &ChannelId, before: &Ts, limit: usize) -> PortResult<ChannelWindow> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(ChannelWindow { messages: Vec::new(), complete: true });
        };
        let end = messages.by_ts.search(before).unwrap_or_else(|place| place);
        let start = end.saturating_sub(limit);
        let page = messages.by_ts.starting_at(start).take(end - start).cloned().collect();
        Ok(ChannelWindow { messages: page, complete: start == 0 })
    }

    async fn previous_in_channel(&self, channel: &ChannelId, before: &Ts) -> PortResult<Option<Arc<Message>>> {
        let inner = self.lock();
        Ok(inner.channels.get(channel).and_then(|c| {
            let place = c.by_ts.search(before).unwrap_or_else(|place| place);
            place.checked_sub(1).map(|previous| c.by_ts.at(previous).clone())
        }))
    }

    async fn delete_messages_by(
        &self,
        channel: &ChannelId,
        user: &UserId,
        posted_before: Option<Timestamp>,
    ) -> PortResult<usize> {
        let mut inner = self.lock();
        let Some(messages) = inner.channels.get_mut(channel) else {
            return Ok(0);
        };
        Ok(messages.remove_where(|m| &m.user == user && posted_before.is_none_or(|before| m.at < before)))
    }

    async fn message_channels(&self) -> PortResult<Vec<ChannelId>> {
        Ok(self.message_channels_now())
    }

    async fn delete_channel_messages(&self, channel: &ChannelId) -> PortResult<usize> {
        Ok(self.delete_channel_messages_now(channel))
    }
}

#[async_trait]
impl ChannelStateStore for MemoryStore {
    async fn channel_state(&self, channel: &ChannelId) -> PortResult<Arc<ChannelState>> {
        let inner = self.lock();
        Ok(Self::with_slack_gone(inner.states.get(channel).cloned().unwrap_or_default(), channel, inner.slack_gone))
    }

    async fn record_intervention(&self, channel: &ChannelId, intervention: Intervention) -> PortResult<()> {
        self.check_write()?;
        let mut inner = self.lock();
        Arc::make_mut(slot(&mut inner.states, channel)).record_intervention(intervention);
        Ok(())
    }

    async fn record_judgment(
        &self,
        channel: &ChannelId,
        note: JudgmentNote,
        reflection_lull_at: Option<Timestamp>,
    ) -> PortResult<()> {
        self.check_write()?;
        let mut inner = self.lock();
        let state = Arc::make_mut(slot(&mut inner.states, channel));
        state.last_judgment = Some(note);
        if reflection_lull_at.is_some() {
            state.reflection_lull_at = reflection_lull_at;
        }
        Ok(())
    }

    async fn note_lull_reflection(&self, channel: &ChannelId, at: Timestamp) -> PortResult<()> {
        Arc::make_mut(slot(&mut self.lock().states, channel)).reflection_lull_at = Some(at);
        Ok(())
    }

    async fn set_muted(&self, channel: &ChannelId, until: Option<Timestamp>) -> PortResult<()> {
        Arc::make_mut(slot(&mut self.lock().states, channel)).muted_until = until;
        Ok(())
    }

    async fn set_opener(&self, channel: &ChannelId, opener: OpenerState) -> PortResult<()> {
        self.check_write()?;
        Arc::make_mut(slot(&mut self.lock().states, channel)).opener = opener;
        Ok(())
    }

    async fn set_shadow(&self, channel: &ChannelId, shadow: Option<Shadow>) -> PortResult<()> {
        Arc::make_mut(slot(&mut self.lock().states, channel)).shadow = shadow;
        Ok(())
    }

    async fn set_channel_memory(&self, channel: &ChannelId, memory: ChannelMemory) -> PortResult<bool> {
        self.check_write()?;
        Ok(self.update(channel, |state| state.replace_memory(memory)))
    }

    async fn set_reflection_watermark(&self, channel: &ChannelId, ts: Ts) -> PortResult<()> {
        self.update(channel, |state| {
            state.reflection_watermark = Some(ts);
        });
        Ok(())
    }

    async fn mark_due(
        &self,
        channel: &ChannelId,
        task: MemoryTask,
        due: Timestamp,
        now: Timestamp,
    ) -> PortResult<bool> {
        Ok(self.update(channel, |state| state.mark_due(task, due, now)))
    }

    async fn defer(&self, channel: &ChannelId, task: MemoryTask, until: Timestamp) -> PortResult<()> {
        self.update(channel, |state| state.defer(task, until));
        Ok(())
    }

    async fn clear_marks(&self, channel: &ChannelId, task: MemoryTask) -> PortResult<()> {
        self.update(channel, |state| state.clear_marks(task));
        Ok(())
    }

    async fn workspace_memory(&self) -> PortResult<WorkspaceMemory> {
        let inner = self.lock();
        Ok(WorkspaceMemory {
            channel_lines: newest_first(inner.channel_lines.values().cloned().collect()),
            ..inner.workspace.clone()
        })
    }

    async fn workspace_memory_without_lines(&self) -> PortResult<WorkspaceMemory> {
        Ok(self.lock().workspace.clone())
    }

    async fn set_workspace_memory(&self, memory: WorkspaceMemory) -> PortResult<()> {
        self.lock().workspace = WorkspaceMemory { channel_lines: Vec::new(), ..memory };
        Ok(())
    }

    async fn set_channel_line(&self, channel: &ChannelId, line: Option<ChannelLine>) -> PortResult<()> {
        self.check_write()?;
        let mut inner = self.lock();
        match line {
            Some(line) => inner.channel_lines.insert(channel.clone(), line),
            None => inner.channel_lines.remove(channel),
        };
        Ok(())
    }

    async fn state_channels(&self) -> PortResult<Vec<ChannelId>> {
        Ok(self.state_channels_now())
    }

    async fn delete_channel_state(&self, channel: &ChannelId) -> PortResult<()> {
        self.delete_channel_state_now(channel)
    }

    async fn slack_gone(&self) -> PortResult<Option<Timestamp>> {
        Ok(self.lock().slack_gone)
    }

    async fn mark_slack_gone(&self, at: Timestamp) -> PortResult<bool> {
        Ok(self.mark_slack_gone_now(at))
    }

    async fn clear_slack_gone(&self, at: Timestamp) -> PortResult<bool> {
        Ok(self.clear_slack_gone_now(at))
    }
}

/// Stores `fact` with a new revision, replacing the one with its id.
fn store_fact(inner: &mut Inner, fact: &Fact) {
    inner.fact_revisions += 1;
    let revision = inner.fact_revisions;
    slot(&mut inner.facts, &fact.channel).insert(fact.id.clone(), (fact.clone(), revision));
}

/// `user`'s note in `channel`, made empty if there is none.
fn note_of<'a>(inner: &'a mut Inner, channel: &ChannelId, user: &UserId) -> &'a mut UserNote {
    inner.notes.entry((channel.clone(), user.clone())).or_insert_with(|| UserNote {
        channel: channel.clone(),
        user: user.clone(),
        ..UserNote::default()
    })
}

/// Channel lines most recently updated first, ties by channel id (a stable order).
pub(crate) fn newest_first(mut lines: Vec<ChannelLine>) -> Vec<ChannelLine> {
    lines.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.channel.0.cmp(&b.channel.0)));
    lines
}

#[async_trait]
impl FactStore for MemoryStore {
    async fn facts(&self, channel: &ChannelId) -> PortResult<Vec<Fact>> {
        Ok(self.lock().facts.get(channel).map(|f| f.values().map(|(f, _)| f.clone()).collect()).unwrap_or_default())
    }

    async fn facts_as_read(&self, channel: &ChannelId) -> PortResult<Vec<(Fact, FactRevision)>> {
        let inner = self.lock();
        let facts = inner.facts.get(channel).into_iter().flat_map(|f| f.values());
        Ok(facts.map(|(fact, revision)| (fact.clone(), FactRevision(*revision))).collect())
    }

    async fn put_fact(&self, fact: &Fact) -> PortResult<()> {
        store_fact(&mut self.lock(), fact);
        Ok(())
    }

    async fn put_fact_if_unchanged(&self, fact: &Fact, read: Option<FactRevision>) -> PortResult<bool> {
        let mut inner = self.lock();
        let stored = inner.facts.get(&fact.channel).and_then(|f| f.get(&fact.id)).map(|(_, r)| FactRevision(*r));
        if stored != read || self.refused_fact_writes.take() {
            return Ok(false);
        }
        store_fact(&mut inner, fact);
        Ok(true)
    }

    async fn delete_fact(&self, channel: &ChannelId, id: &str) -> PortResult<()> {
        if let Some(facts) = self.lock().facts.get_mut(channel) {
            facts.remove(id);
        }
        Ok(())
    }

    async fn fact_channels(&self) -> PortResult<Vec<ChannelId>> {
        Ok(self.lock().facts.iter().filter(|(_, f)| !f.is_empty()).map(|(c, _)| c.clone()).collect())
    }

    async fn user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<Option<UserNote>> {
        Ok(self.lock().notes.get(&(channel.clone(), user.clone())).cloned())
    }

    async fn note_reflection(
        &self,
        channel: &ChannelId,
        user: &UserId,
        tags: &[String],
        summary: &str,
        at: Timestamp,
    ) -> PortResult<()> {
        let mut inner = self.lock();
        note_of(&mut inner, channel, user).add_reflection(tags, summary, at);
        Ok(())
    }

    async fn note_topics(
        &self,
        channel: &ChannelId,
        user: &UserId,
        topics: &[String],
        at: Timestamp,
    ) -> PortResult<()> {
        let mut inner = self.lock();
        let note = note_of(&mut inner, channel, user);
        note.last_topics = topics.to_vec();
        note.updated_at = Some(at);
        Ok(())
    }

    async fn delete_user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<()> {
        self.lock().notes.remove(&(channel.clone(), user.clone()));
        Ok(())
    }

    async fn profile(&self, user: &UserId) -> PortResult<Option<UserProfile>> {
        Ok(self.lock().profiles.get(user).map(|stored| stored.profile.clone()))
    }

    async fn count_message(
        &self,
        user: &UserId,
        channel: &ChannelId,
        at: Timestamp,
        called_bot: bool,
    ) -> PortResult<()> {
        let mut inner = self.lock();
        let stored = match inner.profiles.get_mut(user) {
            Some(stored) => stored,
            None => inner.profiles.entry(user.clone()).or_insert_with(|| StoredProfile {
                profile: UserProfile { user: user.clone(), ..Default::default() },
                channels: Default::default(),
            }),
        };
        // Looked up before it is cloned: a person's channel is nearly always listed.
        let listed = stored.channels.contains(channel);
        if !listed {
            stored.channels.insert(channel.clone());
        }
        stored.profile.count(channel, at, called_bot, listed);
        Ok(())
    }

    async fn delete_profile(&self, user: &UserId) -> PortResult<()> {
        self.lock().profiles.remove(user);
        Ok(())
    }

    async fn noted_users(&self, channel: &ChannelId) -> PortResult<Vec<UserId>> {
        Ok(self.noted_users_now(channel))
    }

    async fn profiled_users(&self) -> PortResult<Vec<UserId>> {
        Ok(self.profiled_users_now())
    }
}

#[async_trait]
impl Ledger for MemoryStore {
    async fn claim(&self, key: &str, now: Timestamp, lease: Duration) -> PortResult<ClaimOutcome> {
        let mut inner = self.lock();
        let key = self.claim_keys.of(key);
        let posting = match inner.claims.get(&key) {
            Some(Claim::Completed { until }) if *until > now => return Ok(ClaimOutcome::Completed),
            Some(Claim::InProgress { until, .. }) if *until > now => {
                return Ok(ClaimOutcome::InProgress { until: *until });
            }
            Some(Claim::InProgress { posting, .. }) => *posting,
            _ => false,
        };
        inner.claims.set(key, Claim::InProgress { until: now + lease, posting });
        Ok(if posting { ClaimOutcome::Resumed } else { ClaimOutcome::Claimed })
    }

    async fn mark_posting(&self, key: &str) -> PortResult<()> {
        if let Some(Claim::InProgress { posting, .. }) = self.lock().claims.get_mut(&self.claim_keys.of(key)) {
            *posting = true;
        }
        Ok(())
    }

    async fn complete(&self, key: &str, now: Timestamp, keep: Duration) -> PortResult<()> {
        self.lock().claims.set(self.claim_keys.of(key), Claim::Completed { until: now + keep });
        Ok(())
    }

    async fn cache_get(&self, key: &str, now: Timestamp) -> PortResult<Option<String>> {
        Ok(self.lock().cache.get(key).filter(|(_, until)| *until > now).map(|(value, _)| value.clone()))
    }

    async fn cache_put(&self, key: &str, value: &str, until: Timestamp) -> PortResult<()> {
        let mut inner = self.lock();
        let key: Arc<str> = key.into();
        inner.cache.insert(key.clone(), (value.to_owned(), until));
        if self.retention.is_some() {
            inner.cache_expiries.push(Reverse((until, key)));
        }
        Ok(())
    }

    async fn release(&self, key: &str) -> PortResult<()> {
        // The lease ends now; a posting mark stays for the next holder.
        if let Some(Claim::InProgress { until, .. }) = self.lock().claims.get_mut(&self.claim_keys.of(key)) {
            *until = Timestamp(i64::MIN);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::adapters::memory::VirtualClock;
    use crate::domain::{Author, UserId};
    use crate::ports::Clock;

    fn message(channel: &str, secs: i64) -> Message {
        let at = Timestamp(secs * 1_000_000);
        Message {
            channel: ChannelId(channel.into()),
            ts: Ts::from_timestamp(at),
            thread_root: None,
            user: UserId("U1".into()),
            user_name: "alice".into(),
            text: "x".into(),
            author: Author::Human,
            replies_to_bot: false,
            in_dm: false,
            private_channel: false,
            at,
        }
    }

    /// Threads are kept in the order of their roots, and a reply to an old message can
    /// begin a thread after newer ones began: each is found, loses a message and goes
    /// when empty on its own, whichever way the messages go (deleted, or forgotten
    /// with the person who wrote them).
    #[tokio::test]
    async fn threads_begun_out_of_order_are_found_and_go_alone() {
        let store = MemoryStore::new();
        let reply = |secs: i64, root: i64, user: &str| {
            let mut m = message("c", secs);
            m.thread_root = Some(Ts::from_timestamp(Timestamp(root * 1_000_000)));
            m.user = UserId(user.into());
            Arc::new(m)
        };
        for secs in [10, 20, 30] {
            store.put_message(&Arc::new(message("c", secs))).await.unwrap();
        }
        // Threads on 30, then 10, then 20 (roots out of order), and a text ts's thread.
        for m in [reply(40, 30, "U1"), reply(50, 10, "U1"), reply(60, 20, "U2"), reply(70, 10, "U2")] {
            store.put_message(&m).await.unwrap();
        }
        let texts_root = Ts::new("not-a-number");
        let mut odd = message("c", 80);
        odd.thread_root = Some(texts_root.clone());
        store.put_message(&Arc::new(odd)).await.unwrap();

        let thread = |root: Option<Ts>| {
            let store = &store;
            async move {
                let key = ThreadKey { channel: ChannelId("c".into()), root };
                let found = store.recent_in_thread(&key, Timestamp(0), 10).await.unwrap();
                found.iter().map(|m| m.at.0 / 1_000_000).collect::<Vec<_>>()
            }
        };
        let root = |secs: i64| Some(Ts::from_timestamp(Timestamp(secs * 1_000_000)));
        assert_eq!(thread(None).await, [10, 20, 30]);
        assert_eq!(thread(root(10)).await, [50, 70]);
        assert_eq!(thread(root(20)).await, [60]);
        assert_eq!(thread(root(30)).await, [40]);
        assert_eq!(thread(Some(texts_root.clone())).await, [80]);
        assert_eq!(thread(root(25)).await, Vec::<i64>::new());

        assert!(store.delete_message(&ChannelId("c".into()), &reply(40, 30, "U1").ts).await.unwrap());
        assert_eq!(thread(root(30)).await, Vec::<i64>::new());
        assert_eq!(store.lock().channels[&ChannelId("c".into())].threads.len(), 3, "the emptied thread went");
        assert_eq!(store.delete_messages_by(&ChannelId("c".into()), &UserId("U2".into()), None).await.unwrap(), 2);
        assert_eq!(thread(root(10)).await, [50]);
        assert_eq!(thread(root(20)).await, Vec::<i64>::new());
        assert_eq!(thread(Some(texts_root)).await, [80]);
        assert_eq!(store.lock().channels[&ChannelId("c".into())].threads.len(), 2, "the thread of U2 alone went");
        assert_eq!(thread(None).await, [10, 20, 30]);
    }

    /// Expired claims go in a sweep once as many claims again were made as were
    /// current at the last one: the table stays within twice what is current, and an
    /// abandoned post (a claim marked posting) stays for whoever takes the work over.
    #[tokio::test]
    async fn expired_claims_are_swept_and_abandoned_posts_kept() {
        let day = Duration::from_secs(86_400);
        let clock = Arc::new(VirtualClock::new(Timestamp(0)));
        let store = MemoryStore::with_retention(day, clock.clone());
        let lease = Duration::from_secs(60);
        store.claim("posting", clock.now(), lease).await.unwrap();
        store.mark_posting("posting").await.unwrap();
        let mut ts = 0;
        let mut put = async |store: &MemoryStore| {
            ts += 1;
            store.put_message(&Arc::new(message("c", ts))).await.unwrap();
        };
        for i in 0..3 * CLAIMS_BEFORE_SWEEPING {
            let key = format!("judge:{i}");
            store.claim(&key, clock.now(), lease).await.unwrap();
            store.complete(&key, clock.now(), Duration::from_secs(3600)).await.unwrap();
            put(&store).await;
            clock.advance_to(clock.now() + Duration::from_secs(1));
            let held = store.lock().claims.len();
            // At most an hour's claims (3,600) are current at once.
            assert!(held <= 2 * CLAIMS_BEFORE_SWEEPING + PRUNE_EVERY as usize, "{held} claims held after {i}");
        }
        // Swept: an hour-old claim is gone, not just expired; the abandoned post stays.
        assert!(store.lock().claims.len() < 2 * CLAIMS_BEFORE_SWEEPING);
        assert!(store.lock().claims.get(&store.claim_keys.of("judge:0")).is_none());
        assert_eq!(store.claim("posting", clock.now(), lease).await.unwrap(), ClaimOutcome::Resumed);
        // An expired claim not yet swept is no claim.
        assert_eq!(store.claim("judge:12000", clock.now(), lease).await.unwrap(), ClaimOutcome::Completed);
        clock.advance_to(clock.now() + Duration::from_secs(3601));
        assert_eq!(store.claim("judge:12000", clock.now(), lease).await.unwrap(), ClaimOutcome::Claimed);
    }

    /// A claim reads the same whether it is still among the recent claims or was moved
    /// on to the large table: completed, marked, released or taken again.
    #[tokio::test]
    async fn claims_read_the_same_before_and_after_they_move_on() {
        let store = MemoryStore::new();
        let (lease, keep) = (Duration::from_secs(60), Duration::from_secs(3600));
        let at = |s: i64| Timestamp(s * 1_000_000);
        for moved in [false, true] {
            let key = format!("judge:{moved}");
            assert_eq!(store.claim(&key, at(0), lease).await.unwrap(), ClaimOutcome::Claimed);
            if moved {
                store.lock().claims.move_on();
                assert!(store.lock().claims.recent.is_empty(), "moved on");
            }
            assert_eq!(store.claim(&key, at(1), lease).await.unwrap(), ClaimOutcome::InProgress { until: at(60) });
            store.mark_posting(&key).await.unwrap();
            store.release(&key).await.unwrap();
            assert_eq!(store.claim(&key, at(2), lease).await.unwrap(), ClaimOutcome::Resumed, "moved: {moved}");
            store.complete(&key, at(3), keep).await.unwrap();
            assert_eq!(store.claim(&key, at(4), lease).await.unwrap(), ClaimOutcome::Completed, "moved: {moved}");
            assert_eq!(store.lock().claims.len(), usize::from(moved) + 1, "each claim held once");
        }
        // The recent table moves on by itself once full, and nothing is lost.
        for i in 0..RECENT_CLAIMS {
            store.claim(&format!("respond:{i}"), at(5), lease).await.unwrap();
        }
        assert!(store.lock().claims.recent.len() < RECENT_CLAIMS);
        assert_eq!(store.lock().claims.len(), RECENT_CLAIMS + 2);
        assert_eq!(store.claim("respond:0", at(6), lease).await.unwrap(), ClaimOutcome::InProgress { until: at(65) });
    }

    /// Claim keys are seeded for each store, and their two halves apart: the same text
    /// maps to other bits in another store, so no one can prepare texts that collide.
    #[test]
    fn claim_keys_are_seeded_for_each_store() {
        let (one, other) = (ClaimKeys::default(), ClaimKeys::default());
        let key = "respond:C1:1767603600.000100";
        assert_eq!(one.of(key), one.of(key), "the same store, the same key");
        assert_ne!(one.of(key), other.of(key), "another store, other seeds");
        let ClaimKey(bits) = one.of(key);
        assert_ne!(bits >> 64, bits & u128::from(u64::MAX), "two differently seeded halves");
    }

    /// The ts index answers as a sorted list would, whatever order messages came in
    /// (mostly in order, some late, some again), at whatever pace, and wherever the
    /// asked ts falls.
    #[test]
    fn the_ts_index_finds_what_a_sorted_list_finds() {
        let mut rng = fastrand::Rng::with_seed(3);
        for round in 0..50 {
            let mut index = ByTs::default();
            let mut reference: Vec<i64> = Vec::new();
            let mut clock = 0;
            for _ in 0..rng.usize(0..300) {
                // Mostly steady, now and then a lull (the guesses from the times err).
                clock += if rng.u8(..20) == 0 { rng.i64(100..2000) } else { rng.i64(1..4) };
                // Now and then a late one, now and then a repeat.
                let secs = if rng.u8(..10) == 0 { rng.i64(0..=clock) } else { clock };
                let m = Arc::new(message("c", secs));
                let fresh = reference.binary_search(&secs).is_err();
                assert_eq!(index.search(&m.ts).is_err(), fresh, "round {round}: {secs} stored already?");
                index.insert(m);
                if let Err(place) = reference.binary_search(&secs) {
                    reference.insert(place, secs);
                }
            }
            let stored: Vec<i64> = index.0.iter().map(|e| e.message.at.0 / 1_000_000).collect();
            assert_eq!(stored, reference, "round {round}: in ts order, each once");
            for asked in 0..=clock + 1 {
                let ts = Ts::from_timestamp(Timestamp(asked * 1_000_000));
                assert_eq!(index.search(&ts), reference.binary_search(&asked), "round {round}: search {asked}");
                let after = reference.partition_point(|s| *s <= asked);
                assert_eq!(index.after(&ts), after, "round {round}: after {asked}");
            }
            if let Some(&gone) = reference.get(reference.len() / 2) {
                let ts = Ts::from_timestamp(Timestamp(gone * 1_000_000));
                assert!(index.remove(&ts).is_some());
                assert!(index.get(&ts).is_none() && index.remove(&ts).is_none(), "round {round}: removed once");
            }
        }
    }

    #[tokio::test]
    async fn a_store_with_a_retention_forgets_old_messages() {
        let day = 86_400;
        let clock = Arc::new(VirtualClock::new(Timestamp(0)));
        let store = MemoryStore::with_retention(Duration::from_secs(day as u64), clock.clone());
        store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(&message("old", 10)))).await.unwrap();
        clock.advance_to(Timestamp(2 * day * 1_000_000));
        for i in 0..PRUNE_EVERY as i64 {
            store
                .put_message(&std::sync::Arc::new(crate::domain::Message::clone(&message("new", 2 * day + i))))
                .await
                .unwrap();
        }
        assert!(
            store
                .get_message(&ChannelId("old".into()), &Ts::from_timestamp(Timestamp(10_000_000)))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .get_message(&ChannelId("new".into()), &Ts::from_timestamp(Timestamp(2 * day * 1_000_000)))
                .await
                .unwrap()
                .is_some()
        );
        let plain = MemoryStore::new();
        plain.put_message(&std::sync::Arc::new(crate::domain::Message::clone(&message("old", 10)))).await.unwrap();
        assert!(
            plain
                .get_message(&ChannelId("old".into()), &Ts::from_timestamp(Timestamp(10_000_000)))
                .await
                .unwrap()
                .is_some()
        );
    }
}
