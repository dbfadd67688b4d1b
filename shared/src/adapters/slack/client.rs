//! The Slack Web API over reqwest: `auth.test`, `chat.postMessage` (tagged with
//! message metadata), `reactions.add`, `conversations.history`/`replies` (to find a
//! tagged post), `users.info` (cached). A 429 is waited out once within the time
//! budget; Slack's transient `ok: false` errors fail the call for a later retry, the
//! others are refusals, logged and not retried.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Value, json};
use thiserror::Error;

use super::SlackIdentity;
use crate::adapters::retry::{RetryPolicy, http_client, retry_after};
use crate::domain::{ChannelId, CommandReply, Ts, UserId};
use crate::ports::{Chat, FoundPost, PortError, PortResult, Post};

/// One call's timeout unless [`SlackClient::with_timeout`] sets `CHAT_TIMEOUT_SECONDS`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The metadata event type of kuuki's answers; the payload's `tag` names the work.
const POST_EVENT_TYPE: &str = "kuuki_reply";
/// `ok: false` errors that say "not now" rather than "no" (Slack's Web API docs).
const TRANSIENT_ERRORS: &[&str] =
    &["ratelimited", "internal_error", "service_unavailable", "request_timeout", "fatal_error"];
/// How far back a lookup for a tagged post reads.
const LOOKUP_MESSAGES: &str = "200";

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

impl SlackApiError {
    /// Whether asking again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            SlackApiError::Refused { error, .. } => TRANSIENT_ERRORS.contains(&error.as_str()),
            SlackApiError::RateLimited { .. } | SlackApiError::Transport { .. } => true,
        }
    }
}

impl From<SlackApiError> for PortError {
    fn from(e: SlackApiError) -> Self {
        match e {
            SlackApiError::Refused { .. } if !e.is_transient() => {
                PortError::Rejected { backend: "slack", message: e.to_string() }
            }
            // Slack said when to ask again: the queue brings the job back then.
            SlackApiError::RateLimited { retry_after_seconds, .. } => {
                PortError::Busy { message: e.to_string(), retry_after: Duration::from_secs(retry_after_seconds) }
            }
            _ => PortError::Backend { backend: "slack", message: e.to_string() },
        }
    }
}

fn hooks_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a reqwest client builds")
}

