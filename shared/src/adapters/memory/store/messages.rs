//! The messages of the in-process store: each channel's messages indexed by ts, by
//! thread and by author, and [`MessageStore`] over them.

use super::*;

/// One channel's messages, each stored once and indexed three ways, so every read is
/// a walk over the messages it returns, however long the history.
#[derive(Default)]
pub(super) struct ChannelMessages {
    pub(super) by_ts: ByTs,
    /// The messages outside threads, by ts.
    pub(super) top_level: ByTs,
    /// Each thread's messages, under its root.
    pub(super) threads: TsMap<ByTs>,
    /// By (written at, ts), oldest first: what the retention forgets, without a scan.
    /// Messages are written as the clock moves on, so a new one goes at the back; one
    /// that does not (an edit keeps its time) is put in its place.
    pub(super) by_time: VecDeque<Arc<Message>>,
}

impl ChannelMessages {
    /// Stores `message`; false (and nothing changes) when its ts is stored already.
    pub(super) fn insert(&mut self, message: Arc<Message>) -> bool {
        let Err(place) = self.by_ts.search(&message.ts) else {
            return false;
        };
        let entry = (message.at, &message.ts);
        match self.by_time.back() {
            Some(last) if (last.at, &last.ts) > entry => {
                let at = self.by_time.partition_point(|e| (e.at, &e.ts) < entry);
                self.by_time.insert(at, message.clone());
            }
            _ => self.by_time.push_back(message.clone()),
        }
        match &message.thread_root {
            None => self.top_level.insert(message.clone()),
            Some(root) => self.threads.get_or_insert_with(root, ByTs::default).insert(message.clone()),
        }
        self.by_ts.insert_at(place, message);
        true
    }

    /// The messages of the conversation `root` (`None`: the top level), if any.
    pub(super) fn conversation(&self, root: &Option<Ts>) -> Option<&ByTs> {
        match root {
            None => Some(&self.top_level),
            Some(root) => self.threads.get(root),
        }
    }

    pub(super) fn remove(&mut self, ts: &Ts) -> Option<Arc<Message>> {
        let message = self.by_ts.remove(ts)?;
        let entry = (message.at, &message.ts);
        if let Ok(at) = self.by_time.binary_search_by(|e| (e.at, &e.ts).cmp(&entry)) {
            self.by_time.remove(at);
        }
        match &message.thread_root {
            None => drop(self.top_level.remove(ts)),
            Some(root) => {
                if let Some(thread) = self.threads.get_mut(root) {
                    thread.remove(ts);
                    if thread.is_empty() {
                        self.threads.remove(root);
                    }
                }
            }
        }
        Some(message)
    }

    /// Removes every message `forget` picks; how many went.
    pub(super) fn remove_where(&mut self, forget: impl Fn(&Message) -> bool) -> usize {
        let before = self.by_ts.len();
        self.by_ts.retain(|m| !forget(m));
        self.by_time.retain(|m| !forget(m));
        self.top_level.retain(|m| !forget(m));
        self.threads.retain(|thread| {
            thread.retain(|m| !forget(m));
            !thread.is_empty()
        });
        before - self.by_ts.len()
    }
}

/// A message in a [`ByTs`].
pub(super) struct Entry {
    pub(super) hint: u64,
    pub(super) message: Arc<Message>,
}

impl Entry {
    pub(super) fn new(message: Arc<Message>) -> Self {
        Entry { hint: message.ts.order_hint(), message }
    }
}

/// Messages in ts order. They arrive nearly in order, so a new one goes at the back
/// without allocating a node, and nearly every question is about the newest ones: a
/// search starts there.
#[derive(Default)]
pub(super) struct ByTs(pub(super) VecDeque<Entry>);

impl SortedByTs for ByTs {
    #[inline]
    fn sorted_len(&self) -> usize {
        self.0.len()
    }

    #[inline]
    fn hint_at(&self, i: usize) -> u64 {
        self.0[i].hint
    }

    #[inline]
    fn ts_at(&self, i: usize) -> &Ts {
        &self.0[i].message.ts
    }
}

impl ByTs {
    pub(super) fn search(&self, ts: &Ts) -> Result<usize, usize> {
        search_by_ts(self, ts)
    }

    pub(super) fn get(&self, ts: &Ts) -> Option<&Arc<Message>> {
        self.search(ts).ok().map(|i| self.at(i))
    }

    pub(super) fn insert(&mut self, message: Arc<Message>) {
        if let Err(place) = self.search(&message.ts) {
            self.insert_at(place, message);
        }
    }

    /// Puts `message` at `place`, where [`ByTs::search`] said it goes.
    pub(super) fn insert_at(&mut self, place: usize, message: Arc<Message>) {
        self.0.insert(place, Entry::new(message));
    }

    /// The message at index `i`.
    pub(super) fn at(&self, i: usize) -> &Arc<Message> {
        &self.0[i].message
    }

    pub(super) fn remove(&mut self, ts: &Ts) -> Option<Arc<Message>> {
        self.search(ts).ok().and_then(|i| self.0.remove(i)).map(|entry| entry.message)
    }

    /// The index of the first message after `ts`.
    pub(super) fn after(&self, ts: &Ts) -> usize {
        self.search(ts).map_or_else(|place| place, |found| found + 1)
    }

    pub(super) fn newest_first(&self) -> impl Iterator<Item = &Arc<Message>> {
        self.0.iter().rev().map(|entry| &entry.message)
    }

