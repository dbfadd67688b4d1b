//! `kuuki serve` as a user runs it: the real binary on the real clock, signed requests
//! in over HTTP, the Slack Web API (a local fake) called out.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn serve_answers_a_signed_mention_through_the_slack_api() {
    let slack = fake_slack().await;
    let served = serve(&slack.uri(), &[]).expect("kuuki serve starts");
    let http = reqwest::Client::new();
    assert_eq!(http.get(format!("{}/healthz", served.base_url)).send().await.unwrap().status(), 200);

    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let ts = format!("{now}.000100");
    let body = json!({
        "type": "event_callback", "team_id": "T1", "event_id": "Ev1", "event_time": now,
        "event": {"type": "app_mention", "channel": "C1", "user": "UALICE", "text": "<@UKUUKI> hello", "ts": ts},
    })
    .to_string();
    let response = post_signed(&served.base_url, "/slack/events", &body).await;
    assert_eq!(response.status(), 200);

    let deadline = Instant::now() + Duration::from_secs(10);
    while posts(&slack).await.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let posted = posts(&slack).await;
    assert_eq!(posted.len(), 1, "answered once, by the in-process workers");
    assert_eq!(posted[0]["channel"], "C1");
    let auth = slack.received_requests().await.unwrap();
    assert_eq!(auth[0].url.path(), "/auth.test", "kuuki learns who it is at start-up");
    assert_eq!(auth[0].headers.get("authorization").unwrap(), "Bearer xoxb-serve-test");

    // Unsigned requests are refused by the real server too.
    let refused = http.post(format!("{}/slack/events", served.base_url)).body("{}").send().await.unwrap();
    assert_eq!(refused.status(), 401);
}

#[tokio::test]
async fn serve_refuses_to_start_without_what_it_needs() {
    let slack = fake_slack().await;
    let err = serve(&slack.uri(), &[("SLACK_SIGNING_SECRET", "")]).err().expect("no secret, no server");
    assert!(err.contains("SLACK_SIGNING_SECRET is not set"), "{err}");

    let refusing = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/auth.test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "invalid_auth"})))
        .mount(&refusing)
        .await;
    let err = serve(&refusing.uri(), &[]).err().expect("a bad token stops start-up");
    assert!(err.contains("invalid_auth") && err.contains("SLACK_BOT_TOKEN"), "{err}");
}

