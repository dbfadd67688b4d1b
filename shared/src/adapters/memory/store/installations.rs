//! Slack installations in the in-process store: [`Installations`].

use super::*;
use crate::ports::{Installation, InstallationKey, Installations, RefreshedTokens};

#[async_trait]
impl Installations for MemoryStore {
    async fn put_installation(&self, installation: &Installation) -> PortResult<u64> {
        let mut inner = self.lock();
        let revision = inner.installations.get(&installation.key).map_or(0, |stored| stored.revision) + 1;
        inner.installations.insert(installation.key.clone(), Installation { revision, ..installation.clone() });
        Ok(revision)
    }

    async fn installation(&self, key: &InstallationKey) -> PortResult<Option<Installation>> {
        Ok(self.lock().installations.get(key).cloned())
    }

    async fn replace_tokens(&self, key: &InstallationKey, read: u64, tokens: &RefreshedTokens) -> PortResult<bool> {
        let mut inner = self.lock();
        let Some(stored) = inner.installations.get_mut(key).filter(|stored| stored.revision == read) else {
            return Ok(false);
        };
        *stored = stored.clone().refreshed(tokens);
        Ok(true)
    }

    async fn delete_installation(&self, key: &InstallationKey) -> PortResult<bool> {
        Ok(self.lock().installations.remove(key).is_some())
    }

    async fn installation_keys(&self) -> PortResult<Vec<InstallationKey>> {
        let mut keys: Vec<InstallationKey> = self.lock().installations.keys().cloned().collect();
        keys.sort();
        Ok(keys)
    }
}
