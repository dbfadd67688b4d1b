//! Conversation reads the stages share: what was written after a message in its
//! conversation. Queued work (a judgment, an answer, a memory trigger) checks it before
//! acting, so a newer message supersedes it; judge, respond and memory all import it
//! from here rather than from each other.
//!
//! A [`Window`] is one read of a channel's newest messages that answers a worker's
//! questions about the channel (the message a job is for, what came after it, its
//! conversation, the message before a turn, the messages since a watermark) from
//! memory, and asks the store only what the window cannot tell.

use std::sync::Arc;

use crate::deps::Deps;
use crate::domain::{ChannelId, Message, ThreadKey, Timestamp, Ts};
use crate::ports::{ChannelWindow, PortResult};

/// The newest `CHANNEL_BUFFER_SIZE` messages of one channel as read once, or nothing
/// ([`Window::none`]): every read falls back to the store where the window cannot
/// answer it exactly, so a reader gets what the store would have said.
///
/// In a busy channel, whose newest messages all lie within `CHANNEL_BUFFER_TTL_MINUTES`
/// (the context's reach), the first question the window cannot answer reads the page
/// before it once, sized by the first page's pace to reach the rest of the context
/// ([`page_before_size`]): where the two reach it, a thread's messages, the top level
/// and a thread's opener come from them instead of a read each; where they do not (a
/// channel busier than the page's cap), the store is asked as before, after one read
/// more. A quiet channel's window reaches past the context already and never reads a
/// second page. (With the page, the window may hold more of the top level than
/// DynamoDB's filtered read, which stops after 400 items, would find.)
pub struct Window {
    channel: Option<ChannelId>,
    first: Page,
    /// How many messages the page before `first` reads, if it may be read: see above.
    page_before: Option<usize>,
    /// `first` with the page before it, once read.
    extended: tokio::sync::OnceCell<Page>,
}

/// Messages of one channel, oldest first (by ts), and whether they reach its start.
#[derive(Default)]
struct Page {
    messages: Vec<Arc<Message>>,
    /// No message older than the page's is stored.
    complete: bool,
}

impl Page {
    /// Whether every stored message with a ts after `ts` is in the page.
    fn covers_after(&self, ts: &Ts) -> bool {
        self.complete || self.messages.first().is_some_and(|m| &m.ts <= ts)
    }

    /// Whether every stored message written at or after `since` is in the page
    /// (messages are written in ts order, give or take a retry).
    fn covers_since(&self, since: Timestamp) -> bool {
        self.complete || self.messages.first().is_some_and(|m| m.at < since)
    }

    fn get_message(&self, ts: &Ts) -> Option<Option<Arc<Message>>> {
        // Sorted by ts: a binary search.
        self.covers_after(ts)
            .then(|| self.messages.binary_search_by(|m| m.ts.cmp(ts)).ok().map(|i| self.messages[i].clone()))
    }

    fn recent_in_thread(&self, thread: &ThreadKey, since: Timestamp, limit: usize) -> Option<Vec<Arc<Message>>> {
        let newest_first = self.messages.iter().rev().filter(|m| m.thread_root == thread.root);
        let mut out: Vec<Arc<Message>> = newest_first.take_while(|m| m.at >= since).take(limit).cloned().collect();
        // Exact when the walk stopped at the limit or at an older message, or when the
        // page holds all since then.
        let stopped = out.len() == limit
            || self
                .messages
                .iter()
                .rev()
                .filter(|m| m.thread_root == thread.root)
                .nth(out.len())
                .is_some_and(|m| m.at < since);
        (stopped || self.covers_since(since)).then(|| {
            out.reverse();
            out
        })
    }

    fn recent_in_channel(&self, since: Timestamp, limit: usize) -> Option<Vec<Arc<Message>>> {
        (limit <= self.messages.len() || self.complete).then(|| {
            let mut out: Vec<Arc<Message>> =
                self.messages.iter().rev().take_while(|m| m.at >= since).take(limit).cloned().collect();
            out.reverse();
            out
        })
    }

