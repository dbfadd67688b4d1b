//! The job queue on the `jobs` table: [`Queue`], [`Scheduler`] (no delay limit) and
//! [`InProcessQueue`] for the workers of `kuuki serve`. Like SQS, a delivered job stays,
//! invisible for the visibility timeout, until it is settled; unlike SQS a new process
//! takes up at once what the previous one had taken ([`take_up_abandoned`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Recovered, SqliteStore};
use crate::domain::{Job, Timestamp, decode_job, encode_job};
use crate::ports::{Delivery, InProcessQueue, PortResult, Queue, QueueDepth, Scheduler};

/// At open: the jobs the previous process had taken are visible now, and the claims
/// it held are released (a posting mark stays, so the next holder looks for the post
/// first). Only one process has the file (its lock file), so whatever was held is
/// abandoned. Counts the open too.
pub(super) fn take_up_abandoned(conn: &mut Connection, now: Timestamp) -> rusqlite::Result<Recovered> {
    let tx = conn.transaction()?;
    tx.execute("UPDATE meta SET value = value + 1 WHERE key = 'opens'", [])?;
    let jobs = tx.execute("UPDATE jobs SET visible_at = ?1, taken = 0 WHERE taken = 1", [now.as_micros()])?;
    let claims = tx.execute("UPDATE claims SET until = ?1 WHERE done = 0 AND until > ?1", [i64::MIN])?;
    tx.commit()?;
    Ok(Recovered { jobs, claims })
}

/// How long the queue waits after it could not take a job (or read when one is due).
const RETRY_AFTER_A_FAILED_TAKE: Duration = Duration::from_secs(1);

impl SqliteStore {
    fn push(&self, job: &Job, visible_at: Timestamp) -> PortResult<()> {
        self.lock()
            .prepare_cached("INSERT INTO jobs (job, visible_at, deliveries, taken) VALUES (?1, ?2, 0, 0)")
            .and_then(|mut s| s.execute(params![encode_job(job), visible_at.as_micros()]))
            .map_err(|e| self.failed(e))?;
        self.arrived.notify_one();
        Ok(())
    }

    fn visibility_timeout(&self) -> Duration {
        Duration::from_micros(self.visibility_micros.load(Ordering::Relaxed))
    }

    /// Jobs waiting or in delivery.
    pub fn queued_jobs(&self) -> PortResult<usize> {
        self.lock()
            .query_row("SELECT COUNT(*) FROM jobs", [], |row| row.get::<_, i64>(0))
            .map(|n| n as usize)
            .map_err(|e| self.failed(e))
    }

    /// How many jobs are due, delayed and in delivery at `now`, and how long the
    /// earliest due one has been due (`kuuki serve`'s metrics).
    pub fn queue_depth(&self, now: Timestamp) -> PortResult<QueueDepth> {
        let now_micros = now.as_micros();
        let (due, delayed, in_delivery, earliest): (i64, i64, i64, Option<i64>) = self
            .lock()
            .prepare_cached(
                "SELECT COALESCE(SUM(visible_at <= ?1), 0), COALESCE(SUM(visible_at > ?1 AND taken = 0), 0),
                        COALESCE(SUM(visible_at > ?1 AND taken = 1), 0), MIN(visible_at)
                 FROM jobs",
            )
            .and_then(|mut s| s.query_row([now_micros], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))))
            .map_err(|e| self.failed(e))?;
        let oldest_due = earliest
            .filter(|at| *at <= now_micros)
            .map_or(Duration::ZERO, |at| Duration::from_micros((now_micros - at) as u64));
        Ok(QueueDepth { due: due as u64, delayed: delayed as u64, in_delivery: in_delivery as u64, oldest_due })
    }

    /// Takes the earliest visible job due by `now`: it stays, invisible, until settled.
    fn take_due(&self, now: Timestamp) -> rusqlite::Result<Option<Delivery>> {
        let visibility = self.visibility_timeout();
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let due: Option<(i64, String, u32)> = tx
            .prepare_cached(
                "SELECT seq, job, deliveries FROM jobs WHERE visible_at <= ?1 ORDER BY visible_at, seq LIMIT 1",
            )?
            .query_row([now.as_micros()], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .optional()?;
        let Some((seq, body, deliveries)) = due else { return Ok(None) };
        match decode_job(&body) {
            Ok(job) => {
                tx.prepare_cached("UPDATE jobs SET visible_at = ?2, deliveries = ?3, taken = 1 WHERE seq = ?1")?
                    .execute(params![seq, (now + visibility).as_micros(), deliveries + 1])?;
                tx.commit()?;
                Ok(Some(Delivery { job: Arc::new(job), deliveries, receipt: seq as u64 }))
            }
            Err(reason) => {
                // Written by a newer build (or damaged): nothing here can run it. It is
                // set aside, not lost, and named in the log.
                tracing::error!(seq, %reason, "a queued job this build cannot read; it is moved to the dead letters");
                tx.prepare_cached(
                    "INSERT INTO dead_jobs (seq, job, reason) VALUES (?1, ?2, ?3)
                     ON CONFLICT (seq) DO NOTHING",
                )?
                .execute(params![seq, body, reason.to_string()])?;
                tx.prepare_cached("DELETE FROM jobs WHERE seq = ?1")?.execute([seq])?;
                tx.commit()?;
                drop(conn);
                self.take_due(now)
            }
        }
    }
}

