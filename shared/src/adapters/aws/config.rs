//! One SDK configuration for every client, from the standard AWS environment
//! (`AWS_REGION`, credentials, `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_<SERVICE>`).

use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

/// Loads the SDK configuration with the lean HTTP client (rustls on ring).
pub async fn load() -> aws_config::SdkConfig {
    let http =
        aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https();
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(http).load().await
}
