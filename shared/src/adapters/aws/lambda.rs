//! What every Lambda does at a cold start (settings, SDK clients, one opened
//! connection, Slack identity) and the SQS event mapping of the workers.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};

use super::calls::CallCounter;
use super::dynamo::{DynamoStore, TableNames};
use super::scheduler::{EventBridgeScheduler, ScheduleTargets};
use super::sqs::{QueueUrls, SqsQueue};
use crate::adapters::platforms::{Connected, Role};
use crate::adapters::system::SystemClock;
use crate::budget::JobKind;
use crate::config::Settings;
use crate::deps::{Adapters, Deps, Surroundings};
use crate::ports::{Chat, Clock, DecisionLog, Llm};
use crate::worker::{QueueMessage, run_batch};

/// The AWS adapters, built once.
pub struct AwsAdapters {
    pub store: Arc<DynamoStore>,
    pub queue: Arc<SqsQueue>,
    pub scheduler: Arc<EventBridgeScheduler>,
    pub clock: Arc<dyn Clock>,
}

impl AwsAdapters {
    /// Clients from the standard AWS environment; `clock` is the system clock in Lambda.
    pub async fn build(settings: &Settings, clock: Arc<dyn Clock>) -> Self {
        Self::build_counted(settings, clock, None).await
    }

    /// Like [`AwsAdapters::build`], counting every call with `counter`.
    pub async fn build_counted(settings: &Settings, clock: Arc<dyn Clock>, counter: Option<&CallCounter>) -> Self {
        let config = super::config::load().await;
        let mut dynamo = aws_sdk_dynamodb::config::Builder::from(&config);
        let mut sqs = aws_sdk_sqs::config::Builder::from(&config);
        let mut scheduler = aws_sdk_scheduler::config::Builder::from(&config);
        if let Some(counter) = counter {
            dynamo = dynamo.interceptor(counter.for_service("dynamodb"));
            sqs = sqs.interceptor(counter.for_service("sqs"));
            scheduler = scheduler.interceptor(counter.for_service("scheduler"));
        }
        let store = DynamoStore::new(
            aws_sdk_dynamodb::Client::from_conf(dynamo.build()),
            TableNames {
                messages: settings.messages_table.clone(),
                channels: settings.channels_table.clone(),
                ledger: settings.ledger_table.clone(),
                facts: settings.facts_table.clone(),
            },
            clock.clone(),
            std::time::Duration::from_secs(u64::from(settings.message_retention_days) * 86_400),
        );
        let queue = SqsQueue::new(
            aws_sdk_sqs::Client::from_conf(sqs.build()),
            QueueUrls {
                judge: settings.judge_queue_url.clone(),
                respond: settings.respond_queue_url.clone(),
                summarize: settings.summarize_queue_url.clone(),
                reflect: settings.reflect_queue_url.clone(),
            },
        );
        let scheduler = EventBridgeScheduler::new(
            aws_sdk_scheduler::Client::from_conf(scheduler.build()),
            ScheduleTargets {
                group: settings.schedule_group.clone(),
                role_arn: settings.scheduler_role_arn.clone(),
                judge_queue_arn: settings.judge_queue_arn.clone(),
                respond_queue_arn: settings.respond_queue_arn.clone(),
                summarize_queue_arn: settings.summarize_queue_arn.clone(),
                reflect_queue_arn: settings.reflect_queue_arn.clone(),
            },
        );
        AwsAdapters { store: Arc::new(store), queue: Arc::new(queue), scheduler: Arc::new(scheduler), clock }
    }

    pub fn adapters(&self, chat: Arc<dyn Chat>, llm: Option<Arc<dyn Llm>>, log: Arc<dyn DecisionLog>) -> Adapters {
        let around = Surroundings { chat, llm, clock: self.clock.clone(), log };
        Adapters::from_store(self.store.clone(), self.queue.clone(), self.scheduler.clone(), around)
    }
}

/// Everything a Lambda needs, from its environment: validated settings, the AWS
/// adapters, the chat platforms signed in with kuuki's identity on each (`auth.test`,
/// `GET /users/@me`, which also open the connections the first request would
/// otherwise pay for), the LLM. Errors stop the cold start with a message naming what
/// is wrong.
pub async fn cold_start(vars: &HashMap<String, String>, role: Role) -> Result<(Arc<Deps>, Connected), String> {
    let function = vars.get("AWS_LAMBDA_FUNCTION_NAME").cloned().unwrap_or_else(|| "kuuki".into());
    let mut vars = vars.clone();
    let config = super::config::load().await;
    super::secrets::resolve(&aws_sdk_secretsmanager::Client::new(&config), &mut vars).await?;
    let settings = Settings::from_vars(&vars).map_err(|e| e.to_string())?;
    let persona_file = crate::config::persona_from_vars(&vars)?;
    let llm = crate::adapters::llm::from_settings(&settings)
        .map_err(|e| e.to_string())?
        .map(|llm| Arc::new(crate::adapters::llm::CountingLlm::new(llm).with_metrics(&function)) as Arc<dyn Llm>);
    let embedder = crate::adapters::llm::embedder_from_settings(&settings).map_err(|e| e.to_string())?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let aws = AwsAdapters::build(&settings, clock).await;
    let connected = crate::adapters::platforms::connect(&settings, role).await?;
    let persona = settings.persona(persona_file.as_ref());
    let adapters = aws
        .adapters(connected.chat.clone(), llm, Arc::new(super::emf::EmfLog::new(std::io::stdout(), &function)))
        .with_embedder(embedder);
    let mut ids = connected.bot_ids().into_iter();
    let first = ids.next().expect("connect serves at least one platform");
    let deps = ids.fold(Deps::new(settings, persona, first, adapters, fastrand::u64(..)), Deps::also_known_as);
    Ok((Arc::new(deps), connected))
}

/// An SQS event from the queue of the `kind` worker; failed records (a job of
/// another kind among them) are reported, not the batch.
pub async fn handle_sqs_event(deps: &Deps, kind: JobKind, event: SqsEvent) -> SqsBatchResponse {
    let messages: Vec<QueueMessage> = event
        .records
        .into_iter()
        .map(|r| super::sqs::queue_message(r.message_id.unwrap_or_default(), r.body.as_deref().unwrap_or_default()))
        .collect();
    let failed = run_batch(deps, kind, &messages).await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failed
        .into_iter()
        .map(|id| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            failure
        })
        .collect();
    response
}

/// A worker Lambda's whole life: the cold start, then SQS batches of `kind` jobs until
/// the runtime stops. Each worker function runs only its own kind: its queue and IAM
/// policy are that kind's, so a job sent to the wrong queue goes to its dead letters.
pub async fn run_sqs_worker(kind: JobKind) -> Result<(), lambda_runtime::Error> {
    let (deps, _) = cold_start(&std::env::vars().collect(), Role::Worker).await?;
    lambda_runtime::run(lambda_runtime::service_fn(|event: lambda_runtime::LambdaEvent<SqsEvent>| {
        let deps = deps.clone();
        async move { Ok::<SqsBatchResponse, lambda_runtime::Error>(handle_sqs_event(&deps, kind, event.payload).await) }
    }))
    .await
}
