//! The AWS adapters: DynamoDB for every store port, SQS for the queue, EventBridge
//! Scheduler for delays beyond SQS's 900 s. Clients share one rustls-on-ring HTTP
//! client and are built once per cold start ([`AwsAdapters`]); the Lambda cold start
//! and event handling live in the `kuuki-lambda` crate (`functions/lambda-common`), so
//! this library does not pull in the Lambda runtime.

pub mod calls;
pub mod config;
pub mod dynamo;
pub mod emf;
pub mod kms;
pub mod scheduler;
pub mod secrets;
pub mod sqs;

use std::sync::Arc;

use self::calls::CallCounter;
use self::dynamo::{DynamoStore, TableNames};
use self::scheduler::{EventBridgeScheduler, ScheduleTargets};
use self::sqs::{QueueUrls, SqsQueue};
use crate::adapters::platforms::Role;
use crate::config::Settings;
use crate::deps::{Adapters, Surroundings};
use crate::ports::{Chat, Clock, DecisionLog, Llm};

/// A call made to set up kuuki's AWS resources failed (`kuuki setup-aws`, tests; in AWS
/// the SAM template makes them): what was being done, and the SDK's account of it.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {detail}")]
pub struct SetupError {
    pub action: String,
    pub detail: String,
}

impl SetupError {
    /// Maps an SDK error (shown with its details, `{:?}`) to the step that failed.
    pub fn of<E: std::fmt::Debug>(action: impl Into<String>) -> impl FnOnce(E) -> SetupError {
        let action = action.into();
        move |e| SetupError { action, detail: format!("{e:?}") }
    }
}

/// The AWS adapters, built once.
pub struct AwsAdapters {
    pub store: Arc<DynamoStore>,
    pub queue: Arc<SqsQueue>,
    pub scheduler: Arc<EventBridgeScheduler>,
    pub clock: Arc<dyn Clock>,
}

impl AwsAdapters {
    /// The workers' adapters from the standard AWS environment (see
    /// [`AwsAdapters::for_jobs`]), counting every call with `counter`.
    pub async fn build_counted(settings: &Settings, clock: Arc<dyn Clock>, counter: Option<&CallCounter>) -> Self {
        Self::for_jobs(&config::load().await, settings, clock, counter)
    }

    /// The adapters a function of `role` uses, from the standard AWS environment;
    /// `clock` is the system clock in Lambda.
    pub async fn build_for(role: Role, settings: &Settings, clock: Arc<dyn Clock>) -> Self {
        Self::for_role(&config::load().await, role, settings, clock)
    }

    /// The adapters a function of `role` uses on the clients of `config`: the
    /// ingress's calls are cut off sooner ([`config::ingress_timeouts`]) than a job's
    /// ([`config::job_timeouts`]).
    pub fn for_role(config: &aws_config::SdkConfig, role: Role, settings: &Settings, clock: Arc<dyn Clock>) -> Self {
        match role {
            Role::Ingress => Self::from_config(config, settings, clock, None, config::ingress_timeouts()),
            Role::Worker => Self::for_jobs(config, settings, clock, None),
        }
    }

    /// The workers' adapters on the clients of `config`, each call cut off within the
    /// time budget's margin ([`config::job_timeouts`]).
    pub fn for_jobs(
        config: &aws_config::SdkConfig,
        settings: &Settings,
        clock: Arc<dyn Clock>,
        counter: Option<&CallCounter>,
    ) -> Self {
        let timeouts = config::job_timeouts(&settings.time_budget());
        Self::from_config(config, settings, clock, counter, timeouts)
    }

    /// The adapters on the clients of `config`, each call cut off by `timeouts`.
    fn from_config(
        config: &aws_config::SdkConfig,
        settings: &Settings,
        clock: Arc<dyn Clock>,
        counter: Option<&CallCounter>,
        timeouts: aws_config::timeout::TimeoutConfig,
    ) -> Self {
        let mut dynamo = aws_sdk_dynamodb::config::Builder::from(config).timeout_config(timeouts.clone());
        let mut sqs = aws_sdk_sqs::config::Builder::from(config).timeout_config(timeouts.clone());
        let mut scheduler = aws_sdk_scheduler::config::Builder::from(config).timeout_config(timeouts);
        if let Some(counter) = counter {
            dynamo = dynamo.interceptor(counter.for_service("dynamodb"));
            sqs = sqs.interceptor(counter.for_service("sqs"));
            scheduler = scheduler.interceptor(counter.for_service("scheduler"));
        }
        let store = DynamoStore::new(
            aws_sdk_dynamodb::Client::from_conf(dynamo.build()),
            TableNames {
                messages: settings.storage.messages_table.clone(),
                channels: settings.storage.channels_table.clone(),
                ledger: settings.storage.ledger_table.clone(),
                facts: settings.storage.facts_table.clone(),
            },
            clock.clone(),
            std::time::Duration::from_secs(u64::from(settings.memory.message_retention_days) * 86_400),
        );
        let queue = SqsQueue::new(
            aws_sdk_sqs::Client::from_conf(sqs.build()),
            QueueUrls {
                judge: settings.storage.judge_queue_url.clone(),
                respond: settings.storage.respond_queue_url.clone(),
                summarize: settings.storage.summarize_queue_url.clone(),
                reflect: settings.storage.reflect_queue_url.clone(),
                forget: settings.storage.forget_queue_url.clone(),
            },
        );
        let scheduler = EventBridgeScheduler::new(
            aws_sdk_scheduler::Client::from_conf(scheduler.build()),
            ScheduleTargets {
                group: settings.storage.schedule_group.clone(),
                role_arn: settings.storage.scheduler_role_arn.clone(),
                judge_queue_arn: settings.storage.judge_queue_arn.clone(),
                respond_queue_arn: settings.storage.respond_queue_arn.clone(),
                summarize_queue_arn: settings.storage.summarize_queue_arn.clone(),
                reflect_queue_arn: settings.storage.reflect_queue_arn.clone(),
                forget_queue_arn: settings.storage.forget_queue_arn.clone(),
            },
        );
        AwsAdapters { store: Arc::new(store), queue: Arc::new(queue), scheduler: Arc::new(scheduler), clock }
    }

    pub fn adapters(&self, chat: Arc<dyn Chat>, llm: Option<Arc<dyn Llm>>, log: Arc<dyn DecisionLog>) -> Adapters {
        let around = Surroundings { chat, llm, clock: self.clock.clone(), log };
        Adapters::from_store(self.store.clone(), self.queue.clone(), self.scheduler.clone(), around)
    }
}
