//! Channel state and the workspace memory: [`ChannelStateStore`]. A channel's state is
//! the ports' JSON in one row; every change reads, changes and writes it in one
//! transaction, with the rules the ports give ([`ChannelState`]'s methods).

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteStore;
use crate::domain::talkativeness::{FeedbackChange, FeedbackOutcome, TalkativenessLimits};
use crate::domain::{
    ChannelId, ChannelLine, ChannelMemory, Intervention, JudgmentNote, Timestamp, Ts, Workspace, WorkspaceMemory,
};
use crate::ports::{ChannelState, ChannelStateStore, MemoryTask, OpenerState, PortResult, Shadow};

/// Where the workspace table keeps since when Slack's access is gone (microseconds, as
/// text): a row beside the workspace memory, so no migration; `slack_gone#T…` for a
/// workspace among several ([`Workspace::scoped`]).
const SLACK_GONE_KEY: &str = "slack_gone";

/// Where the workspace table keeps the workspace memory (`memory#T…` likewise).
const MEMORY_KEY: &str = "memory";

impl SqliteStore {
    fn read_state(&self, conn: &Connection, channel: &ChannelId) -> PortResult<ChannelState> {
        let row: Option<(String, Option<i64>)> = conn
            .prepare_cached("SELECT state, lull_at FROM channel_states WHERE channel = ?1")
            .and_then(|mut s| s.query_row([channel.0.as_ref()], |row| Ok((row.get(0)?, row.get(1)?))).optional())
            .map_err(|e| self.failed(e))?;
        let Some((json, lull_at)) = row else { return Ok(ChannelState::default()) };
        let mut state: ChannelState = serde_json::from_str(&json).map_err(|e| self.unreadable("channel state", e))?;
        state.reflection_lull_at = lull_at.map(Timestamp);
        Ok(state)
    }

    fn write_state(&self, conn: &Connection, channel: &ChannelId, state: &ChannelState) -> PortResult<()> {
        let json = serde_json::to_string(state).expect("channel state serializes");
        conn.prepare_cached(
            "INSERT INTO channel_states (channel, state, lull_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (channel) DO UPDATE SET state = excluded.state, lull_at = excluded.lull_at",
        )
        .and_then(|mut s| {
            s.execute(params![channel.0.as_ref(), json, state.reflection_lull_at.map(Timestamp::as_micros)])
        })
        .map_err(|e| self.failed(e))?;
        Ok(())
    }

    fn read_workspace(&self, conn: &Connection, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        let json: Option<String> = conn
            .prepare_cached("SELECT memory FROM workspace WHERE key = ?1")
            .and_then(|mut s| s.query_row([workspace.scoped(MEMORY_KEY)], |row| row.get(0)).optional())
            .map_err(|e| self.failed(e))?;
        match json {
            Some(json) => serde_json::from_str(&json).map_err(|e| self.unreadable("workspace memory", e)),
            None => Ok(WorkspaceMemory::default()),
        }
    }

    fn read_slack_gone(&self, conn: &Connection, workspace: Workspace<'_>) -> PortResult<Option<Timestamp>> {
        let text: Option<String> = conn
            .prepare_cached("SELECT memory FROM workspace WHERE key = ?1")
            .and_then(|mut s| s.query_row([workspace.scoped(SLACK_GONE_KEY)], |row| row.get(0)).optional())
            .map_err(|e| self.failed(e))?;
        text.map(|text| {
            text.parse()
                .map(Timestamp)
                .map_err(|e| self.error(format!("an unreadable Slack access mark {text:?}: {e}")))
        })
        .transpose()
    }

    /// Changes `channel`'s state in one transaction.
    fn update_state<T>(&self, channel: &ChannelId, change: impl FnOnce(&mut ChannelState) -> T) -> PortResult<T> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        let mut state = self.read_state(&tx, channel)?;
        let outcome = change(&mut state);
        self.write_state(&tx, channel, &state)?;
        tx.commit().map_err(|e| self.failed(e))?;
        Ok(outcome)
    }
}

