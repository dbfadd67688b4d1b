//! Slack over Socket Mode (`SLACK_APP_TOKEN`): `kuuki serve` opens a websocket to Slack
//! itself (`apps.connections.open`), so it needs neither a public URL nor the signing
//! secret. Each envelope is acknowledged as soon as its event is stored and queued,
//! never after an answer is generated; one whose event could not be stored is not
//! acknowledged, so Slack delivers it again (a retry goes through the same dedup as an
//! HTTP retry). Slack asks for a fresh connection now and then (`disconnect`): the new
//! one is opened before the old one is closed, so no event falls in between.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use futures_util::{SinkExt, StreamExt};
use kuuki::adapters::platforms::Connected;
use kuuki::adapters::slack::SlackIdentity;
use kuuki::deps::Deps;
use kuuki::ingest::command::{parse_command_json, run_command};
use kuuki::ingest::slack::{SlackAccess, SlackIngressError, SlackReply, handle_event};
use kuuki::secrecy::ExposeSecret;
use kuuki_discord_gateway::ConnectionState;
use kuuki_ingress::{COMMAND_FAILED, MAX_BODY_BYTES};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_websockets::{ClientBuilder, CloseCode, Connector, Limits, MaybeTlsStream, Message, WebSocketStream};

/// A ping this often: Slack answers with a pong, so a quiet link still shows it is alive.
const PING_EVERY: Duration = Duration::from_secs(10);
/// Nothing at all from Slack for this long (three pings unanswered): the link is dead.
const SILENCE_LIMIT: Duration = Duration::from_secs(30);
/// `apps.connections.open`, and then the websocket handshake, each within this.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// The back-off after the first failure; it doubles after each further one.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A closing link first sends the acknowledgements in progress, then waits for Slack's
/// close frame, each at most this long.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);
/// On stop, every link closed within this (serve bounds the whole stop too).
const STOP_WITHIN: Duration = Duration::from_secs(4);
/// `apps.connections.open` errors that no retry mends: the token is wrong for it.
const TOKEN_REFUSED: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "not_allowed_token_type",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "missing_scope",
];

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Starts Socket Mode when `SLACK_APP_TOKEN` is set (`None` when it is not): a task
/// that ends when `stopping` turns true, or with an error that stops `kuuki serve`
/// (the token refused, Socket Mode turned off for the app). `state` says whether a
/// greeted connection is up and counts them (`/metrics`, `/healthz`).
pub fn start(
    deps: Arc<Deps>,
    connected: &Connected,
    stopping: watch::Receiver<bool>,
    state: Arc<ConnectionState>,
) -> anyhow::Result<Option<JoinHandle<anyhow::Result<()>>>> {
    let settings = &deps.settings;
    let token = settings.platforms.slack_app_token.expose_secret().trim().to_owned();
    if token.is_empty() {
        return Ok(None);
    }
    let Some(identity) = connected.slack.clone() else {
        bail!(
            "SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN is not: over Socket Mode kuuki still posts with the bot token"
        );
    };
    let http_routes = if settings.platforms.slack_signing_secret.expose_secret().is_empty() {
        "POST /slack/events and /slack/commands are not served (SLACK_SIGNING_SECRET is not set)"
    } else {
        "POST /slack/events and /slack/commands are served too"
    };
    eprintln!("kuuki serve: Slack events over Socket Mode (SLACK_APP_TOKEN); {http_routes}");
    // The process's TLS provider for wss (the Discord Gateway may have installed it).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let connector = Connector::new().context("TLS for Slack's Socket Mode")?;
    let http = reqwest::Client::builder().timeout(OPEN_TIMEOUT).build().context("an HTTP client")?;
    let socket_mode = SocketMode {
        open_url: format!("{}/apps.connections.open", settings.platforms.slack_api_base_url.trim_end_matches('/')),
        token,
        http,
        connector,
        handler: Arc::new(Handler { identity, deps: deps.clone() }),
        state,
    };
    Ok(Some(tokio::spawn(socket_mode.run(stopping))))
}

