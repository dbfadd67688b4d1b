//! Discord interaction signatures: Ed25519 over `timestamp + raw body`, with the
//! application's public key (`DISCORD_PUBLIC_KEY`, hex). Checked on the raw bytes
//! before anything is parsed; Discord probes the endpoint with bad signatures and
//! expects 401. `verify_strict` refuses the malleable and small-order forms.

use std::fmt;

use ed25519_dalek::{Signature, VerifyingKey};
use thiserror::Error;

/// The application's public key, parsed once at start-up.
#[derive(Clone)]
pub struct DiscordPublicKey(VerifyingKey);

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PublicKeyError {
    #[error("DISCORD_PUBLIC_KEY is not 64 hex digits")]
    NotHex,
    #[error("DISCORD_PUBLIC_KEY is not a valid Ed25519 public key")]
    Invalid,
}

/// Why an interaction was refused (401). Never holds anything secret or expected.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum InteractionSignatureError {
    #[error("the {0} header is missing")]
    Missing(&'static str),
    #[error("the signature is not 128 hex digits")]
    BadFormat,
    #[error("the signature does not match the body")]
    Mismatch,
}

impl DiscordPublicKey {
    pub fn from_hex(hex_key: &str) -> Result<Self, PublicKeyError> {
        let bytes: [u8; 32] =
            hex::decode(hex_key.trim()).ok().and_then(|b| b.try_into().ok()).ok_or(PublicKeyError::NotHex)?;
        VerifyingKey::from_bytes(&bytes).map(DiscordPublicKey).map_err(|_| PublicKeyError::Invalid)
    }

    /// Checks `X-Signature-Ed25519` and `X-Signature-Timestamp` against the raw body.
    pub fn verify(
        &self,
        signature: Option<&str>,
        timestamp: Option<&str>,
        body: &[u8],
    ) -> Result<(), InteractionSignatureError> {
        let signature = signature.ok_or(InteractionSignatureError::Missing("X-Signature-Ed25519"))?;
        let timestamp = timestamp.ok_or(InteractionSignatureError::Missing("X-Signature-Timestamp"))?;
        let bytes: [u8; 64] = hex::decode(signature.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(InteractionSignatureError::BadFormat)?;
        let mut message = Vec::with_capacity(timestamp.len() + body.len());
        message.extend_from_slice(timestamp.as_bytes());
        message.extend_from_slice(body);
        self.0.verify_strict(&message, &Signature::from_bytes(&bytes)).map_err(|_| InteractionSignatureError::Mismatch)
    }
}

impl fmt::Debug for DiscordPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DiscordPublicKey({})", hex::encode(self.0.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signer, SigningKey};

    use super::*;

    /// RFC 8032 §7.1, TEST 2 (one-byte message) and TEST 3 (two bytes).
    const TEST2_PUBLIC: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
    const TEST2_SIGNATURE: &str = "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00";
    const TEST3_PUBLIC: &str = "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025";
    const TEST3_SIGNATURE: &str = "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a";

    #[test]
    fn rfc_8032_vectors_verify_as_timestamp_plus_body() {
        // The signed message is timestamp ‖ body: split TEST 2's one byte (0x72) as an
        // empty timestamp and a one-byte body, and TEST 3's two bytes (0xaf82) across both.
        let key = DiscordPublicKey::from_hex(TEST2_PUBLIC).unwrap();
        assert_eq!(key.verify(Some(TEST2_SIGNATURE), Some(""), &[0x72]), Ok(()));
        assert_eq!(key.verify(Some(TEST2_SIGNATURE), Some(""), &[0x73]), Err(InteractionSignatureError::Mismatch));
        let key = DiscordPublicKey::from_hex(TEST3_PUBLIC).unwrap();
        assert_eq!(key.verify(Some(TEST3_SIGNATURE), Some(""), &[0xaf, 0x82]), Ok(()));
        assert_eq!(
            key.verify(Some(TEST2_SIGNATURE), Some(""), &[0xaf, 0x82]),
            Err(InteractionSignatureError::Mismatch)
        );
    }

    /// The PING below signed with the key from seed `[7; 32]`.
    const PING_SIGNATURE: &str = "bc6c632ce8be766f4da8fa08739a0bf977ae3386ee604b85ad8d169601f5df00c79ac751a12a102db7f50d9c726908170ac96ece530269b33ceff69d4aa28609";

    #[test]
    fn a_ping_signed_by_the_application_verifies_and_anything_else_is_refused() {
        let signing = SigningKey::from_bytes(&[7u8; 32]);
        let key = DiscordPublicKey::from_hex(&hex::encode(signing.verifying_key().as_bytes())).unwrap();
        let body = br#"{"type":1,"id":"1","application_id":"2","token":"t","version":1}"#;
        let timestamp = "1700000000";
        let mut signed = timestamp.as_bytes().to_vec();
        signed.extend_from_slice(body);
        let signature = hex::encode(signing.sign(&signed).to_bytes());
        assert_eq!(signature, PING_SIGNATURE, "Ed25519 signatures are deterministic: a fixed vector");
        assert_eq!(key.verify(Some(PING_SIGNATURE), Some(timestamp), body), Ok(()));

        let tampered = br#"{"type":2,"id":"1","application_id":"2","token":"t","version":1}"#;
        assert_eq!(key.verify(Some(&signature), Some(timestamp), tampered), Err(InteractionSignatureError::Mismatch));
        assert_eq!(key.verify(Some(&signature), Some("1700000001"), body), Err(InteractionSignatureError::Mismatch));
        assert_eq!(
            key.verify(None, Some(timestamp), body),
            Err(InteractionSignatureError::Missing("X-Signature-Ed25519"))
        );
        assert_eq!(
            key.verify(Some(&signature), None, body),
            Err(InteractionSignatureError::Missing("X-Signature-Timestamp"))
        );
        assert_eq!(key.verify(Some("zz"), Some(timestamp), body), Err(InteractionSignatureError::BadFormat));
        assert_eq!(
            key.verify(Some(&signature[..64]), Some(timestamp), body),
            Err(InteractionSignatureError::BadFormat)
        );
        let other = SigningKey::from_bytes(&[8u8; 32]);
        let forged = hex::encode(other.sign(&signed).to_bytes());
        assert_eq!(key.verify(Some(&forged), Some(timestamp), body), Err(InteractionSignatureError::Mismatch));
    }

    #[test]
    fn bad_public_keys_are_named() {
        assert_eq!(DiscordPublicKey::from_hex("abc").unwrap_err(), PublicKeyError::NotHex);
        assert_eq!(DiscordPublicKey::from_hex(&"zz".repeat(32)).unwrap_err(), PublicKeyError::NotHex);
        assert!(DiscordPublicKey::from_hex(TEST2_PUBLIC).is_ok());
    }
}