/// The emulators' environment is there: the tests that need it are `#[ignore]`d, and
/// run asked for without it, they fail.
fn emulators(test: &str) {
    let present =
        std::env::var_os("KUUKI_DYNAMODB_ENDPOINT").is_some() && std::env::var_os("KUUKI_MOTO_ENDPOINT").is_some();
    assert!(present, "{test}: no local AWS emulators (./scripts/test starts them)");
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn setup_aws_then_serve_aws_answers_through_dynamodb_and_sqs() {
    emulators("setup_aws_then_serve_aws_answers_through_dynamodb_and_sqs");
    let suffix = std::process::id();
    let tables = [
        format!("MESSAGES_TABLE=serve-messages-{suffix}"),
        format!("CHANNELS_TABLE=serve-channels-{suffix}"),
        format!("LEDGER_TABLE=serve-ledger-{suffix}"),
        format!("FACTS_TABLE=serve-facts-{suffix}"),
    ];
    let mut args = vec!["setup-aws".to_owned(), "--prefix".into(), format!("serve-{suffix}")];
    for t in &tables {
        args.extend(["--set".to_owned(), t.clone()]);
    }
    let setup = Command::new(env!("CARGO_BIN_EXE_kuuki")).args(&args).output().unwrap();
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));
    let exports: Vec<(String, String)> = String::from_utf8(setup.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let names: Vec<&str> = exports.iter().map(|(name, _)| name.as_str()).collect();
    let expected: Vec<String> = ["URL", "ARN"]
        .iter()
        .flat_map(|what| {
            ["JUDGE", "RESPOND", "SUMMARIZE", "REFLECT", "FORGET"].map(|queue| format!("{queue}_QUEUE_{what}"))
        })
        .collect();
    assert_eq!(names, expected, "{exports:?}");
    // Running it again changes nothing and succeeds.
    assert!(Command::new(env!("CARGO_BIN_EXE_kuuki")).args(&args).output().unwrap().status.success());

    let slack = fake_slack().await;
    let mut env: Vec<(&str, &str)> = exports.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let table_env: Vec<(String, String)> =
        tables.iter().map(|t| t.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())).unwrap()).collect();
    env.extend(table_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let served = serve_with(&slack.uri(), &env, &["--aws"]).expect("kuuki serve --aws starts");
    assert_eq!(signed_mention(&served.base_url, "C9").await, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while posts(&slack).await.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let posted = posts(&slack).await;
    assert_eq!(posted.len(), 1, "answered through SQS by the in-process pollers");
    assert_eq!(posted[0]["channel"], "C9");
}

fn address(served: &Served) -> String {
    served.base_url.trim_start_matches("http://").to_owned()
}

/// Waits (at most 10 s) until something is posted in `channel`; what was posted there.
async fn wait_for_posts_in(slack: &MockServer, channel: &str) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let posted: Vec<_> = posts(slack).await.into_iter().filter(|p| p["channel"] == channel).collect();
        if !posted.is_empty() || Instant::now() >= deadline {
            return posted;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the server closed this connection: reads (whatever it sends) until end of
/// stream or an error, giving up after 10 s.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut sink = [0u8; 1024];
    let reading = async {
        loop {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), reading).await.is_ok()
}

/// A slowloris: sends request headers one byte every 300 ms and never finishes them.
/// Resolves to whether the server closed the connection (within 60 bytes, 18 s).
fn slowloris(mut stream: TcpStream) -> tokio::task::JoinHandle<bool> {
    tokio::spawn(async move {
        let headers =
            b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".iter().chain(std::iter::repeat(&b'a'));
        let mut sink = [0u8; 1024];
        for &byte in headers.take(60) {
            if stream.write_all(&[byte]).await.is_err() {
                return true;
            }
            if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut sink)).await {
                return true;
            }
        }
        false
    })
}

#[tokio::test]
async fn at_the_connection_cap_the_oldest_idle_connections_make_room_for_a_signed_request() {
    let slack = fake_slack().await;
    // A header timeout far beyond the client's 10 s: only eviction can admit the request.
    let flags = ["--header-timeout-secs", "60", "--max-connections", "64"];
    let mut served = serve_with(&slack.uri(), &[], &flags).expect("kuuki serve starts");
    let address = address(&served);
    let slow = slowloris(TcpStream::connect(&address).await.unwrap());
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(TcpStream::connect(&address).await.unwrap());
    }

    assert_eq!(signed_mention(&served.base_url, "C1").await, 200);
    assert_eq!(wait_for_posts_in(&slack, "C1").await.len(), 1, "the request was handled");

    // 102 connections for 64 places: the 38 oldest not inside a request were closed.
    assert!(slow.await.unwrap(), "the slowloris, the oldest, was closed");
    for (i, stream) in idle.iter_mut().take(37).enumerate() {
        assert!(closed_by_server(stream).await, "idle connection {i} was closed");
    }
    // The 63 idle connections left do not hold up Ctrl-C.
    assert!(interrupt_exits_cleanly(&mut served), "kuuki stops on Ctrl-C");
}

#[tokio::test]
async fn idle_and_slow_connections_are_closed_after_the_header_timeout() {
    let slack = fake_slack().await;
    let flags = ["--header-timeout-secs", "1", "--max-connections", "64"];
    let served = serve_with(&slack.uri(), &[], &flags).expect("kuuki serve starts");
    let address = address(&served);
    let mut silent = TcpStream::connect(&address).await.unwrap();
    let slow = slowloris(TcpStream::connect(&address).await.unwrap());
    let mut kept_alive = TcpStream::connect(&address).await.unwrap();
    kept_alive.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    // Its body is a JSON object.
    while !answer.ends_with(b"}") && answer.len() < 4096 {
        let mut chunk = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), kept_alive.read(&mut chunk)).await.unwrap().unwrap();
        assert!(n > 0, "healthz answered before closing: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));

    assert_eq!(signed_mention(&served.base_url, "C1").await, 200);
    assert_eq!(wait_for_posts_in(&slack, "C1").await.len(), 1, "the request was handled");
    assert!(closed_by_server(&mut silent).await, "a connection that never sent a byte was closed");
    assert!(closed_by_server(&mut kept_alive).await, "a keep-alive connection with no next request was closed");
    assert!(slow.await.unwrap(), "the slowloris was closed");
}

