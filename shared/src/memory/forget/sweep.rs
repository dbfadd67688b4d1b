//! The sweep a forget and its second look share: in one channel, a person's messages
//! (all, or those posted before a time), the facts from or naming them (all, or those
//! learned from older messages), their note, and the channel's memory made anew when it
//! may hold what they said; and the workspace memory when it names them.

use std::time::Duration;

use super::records::LookRecord;
use super::{Forgotten, names_person};
use crate::deps::Deps;
use crate::domain::{ChannelId, ChannelMemory, Fact, Job, Timestamp, Ts, UserId, Workspace, WorkspaceMemory};
use crate::ports::{PortError, PortResult};

/// Whom a sweep removes, and from before when.
pub(super) struct Sweep<'a> {
    pub user: &'a UserId,
    /// Their display name (may be empty): facts may name them by it.
    pub name: &'a str,
    /// `None`: everything of theirs (the forget); `Some(end)`: what was posted before
    /// the forget's end, and facts learned from it (the second look: what they said
    /// since is theirs to be remembered again).
    pub before: Option<Timestamp>,
}

/// The ledger mark a sweep of one channel keeps while it works there (set before their
/// messages go, cleared once the memory is made anew), so an attempt that dies in
/// between remakes the memory at its redelivery, which finds no message.
pub(super) struct OwedRemake {
    pub key: String,
    pub keep: Duration,
}

impl Sweep<'_> {
    /// Whether a fact was learned before the sweep's end; a fact without its messages
    /// (stored before they were kept) is taken as old.
    pub fn learned_before(&self, fact: &Fact) -> bool {
        let Some(until) = self.before else { return true };
        fact.source_messages.is_empty()
            || fact.source_messages.iter().any(|m| m.posted_at().is_none_or(|at| at < until))
    }

    pub fn mentions(&self, text: &str) -> bool {
        names_person(text, self.user, self.name)
    }

    /// Sweeps `channel`, adding what went to `done` (and, with `save`, storing the
    /// counts for the look after each step that removed something, kept as long as
    /// `owed`). The memory is made anew when
    /// messages of theirs went, an earlier attempt owes it, or `also` says so of the
    /// memory as it is (read only then).
    pub async fn channel(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        owed: &OwedRemake,
        also: Option<&(dyn Fn(&ChannelMemory) -> bool + Sync)>,
        done: &mut Forgotten,
        save: Option<&LookRecord>,
    ) -> PortResult<()> {
        let save = async |done: &Forgotten| match save {
            Some(look) => look.set_removed(deps, done, deps.clock.now() + owed.keep).await,
            None => Ok(()),
        };
        let interrupted = deps.ledger.cache_get(&owed.key, deps.clock.now()).await?.is_some();
        deps.ledger.cache_put(&owed.key, "1", deps.clock.now() + owed.keep).await?;
        let messages = deps.messages.delete_messages_by(channel, self.user, self.before).await?;
        if messages > 0 {
            done.messages += messages;
            save(done).await?;
        }
        let here = forget_facts_and_note(deps, channel, self.user, self.name, |fact| self.learned_before(fact)).await?;
        if here != Forgotten::default() {
            *done = done.clone() + here;
            save(done).await?;
        }
        let remake = messages > 0 || interrupted;
        if remake || also.is_some() {
            let memory = deps.channels.channel_state(channel).await?.memory.clone();
            if (remake || also.is_some_and(|also| also(&memory)))
                && make_memory_anew(deps, channel, &memory, interrupted).await?
            {
                done.summaries += 1;
            }
        }
        // Done here: the mark expires at once.
        deps.ledger.cache_put(&owed.key, "", deps.clock.now()).await
    }
}

/// Removes from `channel`'s facts what came from `user` (display name `name`) or names
/// them, among the facts `learned_before` says yes to, and their note there.
pub(super) async fn forget_facts_and_note(
    deps: &Deps,
    channel: &ChannelId,
    user: &UserId,
    name: &str,
    learned_before: impl Fn(&Fact) -> bool,
) -> PortResult<Forgotten> {
    let mut done = Forgotten::default();
    let mentions = |text: &str| names_person(text, user, name);
    (done.facts_removed, done.facts_edited) = rewrite_facts(deps, channel, |fact| {
        if !(fact.is_from(user, name) || mentions(&fact.content)) || !learned_before(fact) {
            return None;
        }
        let mut fact = fact.clone();
        fact.source_users.retain(|u| **u != *user.0 && u != name);
        // A fact that names them cannot be edited safely; it goes with them.
        Some((!fact.source_users.is_empty() && !mentions(&fact.content)).then_some(fact))
    })
    .await?;
    if deps.facts.user_note(channel, user).await?.is_some() {
        deps.facts.delete_user_note(channel, user).await?;
        done.notes += 1;
    }
    Ok(done)
}

