//! What a platform delivered, once verified and normalized: the platforms' adapters make
//! it, ingest takes it (both see it here, below them).

use super::{ChannelId, Message, Ts, UserId};

impl Incoming {
    /// The same event from Slack workspace `workspace` among several: its channel
    /// written `T…/C…`, so everything stored of it is that workspace's.
    pub fn in_workspace(mut self, workspace: &str) -> Incoming {
        let channel = match &mut self {
            Incoming::Message(message) => &mut message.channel,
            Incoming::Edited { channel, .. }
            | Incoming::Deleted { channel, .. }
            | Incoming::Reaction { channel, .. } => channel,
        };
        *channel = ChannelId::slack_in(workspace, channel.as_str());
        self
    }
}

/// A platform event, already verified and normalized.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Message(Message),
    Edited {
        channel: ChannelId,
        ts: Ts,
        text: String,
    },
    Deleted {
        channel: ChannelId,
        ts: Ts,
    },
    /// `user` put `emoji` on the message (channel, ts), or took it off (`removed`):
    /// Slack's `reaction_added`/`reaction_removed` (the emoji's name), Discord's
    /// `MESSAGE_REACTION_ADD`/`REMOVE` (the emoji itself, or a custom one's name).
    Reaction {
        channel: ChannelId,
        ts: Ts,
        user: UserId,
        emoji: String,
        removed: bool,
    },
}
