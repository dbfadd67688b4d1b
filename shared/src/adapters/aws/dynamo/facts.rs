//! The facts table: [`FactStore`] on DynamoDB (facts, people's notes and counters).

use super::*;

/// The facts table's item for a fact: the fact as JSON without its embedding, which
/// goes apart as bytes (4 a dimension where JSON takes about 12).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct FactItem {
    pub(super) scope: String,
    pub(super) id: String,
    #[serde(with = "json")]
    pub(super) fact: Fact,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "embedding")]
    pub(super) embedding: Option<Vec<f32>>,
    /// A random number new at every write (N): a write conditional on it finds the fact
    /// as it was read. None on items written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) rev: Option<u64>,
}

impl FactItem {
    /// `fact` as a new write stores it: with a fresh revision (never 0, which stands
    /// for none).
    pub(super) fn written(fact: &Fact) -> Self {
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
pub(super) struct NoteItem {
    pub(super) scope: String,
    pub(super) id: String,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "json_option")]
    pub(super) note: Option<UserNote>,
    /// A string set (SS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) last_topics: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) updated_at: Option<Timestamp>,
}

impl NoteItem {
    pub(super) fn into_note(self, channel: &ChannelId, user: &UserId) -> UserNote {
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

/// The facts table's item for a person's counters (scope `#profiles`). Read only: the
/// counters are written by one `UpdateItem` with ADD.
#[derive(Deserialize)]
pub(super) struct ProfileItem {
    #[serde(default)]
    pub(super) interactions: i64,
    #[serde(default)]
    pub(super) bot_mentions: i64,
    /// A string set (SS).
    #[serde(default)]
    pub(super) channels: Vec<String>,
    pub(super) first_at: Option<Timestamp>,
    pub(super) last_at: Option<Timestamp>,
}

impl DynamoStore {
    /// The facts table's item (`scope`, `id`), read; `what` names the read in errors.
    pub(super) async fn get_facts_item(
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
    pub(super) fn note_update(
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
    pub(super) async fn facts_of(
        &self,
        channel: &ChannelId,
        consistent: bool,
    ) -> PortResult<Vec<(Fact, FactRevision)>> {
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
    pub(super) async fn scope_items(
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

    pub(super) async fn put_facts_item(&self, item: &impl Serialize, what: &'static str) -> PortResult<()> {
        self.client
            .put_item()
            .table_name(&self.tables.facts)
            .set_item(Some(to_item(item)?))
            .send()
            .await
            .map_err(backend(what))?;
        Ok(())
    }

    pub(super) async fn delete_facts_item(
        &self,
        scope: impl Into<String>,
        id: &str,
        what: &'static str,
    ) -> PortResult<()> {
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
}

/// An embedding as DynamoDB keeps it: each f32 in 4 little-endian bytes.
pub fn embedding_to_bytes(embedding: &[f32]) -> Vec<u8> {
    embedding.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored embedding whose length is not a multiple of 4 bytes (damaged).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0} bytes are not a whole number of f32s")]
pub struct EmbeddingBytesError(pub usize);

/// The inverse of [`embedding_to_bytes`]; a length that is not a multiple of 4 is an error.
pub fn embedding_from_bytes(bytes: &[u8]) -> Result<Vec<f32>, EmbeddingBytesError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(EmbeddingBytesError(bytes.len()));
    }
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// The facts table holds people's notes under `#notes#<channel>` and their counters
/// under `#profiles` (`#profiles#T…` a workspace's among several: [`Workspace::scoped`];
/// no channel id starts with '#').
pub(super) fn notes_scope(channel: &ChannelId) -> String {
    format!("#notes#{}", channel.0)
}
pub(super) const PROFILES_SCOPE: &str = "#profiles";

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

    async fn profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<Option<UserProfile>> {
        let out = self.get_facts_item(workspace.scoped(PROFILES_SCOPE), &user.0, "get profile").await?;
        out.item.map(|item| profile_from(user, item)).transpose()
    }

    async fn profile_and_note(
        &self,
        channel: &ChannelId,
        user: &UserId,
    ) -> PortResult<(Option<UserProfile>, Option<UserNote>)> {
        let (profiles, notes) = (channel.workspace().scoped(PROFILES_SCOPE), notes_scope(channel));
        let keys = [profiles.as_str(), notes.as_str()]
            .into_iter()
            .map(|scope| [("scope".to_owned(), s(scope)), ("id".to_owned(), s(&*user.0))].into())
            .collect();
        let (mut profile, mut note) = (None, None);
        for item in self.batch_get(&self.tables.facts, keys, false, "get profile and note").await? {
            if get_s(&item, "scope") == Some(profiles.as_str()) {
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
            .key("scope", s(channel.workspace().scoped(PROFILES_SCOPE)))
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

    async fn delete_profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<()> {
        self.delete_facts_item(workspace.scoped(PROFILES_SCOPE), &user.0, "delete profile").await
    }

    async fn noted_users(&self, channel: &ChannelId) -> PortResult<Vec<UserId>> {
        self.noted_users_queried(channel).await
    }

    async fn profiled_users(&self, workspace: Workspace<'_>) -> PortResult<Vec<UserId>> {
        self.profiled_users_queried(workspace).await
    }
}

/// A person's profile item as a [`UserProfile`].
pub(super) fn profile_from(user: &UserId, item: Item) -> PortResult<UserProfile> {
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
