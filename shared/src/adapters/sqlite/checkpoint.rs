//! What keeps the data file one process's and its write-ahead log short: a lock file
//! held for the store's life, and a thread that checkpoints the log in the background
//! (a checkpoint syncs the disk: done by the writer, every so many commits, it held up
//! every port call behind it for tens of milliseconds).

use std::fs::{File, OpenOptions, TryLockError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::OpenError;

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

/// A thread checkpointing `path`'s write-ahead log on a connection of its own, without
/// ever making a writer wait (`PASSIVE`), until dropped.
pub(super) struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(super) fn start(path: &str) -> rusqlite::Result<Checkpointer> {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(Duration::from_secs(1))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kuuki-checkpoint".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::park_timeout(EVERY);
                    if let Err(error) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                        tracing::warn!(%error, "a background checkpoint failed; the next one tries again");
                    }
                }
            })
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(Checkpointer { stop, thread: Some(thread) })
    }
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
