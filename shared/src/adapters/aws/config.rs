//! One SDK configuration for every client, from the standard AWS environment
//! (`AWS_REGION`, credentials, `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_<SERVICE>`).

use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use crate::budget::{AWS_ATTEMPT_TIMEOUT, AWS_CALL_TIMEOUT, AWS_MIN_ATTEMPT_TIMEOUT, AWS_MIN_CALL_TIMEOUT, TimeBudget};

/// Loads the SDK configuration with the lean HTTP client (rustls on ring) and every
/// call cut off: the SDK sets none but the connect timeout by default, so a request
/// whose answer never comes would hold its job until Lambda's timeout killed the whole
/// batch. These are the longest cut-offs ([`AWS_CALL_TIMEOUT`]), for calls outside a
/// job (the cold start's secrets, `kuuki setup-aws`; SQS's long polls set the same on
/// their own call); the clients jobs use take their budget's ([`job_timeouts`]), the
/// ingress's the shortest ([`ingress_timeouts`]).
pub async fn load() -> aws_config::SdkConfig {
    let http =
        aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https();
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(http)
        .timeout_config(outside_job_timeouts())
        .load()
        .await
}

/// The longest cut-offs, for calls outside any job ([`load`]'s; SQS's long polls).
pub fn outside_job_timeouts() -> TimeoutConfig {
    timeouts(AWS_ATTEMPT_TIMEOUT, AWS_CALL_TIMEOUT)
}

/// The cut-offs of the AWS calls a job makes: inside its budget's margin
/// ([`TimeBudget::aws_call`]).
pub fn job_timeouts(budget: &TimeBudget) -> TimeoutConfig {
    timeouts(budget.aws_attempt(), budget.aws_call())
}

/// The cut-offs of the ingress's AWS calls (the message's conditional put, the SQS
/// send, a command's reads): the shortest, so a call that never gets an answer fails
/// the request well inside the ingress's own 10 s timeout (Slack has given up at 3 s
/// and retries either way) instead of holding it until Lambda stops it.
pub fn ingress_timeouts() -> TimeoutConfig {
    timeouts(AWS_MIN_ATTEMPT_TIMEOUT, AWS_MIN_CALL_TIMEOUT)
}

/// Each attempt cut at `attempt` (connecting at 3 s at most), the whole call with the
/// SDK's retries at `call`.
pub fn timeouts(attempt: Duration, call: Duration) -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(attempt.min(Duration::from_secs(3)))
        .operation_attempt_timeout(attempt)
        .operation_timeout(call)
        .build()
}
