//! Long-term memory: facts (each with a revision new at every write), notes about
//! people per channel and their counters: [`FactStore`].

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteStore;
use crate::domain::{ChannelId, Fact, Timestamp, UserId, UserNote, UserProfile, Workspace};
use crate::ports::{FactRevision, FactStore, PortResult};

impl SqliteStore {
    fn read_facts(&self, conn: &Connection, channel: &ChannelId) -> PortResult<Vec<(Fact, FactRevision)>> {
        let mut statement = conn
            .prepare_cached("SELECT fact, rev FROM facts WHERE channel = ?1 ORDER BY id")
            .map_err(|e| self.failed(e))?;
        let rows = statement
            .query_map([channel.0.as_ref()], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.failed(e))?;
        rows.into_iter()
            .map(|(json, rev)| {
                let fact = serde_json::from_str(&json).map_err(|e| self.unreadable("fact", e))?;
                Ok((fact, FactRevision(rev as u64)))
            })
            .collect()
    }

    fn revision_of(&self, conn: &Connection, fact: &Fact) -> PortResult<Option<FactRevision>> {
        conn.prepare_cached("SELECT rev FROM facts WHERE channel = ?1 AND id = ?2")
            .and_then(|mut s| {
                s.query_row(params![fact.channel.0.as_ref(), fact.id], |row| row.get::<_, i64>(0)).optional()
            })
            .map(|rev| rev.map(|rev| FactRevision(rev as u64)))
            .map_err(|e| self.failed(e))
    }

    /// Stores `fact` under a new revision (a counter of every fact write in the file).
    fn store_fact(&self, conn: &Connection, fact: &Fact) -> PortResult<()> {
        let rev: i64 = conn
            .prepare_cached("UPDATE meta SET value = value + 1 WHERE key = 'fact_revision' RETURNING value")
            .and_then(|mut s| s.query_row([], |row| row.get(0)))
            .map_err(|e| self.failed(e))?;
        let json = serde_json::to_string(fact).expect("facts serialize");
        conn.prepare_cached(
            "INSERT INTO facts (channel, id, fact, rev) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (channel, id) DO UPDATE SET fact = excluded.fact, rev = excluded.rev",
        )
        .and_then(|mut s| s.execute(params![fact.channel.0.as_ref(), fact.id, json, rev]))
        .map_err(|e| self.failed(e))?;
        Ok(())
    }

    fn read_note(&self, conn: &Connection, channel: &ChannelId, user: &UserId) -> PortResult<Option<UserNote>> {
        let json: Option<String> = conn
            .prepare_cached("SELECT note FROM notes WHERE channel = ?1 AND user = ?2")
            .and_then(|mut s| s.query_row(params![channel.0.as_ref(), user.0.as_ref()], |row| row.get(0)).optional())
            .map_err(|e| self.failed(e))?;
        json.map(|json| serde_json::from_str(&json).map_err(|e| self.unreadable("note", e))).transpose()
    }

    /// `key`: the person's id as [`Workspace::qualify`] keys it in their workspace.
    fn read_profile(&self, conn: &Connection, key: &str) -> PortResult<Option<UserProfile>> {
        let json: Option<String> = conn
            .prepare_cached("SELECT profile FROM profiles WHERE user = ?1")
            .and_then(|mut s| s.query_row([key], |row| row.get(0)).optional())
            .map_err(|e| self.failed(e))?;
        json.map(|json| serde_json::from_str(&json).map_err(|e| self.unreadable("profile", e))).transpose()
    }

    /// Changes `user`'s note in `channel` (made empty if there is none) in one transaction.
    fn update_note(&self, channel: &ChannelId, user: &UserId, change: impl FnOnce(&mut UserNote)) -> PortResult<()> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        let mut note = self.read_note(&tx, channel, user)?.unwrap_or_else(|| UserNote {
            channel: channel.clone(),
            user: user.clone(),
            ..UserNote::default()
        });
        change(&mut note);
        let json = serde_json::to_string(&note).expect("notes serialize");
        tx.prepare_cached(
            "INSERT INTO notes (channel, user, note) VALUES (?1, ?2, ?3)
             ON CONFLICT (channel, user) DO UPDATE SET note = excluded.note",
        )
        .and_then(|mut s| s.execute(params![channel.0.as_ref(), user.0.as_ref(), json]))
        .map_err(|e| self.failed(e))?;
        tx.commit().map_err(|e| self.failed(e))
    }
}

#[async_trait]
impl FactStore for SqliteStore {
    async fn facts(&self, channel: &ChannelId) -> PortResult<Vec<Fact>> {
        Ok(self.read_facts(&self.lock(), channel)?.into_iter().map(|(fact, _)| fact).collect())
    }

