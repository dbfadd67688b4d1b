//! Slack request signatures: `v0=` HMAC-SHA256 over `v0:{timestamp}:{raw body}`,
//! checked on the raw bytes before anything is parsed, within ±300 s of now, in
//! constant time. Errors never carry the expected signature.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

use crate::domain::Timestamp;

/// How far a request's timestamp may be from now (replay protection).
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 300;

/// The app's signing secret. Never printed.
#[derive(Clone)]
pub struct SigningSecret(Vec<u8>);

impl SigningSecret {
    pub fn new(secret: impl Into<String>) -> Self {
        SigningSecret(secret.into().into_bytes())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn mac(&self, timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(b"v0:");
        mac.update(timestamp.as_bytes());
        mac.update(b":");
        mac.update(body);
        mac
    }

    /// The `X-Slack-Signature` value for a request (for tests and fake clients).
    pub fn sign(&self, timestamp: &str, body: &[u8]) -> String {
        format!("v0={}", hex::encode(self.mac(timestamp, body).finalize().into_bytes()))
    }

    /// Checks a request's `X-Slack-Request-Timestamp` and `X-Slack-Signature`.
    pub fn verify(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: Timestamp,
    ) -> Result<(), SignatureError> {
        self.verify_scheme(&SLACK, timestamp, signature, body, now)
    }

    /// Checks a request signed the way Slack signs, under other header names (the
    /// Discord relay uses the same scheme).
    pub fn verify_scheme(
        &self,
        scheme: &Scheme,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: Timestamp,
    ) -> Result<(), SignatureError> {
        if self.0.is_empty() {
            return Err(SignatureError::NoSecret(scheme.secret_setting));
        }
        let timestamp = timestamp.ok_or(SignatureError::Missing(scheme.timestamp_header))?;
        let signature = signature.ok_or(SignatureError::Missing(scheme.signature_header))?;
        let seconds: i64 = timestamp.trim().parse().map_err(|_| SignatureError::BadTimestamp)?;
        let skew = (now.as_micros() / Timestamp::MICROS_PER_SECOND).checked_sub(seconds);
        match skew {
            Some(skew) if skew.abs() <= MAX_CLOCK_SKEW_SECONDS => {}
            Some(skew) => return Err(SignatureError::Stale { skew_seconds: skew }),
            None => return Err(SignatureError::BadTimestamp),
        }
        let hex_part = signature.strip_prefix("v0=").ok_or(SignatureError::BadFormat)?;
        let given = hex::decode(hex_part).map_err(|_| SignatureError::BadFormat)?;
        self.mac(timestamp, body).verify_slice(&given).map_err(|_| SignatureError::Mismatch)
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(..)")
    }
}

/// Where a `v0=` HMAC signature travels, and the setting that holds its secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheme {
    pub timestamp_header: &'static str,
    pub signature_header: &'static str,
    pub secret_setting: &'static str,
}

pub const SLACK: Scheme = Scheme {
    timestamp_header: "X-Slack-Request-Timestamp",
    signature_header: "X-Slack-Signature",
    secret_setting: "SLACK_SIGNING_SECRET",
};

/// Why a request was refused (answered 401). Says what was wrong, never what was expected.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SignatureError {
    #[error("no signing secret is configured ({0})")]
    NoSecret(&'static str),
    #[error("the {0} header is missing")]
    Missing(&'static str),
    #[error("the request timestamp is not a number")]
    BadTimestamp,
    #[error("the request timestamp is {skew_seconds} s away from now (more than 300 s)")]
    Stale { skew_seconds: i64 },
    #[error("the signature is not of the form v0=<hex>")]
    BadFormat,
    #[error("the signature does not match the body")]
    Mismatch,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slack's published example ("Verifying requests from Slack").
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TIMESTAMP: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn at(secs: i64) -> Timestamp {
        Timestamp(secs * Timestamp::MICROS_PER_SECOND)
    }

    fn check(timestamp: Option<&str>, signature: Option<&str>, body: &str, now: i64) -> Result<(), SignatureError> {
        SigningSecret::new(SECRET).verify(timestamp, signature, body.as_bytes(), at(now))
    }

    #[test]
    fn slacks_published_example_verifies() {
        assert_eq!(check(Some(TIMESTAMP), Some(SIGNATURE), BODY, 1_531_420_618), Ok(()));
        assert_eq!(SigningSecret::new(SECRET).sign(TIMESTAMP, BODY.as_bytes()), SIGNATURE);
    }

    #[test]
    fn the_clock_window_is_300_seconds_either_way() {
        assert_eq!(check(Some(TIMESTAMP), Some(SIGNATURE), BODY, 1_531_420_618 + 300), Ok(()));
        assert_eq!(check(Some(TIMESTAMP), Some(SIGNATURE), BODY, 1_531_420_618 - 300), Ok(()));
        assert_eq!(
            check(Some(TIMESTAMP), Some(SIGNATURE), BODY, 1_531_420_618 + 301),
            Err(SignatureError::Stale { skew_seconds: 301 })
        );
        assert!(matches!(
            check(Some(TIMESTAMP), Some(SIGNATURE), BODY, 1_531_420_618 - 301),
            Err(SignatureError::Stale { .. })
        ));
    }

    #[test]
    fn anything_else_is_refused_without_revealing_the_expected_signature() {
        let now = 1_531_420_618;
        let tampered = BODY.replace("roadrunner", "coyote");
        let cases = [
            (check(Some(TIMESTAMP), Some(SIGNATURE), &tampered, now), SignatureError::Mismatch),
            (check(Some("1531420619"), Some(SIGNATURE), BODY, now), SignatureError::Mismatch),
            (check(None, Some(SIGNATURE), BODY, now), SignatureError::Missing("X-Slack-Request-Timestamp")),
            (check(Some(TIMESTAMP), None, BODY, now), SignatureError::Missing("X-Slack-Signature")),
            (check(Some("soon"), Some(SIGNATURE), BODY, now), SignatureError::BadTimestamp),
            (check(Some("-9223372036854775808"), Some(SIGNATURE), BODY, now), SignatureError::BadTimestamp),
            (check(Some(TIMESTAMP), Some(&SIGNATURE[3..]), BODY, now), SignatureError::BadFormat),
            (check(Some(TIMESTAMP), Some("v0=zz"), BODY, now), SignatureError::BadFormat),
            (check(Some(TIMESTAMP), Some("v0=a2114d57"), BODY, now), SignatureError::Mismatch),
        ];
        for (result, expected) in cases {
            let error = result.unwrap_err();
            assert_eq!(error, expected);
            let text = format!("{error} {error:?}");
            assert!(!text.contains("a2114d57b48eac39"), "{text}");
        }
        let other =
            SigningSecret::new("another secret").verify(Some(TIMESTAMP), Some(SIGNATURE), BODY.as_bytes(), at(now));
        assert_eq!(other, Err(SignatureError::Mismatch));
        let none = SigningSecret::new("").verify(Some(TIMESTAMP), Some(SIGNATURE), BODY.as_bytes(), at(now));
        assert_eq!(none, Err(SignatureError::NoSecret("SLACK_SIGNING_SECRET")));
        assert_eq!(format!("{:?}", SigningSecret::new(SECRET)), "SigningSecret(..)");
    }
}
