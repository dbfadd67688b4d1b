//! Slack's OAuth v2 token endpoint ([`SlackOAuth`]): an install's code exchanged for
//! its bot token (`oauth.v2.access`, the app's credentials in HTTP Basic), then
//! `auth.test` with that token for the bot's id, which the exchange does not give; and
//! a rotating token refreshed (`grant_type=refresh_token`).

use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::SlackClient;
use crate::adapters::retry::http_client;
use crate::domain::UserId;
use crate::ports::{InstallationKey, OAuthError, RefreshedGrant, SlackGrant, SlackOAuth};

pub struct SlackOAuthClient {
    http: reqwest::Client,
    base_url: String,
    client_id: String,
    client_secret: SecretString,
    timeout: Duration,
}

impl SlackOAuthClient {
    /// `base_url` is `SLACK_API_BASE_URL`; `client_id`, `client_secret` the app's.
    pub fn new(base_url: &str, client_id: &str, client_secret: SecretString, timeout: Duration) -> Self {
        SlackOAuthClient {
            http: http_client(timeout),
            base_url: base_url.trim_end_matches('/').to_owned(),
            client_id: client_id.to_owned(),
            client_secret,
            timeout,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Named {
    id: Option<String>,
    name: Option<String>,
}

/// `oauth.v2.access`'s answer, as far as kuuki reads it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Access {
    ok: bool,
    error: Option<String>,
    app_id: Option<String>,
    access_token: Option<String>,
    token_type: Option<String>,
    scope: Option<String>,
    bot_user_id: Option<String>,
    team: Option<Named>,
    enterprise: Option<Named>,
    authed_user: Option<Named>,
    is_enterprise_install: bool,
    refresh_token: Option<String>,
    expires_in: Option<u64>,
}

impl SlackOAuthClient {
    /// One `oauth.v2.access` call with `form`, the app's credentials in HTTP Basic; its
    /// `ok: true` answer.
    async fn access(&self, form: &[(&str, &str)]) -> Result<Access, OAuthError> {
        let url = format!("{}/oauth.v2.access", self.base_url);
        let transport = |e: reqwest::Error| OAuthError::Transport(e.without_url().to_string());
        let response = self
            .http
            .post(&url)
            .basic_auth(&self.client_id, Some(self.client_secret.expose_secret()))
            .form(form)
            .send()
            .await
            .map_err(transport)?;
        if !response.status().is_success() {
            return Err(OAuthError::Transport(format!("oauth.v2.access answered HTTP {}", response.status())));
        }
        let access: Access = response.json().await.map_err(transport)?;
        if !access.ok {
            return Err(OAuthError::Refused(access.error.unwrap_or_else(|| "no error given".into())));
        }
        Ok(access)
    }
}

fn unusable(what: &str) -> OAuthError {
    OAuthError::Transport(format!("oauth.v2.access answered without {what}"))
}

#[async_trait]
impl SlackOAuth for SlackOAuthClient {
    async fn exchange(&self, code: &str, redirect_uri: &str) -> Result<SlackGrant, OAuthError> {
        let access = self.access(&[("code", code), ("redirect_uri", redirect_uri)]).await?;
        if access.token_type.as_deref().is_some_and(|kind| kind != "bot") {
            return Err(OAuthError::Transport("oauth.v2.access granted no bot token".into()));
        }
        let token = access.access_token.ok_or_else(|| unusable("a bot token"))?;
        let team = access.team.unwrap_or_default();
        let enterprise = access.enterprise.unwrap_or_default();
        let key = InstallationKey {
            enterprise: enterprise.id.clone(),
            team: if access.is_enterprise_install { None } else { team.id.clone() },
        };
        if key.workspace_id().is_empty() {
            return Err(unusable("a team or an enterprise"));
        }
        let me = SlackClient::new(&self.base_url, &token)
            .with_timeout(self.timeout)
            .auth_test()
            .await
            .map_err(|e| OAuthError::Transport(format!("auth.test with the new token: {e}")))?;
        let bot_user = access.bot_user_id.unwrap_or(me.user_id);
        Ok(SlackGrant {
            key,
            app_id: access.app_id.unwrap_or_default(),
            team_name: team.name.or(enterprise.name.clone()).unwrap_or_default(),
            enterprise_name: enterprise.name,
            installer: UserId(access.authed_user.and_then(|u| u.id).unwrap_or_default().into()),
            bot_token: SecretString::from(token),
            bot_user_id: UserId(bot_user.into()),
            bot_id: me.bot_id.unwrap_or_default(),
            bot_scopes: access
                .scope
                .unwrap_or_default()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            refresh_token: access.refresh_token.map(SecretString::from),
            expires_in_seconds: access.expires_in,
        })
    }

    async fn refresh(&self, refresh_token: &SecretString) -> Result<RefreshedGrant, OAuthError> {
        let form = [("grant_type", "refresh_token"), ("refresh_token", refresh_token.expose_secret())];
        let access = self.access(&form).await?;
        if access.token_type.as_deref() != Some("bot") {
            return Err(OAuthError::Transport("the refresh granted no bot token".into()));
        }
        Ok(RefreshedGrant {
            bot_token: SecretString::from(access.access_token.ok_or_else(|| unusable("a bot token"))?),
            refresh_token: access.refresh_token.map(SecretString::from),
            expires_in_seconds: access.expires_in,
        })
    }
}

#[cfg(test)]
mod tests {
    use wiremock::matchers::{body_string_contains, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn client(slack: &MockServer) -> SlackOAuthClient {
        SlackOAuthClient::new(&slack.uri(), "1.2", SecretString::from("s3cret"), Duration::from_secs(5))
    }

    /// "1.2:s3cret" in HTTP Basic.
    const BASIC: &str = "Basic MS4yOnMzY3JldA==";

    #[tokio::test]
    async fn a_rotating_token_is_refreshed_with_the_apps_credentials() {
        let slack = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/oauth.v2.access"))
            .and(header("authorization", BASIC))
            .and(body_string_contains("grant_type=refresh_token"))
            .and(body_string_contains("refresh_token=xoxe-1-old"))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "ok": true, "token_type": "bot", "access_token": "xoxe.xoxb-new",
                "refresh_token": "xoxe-1-next", "expires_in": 43200,
            })))
            .expect(1)
            .mount(&slack)
            .await;
        let granted = client(&slack).refresh(&SecretString::from("xoxe-1-old")).await.expect("refreshed");
        assert_eq!(granted.bot_token.expose_secret(), "xoxe.xoxb-new");
        assert_eq!(granted.refresh_token.map(|t| t.expose_secret().to_owned()).as_deref(), Some("xoxe-1-next"));
        assert_eq!(granted.expires_in_seconds, Some(43_200));
    }

    #[tokio::test]
    async fn slacks_refusal_names_its_error_and_nothing_else() {
        let slack = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/oauth.v2.access"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(serde_json::json!({"ok": false, "error": "invalid_refresh_token"})),
            )
            .mount(&slack)
            .await;
        let refused = client(&slack).refresh(&SecretString::from("xoxe-1-old")).await.unwrap_err();
        assert_eq!(refused, OAuthError::Refused("invalid_refresh_token".into()));
        let refused = client(&slack).exchange("the-code", "https://k.example/slack/oauth_redirect").await.unwrap_err();
        assert_eq!(refused.to_string(), "Slack refused: invalid_refresh_token");
    }
}
