//! The Slack workspaces one deployment serves, each installed through "Add to Slack"
//! (issue 45): what an event, a job and a chat call ask of an installation, read from
//! the store once and kept a while in this process (a warm Lambda reads it once per
//! [`INSTALLED_FOR`], not once per message), with its token opened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

use crate::domain::{Timestamp, UserId};
use crate::ports::{
    Clock, Installation, InstallationKey, Installations, PortResult, SlackGrant, SlackTokens, TokenSealer,
};

/// How long an installation read is used before it is read again: an uninstall, a
/// reinstall or a refreshed token elsewhere reaches this process within it (and a
/// refused token at once, see [`SlackTokens::token_refused`]).
pub const INSTALLED_FOR: Duration = Duration::from_secs(300);

/// How long "not installed" is believed: short, so a workspace added through another
/// process is served soon after.
pub const MISSING_FOR: Duration = Duration::from_secs(10);

/// An installed workspace as a process uses it.
pub struct InstalledWorkspace {
    /// The workspace id its channels carry (`T…/C…`): the team's, or the org's.
    pub id: String,
    pub key: InstallationKey,
    pub bot_user: UserId,
    pub bot_id: String,
    token: SecretString,
}

impl std::fmt::Debug for InstalledWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstalledWorkspace").field("id", &self.id).field("bot_user", &self.bot_user).finish()
    }
}

enum Known {
    Installed(Arc<InstalledWorkspace>, Timestamp),
    Missing(Timestamp),
}

/// The installations, read through a short-lived cache.
pub struct Workspaces {
    installations: Arc<dyn Installations>,
    sealer: Arc<dyn TokenSealer>,
    clock: Arc<dyn Clock>,
    known: Mutex<HashMap<String, Known>>,
}

impl Workspaces {
    pub fn new(installations: Arc<dyn Installations>, sealer: Arc<dyn TokenSealer>, clock: Arc<dyn Clock>) -> Self {
        Workspaces { installations, sealer, clock, known: Mutex::new(HashMap::new()) }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<String, Known>> {
        self.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The workspace `id` if it is installed.
    pub async fn installed(&self, id: &str) -> PortResult<Option<Arc<InstalledWorkspace>>> {
        let now = self.clock.now();
        match self.known().get(id) {
            Some(Known::Installed(installed, until)) if now < *until => return Ok(Some(installed.clone())),
            Some(Known::Missing(until)) if now < *until => return Ok(None),
            _ => {}
        }
        let found = match self.installations.installation(id).await? {
            Some(installation) => Some(Arc::new(self.opened(installation).await?)),
            None => None,
        };
        let known = match &found {
            Some(installed) => Known::Installed(installed.clone(), now + INSTALLED_FOR),
            None => Known::Missing(now + MISSING_FOR),
        };
        self.known().insert(id.to_owned(), known);
        Ok(found)
    }

    async fn opened(&self, installation: Installation) -> PortResult<InstalledWorkspace> {
        let id = installation.key.workspace_id().to_owned();
        let token = self.sealer.open(&installation.bot_token, &id).await?;
        Ok(InstalledWorkspace {
            id,
            key: installation.key,
            bot_user: installation.bot_user_id,
            bot_id: installation.bot_id,
            token,
        })
    }

    /// The installation an event is for, as its authorization says (Slack's
    /// `authorizations[0]`, else the envelope's ids): an org-wide one's is the org's
    /// install; otherwise the team's own, else its org's (an org-wide install hears its
    /// workspaces' events too).
    pub async fn of_event(
        &self,
        enterprise: Option<&str>,
        team: Option<&str>,
        is_enterprise_install: bool,
    ) -> PortResult<Option<Arc<InstalledWorkspace>>> {
        if !is_enterprise_install
            && let Some(team) = team
            && let Some(installed) = self.installed(team).await?
        {
            return Ok(Some(installed));
        }
        match enterprise {
            Some(enterprise) => self.installed(enterprise).await,
            None => Ok(None),
        }
    }

    /// Stores what Slack granted (its tokens sealed) as the workspace's installation,
    /// replacing an earlier one; returns it.
    pub async fn install(&self, grant: &SlackGrant, now: Timestamp) -> PortResult<Installation> {
        let id = grant.key.workspace_id().to_owned();
        let refresh_token = match &grant.refresh_token {
            Some(token) => Some(self.sealer.seal(token, &id).await?),
            None => None,
        };
        let mut installation = Installation {
            key: grant.key.clone(),
            app_id: grant.app_id.clone(),
            team_name: grant.team_name.clone(),
            enterprise_name: grant.enterprise_name.clone(),
            bot_user_id: grant.bot_user_id.clone(),
            bot_id: grant.bot_id.clone(),
            bot_scopes: grant.bot_scopes.clone(),
            installer: grant.installer.clone(),
            installed_at: now,
            bot_token: self.sealer.seal(&grant.bot_token, &id).await?,
            refresh_token,
            token_expires_at: grant.expires_in_seconds.map(|secs| now + Duration::from_secs(secs)),
            revision: 0,
        };
        installation.revision = self.installations.put_installation(&installation).await?;
        self.known().remove(&id);
        Ok(installation)
    }

    /// Every installed workspace's id.
    pub async fn installed_workspaces(&self) -> PortResult<Vec<String>> {
        self.installations.installed_workspaces().await
    }

    /// Removes the workspace's installation (after its uninstall's purge); whether
    /// there was one.
    pub async fn uninstall(&self, id: &str) -> PortResult<bool> {
        let removed = self.installations.delete_installation(id).await?;
        self.known().remove(id);
        Ok(removed)
    }
}

#[async_trait]
impl SlackTokens for Workspaces {
    async fn bot_token(&self, workspace: &str) -> PortResult<Option<SecretString>> {
        let installed = self.installed(workspace).await?;
        Ok(installed.map(|installed| SecretString::from(installed.token.expose_secret().to_owned())))
    }

    fn token_refused(&self, workspace: &str) {
        self.known().remove(workspace);
    }
}
