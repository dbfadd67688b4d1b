//! What both HTTP providers share: one POST with a timeout, bounded retries with
//! backoff on 429, 5xx and transport errors (honouring `Retry-After`), and errors
//! that say what happened without echoing keys.

use std::time::Duration;

use serde_json::Value;

use crate::ports::LlmError;

/// How HTTP calls to a model behave (`LLM_TIMEOUT_SECONDS`, `LLM_MAX_RETRIES`).
#[derive(Debug, Clone)]
pub struct HttpPolicy {
    pub timeout: Duration,
    pub max_retries: u32,
    /// The first backoff; it doubles after each retry.
    pub backoff: Duration,
    /// The longest wait between two attempts (the time budget counts it): a longer
    /// `Retry-After` is cut to this, and so is the doubling backoff.
    pub max_retry_wait: Duration,
}

pub(super) fn client(policy: &HttpPolicy) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(policy.timeout)
        .build()
        .expect("a reqwest client builds")
}

/// An error text from a provider, short enough for a log line.
pub(super) fn clip(text: &str) -> String {
    text.chars().take(300).collect()
}

/// POSTs `body` to `url` with `headers`, retrying what may pass, and returns the JSON.
pub(super) async fn post_json(
    http: &reqwest::Client,
    policy: &HttpPolicy,
    provider: &'static str,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Result<Value, LlmError> {
    let mut attempt = 0;
    loop {
        let mut request = http.post(url).json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (error, wait) = match request.send().await {
            Ok(response) if response.status().is_success() => {
                return response
                    .json::<Value>()
                    .await
                    .map_err(|e| LlmError::Failed(format!("{provider}: unreadable answer ({})", e.without_url())));
            }
            Ok(response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let detail = clip(&response.text().await.unwrap_or_default());
                let error = format!("{provider}: HTTP {status}: {detail}");
                if status.as_u16() != 429 && !status.is_server_error() {
                    // 400, 401, 404: asking again will not help.
                    return Err(LlmError::Failed(error));
                }
                (error, retry_after)
            }
            Err(e) if e.is_timeout() => (format!("{provider}: timed out after {:?}", policy.timeout), None),
            Err(e) => (format!("{provider}: {}", e.without_url()), None),
        };
        if attempt >= policy.max_retries {
            return Err(LlmError::Failed(format!("{error} (after {} attempts)", attempt + 1)));
        }
        let wait = wait
            .unwrap_or(policy.backoff.saturating_mul(2u32.saturating_pow(attempt)))
            .min(policy.max_retry_wait);
        tracing::info!(provider, attempt, ?wait, %error, "LLM call failed; retrying");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}
