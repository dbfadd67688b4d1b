//! One retry policy for the HTTP clients (Slack, the LLM providers): how many
//! attempts, how long to wait between them (the server's `Retry-After`, else a
//! doubling backoff) and the longest wait, which the time budget (`budget.rs`) counts.

use std::time::Duration;

/// What to do when the wait asked for (or the backoff) is longer than `max_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongerWait {
    /// Wait `max_wait` and try again (the model: a shorter wait may still pass).
    Cut,
    /// Stop now (the chat API: it would refuse an earlier retry, so the job fails and
    /// the queue brings it back after the wait).
    GiveUp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The wait when the server names none; it doubles after each retry.
    pub backoff: Duration,
    pub max_wait: Duration,
    pub longer_wait: LongerWait,
    /// The most one call may take in all, its attempts and waits (the time budget's
    /// share for it), and the longest one attempt may take: another attempt is made
    /// only when it would still end within the call's share. `None`: attempts alone
    /// bound the call.
    pub within: Option<(Duration, Duration)>,
}

impl RetryPolicy {
    /// The wait before trying again after attempt `failed` (0 for the first) failed,
    /// with the server's `Retry-After` if it gave one; `None` when it is time to stop.
    pub fn wait_after(&self, failed: u32, asked: Option<Duration>) -> Option<Duration> {
        self.wait_after_elapsed(failed, asked, Duration::ZERO)
    }

    /// Like [`RetryPolicy::wait_after`], `elapsed` into the call: with a call share
    /// ([`RetryPolicy::within`]), no wait whose next attempt could end after it.
    pub fn wait_after_elapsed(&self, failed: u32, asked: Option<Duration>, elapsed: Duration) -> Option<Duration> {
        let wait = self.wait_ignoring_share(failed, asked)?;
        match self.within {
            Some((share, attempt)) if elapsed + wait + attempt > share => None,
            _ => Some(wait),
        }
    }

    fn wait_ignoring_share(&self, failed: u32, asked: Option<Duration>) -> Option<Duration> {
        if failed + 1 >= self.attempts {
            return None;
        }
        let wait = asked.unwrap_or(self.backoff.saturating_mul(2u32.saturating_pow(failed)));
        match self.longer_wait {
            _ if wait <= self.max_wait => Some(wait),
            LongerWait::Cut => Some(self.max_wait),
            LongerWait::GiveUp => None,
        }
    }
}

impl RetryPolicy {
    /// The chat platforms' policy (Slack, Discord): every 429 is waited out as asked
    /// (a second after one without a wait) while the next attempt still fits the chat
    /// call's share of the time budget (`budget.rs`: two attempts and a wait of up to
    /// `CHAT_TIMEOUT_SECONDS`), so a run of short limits is ridden out in seconds; a
    /// wait that does not fit fails the job, and its queue delivers it again after it.
    pub fn chat(call_timeout: Duration) -> RetryPolicy {
        RetryPolicy {
            attempts: crate::budget::CHAT_MAX_ATTEMPTS,
            backoff: Duration::from_secs(1),
            max_wait: crate::budget::chat_retry_wait_cap(call_timeout),
            longer_wait: LongerWait::GiveUp,
            within: Some((crate::budget::chat_call(call_timeout), call_timeout)),
        }
    }
}

/// An HTTP client whose every call gives up after `timeout`.
pub fn http_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).build().expect("a reqwest client builds")
}

/// A `Retry-After` given in seconds (the form Slack and the model providers send).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_cut_policy_doubles_its_backoff_up_to_the_cap_and_stops_after_its_attempts() {
        let policy = RetryPolicy {
            attempts: 4,
            backoff: SECOND,
            max_wait: 3 * SECOND,
            longer_wait: LongerWait::Cut,
            within: None,
        };
        assert_eq!(policy.wait_after(0, None), Some(SECOND));
        assert_eq!(policy.wait_after(1, None), Some(2 * SECOND));
        assert_eq!(policy.wait_after(2, None), Some(3 * SECOND), "4 s cut to the cap");
        assert_eq!(policy.wait_after(3, None), None, "four attempts made");
        assert_eq!(policy.wait_after(0, Some(60 * SECOND)), Some(3 * SECOND), "a long Retry-After is cut too");
        assert_eq!(policy.wait_after(1, Some(Duration::ZERO)), Some(Duration::ZERO), "the server's wait wins");
    }

    #[test]
    fn a_give_up_policy_waits_as_asked_within_the_cap_or_not_at_all() {
        let policy = RetryPolicy {
            attempts: 2,
            backoff: SECOND,
            max_wait: 10 * SECOND,
            longer_wait: LongerWait::GiveUp,
            within: None,
        };
        assert_eq!(policy.wait_after(0, Some(10 * SECOND)), Some(10 * SECOND));
        assert_eq!(policy.wait_after(0, Some(11 * SECOND)), None);
        assert_eq!(policy.wait_after(0, None), Some(SECOND));
        assert_eq!(policy.wait_after(1, Some(SECOND)), None, "both attempts made");
    }

    #[test]
    fn the_chat_policy_waits_out_every_429_while_the_next_attempt_fits_the_calls_share() {
        let policy = RetryPolicy::chat(10 * SECOND);
        // Two attempts of 10 s and a wait of up to 10 s between them: 30 s in all.
        assert_eq!(policy.within, Some((30 * SECOND, 10 * SECOND)));
        for failed in 0..5 {
            let elapsed = SECOND * failed;
            assert_eq!(policy.wait_after_elapsed(failed, Some(SECOND), elapsed), Some(SECOND), "the {failed}th 429");
        }
        assert_eq!(policy.wait_after_elapsed(1, Some(10 * SECOND), 10 * SECOND), Some(10 * SECOND));
        assert_eq!(policy.wait_after_elapsed(1, Some(10 * SECOND), 11 * SECOND), None, "its attempt could end late");
        assert_eq!(policy.wait_after_elapsed(0, Some(11 * SECOND), Duration::ZERO), None, "longer than the cap");
        let never_waits = Some(Duration::ZERO);
        assert_eq!(policy.wait_after_elapsed(crate::budget::CHAT_MAX_ATTEMPTS - 1, never_waits, SECOND), None);
    }

    #[test]
    fn retry_after_reads_whole_seconds_only() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(reqwest::header::RETRY_AFTER, " 7 ".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(7 * SECOND));
        headers.insert(reqwest::header::RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }
}