    async fn facts_as_read(&self, channel: &ChannelId) -> PortResult<Vec<(Fact, FactRevision)>> {
        self.read_facts(&self.lock(), channel)
    }

    async fn put_fact(&self, fact: &Fact) -> PortResult<()> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        self.store_fact(&tx, fact)?;
        tx.commit().map_err(|e| self.failed(e))
    }

    async fn put_fact_if_unchanged(&self, fact: &Fact, read: Option<FactRevision>) -> PortResult<bool> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        if self.revision_of(&tx, fact)? != read {
            return Ok(false);
        }
        self.store_fact(&tx, fact)?;
        tx.commit().map_err(|e| self.failed(e))?;
        Ok(true)
    }

    async fn delete_fact(&self, channel: &ChannelId, id: &str) -> PortResult<()> {
        self.lock()
            .prepare_cached("DELETE FROM facts WHERE channel = ?1 AND id = ?2")
            .and_then(|mut s| s.execute(params![channel.0.as_ref(), id]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn fact_channels(&self) -> PortResult<Vec<ChannelId>> {
        let conn = self.lock();
        let mut statement = conn.prepare_cached("SELECT DISTINCT channel FROM facts").map_err(|e| self.failed(e))?;
        statement
            .query_map([], |row| Ok(ChannelId(row.get::<_, String>(0)?.into())))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.failed(e))
    }

    async fn user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<Option<UserNote>> {
        self.read_note(&self.lock(), channel, user)
    }

    async fn note_reflection(
        &self,
        channel: &ChannelId,
        user: &UserId,
        tags: &[String],
        summary: &str,
        at: Timestamp,
    ) -> PortResult<()> {
        self.update_note(channel, user, |note| note.add_reflection(tags, summary, at))
    }

    async fn note_topics(
        &self,
        channel: &ChannelId,
        user: &UserId,
        topics: &[String],
        at: Timestamp,
    ) -> PortResult<()> {
        self.update_note(channel, user, |note| {
            note.last_topics = topics.to_vec();
            note.updated_at = Some(at);
        })
    }

    async fn delete_user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<()> {
        self.lock()
            .prepare_cached("DELETE FROM notes WHERE channel = ?1 AND user = ?2")
            .and_then(|mut s| s.execute(params![channel.0.as_ref(), user.0.as_ref()]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<Option<UserProfile>> {
        self.read_profile(&self.lock(), &workspace.qualify(user.as_str()))
    }

    async fn count_message(
        &self,
        user: &UserId,
        channel: &ChannelId,
        at: Timestamp,
        called_bot: bool,
    ) -> PortResult<()> {
        let key = channel.workspace().qualify(user.as_str());
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        let mut profile = self
            .read_profile(&tx, &key)?
            .unwrap_or_else(|| UserProfile { user: user.clone(), ..UserProfile::default() });
        let listed = profile.channels.contains(channel);
        profile.count(channel, at, called_bot, listed);
        let json = serde_json::to_string(&profile).expect("profiles serialize");
        tx.prepare_cached(
            "INSERT INTO profiles (user, profile) VALUES (?1, ?2)
             ON CONFLICT (user) DO UPDATE SET profile = excluded.profile",
        )
        .and_then(|mut s| s.execute(params![key, json]))
        .map_err(|e| self.failed(e))?;
        tx.commit().map_err(|e| self.failed(e))
    }

    async fn delete_profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<()> {
        self.lock()
            .prepare_cached("DELETE FROM profiles WHERE user = ?1")
            .and_then(|mut s| s.execute([workspace.qualify(user.as_str())]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn noted_users(&self, channel: &ChannelId) -> PortResult<Vec<UserId>> {
        let conn = self.lock();
        let mut statement =
            conn.prepare_cached("SELECT user FROM notes WHERE channel = ?1").map_err(|e| self.failed(e))?;
        statement
            .query_map([channel.0.as_ref()], |row| Ok(UserId(row.get::<_, String>(0)?.into())))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.failed(e))
    }

    async fn profiled_users(&self, workspace: Workspace<'_>) -> PortResult<Vec<UserId>> {
        let conn = self.lock();
        let mut statement = conn.prepare_cached("SELECT user FROM profiles").map_err(|e| self.failed(e))?;
        let keys: Vec<String> =
            statement.query_map([], |row| row.get(0)).and_then(|rows| rows.collect()).map_err(|e| self.failed(e))?;
        Ok(keys.iter().filter_map(|key| workspace.unqualify(key)).map(|user| UserId(user.into())).collect())
    }
}
