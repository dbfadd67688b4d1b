//! The Discord REST API (v10) over reqwest: who kuuki is (`GET /users/@me`), posting
//! (a reply to the triggering message for direct answers, `allowed_mentions` empty so a
//! quoted @everyone or role never pings), reactions, finding an earlier attempt's post,
//! display names (cached), registering the application's commands, and completing a
//! deferred interaction with the answer.
//!
//! Rate limits: each route's bucket is read from the `X-RateLimit-*` headers and a call
//! to an exhausted bucket waits for its reset; a 429 is waited out as its
//! `retry_after` asks (and a global one holds every route); both only within the chat
//! call's time budget, otherwise the call fails and the job's queue brings it back.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use thiserror::Error;
use tokio::time::Instant;

use super::DiscordIdentity;
use crate::adapters::retry::{RetryPolicy, http_client};
use crate::domain::{ChannelId, CommandReply, Ts, UserId, is_snowflake};
use crate::ports::{Chat, FoundPost, PortError, PortResult, Post};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Discord refuses longer messages.
pub const MAX_MESSAGE_CHARS: usize = 2000;
/// Discord keeps nonces of up to 25 characters.
const NONCE_CHARS: usize = 25;
/// How many messages after the triggering one a lookup reads.
const LOOKUP_MESSAGES: &str = "50";

#[derive(Debug, Error, Clone, PartialEq)]
pub enum DiscordApiError {
    #[error("Discord {route} refused the call: HTTP {status} {message}")]
    Refused { route: String, status: u16, message: String },
    #[error("Discord {route} is rate limited (retry after {retry_after_ms} ms)")]
    RateLimited { route: String, retry_after_ms: u64 },
    #[error("Discord {route} failed: {message}")]
    Transport { route: String, message: String },
}

impl From<DiscordApiError> for PortError {
    fn from(e: DiscordApiError) -> Self {
        match e {
            DiscordApiError::Refused { status, .. } if status < 500 => {
                PortError::Rejected { backend: "discord", message: e.to_string() }
            }
            // Discord said when to ask again: the queue brings the job back then.
            DiscordApiError::RateLimited { retry_after_ms, .. } => {
                PortError::Busy { message: e.to_string(), retry_after: Duration::from_millis(retry_after_ms) }
            }
            _ => PortError::Backend { backend: "discord", message: e.to_string() },
        }
    }
}

/// A route's rate-limit bucket as the last answer described it.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    remaining: u64,
    reset_at: Instant,
}

pub struct DiscordClient {
    http: reqwest::Client,
    base_url: String,
    authorization: String,
    timeout: Duration,
    /// Set once `GET /users/@me` answered: kuuki's own posts are found by it.
    me: Mutex<Option<String>>,
    buckets: Mutex<HashMap<String, Bucket>>,
    global_until: Mutex<Option<Instant>>,
    names: Mutex<HashMap<String, String>>,
}

impl DiscordClient {
    /// `base_url` is `DISCORD_API_BASE_URL`, `token` the bot token (sent as `Bot …`).
    pub fn new(base_url: &str, token: &str) -> Self {
        DiscordClient {
            http: http_client(DEFAULT_TIMEOUT),
            base_url: base_url.trim_end_matches('/').to_owned(),
            authorization: format!("Bot {token}"),
            timeout: DEFAULT_TIMEOUT,
            me: Mutex::new(None),
            buckets: Mutex::new(HashMap::new()),
            global_until: Mutex::new(None),
            names: Mutex::new(HashMap::new()),
        }
    }

