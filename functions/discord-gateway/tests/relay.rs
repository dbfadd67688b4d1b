//! The relay against a local fake Discord Gateway (a websocket server speaking the
//! gateway's JSON) and a fake ingress (wiremock): HELLO, IDENTIFY with the token and
//! intents, READY, heartbeats, message dispatches forwarded unchanged and signed, other
//! dispatches not, a dropped connection resumed; and the forwarder's retries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use kuuki::adapters::slack::signature::SigningSecret;
use kuuki::domain::Timestamp;
use kuuki_discord_gateway::{
    Forwarder, GatewayError, Outcome, RETRY_HEADER, RetryPolicy, SIGNATURE_HEADER, Settings, Stats, TIMESTAMP_HEADER,
    health_router, intents, run, unix_seconds,
};
use kuuki_ingress::RELAY;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;
use tokio_websockets::{CloseCode, Message as WsMessage, ServerBuilder};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const SECRET: &str = "relay-secret-for-tests";
const TOKEN: &str = "test-bot-token";
const WAIT: Duration = Duration::from_secs(10);

enum Command {
    Send(String),
    /// A close frame with this code (Discord's 4xxx codes).
    Close(u16),
    /// The TCP connection closed without a close frame.
    Drop,
}

/// One websocket connection to the fake gateway, served by a task that answers
/// heartbeats at once (so a test that waits elsewhere never looks like a zombie).
struct Conn {
    uri: String,
    to_client: mpsc::UnboundedSender<Command>,
    from_client: mpsc::UnboundedReceiver<Value>,
}

impl Conn {
    fn send(&self, payload: &str) {
        self.to_client.send(Command::Send(payload.to_owned())).expect("connection task alive");
    }

    /// Closes the TCP connection without a close frame, as a network drop does.
    fn drop_connection(&self) {
        let _ = self.to_client.send(Command::Drop);
    }

    fn close(&self, code: u16) {
        let _ = self.to_client.send(Command::Close(code));
    }

