//! Proactive conversation (spec 001, docs/design.md §9.7): when a channel comes back after a
//! silence of `PROACTIVE_SILENCE_MINUTES` and a fresh, shareable fact matches the message
//! that brought it back, kuuki may open with it ("そういえば…").
//!
//! Only where kuuki has been welcome (it took part there in the last 30 days), within
//! working hours in `PROACTIVE_TIMEZONE`, outside cooldown, at most one a day per
//! channel; an opener nobody answers doubles the wait for the next, and a clear no (a
//! reply like "stop", or a mute right after it) ends them in that channel. The judge
//! queues an OPEN job for a comeback it decided not to answer; the respond worker runs
//! it (`respond::opener`), so in AWS it goes through the respond queue and in replay
//! through the virtual clock like any job.

use std::sync::Arc;
use std::time::Duration;

use crate::deps::Deps;
use crate::domain::{ChannelId, Fact, Job, Message, Timestamp};
use crate::ports::{ChannelState, OpenerState, PortResult};

/// An opener follows the comeback after this pause, as a person would.
pub const OPENER_DELAY: Duration = Duration::from_secs(20);
/// A fact learned or restated within this many days is fresh enough to bring up.
const FRESH_DAYS: f64 = 14.0;
/// kuuki opens only where it took part this recently: it is welcome there.
const WELCOME_DAYS: f64 = 30.0;
/// People who answer an opener do so within this long.
pub const ANSWER_WINDOW: Duration = Duration::from_secs(30 * 60);
/// Replies that ask kuuki to stop opening conversations.
const NO_THANKS: &[&str] = &[
    "stop",
    "not now",
    "shut up",
    "no thanks",
    "nobody asked",
    "go away",
    "やめて",
    "うるさい",
    "黙って",
    "いらない",
    "結構です",
    "静かにして",
];

/// Called by the judge for a message it decided not to answer: queues an opener when
/// the message brings the channel back after the silence. `previous_at` is when the
/// channel's message before it was written.
pub async fn maybe_queue(
    deps: &Deps,
    target: &Message,
    previous_at: Option<Timestamp>,
    opener: &OpenerState,
) -> PortResult<()> {
    let s = &deps.settings;
    // A channel's first message: kuuki has not been welcome there yet.
    let Some(previous_at) = previous_at else { return Ok(()) };
    let silence = f64::from(s.memory.proactive_silence_minutes) * 60.0;
    if !s.memory.proactive_conversation_enabled
        || !s.memory.enabled
        || target.in_dm
        || opener.stopped
        || target.at.seconds_since(previous_at) < silence
    {
        return Ok(());
    }
    deps.enqueue_after(Job::Open { thread: target.thread_key(), ts: target.ts.clone() }, OPENER_DELAY).await
}

/// How the last opener went, once its answer window has passed: answered resets the
/// wait to a day, unanswered doubles it, a clear no (or a mute set after it) stops
/// openers here. Returns the state to keep (unchanged while the window is open).
pub async fn settle(deps: &Deps, channel: &ChannelId, state: &ChannelState, now: Timestamp) -> PortResult<OpenerState> {
    let mut opener = state.opener.clone();
    let (Some(posted), Some(at)) = (opener.pending.clone(), opener.last_at) else { return Ok(opener) };
    let closes = at + ANSWER_WINDOW;
    if closes > now {
        return Ok(opener);
    }
    let replies: Vec<Arc<Message>> = deps
        .messages
        .messages_after(channel, Some(&posted), 50)
        .await?
        .into_iter()
        .filter(|m| m.at <= closes && deps.is_participant(m))
        .collect();
    let muted_after = state.muted_until.is_some_and(|until| until > at);
    let declined = replies.iter().any(|m| says_no_thanks(&m.text));
    opener.pending = None;
    if declined || muted_after {
        opener.stopped = true;
    } else if replies.is_empty() {
        opener.wait_days = (opener.wait_days.max(1) * 2).min(OpenerState::MAX_WAIT_DAYS);
    } else {
        opener.wait_days = 1;
    }
    Ok(opener)
}

fn says_no_thanks(text: &str) -> bool {
    let lower = text.to_lowercase();
    NO_THANKS.iter().any(|no| super::keywords::contains_phrase(&lower, no))
}