#[tokio::test]
async fn a_request_whose_body_never_finishes_gets_408_and_is_neither_stored_nor_answered() {
    let slack = fake_slack().await;
    let served = serve_with(&slack.uri(), &[], &["--request-timeout-secs", "1"]).expect("kuuki serve starts");
    let (body, headers) = signed_mention_request("C7", "Ev-unfinished");
    let mut request = format!("POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body[..body.len() / 2]);
    let mut stream = TcpStream::connect(address(&served)).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let reading = async {
        let mut chunk = [0u8; 1024];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
    };
    assert!(tokio::time::timeout(Duration::from_secs(10), reading).await.is_ok(), "the server answered or closed");
    assert!(answer.starts_with(b"HTTP/1.1 408"), "{:?}", String::from_utf8_lossy(&answer));

    // A complete request after it is answered; had the first been stored, the workers
    // would answer it too, before or with this one.
    assert_eq!(signed_mention(&served.base_url, "C8").await, 200);
    assert_eq!(wait_for_posts_in(&slack, "C8").await.len(), 1);
    let channels: Vec<_> = posts(&slack).await.into_iter().map(|p| p["channel"].clone()).collect();
    assert_eq!(channels, vec![json!("C8")], "nothing was posted for the unfinished request");
}

// ---------------------------------------------------------------------------------
// Killed mid-answer: `kuuki serve --aws` killed with SIGKILL while the model writes an
// answer, then started again: SQS delivers the job again after its visibility timeout,
// the new process takes the expired claim over and answers once.

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_aws_killed_mid_generation_answers_once_after_a_restart() {
    emulators("serve_aws_killed_mid_generation_answers_once_after_a_restart");
    let slack = fake_slack().await;
    let llm = MockServer::start().await;
    // The first generation hangs until the process is killed.
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(completion("never seen").set_delay(Duration::from_secs(60)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&llm)
        .await;
    Mock::given(method("POST")).and(path("/chat/completions")).respond_with(completion(ANSWER)).mount(&llm).await;

    let suffix = format!("crash-{}", std::process::id());
    let mut env: Vec<(String, String)> = vec![
        ("LLM_PROVIDER".into(), "openai".into()),
        ("OPENAI_BASE_URL".into(), llm.uri()),
        ("MESSAGES_TABLE".into(), format!("{suffix}-messages")),
        ("CHANNELS_TABLE".into(), format!("{suffix}-channels")),
        ("LEDGER_TABLE".into(), format!("{suffix}-ledger")),
        ("FACTS_TABLE".into(), format!("{suffix}-facts")),
    ];
    env.extend(SMALL_BUDGET.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let setup = Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(["setup-aws", "--prefix", &suffix])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));
    env.extend(
        String::from_utf8(setup.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("export ")?.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned()))),
    );

    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let serve_aws = || serve_with(&slack.uri(), &env_refs, &["--aws"]).expect("kuuki serve --aws starts");
    let first = serve_aws();
    assert_eq!(signed_mention(&first.base_url, "CCRASH").await, 200);

    wait_for("the first generation to start", Duration::from_secs(30), async || {
        !requests_to(&llm, "/chat/completions").await.is_empty()
    })
    .await;
    drop(first); // SIGKILL, mid-generation
    assert!(posts(&slack).await.is_empty());

    let _second = serve_aws();
    // The message comes back after the queue's visibility timeout (84 s here).
    answered_once_after_the_restart(&slack, &llm, Duration::from_secs(180)).await;
}

