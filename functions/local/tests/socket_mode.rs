//! `kuuki serve` over Slack's Socket Mode as a user meets it: the real binary with
//! SLACK_APP_TOKEN and no signing secret, a fake Socket Mode server (a real websocket)
//! whose URLs the fake `apps.connections.open` hands out, fresh each call, and the Slack
//! Web API on wiremock. Also `/metrics` and `/healthz` as an operator meets them.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_websockets::{CloseCode, Message, ServerBuilder};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// How long any expected effect may take before the test fails.
const WAIT: Duration = Duration::from_secs(15);
const APP_TOKEN: &str = "xapp-1-socket-mode-test";

/// Waits (at most [`WAIT`]) until `done` holds; fails the test with `what` otherwise.
async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done().await {
        assert!(Instant::now() < deadline, "waited {WAIT:?} in vain: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

// ---- kuuki serve, the process ----

struct Kuuki {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// The decision log (stdout), one JSON object a line.
    decisions: Arc<Mutex<Vec<Value>>>,
}

impl Drop for Kuuki {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Kuuki {
    /// `kuuki serve` with Socket Mode only: SLACK_APP_TOKEN, no SLACK_SIGNING_SECRET.
    fn start(slack_api: &str) -> Kuuki {
        Kuuki::start_with(slack_api, &[])
    }

    fn start_with(slack_api: &str, extra_env: &[(&str, &str)]) -> Kuuki {
        Kuuki::start_on(slack_api, ":memory:", extra_env)
    }

    /// `kuuki serve` on the data file `data`.
    fn start_on(slack_api: &str, data: &str, extra_env: &[(&str, &str)]) -> Kuuki {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kuuki"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--seed", "1", "--data", data])
            .env_remove("LLM_PROVIDER")
            .env_remove("SLACK_SIGNING_SECRET")
            .env_remove("DISCORD_BOT_TOKEN")
            .env("SLACK_APP_TOKEN", APP_TOKEN)
            .env("SLACK_BOT_TOKEN", "xoxb-socket-mode-test")
            .env("SLACK_API_BASE_URL", slack_api)
            .env("JUDGE_MIN_WAIT_SECONDS", "1")
            .envs(extra_env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("kuuki starts");
        let (stderr, decisions) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(Vec::new())));
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let seen = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut seen = seen.lock().unwrap();
                seen.push_str(&line);
                seen.push('\n');
            }
        });
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let logged = decisions.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(decision) = serde_json::from_str(&line) {
                    logged.lock().unwrap().push(decision);
                }
            }
        });
        Kuuki { child, stderr, decisions }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The HTTP address from the "listening on" line.
    async fn base_url(&self) -> String {
        wait_until("kuuki serve listens", async || self.stderr().contains("listening on ")).await;
        let stderr = self.stderr();
        let rest = stderr.split("listening on ").nth(1).unwrap();
        rest.split_whitespace().next().unwrap().to_owned()
    }

    /// Waits for a decision record of `kind` about the message `ts` that `also` accepts.
    async fn wait_for_decision(&self, kind: &str, ts: &str, also: impl Fn(&Value) -> bool) {
        let found = || self.decisions.lock().unwrap().iter().any(|d| d["kind"] == kind && d["ts"] == ts && also(d));
        wait_until(&format!("a {kind} record for {ts}"), async || found()).await;
    }

    /// Waits for the process to end, and how.
    async fn exit(&mut self) -> ExitStatus {
        let mut status = None;
        wait_until("kuuki serve exits", async || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        })
        .await;
        status.unwrap()
    }

    /// Sends SIGINT, as Ctrl-C does, once kuuki listens for it (so it cannot kill it).
    async fn interrupt(&self) {
        wait_until("kuuki listens for SIGINT", async || self.catches_sigint()).await;
        let sent = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status().unwrap();
        assert!(sent.success());
    }

    /// Whether the process has a handler for SIGINT (Linux: `SigCgt` in /proc; elsewhere
    /// assumed).
    fn catches_sigint(&self) -> bool {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())) else { return true };
        let caught = status.lines().find_map(|line| line.strip_prefix("SigCgt:")).map(str::trim);
        caught.and_then(|mask| u64::from_str_radix(mask, 16).ok()).is_some_and(|mask| mask & (1 << (2 - 1)) != 0)
    }
}

// ---- the Slack Web API ----

/// A `chat.postMessage` call, as the fake Slack saw it.
#[derive(Clone)]
struct Post {
    arrived: Instant,
    body: Value,
    /// The test opened the gate (it had the acknowledgement) while this post was held.
    gate_opened: bool,
}