    /// Each call gives up after `timeout` (`CHAT_TIMEOUT_SECONDS`); waits for a rate
    /// limit count against the same budget.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http = http_client(timeout);
        self.timeout = timeout;
        self
    }

    /// Who the token belongs to (`GET /users/@me`), remembered for finding own posts.
    pub async fn identify(&self) -> Result<DiscordIdentity, DiscordApiError> {
        let me: answers::User = self.call(Method::GET, "/users/@me", "/users/@me", None).await?;
        *self.me.lock().expect("me lock") = Some(me.id.clone());
        Ok(DiscordIdentity { user_id: me.id, managed_roles: Vec::new() })
    }

    /// [`DiscordClient::identify`], and kuuki's managed role in each server it is in
    /// (`GET /users/@me/guilds`, then each server's roles: the one tagged with kuuki's
    /// id), which ingress needs to read a role mention as a mention of kuuki. Servers
    /// joined later are read at the next start.
    pub async fn identify_with_roles(&self) -> Result<DiscordIdentity, DiscordApiError> {
        let me = self.identify().await?;
        let guilds: Vec<answers::Guild> =
            self.call(Method::GET, "/users/@me/guilds?limit=200", "/users/@me/guilds", None).await?;
        let mut managed_roles = Vec::new();
        for guild in guilds {
            let path = format!("/guilds/{}/roles", guild.id);
            let roles: Vec<answers::Role> = self.call(Method::GET, &path, "GET /guilds/{id}/roles", None).await?;
            let mine =
                roles.into_iter().filter(|r| r.tags.as_ref().and_then(|t| t.bot_id.as_deref()) == Some(&me.user_id));
            managed_roles.extend(mine.map(|r| r.id));
        }
        Ok(DiscordIdentity { managed_roles, ..me })
    }

    /// Replaces the application's global commands with `commands` (a bulk overwrite:
    /// running it again changes nothing).
    pub async fn register_commands(&self, application_id: &str, commands: &Value) -> Result<usize, DiscordApiError> {
        let path = format!("/applications/{application_id}/commands");
        let registered: Vec<Value> =
            self.call(Method::PUT, &path, "/applications/{id}/commands", Some(commands)).await?;
        Ok(registered.len())
    }

    /// Waits while `route`'s bucket or the global limit is exhausted, if that fits the
    /// budget; otherwise says how long it would take.
    async fn wait_for_bucket(&self, route: &str, budget: Duration) -> Result<(), DiscordApiError> {
        let now = Instant::now();
        let global = *self.global_until.lock().expect("global lock");
        let bucket = self.buckets.lock().expect("buckets lock").get(route).copied();
        let until = [global, bucket.filter(|b| b.remaining == 0).map(|b| b.reset_at)]
            .into_iter()
            .flatten()
            .filter(|t| *t > now)
            .max();
        if let Some(until) = until {
            let wait = until - now;
            if wait > budget {
                return Err(DiscordApiError::RateLimited {
                    route: route.to_owned(),
                    retry_after_ms: wait.as_millis() as u64,
                });
            }
            tracing::info!(route, ?wait, "Discord rate limit bucket exhausted: waiting for its reset");
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }

    fn remember_bucket(&self, route: &str, headers: &reqwest::header::HeaderMap) {
        let number = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
        if let (Some(remaining), Some(reset_after)) =
            (number("x-ratelimit-remaining"), number("x-ratelimit-reset-after"))
        {
            let reset_at = Instant::now() + Duration::from_secs_f64(reset_after.max(0.0));
            let bucket = Bucket { remaining: remaining.max(0.0) as u64, reset_at };
            self.buckets.lock().expect("buckets lock").insert(route.to_owned(), bucket);
        }
    }

    /// One call; `route` is the rate-limit key: the path with ids other than the
    /// channel (Discord's major parameter) replaced.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        route: &str,
        body: Option<&Value>,
    ) -> Result<T, DiscordApiError> {
        let url = format!("{}{path}", self.base_url);
        let transport = |e: reqwest::Error| DiscordApiError::Transport {
            route: route.to_owned(),
            message: e.without_url().to_string(),
        };
        let retry = RetryPolicy::chat(self.timeout);
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            self.wait_for_bucket(route, retry.max_wait).await?;
            let mut request =
                self.http.request(method.clone(), &url).header(reqwest::header::AUTHORIZATION, &self.authorization);
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(transport)?;
            self.remember_bucket(route, response.headers());
            let status = response.status();
            if status == StatusCode::TOO_MANY_REQUESTS {
                let limited: answers::RateLimited = response.json().await.unwrap_or_default();
                let asked = Duration::from_secs_f64(limited.retry_after.max(0.0));
                if limited.global {
                    *self.global_until.lock().expect("global lock") = Some(Instant::now() + asked);
                }
                let Some(wait) = retry.wait_after_elapsed(attempt, Some(asked), started.elapsed()) else {
                    return Err(DiscordApiError::RateLimited {
                        route: route.to_owned(),
                        retry_after_ms: asked.as_millis() as u64,
                    });
                };
                tracing::info!(route, ?wait, global = limited.global, "Discord answered 429: waiting as asked");
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            if !status.is_success() {
                let message = response.text().await.unwrap_or_default();
                let message: String = message.chars().take(300).collect();
                tracing::warn!(route, %status, %message, "Discord refused the call");
                return Err(DiscordApiError::Refused { route: route.to_owned(), status: status.as_u16(), message });
            }
            if status == StatusCode::NO_CONTENT {
                return serde_json::from_value(Value::Null).map_err(|e| DiscordApiError::Transport {
                    route: route.to_owned(),
                    message: format!("no content where an answer was expected ({e})"),
                });
            }
            return response.json::<T>().await.map_err(transport);
        }
    }

    fn my_id(&self) -> Option<String> {
        self.me.lock().expect("me lock").clone()
    }
}