    fn previous_in_channel(&self, before: &Ts) -> Option<Option<Arc<Message>>> {
        let previous = self.messages.iter().rev().find(|m| &m.ts < before);
        (previous.is_some() || self.complete).then(|| previous.cloned())
    }
}

impl Window {
    /// One read of `channel`'s newest `CHANNEL_BUFFER_SIZE` messages, where reads cost
    /// calls; a store read in process answers each question from its indexes instead.
    pub async fn read(deps: &Deps, channel: &ChannelId) -> PortResult<Window> {
        if deps.messages.reads_in_process() {
            return Ok(Window::none());
        }
        Window::read_whole(deps, channel).await
    }

    /// One read of `channel`'s newest `CHANNEL_BUFFER_SIZE` messages, whatever the store.
    pub(crate) async fn read_whole(deps: &Deps, channel: &ChannelId) -> PortResult<Window> {
        let ChannelWindow { messages, complete } =
            deps.messages.channel_window(channel, deps.settings.memory.channel_buffer_size.max(1)).await?;
        let (now, ttl) = (deps.clock.now(), deps.settings.memory.channel_buffer_ttl);
        let page_before = messages
            .first()
            .filter(|oldest| !complete && oldest.at >= now - ttl)
            .map(|oldest| page_before_size(messages.len(), now.seconds_since(oldest.at), ttl));
        Ok(Window {
            channel: Some(channel.clone()),
            first: Page { messages, complete },
            page_before,
            extended: tokio::sync::OnceCell::new(),
        })
    }

    /// A window that knows nothing: every read goes to the store.
    pub fn none() -> Window {
        Window { channel: None, first: Page::default(), page_before: None, extended: tokio::sync::OnceCell::new() }
    }

    fn of(&self, channel: &ChannelId) -> bool {
        self.channel.as_ref() == Some(channel)
    }

    /// The messages read so far.
    fn page(&self) -> &Page {
        self.extended.get().unwrap_or(&self.first)
    }

    /// What `answer` finds in the window for `channel`: in the messages read so far,
    /// else, once, with the page before them; `None` when the store must answer.
    async fn answer<T>(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        answer: impl Fn(&Page) -> Option<T>,
    ) -> PortResult<Option<T>> {
        if !self.of(channel) {
            return Ok(None);
        }
        if let Some(found) = answer(self.page()) {
            return Ok(Some(found));
        }
        let Some(limit) = self.page_before.filter(|_| !self.extended.initialized()) else {
            return Ok(None);
        };
        let extended = self
            .extended
            .get_or_try_init(|| async {
                let oldest = &self.first.messages[0].ts;
                let before = deps.messages.channel_window_before(channel, oldest, limit).await?;
                let mut messages = before.messages;
                messages.extend(self.first.messages.iter().cloned());
                Ok::<_, crate::ports::PortError>(Page { messages, complete: before.complete })
            })
            .await?;
        Ok(answer(extended))
    }

    /// The stored message (channel, ts), if there is one.
    pub async fn get_message(&self, deps: &Deps, channel: &ChannelId, ts: &Ts) -> PortResult<Option<Arc<Message>>> {
        if let Some(found) = self.answer(deps, channel, |page| page.get_message(ts)).await? {
            return Ok(found);
        }
        deps.messages.get_message(channel, ts).await
    }

    /// [`crate::ports::MessageStore::thread_opener`] from the window.
    pub async fn thread_opener(&self, deps: &Deps, channel: &ChannelId, root: &Ts) -> PortResult<Option<Arc<Message>>> {
        if let Some(found) = self.answer(deps, channel, |page| page.get_message(root)).await? {
            return Ok(found.filter(|m| m.thread_root.is_none()));
        }
        deps.messages.thread_opener(channel, root).await
    }

