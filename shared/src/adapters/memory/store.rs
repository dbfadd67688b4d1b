mod channels;
mod facts;
mod installations;
mod ledger;
mod messages;
mod purge;
#[cfg(test)]
mod tests;

pub(crate) use facts::newest_first;
use ledger::*;
use messages::*;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

// Hashed with foldhash, not SipHash: the store hashes ids on every read and write.
use foldhash::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{
    ChannelId, ChannelLine, ChannelMemory, Fact, Intervention, JudgmentNote, Message, SortedByTs, ThreadKey, Timestamp,
    Ts, TsMap, UserId, UserNote, UserProfile, Workspace, WorkspaceMemory, search_by_ts,
};
use crate::ports::{
    ChannelState, ChannelStateStore, ChannelWindow, ClaimOutcome, FactRevision, FactStore, Ledger, MemoryTask,
    MessageStore, OpenerState, PortResult, PutOutcome, Shadow,
};

/// The value of `key`, made when missing: the key is cloned only then (a lookup by
/// reference does not allocate, `entry` would clone every time).
fn slot<'m, K: Eq + std::hash::Hash + Clone, V: Default>(map: &'m mut HashMap<K, V>, key: &K) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.clone(), V::default());
    }
    map.get_mut(key).expect("present or just made")
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
    /// Each workspace's memory without its lines, by id ("" the shared one's).
    workspaces: HashMap<String, WorkspaceMemory>,
    channel_lines: HashMap<ChannelId, ChannelLine>,
    /// Each fact with its revision (from `fact_revisions`).
    facts: HashMap<ChannelId, BTreeMap<String, (Fact, u64)>>,
    fact_revisions: u64,
    notes: HashMap<(ChannelId, UserId), UserNote>,
    profiles: HashMap<UserId, StoredProfile>,
    /// Since when Slack's access is gone, by workspace id ("" the shared one's; see
    /// [`ChannelStateStore::mark_slack_gone`]).
    slack_gone: HashMap<String, Timestamp>,
    /// By workspace id.
    installations: HashMap<String, crate::ports::Installation>,
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
