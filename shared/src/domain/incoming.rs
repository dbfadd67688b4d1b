//! What a platform delivered, once verified and normalized: the platforms' adapters make
//! it, ingest takes it (both see it here, below them).

use super::{ChannelId, Message, Ts};

/// A platform event, already verified and normalized.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Message(Message),
    Edited { channel: ChannelId, ts: Ts, text: String },
    Deleted { channel: ChannelId, ts: Ts },
}
