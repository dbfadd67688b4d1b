use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::Timestamp;

/// A platform message id that orders by time: Slack's `"1712345678.123456"` or a
/// Discord snowflake. Compared numerically, so `"9.5" < "10.1"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ts(pub String);

impl Ts {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The Slack-style ts of a moment: seconds, a dot, six digits of microseconds.
    pub fn from_timestamp(at: Timestamp) -> Ts {
        let micros = at.as_micros();
        Ts(format!(
            "{}.{:06}",
            micros.div_euclid(Timestamp::MICROS_PER_SECOND),
            micros.rem_euclid(Timestamp::MICROS_PER_SECOND)
        ))
    }

    fn parts(&self) -> (&str, &str) {
        let s = self.0.as_str();
        match s.split_once('.') {
            Some((int, frac)) => (int.trim_start_matches('0'), frac),
            None => (s.trim_start_matches('0'), ""),
        }
    }
}

impl Ord for Ts {
    fn cmp(&self, other: &Self) -> Ordering {
        let (ai, af) = self.parts();
        let (bi, bf) = other.parts();
        ai.len()
            .cmp(&bi.len())
            .then_with(|| ai.cmp(bi))
            .then_with(|| {
                // Fractions compare digit by digit, missing digits counting as 0.
                let (mut a, mut b) = (af.bytes(), bf.bytes());
                loop {
                    match (a.next(), b.next()) {
                        (None, None) => return Ordering::Equal,
                        (x, y) => {
                            let (x, y) = (x.unwrap_or(b'0'), y.unwrap_or(b'0'));
                            if x != y {
                                return x.cmp(&y);
                            }
                        }
                    }
                }
            })
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Ts {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Ts {
        Ts(s.to_owned())
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
    }

    #[test]
    fn from_timestamp_is_slack_shaped() {
        assert_eq!(Ts::from_timestamp(Timestamp(1_712_345_678_000_042)).as_str(), "1712345678.000042");
    }
}
