//! Faults kuuki survives: a worker killed mid-answer, a redelivery that meets a live
//! claim, a post whose answer never came, a model that is down, slow, or answers
//! garbage or an error, Slack rate limits, outages and refusals, a store that throttles,
//! a poison queue message. Each test injects the fault over real HTTP (a signed Slack
//! request in, a fake Slack and a fake OpenAI-compatible model out) and asserts exactly
//! what was posted.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kuuki::adapters::llm::{HttpPolicy, OpenAiCompatible};
use kuuki::config::PromptLanguage;
use kuuki::domain::{Event, EventKind, Job, Message, RespondMode, ResponseType, ThreadKey, Timestamp, Ts};
use kuuki::ports::{ClaimOutcome, Clock, InProcessQueue, Ledger, Llm, MessageStore, PortError, PortResult, PutOutcome};
use kuuki::replay::REPLAY_EPOCH;
use kuuki_e2e::slack_world::{BOT_ID, BOT_USER, SlackWorld, message};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const CH: &str = "C0GENERAL";
const ANSWER: &str = "Run `make deploy` from main; it takes about five minutes.";

// ---------------------------------------------------------------------------------
// A fake Slack that keeps what was posted, so kuuki can look its own posts up.

#[derive(Clone, Default)]
struct SlackState {
    posts: Arc<Mutex<Vec<Value>>>,
    next: Arc<AtomicU64>,
}

impl SlackState {
    fn posts(&self) -> Vec<Value> {
        self.posts.lock().unwrap().clone()
    }

    fn texts(&self) -> Vec<String> {
        self.posts().iter().map(|p| p["text"].as_str().unwrap_or_default().to_owned()).collect()
    }

    /// Records a chat.postMessage as posted and returns Slack's answer to it.
    fn record(&self, request: &Request) -> Value {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let ts = format!("{}.{:06}", REPLAY_EPOCH.as_micros() / 1_000_000, 500_000 + n);
        let mut posted = json!({"type": "message", "ts": ts, "text": body["text"], "user": BOT_USER, "bot_id": BOT_ID});
        if !body["thread_ts"].is_null() {
            posted["thread_ts"] = body["thread_ts"].clone();
        }
        if !body["metadata"].is_null() {
            posted["metadata"] = body["metadata"].clone();
        }
        self.posts.lock().unwrap().push(posted.clone());
        json!({"ok": true, "channel": body["channel"], "ts": ts, "message": posted})
    }
}

/// chat.postMessage: posts, then answers after `delay` (longer than kuuki waits: the
/// post went out, the answer is lost).
struct PostMessage {
    state: SlackState,
    delay: Duration,
}

impl Respond for PostMessage {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_json(self.state.record(request)).set_delay(self.delay)
    }
}

/// conversations.history and conversations.replies over what was posted.
struct History {
    state: SlackState,
    replies: bool,
}

impl Respond for History {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let fields: std::collections::HashMap<String, String> =
            serde_urlencoded::from_bytes(&request.body).unwrap_or_default();
        let oldest: f64 = fields.get("oldest").and_then(|o| o.parse().ok()).unwrap_or(0.0);
        let thread = fields.get("ts").cloned();
        let messages: Vec<Value> = self
            .state
            .posts()
            .into_iter()
            .filter(|m| m["ts"].as_str().and_then(|t| t.parse::<f64>().ok()).unwrap_or(0.0) > oldest)
            .filter(|m| match (&thread, self.replies) {
                (Some(root), true) => m["thread_ts"].as_str() == Some(root.as_str()),
                _ => m["thread_ts"].is_null(),
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({"ok": true, "messages": messages, "has_more": false}))
    }
}

async fn mount_slack(server: &MockServer, state: &SlackState) {
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(PostMessage { state: state.clone(), delay: Duration::ZERO })
        .mount(server)
        .await;
    for (api, replies) in [("/conversations.history", false), ("/conversations.replies", true)] {
        Mock::given(method("POST"))
            .and(path(api))
            .respond_with(History { state: state.clone(), replies })
            .mount(server)
            .await;
    }
    for (api, answer) in [
        ("/reactions.add", json!({"ok": true})),
        ("/users.info", json!({"ok": true, "user": {"name": "alice", "profile": {"display_name": "Alice"}}})),
    ] {
        Mock::given(method("POST"))
            .and(path(api))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .mount(server)
            .await;
    }
}

/// The next `times` calls of `api` get `answer` instead.
async fn fail_slack(server: &MockServer, api: &str, answer: ResponseTemplate, times: u64) {
    Mock::given(method("POST"))
        .and(path(api))
        .respond_with(answer)
        .up_to_n_times(times)
        .with_priority(1)
        .mount(server)
        .await;
}

// ---------------------------------------------------------------------------------
// A fake OpenAI-compatible model.

fn completion(content: &str, finish_reason: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }))
}

async fn model(answer: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/chat/completions")).respond_with(answer).mount(&server).await;
    server
}