type Posts = Arc<Mutex<Vec<Post>>>;

/// Opened by the test once it has what it waits for; posts are held until then.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }

    /// Waits (at most [`WAIT`], on wiremock's own thread) for the gate; whether it opened.
    fn wait(&self) -> bool {
        let open = self.0.0.lock().unwrap();
        *self.0.1.wait_timeout_while(open, WAIT, |open| !*open).unwrap().0
    }
}

/// `chat.postMessage`: noted with when it arrived, and held until `gate` opens if there is one.
struct RecordPosts {
    posts: Posts,
    gate: Option<Gate>,
}

impl Respond for RecordPosts {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let arrived = Instant::now();
        let gate_opened = self.gate.as_ref().is_some_and(Gate::wait);
        let body = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        self.posts.lock().unwrap().push(Post { arrived, body, gate_opened });
        ResponseTemplate::new(200).set_body_json(json!({"ok": true, "ts": "1999999999.000001"}))
    }
}

/// `apps.connections.open`: a fresh, single-use URL on the fake server each call.
struct OpenLinks {
    socket_url: String,
    opened: AtomicUsize,
}

impl Respond for OpenLinks {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let n = self.opened.fetch_add(1, Ordering::SeqCst);
        let url = format!("{}/link/{n}?ticket=single-use-{n}", self.socket_url);
        ResponseTemplate::new(200).set_body_json(json!({"ok": true, "url": url}))
    }
}

struct Slack {
    api: MockServer,
    posts: Posts,
}

impl Slack {
    /// `apps.connections.open` answers with URLs to `socket_url`.
    async fn start(socket_url: &str) -> Slack {
        Slack::with(socket_url, None, None).await
    }

    /// `apps.connections.open` answers `answer` (a refusal).
    async fn refusing(answer: Value) -> Slack {
        Slack::with("", Some(answer), None).await
    }

    /// Each `chat.postMessage` is held until `gate` opens.
    async fn holding_posts(socket_url: &str, gate: Gate) -> Slack {
        Slack::with(socket_url, None, Some(gate)).await
    }

    async fn with(socket_url: &str, open_answer: Option<Value>, gate: Option<Gate>) -> Slack {
        let api = MockServer::start().await;
        for (call, answer) in [
            ("/auth.test", json!({"ok": true, "user_id": "UKUUKI", "bot_id": "BKUUKI"})),
            ("/reactions.add", json!({"ok": true})),
            ("/users.info", json!({"ok": true, "user": {"name": "alice"}})),
            ("/conversations.history", json!({"ok": true, "messages": []})),
            ("/conversations.replies", json!({"ok": true, "messages": []})),
        ] {
            Mock::given(method("POST"))
                .and(path(call))
                .respond_with(ResponseTemplate::new(200).set_body_json(answer))
                .mount(&api)
                .await;
        }
        let posts = Posts::default();
        let recording = RecordPosts { posts: posts.clone(), gate };
        Mock::given(method("POST")).and(path("/chat.postMessage")).respond_with(recording).mount(&api).await;
        let open = Mock::given(method("POST")).and(path("/apps.connections.open"));
        match open_answer {
            Some(answer) => open.respond_with(ResponseTemplate::new(200).set_body_json(answer)).mount(&api).await,
            None => {
                let links = OpenLinks { socket_url: socket_url.to_owned(), opened: AtomicUsize::new(0) };
                open.respond_with(links).mount(&api).await;
            }
        }
        Slack { api, posts }
    }

    /// The `apps.connections.open` calls so far.
    async fn opens(&self) -> Vec<Request> {
        let requests = self.api.received_requests().await.unwrap_or_default();
        requests.into_iter().filter(|r| r.url.path() == "/apps.connections.open").collect()
    }

    fn posts_in(&self, channel: &str) -> Vec<Post> {
        self.posts.lock().unwrap().iter().filter(|post| post.body["channel"] == channel).cloned().collect()
    }

    /// Waits until something is posted in `channel`; the posts there.
    async fn wait_for_posts_in(&self, channel: &str) -> Vec<Post> {
        wait_until(&format!("a post in {channel}"), async || !self.posts_in(channel).is_empty()).await;
        self.posts_in(channel)
    }
}

// ---- the fake Socket Mode server ----

enum ToKuuki {
    Text(String),
    /// A close frame from Slack's side, then the end of the connection.
    Close,
    /// The TCP connection ends without a close frame, as a network drop does.
    Drop,
}

enum FromKuuki {
    Text(Instant, Value),
    /// kuuki sent a close frame.
    Closed,
}

