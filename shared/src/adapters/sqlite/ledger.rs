//! Claims and the judgment cache: [`Ledger`]. A claim is read and written in one
//! transaction, so two deliveries of one job never both hold it.

use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::domain::Timestamp;
use crate::ports::{ClaimOutcome, Ledger, PortResult};

#[async_trait]
impl Ledger for SqliteStore {
    async fn claim(&self, key: &str, now: Timestamp, lease: Duration) -> PortResult<ClaimOutcome> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        let held: Option<(bool, i64, bool)> = tx
            .prepare_cached("SELECT done, until, posting FROM claims WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?))).optional())
            .map_err(|e| self.failed(e))?;
        let posting = match held {
            Some((true, until, _)) if until > now.as_micros() => return Ok(ClaimOutcome::Completed),
            Some((false, until, _)) if until > now.as_micros() => {
                return Ok(ClaimOutcome::InProgress { until: Timestamp(until) });
            }
            Some((false, _, posting)) => posting,
            _ => false,
        };
        tx.prepare_cached(
            "INSERT INTO claims (key, done, until, posting) VALUES (?1, 0, ?2, ?3)
             ON CONFLICT (key) DO UPDATE SET done = 0, until = excluded.until, posting = excluded.posting",
        )
        .and_then(|mut s| s.execute(params![key, (now + lease).as_micros(), posting]))
        .map_err(|e| self.failed(e))?;
        tx.commit().map_err(|e| self.failed(e))?;
        Ok(if posting { ClaimOutcome::Resumed } else { ClaimOutcome::Claimed })
    }

    async fn mark_posting(&self, key: &str) -> PortResult<()> {
        self.lock()
            .prepare_cached("UPDATE claims SET posting = 1 WHERE key = ?1 AND done = 0")
            .and_then(|mut s| s.execute([key]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn complete(&self, key: &str, now: Timestamp, keep: Duration) -> PortResult<()> {
        self.lock()
            .prepare_cached(
                "INSERT INTO claims (key, done, until, posting) VALUES (?1, 1, ?2, 0)
                 ON CONFLICT (key) DO UPDATE SET done = 1, until = excluded.until, posting = 0",
            )
            .and_then(|mut s| s.execute(params![key, (now + keep).as_micros()]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn release(&self, key: &str) -> PortResult<()> {
        // The lease ends now; a posting mark stays for the next holder.
        self.lock()
            .prepare_cached("UPDATE claims SET until = ?2 WHERE key = ?1 AND done = 0")
            .and_then(|mut s| s.execute(params![key, i64::MIN]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn cache_get(&self, key: &str, now: Timestamp) -> PortResult<Option<String>> {
        self.lock()
            .prepare_cached("SELECT value FROM cache WHERE key = ?1 AND until > ?2")
            .and_then(|mut s| s.query_row(params![key, now.as_micros()], |row| row.get(0)).optional())
            .map_err(|e| self.failed(e))
    }

    async fn cache_put(&self, key: &str, value: &str, until: Timestamp) -> PortResult<()> {
        self.lock()
            .prepare_cached(
                "INSERT INTO cache (key, value, until) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, until = excluded.until",
            )
            .and_then(|mut s| s.execute(params![key, value, until.as_micros()]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }
}