struct SocketMode {
    open_url: String,
    token: String,
    http: reqwest::Client,
    connector: Connector,
    handler: Arc<Handler>,
    state: Arc<ConnectionState>,
}

/// What the tasks tell the supervisor.
enum Report {
    Opened {
        id: u64,
        result: Result<Box<Socket>, OpenError>,
    },
    Hello {
        id: u64,
    },
    /// Slack will close this link (`refresh_requested`, `warning`, ...).
    Disconnect {
        id: u64,
        reason: String,
    },
    /// The link's task ended: `why` is `None` when it was closed as asked.
    Ended {
        id: u64,
        why: Option<String>,
    },
}

enum OpenError {
    /// The token cannot open Socket Mode: retrying will not help.
    Refused(String),
    /// Try again after the back-off (or after what Slack asked for).
    Later { message: String, retry_after: Option<Duration> },
}

impl OpenError {
    fn later(message: impl Into<String>) -> OpenError {
        OpenError::Later { message: message.into(), retry_after: None }
    }
}

#[derive(Deserialize)]
struct OpenAnswer {
    ok: bool,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

impl SocketMode {
    async fn run(self, mut stopping: watch::Receiver<bool>) -> anyhow::Result<()> {
        let this = Arc::new(self);
        let (reports_to, mut reports) = mpsc::unbounded_channel();
        let mut links = Links { next_open: Some(Instant::now()), ..Links::default() };
        let outcome = loop {
            let open_at = links.next_open;
            tokio::select! {
                () = stopped(&mut stopping) => break Ok(()),
                () = sleep_until(open_at) => links.open(&this, &reports_to),
                Some(report) = reports.recv() => {
                    if let Err(error) = links.on(report, &this.handler, &reports_to, &this.state) {
                        break Err(error);
                    }
                }
            }
        };
        links.close_all().await;
        this.state.down();
        outcome
    }

    /// `apps.connections.open`, then the websocket to the single-use URL it gives.
    async fn open(&self) -> Result<Socket, OpenError> {
        let response = self
            .http
            .post(&self.open_url)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| OpenError::later(format!("apps.connections.open failed: {e}")))?;
        let status = response.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            let retry_after = kuuki::adapters::retry::retry_after(response.headers());
            return Err(OpenError::Later { message: "apps.connections.open is rate limited".into(), retry_after });
        }
        if !status.is_success() {
            return Err(OpenError::later(format!("apps.connections.open answered HTTP {status}")));
        }
        let answer: OpenAnswer = response
            .json()
            .await
            .map_err(|e| OpenError::later(format!("apps.connections.open answered something unreadable: {e}")))?;
        if !answer.ok {
            let error = answer.error.unwrap_or_else(|| "no error named".into());
            if TOKEN_REFUSED.contains(&error.as_str()) {
                return Err(OpenError::Refused(format!(
                    "Slack refused SLACK_APP_TOKEN at apps.connections.open ({error}): Socket Mode needs an app-level \
                     token (xapp-…) with the connections:write scope, from the app's \"Basic Information\" page"
                )));
            }
            return Err(OpenError::later(format!("apps.connections.open answered ok:false ({error})")));
        }
        // The URL holds a single-use ticket: it is never logged.
        let url = answer.url.ok_or_else(|| OpenError::later("apps.connections.open answered no url"))?;
        let limits = Limits::default().max_payload_len(Some(MAX_BODY_BYTES));
        let builder = ClientBuilder::new()
            .uri(&url)
            .map_err(|_| OpenError::later("apps.connections.open answered a url that is not a websocket url"))?
            .connector(&self.connector)
            .limits(limits);
        match tokio::time::timeout(OPEN_TIMEOUT, builder.connect()).await {
            Ok(Ok((socket, _))) => Ok(socket),
            Ok(Err(e)) => Err(OpenError::later(format!("the websocket to Slack did not open: {e}"))),
            Err(_) => Err(OpenError::later("the websocket handshake with Slack timed out")),
        }
    }
}

