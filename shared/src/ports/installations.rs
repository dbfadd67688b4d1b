//! Slack installations (issue 45): the app added to a workspace through "Add to Slack",
//! one per workspace (or per Enterprise Grid org, for an org-wide install), each with
//! its own bot token, kept sealed ([`TokenSealer`]) so no store holds a token in clear.

use std::fmt;

use async_trait::async_trait;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::PortResult;
use crate::domain::{Timestamp, UserId, Workspace};

/// Which install: an org's (`enterprise`) and a workspace's (`team`). A workspace
/// outside any org has no enterprise; an org-wide install has no team. Stores key an
/// installation by its [`InstallationKey::workspace_id`]: Slack's team and org ids are
/// unique, and an event, a job and a channel (`T…/C…`, `E…/C…`) all carry it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InstallationKey {
    pub enterprise: Option<String>,
    pub team: Option<String>,
}

impl InstallationKey {
    pub fn team(team: &str) -> Self {
        InstallationKey { enterprise: None, team: Some(team.to_owned()) }
    }

    /// The workspace the install serves: the team's id, or the org's for an org-wide
    /// install. The stores' key, and what a sealed token is bound to (a token copied to
    /// another install's row does not open).
    pub fn workspace_id(&self) -> &str {
        self.team.as_deref().or(self.enterprise.as_deref()).unwrap_or_default()
    }

    /// Whose data the install's channels are (`T…/C…`, or `E…/C…` org-wide).
    pub fn workspace(&self) -> Workspace<'_> {
        Workspace::Slack(self.workspace_id())
    }

    pub fn is_enterprise_install(&self) -> bool {
        self.team.is_none()
    }
}

impl fmt::Display for InstallationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.enterprise {
            Some(enterprise) => write!(f, "{enterprise}/{}", self.team.as_deref().unwrap_or("(org-wide)")),
            None => f.write_str(self.workspace_id()),
        }
    }
}

/// A token as a [`TokenSealer`] sealed it: what the stores keep. Its `Debug` shows
/// nothing of it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sealed(pub String);

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sealed(..)")
    }
}

/// The app installed in a workspace (or an org), as `oauth.v2.access` granted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Installation {
    pub key: InstallationKey,
    pub app_id: String,
    pub team_name: String,
    pub enterprise_name: Option<String>,
    /// The bot's user: mentions of it call kuuki, its messages are its own.
    pub bot_user_id: UserId,
    pub bot_id: String,
    pub bot_scopes: Vec<String>,
    /// Who installed it.
    pub installer: UserId,
    pub installed_at: Timestamp,
    pub bot_token: Sealed,
    /// With token rotation on: the refresh token and when the bot token expires.
    pub refresh_token: Option<Sealed>,
    pub token_expires_at: Option<Timestamp>,
    /// Each write makes a new one (a stored installation's is 1 or more): a token's
    /// refresh is written only over the revision it read.
    #[serde(default)]
    pub revision: u64,
}

impl Installation {
    /// This installation with a refresh's tokens, at the revision after this one.
    pub fn refreshed(self, tokens: &RefreshedTokens) -> Installation {
        Installation {
            bot_token: tokens.bot_token.clone(),
            refresh_token: tokens.refresh_token.clone(),
            token_expires_at: tokens.expires_at,
            revision: self.revision + 1,
            ..self
        }
    }
}

/// The tokens a refresh got, written over the revision it read.
#[derive(Debug, Clone, PartialEq)]
pub struct RefreshedTokens {
    pub bot_token: Sealed,
    pub refresh_token: Option<Sealed>,
    pub expires_at: Option<Timestamp>,
}

