//! What keeps the data file one process's and its write-ahead log short: a lock file
//! held for the store's life, and a thread that checkpoints the log in the background
//! (a checkpoint syncs the disk: done by the writer, every so many commits, it held up
//! every port call behind it for tens of milliseconds). The same thread checks now and
//! then that the file still takes a write ([`StoreHealth`](super::StoreHealth)).

use std::fs::{File, OpenOptions, TryLockError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{Failures, OpenError};

/// `path`'s lock file (`PATH.lock`), locked for this process: a second process on the
/// same data file is refused before it reads a byte of it.
pub(super) fn lock(path: &str) -> Result<File, OpenError> {
    let lock_path = format!("{path}.lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| OpenError::Other { path: path.into(), reason: format!("cannot open {lock_path}: {e}") })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(OpenError::Locked { path: path.into() }),
        Err(TryLockError::Error(e)) => {
            Err(OpenError::Other { path: path.into(), reason: format!("cannot lock {lock_path}: {e}") })
        }
    }
}

/// How often the log is checkpointed.
const EVERY: Duration = Duration::from_millis(500);
/// How often the file is checked for a write (on this thread's own connection, so no
/// port call waits behind a check that waits for a lock).
pub(super) const PROBE_EVERY: Duration = Duration::from_secs(5);

/// A thread checkpointing `path`'s write-ahead log on a connection of its own, without
/// ever making a writer wait (`PASSIVE`), until dropped.
pub(super) struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(super) fn start(path: &str, failures: Arc<Failures>) -> rusqlite::Result<Checkpointer> {
        let mut conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(Duration::from_secs(1))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let probe_every = (PROBE_EVERY.as_millis() / EVERY.as_millis()) as u32;
        let thread = std::thread::Builder::new()
            .name("kuuki-checkpoint".into())
            .spawn(move || {
                let mut ticks = 0u32;
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::park_timeout(EVERY);
                    if let Err(error) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                        tracing::warn!(%error, "a background checkpoint failed; the next one tries again");
                    }
                    ticks += 1;
                    if ticks.is_multiple_of(probe_every) {
                        match write_check(&mut conn) {
                            Ok(()) => failures.checked_good(),
                            Err(error) => {
                                failures.failed();
                                tracing::error!(%error, "the data file does not take a write");
                            }
                        }
                    }
                }
            })
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(Checkpointer { stop, thread: Some(thread) })
    }
}

/// Takes the write lock and rewrites one row as it is: fails when another connection
/// holds the lock past the busy timeout, or the file cannot be written.
fn write_check(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute("UPDATE meta SET value = value WHERE key = 'opens'", [])?;
    tx.commit()
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
