//! `/kuuki quieter`, `/kuuki louder` (anyone), `/kuuki talkativeness [reset]` (reset:
//! managers), and the talkativeness lines of `/kuuki status` and `/kuuki why`
//! (docs/design.md §7.6).

use std::fmt::Write as _;

use crate::deps::Deps;
use crate::domain::talkativeness::{FeedbackChange, SignalKind};
use crate::domain::{ChannelId, Timestamp, Ts, UserId};
use crate::ports::{ChannelState, PortResult};
use crate::talkativeness::{About, apply};

/// Causes shown by `status` and `why`.
const SHOWN_CAUSES: usize = 5;

/// `quieter` or `louder` from `user`: counted once a day per person, so one person's
/// repeats do not swing the channel.
pub(super) async fn nudge(
    deps: &Deps,
    channel: &ChannelId,
    user: &UserId,
    kind: SignalKind,
    now: Timestamp,
) -> PortResult<String> {
    if !deps.settings.talkativeness.enabled {
        return Ok("kuuki does not learn how talkative to be here (TALKATIVENESS_ENABLED is off).".to_owned());
    }
    let day = now.as_micros().div_euclid(86_400 * Timestamp::MICROS_PER_SECOND);
    let id = format!("{}:{user}:{day}", kind.as_str());
    let about = About { channel, thread_root: None, ts: Ts::from_timestamp(now), user: Some(user.clone()) };
    let Some(outcome) = apply(deps, about, FeedbackChange::Count { id, kind, post: None }).await? else {
        return Ok("Counted already today: kuuki heard you.".to_owned());
    };
    let how = if kind == SignalKind::Quieter { "less often" } else { "more often" };
    Ok(format!(
        "Thanks: kuuki will join in unasked {how} here (talkativeness {:+.0}, now {:+.0}).",
        outcome.weight, outcome.offset_after
    ))
}

/// `talkativeness reset` (a manager's): the offset back to 0.
pub(super) async fn reset(deps: &Deps, channel: &ChannelId, user: &UserId, now: Timestamp) -> PortResult<String> {
    let id = format!("reset:{user}:{}", now.as_micros());
    let about = About { channel, thread_root: None, ts: Ts::from_timestamp(now), user: Some(user.clone()) };
    Ok(match apply(deps, about, FeedbackChange::Reset { id }).await? {
        Some(outcome) => format!("Talkativeness reset here (it was {:+.0}, now 0).", -outcome.weight),
        None if !deps.settings.talkativeness.enabled => {
            "kuuki does not learn how talkative to be here (TALKATIVENESS_ENABLED is off).".to_owned()
        }
        None => "Talkativeness reset here already.".to_owned(),
    })
}

/// The channel's offset and its last causes, for `status` and `why`.
pub(super) fn describe(deps: &Deps, state: &ChannelState, now: Timestamp) -> String {
    let settings = &deps.settings.talkativeness;
    if !settings.enabled {
        return "Talkativeness: not learned here (TALKATIVENESS_ENABLED is off).".to_owned();
    }
    let limits = &settings.limits;
    let offset = state.talkativeness.offset_at(now, limits);
    let mut out = format!(
        "Talkativeness here: {offset:+.0} added to unasked scores (from {:+.0} to {:+.0}, halving every {} days).",
        limits.min,
        limits.max,
        limits.half_life.as_secs_f64() / 86_400.0
    );
    // Back to the last reset: what came before it no longer counts.
    let mut reset_seen = false;
    let mut causes = state
        .talkativeness
        .last_causes(SHOWN_CAUSES)
        .take_while(|cause| !std::mem::replace(&mut reset_seen, cause.kind == SignalKind::Reset))
        .peekable();
    if causes.peek().is_none() {
        out.push_str(" Nothing has moved it yet.");
        return out;
    }
    out.push_str(" Last causes:");
    for cause in causes {
        let ago = super::human_duration(now.seconds_since(cause.at).max(0.0));
        let _ = write!(out, "\n- {} ({:+.0}, {ago} ago)", cause.kind.as_str(), cause.applied);
    }
    out
}
