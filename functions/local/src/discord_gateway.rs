//! The Discord Gateway inside `kuuki serve` (`DISCORD_GATEWAY`, on by default with
//! `DISCORD_BOT_TOKEN`): kuuki holds the relay's shard itself (the same shard, intents
//! and read loop as `functions/discord-gateway`), so Discord needs no public URL, no
//! relay and no relay secret.
//!
//! - `MESSAGE_CREATE`, `MESSAGE_UPDATE`, `MESSAGE_DELETE` and the reactions
//!   (`MESSAGE_REACTION_ADD`, `MESSAGE_REACTION_REMOVE`) go, as the gateway sent
//!   them, to the code behind `POST /discord/events`, in order, one at a time. The
//!   store's conditional put is the dedup: a dispatch Discord replays after a resume is
//!   a duplicate and answered once. A store or queue failure is retried with back-off,
//!   as a redelivery (`retry`), like the relay does.
//! - The session outlives the process: after each stored dispatch the data file keeps
//!   the session id, resume URL and that dispatch's sequence (the ledger's cache, for
//!   ten minutes); a stop closes with 4000, which leaves the session resumable; the next
//!   start RESUMEs it, and Discord replays what came after the last stored dispatch (what
//!   a killed process had read but not stored, and what was written while none ran).
//!   A session Discord no longer has is refused, and the shard identifies anew.
//! - `INTERACTION_CREATE` (`/kuuki …`; Discord sends it over the Gateway when the
//!   application has no Interactions Endpoint URL) runs what `POST /discord/interactions`
//!   runs and sends the answer to `POST /interactions/{id}/{token}/callback`; a deferred
//!   `ask` is completed later through the interaction's webhook, as over HTTP.
//! - twilight resumes after a drop and reconnects with back-off; a fatal close (4004 a
//!   refused token, 4014 the Message Content intent off) stops `kuuki serve`.
//! - On stop the connection is closed with 4000 and what was read is stored first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use kuuki::adapters::discord::DiscordIdentity;
use kuuki::adapters::platforms::Connected;
use kuuki::deps::Deps;
use kuuki::domain::is_snowflake;
use kuuki::ingest::discord::{DiscordIngressError, handle_interaction, handle_relay_event};
use kuuki::secrecy::ExposeSecret;
use kuuki_discord_gateway::{
    CloseFrame, Dispatch, GatewayError, QUEUE_CAPACITY, RetryPolicy, SavedSession, Stats, close_shard, read_gateway,
    resuming_shard,
};
use kuuki_ingress::COMMAND_FAILED;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How long a stop waits for the gateway to answer the close frame.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);
/// How long a stop (or a fatal close) keeps handling the dispatches already read.
const DRAIN_WITHIN: Duration = Duration::from_secs(2);
/// An interaction is answered within Discord's 3 s or not at all.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(5);
/// Callback types: 4 a message (with the ephemeral flag only the caller sees it), 5
/// "kuuki is thinking…" until the answer edits it.
const CHANNEL_MESSAGE_WITH_SOURCE: u8 = 4;
const DEFERRED: u8 = 5;
const EPHEMERAL: u32 = 1 << 6;

/// Starts the Gateway when `DISCORD_BOT_TOKEN` is set and `DISCORD_GATEWAY` is on
/// (`None` otherwise): a task that ends when `stopping` turns true, or with an error
/// that stops `kuuki serve` (the token refused, the intent not enabled).
/// `stats` counts the sessions and says whether one is up (`/metrics`, `/healthz`).
pub fn start(
    deps: Arc<Deps>,
    connected: &Connected,
    stopping: watch::Receiver<bool>,
    stats: Arc<Stats>,
) -> anyhow::Result<Option<JoinHandle<anyhow::Result<()>>>> {
    let settings = &deps.settings;
    let token = settings.platforms.discord_bot_token.expose_secret().trim().to_owned();
    if token.is_empty() || !settings.platforms.discord_gateway {
        return Ok(None);
    }
    let Some(identity) = connected.discord.clone() else {
        bail!("DISCORD_BOT_TOKEN is set but kuuki did not sign in to Discord");
    };
    let gateway_url = gateway_url(&settings.platforms.discord_gateway_url)?;
    let http_routes = if settings.platforms.discord_public_key.trim().is_empty() {
        "POST /discord/interactions is not served (DISCORD_PUBLIC_KEY is not set)"
    } else {
        "POST /discord/interactions is served too (interactions come over it while the application has an Interactions Endpoint URL)"
    };
    eprintln!(
        "kuuki serve: Discord messages and /kuuki over the Gateway (DISCORD_GATEWAY=false for a relay); {http_routes}"
    );
    let http = reqwest::Client::builder()
        .timeout(CALLBACK_TIMEOUT)
        .build()
        .context("an HTTP client for Discord's interaction callbacks")?;
    let interactions = Arc::new(Interactions {
        deps: deps.clone(),
        http,
        api_base_url: settings.platforms.discord_api_base_url.trim_end_matches('/').to_owned(),
    });
    let gateway = Gateway { deps, identity, token, gateway_url, interactions, stats };
    Ok(Some(tokio::spawn(gateway.run(stopping))))
}