    /// [`crate::ports::MessageStore::recent_in_thread`] from the window.
    pub async fn recent_in_thread(
        &self,
        deps: &Deps,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        if let Some(found) =
            self.answer(deps, &thread.channel, |page| page.recent_in_thread(thread, since, limit)).await?
        {
            return Ok(found);
        }
        deps.messages.recent_in_thread(thread, since, limit).await
    }

    /// [`crate::ports::MessageStore::recent_in_channel`] from the window.
    pub async fn recent_in_channel(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        if let Some(found) = self.answer(deps, channel, |page| page.recent_in_channel(since, limit)).await? {
            return Ok(found);
        }
        deps.messages.recent_in_channel(channel, since, limit).await
    }

    /// [`crate::ports::MessageStore::previous_in_channel`] from the window.
    pub async fn previous_in_channel(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        before: &Ts,
    ) -> PortResult<Option<Arc<Message>>> {
        if let Some(found) = self.answer(deps, channel, |page| page.previous_in_channel(before)).await? {
            return Ok(found);
        }
        deps.messages.previous_in_channel(channel, before).await
    }

    /// How many messages of `channel` are stored after `after` (all of them when
    /// `None`) up to `up_to`: exact below `enough`, else at least `enough`. A memory
    /// trigger asks whether enough piled up by the message it runs for (what came after,
    /// kuuki's own reply too, counts at the next one, on any store and whenever the
    /// window was read); the window answers unless it holds fewer than that.
    pub async fn count_after(
        &self,
        deps: &Deps,
        channel: &ChannelId,
        after: Option<&Ts>,
        up_to: &Ts,
        enough: usize,
    ) -> PortResult<usize> {
        let counted = |m: &&Arc<Message>| after.is_none_or(|a| &m.ts > a) && &m.ts <= up_to;
        let in_window = |page: &Page| {
            let seen = page.messages.iter().filter(counted).count();
            let exact = match after {
                Some(after) => page.covers_after(after),
                None => page.complete,
            };
            (exact || seen >= enough).then_some(seen)
        };
        if let Some(seen) = self.answer(deps, channel, in_window).await? {
            return Ok(seen);
        }
        // Oldest first: those past `up_to` are the last ones, so the count stays exact.
        Ok(deps.messages.messages_after(channel, after, enough).await?.iter().filter(counted).count())
    }

    /// The newest `limit` messages of `target`'s conversation written before it and
    /// within `CHANNEL_BUFFER_TTL_MINUTES`, oldest first: from the messages read when
    /// they reach that far, else one read of the
    /// channel before it (a question judged minutes later, in a busy channel, has left
    /// the newest messages).
    pub async fn conversation_before(
        &self,
        deps: &Deps,
        target: &Message,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        // The context window's reach, as the judge's own reads have it.
        let since = (deps.clock.now() - deps.settings.memory.channel_buffer_ttl).min(target.at);
        let in_conversation =
            |m: &&Arc<Message>| m.thread_root == target.thread_root && m.ts < target.ts && m.at >= since;
        if self.of(&target.channel) {
            let page = self.page();
            let found: Vec<Arc<Message>> =
                page.messages.iter().rev().filter(in_conversation).take(limit).cloned().collect();
            let reaches_back = page.complete || page.messages.first().is_some_and(|m| m.at < since);
            if found.len() == limit || reaches_back {
                return Ok(found.into_iter().rev().collect());
            }
        }
        // Other conversations' lines are read too: three times as many reach most.
        let read = deps.messages.channel_window_before(&target.channel, &target.ts, limit.saturating_mul(3)).await?;
        let found: Vec<Arc<Message>> =
            read.messages.iter().rev().filter(in_conversation).take(limit).cloned().collect();
        Ok(found.into_iter().rev().collect())
    }

