//! The summarize Lambda: SUMMARIZE jobs from SQS (every SUMMARIZE_EVERY_N_MESSAGES or
//! SUMMARIZE_EVERY_N_MINUTES per channel) and the REMEMBER jobs that queue them, with
//! partial batch failures.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), kuuki_lambda::Error> {
    tracing_subscriber::fmt().json().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    kuuki_lambda::run_sqs_worker(&[kuuki::budget::JobKind::Summarize]).await
}
