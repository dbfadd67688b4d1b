//! The respond Lambda: RESPOND jobs from SQS, with partial batch failures. Built once per
//! cold start: settings, AWS clients, Slack identity, the LLM.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use kuuki::adapters::aws::lambda::{cold_start, handle_sqs_event};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt().json().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let (deps, _) = cold_start(&std::env::vars().collect()).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let deps = deps.clone();
        async move { Ok::<SqsBatchResponse, Error>(handle_sqs_event(&deps, event.payload).await) }
    }))
    .await
}