/// `DISCORD_GATEWAY_URL`: empty is Discord's own; otherwise a `ws://` or `wss://` URL
/// (twilight would panic on an unparsable one, so it is checked here).
fn gateway_url(setting: &str) -> anyhow::Result<Option<String>> {
    let setting = setting.trim().trim_end_matches('/');
    if setting.is_empty() {
        return Ok(None);
    }
    let url = reqwest::Url::parse(setting).with_context(|| format!("DISCORD_GATEWAY_URL {setting:?}"))?;
    if !matches!(url.scheme(), "ws" | "wss") || url.host_str().is_none() {
        bail!("DISCORD_GATEWAY_URL {setting:?} is not a ws:// or wss:// URL");
    }
    Ok(Some(setting.to_owned()))
}

struct Gateway {
    deps: Arc<Deps>,
    identity: DiscordIdentity,
    token: String,
    gateway_url: Option<String>,
    interactions: Arc<Interactions>,
    stats: Arc<Stats>,
}

impl Gateway {
    async fn run(self, mut stopping: watch::Receiver<bool>) -> anyhow::Result<()> {
        let saved = saved_session(&self.deps).await;
        if let Some(saved) = &saved {
            tracing::info!(sequence = saved.sequence, "resuming the Discord session the last run left");
        }
        // The session the dispatches belong to (id, resume URL), from READY.
        let mut session = saved.as_ref().map(|s| (s.session_id.clone(), s.resume_url.clone()));
        let mut shard = resuming_shard(self.token, self.gateway_url, saved);
        let stats = self.stats;
        let (tx, rx) = mpsc::channel::<Read>(QUEUE_CAPACITY);
        let mut ingesting = tokio::spawn(ingest_all(self.deps, self.identity, rx));
        let interactions = self.interactions;
        let read = read_gateway(&mut shard, &stats, |dispatch, json| {
            match dispatch {
                Dispatch::Session { resumed: false } => session = ready_session(&json).or(session.take()),
                Dispatch::Forward => match tx.try_send(Read { json, session: session.clone() }) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        tracing::error!(
                            "the Discord dispatch queue is full (the store is down?): a dispatch was dropped"
                        );
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return Err(GatewayError::ForwarderGone),
                },
                // Each on its own: an answer is due within 3 s, whatever else is queued.
                Dispatch::Interaction => {
                    let interactions = interactions.clone();
                    tokio::spawn(async move { interactions.answer(&json).await });
                }
                Dispatch::Session { resumed: true } | Dispatch::Other => {}
            }
            Ok(())
        });
        // A closed channel is serve ending too.
        let read = tokio::select! {
            read = read => Some(read),
            _ = stopping.wait_for(|stop| *stop) => None,
        };
        let result = match read {
            None => {
                // Kept resumable: the next start takes the session up and Discord
                // replays what was written meanwhile.
                close_shard(&mut shard, CloseFrame::RESUME, CLOSE_WITHIN).await;
                Ok(())
            }
            Some(Ok(())) => Ok(()),
            Some(Err(error)) => Err(anyhow!("the Discord Gateway: {error}")),
        };
        // What was read is handled before the task ends.
        drop(tx);
        if tokio::time::timeout(DRAIN_WITHIN, &mut ingesting).await.is_err() {
            ingesting.abort();
            tracing::warn!("stopped before every Discord dispatch read was stored");
        }
        result
    }
}

/// A message dispatch read from the Gateway, with the session it came in.
struct Read {
    json: String,
    /// (session id, resume URL), once READY named them.
    session: Option<(String, String)>,
}

