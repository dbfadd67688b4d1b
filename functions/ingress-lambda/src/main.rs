//! The ingress Lambda: the same router `kuuki serve` serves, behind a Function URL or
//! an HTTP API (lambda_http decodes base64 bodies). Built once per cold start.

use std::sync::Arc;

use kuuki::adapters::platforms::Role;
use kuuki_ingress::{Ingress, app};
use kuuki_lambda::{Started, cold_start};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt().json().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let Started { deps, connected, install, .. } = cold_start(&std::env::vars().collect(), Role::Ingress).await?;
    let metrics_for = std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok();
    lambda_http::run(app(Arc::new(Ingress::new(deps, &connected, metrics_for, install)?))).await
}