struct FakeSocketMode {
    url: String,
    links: mpsc::UnboundedReceiver<Link>,
}

impl FakeSocketMode {
    async fn start() -> FakeSocketMode {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (opened, links) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let opened = opened.clone();
                tokio::spawn(async move {
                    if let Ok((request, socket)) = ServerBuilder::new().accept(stream).await {
                        let _ = opened.send(Link::serve(request.uri().to_string(), socket));
                    }
                });
            }
        });
        FakeSocketMode { url, links }
    }

    /// The next connection `kuuki` opens (not greeted yet).
    async fn next_link(&mut self, kuuki: &Kuuki) -> Link {
        match tokio::time::timeout(WAIT, self.links.recv()).await {
            Ok(Some(link)) => link,
            _ => panic!("kuuki opened no Socket Mode connection; its stderr:\n{}", kuuki.stderr()),
        }
    }

    /// Whether kuuki opened a connection that was not taken yet.
    fn opened_another(&mut self) -> bool {
        self.links.try_recv().is_ok()
    }
}

/// One connection from kuuki, served by a task that answers its pings (tokio-websockets
/// does, while it reads) and passes on what kuuki sends.
struct Link {
    uri: String,
    to_kuuki: mpsc::UnboundedSender<ToKuuki>,
    from_kuuki: mpsc::UnboundedReceiver<FromKuuki>,
}

impl Link {
    fn serve(uri: String, mut socket: tokio_websockets::WebSocketStream<tokio::net::TcpStream>) -> Link {
        let (to_kuuki, mut commands) = mpsc::unbounded_channel();
        let (sent, from_kuuki) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    command = commands.recv() => match command {
                        Some(ToKuuki::Text(text)) => {
                            if socket.send(Message::text(text)).await.is_err() {
                                break;
                            }
                        }
                        Some(ToKuuki::Close) => {
                            let _ = socket.send(Message::close(Some(CloseCode::GOING_AWAY), "fake Slack closes")).await;
                            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                                while socket.next().await.is_some() {}
                            })
                            .await;
                            break;
                        }
                        Some(ToKuuki::Drop) | None => break,
                    },
                    frame = socket.next() => match frame {
                        Some(Ok(message)) if message.is_close() => {
                            let _ = sent.send(FromKuuki::Closed);
                        }
                        Some(Ok(message)) => {
                            if let Some(text) = message.as_text() {
                                let _ = sent.send(FromKuuki::Text(Instant::now(), serde_json::from_str(text).unwrap()));
                            }
                        }
                        _ => break,
                    },
                }
            }
        });
        Link { uri, to_kuuki, from_kuuki }
    }

    /// Sends a message to kuuki; when it was sent.
    fn send(&self, message: Value) -> Instant {
        let at = Instant::now();
        self.to_kuuki.send(ToKuuki::Text(message.to_string())).expect("the link is served");
        at
    }

    fn hello(&self) {
        self.send(json!({
            "type": "hello", "num_connections": 1,
            "debug_info": {"host": "fake-socket-mode", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A1"},
        }));
    }

    fn disconnect(&self, reason: &str) {
        self.send(json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-socket-mode"}}));
    }

    fn close(&self) {
        let _ = self.to_kuuki.send(ToKuuki::Close);
    }

    fn drop_connection(&self) {
        let _ = self.to_kuuki.send(ToKuuki::Drop);
    }

    /// kuuki's acknowledgement of `envelope_id`, and when it arrived.
    async fn ack(&mut self, envelope_id: &str) -> (Instant, Value) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let next = tokio::time::timeout_at(deadline, self.from_kuuki.recv()).await;
            match next.unwrap_or_else(|_| panic!("no acknowledgement of {envelope_id}")) {
                Some(FromKuuki::Text(at, ack)) if ack["envelope_id"] == envelope_id => return (at, ack),
                Some(FromKuuki::Text(..)) => {}
                Some(FromKuuki::Closed) | None => panic!("the link closed before {envelope_id} was acknowledged"),
            }
        }
    }

    /// Whether kuuki sends a close frame on this link (within [`WAIT`]).
    async fn closed_by_kuuki(&mut self) -> bool {
        let closed = async {
            loop {
                match self.from_kuuki.recv().await {
                    Some(FromKuuki::Closed) => return true,
                    Some(FromKuuki::Text(..)) => {}
                    None => return false,
                }
            }
        };
        tokio::time::timeout(WAIT, closed).await.unwrap_or(false)
    }
}

// ---- what Slack sends ----

