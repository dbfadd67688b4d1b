//! The Slack workspaces one deployment serves, each installed through "Add to Slack"
//! (issue 45): what an event, a job and a chat call ask of an installation, read from
//! the store once and kept a while in this process (a warm Lambda reads it once per
//! [`INSTALLED_FOR`], not once per message), with its token opened. A rotating token
//! (the app's "token rotation") due to expire within [`ROTATE_BEFORE`] is refreshed
//! by the first process that reads it, under a ledger claim and a conditional write:
//! once, however many workers read it at that moment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

use crate::domain::{Timestamp, UserId};
use crate::ports::{
    ClaimOutcome, Clock, Installation, InstallationKey, Installations, Ledger, PortResult, RefreshedTokens, SlackGrant,
    SlackOAuth, SlackTokens, TokenSealer,
};

/// Whether `installation`'s token rotates and expires within [`ROTATE_BEFORE`] of `now`.
fn is_due(installation: &Installation, now: Timestamp) -> bool {
    installation.refresh_token.is_some() && installation.token_expires_at.is_some_and(|at| at <= now + ROTATE_BEFORE)
}

/// How long an installation read is used before it is read again: an uninstall, a
/// reinstall or a refreshed token elsewhere reaches this process within it (and a
/// refused token at once, see [`SlackTokens::token_refused`]).
pub const INSTALLED_FOR: Duration = Duration::from_secs(300);

/// How long "not installed" is believed: short, so a workspace added through another
/// process is served soon after.
pub const MISSING_FOR: Duration = Duration::from_secs(10);

/// A rotating token is refreshed when it expires within this (Bolt's default).
pub const ROTATE_BEFORE: Duration = Duration::from_secs(120 * 60);

/// How long one refresh may hold its claim; a token another process is refreshing is
/// read again after it.
pub const REFRESH_LEASE: Duration = Duration::from_secs(30);

/// How long a done refresh is remembered (its revision is then long gone).
const REFRESHED_KEPT: Duration = Duration::from_secs(24 * 60 * 60);

/// What refreshing rotating tokens needs.
struct Rotation {
    oauth: Arc<dyn SlackOAuth>,
    ledger: Arc<dyn Ledger>,
}

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
    rotation: Option<Rotation>,
}

impl Workspaces {
    pub fn new(installations: Arc<dyn Installations>, sealer: Arc<dyn TokenSealer>, clock: Arc<dyn Clock>) -> Self {
        Workspaces { installations, sealer, clock, known: Mutex::new(HashMap::new()), rotation: None }
    }

    /// Refreshing rotating tokens through `oauth`, one process at a time (`ledger`).
    pub fn with_rotation(mut self, oauth: Arc<dyn SlackOAuth>, ledger: Arc<dyn Ledger>) -> Self {
        self.rotation = Some(Rotation { oauth, ledger });
        self
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
        let (found, until) = match self.installations.installation(id).await? {
            Some(installation) => {
                let installation = self.rotated(installation, now).await?;
                // Still due (another process is refreshing it): read again soon.
                let due = self.rotation.is_some() && is_due(&installation, now);
                let until = now + if due { REFRESH_LEASE } else { INSTALLED_FOR };
                (Some(Arc::new(self.opened(installation).await?)), until)
            }
            None => (None, now + MISSING_FOR),
        };
        let known = match &found {
            Some(installed) => Known::Installed(installed.clone(), until),
            None => Known::Missing(until),
        };
        self.known().insert(id.to_owned(), known);
        Ok(found)
    }

