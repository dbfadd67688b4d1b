//! Slack: request signatures, Events API payloads, the Web API client.

pub mod client;
pub mod events;
pub mod oauth;
pub mod signature;
pub mod workspaces;

pub use client::{SlackApiError, SlackClient};
pub use events::{
    Authorization, Envelope, Normalized, RawEvent, SlackIdentity, normalize, normalize_json, parse_envelope,
};
pub use signature::{Scheme, SignatureError, SigningSecret};