/// The nonce a post carries for its tag: Discord dedupes a repeated nonce
/// (`enforce_nonce`) for a few minutes, so a retried post is not posted twice.
pub fn nonce_for(tag: &str) -> String {
    hex::encode(Sha256::digest(tag.as_bytes()))[..NONCE_CHARS].to_owned()
}

fn clip(text: &str) -> String {
    text.chars().take(MAX_MESSAGE_CHARS).collect()
}

/// Discord reactions are Unicode emoji; kuuki names them as Slack does.
pub fn unicode_emoji(name: &str) -> &'static str {
    match name.trim_matches(':') {
        "thinking_face" => "🤔",
        "pray" => "🙏",
        "tada" => "🎉",
        "joy" => "😂",
        "bulb" => "💡",
        "sparkles" => "✨",
        "blush" => "😊",
        "+1" | "thumbsup" => "👍",
        "heart" => "❤️",
        "raised_hands" => "🙌",
        "white_check_mark" => "✅",
        "smile" => "😄",
        _ => "👀",
    }
}

#[async_trait]
impl Chat for DiscordClient {
    async fn post_message(&self, post: &Post) -> PortResult<Ts> {
        let mut body = json!({
            "content": clip(&post.text),
            // Quoted @everyone, roles or people never ping; the replied-to author does.
            "allowed_mentions": {"parse": [], "replied_user": true},
        });
        if let Some(reply_to) = &post.reply_to {
            body["message_reference"] = json!({"message_id": reply_to.as_str(), "fail_if_not_exists": false});
        }
        if let Some(completes) = &post.completes {
            // The deferred interaction's "thinking" message becomes the answer. Editing it
            // again (a redelivery) leaves one message: safe to repeat.
            let (application_id, token) = completes.split_once('/').ok_or_else(|| PortError::Rejected {
                backend: "discord",
                message: "a deferred interaction without application_id/token".into(),
            })?;
            let path = format!("/webhooks/{application_id}/{token}/messages/@original");
            let route = "PATCH /webhooks/{id}/{token}/messages/@original";
            let message: answers::Message = self.call(Method::PATCH, &path, route, Some(&body)).await?;
            return Ok(Ts::new(message.id));
        }
        if let Some(tag) = &post.tag {
            body["nonce"] = json!(nonce_for(tag));
            body["enforce_nonce"] = json!(true);
        }
        let path = format!("/channels/{}/messages", post.channel.0);
        let route = format!("POST /channels/{}/messages", post.channel.0);
        let message: answers::Message = self.call(Method::POST, &path, &route, Some(&body)).await?;
        Ok(Ts::new(message.id))
    }

    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()> {
        let encoded: String = url_escape(unicode_emoji(emoji));
        let path = format!("/channels/{}/messages/{}/reactions/{encoded}/@me", channel.0, ts.as_str());
        // Adding a reaction that is there already succeeds: a redelivery is harmless.
        let route = format!("PUT /channels/{}/messages/reactions", channel.0);
        self.call::<Value>(Method::PUT, &path, &route, None).await?;
        Ok(())
    }

    /// kuuki's post after `after` carrying the tag's nonce; where Discord leaves the
    /// nonce out of the listing, kuuki's reply to `after` itself (direct answers reply
    /// to the message they answer). Discord threads are channels, so `thread_root` is
    /// not needed.
    async fn find_post(
        &self,
        channel: &ChannelId,
        _thread_root: Option<&Ts>,
        after: &Ts,
        tag: &str,
    ) -> PortResult<Option<FoundPost>> {
        let me = match self.my_id() {
            Some(me) => me,
            None => self.identify().await?.user_id,
        };
        let path = format!("/channels/{}/messages?after={}&limit={LOOKUP_MESSAGES}", channel.0, after.as_str());
        let route = format!("GET /channels/{}/messages", channel.0);
        let messages: Vec<answers::Message> = self.call(Method::GET, &path, &route, None).await?;
        let nonce = nonce_for(tag);
        let found = messages.into_iter().find(|m| {
            let mine = m.author.as_ref().is_some_and(|a| a.id == me);
            let tagged = m.nonce.as_ref().and_then(nonce_text).is_some_and(|n| n == nonce);
            let replies = m.message_reference.as_ref().and_then(|r| r.message_id.as_deref()) == Some(after.as_str());
            mine && (tagged || replies)
        });
        Ok(found.map(|m| FoundPost { ts: Ts::new(m.id), text: m.content.unwrap_or_default() }))
    }

    fn max_message_chars(&self, _channel: &ChannelId) -> Option<usize> {
        Some(MAX_MESSAGE_CHARS)
    }

    /// Discord threads are channels: an answer about a message replies to it.
    fn threads(&self, _channel: &ChannelId) -> bool {
        false
    }

