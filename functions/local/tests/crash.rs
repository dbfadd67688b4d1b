//! `kuuki serve --aws` killed with SIGKILL while the model writes an answer, then
//! started again: SQS delivers the job again after its visibility timeout, the new
//! process takes the expired claim over and answers once. Real processes, DynamoDB
//! Local and moto (started by `./scripts/test`), a fake Slack and a fake model.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kuuki::adapters::slack::SigningSecret;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "crash-test-secret";
const ANSWER: &str = "Deploys go out from main with `make deploy`.";

/// A small time budget, so the queue's visibility timeout (6 × the worker timeout) is a
/// minute, not 24: the LLM call (2 s, no retries) and two chat calls of 3 s fit in 10 s.
const BUDGET: [(&str, &str); 4] = [
    ("WORKER_TIMEOUT_SECONDS", "10"),
    ("LLM_TIMEOUT_SECONDS", "2"),
    ("LLM_MAX_RETRIES", "0"),
    ("CHAT_TIMEOUT_SECONDS", "1"),
];

fn emulators(test: &str) -> bool {
    if std::env::var_os("KUUKI_DYNAMODB_ENDPOINT").is_some() && std::env::var_os("KUUKI_MOTO_ENDPOINT").is_some() {
        return true;
    }
    assert!(std::env::var_os("KUUKI_REQUIRE_EMULATORS").is_none(), "{test}: the emulators are required but missing");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no local AWS emulators (./scripts/test starts them)");
    false
}

/// Runs `kuuki serve --aws` until it listens; the child is killed when dropped.
struct Served {
    child: Child,
    base_url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_aws(env: &[(String, String)]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(["serve", "--aws", "--listen", "127.0.0.1:0", "--seed", "1"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kuuki starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    while let Some(Ok(line)) = lines.next() {
        seen.push_str(&line);
        seen.push('\n');
        if let Some(rest) = line.split("listening on ").nth(1) {
            let base_url = rest.split_whitespace().next().unwrap().to_owned();
            std::thread::spawn(move || for _ in lines {});
            return Served { child, base_url };
        }
    }
    let _ = child.wait();
    panic!("kuuki serve --aws did not start:\n{seen}");
}

async fn requests_to(server: &MockServer, api: &str) -> Vec<serde_json::Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.url.path() == api)
        .map(|r| serde_json::from_slice(&r.body).unwrap_or_default())
        .collect()
}

async fn wait_for(what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_aws_killed_mid_generation_answers_once_after_a_restart() {
    if !emulators("serve_aws_killed_mid_generation_answers_once_after_a_restart") {
        return;
    }
    let slack = MockServer::start().await;
    for (api, answer) in [
        ("/auth.test", json!({"ok": true, "user_id": "UKUUKI", "bot_id": "BKUUKI"})),
        ("/chat.postMessage", json!({"ok": true, "ts": "1999999999.000001"})),
        ("/users.info", json!({"ok": true, "user": {"name": "alice"}})),
        ("/conversations.history", json!({"ok": true, "messages": []})),
    ] {
        Mock::given(method("POST"))
            .and(path(api))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .mount(&slack)
            .await;
    }
    let llm = MockServer::start().await;
    let completion = |text: &str| {
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }))
    };
    // The first generation hangs until the process is killed.
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(completion("never seen").set_delay(Duration::from_secs(60)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&llm)
        .await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(completion(ANSWER))
        .mount(&llm)
        .await;

    let suffix = format!("crash-{}", std::process::id());
    let mut env: Vec<(String, String)> = vec![
        ("SLACK_SIGNING_SECRET".into(), SECRET.into()),
        ("SLACK_BOT_TOKEN".into(), "xoxb-crash-test".into()),
        ("SLACK_API_BASE_URL".into(), slack.uri()),
        ("LLM_PROVIDER".into(), "openai".into()),
        ("OPENAI_BASE_URL".into(), llm.uri()),
        ("MESSAGES_TABLE".into(), format!("{suffix}-messages")),
        ("CHANNELS_TABLE".into(), format!("{suffix}-channels")),
        ("LEDGER_TABLE".into(), format!("{suffix}-ledger")),
        ("FACTS_TABLE".into(), format!("{suffix}-facts")),
    ];
    env.extend(BUDGET.iter().map(|(k, v)| (k.to_string(), v.to_string())));
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

    let first = serve_aws(&env);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let body = json!({
        "type": "event_callback", "team_id": "T1", "event_id": "EvCrash", "event_time": now,
        "event": {"type": "app_mention", "channel": "C1", "user": "UALICE", "text": "<@UKUUKI> how do we deploy?", "ts": format!("{now}.000300")},
    })
    .to_string();
    let signature = SigningSecret::new(SECRET).sign(&now.to_string(), body.as_bytes());
    let response = reqwest::Client::new()
        .post(format!("{}/slack/events", first.base_url))
        .header("x-slack-request-timestamp", now.to_string())
        .header("x-slack-signature", signature)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    wait_for("the first generation to start", Duration::from_secs(30), async || {
        !requests_to(&llm, "/chat/completions").await.is_empty()
    })
    .await;
    drop(first); // SIGKILL, mid-generation
    assert!(requests_to(&slack, "/chat.postMessage").await.is_empty());

    let _second = serve_aws(&env);
    // The message comes back after the queue's visibility timeout (60 s here).
    wait_for("the answer after the restart", Duration::from_secs(120), async || {
        !requests_to(&slack, "/chat.postMessage").await.is_empty()
    })
    .await;
    // Give a second answer time to show up, were there one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let posts = requests_to(&slack, "/chat.postMessage").await;
    assert_eq!(posts.len(), 1, "answered once: {posts:?}");
    assert_eq!(posts[0]["text"], ANSWER);
    assert_eq!(requests_to(&llm, "/chat/completions").await.len(), 2);
}