enum Body<'a> {
    Json(&'a Value),
    Form(&'a [(&'a str, &'a str)]),
}

pub struct SlackClient {
    http: reqwest::Client,
    /// For `response_url`s: follows no redirect, so the host checked is the host called.
    hooks: reqwest::Client,
    base_url: String,
    token: String,
    timeout: Duration,
    /// `users.info` answers: one call per user for the life of the client.
    users: Mutex<HashMap<String, KnownUser>>,
}

/// What kuuki keeps of a `users.info` answer.
#[derive(Debug, Clone)]
struct KnownUser {
    name: String,
    /// Admin or owner of the workspace; `None` when Slack refused to say.
    admin: Option<bool>,
}

impl SlackClient {
    /// `base_url` is `SLACK_API_BASE_URL` (`https://slack.com/api`), `token` the bot token.
    pub fn new(base_url: &str, token: &str) -> Self {
        SlackClient {
            http: http_client(DEFAULT_TIMEOUT),
            hooks: hooks_client(DEFAULT_TIMEOUT),
            base_url: base_url.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            users: Mutex::new(HashMap::new()),
        }
    }

    /// The same client for another workspace's `token`: its connections shared, its
    /// users' names its own.
    pub fn with_token(&self, token: &str) -> Self {
        SlackClient {
            http: self.http.clone(),
            hooks: self.hooks.clone(),
            base_url: self.base_url.clone(),
            token: token.to_owned(),
            timeout: self.timeout,
            users: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this client calls with `token`.
    pub fn has_token(&self, token: &str) -> bool {
        self.token == token
    }

    /// Each call gives up after `timeout` (`CHAT_TIMEOUT_SECONDS`), and a 429 is waited
    /// out only when Slack asks for no longer than that: the time budget counts both.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http = http_client(timeout);
        self.hooks = hooks_client(timeout);
        self.timeout = timeout;
        self
    }

    /// Whether `url` is where Slack takes answers to commands: `https://hooks.slack.com`
    /// (GovSlack's `hooks.slack-gov.com`), or the origin of the API base this client was
    /// given (a local stand-in).
    fn may_answer_at(&self, url: &str) -> bool {
        let origin = |url: &reqwest::Url| (url.scheme().to_owned(), url.host_str().map(str::to_owned), url.port());
        let Ok(url) = reqwest::Url::parse(url) else { return false };
        let slack = url.scheme() == "https"
            && matches!(url.host_str(), Some("hooks.slack.com" | "hooks.slack-gov.com"))
            && url.port().is_none();
        slack || reqwest::Url::parse(&self.base_url).is_ok_and(|base| origin(&base) == origin(&url))
    }

    /// Who the token belongs to: the bot's user id and bot id.
    pub async fn auth_test(&self) -> Result<SlackIdentity, SlackApiError> {
        let answer: answers::AuthTest = self.call("auth.test", &json!({})).await?;
        let user_id = answer.user_id.ok_or_else(|| SlackApiError::Transport {
            method: "auth.test",
            message: "no user_id in the answer".into(),
        })?;
        Ok(SlackIdentity { user_id, bot_id: answer.bot_id })
    }

    /// The user's name and role, from the cache or one `users.info` call. Bots (B…)
    /// are not users; a refusal is remembered too, so a missing user or scope costs
    /// one call, not one per prompt (the role stays unknown: no one is granted on it).
    async fn user_info(&self, user: &UserId) -> PortResult<KnownUser> {
        if let Some(known) = self.users.lock().expect("users lock").get(user.as_str()) {
            return Ok(known.clone());
        }
        let known = if user.0.starts_with('B') {
            KnownUser { name: user.0.to_string(), admin: Some(false) }
        } else {
            match self.call_form::<answers::UserInfo>("users.info", &[("user", user.as_str())]).await {
                Ok(answer) => {
                    let u = answer.user.unwrap_or_default();
                    let admin = u.is_admin || u.is_owner || u.is_primary_owner;
                    let profile = u.profile.unwrap_or_default();
                    let name = [profile.display_name, profile.real_name, u.real_name, u.name]
                        .into_iter()
                        .flatten()
                        .find(|s| !s.trim().is_empty())
                        .unwrap_or_else(|| user.0.to_string());
                    KnownUser { name, admin: Some(admin) }
                }
                Err(e) if !e.is_transient() => KnownUser { name: user.0.to_string(), admin: None },
                Err(e) => return Err(e.into()),
            }
        };
        self.users.lock().expect("users lock").insert(user.0.to_string(), known.clone());
        Ok(known)
    }

    async fn call<T: DeserializeOwned>(&self, method: &'static str, body: &Value) -> Result<T, SlackApiError> {
        self.send(method, Body::Json(body)).await
    }

    /// Read methods take form fields, not JSON (Slack accepts JSON for writes only).
    async fn call_form<T: DeserializeOwned>(
        &self,
        method: &'static str,
        fields: &[(&str, &str)],
    ) -> Result<T, SlackApiError> {
        self.send(method, Body::Form(fields)).await
    }

    /// One call, its `ok: true` answer read as `T`.
    async fn send<T: DeserializeOwned>(&self, method: &'static str, body: Body<'_>) -> Result<T, SlackApiError> {
        let url = format!("{}/{method}", self.base_url);
        let transport = |e: reqwest::Error| SlackApiError::Transport { method, message: e.without_url().to_string() };
        let retry = RetryPolicy::chat(self.timeout);
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            let request = self.http.post(&url).bearer_auth(&self.token);
            let request = match &body {
                Body::Json(json) => request.json(json),
                Body::Form(fields) => request.form(fields),
            };
            let response = request.send().await.map_err(transport)?;
            if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
                let asked = retry_after(response.headers());
                let Some(wait) = retry.wait_after_elapsed(attempt, asked, started.elapsed()) else {
                    return Err(SlackApiError::RateLimited {
                        method,
                        retry_after_seconds: asked.unwrap_or(retry.backoff).as_secs(),
                    });
                };
                tracing::info!(method, ?wait, "Slack rate limit: waiting as asked");
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            if !response.status().is_success() {
                return Err(SlackApiError::Transport { method, message: format!("HTTP {}", response.status()) });
            }
            let answer: Value = response.json().await.map_err(transport)?;
            let unreadable =
                |e: serde_json::Error| SlackApiError::Transport { method, message: format!("unreadable answer ({e})") };
            let envelope = answers::Envelope::deserialize(&answer).map_err(unreadable)?;
            if envelope.ok != Some(true) {
                let error = envelope.error.unwrap_or_else(|| "no error given".to_owned());
                tracing::warn!(method, %error, "Slack refused the call");
                return Err(SlackApiError::Refused { method, error });
            }
            return T::deserialize(answer).map_err(unreadable);
        }
    }
}

#[async_trait]
impl Chat for SlackClient {
    async fn post_message(&self, post: &Post) -> PortResult<Ts> {
        let mut body = json!({"channel": post.channel.place().channel, "text": post.text});
        if let Some(root) = &post.thread_root {
            body["thread_ts"] = json!(root.as_str());
        }
        if let Some(tag) = &post.tag {
            body["metadata"] = json!({"event_type": POST_EVENT_TYPE, "event_payload": {"tag": tag}});
        }
        let answer: answers::PostMessage = self.call("chat.postMessage", &body).await?;
        let ts = answer.ts.ok_or_else(|| PortError::Backend {
            backend: "slack",
            message: "chat.postMessage answered without a ts".into(),
        })?;
        Ok(Ts::new(&ts))
    }

    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()> {
        let body = json!({"channel": channel.place().channel, "timestamp": ts.as_str(), "name": emoji});
        match self.call::<IgnoredAny>("reactions.add", &body).await {
            // The reaction is there already (a redelivery after a lost answer): done.
            Err(SlackApiError::Refused { error, .. }) if error == "already_reacted" => Ok(()),
            other => other.map(|_| ()).map_err(PortError::from),
        }
    }

    async fn find_post(
        &self,
        channel: &ChannelId,
        thread_root: Option<&Ts>,
        after: &Ts,
        tag: &str,
    ) -> PortResult<Option<FoundPost>> {
        let mut fields = vec![
            ("channel", channel.place().channel),
            ("oldest", after.as_str()),
            ("inclusive", "false"),
            ("include_all_metadata", "true"),
            ("limit", LOOKUP_MESSAGES),
        ];
        let answer: answers::History = match thread_root {
            Some(root) => {
                fields.push(("ts", root.as_str()));
                self.call_form("conversations.replies", &fields).await?
            }
            None => self.call_form("conversations.history", &fields).await?,
        };
        let found = answer.messages.into_iter().find(|m| {
            m.metadata.as_ref().is_some_and(|meta| {
                meta.event_type.as_deref() == Some(POST_EVENT_TYPE) && meta.event_payload["tag"] == tag
            })
        });
        Ok(found.and_then(|m| Some(FoundPost { ts: Ts::new(&m.ts?), text: m.text.unwrap_or_default() })))
    }

    /// Slack takes up to 40,000 characters but advises 4,000 per message.
    fn max_message_chars(&self, _channel: &ChannelId) -> Option<usize> {
        Some(4000)
    }

    async fn user_name(&self, _channel: &ChannelId, user: &UserId) -> PortResult<String> {
        Ok(self.user_info(user).await?.name)
    }

    /// POSTs the answer to the command's `response_url` (no token: the URL is the
    /// credential). Only a URL on Slack's hooks host (or on the API base this client
    /// was given, for a stand-in) is called: a queued job never sends kuuki's answers
    /// elsewhere.
    async fn answer_command(&self, reply: &CommandReply, text: &str) -> PortResult<()> {
        let CommandReply::Slack { response_url } = reply else {
            return Err(PortError::Rejected {
                backend: "slack",
                message: "a command answer for another platform".into(),
            });
        };
        if !self.may_answer_at(response_url) {
            return Err(PortError::Rejected {
                backend: "slack",
                message: "a response_url that is not on hooks.slack.com; not called".into(),
            });
        }
        let body = json!({ "response_type": "ephemeral", "text": text });
        let retry = RetryPolicy::chat(self.timeout);
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            let response = self.hooks.post(response_url).json(&body).send().await.map_err(|e| PortError::Backend {
                backend: "slack",
                message: format!("response_url: {}", e.without_url()),
            })?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            let message = format!("response_url answered HTTP {status}");
            // A gateway's 502/504 may come after Slack showed it: as unknown as a timeout.
            if matches!(status.as_u16(), 502 | 504) {
                return Err(PortError::Backend { backend: "slack", message });
            }
            // Slack did not take it (busy, or down a moment): it may be sent again, and
            // once the retries are spent it is `Busy`: not shown, to try later.
            if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                let asked = retry_after(response.headers());
                if let Some(wait) = retry.wait_after_elapsed(attempt, asked, started.elapsed()) {
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    continue;
                }
                return Err(PortError::Busy { message, retry_after: asked.unwrap_or(retry.backoff) });
            }
            // An expired or used-up URL (404 `expired_url`, `used_url`) stays so.
            return Err(PortError::Rejected { backend: "slack", message });
        }
    }

    /// `users.info`'s `is_admin`, `is_owner` or `is_primary_owner`.
    async fn is_workspace_admin(&self, _channel: &ChannelId, user: &UserId) -> PortResult<bool> {
        self.user_info(user).await?.admin.ok_or_else(|| PortError::Rejected {
            backend: "slack",
            message: format!("users.info refused to describe {user}, so whether they are an admin is unknown"),
        })
    }
}

