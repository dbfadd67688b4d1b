//! DynamoDB behind the store ports. Four tables (DESIGN §6):
//!
//! | table | key | what |
//! | --- | --- | --- |
//! | messages | `channel` (S), `sk` (S: the ts, zero-padded so text order is ts order) | every message; sparse GSI `by_conversation` on `conv` (`channel#root`, thread replies only: a top-level message costs no index write) and `sk`; TTL `expires_at` |
//! | channels | `channel` (S) | the channel's state as JSON (`state`, without the interventions and the last judgment) with an optimistic `version`, and the memory marks `summary_due` and `reflection_due` (N) apart, each set by an update of its own. Written often, so in small items of their own (DynamoDB charges a write by the size of the item it changes): `#judgment#<channel>` (`last_judgment`, S, JSON, and `reflection_lull_at`, N, when a lull's reflection is queued for: every judgment; `reflection_watermark`, S: every reflection) and `#answers#<channel>` (one `iv#<at>#<thread>` per intervention, S, JSON without the excerpt and facts, and `last`, the newest in full; every answer) |
//! | ledger | `key` (S) | claims (`status`, `until`) and cache entries (`value`, `until`); TTL `expires_at` |
//! | facts | `scope` (S: the channel, `#notes#<channel>`, `#profiles` or `#workspace`), `id` (S: the fact's id, the person's, `#memory` or `line#<channel>`) | facts as JSON (`fact`) per channel, with the embedding apart (`embedding`, B: little-endian f32s) and a revision new at every write (`rev`, N: a reflection, a forget and a deleted message's edit write a fact back only as they read it); people's notes per channel, by parts a reflection or an answer updates without a read (`tags` SS, `summary`, `last_topics` L, `updated_at`; the JSON `note` of items from before 2026-11-27 beneath them); people's counters (`interactions`, `bot_mentions`, `channels` SS, `first_at`, `last_at`); the workspace memory (`workspace`) and each public channel's line in it (`line`), an item each |
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
    UserId, UserNote, UserProfile, WorkspaceMemory, is_discord_id,
};

mod purge;
use crate::ports::{
    ChannelState, ChannelStateStore, ChannelWindow, ClaimOutcome, Clock, FactRevision, FactStore, Ledger, MemoryTask,
    MessageStore, OpenerState, PortError, PortResult, PutOutcome, Shadow,
};
use purge::SLACK_GONE_KEY;

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

/// The messages table's item. `sk` (the zero-padded ts) and `conv` are the table's and
/// the index's sort and partition keys; `expires_at` is the TTL (seconds). Only thread
/// replies carry `conv`, so only they are written to the index (items written before
/// carry `channel#-` at the top level, which nothing reads any more).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct MessageItem {
    channel: String,
    sk: String,
    ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conv: Option<String>,
    user: String,
    #[serde(default)]
    user_name: String,
    #[serde(default)]
    text: String,
    author: Author,
    #[serde(default)]
    replies_to_bot: bool,
    #[serde(default)]
    in_dm: bool,
    #[serde(default)]
    private_channel: bool,
    at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thread_root: Option<String>,
}

impl MessageItem {
    fn new(m: &Message, expires_at: i64) -> Self {
        MessageItem {
            channel: m.channel.0.to_string(),
            sk: m.ts.sort_key(),
            ts: m.ts.as_str().to_owned(),
            conv: m.thread_root.as_ref().map(|root| conversation(&m.channel, root)),
            user: m.user.0.to_string(),
            user_name: m.user_name.clone(),
            text: m.text.clone(),
            author: m.author,
            replies_to_bot: m.replies_to_bot,
            in_dm: m.in_dm,
            private_channel: m.private_channel,
            at: m.at,
            expires_at: Some(expires_at),
            thread_root: m.thread_root.as_ref().map(|r| r.as_str().to_owned()),
        }
    }

    fn into_message(self) -> Message {
        Message {
            channel: ChannelId(self.channel.into()),
            ts: Ts::new(&self.ts),
            thread_root: self.thread_root.as_deref().map(Ts::new),
            user: UserId(self.user.into()),
            user_name: self.user_name,
            text: self.text,
            author: self.author,
            replies_to_bot: self.replies_to_bot,
            in_dm: self.in_dm,
            private_channel: self.private_channel,
            at: self.at,
        }
    }
}

/// The channels table's item for a channel: its state as JSON, with the optimistic
/// `version` (both absent reads as a fresh state at version 0), and beside it the
/// fields a judgment writes, each updated on its own without reading the item first:
/// where one is present it wins over the JSON's copy (an item written before they
/// were apart has only the JSON).
#[derive(Deserialize)]
struct ChannelItem {
    #[serde(default, with = "json")]
    state: ChannelState,
    #[serde(default)]
    version: i64,
    /// JSON of a `JudgmentNote`.
    #[serde(default)]
    last_judgment: Option<String>,
    #[serde(default)]
    summary_due: Option<Timestamp>,
    #[serde(default)]
    reflection_due: Option<Timestamp>,
}

impl ChannelItem {
    /// The state with the fields kept apart put in, and its version.
    fn into_state(self) -> PortResult<(ChannelState, i64)> {
        let mut state = self.state;
        if let Some(json) = self.last_judgment {
            state.last_judgment = Some(serde_json::from_str(&json).map_err(backend("decode last judgment"))?);
        }
        state.summary_due = self.summary_due.or(state.summary_due);
        state.reflection_due = self.reflection_due.or(state.reflection_due);
        Ok((state, self.version))
    }
}

/// The attribute holding `task`'s mark (see [`ChannelItem`]).
fn mark_attribute(task: MemoryTask) -> &'static str {
    match task {
        MemoryTask::Summary => "summary_due",
        MemoryTask::Reflection => "reflection_due",
    }
}

/// The judgment item's attribute holding `ChannelState::reflection_lull_at` (N).
const LULL_ATTRIBUTE: &str = "reflection_lull_at";
/// The judgment item's attribute holding `ChannelState::reflection_watermark` (S).
const WATERMARK_ATTRIBUTE: &str = "reflection_watermark";

/// Each answer's intervention is an attribute of its own, `iv#<at, 20 digits>#<thread
/// root>` (JSON), written by one update without a read; the names sort by time.
const INTERVENTION_PREFIX: &str = "iv#";
/// Interventions past the kept ones are removed this many at a time, so trimming costs
/// a call every few answers, not one an answer.
const INTERVENTION_TRIM_SLACK: usize = 10;

fn intervention_attribute(intervention: &Intervention) -> String {
    let root = intervention.thread.root.as_ref().map_or("-", Ts::as_str);
    format!("{INTERVENTION_PREFIX}{:020}#{root}", intervention.at.0)
}

/// An intervention as its `iv#` attribute holds it: without its excerpt and facts
/// (only the newest keeps those, in [`ANSWERS_LAST`]).
fn compact_json(intervention: &Intervention) -> PortResult<String> {
    let compact = Intervention { excerpt: String::new(), facts: Vec::new(), ..intervention.clone() };
    serde_json::to_string(&compact).map_err(backend("encode intervention"))
}

/// Takes the `iv#` attributes out of `item`, decoded.
fn take_interventions(item: &mut Item) -> PortResult<Vec<Intervention>> {
    let apart: Vec<String> = item.keys().filter(|k| k.starts_with(INTERVENTION_PREFIX)).cloned().collect();
    let mut recorded = Vec::with_capacity(apart.len());
    for name in apart {
        if let Some(AttributeValue::S(json)) = item.remove(&name) {
            recorded.push(serde_json::from_str(&json).map_err(backend("decode intervention"))?);
        }
    }
    Ok(recorded)
}

/// A channel's items to its state and version: the channel item's JSON and marks, and
/// the interventions of the answers item merged with those of the channel item (an
/// item written before they moved: as attributes, or as the JSON's copy), newest
/// last, at most [`ChannelState::KEPT_INTERVENTIONS`], the newest in full.
fn channel_state_from(mut item: Item, answers: Option<Item>) -> PortResult<(ChannelState, i64)> {
    let mut recorded = take_interventions(&mut item)?;
    let mut last = None;
    if let Some(mut answers) = answers {
        recorded.extend(take_interventions(&mut answers)?);
        if let Some(AttributeValue::S(json)) = answers.get(ANSWERS_LAST) {
            last = Some(serde_json::from_str::<Intervention>(json).map_err(backend("decode last intervention"))?);
        }
    }
    let (mut state, version) = from_item::<ChannelItem>(item)?.into_state()?;
    if !recorded.is_empty() || last.is_some() {
        let mut all: std::collections::BTreeMap<String, Intervention> =
            state.interventions.drain(..).map(|i| (intervention_attribute(&i), i)).collect();
        all.extend(recorded.into_iter().map(|i| (intervention_attribute(&i), i)));
        // Written with its own `iv#` attribute in the same update; in full here.
        if let Some(last) = last {
            all.insert(intervention_attribute(&last), last);
        }
        let skip = all.len().saturating_sub(ChannelState::KEPT_INTERVENTIONS);
        state.interventions = all.into_values().skip(skip).collect();
        let newest = state.interventions.iter().map(|i| i.at).max();
        state.last_response_at = state.last_response_at.max(newest);
    }
    Ok((state, version))
}

