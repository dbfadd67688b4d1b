//! Conversation reads the stages share: what was written after a message in its
//! conversation. Queued work (a judgment, an answer, a memory trigger) checks it before
//! acting, so a newer message supersedes it; judge, respond and memory all import it
//! from here rather than from each other.

use std::sync::Arc;

use crate::deps::Deps;
use crate::domain::{Message, ThreadKey};
use crate::ports::PortResult;

/// The messages after `target` in its conversation and, for a top-level message, in
/// the thread it started (the newest `CHANNEL_BUFFER_SIZE` of each), in no set order.
/// Queued work for `target` is superseded by a newer participant's message among them:
/// that message queued its own.
pub(crate) async fn messages_after(deps: &Deps, target: &Message) -> PortResult<Vec<Arc<Message>>> {
    let mut conversations = vec![target.thread_key()];
    if target.thread_root.is_none() {
        conversations.push(ThreadKey::thread(target.channel.clone(), target.ts.clone()));
    }
    let mut after = Vec::new();
    for key in conversations {
        let recent = deps.messages.recent_in_thread(&key, target.at, deps.settings.channel_buffer_size).await?;
        after.extend(recent.into_iter().filter(|m| m.ts > target.ts));
    }
    Ok(after)
}

/// The newest of `after` (see [`messages_after`]) that `counts` accepts.
pub(crate) fn newest(after: &[Arc<Message>], counts: impl Fn(&Message) -> bool) -> Option<&Arc<Message>> {
    after.iter().filter(|m| counts(m)).max_by(|a, b| a.ts.cmp(&b.ts))
}

/// The newest message after `target` that `counts` accepts: one read of
/// [`messages_after`].
pub(crate) async fn newer_message(
    deps: &Deps,
    target: &Message,
    counts: impl Fn(&Message) -> bool,
) -> PortResult<Option<Arc<Message>>> {
    Ok(newest(&messages_after(deps, target).await?, counts).cloned())
}
