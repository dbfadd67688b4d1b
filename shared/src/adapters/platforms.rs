//! One [`Chat`] over the platforms a process serves: Slack, Discord or both. A
//! Discord id is a snowflake (digits only); Slack ids start with a letter (`C…`,
//! `D…`, `G…`, `U…`, `B…`), so the id says where a channel or a person lives.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::{ChannelId, CommandReply, Platform, Ts, UserId};
use crate::ports::{Chat, FoundPost, PortError, PortResult, Post};

pub struct PlatformChat {
    pub slack: Option<Arc<dyn Chat>>,
    pub discord: Option<Arc<dyn Chat>>,
}

impl PlatformChat {
    fn for_id(&self, id: &str) -> PortResult<&Arc<dyn Chat>> {
        let platform = Platform::of_id(id);
        let chat = match platform {
            Platform::Discord => &self.discord,
            Platform::Slack => &self.slack,
        };
        let platform = platform.as_str();
        chat.as_ref().ok_or_else(|| PortError::Rejected {
            backend: platform,
            message: format!("{id} belongs to {platform}, which this process does not serve"),
        })
    }
}

#[async_trait]
impl Chat for PlatformChat {
    async fn post_message(&self, post: &Post) -> PortResult<Ts> {
        self.for_id(&post.channel.0)?.post_message(post).await
    }

    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()> {
        self.for_id(&channel.0)?.add_reaction(channel, ts, emoji).await
    }

    async fn find_post(
        &self,
        channel: &ChannelId,
        thread_root: Option<&Ts>,
        after: &Ts,
        tag: &str,
    ) -> PortResult<Option<FoundPost>> {
        self.for_id(&channel.0)?.find_post(channel, thread_root, after, tag).await
    }

    async fn user_name(&self, channel: &ChannelId, user: &UserId) -> PortResult<String> {
        self.for_id(&user.0)?.user_name(channel, user).await
    }

    async fn is_workspace_admin(&self, channel: &ChannelId, user: &UserId) -> PortResult<bool> {
        self.for_id(&user.0)?.is_workspace_admin(channel, user).await
    }

    async fn answer_command(&self, reply: &CommandReply, text: &str) -> PortResult<()> {
        let (chat, platform) = match reply {
            CommandReply::Slack { .. } => (&self.slack, "slack"),
            CommandReply::Discord { .. } => (&self.discord, "discord"),
        };
        let chat = chat.as_ref().ok_or_else(|| PortError::Rejected {
            backend: platform,
            message: format!("a command answer for {platform}, which this process does not serve"),
        })?;
        chat.answer_command(reply, text).await
    }

    async fn server_of(&self, channel: &ChannelId) -> PortResult<Option<String>> {
        self.for_id(&channel.0)?.server_of(channel).await
    }

    fn max_message_chars(&self, channel: &ChannelId) -> Option<usize> {
        self.for_id(&channel.0).ok()?.max_message_chars(channel)
    }

    fn threads(&self, channel: &ChannelId) -> bool {
        self.for_id(&channel.0).is_ok_and(|chat| chat.threads(channel))
    }
}

/// The platforms a process serves, signed in: the chat over them and who kuuki is on
/// each. A platform is served when its bot token is set.
pub struct Connected {
    pub chat: Arc<PlatformChat>,
    pub slack: Option<crate::adapters::slack::SlackIdentity>,
    pub discord: Option<crate::adapters::discord::DiscordIdentity>,
}

impl Connected {
    /// kuuki's ids: the first for [`crate::deps::Deps::new`], the rest `also_known_as`.
    pub fn bot_ids(&self) -> Vec<UserId> {
        // A worker whose Slack token Slack refuses still serves Slack, as nobody.
        let unknown = (self.slack.is_none() && self.chat.slack.is_some()).then(|| UNKNOWN_SLACK_BOT.into());
        let slack = self.slack.iter().map(|s| s.user_id.as_str().into()).chain(unknown).map(UserId);
        let discord = self.discord.iter().map(|d| UserId(d.user_id.as_str().into()));
        slack.chain(discord).collect()
    }
}

