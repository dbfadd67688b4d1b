//! Channel states and the workspace memory in the in-process store: [`ChannelStateStore`].

use super::*;
use crate::domain::talkativeness::{FeedbackChange, FeedbackOutcome, TalkativenessLimits};

#[async_trait]
impl ChannelStateStore for MemoryStore {
    async fn channel_state(&self, channel: &ChannelId) -> PortResult<Arc<ChannelState>> {
        let inner = self.lock();
        Ok(Self::with_slack_gone(inner.states.get(channel).cloned().unwrap_or_default(), channel, &inner.slack_gone))
    }

    async fn record_intervention(&self, channel: &ChannelId, intervention: Intervention) -> PortResult<()> {
        self.check_write()?;
        let mut inner = self.lock();
        Arc::make_mut(slot(&mut inner.states, channel)).record_intervention(intervention);
        Ok(())
    }

    async fn record_judgment(
        &self,
        channel: &ChannelId,
        note: JudgmentNote,
        reflection_lull_at: Option<Timestamp>,
    ) -> PortResult<()> {
        self.check_write()?;
        let mut inner = self.lock();
        let state = Arc::make_mut(slot(&mut inner.states, channel));
        state.last_judgment = Some(note);
        if reflection_lull_at.is_some() {
            state.reflection_lull_at = reflection_lull_at;
        }
        Ok(())
    }

    async fn note_lull_reflection(&self, channel: &ChannelId, at: Timestamp) -> PortResult<()> {
        Arc::make_mut(slot(&mut self.lock().states, channel)).reflection_lull_at = Some(at);
        Ok(())
    }

    async fn set_muted(&self, channel: &ChannelId, until: Option<Timestamp>) -> PortResult<()> {
        Arc::make_mut(slot(&mut self.lock().states, channel)).muted_until = until;
        Ok(())
    }

    async fn set_opener(&self, channel: &ChannelId, opener: OpenerState) -> PortResult<()> {
        self.check_write()?;
        Arc::make_mut(slot(&mut self.lock().states, channel)).opener = opener;
        Ok(())
    }

    async fn set_shadow(&self, channel: &ChannelId, shadow: Option<Shadow>) -> PortResult<()> {
        Arc::make_mut(slot(&mut self.lock().states, channel)).shadow = shadow;
        Ok(())
    }

    async fn set_channel_memory(&self, channel: &ChannelId, memory: ChannelMemory) -> PortResult<bool> {
        self.check_write()?;
        Ok(self.update(channel, |state| state.replace_memory(memory)))
    }

    async fn set_reflection_watermark(&self, channel: &ChannelId, ts: Ts) -> PortResult<()> {
        self.update(channel, |state| {
            state.reflection_watermark = Some(ts);
        });
        Ok(())
    }

    async fn mark_due(
        &self,
        channel: &ChannelId,
        task: MemoryTask,
        due: Timestamp,
        now: Timestamp,
    ) -> PortResult<bool> {
        Ok(self.update(channel, |state| state.mark_due(task, due, now)))
    }

    async fn defer(&self, channel: &ChannelId, task: MemoryTask, until: Timestamp) -> PortResult<()> {
        self.update(channel, |state| state.defer(task, until));
        Ok(())
    }

    async fn clear_marks(&self, channel: &ChannelId, task: MemoryTask) -> PortResult<()> {
        self.update(channel, |state| state.clear_marks(task));
        Ok(())
    }

    async fn workspace_memory(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        let inner = self.lock();
        let lines = inner.channel_lines.iter().filter(|(channel, _)| channel.workspace() == workspace);
        Ok(WorkspaceMemory {
            channel_lines: newest_first(lines.map(|(_, line)| line.clone()).collect()),
            ..inner.workspaces.get(workspace.id().unwrap_or_default()).cloned().unwrap_or_default()
        })
    }

    async fn workspace_memory_without_lines(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        Ok(self.lock().workspaces.get(workspace.id().unwrap_or_default()).cloned().unwrap_or_default())
    }

    async fn set_workspace_memory(&self, workspace: Workspace<'_>, memory: WorkspaceMemory) -> PortResult<()> {
        let memory = WorkspaceMemory { channel_lines: Vec::new(), ..memory };
        self.lock().workspaces.insert(workspace.id().unwrap_or_default().to_owned(), memory);
        Ok(())
    }

    async fn set_channel_line(&self, channel: &ChannelId, line: Option<ChannelLine>) -> PortResult<()> {
        self.check_write()?;
        let mut inner = self.lock();
        match line {
            Some(line) => inner.channel_lines.insert(channel.clone(), line),
            None => inner.channel_lines.remove(channel),
        };
        Ok(())
    }

    async fn apply_feedback(
        &self,
        channel: &ChannelId,
        change: &FeedbackChange,
        now: Timestamp,
        limits: &TalkativenessLimits,
    ) -> PortResult<Option<FeedbackOutcome>> {
        self.check_write()?;
        let mut inner = self.lock();
        let mut talkativeness = inner.states.get(channel).map(|s| s.talkativeness.clone()).unwrap_or_default();
        let outcome = talkativeness.apply(change, now, limits);
        if outcome.is_some() {
            Arc::make_mut(slot(&mut inner.states, channel)).talkativeness = talkativeness;
        }
        Ok(outcome)
    }

    async fn state_channels(&self) -> PortResult<Vec<ChannelId>> {
        Ok(self.state_channels_now())
    }

    async fn delete_channel_state(&self, channel: &ChannelId) -> PortResult<()> {
        self.delete_channel_state_now(channel)
    }

    async fn slack_gone(&self, workspace: Workspace<'_>) -> PortResult<Option<Timestamp>> {
        Ok(self.lock().slack_gone.get(workspace.id().unwrap_or_default()).copied())
    }

    async fn mark_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool> {
        Ok(self.mark_slack_gone_now(workspace, at))
    }

    async fn clear_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool> {
        Ok(self.clear_slack_gone_now(workspace, at))
    }
}
