//! A forget request as a queued job: one run at a time under its claim, the person
//! forgotten ([`forget_user`]), and the answer shown to whoever asked, once.

use std::time::Duration;

use super::records::{RequestProgress, RequestRecord};
use super::{answer, forget_user, record_forgotten};
use crate::deps::Deps;
use crate::domain::{ChannelId, CommandReply, Ts, UserId};
use crate::ports::{ClaimOutcome, PortError, PortResult};

/// A request is remembered as answered (and what it removed, between attempts) past
/// the time the caller's way back stays valid (Slack's 30 minutes).
pub(super) const REQUEST_KEEP: Duration = Duration::from_secs(24 * 60 * 60);

/// A queued forget request (`Job::Forget`): forgets `user` (safe to repeat) and shows
/// what went to whoever asked, once. What a run removed is kept until the answer is
/// out, so a redelivery after a finished run answers with it, not with "nothing
/// stored"; a run that died halfway leaves only a mark, and the answer says its part
/// is not counted. An answer the platform refused (busy) is sent by the redelivery; one
/// that may have gone out (the call timed out, or a worker died while sending) is sent
/// again only where that edits it (Discord), never as a second message (Slack).
pub async fn carry_out(
    deps: &Deps,
    channel: &ChannelId,
    user: &UserId,
    whom: &str,
    ts: &Ts,
    reply: &CommandReply,
    server: Option<&str>,
) -> PortResult<()> {
    let record = RequestRecord::new(channel, user, ts);
    let key = &record.claim;
    let now = deps.clock.now();
    let resumed = match deps.ledger.claim(key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Completed => return Ok(()),
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(key, until, now)),
        ClaimOutcome::Claimed => false,
        ClaimOutcome::Resumed => true,
    };
    let asked = Asked { channel, user, whom, reply, server };
    match forget_and_answer(deps, &record, &asked, resumed).await {
        Ok(()) => deps.ledger.complete(key, deps.clock.now(), REQUEST_KEEP).await,
        Err(error) => {
            // The redelivery need not wait out this attempt's lease (a posting mark stays).
            if let Err(release) = deps.ledger.release(key).await {
                tracing::warn!(error = %release, %key, "could not release a failed forget request");
            }
            Err(error)
        }
    }
}

/// A forget request as a [`Job::Forget`] carries it.
struct Asked<'a> {
    channel: &'a ChannelId,
    user: &'a UserId,
    whom: &'a str,
    reply: &'a CommandReply,
    server: Option<&'a str>,
}

async fn forget_and_answer(deps: &Deps, record: &RequestRecord, asked: &Asked<'_>, resumed: bool) -> PortResult<()> {
    let Asked { channel, user, whom, reply, server } = *asked;
    let now = deps.clock.now();
    let until = now + REQUEST_KEEP;
    let earlier = record.progress(deps).await?;
    if earlier.is_none() {
        record.set_progress(deps, &RequestProgress::Started, until).await?;
    }
    // A run that finished forgetting leaves only the answer to this one: what the
    // person wrote since is theirs to be remembered again.
    let (removed, interrupted, already) = match earlier {
        Some(RequestProgress::Finished(before)) => (before, false, true),
        earlier => (forget_user(deps, user, channel, server).await?, earlier.is_some(), false),
    };
    if !already {
        record_forgotten(deps, channel, user, &removed, server, false);
        record.set_progress(deps, &RequestProgress::Finished(removed.clone()), until).await?;
    }
    let known_unsent = resumed && record.answer_known_unsent(deps).await?;
    if resumed && !reply.safe_to_repeat() && !known_unsent {
        tracing::warn!(%channel, %user, "a forget answer may have gone out before a worker died; not sent again");
    } else {
        let mut text = answer(&removed, whom, server);
        if interrupted {
            text.push_str(" (An earlier attempt was interrupted: what it removed is not counted here.)");
        }
        deps.ledger.mark_posting(&record.claim).await?;
        record.set_answer_known_unsent(deps, false, until).await?;
        match deps.chat.answer_command(reply, &text).await {
            Ok(()) => {}
            // The platform said it did not take it: the redelivery may send it.
            Err(error @ PortError::Busy { .. }) => {
                record.set_answer_known_unsent(deps, true, until).await?;
                return Err(error);
            }
            // An expired or used-up way back stays so: the forget is done, and trying
            // again would only end in the dead-letter queue.
            Err(PortError::Rejected { message, .. }) => {
                tracing::warn!(%channel, %user, %message, "the answer to a forget request could not be shown");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