/// `auth.test` refusals that say the token is dead, not wrong for a moment.
const DEAD_TOKEN_ERRORS: &[&str] = &["invalid_auth", "token_revoked", "account_inactive", "not_authed"];

/// kuuki's Slack user id in a worker whose token Slack refuses (see [`connect`]): no
/// Slack id has a dash, so nothing mentions it.
pub const UNKNOWN_SLACK_BOT: &str = "U-unknown";

/// What a process does with the platforms: ingress reads incoming messages (and needs
/// kuuki's Discord roles to read a role mention); workers only post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Ingress,
    Worker,
}

/// Why kuuki could not sign in; each names the setting to check.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("neither SLACK_BOT_TOKEN nor DISCORD_BOT_TOKEN is set: kuuki needs a platform to serve")]
    NoPlatform,
    #[error("SLACK_CLIENT_ID is set (many workspaces), but no installations were given to read tokens from")]
    NoInstallations,
    #[error("auth.test at {base_url}: {source} (is SLACK_BOT_TOKEN right?)")]
    Slack { base_url: String, source: crate::adapters::slack::SlackApiError },
    #[error("GET /users/@me at {base_url}: {source} (is DISCORD_BOT_TOKEN right?)")]
    Discord { base_url: String, source: crate::adapters::discord::DiscordApiError },
}

/// Signs in to every platform whose token is set (Slack `auth.test`, Discord
/// `GET /users/@me`, and for ingress kuuki's roles in each server), which also opens
/// the connections the first requests would otherwise pay for. Errors name the
/// setting to check.
pub async fn connect(settings: &crate::config::Settings, role: Role) -> Result<Connected, ConnectError> {
    connect_with(settings, role, None).await
}