/// The parts of Slack's answers kuuki reads; a missing or null field reads as absent.
mod answers {
    use serde::Deserialize;
    use serde_json::Value;

    /// What every answer carries.
    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Envelope {
        pub ok: Option<bool>,
        pub error: Option<String>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct AuthTest {
        pub user_id: Option<String>,
        pub bot_id: Option<String>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct PostMessage {
        pub ts: Option<String>,
    }

    /// `conversations.history` and `conversations.replies`.
    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct History {
        pub messages: Vec<HistoryMessage>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct HistoryMessage {
        pub ts: Option<String>,
        pub text: Option<String>,
        pub metadata: Option<Metadata>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Metadata {
        pub event_type: Option<String>,
        /// Any app's payload, so left untyped: only kuuki's own is read.
        pub event_payload: Value,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct UserInfo {
        pub user: Option<User>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct User {
        pub name: Option<String>,
        pub real_name: Option<String>,
        pub is_admin: bool,
        pub is_owner: bool,
        pub is_primary_owner: bool,
        pub profile: Option<Profile>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Profile {
        pub display_name: Option<String>,
        pub real_name: Option<String>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queued answer goes to Slack's hooks host over https, or to the stand-in the
    /// client was pointed at; anywhere else is refused before any request.
    #[test]
    fn command_answers_go_only_to_slack() {
        let client = SlackClient::new("http://127.0.0.1:4010/api", "xoxb-test");
        for (url, allowed) in [
            ("https://hooks.slack.com/commands/T1/2/x", true),
            ("http://127.0.0.1:4010/commands/T1/2/x", true),
            ("http://hooks.slack.com/commands/T1/2/x", false),
            ("https://hooks.slack.com:8443/commands/T1/2/x", false),
            ("https://hooks.slack-gov.com/commands/T1/2/x", true),
            ("https://hooks.slack.com.example.net/commands", false),
            ("https://example.net/commands/T1/2/x", false),
            ("http://127.0.0.1:4011/commands/T1/2/x", false),
            ("not a url", false),
        ] {
            assert_eq!(client.may_answer_at(url), allowed, "{url}");
        }
    }

    #[tokio::test]
    async fn an_answer_for_elsewhere_is_refused_unsent() {
        let client = SlackClient::new("http://127.0.0.1:9/api", "xoxb-test");
        let reply = CommandReply::Slack { response_url: "https://example.net/hook".into() };
        let refused = client.answer_command(&reply, "done").await.unwrap_err();
        assert!(matches!(refused, PortError::Rejected { .. }), "{refused:?}");
        assert!(!refused.to_string().contains("example.net"), "the URL is a credential: {refused}");
    }
}