fn client(server: &MockServer, timeout: Duration) -> Arc<dyn Llm> {
    Arc::new(OpenAiCompatible::new(
        &server.uri(),
        "",
        HttpPolicy {
            timeout,
            max_retries: 1,
            backoff: Duration::from_millis(10),
            max_retry_wait: Duration::from_millis(100),
        },
    ))
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap_or_default().len()
}

// ---------------------------------------------------------------------------------
// The world and what happened in it.

struct World {
    w: SlackWorld,
    slack: SlackState,
    events: Vec<Event>,
    /// Failed deliveries over every `run`.
    failed_deliveries: u32,
}

impl World {
    async fn start(settings: &[(&str, &str)], llm: Arc<dyn Llm>) -> World {
        Self::start_adapted(settings, llm, |_| {}).await
    }

    async fn start_adapted(
        settings: &[(&str, &str)],
        llm: Arc<dyn Llm>,
        adapt: impl FnOnce(&mut kuuki::deps::Adapters),
    ) -> World {
        let w = SlackWorld::start_adapted(settings, false, Some(llm), adapt).await;
        let slack = SlackState::default();
        mount_slack(&w.slack_api, &slack).await;
        World { w, slack, events: Vec::new(), failed_deliveries: 0 }
    }

    /// alice mentions kuuki at `secs`; Slack's delivery is acknowledged.
    async fn mention(&self, secs: u64) -> String {
        let ts = self.w.ts(secs, 1);
        let response = self.w.send_event(message(CH, "UALICE", "<@UKUUKI> how do I deploy?", &ts), &[]).await;
        assert_eq!(response.status(), 200);
        ts
    }

    /// Runs due work for `secs` and returns the failed deliveries.
    async fn run(&mut self, secs: f64) -> u32 {
        let failures = self.w.run_for_counting(secs).await;
        self.events.extend(self.w.events());
        self.failed_deliveries += failures;
        failures
    }

    fn kinds(&self, pick: impl Fn(&EventKind) -> bool) -> Vec<&EventKind> {
        self.events.iter().map(|e| &e.kind).filter(|k| pick(k)).collect()
    }

    fn dead_letters(&self) -> usize {
        self.kinds(|k| matches!(k, EventKind::Dropped { reason, .. } if reason.contains("dead letter"))).len()
    }

    fn responded(&self) -> usize {
        self.kinds(|k| matches!(k, EventKind::Respond { .. })).len()
    }

    async fn slack_calls(&self, api: &str) -> usize {
        self.w.calls(api).await.len()
    }
}

fn notice() -> &'static str {
    kuuki::respond::failure_notice(PromptLanguage::Ja)
}

/// What one fault ended with: a row of the "faults kuuki survives" table in docs/faults.md.
struct Observed {
    fault: &'static str,
    /// What reached the channel.
    posts: Vec<String>,
    post_calls: usize,
    lookups: usize,
    model_calls: usize,
    dead_letters: usize,
    /// Not in the table of docs/faults.md: each fault's test checks it.
    failed_deliveries: u32,
}

impl Observed {
    fn row(&self) -> String {
        let posted = match self.posts.as_slice() {
            [] => "nothing".to_owned(),
            [one] if one == ANSWER => "the answer, once".to_owned(),
            [one] if one == notice() => "the honest notice, once".to_owned(),
            many => format!("{} posts", many.len()),
        };
        format!(
            "| {} | {posted} | {} | {} | {} | {} |",
            self.fault, self.post_calls, self.lookups, self.model_calls, self.dead_letters
        )
    }
}

impl World {
    async fn observe(&self, fault: &'static str, llm: &MockServer) -> Observed {
        Observed {
            fault,
            posts: self.slack.texts(),
            post_calls: self.slack_calls("chat.postMessage").await,
            lookups: self.slack_calls("conversations.history").await + self.slack_calls("conversations.replies").await,
            model_calls: requests(llm).await,
            dead_letters: self.dead_letters(),
            failed_deliveries: self.failed_deliveries,
        }
    }
}

// ---------------------------------------------------------------------------------
// Crashes and timeouts mid-answer.

