//! What both HTTP providers share: one POST with a timeout, bounded retries with
//! backoff on 429, 5xx and transport errors (honouring `Retry-After`), and errors
//! that say what happened without echoing keys.

use std::time::Duration;

use serde_json::Value;

use crate::adapters::retry::{LongerWait, RetryPolicy, retry_after};
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

impl HttpPolicy {
    /// Every failure that may pass is tried again, after `Retry-After` or the backoff,
    /// cut to `max_retry_wait`.
    pub fn retry(&self) -> RetryPolicy {
        RetryPolicy {
            attempts: self.max_retries.saturating_add(1),
            backoff: self.backoff,
            max_wait: self.max_retry_wait,
            longer_wait: LongerWait::Cut,
            within: None,
        }
    }
}

pub(super) fn client(policy: &HttpPolicy) -> reqwest::Client {
    reqwest::Client::builder().timeout(policy.timeout).build().expect("a reqwest client builds")
}

/// An error text from a provider, short enough for a log line.
pub(super) fn clip(text: &str) -> String {
    text.chars().take(300).collect()
}

/// A provider's JSON answer read into the typed shape the provider expects.
pub(super) fn decode<T: serde::de::DeserializeOwned>(provider: &'static str, answer: Value) -> Result<T, LlmError> {
    serde_json::from_value(answer).map_err(|e| LlmError::Failed(format!("{provider}: unreadable answer ({e})")))
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
    post_json_asking(http, policy, provider, url, headers, body, None).await.map_err(|e| match e {
        Refused::Failed(e) => e,
        Refused::Format(status) => LlmError::Failed(format!("{provider}: HTTP {status}")),
    })
}

/// Why a POST that asked for structured output came back without an answer.
#[derive(Debug)]
pub(super) enum Refused {
    /// The server refused the request as malformed for its structured-output part: an
    /// HTTP 400, 422 or 500 whose body names it (one of the words given). Not retried.
    Format(reqwest::StatusCode),
    /// Anything else, retried first where that may help.
    Failed(LlmError),
}

/// [`post_json`] for a request that asks for structured output: an answer that refuses
/// it as malformed (`format_words`, lowercase, name it in the body) ends at once as
/// [`Refused::Format`] instead of being retried like an outage.
pub(super) async fn post_json_asking(
    http: &reqwest::Client,
    policy: &HttpPolicy,
    provider: &'static str,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
    format_words: Option<&[&str]>,
) -> Result<Value, Refused> {
    let retry = policy.retry();
    let mut attempt = 0;
    loop {
        let mut request = http.post(url).json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (error, asked) = match request.send().await {
            Ok(response) if response.status().is_success() => {
                return response.json::<Value>().await.map_err(|e| {
                    Refused::Failed(LlmError::Failed(format!("{provider}: unreadable answer ({})", e.without_url())))
                });
            }
            Ok(response) => {
                let status = response.status();
                let asked = retry_after(response.headers());
                let text = response.text().await.unwrap_or_default();
                if let Some(words) = format_words
                    && matches!(status.as_u16(), 400 | 422 | 500)
                    && names_any(&text, words)
                {
                    return Err(Refused::Format(status));
                }
                let error = format!("{provider}: HTTP {status}: {}", clip(&text));
                if status.as_u16() != 429 && !status.is_server_error() {
                    // 400, 401, 404: asking again will not help.
                    return Err(Refused::Failed(LlmError::Failed(error)));
                }
                (error, asked)
            }
            Err(e) if e.is_timeout() => (format!("{provider}: timed out after {:?}", policy.timeout), None),
            Err(e) => (format!("{provider}: {}", e.without_url()), None),
        };
        let Some(wait) = retry.wait_after(attempt, asked) else {
            return Err(Refused::Failed(LlmError::Failed(format!("{error} (after {} attempts)", attempt + 1))));
        };
        tracing::info!(provider, attempt, ?wait, %error, "LLM call failed; retrying");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// Whether an error body names one of `words` (lowercase), in any case.
fn names_any(body: &str, words: &[&str]) -> bool {
    let body = body.to_lowercase();
    words.iter().any(|word| body.contains(word))
}
