//! One dispatch to ingress: `POST {KUUKI_INGRESS_URL}/discord/events`, the body as the
//! gateway sent it, signed `v0=` HMAC-SHA256 over `v0:{ts}:{body}` (Slack's scheme, the
//! same code ingress verifies with). A 5xx, 408, 429 or a connection error is retried
//! with back-off and `X-Kuuki-Relay-Retry: 1`; any other 4xx is logged and dropped:
//! sent again it would be refused again.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kuuki::adapters::slack::signature::SigningSecret;
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;

use crate::settings::RetryPolicy;

pub const TIMESTAMP_HEADER: &str = "X-Kuuki-Relay-Timestamp";
pub const SIGNATURE_HEADER: &str = "X-Kuuki-Relay-Signature";
pub const RETRY_HEADER: &str = "X-Kuuki-Relay-Retry";

/// One request's limit: ingress answers within Discord's and Slack's 3 s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What became of one dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Ingress answered 2xx, at the `attempts`-th try.
    Delivered { attempts: u32 },
    /// Ingress refused it (a 4xx other than 408 and 429): dropped, never retried.
    Refused { status: u16 },
    /// Retried until the policy's `give_up_after`: dropped.
    GaveUp { attempts: u32 },
}

pub struct Forwarder {
    client: reqwest::Client,
    url: String,
    secret: SigningSecret,
    retry: RetryPolicy,
}

/// Seconds since the Unix epoch (the relay is a composition root: it may read the clock).
pub fn unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl Forwarder {
    pub fn new(ingress_url: &str, secret: SigningSecret, retry: RetryPolicy) -> Self {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("a reqwest client builds");
        Forwarder { client, url: format!("{}/discord/events", ingress_url.trim_end_matches('/')), secret, retry }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Delivers `body` (a gateway dispatch's JSON, unchanged), retrying as the policy says.
    pub async fn forward(&self, body: &str) -> Outcome {
        let started = Instant::now();
        let mut delay = self.retry.first_delay;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let timestamp = unix_seconds().to_string();
            let signature = self.secret.sign(&timestamp, body.as_bytes());
            let mut request = self
                .client
                .post(&self.url)
                .header(CONTENT_TYPE, "application/json")
                .header(TIMESTAMP_HEADER, &timestamp)
                .header(SIGNATURE_HEADER, signature)
                .body(body.to_owned());
            if attempts > 1 {
                request = request.header(RETRY_HEADER, "1");
            }
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    if attempts > 1 {
                        tracing::info!(attempts, "dispatch forwarded after retries");
                    }
                    return Outcome::Delivered { attempts };
                }
                Ok(response) if is_final(response.status()) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    let text: String = text.chars().take(200).collect();
                    tracing::error!(
                        status = status.as_u16(),
                        response = %text,
                        "ingress refused a dispatch; dropped (is DISCORD_RELAY_SECRET the same on both sides, and the clock right?)"
                    );
                    return Outcome::Refused { status: status.as_u16() };
                }
                Ok(response) => {
                    tracing::warn!(
                        status = response.status().as_u16(),
                        attempts,
                        "ingress failed a dispatch; retrying"
                    );
                }
                Err(error) => {
                    tracing::warn!(error = %error, attempts, "could not reach ingress; retrying");
                }
            }
            if started.elapsed() + delay > self.retry.give_up_after {
                tracing::error!(attempts, "ingress did not take a dispatch in time; dropped");
                return Outcome::GaveUp { attempts };
            }
            // Up to a quarter more, so that relays do not retry in step.
            let jitter = delay.mul_f64(fastrand::f64() / 4.0);
            tokio::time::sleep(delay + jitter).await;
            delay = (delay * 2).min(self.retry.max_delay);
        }
    }
}

/// A status a retry cannot change: a 4xx, except 408 (timeout) and 429 (too many).
fn is_final(status: StatusCode) -> bool {
    status.is_client_error() && status != StatusCode::REQUEST_TIMEOUT && status != StatusCode::TOO_MANY_REQUESTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_statuses_are_final() {
        for (status, final_) in
            [(400, true), (401, true), (404, true), (408, false), (429, false), (500, false), (503, false)]
        {
            assert_eq!(is_final(StatusCode::from_u16(status).unwrap()), final_, "{status}");
        }
    }

    #[test]
    fn the_events_url_is_under_the_ingress_base() {
        let f = Forwarder::new("https://kuuki.example/prod/", SigningSecret::new("s"), RetryPolicy::default());
        assert_eq!(f.url(), "https://kuuki.example/prod/discord/events");
    }
}