async fn worker_killed_mid_generation() -> Observed {
    let llm = MockServer::start().await;
    // The first call never comes back in time: the worker dies waiting for it.
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(completion("never seen", "stop").set_delay(Duration::from_secs(120)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&llm)
        .await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(completion(ANSWER, "stop"))
        .mount(&llm)
        .await;
    let mut world = World::start(&[], client(&llm, Duration::from_secs(300))).await;
    world.mention(0).await;

    let scheduled = world.w.queue.pop_due(world.w.clock.now()).expect("the answer is queued");
    let delivery = kuuki::worker::deliver(&world.w.deps, &*world.w.queue, scheduled);
    tokio::select! {
        _ = delivery => panic!("the first delivery cannot finish: its model never answers"),
        _ = async { while requests(&llm).await == 0 { tokio::time::sleep(Duration::from_millis(20)).await } } => {}
    }
    // The delivery's future is gone: the worker was killed mid-generation.
    assert!(world.slack.posts().is_empty());
    let visibility = world.w.deps.budget.visibility_timeout().as_secs_f64();
    assert_eq!(world.run(visibility - 5.0).await, 0);
    assert!(world.slack.posts().is_empty(), "the job stays invisible until its visibility timeout");
    assert_eq!(world.run(10.0).await, 0, "the redelivery takes the expired claim over");
    assert_eq!(world.slack.texts(), [ANSWER]);
    assert_eq!(requests(&llm).await, 2);
    assert_eq!(world.responded(), 1);
    assert_eq!(world.dead_letters(), 0);
    world.observe("the worker is killed while the model writes", &llm).await
}

#[tokio::test]
async fn a_worker_killed_mid_generation_answers_once_after_the_visibility_timeout() {
    worker_killed_mid_generation().await;
}

async fn two_deliveries_at_once() -> Observed {
    let llm = model(completion(ANSWER, "stop").set_delay(Duration::from_millis(300))).await;
    let mut world = World::start(&[], client(&llm, Duration::from_secs(30))).await;
    let ts = world.mention(0).await;
    // Slack retries the delivery: the answer is queued a second time.
    let retry = world
        .w
        .send_event(message(CH, "UALICE", "<@UKUUKI> how do I deploy?", &ts), &[("x-slack-retry-num", "1")])
        .await;
    assert_eq!(retry.status(), 200);
    let now = world.w.clock.now();
    let (first, second) = (world.w.queue.pop_due(now).unwrap(), world.w.queue.pop_due(now).unwrap());
    assert_eq!(first.job, second.job, "the same answer, twice");
    let (a, b) = tokio::join!(
        kuuki::worker::deliver(&world.w.deps, &*world.w.queue, first),
        kuuki::worker::deliver(&world.w.deps, &*world.w.queue, second)
    );
    assert!(a ^ b, "one delivery answers, the other finds the claim held and fails for a retry");
    assert_eq!(world.slack.texts(), [ANSWER]);
    let lease = world.w.deps.budget.claim_lease().as_secs_f64();
    assert_eq!(world.run(lease + 5.0).await, 0);
    assert_eq!(world.slack.texts(), [ANSWER], "the retry finds the answer done");
    assert_eq!(
        world.kinds(|k| matches!(k, EventKind::Dropped { reason, .. } if reason == "already answered")).len(),
        1
    );
    assert_eq!(requests(&llm).await, 1);
    assert_eq!(world.dead_letters(), 0);
    world.observe("two deliveries of one answer at once (a Slack retry and the first delivery)", &llm).await
}

#[tokio::test]
async fn a_redelivery_that_meets_a_live_claim_retries_later_and_never_posts_twice() {
    two_deliveries_at_once().await;
}

async fn post_answer_lost() -> Observed {
    let llm = model(completion(ANSWER, "stop")).await;
    let mut world = World::start(&[("CHAT_TIMEOUT_SECONDS", "1")], client(&llm, Duration::from_secs(30))).await;
    // Slack posts, but answers after kuuki stopped waiting.
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(PostMessage { state: world.slack.clone(), delay: Duration::from_secs(3) })
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&world.w.slack_api)
        .await;
    world.mention(0).await;
    assert_eq!(world.run(0.0).await, 1, "the post's outcome is unknown: the delivery fails");
    assert_eq!(world.slack.texts(), [ANSWER], "it went out all the same");
    assert_eq!(world.run(60.0).await, 0);
    assert_eq!(world.slack.texts(), [ANSWER], "the redelivery found it instead of posting again");
    assert_eq!(world.slack_calls("chat.postMessage").await, 1);
    assert_eq!(world.slack_calls("conversations.history").await, 1);
    assert_eq!(requests(&llm).await, 1, "nor was the model asked again");
    let found = world.kinds(|k| matches!(k, EventKind::Respond { posted_ts: Some(_), .. }));
    assert_eq!(found.len(), 1);
    // kuuki knows its own message: the conversation shows it once.
    let posted = world.slack.posts()[0]["ts"].as_str().unwrap().to_owned();
    let stored = world.w.store.get_message(&kuuki::domain::ChannelId(CH.into()), &Ts::new(&posted)).await.unwrap();
    let stored = stored.expect("kuuki's post is stored");
    assert_eq!(stored.text, ANSWER);
    // Written when it was posted, not when the redelivery found it: reads of what came
    // after a moment count on that.
    assert_eq!(Some(stored.at), Ts::new(&posted).posted_at(), "stored at its post's time");
    world.observe("Slack posts but its answer comes after kuuki's timeout", &llm).await
}

#[tokio::test]
async fn a_post_whose_answer_never_came_is_found_and_not_posted_again() {
    post_answer_lost().await;
}