#[tokio::test]
async fn serve_runs_discord_alone_without_any_slack_variable() {
    use ed25519_dalek::{Signer, SigningKey};

    let discord = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/users/@me"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"id": "900000000000000001", "username": "kuuki"})),
        )
        .mount(&discord)
        .await;
    Mock::given(method("GET"))
        .and(path("/users/@me/guilds"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .mount(&discord)
        .await;
    let signing = SigningKey::from_bytes(&[9u8; 32]);
    let mut command = Command::new(env!("CARGO_BIN_EXE_kuuki"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--seed", "1", "--data", ":memory:"])
        .env_remove("LLM_PROVIDER")
        .env_remove("SLACK_SIGNING_SECRET")
        .env_remove("SLACK_BOT_TOKEN")
        .env("DISCORD_BOT_TOKEN", "discord-serve-test")
        .env("DISCORD_PUBLIC_KEY", hex::encode(signing.verifying_key().as_bytes()))
        .env("DISCORD_RELAY_SECRET", "relay")
        .env("DISCORD_API_BASE_URL", discord.uri())
        // Interactions over HTTP: no Gateway (it would dial Discord's).
        .env("DISCORD_GATEWAY", "false")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let served = start(command).expect("kuuki serve starts for Discord alone");
    let http = reqwest::Client::new();
    let ping = r#"{"type":1,"id":"1","application_id":"1","token":"t","version":1}"#;
    let mut signed = b"1700000000".to_vec();
    signed.extend_from_slice(ping.as_bytes());
    let response = http
        .post(format!("{}/discord/interactions", served.base_url))
        .header("x-signature-ed25519", hex::encode(signing.sign(&signed).to_bytes()))
        .header("x-signature-timestamp", "1700000000")
        .body(ping)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<serde_json::Value>().await.unwrap(), json!({"type": 1}));
    let slack = http.post(format!("{}/slack/events", served.base_url)).body("{}").send().await.unwrap();
    assert_eq!(slack.status(), 404, "Slack is not served");
    let me = discord.received_requests().await.unwrap();
    assert_eq!(me[0].headers.get("authorization").unwrap(), "Bot discord-serve-test");

    // Neither platform's token: a clear refusal.
    let mut none = Command::new(env!("CARGO_BIN_EXE_kuuki"));
    none.args(["serve", "--listen", "127.0.0.1:0", "--data", ":memory:"])
        .env_remove("SLACK_BOT_TOKEN")
        .env_remove("DISCORD_BOT_TOKEN")
        .env_remove("LLM_PROVIDER")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let err = start(none).err().expect("no platform, no server");
    assert!(err.contains("neither SLACK_BOT_TOKEN nor DISCORD_BOT_TOKEN"), "{err}");
}

#[tokio::test]
async fn discord_register_installs_the_kuuki_command_by_bulk_overwrite() {
    let discord = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/applications/4242/commands"))
        .respond_with(|request: &wiremock::Request| {
            let commands: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            ResponseTemplate::new(200).set_body_json(commands)
        })
        .mount(&discord)
        .await;
    let uri = discord.uri();
    let run = |vars: Vec<(&'static str, String)>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kuuki"));
        command.args(["discord", "register"]).env_remove("DISCORD_BOT_TOKEN").env_remove("DISCORD_APPLICATION_ID");
        for (k, v) in vars {
            command.env(k, v);
        }
        command.output().expect("kuuki runs")
    };
    let base = ("DISCORD_API_BASE_URL", uri.clone());
    let out = tokio::task::spawn_blocking({
        let base = base.clone();
        move || {
            run(vec![("DISCORD_BOT_TOKEN", "register-token".into()), ("DISCORD_APPLICATION_ID", "4242".into()), base])
        }
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("registered 1 command(s) for application 4242"));
    let requests = discord.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].headers.get("authorization").unwrap(), "Bot register-token");
    let sent: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent[0]["name"], "kuuki");
    let subcommands: Vec<&str> =
        sent[0]["options"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(
        subcommands,
        [
            "status",
            "why",
            "mute",
            "unmute",
            "shadow",
            "ask",
            "memory",
            "forget-me",
            "forget",
            "quieter",
            "louder",
            "talkativeness"
        ]
    );

    // Without the application id: a clear refusal, nothing sent.
    let out = tokio::task::spawn_blocking(move || run(vec![("DISCORD_BOT_TOKEN", "t".into()), base])).await.unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("DISCORD_APPLICATION_ID is not set"));
    assert_eq!(discord.received_requests().await.unwrap().len(), 1);
}

