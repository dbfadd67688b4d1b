//! A channel's talkativeness on DynamoDB: the attributes `talkativeness` (S, JSON of
//! the domain's `Talkativeness`) and `talkativeness_v` (N, an optimistic version) on the
//! channel's judgment item (`#judgment#<channel>`), which the state's batch read reads
//! and a channel's deletion deletes already. A signal reads them and writes them back
//! only if nobody wrote in between (the item's other attributes, written blind by every
//! judgment, are left alone).

use super::*;
use crate::domain::talkativeness::{FeedbackChange, FeedbackOutcome, Talkativeness, TalkativenessLimits};

/// The judgment item's attribute holding the talkativeness (S, JSON).
pub(super) const TALKATIVENESS_ATTRIBUTE: &str = "talkativeness";
/// Its version (N): 1 after the first write.
const VERSION_ATTRIBUTE: &str = "talkativeness_v";

/// The talkativeness an item read with the judgment item holds (none: the default).
pub(super) fn talkativeness_of(item: &Item) -> PortResult<Talkativeness> {
    match get_s(item, TALKATIVENESS_ATTRIBUTE) {
        Some(json) => serde_json::from_str(json).map_err(backend("decode talkativeness")),
        None => Ok(Talkativeness::default()),
    }
}

impl DynamoStore {
    /// Reads, applies `change`, and writes back on the version read; again on a conflict.
    pub(super) async fn apply_talkativeness(
        &self,
        channel: &ChannelId,
        change: &FeedbackChange,
        now: Timestamp,
        limits: &TalkativenessLimits,
    ) -> PortResult<Option<FeedbackOutcome>> {
        let key = judgment_key(channel);
        for _ in 0..VERSION_RETRIES {
            let out = self
                .client
                .get_item()
                .table_name(&self.tables.channels)
                .key("channel", s(&key))
                .projection_expression("#t, #v")
                .expression_attribute_names("#t", TALKATIVENESS_ATTRIBUTE)
                .expression_attribute_names("#v", VERSION_ATTRIBUTE)
                .consistent_read(true)
                .send()
                .await
                .map_err(backend("get talkativeness"))?;
            let item = out.item.unwrap_or_default();
            let mut talkativeness = talkativeness_of(&item)?;
            let version: i64 = item.get(VERSION_ATTRIBUTE).and_then(|v| v.as_n().ok()?.parse().ok()).unwrap_or(0);
            let Some(outcome) = talkativeness.apply(change, now, limits) else { return Ok(None) };
            let json = serde_json::to_string(&talkativeness).map_err(backend("encode talkativeness"))?;
            let update = self
                .client
                .update_item()
                .table_name(&self.tables.channels)
                .key("channel", s(&key))
                .update_expression("SET #t = :t, #v = :next")
                .expression_attribute_names("#t", TALKATIVENESS_ATTRIBUTE)
                .expression_attribute_names("#v", VERSION_ATTRIBUTE)
                .expression_attribute_values(":t", s(json))
                .expression_attribute_values(":next", n(version + 1));
            let update = if version == 0 {
                update.condition_expression("attribute_not_exists(#v)")
            } else {
                update.condition_expression("#v = :v").expression_attribute_values(":v", n(version))
            };
            match update.send().await {
                Ok(_) => return Ok(Some(outcome)),
                Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => continue,
                Err(e) => return Err(backend("update talkativeness")(e)),
            }
        }
        Err(PortError::Backend {
            backend: "dynamodb",
            message: format!("talkativeness of {channel} kept changing under {VERSION_RETRIES} attempts"),
        })
    }
}