async fn throttled_after_the_post() -> Observed {
    let llm = model(completion(ANSWER, "stop")).await;
    let throttle = Arc::new(AtomicU32::new(1));
    let t = throttle.clone();
    let mut world = World::start_adapted(&[], client(&llm, Duration::from_secs(30)), move |adapters| {
        adapters.ledger = Arc::new(ThrottlingLedger { inner: adapters.ledger.clone(), complete_failures: t });
    })
    .await;
    world.mention(0).await;
    assert_eq!(world.run(0.0).await, 1, "the post went out, recording it was throttled");
    assert_eq!(throttle.load(Ordering::SeqCst), 0, "the fault was injected");
    assert_eq!(world.run(60.0).await, 0);
    assert_eq!(world.slack.texts(), [ANSWER]);
    assert_eq!(world.slack_calls("conversations.history").await, 1);
    assert_eq!(world.responded(), 1);
    world.observe("DynamoDB throttles recording the answer after the post", &llm).await
}

#[tokio::test]
async fn a_throttled_store_after_the_post_does_not_post_twice() {
    throttled_after_the_post().await;
}

async fn throttled_at_ingress() -> Observed {
    let llm = model(completion(ANSWER, "stop")).await;
    let throttle = Arc::new(AtomicU32::new(1));
    let t = throttle.clone();
    let mut world = World::start_adapted(&[], client(&llm, Duration::from_secs(30)), move |adapters| {
        adapters.messages = Arc::new(ThrottlingMessages { inner: adapters.messages.clone(), put_failures: t });
    })
    .await;
    let ts = world.w.ts(0, 1);
    let event = message(CH, "UALICE", "<@UKUUKI> how do I deploy?", &ts);
    let first = world.w.send_event(event.clone(), &[]).await;
    assert_eq!(first.status(), 500, "Slack is told to retry");
    assert!(world.w.queue.is_empty(), "nothing half-done: no work without its message");
    for retry in ["1", "2"] {
        let response = world.w.send_event(event.clone(), &[("x-slack-retry-num", retry)]).await;
        assert_eq!(response.status(), 200);
    }
    assert_eq!(world.run(60.0).await, 0);
    assert_eq!(world.slack.texts(), [ANSWER]);
    assert_eq!(requests(&llm).await, 1);
    world.observe("DynamoDB throttles storing the message at ingress (Slack retries twice)", &llm).await
}

#[tokio::test]
async fn a_throttled_store_at_ingress_is_retried_by_slack_and_answered_once() {
    throttled_at_ingress().await;
}

// ---------------------------------------------------------------------------------
// The model: down, slow, garbage, an error inside a 200, cut off.