#[async_trait]
impl InProcessQueue for SqliteStore {
    fn set_visibility_timeout(&self, timeout: Duration) {
        self.visibility_micros.store(timeout.as_micros() as u64, Ordering::Relaxed);
    }

    fn next_due(&self) -> Option<Timestamp> {
        let found = self
            .lock()
            .prepare_cached("SELECT MIN(visible_at) FROM jobs")
            .and_then(|mut s| s.query_row([], |row| row.get::<_, Option<i64>>(0)));
        let take_again_at = self.take_again_at.load(Ordering::Relaxed);
        match found {
            Ok(due) => due.map(|due| Timestamp(due.max(take_again_at))),
            Err(error) => {
                self.failures.failed();
                tracing::error!(%error, "cannot read the job queue; trying again in a second");
                Some(self.now() + RETRY_AFTER_A_FAILED_TAKE)
            }
        }
    }

    fn pop_due(&self, now: Timestamp) -> Option<Delivery> {
        if now.as_micros() < self.take_again_at.load(Ordering::Relaxed) {
            return None;
        }
        self.take_due(now).unwrap_or_else(|error| {
            self.failures.failed();
            tracing::error!(%error, "cannot take a job from the queue; trying again in a second");
            self.take_again_at.store((now + RETRY_AFTER_A_FAILED_TAKE).as_micros(), Ordering::Relaxed);
            None
        })
    }

    fn ack(&self, delivery: &Delivery) {
        let deleted = self
            .lock()
            .prepare_cached("DELETE FROM jobs WHERE seq = ?1")
            .and_then(|mut s| s.execute([delivery.receipt as i64]));
        if let Err(error) = deleted {
            self.failures.failed();
            // The job comes back after its visibility timeout: at least once, as ever.
            tracing::error!(%error, receipt = delivery.receipt, "cannot settle a delivered job");
        }
    }

    fn redeliver(&self, delivery: Delivery, after: Duration) {
        let visible_at = self.now() + after;
        let updated = self
            .lock()
            .prepare_cached("UPDATE jobs SET visible_at = ?2, deliveries = ?3, taken = 0 WHERE seq = ?1")
            .and_then(|mut s| {
                s.execute(params![delivery.receipt as i64, visible_at.as_micros(), delivery.deliveries + 1])
            });
        match updated {
            Ok(0) => {
                // Settled meanwhile by a late acknowledgement of another delivery: put
                // back as a new job, as the in-process queue does.
                let readded = self
                    .lock()
                    .prepare_cached("INSERT INTO jobs (job, visible_at, deliveries, taken) VALUES (?1, ?2, ?3, 0)")
                    .and_then(|mut s| {
                        s.execute(params![encode_job(&delivery.job), visible_at.as_micros(), delivery.deliveries + 1])
                    });
                if let Err(error) = readded {
                    self.failures.failed();
                    tracing::error!(%error, "cannot put a failed job back");
                }
            }
            Ok(_) => {}
            Err(error) => {
                self.failures.failed();
                tracing::error!(%error, receipt = delivery.receipt, "cannot put a failed job back");
            }
        }
        self.arrived.notify_one();
    }

    fn put_back(&self, delivery: Delivery) {
        let now = self.now();
        let updated = self
            .lock()
            .prepare_cached("UPDATE jobs SET visible_at = ?2, deliveries = ?3, taken = 0 WHERE seq = ?1")
            .and_then(|mut s| s.execute(params![delivery.receipt as i64, now.as_micros(), delivery.deliveries]));
        if let Err(error) = updated {
            self.failures.failed();
            // It comes back after its visibility timeout, counted: at least once still.
            tracing::error!(%error, receipt = delivery.receipt, "cannot put an unstarted job back");
        }
        self.arrived.notify_one();
    }

    async fn arrived(&self) {
        self.arrived.notified().await;
    }
}

#[async_trait]
impl Queue for SqliteStore {
    async fn enqueue(&self, job: Job, delay: Duration) -> PortResult<()> {
        self.push(&job, self.now() + delay)
    }
}

#[async_trait]
impl Scheduler for SqliteStore {
    async fn schedule_once(&self, job: Job, at: Timestamp) -> PortResult<()> {
        self.push(&job, at)
    }
}
