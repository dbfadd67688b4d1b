//! Adapters behind the ports: in-process ones for replay, serve and tests; the AWS
//! ones (DynamoDB, SQS, Scheduler, Secrets Manager, EMF), the chat platforms (Slack,
//! Discord, and one Chat over both) and the LLM providers.

pub mod aws;
pub mod contract;
pub mod discord;
pub mod llm;
pub mod memory;
pub mod platforms;
pub mod retry;
pub mod slack;
pub mod system;
