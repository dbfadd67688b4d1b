//! Vector fact search over real HTTP: the OpenAI-compatible `/embeddings` adapter
//! against a fake server, and the pipeline with a fake model and a fake embedder (one
//! that knows deploys and releases are the same thing, where keywords cannot).

use std::sync::Arc;
use std::time::Duration;

use kuuki::adapters::llm::{HttpPolicy, OpenAiCompatible, OpenAiEmbeddings};
use kuuki::adapters::memory::ChatCall;
use kuuki::domain::{ChannelId, EventKind};
use kuuki::ingest::Incoming;
use kuuki::ports::{Embedder, FactStore, LlmError};
use kuuki_e2e::harness::Harness;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY: &str = "sk-vector-secret";

fn policy(max_retries: u32) -> HttpPolicy {
    HttpPolicy {
        timeout: Duration::from_millis(800),
        max_retries,
        backoff: Duration::from_millis(10),
        max_retry_wait: Duration::from_secs(1),
    }
}

fn embedder(server: &MockServer, max_retries: u32) -> OpenAiEmbeddings {
    OpenAiEmbeddings::new(&format!("{}/v1/", server.uri()), KEY, "embed-model", policy(max_retries))
}

async fn requests_to(server: &MockServer, route: &str) -> Vec<Value> {
    let received = server.received_requests().await.unwrap();
    received.iter().filter(|r| r.url.path() == route).map(|r| serde_json::from_slice(&r.body).unwrap()).collect()
}

fn texts(list: &[&str]) -> Vec<String> {
    list.iter().map(|t| t.to_string()).collect()
}

#[tokio::test]
async fn the_embeddings_adapter_batches_texts_and_reads_vectors_by_index() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            // Out of order: the index says which text each vector is for.
            "data": [
                {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
                {"object": "embedding", "index": 0, "embedding": [0.5, -0.5]},
            ],
            "model": "embed-model",
            "usage": {"prompt_tokens": 8, "total_tokens": 8},
        })))
        .mount(&server)
        .await;
    let vectors = embedder(&server, 0).embed(&texts(&["deploy on Friday", "lunch is curry"])).await.unwrap();
    assert_eq!(vectors, vec![vec![0.5, -0.5], vec![0.0, 1.0]]);
    let sent = requests_to(&server, "/v1/embeddings").await;
    assert_eq!(sent, vec![json!({"model": "embed-model", "input": ["deploy on Friday", "lunch is curry"]})]);
    assert_eq!(embedder(&server, 0).embed(&[]).await.unwrap(), Vec::<Vec<f32>>::new());
    assert_eq!(requests_to(&server, "/v1/embeddings").await.len(), 1, "nothing to embed, no call");
}

#[tokio::test]
async fn embedding_errors_are_retried_like_chat_calls_and_never_show_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    // A server that echoes the key in its complaint.
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_json(json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}})),
        )
        .mount(&server)
        .await;
    let one = texts(&["deploy"]);
    assert_eq!(embedder(&server, 1).embed(&one).await.unwrap(), vec![vec![1.0, 0.0]], "a 503 is tried again");
    let LlmError::Failed(error) = embedder(&server, 3).embed(&one).await.unwrap_err() else { panic!("a failed call") };
    assert!(error.contains("401") && error.contains("Incorrect API key"), "{error}");
    assert!(!error.contains(KEY), "the key leaked: {error}");
    assert_eq!(requests_to(&server, "/v1/embeddings").await.len(), 3, "a 401 is not tried again");
}

#[tokio::test]
async fn an_answer_with_the_wrong_number_of_vectors_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]})),
        )
        .mount(&server)
        .await;
    let error = embedder(&server, 0).embed(&texts(&["a deploy", "a lunch"])).await.unwrap_err();
    assert!(error.to_string().contains("asked for 2 vectors"), "{error}");
}

/// A fake embedding model that knows meaning the keywords cannot see: deploys and
/// releases point one way, lunch another, anything else a third.
struct MeaningfulEmbeddings;

impl Respond for MeaningfulEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let text = text.as_str().unwrap().to_lowercase();
                let embedding = if text.contains("deploy") || text.contains("release") {
                    [1.0, 0.05, 0.0]
                } else if text.contains("lunch") || text.contains("curry") {
                    [0.0, 0.05, 1.0]
                } else {
                    [0.0, 1.0, 0.0]
                };
                json!({"object": "embedding", "index": index, "embedding": embedding})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": data}))
    }
}