/// [`connect`], serving many Slack workspaces (`SLACK_CLIENT_ID`) with each one's token
/// from `slack_tokens`: Slack is served then with no sign-in (each installation says
/// who kuuki is in its workspace).
pub async fn connect_with(
    settings: &crate::config::Settings,
    role: Role,
    slack_tokens: Option<Arc<dyn crate::ports::SlackTokens>>,
) -> Result<Connected, ConnectError> {
    use secrecy::ExposeSecret;

    use crate::adapters::discord::DiscordClient;
    use crate::adapters::slack::{SlackApiError, SlackClient};

    let slack_token = settings.platforms.slack_bot_token.expose_secret();
    let discord_token = settings.platforms.discord_bot_token.expose_secret();
    let many = settings.platforms.slack_many_workspaces();
    if slack_token.is_empty() && discord_token.is_empty() && !many {
        return Err(ConnectError::NoPlatform);
    }
    let mut chat = PlatformChat { slack: None, discord: None };
    let mut connected_slack = None;
    if many {
        let tokens = slack_tokens.ok_or(ConnectError::NoInstallations)?;
        let client =
            SlackClient::new(&settings.platforms.slack_api_base_url, "").with_timeout(settings.budget.chat_timeout);
        chat.slack = Some(Arc::new(crate::adapters::slack::workspaces::SlackWorkspaces::new(client, tokens)));
    } else if !slack_token.is_empty() {
        let client = Arc::new(
            SlackClient::new(&settings.platforms.slack_api_base_url, slack_token)
                .with_timeout(settings.budget.chat_timeout),
        );
        connected_slack = match client.auth_test().await {
            Ok(me) => Some(me),
            // Slack says the token is dead (kuuki was uninstalled, or its token revoked):
            // a worker starts all the same, so the work queued for that workspace ends
            // (dropped while its access is marked gone, purged after the grace) instead
            // of failing at every cold start until the dead letters.
            Err(SlackApiError::Refused { error, .. })
                if role == Role::Worker && DEAD_TOKEN_ERRORS.contains(&error.as_str()) =>
            {
                tracing::error!(%error, "Slack refuses SLACK_BOT_TOKEN: this worker starts without kuuki's Slack identity");
                None
            }
            Err(source) => {
                return Err(ConnectError::Slack { base_url: settings.platforms.slack_api_base_url.clone(), source });
            }
        };
        chat.slack = Some(client);
    }
    let mut connected_discord = None;
    if !discord_token.is_empty() {
        let client = Arc::new(
            DiscordClient::new(&settings.platforms.discord_api_base_url, discord_token)
                .with_timeout(settings.budget.chat_timeout),
        );
        let me = match role {
            Role::Ingress => client.identify_with_roles().await,
            Role::Worker => client.identify().await,
        };
        let me = me.map_err(|source| ConnectError::Discord {
            base_url: settings.platforms.discord_api_base_url.clone(),
            source,
        })?;
        connected_discord = Some(me);
        chat.discord = Some(client);
    }
    Ok(Connected { chat: Arc::new(chat), slack: connected_slack, discord: connected_discord })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::{RecordingChat, TsMint, VirtualClock};
    use crate::domain::Timestamp;

    fn recording(max: usize) -> Arc<RecordingChat> {
        Arc::new(
            RecordingChat::new(Arc::new(VirtualClock::new(Timestamp(0))), Arc::new(TsMint::default()))
                .with_max_chars(max),
        )
    }

    /// A worker whose Slack token Slack refuses as dead (an uninstall) still starts, as
    /// nobody on Slack, so its queued work can end; an ingress, or a token Slack cannot
    /// judge just now, still stops the start with the setting to check.
    #[tokio::test]
    async fn a_worker_starts_with_a_dead_slack_token_and_an_ingress_does_not() {
        use wiremock::{Mock, MockServer, ResponseTemplate, matchers::path};
        let slack = MockServer::start().await;
        Mock::given(path("/auth.test"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(serde_json::json!({"ok": false, "error": "token_revoked"})),
            )
            .mount(&slack)
            .await;
        let vars: std::collections::HashMap<String, String> =
            [("SLACK_BOT_TOKEN", "xoxb-gone"), ("SLACK_API_BASE_URL", slack.uri().as_str())]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let settings = crate::config::Settings::from_vars(&vars).unwrap();
        let worker = connect(&settings, Role::Worker).await.expect("a worker starts");
        assert_eq!(worker.bot_ids(), [UserId(UNKNOWN_SLACK_BOT.into())]);
        assert!(worker.chat.slack.is_some(), "it still serves Slack's channels");
        let ingress = connect(&settings, Role::Ingress).await.err().expect("an ingress does not").to_string();
        assert!(ingress.contains("token_revoked") && ingress.contains("SLACK_BOT_TOKEN"), "{ingress}");
    }

    #[tokio::test]
    async fn each_id_goes_to_its_platform_and_an_unserved_one_is_refused() {
        let (slack, discord) = (recording(4000), recording(2000));
        let both = PlatformChat { slack: Some(slack.clone()), discord: Some(discord.clone()) };
        let post = |channel: &str| Post {
            channel: ChannelId(channel.into()),
            thread_root: None,
            text: "hi".into(),
            tag: None,
            reply_to: None,
            completes: None,
        };
        both.post_message(&post("C01")).await.unwrap();
        both.post_message(&post("123456789012345678")).await.unwrap();
        assert_eq!((slack.calls().len(), discord.calls().len()), (1, 1));
        assert_eq!(both.max_message_chars(&ChannelId("123".into())), Some(2000));
        assert_eq!(both.max_message_chars(&ChannelId("C01".into())), Some(4000));

        let slack_only = PlatformChat { slack: Some(slack.clone()), discord: None };
        let refused = slack_only.post_message(&post("123")).await.unwrap_err();
        assert!(refused.to_string().contains("which this process does not serve"), "{refused}");
    }
}
