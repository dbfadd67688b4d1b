//! Slack installations in the in-process store: [`Installations`].

use super::*;
use crate::ports::{Installation, Installations, RefreshedTokens};

#[async_trait]
impl Installations for MemoryStore {
    async fn put_installation(&self, installation: &Installation) -> PortResult<u64> {
        let mut inner = self.lock();
        let workspace = installation.key.workspace_id();
        let revision = inner.installations.get(workspace).map_or(0, |stored| stored.revision) + 1;
        inner.installations.insert(workspace.to_owned(), Installation { revision, ..installation.clone() });
        Ok(revision)
    }

    async fn installation(&self, workspace: &str) -> PortResult<Option<Installation>> {
        Ok(self.lock().installations.get(workspace).cloned())
    }

    async fn replace_tokens(&self, workspace: &str, read: u64, tokens: &RefreshedTokens) -> PortResult<bool> {
        let mut inner = self.lock();
        let Some(stored) = inner.installations.get_mut(workspace).filter(|stored| stored.revision == read) else {
            return Ok(false);
        };
        *stored = stored.clone().refreshed(tokens);
        Ok(true)
    }

    async fn delete_installation(&self, workspace: &str) -> PortResult<bool> {
        Ok(self.lock().installations.remove(workspace).is_some())
    }

    async fn installed_workspaces(&self) -> PortResult<Vec<String>> {
        let mut workspaces: Vec<String> = self.lock().installations.keys().cloned().collect();
        workspaces.sort();
        Ok(workspaces)
    }
}
