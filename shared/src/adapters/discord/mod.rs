//! Discord: interaction signatures (Ed25519), Gateway dispatches relayed to ingress,
//! the REST client.

pub mod client;
pub mod events;
pub mod invite;
pub mod signature;

pub use client::{DiscordApiError, DiscordClient};
pub use events::{DiscordEventError, DiscordIdentity, Normalized, normalize_dispatch, snowflake_at, snowflake_time};
pub use signature::{DiscordPublicKey, InteractionSignatureError, PublicKeyError};