#[async_trait]
impl ChannelStateStore for SqliteStore {
    async fn channel_state(&self, channel: &ChannelId) -> PortResult<Arc<ChannelState>> {
        let conn = self.lock();
        let mut state = self.read_state(&conn, channel)?;
        if !channel.is_discord() {
            state.slack_gone = self.read_slack_gone(&conn, channel.workspace())?;
        }
        Ok(Arc::new(state))
    }

    async fn record_intervention(&self, channel: &ChannelId, intervention: Intervention) -> PortResult<()> {
        self.update_state(channel, |state| state.record_intervention(intervention))
    }

    async fn record_judgment(
        &self,
        channel: &ChannelId,
        note: JudgmentNote,
        reflection_lull_at: Option<Timestamp>,
    ) -> PortResult<()> {
        self.update_state(channel, |state| {
            state.last_judgment = Some(note);
            if reflection_lull_at.is_some() {
                state.reflection_lull_at = reflection_lull_at;
            }
        })
    }

    async fn note_lull_reflection(&self, channel: &ChannelId, at: Timestamp) -> PortResult<()> {
        self.update_state(channel, |state| state.reflection_lull_at = Some(at))
    }

    async fn set_muted(&self, channel: &ChannelId, until: Option<Timestamp>) -> PortResult<()> {
        self.update_state(channel, |state| state.muted_until = until)
    }

    async fn set_opener(&self, channel: &ChannelId, opener: OpenerState) -> PortResult<()> {
        self.update_state(channel, |state| state.opener = opener)
    }

    async fn set_shadow(&self, channel: &ChannelId, shadow: Option<Shadow>) -> PortResult<()> {
        self.update_state(channel, |state| state.shadow = shadow)
    }

    async fn set_channel_memory(&self, channel: &ChannelId, memory: ChannelMemory) -> PortResult<bool> {
        self.update_state(channel, |state| state.replace_memory(memory))
    }

    async fn set_reflection_watermark(&self, channel: &ChannelId, ts: Ts) -> PortResult<()> {
        self.update_state(channel, |state| state.reflection_watermark = Some(ts))
    }

    async fn mark_due(
        &self,
        channel: &ChannelId,
        task: MemoryTask,
        due: Timestamp,
        now: Timestamp,
    ) -> PortResult<bool> {
        self.update_state(channel, |state| state.mark_due(task, due, now))
    }

    async fn defer(&self, channel: &ChannelId, task: MemoryTask, until: Timestamp) -> PortResult<()> {
        self.update_state(channel, |state| state.defer(task, until))
    }

    async fn clear_marks(&self, channel: &ChannelId, task: MemoryTask) -> PortResult<()> {
        self.update_state(channel, |state| state.clear_marks(task))
    }

    async fn workspace_memory(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        let conn = self.lock();
        let memory = self.read_workspace(&conn, workspace)?;
        // A workspace among several: its channels' ids are `T…/C…`, the keys from `T…/`
        // up to `T…0` ('0' follows '/'), one range of the primary key.
        let lines = match workspace.id() {
            None => conn
                .prepare_cached("SELECT line FROM channel_lines WHERE instr(channel, '/') = 0")
                .and_then(|mut s| s.query_map([], |row| row.get(0))?.collect::<rusqlite::Result<Vec<String>>>()),
            Some(id) => conn
                .prepare_cached("SELECT line FROM channel_lines WHERE channel >= ?1 AND channel < ?2")
                .and_then(|mut s| {
                    s.query_map([format!("{id}/"), format!("{id}0")], |row| row.get(0))?
                        .collect::<rusqlite::Result<Vec<String>>>()
                }),
        }
        .map_err(|e| self.failed(e))?;
        let lines = lines
            .iter()
            .map(|json| serde_json::from_str::<ChannelLine>(json).map_err(|e| self.unreadable("channel line", e)))
            .collect::<PortResult<Vec<_>>>()?;
        Ok(WorkspaceMemory { channel_lines: crate::adapters::memory::newest_first(lines), ..memory })
    }

