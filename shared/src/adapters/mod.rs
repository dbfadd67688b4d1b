//! Adapters behind the ports: in-process ones for replay, serve and tests; platform
//! and AWS ones arrive with their issues.

pub mod aws;
pub mod contract;
pub mod discord;
pub mod llm;
pub mod memory;
pub mod platforms;
pub mod retry;
pub mod slack;
pub mod system;
