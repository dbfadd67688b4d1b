//! One SDK configuration for every client, from the standard AWS environment
//! (`AWS_REGION`, credentials, `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_<SERVICE>`).

use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

/// Loads the SDK configuration with the lean HTTP client (rustls on ring) and every
/// call cut off: the SDK sets none but the connect timeout by default, so a request
/// whose answer never comes would hold its job until Lambda's timeout killed the whole
/// batch (see [`crate::budget::AWS_CALL_TIMEOUT`]).
pub async fn load() -> aws_config::SdkConfig {
    use crate::budget::{AWS_ATTEMPT_TIMEOUT, AWS_CALL_TIMEOUT};
    let http =
        aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https();
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(std::time::Duration::from_secs(3))
        .operation_attempt_timeout(AWS_ATTEMPT_TIMEOUT)
        .operation_timeout(AWS_CALL_TIMEOUT)
        .build();
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(http).timeout_config(timeouts).load().await
}
