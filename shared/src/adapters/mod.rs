//! Adapters behind the ports: in-process ones for replay, serve and tests; the AWS
//! ones (DynamoDB, SQS, Scheduler, Secrets Manager, EMF), the chat platforms (Slack,
//! Discord, and one Chat over both) and the LLM providers.

pub mod aws;
// The checks every store and queue adapter must pass: for tests only (the e2e crate
// turns on `testing` to run them on the emulators), so release builds leave them out.
#[cfg(any(test, feature = "testing"))]
pub mod contract;
pub mod discord;
pub mod llm;
pub mod memory;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod platforms;
pub mod retry;
pub mod sealer;
pub mod slack;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod system;
