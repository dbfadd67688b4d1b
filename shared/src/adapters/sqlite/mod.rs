//! The embedded durable store of `kuuki serve`: every memory tier, the ledger and the
//! job queue in one SQLite file (WAL), one port per file beside this one. It passes the
//! same contract suite as the in-process and DynamoDB stores.
//!
//! One process owns the file (a lock on `PATH.lock`, taken at open): a second `kuuki
//! serve` on the same file stops at start-up. So whatever a process had taken when it died
//! (jobs in delivery, claims in progress) is known to be abandoned when the next one
//! opens the file, and is taken up again at once ([`SqliteStore::open`]).
//!
//! Every port write is one transaction, committed before the call returns: a process
//! killed at any instant loses nothing a call acknowledged. Commits are not synced to
//! the disk one by one (`synchronous = NORMAL`, WAL): a power cut may lose the last
//! moments before it, a crashed or killed process loses nothing. A thread of the store's
//! own checkpoints the log (`checkpoint.rs`), so no port call waits for the disk.

mod channels;
mod checkpoint;
mod facts;
mod installations;
mod ledger;
mod messages;
mod queue;
mod schema;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};
use thiserror::Error;

use crate::domain::Timestamp;
use crate::ports::{Clock, PortError};

pub use schema::SCHEMA_VERSION;

/// Why the store could not be opened. Each names the file and what to do; none has
/// changed the file.
#[derive(Debug, Error)]
pub enum OpenError {
    #[error("{path} is in use by another process (is another `kuuki serve` running on it?)")]
    Locked { path: String },
    #[error("{path} is not a kuuki data file or is damaged ({reason}); move it away or restore a backup")]
    Corrupt { path: String, reason: String },
    #[error(
        "{path} was written by a newer kuuki (data format {found}; this build reads up to {supported}): run that version, or restore a backup"
    )]
    Newer { path: String, found: i64, supported: i64 },
    #[error("cannot open {path}: {reason}")]
    Other { path: String, reason: String },
}

/// What the opening process found the previous one left unfinished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Jobs in delivery when it stopped: visible again at once.
    pub jobs: usize,
    /// Claims it held: released, so their work is not held up for a lease.
    pub claims: usize,
}

/// Every port on one SQLite connection. Each call takes the connection for the few
/// statements it runs (microseconds on a local file), so callers never wait on I/O
/// held by another for long.
pub struct SqliteStore {
    /// Stopped (and joined) before the connection closes: fields drop in this order.
    _checkpointer: Option<checkpoint::Checkpointer>,
    conn: Mutex<Connection>,
    /// Held while the store is open: no other process opens the file meanwhile.
    _lock: Option<std::fs::File>,
    clock: Arc<dyn Clock>,
    /// Messages older than this are forgotten (`MESSAGE_RETENTION_DAYS`), with expired
    /// claims and cache entries.
    retention: Option<Duration>,
    /// Messages stored, for pruning every [`PRUNE_EVERY`].
    puts: AtomicU64,
    /// When messages were last pruned, and claims and cache entries last swept (µs):
    /// a quiet workspace is pruned by the hour and swept by the day all the same.
    pruned_at: AtomicI64,
    swept_at: AtomicI64,
    /// How long a delivered job stays invisible, in microseconds.
    visibility_micros: AtomicU64,
    /// Wakes a real-time driver when a job arrives.
    arrived: tokio::sync::Notify,
    /// After a failed take (a full disk): no job is taken, nor reported due, before
    /// then (µs), so the workers wait instead of spinning on the failure.
    take_again_at: AtomicI64,
    recovered: Recovered,
    failures: Arc<Failures>,
}

/// Prepared statements kept: more than the ports have.
const STATEMENTS_KEPT: usize = 128;

/// How often (in stored messages) a store with a retention prunes its messages.
const PRUNE_EVERY: u64 = 1024;
/// How often (in stored messages) it sweeps expired claims and cache entries.
const SWEEP_EVERY: u64 = 64 * PRUNE_EVERY;
/// Messages are pruned at least this often (by the clock), claims and cache swept at
/// least every [`SWEEP_AFTER`], however few messages come.
const PRUNE_AFTER: Duration = Duration::from_secs(3600);
const SWEEP_AFTER: Duration = Duration::from_secs(86_400);

