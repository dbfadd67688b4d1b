//! What a Slack workspace's purge after an uninstall asks of DynamoDB: the lists of
//! what is stored (scans and queries of keys, rare), whole channels removed, and the
//! mark that Slack's access is gone: an item of the channels table
//! ([`SLACK_GONE_KEY`]) that a Slack channel's state read fetches in the batch it
//! makes anyway, so no job pays a call for it.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};

use super::{
    BATCH_WRITE_ITEMS, DynamoStore, Item, PROFILES_SCOPE, UNPROCESSED_RETRIES, answers_key, backend, get_s,
    judgment_key, n, notes_scope, s,
};
use crate::domain::{ChannelId, Timestamp, UserId, Workspace};
use crate::ports::{PortError, PortResult};

/// The channels table's item that says since when Slack's access is gone (`gone_at`,
/// N, µs): no channel id starts with '#'.
pub(super) const SLACK_GONE_KEY: &str = "#slack-gone";
const GONE_AT: &str = "gone_at";

/// Since when an item read with [`SLACK_GONE_KEY`] says Slack's access is gone.
pub(super) fn gone_at(item: &Item) -> PortResult<Option<Timestamp>> {
    let Some(value) = item.get(GONE_AT) else { return Ok(None) };
    let at = value.as_n().ok().and_then(|n| n.parse().ok()).ok_or_else(|| PortError::Backend {
        backend: "dynamodb",
        message: format!("an unreadable Slack access mark {value:?}"),
    })?;
    Ok(Some(Timestamp(at)))
}

impl DynamoStore {
    /// The distinct values of the key attribute `key` in `table`, by a scan of that
    /// attribute alone, in pages.
    pub(super) async fn scan_keys(&self, table: &str, key: &str, what: &'static str) -> PortResult<Vec<String>> {
        let mut keys: Vec<String> = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(table)
                .projection_expression("#k")
                .expression_attribute_names("#k", key)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend(what))?;
            for item in out.items.unwrap_or_default() {
                if let Some(value) = get_s(&item, key)
                    && keys.last().is_none_or(|last| last != value)
                {
                    keys.push(value.to_owned());
                }
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                keys.sort();
                keys.dedup();
                return Ok(keys);
            }
        }
    }

    pub(super) async fn message_channels_scanned(&self) -> PortResult<Vec<ChannelId>> {
        let keys = self.scan_keys(&self.tables.messages, "channel", "scan message channels").await?;
        Ok(keys.into_iter().map(|c| ChannelId(c.into())).collect())
    }

    /// Channels with a state item (their judgment and answers items, and the mark, begin
    /// with '#').
    pub(super) async fn state_channels_scanned(&self) -> PortResult<Vec<ChannelId>> {
        let keys = self.scan_keys(&self.tables.channels, "channel", "scan channel states").await?;
        let channel_of = |key: &str| {
            if !key.starts_with('#') {
                return Some(key.to_owned());
            }
            let rest = key.strip_prefix("#judgment#").or_else(|| key.strip_prefix("#answers#"))?;
            Some(rest.to_owned())
        };
        let mut channels: Vec<String> = keys.iter().filter_map(|k| channel_of(k)).collect();
        channels.sort();
        channels.dedup();
        Ok(channels.into_iter().map(|c| ChannelId(c.into())).collect())
    }

    /// The channel's item, its judgment item and its answers item, in one batch write.
    pub(super) async fn delete_state_items(&self, channel: &ChannelId) -> PortResult<()> {
        let keys = [channel.0.to_string(), judgment_key(channel), answers_key(channel)];
        let requests = keys
            .into_iter()
            .map(|key| {
                let delete = DeleteRequest::builder().key("channel", s(key)).build();
                delete.map(|d| WriteRequest::builder().delete_request(d).build())
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(backend("build channel state deletes"))?;
        self.batch_delete(&self.tables.channels, requests, "delete channel state").await
    }

    /// Sends `requests` to `table` (at most [`BATCH_WRITE_ITEMS`]), again for what
    /// DynamoDB did not get to.
    pub(super) async fn batch_delete(
        &self,
        table: &str,
        mut requests: Vec<WriteRequest>,
        what: &'static str,
    ) -> PortResult<()> {
        debug_assert!(requests.len() <= BATCH_WRITE_ITEMS);
        for attempt in 0.. {
            let out =
                self.client.batch_write_item().request_items(table, requests).send().await.map_err(backend(what))?;
            // Deletes DynamoDB did not get to (throttling) are sent again.
            match out.unprocessed_items.and_then(|mut u| u.remove(table)) {
                Some(left) if !left.is_empty() && attempt + 1 < UNPROCESSED_RETRIES => {
                    requests = left;
                    tokio::time::sleep(std::time::Duration::from_millis(20 << attempt)).await;
                }
                Some(left) if !left.is_empty() => {
                    return Err(PortError::Backend {
                        backend: "dynamodb",
                        message: format!("{what}: left unprocessed"),
                    });
                }
                _ => return Ok(()),
            }
        }
        unreachable!("the loop returns")
    }

    pub(super) async fn read_slack_gone(&self, workspace: Workspace<'_>) -> PortResult<Option<Timestamp>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.channels)
            .key("channel", s(workspace.scoped(SLACK_GONE_KEY)))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend("get the Slack access mark"))?;
        out.item.as_ref().map(gone_at).transpose().map(Option::flatten)
    }

    /// One conditional update: sets `gone_at` unless it is set (`mark`), or removes it
    /// if it still says `at`. Whether it changed anything.
    pub(super) async fn change_slack_gone(
        &self,
        workspace: Workspace<'_>,
        at: Timestamp,
        mark: bool,
    ) -> PortResult<bool> {
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.channels)
            .key("channel", s(workspace.scoped(SLACK_GONE_KEY)))
            .expression_attribute_names("#g", GONE_AT)
            .expression_attribute_values(":at", n(at.as_micros()));
        let update = if mark {
            update.update_expression("SET #g = :at").condition_expression("attribute_not_exists(#g)")
        } else {
            update.update_expression("REMOVE #g").condition_expression("#g = :at")
        };
        match update.send().await {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(false),
            Err(e) => Err(backend("change the Slack access mark")(e)),
        }
    }

    pub(super) async fn noted_users_queried(&self, channel: &ChannelId) -> PortResult<Vec<UserId>> {
        let items = self.scope_keys(notes_scope(channel), "query notes of a channel").await?;
        Ok(items.into_iter().map(|id| UserId(id.into())).collect())
    }

    pub(super) async fn profiled_users_queried(&self, workspace: Workspace<'_>) -> PortResult<Vec<UserId>> {
        let items = self.scope_keys(workspace.scoped(PROFILES_SCOPE), "query profiles").await?;
        Ok(items.into_iter().map(|id| UserId(id.into())).collect())
    }

    /// The ids in one scope of the facts table (keys only, in pages).
    async fn scope_keys(&self, scope: String, what: &'static str) -> PortResult<Vec<String>> {
        let mut ids = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.tables.facts)
                .key_condition_expression("#scope = :scope")
                .projection_expression("#id")
                .expression_attribute_names("#scope", "scope")
                .expression_attribute_names("#id", "id")
                .expression_attribute_values(":scope", s(scope.as_str()))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend(what))?;
            ids.extend(out.items.unwrap_or_default().iter().filter_map(|item| get_s(item, "id").map(str::to_owned)));
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(ids);
            }
        }
    }
}
