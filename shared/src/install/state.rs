//! The `state` of an install in progress: made by `/slack/install`, signed with
//! `SLACK_STATE_SECRET` (HMAC-SHA256), set in a cookie of the browser that asked, and
//! checked when Slack sends that browser back: the cookie must hold the same state, its
//! signature must be this deployment's, and it must be younger than [`STATE_LASTS`].
//! That it is used once is the flow's part (a ledger claim on its nonce).

use std::time::Duration;

use hmac::{Hmac, Mac};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::Sha256;

use crate::domain::Timestamp;

/// How long an install may take between `/slack/install` and Slack's redirect back.
pub const STATE_LASTS: Duration = Duration::from_secs(600);

/// Why a redirect's state was refused (the page says it; nothing of it is shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateRefusal {
    #[error("this browser did not start the install (its cookie is missing or holds another state)")]
    OtherBrowser,
    #[error("the install's state is not one this deployment made")]
    NotOurs,
    #[error("the install took longer than 10 minutes")]
    Expired,
}

/// Signs and checks states with one secret.
pub struct StateSigner {
    secret: Vec<u8>,
}

impl StateSigner {
    pub fn new(secret: &str) -> Self {
        StateSigner { secret: secret.as_bytes().to_vec() }
    }

    fn mac(&self, signed: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes keys of any length");
        mac.update(b"kuuki-oauth-state:");
        mac.update(signed.as_bytes());
        mac
    }

    /// A new state, made at `now`: `<nonce>.<seconds>.<signature>` (URL- and cookie-safe).
    pub fn issue(&self, now: Timestamp) -> String {
        let mut nonce = [0u8; 16];
        SystemRandom::new().fill(&mut nonce).expect("the system's random source works");
        let signed = format!("{}.{}", hex::encode(nonce), now.as_micros() / Timestamp::MICROS_PER_SECOND);
        let signature = hex::encode(self.mac(&signed).finalize().into_bytes());
        format!("{signed}.{signature}")
    }

    /// The nonce of `state` if this browser (its `cookie`) started the install, this
    /// deployment signed it and it is still young at `now`.
    pub fn check<'s>(&self, state: &'s str, cookie: Option<&str>, now: Timestamp) -> Result<&'s str, StateRefusal> {
        let same = cookie.is_some_and(|cookie| {
            cookie.len() == state.len() && cookie.bytes().zip(state.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
        });
        if !same {
            return Err(StateRefusal::OtherBrowser);
        }
        let (signed, signature) = state.rsplit_once('.').ok_or(StateRefusal::NotOurs)?;
        let given = hex::decode(signature).map_err(|_| StateRefusal::NotOurs)?;
        self.mac(signed).verify_slice(&given).map_err(|_| StateRefusal::NotOurs)?;
        let (nonce, seconds) = signed.split_once('.').ok_or(StateRefusal::NotOurs)?;
        let issued: i64 = seconds.parse().map_err(|_| StateRefusal::NotOurs)?;
        let age = now.as_micros() / Timestamp::MICROS_PER_SECOND - issued;
        // A state from the future is a clock that moved back; a little is let through.
        if age > STATE_LASTS.as_secs() as i64 || age < -60 {
            return Err(StateRefusal::Expired);
        }
        Ok(nonce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp(1_800_000_000 * 1_000_000);

    #[test]
    fn a_state_is_good_for_the_browser_that_got_it_for_ten_minutes() {
        let signer = StateSigner::new("a-state-secret-of-thirty-two-chars!");
        let state = signer.issue(T0);
        assert_ne!(signer.issue(T0), state, "a fresh nonce each time");
        let nonce = signer.check(&state, Some(&state), T0 + Duration::from_secs(599)).expect("good");
        assert!(state.starts_with(nonce) && nonce.len() == 32);

        assert_eq!(signer.check(&state, None, T0), Err(StateRefusal::OtherBrowser));
        let other = signer.issue(T0);
        assert_eq!(signer.check(&state, Some(&other), T0), Err(StateRefusal::OtherBrowser));
        assert_eq!(signer.check(&state, Some(&state), T0 + Duration::from_secs(601)), Err(StateRefusal::Expired));
        let theirs = StateSigner::new("another-secret-of-thirty-two-chars!!").issue(T0);
        assert_eq!(signer.check(&theirs, Some(&theirs), T0), Err(StateRefusal::NotOurs));
        // The time moved on by hand, the signature kept: refused.
        let (nonce, rest) = state.split_once('.').unwrap();
        let (_, signature) = rest.split_once('.').unwrap();
        let later = format!("{nonce}.{}.{signature}", 1_800_000_000 + 3600);
        assert_eq!(signer.check(&later, Some(&later), T0 + Duration::from_secs(3600)), Err(StateRefusal::NotOurs));
        for junk in ["", "x", "a.b", "a.b.c"] {
            assert_eq!(signer.check(junk, Some(junk), T0), Err(StateRefusal::NotOurs), "{junk:?}");
        }
    }
}
