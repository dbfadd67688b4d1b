//! The messages table: [`MessageStore`] on DynamoDB (a message by channel and ts, a
//! thread's newest through the conversation index, the top level's from the table).

use super::*;

/// The messages table's item. `sk` (the zero-padded ts) and `conv` are the table's and
/// the index's sort and partition keys; `expires_at` is the TTL (seconds). Only thread
/// replies carry `conv`, so only they are written to the index (items written before
/// carry `channel#-` at the top level, which nothing reads any more).
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct MessageItem {
    pub(super) channel: String,
    pub(super) sk: String,
    pub(super) ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) conv: Option<String>,
    pub(super) user: String,
    #[serde(default)]
    pub(super) user_name: String,
    #[serde(default)]
    pub(super) text: String,
    pub(super) author: Author,
    #[serde(default)]
    pub(super) replies_to_bot: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) replies_to: Option<String>,
    #[serde(default)]
    pub(super) in_dm: bool,
    #[serde(default)]
    pub(super) private_channel: bool,
    pub(super) at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) expires_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) thread_root: Option<String>,
}

impl MessageItem {
    pub(super) fn new(m: &Message, expires_at: i64) -> Self {
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
            replies_to: m.replies_to.as_ref().map(|t| t.as_str().to_owned()),
            in_dm: m.in_dm,
            private_channel: m.private_channel,
            at: m.at,
            expires_at: Some(expires_at),
            thread_root: m.thread_root.as_ref().map(|r| r.as_str().to_owned()),
        }
    }

    pub(super) fn into_message(self) -> Message {
        Message {
            channel: ChannelId(self.channel.into()),
            ts: Ts::new(&self.ts),
            thread_root: self.thread_root.as_deref().map(Ts::new),
            user: UserId(self.user.into()),
            user_name: self.user_name,
            text: self.text,
            author: self.author,
            replies_to_bot: self.replies_to_bot,
            replies_to: self.replies_to.as_deref().map(Ts::new),
            in_dm: self.in_dm,
            private_channel: self.private_channel,
            at: self.at,
        }
    }
}

/// A thread's partition key in the conversation index.
pub(super) fn conversation(channel: &ChannelId, root: &Ts) -> String {
    format!("{}#{}", channel.0, root.as_str())
}

/// The top level's newest messages are read from the table with thread replies
/// filtered out, this many items a page, at most [`TOP_LEVEL_PAGES`] pages' worth: a channel
/// whose last top-level messages lie further back is all threads, and its top level
/// is old news.
pub(super) const TOP_LEVEL_PAGE: i32 = 100;
pub(super) const TOP_LEVEL_PAGES: usize = 4;

impl DynamoStore {
    pub(super) fn now_secs(&self) -> i64 {
        self.clock.now().as_micros() / Timestamp::MICROS_PER_SECOND
    }

    pub(super) fn message_item(&self, m: &Message) -> PortResult<Item> {
        let expires = m.at.as_micros() / Timestamp::MICROS_PER_SECOND + self.retention.as_secs() as i64;
        to_item(&MessageItem::new(m, expires))
    }

    /// A stored item back to a message; `None` when it has expired (TTL is late) or
    /// does not decode.
    pub(super) fn message_from(&self, item: Item) -> Option<Arc<Message>> {
        let item: MessageItem = serde_dynamo::from_item(item).ok()?;
        if item.expires_at.is_some_and(|e| e <= self.now_secs()) {
            return None;
        }
        Some(Arc::new(item.into_message()))
    }

    pub(super) fn message_key(channel: &ChannelId, ts: &Ts) -> Item {
        [("channel".to_owned(), s(&*channel.0)), ("sk".to_owned(), s(ts.sort_key()))].into()
    }

    /// The newest `limit` items of a query (table by channel, or the conversation
    /// index), newest first, `before` (a sort key) exclusive when given.
    pub(super) async fn newest(
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
    pub(super) fn channel_newest_first(
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
    pub(super) async fn window_page(
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
    pub(super) async fn newest_top_level(
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
    pub(super) async fn delete_messages_where(
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
pub(super) fn newest_since(newest_first: impl Iterator<Item = Arc<Message>>, since: Timestamp) -> Vec<Arc<Message>> {
    let mut out: Vec<Arc<Message>> = newest_first.take_while(|m| m.at >= since).collect();
    out.reverse();
    out
}
