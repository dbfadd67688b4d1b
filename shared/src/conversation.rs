//! Conversation reads the stages share: what was written after a message in its
//! conversation. Queued work (a judgment, an answer, a memory trigger) checks it before
//! acting, so a newer message supersedes it; judge, respond and memory all import it
//! from here rather than from each other.
//!
//! A [`Window`] is one read of a channel's newest messages that answers a worker's
//! questions about the channel (the message a job is for, what came after it, its
//! conversation, the message before a turn, the messages since a watermark) from
//! memory, and asks the store only what the window cannot tell.

use std::sync::Arc;

use crate::deps::Deps;
use crate::domain::{ChannelId, Message, ThreadKey, Timestamp, Ts};
use crate::ports::{ChannelWindow, PortResult};

/// The newest `CHANNEL_BUFFER_SIZE` messages of one channel as read once, or nothing
/// ([`Window::none`]): every read falls back to the store where the window cannot
/// answer it exactly, so a reader gets what the store would have said.
pub struct Window {
    channel: Option<ChannelId>,
    /// Oldest first (by ts).
    messages: Vec<Arc<Message>>,
    /// No message older than the window's is stored.
    complete: bool,
}

impl Window {
    /// One read of `channel`'s newest `CHANNEL_BUFFER_SIZE` messages.
    pub async fn read(deps: &Deps, channel: &ChannelId) -> PortResult<Window> {
        let ChannelWindow { messages, complete } =
            deps.messages.channel_window(channel, deps.settings.channel_buffer_size.max(1)).await?;
        Ok(Window { channel: Some(channel.clone()), messages, complete })
    }

    /// A window that knows nothing: every read goes to the store.
    pub fn none() -> Window {
        Window { channel: None, messages: Vec::new(), complete: false }
    }

    fn of(&self, channel: &ChannelId) -> bool {
        self.channel.as_ref() == Some(channel)
    }

    /// Whether every stored message of `channel` with a ts after `ts` is in the window.
    fn covers_after(&self, channel: &ChannelId, ts: &Ts) -> bool {
        self.of(channel) && (self.complete || self.messages.first().is_some_and(|m| &m.ts <= ts))
    }

    /// Whether every stored message of `channel` written at or after `since` is in the
    /// window (messages are written in ts order, give or take a retry).
    fn covers_since(&self, channel: &ChannelId, since: Timestamp) -> bool {
        self.of(channel) && (self.complete || self.messages.first().is_some_and(|m| m.at < since))
    }

    /// The stored message (channel, ts), if there is one.
    pub async fn get_message(&self, deps: &Deps, channel: &ChannelId, ts: &Ts) -> PortResult<Option<Arc<Message>>> {
        if self.covers_after(channel, ts) {
            // Sorted by ts: a binary search.
            return Ok(self.messages.binary_search_by(|m| m.ts.cmp(ts)).ok().map(|i| self.messages[i].clone()));
        }
        deps.messages.get_message(channel, ts).await
    }

    /// [`crate::ports::MessageStore::recent_in_thread`] from the window.
    pub async fn recent_in_thread(
        &self,
        deps: &Deps,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        if self.of(&thread.channel) {
            let newest_first = self.messages.iter().rev().filter(|m| m.thread_root == thread.root);
            let mut out: Vec<Arc<Message>> = newest_first.take_while(|m| m.at >= since).take(limit).cloned().collect();
            // Exact when the walk stopped at the limit or at an older message, or when
            // the window holds all since then.
            let stopped = out.len() == limit
                || self
                    .messages
                    .iter()
                    .rev()
                    .filter(|m| m.thread_root == thread.root)
                    .nth(out.len())
                    .is_some_and(|m| m.at < since);
            if stopped || self.covers_since(&thread.channel, since) {
                out.reverse();
                return Ok(out);
            }
        }
        deps.messages.recent_in_thread(thread, since, limit).await
    }

    /// [`crate::ports::MessageStore::recent_in_channel`] from the window.
    pub async fn recent_in_channel(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        if self.of(channel) && (limit <= self.messages.len() || self.complete) {
            let mut out: Vec<Arc<Message>> =
                self.messages.iter().rev().take_while(|m| m.at >= since).take(limit).cloned().collect();
            out.reverse();
            return Ok(out);
        }
        deps.messages.recent_in_channel(channel, since, limit).await
    }

    /// [`crate::ports::MessageStore::previous_in_channel`] from the window.
    pub async fn previous_in_channel(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        before: &Ts,
    ) -> PortResult<Option<Arc<Message>>> {
        if self.of(channel) {
            let previous = self.messages.iter().rev().find(|m| &m.ts < before);
            if previous.is_some() || self.complete {
                return Ok(previous.cloned());
            }
        }
        deps.messages.previous_in_channel(channel, before).await
    }

    /// How many messages of `channel` are stored after `after` (all of them when
    /// `None`): exact below `enough`, else at least `enough`. A memory trigger asks
    /// whether enough piled up; the window answers unless it holds fewer than that.
    pub async fn count_after(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        after: Option<&Ts>,
        enough: usize,
    ) -> PortResult<usize> {
        if self.of(channel) {
            let seen = self.messages.iter().filter(|m| after.is_none_or(|a| &m.ts > a)).count();
            let exact = match after {
                Some(after) => self.covers_after(channel, after),
                None => self.complete,
            };
            if exact || seen >= enough {
                return Ok(seen);
            }
        }
        Ok(deps.messages.messages_after(channel, after, enough).await?.len())
    }

    /// The messages after `target` in its conversation and, for a top-level message, in
    /// the thread it started (the newest `CHANNEL_BUFFER_SIZE` of each), in no set order.
    /// Queued work for `target` is superseded by a newer participant's message among
    /// them: that message queued its own.
    pub async fn messages_after(&self, deps: &Deps, target: &Message) -> PortResult<Vec<Arc<Message>>> {
        let mut conversations = vec![target.thread_key()];
        if target.thread_root.is_none() {
            conversations.push(ThreadKey::thread(target.channel.clone(), target.ts.clone()));
        }
        let mut after = Vec::new();
        for key in conversations {
            let recent = self.recent_in_thread(deps, &key, target.at, deps.settings.channel_buffer_size).await?;
            after.extend(recent.into_iter().filter(|m| m.ts > target.ts));
        }
        Ok(after)
    }

    /// The newest message after `target` that `counts` accepts: see
    /// [`Window::messages_after`].
    pub async fn newer_message(
        &self,
        deps: &Deps,
        target: &Message,
        counts: impl Fn(&Message) -> bool,
    ) -> PortResult<Option<Arc<Message>>> {
        Ok(newest(&self.messages_after(deps, target).await?, counts).cloned())
    }
}

/// The newest of `after` (see [`Window::messages_after`]) that `counts` accepts.
pub(crate) fn newest(after: &[Arc<Message>], counts: impl Fn(&Message) -> bool) -> Option<&Arc<Message>> {
    after.iter().filter(|m| counts(m)).max_by(|a, b| a.ts.cmp(&b.ts))
}
