//! How talkative kuuki is in a channel, learned from how the channel takes what it says
//! unasked (docs/design.md §7.6): an offset added to unasked scores, moved by signals
//! (reactions to kuuki's posts, replies, being ignored, words to kuuki, commands),
//! bounded, decaying toward 0 with a half-life. Pure: the store applies a
//! [`FeedbackChange`] to a channel's [`Talkativeness`] in one write.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Timestamp, Ts};

/// The bounds and the half-life of the offset (`TALKATIVENESS_*` settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TalkativenessLimits {
    pub min: f64,
    pub max: f64,
    pub half_life: Duration,
}

impl Default for TalkativenessLimits {
    fn default() -> Self {
        TalkativenessLimits { min: -40.0, max: 20.0, half_life: Duration::from_secs(7 * 86_400) }
    }
}

impl TalkativenessLimits {
    /// What one point counted at `then` is worth at `now` (1 at `then`, halving every
    /// half-life; a time before `then`, as a late clock gives, counts as `then`).
    pub fn decay(&self, then: Timestamp, now: Timestamp) -> f64 {
        let half_life = self.half_life.as_secs_f64();
        if half_life <= 0.0 {
            return 0.0;
        }
        0.5_f64.powf(now.seconds_since(then).max(0.0) / half_life)
    }

    fn bound(&self, offset: f64) -> f64 {
        offset.clamp(self.min, self.max)
    }
}

/// What a signal says about kuuki's unasked words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// A welcoming reaction (👍 ❤️ 🙏 …) on one of kuuki's posts.
    PositiveReaction,
    /// A turning-away reaction (👎 🙄 🤫 …) on one of kuuki's posts.
    NegativeReaction,
    /// Any other reaction on one of kuuki's posts: no weight, but someone noticed it
    /// (an unasked post with a reaction was not ignored).
    OtherReaction,
    /// Someone replied to an unasked post (in its thread, a reply, a mention) within
    /// [`SETTLE_WINDOW`].
    Engaged,
    /// Three or more people's messages after an unasked post, none taking it up, within
    /// [`SETTLE_WINDOW`].
    Ignored,
    /// "shh kuuki", "not now kuuki", 「くうき静かに」, 「今はいいよ」 after an unasked post.
    Hushed,
    /// Thanks said to kuuki.
    Thanked,
    /// `/kuuki quieter` (anyone; once a day per person).
    Quieter,
    /// `/kuuki louder` (anyone; once a day per person).
    Louder,
    /// `/kuuki talkativeness reset` (managers): the offset back to 0.
    Reset,
}

impl SignalKind {
    /// Each signal's weight (stated here, docs/judgment.md has the table): turning kuuki
    /// down weighs more than welcoming it, so a room that turns away is heard quickly
    /// and a welcoming one only slowly makes kuuki chattier.
    pub fn weight(self) -> f64 {
        match self {
            SignalKind::PositiveReaction => 3.0,
            SignalKind::NegativeReaction => -6.0,
            SignalKind::OtherReaction => 0.0,
            SignalKind::Engaged => 4.0,
            SignalKind::Ignored => -6.0,
            SignalKind::Hushed => -15.0,
            SignalKind::Thanked => 4.0,
            SignalKind::Quieter => -10.0,
            SignalKind::Louder => 10.0,
            // What a reset takes away is the offset it finds.
            SignalKind::Reset => 0.0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SignalKind::PositiveReaction => "positive_reaction",
            SignalKind::NegativeReaction => "negative_reaction",
            SignalKind::OtherReaction => "other_reaction",
            SignalKind::Engaged => "engaged",
            SignalKind::Ignored => "ignored",
            SignalKind::Hushed => "hushed",
            SignalKind::Thanked => "thanked",
            SignalKind::Quieter => "quieter",
            SignalKind::Louder => "louder",
            SignalKind::Reset => "reset",
        }
    }
}

/// How long after an unasked post replies count as taking it up, and messages as
/// passing it by.
pub const SETTLE_WINDOW: Duration = Duration::from_secs(10 * 60);
/// People's messages after an unasked post, none taking it up, that make it ignored.
pub const IGNORED_AFTER_MESSAGES: usize = 3;

