use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Timestamp;

/// A platform message id that orders by time: Slack's `"1712345678.123456"` or a
/// Discord snowflake. Compared numerically, so `"9.5" < "10.1"`. The numeric key is
/// computed once: stores compare ts constantly. The text is kept inline (a Slack ts has
/// 17 characters, a snowflake up to 20; longer text is shared), so a clone (every
/// stored message, event and index entry holds one) is a copy: no allocation, and no
/// shared count to update in memory the first holder wrote, maybe long ago.
#[derive(Clone)]
pub struct Ts {
    raw: smol_str::SmolStr,
    /// (integer part, fraction scaled to nanos) when the ts is a number.
    key: Option<(u64, u32)>,
}

/// Digits of the fraction that take part in the numeric key (nanoseconds).
const FRACTION_DIGITS: usize = 9;

/// A text from a request that was to be a Slack ts and is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a Slack timestamp (digits, a dot, digits)")]
pub struct NotASlackTs(pub String);

impl Ts {
    pub fn new(raw: impl AsRef<str>) -> Ts {
        let raw = raw.as_ref();
        Ts { raw: smol_str::SmolStr::new(raw), key: numeric_key(raw) }
    }

    /// A Slack ts from an untrusted request, like `"1712345678.123456"`: digits, a dot,
    /// digits. Anything else would be stored and sort after every real message.
    pub fn parse_slack(raw: &str) -> Result<Ts, NotASlackTs> {
        let all_digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        let well_formed = raw.split_once('.').is_some_and(|(int, frac)| all_digits(int) && all_digits(frac));
        let ts = Ts::new(raw);
        // The key is missing when the integer part overflows.
        if well_formed && ts.key.is_some() { Ok(ts) } else { Err(NotASlackTs(raw.to_owned())) }
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The ts as one number that grows with it (Slack's seconds, a Discord snowflake),
    /// near enough to guess where it falls among others; `None` when it is no number.
    pub fn approximate(&self) -> Option<f64> {
        self.key.map(|(int, nanos)| int as f64 + nanos as f64 / 1e9)
    }

    /// A number that never orders two ts the other way round (the bits of
    /// [`Ts::approximate`], a non-negative float, or the largest for a ts that is no
    /// number): an index can compare these in its own memory and read a ts only when
    /// two are equal.
    pub fn order_hint(&self) -> u64 {
        self.approximate().map_or(u64::MAX, f64::to_bits)
    }

    /// A text key that sorts like the ts does (for stores that sort text, like a
    /// DynamoDB sort key): zero-padded integer and fraction.
    pub fn sort_key(&self) -> String {
        match self.key {
            Some((int, frac)) => format!("{int:020}.{frac:09}"),
            None => format!("~{}", self.raw),
        }
    }

    /// The Slack-style ts of a moment: seconds, a dot, six digits of microseconds.
    pub fn from_timestamp(at: Timestamp) -> Ts {
        let micros = at.as_micros();
        let (secs, frac) =
            (micros.div_euclid(Timestamp::MICROS_PER_SECOND), micros.rem_euclid(Timestamp::MICROS_PER_SECOND));
        // Written on the stack, then kept inline (no allocation). Every
        // message minted in replay and serve comes here, so no formatter is run and
        // the key is not parsed back from the text.
        let mut digits = itoa::Buffer::new();
        let secs_text = digits.format(secs);
        let mut text = [0u8; 40];
        let dot = secs_text.len();
        text[..dot].copy_from_slice(secs_text.as_bytes());
        text[dot] = b'.';
        // The six digits of the fraction, zero-padded, last first.
        let mut rest = frac;
        for digit in text[dot + 1..dot + 7].iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        let raw = std::str::from_utf8(&text[..dot + 7]).expect("digits");
        // Scaled from micros to the key's nanos; a time before 1970 has no numeric key.
        let key = u64::try_from(secs).ok().map(|secs| (secs, frac as u32 * 1_000));
        debug_assert_eq!(key, numeric_key(raw), "{raw}");
        Ts { raw: smol_str::SmolStr::new(raw), key }
    }
}

/// Discord's epoch (2015-01-01) in milliseconds: a snowflake's top 42 bits count from it.
pub const DISCORD_EPOCH_MS: i64 = 1_420_070_400_000;

impl Ts {
    /// When the message with this id was posted: a Slack ts is its time; a Discord
    /// snowflake (digits only) carries it in its top 42 bits. `None` for anything else.
    pub fn posted_at(&self) -> Option<Timestamp> {
        let (int, nanos) = self.key?;
        if self.raw.contains('.') {
            let micros = i64::try_from(int).ok()?.checked_mul(1_000_000)?.checked_add(i64::from(nanos / 1000))?;
            Some(Timestamp(micros))
        } else {
            let ms = i64::try_from(int >> 22).ok()?.checked_add(DISCORD_EPOCH_MS)?;
            Some(Timestamp(ms.checked_mul(1000)?))
        }
    }
}

fn numeric_key(raw: &str) -> Option<(u64, u32)> {
    let (int, frac) = raw.split_once('.').unwrap_or((raw, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let int: u64 = int.parse().ok()?;
    // Nine digits: under 10^9, within a u32.
    let mut scaled = 0u32;
    let mut digits = frac.bytes();
    for _ in 0..FRACTION_DIGITS {
        scaled = scaled * 10 + digits.next().map_or(0, |b| u32::from(b - b'0'));
    }
    Some((int, scaled))
}

impl PartialEq for Ts {
    fn eq(&self, other: &Self) -> bool {
        // Different numbers differ without looking at the text.
        self.key == other.key && self.raw == other.raw
    }
}

impl Eq for Ts {}

impl Hash for Ts {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Equal ts have equal keys (the key is the text's); the key hashes quicker.
        match self.key {
            Some(key) => key.hash(state),
            None => self.raw.as_str().hash(state),
        }
    }
}

impl Ord for Ts {
    fn cmp(&self, other: &Self) -> Ordering {
        // Numbers before anything else; equal values tie-break on the text, so the
        // order stays total and agrees with equality.
        match (self.key, other.key) {
            (Some(a), Some(b)) => a.cmp(&b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
        .then_with(|| self.raw.cmp(&other.raw))
    }
}

impl PartialOrd for Ts {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl fmt::Debug for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ts({:?})", self.raw)
    }
}

impl Serialize for Ts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.raw)
    }
}

impl<'de> Deserialize<'de> for Ts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Ts::new)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_message_id_tells_when_it_was_posted() {
        let slack = Ts::new("1712345678.000123");
        assert_eq!(slack.posted_at(), Some(Timestamp(1_712_345_678_000_123)));
        assert_eq!(Ts::from_timestamp(Timestamp(42_000_007)).posted_at(), Some(Timestamp(42_000_007)));
        // Discord's documented example: 175928847299117063 was made 2016-04-30 11:18:25.796 UTC.
        let discord = Ts::new("175928847299117063");
        assert_eq!(discord.posted_at(), Some(Timestamp(1_462_015_105_796_000)));
        assert_eq!(Ts::new("not a ts").posted_at(), None);
    }

