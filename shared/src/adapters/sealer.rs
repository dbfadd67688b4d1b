//! Tokens sealed with a key the operator gives (`TOKEN_ENCRYPTION_KEY`: AES-256-GCM, a
//! fresh random nonce per seal, the installation's key as associated data), so the data
//! file, its WAL and any copy of the tables hold no token in clear.

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use secrecy::{ExposeSecret, SecretString};

use crate::ports::{PortError, PortResult, Sealed, TokenSealer};

/// What a seal of this sealer starts with (a KMS seal would start otherwise).
const PREFIX: &str = "v1";

/// Seals with one 256-bit key.
pub struct LocalKeySealer {
    key: LessSafeKey,
    random: SystemRandom,
}

/// Why a key was refused (never showing it).
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("TOKEN_ENCRYPTION_KEY must be 32 bytes written as 64 hex digits")]
pub struct BadKey;

impl LocalKeySealer {
    /// The key from its 64 hex digits.
    pub fn from_hex(hex_key: &SecretString) -> Result<Self, BadKey> {
        let bytes = zeroize::Zeroizing::new(hex::decode(hex_key.expose_secret().trim()).map_err(|_| BadKey)?);
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| BadKey)?;
        Ok(LocalKeySealer { key: LessSafeKey::new(key), random: SystemRandom::new() })
    }
}

fn refused(message: &str) -> PortError {
    PortError::Rejected { backend: "token sealer", message: message.to_owned() }
}

#[async_trait]
impl TokenSealer for LocalKeySealer {
    async fn seal(&self, token: &SecretString, context: &str) -> PortResult<Sealed> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).map_err(|_| refused("no random nonce to seal with"))?;
        let mut sealed = token.expose_secret().as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(context.as_bytes()), &mut sealed)
            .map_err(|_| refused("a token could not be sealed"))?;
        Ok(Sealed(format!("{PREFIX}.{}.{}", B64.encode(nonce), B64.encode(&sealed))))
    }

    async fn open(&self, sealed: &Sealed, context: &str) -> PortResult<SecretString> {
        const WONT_OPEN: &str =
            "a stored token will not open: TOKEN_ENCRYPTION_KEY is not the key it was sealed with, or it was changed";
        let mut parts = sealed.0.split('.');
        let (Some(PREFIX), Some(nonce), Some(body), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(refused(WONT_OPEN));
        };
        let nonce: [u8; NONCE_LEN] =
            B64.decode(nonce).ok().and_then(|n| n.try_into().ok()).ok_or_else(|| refused(WONT_OPEN))?;
        let mut body = B64.decode(body).map_err(|_| refused(WONT_OPEN))?;
        let opened = self
            .key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(context.as_bytes()), &mut body)
            .map_err(|_| refused(WONT_OPEN))?
            .len();
        body.truncate(opened);
        let token = String::from_utf8(body).map_err(|_| refused(WONT_OPEN))?;
        Ok(SecretString::from(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn sealer(key: &str) -> LocalKeySealer {
        LocalKeySealer::from_hex(&SecretString::from(key)).expect("a good key")
    }

    #[tokio::test]
    async fn a_token_opens_only_with_its_key_and_for_its_installation() {
        let sealer = sealer(KEY);
        let token = SecretString::from("xoxb-1-2-secret");
        let sealed = sealer.seal(&token, "-:T1").await.unwrap();
        assert!(!sealed.0.contains("xoxb") && sealed.0.starts_with("v1."), "{sealed:?}");
        assert_ne!(sealer.seal(&token, "-:T1").await.unwrap(), sealed, "a fresh nonce every seal");
        assert_eq!(sealer.open(&sealed, "-:T1").await.unwrap().expose_secret(), "xoxb-1-2-secret");
        assert_eq!(format!("{sealed:?}"), "Sealed(..)");

        let other_key = super::tests::sealer(&KEY.replace("00", "ff"));
        let mut tampered = sealed.0.clone().into_bytes();
        let last = tampered.len() - 2;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let refusals = [
            other_key.open(&sealed, "-:T1").await,
            sealer.open(&sealed, "-:T2").await,
            sealer.open(&Sealed(String::from_utf8(tampered).unwrap()), "-:T1").await,
            sealer.open(&Sealed("v1.x.y".into()), "-:T1").await,
            sealer.open(&Sealed("xoxb-1-2-secret".into()), "-:T1").await,
        ];
        for refusal in refusals {
            let Err(PortError::Rejected { message, .. }) = refusal else { panic!("opened: {refusal:?}") };
            assert!(message.contains("TOKEN_ENCRYPTION_KEY") && !message.contains("xoxb"), "{message}");
        }
    }

    #[test]
    fn a_key_is_64_hex_digits() {
        for bad in ["", "00", &KEY[..62], &format!("{KEY}00"), &KEY.replace('0', "g")] {
            assert_eq!(LocalKeySealer::from_hex(&SecretString::from(bad)).err(), Some(BadKey), "{bad}");
        }
        assert!(LocalKeySealer::from_hex(&SecretString::from(format!(" {KEY}\n"))).is_ok());
    }
}