/// Where the installations are kept, by workspace id ([`InstallationKey::workspace_id`]).
#[async_trait]
pub trait Installations: Send + Sync {
    /// Stores `installation` (a reinstall replaces the earlier one, tokens and all);
    /// returns its new revision.
    async fn put_installation(&self, installation: &Installation) -> PortResult<u64>;
    async fn installation(&self, workspace: &str) -> PortResult<Option<Installation>>;
    /// Replaces the tokens only if the stored installation is still at revision `read`
    /// (a conditional write); false, and nothing written, when another write came
    /// between (another worker refreshed first, a reinstall) or it is gone.
    async fn replace_tokens(&self, workspace: &str, read: u64, tokens: &RefreshedTokens) -> PortResult<bool>;
    /// Removes the installation; whether there was one.
    async fn delete_installation(&self, workspace: &str) -> PortResult<bool>;
    /// Every installed workspace's id, sorted.
    async fn installed_workspaces(&self) -> PortResult<Vec<String>>;
}

/// Seals tokens for the stores and opens them again. `context` (the installation's
/// workspace id) is bound to the seal: a token opens only where it was sealed for.
#[async_trait]
pub trait TokenSealer: Send + Sync {
    async fn seal(&self, token: &SecretString, context: &str) -> PortResult<Sealed>;
    /// A seal that will not open (another key, another context, changed bytes) is
    /// `Rejected`, naming no part of it.
    async fn open(&self, sealed: &Sealed, context: &str) -> PortResult<SecretString>;
}

/// The bot token of each installed workspace, for the chat adapter that serves them.
#[async_trait]
pub trait SlackTokens: Send + Sync {
    /// `workspace`'s bot token; `None` when it is not installed (never was, or was
    /// uninstalled).
    async fn bot_token(&self, workspace: &str) -> PortResult<Option<SecretString>>;
    /// Slack refused `workspace`'s token (`invalid_auth`, `token_revoked`): whatever is
    /// kept of it is read again next time.
    fn token_refused(&self, workspace: &str);
}

/// What Slack granted an install (`oauth.v2.access`), with who the bot is there
/// (`auth.test` with the new token).
#[derive(Debug, Clone)]
pub struct SlackGrant {
    pub key: InstallationKey,
    pub app_id: String,
    pub team_name: String,
    pub enterprise_name: Option<String>,
    pub installer: UserId,
    pub bot_token: SecretString,
    pub bot_user_id: UserId,
    pub bot_id: String,
    pub bot_scopes: Vec<String>,
    /// With token rotation on.
    pub refresh_token: Option<SecretString>,
    pub expires_in_seconds: Option<u64>,
}

/// Why Slack granted nothing: its `error` (`invalid_code`, `bad_redirect_uri`, …), or
/// no answer. Never holds a code or a token.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OAuthError {
    #[error("Slack refused: {0}")]
    Refused(String),
    #[error("Slack did not answer: {0}")]
    Transport(String),
}

/// What a refresh of a rotating token granted.
#[derive(Debug, Clone)]
pub struct RefreshedGrant {
    pub bot_token: SecretString,
    /// Slack may hand a new refresh token; `None` keeps the one used.
    pub refresh_token: Option<SecretString>,
    pub expires_in_seconds: Option<u64>,
}

/// Slack's OAuth v2 token endpoint.
#[async_trait]
pub trait SlackOAuth: Send + Sync {
    /// Exchanges an install's `code` (given to `redirect_uri`) for its tokens.
    async fn exchange(&self, code: &str, redirect_uri: &str) -> Result<SlackGrant, OAuthError>;
    /// A new bot token for a rotating one, from its refresh token.
    async fn refresh(&self, refresh_token: &SecretString) -> Result<RefreshedGrant, OAuthError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_serves_its_team_or_its_whole_org() {
        let org_wide = InstallationKey { enterprise: Some("E1".into()), team: None };
        let in_org = InstallationKey { enterprise: Some("E1".into()), team: Some("T2".into()) };
        let team = InstallationKey::team("T3");
        assert_eq!((org_wide.workspace_id(), in_org.workspace_id(), team.workspace_id()), ("E1", "T2", "T3"));
        assert_eq!((org_wide.workspace(), in_org.workspace()), (Workspace::Slack("E1"), Workspace::Slack("T2")));
        assert!(org_wide.is_enterprise_install() && !in_org.is_enterprise_install());
        assert_eq!(
            (org_wide.to_string(), in_org.to_string(), team.to_string()),
            ("E1/(org-wide)".into(), "E1/T2".into(), "T3".into())
        );
    }
}
