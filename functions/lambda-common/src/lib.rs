//! What every kuuki Lambda does around `kuuki-shared`: the cold start (settings,
//! secrets, AWS clients, one opened connection, the chat identity) and, for the
//! workers, the SQS event mapping with partial batch failures. A crate of its own so
//! the library does not pull in the Lambda runtime.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use kuuki::adapters::aws::emf::EmfLog;
use kuuki::adapters::aws::sqs::queue_message;
use kuuki::adapters::aws::{AwsAdapters, secrets};
use kuuki::adapters::llm::{CountingLlm, embedder_from_settings};
use kuuki::adapters::platforms::{self, Connected, Role};
use kuuki::adapters::system::SystemClock;
use kuuki::budget::JobKind;
use kuuki::config::{Settings, persona_from_vars};
use kuuki::deps::Deps;
use kuuki::ports::{Clock, Llm};
use kuuki::worker::{QueueMessage, run_batch};

/// What a Lambda's `main` returns.
pub use lambda_runtime::Error;

/// Everything a Lambda needs, from its environment: validated settings, the AWS
/// adapters, the chat platforms signed in with kuuki's identity on each (`auth.test`,
/// `GET /users/@me`, which also open the connections the first request would
/// otherwise pay for), the LLM. Errors stop the cold start with a message naming what
/// is wrong.
pub async fn cold_start(vars: &HashMap<String, String>, role: Role) -> Result<(Arc<Deps>, Connected), String> {
    let function = vars.get("AWS_LAMBDA_FUNCTION_NAME").cloned().unwrap_or_else(|| "kuuki".into());
    let mut vars = vars.clone();
    let config = kuuki::adapters::aws::config::load().await;
    secrets::resolve(&aws_sdk_secretsmanager::Client::new(&config), &mut vars).await?;
    let settings = Settings::from_vars(&vars).map_err(|e| e.to_string())?;
    let persona_file = persona_from_vars(&vars)?;
    let llm = kuuki::adapters::llm::from_settings(&settings)
        .map_err(|e| e.to_string())?
        .map(|llm| Arc::new(CountingLlm::new(llm).with_metrics(&function)) as Arc<dyn Llm>);
    let embedder = embedder_from_settings(&settings).map_err(|e| e.to_string())?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let aws = AwsAdapters::build(&settings, clock).await;
    let connected = platforms::connect(&settings, role).await?;
    let persona = settings.persona(persona_file.as_ref());
    let adapters = aws
        .adapters(connected.chat.clone(), llm, Arc::new(EmfLog::new(std::io::stdout(), &function)))
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
        .map(|r| queue_message(r.message_id.unwrap_or_default(), r.body.as_deref().unwrap_or_default()))
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
pub async fn run_sqs_worker(kind: JobKind) -> Result<(), Error> {
    let (deps, _) = cold_start(&std::env::vars().collect(), Role::Worker).await?;
    lambda_runtime::run(lambda_runtime::service_fn(|event: lambda_runtime::LambdaEvent<SqsEvent>| {
        let deps = deps.clone();
        async move { Ok::<SqsBatchResponse, Error>(handle_sqs_event(&deps, kind, event.payload).await) }
    }))
    .await
}