/// A direct mention and an ambient question when the model answers with `answer`.
async fn with_failing_model(fault: &'static str, answer: ResponseTemplate, settings: &[(&str, &str)]) -> [Observed; 2] {
    let llm = model(answer.clone()).await;
    let mut direct = World::start(settings, client(&llm, Duration::from_secs(1))).await;
    direct.mention(0).await;
    assert_eq!(direct.run(120.0).await, 0, "{fault}: a failed generation is not retried into a second answer");
    let failed = direct.kinds(|k| matches!(k, EventKind::RespondFailed { .. })).len();
    assert_eq!(failed, 1, "{fault}: the failure is logged: {:?}", direct.events);
    let direct = direct.observe(fault, &llm).await;

    let llm = model(answer).await;
    let mut ambient_settings = vec![("LLM_JUDGE_ENABLED", "false"), ("JUDGE_SCORE_THRESHOLD", "5")];
    ambient_settings.extend_from_slice(settings);
    let mut ambient = World::start(&ambient_settings, client(&llm, Duration::from_secs(1))).await;
    let ts = ambient.w.ts(0, 1);
    let response = ambient.w.send_event(message(CH, "UALICE", "how do we deploy on fridays?", &ts), &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(ambient.run(300.0).await, 0);
    let decided = ambient.kinds(|k| matches!(k, EventKind::Judge { respond: true, .. })).len();
    assert_eq!(decided, 1, "{fault}: kuuki decided to speak: {:?}", ambient.events);
    // A question that clears the threshold (5 here) at its judgment is answered then,
    // not held for its pick-up (issue 44).
    let failed = ambient.kinds(|k| matches!(k, EventKind::RespondFailed { mode: RespondMode::Ambient, .. })).len();
    assert_eq!(failed, 1, "{fault}");
    [direct, ambient.observe(fault, &llm).await]
}

fn model_faults() -> Vec<(&'static str, ResponseTemplate)> {
    vec![
        ("the model is down (HTTP 500)", ResponseTemplate::new(500).set_body_string("upstream connect error")),
        (
            "the model is slower than `LLM_TIMEOUT_SECONDS`",
            completion(ANSWER, "stop").set_delay(Duration::from_secs(3)),
        ),
        (
            "the model answers garbage (HTML)",
            ResponseTemplate::new(200).set_body_string("<html>502 Bad Gateway</html>"),
        ),
        (
            "the model answers 200 with an `error` object",
            ResponseTemplate::new(200)
                .set_body_json(json!({"error": {"message": "upstream model overloaded", "type": "server_error"}})),
        ),
        (
            "the model's text is an error message",
            completion("Error: upstream model overloaded … Please retry later.", "stop"),
        ),
        ("the model is cut off at the token limit", completion("Run `make deploy` from", "length")),
        ("the provider's filter withholds the answer", completion("", "content_filter")),
        ("the model returns only whitespace", completion("   ", "stop")),
    ]
}

async fn failing_models() -> Vec<Observed> {
    let mut rows = Vec::new();
    for (fault, answer) in model_faults() {
        let [direct, ambient] = with_failing_model(fault, answer, &[]).await;
        assert_eq!(direct.posts, [notice()], "{fault}: one short, honest line");
        assert!(ambient.posts.is_empty(), "{fault}: nothing in ambient mode, got {:?}", ambient.posts);
        rows.extend([direct, ambient]);
    }
    rows
}

#[tokio::test]
async fn a_model_that_fails_gets_one_honest_line_for_a_mention_and_silence_otherwise() {
    failing_models().await;
}

#[tokio::test]
async fn without_the_notice_a_failed_mention_posts_nothing() {
    let fault = "an error message as text, DIRECT_FAILURE_NOTICE=false";
    let answer = completion("Error: overloaded. Please try again later.", "stop");
    let [direct, ambient] = with_failing_model(fault, answer, &[("DIRECT_FAILURE_NOTICE", "false")]).await;
    assert!(direct.posts.is_empty() && ambient.posts.is_empty());
}

#[tokio::test]
async fn anthropic_errors_inside_a_200_and_cut_off_answers_are_not_posted() {
    use kuuki::adapters::llm::Anthropic;
    use kuuki::ports::{LlmRequest, LlmRole};
    let request = LlmRequest {
        role: LlmRole::Generate,
        model: "claude".into(),
        system: "be brief".into(),
        user: "alice: hi".into(),
        max_tokens: 50,
        temperature: None,
        schema: None,
        subject: "hi".into(),
    };
    let policy = HttpPolicy {
        timeout: Duration::from_secs(5),
        max_retries: 0,
        backoff: Duration::from_millis(10),
        max_retry_wait: Duration::from_millis(10),
    };
    let overloaded = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
        )
        .mount(&overloaded)
        .await;
    let answer = Anthropic::new(&overloaded.uri(), "key", policy.clone()).complete(request.clone()).await;
    assert!(answer.unwrap_err().to_string().contains("Overloaded"));

    let cut = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Run make"}],
            "stop_reason": "max_tokens", "usage": {"input_tokens": 10, "output_tokens": 50},
        })))
        .mount(&cut)
        .await;
    let answer = Anthropic::new(&cut.uri(), "key", policy).complete(request).await.unwrap();
    assert_eq!(answer.finish, kuuki::ports::Finish::Truncated);
    assert!(kuuki::respond::output::fit_to_post(&answer).unwrap_err().contains("token limit"));
}

// ---------------------------------------------------------------------------------
// Slack: rate limits, outages, refusals.

async fn with_failing_slack(fault: &'static str, answer: ResponseTemplate) -> (World, Observed) {
    with_slack_failing_times(fault, answer, 1).await
}

async fn with_slack_failing_times(fault: &'static str, answer: ResponseTemplate, times: u64) -> (World, Observed) {
    let llm = model(completion(ANSWER, "stop")).await;
    let mut world = World::start(&[], client(&llm, Duration::from_secs(30))).await;
    fail_slack(&world.w.slack_api, "/chat.postMessage", answer, times).await;
    world.mention(0).await;
    world.run(300.0).await;
    let observed = world.observe(fault, &llm).await;
    (world, observed)
}

async fn short_rate_limit() -> Observed {
    let (world, observed) = with_failing_slack(
        "Slack answers 429 with `Retry-After: 1`",
        ResponseTemplate::new(429).insert_header("retry-after", "1"),
    )
    .await;
    assert_eq!(observed.posts, [ANSWER]);
    assert_eq!(observed.post_calls, 2, "waited out within the delivery");
    assert_eq!(observed.lookups, 0, "the 429 said nothing was posted, and no delivery failed");
    assert_eq!(observed.failed_deliveries, 0);
    assert_eq!(world.responded(), 1);
    observed
}

#[tokio::test]
async fn a_short_rate_limit_is_waited_out_within_the_delivery() {
    short_rate_limit().await;
}

/// Five short limits in a row are ridden out in about five seconds inside the one
/// delivery, not after a failed delivery's redelivery delay (or the visibility timeout).
async fn short_rate_limits_in_a_row() -> Observed {
    let started = std::time::Instant::now();
    let (world, observed) = with_slack_failing_times(
        "Slack answers 429 with `Retry-After: 1` five times in a row",
        ResponseTemplate::new(429).insert_header("retry-after", "1"),
        5,
    )
    .await;
    assert!(started.elapsed() >= Duration::from_secs(5), "each Retry-After was honoured");
    assert_eq!(observed.posts, [ANSWER]);
    assert_eq!(observed.post_calls, 6, "five 429s, then the post, all in one delivery");
    assert_eq!(observed.lookups, 0, "no delivery failed, so none looked for an earlier post");
    assert_eq!(observed.failed_deliveries, 0);
    assert_eq!(world.responded(), 1);
    observed
}

