//! The HTTP model providers against local fake servers over real HTTP: what they send,
//! what they make of good and bad answers, and how they retry.

use std::sync::Arc;
use std::time::Duration;

use kuuki::adapters::llm::{Anthropic, HttpPolicy, OpenAiCompatible};
use kuuki::ports::{Llm, LlmRequest, LlmRole};
use kuuki_e2e::Run;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn policy(max_retries: u32) -> HttpPolicy {
    HttpPolicy {
        timeout: Duration::from_millis(800),
        max_retries,
        backoff: Duration::from_millis(10),
        max_retry_wait: Duration::from_secs(2),
    }
}

fn request(role: LlmRole) -> LlmRequest {
    LlmRequest {
        role,
        model: "judge-model".into(),
        system: "You are kuuki. <conversation>alice: hi</conversation>".into(),
        max_tokens: 300,
        subject: "hi".into(),
    }
}

fn openai_answer(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "judge-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    })
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server.received_requests().await.unwrap().iter().map(|r| serde_json::from_slice(&r.body).unwrap()).collect()
}

#[tokio::test]
async fn openai_compatible_sends_one_system_prompt_and_reads_text_and_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("hello")))
        .mount(&server)
        .await;
    let llm = OpenAiCompatible::new(&format!("{}/v1/", server.uri()), "sk-test", policy(0));
    let answer = llm.complete(request(LlmRole::Judge)).await.unwrap();
    assert_eq!(answer.text, "hello");
    assert_eq!((answer.usage.input_tokens, answer.usage.output_tokens), (120, 30));
    let sent = &bodies(&server).await[0];
    assert_eq!(sent["model"], "judge-model");
    assert_eq!(sent["max_tokens"], 300);
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(sent["messages"][0]["content"], "You are kuuki. <conversation>alice: hi</conversation>");
    assert_eq!(sent["messages"].as_array().unwrap().len(), 2, "the system prompt and one fixed user line");
}

#[tokio::test]
async fn a_keyless_local_server_gets_no_authorization_header() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("ok")))
        .mount(&server)
        .await;
    let llm = OpenAiCompatible::new(&server.uri(), "", policy(0));
    llm.complete(request(LlmRole::Generate)).await.unwrap();
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn anthropic_sends_the_system_field_and_joins_text_blocks() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "ak-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [{"type": "text", "text": "こんにちは"}, {"type": "text", "text": "！"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 200, "output_tokens": 12},
        })))
        .mount(&server)
        .await;
    let llm = Anthropic::new(&server.uri(), "ak-test", policy(0));
    let answer = llm.complete(request(LlmRole::Generate)).await.unwrap();
    assert_eq!(answer.text, "こんにちは！");
    assert_eq!((answer.usage.input_tokens, answer.usage.output_tokens), (200, 12));
    let sent = &bodies(&server).await[0];
    assert_eq!(sent["system"], "You are kuuki. <conversation>alice: hi</conversation>");
    assert_eq!(sent["messages"][0]["role"], "user");
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_retried_with_backoff() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("overloaded"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("finally")))
        .mount(&server)
        .await;
    let llm = OpenAiCompatible::new(&server.uri(), "k", policy(2));
    let started = std::time::Instant::now();
    assert_eq!(llm.complete(request(LlmRole::Judge)).await.unwrap().text, "finally");
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After was honoured");
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn retries_are_bounded_and_client_errors_are_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(503)).mount(&server).await;
    let llm = OpenAiCompatible::new(&server.uri(), "k", policy(2));
    let error = llm.complete(request(LlmRole::Judge)).await.unwrap_err().to_string();
    assert!(error.contains("503") && error.contains("after 3 attempts"), "{error}");
    assert_eq!(server.received_requests().await.unwrap().len(), 3);

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_string("bad key"))
        .mount(&server)
        .await;
    let llm = Anthropic::new(&server.uri(), "k", policy(2));
    let error = llm.complete(request(LlmRole::Judge)).await.unwrap_err().to_string();
    assert!(error.contains("401"), "{error}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_slow_model_times_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("late")).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let llm = OpenAiCompatible::new(&server.uri(), "k", policy(1));
    let error = llm.complete(request(LlmRole::Judge)).await.unwrap_err().to_string();
    assert!(error.contains("timed out") && error.contains("after 2 attempts"), "{error}");
}

/// The whole pipeline with the OpenAI-compatible provider: the judge's JSON decides,
/// prose means "do not respond".
#[test]
fn replay_with_a_real_provider_judges_and_writes_through_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start());
    let judge = r#"{"should_respond": true, "reason": "a question nobody answered", "confidence": 0.8, "delay_seconds": 5, "response_type": "full_response", "conversation_state": "active"}"#;
    runtime.block_on(async {
        Mock::given(method("POST"))
            .and(wiremock::matchers::body_string_contains("should_respond"))
            .and(wiremock::matchers::body_string_contains("json-please"))
            .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(&format!("```json\n{judge}\n```"))))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(wiremock::matchers::body_string_contains("should_respond"))
            .and(wiremock::matchers::body_string_contains("prose-please"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(openai_answer("I think kuuki should answer this one!")),
            )
            .mount(&server)
            .await;
    });
    let llm: Arc<dyn Llm> = Arc::new(OpenAiCompatible::new(&server.uri(), "k", policy(0)));
    let transcript = r#"{"t": 0, "user": "alice", "text": "json-please: CI が落ちる、誰かわかる？"}
{"t": 600, "user": "bob", "text": "prose-please: CI の設定どこ？", "channel": "other"}"#;
    // Writing: answer anything that is not a judge call with a plain reply.
    runtime.block_on(
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("見てみますね")))
            .mount(&server),
    );
    let log = Run::new(transcript).llm(llm).settings(&[("BOT_TOPICS", "CI")]).log();
    // Each question first waits for people to answer (unanswered_question).
    let first = *log.about("judge", 0.0).last().expect("judged");
    assert_eq!(first["llm_called"], true);
    assert_eq!(first["respond"], true, "{log:?}");
    let answer = log.about("respond", 0.0)[0];
    assert_eq!(answer["text"], "見てみますね");
    let second = *log.about("judge", 600.0).last().expect("judged");
    assert_eq!(second["respond"], false);
    assert!(second["llm_error"].as_str().unwrap().contains("not JSON"), "{second}");
    assert!(log.about("respond", 600.0).is_empty());
    // Each channel is summarized 15 minutes on; this fake answers prose, so neither is used.
    assert_eq!(log.stats()["llm_calls"], json!({"judge": 2, "generate": 1, "summarize": 2, "reflect": 0}));
    assert_eq!(log.kind("dropped").len(), 2, "unusable summaries change nothing: {log:?}");
    assert!(log.stats()["llm_tokens"]["judge"].as_u64().unwrap() == 300, "usage from the provider: {}", log.stats());
}
