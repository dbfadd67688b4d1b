//! The ledger table: [`Ledger`] on DynamoDB (claims, posting marks, cache entries).

use super::*;

/// The ledger table's item: a claim or a cache entry. `posting` is set by an update
/// only; `expires_at` is the TTL (seconds).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct LedgerItem {
    pub(super) key: String,
    pub(super) status: String,
    pub(super) until: Timestamp,
    pub(super) expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) posting: Option<bool>,
    /// Which `claim` call took it: a retry of that very call (its first attempt was
    /// applied, its answer lost) finds its own claim, not another delivery's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) holder: Option<String>,
}

pub(super) const IN_PROGRESS: &str = "in_progress";
pub(super) const COMPLETED: &str = "completed";
pub(super) const CACHED: &str = "cached";
/// Ledger items outlive their `until` by a day before TTL removes them.
pub(super) const LEDGER_GRACE_SECONDS: i64 = 86_400;

impl DynamoStore {
    pub(super) async fn put_ledger(
        &self,
        key: &str,
        status: &str,
        until: Timestamp,
        value: Option<&str>,
    ) -> PortResult<()> {
        let item = LedgerItem {
            key: key.to_owned(),
            status: status.to_owned(),
            until,
            expires_at: until.as_micros() / Timestamp::MICROS_PER_SECOND + LEDGER_GRACE_SECONDS,
            value: value.map(str::to_owned),
            posting: None,
            holder: None,
        };
        self.client
            .put_item()
            .table_name(&self.tables.ledger)
            .set_item(Some(to_item(&item)?))
            .send()
            .await
            .map_err(backend("put ledger item"))?;
        Ok(())
    }
}

#[async_trait]
impl Ledger for DynamoStore {
    async fn claim(&self, key: &str, now: Timestamp, lease: Duration) -> PortResult<ClaimOutcome> {
        // An update, not a put: a posting mark of an earlier holder must survive.
        let until = now + lease;
        let holder = format!("{:016x}", fastrand::u64(..));
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.ledger)
            .key("key", s(key))
            .update_expression(
                "SET #status = :in_progress, #until = :until, expires_at = :expires_at, holder = :holder",
            )
            // Free, or a claim whose lease ran out (a crashed or released holder's).
            .condition_expression("attribute_not_exists(#k) OR (#status = :in_progress AND #until <= :now)")
            .expression_attribute_names("#k", "key")
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":in_progress", s(IN_PROGRESS))
            .expression_attribute_values(":until", n(until.as_micros()))
            .expression_attribute_values(
                ":expires_at",
                n(until.as_micros() / Timestamp::MICROS_PER_SECOND + LEDGER_GRACE_SECONDS),
            )
            .expression_attribute_values(":now", n(now.as_micros()))
            .expression_attribute_values(":holder", s(&holder))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let old = match result {
            Ok(out) => {
                let posting =
                    out.attributes().and_then(|old| old.get("posting")).and_then(|v| v.as_bool().ok()).copied();
                return Ok(if posting == Some(true) { ClaimOutcome::Resumed } else { ClaimOutcome::Claimed });
            }
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => match e.err() {
                UpdateItemError::ConditionalCheckFailedException(failed) => failed.item().cloned(),
                _ => None,
            },
            Err(e) => return Err(backend("claim")(e)),
        };
        let old = match old {
            Some(item) => Some(item),
            None => {
                self.client
                    .get_item()
                    .table_name(&self.tables.ledger)
                    .key("key", s(key))
                    .consistent_read(true)
                    .send()
                    .await
                    .map_err(backend("read claim"))?
                    .item
            }
        };
        Ok(match old.filter(|item| !item.is_empty()).map(from_item::<LedgerItem>).transpose()? {
            Some(old) if old.status == COMPLETED => ClaimOutcome::Completed,
            // This call took it: the SDK retried an attempt whose answer was lost.
            Some(old) if old.holder.as_deref() == Some(holder.as_str()) => {
                if old.posting == Some(true) {
                    ClaimOutcome::Resumed
                } else {
                    ClaimOutcome::Claimed
                }
            }
            Some(old) => ClaimOutcome::InProgress { until: old.until },
            None => ClaimOutcome::InProgress { until: now + lease },
        })
    }

    async fn mark_posting(&self, key: &str) -> PortResult<()> {
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.ledger)
            .key("key", s(key))
            .update_expression("SET posting = :yes")
            .condition_expression("#status = :in_progress")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":in_progress", s(IN_PROGRESS))
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Completed already, or gone: nothing is in progress to mark.
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(()),
            Err(e) => Err(backend("mark posting")(e)),
        }
    }

    async fn complete(&self, key: &str, now: Timestamp, keep: Duration) -> PortResult<()> {
        self.put_ledger(key, COMPLETED, now + keep, None).await
    }

    async fn release(&self, key: &str) -> PortResult<()> {
        // The lease ends now; a posting mark stays for the next holder.
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.ledger)
            .key("key", s(key))
            .update_expression("SET #until = :zero")
            .condition_expression("#status = :in_progress")
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":in_progress", s(IN_PROGRESS))
            .expression_attribute_values(":zero", n(0))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(()),
            Err(e) => Err(backend("release claim")(e)),
        }
    }

    async fn cache_get(&self, key: &str, now: Timestamp) -> PortResult<Option<String>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.ledger)
            .key("key", s(key))
            .send()
            .await
            .map_err(backend("get cache entry"))?;
        let Some(item) = out.item else { return Ok(None) };
        let item: LedgerItem = from_item(item)?;
        Ok(item.value.filter(|_| item.status == CACHED && item.until > now))
    }

    async fn cache_get_many(&self, keys: &[String], now: Timestamp) -> PortResult<Vec<Option<String>>> {
        let mut values = Vec::with_capacity(keys.len());
        // BatchGetItem takes 100 keys, and no key twice.
        let mut unique: Vec<&String> = keys.iter().collect();
        unique.sort();
        unique.dedup();
        let mut cached: HashMap<String, String> = HashMap::new();
        for chunk in unique.chunks(100) {
            let wanted = chunk.iter().map(|key| [("key".to_owned(), s(key.as_str()))].into()).collect();
            for item in self.batch_get(&self.tables.ledger, wanted, true, "get cache entries").await? {
                let item: LedgerItem = from_item(item)?;
                if let Some(value) = item.value.filter(|_| item.status == CACHED && item.until > now) {
                    cached.insert(item.key, value);
                }
            }
        }
        for key in keys {
            values.push(cached.get(key).cloned());
        }
        Ok(values)
    }

    async fn cache_put(&self, key: &str, value: &str, until: Timestamp) -> PortResult<()> {
        self.put_ledger(key, CACHED, until, Some(value)).await
    }
}