    /// The messages from index `first` on, oldest first.
    pub(super) fn starting_at(&self, first: usize) -> impl Iterator<Item = &Arc<Message>> {
        self.0.range(first..).map(|entry| &entry.message)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn retain(&mut self, keep: impl Fn(&Message) -> bool) {
        self.0.retain(|entry| keep(&entry.message));
    }
}

/// The first `limit` of newest-first messages written at or after `since`, oldest first.
pub(super) fn newest_since<'a>(
    newest_first: impl Iterator<Item = &'a Arc<Message>>,
    since: Timestamp,
    limit: usize,
) -> Vec<Arc<Message>> {
    let mut out: Vec<Arc<Message>> = newest_first.take_while(|m| m.at >= since).take(limit).cloned().collect();
    out.reverse();
    out
}

#[async_trait]
impl MessageStore for MemoryStore {
    fn reads_in_process(&self) -> bool {
        true
    }

    async fn put_message(&self, message: &Arc<Message>) -> PortResult<PutOutcome> {
        let mut inner = self.lock();
        let channel = slot(&mut inner.channels, &message.channel);
        if !channel.insert(message.clone()) {
            return Ok(PutOutcome::AlreadyExists);
        }
        inner.puts += 1;
        if inner.puts.is_multiple_of(PRUNE_EVERY) {
            self.prune(&mut inner);
        }
        Ok(PutOutcome::Inserted)
    }

    async fn get_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<Option<Arc<Message>>> {
        Ok(self.lock().channels.get(channel).and_then(|c| c.by_ts.get(ts)).cloned())
    }

    async fn thread_opener(&self, channel: &ChannelId, root: &Ts) -> PortResult<Option<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(None);
        };
        // A root in its own thread is found in the thread's few messages, which the
        // caller has just read, and not searched for among the channel's: a reply to a
        // thread begun long ago asks for a root no cache holds.
        if messages.threads.get(root).is_some_and(|thread| thread.get(root).is_some()) {
            return Ok(None);
        }
        Ok(messages.top_level.get(root).cloned())
    }

    async fn update_text(&self, channel: &ChannelId, ts: &Ts, text: &str) -> PortResult<bool> {
        let mut inner = self.lock();
        let Some(messages) = inner.channels.get_mut(channel) else {
            return Ok(false);
        };
        let Some(old) = messages.remove(ts) else {
            return Ok(false);
        };
        messages.insert(Arc::new(Message { text: text.to_owned(), ..Message::clone(&old) }));
        Ok(true)
    }

    async fn delete_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<bool> {
        let mut inner = self.lock();
        let Some(messages) = inner.channels.get_mut(channel) else {
            return Ok(false);
        };
        Ok(messages.remove(ts).is_some())
    }

    async fn recent_in_thread(
        &self,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(&thread.channel) else {
            return Ok(Vec::new());
        };
        let Some(conversation) = messages.conversation(&thread.root) else {
            return Ok(Vec::new());
        };
        Ok(newest_since(conversation.newest_first(), since, limit))
    }

    async fn recent_in_channel(
        &self,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(Vec::new());
        };
        Ok(newest_since(messages.by_ts.newest_first(), since, limit))
    }

    async fn messages_after(
        &self,
        channel: &ChannelId,
        after: Option<&Ts>,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(Vec::new());
        };
        let first = after.map_or(0, |after| messages.by_ts.after(after));
        Ok(messages.by_ts.starting_at(first).take(limit).cloned().collect())
    }

    async fn channel_window(&self, channel: &ChannelId, limit: usize) -> PortResult<ChannelWindow> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(ChannelWindow { messages: Vec::new(), complete: true });
        };
        let mut newest: Vec<Arc<Message>> = messages.by_ts.newest_first().take(limit).cloned().collect();
        newest.reverse();
        Ok(ChannelWindow { messages: newest, complete: messages.by_ts.len() <= limit })
    }

    async fn channel_window_before(&self, channel: &ChannelId, before: &Ts, limit: usize) -> PortResult<ChannelWindow> {
        let inner = self.lock();
        let Some(messages) = inner.channels.get(channel) else {
            return Ok(ChannelWindow { messages: Vec::new(), complete: true });
        };
        let end = messages.by_ts.search(before).unwrap_or_else(|place| place);
        let start = end.saturating_sub(limit);
        let page = messages.by_ts.starting_at(start).take(end - start).cloned().collect();
        Ok(ChannelWindow { messages: page, complete: start == 0 })
    }

    async fn previous_in_channel(&self, channel: &ChannelId, before: &Ts) -> PortResult<Option<Arc<Message>>> {
        let inner = self.lock();
        Ok(inner.channels.get(channel).and_then(|c| {
            let place = c.by_ts.search(before).unwrap_or_else(|place| place);
            place.checked_sub(1).map(|previous| c.by_ts.at(previous).clone())
        }))
    }

    async fn delete_messages_by(
        &self,
        channel: &ChannelId,
        user: &UserId,
        posted_before: Option<Timestamp>,
    ) -> PortResult<usize> {
        let mut inner = self.lock();
        let Some(messages) = inner.channels.get_mut(channel) else {
            return Ok(0);
        };
        Ok(messages.remove_where(|m| &m.user == user && posted_before.is_none_or(|before| m.at < before)))
    }

    async fn message_channels(&self) -> PortResult<Vec<ChannelId>> {
        Ok(self.message_channels_now())
    }

    async fn delete_channel_messages(&self, channel: &ChannelId) -> PortResult<usize> {
        Ok(self.delete_channel_messages_now(channel))
    }
}