/// The facts table's item for a fact: the fact as JSON without its embedding, which
/// goes apart as bytes (4 a dimension where JSON takes about 12).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct FactItem {
    scope: String,
    id: String,
    #[serde(with = "json")]
    fact: Fact,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "embedding")]
    embedding: Option<Vec<f32>>,
    /// A random number new at every write (N): a write conditional on it finds the fact
    /// as it was read. None on items written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rev: Option<u64>,
}

impl FactItem {
    /// `fact` as a new write stores it: with a fresh revision (never 0, which stands
    /// for none).
    fn written(fact: &Fact) -> Self {
        FactItem {
            scope: fact.channel.0.to_string(),
            id: fact.id.clone(),
            fact: Fact { embedding: None, ..fact.clone() },
            embedding: fact.embedding.clone(),
            rev: Some(fastrand::u64(1..)),
        }
    }
}

/// The facts table's item for a person's note in a channel (scope `#notes#<channel>`):
/// the parts a reflection or an answer updates on their own, without reading it (`tags`
/// SS, added to; `summary`, `last_topics` L, `updated_at`), and, in items written before
/// 2026-11-27, the note as JSON (`note`), which they win over.
#[derive(Serialize, Deserialize)]
struct NoteItem {
    scope: String,
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "json_option")]
    note: Option<UserNote>,
    /// A string set (SS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_topics: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<Timestamp>,
}

impl NoteItem {
    fn into_note(self, channel: &ChannelId, user: &UserId) -> UserNote {
        let mut note = self.note.unwrap_or_else(|| UserNote {
            channel: channel.clone(),
            user: user.clone(),
            ..UserNote::default()
        });
        let mut added = self.tags.unwrap_or_default();
        // A set comes back in no order: sorted, after the ones kept in order before.
        added.sort();
        for tag in added {
            if !note.tags.contains(&tag) {
                note.tags.push(tag);
            }
        }
        note.summary = self.summary.unwrap_or(note.summary);
        note.last_topics = self.last_topics.unwrap_or(note.last_topics);
        note.updated_at = self.updated_at.max(note.updated_at);
        note
    }
}

/// The facts table's item for the workspace memory (without the channel lines).
#[derive(Serialize, Deserialize)]
struct WorkspaceMemoryItem {
    scope: String,
    id: String,
    #[serde(with = "json")]
    workspace: WorkspaceMemory,
}

/// The facts table's item for one channel's line in the workspace memory.
#[derive(Serialize, Deserialize)]
struct ChannelLineItem {
    scope: String,
    id: String,
    #[serde(with = "json")]
    line: ChannelLine,
}

/// The facts table's item for a person's counters (scope `#profiles`). Read only: the
/// counters are written by one `UpdateItem` with ADD.
#[derive(Deserialize)]
struct ProfileItem {
    #[serde(default)]
    interactions: i64,
    #[serde(default)]
    bot_mentions: i64,
    /// A string set (SS).
    #[serde(default)]
    channels: Vec<String>,
    first_at: Option<Timestamp>,
    last_at: Option<Timestamp>,
}

/// The ledger table's item: a claim or a cache entry. `posting` is set by an update
/// only; `expires_at` is the TTL (seconds).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct LedgerItem {
    key: String,
    status: String,
    until: Timestamp,
    expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    posting: Option<bool>,
    /// Which `claim` call took it: a retry of that very call (its first attempt was
    /// applied, its answer lost) finds its own claim, not another delivery's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder: Option<String>,
}

/// A thread's partition key in the conversation index.
fn conversation(channel: &ChannelId, root: &Ts) -> String {
    format!("{}#{}", channel.0, root.as_str())
}

/// The top level's newest messages are read from the table with thread replies
/// filtered out, this many items a page, at most [`TOP_LEVEL_PAGES`] pages' worth: a channel
/// whose last top-level messages lie further back is all threads, and its top level
/// is old news.
const TOP_LEVEL_PAGE: i32 = 100;
const TOP_LEVEL_PAGES: usize = 4;

impl DynamoStore {
    /// `retention` is `MESSAGE_RETENTION_DAYS`: messages expire (TTL) that long after
    /// they were written.
    pub fn new(client: Client, tables: TableNames, clock: Arc<dyn Clock>, retention: Duration) -> Self {
        DynamoStore { client, tables, clock, retention }
    }

    /// The facts table's item (`scope`, `id`), read; `what` names the read in errors.
    async fn get_facts_item(
        &self,
        scope: impl Into<String>,
        id: &str,
        what: &'static str,
    ) -> PortResult<aws_sdk_dynamodb::operation::get_item::GetItemOutput> {
        self.client
            .get_item()
            .table_name(&self.tables.facts)
            .key("scope", s(scope))
            .key("id", s(id))
            .send()
            .await
            .map_err(backend(what))
    }