    use super::*;

    fn ts(s: &str) -> Ts {
        Ts::new(s)
    }

    #[test]
    fn orders_numerically() {
        assert!(ts("9.5") < ts("10.1"));
        assert!(ts("1712345678.000001") < ts("1712345678.000010"));
        assert!(ts("1712345678.5") > ts("1712345678.000010"));
        assert!(ts("1154745788019408896") > ts("999999999999999999"));
        // Equal in value, still a total order: the text breaks the tie.
        assert_eq!(ts("5.10").cmp(&ts("5.1")), Ordering::Greater);
        assert_eq!(ts("5.1").cmp(&ts("5.1")), Ordering::Equal);
        assert!(ts("abc") > ts("99"), "non-numbers sort after numbers");
    }

    #[test]
    fn only_digits_a_dot_and_digits_parse_as_a_slack_ts() {
        assert_eq!(Ts::parse_slack("1712345678.123456"), Ok(ts("1712345678.123456")));
        assert_eq!(Ts::parse_slack("0.1"), Ok(ts("0.1")));
        for bad in
            ["abc", "-5.1", "", "1e9", "12", "12.", ".5", "1.2.3", " 1.2", "1.2 ", "+1.2", "99999999999999999999999.1"]
        {
            assert_eq!(Ts::parse_slack(bad), Err(NotASlackTs(bad.into())), "{bad:?}");
        }
        assert_eq!(NotASlackTs("abc".into()).to_string(), "\"abc\" is not a Slack timestamp (digits, a dot, digits)");
    }