fn now_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// A message ts of now, distinct by `n`.
fn ts(n: u32) -> String {
    format!("{}.{n:06}", now_seconds())
}

/// An `events_api` envelope with an `app_mention` of kuuki in `channel`.
fn mention(envelope_id: &str, event_id: &str, channel: &str, ts: &str, retry_attempt: u32) -> Value {
    json!({
        "envelope_id": envelope_id,
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": retry_attempt,
        "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
        "payload": {
            "token": "unused", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
            "event_id": event_id, "event_time": now_seconds(),
            "event": {"type": "app_mention", "channel": channel, "user": "UALICE", "text": "<@UKUUKI> are you there?", "ts": ts},
        },
    })
}

/// An `events_api` envelope with a message in `channel` that does not call kuuki.
fn ambient(envelope_id: &str, event_id: &str, channel: &str, ts: &str) -> Value {
    let mut envelope = mention(envelope_id, event_id, channel, ts, 0);
    envelope["payload"]["event"] = json!({"type": "message", "channel": channel, "channel_type": "channel",
        "user": "UALICE", "text": "does anyone know how the deploys work here?", "ts": ts});
    envelope
}

/// A `slash_commands` envelope: `/kuuki {text}` in `channel`.
fn slash_command(envelope_id: &str, channel: &str, text: &str) -> Value {
    json!({
        "envelope_id": envelope_id,
        "type": "slash_commands",
        "accepts_response_payload": true,
        "payload": {
            "token": "unused", "team_id": "T1", "team_domain": "kuuki-test", "channel_id": channel,
            "channel_name": "general", "user_id": "UALICE", "user_name": "alice", "command": "/kuuki",
            "text": text, "api_app_id": "A1", "is_enterprise_install": "false",
            "response_url": "https://hooks.slack.com/commands/T1/1/secret", "trigger_id": "1.2.3",
        },
    })
}

/// kuuki, its fake Slack and its first connection, greeted.
async fn connected() -> (Kuuki, Slack, FakeSocketMode, Link) {
    let mut socket_mode = FakeSocketMode::start().await;
    let slack = Slack::start(&socket_mode.url).await;
    let (kuuki, slack, link) = greeted(slack, &mut socket_mode).await;
    (kuuki, slack, socket_mode, link)
}

/// kuuki serve against `slack`, and its first connection, greeted.
async fn greeted(slack: Slack, socket_mode: &mut FakeSocketMode) -> (Kuuki, Slack, Link) {
    let kuuki = Kuuki::start(&slack.api.uri());
    let link = socket_mode.next_link(&kuuki).await;
    link.hello();
    (kuuki, slack, link)
}

// ---- the tests ----

#[tokio::test]
async fn a_mention_is_acknowledged_before_it_is_answered_and_a_retry_of_it_gets_no_second_answer() {
    let mut socket_mode = FakeSocketMode::start().await;
    // The answer's post is held until the test has the acknowledgement: kuuki must
    // acknowledge without waiting for its answer (which would wait for the gate in vain).
    let gate = Gate::default();
    let slack = Slack::holding_posts(&socket_mode.url, gate.clone()).await;
    let (kuuki, slack, mut link) = greeted(slack, &mut socket_mode).await;
    let opens = slack.opens().await;
    assert_eq!(opens.len(), 1);
    let authorization = opens[0].headers.get("authorization").unwrap().to_str().unwrap();
    assert_eq!(authorization, format!("Bearer {APP_TOKEN}"), "Socket Mode is opened with the app-level token");
    assert!(link.uri.starts_with("/link/0?ticket="), "the URL apps.connections.open gave: {}", link.uri);

    // No signing secret: the HTTP Slack routes are not served, and the start-up says so.
    let base_url = kuuki.base_url().await;
    let refused = reqwest::Client::new().post(format!("{base_url}/slack/events")).body("{}").send().await.unwrap();
    assert_eq!(refused.status(), 404);
    assert!(kuuki.stderr().contains("Socket Mode") && kuuki.stderr().contains("not served"), "{}", kuuki.stderr());

    let ts = ts(100);
    let sent = link.send(mention("E1", "Ev1", "C1", &ts, 0));
    let (acked, ack) = link.ack("E1").await;
    gate.open();
    assert_eq!(ack, json!({"envelope_id": "E1"}));
    let posted = slack.wait_for_posts_in("C1").await;
    eprintln!("envelope to acknowledgement: {:?}, to the answer's post: {:?}", acked - sent, posted[0].arrived - sent);
    assert!(posted[0].gate_opened, "kuuki acknowledged only after its answer was posted");
    assert!(!posted[0].body["text"].as_str().unwrap_or_default().is_empty(), "{}", posted[0].body);
    kuuki.wait_for_decision("respond", &ts, |_| true).await;

    // Slack delivers it again (no ack seen in time): acknowledged, put through the same
    // dedup as an HTTP retry (its job runs and finds the answer given), not answered again.
    link.send(mention("E1-again", "Ev1", "C1", &ts, 1));
    link.ack("E1-again").await;
    kuuki.wait_for_decision("dropped", &ts, |d| d["event"]["reason"] == "already answered").await;
    assert_eq!(slack.posts_in("C1").len(), 1, "one answer");
}