    /// An update of `user`'s note in `channel` (made if there is none).
    fn note_update(
        &self,
        channel: &ChannelId,
        user: &UserId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.tables.facts)
            .key("scope", s(notes_scope(channel)))
            .key("id", s(&*user.0))
    }

    /// A channel's facts with their revisions.
    async fn facts_of(&self, channel: &ChannelId, consistent: bool) -> PortResult<Vec<(Fact, FactRevision)>> {
        let mut facts = Vec::new();
        for item in self.scope_items(&*channel.0, "query facts", consistent).await? {
            let FactItem { mut fact, embedding, rev, .. } = from_item(item)?;
            if embedding.is_some() {
                fact.embedding = embedding;
            }
            facts.push((fact, FactRevision(rev.unwrap_or(0))));
        }
        Ok(facts)
    }

    /// Every item of a scope of the facts table, page after page (`consistent`: with
    /// every write acknowledged before it, at twice the read units).
    async fn scope_items(
        &self,
        scope: impl Into<String>,
        what: &'static str,
        consistent: bool,
    ) -> PortResult<Vec<Item>> {
        let scope = scope.into();
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.tables.facts)
                .key_condition_expression("#scope = :scope")
                .expression_attribute_names("#scope", "scope")
                .expression_attribute_values(":scope", s(scope.as_str()))
                .consistent_read(consistent)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend(what))?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    async fn put_facts_item(&self, item: &impl Serialize, what: &'static str) -> PortResult<()> {
        self.client
            .put_item()
            .table_name(&self.tables.facts)
            .set_item(Some(to_item(item)?))
            .send()
            .await
            .map_err(backend(what))?;
        Ok(())
    }

    async fn delete_facts_item(&self, scope: impl Into<String>, id: &str, what: &'static str) -> PortResult<()> {
        self.client
            .delete_item()
            .table_name(&self.tables.facts)
            .key("scope", s(scope))
            .key("id", s(id))
            .send()
            .await
            .map_err(backend(what))?;
        Ok(())
    }

    fn now_secs(&self) -> i64 {
        self.clock.now().as_micros() / Timestamp::MICROS_PER_SECOND
    }

    fn message_item(&self, m: &Message) -> PortResult<Item> {
        let expires = m.at.as_micros() / Timestamp::MICROS_PER_SECOND + self.retention.as_secs() as i64;
        to_item(&MessageItem::new(m, expires))
    }

    /// A stored item back to a message; `None` when it has expired (TTL is late) or
    /// does not decode.
    fn message_from(&self, item: Item) -> Option<Arc<Message>> {
        let item: MessageItem = serde_dynamo::from_item(item).ok()?;
        if item.expires_at.is_some_and(|e| e <= self.now_secs()) {
            return None;
        }
        Some(Arc::new(item.into_message()))
    }

    fn message_key(channel: &ChannelId, ts: &Ts) -> Item {
        [("channel".to_owned(), s(&*channel.0)), ("sk".to_owned(), s(ts.sort_key()))].into()
    }

    /// The newest `limit` items of a query (table by channel, or the conversation
    /// index), newest first, `before` (a sort key) exclusive when given.
    async fn newest(
        &self,
        index: Option<&str>,
        partition: (&str, &str),
        before: Option<String>,
        limit: usize,
    ) -> PortResult<Vec<Item>> {
        let (name, value) = partition;
        let mut condition = "#p = :p".to_owned();
        let mut query = self
            .client
            .query()
            .table_name(&self.tables.messages)
            .set_index_name(index.map(str::to_owned))
            .expression_attribute_names("#p", name)
            .expression_attribute_values(":p", s(value))
            .scan_index_forward(false)
            .limit(limit.clamp(1, 1000) as i32);
        if let Some(before) = before {
            condition.push_str(" AND #sk < :before");
            query = query.expression_attribute_names("#sk", "sk").expression_attribute_values(":before", s(before));
        }
        let out = query.key_condition_expression(condition).send().await.map_err(backend("query messages"))?;
        Ok(out.items.unwrap_or_default())
    }

    /// A query of `channel`'s messages, newest first.
    fn channel_newest_first(
        &self,
        channel: &ChannelId,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.tables.messages)
            .key_condition_expression("#p = :p")
            .expression_attribute_names("#p", "channel")
            .expression_attribute_values(":p", s(&*channel.0))
            .scan_index_forward(false)
    }

    /// The newest `limit` messages `query` (newest first) finds, oldest first, and
    /// whether they are all it would find: a channel window's read. Consistent, unlike
    /// the conversation index: a job queued right after its message was stored must find
    /// it (and the page before a window is read in the same job).
    async fn window_page(
        &self,
        query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        limit: usize,
        what: &'static str,
    ) -> PortResult<ChannelWindow> {
        let out = query.consistent_read(true).limit(limit.clamp(1, 1000) as i32).send().await.map_err(backend(what))?;
        // A page that stopped at the limit may have more behind it.
        let complete = out.last_evaluated_key.is_none();
        let mut messages: Vec<Arc<Message>> =
            out.items.unwrap_or_default().into_iter().filter_map(|i| self.message_from(i)).collect();
        messages.reverse();
        Ok(ChannelWindow { messages, complete })
    }

    /// The newest `limit` top-level messages written at or after `since`, oldest first:
    /// the table newest first without thread replies, page by page until enough are
    /// found, one is older than `since`, or the newest [`TOP_LEVEL_PAGES`] ×
    /// [`TOP_LEVEL_PAGE`] items were read.
    async fn newest_top_level(
        &self,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let mut found: Vec<Arc<Message>> = Vec::new();
        let mut start = None;
        // A channel without threads answers from the first page: sized by the limit,
        // it reads (and is charged for) no more than that; later pages are full ones,
        // until as many items as full pages would hold were read.
        let mut left = TOP_LEVEL_PAGE * TOP_LEVEL_PAGES as i32;
        let mut page = (limit.saturating_mul(2).min(TOP_LEVEL_PAGE as usize) as i32).max(1);
        while left > 0 {
            page = page.min(left);
            left -= page;
            let out = self
                .channel_newest_first(channel)
                .filter_expression("attribute_not_exists(#root)")
                .expression_attribute_names("#root", "thread_root")
                .limit(page)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend("query top-level messages"))?;
            let mut older = false;
            for message in out.items.unwrap_or_default().into_iter().filter_map(|i| self.message_from(i)) {
                if message.at < since {
                    older = true;
                    break;
                }
                found.push(message);
            }
            start = out.last_evaluated_key;
            if older || found.len() >= limit || start.is_none() {
                break;
            }
            page = TOP_LEVEL_PAGE;
        }
        found.truncate(limit);
        found.reverse();
        Ok(found)
    }

    /// Reads a channel's whole state: the channel's item, its judgment item and its
    /// answers item in one consistent batch read.
    async fn read_whole_state(&self, channel: &ChannelId) -> PortResult<ChannelState> {
        let (judgment_key, answers_key) = (judgment_key(channel), answers_key(channel));
        // A Slack channel also reads whether Slack's access is gone, in the same batch.
        let slack = !is_discord_id(&channel.0);
        let keys: Vec<Item> = [&*channel.0, &judgment_key, &answers_key]
            .into_iter()
            .chain(slack.then_some(SLACK_GONE_KEY))
            .map(|key| [("channel".to_owned(), s(key))].into())
            .collect();
        let (mut main, mut judgment, mut answers, mut gone) = (None, None, None, None);
        for item in self.batch_get(&self.tables.channels, keys, true, "get channel state").await? {
            match get_s(&item, "channel") {
                Some(key) if key == judgment_key => judgment = Some(item),
                Some(key) if key == answers_key => answers = Some(item),
                Some(SLACK_GONE_KEY) => gone = purge::gone_at(&item)?,
                _ => main = Some(item),
            }
        }
        let main = main.unwrap_or_else(|| [("channel".to_owned(), s(&*channel.0))].into());
        let mut state = channel_state_from(main, answers)?.0;
        state.slack_gone = gone;
        let Some(judgment) = judgment else { return Ok(state) };
        if let Some(json) = get_s(&judgment, "last_judgment") {
            state.last_judgment = Some(serde_json::from_str(json).map_err(backend("decode last judgment"))?);
        }
        // Written apart from the channel's item (see `set_reflection_watermark`); one
        // written before that is in the JSON.
        if let Some(watermark) = get_s(&judgment, WATERMARK_ATTRIBUTE) {
            state.reflection_watermark = Some(Ts::new(watermark));
        }
        // Only spares a queued job: one that cannot be read is as none (one more job),
        // not a channel whose state cannot be read.
        state.reflection_lull_at = judgment.get(LULL_ATTRIBUTE).and_then(|at| match at.as_n().map(|n| n.parse()) {
            Ok(Ok(at)) => Some(Timestamp(at)),
            _ => {
                tracing::warn!(%channel, value = ?at, "unreadable reflection_lull_at, read as none");
                None
            }
        });
        Ok(state)
    }

    /// The items of `keys` in `table` (those that exist, in no order) by BatchGetItem
    /// (at most 100 keys), asking again for the keys DynamoDB did not get to.
    async fn batch_get(
        &self,
        table: &str,
        keys: Vec<Item>,
        consistent: bool,
        what: &'static str,
    ) -> PortResult<Vec<Item>> {
        let mut found = Vec::new();
        if keys.is_empty() {
            return Ok(found);
        }
        let mut wanted = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(consistent)
            .build()
            .map_err(backend(what))?;
        for attempt in 0..UNPROCESSED_RETRIES {
            let out = self.client.batch_get_item().request_items(table, wanted).send().await.map_err(backend(what))?;
            found.extend(out.responses.and_then(|mut r| r.remove(table)).unwrap_or_default());
            // Keys DynamoDB did not get to (throttling) are asked for again.
            match out.unprocessed_keys.and_then(|mut u| u.remove(table)) {
                Some(left) if !left.keys.is_empty() => {
                    wanted = left;
                    tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                }
                _ => return Ok(found),
            }
        }
        Err(PortError::Backend { backend: "dynamodb", message: format!("{what}: keys left unprocessed") })
    }

    /// Reads a channel's item: its state (without the last judgment written apart, see
    /// [`judgment_key`]), its version (0 when there is none yet), and the names of the
    /// attributes an item written before the answers and the judgment moved to items of
    /// their own still holds (`iv#`, `last_judgment`).
    async fn read_state(&self, channel: &ChannelId) -> PortResult<(ChannelState, i64, Vec<String>)> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.channels)
            .key("channel", s(&*channel.0))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend("get channel state"))?;
        let Some(item) = out.item else {
            return Ok((ChannelState::default(), 0, Vec::new()));
        };
        let left: Vec<String> =
            item.keys().filter(|k| k.starts_with(INTERVENTION_PREFIX) || *k == "last_judgment").cloned().collect();
        let (state, version) = channel_state_from(item, None)?;
        Ok((state, version, left))
    }

    /// An update of `channel`'s answers item (see [`ANSWERS_LAST`]).
    fn update_answers(
        &self,
        channel: &ChannelId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client.update_item().table_name(&self.tables.channels).key("channel", s(answers_key(channel)))
    }

    /// One blind SET of `attribute` on the channel's judgment item (see [`judgment_key`]).
    async fn set_on_judgment_item(
        &self,
        channel: &ChannelId,
        attribute: &str,
        value: AttributeValue,
        what: &'static str,
    ) -> PortResult<()> {
        self.client
            .update_item()
            .table_name(&self.tables.channels)
            .key("channel", s(judgment_key(channel)))
            .update_expression("SET #a = :a")
            .expression_attribute_names("#a", attribute)
            .expression_attribute_values(":a", value)
            .send()
            .await
            .map_err(backend(what))?;
        Ok(())
    }

    /// After `record_intervention` made the answer at `at` the one in full: an answers
    /// item written before `last_at` existed held a `last` without its time, which may
    /// have been newer; that one is put back, unless a newer answer came since.
    async fn keep_newer_last(&self, channel: &ChannelId, before: &Item, at: Timestamp) -> PortResult<()> {
        if before.contains_key(ANSWERS_LAST_AT) {
            return Ok(());
        }
        let Some(old) = get_s(before, ANSWERS_LAST) else { return Ok(()) };
        // One that cannot be read is no answer to keep: the new one stands (failing
        // here, after the write, would only fail every redelivery the same way).
        let previous: Intervention = match serde_json::from_str(old) {
            Ok(previous) => previous,
            Err(error) => {
                tracing::warn!(%error, %channel, "the answer in full before this one could not be read; it is replaced");
                return Ok(());
            }
        };
        if previous.at <= at {
            return Ok(());
        }
        let restored = self
            .update_answers(channel)
            .update_expression("SET #last = :last, #at = :previous")
            .condition_expression("#at = :ours")
            .expression_attribute_names("#last", ANSWERS_LAST)
            .expression_attribute_names("#at", ANSWERS_LAST_AT)
            .expression_attribute_values(":last", s(old))
            .expression_attribute_values(":previous", n(previous.at.0))
            .expression_attribute_values(":ours", n(at.0))
            .send()
            .await;
        match restored {
            Ok(_) => Ok(()),
            // A newer answer took `last` meanwhile: it stays.
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(()),
            Err(e) => Err(backend("keep the newer last intervention")(e)),
        }
    }

    /// Moves what an item written before the answers and the judgment had items of their
    /// own still holds into those items, without replacing anything newer there (a
    /// repeat writes the same), so the channel item can let go of it.
    async fn move_out(
        &self,
        channel: &ChannelId,
        interventions: &[Intervention],
        judgment: Option<&JudgmentNote>,
    ) -> PortResult<()> {
        // Each once, by its attribute (an old JSON copy may hold one twice; a SET must
        // not name an attribute twice).
        let apart: std::collections::BTreeMap<String, &Intervention> =
            interventions.iter().map(|i| (intervention_attribute(i), i)).collect();
        if !apart.is_empty() {
            let mut set = Vec::new();
            let mut update = self.update_answers(channel);
            for (i, (attribute, intervention)) in apart.iter().enumerate() {
                set.push(format!("#i{i} = :i{i}"));
                update = update
                    .expression_attribute_names(format!("#i{i}"), attribute)
                    .expression_attribute_values(format!(":i{i}"), s(compact_json(intervention)?));
            }
            update
                .update_expression(format!("SET {}", set.join(", ")))
                .send()
                .await
                .map_err(backend("move interventions"))?;
        }
        // The newest in full, with its time, only where no answer is there in full yet
        // (one written before `last_at` existed has `last` alone, and is newer).
        if let Some(newest) = interventions.iter().max_by_key(|i| i.at) {
            let moved = self
                .update_answers(channel)
                .update_expression("SET #last = :last, #at = :at")
                .condition_expression("attribute_not_exists(#last)")
                .expression_attribute_names("#last", ANSWERS_LAST)
                .expression_attribute_names("#at", ANSWERS_LAST_AT)
                .expression_attribute_values(
                    ":last",
                    s(serde_json::to_string(newest).map_err(backend("encode intervention"))?),
                )
                .expression_attribute_values(":at", n(newest.at.0))
                .send()
                .await;
            match moved {
                Ok(_) => {}
                Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {}
                Err(e) => return Err(backend("move the last intervention")(e)),
            }
        }
        if let Some(note) = judgment {
            self.client
                .update_item()
                .table_name(&self.tables.channels)
                .key("channel", s(judgment_key(channel)))
                .update_expression("SET #j = if_not_exists(#j, :j)")
                .expression_attribute_names("#j", "last_judgment")
                .expression_attribute_values(":j", s(serde_json::to_string(note).map_err(backend("encode judgment"))?))
                .send()
                .await
                .map_err(backend("move last judgment"))?;
        }
        Ok(())
    }

    /// Read, change, write only if nobody wrote in between; again on a conflict.
    async fn update_state(&self, channel: &ChannelId, change: impl Fn(&mut ChannelState)) -> PortResult<()> {
        for _ in 0..VERSION_RETRIES {
            let (mut state, version, left) = self.read_state(channel).await?;
            // Those are kept in their own items; a copy here would only make the item,
            // and every write to it, larger (and would outlive the answers' retention).
            // An item from before they moved holds some: they move first, then go.
            let (interventions, judgment) = (std::mem::take(&mut state.interventions), state.last_judgment.take());
            if !interventions.is_empty() || judgment.is_some() {
                self.move_out(channel, &interventions, judgment.as_ref()).await?;
            }
            change(&mut state);
            let json = serde_json::to_string(&state).map_err(backend("encode channel state"))?;
            // An update, not a put: the fields written apart stay. The marks are written
            // with the JSON, so the one the closure left (or cleared) is the one read.
            let (mut set, mut remove) = (vec!["#s = :s", "#v = :next"], Vec::new());
            let mut update = self
                .client
                .update_item()
                .table_name(&self.tables.channels)
                .key("channel", s(&*channel.0))
                .expression_attribute_names("#s", "state")
                .expression_attribute_values(":s", s(json))
                .expression_attribute_values(":next", n(version + 1));
            for (task, mark, name, value) in [
                (MemoryTask::Summary, state.summary_due, "#sd", ":sd"),
                (MemoryTask::Reflection, state.reflection_due, "#rd", ":rd"),
            ] {
                update = update.expression_attribute_names(name, mark_attribute(task));
                match mark {
                    Some(at) => {
                        set.push(if task == MemoryTask::Summary { "#sd = :sd" } else { "#rd = :rd" });
                        update = update.expression_attribute_values(value, n(at.0));
                    }
                    None => remove.push(name),
                }
            }
            let left_names: Vec<String> = (0..left.len()).map(|i| format!("#o{i}")).collect();
            for (name, attribute) in left_names.iter().zip(&left) {
                update = update.expression_attribute_names(name, attribute);
            }
            remove.extend(left_names.iter().map(String::as_str));
            let mut expression = format!("SET {}", set.join(", "));
            if !remove.is_empty() {
                expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
            }
            update = update.update_expression(expression);
            update = if version == 0 {
                update.condition_expression("attribute_not_exists(#v)")
            } else {
                update.condition_expression("#v = :v").expression_attribute_values(":v", n(version))
            };
            match update.expression_attribute_names("#v", "version").send().await {
                Ok(_) => return Ok(()),
                Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => continue,
                Err(e) => return Err(backend("put channel state")(e)),
            }
        }
        Err(PortError::Backend {
            backend: "dynamodb",
            message: format!("channel state of {channel} kept changing under {VERSION_RETRIES} attempts"),
        })
    }
}

