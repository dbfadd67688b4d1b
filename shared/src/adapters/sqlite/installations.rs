//! Slack installations: [`Installations`]. One row per install (keyed by its workspace id), its JSON (tokens sealed,
//! never in clear) and its revision beside it for the conditional token refresh.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::ports::{Installation, Installations, PortResult, RefreshedTokens};

impl SqliteStore {
    fn read_installation(&self, conn: &rusqlite::Connection, workspace: &str) -> PortResult<Option<Installation>> {
        let row: Option<(String, i64)> = conn
            .prepare_cached("SELECT installation, rev FROM installations WHERE key = ?1")
            .and_then(|mut s| s.query_row([workspace], |row| Ok((row.get(0)?, row.get(1)?))).optional())
            .map_err(|e| self.failed(e))?;
        let Some((json, revision)) = row else { return Ok(None) };
        let installation: Installation = serde_json::from_str(&json).map_err(|e| self.unreadable("installation", e))?;
        Ok(Some(Installation { revision: revision as u64, ..installation }))
    }

    fn write_installation(&self, conn: &rusqlite::Connection, installation: &Installation) -> PortResult<()> {
        let json = serde_json::to_string(installation).expect("installations serialize");
        conn.prepare_cached(
            "INSERT INTO installations (key, installation, rev) VALUES (?1, ?2, ?3)
             ON CONFLICT (key) DO UPDATE SET installation = excluded.installation, rev = excluded.rev",
        )
        .and_then(|mut s| s.execute(params![installation.key.workspace_id(), json, installation.revision as i64]))
        .map_err(|e| self.failed(e))?;
        Ok(())
    }
}

#[async_trait]
impl Installations for SqliteStore {
    async fn put_installation(&self, installation: &Installation) -> PortResult<u64> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        let read = self.read_installation(&tx, installation.key.workspace_id())?.map_or(0, |stored| stored.revision);
        let revision = read + 1;
        self.write_installation(&tx, &Installation { revision, ..installation.clone() })?;
        tx.commit().map_err(|e| self.failed(e))?;
        Ok(revision)
    }

    async fn installation(&self, workspace: &str) -> PortResult<Option<Installation>> {
        self.read_installation(&self.lock(), workspace)
    }

    async fn replace_tokens(&self, workspace: &str, read: u64, tokens: &RefreshedTokens) -> PortResult<bool> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        let Some(stored) = self.read_installation(&tx, workspace)? else { return Ok(false) };
        if stored.revision != read {
            return Ok(false);
        }
        let refreshed = stored.refreshed(tokens);
        self.write_installation(&tx, &refreshed)?;
        tx.commit().map_err(|e| self.failed(e))?;
        Ok(true)
    }

    async fn delete_installation(&self, workspace: &str) -> PortResult<bool> {
        let deleted = self
            .lock()
            .prepare_cached("DELETE FROM installations WHERE key = ?1")
            .and_then(|mut s| s.execute([workspace]))
            .map_err(|e| self.failed(e))?;
        Ok(deleted == 1)
    }

    async fn installed_workspaces(&self) -> PortResult<Vec<String>> {
        let conn = self.lock();
        let mut statement =
            conn.prepare_cached("SELECT key FROM installations ORDER BY key").map_err(|e| self.failed(e))?;
        statement.query_map([], |row| row.get(0)).and_then(|rows| rows.collect()).map_err(|e| self.failed(e))
    }
}