    /// The next payload the relay sent with opcode `op` (others are skipped).
    async fn expect(&mut self, op: u64) -> Value {
        loop {
            let payload = timeout(WAIT, self.from_client.recv())
                .await
                .unwrap_or_else(|_| panic!("no op {op} from the relay"))
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
        let (stream, _) = timeout(WAIT, self.listener.accept()).await.expect("the relay connects").unwrap();
        let (request, mut ws) = ServerBuilder::new().accept(stream).await.unwrap();
        let (to_client, mut commands) = mpsc::unbounded_channel::<Command>();
        let (sent, from_client) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    command = commands.recv() => match command {
                        Some(Command::Send(text)) => {
                            if ws.send(WsMessage::text(text)).await.is_err() {
                                break;
                            }
                        }
                        Some(Command::Close(code)) => {
                            let code = CloseCode::try_from(code).ok();
                            let _ = ws.send(WsMessage::close(code, "closed by the fake gateway")).await;
                        }
                        Some(Command::Drop) | None => break,
                    },
                    message = ws.next() => match message {
                        Some(Ok(message)) => {
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
        Conn { uri: request.uri().to_string(), to_client, from_client }
    }
}

fn settings(gateway_url: &str, ingress_url: &str) -> Settings {
    let env: HashMap<String, String> = [
        ("DISCORD_BOT_TOKEN", TOKEN),
        ("DISCORD_RELAY_SECRET", SECRET),
        ("KUUKI_INGRESS_URL", ingress_url),
        ("DISCORD_GATEWAY_URL", gateway_url),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut settings = Settings::from_map(&env).unwrap();
    settings.retry = fast_retry();
    settings
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        give_up_after: Duration::from_secs(5),
    }
}

async fn ingress_answering(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/discord/events"))
        .respond_with(ResponseTemplate::new(status))
        .mount(&server)
        .await;
    server
}

async fn received(ingress: &MockServer, n: usize) -> Vec<Request> {
    let waited = timeout(WAIT, async {
        loop {
            let requests = ingress.received_requests().await.unwrap_or_default();
            if requests.len() >= n {
                return requests;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("ingress did not receive {n} requests"))
}

async fn eventually(condition: impl Fn() -> bool) {
    timeout(WAIT, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the condition held in time");
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

/// Checks the request the way ingress does: RELAY's headers, the secret, ±300 s.
fn assert_signed(request: &Request) {
    assert_eq!((RELAY.timestamp_header, RELAY.signature_header), (TIMESTAMP_HEADER, SIGNATURE_HEADER));
    let now = Timestamp(unix_seconds() as i64 * Timestamp::MICROS_PER_SECOND);
    let verified = SigningSecret::new(SECRET).verify_scheme(
        &RELAY,
        header(request, RELAY.timestamp_header),
        header(request, RELAY.signature_header),
        &request.body,
        now,
    );
    assert_eq!(verified, Ok(()));
}

fn ready(url: &str, session: &str) -> String {
    json!({
        "op": 0, "t": "READY", "s": 1,
        "d": {
            "v": 10,
            "user": {"id": "900", "username": "kuuki", "discriminator": "0", "bot": true},
            "guilds": [],
            "session_id": session,
            "resume_gateway_url": url,
            "application": {"id": "901", "flags": 0},
        }
    })
    .to_string()
}

/// Deliberately not as serde_json would write it: fields out of order, spaces, an
/// escaped character and raw UTF-8, so "unchanged" means byte for byte.
const MESSAGE_CREATE: &str = r#"{"t":"MESSAGE_CREATE", "s":3, "op":0, "d":{"id":"1180000000000000003","channel_id":"1100","guild_id":"1000","author":{"id":"42","username":"aki"},"content":"空気を読んで \u00e9 <@900>","timestamp":"2023-11-26T00:00:00.000000+00:00","mentions":[],"type":0}}"#;
const MESSAGE_DELETE: &str =
    r#"{"op":0,"t":"MESSAGE_DELETE","s":5,"d":{"id":"1180000000000000003","channel_id":"1100","guild_id":"1000"}}"#;

#[tokio::test]
async fn message_dispatches_are_forwarded_unchanged_and_a_dropped_connection_is_resumed() {
    let gateway = FakeGateway::start().await;
    let ingress = ingress_answering(200).await;
    let settings = settings(&gateway.url, &ingress.uri());
    let stats = Arc::new(Stats::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let relay = tokio::spawn({
        let stats = stats.clone();
        async move {
            run(&settings, stats, async {
                let _ = stopped.await;
            })
            .await
        }
    });

    // HELLO -> IDENTIFY with the token and the intents -> READY.
    let mut first = gateway.accept().await;
    assert!(first.uri.contains("v=10") && first.uri.contains("encoding=json"), "{}", first.uri);
    first.send(r#"{"op":10,"d":{"heartbeat_interval":300},"s":null,"t":null}"#);
    let identify = first.expect(2).await;
    assert_eq!(identify["d"]["token"], format!("Bot {TOKEN}"));
    assert_eq!(identify["d"]["intents"], intents().bits());
    assert_eq!(
        identify["d"]["intents"],
        512 | 4096 | 32768 | 1024 | 8192,
        "GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT | GUILD_MESSAGE_REACTIONS | DIRECT_MESSAGE_REACTIONS"
    );
    first.send(&ready(&gateway.url, "session-1"));

    // A dispatch that is not a message, then a message.
    first.send(r#"{"op":0,"t":"TYPING_START","s":2,"d":{"channel_id":"1100","user_id":"42","timestamp":1700000000}}"#);
    first.send(MESSAGE_CREATE);
    let requests = received(&ingress, 1).await;
    assert_eq!(requests.len(), 1, "TYPING_START is not forwarded");
    let request = &requests[0];
    assert_eq!(request.url.path(), "/discord/events");
    assert_eq!(std::str::from_utf8(&request.body).unwrap(), MESSAGE_CREATE, "the body is the gateway's, unchanged");
    assert_eq!(header(request, "content-type"), Some("application/json"));
    assert_eq!(header(request, RETRY_HEADER), None);
    assert_signed(request);

    // Heartbeats carry the last sequence number.
    loop {
        let heartbeat = first.expect(1).await;
        if heartbeat["d"] == 3 {
            break;
        }
    }
    assert!(stats.connection.connected());

    // The connection drops: the relay comes back and RESUMEs the session.
    first.drop_connection();
    let mut second = gateway.accept().await;
    second.send(r#"{"op":10,"d":{"heartbeat_interval":300}}"#);
    let resume = second.expect(6).await;
    assert_eq!(resume["d"]["session_id"], "session-1");
    assert_eq!(resume["d"]["seq"], 3);
    assert_eq!(resume["d"]["token"], format!("Bot {TOKEN}"));
    second.send(r#"{"op":0,"t":"RESUMED","s":4,"d":{}}"#);
    second.send(MESSAGE_DELETE);
    let requests = received(&ingress, 2).await;
    assert_eq!(std::str::from_utf8(&requests[1].body).unwrap(), MESSAGE_DELETE);
    assert_signed(&requests[1]);
    // Ingress has the request; the relay counts it once it has the answer.
    eventually(|| stats.forwarded() == 2).await;
    assert_eq!((stats.connection.reconnects(), stats.resumes(), stats.forwarded(), stats.failed()), (1, 1, 2, 0));

    // /healthz tells the same.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let health_url = format!("http://{}/healthz", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, health_router(stats, Duration::from_secs(300))).await });
    let response = reqwest::get(&health_url).await.unwrap();
    assert_eq!(response.status(), 200);
    let health: Value = response.json().await.unwrap();
    assert_eq!(
        (&health["connected"], &health["reconnects"], &health["resumes"], &health["forwarded"]),
        (&json!(true), &json!(1), &json!(1), &json!(2))
    );

    stop.send(()).unwrap();
    let result = timeout(WAIT, relay).await.expect("the relay stops").unwrap();
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn a_fatal_close_stops_the_relay_with_the_close_code() {
    let gateway = FakeGateway::start().await;
    let ingress = ingress_answering(200).await;
    let settings = settings(&gateway.url, &ingress.uri());
    let relay = tokio::spawn(async move { run(&settings, Arc::new(Stats::default()), std::future::pending()).await });
    let mut conn = gateway.accept().await;
    conn.send(r#"{"op":10,"d":{"heartbeat_interval":45000}}"#);
    conn.expect(2).await;
    conn.close(4004); // Authentication failed: reconnecting cannot help.
    let result = timeout(WAIT, relay).await.expect("the relay stops").unwrap();
    assert!(matches!(result, Err(GatewayError::FatallyClosed(Some(4004)))), "{result:?}");
    assert!(result.unwrap_err().to_string().contains("DISCORD_BOT_TOKEN"));
}

#[tokio::test]
async fn a_5xx_is_retried_with_the_retry_header() {
    let ingress = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/discord/events"))
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(2)
        .mount(&ingress)
        .await;
    Mock::given(method("POST"))
        .and(path("/discord/events"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&ingress)
        .await;
    let forwarder = Forwarder::new(&ingress.uri(), SigningSecret::new(SECRET), fast_retry());
    assert_eq!(forwarder.forward(MESSAGE_CREATE).await, Outcome::Delivered { attempts: 3 });
    let requests = ingress.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3);
    assert_eq!(header(&requests[0], RETRY_HEADER), None);
    for request in &requests[1..] {
        assert_eq!(header(request, RETRY_HEADER), Some("1"));
    }
    for request in &requests {
        assert_eq!(request.body, MESSAGE_CREATE.as_bytes());
        assert_signed(request);
    }
}

#[tokio::test]
async fn a_4xx_is_dropped_without_a_retry() {
    for status in [400, 401] {
        let ingress = ingress_answering(status).await;
        let forwarder = Forwarder::new(&ingress.uri(), SigningSecret::new(SECRET), fast_retry());
        assert_eq!(forwarder.forward(MESSAGE_CREATE).await, Outcome::Refused { status });
        assert_eq!(ingress.received_requests().await.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn an_unreachable_ingress_is_retried_with_back_off_then_given_up() {
    // A port nothing listens on: bind one, then free it.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let retry = RetryPolicy { give_up_after: Duration::from_millis(300), ..fast_retry() };
    let forwarder = Forwarder::new(&format!("http://127.0.0.1:{port}"), SigningSecret::new(SECRET), retry);
    let started = std::time::Instant::now();
    let Outcome::GaveUp { attempts } = forwarder.forward(MESSAGE_CREATE).await else { panic!("delivered?") };
    // 20, 40, 80, 100 ms (+ up to a quarter): the delays double up to the cap.
    assert!((3..=6).contains(&attempts), "{attempts} attempts");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn ingress_headers_match_the_relay_scheme() {
    assert_eq!(RELAY.timestamp_header, TIMESTAMP_HEADER);
    assert_eq!(RELAY.signature_header, SIGNATURE_HEADER);
    assert_eq!(RELAY.secret_setting, "DISCORD_RELAY_SECRET");
}

/// The whole contract, with no fake on the ingress side: the relay's POST reaches
/// kuuki's own ingress router (the one the Lambda and `kuuki serve` run), which
/// verifies the signature and stores the message.
#[tokio::test]
async fn kuuki_ingress_verifies_and_stores_what_the_relay_forwards() {
    use kuuki::adapters::discord::{DiscordIdentity, DiscordPublicKey, snowflake_at};
    use kuuki::adapters::memory::{InProcess, MemoryLog, VirtualClock};
    use kuuki::adapters::platforms::PlatformChat;
    use kuuki::deps::Deps;
    use kuuki::domain::{ChannelId, Ts, UserId};
    use kuuki::ports::MessageStore;
    use kuuki_ingress::{DiscordIngress, Ingress, app};

    const BOT: &str = "900000000000000001";
    const CHANNEL: &str = "41771983423143938";
    // The relay signs with the wall clock, so ingress's clock reads it too.
    let now = Timestamp(unix_seconds() as i64 * Timestamp::MICROS_PER_SECOND);
    let kuuki_settings = kuuki::config::Settings::from_vars(&Default::default()).unwrap();
    let parts = InProcess::new(Arc::new(VirtualClock::new(now)));
    let store = parts.store.clone();
    let chat = Arc::new(PlatformChat { slack: None, discord: None });
    let persona = kuuki_settings.persona(None);
    let adapters = parts.adapters(chat, None, Arc::new(MemoryLog::default()));
    let deps = Arc::new(Deps::new(kuuki_settings, persona, UserId(BOT.into()), adapters, 7));
    // RFC 8032's first test key: any valid key will do, no interaction is sent.
    let public_key =
        DiscordPublicKey::from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a").unwrap();
    let ingress = Arc::new(Ingress {
        deps,
        slack: None,
        discord: Some(DiscordIngress {
            public_key: Some(public_key),
            relay_secret: Some(SigningSecret::new(SECRET)),
            identity: DiscordIdentity { user_id: BOT.into(), managed_roles: vec![] },
        }),
        metrics_for: None,
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ingress_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app(ingress)).await });

    let gateway = FakeGateway::start().await;
    let settings = settings(&gateway.url, &ingress_url);
    let stats = Arc::new(Stats::default());
    let relay = tokio::spawn({
        let stats = stats.clone();
        async move { run(&settings, stats, std::future::pending()).await }
    });
    let mut conn = gateway.accept().await;
    conn.send(r#"{"op":10,"d":{"heartbeat_interval":45000}}"#);
    conn.expect(2).await;
    conn.send(&ready(&gateway.url, "session-1"));
    let id = snowflake_at(now).to_string();
    let create = json!({
        "op": 0, "t": "MESSAGE_CREATE", "s": 2,
        "d": {
            "id": id, "channel_id": CHANNEL, "guild_id": "41771983423143937", "type": 0,
            "content": "deploy at 5, anyone?",
            "author": {"id": "80351110224678912", "username": "alice", "global_name": "Alice"},
            "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
            "timestamp": "2026-01-05T09:00:00.000000+00:00", "tts": false, "mention_everyone": false, "pinned": false,
        }
    });
    conn.send(&create.to_string());
    let stored = timeout(WAIT, async {
        loop {
            if let Some(message) = store.get_message(&ChannelId(CHANNEL.into()), &Ts::new(&id)).await.unwrap() {
                return message;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("ingress stored the relayed message");
    assert_eq!(stored.text, "deploy at 5, anyone?");
    eventually(|| stats.forwarded() == 1).await;
    assert_eq!(stats.failed(), 0);
    relay.abort();
}