impl SqliteStore {
    /// Opens (or creates) the store at `path` (`:memory:`: a store in memory, gone
    /// with the process), migrates an older file, and takes up what a previous process
    /// left in progress. Refuses a file another process has open, one from a newer
    /// build, and one that is not a database, changing nothing in it.
    pub fn open(path: &str, clock: Arc<dyn Clock>, retention: Option<Duration>) -> Result<SqliteStore, OpenError> {
        Self::open_with(path, clock, retention, schema::MIGRATIONS)
    }

    fn open_with(
        path: &str,
        clock: Arc<dyn Clock>,
        retention: Option<Duration>,
        migrations: &[&str],
    ) -> Result<SqliteStore, OpenError> {
        let named = |error: rusqlite::Error| classify(path, error);
        let in_memory = path == ":memory:";
        let (conn, lock) = if in_memory {
            (Connection::open_in_memory().map_err(named)?, None)
        } else {
            if let Some(parent) = Path::new(path).parent().filter(|p| !p.as_os_str().is_empty())
                && !parent.is_dir()
            {
                return Err(OpenError::Other { path: path.into(), reason: format!("no folder {}", parent.display()) });
            }
            // One process per file, checked before anything in it is read.
            let lock = checkpoint::lock(path)?;
            let flags =
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            (Connection::open_with_flags(path, flags).map_err(named)?, Some(lock))
        };
        // Read before anything is written: a file that is no database fails here.
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(named)?;
        if version > migrations.len() as i64 {
            return Err(OpenError::Newer { path: path.into(), found: version, supported: migrations.len() as i64 });
        }
        // The only other connection is this store's checkpointer, which never holds a
        // writer up for long.
        conn.busy_timeout(Duration::from_secs(5)).map_err(named)?;
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)).map_err(named)?;
        if !in_memory && !mode.eq_ignore_ascii_case("wal") {
            return Err(OpenError::Other { path: path.into(), reason: format!("journal mode {mode}, not WAL") });
        }
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(named)?;
        // Checkpoints are the checkpointer's (a checkpoint syncs the disk: here it would
        // hold up every call behind it); this one is a safety net should it fall far
        // behind (400 MB), and the log is cut back to 64 MB after one.
        conn.pragma_update(None, "wal_autocheckpoint", 100_000).map_err(named)?;
        conn.pragma_update(None, "journal_size_limit", 1i64 << 26).map_err(named)?;
        // The pages every message touches (the newest of each index) stay in memory:
        // a page cache of 64 MiB, and the rest of the file read through a mapping.
        conn.pragma_update(None, "cache_size", -65_536).map_err(named)?;
        conn.pragma_update(None, "mmap_size", 1i64 << 28).map_err(named)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(named)?;
        // Every statement kuuki runs stays prepared (rusqlite keeps 16 by default, fewer
        // than the ports use: the rest would be parsed and planned anew each time).
        conn.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        let mut conn = conn;
        schema::migrate(&mut conn, version, migrations).map_err(named)?;
        let now = clock.now();
        let recovered = queue::take_up_abandoned(&mut conn, now).map_err(named)?;
        if recovered != Recovered::default() {
            tracing::info!(jobs = recovered.jobs, claims = recovered.claims, "taking up what the last process left");
        }
        let default_budget = Duration::from_secs(crate::budget::DEFAULT_WORKER_TIMEOUT_SECONDS);
        let visibility = default_budget * crate::budget::VISIBILITY_PER_WORKER_TIMEOUT;
        let failures = Arc::new(Failures::default());
        let checkpointer = if in_memory {
            None
        } else {
            Some(checkpoint::Checkpointer::start(path, failures.clone()).map_err(named)?)
        };
        let store = SqliteStore {
            _checkpointer: checkpointer,
            conn: Mutex::new(conn),
            _lock: lock,
            clock,
            retention,
            puts: AtomicU64::new(0),
            pruned_at: AtomicI64::new(i64::MIN),
            swept_at: AtomicI64::new(i64::MIN),
            visibility_micros: AtomicU64::new(visibility.as_micros() as u64),
            arrived: tokio::sync::Notify::new(),
            take_again_at: AtomicI64::new(i64::MIN),
            recovered,
            failures,
        };
        // What expired while no process ran goes before anything reads it.
        store.prune(&store.lock(), true).map_err(named)?;
        Ok(store)
    }

    /// What this open found unfinished by the previous process.
    pub fn recovered(&self) -> Recovered {
        self.recovered
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the connection leaves no transaction open (rusqlite
        // rolls back on drop), so the connection is still sound.
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Drops what has expired: messages past the retention, claims and cache entries
    /// past their time (an abandoned post's claim stays for whoever takes it over).
    fn prune(&self, conn: &Connection, sweep: bool) -> rusqlite::Result<()> {
        let Some(retention) = self.retention else { return Ok(()) };
        let now = self.now();
        self.pruned_at.store(now.as_micros(), Ordering::Relaxed);
        if sweep {
            self.swept_at.store(now.as_micros(), Ordering::Relaxed);
        }
        let oldest = now - retention;
        conn.prepare_cached("DELETE FROM messages WHERE at < ?1")?.execute([oldest.as_micros()])?;
        if sweep {
            conn.prepare_cached("DELETE FROM claims WHERE until <= ?1 AND posting = 0")?.execute([now.as_micros()])?;
            conn.prepare_cached("DELETE FROM cache WHERE until <= ?1")?.execute([now.as_micros()])?;
        }
        Ok(())
    }

    /// Counts a stored message; prunes the messages every [`PRUNE_EVERY`] of them or
    /// [`PRUNE_AFTER`], whichever comes first, and sweeps the claims and the cache every
    /// [`SWEEP_EVERY`] or [`SWEEP_AFTER`] (a walk over each table: rare enough to cost
    /// nothing a message, often enough to keep them to a day's worth).
    fn count_put(&self, conn: &Connection) -> rusqlite::Result<()> {
        let puts = self.puts.fetch_add(1, Ordering::Relaxed) + 1;
        let now = self.now().as_micros();
        let due = |at: &AtomicI64, after: Duration| {
            now.saturating_sub(at.load(Ordering::Relaxed)) >= after.as_micros() as i64
        };
        let sweep = puts.is_multiple_of(SWEEP_EVERY) || due(&self.swept_at, SWEEP_AFTER);
        if sweep || puts.is_multiple_of(PRUNE_EVERY) || due(&self.pruned_at, PRUNE_AFTER) {
            self.prune(conn, sweep)?;
        }
        Ok(())
    }
}

impl SqliteStore {
    /// A failed statement as the ports' error (the queue delivers the job again), counted.
    fn failed(&self, error: rusqlite::Error) -> PortError {
        self.error(error.to_string())
    }

    /// A value stored as JSON that no longer reads (written by hand, or damaged), counted.
    fn unreadable(&self, what: &str, error: serde_json::Error) -> PortError {
        self.error(format!("a stored {what} does not read: {error}"))
    }

    fn error(&self, message: String) -> PortError {
        self.failures.failed();
        PortError::Backend { backend: "sqlite", message }
    }

    /// Errors so far, and whether the store is failing now ([`StoreHealth`]).
    pub fn health(&self) -> StoreHealth {
        StoreHealth { errors: self.failures.count(), failing: self._checkpointer.is_some() && self.failures.failing() }
    }
}

/// The store's errors since it opened (failed statements, stored values that do not
/// read, failed write checks), and whether it is failing: a write check of the file
/// (every [`checkpoint::PROBE_EVERY`]) has not succeeded since the last error. A store
/// in memory is never failing (nothing else can lock it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreHealth {
    pub errors: u64,
    pub failing: bool,
}

/// What [`StoreHealth`] is made of, shared with the thread that checks the file.
#[derive(Debug, Default)]
struct Failures {
    count: AtomicU64,
    /// A sequence that orders the last failure and the last good write check.
    order: AtomicU64,
    last_failure: AtomicU64,
    last_good_check: AtomicU64,
}

impl Failures {
    fn failed(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.last_failure.store(self.order.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn checked_good(&self) {
        self.last_good_check.store(self.order.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn failing(&self) -> bool {
        self.last_failure.load(Ordering::Relaxed) > self.last_good_check.load(Ordering::Relaxed)
    }
}

fn classify(path: &str, error: rusqlite::Error) -> OpenError {
    let reason = error.to_string();
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => OpenError::Locked { path: path.into() },
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => OpenError::Corrupt { path: path.into(), reason },
        _ => OpenError::Other { path: path.into(), reason },
    }
}

fn bool_int(value: bool) -> i64 {
    i64::from(value)
}
