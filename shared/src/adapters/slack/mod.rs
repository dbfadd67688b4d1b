//! Slack: request signatures, Events API payloads, the Web API client.

pub mod client;
pub mod events;
pub mod signature;

pub use client::{SlackApiError, SlackClient};
pub use events::{Envelope, Normalized, RawEvent, SlackIdentity, normalize, normalize_json, parse_envelope};
pub use signature::{Scheme, SignatureError, SigningSecret};
