//! DynamoDB behind the store ports. Four tables (docs/design.md §3.3):
//!
//! | table | key | what |
//! | --- | --- | --- |
//! | messages | `channel` (S), `sk` (S: the ts, zero-padded so text order is ts order) | every message; sparse GSI `by_conversation` on `conv` (`channel#root`, thread replies only: a top-level message costs no index write) and `sk`; TTL `expires_at` |
//! | channels | `channel` (S) | the channel's state as JSON (`state`, without the interventions and the last judgment) with an optimistic `version`, and the memory marks `summary_due` and `reflection_due` (N) apart, each set by an update of its own. Written often, so in small items of their own (DynamoDB charges a write by the size of the item it changes): `#judgment#<channel>` (`last_judgment`, S, JSON, and `reflection_lull_at`, N, when a lull's reflection is queued for: every judgment; `reflection_watermark`, S: every reflection; `talkativeness`, S, JSON, with its own optimistic `talkativeness_v`, N: every talkativeness signal) and `#answers#<channel>` (one `iv#<at>#<thread>` per intervention, S, JSON without the excerpt and facts, and `last`, the newest in full; every answer) |
//! | ledger | `key` (S) | claims (`status`, `until`) and cache entries (`value`, `until`); TTL `expires_at` |
//! | facts | `scope` (S: the channel, `#notes#<channel>`, `#profiles` or `#workspace`, the last two `#…#T…` for a Slack workspace among several), `id` (S: the fact's id, the person's, `#memory` or `line#<channel>`) | facts as JSON (`fact`) per channel, with the embedding apart (`embedding`, B: little-endian f32s) and a revision new at every write (`rev`, N: a reflection, a forget and a deleted message's edit write a fact back only as they read it); people's notes per channel, by parts a reflection or an answer updates without a read (`tags` SS, `summary`, `last_topics` L, `updated_at`; the JSON `note` of items from before 2026-11-27 beneath them); people's counters (`interactions`, `bot_mentions`, `channels` SS, `first_at`, `last_at`); the workspace memory (`workspace`) and each public channel's line in it (`line`), an item each |
//!
//! Access patterns: a message by (channel, ts) with a conditional put that dedups
//! deliveries; a thread's newest N (GSI, newest first, limit N), the top level's newest N
//! (table, newest first, thread replies filtered out, a bounded number of pages); a channel's
//! newest N and the message before a ts (table, newest first); a claim by key with a
//! conditional put. TTL deletes up to two days late, so reads drop expired items.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, DeleteRequest, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    Projection, ProjectionType, ReturnValue, ReturnValuesOnConditionCheckFailure, ScalarAttributeType,
    TimeToLiveSpecification, WriteRequest,
};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::domain::{
    Author, ChannelId, ChannelLine, ChannelMemory, Fact, Intervention, JudgmentNote, Message, ThreadKey, Timestamp, Ts,
    UserId, UserNote, UserProfile, Workspace, WorkspaceMemory,
};

mod channels;
mod facts;
mod installations;
mod ledger;
mod messages;
mod purge;
mod tables;
mod talkativeness;
#[cfg(test)]
mod tests;

use crate::ports::{
    ChannelState, ChannelStateStore, ChannelWindow, ClaimOutcome, Clock, FactRevision, FactStore, Ledger, MemoryTask,
    MessageStore, OpenerState, PortError, PortResult, PutOutcome, Shadow,
};
use facts::*;
pub use facts::{embedding_from_bytes, embedding_to_bytes};
use purge::SLACK_GONE_KEY;
pub use tables::create_tables;

/// The table names (settings `MESSAGES_TABLE`, `CHANNELS_TABLE`, `LEDGER_TABLE`).
#[derive(Debug, Clone)]
pub struct TableNames {
    pub messages: String,
    pub channels: String,
    pub ledger: String,
    pub facts: String,
}

