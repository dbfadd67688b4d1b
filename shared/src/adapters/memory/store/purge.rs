//! What a Slack workspace's purge after an uninstall asks of the in-process store: the
//! lists of what is stored, whole channels removed, and the mark that Slack's access
//! is gone (kept beside the channel states, read with a Slack channel's state).

use std::sync::Arc;

use super::MemoryStore;
use foldhash::HashMap;

use crate::domain::{ChannelId, Timestamp, UserId, Workspace};
use crate::ports::{ChannelState, PortResult};

impl MemoryStore {
    /// `state` as a Slack channel reads it while Slack's access is gone: a copy with
    /// the mark (only then; otherwise the shared state itself).
    pub(super) fn with_slack_gone(
        state: Arc<ChannelState>,
        channel: &ChannelId,
        gone: &HashMap<String, Timestamp>,
    ) -> Arc<ChannelState> {
        if gone.is_empty() || channel.is_discord() {
            return state;
        }
        match gone.get(channel.workspace().id().unwrap_or_default()) {
            Some(&at) => Arc::new(ChannelState { slack_gone: Some(at), ..(*state).clone() }),
            None => state,
        }
    }

    pub(super) fn message_channels_now(&self) -> Vec<ChannelId> {
        let mut channels: Vec<ChannelId> = self.lock().channels.keys().cloned().collect();
        channels.sort();
        channels
    }

    pub(super) fn delete_channel_messages_now(&self, channel: &ChannelId) -> usize {
        self.lock().channels.remove(channel).map_or(0, |messages| messages.by_ts.len())
    }

    pub(super) fn state_channels_now(&self) -> Vec<ChannelId> {
        let mut channels: Vec<ChannelId> = self.lock().states.keys().cloned().collect();
        channels.sort();
        channels
    }

    pub(super) fn delete_channel_state_now(&self, channel: &ChannelId) -> PortResult<()> {
        self.check_write()?;
        let mut inner = self.lock();
        inner.states.remove(channel);
        inner.channel_lines.remove(channel);
        Ok(())
    }

    pub(super) fn mark_slack_gone_now(&self, workspace: Workspace<'_>, at: Timestamp) -> bool {
        let mut inner = self.lock();
        let key = workspace.id().unwrap_or_default();
        if inner.slack_gone.contains_key(key) {
            return false;
        }
        inner.slack_gone.insert(key.to_owned(), at);
        true
    }

    pub(super) fn clear_slack_gone_now(&self, workspace: Workspace<'_>, at: Timestamp) -> bool {
        let mut inner = self.lock();
        let key = workspace.id().unwrap_or_default();
        if inner.slack_gone.get(key) != Some(&at) {
            return false;
        }
        inner.slack_gone.remove(key);
        true
    }

    pub(super) fn noted_users_now(&self, channel: &ChannelId) -> Vec<UserId> {
        let mut users: Vec<UserId> =
            self.lock().notes.keys().filter(|(c, _)| c == channel).map(|(_, user)| user.clone()).collect();
        users.sort();
        users
    }

    pub(super) fn profiled_users_now(&self, workspace: Workspace<'_>) -> Vec<UserId> {
        let inner = self.lock();
        let mut users: Vec<UserId> = inner
            .profiles
            .keys()
            .filter_map(|key| workspace.unqualify(key.as_str()))
            .map(|u| UserId(u.into()))
            .collect();
        users.sort();
        users
    }
}
