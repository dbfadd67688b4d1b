//! What every kuuki Lambda does around `kuuki-shared`: the cold start (settings,
//! secrets, AWS clients, one opened connection, the chat identity) and, for the
//! workers, the SQS event mapping with partial batch failures. A crate of its own so
//! the library does not pull in the Lambda runtime.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use kuuki::adapters::aws::emf::EmfLog;
use kuuki::adapters::aws::sqs::{SqsQueue, queue_message, retry_later};
use kuuki::adapters::aws::{AwsAdapters, secrets};
use kuuki::adapters::llm::{CountingLlm, embedder_from_settings};
use kuuki::adapters::platforms::{self, Connected, Role};
use kuuki::adapters::system::SystemClock;
use kuuki::budget::JobKind;
use kuuki::config::{Settings, persona_from_vars};
use kuuki::deps::Deps;
use kuuki::install::Installer;
use kuuki::ports::{Clock, Llm, SlackTokens};
use kuuki::worker::{QueueMessage, run_batch};
use kuuki::workspaces::Workspaces;

/// What a Lambda's `main` returns.
pub use lambda_runtime::Error;

/// What a cold start makes, once per Lambda instance.
pub struct Started {
    pub deps: Arc<Deps>,
    pub connected: Connected,
    /// The SQS client and queue URLs, for settling a worker's failed messages.
    pub queue: Arc<SqsQueue>,
    /// Serving many Slack workspaces, the ingress's "Add to Slack".
    pub install: Option<Arc<Installer>>,
}

