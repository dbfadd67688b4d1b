use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::TsMint;
use crate::domain::{ChannelId, CommandReply, Ts, UserId};
use crate::ports::{Chat, Clock, FoundPost, PortError, PortResult, Post};

/// One call kuuki made to the chat platform.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatCall {
    Post { post: Post, ts: Ts },
    Reaction { channel: ChannelId, ts: Ts, emoji: String },
    CommandAnswer { reply: CommandReply, text: String },
}

/// Calls this many at a time in one allocation of [`Calls`].
const CALLS_A_CHUNK: usize = 1024;

/// Every call so far, in order, in chunks of [`CALLS_A_CHUNK`]: one growing `Vec` would
/// copy all the calls at each doubling (a long replay posts tens of thousands, and
/// each copy reads them back from memory no cache holds).
#[derive(Default)]
struct Calls(Vec<Vec<ChatCall>>);

impl Calls {
    fn push(&mut self, call: ChatCall) {
        match self.0.last_mut() {
            Some(chunk) if chunk.len() < CALLS_A_CHUNK => chunk.push(call),
            _ => {
                let mut chunk = Vec::with_capacity(CALLS_A_CHUNK);
                chunk.push(call);
                self.0.push(chunk);
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &ChatCall> {
        self.0.iter().flatten()
    }
}

/// A chat platform that records every call (replay and tests). It can be told to fail
/// the next calls, to test redelivery.
pub struct RecordingChat {
    clock: Arc<dyn Clock>,
    mint: Arc<TsMint>,
    calls: Mutex<Calls>,
    failures_left: super::FaultsToInject,
    lost_answers_left: super::FaultsToInject,
    max_chars: Option<usize>,
}

impl RecordingChat {
    pub fn new(clock: Arc<dyn Clock>, mint: Arc<TsMint>) -> Self {
        Self {
            clock,
            mint,
            calls: Mutex::new(Calls::default()),
            failures_left: Default::default(),
            lost_answers_left: Default::default(),
            max_chars: None,
        }
    }

    /// Like a platform that takes at most `limit` characters a message.
    pub fn with_max_chars(mut self, limit: usize) -> Self {
        self.max_chars = Some(limit);
        self
    }

    pub fn calls(&self) -> Vec<ChatCall> {
        self.calls.lock().expect("chat lock").iter().cloned().collect()
    }

    /// The next `n` calls fail as if the platform were down.
    pub fn fail_next(&self, n: u32) {
        self.failures_left.set(n);
    }

    /// The next `n` posts go out, but their answers are lost (a timeout after Slack
    /// posted): kuuki cannot tell whether they were posted.
    pub fn lose_next_answers(&self, n: u32) {
        self.lost_answers_left.set(n);
    }

    fn check_failure(&self) -> PortResult<()> {
        if self.failures_left.take() {
            return Err(PortError::Backend { backend: "chat", message: "simulated outage".into() });
        }
        Ok(())
    }
}

#[async_trait]
impl Chat for RecordingChat {
    async fn post_message(&self, post: &Post) -> PortResult<Ts> {
        self.check_failure()?;
        let ts = self.mint.mint(self.clock.now());
        self.calls.lock().expect("chat lock").push(ChatCall::Post { post: post.clone(), ts: ts.clone() });
        if self.lost_answers_left.take() {
            return Err(PortError::Backend {
                backend: "chat",
                message: "simulated timeout after the post went out".into(),
            });
        }
        Ok(ts)
    }

    async fn find_post(
        &self,
        channel: &ChannelId,
        thread_root: Option<&Ts>,
        after: &Ts,
        tag: &str,
    ) -> PortResult<Option<FoundPost>> {
        self.check_failure()?;
        Ok(self.calls.lock().expect("chat lock").iter().find_map(|call| match call {
            ChatCall::Post { post, ts }
                if post.channel == *channel
                    && post.thread_root.as_ref() == thread_root
                    && ts > after
                    && post.tag.as_deref() == Some(tag) =>
            {
                Some(FoundPost { ts: ts.clone(), text: post.text.clone() })
            }
            _ => None,
        }))
    }

    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()> {
        self.check_failure()?;
        self.calls.lock().expect("chat lock").push(ChatCall::Reaction {
            channel: channel.clone(),
            ts: ts.clone(),
            emoji: emoji.to_owned(),
        });
        Ok(())
    }

    async fn user_name(&self, _channel: &ChannelId, user: &UserId) -> PortResult<String> {
        Ok(user.0.to_string())
    }

    async fn answer_command(&self, reply: &CommandReply, text: &str) -> PortResult<()> {
        self.check_failure()?;
        self.calls
            .lock()
            .expect("chat lock")
            .push(ChatCall::CommandAnswer { reply: reply.clone(), text: text.to_owned() });
        Ok(())
    }

    fn max_message_chars(&self, _channel: &ChannelId) -> Option<usize> {
        self.max_chars
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::VirtualClock;
    use crate::domain::Timestamp;

    fn post(channel: &ChannelId, text: &str, tag: Option<&str>) -> Post {
        Post {
            channel: channel.clone(),
            thread_root: None,
            text: text.into(),
            tag: tag.map(Into::into),
            reply_to: None,
            completes: None,
        }
    }

    #[tokio::test]
    async fn calls_read_back_in_order_across_chunks() {
        let chat = RecordingChat::new(Arc::new(VirtualClock::new(Timestamp(1_000_000))), Arc::new(TsMint::default()));
        let channel = ChannelId("C1".into());
        let first = chat.post_message(&post(&channel, "first", None)).await.unwrap();
        let calls = 2 * CALLS_A_CHUNK + 5;
        for i in 1..calls - 1 {
            chat.add_reaction(&channel, &first, &format!("e{i}")).await.unwrap();
        }
        // The tagged post lands in the third chunk.
        let tagged = chat.post_message(&post(&channel, "tagged", Some("job-1"))).await.unwrap();

        let recorded = chat.calls();
        assert_eq!(recorded.len(), calls);
        assert!(matches!(&recorded[0], ChatCall::Post { post, .. } if post.text == "first"));
        for (i, call) in recorded.iter().enumerate().take(calls - 1).skip(1) {
            assert!(
                matches!(call, ChatCall::Reaction { emoji, .. } if *emoji == format!("e{i}")),
                "call {i}: {call:?}"
            );
        }
        let found = chat.find_post(&channel, None, &first, "job-1").await.unwrap();
        assert_eq!(found, Some(FoundPost { ts: tagged, text: "tagged".into() }));
        assert_eq!(chat.find_post(&channel, None, &first, "job-2").await.unwrap(), None);
    }
}
