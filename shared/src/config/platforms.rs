//! The `platforms` group: Slack's and Discord's credentials, endpoints and how kuuki
//! connects to each.

use secrecy::SecretString;

use super::ConfigError;
use super::reader::Reader;

#[derive(Debug, Clone)]
pub struct PlatformSettings {
    pub slack_signing_secret: SecretString,
    pub slack_bot_token: SecretString,
    pub slack_api_base_url: String,
    /// `SLACK_APP_TOKEN`: Socket Mode when set.
    pub slack_app_token: SecretString,
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
        Ok(PlatformSettings {
            slack_signing_secret: r.secret("SLACK_SIGNING_SECRET"),
            slack_bot_token: r.secret("SLACK_BOT_TOKEN"),
            slack_api_base_url: r.string("SLACK_API_BASE_URL", "https://slack.com/api"),
            slack_app_token: r.secret("SLACK_APP_TOKEN"),
            discord_public_key: r.string("DISCORD_PUBLIC_KEY", ""),
            discord_bot_token: r.secret("DISCORD_BOT_TOKEN"),
            discord_application_id: r.string("DISCORD_APPLICATION_ID", ""),
            discord_relay_secret: r.secret("DISCORD_RELAY_SECRET"),
            discord_api_base_url: r.string("DISCORD_API_BASE_URL", "https://discord.com/api/v10"),
            discord_gateway: r.bool("DISCORD_GATEWAY", true)?,
            discord_gateway_url: r.string("DISCORD_GATEWAY_URL", ""),
        })
    }
}
