//! Slack installations in the channels table: [`Installations`]. One item per install,
//! keyed `#install#<workspace id>` (no channel id starts with '#', and the scan of
//! channel states skips such keys), holding the installation as JSON (its tokens
//! sealed) and its revision `rev`, which a token refresh is conditioned on.

use super::*;
use crate::ports::{Installation, Installations, RefreshedTokens};

const INSTALL_PREFIX: &str = "#install#";

fn install_key(workspace: &str) -> AttributeValue {
    s(format!("{INSTALL_PREFIX}{workspace}"))
}

/// The channels table's item of an installation.
#[derive(Serialize, Deserialize)]
struct InstallationItem {
    channel: String,
    #[serde(with = "json")]
    installation: Installation,
    rev: u64,
}

impl DynamoStore {
    async fn read_installation(&self, workspace: &str) -> PortResult<Option<Installation>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.channels)
            .key("channel", install_key(workspace))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend("get an installation"))?;
        let Some(item) = out.item else { return Ok(None) };
        let item: InstallationItem = from_item(item)?;
        Ok(Some(Installation { revision: item.rev, ..item.installation }))
    }

    /// Writes `installation` at its revision, if the stored one is at `read` (0: none).
    async fn write_installation(&self, installation: &Installation, read: u64) -> PortResult<bool> {
        let item = InstallationItem {
            channel: format!("{INSTALL_PREFIX}{}", installation.key.workspace_id()),
            installation: installation.clone(),
            rev: installation.revision,
        };
        let put = self.client.put_item().table_name(&self.tables.channels).set_item(Some(to_item(&item)?));
        let put = if read == 0 {
            put.condition_expression("attribute_not_exists(channel)")
        } else {
            put.condition_expression("rev = :read").expression_attribute_values(":read", n(read))
        };
        match put.send().await {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(false),
            Err(e) => Err(backend("put an installation")(e)),
        }
    }
}

#[async_trait]
impl Installations for DynamoStore {
    async fn put_installation(&self, installation: &Installation) -> PortResult<u64> {
        // Over whatever is stored (a reinstall), at the next revision: a write that
        // another came before is tried again over that one.
        for _ in 0..VERSION_RETRIES {
            let read =
                self.read_installation(installation.key.workspace_id()).await?.map_or(0, |stored| stored.revision);
            let revision = read + 1;
            if self.write_installation(&Installation { revision, ..installation.clone() }, read).await? {
                return Ok(revision);
            }
        }
        Err(PortError::Busy {
            message: format!("the installation {} kept changing", installation.key),
            retry_after: Duration::from_secs(1),
        })
    }

    async fn installation(&self, workspace: &str) -> PortResult<Option<Installation>> {
        self.read_installation(workspace).await
    }

    async fn replace_tokens(&self, workspace: &str, read: u64, tokens: &RefreshedTokens) -> PortResult<bool> {
        let Some(stored) = self.read_installation(workspace).await? else { return Ok(false) };
        if stored.revision != read {
            return Ok(false);
        }
        let refreshed = stored.refreshed(tokens);
        self.write_installation(&refreshed, read).await
    }

    async fn delete_installation(&self, workspace: &str) -> PortResult<bool> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.tables.channels)
            .key("channel", install_key(workspace))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(backend("delete an installation"))?;
        Ok(out.attributes.is_some_and(|old| !old.is_empty()))
    }

    async fn installed_workspaces(&self) -> PortResult<Vec<String>> {
        let keys = self.scan_keys(&self.tables.channels, "channel", "scan installations").await?;
        Ok(keys.iter().filter_map(|key| key.strip_prefix(INSTALL_PREFIX)).map(str::to_owned).collect())
    }
}
