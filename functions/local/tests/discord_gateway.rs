//! `kuuki serve` on the Discord Gateway as a user runs it: the real binary with only
//! `DISCORD_BOT_TOKEN` (no public key, no relay secret), a fake Gateway over a real
//! websocket (`DISCORD_GATEWAY_URL`) and a fake Discord REST API (wiremock at
//! `DISCORD_API_BASE_URL`) that records what kuuki calls.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use kuuki::adapters::discord::snowflake_at;
use kuuki::domain::Timestamp;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_websockets::{CloseCode, Message as WsMessage, ServerBuilder};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const TOKEN: &str = "test-bot-token";
const BOT: &str = "900000000000000001";
const APP: &str = "900000000000000002";
const ALICE: &str = "80351110224678912";
const GUILD: &str = "41771983423143937";
const CHANNEL: &str = "41771983423143938";
/// Another channel: a mention there supersedes none in CHANNEL (direct triggers that
/// arrive together in one channel are answered once, by the newest).
const OTHER_CHANNEL: &str = "41771983423143939";
/// Long enough for a debug build to start and a worker to answer on a busy machine.
const WAIT: Duration = Duration::from_secs(30);
/// GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT | GUILD_MESSAGE_REACTIONS |
/// DIRECT_MESSAGE_REACTIONS.
const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15) | (1 << 10) | (1 << 13);

// ---- the fake Gateway (as in functions/discord-gateway/tests/relay.rs) ----

enum ToKuuki {
    Send(String),
    /// A close frame with this code (Discord's 4xxx codes).
    Close(u16),
}

/// One websocket connection from kuuki, served by a task that answers heartbeats at
/// once and hands every other payload to the test.
struct Conn {
    uri: String,
    to_kuuki: mpsc::UnboundedSender<ToKuuki>,
    from_kuuki: mpsc::UnboundedReceiver<Value>,
}

impl Conn {
    fn send(&self, payload: &str) {
        self.to_kuuki.send(ToKuuki::Send(payload.to_owned())).expect("the connection task is alive");
    }

    fn close(&self, code: u16) {
        let _ = self.to_kuuki.send(ToKuuki::Close(code));
    }

    fn hello(&self) {
        self.send(r#"{"op":10,"d":{"heartbeat_interval":45000},"s":null,"t":null}"#);
    }

    /// The next payload kuuki sent with opcode `op` (others are skipped); `"close"`
    /// for its close frame.
    async fn expect(&mut self, op: impl Into<Value>) -> Value {
        let op = op.into();
        loop {
            let payload = timeout(WAIT, self.from_kuuki.recv())
                .await
                .unwrap_or_else(|_| panic!("no op {op} from kuuki"))
                .expect("the connection closed");
            if payload["op"] == op {
                return payload;
            }
        }
    }
}

struct FakeGateway {
    listener: TcpListener,
    url: String,
}

impl FakeGateway {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        FakeGateway { listener, url }
    }

    async fn accept(&self) -> Conn {
        let (stream, _) = timeout(WAIT, self.listener.accept()).await.expect("kuuki connects to the gateway").unwrap();
        let (request, mut ws) = ServerBuilder::new().accept(stream).await.unwrap();
        let (to_kuuki, mut commands) = mpsc::unbounded_channel::<ToKuuki>();
        let (sent, from_kuuki) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    command = commands.recv() => match command {
                        Some(ToKuuki::Send(text)) => {
                            if ws.send(WsMessage::text(text)).await.is_err() {
                                break;
                            }
                        }
                        Some(ToKuuki::Close(code)) => {
                            let code = CloseCode::try_from(code).ok();
                            let _ = ws.send(WsMessage::close(code, "closed by the fake gateway")).await;
                        }
                        None => break,
                    },
                    message = ws.next() => match message {
                        Some(Ok(message)) => {
                            // kuuki's close frame, as a pseudo-payload for the test.
                            if let Some((code, _)) = message.as_close() {
                                let _ = sent.send(json!({"op": "close", "code": u16::from(code)}));
                                continue;
                            }
                            let Some(text) = message.as_text() else { continue };
                            let payload: Value = serde_json::from_str(text).unwrap();
                            if payload["op"] == 1 {
                                let _ = ws.send(WsMessage::text(r#"{"op":11,"d":null}"#)).await;
                            }
                            let _ = sent.send(payload);
                        }
                        _ => break,
                    },
                }
            }
        });
        Conn { uri: request.uri().to_string(), to_kuuki, from_kuuki }
    }
}