#[tokio::test]
async fn a_refresh_opens_the_new_connection_first_and_the_old_one_is_read_until_the_new_one_says_hello() {
    let (kuuki, slack, mut socket_mode, mut old) = connected().await;
    old.disconnect("refresh_requested");
    let mut new = socket_mode.next_link(&kuuki).await;
    assert_eq!(slack.opens().await.len(), 2, "a fresh URL for the new connection");
    assert_ne!(new.uri, old.uri, "URLs are single use");

    // The new connection has not said hello yet: the old one is still read and answered.
    let before = ts(200);
    old.send(mention("E2", "Ev2", "C2", &before, 0));
    old.ack("E2").await;
    assert_eq!(slack.wait_for_posts_in("C2").await.len(), 1);

    new.hello();
    assert!(old.closed_by_kuuki().await, "the old connection is closed once the new one is greeted");
    let after = ts(201);
    new.send(mention("E3", "Ev3", "C3", &after, 0));
    new.ack("E3").await;
    assert_eq!(slack.wait_for_posts_in("C3").await.len(), 1);
    assert_eq!(slack.opens().await.len(), 2, "no connection more than needed");
    assert!(!socket_mode.opened_another());
}

#[tokio::test]
async fn a_connection_closed_or_dropped_by_slack_is_opened_again_and_answers() {
    let (kuuki, slack, mut socket_mode, first) = connected().await;
    // Slack closes the connection with a close frame.
    first.close();
    let mut second = socket_mode.next_link(&kuuki).await;
    second.hello();
    second.send(mention("E4", "Ev4", "C4", &ts(300), 0));
    second.ack("E4").await;
    assert_eq!(slack.wait_for_posts_in("C4").await.len(), 1);

    // The network drops it: no close frame, the TCP connection just ends.
    second.drop_connection();
    let mut third = socket_mode.next_link(&kuuki).await;
    third.hello();
    third.send(mention("E5", "Ev5", "C5", &ts(301), 0));
    third.ack("E5").await;
    assert_eq!(slack.wait_for_posts_in("C5").await.len(), 1);

    let uris: std::collections::HashSet<&String> = [&first.uri, &second.uri, &third.uri].into_iter().collect();
    assert_eq!(uris.len(), 3, "each connection on a URL of its own");
    assert_eq!(slack.opens().await.len(), 3);
}

#[tokio::test]
async fn with_the_signing_secret_set_too_slack_is_served_over_http_and_over_socket_mode() {
    const SECRET: &str = "socket-mode-test-secret";
    let mut socket_mode = FakeSocketMode::start().await;
    let slack = Slack::start(&socket_mode.url).await;
    let kuuki = Kuuki::start_with(&slack.api.uri(), &[("SLACK_SIGNING_SECRET", SECRET)]);
    let mut link = socket_mode.next_link(&kuuki).await;
    link.hello();
    let base_url = kuuki.base_url().await;
    assert!(kuuki.stderr().contains("served too"), "{}", kuuki.stderr());

    let body = mention("unused", "Ev7", "C7", &ts(700), 0)["payload"].to_string();
    let timestamp = now_seconds().to_string();
    let signature = kuuki::adapters::slack::SigningSecret::new(SECRET).sign(&timestamp, body.as_bytes());
    let http = reqwest::Client::new().post(format!("{base_url}/slack/events"));
    let request = http.header("x-slack-request-timestamp", timestamp).header("x-slack-signature", signature);
    assert_eq!(request.body(body).send().await.unwrap().status(), 200);
    assert_eq!(slack.wait_for_posts_in("C7").await.len(), 1, "answered over HTTP");

    link.send(mention("E8", "Ev8", "C8", &ts(800), 0));
    link.ack("E8").await;
    assert_eq!(slack.wait_for_posts_in("C8").await.len(), 1, "answered over Socket Mode");
}