#[async_trait]
impl MessageStore for DynamoStore {
    async fn put_message(&self, message: &Arc<Message>) -> PortResult<PutOutcome> {
        let result = self
            .client
            .put_item()
            .table_name(&self.tables.messages)
            .set_item(Some(self.message_item(message)?))
            .condition_expression("attribute_not_exists(#sk)")
            .expression_attribute_names("#sk", "sk")
            .send()
            .await;
        match result {
            Ok(_) => Ok(PutOutcome::Inserted),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {
                Ok(PutOutcome::AlreadyExists)
            }
            Err(e) => Err(backend("put message")(e)),
        }
    }

    async fn get_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<Option<Arc<Message>>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.messages)
            .set_key(Some(Self::message_key(channel, ts)))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend("get message"))?;
        Ok(out.item.and_then(|i| self.message_from(i)))
    }

    async fn update_text(&self, channel: &ChannelId, ts: &Ts, text: &str) -> PortResult<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.messages)
            .set_key(Some(Self::message_key(channel, ts)))
            .update_expression("SET #text = :text")
            .condition_expression("attribute_exists(#sk)")
            .expression_attribute_names("#text", "text")
            .expression_attribute_names("#sk", "sk")
            .expression_attribute_values(":text", s(text))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(false),
            Err(e) => Err(backend("update message")(e)),
        }
    }

    async fn delete_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<bool> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.tables.messages)
            .set_key(Some(Self::message_key(channel, ts)))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(backend("delete message"))?;
        Ok(out.attributes.is_some_and(|a| !a.is_empty()))
    }

    async fn recent_in_thread(
        &self,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let Some(root) = &thread.root else {
            return self.newest_top_level(&thread.channel, since, limit).await;
        };
        let conv = conversation(&thread.channel, root);
        let items = self.newest(Some(CONVERSATION_INDEX), ("conv", &conv), None, limit).await?;
        Ok(newest_since(items.into_iter().filter_map(|i| self.message_from(i)), since))
    }

    async fn recent_in_channel(
        &self,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let items = self.newest(None, ("channel", &channel.0), None, limit).await?;
        Ok(newest_since(items.into_iter().filter_map(|i| self.message_from(i)), since))
    }

    async fn messages_after(
        &self,
        channel: &ChannelId,
        after: Option<&Ts>,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let mut query = self
            .client
            .query()
            .table_name(&self.tables.messages)
            .expression_attribute_names("#p", "channel")
            .expression_attribute_values(":p", s(&*channel.0))
            .scan_index_forward(true)
            .limit(limit.clamp(1, 1000) as i32);
        query = match after {
            Some(after) => query
                .key_condition_expression("#p = :p AND #sk > :after")
                .expression_attribute_names("#sk", "sk")
                .expression_attribute_values(":after", s(after.sort_key())),
            None => query.key_condition_expression("#p = :p"),
        };
        let out = query.send().await.map_err(backend("query messages after"))?;
        Ok(out.items.unwrap_or_default().into_iter().filter_map(|i| self.message_from(i)).collect())
    }

    async fn channel_window(&self, channel: &ChannelId, limit: usize) -> PortResult<ChannelWindow> {
        self.window_page(self.channel_newest_first(channel), limit, "query channel window").await
    }

    async fn channel_window_before(&self, channel: &ChannelId, before: &Ts, limit: usize) -> PortResult<ChannelWindow> {
        let query = self
            .channel_newest_first(channel)
            .key_condition_expression("#p = :p AND #sk < :before")
            .expression_attribute_names("#sk", "sk")
            .expression_attribute_values(":before", s(before.sort_key()));
        self.window_page(query, limit, "query the page before a channel window").await
    }

    async fn previous_in_channel(&self, channel: &ChannelId, before: &Ts) -> PortResult<Option<Arc<Message>>> {
        // A few at once: expired items that TTL has not removed yet are skipped.
        let items = self.newest(None, ("channel", &channel.0), Some(before.sort_key()), 5).await?;
        Ok(items.into_iter().find_map(|i| self.message_from(i)))
    }

    async fn delete_messages_by(
        &self,
        channel: &ChannelId,
        user: &UserId,
        posted_before: Option<Timestamp>,
    ) -> PortResult<usize> {
        self.delete_messages_where(channel, Some((user, posted_before))).await
    }

    async fn message_channels(&self) -> PortResult<Vec<ChannelId>> {
        self.message_channels_scanned().await
    }

    async fn delete_channel_messages(&self, channel: &ChannelId) -> PortResult<usize> {
        self.delete_messages_where(channel, None).await
    }
}

