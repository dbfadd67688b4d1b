//! Search in a deque of entries sorted by ts, and a map by ts built on it: shared by the
//! in-process store's indexes and the replay log's thread names.

use std::collections::VecDeque;

use super::Ts;

/// Gallop steps back from the newest end before [`search`] guesses instead.
const NEWEST_GALLOP: usize = 16;
/// Guesses from the times before [`search`] bisects what is left.
const GUESSES: usize = 4;

/// What a ts-sorted deque holds: a ts, with its [`Ts::order_hint`] beside it so a search
/// compares hints in the deque's own memory and reads the ts (somewhere else in memory,
/// maybe written long ago) only when two hints are equal.
pub trait ByTsEntry {
    fn hint(&self) -> u64;
    fn ts(&self) -> &Ts;

    /// How this entry's ts compares with `ts`, whose hint is `hint`.
    #[inline]
    fn cmp_ts(&self, ts: &Ts, hint: u64) -> std::cmp::Ordering {
        self.hint().cmp(&hint).then_with(|| self.ts().cmp(ts))
    }

    /// The ts as a number, read from the hint.
    #[inline]
    fn approximate(&self) -> Option<f64> {
        (self.hint() != u64::MAX).then(|| f64::from_bits(self.hint()))
    }
}

/// A value kept under a ts in a [`TsMap`].
struct UnderTs<T> {
    hint: u64,
    ts: Ts,
    value: T,
}

impl<T> ByTsEntry for UnderTs<T> {
    #[inline]
    fn hint(&self) -> u64 {
        self.hint
    }

    #[inline]
    fn ts(&self) -> &Ts {
        &self.ts
    }
}

/// Values by ts, in ts order, for keys that come nearly in order (a thread's messages
/// or its name, under its root): a new key goes at the back, beside the last one made,
/// where a hash map would write it at a random place in a table of all of them and move
/// them all at each doubling, memory no cache holds in a long history. A key out of
/// order is put in its place.
pub struct TsMap<T>(VecDeque<UnderTs<T>>);

impl<T> Default for TsMap<T> {
    fn default() -> Self {
        TsMap(VecDeque::new())
    }
}

impl<T> TsMap<T> {
    pub fn get(&self, ts: &Ts) -> Option<&T> {
        search(&self.0, ts).ok().map(|i| &self.0[i].value)
    }

    pub fn get_mut(&mut self, ts: &Ts) -> Option<&mut T> {
        search(&self.0, ts).ok().map(|i| &mut self.0[i].value)
    }

    /// The value under `ts`, made with `make` when missing.
    pub fn get_or_insert_with(&mut self, ts: &Ts, make: impl FnOnce() -> T) -> &mut T {
        let i = match search(&self.0, ts) {
            Ok(found) => found,
            Err(place) => {
                self.0.insert(place, UnderTs { hint: ts.order_hint(), ts: ts.clone(), value: make() });
                place
            }
        };
        &mut self.0[i].value
    }

    pub fn remove(&mut self, ts: &Ts) -> Option<T> {
        search(&self.0, ts).ok().and_then(|i| self.0.remove(i)).map(|entry| entry.value)
    }

    /// Keeps the values `keep` says to keep (it may change them first).
    pub fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        self.0.retain_mut(|entry| keep(&mut entry.value));
    }

    pub fn reserve(&mut self, more: usize) {
        self.0.reserve(more);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Binary search of `entries[lo..hi]` for `ts`, as `slice::binary_search` answers.
fn bisect<E: ByTsEntry>(
    entries: &VecDeque<E>,
    ts: &Ts,
    hint: u64,
    mut lo: usize,
    mut hi: usize,
) -> Result<usize, usize> {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match entries[mid].cmp_ts(ts, hint) {
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
pub fn search<E: ByTsEntry>(entries: &VecDeque<E>, ts: &Ts) -> Result<usize, usize> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let hint = ts.order_hint();
    // Every index below `lo` holds an earlier ts, every one from `hi` on a later one.
    let (mut lo, mut hi, mut step) = (0, entries.len(), 1);
    while hi > 0 {
        let probe = hi.saturating_sub(step);
        match entries[probe].cmp_ts(ts, hint) {
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
fn guess_then_bisect<E: ByTsEntry>(entries: &VecDeque<E>, ts: &Ts, hint: u64, hi: usize) -> Result<usize, usize> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match entries[0].cmp_ts(ts, hint) {
        Greater => return Err(0),
        Equal => return Ok(0),
        Less => {}
    }
    // Entries `below` and `above` bracket it: earlier and later.
    let (mut below, mut above) = (0, hi);
    for _ in 0..GUESSES {
        let (Some(asked), Some(low), Some(high)) =
            (ts.approximate(), entries[below].approximate(), entries[above].approximate())
        else {
            break;
        };
        if above - below <= 2 || high <= low {
            break;
        }
        let share = ((asked - low) / (high - low)).clamp(0.0, 1.0);
        let guess = (below + 1 + (share * (above - below - 1) as f64) as usize).min(above - 1);
        match entries[guess].cmp_ts(ts, hint) {
            Less => below = guess,
            Greater => above = guess,
            Equal => return Ok(guess),
        }
    }
    bisect(entries, ts, hint, below + 1, above)
}