/// Where the data file keeps the session (the ledger's cache: durable, expiring).
const SESSION_KEY: &str = "discord:gateway:session";
/// How long a stopped or killed process's session is tried again: Discord keeps one
/// for a short while only (it refuses a stale one, and the shard identifies anew).
const SESSION_KEPT: Duration = Duration::from_secs(600);

/// The session the last run kept in the data file, if it is recent enough.
async fn saved_session(deps: &Deps) -> Option<SavedSession> {
    let kept = deps.ledger.cache_get(SESSION_KEY, deps.clock.now()).await.ok()??;
    serde_json::from_str(&kept).ok()
}

/// READY's session id and resume URL.
fn ready_session(json: &str) -> Option<(String, String)> {
    let ready: serde_json::Value = serde_json::from_str(json).ok()?;
    let data = &ready["d"];
    Some((data["session_id"].as_str()?.to_owned(), data["resume_gateway_url"].as_str()?.to_owned()))
}

/// Takes each queued message dispatch in order, as `POST /discord/events` would, and
/// keeps in the data file the session and the sequence of the last one stored: a
/// next process resumes from there, so what came after (read and lost by a killed
/// process, or written while none ran) is replayed, and what came before is not.
async fn ingest_all(deps: Arc<Deps>, identity: DiscordIdentity, mut rx: mpsc::Receiver<Read>) {
    while let Some(read) = rx.recv().await {
        if !ingest_one(&deps, &identity, &read.json, RetryPolicy::default()).await {
            continue;
        }
        let sequence = serde_json::from_str::<serde_json::Value>(&read.json).ok().and_then(|d| d["s"].as_u64());
        if let (Some(sequence), Some((session_id, resume_url))) = (sequence, read.session) {
            let saved = SavedSession { session_id, sequence, resume_url };
            let value = serde_json::to_string(&saved).expect("a session serializes");
            let until = deps.clock.now() + SESSION_KEPT;
            if let Err(error) = deps.ledger.cache_put(SESSION_KEY, &value, until).await {
                tracing::warn!(%error, "could not keep the Discord session; a restart identifies anew");
            }
        }
    }
}

/// One dispatch: a store or queue failure is retried with back-off (as a redelivery,
/// so a message stored before its work was queued gets its work); a dispatch kuuki
/// cannot read is dropped.
async fn ingest_one(deps: &Deps, identity: &DiscordIdentity, body: &str, retry: RetryPolicy) -> bool {
    let started = Instant::now();
    let mut delay = retry.first_delay;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        match handle_relay_event(deps, identity, body.as_bytes(), attempts > 1).await {
            Ok(what) => {
                tracing::debug!(%what, attempts, "Discord dispatch taken");
                return true;
            }
            Err(DiscordIngressError::Backend(error)) => {
                if started.elapsed() + delay > retry.give_up_after {
                    tracing::error!(%error, attempts, "could not store or queue a Discord dispatch; dropped");
                    return false;
                }
                tracing::warn!(%error, attempts, "could not store or queue a Discord dispatch; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(retry.max_delay);
            }
            Err(error) => {
                tracing::warn!(%error, "a Discord dispatch kuuki cannot read; dropped");
                return true;
            }
        }
    }
}

/// Answers `/kuuki` interactions that came over the Gateway.
struct Interactions {
    deps: Arc<Deps>,
    http: reqwest::Client,
    /// `DISCORD_API_BASE_URL`, without a trailing slash.
    api_base_url: String,
}

