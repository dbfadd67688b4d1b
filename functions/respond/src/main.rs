//! The respond Lambda: RESPOND jobs from SQS, with partial batch failures. Settings, AWS
//! clients, the Slack identity and the LLM are built once per cold start.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), kuuki_lambda::Error> {
    tracing_subscriber::fmt().json().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    kuuki_lambda::run_sqs_worker(&[kuuki::budget::JobKind::Respond]).await
}
