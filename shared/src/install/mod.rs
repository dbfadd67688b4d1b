//! "Add to Slack" (issue 45): Slack's OAuth v2 install flow, in the order Bolt checks
//! it. [`Installer::start`] sends a browser to Slack's authorize page with a state
//! bound to it by a cookie; [`Installer::finish`] takes Slack's redirect back: an
//! `error` (the person said no), then the browser's cookie, the state's signature and
//! age, its single use (a ledger claim), the code, its exchange; then the installation
//! is stored with its tokens sealed. Every refusal stores nothing.

mod state;

use std::sync::Arc;
use std::time::Duration;

use crate::deps::Deps;
use crate::ports::{ClaimOutcome, Installation, OAuthError, PortError, SlackOAuth};
use crate::workspaces::Workspaces;
pub use state::{STATE_LASTS, StateRefusal, StateSigner};

/// The bot scopes kuuki asks for: the app manifest's (`infra/slack-app-manifest.yaml`,
/// held to it by a test).
pub const BOT_SCOPES: &[&str] = &[
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "reactions:write",
    "reactions:read",
    "users:read",
    "commands",
];

/// The cookie that binds an install's state to the browser that started it.
pub const STATE_COOKIE: &str = "kuuki-oauth-state";

/// How long a used state is remembered: past its life, it is refused as expired.
const USED_STATE_KEPT: Duration = Duration::from_secs(2 * 600);

/// What the install flow needs besides [`Deps`].
pub struct Installer {
    pub client_id: String,
    pub authorize_url: String,
    pub states: StateSigner,
    pub workspaces: Arc<Workspaces>,
    pub oauth: Arc<dyn SlackOAuth>,
}

/// Where `/slack/install` sends the browser, and the state to set in its cookie.
pub struct Started {
    pub location: String,
    pub state: String,
}

/// What Slack's redirect back carries.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Redirect {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
}

/// Why an install was not stored; [`Refusal::status`] is the page's HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("the install was not allowed on Slack ({0})")]
    Denied(String),
    #[error("{0}; start again from the install link")]
    State(#[from] StateRefusal),
    #[error("this install link was used already; start again from the install link")]
    Used,
    #[error("Slack sent no code; start again from the install link")]
    NoCode,
    #[error("Slack did not grant the install: {0}")]
    Slack(OAuthError),
    #[error("the installation could not be stored; please try again")]
    Store(PortError),
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Denied(_) => 403,
            Refusal::State(_) | Refusal::Used | Refusal::NoCode | Refusal::Slack(OAuthError::Refused(_)) => 400,
            Refusal::Slack(OAuthError::Transport(_)) => 502,
            Refusal::Store(_) => 500,
        }
    }
}

impl Installer {
    /// The install flow of the settings' app (`SLACK_CLIENT_ID`, `SLACK_AUTHORIZE_URL`,
    /// `SLACK_STATE_SECRET`).
    pub fn new(settings: &crate::config::Settings, workspaces: Arc<Workspaces>, oauth: Arc<dyn SlackOAuth>) -> Self {
        use secrecy::ExposeSecret;
        let platforms = &settings.platforms;
        Installer {
            client_id: platforms.slack_client_id.clone(),
            authorize_url: platforms.slack_authorize_url.clone(),
            states: StateSigner::new(platforms.slack_state_secret.expose_secret()),
            workspaces,
            oauth,
        }
    }

    /// The authorize URL for a browser, with a fresh state; `redirect_uri` is where
    /// Slack sends it back (`…/slack/oauth_redirect`).
    pub fn start(&self, deps: &Deps, redirect_uri: &str) -> Started {
        let state = self.states.issue(deps.clock.now());
        let scope = BOT_SCOPES.join(",");
        let query = serde_urlencoded::to_string([
            ("client_id", self.client_id.as_str()),
            ("scope", scope.as_str()),
            ("state", state.as_str()),
            ("redirect_uri", redirect_uri),
        ])
        .expect("strings encode");
        Started { location: format!("{}?{query}", self.authorize_url), state }
    }

    /// Takes Slack's redirect back (`cookie`: the browser's state cookie) and stores
    /// the installation; `redirect_uri` must be the one [`Installer::start`] gave.
    pub async fn finish(
        &self,
        deps: &Deps,
        redirect: &Redirect,
        cookie: Option<&str>,
        redirect_uri: &str,
    ) -> Result<Installation, Refusal> {
        if let Some(error) = &redirect.error {
            return Err(Refusal::Denied(error.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect()));
        }
        let now = deps.clock.now();
        let nonce = self.states.check(redirect.state.as_deref().unwrap_or_default(), cookie, now)?;
        // Once: of two redirects with one state (a reload, a copy), the first goes on.
        let key = format!("oauth-state:{nonce}");
        match deps.ledger.claim(&key, now, STATE_LASTS).await.map_err(Refusal::Store)? {
            ClaimOutcome::Claimed => {}
            ClaimOutcome::Resumed | ClaimOutcome::InProgress { .. } | ClaimOutcome::Completed => {
                return Err(Refusal::Used);
            }
        }
        deps.ledger.complete(&key, now, USED_STATE_KEPT).await.map_err(Refusal::Store)?;
        let code = redirect.code.as_deref().filter(|code| !code.is_empty()).ok_or(Refusal::NoCode)?;
        let grant = self.oauth.exchange(code, redirect_uri).await.map_err(Refusal::Slack)?;
        let installation = self.workspaces.install(&grant, now).await.map_err(Refusal::Store)?;
        // Installed again after an uninstall: its access is back.
        let workspace = installation.key.workspace();
        if let Some(gone) = deps.channels.slack_gone(workspace).await.map_err(Refusal::Store)? {
            deps.channels.clear_slack_gone(workspace, gone).await.map_err(Refusal::Store)?;
        }
        tracing::info!(
            workspace = installation.key.workspace_id(),
            revision = installation.revision,
            enterprise_install = installation.key.is_enterprise_install(),
            "kuuki was installed in a Slack workspace"
        );
        Ok(installation)
    }
}

#[cfg(test)]
mod tests {
    /// The scopes the install asks for are the app manifest's bot scopes.
    #[test]
    fn the_bot_scopes_are_the_manifests() {
        let manifest = include_str!("../../../infra/slack-app-manifest.yaml");
        let after = manifest.split_once("\n    bot:\n").expect("the manifest lists bot scopes").1;
        let listed: Vec<&str> = after
            .lines()
            .map_while(|line| line.trim_start().strip_prefix("- "))
            .map(|item| item.split('#').next().unwrap_or_default().trim())
            .collect();
        assert_eq!(listed, super::BOT_SCOPES);
    }
}