/// Tries of [`rewrite_facts`] before it gives up (the job comes back).
const REWRITE_ATTEMPTS: usize = 5;

/// Applies `change` to each of `channel`'s facts: `None` leaves it, `Some(None)`
/// deletes it, `Some(Some(fact))` stores that edit, only if the fact is still as read
/// (a reflection's write between would otherwise be undone, or undo the edit); a
/// refused edit is made again on the fact as it is then. Returns how many were
/// removed and edited.
pub(super) async fn rewrite_facts(
    deps: &Deps,
    channel: &ChannelId,
    change: impl Fn(&Fact) -> Option<Option<Fact>>,
) -> PortResult<(usize, usize)> {
    let (mut removed, mut edited) = (0, 0);
    for _ in 0..REWRITE_ATTEMPTS {
        let mut refused = false;
        for (fact, revision) in deps.facts.facts_as_read(channel).await? {
            match change(&fact) {
                None => {}
                Some(None) => {
                    deps.facts.delete_fact(channel, &fact.id).await?;
                    removed += 1;
                }
                Some(Some(edit)) => {
                    if deps.facts.put_fact_if_unchanged(&edit, Some(revision)).await? {
                        edited += 1;
                    } else {
                        refused = true;
                    }
                }
            }
        }
        if !refused {
            return Ok((removed, edited));
        }
    }
    Err(PortError::Busy {
        message: format!("the facts of {channel} kept changing under {REWRITE_ATTEMPTS} rewrites"),
        retry_after: Duration::from_secs(1),
    })
}

/// Wipes the memory of `workspace` when it names `user` (made anew from the channel
/// memories at the next summary).
pub(super) async fn forget_in_workspace_memory(
    deps: &Deps,
    workspace: Workspace<'_>,
    user: &UserId,
    name: &str,
) -> PortResult<()> {
    let memory = deps.channels.workspace_memory_without_lines(workspace).await?;
    let mentions = |text: &str| names_person(text, user, name);
    if mentions(&memory.history) || mentions(&memory.recent_events) {
        deps.channels.set_workspace_memory(workspace, WorkspaceMemory::default()).await?;
    }
    Ok(())
}

/// Makes `channel`'s memory anew ([`remake_memory`]) once it was summarized, or when an
/// interrupted run owes it (it died after the wipe, so finds it empty); a memory never
/// summarized moves to a new generation instead, so a first summary being made from
/// what went is not stored (a memory of an older generation never is). Returns whether
/// it was made anew.
pub(super) async fn make_memory_anew(
    deps: &Deps,
    channel: &ChannelId,
    memory: &ChannelMemory,
    owed: bool,
) -> PortResult<bool> {
    if memory.updated_at.is_some() || owed {
        remake_memory(deps, channel, memory).await?;
        return Ok(true);
    }
    let next = ChannelMemory { generation: memory.generation + 1, ..memory.clone() };
    deps.channels.set_channel_memory(channel, next).await?;
    Ok(false)
}

/// Wipes a channel's memory and queues a summary that makes it anew from the messages
/// still stored (the next generation, so it is not taken for a summary done before).
async fn remake_memory(deps: &Deps, channel: &ChannelId, memory: &ChannelMemory) -> PortResult<()> {
    let wiped =
        ChannelMemory { generation: memory.generation + 1, private: memory.private, ..ChannelMemory::default() };
    // A newer generation: always stored, and no summary made before it can undo it.
    deps.channels.set_channel_memory(channel, wiped).await?;
    deps.channels.set_channel_line(channel, None).await?;
    if crate::memory::enabled(deps) {
        let job = Job::Summarize { channel: channel.clone(), ts: Ts::from_timestamp(deps.clock.now()) };
        deps.enqueue_after(job, std::time::Duration::ZERO).await?;
    }
    Ok(())
}