    /// The messages after `target` in its conversation and, for a top-level message, in
    /// the thread it started (the newest `CHANNEL_BUFFER_SIZE` of each), in no set order.
    /// Queued work for `target` is superseded by a newer participant's message among
    /// them: that message queued its own.
    pub async fn messages_after(&self, deps: &Deps, target: &Message) -> PortResult<Vec<Arc<Message>>> {
        let mut conversations = vec![target.thread_key()];
        if target.thread_root.is_none() {
            conversations.push(ThreadKey::thread(target.channel.clone(), target.ts.clone()));
        }
        let mut after = Vec::new();
        for key in conversations {
            let recent = self.recent_in_thread(deps, &key, target.at, deps.settings.memory.channel_buffer_size).await?;
            after.extend(recent.into_iter().filter(|m| m.ts > target.ts));
        }
        Ok(after)
    }

    /// The newest message after `target` that `counts` accepts: see
    /// [`Window::messages_after`].
    pub async fn newer_message(
        &self,
        deps: &Deps,
        target: &Message,
        counts: impl Fn(&Message) -> bool,
    ) -> PortResult<Option<Arc<Message>>> {
        Ok(newest(&self.messages_after(deps, target).await?, counts).cloned())
    }
}

/// How many messages the page before a window of `first` messages spanning `span_secs`
/// reads to reach the rest of a context of `ttl` at the same pace: from as many again
/// to three times as many (a page of more costs more read units than the reads it
/// saves).
fn page_before_size(first: usize, span_secs: f64, ttl: std::time::Duration) -> usize {
    let first = first.max(1);
    let pages_left = ttl.as_secs_f64() / span_secs.max(1.0) - 1.0;
    ((first as f64 * pages_left).ceil().max(0.0) as usize).clamp(first, 3 * first)
}