const DEPLOY_FACT: &str = "Deploys go out on Friday afternoons";
const LUNCH_FACT: &str = "Lunch is curry on Mondays";
const REPLY: &str = "Friday afternoon, as usual.";

/// A fake chat model: the judge stays quiet, reflection finds two facts, the writer
/// answers; anything else (summaries) gets prose, which changes nothing.
struct FakeModel;

impl Respond for FakeModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let messages = body["messages"].as_array().unwrap();
        let prompt = messages.iter().map(|m| m["content"].as_str().unwrap_or_default()).collect::<Vec<_>>().join("\n");
        let text = if prompt.contains("should_respond") {
            json!({"should_respond": false, "reason": "people are talking", "confidence": 0.9}).to_string()
        } else if prompt.contains("## The message you answer") {
            REPLY.to_owned()
        } else if prompt.contains(r#"{"facts": ["#) {
            json!({"facts": [
                {"content": DEPLOY_FACT, "keywords": ["deploys", "friday"], "source_users": ["alice"], "confidence": 0.9},
                {"content": LUNCH_FACT, "keywords": ["lunch", "curry"], "source_users": ["bob"], "confidence": 0.9},
            ], "profiles": []})
            .to_string()
        } else {
            "nothing to say".to_owned()
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }))
    }
}

/// The prompts the writer was given.
async fn generate_prompts(server: &MockServer) -> Vec<String> {
    requests_to(server, "/v1/chat/completions")
        .await
        .iter()
        .filter_map(|b| b["messages"][1]["content"].as_str().map(str::to_owned))
        .filter(|user| user.contains("## The message you answer"))
        .collect()
}

/// Alice and Bob talk, fall quiet (a reflection), then Carol asks kuuki `question`;
/// with the embedder `embeddings` serves, or none (vector search off).
async fn talk_then_ask(server: &MockServer, question: &str, vector_search: bool) -> Harness {
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(FakeModel).mount(server).await;
    let llm = OpenAiCompatible::new(&format!("{}/v1", server.uri()), KEY, policy(0));
    let settings = [
        ("PROMPT_LANGUAGE", "en"),
        ("REFLECTION_MIN_MESSAGES", "3"),
        ("REFLECTION_LULL_MINUTES", "1"),
        ("JUDGE_JITTER_RATIO", "0"),
    ];
    let mut h = Harness::with_llm(&settings, Some(Arc::new(llm)));
    if vector_search {
        h.deps.embedder = Some(Arc::new(embedder(server, 0)));
    }
    for (secs, user, text) in [
        (0.0, "alice", "the deploy goes out on Friday afternoons"),
        (30.0, "bob", "and lunch is curry on Mondays, by the way"),
        (60.0, "alice", "good to know"),
    ] {
        h.ingest(Incoming::Message(h.message(secs, user, text, None))).await;
        h.run_until(secs + 10.0).await;
    }
    h.run_until(400.0).await;
    h.ingest(Incoming::Message(h.message(600.0, "carol", question, None))).await;
    h.run_until(700.0).await;
    h
}

fn reflections(events: &[kuuki::domain::Event]) -> Vec<(usize, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Reflect { facts_new, embedding_error, .. } => Some((*facts_new, embedding_error.clone())),
            _ => None,
        })
        .collect()
}

fn posted(h: &Harness) -> Vec<String> {
    h.chat
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            ChatCall::Post { post, .. } => Some(post.text),
            _ => None,
        })
        .collect()
}

/// "release" shares no keyword with the deploy fact: only its meaning finds it.
const RELEASE_QUESTION: &str = "<@UBOT> when does the release ship?";

