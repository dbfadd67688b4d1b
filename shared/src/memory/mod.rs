//! Memory beyond the conversation window (docs/design.md §9): channel and workspace memory,
//! kept up to date by summarization, and facts learned by reflection.
//!
//! Every channel kuuki is in remembers, whether it takes part there or not: each
//! worker that handles a participant's message (the judge, the respond worker for a
//! direct answer, or a REMEMBER job when there is nothing else to do) runs the
//! triggers that queue a summary or a reflection when one is due.

pub mod forget;
pub mod keywords;
pub mod lull;
pub mod proactive;
pub mod purge;
pub mod reflect;
pub mod summarize;

use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::{ChannelId, EventKind, Message, Stage, ThreadKey, Ts};
use crate::ports::{ChannelState, MemoryTask, PortResult};

/// Whether stored messages feed memory at all: summaries and reflections ask a model.
pub fn enabled(deps: &Deps) -> bool {
    deps.llm.is_some() && deps.settings.memory.enabled
}

/// Queues a summary or a reflection of `newest`'s channel when one is due. A trigger
/// that cannot be queued now will be at the next message, so a failure is logged and
/// the caller's work goes on. Returns when a lull's reflection is queued for, for a
/// judgment to keep with its note (see [`reflect::maybe_queue`]); others call
/// [`queue_due_and_note`].
#[must_use = "a judgment keeps the lull's time with its note"]
pub async fn queue_due(
    deps: &Deps,
    window: &Window,
    newest: &Message,
    state: &ChannelState,
) -> Option<reflect::LullNote> {
    if let Err(error) = summarize::maybe_queue(deps, window, &newest.channel, newest, state).await {
        tracing::warn!(%error, "could not queue a summary");
    }
    reflect::maybe_queue(deps, window, &newest.channel, newest, state)
        .await
        .inspect_err(|error| tracing::warn!(%error, "could not queue a reflection"))
        .ok()
        .flatten()
}

/// [`queue_due`] for what is not a judgment (a direct answer, a REMEMBER job): a lull's
/// reflection queued here is noted on its own (one small write), so the handling of the
/// channel's next messages, in this process or another, queues no second one.
pub async fn queue_due_and_note(deps: &Deps, window: &Window, newest: &Message, state: &ChannelState) {
    if let Some(note) = queue_due(deps, window, newest, state).await.filter(|note| note.queued)
        && let Err(error) = deps.channels.note_lull_reflection(&newest.channel, note.at).await
    {
        // One more job at worst: the next message queues its own.
        tracing::warn!(%error, "could not note the lull's reflection");
    }
}

/// Handles a REMEMBER job: the memory triggers for a message that no judgment or
/// answer handles. Errors are backend failures; the queue delivers the job again
/// (running the triggers twice is harmless: their marks and claims dedupe).
pub async fn remember(deps: &Deps, thread: &ThreadKey, ts: &Ts) -> PortResult<()> {
    let window = Window::read(deps, &thread.channel).await?;
    let Some(target) = window.get_message(deps, &thread.channel, ts).await? else {
        return Ok(());
    };
    // A burst runs the triggers once: the newest message queued its own job.
    if window.newer_message(deps, &target, |m| deps.is_participant(m)).await?.is_some() {
        return Ok(());
    }
    let state = deps.channels.channel_state(&thread.channel).await?;
    if let Some(reason) = purge::stopped_by_uninstall(deps, &state, &target).await? {
        let dropped = EventKind::Dropped { stage: Stage::Summarize, reason: reason.into() };
        crate::record::record(deps, &thread.channel, thread.root.clone(), ts.clone(), dropped);
        return Ok(());
    }
    queue_due_and_note(deps, &window, &target, &state).await;
    Ok(())
}

/// A summary or reflection the model could not give: nothing changes, the claim `key`
/// is let go, and `task` waits `wait` (so a broken model is not asked again at every
/// message); the log says why.
async fn give_up_for_now(
    deps: &Deps,
    key: &str,
    channel: &ChannelId,
    ts: &Ts,
    (task, stage): (MemoryTask, Stage),
    wait: std::time::Duration,
    reason: String,
) -> PortResult<()> {
    deps.ledger.release(key).await?;
    deps.channels.defer(channel, task, deps.clock.now() + wait).await?;
    crate::record::record(deps, channel, None, ts.clone(), EventKind::Dropped { stage, reason });
    Ok(())
}
