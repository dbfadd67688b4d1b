//! Search in a deque of entries sorted by ts, and a map by ts built on it: shared by the
//! in-process store's indexes and the replay log's thread names.

use std::collections::VecDeque;

use super::Ts;

/// Gallop steps back from the newest end before [`search`] guesses instead.
const NEWEST_GALLOP: usize = 16;
/// Guesses from the times before [`search`] bisects what is left.
const GUESSES: usize = 4;

/// A sequence sorted by ts that [`search`] probes by index. Each entry's
/// [`Ts::order_hint`] is kept in the sequence's own memory, so a search compares hints
/// and reads a ts (somewhere else in memory, maybe written long ago) only when two
/// hints are equal.
pub trait SortedByTs {
    fn sorted_len(&self) -> usize;
    /// The [`Ts::order_hint`] of the entry at `i`.
    fn hint_at(&self, i: usize) -> u64;
    /// The ts at `i`, read only when two hints are equal.
    fn ts_at(&self, i: usize) -> &Ts;

    /// How the entry at `i` compares with `ts`, whose hint is `hint`.
    #[inline]
    fn cmp_at(&self, i: usize, ts: &Ts, hint: u64) -> std::cmp::Ordering {
        self.hint_at(i).cmp(&hint).then_with(|| self.ts_at(i).cmp(ts))
    }

    /// The ts at `i` as a number, read from its hint.
    #[inline]
    fn approximate_at(&self, i: usize) -> Option<f64> {
        let hint = self.hint_at(i);
        (hint != u64::MAX).then(|| f64::from_bits(hint))
    }
}

/// Values by ts, in ts order, for keys that come nearly in order (a thread's messages
/// or its name, under its root): a new key goes at the back, beside the last one made,
/// where a hash map would write it at a random place in a table of all of them and move
/// them all at each doubling, memory no cache holds in a long history. A key out of
/// order is put in its place.
///
/// The hints are kept apart from the keys and values, eight to a cache line: a search
/// for an old key (a reply to a thread begun days ago) probes a few lines of hints, not
/// one cold line of a key and its value for each probe.
pub struct TsMap<T> {
    hints: VecDeque<u64>,
    /// Beside `hints`, index for index.
    entries: VecDeque<(Ts, T)>,
}

impl<T> Default for TsMap<T> {
    fn default() -> Self {
        TsMap { hints: VecDeque::new(), entries: VecDeque::new() }
    }
}

impl<T> SortedByTs for TsMap<T> {
    #[inline]
    fn sorted_len(&self) -> usize {
        self.hints.len()
    }

    #[inline]
    fn hint_at(&self, i: usize) -> u64 {
        self.hints[i]
    }

    #[inline]
    fn ts_at(&self, i: usize) -> &Ts {
        &self.entries[i].0
    }
}

impl<T> TsMap<T> {
    pub fn get(&self, ts: &Ts) -> Option<&T> {
        search(self, ts).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, ts: &Ts) -> Option<&mut T> {
        search(self, ts).ok().map(|i| &mut self.entries[i].1)
    }

    /// The value under `ts`, made with `make` when missing.
    pub fn get_or_insert_with(&mut self, ts: &Ts, make: impl FnOnce() -> T) -> &mut T {
        let i = match search(self, ts) {
            Ok(found) => found,
            Err(place) => {
                self.hints.insert(place, ts.order_hint());
                self.entries.insert(place, (ts.clone(), make()));
                place
            }
        };
        &mut self.entries[i].1
    }

    pub fn remove(&mut self, ts: &Ts) -> Option<T> {
        let i = search(self, ts).ok()?;
        self.hints.remove(i);
        self.entries.remove(i).map(|(_, value)| value)
    }

    /// Keeps the values `keep` says to keep (it may change them first).
    pub fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        self.entries.retain_mut(|(_, value)| keep(value));
        self.hints = self.entries.iter().map(|(ts, _)| ts.order_hint()).collect();
    }

    pub fn reserve(&mut self, more: usize) {
        self.hints.reserve(more);
        self.entries.reserve(more);
    }

    pub fn len(&self) -> usize {
        self.hints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hints.is_empty()
    }
}

