//! The Slack Web API over reqwest: `auth.test`, `chat.postMessage`, `reactions.add`,
//! `users.info` (cached). 429 answers are retried after `Retry-After`; `ok: false`
//! answers are refusals, logged and never retried into a duplicate post.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use thiserror::Error;

use super::SlackIdentity;
use crate::domain::{ChannelId, Ts, UserId};
use crate::ports::{Chat, PortError, PortResult, Post};

/// Retries after 429 before giving up (the job is then redelivered later).
const RATE_LIMIT_RETRIES: u32 = 3;
/// A `Retry-After` longer than this is not waited for inside one call.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Error, Clone, PartialEq)]
pub enum SlackApiError {
    /// Slack answered `ok: false`.
    #[error("Slack {method} answered ok:false ({error})")]
    Refused { method: &'static str, error: String },
    #[error("Slack {method} is rate limited (Retry-After {retry_after_seconds} s)")]
    RateLimited { method: &'static str, retry_after_seconds: u64 },
    #[error("Slack {method} failed: {message}")]
    Transport { method: &'static str, message: String },
}

impl From<SlackApiError> for PortError {
    fn from(e: SlackApiError) -> Self {
        match e {
            SlackApiError::Refused { .. } => PortError::Rejected {
                backend: "slack",
                message: e.to_string(),
            },
            _ => PortError::Backend {
                backend: "slack",
                message: e.to_string(),
            },
        }
    }
}

enum Body<'a> {
    Json(&'a Value),
    Form(&'a [(&'a str, &'a str)]),
}

pub struct SlackClient {
    http: reqwest::Client,
    base_url: String,
    token: String,
    names: Mutex<HashMap<String, String>>,
}

impl SlackClient {
    /// `base_url` is `SLACK_API_BASE_URL` (`https://slack.com/api`), `token` the bot token.
    pub fn new(base_url: &str, token: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .expect("a reqwest client builds");
        SlackClient {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            names: Mutex::new(HashMap::new()),
        }
    }

    /// Who the token belongs to: the bot's user id and bot id.
    pub async fn auth_test(&self) -> Result<SlackIdentity, SlackApiError> {
        let answer = self.call("auth.test", &json!({})).await?;
        let user_id = answer["user_id"].as_str().ok_or_else(|| SlackApiError::Transport {
            method: "auth.test",
            message: "no user_id in the answer".into(),
        })?;
        Ok(SlackIdentity {
            user_id: user_id.to_owned(),
            bot_id: answer["bot_id"].as_str().map(str::to_owned),
        })
    }

    async fn call(&self, method: &'static str, body: &Value) -> Result<Value, SlackApiError> {
        self.send(method, Body::Json(body)).await
    }

    /// Read methods take form fields, not JSON (Slack accepts JSON for writes only).
    async fn call_form(&self, method: &'static str, fields: &[(&str, &str)]) -> Result<Value, SlackApiError> {
        self.send(method, Body::Form(fields)).await
    }

    async fn send(&self, method: &'static str, body: Body<'_>) -> Result<Value, SlackApiError> {
        let url = format!("{}/{method}", self.base_url);
        let transport = |e: reqwest::Error| SlackApiError::Transport {
            method,
            message: e.without_url().to_string(),
        };
        let mut attempt = 0;
        loop {
            let request = self.http.post(&url).bearer_auth(&self.token);
            let request = match &body {
                Body::Json(json) => request.json(json),
                Body::Form(fields) => request.form(fields),
            };
            let response = request.send().await.map_err(transport)?;
            if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(1);
                attempt += 1;
                if attempt > RATE_LIMIT_RETRIES || Duration::from_secs(retry_after) > MAX_RETRY_AFTER {
                    return Err(SlackApiError::RateLimited {
                        method,
                        retry_after_seconds: retry_after,
                    });
                }
                tracing::info!(method, retry_after, "Slack rate limit: waiting as asked");
                tokio::time::sleep(Duration::from_secs(retry_after)).await;
                continue;
            }
            if !response.status().is_success() {
                return Err(SlackApiError::Transport {
                    method,
                    message: format!("HTTP {}", response.status()),
                });
            }
            let answer: Value = response.json().await.map_err(transport)?;
            if answer["ok"].as_bool() != Some(true) {
                let error = answer["error"].as_str().unwrap_or("no error given").to_owned();
                tracing::warn!(method, %error, "Slack refused the call");
                return Err(SlackApiError::Refused { method, error });
            }
            return Ok(answer);
        }
    }
}

#[async_trait]
impl Chat for SlackClient {
    async fn post_message(&self, post: &Post) -> PortResult<Ts> {
        let mut body = json!({"channel": post.channel.0, "text": post.text});
        if let Some(root) = &post.thread_root {
            body["thread_ts"] = json!(root.as_str());
        }
        let answer = self.call("chat.postMessage", &body).await?;
        let ts = answer["ts"].as_str().ok_or_else(|| PortError::Backend {
            backend: "slack",
            message: "chat.postMessage answered without a ts".into(),
        })?;
        Ok(Ts::new(ts))
    }

    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()> {
        let body = json!({"channel": channel.0, "timestamp": ts.as_str(), "name": emoji});
        match self.call("reactions.add", &body).await {
            // The reaction is there already (a redelivery after a lost answer): done.
            Err(SlackApiError::Refused { error, .. }) if error == "already_reacted" => Ok(()),
            other => other.map(|_| ()).map_err(PortError::from),
        }
    }

    /// Slack takes up to 40,000 characters but advises 4,000 per message.
    fn max_message_chars(&self) -> Option<usize> {
        Some(4000)
    }

    async fn user_name(&self, user: &UserId) -> PortResult<String> {
        if let Some(name) = self.names.lock().expect("names lock").get(&user.0) {
            return Ok(name.clone());
        }
        // Bots (B…) are not users; a refusal is remembered too, so a missing user or
        // scope costs one call, not one per prompt.
        let name = if user.0.starts_with('B') {
            user.0.clone()
        } else {
            match self.call_form("users.info", &[("user", user.0.as_str())]).await {
                Ok(answer) => {
                    let u = &answer["user"];
                    [&u["profile"]["display_name"], &u["profile"]["real_name"], &u["real_name"], &u["name"]]
                        .into_iter()
                        .filter_map(Value::as_str)
                        .find(|s| !s.trim().is_empty())
                        .unwrap_or(&user.0)
                        .to_owned()
                }
                Err(SlackApiError::Refused { .. }) => user.0.clone(),
                Err(e) => return Err(e.into()),
            }
        };
        self.names.lock().expect("names lock").insert(user.0.clone(), name.clone());
        Ok(name)
    }
}