#[tokio::test]
async fn a_slash_command_is_answered_in_its_acknowledgement() {
    let (kuuki, _slack, _socket_mode, mut link) = connected().await;
    link.send(slash_command("S1", "C6", "help"));
    let (_, ack) = link.ack("S1").await;
    assert_eq!(ack["payload"]["response_type"], "ephemeral", "{ack}");
    let text = ack["payload"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("Usage: /kuuki status"), "{text}");

    link.send(slash_command("S2", "C6", "status"));
    let (_, ack) = link.ack("S2").await;
    let text = ack["payload"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("kuuki here:") && text.contains("Judge: rules only"), "{text}");
    let logged = || kuuki.decisions.lock().unwrap().iter().filter(|d| d["kind"] == "command").count();
    wait_until("both commands in the decision log", async || logged() == 2).await;

    // An interactive payload (kuuki has no components) is acknowledged all the same.
    link.send(json!({"envelope_id": "I1", "type": "interactive", "payload": {"type": "block_actions"}}));
    assert_eq!(link.ack("I1").await.1, json!({"envelope_id": "I1"}));
}

#[tokio::test]
async fn link_disabled_stops_kuuki_with_an_error_naming_the_app_token() {
    let (mut kuuki, _slack, _socket_mode, mut link) = connected().await;
    kuuki.base_url().await;
    link.disconnect("link_disabled");
    assert!(link.closed_by_kuuki().await, "kuuki closes its connection on the way out");
    let status = kuuki.exit().await;
    assert!(!status.success(), "{status}");
    let stderr = kuuki.stderr();
    assert!(stderr.contains("link_disabled") && stderr.contains("SLACK_APP_TOKEN"), "{stderr}");
}

#[tokio::test]
async fn an_app_token_slack_refuses_stops_kuuki_with_a_clear_error() {
    let mut socket_mode = FakeSocketMode::start().await;
    let slack = Slack::refusing(json!({"ok": false, "error": "invalid_auth"})).await;
    let mut kuuki = Kuuki::start(&slack.api.uri());
    let status = kuuki.exit().await;
    assert!(!status.success(), "{status}");
    let stderr = kuuki.stderr();
    assert!(stderr.contains("invalid_auth") && stderr.contains("SLACK_APP_TOKEN"), "{stderr}");
    assert_eq!(slack.opens().await.len(), 1, "a refused token is not tried again");
    assert!(!socket_mode.opened_another());
}

#[tokio::test]
async fn a_stop_signal_closes_the_connection_and_kuuki_exits_cleanly() {
    let (mut kuuki, _slack, _socket_mode, mut link) = connected().await;
    kuuki.base_url().await;
    kuuki.interrupt().await;
    let closed = link.closed_by_kuuki().await;
    let status = kuuki.exit().await;
    assert!(closed, "kuuki sends a close frame when it stops ({status}): {}", kuuki.stderr());
    assert!(status.success(), "{status}: {}", kuuki.stderr());
}

/// Killed (SIGKILL) and started again on its data file: Slack's redelivery of a mention
/// answered before the kill gets no second answer, and a judgment that was queued when
/// it was killed (its envelope acknowledged) runs in the new process, once.
#[tokio::test]
async fn killed_and_started_again_on_its_file_it_answers_nothing_twice_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("kuuki.db").to_string_lossy().into_owned();
    // Every message is worth an answer, six seconds after it came: long enough that the
    // kill below lands first even on two cores busy with other tests (two was not).
    let env = [("JUDGE_SCORE_THRESHOLD", "0"), ("JUDGE_MIN_WAIT_SECONDS", "6"), ("JUDGE_JITTER_RATIO", "0")];
    // The question's pick-up far off: its JUDGE (the threshold cleared at once) is the
    // one answer, so the kill below lands before it.
    let env = [env.as_slice(), &[("UNANSWERED_QUESTION_WAIT_SECONDS", "600")]].concat();
    let mut socket_mode = FakeSocketMode::start().await;
    let slack = Slack::start(&socket_mode.url).await;
    let first = Kuuki::start_on(&slack.api.uri(), &data, &env);
    let mut link = socket_mode.next_link(&first).await;
    link.hello();
    let answered = ts(300);
    link.send(mention("E30", "Ev30", "C30", &answered, 0));
    link.ack("E30").await;
    slack.wait_for_posts_in("C30").await;
    first.wait_for_decision("respond", &answered, |_| true).await;
    let queued = ts(301);
    link.send(ambient("E31", "Ev31", "C31", &queued));
    link.ack("E31").await;
    drop(first); // SIGKILL, before the queued judgment's six seconds
    assert!(slack.posts_in("C31").is_empty(), "killed before it could answer");

    let second = Kuuki::start_on(&slack.api.uri(), &data, &env);
    let mut link = socket_mode.next_link(&second).await;
    link.hello();
    link.send(mention("E30-again", "Ev30", "C30", &answered, 1));
    link.ack("E30-again").await;
    second.wait_for_decision("dropped", &answered, |d| d["event"]["reason"] == "already answered").await;
    slack.wait_for_posts_in("C31").await;
    second.wait_for_decision("respond", &queued, |_| true).await;
    // Give a second answer time to show up, were there one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(slack.posts_in("C30").len(), 1, "the mention answered once");
    assert_eq!(slack.posts_in("C31").len(), 1, "the queued judgment answered once");
}