/// Completes once `stopping` is true (or its sender is gone, as serve's HTTP server).
async fn stopped(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The links the supervisor keeps: at most one that is not retiring (being opened or
/// greeted), and the retiring ones that Slack is about to close.
#[derive(Default)]
struct Links {
    links: HashMap<u64, LinkState>,
    /// The link being opened, until it says hello, and its opening task.
    opening: Option<u64>,
    opening_task: Option<JoinHandle<()>>,
    next_open: Option<Instant>,
    /// Failures since the last hello: the back-off's exponent.
    failures: u32,
    next_id: u64,
}

struct LinkState {
    /// Asks the link to close (taken when sent).
    close: Option<oneshot::Sender<()>>,
    /// Slack said hello on it: events come over it.
    greeted: bool,
    /// Slack said it will close this link; a fresh one replaces it.
    retiring: bool,
    task: JoinHandle<()>,
}

impl Links {
    fn open(&mut self, socket_mode: &Arc<SocketMode>, reports: &mpsc::UnboundedSender<Report>) {
        self.next_open = None;
        let id = self.next_id;
        self.next_id += 1;
        self.opening = Some(id);
        let (socket_mode, reports) = (socket_mode.clone(), reports.clone());
        self.opening_task = Some(tokio::spawn(async move {
            let result = socket_mode.open().await.map(Box::new);
            let _ = reports.send(Report::Opened { id, result });
        }));
        tracing::debug!(link = id, "opening a Socket Mode connection");
    }

    /// Follows one report, telling `state` when a connection is greeted and when none
    /// greeted is left (a retiring one still brings events until it ends); an error
    /// stops Socket Mode (and kuuki serve).
    fn on(
        &mut self,
        report: Report,
        handler: &Arc<Handler>,
        reports: &mpsc::UnboundedSender<Report>,
        state: &ConnectionState,
    ) -> anyhow::Result<()> {
        let mut at_least = None;
        match report {
            Report::Opened { id, result: Ok(socket) } => {
                let (close, closing) = oneshot::channel();
                let task = tokio::spawn(run_link(id, *socket, handler.clone(), reports.clone(), closing));
                self.links.insert(id, LinkState { close: Some(close), greeted: false, retiring: false, task });
            }
            // kuuki serve prints it as it exits.
            Report::Opened { result: Err(OpenError::Refused(message)), .. } => return Err(anyhow!(message)),
            Report::Opened { id, result: Err(OpenError::Later { message, retry_after }) } => {
                tracing::warn!(link = id, error = %message, "could not open Socket Mode; trying again");
                self.opening = None;
                self.failures += 1;
                at_least = retry_after;
            }
            Report::Hello { id } => {
                tracing::info!(link = id, "Socket Mode connected");
                if let Some(link) = self.links.get_mut(&id) {
                    link.greeted = true;
                }
                state.up();
                if self.opening == Some(id) {
                    self.opening = None;
                }
                self.failures = 0;
                // The fresh link takes over: only now do the retiring ones close.
                for (_, link) in self.links.iter_mut().filter(|(other, link)| **other != id && link.retiring) {
                    if let Some(close) = link.close.take() {
                        let _ = close.send(());
                    }
                }
            }
            Report::Disconnect { id, reason } => {
                if reason == "link_disabled" {
                    bail!(
                        "Slack disabled Socket Mode for this app (disconnect: link_disabled): turn Socket Mode on in \
                         the app's settings, or unset SLACK_APP_TOKEN to take Slack's events over HTTP"
                    );
                }
                tracing::info!(link = id, %reason, "Slack will close a Socket Mode connection; opening a fresh one");
                if let Some(link) = self.links.get_mut(&id) {
                    link.retiring = true;
                }
                // A refresh is routine; anything else (too_many_websockets) backs off.
                if !matches!(reason.as_str(), "refresh_requested" | "warning") {
                    self.failures += 1;
                }
            }
            Report::Ended { id, why } => {
                let Some(link) = self.links.remove(&id) else { return Ok(()) };
                if !self.links.values().any(|link| link.greeted) {
                    state.down();
                }
                let why = why.unwrap_or_else(|| "closed".into());
                if self.opening == Some(id) {
                    tracing::warn!(link = id, %why, "a Socket Mode connection ended before its hello; trying again");
                    self.opening = None;
                    self.failures += 1;
                } else if link.retiring {
                    tracing::debug!(link = id, %why, "a retired Socket Mode connection ended");
                } else {
                    tracing::warn!(link = id, %why, "Socket Mode connection lost; reconnecting");
                    self.failures += 1;
                }
            }
        }
        // No link left that Slack will keep: open one, at once after a refresh, after
        // the back-off after a failure.
        let served = self.links.values().any(|link| !link.retiring);
        if self.opening.is_none() && self.next_open.is_none() && !served {
            let wait = backoff(self.failures).max(at_least.unwrap_or_default());
            self.next_open = Some(Instant::now() + wait);
        }
        Ok(())
    }

    /// Closes every link (each sends a close frame), within [`STOP_WITHIN`].
    async fn close_all(&mut self) {
        if let Some(opening) = self.opening_task.take() {
            opening.abort();
        }
        for link in self.links.values_mut() {
            if let Some(close) = link.close.take() {
                let _ = close.send(());
            }
        }
        let tasks = self.links.drain().map(|(_, link)| link.task);
        let _ = tokio::time::timeout(STOP_WITHIN, futures_util::future::join_all(tasks)).await;
    }
}

/// The wait before the next attempt after `failures` failures in a row: none after
/// none, then doubling from [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`], each drawn from
/// its upper half so that many processes do not come back in step.
fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let full = FIRST_BACKOFF.saturating_mul(1 << (failures - 1).min(16)).min(MAX_BACKOFF);
    full / 2 + full.mul_f64(fastrand::f64() / 2.0)
}

/// One message from Slack over the websocket.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    envelope_id: Option<String>,
    #[serde(default)]
    payload: Value,
    /// How many times Slack delivered this envelope before (0 the first time).
    #[serde(default)]
    retry_attempt: Option<u64>,
    #[serde(default)]
    retry_reason: Option<String>,
    /// Why Slack will close the link (`disconnect`).
    #[serde(default)]
    reason: Option<String>,
}

