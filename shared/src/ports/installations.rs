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
/// outside any org has no enterprise; an org-wide install has no team.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InstallationKey {
    pub enterprise: Option<String>,
    pub team: Option<String>,
}

impl InstallationKey {
    pub fn team(team: &str) -> Self {
        InstallationKey { enterprise: None, team: Some(team.to_owned()) }
    }

    /// The key as one string (`E…:T…`, `-` for a missing part): the stores' key, and
    /// what a sealed token is bound to, so a token copied to another install's row does
    /// not open.
    pub fn text(&self) -> String {
        format!("{}:{}", self.enterprise.as_deref().unwrap_or("-"), self.team.as_deref().unwrap_or("-"))
    }

    /// The key [`InstallationKey::text`] wrote; `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        let (enterprise, team) = text.split_once(':')?;
        let part = |p: &str| -> Option<Option<String>> {
            match p {
                "-" => Some(None),
                p if !p.is_empty() && p.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()) => {
                    Some(Some(p.to_owned()))
                }
                _ => None,
            }
        };
        let key = InstallationKey { enterprise: part(enterprise)?, team: part(team)? };
        (key.enterprise.is_some() || key.team.is_some()).then_some(key)
    }

    /// Whose data the install's channels are: the team's, or the org's for an org-wide
    /// install (its channels are `E…/C…`).
    pub fn workspace(&self) -> Workspace<'_> {
        Workspace::Slack(self.team.as_deref().or(self.enterprise.as_deref()).unwrap_or_default())
    }

    pub fn is_enterprise_install(&self) -> bool {
        self.team.is_none()
    }
}

impl fmt::Display for InstallationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
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

/// Where the installations are kept.
#[async_trait]
pub trait Installations: Send + Sync {
    /// Stores `installation` (a reinstall replaces the earlier one, tokens and all);
    /// returns its new revision.
    async fn put_installation(&self, installation: &Installation) -> PortResult<u64>;
    async fn installation(&self, key: &InstallationKey) -> PortResult<Option<Installation>>;
    /// Replaces the tokens only if the stored installation is still at revision `read`
    /// (a conditional write); false, and nothing written, when another write came
    /// between (another worker refreshed first, a reinstall) or it is gone.
    async fn replace_tokens(&self, key: &InstallationKey, read: u64, tokens: &RefreshedTokens) -> PortResult<bool>;
    /// Removes the installation; whether there was one.
    async fn delete_installation(&self, key: &InstallationKey) -> PortResult<bool>;
    /// Every installation's key, sorted.
    async fn installation_keys(&self) -> PortResult<Vec<InstallationKey>>;
}

/// Seals tokens for the stores and opens them again. `context` (an installation key's
/// text) is bound to the seal: a token opens only where it was sealed for.
#[async_trait]
pub trait TokenSealer: Send + Sync {
    async fn seal(&self, token: &SecretString, context: &str) -> PortResult<Sealed>;
    /// A seal that will not open (another key, another context, changed bytes) is
    /// `Rejected`, naming no part of it.
    async fn open(&self, sealed: &Sealed, context: &str) -> PortResult<SecretString>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installation_key_is_written_and_read_as_one_string() {
        let org_wide = InstallationKey { enterprise: Some("E1".into()), team: None };
        let in_org = InstallationKey { enterprise: Some("E1".into()), team: Some("T2".into()) };
        let team = InstallationKey::team("T3");
        for key in [&org_wide, &in_org, &team] {
            assert_eq!(InstallationKey::parse(&key.text()).as_ref(), Some(key), "{key}");
        }
        assert_eq!((org_wide.text(), team.text()), ("E1:-".to_owned(), "-:T3".to_owned()));
        assert_eq!((org_wide.workspace(), in_org.workspace()), (Workspace::Slack("E1"), Workspace::Slack("T2")));
        assert!(org_wide.is_enterprise_install() && !in_org.is_enterprise_install());
        for bad in ["", "-:-", "T3", "e1:T2", "E1:T2:T3", "E1:", ":T2"] {
            assert_eq!(InstallationKey::parse(bad), None, "{bad}");
        }
    }
}