/// Why no opener goes out now, or the fact to open with.
pub async fn choose(
    deps: &Deps,
    target: &Message,
    state: &ChannelState,
    opener: &OpenerState,
) -> PortResult<Result<Fact, String>> {
    let s = &deps.settings;
    let now = deps.clock.now();
    if opener.stopped {
        return Ok(Err("someone asked kuuki to stop opening conversations here".into()));
    }
    if state.muted_at(now) {
        return Ok(Err("kuuki is muted here".into()));
    }
    if let Some(last) = opener.last_at {
        let next = last + Duration::from_secs(u64::from(opener.wait_days.max(1)) * 86_400);
        if next > now {
            return Ok(Err(format!("the next opener waits until {}", next.to_utc_string())));
        }
    }
    if !in_working_hours(now, &s.memory.proactive_timezone, s.memory.proactive_working_hours) {
        return Ok(Err("outside working hours".into()));
    }
    match state.last_response_at {
        Some(at) if now.seconds_since(at) <= WELCOME_DAYS * 86_400.0 => {
            if now.seconds_since(at) < s.judge.cooldown.as_secs_f64() {
                return Ok(Err("kuuki spoke here moments ago (cooldown)".into()));
            }
        }
        _ => return Ok(Err("kuuki has not taken part here in the last 30 days".into())),
    }
    let fresh: Vec<Fact> = deps
        .facts
        .facts(&target.channel)
        .await?
        .into_iter()
        .filter(|f| {
            f.shareable
                && !opener.shared_facts.contains(&f.id)
                && now.seconds_since(f.confirmed_at) <= FRESH_DAYS * 86_400.0
        })
        .collect();
    let half_life = s.memory.fact_decay_half_life_days;
    let best = super::reflect::search(&fresh, &target.text, None, &target.user.0, now, half_life).into_iter().next();
    Ok(best.map(|m| m.fact).ok_or_else(|| "no fresh shareable fact matches the message".to_owned()))
}

/// Monday to Friday, from the start hour up to the end hour, local time in `zone`.
pub fn in_working_hours(now: Timestamp, zone: &jiff::tz::TimeZone, (start, end): (u8, u8)) -> bool {
    let Ok(at) = jiff::Timestamp::from_microsecond(now.as_micros()) else { return false };
    let local = at.to_zoned(zone.clone());
    let weekend = matches!(local.weekday(), jiff::civil::Weekday::Saturday | jiff::civil::Weekday::Sunday);
    let hour = local.hour();
    !weekend && hour >= i8::try_from(start).unwrap_or(24) && hour < i8::try_from(end).unwrap_or(0)
}

/// The state after an opener at `now` with `fact` (`posted`: its post, `None` in shadow
/// mode, where nothing can be answered).
pub fn after_opening(
    mut opener: OpenerState,
    fact: &Fact,
    posted: Option<crate::domain::Ts>,
    now: Timestamp,
) -> OpenerState {
    opener.last_at = Some(now);
    opener.pending = posted;
    opener.wait_days = opener.wait_days.max(1);
    opener.shared_facts.push(fact.id.clone());
    let excess = opener.shared_facts.len().saturating_sub(OpenerState::KEPT_SHARED_FACTS);
    opener.shared_facts.drain(..excess);
    opener
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_hours_are_weekdays_in_the_channels_time_zone() {
        let tokyo = jiff::tz::TimeZone::get("Asia/Tokyo").unwrap();
        // The replay epoch: Monday 2026-01-05 09:00 UTC = 18:00 in Tokyo.
        let monday_0900_utc = crate::replay::REPLAY_EPOCH;
        assert!(in_working_hours(monday_0900_utc, &jiff::tz::TimeZone::UTC, (9, 18)));
        assert!(!in_working_hours(monday_0900_utc, &tokyo, (9, 18)), "18:00 in Tokyo is after hours");
        assert!(in_working_hours(monday_0900_utc, &tokyo, (9, 19)));
        let saturday = monday_0900_utc + Duration::from_secs(5 * 86_400);
        assert!(!in_working_hours(saturday, &jiff::tz::TimeZone::UTC, (0, 24)), "not at the weekend");
    }

    #[test]
    fn a_clear_no_is_heard() {
        assert!(says_no_thanks("Stop it please"));
        assert!(says_no_thanks("今はいらないです"));
        assert!(!says_no_thanks("nice, tell me more"));
        assert!(!says_no_thanks("the build stopped again"), "a word inside another is not a no");
    }
}