#[tokio::test]
async fn short_rate_limits_in_a_row_are_waited_out_within_the_delivery() {
    short_rate_limits_in_a_row().await;
}

async fn retried_slack_faults() -> Vec<Observed> {
    let cases = [
        ("Slack answers 429 with `Retry-After: 120`", ResponseTemplate::new(429).insert_header("retry-after", "120")),
        ("Slack answers HTTP 500", ResponseTemplate::new(500)),
        (
            "Slack answers `ok: false` `ratelimited`",
            ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "ratelimited"})),
        ),
        (
            "Slack answers `ok: false` `internal_error`",
            ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "internal_error"})),
        ),
        (
            "Slack answers `ok: false` `service_unavailable`",
            ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "service_unavailable"})),
        ),
    ];
    let mut rows = Vec::new();
    for (fault, answer) in cases {
        let (world, observed) = with_failing_slack(fault, answer).await;
        assert_eq!(observed.posts, [ANSWER], "{fault}");
        assert_eq!(observed.post_calls, 2, "{fault}: the failed call and one retry");
        assert_eq!(observed.lookups, 1, "{fault}: the retry looked for an earlier post first");
        assert_eq!(world.responded(), 1, "{fault}");
        assert_eq!(observed.dead_letters, 0, "{fault}");
        assert_eq!(observed.failed_deliveries, 1, "{fault}: the first delivery failed and was retried");
        rows.push(observed);
    }
    rows
}

#[tokio::test]
async fn a_long_rate_limit_an_outage_or_a_transient_refusal_is_retried_into_one_post() {
    retried_slack_faults().await;
}

async fn permanent_refusal() -> Observed {
    let answer = ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "channel_not_found"}));
    let (world, observed) = with_failing_slack("Slack answers `ok: false` `channel_not_found`", answer).await;
    assert!(observed.posts.is_empty());
    assert_eq!(observed.post_calls, 1, "not retried");
    assert_eq!(observed.failed_deliveries, 0, "given up within the delivery");
    let failed =
        world.kinds(|k| matches!(k, EventKind::RespondFailed { reason, .. } if reason.contains("channel_not_found")));
    assert_eq!(failed.len(), 1);
    observed
}

#[tokio::test]
async fn a_permanent_refusal_is_given_up_and_logged_without_retries() {
    permanent_refusal().await;
}

// ---------------------------------------------------------------------------------
// kuuki serve: slow generations hold their own pool, not everyone's.