impl DynamoStore {
    /// Deletes the channel's messages that `by` wrote (those posted before its time,
    /// when given), or all of them (`None`). No index by person: a rare request reads
    /// the channel's keys (bounded by the retention) and deletes the ones it wants; a
    /// repeat after a crash finds what is left.
    async fn delete_messages_where(
        &self,
        channel: &ChannelId,
        by: Option<(&UserId, Option<Timestamp>)>,
    ) -> PortResult<usize> {
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.tables.messages)
                .key_condition_expression("#p = :p")
                .projection_expression("#p, #sk")
                .expression_attribute_names("#p", "channel")
                .expression_attribute_names("#sk", "sk")
                .expression_attribute_values(":p", s(&*channel.0));
            let query = match by {
                None => query,
                Some((user, None)) => query
                    .filter_expression("#u = :u")
                    .expression_attribute_names("#u", "user")
                    .expression_attribute_values(":u", s(&*user.0)),
                Some((user, Some(before))) => query
                    .filter_expression("#u = :u AND #at < :before")
                    .expression_attribute_names("#u", "user")
                    .expression_attribute_values(":u", s(&*user.0))
                    .expression_attribute_names("#at", "at")
                    .expression_attribute_values(":before", n(before.as_micros())),
            };
            let out = query.set_exclusive_start_key(start).send().await.map_err(backend("query messages to delete"))?;
            keys.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
        // 25 to a call (DynamoDB's most): someone who wrote thousands of messages is
        // forgotten in seconds, not in one call a message.
        for chunk in keys.chunks(BATCH_WRITE_ITEMS) {
            let requests = chunk
                .iter()
                .map(|key| {
                    let delete = DeleteRequest::builder().set_key(Some(key.clone())).build();
                    delete.map(|d| WriteRequest::builder().delete_request(d).build())
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(backend("build message deletes"))?;
            self.batch_delete(&self.tables.messages, requests, "delete messages").await?;
        }
        Ok(keys.len())
    }
}

/// Newest-first messages cut at `since`, returned oldest first.
fn newest_since(newest_first: impl Iterator<Item = Arc<Message>>, since: Timestamp) -> Vec<Arc<Message>> {
    let mut out: Vec<Arc<Message>> = newest_first.take_while(|m| m.at >= since).collect();
    out.reverse();
    out
}

#[async_trait]
impl ChannelStateStore for DynamoStore {
    async fn channel_state(&self, channel: &ChannelId) -> PortResult<Arc<ChannelState>> {
        Ok(Arc::new(self.read_whole_state(channel).await?))
    }

    async fn record_intervention(&self, channel: &ChannelId, intervention: Intervention) -> PortResult<()> {
        // One blind update of its own attribute (repeating it writes the same one), and
        // of `last` unless a newer answer is there already (a resumed, older answer
        // must not take its place). The item as it was comes back without a read (no read
        // capacity): when too many have piled up, the oldest go in one more update.
        let full = serde_json::to_string(&intervention).map_err(backend("encode intervention"))?;
        let compact = compact_json(&intervention)?;
        let attribute = intervention_attribute(&intervention);
        let as_newest = self
            .update_answers(channel)
            .update_expression("SET #i = :i, #last = :last, #at = :at")
            .condition_expression("attribute_not_exists(#at) OR #at <= :at")
            .expression_attribute_names("#i", &attribute)
            .expression_attribute_names("#last", ANSWERS_LAST)
            .expression_attribute_names("#at", ANSWERS_LAST_AT)
            .expression_attribute_values(":i", s(&compact))
            .expression_attribute_values(":last", s(full))
            .expression_attribute_values(":at", n(intervention.at.0))
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        let before = match as_newest {
            Ok(out) => {
                let before = out.attributes.unwrap_or_default();
                self.keep_newer_last(channel, &before, intervention.at).await?;
                before
            }
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => self
                .update_answers(channel)
                .update_expression("SET #i = :i")
                .expression_attribute_names("#i", &attribute)
                .expression_attribute_values(":i", s(compact))
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map_err(backend("record intervention"))?
                .attributes
                .unwrap_or_default(),
            Err(e) => return Err(backend("record intervention")(e)),
        };
        let mut recorded: Vec<String> = before
            .into_keys()
            .filter(|k| k.starts_with(INTERVENTION_PREFIX))
            .chain(std::iter::once(attribute))
            .collect();
        recorded.sort();
        recorded.dedup();
        if recorded.len() <= ChannelState::KEPT_INTERVENTIONS + INTERVENTION_TRIM_SLACK {
            return Ok(());
        }
        let stale = &recorded[..recorded.len() - ChannelState::KEPT_INTERVENTIONS];
        let names: Vec<String> = (0..stale.len()).map(|i| format!("#r{i}")).collect();
        let mut trim = self.update_answers(channel).update_expression(format!("REMOVE {}", names.join(", ")));
        for (name, attribute) in names.iter().zip(stale) {
            trim = trim.expression_attribute_names(name, attribute);
        }
        trim.send().await.map_err(backend("trim interventions"))?;
        Ok(())
    }

    async fn record_judgment(
        &self,
        channel: &ChannelId,
        note: JudgmentNote,
        reflection_lull_at: Option<Timestamp>,
    ) -> PortResult<()> {
        // Every judgment writes this: one blind update of its own small item, no read.
        let json = serde_json::to_string(&note).map_err(backend("encode last judgment"))?;
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.channels)
            .key("channel", s(judgment_key(channel)))
            .expression_attribute_names("#j", "last_judgment")
            .expression_attribute_values(":j", s(json));
        let update = match reflection_lull_at {
            Some(at) => update
                .update_expression("SET #j = :j, #l = :l")
                .expression_attribute_names("#l", LULL_ATTRIBUTE)
                .expression_attribute_values(":l", n(at.0)),
            None => update.update_expression("SET #j = :j"),
        };
        update.send().await.map_err(backend("update last judgment"))?;
        Ok(())
    }

    async fn note_lull_reflection(&self, channel: &ChannelId, at: Timestamp) -> PortResult<()> {
        self.set_on_judgment_item(channel, LULL_ATTRIBUTE, n(at.0), "note lull reflection").await
    }

    async fn set_muted(&self, channel: &ChannelId, until: Option<Timestamp>) -> PortResult<()> {
        self.update_state(channel, |state| state.muted_until = until).await
    }

    async fn set_opener(&self, channel: &ChannelId, opener: OpenerState) -> PortResult<()> {
        self.update_state(channel, |state| state.opener = opener.clone()).await
    }

    async fn set_shadow(&self, channel: &ChannelId, shadow: Option<Shadow>) -> PortResult<()> {
        self.update_state(channel, |state| state.shadow = shadow).await
    }

    async fn set_channel_memory(&self, channel: &ChannelId, memory: ChannelMemory) -> PortResult<bool> {
        // Decided on the state the conditional write replaces (the last attempt's).
        let stored = std::sync::atomic::AtomicBool::new(false);
        self.update_state(channel, |state| {
            let newer = memory.generation >= state.memory.generation;
            stored.store(newer, std::sync::atomic::Ordering::Relaxed);
            if newer {
                state.memory = memory.clone();
                state.clear_marks(MemoryTask::Summary);
            }
        })
        .await?;
        Ok(stored.load(std::sync::atomic::Ordering::Relaxed))
    }

    async fn set_reflection_watermark(&self, channel: &ChannelId, ts: Ts) -> PortResult<()> {
        // In the small judgment item, by one blind update: the channel's item is large
        // and charged by size, and read first to be written whole.
        self.set_on_judgment_item(channel, WATERMARK_ATTRIBUTE, s(ts.as_str()), "update reflection watermark").await
    }