/// The newest of `after` (see [`Window::messages_after`]) that `counts` accepts.
pub(crate) fn newest(after: &[Arc<Message>], counts: impl Fn(&Message) -> bool) -> Option<&Arc<Message>> {
    after.iter().filter(|m| counts(m)).max_by(|a, b| a.ts.cmp(&b.ts))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use super::Window;
    use crate::adapters::memory::{InProcess, MemoryLog, RecordingChat, TsMint, VirtualClock};
    use crate::config::Settings;
    use crate::deps::Deps;
    use crate::domain::{Author, ChannelId, Message, ThreadKey, Timestamp, Ts, UserId};
    use crate::replay::REPLAY_EPOCH;

    fn at(secs: u64) -> Timestamp {
        REPLAY_EPOCH + Duration::from_secs(secs)
    }

    fn message(secs: u64, root: Option<u64>) -> Message {
        Message {
            channel: ChannelId("dev".into()),
            ts: Ts::from_timestamp(at(secs)),
            thread_root: root.map(|r| Ts::from_timestamp(at(r))),
            user: UserId(format!("U{}", secs % 3).into()),
            user_name: format!("u{}", secs % 3),
            text: format!("line {secs}"),
            author: Author::Human,
            replies_to_bot: false,
            replies_to: None,
            in_dm: false,
            private_channel: false,
            at: at(secs),
        }
    }

    fn texts(messages: &[Arc<Message>]) -> Vec<String> {
        messages.iter().map(|m| m.text.clone()).collect()
    }

    /// A window of 3 over a channel of 8 messages (a thread started at 10 with replies
    /// at 20, 60 and 70) cannot answer about what is older than its first message: every
    /// answer must still be the store's, whether it came from the window or the store.
    #[tokio::test]
    async fn a_window_answers_what_the_store_would_inside_and_outside_it() {
        // Read at 1000, the context reaching back a minute: the window (60 to 80) lies
        // before it.
        let (deps, window) = window_of_three(1000, "1").await;
        assert_eq!(window.page_before, None, "a quiet channel's window reads no second page");
        assert_answers_are_the_stores(&deps, &window).await;
        assert!(!window.extended.initialized());
    }

    /// The same channel read at 100, the context reaching back a minute (to 40): the
    /// window (60 to 80) lies within it and spans 40 s, so the first question it cannot
    /// answer reads a page of as many again (30 to 50), once; the window then answers
    /// what the two hold, questions about what is older still go to the store, and every
    /// answer is still the store's.
    #[tokio::test]
    async fn a_busy_channels_window_reads_the_page_before_it_once() {
        let (deps, window) = window_of_three(100, "1").await;
        assert_eq!(window.page_before, Some(3));
        let (channel, thread) =
            (ChannelId("dev".into()), ThreadKey::thread(ChannelId("dev".into()), Ts::from_timestamp(at(10))));
        let thread = &thread;
        let from_window =
            |since: u64| window.answer(&deps, &channel, move |page| page.recent_in_thread(thread, at(since), 10));
        let replies = from_window(35).await.unwrap().expect("answered by the two pages");
        assert_eq!(texts(&replies), ["line 60", "line 70"]);
        assert_eq!(
            texts(&window.extended.get().expect("read at the first miss").messages),
            ["line 30", "line 40", "line 50", "line 60", "line 70", "line 80"]
        );
        assert!(!window.page().complete, "10 and 20 are older still");
        assert!(from_window(25).await.unwrap().is_none(), "the reply at 20 may lie before 25: the store answers");
        assert_answers_are_the_stores(&deps, &window).await;
    }

    /// Read at 100 with the context reaching back an hour, the page before is sized by
    /// the window's pace (three messages in 40 s) up to its cap, three times the window:
    /// it holds the rest of the channel, and the window answers every question itself.
    #[tokio::test]
    async fn a_page_before_sized_to_reach_the_context_holds_the_rest() {
        let (deps, window) = window_of_three(100, "60").await;
        assert_eq!(window.page_before, Some(9));
        window.get_message(&deps, &ChannelId("dev".into()), &Ts::from_timestamp(at(10))).await.unwrap();
        assert!(window.page().complete, "all 8 messages read");
        assert_answers_are_the_stores(&deps, &window).await;
    }

    #[test]
    fn the_page_before_reaches_the_rest_of_the_context_at_the_windows_pace() {
        let half_hour = Duration::from_secs(1800);
        assert_eq!(super::page_before_size(50, 600.0, half_hour), 100, "10 minutes of 30: two pages more");
        assert_eq!(super::page_before_size(50, 1200.0, half_hour), 50, "at least one page");
        assert_eq!(super::page_before_size(50, 60.0, half_hour), 150, "at most three pages");
        assert_eq!(super::page_before_size(50, 0.0, half_hour), 150, "a burst in one second");
    }

    /// A window of `CHANNEL_BUFFER_SIZE` 3 over a channel of 8 messages at 10 to 80 (a
    /// thread started at 10 with replies at 20, 60 and 70), read at `now` with the
    /// context reaching back `ttl_minutes`.
    async fn window_of_three(now: u64, ttl_minutes: &str) -> (Deps, Window) {
        let vars: HashMap<String, String> = [
            ("CHANNEL_BUFFER_SIZE".to_string(), "3".to_string()),
            ("CHANNEL_BUFFER_TTL_MINUTES".to_string(), ttl_minutes.to_string()),
        ]
        .into();
        let settings = Settings::from_vars(&vars).unwrap();
        let persona = settings.persona(None);
        let clock = Arc::new(VirtualClock::new(at(now)));
        let parts = InProcess::new(clock.clone());
        let chat = Arc::new(RecordingChat::new(clock.clone(), Arc::new(TsMint::default())));
        let deps = Deps::new(
            settings,
            persona,
            UserId("UKUUKI".into()),
            parts.adapters(chat, None, Arc::new(MemoryLog::default())),
            1,
        );
        let layout = [
            (10, None),
            (20, Some(10)),
            (30, None),
            (40, None),
            (50, None),
            (60, Some(10)),
            (70, Some(10)),
            (80, None),
        ];
        for (secs, root) in layout {
            deps.messages
                .put_message(&std::sync::Arc::new(crate::domain::Message::clone(&message(secs, root))))
                .await
                .unwrap();
        }
        let window = Window::read_whole(&deps, &ChannelId("dev".into())).await.unwrap();
        assert_eq!(texts(&window.first.messages), ["line 60", "line 70", "line 80"], "the newest 3");
        assert!(!window.first.complete);
        (deps, window)
    }

    /// Every question about the channel of [`window_of_three`] gets the store's answer
    /// from `window`, inside and outside what it read.
    async fn assert_answers_are_the_stores(deps: &Deps, window: &Window) {
        let channel = ChannelId("dev".into());

        let (last, at_70) = (Ts::from_timestamp(at(85)), Ts::from_timestamp(at(70)));
        for secs in [10, 20, 50, 70, 80, 85] {
            let ts = Ts::from_timestamp(at(secs));
            let from_window = window.get_message(deps, &channel, &ts).await.unwrap().map(|m| m.text.clone());
            let from_store = deps.messages.get_message(&channel, &ts).await.unwrap().map(|m| m.text.clone());
            assert_eq!(from_window, from_store, "get_message at {secs}");
            let opener = window.thread_opener(deps, &channel, &ts).await.unwrap().map(|m| m.text.clone());
            let stored_opener = deps.messages.thread_opener(&channel, &ts).await.unwrap().map(|m| m.text.clone());
            assert_eq!(opener, stored_opener, "thread_opener at {secs}");
            let top_level = [10, 50, 80].contains(&secs);
            assert_eq!(opener, top_level.then(|| format!("line {secs}")), "only a top-level message opens");
            let previous = window.previous_in_channel(deps, &channel, &ts).await.unwrap().map(|m| m.text.clone());
            let stored_previous =
                deps.messages.previous_in_channel(&channel, &ts).await.unwrap().map(|m| m.text.clone());
            assert_eq!(previous, stored_previous, "previous_in_channel before {secs}");
            for enough in [1, 2, 5, 10] {
                let counted = window.count_after(deps, &channel, Some(&ts), &last, enough).await.unwrap();
                let stored = deps.messages.messages_after(&channel, Some(&ts), 100).await.unwrap().len();
                let up_to_70 = window.count_after(deps, &channel, Some(&ts), &at_70, 100).await.unwrap();
                let stored_to_70 = deps
                    .messages
                    .messages_after(&channel, Some(&ts), 100)
                    .await
                    .unwrap()
                    .iter()
                    .filter(|m| m.ts <= at_70)
                    .count();
                assert_eq!(up_to_70, stored_to_70, "count_after {secs} up to 70");
                assert_eq!(counted.min(enough), stored.min(enough), "count_after {secs}, enough {enough}");
                if stored < enough {
                    assert_eq!(counted, stored, "exact below enough: after {secs}");
                }
            }
        }
        let top = ThreadKey::top_level(channel.clone());
        let thread = ThreadKey::thread(channel.clone(), Ts::from_timestamp(at(10)));
        for (key, name) in [(&top, "top level"), (&thread, "thread")] {
            for since in [0, 25, 65] {
                for limit in [1, 2, 3, 10] {
                    let from_window = window.recent_in_thread(deps, key, at(since), limit).await.unwrap();
                    let from_store = deps.messages.recent_in_thread(key, at(since), limit).await.unwrap();
                    assert_eq!(texts(&from_window), texts(&from_store), "{name} since {since}, limit {limit}");
                }
            }
        }
        for since in [0, 65] {
            for limit in [2, 3, 10] {
                let from_window = window.recent_in_channel(deps, &channel, at(since), limit).await.unwrap();
                let from_store = deps.messages.recent_in_channel(&channel, at(since), limit).await.unwrap();
                assert_eq!(texts(&from_window), texts(&from_store), "channel since {since}, limit {limit}");
            }
        }
        // Supersession for the thread's opener: the newest 3 of the top level after it
        // (30 is older than those) and every reply of its thread, old and new.
        let opener = message(10, None);
        let mut after = texts(&window.messages_after(deps, &opener).await.unwrap());
        after.sort();
        assert_eq!(after, ["line 20", "line 40", "line 50", "line 60", "line 70", "line 80"]);
    }
}