/// One signal as counted, kept so a repeat counts once and a removal can undo it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountedSignal {
    /// Unique per signal: `reaction:<post ts>:<user>:<emoji>`, `ignored:<post ts>`, …
    pub id: String,
    pub kind: SignalKind,
    pub at: Timestamp,
    /// kuuki's post the signal is about, when it is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<Ts>,
    /// What it moved the offset by when counted (inside the bounds).
    pub applied: f64,
    /// The offset right after it was counted (or undone).
    pub offset_after: f64,
    /// Taken back (a removed reaction, a post taken up after all).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
}

/// A channel's talkativeness: the offset as of `at`, and the signals counted lately.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Talkativeness {
    pub offset: f64,
    /// When `offset` was set; it decays from then. `None`: never moved.
    #[serde(default)]
    pub at: Option<Timestamp>,
    /// Newest last, at most [`Talkativeness::KEPT_SIGNALS`].
    #[serde(default)]
    pub signals: Vec<CountedSignal>,
}

/// A change asked of a channel's [`Talkativeness`].
#[derive(Debug, Clone, PartialEq)]
pub enum FeedbackChange {
    /// Count a signal once (a repeat of `id` changes nothing).
    Count { id: String, kind: SignalKind, post: Option<Ts> },
    /// Take back the signal `id` counted (a removed reaction), if it still stands.
    Undo { id: String },
    /// Put the offset back to 0, once per `id`. The signals counted before stay known
    /// (a repeat still counts once) but have nothing left to take back.
    Reset { id: String },
}

/// What a change did: the signal and the offset after it.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedbackOutcome {
    pub id: String,
    pub kind: SignalKind,
    /// kuuki's post it is about, when it is about one.
    pub post: Option<Ts>,
    /// What the offset moved by (negative of the original for an undo).
    pub weight: f64,
    pub offset_after: f64,
    pub undone: bool,
}

impl Talkativeness {
    /// Enough to find the repeats of the last days' signals (platforms redeliver within
    /// hours) and to show the last causes, small enough to write with every signal.
    pub const KEPT_SIGNALS: usize = 40;

    pub fn is_empty(&self) -> bool {
        self.at.is_none() && self.signals.is_empty()
    }

    /// The offset at `now`: decayed toward 0 since it was set.
    pub fn offset_at(&self, now: Timestamp, limits: &TalkativenessLimits) -> f64 {
        match self.at {
            Some(at) => limits.bound(self.offset * limits.decay(at, now)),
            None => 0.0,
        }
    }

    /// Whether signal `id` is counted and stands.
    pub fn counts(&self, id: &str) -> bool {
        self.signals.iter().any(|s| s.id == id && !s.undone)
    }

    /// The signal counted under `id`, whether it stands or was undone.
    pub fn signal(&self, id: &str) -> Option<&CountedSignal> {
        self.signals.iter().find(|s| s.id == id)
    }

    /// The last `n` signals that moved the offset, newest first.
    pub fn last_causes(&self, n: usize) -> impl Iterator<Item = &CountedSignal> {
        self.signals.iter().rev().filter(|s| !s.undone && (s.applied != 0.0 || s.kind.weight() != 0.0)).take(n)
    }

    /// Applies `change` at `now`; `None` when it changes nothing (a repeat, or an undo
    /// of what is not counted).
    pub fn apply(
        &mut self,
        change: &FeedbackChange,
        now: Timestamp,
        limits: &TalkativenessLimits,
    ) -> Option<FeedbackOutcome> {
        let current = self.offset_at(now, limits);
        match change {
            FeedbackChange::Count { id, kind, post } => {
                if self.counts(id) {
                    return None;
                }
                // Counted and undone before (a reaction put back): counted anew.
                self.signals.retain(|s| &s.id != id);
                let offset = limits.bound(current + kind.weight());
                let applied = offset - current;
                self.set(offset, now);
                Some(self.keep(CountedSignal {
                    id: id.clone(),
                    kind: *kind,
                    at: now,
                    post: post.clone(),
                    applied,
                    offset_after: offset,
                    undone: false,
                }))
            }
            FeedbackChange::Reset { id } => {
                if self.signal(id).is_some() {
                    return None;
                }
                for signal in &mut self.signals {
                    signal.applied = 0.0;
                }
                self.set(0.0, now);
                Some(self.keep(CountedSignal {
                    id: id.clone(),
                    kind: SignalKind::Reset,
                    at: now,
                    post: None,
                    applied: -current,
                    offset_after: 0.0,
                    undone: false,
                }))
            }
            FeedbackChange::Undo { id } => {
                let place = self.signals.iter().position(|s| &s.id == id && !s.undone)?;
                let signal = &self.signals[place];
                // What it added then has decayed like the rest of the offset since.
                let back = -signal.applied * limits.decay(signal.at, now);
                let offset = limits.bound(current + back);
                let (kind, post, applied) = (signal.kind, signal.post.clone(), offset - current);
                self.set(offset, now);
                let signal = &mut self.signals[place];
                signal.undone = true;
                signal.offset_after = offset;
                Some(FeedbackOutcome {
                    id: id.clone(),
                    kind,
                    post,
                    weight: applied,
                    offset_after: offset,
                    undone: true,
                })
            }
        }
    }

