//! kuuki's library: everything with logic in it, behind ports (docs/design.md §1, §3).

pub mod adapters;
pub mod budget;
pub mod config;
pub mod context;
pub(crate) mod conversation;
pub mod deps;
pub mod domain;
pub mod eval;
pub mod ingest;
pub mod install;
pub mod judge;
pub mod memory;
pub mod ports;
pub mod prompts;
mod record;
pub mod replay;
pub mod respond;
pub mod talkativeness;
pub mod worker;
pub mod workspaces;

/// Settings hold credentials as `secrecy` strings; callers expose them where used.
pub use secrecy;
