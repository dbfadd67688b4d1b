//! The claims and cache entries of the in-process store: [`Ledger`].

use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) enum Claim {
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
pub(super) struct ClaimKey(pub(super) u128);

/// Makes [`ClaimKey`]s with seeds drawn for each store: claims live only in the
/// process, and keys nobody can compute ahead are keys nobody can make collide.
#[derive(Default)]
pub(super) struct ClaimKeys(pub(super) [foldhash::quality::RandomState; 2]);

impl ClaimKeys {
    pub(super) fn of(&self, key: &str) -> ClaimKey {
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
pub(super) struct Claims {
    pub(super) recent: HashMap<ClaimKey, Claim>,
    pub(super) older: HashMap<ClaimKey, Claim>,
}

/// Claims the recent table takes before they are moved on, when no prune moves them.
pub(super) const RECENT_CLAIMS: usize = 4096;

impl Claims {
    pub(super) fn get(&self, key: &ClaimKey) -> Option<&Claim> {
        self.recent.get(key).or_else(|| self.older.get(key))
    }

    pub(super) fn get_mut(&mut self, key: &ClaimKey) -> Option<&mut Claim> {
        match self.recent.get_mut(key) {
            Some(claim) => Some(claim),
            None => self.older.get_mut(key),
        }
    }

    /// Sets the claim under `key` where it is (a key is in one table only), or among
    /// the recent ones.
    pub(super) fn set(&mut self, key: ClaimKey, claim: Claim) {
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
    pub(super) fn sweep(&mut self, now: Timestamp) {
        self.move_on();
        self.older.retain(|_, claim| match claim {
            Claim::InProgress { posting: true, .. } => true,
            Claim::InProgress { until, .. } | Claim::Completed { until } => *until > now,
        });
    }

    /// Moves the recent claims into the large table, one write after another.
    pub(super) fn move_on(&mut self) {
        self.older.extend(self.recent.drain());
    }

    pub(super) fn len(&self) -> usize {
        self.recent.len() + self.older.len()
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