/// An `events_api` envelope with `user`'s `reaction_added` on the message `ts` of `channel`.
fn reaction_added(envelope_id: &str, channel: &str, ts: &str, emoji: &str) -> Value {
    let mut envelope = mention(envelope_id, envelope_id, channel, ts, 0);
    envelope["payload"]["event"] = json!({"type": "reaction_added", "user": "UBOB", "reaction": emoji,
        "item": {"type": "message", "channel": channel, "ts": ts}, "event_ts": ts});
    envelope
}

#[tokio::test]
async fn a_reaction_on_kuukis_post_over_socket_mode_is_a_talkativeness_signal() {
    let (kuuki, slack, _socket_mode, mut link) = connected().await;
    let asked = ts(300);
    link.send(mention("E1", "Ev1", "C9", &asked, 0));
    link.ack("E1").await;
    slack.wait_for_posts_in("C9").await;
    // Recorded once kuuki's post is stored as its own.
    kuuki.wait_for_decision("respond", &asked, |_| true).await;
    // The fake Slack gives every post this ts.
    let own = "1999999999.000001";
    link.send(reaction_added("E2", "C9", own, "-1"));
    link.ack("E2").await;
    kuuki
        .wait_for_decision("feedback", own, |d| {
            d["event"]["signal"] == "negative_reaction" && d["event"]["weight"] == -6.0 && d["event"]["user"] == "UBOB"
        })
        .await;
}

// ---- /metrics and /healthz ----

/// `GET /metrics`: the content type and the text.
async fn scrape(base_url: &str) -> (String, String) {
    let response = reqwest::get(format!("{base_url}/metrics")).await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    (content_type, response.text().await.unwrap())
}