    #[test]
    fn from_timestamp_is_slack_shaped() {
        assert_eq!(Ts::from_timestamp(Timestamp(1_712_345_678_000_042)).as_str(), "1712345678.000042");
        for (micros, text) in
            [(0, "0.000000"), (1_500_000, "1.500000"), (-1, "-1.999999"), (i64::MAX, "9223372036854.775807")]
        {
            let minted = Ts::from_timestamp(Timestamp(micros));
            assert_eq!(minted.as_str(), text);
            // The same ts, key and order as one read from the text.
            assert_eq!((&minted.raw, minted.key), (&Ts::new(text).raw, Ts::new(text).key), "{text}");
        }
    }

    /// An earlier ts never has the larger hint: integers near and past 2^53 (where a
    /// float no longer holds every integer), fractions near the next second, snowflakes,
    /// text.
    #[test]
    fn order_hints_never_disagree_with_the_order() {
        let mut rng = fastrand::Rng::with_seed(5);
        let mut texts: Vec<String> = vec!["not a ts".into(), "0".into(), "0.0".into(), u64::MAX.to_string()];
        for base in [0u64, 1_767_603_600, (1 << 52) - 3, (1 << 53) - 3, (1 << 60) - 3, u64::MAX - 5] {
            for _ in 0..40 {
                let int = base.saturating_add(rng.u64(0..6));
                let frac = match rng.u8(..4) {
                    0 => String::new(),
                    1 => ".999999999".into(),
                    2 => format!(".{:06}", rng.u32(0..1_000_000)),
                    _ => format!(".{}", rng.u32(0..10)),
                };
                texts.push(format!("{int}{frac}"));
            }
        }
        let tss: Vec<Ts> = texts.iter().map(|t| ts(t)).collect();
        for a in &tss {
            for b in &tss {
                if a < b {
                    assert!(a.order_hint() <= b.order_hint(), "{a:?} < {b:?} but their hints disagree");
                }
            }
        }
    }

    #[test]
    fn sort_keys_sort_like_the_ts() {
        let mut tss = vec![ts("10.1"), ts("9.5"), ts("1712345678.000010"), ts("1154745788019408896"), ts("9.50001")];
        let mut by_key = tss.clone();
        tss.sort();
        by_key.sort_by_key(|t| t.sort_key());
        assert_eq!(tss, by_key);
    }

    /// Text too long to keep inline (shared instead) reads, compares and hashes as
    /// text that fits does.
    #[test]
    fn a_long_ts_behaves_as_a_short_one() {
        use std::hash::BuildHasher;
        let hash = |t: &Ts| foldhash::quality::FixedState::with_seed(7).hash_one(t);
        let long = "12345678901234567890123456789.5";
        assert_eq!(ts(long).as_str(), long);
        assert_eq!(ts(long), ts(long));
        assert_eq!(hash(&ts(long)), hash(&ts(long)));
        assert!(ts(long) > ts("1712345678.000010") && ts(long) < ts("not a number"));
        let (short_text, long_text) = ("not a number", "not a number, and longer than fits inline");
        assert_ne!(ts(short_text), ts(long_text));
        assert_eq!(ts(long_text).clone(), ts(long_text));
        assert_eq!(hash(&ts(long_text)), hash(&ts(long_text).clone()));
        assert_eq!(ts(short_text).cmp(&ts(long_text)), Ordering::Less, "text order among non-numbers");
    }

    #[test]
    fn serializes_as_its_text() {
        assert_eq!(serde_json::to_string(&ts("1.5")).unwrap(), "\"1.5\"");
        let back: Ts = serde_json::from_str("\"10.25\"").unwrap();
        assert_eq!(back, ts("10.25"));
        assert!(back > ts("9.99"));
    }
}