#[tokio::test]
async fn stuck_generations_never_hold_up_a_reaction_or_a_judgment_elsewhere() {
    use kuuki::domain::ChannelId;
    use kuuki::worker::Pool;
    // Every generation hangs: the model takes a minute for each.
    let llm = model(completion(ANSWER, "stop").set_delay(Duration::from_secs(60))).await;
    let world = World::start(&[], client(&llm, Duration::from_secs(120))).await;
    let stuck = Pool::RespondDirect.slots() + 4;
    for n in 0..stuck {
        let ts = world.w.ts(0, n as u32 + 1);
        let mention = message(&format!("C{n}"), "UALICE", "<@UKUUKI> how do I deploy?", &ts);
        assert_eq!(world.w.send_event(mention, &[]).await.status(), 200);
    }
    let workers = tokio::spawn(kuuki::worker::run_forever(world.w.deps.clone(), world.w.queue.clone()));
    for _ in 0..500 {
        if requests(&llm).await >= Pool::RespondDirect.slots() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(requests(&llm).await, Pool::RespondDirect.slots(), "every direct-answer slot waits for the model");
    // Now a message elsewhere, to be answered with a reaction, and to be judged.
    let quiet = world.w.ts(0, 100);
    let quiet_message = message("CQUIET", "UBOB", "shipped the fix 🎉", &quiet);
    assert_eq!(world.w.send_event(quiet_message, &[]).await.status(), 200);
    let react = Job::Respond {
        thread: ThreadKey::top_level(ChannelId("CQUIET".into())),
        ts: Ts::new(&quiet),
        mode: RespondMode::Ambient,
        response_type: ResponseType::ReactOnly,
        emoji: Some("tada".into()),
    };
    let judge = Job::Judge { thread: ThreadKey::top_level(ChannelId("CQUIET".into())), ts: Ts::new(&quiet) };
    world.w.deps.queue.enqueue(react, Duration::ZERO).await.unwrap();
    world.w.deps.queue.enqueue(judge, Duration::ZERO).await.unwrap();
    let mut reacted = false;
    let mut judged = false;
    for _ in 0..500 {
        reacted |= world.slack_calls("reactions.add").await == 1;
        judged |= world.w.log.take().iter().any(|e| matches!(e.kind, EventKind::Judge { .. }));
        if reacted && judged {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let generating = requests(&llm).await;
    workers.abort();
    assert!(reacted, "the reaction was added");
    assert!(judged, "the judgment ran");
    assert_eq!(generating, Pool::RespondDirect.slots(), "while every direct-answer slot waited for the model");
    assert!(world.slack.posts().is_empty(), "and no generation had finished");
}

// ---------------------------------------------------------------------------------
// The queue: a poison message fails alone.

/// A stored mention whose RESPOND job is taken off the in-process queue, to come in a
/// batch instead (an SQS record).
async fn a_mention_to_batch() -> (MockServer, World, String) {
    use kuuki::adapters::aws::sqs::encode_job;
    let llm = model(completion(ANSWER, "stop")).await;
    let world = World::start(&[], client(&llm, Duration::from_secs(30))).await;
    let ts = world.w.ts(0, 1);
    let response = world.w.send_event(message(CH, "UALICE", "<@UKUUKI> how do I deploy?", &ts), &[]).await;
    assert_eq!(response.status(), 200);
    if let Some(own_job) = world.w.queue.pop_due(world.w.clock.now()) {
        world.w.queue.ack(&own_job);
    }
    let job = Job::Respond {
        thread: ThreadKey::top_level(kuuki::domain::ChannelId(CH.into())),
        ts: Ts::new(&ts),
        mode: RespondMode::Direct,
        response_type: ResponseType::FullResponse,
        emoji: None,
    };
    (llm, world, encode_job(&job))
}

async fn poison_message() -> Observed {
    use kuuki::adapters::aws::sqs::queue_message;
    use kuuki::budget::JobKind;
    use kuuki::worker::run_batch;
    let (llm, world, job) = a_mention_to_batch().await;
    let batch = [
        queue_message("poison".into(), "{\"v\": 1, \"job\": \"launch_missiles\"}", Some("1")),
        queue_message("good".into(), &job, Some("1")),
        queue_message("garbage".into(), "not json", None),
    ];
    let failed = run_batch(&world.w.deps, JobKind::Respond, &batch, world.w.deps.budget.job_deadline()).await;
    let failed: Vec<_> = failed.iter().map(|f| (f.id.as_str(), f.retry_after)).collect();
    // They wait the visibility timeout each time: a newer build being deployed may read them.
    assert_eq!(
        failed,
        [("poison", None), ("garbage", None)],
        "only the poison messages fail (and reach the dead letters on SQS)"
    );
    assert_eq!(world.slack.texts(), [ANSWER]);
    world.observe("a poison message in an SQS batch beside a good one", &llm).await
}

#[tokio::test]
async fn a_poison_queue_message_fails_alone() {
    poison_message().await;
}

/// Each worker Lambda runs only its own kind of job: a RESPOND job on another worker's
/// queue fails (to that queue's dead letters) and posts nothing; the respond worker runs it.
#[tokio::test]
async fn a_job_on_another_workers_queue_fails_and_runs_nothing() {
    use kuuki::adapters::aws::sqs::queue_message;
    use kuuki::budget::JobKind;
    use kuuki::worker::run_batch;
    let (llm, world, job) = a_mention_to_batch().await;
    let batch = [queue_message("respond".into(), &job, None)];
    for other in [JobKind::Judge, JobKind::Summarize, JobKind::Reflect, JobKind::Forget] {
        let failed = run_batch(&world.w.deps, other, &batch, world.w.deps.budget.job_deadline()).await;
        assert_eq!(
            failed.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(),
            ["respond"],
            "the {} worker fails it",
            other.as_str()
        );
    }
    assert!(world.slack.posts().is_empty(), "nothing posted");
    assert!(llm.received_requests().await.unwrap_or_default().is_empty(), "no model asked");
    assert!(
        run_batch(&world.w.deps, JobKind::Respond, &batch, world.w.deps.budget.job_deadline()).await.is_empty(),
        "the respond worker runs it"
    );
    assert_eq!(world.slack.texts(), [ANSWER]);
}

// ---------------------------------------------------------------------------------
// The table in docs/faults.md is what these faults end with.

#[tokio::test]
async fn the_faults_page_lists_every_fault_with_what_it_ended_with() {
    let mut rows = vec![
        worker_killed_mid_generation().await,
        two_deliveries_at_once().await,
        post_answer_lost().await,
        throttled_after_the_post().await,
        throttled_at_ingress().await,
    ];
    let models = failing_models().await;
    rows.push(short_rate_limit().await);
    rows.push(short_rate_limits_in_a_row().await);
    rows.extend(retried_slack_faults().await);
    rows.push(permanent_refusal().await);
    rows.push(poison_message().await);
    let mut table = vec![
        "| fault (a direct mention unless said) | posted | `chat.postMessage` calls | lookups | model calls | dead letters |".to_owned(),
        "| --- | --- | --- | --- | --- | --- |".to_owned(),
    ];
    table.extend(rows.iter().map(Observed::row));
    for pair in models.chunks(2) {
        let (direct, ambient) = (&pair[0], &pair[1]);
        table.push(direct.row().replacen(direct.fault, &format!("{} (mention)", direct.fault), 1));
        table.push(ambient.row().replacen(ambient.fault, &format!("{} (ambient)", ambient.fault), 1));
    }
    let table = table.join("\n");
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/faults.md")).unwrap();
    assert!(page.contains(&table), "docs/faults.md's table of faults is out of date; this run observed:\n{table}");
}

// ---------------------------------------------------------------------------------
// Fault-injecting wrappers around the in-process store.

fn throttled() -> PortError {
    PortError::Backend {
        backend: "dynamodb",
        message: "ProvisionedThroughputExceededException: the level of configured provisioned throughput for the table was exceeded".into(),
    }
}

fn take_one(counter: &AtomicU32) -> bool {
    counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
}

/// A ledger whose next `complete_failures` completions are throttled.
struct ThrottlingLedger {
    inner: Arc<dyn Ledger>,
    complete_failures: Arc<AtomicU32>,
}

#[async_trait]
impl Ledger for ThrottlingLedger {
    async fn claim(&self, key: &str, now: Timestamp, lease: Duration) -> PortResult<ClaimOutcome> {
        self.inner.claim(key, now, lease).await
    }
    async fn mark_posting(&self, key: &str) -> PortResult<()> {
        self.inner.mark_posting(key).await
    }
    async fn complete(&self, key: &str, now: Timestamp, keep: Duration) -> PortResult<()> {
        if key.starts_with("respond:") && take_one(&self.complete_failures) {
            return Err(throttled());
        }
        self.inner.complete(key, now, keep).await
    }
    async fn release(&self, key: &str) -> PortResult<()> {
        self.inner.release(key).await
    }
    async fn cache_get(&self, key: &str, now: Timestamp) -> PortResult<Option<String>> {
        self.inner.cache_get(key, now).await
    }
    async fn cache_put(&self, key: &str, value: &str, until: Timestamp) -> PortResult<()> {
        self.inner.cache_put(key, value, until).await
    }
}

/// A message store whose next `put_failures` puts are throttled.
struct ThrottlingMessages {
    inner: Arc<dyn MessageStore>,
    put_failures: Arc<AtomicU32>,
}

#[async_trait]
impl MessageStore for ThrottlingMessages {
    async fn put_message(&self, message: &std::sync::Arc<Message>) -> PortResult<PutOutcome> {
        if take_one(&self.put_failures) {
            return Err(throttled());
        }
        self.inner.put_message(message).await
    }
    async fn get_message(
        &self,
        channel: &kuuki::domain::ChannelId,
        ts: &Ts,
    ) -> PortResult<Option<std::sync::Arc<Message>>> {
        self.inner.get_message(channel, ts).await
    }
    async fn update_text(&self, channel: &kuuki::domain::ChannelId, ts: &Ts, text: &str) -> PortResult<bool> {
        self.inner.update_text(channel, ts, text).await
    }
    async fn delete_message(&self, channel: &kuuki::domain::ChannelId, ts: &Ts) -> PortResult<bool> {
        self.inner.delete_message(channel, ts).await
    }
    async fn recent_in_thread(
        &self,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<std::sync::Arc<Message>>> {
        self.inner.recent_in_thread(thread, since, limit).await
    }
    async fn recent_in_channel(
        &self,
        channel: &kuuki::domain::ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<std::sync::Arc<Message>>> {
        self.inner.recent_in_channel(channel, since, limit).await
    }
    async fn messages_after(
        &self,
        channel: &kuuki::domain::ChannelId,
        after: Option<&Ts>,
        limit: usize,
    ) -> PortResult<Vec<std::sync::Arc<Message>>> {
        self.inner.messages_after(channel, after, limit).await
    }
    async fn channel_window(
        &self,
        channel: &kuuki::domain::ChannelId,
        limit: usize,
    ) -> PortResult<kuuki::ports::ChannelWindow> {
        self.inner.channel_window(channel, limit).await
    }
    async fn channel_window_before(
        &self,
        channel: &kuuki::domain::ChannelId,
        before: &Ts,
        limit: usize,
    ) -> PortResult<kuuki::ports::ChannelWindow> {
        self.inner.channel_window_before(channel, before, limit).await
    }
    async fn previous_in_channel(
        &self,
        channel: &kuuki::domain::ChannelId,
        before: &Ts,
    ) -> PortResult<Option<std::sync::Arc<Message>>> {
        self.inner.previous_in_channel(channel, before).await
    }
    async fn delete_messages_by(
        &self,
        channel: &kuuki::domain::ChannelId,
        user: &kuuki::domain::UserId,
        posted_before: Option<kuuki::domain::Timestamp>,
    ) -> PortResult<usize> {
        self.inner.delete_messages_by(channel, user, posted_before).await
    }
    async fn message_channels(&self) -> PortResult<Vec<kuuki::domain::ChannelId>> {
        self.inner.message_channels().await
    }
    async fn delete_channel_messages(&self, channel: &kuuki::domain::ChannelId) -> PortResult<usize> {
        self.inner.delete_channel_messages(channel).await
    }
}