    /// `installation` with its token refreshed if it is due and this process is the
    /// one to refresh it; as another process left it otherwise.
    async fn rotated(&self, installation: Installation, now: Timestamp) -> PortResult<Installation> {
        let Some(rotation) = &self.rotation else { return Ok(installation) };
        let Some(refresh_token) = installation.refresh_token.clone().filter(|_| is_due(&installation, now)) else {
            return Ok(installation);
        };
        let id = installation.key.workspace_id().to_owned();
        // The install's time too: a reinstall starts its revisions again.
        let claim =
            format!("slack-token-refresh:{id}:{}:{}", installation.installed_at.as_micros(), installation.revision);
        match rotation.ledger.claim(&claim, now, REFRESH_LEASE).await? {
            ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
            // Another process refreshes it, or did: what it wrote, once it is there.
            ClaimOutcome::InProgress { .. } | ClaimOutcome::Completed => {
                return Ok(self.installations.installation(&id).await?.unwrap_or(installation));
            }
        }
        let refresh_token = self.sealer.open(&refresh_token, &id).await?;
        let granted = match rotation.oauth.refresh(&refresh_token).await {
            Ok(granted) => granted,
            Err(error) => {
                tracing::warn!(workspace = %id, %error, "could not refresh the workspace's token; the current one is used while it lasts");
                rotation.ledger.release(&claim).await?;
                return Ok(installation);
            }
        };
        let tokens = RefreshedTokens {
            bot_token: self.sealer.seal(&granted.bot_token, &id).await?,
            refresh_token: match &granted.refresh_token {
                Some(token) => Some(self.sealer.seal(token, &id).await?),
                None => installation.refresh_token.clone(),
            },
            expires_at: granted.expires_in_seconds.map(|secs| now + Duration::from_secs(secs)),
        };
        let written = self.installations.replace_tokens(&id, installation.revision, &tokens).await?;
        rotation.ledger.complete(&claim, now, REFRESHED_KEPT).await?;
        if !written {
            // A reinstall came between: it is what stands.
            return Ok(self.installations.installation(&id).await?.unwrap_or(installation));
        }
        tracing::info!(workspace = %id, revision = installation.revision + 1, "the workspace's rotating token was refreshed");
        Ok(installation.refreshed(&tokens))
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

    /// When the workspace's current installation was made (read from the store, not
    /// the cache); `None` when it has none.
    pub async fn installed_at(&self, id: &str) -> PortResult<Option<Timestamp>> {
        Ok(self.installations.installation(id).await?.map(|installation| installation.installed_at))
    }

    /// Removes the workspace's installation if it was made no later than `gone_at`
    /// (Slack took its access away then): a reinstall since is left alone, so a late
    /// retry of an old uninstall never deletes it. Whether one was removed.
    pub async fn uninstall(&self, id: &str, gone_at: Timestamp) -> PortResult<bool> {
        if self.installed_at(id).await?.is_none_or(|installed| installed > gone_at) {
            return Ok(false);
        }
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::adapters::memory::{MemoryStore, VirtualClock};
    use crate::ports::{OAuthError, RefreshedGrant};

    /// Slack's token endpoint, counting refreshes; each takes a moment (another worker
    /// reads meanwhile).
    #[derive(Default)]
    struct Refreshes(AtomicUsize);

    #[async_trait]
    impl SlackOAuth for Refreshes {
        async fn exchange(&self, _: &str, _: &str) -> Result<SlackGrant, OAuthError> {
            unreachable!("no install here")
        }
        async fn refresh(&self, refresh_token: &SecretString) -> Result<RefreshedGrant, OAuthError> {
            assert_eq!(refresh_token.expose_secret(), "xoxe-1-refresh");
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(RefreshedGrant {
                bot_token: SecretString::from(format!("xoxe.xoxb-new-{n}")),
                refresh_token: Some(SecretString::from("xoxe-1-refresh")),
                expires_in_seconds: Some(43_200),
            })
        }
    }

    fn grant(expires_in_seconds: u64) -> SlackGrant {
        SlackGrant {
            key: InstallationKey::team("T1"),
            app_id: "A1".into(),
            team_name: "Team T1".into(),
            enterprise_name: None,
            installer: UserId("UADMIN".into()),
            bot_token: SecretString::from("xoxe.xoxb-old"),
            bot_user_id: UserId("UBOT1".into()),
            bot_id: "B1".into(),
            bot_scopes: Vec::new(),
            refresh_token: Some(SecretString::from("xoxe-1-refresh")),
            expires_in_seconds: Some(expires_in_seconds),
        }
    }

    #[tokio::test]
    async fn two_workers_refresh_a_rotating_token_once_and_both_use_the_new_one() {
        let clock = Arc::new(VirtualClock::new(Timestamp(1_800_000_000 * 1_000_000)));
        let store = Arc::new(MemoryStore::new());
        let oauth = Arc::new(Refreshes::default());
        let worker = || {
            let sealer = Arc::new(crate::adapters::contract::test_sealer());
            Workspaces::new(store.clone(), sealer, clock.clone()).with_rotation(oauth.clone(), store.clone())
        };
        let (one, two) = (worker(), worker());
        // Installed with a token that expires in 12 hours: nothing to refresh yet.
        one.install(&grant(43_200), clock.now()).await.unwrap();
        assert_eq!(one.bot_token("T1").await.unwrap().unwrap().expose_secret(), "xoxe.xoxb-old");
        assert_eq!(oauth.0.load(Ordering::SeqCst), 0);

        // Eleven hours on, within the two hours before it expires: both workers read it
        // at once; one refreshes, the other waits for what it writes.
        clock.advance_to(clock.now() + Duration::from_secs(11 * 3600));
        one.token_refused("T1");
        let (first, second) = tokio::join!(one.bot_token("T1"), two.bot_token("T1"));
        assert_eq!(oauth.0.load(Ordering::SeqCst), 1, "refreshed once");
        let tokens = [first.unwrap().unwrap(), second.unwrap().unwrap()];
        let tokens: Vec<&str> = tokens.iter().map(|t| t.expose_secret()).collect();
        assert!(tokens.contains(&"xoxe.xoxb-new-1"), "{tokens:?}");
        assert!(tokens.iter().all(|t| ["xoxe.xoxb-new-1", "xoxe.xoxb-old"].contains(t)), "{tokens:?}");
        let stored = store.installation("T1").await.unwrap().unwrap();
        assert_eq!(stored.revision, 2, "one conditional write");
        // The one that waited reads the new token once the refresh's lease is over.
        clock.advance_to(clock.now() + REFRESH_LEASE + Duration::from_secs(1));
        for worker in [&one, &two] {
            assert_eq!(worker.bot_token("T1").await.unwrap().unwrap().expose_secret(), "xoxe.xoxb-new-1");
        }
        assert_eq!(oauth.0.load(Ordering::SeqCst), 1, "and not again: the new one lasts 12 hours");
    }
}
