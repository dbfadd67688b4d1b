//! A forget's second look (`Job::ForgetLate`): once every job that read before the
//! forget ended has ended and every late delivery has arrived, the same sweep again
//! over what was posted, and learned, before the forget's end.

use std::time::Duration;

use super::records::{LookRecord, forget_in_progress};
use super::request::REQUEST_KEEP;
use super::sweep::{OwedRemake, Sweep, forget_in_workspace_memory};
use super::{Forgotten, in_reach, record_forgotten};
use crate::deps::Deps;
use crate::domain::{ChannelId, Job, Ts, UserId};
use crate::ports::{ClaimOutcome, PortResult};

/// How long the forget queue's dead letters are kept (the template's
/// `MessageRetentionPeriod`): a second look redriven from there still finds its run's end.
pub(super) const DEAD_LETTER_KEEP: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// How long after it was posted a message may still arrive: Slack retries an event it
/// could not deliver after one minute and after five; a Discord relay resends sooner.
const LATE_DELIVERY: Duration = Duration::from_secs(10 * 60);

/// When a forget's second look runs, counted from the forget's start: after the forget
/// has ended (within a worker timeout, under a claim lease), every message posted before
/// its end has arrived, and every job that read before its end or read such a late
/// message has ended too (a claim lease after each).
pub(super) fn second_look_delay(deps: &Deps) -> Duration {
    let lease = deps.budget.claim_lease();
    lease + LATE_DELIVERY + lease
}

/// A forget's second look ([`Job::ForgetLate`]).
pub struct Late<'a> {
    pub channel: &'a ChannelId,
    pub ts: &'a Ts,
    pub user: &'a UserId,
    pub name: &'a str,
    pub channels: &'a [ChannelId],
    pub server: Option<&'a str>,
}

impl Late<'_> {
    /// The queued job that carries this look.
    pub(super) fn job(&self) -> Job {
        Job::ForgetLate {
            channel: self.channel.clone(),
            ts: self.ts.clone(),
            user: self.user.clone(),
            name: self.name.to_owned(),
            channels: self.channels.to_vec(),
            server: self.server.map(str::to_owned),
        }
    }
}

/// Runs a forget's second look: the forget marked the person before it began, and
/// memory work checks that mark before it writes, but work that checked just before
/// the mark and wrote after the forget had looked at that channel (a reflection's new
/// fact or note, an answer's topics) is only caught by looking again once every such
/// job has ended; and a message of theirs posted before the forget and delivered late
/// (a platform's retry) is stored after it. In the channels the forget reached, every
/// channel with a fact from or naming them learned before its end, and every channel
/// their profile (again) lists, within its reach: their
/// messages posted before it ended go (and the channel's memory is made anew from the
/// rest), facts from or naming them learned from messages older than its end are
/// removed or edited, their note goes (a note does not say which messages it came
/// from), and a workspace memory naming them is cleared. A fact learned only from what
/// was written after stays: they spoke again. Safe to repeat; recorded (as `late`)
/// only when it removed something.
pub async fn look_again(deps: &Deps, late: &Late<'_>) -> PortResult<()> {
    let Late { channel, ts, user, name, channels, server } = *late;
    let record = LookRecord::new(channel, user, ts);
    let Some(until) = record.run_ended(deps).await? else {
        if forget_in_progress(deps, user).await? {
            // Its run may still be going: this look comes again once it can have ended
            // (queued anew, not failed, so however long that takes it never ends in the
            // dead letters; the mark expires if the run never comes back).
            return deps.enqueue_after(late.job(), deps.budget.claim_lease()).await;
        }
        // The run that queued this died before it ended (its redelivery, if any, queued
        // a look of its own), or its end expired before a redrive.
        tracing::warn!(%user, "a forget's second look found no end of its run; it does nothing");
        return Ok(());
    };
    let key = &record.claim;
    let now = deps.clock.now();
    match deps.ledger.claim(key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Completed => return Ok(()),
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(key, until, now)),
        ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
    }
    let sweep = Sweep { user, name, before: Some(until) };
    let looked = async {
        // Besides the forget's channels: where a late message of theirs recreated their
        // profile, and where a fact learned since is from or about them.
        let mut more: Vec<ChannelId> =
            deps.facts.profile(channel.workspace(), user).await?.map(|p| p.channels).unwrap_or_default();
        for other in deps.facts.fact_channels().await? {
            if !channels.contains(&other) && !more.contains(&other) {
                let facts = deps.facts.facts(&other).await?;
                if facts
                    .iter()
                    .any(|f| (f.is_from(user, name) || sweep.mentions(&f.content)) && sweep.learned_before(f))
                {
                    more.push(other);
                }
            }
        }
        more.retain(|c| !channels.contains(c));
        more.sort();
        more.dedup();
        let (more, _) = in_reach(deps, more, server, channel).await?;
        // What earlier attempts removed, kept channel by channel: the log line counts
        // the whole look, not only the attempt that finished it.
        let mut done = record.removed(deps).await?;
        for each in channels.iter().chain(&more) {
            let owed = OwedRemake { key: record.remake_mark(each), keep: DEAD_LETTER_KEEP };
            sweep.channel(deps, each, &owed, None, &mut done, Some(&record)).await?;
        }
        forget_in_workspace_memory(deps, channel.workspace(), user, name).await?;
        if done != Forgotten::default() {
            tracing::info!(%user, ?done, "a forget's second look removed what was stored of them after it");
            record_forgotten(deps, channel, user, &done, server, true);
        }
        Ok(())
    };
    match looked.await {
        Ok(()) => deps.ledger.complete(key, deps.clock.now(), REQUEST_KEEP).await,
        Err(error) => {
            if let Err(release) = deps.ledger.release(key).await {
                tracing::warn!(error = %release, %key, "could not release a forget's second look");
            }
            Err(error)
        }
    }
}