    async fn mark_due(
        &self,
        channel: &ChannelId,
        task: MemoryTask,
        due: Timestamp,
        now: Timestamp,
    ) -> PortResult<bool> {
        // `ChannelState::mark_due`'s rule as the condition of one update, no read. It
        // bumps the version, so a whole-state write that read the old mark retries. (An
        // item written before the marks were apart keeps its mark in the JSON only,
        // which this does not see: once, a second job may be queued, and its claim
        // dedupes it.)
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.channels)
            .key("channel", s(&*channel.0))
            .update_expression("SET #d = :due ADD #v :one")
            .condition_expression("attribute_not_exists(#d) OR #d <= :now OR #d > :due")
            .expression_attribute_names("#d", mark_attribute(task))
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":due", n(due.0))
            .expression_attribute_values(":now", n(now.0))
            .expression_attribute_values(":one", n(1))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(false),
            Err(e) => Err(backend("mark channel state")(e)),
        }
    }

    async fn defer(&self, channel: &ChannelId, task: MemoryTask, until: Timestamp) -> PortResult<()> {
        self.update_state(channel, |state| state.defer(task, until)).await
    }

    async fn clear_marks(&self, channel: &ChannelId, task: MemoryTask) -> PortResult<()> {
        self.update_state(channel, |state| state.clear_marks(task)).await
    }

    async fn workspace_memory(&self) -> PortResult<WorkspaceMemory> {
        // One Query reads the memory and every channel's line (a page holds 1 MB).
        let mut memory = None;
        let mut lines = Vec::new();
        for item in self.scope_items(WORKSPACE_SCOPE, "query workspace memory", false).await? {
            match get_s(&item, "id") {
                Some(WORKSPACE_MEMORY_ID) => memory = Some(from_item::<WorkspaceMemoryItem>(item)?.workspace),
                Some(_) => lines.push(from_item::<ChannelLineItem>(item)?.line),
                None => {}
            }
        }
        let memory = match memory {
            Some(memory) => memory,
            None => self.legacy_workspace_memory().await?,
        };
        Ok(WorkspaceMemory { channel_lines: crate::adapters::memory::newest_first(lines), ..memory })
    }

    async fn workspace_memory_without_lines(&self) -> PortResult<WorkspaceMemory> {
        let out = self.get_facts_item(WORKSPACE_SCOPE, WORKSPACE_MEMORY_ID, "get workspace memory").await?;
        match out.item {
            Some(item) => Ok(from_item::<WorkspaceMemoryItem>(item)?.workspace),
            None => self.legacy_workspace_memory().await,
        }
    }

    async fn set_workspace_memory(&self, memory: WorkspaceMemory) -> PortResult<()> {
        // The item the memory was kept in before (read while the one below is missing)
        // goes first, at every write (once an hour at most, and one unit): a forget's
        // wipe that dies halfway leaves no copy behind (its retry reads the memory
        // again), and neither does an old version that wrote it again during a deploy.
        self.client
            .delete_item()
            .table_name(&self.tables.channels)
            .key("channel", s(LEGACY_WORKSPACE_KEY))
            .send()
            .await
            .map_err(backend("delete the old workspace memory"))?;
        let item = WorkspaceMemoryItem {
            scope: WORKSPACE_SCOPE.into(),
            id: WORKSPACE_MEMORY_ID.into(),
            workspace: WorkspaceMemory { channel_lines: Vec::new(), ..memory },
        };
        self.put_facts_item(&item, "put workspace memory").await
    }

    async fn set_channel_line(&self, channel: &ChannelId, line: Option<ChannelLine>) -> PortResult<()> {
        // An item of its own per channel: a summary's write is charged for its line,
        // not for every channel's, and no number of channels fills an item.
        let id = format!("{CHANNEL_LINE_PREFIX}{channel}");
        let Some(line) = line else {
            self.delete_facts_item(WORKSPACE_SCOPE, &id, "delete a channel line").await?;
            // And its copy in the old item, if that is still there (a forget's remake
            // of this channel's memory, a channel gone private).
            let removed = self
                .client
                .update_item()
                .table_name(&self.tables.channels)
                .key("channel", s(LEGACY_WORKSPACE_KEY))
                .update_expression("REMOVE #line")
                .condition_expression("attribute_exists(channel)")
                .expression_attribute_names("#line", id)
                .send()
                .await;
            return match removed {
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(()),
                Err(e) => Err(backend("remove a channel line from the old workspace memory")(e)),
            };
        };
        let item = ChannelLineItem { scope: WORKSPACE_SCOPE.into(), id, line };
        self.put_facts_item(&item, "put a channel line").await
    }

    async fn state_channels(&self) -> PortResult<Vec<ChannelId>> {
        self.state_channels_scanned().await
    }

    async fn delete_channel_state(&self, channel: &ChannelId) -> PortResult<()> {
        self.delete_state_items(channel).await?;
        self.set_channel_line(channel, None).await
    }

    async fn slack_gone(&self) -> PortResult<Option<Timestamp>> {
        self.read_slack_gone().await
    }

    async fn mark_slack_gone(&self, at: Timestamp) -> PortResult<bool> {
        self.change_slack_gone(at, true).await
    }

    async fn clear_slack_gone(&self, at: Timestamp) -> PortResult<bool> {
        self.change_slack_gone(at, false).await
    }
}

impl DynamoStore {
    /// The workspace memory where it was kept before 2026-11-27 (the channels table's
    /// `#workspace` item, beside every channel's line): read until the memory is
    /// written where it is now, so an upgrade keeps the workspace's history. Its lines
    /// are not read: each channel's comes back with its next summary.
    async fn legacy_workspace_memory(&self) -> PortResult<WorkspaceMemory> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.channels)
            .key("channel", s(LEGACY_WORKSPACE_KEY))
            .projection_expression("workspace")
            .send()
            .await
            .map_err(backend("get the old workspace memory"))?;
        let memory = out.item.as_ref().and_then(|item| get_s(item, "workspace"));
        Ok(memory
            .map(serde_json::from_str::<WorkspaceMemory>)
            .transpose()
            .map_err(backend("decode the old workspace memory"))?
            .unwrap_or_default())
    }
}

/// An embedding as DynamoDB keeps it: each f32 in 4 little-endian bytes.
pub fn embedding_to_bytes(embedding: &[f32]) -> Vec<u8> {
    embedding.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`embedding_to_bytes`]; a length that is not a multiple of 4 is an error.
pub fn embedding_from_bytes(bytes: &[u8]) -> Result<Vec<f32>, String> {
    if !bytes.len().is_multiple_of(4) {
        return Err(format!("{} bytes are not a whole number of f32s", bytes.len()));
    }
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// The facts table holds people's notes under `#notes#<channel>` and their counters
/// under `#profiles` (no channel id starts with '#').
fn notes_scope(channel: &ChannelId) -> String {
    format!("#notes#{}", channel.0)
}
const PROFILES_SCOPE: &str = "#profiles";

#[async_trait]
impl FactStore for DynamoStore {
    async fn facts(&self, channel: &ChannelId) -> PortResult<Vec<Fact>> {
        Ok(self.facts_of(channel, false).await?.into_iter().map(|(fact, _)| fact).collect())
    }

    async fn facts_as_read(&self, channel: &ChannelId) -> PortResult<Vec<(Fact, FactRevision)>> {
        // Consistent: read again after a refused write, the facts must show that write.
        self.facts_of(channel, true).await
    }

    async fn put_fact(&self, fact: &Fact) -> PortResult<()> {
        self.put_facts_item(&FactItem::written(fact), "put fact").await
    }

    async fn put_fact_if_unchanged(&self, fact: &Fact, read: Option<FactRevision>) -> PortResult<bool> {
        let request =
            self.client.put_item().table_name(&self.tables.facts).set_item(Some(to_item(&FactItem::written(fact))?));
        let request = match read {
            None => request.condition_expression("attribute_not_exists(#id)").expression_attribute_names("#id", "id"),
            Some(FactRevision(0)) => request
                .condition_expression("attribute_exists(#id) AND attribute_not_exists(#rev)")
                .expression_attribute_names("#id", "id")
                .expression_attribute_names("#rev", "rev"),
            Some(FactRevision(rev)) => request
                .condition_expression("#rev = :rev")
                .expression_attribute_names("#rev", "rev")
                .expression_attribute_values(":rev", n(rev)),
        };
        match request.send().await {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(false),
            Err(e) => Err(backend("put fact if unchanged")(e)),
        }
    }

    async fn delete_fact(&self, channel: &ChannelId, id: &str) -> PortResult<()> {
        self.delete_facts_item(&*channel.0, id, "delete fact").await
    }

    async fn fact_channels(&self) -> PortResult<Vec<ChannelId>> {
        let mut channels: Vec<ChannelId> = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.tables.facts)
                .projection_expression("#scope")
                .expression_attribute_names("#scope", "scope")
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend("scan fact channels"))?;
            for item in out.items.unwrap_or_default() {
                if let Some(scope) = get_s(&item, "scope").filter(|s| !s.starts_with('#')) {
                    let channel = ChannelId(scope.to_owned().into());
                    if !channels.contains(&channel) {
                        channels.push(channel);
                    }
                }
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(channels);
            }
        }
    }

    async fn user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<Option<UserNote>> {
        let out = self.get_facts_item(notes_scope(channel), &user.0, "get user note").await?;
        Ok(out.item.map(from_item::<NoteItem>).transpose()?.map(|item| item.into_note(channel, user)))
    }

    async fn note_reflection(
        &self,
        channel: &ChannelId,
        user: &UserId,
        tags: &[String],
        summary: &str,
        at: Timestamp,
    ) -> PortResult<()> {
        let mut request = self
            .note_update(channel, user)
            .expression_attribute_names("#at", "updated_at")
            .expression_attribute_values(":at", n(at.0));
        let mut set = vec!["#at = :at"];
        if !summary.is_empty() {
            set.push("#summary = :summary");
            request = request
                .expression_attribute_names("#summary", "summary")
                .expression_attribute_values(":summary", s(summary));
        }
        let mut expression = format!("SET {}", set.join(", "));
        // A set given twice the same string, or none, is refused.
        let mut tags = tags.to_vec();
        tags.sort();
        tags.dedup();
        if !tags.is_empty() {
            expression.push_str(" ADD #tags :tags");
            request = request
                .expression_attribute_names("#tags", "tags")
                .expression_attribute_values(":tags", AttributeValue::Ss(tags));
        }
        request.update_expression(expression).send().await.map_err(backend("note a reflection"))?;
        Ok(())
    }

    async fn note_topics(
        &self,
        channel: &ChannelId,
        user: &UserId,
        topics: &[String],
        at: Timestamp,
    ) -> PortResult<()> {
        let topics = AttributeValue::L(topics.iter().map(|t| s(t.as_str())).collect());
        self.note_update(channel, user)
            .update_expression("SET #topics = :topics, #at = :at")
            .expression_attribute_names("#topics", "last_topics")
            .expression_attribute_names("#at", "updated_at")
            .expression_attribute_values(":topics", topics)
            .expression_attribute_values(":at", n(at.0))
            .send()
            .await
            .map_err(backend("note topics"))?;
        Ok(())
    }

    async fn delete_user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<()> {
        self.delete_facts_item(notes_scope(channel), &user.0, "delete user note").await
    }

    async fn profile(&self, user: &UserId) -> PortResult<Option<UserProfile>> {
        let out = self.get_facts_item(PROFILES_SCOPE, &user.0, "get profile").await?;
        out.item.map(|item| profile_from(user, item)).transpose()
    }

    async fn profile_and_note(
        &self,
        channel: &ChannelId,
        user: &UserId,
    ) -> PortResult<(Option<UserProfile>, Option<UserNote>)> {
        let notes = notes_scope(channel);
        let keys = [PROFILES_SCOPE, notes.as_str()]
            .into_iter()
            .map(|scope| [("scope".to_owned(), s(scope)), ("id".to_owned(), s(&*user.0))].into())
            .collect();
        let (mut profile, mut note) = (None, None);
        for item in self.batch_get(&self.tables.facts, keys, false, "get profile and note").await? {
            if get_s(&item, "scope") == Some(PROFILES_SCOPE) {
                profile = Some(profile_from(user, item)?);
            } else {
                note = Some(from_item::<NoteItem>(item)?.into_note(channel, user));
            }
        }
        Ok((profile, note))
    }

    async fn count_message(
        &self,
        user: &UserId,
        channel: &ChannelId,
        at: Timestamp,
        called_bot: bool,
    ) -> PortResult<()> {
        self.client
            .update_item()
            .table_name(&self.tables.facts)
            .key("scope", s(PROFILES_SCOPE))
            .key("id", s(&*user.0))
            .update_expression(
                "ADD interactions :one, bot_mentions :called, channels :channel \
                 SET first_at = if_not_exists(first_at, :at), last_at = :at",
            )
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":called", n(u8::from(called_bot)))
            .expression_attribute_values(":channel", AttributeValue::Ss(vec![channel.0.to_string()]))
            .expression_attribute_values(":at", n(at.as_micros()))
            .send()
            .await
            .map_err(backend("count message"))?;
        Ok(())
    }

    async fn delete_profile(&self, user: &UserId) -> PortResult<()> {
        self.delete_facts_item(PROFILES_SCOPE, &user.0, "delete profile").await
    }

    async fn noted_users(&self, channel: &ChannelId) -> PortResult<Vec<UserId>> {
        self.noted_users_queried(channel).await
    }

    async fn profiled_users(&self) -> PortResult<Vec<UserId>> {
        self.profiled_users_queried().await
    }
}

