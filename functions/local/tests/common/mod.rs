//! What the tests of `kuuki serve` share: the binary started as a user starts it, a
//! fake Slack Web API, signed requests, waiting for an effect.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kuuki::adapters::slack::SigningSecret;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

pub const SECRET: &str = "serve-test-secret";

pub struct Served {
    pub child: Child,
    pub base_url: String,
    /// Every line the process has written to stdout and stderr so far.
    pub output: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn serve(slack_api: &str, extra_env: &[(&str, &str)]) -> Result<Served, String> {
    serve_with(slack_api, extra_env, &[])
}

pub fn serve_with(slack_api: &str, extra_env: &[(&str, &str)], flags: &[&str]) -> Result<Served, String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kuuki"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--seed", "1"])
        .args(flags)
        .env_remove("LLM_PROVIDER")
        .env("SLACK_SIGNING_SECRET", SECRET)
        .env("SLACK_BOT_TOKEN", "xoxb-serve-test")
        .env("SLACK_API_BASE_URL", slack_api)
        .env("JUDGE_MIN_WAIT_SECONDS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Nothing kept across runs unless the test names a file (or runs on AWS).
    if !flags.iter().any(|flag| *flag == "--data" || *flag == "--aws") {
        command.args(["--data", ":memory:"]);
    }
    for (k, v) in extra_env {
        command.env(k, v);
    }
    start(command)
}

/// Starts `kuuki serve` and waits for its "listening on" line.
pub fn start(mut command: Command) -> Result<Served, String> {
    let mut child = command.spawn().expect("kuuki starts");
    let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    // stdout (the decision log), when piped, is kept as it comes, so the pipe never fills.
    if let Some(stdout) = child.stdout.take() {
        let output = output.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut kept = output.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
    }
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = String::new();
    while let Some(Ok(line)) = lines.next() {
        seen.push_str(&line);
        seen.push('\n');
        if let Some(rest) = line.split("listening on ").nth(1) {
            let base_url = rest.split_whitespace().next().unwrap().to_owned();
            output.lock().unwrap().push_str(&seen);
            // Keep draining stderr (and keeping it) so the server never blocks on a full pipe.
            let kept = output.clone();
            std::thread::spawn(move || {
                for line in lines.map_while(Result::ok) {
                    let mut kept = kept.lock().unwrap();
                    kept.push_str(&line);
                    kept.push('\n');
                }
            });
            return Ok(Served { child, base_url, output });
        }
    }
    let _ = child.wait();
    Err(seen)
}

pub async fn fake_slack() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/auth.test"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"ok": true, "user_id": "UKUUKI", "bot_id": "BKUUKI"})),
        )
        .mount(&server)
        .await;
    mount_web_api(&server).await;
    server
}

/// The Web API methods kuuki calls besides `auth.test`, answering ok.
pub async fn mount_web_api(server: &MockServer) {
    for (api, answer) in [
        ("/chat.postMessage", json!({"ok": true, "ts": "1999999999.000001"})),
        ("/reactions.add", json!({"ok": true})),
        ("/users.info", json!({"ok": true, "user": {"name": "alice"}})),
        ("/conversations.history", json!({"ok": true, "messages": []})),
    ] {
        Mock::given(method("POST"))
            .and(path(api))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .mount(server)
            .await;
    }
}

pub async fn posts(server: &MockServer) -> Vec<serde_json::Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.url.path() == "/chat.postMessage")
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// A signed `app_mention` in `channel`: its body and the headers Slack would send.
pub fn signed_mention_request(channel: &str, event_id: &str) -> (String, [(&'static str, String); 3]) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let body = json!({
        "type": "event_callback", "team_id": "T1", "event_id": event_id, "event_time": now,
        "event": {"type": "app_mention", "channel": channel, "user": "UALICE", "text": "<@UKUUKI> are you there?", "ts": format!("{now}.000200")},
    })
    .to_string();
    let timestamp = now.to_string();
    let signature = SigningSecret::new(SECRET).sign(&timestamp, body.as_bytes());
    let headers = [
        ("x-slack-request-timestamp", timestamp),
        ("x-slack-signature", signature),
        ("content-type", "application/json".to_owned()),
    ];
    (body, headers)
}

/// Posts `body` to `route` signed with [`SECRET`] now, as Slack sends a request.
pub async fn post_signed(base_url: &str, route: &str, body: &str) -> reqwest::Response {
    let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs().to_string();
    let signature = SigningSecret::new(SECRET).sign(&timestamp, body.as_bytes());
    let content_type =
        if route.ends_with("commands") { "application/x-www-form-urlencoded" } else { "application/json" };
    reqwest::Client::new()
        .post(format!("{base_url}{route}"))
        .header("x-slack-request-timestamp", &timestamp)
        .header("x-slack-signature", &signature)
        .header("content-type", content_type)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

/// Posts a signed mention on a new connection and returns the status.
pub async fn signed_mention(base_url: &str, channel: &str) -> u16 {
    let (body, headers) = signed_mention_request(channel, &format!("Ev-{channel}"));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let mut request = http.post(format!("{base_url}/slack/events")).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.send().await.expect("an answer within 10 s").status().as_u16()
}

/// Sends SIGINT, as Ctrl-C does; whether kuuki then exits successfully within 10 s.
pub fn interrupt_exits_cleanly(served: &mut Served) -> bool {
    let sent = Command::new("kill").args(["-INT", &served.child.id().to_string()]).status().unwrap();
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(status) = served.child.try_wait().unwrap() {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub const ANSWER: &str = "Deploys go out from main with `make deploy`.";

/// A small time budget, so the queue's visibility timeout (6 × the worker timeout) is a
/// minute and a half, not 24: the LLM call (2 s, no retries) and three chat calls of 3 s
/// fit in 14 s.
pub const SMALL_BUDGET: [(&str, &str); 4] = [
    ("WORKER_TIMEOUT_SECONDS", "14"),
    ("LLM_TIMEOUT_SECONDS", "2"),
    ("LLM_MAX_RETRIES", "0"),
    ("CHAT_TIMEOUT_SECONDS", "1"),
];

pub async fn requests_to(server: &MockServer, api: &str) -> Vec<serde_json::Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.url.path() == api)
        .map(|r| serde_json::from_slice(&r.body).unwrap_or_default())
        .collect()
}

pub async fn wait_for(what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An OpenAI-compatible chat completion answering `text`.
pub fn completion(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }))
}

/// After a kill mid-answer and a restart: waits (up to `limit`) for the answer, gives a
/// second one time to show up, and checks there was one, the model's, after the
/// interrupted call and one more.
pub async fn answered_once_after_the_restart(slack: &MockServer, llm: &MockServer, limit: Duration) {
    wait_for("the answer after the restart", limit, async || !posts(slack).await.is_empty()).await;
    // Give a second answer time to show up, were there one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let posted = posts(slack).await;
    assert_eq!(posted.len(), 1, "answered once: {posted:?}");
    assert_eq!(posted[0]["text"], ANSWER);
    assert_eq!(requests_to(llm, "/chat/completions").await.len(), 2);
}