impl Interactions {
    /// Runs the interaction as `POST /discord/interactions` does and sends its answer
    /// to the interaction's callback (which needs no bot token: the interaction's own
    /// token is in the path). A backend failure is answered with an apology, only to
    /// the caller; an interaction that cannot be read is not answered.
    ///
    /// `/kuuki ask` is acknowledged ("kuuki is thinking…") before the question is
    /// queued: kuuki's answer edits that message, so it must not reach Discord first
    /// (over HTTP the acknowledgement is the response, here a request of its own).
    async fn answer(&self, dispatch: &str) {
        let interaction = match serde_json::from_str::<Value>(dispatch) {
            Ok(mut envelope) => envelope["d"].take(),
            Err(error) => {
                tracing::warn!(%error, "an INTERACTION_CREATE that is not JSON; not answered");
                return;
            }
        };
        let (Some(id), Some(token)) = (interaction["id"].as_str(), interaction["token"].as_str()) else {
            tracing::warn!("an INTERACTION_CREATE without an id or a token; not answered");
            return;
        };
        // Both go into the path: a snowflake and a token's URL-safe characters only.
        let url_safe = token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !is_snowflake(id) || token.is_empty() || !url_safe {
            tracing::warn!("an INTERACTION_CREATE with a malformed id or token; not answered");
            return;
        }
        let application_id = interaction["application_id"].as_str().filter(|a| is_snowflake(a));
        let deferred_first = application_id.is_some() && is_ask(&interaction);
        if deferred_first {
            self.call("POST", &format!("interactions/{id}/{token}/callback"), &json!({"type": DEFERRED}), id).await;
        }
        let answer = match handle_interaction(&self.deps, interaction.to_string().as_bytes()).await {
            Ok(answer) => answer,
            Err(DiscordIngressError::Backend(error)) => {
                tracing::error!(%error, interaction = id, "a /kuuki command failed on a backend");
                json!({
                    "type": CHANNEL_MESSAGE_WITH_SOURCE,
                    "data": {"content": COMMAND_FAILED, "flags": EPHEMERAL, "allowed_mentions": {"parse": []}},
                })
            }
            Err(error) => {
                tracing::warn!(%error, interaction = id, "an interaction kuuki cannot read; not answered");
                return;
            }
        };
        match application_id {
            // Acknowledged already: an answer other than the deferral replaces "thinking…".
            Some(application_id) if deferred_first => {
                if answer["type"] != DEFERRED {
                    let path = format!("webhooks/{application_id}/{token}/messages/@original");
                    let edit = json!({"content": answer["data"]["content"], "allowed_mentions": {"parse": []}});
                    self.call("PATCH", &path, &edit, id).await;
                }
            }
            _ => self.call("POST", &format!("interactions/{id}/{token}/callback"), &answer, id).await,
        }
    }

    /// One call to `{DISCORD_API_BASE_URL}/{path}`, logged by the interaction's id.
    async fn call(&self, method: &str, path: &str, body: &Value, interaction: &str) {
        let url = format!("{}/{path}", self.api_base_url);
        let request = match method {
            "PATCH" => self.http.patch(&url),
            _ => self.http.post(&url),
        };
        match request.json(body).send().await {
            Ok(response) if response.status().is_success() => {
                tracing::debug!(interaction, method, "interaction answered");
            }
            // 400 when it was answered already (a replayed dispatch) or is over 3 s old.
            Ok(response) => {
                let status = response.status().as_u16();
                let text: String = response.text().await.unwrap_or_default().chars().take(200).collect();
                tracing::warn!(interaction, status, response = %text, "Discord refused an interaction's answer");
            }
            // Never the URL: it holds the interaction's token.
            Err(error) => {
                tracing::warn!(interaction, error = %error.without_url(), "could not answer an interaction");
            }
        }
    }
}

/// `/kuuki ask` with a question: the command `handle_interaction` defers.
fn is_ask(interaction: &Value) -> bool {
    let sub = &interaction["data"]["options"][0];
    let asks = interaction["type"] == 2 && interaction["data"]["name"] == "kuuki" && sub["name"] == "ask";
    let options = sub["options"].as_array().map(Vec::as_slice).unwrap_or_default();
    let question = options.iter().find(|o| o["name"] == "question").and_then(|o| o["value"].as_str());
    asks && question.is_some_and(|q| !q.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_url_is_discords_or_a_websocket_url() {
        assert_eq!(gateway_url("").unwrap(), None);
        assert_eq!(gateway_url(" ws://127.0.0.1:9999/ ").unwrap().as_deref(), Some("ws://127.0.0.1:9999"));
        assert_eq!(gateway_url("wss://gw.example").unwrap().as_deref(), Some("wss://gw.example"));
        for bad in ["http://127.0.0.1:9999", "ws://", "not a url"] {
            assert!(gateway_url(bad).unwrap_err().to_string().contains("DISCORD_GATEWAY_URL"), "{bad}");
        }
    }

    #[test]
    fn only_an_ask_with_a_question_is_deferred_first() {
        let command = |sub: Value| json!({"type": 2, "data": {"name": "kuuki", "options": [sub]}});
        let ask = |question: &str| {
            command(json!({"name": "ask", "options": [{"name": "question", "type": 3, "value": question}]}))
        };
        assert!(is_ask(&ask("lunch?")));
        assert!(!is_ask(&ask("  ")), "answered at once: ask what?");
        assert!(!is_ask(&command(json!({"name": "status"}))));
        assert!(!is_ask(&json!({"type": 1})));
    }
}