/// Words that must not reach a log: in the message, the model's reply and the command.
const PHRASE: &str = "periwinkle-otter";

/// A message, kuuki's answer and `/kuuki why` through the real process: stdout (the
/// decision log) and stderr keep ids and decisions, never the words; `/kuuki why` still
/// shows them from the store. With `LOG_MESSAGE_TEXT=true` the same run logs them.
#[tokio::test]
async fn a_message_and_its_answer_leave_no_words_in_the_logs() {
    for log_message_text in [false, true] {
        let (slack, llm) = (fake_slack().await, MockServer::start().await);
        let reply = format!("The {PHRASE} runbook is on the wiki.");
        Mock::given(method("POST")).and(path("/chat/completions")).respond_with(completion(&reply)).mount(&llm).await;
        let env = [
            ("LLM_PROVIDER", "openai"),
            ("OPENAI_BASE_URL", &llm.uri()),
            ("LOG_MESSAGE_TEXT", if log_message_text { "true" } else { "false" }),
        ];
        let served = serve(&slack.uri(), &env).expect("kuuki serve starts");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let send = async |event_id: &str, event: serde_json::Value| {
            let body = json!({"type": "event_callback", "team_id": "T1", "event_id": event_id, "event_time": now, "event": event});
            post_signed(&served.base_url, "/slack/events", &body.to_string()).await.status()
        };
        // A question to the room (judged: `/kuuki why` quotes it), then a mention.
        let question = json!({"type": "message", "channel": "C1", "user": "UBOB",
                              "text": format!("does anyone know who owns {PHRASE}?"), "ts": format!("{now}.000100")});
        assert_eq!(send("EvWords1", question).await, 200);
        wait_for("the question's judgment", Duration::from_secs(30), async || {
            served.output.lock().unwrap().contains("\"kind\":\"judge\"")
        })
        .await;
        let mention = json!({"type": "app_mention", "channel": "C1", "user": "UALICE",
                             "text": format!("<@UKUUKI> where is the {PHRASE} runbook?"), "ts": format!("{now}.000300")});
        assert_eq!(send("EvWords2", mention).await, 200);
        wait_for("the answer", Duration::from_secs(30), async || !posts(&slack).await.is_empty()).await;
        assert!(posts(&slack).await[0]["text"].as_str().unwrap().contains(PHRASE), "the reply carries the words");

        let command = "team_id=T1&channel_id=C1&user_id=UALICE&user_name=alice&command=%2Fkuuki&text=why";
        let why = post_signed(&served.base_url, "/slack/commands", command).await;
        assert_eq!(why.status(), 200);
        let why = why.text().await.unwrap();
        assert!(why.contains(PHRASE), "/kuuki why shows the text from the store: {why}");

        // The decision log's lines for the message, the answer and the command are written.
        wait_for("the command's log line", Duration::from_secs(30), async || {
            served.output.lock().unwrap().contains("\"kind\":\"command\"")
        })
        .await;
        let logged = served.output.lock().unwrap().clone();
        for kind in ["message", "judge", "respond", "command"] {
            assert!(logged.contains(&format!("\"kind\":\"{kind}\"")), "no {kind} line in:\n{logged}");
        }
        if log_message_text {
            assert!(logged.contains(PHRASE), "LOG_MESSAGE_TEXT=true keeps the words");
            assert!(logged.contains("LOG_MESSAGE_TEXT=true"), "and says so at start-up");
        } else {
            assert!(!logged.contains(PHRASE), "words in the logs:\n{logged}");
            assert!(logged.contains("\"text_chars\""), "lengths instead:\n{logged}");
        }
    }
}