/// The values of the samples of `text` whose name and labels start with `prefix`.
fn sampled(text: &str, prefix: &str) -> Vec<f64> {
    text.lines()
        .filter(|line| line.starts_with(prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
        .collect()
}

/// The sum of the samples `prefix` matches (0 when none does).
fn total(text: &str, prefix: &str) -> f64 {
    sampled(text, prefix).iter().sum()
}

async fn healthz(base_url: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base_url}/healthz")).await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// No one's words, names or ids in a scrape.
fn assert_nothing_personal(text: &str) {
    for personal in ["are you there", "deploys work", "UALICE", "alice", common::ANSWER, "T1"] {
        assert!(!text.contains(personal), "{personal:?} in /metrics:\n{text}");
    }
}

/// After a signed mention over HTTP, a Socket Mode envelope and the judgment it queued,
/// a scrape shows the counters moved; while another connection holds the data file's
/// write lock, a scrape shows the store's errors and `/healthz` answers 503, and once it
/// lets go `/healthz` is well again. No scrape carries anyone's words.
#[tokio::test]
async fn metrics_move_with_the_work_and_a_store_failure_shows_in_metrics_and_healthz() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("kuuki.db").to_string_lossy().into_owned();
    let llm = wiremock::MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(common::completion(common::ANSWER))
        .mount(&llm)
        .await;
    let llm_url = llm.uri();
    // Every message is worth an answer a second after it came; the model writes answers.
    let env = [
        ("SLACK_SIGNING_SECRET", common::SECRET),
        ("LLM_PROVIDER", "openai"),
        ("OPENAI_BASE_URL", &llm_url),
        ("OPENAI_API_KEY", "sk-test"),
        ("LLM_JUDGE_ENABLED", "false"),
        ("JUDGE_SCORE_THRESHOLD", "0"),
        ("JUDGE_JITTER_RATIO", "0"),
        ("UNANSWERED_QUESTION_WAIT_SECONDS", "0"),
    ];
    let mut socket_mode = FakeSocketMode::start().await;
    let slack = Slack::start(&socket_mode.url).await;
    let kuuki = Kuuki::start_on(&slack.api.uri(), &data, &env);
    let mut link = socket_mode.next_link(&kuuki).await;
    let base_url = kuuki.base_url().await;
    let (content_type, before) = scrape(&base_url).await;
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    assert_eq!(sampled(&before, "kuuki_messages_stored_total"), vec![0.0], "{before}");
    link.hello();
    wait_until("Socket Mode shows as connected", async || {
        sampled(&scrape(&base_url).await.1, "kuuki_platform_connected{platform=\"slack\"}") == vec![1.0]
    })
    .await;

    // A signed mention over HTTP, and a message over Socket Mode that queues a judgment.
    let mention = common::signed_mention_request("C1", "EvHttp").0;
    assert_eq!(common::post_signed(&base_url, "/slack/events", &mention).await.status(), 200);
    let queued = ts(401);
    link.send(ambient("E2", "Ev2", "C2", &queued));
    link.ack("E2").await;
    slack.wait_for_posts_in("C1").await;
    kuuki.wait_for_decision("judge", &queued, |_| true).await;
    kuuki.wait_for_decision("respond", &queued, |_| true).await;
    // The mention's post is counted when its decision is recorded, just after Slack
    // took it: waited for, not raced.
    wait_until("the mention's answer is counted", async || {
        total(&scrape(&base_url).await.1, "kuuki_posts_total{mode=\"direct\"") >= 1.0
    })
    .await;

    let (_, after) = scrape(&base_url).await;
    assert_eq!(sampled(&after, "kuuki_messages_stored_total"), vec![2.0], "{after}");
    assert!(total(&after, "kuuki_judgments_total{decision=\"respond\"}") >= 1.0, "{after}");
    assert_eq!(total(&after, "kuuki_posts_total{mode=\"direct\""), 1.0, "{after}");
    // The question is answered unasked (by its judgment or its pick-up): a post or a reaction.
    let unasked = total(&after, "kuuki_posts_total") + total(&after, "kuuki_reactions_total") - 1.0;
    assert_eq!(unasked, 1.0, "{after}");
    assert!(total(&after, "kuuki_jobs_total{kind=\"judge\",outcome=\"done\"}") >= 1.0, "{after}");
    assert!(total(&after, "kuuki_jobs_total{kind=\"respond\",outcome=\"done\"}") >= 2.0, "{after}");
    assert!(total(&after, "kuuki_job_duration_seconds_count{kind=\"respond\"}") >= 2.0, "{after}");
    assert!(total(&after, "kuuki_llm_calls_total{role=\"generate\"}") >= 1.0, "{after}");
    assert!(total(&after, "kuuki_llm_tokens_total{role=\"generate\",direction=\"input\"}") >= 10.0, "{after}");
    assert_eq!(sampled(&after, "kuuki_queue_jobs{state=\"in_delivery\"}").len(), 1, "{after}");
    assert_eq!(sampled(&after, "kuuki_queue_oldest_due_job_age_seconds").len(), 1, "{after}");
    assert_eq!(sampled(&after, "kuuki_platform_reconnects_total{platform=\"slack\"}"), vec![0.0], "{after}");
    assert_eq!(sampled(&after, "kuuki_store_errors_total"), vec![0.0], "{after}");
    assert_nothing_personal(&after);
    let (status, health) = healthz(&base_url).await;
    assert_eq!((status, &health["status"]), (200, &json!("ok")), "{health}");
    assert_eq!(health["slack"]["connected"], true, "{health}");

    // Another connection takes the data file's write lock: kuuki cannot store a mention.
    let blocker = rusqlite::Connection::open(&data).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let refused = common::signed_mention_request("C3", "EvLocked").0;
    let status = common::post_signed(&base_url, "/slack/events", &refused).await.status();
    assert_eq!(status, 500, "not stored: Slack is asked to deliver it again");
    wait_until("/healthz turns unhealthy", async || healthz(&base_url).await.0 == 503).await;
    let (_, health) = healthz(&base_url).await;
    assert_eq!((&health["status"], &health["store"]["failing"]), (&json!("unhealthy"), &json!(true)), "{health}");
    assert!(health["problems"][0].as_str().unwrap().contains("data file"), "{health}");
    let (_, during) = scrape(&base_url).await;
    assert!(total(&during, "kuuki_store_errors_total") >= 1.0, "{during}");
    assert_nothing_personal(&during);

    blocker.execute_batch("ROLLBACK").unwrap();
    wait_until("/healthz is well again", async || healthz(&base_url).await.0 == 200).await;
}