/// Reads one link until it is asked to close or dies; each envelope is answered in a
/// task of its own, so a slow slash command holds up no other acknowledgement.
async fn run_link<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    id: u64,
    mut socket: WebSocketStream<S>,
    handler: Arc<Handler>,
    reports: mpsc::UnboundedSender<Report>,
    mut closing: oneshot::Receiver<()>,
) {
    let mut answering: JoinSet<Option<String>> = JoinSet::new();
    let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let opened = Instant::now();
    let mut heard = opened;
    let mut greeted = false;
    let why = loop {
        tokio::select! {
            _ = &mut closing => break None,
            Some(done) = answering.join_next() => match done {
                Ok(Some(ack)) => {
                    if let Err(e) = socket.send(Message::text(ack)).await {
                        break Some(format!("sending an acknowledgement failed: {e}"));
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::error!(link = id, error = %e, "an envelope's handler failed; not acknowledged"),
            },
            _ = ping.tick() => {
                if heard.elapsed() >= SILENCE_LIMIT {
                    break Some(format!("nothing from Slack for {} s", SILENCE_LIMIT.as_secs()));
                }
                if !greeted && opened.elapsed() >= SILENCE_LIMIT {
                    break Some(format!("no hello from Slack within {} s", SILENCE_LIMIT.as_secs()));
                }
                if let Err(e) = socket.send(Message::ping("kuuki")).await {
                    break Some(format!("sending a ping failed: {e}"));
                }
            }
            frame = socket.next() => match frame {
                None => break Some("Slack closed the connection".into()),
                Some(Err(e)) => break Some(format!("reading from Slack failed: {e}")),
                Some(Ok(message)) => {
                    heard = Instant::now();
                    let Some(text) = message.as_text() else { continue };
                    let envelope = match serde_json::from_str::<Envelope>(text) {
                        Ok(envelope) => envelope,
                        Err(error) => {
                            tracing::warn!(link = id, %error, "a Socket Mode message kuuki cannot read; ignored");
                            continue;
                        }
                    };
                    match envelope.kind.as_str() {
                        "hello" => {
                            greeted = true;
                            let _ = reports.send(Report::Hello { id });
                        }
                        "disconnect" => {
                            let reason = envelope.reason.unwrap_or_else(|| "no reason given".into());
                            let _ = reports.send(Report::Disconnect { id, reason });
                        }
                        _ => {
                            let handler = handler.clone();
                            answering.spawn(async move { handler.answer(id, envelope).await });
                        }
                    }
                }
            },
        }
    };
    if why.is_none() {
        close_link(id, &mut socket, &mut answering).await;
    }
    // A handler still storing its event goes on: unacknowledged, Slack delivers it again.
    answering.detach_all();
    let _ = reports.send(Report::Ended { id, why });
}

/// Closes a link that still works: the acknowledgements in progress go out first, then
/// the close frame; envelopes that arrive after it cannot be acknowledged, and Slack
/// delivers them again on the fresh link.
async fn close_link<S: AsyncRead + AsyncWrite + Unpin>(
    id: u64,
    socket: &mut WebSocketStream<S>,
    answering: &mut JoinSet<Option<String>>,
) {
    let acknowledged = async {
        while let Some(done) = answering.join_next().await {
            if let Ok(Some(ack)) = done
                && socket.send(Message::text(ack)).await.is_err()
            {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_WITHIN, acknowledged).await;
    let closed = async {
        if socket.send(Message::close(Some(CloseCode::NORMAL_CLOSURE), "")).await.is_err() {
            return;
        }
        while let Some(Ok(message)) = socket.next().await {
            if message.is_text() {
                tracing::debug!(link = id, "a message arrived while closing; Slack delivers envelopes again");
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_WITHIN, closed).await;
    tracing::debug!(link = id, "Socket Mode connection closed");
}

/// Answers envelopes as the HTTP routes answer requests.
struct Handler {
    deps: Arc<Deps>,
    identity: SlackIdentity,
}

impl Handler {
    /// The acknowledgement to send, `None` to let Slack deliver the envelope again.
    /// Logs carry ids and outcomes, never the messages' text.
    async fn answer(&self, link: u64, envelope: Envelope) -> Option<String> {
        let Some(envelope_id) = envelope.envelope_id else {
            tracing::warn!(link, kind = %envelope.kind, "a Socket Mode envelope without an envelope_id; ignored");
            return None;
        };
        let payload = match envelope.kind.as_str() {
            "events_api" => {
                let retry = envelope.retry_attempt.unwrap_or(0) > 0;
                let retry_reason = envelope.retry_reason.as_deref().unwrap_or("");
                let event_id = envelope.payload.get("event_id").and_then(Value::as_str).unwrap_or("");
                // The payload is the Events API request's body, as the HTTP route gets it.
                let body = envelope.payload.to_string();
                match handle_event(&self.deps, &SlackAccess::One(self.identity.clone()), body.as_bytes(), retry).await {
                    Ok(SlackReply::Ack(what)) => {
                        tracing::debug!(link, %envelope_id, event_id, retry, retry_reason, %what, "Slack event acknowledged");
                    }
                    Ok(SlackReply::Challenge(_)) => {
                        tracing::debug!(link, %envelope_id, "a url_verification over Socket Mode; acknowledged");
                    }
                    Err(SlackIngressError::Malformed(error)) => {
                        // Refusing it would only bring it back.
                        tracing::warn!(link, %envelope_id, event_id, %error, "acknowledged a malformed Slack event; nothing stored");
                    }
                    Err(SlackIngressError::Backend(error)) => {
                        tracing::error!(link, %envelope_id, event_id, %error, "could not store or queue a Slack event; not acknowledged, Slack will deliver it again");
                        return None;
                    }
                }
                None
            }
            "slash_commands" => {
                let text = self.command(link, &envelope_id, &envelope.payload).await;
                Some(json!({ "response_type": "ephemeral", "text": text }))
            }
            "interactive" => {
                tracing::debug!(link, %envelope_id, "an interactive payload; kuuki has no interactive components");
                None
            }
            other => {
                tracing::debug!(link, %envelope_id, kind = other, "a Socket Mode envelope kuuki does not use; acknowledged");
                None
            }
        };
        let mut ack = json!({ "envelope_id": envelope_id });
        if let Some(payload) = payload {
            ack["payload"] = payload;
        }
        Some(ack.to_string())
    }

    /// The ephemeral answer to a `/kuuki` command. Slow work (a forget) is queued by
    /// `run_command` and answered later through the command's `response_url`.
    async fn command(&self, link: u64, envelope_id: &str, payload: &Value) -> String {
        let command = match parse_command_json(payload) {
            Ok(command) => command,
            Err(error) => {
                tracing::warn!(link, envelope_id, %error, "refused a malformed slash command");
                return error.to_string();
            }
        };
        match run_command(&self.deps, &command).await {
            Ok(text) => {
                tracing::debug!(link, envelope_id, channel = %command.channel_id, user = %command.user_id, "slash command answered");
                text
            }
            Err(error) => {
                tracing::error!(link, envelope_id, %error, "slash command failed");
                COMMAND_FAILED.to_owned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_back_off_is_none_after_a_refresh_then_doubles_with_jitter_up_to_its_cap() {
        assert_eq!(backoff(0), Duration::ZERO);
        for (failures, full) in [(1, 500), (2, 1000), (3, 2000), (7, 30_000), (40, 30_000)] {
            let full = Duration::from_millis(full);
            for _ in 0..50 {
                let wait = backoff(failures);
                assert!(
                    wait >= full / 2 && wait <= full,
                    "{failures} failures: {wait:?} outside {full:?}'s upper half"
                );
            }
        }
    }

    type Duplex = WebSocketStream<tokio::io::DuplexStream>;

    /// A link (id 7) over an in-memory pipe, already greeted by the `Slack` side returned.
    async fn greeted_link() -> (Duplex, mpsc::UnboundedReceiver<Report>, oneshot::Sender<()>, JoinHandle<()>) {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let mut slack = tokio_websockets::ServerBuilder::new().serve(theirs);
        slack.send(Message::text(r#"{"type":"hello","num_connections":1}"#)).await.unwrap();
        let (reports_to, mut reports) = mpsc::unbounded_channel();
        let (close, closing) = oneshot::channel();
        let handler = Arc::new(Handler {
            deps: kuuki_test_deps(),
            identity: SlackIdentity { user_id: "UKUUKI".into(), bot_id: None },
        });
        let link = tokio::spawn(run_link(7, ClientBuilder::new().take_over(ours), handler, reports_to, closing));
        assert!(matches!(reports.recv().await, Some(Report::Hello { id: 7 })));
        (slack, reports, close, link)
    }

    /// A peer that stops answering (no pong, nothing else) ends the link, reported as
    /// dead, after the silence limit: time is paused, so this takes no real time.
    #[tokio::test(start_paused = true)]
    async fn a_link_whose_peer_falls_silent_is_reported_dead() {
        let started = Instant::now();
        // Slack's side reads nothing from here on, so it answers no ping.
        let (_slack, mut reports, _close, link) = greeted_link().await;
        match tokio::time::timeout(3 * SILENCE_LIMIT, reports.recv()).await {
            Ok(Some(Report::Ended { id: 7, why: Some(why) })) => assert!(why.contains("nothing from Slack"), "{why}"),
            _ => panic!("the silent link was not reported dead"),
        }
        let waited = started.elapsed();
        assert!(waited >= SILENCE_LIMIT && waited <= SILENCE_LIMIT + PING_EVERY, "declared dead after {waited:?}");
        link.await.unwrap();
    }

    /// A link with nothing to say stays up as long as Slack answers its pings, and
    /// closes with a close frame when asked.
    #[tokio::test(start_paused = true)]
    async fn a_quiet_link_that_answers_pings_stays_up_and_closes_when_asked() {
        let (mut slack, mut reports, close, link) = greeted_link().await;
        // Slack's side reads (tokio-websockets answers each ping) and sends nothing.
        let slack = tokio::spawn(async move {
            let (mut pings, mut closed) = (0, false);
            while let Some(Ok(message)) = slack.next().await {
                pings += usize::from(message.is_ping());
                closed |= message.is_close();
            }
            (pings, closed)
        });
        let quiet = tokio::time::timeout(10 * SILENCE_LIMIT, reports.recv()).await;
        assert!(quiet.is_err(), "a link whose pings are answered was ended");
        close.send(()).unwrap();
        assert!(matches!(reports.recv().await, Some(Report::Ended { id: 7, why: None })));
        link.await.unwrap();
        let (pings, closed) = slack.await.unwrap();
        assert!(pings >= 29, "{pings} pings in 300 s");
        assert!(closed, "no close frame");
    }

    /// An uninstall arriving as a Socket Mode envelope goes through the handler the
    /// HTTP route uses: acknowledged, Slack's access marked gone since the event's time
    /// and its purge queued, once (Slack's redelivery of the envelope changes nothing).
    #[tokio::test]
    async fn an_uninstall_over_socket_mode_marks_slack_access_gone_once() {
        use kuuki::adapters::memory::{InProcess, MemoryLog, VirtualClock};
        use kuuki::domain::{Job, Persona, Timestamp, UserId};
        let clock = Arc::new(VirtualClock::new(Timestamp(1_767_603_600_000_000)));
        let parts = InProcess::new(clock);
        let chat: Arc<dyn kuuki::ports::Chat> =
            Arc::new(kuuki::adapters::platforms::PlatformChat { slack: None, discord: None });
        let settings = kuuki::config::Settings::from_vars(&Default::default()).unwrap();
        let persona = Persona { name: "kuuki".into(), system_prompt: String::new(), aliases: vec![], topics: vec![] };
        let adapters = parts.adapters(chat, None, Arc::new(MemoryLog::default()));
        let deps = Arc::new(Deps::new(settings, persona, UserId("UKUUKI".into()), adapters, 1));
        let handler =
            Handler { deps: deps.clone(), identity: SlackIdentity { user_id: "UKUUKI".into(), bot_id: None } };
        let envelope = |retry_attempt: u64| -> Envelope {
            serde_json::from_value(json!({"type": "events_api", "envelope_id": "env-1", "retry_attempt": retry_attempt,
                "payload": {"type": "event_callback", "team_id": "T0TEAM", "event_id": "EvGONE",
                    "event_time": 1_767_603_000, "event": {"type": "app_uninstalled"}}}))
            .unwrap()
        };
        for retry_attempt in [0, 1] {
            let ack = handler.answer(1, envelope(retry_attempt)).await.expect("acknowledged");
            assert_eq!(serde_json::from_str::<Value>(&ack).unwrap()["envelope_id"], "env-1");
        }
        assert_eq!(
            deps.channels.slack_gone(kuuki::domain::Workspace::Shared).await.unwrap(),
            Some(Timestamp(1_767_603_000_000_000))
        );
        assert_eq!(parts.queue.waiting(|job| matches!(job, Job::PurgeSlack { .. })).len(), 1, "one purge queued");
    }

    /// The in-process adapters, no platform to post to: enough for a link that answers
    /// no envelope.
    fn kuuki_test_deps() -> Arc<Deps> {
        use kuuki::adapters::memory::InProcess;
        use kuuki::adapters::platforms::PlatformChat;
        use kuuki::adapters::system::{JsonLinesLog, SystemClock};
        use kuuki::domain::{Persona, UserId};
        let chat: Arc<dyn kuuki::ports::Chat> = Arc::new(PlatformChat { slack: None, discord: None });
        let adapters = InProcess::new(Arc::new(SystemClock)).adapters(
            chat,
            None,
            Arc::new(JsonLinesLog::new(std::io::sink(), Default::default())),
        );
        let persona = Persona { name: "kuuki".into(), system_prompt: String::new(), aliases: vec![], topics: vec![] };
        Arc::new(Deps::new(Default::default(), persona, UserId("UKUUKI".into()), adapters, 1))
    }
}