fn ready(url: &str, session: &str) -> String {
    json!({
        "op": 0, "t": "READY", "s": 1,
        "d": {
            "v": 10,
            "user": {"id": BOT, "username": "kuuki", "discriminator": "0", "bot": true},
            "guilds": [{"id": GUILD, "unavailable": true}],
            "session_id": session,
            "resume_gateway_url": url,
            "application": {"id": APP, "flags": 0},
        }
    })
    .to_string()
}

/// A snowflake for now, plus `n` (distinct ids within a test).
fn snowflake_now(n: u64) -> String {
    let micros = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as i64;
    (snowflake_at(Timestamp(micros)) + n).to_string()
}

/// Alice mentions kuuki in `channel`: a `MESSAGE_CREATE` dispatch with sequence
/// number `s`.
fn mention(channel: &str, id: &str, s: u64) -> String {
    json!({
        "op": 0, "t": "MESSAGE_CREATE", "s": s,
        "d": {
            "id": id, "channel_id": channel, "guild_id": GUILD, "type": 0,
            "content": format!("<@{BOT}> are you there?"),
            "author": {"id": ALICE, "username": "alice", "global_name": "Alice"},
            "member": {"nick": null},
            "mentions": [{"id": BOT, "username": "kuuki", "bot": true}], "mention_roles": [],
            "attachments": [], "embeds": [], "timestamp": "2026-01-05T09:00:00.000000+00:00",
            "tts": false, "mention_everyone": false, "pinned": false,
        }
    })
    .to_string()
}

/// `/kuuki <sub> [options]` run by Alice in the channel, as an `INTERACTION_CREATE`.
fn interaction(id: &str, token: &str, s: u64, sub: Value) -> String {
    json!({
        "op": 0, "t": "INTERACTION_CREATE", "s": s,
        "d": {
            "id": id, "application_id": APP, "type": 2, "token": token, "version": 1,
            "channel_id": CHANNEL, "guild_id": GUILD, "context": 0,
            "member": {"user": {"id": ALICE, "username": "alice"}, "nick": null, "permissions": "0"},
            "data": {"id": "700", "name": "kuuki", "type": 1, "options": [sub]},
        }
    })
    .to_string()
}

// ---- the fake Discord REST API ----

/// kuuki's messages as Discord keeps them: a create-message call gets a new snowflake,
/// and a listing (`?after=`) shows them, as kuuki looks for an earlier attempt's post
/// when it takes up an interrupted answer (after a kill).
#[derive(Clone, Default)]
struct Messages {
    posted: Arc<Mutex<Vec<Value>>>,
    next: Arc<AtomicU64>,
}

/// The channel id in `/channels/{id}/messages`.
fn channel_of(request: &Request) -> String {
    request.url.path().split('/').nth(2).unwrap_or_default().to_owned()
}

struct CreateMessage(Messages);

impl Respond for CreateMessage {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let n = self.0.next.fetch_add(1, Ordering::SeqCst);
        let message = json!({
            "id": snowflake_now(1000 + n), "channel_id": channel_of(request), "content": body["content"],
            "author": {"id": BOT, "username": "kuuki", "bot": true},
            "nonce": body["nonce"], "message_reference": body["message_reference"],
        });
        self.0.posted.lock().unwrap().push(message.clone());
        ResponseTemplate::new(200).set_body_json(message)
    }
}

struct ListMessages(Messages);

