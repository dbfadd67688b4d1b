//! The reflect Lambda: REFLECT jobs from SQS (a channel fell quiet, or its buffer
//! filled), the daily fact clean-up a schedule sends, and FORGET jobs from a queue of
//! their own, with partial batch failures.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), kuuki_lambda::Error> {
    tracing_subscriber::fmt().json().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    kuuki_lambda::run_sqs_worker(&[kuuki::budget::JobKind::Reflect, kuuki::budget::JobKind::Forget]).await
}