/// A person's profile item as a [`UserProfile`].
fn profile_from(user: &UserId, item: Item) -> PortResult<UserProfile> {
    let item: ProfileItem = from_item(item)?;
    let mut channels: Vec<ChannelId> = item.channels.into_iter().map(|c| ChannelId(c.into())).collect();
    channels.sort();
    Ok(UserProfile {
        user: user.clone(),
        interactions: item.interactions.max(0) as u64,
        bot_mentions: item.bot_mentions.max(0) as u64,
        channels,
        first_interaction: item.first_at,
        last_interaction: item.last_at,
    })
}

const IN_PROGRESS: &str = "in_progress";
const COMPLETED: &str = "completed";
const CACHED: &str = "cached";
/// Ledger items outlive their `until` by a day before TTL removes them.
const LEDGER_GRACE_SECONDS: i64 = 86_400;

impl DynamoStore {
    async fn put_ledger(&self, key: &str, status: &str, until: Timestamp, value: Option<&str>) -> PortResult<()> {
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

/// Creates the three tables where they do not exist (`kuuki setup-aws`, tests); in
/// AWS the SAM template owns them.
/// Whether TTL is on (or being turned on) for `table`.
async fn ttl_enabled(client: &Client, table: &str) -> Result<bool, String> {
    use aws_sdk_dynamodb::types::TimeToLiveStatus;
    let status = client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(|e| format!("TTL of {table}: {e:?}"))?
        .time_to_live_description
        .and_then(|d| d.time_to_live_status);
    Ok(matches!(status, Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)))
}

pub async fn create_tables(client: &Client, tables: &TableNames) -> Result<(), String> {
    let existing =
        client.list_tables().send().await.map_err(|e| format!("list tables: {e:?}"))?.table_names.unwrap_or_default();
    let key = |name: &str, kind: KeyType| KeySchemaElement::builder().attribute_name(name).key_type(kind).build();
    let attr =
        |name: &str| AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build();
    let specs: [(&str, Vec<&str>, bool); 4] = [
        (&tables.messages, vec!["channel", "sk"], true),
        (&tables.channels, vec!["channel"], false),
        (&tables.ledger, vec!["key"], true),
        (&tables.facts, vec!["scope", "id"], false),
    ];
    for (name, keys, ttl) in specs {
        if existing.iter().any(|t| t == name) {
            continue;
        }
        let mut create = client.create_table().table_name(name).billing_mode(BillingMode::PayPerRequest);
        for (i, k) in keys.iter().enumerate() {
            let kind = if i == 0 { KeyType::Hash } else { KeyType::Range };
            create = create
                .key_schema(key(k, kind).map_err(|e| e.to_string())?)
                .attribute_definitions(attr(k).map_err(|e| e.to_string())?);
        }
        if name == tables.messages {
            let index = GlobalSecondaryIndex::builder()
                .index_name(CONVERSATION_INDEX)
                .key_schema(key("conv", KeyType::Hash).map_err(|e| e.to_string())?)
                .key_schema(key("sk", KeyType::Range).map_err(|e| e.to_string())?)
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .map_err(|e| e.to_string())?;
            create =
                create.attribute_definitions(attr("conv").map_err(|e| e.to_string())?).global_secondary_indexes(index);
        }
        match create.send().await {
            Ok(_) => {}
            // The table is there: the SDK retried a create that had succeeded (a slow
            // answer), or another setup made it meanwhile. Its TTL is still checked.
            Err(SdkError::ServiceError(e)) if e.err().is_resource_in_use_exception() => {}
            Err(e) => return Err(format!("create table {name}: {e:?}")),
        }
        if ttl && !ttl_enabled(client, name).await? {
            let spec = TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name("expires_at")
                .build()
                .map_err(|e| e.to_string())?;
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(spec)
                .send()
                .await
                .map_err(|e| format!("enable TTL on {name}: {e:?}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_four_little_endian_bytes_a_dimension() {
        let embedding = [1.0_f32, -0.5, f32::MIN_POSITIVE, 0.1];
        let bytes = embedding_to_bytes(&embedding);
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[..4], &[0x00, 0x00, 0x80, 0x3f], "1.0 little-endian");
        assert_eq!(embedding_from_bytes(&bytes).unwrap(), embedding);
        assert!(embedding_from_bytes(&bytes[..5]).is_err());
        assert_eq!(embedding_from_bytes(&[]).unwrap(), Vec::<f32>::new());
    }

    // The layouts below are the ones the hand-built items had: existing items must read.

    fn item(attributes: &[(&str, AttributeValue)]) -> Item {
        attributes.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn message(thread_root: Option<&str>) -> Message {
        Message {
            channel: ChannelId("C1".into()),
            ts: Ts::new("1712345678.000100"),
            thread_root: thread_root.map(Ts::new),
            user: UserId("U1".into()),
            user_name: "ana".into(),
            text: "hi".into(),
            author: Author::OtherBot,
            replies_to_bot: true,
            in_dm: false,
            private_channel: true,
            at: Timestamp(1_712_345_678_000_100),
        }
    }

    #[test]
    fn message_items_keep_their_layout() {
        let m = message(Some("1712345600.000001"));
        let expected = item(&[
            ("channel", s("C1")),
            ("sk", s("00000000001712345678.000100000")),
            ("ts", s("1712345678.000100")),
            ("conv", s("C1#1712345600.000001")),
            ("thread_root", s("1712345600.000001")),
            ("user", s("U1")),
            ("user_name", s("ana")),
            ("text", s("hi")),
            ("author", s("other_bot")),
            ("replies_to_bot", AttributeValue::Bool(true)),
            ("in_dm", AttributeValue::Bool(false)),
            ("private_channel", AttributeValue::Bool(true)),
            ("at", n(1_712_345_678_000_100_i64)),
            ("expires_at", n(99)),
        ]);
        assert_eq!(to_item(&MessageItem::new(&m, 99)).unwrap(), expected);
        assert_eq!(from_item::<MessageItem>(expected).unwrap().into_message(), m);
        for (author, name) in [(Author::Human, "human"), (Author::OwnBot, "own_bot"), (Author::OtherBot, "other_bot")] {
            let written = to_item(&MessageItem::new(&Message { author, ..m.clone() }, 99)).unwrap();
            assert_eq!(written.get("author"), Some(&s(name)));
        }

        let top = message(None);
        let written = to_item(&MessageItem::new(&top, 99)).unwrap();
        assert!(!written.contains_key("conv"), "a top-level message is not written to the conversation index");
        assert!(!written.contains_key("thread_root"), "no NULL attribute for a top-level message");
        // An item written before the index was sparse still reads.
        let mut before = written.clone();
        before.insert("conv".into(), s("C1#-"));
        assert_eq!(from_item::<MessageItem>(before).unwrap().into_message(), top);
        // The optional attributes may be absent.
        let mut sparse = written;
        for name in ["user_name", "text", "replies_to_bot", "in_dm", "private_channel", "expires_at"] {
            sparse.remove(name);
        }
        let read = from_item::<MessageItem>(sparse).unwrap();
        assert_eq!(read.expires_at, None);
        let read = read.into_message();
        assert_eq!((read.text.as_str(), read.replies_to_bot, read.private_channel), ("", false, false));
    }

    #[test]
    fn channel_items_keep_their_layout() {
        let state = ChannelState {
            muted_until: Some(Timestamp(5)),
            summary_due: Some(Timestamp(7)),
            reflection_due: Some(Timestamp(8)),
            ..ChannelState::default()
        };
        let json = serde_json::to_string(&state).unwrap();
        // As written before the judgment's fields were apart: all in the JSON.
        let whole = item(&[("channel", s("C1")), ("state", s(&json)), ("version", n(3))]);
        assert_eq!(from_item::<ChannelItem>(whole.clone()).unwrap().into_state().unwrap(), (state.clone(), 3));
        // The fields written apart win over the JSON's copies.
        let note = JudgmentNote {
            at: Timestamp(9),
            ts: Ts::new("1.000001"),
            user: UserId("U1".into()),
            text: "hi".into(),
            score: 10,
            breakdown: Default::default(),
            decision: crate::domain::Decision::Skip,
            respond: false,
            response_type: None,
            reason: "low".into(),
        };
        let mut apart = whole;
        apart.insert("last_judgment".into(), s(serde_json::to_string(&note).unwrap()));
        apart.insert("summary_due".into(), n(70));
        let (read, version) = from_item::<ChannelItem>(apart).unwrap().into_state().unwrap();
        assert_eq!(version, 3);
        assert_eq!(read.last_judgment, Some(note));
        assert_eq!((read.summary_due, read.reflection_due), (Some(Timestamp(70)), Some(Timestamp(8))));
        // Only by-field writes so far (no JSON, no version): a fresh state.
        let bare = item(&[("channel", s("C1")), ("reflection_due", n(4))]);
        let (read, version) = from_item::<ChannelItem>(bare).unwrap().into_state().unwrap();
        assert_eq!(version, 0);
        assert_eq!(read, ChannelState { reflection_due: Some(Timestamp(4)), ..ChannelState::default() });
    }

    #[test]
    fn interventions_apart_merge_with_the_json_copy() {
        let intervention = |secs: i64| Intervention {
            at: Timestamp(secs),
            thread: ThreadKey::top_level(ChannelId("C1".into())),
            response_type: crate::domain::ResponseType::ShortAck,
            excerpt: format!("at {secs}"),
            facts: Vec::new(),
        };
        // The JSON copy (a whole-state write, or an item from before) holds 1 and 2.
        let state = ChannelState {
            last_response_at: Some(Timestamp(2)),
            interventions: vec![intervention(1), intervention(2)],
            ..ChannelState::default()
        };
        let mut written =
            item(&[("channel", s("C1")), ("state", s(serde_json::to_string(&state).unwrap())), ("version", n(1))]);
        // Apart: 2 again (written before that copy) and 3 to 24.
        for secs in std::iter::once(2).chain(3..=24) {
            let i = intervention(secs);
            written.insert(intervention_attribute(&i), s(serde_json::to_string(&i).unwrap()));
        }
        let (read, version) = channel_state_from(written.clone(), None).unwrap();
        assert_eq!(version, 1);
        let excerpts: Vec<&str> = read.interventions.iter().map(|i| i.excerpt.as_str()).collect();
        let newest: Vec<String> = (5..=24).map(|secs| format!("at {secs}")).collect();
        assert_eq!(excerpts, newest, "each once, newest last, the kept number");
        assert_eq!(read.last_response_at, Some(Timestamp(24)));

        // The answers item: 25 and 26 without their excerpts, 26 in full as `last`.
        let mut answers = item(&[("channel", s("#answers#C1"))]);
        for secs in [25, 26] {
            let compact = Intervention { excerpt: String::new(), ..intervention(secs) };
            answers.insert(intervention_attribute(&compact), s(serde_json::to_string(&compact).unwrap()));
        }
        answers.insert(ANSWERS_LAST.into(), s(serde_json::to_string(&intervention(26)).unwrap()));
        let (read, _) = channel_state_from(written, Some(answers)).unwrap();
        let excerpts: Vec<&str> = read.interventions.iter().map(|i| i.excerpt.as_str()).collect();
        assert_eq!(excerpts.len(), ChannelState::KEPT_INTERVENTIONS);
        assert_eq!(&excerpts[excerpts.len() - 3..], ["at 24", "", "at 26"], "the newest in full");
        assert_eq!(read.last_response_at, Some(Timestamp(26)));
        // The names sort by time.
        assert!(intervention_attribute(&intervention(9)) < intervention_attribute(&intervention(10)));
    }

    #[test]
    fn fact_items_keep_the_embedding_apart_as_bytes() {
        let fact = Fact {
            id: "f1".into(),
            channel: ChannelId("C1".into()),
            content: "likes tea".into(),
            keywords: vec!["tea".into()],
            source_users: vec!["U1".into()],
            confidence: 0.8,
            shareable: false,
            created_at: Timestamp(1),
            confirmed_at: Timestamp(2),
            strength: 1,
            source_messages: vec![],
            embedding: None,
        };
        let json = serde_json::to_string(&fact).unwrap();
        let with = FactItem {
            scope: "C1".into(),
            id: "f1".into(),
            fact: fact.clone(),
            embedding: Some(vec![1.0, -0.5]),
            rev: Some(7),
        };
        let expected = item(&[
            ("scope", s("C1")),
            ("id", s("f1")),
            ("fact", s(&json)),
            ("embedding", AttributeValue::B(embedding_to_bytes(&[1.0, -0.5]).into())),
            ("rev", n(7)),
        ]);
        assert_eq!(to_item(&with).unwrap(), expected);
        assert_eq!(from_item::<FactItem>(expected).unwrap(), with);

        let without = FactItem { embedding: None, rev: None, ..with };
        let written = to_item(&without).unwrap();
        assert!(!written.contains_key("embedding") && !written.contains_key("rev"));
        assert_eq!(from_item::<FactItem>(written).unwrap(), without);
    }

    #[test]
    fn note_and_profile_items_keep_their_layout() {
        let note = UserNote { channel: ChannelId("C1".into()), user: UserId("U1".into()), ..UserNote::default() };
        let json = serde_json::to_string(&note).unwrap();
        let whole = NoteItem {
            scope: "#notes#C1".into(),
            id: "U1".into(),
            note: Some(note.clone()),
            tags: None,
            summary: None,
            last_topics: None,
            updated_at: None,
        };
        let written = to_item(&whole).unwrap();
        assert_eq!(written, item(&[("scope", s("#notes#C1")), ("id", s("U1")), ("note", s(&json))]));
        let (c1, u1) = (ChannelId("C1".into()), UserId("U1".into()));
        assert_eq!(from_item::<NoteItem>(written).unwrap().into_note(&c1, &u1), note);
        // As the reflection's and the answer's updates (ADD, SET) leave it, over a note
        // stored whole: theirs win, the tags are added to.
        let stored = UserNote { tags: vec!["rust".into()], summary: "old".into(), ..note.clone() };
        let updated: NoteItem = from_item(item(&[
            ("scope", s("#notes#C1")),
            ("id", s("U1")),
            ("note", s(serde_json::to_string(&stored).unwrap())),
            ("tags", AttributeValue::Ss(vec!["infra".into(), "cats".into(), "rust".into()])),
            ("summary", s("new")),
            ("last_topics", AttributeValue::L(vec![s("deploy")])),
            ("updated_at", n(30)),
        ]))
        .unwrap();
        let read = updated.into_note(&c1, &u1);
        assert_eq!(read.tags, ["rust", "cats", "infra"]);
        assert_eq!((read.summary.as_str(), read.last_topics.as_slice()), ("new", ["deploy".to_owned()].as_slice()));
        assert_eq!(read.updated_at, Some(Timestamp(30)));

        // As the counting update (ADD, SET) leaves it.
        let profile: ProfileItem = from_item(item(&[
            ("scope", s(PROFILES_SCOPE)),
            ("id", s("U1")),
            ("interactions", n(3)),
            ("bot_mentions", n(0)),
            ("channels", AttributeValue::Ss(vec!["C2".into(), "C1".into()])),
            ("first_at", n(10)),
            ("last_at", n(20)),
        ]))
        .unwrap();
        assert_eq!((profile.interactions, profile.bot_mentions), (3, 0));
        assert_eq!(profile.channels, ["C2", "C1"]);
        assert_eq!((profile.first_at, profile.last_at), (Some(Timestamp(10)), Some(Timestamp(20))));
    }

    #[test]
    fn ledger_items_keep_their_layout() {
        let entry = LedgerItem {
            key: "k".into(),
            status: CACHED.into(),
            until: Timestamp(7_000_000),
            expires_at: 7 + LEDGER_GRACE_SECONDS,
            value: Some("v".into()),
            posting: None,
            holder: None,
        };
        let expected = item(&[
            ("key", s("k")),
            ("status", s(CACHED)),
            ("until", n(7_000_000)),
            ("expires_at", n(7 + LEDGER_GRACE_SECONDS)),
            ("value", s("v")),
        ]);
        assert_eq!(to_item(&entry).unwrap(), expected);
        assert_eq!(from_item::<LedgerItem>(expected).unwrap(), entry);
        // A claim as the claim and posting updates leave it.
        let claim: LedgerItem = from_item(item(&[
            ("key", s("k")),
            ("status", s(IN_PROGRESS)),
            ("until", n(0)),
            ("expires_at", n(1)),
            ("posting", AttributeValue::Bool(true)),
        ]))
        .unwrap();
        assert_eq!((claim.posting, claim.value), (Some(true), None));
    }
}