impl Respond for ListMessages {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let after = request.url.query_pairs().find(|(k, _)| k == "after").and_then(|(_, v)| v.parse::<u64>().ok());
        let channel = channel_of(request);
        let posted = self.0.posted.lock().unwrap();
        let listed: Vec<&Value> = posted
            .iter()
            .filter(|m| m["channel_id"] == channel.as_str())
            .filter(|m| m["id"].as_str().and_then(|id| id.parse::<u64>().ok()) > after)
            .collect();
        ResponseTemplate::new(200).set_body_json(listed)
    }
}

async fn fake_discord() -> MockServer {
    let api = MockServer::start().await;
    let json_200 = |body: Value| ResponseTemplate::new(200).set_body_json(body);
    let mocks = [
        (method("GET"), path("/users/@me"), json_200(json!({"id": BOT, "username": "kuuki", "bot": true}))),
        (method("GET"), path("/users/@me/guilds"), json_200(json!([{"id": GUILD, "name": "team"}]))),
        (method("GET"), path(format!("/guilds/{GUILD}/roles")), json_200(json!([{"id": GUILD, "name": "@everyone"}]))),
        (method("GET"), path(format!("/users/{ALICE}")), json_200(json!({"id": ALICE, "username": "alice"}))),
    ];
    for (method, path, answer) in mocks {
        Mock::given(method).and(path).respond_with(answer).mount(&api).await;
    }
    Mock::given(method("GET"))
        .and(path_regex(r"^/channels/\d+$"))
        .respond_with(json_200(json!({"id": CHANNEL, "guild_id": GUILD})))
        .mount(&api)
        .await;
    let messages = Messages::default();
    Mock::given(method("GET"))
        .and(path_regex(r"^/channels/\d+/messages$"))
        .respond_with(ListMessages(messages.clone()))
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/channels/\d+/messages$"))
        .respond_with(CreateMessage(messages))
        .mount(&api)
        .await;
    Mock::given(method("PUT"))
        .and(path_regex(r"^/channels/\d+/messages/\d+/reactions/.+/@me$"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/interactions/\d+/[^/]+/callback$"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&api)
        .await;
    Mock::given(method("PATCH"))
        .and(path_regex(r"^/webhooks/\d+/[^/]+/messages/@original$"))
        .respond_with(json_200(json!({"id": snowflake_now(999), "channel_id": CHANNEL, "author": {"id": BOT}})))
        .mount(&api)
        .await;
    api
}

/// The requests to `method path` so far.
async fn calls(api: &MockServer, verb: &str, path: &str) -> Vec<Request> {
    let requests = api.received_requests().await.unwrap_or_default();
    requests.into_iter().filter(|r| r.method.as_str() == verb && r.url.path() == path).collect()
}

/// kuuki's posts, in any channel.
async fn posts(api: &MockServer) -> Vec<Request> {
    let requests = api.received_requests().await.unwrap_or_default();
    let is_post = |r: &Request| r.method.as_str() == "POST" && r.url.path().ends_with("/messages");
    requests.into_iter().filter(|r| is_post(r) && r.url.path().starts_with("/channels/")).collect()
}

/// kuuki's posts that reply to message `id`.
async fn replies_to(api: &MockServer, id: &str) -> usize {
    let posts = posts(api).await;
    let bodies = posts.iter().map(|r| serde_json::from_slice::<Value>(&r.body).unwrap());
    bodies.filter(|b| b["message_reference"]["message_id"] == id).count()
}

/// Polls until `calls` has at least `n` requests to `verb path`; returns them.
async fn until_called(api: &MockServer, verb: &str, path: &str, n: usize) -> Vec<Request> {
    let deadline = Instant::now() + WAIT;
    loop {
        let found = calls(api, verb, path).await;
        if found.len() >= n {
            return found;
        }
        assert!(Instant::now() < deadline, "no {n} calls to {verb} {path} in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until kuuki has replied to message `id`.
async fn until_replied(api: &MockServer, id: &str) {
    let deadline = Instant::now() + WAIT;
    while replies_to(api, id).await == 0 {
        assert!(Instant::now() < deadline, "kuuki did not reply to {id} in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---- the kuuki process ----

struct Kuuki {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// Reads stderr to its end.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Kuuki {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Kuuki {
    /// The address it serves HTTP on, once it says so.
    async fn base_url(&self) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(rest) = self.stderr().split("listening on ").nth(1) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
            assert!(Instant::now() < deadline, "kuuki serve did not start listening:\n{}", self.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the process to end by itself; returns whether it succeeded.
    async fn exited(&mut self) -> bool {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its last words are read too.
                if let Some(reader) = self.reader.take() {
                    reader.join().unwrap();
                }
                return status.success();
            }
            assert!(Instant::now() < deadline, "kuuki serve did not stop:\n{}", self.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `kuuki serve` with Discord only, the gateway at `gateway`, the REST API at `api`;
/// `data` the store's file (`:memory:` when `None`).
fn kuuki(api: &str, gateway: &str, data: Option<&str>, extra_env: &[(&str, &str)]) -> Kuuki {
    let data = data.unwrap_or(":memory:");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kuuki"));
    command.args(["serve", "--listen", "127.0.0.1:0", "--seed", "1", "--data", data]);
    for name in [
        "LLM_PROVIDER",
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "DISCORD_PUBLIC_KEY",
        "DISCORD_RELAY_SECRET",
        "DISCORD_GATEWAY",
    ] {
        command.env_remove(name);
    }
    command
        .env("DISCORD_BOT_TOKEN", TOKEN)
        .env("DISCORD_API_BASE_URL", api)
        .env("DISCORD_GATEWAY_URL", gateway)
        .env("JUDGE_MIN_WAIT_SECONDS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("kuuki starts");
    let stderr = Arc::new(Mutex::new(String::new()));
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let seen = stderr.clone();
    // Drained all along, so kuuki never blocks on a full pipe.
    let reader = std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut seen = seen.lock().unwrap();
            seen.push_str(&line);
            seen.push('\n');
        }
    });
    Kuuki { child, stderr, reader: Some(reader) }
}

/// Accepts kuuki's first connection: HELLO, IDENTIFY, READY.
async fn identified(gateway: &FakeGateway, session: &str) -> (Conn, Value) {
    let mut conn = gateway.accept().await;
    conn.hello();
    let identify = conn.expect(2).await;
    conn.send(&ready(&gateway.url, session));
    (conn, identify)
}

#[tokio::test]
async fn messages_and_commands_over_the_gateway_each_answered_once_across_a_resume() {
    let api = fake_discord().await;
    let gateway = FakeGateway::start().await;
    let served = kuuki(&api.uri(), &gateway.url, None, &[]);

    // IDENTIFY carries the token and the intents.
    let (first, identify) = identified(&gateway, "session-1").await;
    assert!(first.uri.contains("v=10") && first.uri.contains("encoding=json"), "{}", first.uri);
    assert_eq!(identify["d"]["token"], format!("Bot {TOKEN}"));
    assert_eq!(identify["d"]["intents"], INTENTS);

    // Started without DISCORD_PUBLIC_KEY and DISCORD_RELAY_SECRET; interactions over
    // HTTP are not served then.
    let base_url = served.base_url().await;
    let http = reqwest::Client::new();
    let refused = http.post(format!("{base_url}/discord/interactions")).body("{}").send().await.unwrap();
    assert_eq!(refused.status(), 404);
    assert!(refused.text().await.unwrap().contains("DISCORD_PUBLIC_KEY"));
    // Nor relayed events: nothing relays to a process that holds the Gateway itself.
    let relayed = http.post(format!("{base_url}/discord/events")).body("{}").send().await.unwrap();
    assert_eq!(relayed.status(), 404, "no relay secret and the Gateway in process: not served");
    assert!(relayed.text().await.unwrap().contains("DISCORD_RELAY_SECRET"));
    assert!(served.stderr().contains("over the Gateway"), "{}", served.stderr());

    // A mention is answered once, as a reply, through the REST API.
    let m1 = snowflake_now(1);
    first.send(&mention(CHANNEL, &m1, 2));
    until_replied(&api, &m1).await;
    let posted = posts(&api).await;
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].url.path(), format!("/channels/{CHANNEL}/messages"));
    assert_eq!(posted[0].headers.get("authorization").unwrap(), &format!("Bot {TOKEN}"));

    // Discord drops the connection with 4000: kuuki resumes the session where it was.
    first.close(4000);
    let mut second = gateway.accept().await;
    second.hello();
    let resume = second.expect(6).await;
    assert_eq!(resume["d"]["session_id"], "session-1");
    assert_eq!(resume["d"]["seq"], 2);
    assert_eq!(resume["d"]["token"], format!("Bot {TOKEN}"));
    // Discord replays what kuuki may have missed: the same mention again, then a new one.
    second.send(&mention(CHANNEL, &m1, 2));
    second.send(r#"{"op":0,"t":"RESUMED","s":3,"d":{}}"#);
    let m2 = snowflake_now(2);
    second.send(&mention(OTHER_CHANNEL, &m2, 4));
    until_replied(&api, &m2).await;
    assert_eq!(replies_to(&api, &m1).await, 1, "the replayed mention is a duplicate: no second reply");
    assert_eq!(posts(&api).await.len(), 2);

    // `/kuuki status` over the Gateway: answered through the interaction's callback,
    // ephemeral, without the bot token (the interaction's own token is in the path).
    let status = snowflake_now(3);
    second.send(&interaction(&status, "status-token", 5, json!({"name": "status", "type": 1})));
    let callback = format!("/interactions/{status}/status-token/callback");
    let answered = until_called(&api, "POST", &callback, 1).await;
    let answer: Value = serde_json::from_slice(&answered[0].body).unwrap();
    assert_eq!(answer["type"], 4, "{answer}");
    assert_eq!(answer["data"]["flags"], 64, "{answer}");
    assert!(!answer["data"]["content"].as_str().unwrap_or_default().is_empty(), "{answer}");
    assert!(answered[0].headers.get("authorization").is_none());

    // `/kuuki ask` is deferred (type 5), then completed through the interaction's webhook.
    let ask = snowflake_now(4);
    let question = json!({"name": "ask", "type": 1, "options": [{"name": "question", "type": 3, "value": "lunch?"}]});
    second.send(&interaction(&ask, "ask-token", 6, question));
    let (callback, original) =
        (format!("/interactions/{ask}/ask-token/callback"), format!("/webhooks/{APP}/ask-token/messages/@original"));
    let completed = until_called(&api, "PATCH", &original, 1).await;
    let completion: Value = serde_json::from_slice(&completed[0].body).unwrap();
    assert!(completion["content"].as_str().unwrap_or_default().contains("lunch?"), "{completion}");
    let requests = api.received_requests().await.unwrap();
    let at = |verb: &str, path: &str| requests.iter().position(|r| r.method.as_str() == verb && r.url.path() == path);
    let deferred = &requests[at("POST", &callback).expect("the ask was acknowledged")];
    assert_eq!(serde_json::from_slice::<Value>(&deferred.body).unwrap()["type"], 5);
    assert!(at("POST", &callback) < at("PATCH", &original), "\"thinking…\" reaches Discord before the answer edits it");
    assert_eq!(calls(&api, "POST", &callback).await.len(), 1);
}

#[tokio::test]
async fn a_fatal_close_stops_kuuki_serve_naming_what_to_fix() {
    let api = fake_discord().await;
    for (code, names) in [(4004, "DISCORD_BOT_TOKEN"), (4014, "Message Content Intent")] {
        let gateway = FakeGateway::start().await;
        let mut served = kuuki(&api.uri(), &gateway.url, None, &[]);
        let mut conn = gateway.accept().await;
        conn.hello();
        conn.expect(2).await;
        conn.close(code);
        assert!(!served.exited().await, "a fatal close is a failure");
        let stderr = served.stderr();
        assert!(stderr.contains(names) && stderr.contains(&code.to_string()), "{stderr}");
    }
}

#[tokio::test]
async fn with_the_gateway_off_the_http_routes_need_their_secrets() {
    let api = fake_discord().await;
    let gateway = FakeGateway::start().await;
    let mut served = kuuki(&api.uri(), &gateway.url, None, &[("DISCORD_GATEWAY", "false")]);
    assert!(!served.exited().await, "without the public key, interactions could not be verified");
    assert!(served.stderr().contains("DISCORD_PUBLIC_KEY"), "{}", served.stderr());

    // RFC 8032's first test key.
    let key = ("DISCORD_PUBLIC_KEY", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
    let served = kuuki(&api.uri(), &gateway.url, None, &[("DISCORD_GATEWAY", "false"), key]);
    let base_url = served.base_url().await;
    let stderr = served.stderr();
    assert!(stderr.contains("POST /discord/interactions") && stderr.contains("POST /discord/events"), "{stderr}");
    // The Gateway line comes before the listening line, when there is one.
    assert!(!stderr.contains("over the Gateway"), "{stderr}");
    let unsigned = reqwest::Client::new().post(format!("{base_url}/discord/interactions")).body("{}").send().await;
    assert_eq!(unsigned.unwrap().status(), 401, "served, and verified");
}

/// A process on a data file that answered a mention (sequence 2 of "session-1") and
/// was then killed, with no stop and no goodbye: the folder, the file, the fake REST
/// API and Gateway, and the mention's id.
async fn answered_then_killed() -> (tempfile::TempDir, String, MockServer, FakeGateway, String) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("kuuki.db").to_str().unwrap().to_owned();
    let api = fake_discord().await;
    let gateway = FakeGateway::start().await;
    let m1 = snowflake_now(1);
    {
        let _served = kuuki(&api.uri(), &gateway.url, Some(&data), &[]);
        let (conn, _) = identified(&gateway, "session-1").await;
        conn.send(&mention(CHANNEL, &m1, 2));
        until_replied(&api, &m1).await;
    }
    (dir, data, api, gateway, m1)
}

#[tokio::test]
async fn a_dispatch_delivered_again_after_a_restart_gets_no_second_reply() {
    let (_dir, data, api, gateway, m1) = answered_then_killed().await;
    let data = data.as_str();
    let served = kuuki(&api.uri(), &gateway.url, Some(data), &[]);
    // The new process takes the session up from the last dispatch it stored.
    let mut conn = gateway.accept().await;
    conn.hello();
    let resume = conn.expect(6).await;
    assert_eq!(resume["d"]["session_id"], "session-1", "{resume}\n{}", served.stderr());
    assert_eq!(resume["d"]["seq"], 2, "from the last dispatch stored: {resume}");
    conn.send(r#"{"op":0,"t":"RESUMED","s":3,"d":{}}"#);
    // Discord replays (at least once): the stored message again, and one written while
    // no kuuki ran.
    conn.send(&mention(CHANNEL, &m1, 2));
    let m2 = snowflake_now(2);
    conn.send(&mention(OTHER_CHANNEL, &m2, 4));
    until_replied(&api, &m2).await;
    let replies = replies_to(&api, &m1).await;
    assert_eq!(replies, 1, "the message was kept: its second delivery is a duplicate\n{}", served.stderr());
}

#[tokio::test]
async fn a_session_discord_no_longer_has_is_identified_anew() {
    let (_dir, data, api, gateway, _) = answered_then_killed().await;
    let data = data.as_str();
    let served = kuuki(&api.uri(), &gateway.url, Some(data), &[]);
    let mut conn = gateway.accept().await;
    conn.hello();
    conn.expect(6).await;
    // INVALID_SESSION, not resumable: the shard closes and identifies anew.
    conn.send(r#"{"op":9,"d":false,"s":null,"t":null}"#);
    let mut conn = gateway.accept().await;
    conn.hello();
    let identify = conn.expect(2).await;
    assert_eq!(identify["op"], 2, "{}", served.stderr());
    conn.send(&ready(&gateway.url, "session-2"));
    let m2 = snowflake_now(2);
    conn.send(&mention(OTHER_CHANNEL, &m2, 2));
    until_replied(&api, &m2).await;
}

#[tokio::test]
async fn a_stop_signal_closes_keeping_the_session_and_exits_cleanly() {
    let api = fake_discord().await;
    let gateway = FakeGateway::start().await;
    let mut served = kuuki(&api.uri(), &gateway.url, None, &[]);
    let (mut conn, _) = identified(&gateway, "session-1").await;
    served.base_url().await;
    let pid = served.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let close = conn.expect("close").await;
    assert_eq!(close["code"], 4000, "a close that keeps the session for the next start to resume");
    assert!(served.exited().await, "a stop is not a failure:\n{}", served.stderr());
}

/// A reaction on kuuki's post, dispatched over the Gateway `kuuki serve` holds itself,
/// is a talkativeness signal (issue 35): 👎 moves the channel's offset by its weight,
/// once, though Discord delivers the dispatch again; `/kuuki talkativeness` shows it.
#[tokio::test]
async fn a_reaction_on_kuukis_post_over_the_gateway_counts_once() {
    let api = fake_discord().await;
    let gateway = FakeGateway::start().await;
    let _served = kuuki(&api.uri(), &gateway.url, None, &[]);
    let (conn, _) = identified(&gateway, "session-reactions").await;
    let asked = snowflake_now(1);
    conn.send(&mention(CHANNEL, &asked, 2));
    until_replied(&api, &asked).await;
    // kuuki's post as Discord lists it (the fake gives it an id when it is created).
    let listed: Vec<Value> =
        reqwest::get(format!("{}/channels/{CHANNEL}/messages?after=0", api.uri())).await.unwrap().json().await.unwrap();
    let post = listed[0]["id"].as_str().expect("kuuki's post has an id").to_owned();
    let thumbs_down = |s: u64| {
        json!({
            "op": 0, "t": "MESSAGE_REACTION_ADD", "s": s,
            "d": {"user_id": ALICE, "channel_id": CHANNEL, "message_id": post, "guild_id": GUILD,
                  "emoji": {"id": null, "name": "👎"}, "type": 0, "burst": false},
        })
        .to_string()
    };
    // What `/kuuki talkativeness` says now (each asked as an interaction of its own).
    let asks = AtomicU64::new(10);
    let talkativeness = async || {
        let n = asks.fetch_add(1, Ordering::SeqCst);
        let id = snowflake_now(n);
        conn.send(&interaction(&id, "talk-token", n, json!({"name": "talkativeness", "type": 1})));
        let answered = until_called(&api, "POST", &format!("/interactions/{id}/talk-token/callback"), 1).await;
        let answer: Value = serde_json::from_slice(&answered[0].body).unwrap();
        answer["data"]["content"].as_str().unwrap_or_default().to_owned()
    };
    assert!(talkativeness().await.starts_with("Talkativeness here: +0"), "no signal yet");
    conn.send(&thumbs_down(3));
    let deadline = Instant::now() + WAIT;
    let mut shown = talkativeness().await;
    while !shown.starts_with("Talkativeness here: -6") {
        assert!(Instant::now() < deadline, "the reaction never counted: {shown}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        shown = talkativeness().await;
    }
    // Discord delivers it again; a mention after it, answered, shows it was taken in
    // (dispatches are ingested in order).
    conn.send(&thumbs_down(3));
    let later = snowflake_now(2);
    conn.send(&mention(OTHER_CHANNEL, &later, 4));
    until_replied(&api, &later).await;
    let again = talkativeness().await;
    assert!(again.starts_with("Talkativeness here: -6"), "a redelivered reaction counts once: {again}");
}