    /// Replaces the interaction's first reply with the answer (PATCH `@original`):
    /// editing it again leaves one answer, so a redelivery may send it again.
    async fn answer_command(&self, reply: &CommandReply, text: &str) -> PortResult<()> {
        let CommandReply::Discord { application_id, token } = reply else {
            return Err(PortError::Rejected {
                backend: "discord",
                message: "a command answer for another platform".into(),
            });
        };
        // Both go into the path: a snowflake and a token's URL-safe characters only.
        let url_safe = |text: &str| {
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        if !is_snowflake(application_id) || !url_safe(token) {
            return Err(PortError::Rejected {
                backend: "discord",
                message: "a malformed interaction to answer".into(),
            });
        }
        let body = json!({ "content": clip(text), "allowed_mentions": {"parse": []} });
        let path = format!("/webhooks/{application_id}/{token}/messages/@original");
        let route = "PATCH /webhooks/{id}/{token}/messages/@original";
        self.call::<Value>(Method::PATCH, &path, route, Some(&body)).await?;
        Ok(())
    }

    async fn user_name(&self, _channel: &ChannelId, user: &UserId) -> PortResult<String> {
        if let Some(name) = self.names.lock().expect("names lock").get(user.as_str()) {
            return Ok(name.clone());
        }
        let path = format!("/users/{}", user.0);
        let name = match self.call::<answers::User>(Method::GET, &path, "GET /users/{id}", None).await {
            Ok(u) => {
                u.global_name.or(u.username).filter(|n| !n.trim().is_empty()).unwrap_or_else(|| user.0.to_string())
            }
            // An unknown user is remembered by id: one call, not one per prompt.
            Err(DiscordApiError::Refused { status, .. }) if status < 500 => user.0.to_string(),
            Err(e) => return Err(e.into()),
        };
        self.names.lock().expect("names lock").insert(user.0.to_string(), name.clone());
        Ok(name)
    }

    /// `GET /channels/{id}`'s `guild_id` (a thread's is its server's too; a DM has
    /// none). A channel kuuki may no longer see (deleted, or access taken away) is a
    /// `Rejected` error: its server cannot be told. Not kept here: the caller keeps
    /// answers in the ledger, where every worker finds them.
    async fn server_of(&self, channel: &ChannelId) -> PortResult<Option<String>> {
        let path = format!("/channels/{}", channel.0);
        // The channel is the route's major parameter: its own rate-limit bucket.
        let route = format!("GET /channels/{}", channel.0);
        match self.call::<answers::Channel>(Method::GET, &path, &route, None).await {
            Ok(found) => Ok(found.guild_id),
            // Gone, or hidden from kuuki: its server cannot be told.
            Err(e @ DiscordApiError::Refused { status: 403 | 404, .. }) => {
                Err(PortError::Rejected { backend: "discord", message: e.to_string() })
            }
            // Any other refusal (a bad token, say) is no answer about the channel: the
            // job fails and comes back, rather than skipping channels.
            Err(e @ DiscordApiError::Refused { .. }) => {
                Err(PortError::Backend { backend: "discord", message: e.to_string() })
            }
            Err(e) => Err(e.into()),
        }
    }
}

fn nonce_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Percent-encodes an emoji for a URL path segment.
fn url_escape(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// The parts of Discord's answers kuuki reads.
mod answers {
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct User {
        pub id: String,
        pub username: Option<String>,
        pub global_name: Option<String>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Message {
        pub id: String,
        pub content: Option<String>,
        pub author: Option<User>,
        pub nonce: Option<Value>,
        pub message_reference: Option<Reference>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Reference {
        pub message_id: Option<String>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Guild {
        pub id: String,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Channel {
        pub guild_id: Option<String>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct Role {
        pub id: String,
        pub tags: Option<RoleTags>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct RoleTags {
        pub bot_id: Option<String>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    pub(super) struct RateLimited {
        pub retry_after: f64,
        pub global: bool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_25_characters_and_stable_per_tag() {
        let n = nonce_for("respond:C1:1712345678.123456");
        assert_eq!(n.len(), 25);
        assert_eq!(n, nonce_for("respond:C1:1712345678.123456"));
        assert_ne!(n, nonce_for("respond:C1:1712345678.123457"));
    }

    #[test]
    fn slack_names_become_unicode_and_are_escaped_for_the_path() {
        assert_eq!(unicode_emoji("pray"), "🙏");
        assert_eq!(unicode_emoji(":tada:"), "🎉");
        assert_eq!(unicode_emoji("no_such_emoji"), "👀");
        assert_eq!(url_escape("👀"), "%F0%9F%91%80");
    }
}
