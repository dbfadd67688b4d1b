//! One [`Chat`] over the platforms a process serves: Slack, Discord or both. A
//! Discord id is a snowflake (digits only); Slack ids start with a letter (`C…`,
//! `D…`, `G…`, `U…`, `B…`), so the id says where a channel or a person lives.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::{ChannelId, Ts, UserId};
use crate::ports::{Chat, FoundPost, PortError, PortResult, Post};

/// Whether an id (channel or user) is a Discord snowflake.
pub fn is_discord_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
}

pub struct PlatformChat {
    pub slack: Option<Arc<dyn Chat>>,
    pub discord: Option<Arc<dyn Chat>>,
}

impl PlatformChat {
    fn for_id(&self, id: &str) -> PortResult<&Arc<dyn Chat>> {
        let (chat, platform) = if is_discord_id(id) { (&self.discord, "discord") } else { (&self.slack, "slack") };
        chat.as_ref().ok_or_else(|| PortError::Rejected {
            backend: platform,
            message: format!("{id} belongs to {platform}, which this process does not serve"),
        })
    }
}

#[async_trait]
impl Chat for PlatformChat {
    async fn post_message(&self, post: &Post) -> PortResult<Ts> {
        self.for_id(&post.channel.0)?.post_message(post).await
    }

    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()> {
        self.for_id(&channel.0)?.add_reaction(channel, ts, emoji).await
    }

    async fn find_post(
        &self,
        channel: &ChannelId,
        thread_root: Option<&Ts>,
        after: &Ts,
        tag: &str,
    ) -> PortResult<Option<FoundPost>> {
        self.for_id(&channel.0)?.find_post(channel, thread_root, after, tag).await
    }

    async fn user_name(&self, user: &UserId) -> PortResult<String> {
        self.for_id(&user.0)?.user_name(user).await
    }

    fn max_message_chars(&self, channel: &ChannelId) -> Option<usize> {
        self.for_id(&channel.0).ok()?.max_message_chars(channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::{RecordingChat, TsMint, VirtualClock};
    use crate::domain::Timestamp;

    fn recording(max: usize) -> Arc<RecordingChat> {
        Arc::new(
            RecordingChat::new(Arc::new(VirtualClock::new(Timestamp(0))), Arc::new(TsMint::default()))
                .with_max_chars(max),
        )
    }

    #[tokio::test]
    async fn each_id_goes_to_its_platform_and_an_unserved_one_is_refused() {
        let (slack, discord) = (recording(4000), recording(2000));
        let both = PlatformChat { slack: Some(slack.clone()), discord: Some(discord.clone()) };
        let post = |channel: &str| Post {
            channel: ChannelId(channel.into()),
            thread_root: None,
            text: "hi".into(),
            tag: None,
            reply_to: None,
        };
        both.post_message(&post("C01")).await.unwrap();
        both.post_message(&post("123456789012345678")).await.unwrap();
        assert_eq!((slack.calls().len(), discord.calls().len()), (1, 1));
        assert_eq!(both.max_message_chars(&ChannelId("123".into())), Some(2000));
        assert_eq!(both.max_message_chars(&ChannelId("C01".into())), Some(4000));

        let slack_only = PlatformChat { slack: Some(slack.clone()), discord: None };
        let refused = slack_only.post_message(&post("123")).await.unwrap_err();
        assert!(refused.to_string().contains("which this process does not serve"), "{refused}");
        assert!(!is_discord_id("") && !is_discord_id("C0123") && is_discord_id("80351110224678912"));
    }
}
