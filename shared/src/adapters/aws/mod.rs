//! The AWS adapters: DynamoDB for every store port, SQS for the queue, EventBridge
//! Scheduler for delays beyond SQS's 900 s. Clients share one rustls-on-ring HTTP
//! client and are built once per cold start.

pub mod calls;
pub mod config;
pub mod dynamo;
pub mod emf;
pub mod lambda;
pub mod scheduler;
pub mod secrets;
pub mod sqs;