/// Binary search of `entries[lo..hi]` for `ts`, as `slice::binary_search` answers.
fn bisect<S: SortedByTs + ?Sized>(
    entries: &S,
    ts: &Ts,
    hint: u64,
    mut lo: usize,
    mut hi: usize,
) -> Result<usize, usize> {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match entries.cmp_at(mid, ts, hint) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// Where the entry with `ts` is (`Ok`) or would go (`Err`) in `entries`, sorted by ts.
/// They arrive nearly in order, so nearly every question is about the newest: a short
/// gallop back from the newest end, then, for an older ts, a guess from the times at
/// the ends of the stretch left (entries come at a rate, so a ts a third of the way
/// between two is about a third of the way along), then a binary search. Every probe
/// reads the deque's entries, not what they point to.
pub fn search<S: SortedByTs + ?Sized>(entries: &S, ts: &Ts) -> Result<usize, usize> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let hint = ts.order_hint();
    // Every index below `lo` holds an earlier ts, every one from `hi` on a later one.
    let (mut lo, mut hi, mut step) = (0, entries.sorted_len(), 1);
    while hi > 0 {
        let probe = hi.saturating_sub(step);
        match entries.cmp_at(probe, ts, hint) {
            Greater => hi = probe,
            Equal => return Ok(probe),
            Less => {
                lo = probe + 1;
                break;
            }
        }
        if step == NEWEST_GALLOP && probe > 0 {
            return guess_then_bisect(entries, ts, hint, hi);
        }
        step *= 2;
    }
    bisect(entries, ts, hint, lo, hi)
}

/// [`search`] for a ts before index `hi`, whose entry is later.
fn guess_then_bisect<S: SortedByTs + ?Sized>(entries: &S, ts: &Ts, hint: u64, hi: usize) -> Result<usize, usize> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match entries.cmp_at(0, ts, hint) {
        Greater => return Err(0),
        Equal => return Ok(0),
        Less => {}
    }
    // Entries `below` and `above` bracket it: earlier and later.
    let (mut below, mut above) = (0, hi);
    for _ in 0..GUESSES {
        let (Some(asked), Some(low), Some(high)) =
            (ts.approximate(), entries.approximate_at(below), entries.approximate_at(above))
        else {
            break;
        };
        if above - below <= 2 || high <= low {
            break;
        }
        let share = ((asked - low) / (high - low)).clamp(0.0, 1.0);
        let guess = (below + 1 + (share * (above - below - 1) as f64) as usize).min(above - 1);
        match entries.cmp_at(guess, ts, hint) {
            Less => below = guess,
            Greater => above = guess,
            Equal => return Ok(guess),
        }
    }
    bisect(entries, ts, hint, below + 1, above)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;

    fn ts(secs: i64) -> Ts {
        Ts::from_timestamp(Timestamp(secs * 1_000_000))
    }

    /// The map answers as a `BTreeMap` would, whatever order keys come in (mostly in
    /// order, some late, some text that is no number), through inserts, removals and a
    /// retain: its hints stay beside their keys.
    #[test]
    fn a_ts_map_answers_what_an_ordered_map_answers() {
        let mut rng = fastrand::Rng::with_seed(9);
        for round in 0..40 {
            let mut map: TsMap<u32> = TsMap::default();
            let mut reference = std::collections::BTreeMap::new();
            let mut clock = 0;
            for step in 0..rng.u32(0..400) {
                clock += rng.i64(1..5);
                let key = match rng.u8(..20) {
                    0 => Ts::new(format!("text-{}", rng.u8(..5))),
                    1..=3 => ts(rng.i64(0..=clock)),
                    _ => ts(clock),
                };
                match rng.u8(..10) {
                    0 => assert_eq!(map.remove(&key), reference.remove(&key), "round {round}: remove"),
                    _ => {
                        let made = *map.get_or_insert_with(&key, || step);
                        assert_eq!(made, *reference.entry(key.clone()).or_insert(step), "round {round}: insert");
                    }
                }
                if rng.u8(..50) == 0 {
                    map.retain(|value| *value % 3 != 0);
                    reference.retain(|_, value| *value % 3 != 0);
                }
            }
            assert_eq!(map.len(), reference.len(), "round {round}");
            for asked in (0..=clock + 1).map(ts).chain((0..5).map(|i| Ts::new(format!("text-{i}")))) {
                assert_eq!(map.get(&asked), reference.get(&asked), "round {round}: get {asked:?}");
            }
            let in_order: Vec<&Ts> = map.entries.iter().map(|(ts, _)| ts).collect();
            assert_eq!(in_order, reference.keys().collect::<Vec<_>>(), "round {round}: in ts order");
            let hints: Vec<u64> = map.entries.iter().map(|(ts, _)| ts.order_hint()).collect();
            assert_eq!(Vec::from(map.hints.clone()), hints, "round {round}: each hint beside its key");
        }
    }
}
