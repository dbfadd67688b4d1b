//! The `platforms` group: Slack's and Discord's credentials, endpoints and how kuuki
//! connects to each.

use secrecy::{ExposeSecret, SecretString};

use super::ConfigError;
use super::reader::Reader;

#[derive(Debug, Clone)]
pub struct PlatformSettings {
    pub slack_signing_secret: SecretString,
    pub slack_bot_token: SecretString,
    pub slack_api_base_url: String,
    /// `SLACK_APP_TOKEN`: Socket Mode when set.
    pub slack_app_token: SecretString,
    /// `SLACK_CLIENT_ID`: set, kuuki serves many Slack workspaces, each added through
    /// "Add to Slack" (`/slack/install`) with a token of its own (issue 45).
    pub slack_client_id: String,
    pub slack_client_secret: SecretString,
    pub slack_state_secret: SecretString,
    /// Empty: built from the request's host.
    pub slack_redirect_uri: String,
    pub slack_authorize_url: String,
    /// 64 hex digits, checked here; the sealer reads it.
    pub token_encryption_key: SecretString,
    /// `TOKEN_KMS_KEY_ID`: tokens sealed with this KMS key instead (on AWS).
    pub token_kms_key_id: String,
    pub discord_public_key: String,
    pub discord_bot_token: SecretString,
    pub discord_application_id: String,
    pub discord_relay_secret: SecretString,
    pub discord_api_base_url: String,
    /// `DISCORD_GATEWAY`: `kuuki serve` runs the Gateway in process.
    pub discord_gateway: bool,
    pub discord_gateway_url: String,
}

impl PlatformSettings {
    pub(super) fn parse(r: &Reader) -> Result<PlatformSettings, ConfigError> {
        PlatformSettings {
            slack_signing_secret: r.secret("SLACK_SIGNING_SECRET"),
            slack_bot_token: r.secret("SLACK_BOT_TOKEN"),
            slack_api_base_url: r.string("SLACK_API_BASE_URL", "https://slack.com/api"),
            slack_app_token: r.secret("SLACK_APP_TOKEN"),
            slack_client_id: r.string("SLACK_CLIENT_ID", ""),
            slack_client_secret: r.secret("SLACK_CLIENT_SECRET"),
            slack_state_secret: r.secret("SLACK_STATE_SECRET"),
            slack_redirect_uri: r.string("SLACK_REDIRECT_URI", ""),
            slack_authorize_url: r.string("SLACK_AUTHORIZE_URL", "https://slack.com/oauth/v2/authorize"),
            token_encryption_key: r.secret("TOKEN_ENCRYPTION_KEY"),
            token_kms_key_id: r.string("TOKEN_KMS_KEY_ID", ""),
            discord_public_key: r.string("DISCORD_PUBLIC_KEY", ""),
            discord_bot_token: r.secret("DISCORD_BOT_TOKEN"),
            discord_application_id: r.string("DISCORD_APPLICATION_ID", ""),
            discord_relay_secret: r.secret("DISCORD_RELAY_SECRET"),
            discord_api_base_url: r.string("DISCORD_API_BASE_URL", "https://discord.com/api/v10"),
            discord_gateway: r.bool("DISCORD_GATEWAY", true)?,
            discord_gateway_url: r.string("DISCORD_GATEWAY_URL", ""),
        }
        .checked()
    }

    /// Whether kuuki serves many Slack workspaces (`SLACK_CLIENT_ID` set) rather than
    /// the one `SLACK_BOT_TOKEN` is of.
    pub fn slack_many_workspaces(&self) -> bool {
        !self.slack_client_id.is_empty()
    }

    /// The install flow's secrets the ingress needs with many workspaces (the workers
    /// only open tokens): the first one missing.
    pub fn install_secret_missing(&self) -> Option<&'static str> {
        [
            ("SLACK_CLIENT_SECRET", &self.slack_client_secret),
            ("SLACK_STATE_SECRET", &self.slack_state_secret),
            ("SLACK_SIGNING_SECRET", &self.slack_signing_secret),
        ]
        .into_iter()
        .find(|(_, value)| value.expose_secret().is_empty())
        .map(|(name, _)| name)
    }

    /// The settings that go together, together: many workspaces need a key to seal
    /// tokens with (every process opens them; the ingress's install secrets are its
    /// own check, [`PlatformSettings::install_secret_missing`]), and take no single bot
    /// token nor Socket Mode (an app over Socket Mode cannot be distributed).
    fn checked(self) -> Result<PlatformSettings, ConfigError> {
        let hidden = |name, reason: &str| Reader::invalid(name, "(hidden)", reason);
        let key = self.token_encryption_key.expose_secret();
        if !(key.is_empty() || key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit())) {
            return Err(hidden("TOKEN_ENCRYPTION_KEY", "must be 32 bytes written as 64 hex digits"));
        }
        let uri = &self.slack_redirect_uri;
        if !(uri.is_empty() || uri.starts_with("https://") || uri.starts_with("http://")) {
            return Err(Reader::invalid("SLACK_REDIRECT_URI", uri, "must be an absolute http(s) URL"));
        }
        if !uri.is_empty() && !uri.ends_with("/slack/oauth_redirect") {
            return Err(Reader::invalid("SLACK_REDIRECT_URI", uri, "must end in /slack/oauth_redirect"));
        }
        if !self.slack_many_workspaces() {
            return Ok(self);
        }
        if self.token_encryption_key.expose_secret().is_empty() && self.token_kms_key_id.is_empty() {
            let why = "must be set with SLACK_CLIENT_ID (many workspaces), or TOKEN_KMS_KEY_ID on AWS";
            return Err(hidden("TOKEN_ENCRYPTION_KEY", why));
        }
        let state_secret = self.slack_state_secret.expose_secret();
        if !state_secret.is_empty() && state_secret.len() < 32 {
            return Err(hidden("SLACK_STATE_SECRET", "must be at least 32 characters (it signs the install's state)"));
        }
        let refuse = |name, value: &SecretString, why: &str| match value.expose_secret().is_empty() {
            true => Ok(()),
            false => Err(hidden(name, why)),
        };
        refuse(
            "SLACK_BOT_TOKEN",
            &self.slack_bot_token,
            "is the one workspace's token; with SLACK_CLIENT_ID each workspace's comes from its installation: unset one",
        )?;
        refuse(
            "SLACK_APP_TOKEN",
            &self.slack_app_token,
            "Socket Mode serves one workspace (Slack does not distribute Socket Mode apps); with SLACK_CLIENT_ID events come over HTTP: unset one",
        )?;
        Ok(self)
    }
}