    async fn workspace_memory_without_lines(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        self.read_workspace(&self.lock(), workspace)
    }

    async fn set_workspace_memory(&self, workspace: Workspace<'_>, memory: WorkspaceMemory) -> PortResult<()> {
        let json = serde_json::to_string(&memory).expect("workspace memory serializes");
        self.lock()
            .prepare_cached(
                "INSERT INTO workspace (key, memory) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET memory = excluded.memory",
            )
            .and_then(|mut s| s.execute([workspace.scoped(MEMORY_KEY), json]))
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn set_channel_line(&self, channel: &ChannelId, line: Option<ChannelLine>) -> PortResult<()> {
        let conn = self.lock();
        let written = match line {
            Some(line) => {
                let json = serde_json::to_string(&line).expect("channel line serializes");
                conn.prepare_cached(
                    "INSERT INTO channel_lines (channel, line) VALUES (?1, ?2)
                     ON CONFLICT (channel) DO UPDATE SET line = excluded.line",
                )
                .and_then(|mut s| s.execute(params![channel.0.as_ref(), json]))
            }
            None => conn
                .prepare_cached("DELETE FROM channel_lines WHERE channel = ?1")
                .and_then(|mut s| s.execute([channel.0.as_ref()])),
        };
        written.map(drop).map_err(|e| self.failed(e))
    }

    async fn apply_feedback(
        &self,
        channel: &ChannelId,
        change: &FeedbackChange,
        now: Timestamp,
        limits: &TalkativenessLimits,
    ) -> PortResult<Option<FeedbackOutcome>> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        let mut state = self.read_state(&tx, channel)?;
        let outcome = state.talkativeness.apply(change, now, limits);
        if outcome.is_some() {
            self.write_state(&tx, channel, &state)?;
            tx.commit().map_err(|e| self.failed(e))?;
        }
        Ok(outcome)
    }

    async fn state_channels(&self) -> PortResult<Vec<ChannelId>> {
        let conn = self.lock();
        let mut statement = conn.prepare_cached("SELECT channel FROM channel_states").map_err(|e| self.failed(e))?;
        statement
            .query_map([], |row| Ok(ChannelId(row.get::<_, String>(0)?.into())))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.failed(e))
    }

    async fn delete_channel_state(&self, channel: &ChannelId) -> PortResult<()> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.failed(e))?;
        for sql in ["DELETE FROM channel_states WHERE channel = ?1", "DELETE FROM channel_lines WHERE channel = ?1"] {
            tx.prepare_cached(sql).and_then(|mut s| s.execute([channel.0.as_ref()])).map_err(|e| self.failed(e))?;
        }
        tx.commit().map_err(|e| self.failed(e))
    }

    async fn slack_gone(&self, workspace: Workspace<'_>) -> PortResult<Option<Timestamp>> {
        self.read_slack_gone(&self.lock(), workspace)
    }

    async fn mark_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool> {
        let marked = self
            .lock()
            .prepare_cached("INSERT INTO workspace (key, memory) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING")
            .and_then(|mut s| s.execute(params![workspace.scoped(SLACK_GONE_KEY), at.as_micros().to_string()]))
            .map_err(|e| self.failed(e))?;
        Ok(marked == 1)
    }

    async fn clear_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool> {
        let cleared = self
            .lock()
            .prepare_cached("DELETE FROM workspace WHERE key = ?1 AND memory = ?2")
            .and_then(|mut s| s.execute(params![workspace.scoped(SLACK_GONE_KEY), at.as_micros().to_string()]))
            .map_err(|e| self.failed(e))?;
        Ok(cleared == 1)
    }
}