    fn set(&mut self, offset: f64, now: Timestamp) {
        self.offset = offset;
        self.at = Some(now);
    }

    /// Keeps a newly counted signal; what counting it did.
    fn keep(&mut self, signal: CountedSignal) -> FeedbackOutcome {
        let outcome = FeedbackOutcome {
            id: signal.id.clone(),
            kind: signal.kind,
            post: signal.post.clone(),
            weight: signal.applied,
            offset_after: signal.offset_after,
            undone: false,
        };
        self.signals.push(signal);
        let excess = self.signals.len().saturating_sub(Self::KEPT_SIGNALS);
        self.signals.drain(..excess);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400 * Timestamp::MICROS_PER_SECOND;

    fn count(id: &str, kind: SignalKind) -> FeedbackChange {
        FeedbackChange::Count { id: id.into(), kind, post: None }
    }

    fn limits() -> TalkativenessLimits {
        TalkativenessLimits::default()
    }

    #[test]
    fn each_signal_moves_the_offset_by_its_weight() {
        let mut t = Talkativeness::default();
        let now = Timestamp(DAY);
        for (i, kind) in [
            SignalKind::NegativeReaction,
            SignalKind::Ignored,
            SignalKind::Hushed,
            SignalKind::PositiveReaction,
            SignalKind::Engaged,
            SignalKind::Thanked,
        ]
        .into_iter()
        .enumerate()
        {
            let before = t.offset_at(now, &limits());
            let outcome = t.apply(&count(&format!("s{i}"), kind), now, &limits()).unwrap();
            assert_eq!(outcome.weight, kind.weight(), "{kind:?}");
            assert_eq!(t.offset_at(now, &limits()), before + kind.weight());
        }
        assert_eq!(t.offset_at(now, &limits()), -6.0 - 6.0 - 15.0 + 3.0 + 4.0 + 4.0);
        assert!(SignalKind::NegativeReaction.weight() < 0.0 && SignalKind::PositiveReaction.weight() > 0.0);
    }

    #[test]
    fn the_offset_stays_within_its_bounds_and_an_undo_takes_back_only_what_was_applied() {
        let mut t = Talkativeness::default();
        let now = Timestamp(DAY);
        for i in 0..10 {
            t.apply(&count(&format!("hush{i}"), SignalKind::Hushed), now, &limits());
        }
        assert_eq!(t.offset_at(now, &limits()), -40.0);
        // The last one was cut to nothing by the bound: undoing it gives nothing back.
        let undone = t.apply(&FeedbackChange::Undo { id: "hush9".into() }, now, &limits()).unwrap();
        assert_eq!((undone.weight, undone.offset_after), (0.0, -40.0));
        let mut up = Talkativeness::default();
        for i in 0..10 {
            up.apply(&count(&format!("thanks{i}"), SignalKind::Thanked), now, &limits());
        }
        assert_eq!(up.offset_at(now, &limits()), 20.0);
    }

    #[test]
    fn the_offset_halves_every_half_life() {
        let mut t = Talkativeness::default();
        let start = Timestamp(DAY);
        for i in 0..4 {
            t.apply(&count(&format!("n{i}"), SignalKind::NegativeReaction), start, &limits());
        }
        assert_eq!(t.offset_at(start, &limits()), -24.0);
        assert!((t.offset_at(Timestamp(start.0 + 7 * DAY), &limits()) - -12.0).abs() < 1e-9);
        assert!((t.offset_at(Timestamp(start.0 + 14 * DAY), &limits()) - -6.0).abs() < 1e-9);
        // A signal then adds to the decayed offset.
        let later = Timestamp(start.0 + 7 * DAY);
        t.apply(&count("p", SignalKind::PositiveReaction), later, &limits());
        assert!((t.offset_at(later, &limits()) - -9.0).abs() < 1e-9);
    }

    #[test]
    fn a_repeated_signal_counts_once_and_a_removed_one_is_undone() {
        let mut t = Talkativeness::default();
        let now = Timestamp(DAY);
        let thumbs_down = count("reaction:1.0:alice:-1", SignalKind::NegativeReaction);
        assert!(t.apply(&thumbs_down, now, &limits()).is_some());
        assert_eq!(t.apply(&thumbs_down, now, &limits()), None, "a redelivered reaction counts once");
        assert_eq!(t.offset_at(now, &limits()), -6.0);
        let removal = FeedbackChange::Undo { id: "reaction:1.0:alice:-1".into() };
        let undone = t.apply(&removal, now, &limits()).unwrap();
        assert!(undone.undone);
        assert_eq!(t.offset_at(now, &limits()), 0.0);
        assert_eq!(t.apply(&removal, now, &limits()), None, "a redelivered removal undoes once");
        // Put back: it counts again.
        assert!(t.apply(&thumbs_down, now, &limits()).is_some());
        assert_eq!(t.offset_at(now, &limits()), -6.0);
    }

    #[test]
    fn an_undo_takes_back_what_is_left_of_a_signal_after_decay() {
        let mut t = Talkativeness::default();
        let start = Timestamp(DAY);
        t.apply(&count("a", SignalKind::NegativeReaction), start, &limits());
        t.apply(&count("b", SignalKind::NegativeReaction), start, &limits());
        let later = Timestamp(start.0 + 7 * DAY);
        t.apply(&FeedbackChange::Undo { id: "a".into() }, later, &limits());
        assert!((t.offset_at(later, &limits()) - -3.0).abs() < 1e-9);
    }

    #[test]
    fn a_reset_puts_the_offset_back_to_zero_once_and_leaves_nothing_to_undo() {
        let mut t = Talkativeness::default();
        let now = Timestamp(DAY);
        t.apply(&count("r", SignalKind::NegativeReaction), now, &limits());
        t.apply(&count("q", SignalKind::Quieter), now, &limits());
        assert_eq!(t.offset_at(now, &limits()), -16.0);
        let reset = FeedbackChange::Reset { id: "reset:1".into() };
        let outcome = t.apply(&reset, now, &limits()).unwrap();
        assert_eq!((outcome.weight, outcome.offset_after), (16.0, 0.0));
        assert_eq!(t.apply(&reset, now, &limits()), None, "a repeated reset");
        assert_eq!(t.apply(&count("r", SignalKind::NegativeReaction), now, &limits()), None, "still counted once");
        let undone = t.apply(&FeedbackChange::Undo { id: "r".into() }, now, &limits()).unwrap();
        assert_eq!((undone.weight, t.offset_at(now, &limits())), (0.0, 0.0), "nothing left to take back");
        t.apply(&count("l", SignalKind::Louder), now, &limits());
        assert_eq!(t.offset_at(now, &limits()), 10.0);
        let causes: Vec<_> = t.last_causes(2).map(|s| s.kind).collect();
        assert_eq!(causes, vec![SignalKind::Louder, SignalKind::Reset]);
    }

    #[test]
    fn only_the_newest_signals_are_kept() {
        let mut t = Talkativeness::default();
        let now = Timestamp(DAY);
        for i in 0..Talkativeness::KEPT_SIGNALS + 5 {
            t.apply(&count(&format!("s{i}"), SignalKind::OtherReaction), now, &limits());
        }
        assert_eq!(t.signals.len(), Talkativeness::KEPT_SIGNALS);
        assert_eq!(t.signals[0].id, "s5");
        assert_eq!(t.last_causes(3).count(), 0, "weightless signals are no cause");
    }
}