#[tokio::test]
async fn reflection_stores_embeddings_and_a_reply_is_given_the_fact_close_in_meaning() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/embeddings")).respond_with(MeaningfulEmbeddings).mount(&server).await;
    let h = talk_then_ask(&server, RELEASE_QUESTION, true).await;
    let events = h.events();
    assert_eq!(reflections(&events), vec![(2, None)], "{events:#?}");
    let mut facts = h.store.facts(&ChannelId("general".into())).await.unwrap();
    facts.sort_by(|a, b| a.content.cmp(&b.content));
    let stored: Vec<(&str, Option<Vec<f32>>)> =
        facts.iter().map(|f| (f.content.as_str(), f.embedding.clone())).collect();
    assert_eq!(
        stored,
        vec![(DEPLOY_FACT, Some(vec![1.0, 0.05, 0.0])), (LUNCH_FACT, Some(vec![0.0, 0.05, 1.0]))],
        "both facts stored with their embeddings"
    );
    // One call for the reflection's two facts, one for the message answered; none for
    // the messages only judged.
    let calls = requests_to(&server, "/v1/embeddings").await;
    assert_eq!(
        calls,
        vec![
            json!({"model": "embed-model", "input": [DEPLOY_FACT, LUNCH_FACT]}),
            json!({"model": "embed-model", "input": [RELEASE_QUESTION]}),
        ]
    );
    let prompts = generate_prompts(&server).await;
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0].contains(&format!("- {DEPLOY_FACT}")), "the vector-matched fact: {}", prompts[0]);
    assert!(!prompts[0].contains(LUNCH_FACT), "an unrelated fact stays out: {}", prompts[0]);
    assert_eq!(posted(&h), vec![REPLY]);
}

#[tokio::test]
async fn with_vector_search_off_the_same_question_finds_no_fact_and_nothing_is_embedded() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/embeddings")).respond_with(MeaningfulEmbeddings).mount(&server).await;
    let h = talk_then_ask(&server, RELEASE_QUESTION, false).await;
    assert_eq!(reflections(&h.events()), vec![(2, None)]);
    let facts = h.store.facts(&ChannelId("general".into())).await.unwrap();
    assert_eq!(facts.len(), 2);
    assert!(facts.iter().all(|f| f.embedding.is_none()));
    assert!(requests_to(&server, "/v1/embeddings").await.is_empty());
    let prompts = generate_prompts(&server).await;
    assert_eq!(prompts.len(), 1);
    assert!(!prompts[0].contains(DEPLOY_FACT), "keywords alone do not find it: {}", prompts[0]);
    assert_eq!(posted(&h), vec![REPLY]);
}

#[tokio::test]
async fn a_failing_embedder_loses_no_fact_and_no_reply() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(500).set_body_string("model overloaded"))
        .mount(&server)
        .await;
    // Shares "deploys" with the deploy fact: keywords find it without a vector.
    let question = "<@UBOT> any deploys this week?";
    let h = talk_then_ask(&server, question, true).await;
    let events = h.events();
    let reflected = reflections(&events);
    assert_eq!(reflected.len(), 1, "{events:#?}");
    assert_eq!(reflected[0].0, 2, "both facts learned");
    let error = reflected[0].1.as_deref().expect("the failed embedding is logged");
    assert!(error.contains("500") && error.contains("model overloaded"), "{error}");
    let facts = h.store.facts(&ChannelId("general".into())).await.unwrap();
    assert_eq!(facts.len(), 2, "stored without embeddings");
    assert!(facts.iter().all(|f| f.embedding.is_none()));
    // The reflection tried once; the reply did not try at all: no fact has an embedding.
    assert_eq!(requests_to(&server, "/v1/embeddings").await.len(), 1);
    let prompts = generate_prompts(&server).await;
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0].contains(&format!("- {DEPLOY_FACT}")), "found by keywords: {}", prompts[0]);
    assert_eq!(posted(&h), vec![REPLY]);
}

#[tokio::test]
async fn a_reply_whose_message_cannot_be_embedded_still_searches_by_keywords() {
    let server = MockServer::start().await;
    // The reflection's call succeeds; the reply's fails.
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(MeaningfulEmbeddings)
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let h = talk_then_ask(&server, "<@UBOT> any deploys this week?", true).await;
    let facts = h.store.facts(&ChannelId("general".into())).await.unwrap();
    assert!(facts.iter().all(|f| f.embedding.is_some()));
    assert_eq!(requests_to(&server, "/v1/embeddings").await.len(), 2);
    let prompts = generate_prompts(&server).await;
    assert!(prompts[0].contains(&format!("- {DEPLOY_FACT}")), "found by keywords: {}", prompts[0]);
    assert_eq!(posted(&h), vec![REPLY]);
}
