//! Adaptive talkativeness (docs/design.md §7.6): what kuuki learns from how each channel
//! takes what it says unasked. The judge adds the channel's offset to unasked scores
//! ([`add_offset`]); the signals are counted here, each once, into the channel state
//! ([`crate::ports::ChannelStateStore::apply_feedback`]) with a `feedback` record.
//! The model itself (weights, bounds, decay, idempotency) is
//! `domain::talkativeness`.

mod signals;

pub use signals::{is_hush, notice, reaction};

use crate::deps::Deps;
use crate::domain::talkativeness::{FeedbackChange, FeedbackOutcome};
use crate::domain::{ChannelId, EventKind, RuleScore, Ts, UserId};
use crate::ports::{ChannelState, PortResult};
use crate::record::record;

/// The channel's offset now, in whole points (0 with `TALKATIVENESS_ENABLED=false`).
pub fn offset(deps: &Deps, state: &ChannelState) -> i32 {
    let settings = &deps.settings.talkativeness;
    if !settings.enabled {
        return 0;
    }
    state.talkativeness.offset_at(deps.clock.now(), &settings.limits).round() as i32
}

/// Adds the offset to an unasked message's score as the `talkativeness` rule (none
/// when it is 0, so a channel that gave no signal scores as before).
pub fn add_offset(scored: &mut RuleScore, offset: i32) {
    if offset == 0 {
        return;
    }
    scored.breakdown.add("talkativeness", offset);
    scored.score = scored.breakdown.total().clamp(0, 100);
}

/// Where a signal is logged: the message it came with (a reaction's: kuuki's post).
pub(crate) struct About<'a> {
    pub channel: &'a ChannelId,
    pub thread_root: Option<Ts>,
    pub ts: Ts,
    pub user: Option<UserId>,
}

/// Applies `change` to the channel's talkativeness and logs a `feedback` record when it
/// changed anything (a repeat does not).
pub(crate) async fn apply(
    deps: &Deps,
    about: About<'_>,
    change: FeedbackChange,
) -> PortResult<Option<FeedbackOutcome>> {
    let settings = &deps.settings.talkativeness;
    if !settings.enabled {
        return Ok(None);
    }
    let outcome = deps.channels.apply_feedback(about.channel, &change, deps.clock.now(), &settings.limits).await?;
    if let Some(outcome) = &outcome {
        record(
            deps,
            about.channel,
            about.thread_root,
            about.ts,
            EventKind::Feedback {
                signal: outcome.kind,
                user: about.user,
                post: outcome.post.clone(),
                weight: outcome.weight,
                offset: outcome.offset_after,
                undone: outcome.undone,
            },
        );
    }
    Ok(outcome)
}