/// Why a cold start stopped; each names what to check.
#[derive(Debug, thiserror::Error)]
pub enum ColdStartError {
    #[error(transparent)]
    Secrets(#[from] secrets::SecretsError),
    #[error(transparent)]
    Settings(#[from] kuuki::config::ConfigError),
    #[error(transparent)]
    Persona(#[from] kuuki::config::PersonaError),
    #[error(transparent)]
    Connect(#[from] platforms::ConnectError),
    #[error(transparent)]
    TokenKey(#[from] kuuki::adapters::sealer::BadKey),
}

/// Everything a Lambda needs, from its environment: validated settings, the AWS
/// adapters, the chat platforms signed in with kuuki's identity on each (`auth.test`,
/// `GET /users/@me`, which also open the connections the first request would
/// otherwise pay for), the LLM. Errors stop the cold start with a message naming what
/// is wrong.
pub async fn cold_start(vars: &HashMap<String, String>, role: Role) -> Result<Started, ColdStartError> {
    let function = vars.get("AWS_LAMBDA_FUNCTION_NAME").cloned().unwrap_or_else(|| "kuuki".into());
    let mut vars = vars.clone();
    // A Lambda holds no websocket: Discord reaches it over HTTP (interactions verified
    // with DISCORD_PUBLIC_KEY, relayed messages), so ingress requires the public key.
    vars.insert("DISCORD_GATEWAY".into(), "false".into());
    let config = kuuki::adapters::aws::config::load().await;
    secrets::resolve(&aws_sdk_secretsmanager::Client::new(&config), &mut vars).await?;
    let settings = Settings::from_vars(&vars)?;
    let persona_file = persona_from_vars(&vars)?;
    // The ingress never calls the model (it verifies, stores and queues), so it is not
    // given the LLM key (infra/template.yaml) and builds no client that would need it.
    let (llm, embedder) = match role {
        Role::Ingress => (None, None),
        Role::Worker => (
            kuuki::adapters::llm::from_settings(&settings)?
                .map(|llm| Arc::new(CountingLlm::new(llm).with_metrics(&function)) as Arc<dyn Llm>),
            embedder_from_settings(&settings)?,
        ),
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let aws = AwsAdapters::build_for(role, &settings, clock.clone()).await;
    // Many Slack workspaces (SLACK_CLIENT_ID): their installations in the channels
    // table, read once per workspace and warm instance a while (kuuki::workspaces).
    let platforms = &settings.platforms;
    let oauth: Arc<dyn kuuki::ports::SlackOAuth> = Arc::new(kuuki::adapters::slack::oauth::SlackOAuthClient::new(
        &platforms.slack_api_base_url,
        &platforms.slack_client_id,
        platforms.slack_client_secret.clone(),
        settings.budget.chat_timeout,
    ));
    let workspaces = if platforms.slack_many_workspaces() {
        let timeouts = match role {
            Role::Ingress => kuuki::adapters::aws::config::ingress_timeouts(),
            Role::Worker => kuuki::adapters::aws::config::job_timeouts(&settings.time_budget()),
        };
        let sealer = kuuki::adapters::aws::kms::token_sealer(platforms, timeouts).await?;
        let workspaces = Workspaces::new(aws.store.clone(), sealer, clock);
        // Rotating tokens are refreshed by whichever function reads one that is due.
        Some(Arc::new(workspaces.with_rotation(oauth.clone(), aws.store.clone())))
    } else {
        None
    };
    let tokens = workspaces.clone().map(|w| w as Arc<dyn SlackTokens>);
    let connected = platforms::connect_with(&settings, role, tokens).await?;
    let persona = settings.persona(persona_file.as_ref());
    let log_text = kuuki::domain::LogText::from_setting(settings.storage.log_message_text);
    if settings.storage.log_message_text {
        tracing::warn!("LOG_MESSAGE_TEXT=true: the decision log carries message text, replies, facts and summaries");
    }
    let adapters = aws
        .adapters(connected.chat.clone(), llm, Arc::new(EmfLog::new(std::io::stdout(), &function, log_text)))
        .with_embedder(embedder);
    let mut ids = connected.bot_ids().into_iter();
    let first = ids.next().expect("connect serves at least one platform");
    let deps = ids.fold(Deps::new(settings, persona, first, adapters, fastrand::u64(..)), Deps::also_known_as);
    let install = match (&workspaces, role) {
        (Some(workspaces), Role::Ingress) => Some(Arc::new(Installer::new(&deps.settings, workspaces.clone(), oauth))),
        _ => None,
    };
    let deps = match workspaces {
        Some(workspaces) => deps.with_workspaces(workspaces),
        None => deps,
    };
    Ok(Started { deps: Arc::new(deps), connected, queue: aws.queue.clone(), install })
}

/// An SQS event from the queue of the `kind` worker; failed records (a job of
/// another kind among them) are reported, not the batch, and each is set to come back
/// after its [`kuuki::worker::redelivery_delay`] rather than the visibility timeout.
///
/// `time_left` is what the invocation has before Lambda stops it (from its context);
/// jobs are stopped early enough to leave the settle call and the answer a second.
pub async fn handle_sqs_event(
    deps: &Deps,
    queue: &SqsQueue,
    kind: JobKind,
    event: SqsEvent,
    time_left: Option<std::time::Duration>,
) -> SqsBatchResponse {
    let messages: Vec<QueueMessage> = event
        .records
        .iter()
        .map(|r| {
            queue_message(
                r.message_id.clone().unwrap_or_default(),
                r.body.as_deref().unwrap_or_default(),
                r.attributes.get("ApproximateReceiveCount").map(String::as_str),
            )
        })
        .collect();
    let mut stop_after = deps.budget.job_deadline();
    if let Some(left) = time_left {
        stop_after = stop_after.min(left.saturating_sub(deps.budget.settle + std::time::Duration::from_secs(1)));
    }
    let failed = run_batch(deps, kind, &messages, stop_after).await;
    let receipt_of = |id: &str| {
        event.records.iter().find(|r| r.message_id.as_deref() == Some(id)).and_then(|r| r.receipt_handle.as_deref())
    };
    // The budget leaves this much of the Lambda timeout after the jobs.
    retry_later(queue.client(), queue.urls().for_kind(kind), &failed, receipt_of, deps.budget.settle).await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failed
        .into_iter()
        .map(|failed| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = failed.id;
            failure
        })
        .collect();
    response
}

/// The kind of the queue an SQS event came from, among the worker's `kinds`: by its
/// records' source ARN (one event source mapping, one queue, per event); the first of
/// `kinds` when the event names none of their queues.
pub fn event_kind(queue: &SqsQueue, kinds: &[JobKind], event: &SqsEvent) -> JobKind {
    let source = event.records.iter().find_map(|r| r.event_source_arn.as_deref());
    match source.and_then(|arn| queue.urls().kind_of_arn(arn)).filter(|kind| kinds.contains(kind)) {
        Some(kind) => kind,
        None => {
            tracing::warn!(?source, expected = ?kinds, "an SQS event from a queue this worker does not read");
            kinds[0]
        }
    }
}

/// A worker Lambda's whole life: the cold start, then SQS batches of its `kinds` of
/// jobs until the runtime stops. Each worker function runs only its own kinds (the
/// reflect worker: reflections and forget requests, from two queues): its queues and
/// IAM policy are theirs, so a job sent to the wrong queue goes to its dead letters.
pub async fn run_sqs_worker(kinds: &'static [JobKind]) -> Result<(), Error> {
    let Started { deps, queue, .. } = cold_start(&std::env::vars().collect(), Role::Worker).await?;
    lambda_runtime::run(lambda_runtime::service_fn(|event: lambda_runtime::LambdaEvent<SqsEvent>| {
        let (deps, queue) = (deps.clone(), queue.clone());
        // The invocation's deadline (ms since the epoch): a cold start that ran long, or a
        // batch received late, has less than the whole timeout.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let left = std::time::Duration::from_millis(event.context.deadline.saturating_sub(now.as_millis() as u64));
        async move {
            let kind = event_kind(&queue, kinds, &event.payload);
            Ok::<SqsBatchResponse, Error>(handle_sqs_event(&deps, &queue, kind, event.payload, Some(left)).await)
        }
    }))
    .await
}
