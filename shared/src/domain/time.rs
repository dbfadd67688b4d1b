use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A point in time: microseconds since the Unix epoch. Every clock reading and every
/// stored time is one of these, so the virtual clock and the system clock agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const MICROS_PER_SECOND: i64 = 1_000_000;

    pub fn from_secs_f64(secs: f64) -> Self {
        Timestamp((secs * Self::MICROS_PER_SECOND as f64).round() as i64)
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / Self::MICROS_PER_SECOND as f64
    }

    pub fn as_micros(self) -> i64 {
        self.0
    }

    /// Seconds from `earlier` to `self` (negative when `earlier` is later).
    pub fn seconds_since(self, earlier: Timestamp) -> f64 {
        (self.0 - earlier.0) as f64 / Self::MICROS_PER_SECOND as f64
    }

    /// The wait from `now` until `self` in whole seconds, rounded up (0 when past): a
    /// queue's delays are whole seconds, and a job back a moment early would only wait
    /// again.
    pub fn whole_seconds_after(self, now: Timestamp) -> u64 {
        self.seconds_since(now).max(0.0).ceil() as u64
    }

    /// A UTC date and time for prompts and reports, `2026-01-05 09:00:00 UTC`.
    pub fn to_utc_string(self) -> String {
        let secs = self.0.div_euclid(Self::MICROS_PER_SECOND);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, rhs: Duration) -> Timestamp {
        Timestamp(self.0 + rhs.as_micros() as i64)
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, rhs: Duration) -> Timestamp {
        Timestamp(self.0 - rhs.as_micros() as i64)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_utc_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(Timestamp(0).to_utc_string(), "1970-01-01 00:00:00 UTC");
        // 2026-01-05 09:00:00 UTC
        assert_eq!(Timestamp(1_767_603_600 * 1_000_000).to_utc_string(), "2026-01-05 09:00:00 UTC");
        assert_eq!(Timestamp(951_782_400 * 1_000_000).to_utc_string(), "2000-02-29 00:00:00 UTC");
    }
}