const CONVERSATION_INDEX: &str = "by_conversation";
/// The facts table's scope of the workspace memory: the item [`WORKSPACE_MEMORY_ID`]
/// and one `line#<channel>` per channel, its `ChannelLine` (no channel id starts with
/// '#', and the sweep of fact channels skips scopes that do).
const WORKSPACE_SCOPE: &str = "#workspace";
const WORKSPACE_MEMORY_ID: &str = "#memory";
const CHANNEL_LINE_PREFIX: &str = "line#";
/// The channels table's item that held the workspace memory and every channel's line
/// before they moved to [`WORKSPACE_SCOPE`].
const LEGACY_WORKSPACE_KEY: &str = "#workspace";
/// The channels table's item holding a channel's last judgment: written on every
/// judgment, so kept apart from the channel's item (DynamoDB charges a write by the
/// size of the item it changes).
fn judgment_key(channel: &ChannelId) -> String {
    format!("#judgment#{}", channel.0)
}
/// The channels table's item holding a channel's interventions (see [`ANSWERS_LAST`]).
fn answers_key(channel: &ChannelId) -> String {
    format!("#answers#{}", channel.0)
}
/// The answers item's attribute with the newest intervention in full; each `iv#`
/// attribute holds one without its excerpt and facts (only the newest's are read), so
/// the item, and each answer's write, stays a few kilobytes.
const ANSWERS_LAST: &str = "last";
/// When the answer in [`ANSWERS_LAST`] was made (N, µs): an older one does not replace it.
const ANSWERS_LAST_AT: &str = "last_at";
/// Optimistic updates of a channel's state retry this often on a conflict.
const VERSION_RETRIES: usize = 8;
/// A batch read or write asks again this often for what DynamoDB left unprocessed
/// (throttled), waiting 20 ms, doubling, in between.
const UNPROCESSED_RETRIES: usize = 6;
/// The most requests one BatchWriteItem takes.
const BATCH_WRITE_ITEMS: usize = 25;

type Item = HashMap<String, AttributeValue>;

pub struct DynamoStore {
    client: Client,
    tables: TableNames,
    clock: Arc<dyn Clock>,
    retention: Duration,
}

fn backend<E: std::fmt::Debug>(operation: &'static str) -> impl Fn(E) -> PortError {
    move |e| PortError::Backend {
        backend: "dynamodb",
        message: format!("{operation}: {e:?}").chars().take(500).collect(),
    }
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
}

/// A struct to its item through serde_dynamo: `String` is S, integers and
/// `Timestamp` N, `bool` BOOL; `None`s are left out (never NULL).
fn to_item<T: Serialize>(value: &T) -> PortResult<Item> {
    serde_dynamo::to_item(value).map_err(backend("encode item"))
}

fn from_item<T: DeserializeOwned>(item: Item) -> PortResult<T> {
    serde_dynamo::from_item(item).map_err(backend("decode item"))
}

/// A value kept as a JSON string (S) inside its item: a channel's state, a fact, a note.
mod json {
    use serde::de::{DeserializeOwned, Error as _};
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&serde_json::to_string(value).map_err(S::Error::custom)?)
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
        serde_json::from_str(&String::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

/// [`json`] for an attribute that may be missing (`None` is left out by
/// `skip_serializing_if` before this runs).
mod json_option {
    use serde::de::DeserializeOwned;
    use serde::{Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(value: &Option<T>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => super::json::serialize(value, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
        super::json::deserialize(deserializer).map(Some)
    }
}

/// An embedding as a Binary (B) attribute, through [`embedding_to_bytes`].
mod embedding {
    use serde::{Deserializer, Serializer, de};

    pub fn serialize<S: Serializer>(value: &Option<Vec<f32>>, serializer: S) -> Result<S::Ok, S::Error> {
        // `skip_serializing_if` leaves `None` out before this runs.
        serializer.serialize_bytes(&super::embedding_to_bytes(value.as_deref().unwrap_or_default()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<f32>>, D::Error> {
        struct Bytes;
        impl de::Visitor<'_> for Bytes {
            type Value = Vec<f32>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("little-endian f32 bytes")
            }
            fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Vec<f32>, E> {
                super::embedding_from_bytes(bytes).map_err(E::custom)
            }
        }
        deserializer.deserialize_bytes(Bytes).map(Some)
    }
}

impl DynamoStore {
    /// `retention` is `MESSAGE_RETENTION_DAYS`: messages expire (TTL) that long after
    /// they were written.
    pub fn new(client: Client, tables: TableNames, clock: Arc<dyn Clock>, retention: Duration) -> Self {
        DynamoStore { client, tables, clock, retention }
    }
}
