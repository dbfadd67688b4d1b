//! Tokens sealed with a KMS key of the stack ([`TokenSealer`], `TOKEN_KMS_KEY_ID`):
//! `Encrypt` with the installation's workspace as encryption context, so a sealed
//! token copied to another installation's item does not open, and no table, export or
//! backup holds a token in clear. A seal is `kms1.<base64 ciphertext blob>`.

use async_trait::async_trait;
use aws_sdk_kms::primitives::Blob;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use secrecy::{ExposeSecret, SecretString};

use crate::ports::{PortError, PortResult, Sealed, TokenSealer};

const PREFIX: &str = "kms1.";
/// The encryption context's key; its value is the installation's workspace id.
const CONTEXT: &str = "kuuki:installation";

pub struct KmsSealer {
    client: aws_sdk_kms::Client,
    key_id: String,
}

impl KmsSealer {
    /// `key_id`: the key's id, ARN or alias (`TOKEN_KMS_KEY_ID`); each call cut off by
    /// `timeouts` (the ingress's or a job's, as the function's other AWS calls).
    pub fn new(config: &aws_config::SdkConfig, timeouts: aws_config::timeout::TimeoutConfig, key_id: &str) -> Self {
        let config = aws_sdk_kms::config::Builder::from(config).timeout_config(timeouts).build();
        KmsSealer { client: aws_sdk_kms::Client::from_conf(config), key_id: key_id.to_owned() }
    }
}

fn failed<E: std::error::Error + Send + Sync + 'static>(
    what: &'static str,
) -> impl Fn(aws_sdk_kms::error::SdkError<E>) -> PortError {
    move |error| PortError::Backend {
        backend: "kms",
        message: format!("{what}: {}", aws_sdk_kms::error::DisplayErrorContext(&error)).chars().take(500).collect(),
    }
}

fn refused(message: &str) -> PortError {
    PortError::Rejected { backend: "kms", message: message.to_owned() }
}

#[async_trait]
impl TokenSealer for KmsSealer {
    async fn seal(&self, token: &SecretString, context: &str) -> PortResult<Sealed> {
        let out = self
            .client
            .encrypt()
            .key_id(&self.key_id)
            .plaintext(Blob::new(token.expose_secret().as_bytes()))
            .encryption_context(CONTEXT, context)
            .send()
            .await
            .map_err(failed("encrypt a token"))?;
        let blob = out.ciphertext_blob.ok_or_else(|| refused("KMS encrypted a token into nothing"))?;
        Ok(Sealed(format!("{PREFIX}{}", B64.encode(blob.as_ref()))))
    }

    async fn open(&self, sealed: &Sealed, context: &str) -> PortResult<SecretString> {
        const WONT_OPEN: &str =
            "a stored token will not open with TOKEN_KMS_KEY_ID (another key, or sealed for another installation)";
        let blob =
            sealed.0.strip_prefix(PREFIX).and_then(|b64| B64.decode(b64).ok()).ok_or_else(|| refused(WONT_OPEN))?;
        let decrypted = self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(blob))
            .encryption_context(CONTEXT, context)
            .send()
            .await;
        let out = match decrypted {
            Ok(out) => out,
            Err(error)
                if error.as_service_error().is_some_and(|e| {
                    e.is_invalid_ciphertext_exception()
                        || e.is_incorrect_key_exception()
                        || e.is_invalid_key_usage_exception()
                }) =>
            {
                return Err(refused(WONT_OPEN));
            }
            // Not the key's to open for this context, or not this function's to use:
            // asking again will not change it.
            Err(error) if error.as_service_error().and_then(|e| e.meta().code()) == Some("AccessDeniedException") => {
                return Err(refused(
                    "KMS denied opening a stored token with TOKEN_KMS_KEY_ID (the function's kms:Decrypt, or a token sealed for another installation)",
                ));
            }
            Err(error) => return Err(failed("decrypt a token")(error)),
        };
        let plain = out.plaintext.ok_or_else(|| refused(WONT_OPEN))?.into_inner();
        String::from_utf8(plain).map(SecretString::from).map_err(|_| refused(WONT_OPEN))
    }
}

/// The sealer the settings name: the KMS key `TOKEN_KMS_KEY_ID` (its calls cut off by
/// `timeouts`), else `TOKEN_ENCRYPTION_KEY`.
pub async fn token_sealer(
    platforms: &crate::config::PlatformSettings,
    timeouts: aws_config::timeout::TimeoutConfig,
) -> Result<std::sync::Arc<dyn TokenSealer>, crate::adapters::sealer::BadKey> {
    if platforms.token_kms_key_id.is_empty() {
        let key = crate::adapters::sealer::LocalKeySealer::from_hex(&platforms.token_encryption_key)?;
        return Ok(std::sync::Arc::new(key));
    }
    let config = super::config::load().await;
    Ok(std::sync::Arc::new(KmsSealer::new(&config, timeouts, &platforms.token_kms_key_id)))
}
