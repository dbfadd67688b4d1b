//! kuuki as a Slack app over real HTTP: signed Events API and slash-command requests
//! in, the Web API calls out (to a fake Slack that records them).

use kuuki::domain::{Author, ChannelId, EventKind, Ts, Workspace};
use kuuki::ports::{Clock, MessageStore};
use kuuki_e2e::slack_world::{BOT_ID, BOT_USER, SlackWorld, envelope, message};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, ResponseTemplate};

const CH: &str = "C0GENERAL";

async fn stored(world: &SlackWorld, ts: &str) -> Option<std::sync::Arc<kuuki::domain::Message>> {
    world.store.get_message(&ChannelId(CH.into()), &Ts::new(ts)).await.unwrap()
}

fn app_mention(user: &str, text: &str, ts: &str) -> Value {
    json!({"type": "app_mention", "channel": CH, "user": user, "text": text, "ts": ts, "event_ts": ts, "team": "T0TEAM"})
}

#[tokio::test]
async fn the_url_check_is_answered_with_its_challenge() {
    let w = SlackWorld::start(&[], true).await;
    let body = json!({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
    let response = w.post_signed("/slack/events", &body.to_string(), &[]).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["challenge"], "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
}

/// A Lambda Function URL ends in "/": pasted with `/slack/events` after it, Slack calls
/// `//slack/events`, and its URL check and events must still arrive.
#[tokio::test]
async fn a_doubled_leading_slash_reaches_the_same_routes() {
    let w = SlackWorld::start(&[], true).await;
    let body = json!({"token": "x", "challenge": "doubled-slash-challenge", "type": "url_verification"});
    let response = w.post_signed("//slack/events", &body.to_string(), &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["challenge"], "doubled-slash-challenge");
    let event = envelope(message(CH, "UALICE", "hello from a doubled slash", &w.ts(0, 1))).to_string();
    assert_eq!(w.post_signed("//slack/events", &event, &[]).await.status(), 200);
    assert_eq!(stored(&w, &w.ts(0, 1)).await.expect("stored").text, "hello from a doubled slash");
    // Only leading slashes are forgiven: another path is still unknown.
    assert_eq!(w.post_signed("//slack//events", &event, &[]).await.status(), 404);
}

#[tokio::test]
async fn bad_stale_or_missing_signatures_are_refused_and_change_nothing() {
    let w = SlackWorld::start(&[], true).await;
    let body = envelope(message(CH, "UALICE", "<@UKUUKI> hi", &w.ts(0, 1))).to_string();
    let now = w.now_secs().to_string();
    let good = w.secret.sign(&now, body.as_bytes());
    let stale_ts = (w.now_secs() - 301).to_string();
    let stale_sig = w.secret.sign(&stale_ts, body.as_bytes());
    let other = kuuki::adapters::slack::SigningSecret::new("not the secret").sign(&now, body.as_bytes());
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![("x-slack-request-timestamp", &now), ("x-slack-signature", &other)], "does not match"),
        (vec![("x-slack-request-timestamp", &stale_ts), ("x-slack-signature", &stale_sig)], "300 s"),
        (vec![("x-slack-request-timestamp", &now)], "X-Slack-Signature header is missing"),
        (vec![("x-slack-signature", &good)], "X-Slack-Request-Timestamp header is missing"),
        (vec![], "missing"),
    ];
    for (headers, reason) in cases {
        let response = w.post_raw("/slack/events", &body, &headers).await;
        assert_eq!(response.status(), 401, "{headers:?}");
        let text = response.text().await.unwrap();
        assert!(text.contains(reason), "{text}");
        assert!(!text.contains(&good[3..]), "the expected signature never leaves the server");
    }
    // A body changed after signing.
    let tampered = body.replace("hi", "hello");
    let response = w
        .post_raw("/slack/events", &tampered, &[("x-slack-request-timestamp", &now), ("x-slack-signature", &good)])
        .await;
    assert_eq!(response.status(), 401);
    assert!(stored(&w, &w.ts(0, 1)).await.is_none());
    assert!(w.queue.is_empty());
    assert!(w.events().is_empty());
    // The same request, properly signed, goes through.
    let response =
        w.post_raw("/slack/events", &body, &[("x-slack-request-timestamp", &now), ("x-slack-signature", &good)]).await;
    assert_eq!(response.status(), 200);
    assert!(stored(&w, &w.ts(0, 1)).await.is_some());
}

#[tokio::test]
async fn malformed_bodies_get_400_and_oversized_ones_413() {
    let w = SlackWorld::start(&[], true).await;
    for body in [
        "{not json".to_owned(),
        "[1, 2]".to_owned(),
        json!({"challenge": "no type"}).to_string(),
        json!({"type": "event_callback"}).to_string(),
        envelope(json!({"type": "message", "channel": CH, "text": "no ts", "user": "U1"})).to_string(),
    ] {
        let response = w.post_signed("/slack/events", &body, &[]).await;
        assert_eq!(response.status(), 400, "{body}");
        assert!(response.text().await.unwrap().contains("malformed"));
    }
    assert!(w.queue.is_empty() && w.events().is_empty());
    let huge = format!("{{\"type\": \"url_verification\", \"challenge\": \"{}\"}}", "x".repeat(1024 * 1024 + 1));
    let response = w.post_signed("/slack/events", &huge, &[]).await;
    assert_eq!(response.status(), 413);
}

/// A message event with `field` set to `bad`, built around a message stored at `good`.
fn with_bad_ts(field: &str, bad: &str, good: &str) -> Value {
    match field {
        "ts" => message(CH, "UALICE", "<@UKUUKI> hi", bad),
        "thread_ts" => {
            let mut reply = message(CH, "UALICE", "<@UKUUKI> in the thread", "1767603600.900001");
            reply["thread_ts"] = json!(bad);
            reply
        }
        "deleted_ts" => json!({
            "type": "message", "subtype": "message_deleted", "channel": CH, "hidden": true, "deleted_ts": bad,
            "ts": "1767603700.000001", "event_ts": "1767603700.000001",
            "previous_message": {"type": "message", "user": "UALICE", "text": "the original", "ts": good},
        }),
        "message.ts" => json!({
            "type": "message", "subtype": "message_changed", "channel": CH, "hidden": true,
            "ts": "1767603700.000001", "event_ts": "1767603700.000001",
            "message": {"type": "message", "user": "UALICE", "text": "rewritten", "ts": bad, "edited": {"user": "UALICE", "ts": "1767603700.000000"}},
            "previous_message": {"type": "message", "user": "UALICE", "text": "the original", "ts": good},
        }),
        _ => unreachable!("{field}"),
    }
}

#[tokio::test]
async fn a_message_whose_ts_is_not_a_slack_timestamp_is_refused_and_nothing_is_stored() {
    let w = SlackWorld::start(&[], true).await;
    let good = w.ts(0, 1);
    w.send_event(message(CH, "UALICE", "the original", &good), &[]).await;
    w.run_for(60.0).await;
    w.events();
    assert!(w.queue.is_empty(), "the original's work is done before the bad requests");
    for field in ["ts", "thread_ts", "deleted_ts", "message.ts"] {
        for bad in ["abc", "-5.1", "", "1e9", "12"] {
            let response = w.send_event(with_bad_ts(field, bad, &good), &[]).await;
            assert_eq!(response.status(), 400, "{field} {bad:?}");
            let reason = response.text().await.unwrap();
            assert!(reason.contains(&format!("{bad:?} is not a Slack timestamp")), "{field} {bad:?}: {reason}");
            assert!(stored(&w, bad).await.is_none(), "{field} {bad:?}");
        }
    }
    assert!(stored(&w, "1767603600.900001").await.is_none(), "the thread reply with a bad thread_ts");
    assert_eq!(stored(&w, &good).await.expect("not deleted").text, "the original", "not edited");
    assert!(w.queue.is_empty());
    assert!(w.events().is_empty());
}

#[tokio::test]
async fn a_message_changed_without_the_messages_ts_edits_by_the_previous_messages_ts() {
    let w = SlackWorld::start(&[], true).await;
    let ts = w.ts(0, 1);
    w.send_event(message(CH, "UALICE", "original message", &ts), &[]).await;
    // As Slack's Bolt for Python tests send it: the message has no ts of its own.
    let edit = json!({
        "type": "message", "subtype": "message_changed", "channel": CH, "hidden": true, "channel_type": "channel",
        "ts": w.ts(5, 1), "event_ts": w.ts(5, 1),
        "message": {"type": "message", "text": "updated message", "user": "UALICE", "team": "T0TEAM",
            "edited": {"user": "UALICE", "ts": w.ts(5, 0)},
            "blocks": [{"type": "rich_text", "block_id": "xwvU3", "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "updated message"}]}]}]},
        "previous_message": {"type": "message", "text": "original message", "user": "UALICE", "team": "T0TEAM", "ts": ts},
    });
    assert_eq!(w.send_event(edit, &[]).await.status(), 200);
    assert_eq!(stored(&w, &ts).await.unwrap().text, "updated message");
    let kinds: Vec<&str> = w.events().iter().map(|e| e.kind.name()).collect();
    assert_eq!(kinds, vec!["message", "edited"]);
}

#[tokio::test]
async fn a_signed_event_kuuki_cannot_use_is_acknowledged_and_nothing_is_stored() {
    let w = SlackWorld::start(&[], true).await;
    let ts = w.ts(0, 1);
    let no_channel = json!({"type": "message", "user": "UALICE", "text": "<@UKUUKI> where am I?", "ts": ts});
    let no_author = json!({"type": "message", "channel": CH, "text": "<@UKUUKI> who am I?", "ts": ts});
    let edit_without_message = json!({"type": "message", "subtype": "message_changed", "channel": CH, "ts": ts});
    let odd_channel =
        json!({"type": "app_mention", "channel": {"id": CH}, "user": "UALICE", "text": "<@UKUUKI> hi", "ts": ts});
    let no_type = json!({"channel": CH, "user": "UALICE", "text": "<@UKUUKI> hi", "ts": ts});
    for event in [no_channel, no_author, edit_without_message, odd_channel, no_type, json!("not an object")] {
        let response = w.send_event(event.clone(), &[]).await;
        assert_eq!(response.status(), 200, "{event}");
    }
    assert!(stored(&w, &ts).await.is_none());
    assert!(w.queue.is_empty());
    assert!(w.events().is_empty());
    // The same message, usable, is stored: the world was not refusing everything.
    let usable = message(CH, "UALICE", "<@UKUUKI> hi", &ts);
    assert_eq!(w.send_event(usable, &[]).await.status(), 200);
    assert!(stored(&w, &ts).await.is_some());
}

#[tokio::test]
async fn a_mention_delivered_twice_and_retried_is_stored_and_answered_once() {
    let w = SlackWorld::start(&[], true).await;
    let ts = w.ts(0, 100);
    // Subscribing to message.channels and app_mention delivers a mention twice.
    assert_eq!(w.send_event(message(CH, "UALICE", "<@UKUUKI> デプロイ手順どこ？", &ts), &[]).await.status(), 200);
    assert_eq!(w.send_event(app_mention("UALICE", "<@UKUUKI> デプロイ手順どこ？", &ts), &[]).await.status(), 200);
    // And Slack retries when an answer came late.
    let retry = [("x-slack-retry-num", "1"), ("x-slack-retry-reason", "http_timeout")];
    assert_eq!(w.send_event(message(CH, "UALICE", "<@UKUUKI> デプロイ手順どこ？", &ts), &retry).await.status(), 200);
    w.run_for(60.0).await;
    let posts = w.calls("chat.postMessage").await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["channel"], CH);
    assert!(posts[0].get("thread_ts").is_none(), "a top-level mention gets a top-level answer");
    assert!(posts[0]["text"].as_str().unwrap().contains("full_response"));
    let messages = w.events().into_iter().filter(|e| matches!(e.kind, EventKind::Message { .. })).count();
    assert_eq!(messages, 1, "three deliveries, one message");
    let own = stored(&w, "1767603600.500001").await.expect("kuuki's post is stored");
    assert_eq!(own.author, Author::OwnBot);
}

#[tokio::test]
async fn a_retry_after_a_lost_first_attempt_still_gets_its_work_done() {
    let w = SlackWorld::start(&[], true).await;
    let ts = w.ts(0, 200);
    // The first delivery stored the message but its job was lost (a crash between the
    // put and the send): store it directly, as that attempt did.
    let normalized = kuuki::adapters::slack::normalize(
        &serde_json::from_value(app_mention("UALICE", "<@UKUUKI> ping", &ts)).unwrap(),
        &kuuki::adapters::slack::SlackIdentity { user_id: BOT_USER.into(), bot_id: Some(BOT_ID.into()) },
    )
    .unwrap();
    let kuuki::adapters::slack::Normalized::Incoming(kuuki::ingest::Incoming::Message(m)) = normalized else {
        panic!()
    };
    w.store.put_message(&std::sync::Arc::new(m.clone())).await.unwrap();
    let retry = [("x-slack-retry-num", "1")];
    assert_eq!(w.send_event(app_mention("UALICE", "<@UKUUKI> ping", &ts), &retry).await.status(), 200);
    w.run_for(10.0).await;
    assert_eq!(w.calls("chat.postMessage").await.len(), 1, "the retry was processed, not dropped");
}

#[tokio::test]
async fn a_thread_mention_is_answered_in_the_thread() {
    let w = SlackWorld::start(&[], true).await;
    let root = w.ts(0, 1);
    w.send_event(message(CH, "UBOB", "deploy failed", &root), &[]).await;
    let mut reply = message(CH, "UALICE", "<@UKUUKI> any idea?", &w.ts(5, 1));
    reply["thread_ts"] = json!(root);
    reply["parent_user_id"] = json!("UBOB");
    w.send_event(reply, &[]).await;
    w.run_for(5.0).await;
    let posts = w.calls("chat.postMessage").await;
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0]["thread_ts"], root.as_str());
    let stored_reply = stored(&w, &w.ts(5, 1)).await.unwrap();
    assert_eq!(stored_reply.thread_root, Some(Ts::new(&root)), "thread_ts != ts is a thread reply");
}

#[tokio::test]
async fn replies_under_kuukis_message_and_direct_messages_are_direct_triggers() {
    let w = SlackWorld::start(&[], true).await;
    let mut reply = message(CH, "UALICE", "thanks, and the staging one?", &w.ts(0, 1));
    reply["thread_ts"] = json!("1767600000.000001");
    reply["parent_user_id"] = json!(BOT_USER);
    w.send_event(reply, &[]).await;
    let mut dm = message("D0ALICE", "UALICE", "hey, quick question", &w.ts(1, 1));
    dm["channel_type"] = json!("im");
    w.send_event(dm, &[]).await;
    w.run_for(2.0).await;
    let posts = w.calls("chat.postMessage").await;
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert_eq!(posts[0]["thread_ts"], "1767600000.000001");
    assert_eq!(posts[1]["channel"], "D0ALICE");
}

#[tokio::test]
async fn edits_update_and_deletes_remove_the_stored_message() {
    let w = SlackWorld::start(&[], true).await;
    let ts = w.ts(0, 1);
    w.send_event(message(CH, "UALICE", "the deploy is brokn", &ts), &[]).await;
    let edit = json!({
        "type": "message", "subtype": "message_changed", "channel": CH, "hidden": true, "ts": w.ts(3, 1), "event_ts": w.ts(3, 1),
        "message": {"type": "message", "user": "UALICE", "text": "the deploy is broken", "ts": ts, "edited": {"user": "UALICE", "ts": w.ts(3, 1)}},
        "previous_message": {"type": "message", "user": "UALICE", "text": "the deploy is brokn", "ts": ts},
    });
    assert_eq!(w.send_event(edit, &[]).await.status(), 200);
    assert_eq!(stored(&w, &ts).await.unwrap().text, "the deploy is broken");
    let delete = json!({
        "type": "message", "subtype": "message_deleted", "channel": CH, "hidden": true, "deleted_ts": ts, "ts": w.ts(4, 1), "event_ts": w.ts(4, 1),
        "previous_message": {"type": "message", "user": "UALICE", "text": "the deploy is broken", "ts": ts},
    });
    assert_eq!(w.send_event(delete, &[]).await.status(), 200);
    assert!(stored(&w, &ts).await.is_none());
    w.run_for(60.0).await;
    let kinds: Vec<&str> = w.events().iter().map(|e| e.kind.name()).collect();
    assert_eq!(kinds, vec!["message", "edited", "deleted", "dropped"], "the queued judgment finds the message gone");
}

#[tokio::test]
async fn other_bots_kuukis_own_messages_and_joins_are_not_judged() {
    let w = SlackWorld::start(&[("JUDGE_SCORE_THRESHOLD", "0")], true).await;
    let bot = json!({"type": "message", "subtype": "bot_message", "channel": CH, "bot_id": "BCI", "username": "ci", "text": "build failed <@UKUUKI>", "ts": w.ts(0, 1)});
    let app_bot = json!({"type": "message", "channel": CH, "user": "UOTHERBOT", "bot_id": "BOTHER", "text": "beep", "ts": w.ts(0, 2)});
    let own = json!({"type": "message", "channel": CH, "user": BOT_USER, "bot_id": BOT_ID, "text": "I said this", "ts": w.ts(0, 3)});
    let join = json!({"type": "message", "subtype": "channel_join", "channel": CH, "user": "UNEW", "text": "<@UNEW> has joined the channel", "ts": w.ts(0, 4)});
    for event in [bot, app_bot, own, join] {
        assert_eq!(w.send_event(event, &[]).await.status(), 200);
    }
    assert_eq!(stored(&w, &w.ts(0, 1)).await.unwrap().author, Author::OtherBot);
    assert_eq!(stored(&w, &w.ts(0, 2)).await.unwrap().author, Author::OtherBot);
    assert_eq!(stored(&w, &w.ts(0, 3)).await.unwrap().author, Author::OwnBot);
    assert!(stored(&w, &w.ts(0, 4)).await.is_none(), "joins are ignored");
    assert!(w.queue.is_empty(), "nothing to judge or answer");
    w.run_for(60.0).await;
    assert!(w.calls("chat.postMessage").await.is_empty());
}

#[tokio::test]
async fn an_ambient_judgment_ends_in_a_reaction() {
    let w = SlackWorld::start(&[("JUDGE_SCORE_THRESHOLD", "0"), ("JUDGE_JITTER_RATIO", "0")], true).await;
    let ts = w.ts(0, 1);
    w.send_event(message(CH, "UALICE", "deploy done 🎉", &ts), &[]).await;
    w.run_for(29.0).await;
    assert!(w.calls("reactions.add").await.is_empty(), "judged only after the wait");
    w.run_for(2.0).await;
    let reactions = w.calls("reactions.add").await;
    assert_eq!(reactions, vec![json!({"channel": CH, "timestamp": ts, "name": "tada"})]);
}

#[tokio::test]
async fn slack_refusals_are_logged_and_never_retried_into_duplicates() {
    let w = SlackWorld::start(&[], false).await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "not_in_channel"})))
        .mount(&w.slack_api)
        .await;
    w.send_event(message(CH, "UALICE", "<@UKUUKI> hi", &w.ts(0, 1)), &[]).await;
    w.run_for(600.0).await;
    assert_eq!(w.calls("chat.postMessage").await.len(), 1, "a refusal is final");
    let failed: Vec<String> = w
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::RespondFailed { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("not_in_channel"), "{failed:?}");
}

#[tokio::test]
async fn rate_limits_are_waited_out_as_slack_asks() {
    let w = SlackWorld::start(&[], false).await;
    Mock::given(method("POST"))
        .and(path("/chat.postMessage"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .mount(&w.slack_api)
        .await;
    SlackWorld::mount_default_api(&w.slack_api).await;
    w.send_event(message(CH, "UALICE", "<@UKUUKI> hi", &w.ts(0, 1)), &[]).await;
    let started = std::time::Instant::now();
    w.run_for(1.0).await;
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "Retry-After was honoured");
    assert_eq!(w.calls("chat.postMessage").await.len(), 2, "one 429, then the post");
    assert_eq!(w.events().iter().filter(|e| matches!(e.kind, EventKind::Respond { .. })).count(), 1);
}

fn command_body(text: &str) -> String {
    format!(
        "token=legacy&team_id=T0TEAM&team_domain=kuuki&channel_id={CH}&channel_name=general&user_id=UALICE&user_name=alice&command=%2Fkuuki&text={}&api_app_id=A0KUUKI&is_enterprise_install=false&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT0TEAM%2F1%2Fx&trigger_id=1.2.3",
        text.replace(' ', "+")
    )
}

async fn command(w: &SlackWorld, text: &str) -> String {
    command_as(w, "UALICE", text).await
}

/// Where the fake Slack takes answers to commands (`response_url`).
const RESPONSE_PATH: &str = "/commands/T0TEAM/1/x";

/// The answers sent to the command's `response_url` so far (taken or not), in order.
async fn answers_sent(w: &SlackWorld) -> Vec<Value> {
    let requests = w.slack_api.received_requests().await.unwrap_or_default();
    requests.iter().filter(|r| r.url.path() == RESPONSE_PATH).map(|r| r.body_json().unwrap()).collect()
}

/// Alice says one thing and asks kuuki to forget her: the forget is queued.
async fn alice_says_something_then_forget_me(w: &SlackWorld) {
    w.send_event(message(CH, "UALICE", "my cat is Miso", &w.ts(0, 1)), &[]).await;
    let ack = command(w, "forget-me").await;
    assert!(ack.starts_with("kuuki is forgetting you"), "answered within Slack's 3 s: {ack}");
}

/// Slack answers the first `refused` answers with 503 (asking to wait `wait` seconds),
/// then takes them.
async fn slack_refuses_answers_then_takes_them(w: &SlackWorld, refused: u64, wait: u64) {
    if refused > 0 {
        Mock::given(method("POST"))
            .and(path(RESPONSE_PATH))
            .respond_with(ResponseTemplate::new(503).insert_header("retry-after", wait.to_string()))
            .up_to_n_times(refused)
            .with_priority(1)
            .mount(&w.slack_api)
            .await;
    }
    Mock::given(method("POST"))
        .and(path(RESPONSE_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&w.slack_api)
        .await;
}

/// A world (with `settings`) whose fake Slack takes command answers, where Alice said
/// something a minute ago and the channel was summarized since: the summary.
async fn alice_spoke_and_was_summarized(
    settings: &[(&str, &str)],
) -> (SlackWorld, ChannelId, kuuki::domain::ChannelMemory) {
    use kuuki::ports::ChannelStateStore;
    let w = SlackWorld::start(settings, true).await;
    slack_refuses_answers_then_takes_them(&w, 0, 0).await;
    let channel = ChannelId(CH.into());
    w.send_event(message(CH, "UALICE", "my cat is Miso", &w.ts(0, 1)), &[]).await;
    w.run_for(60.0).await;
    let summarized = kuuki::domain::ChannelMemory {
        summary: "someone has a cat".into(),
        updated_at: Some(w.clock.now()),
        ..Default::default()
    };
    w.store.set_channel_memory(&channel, summarized.clone()).await.unwrap();
    (w, channel, summarized)
}

/// The `forget` lines in the decision log so far.
fn forget_lines(w: &SlackWorld) -> usize {
    w.log.take().into_iter().filter(|e| matches!(e.kind, kuuki::domain::EventKind::Forget { .. })).count()
}

async fn command_as(w: &SlackWorld, user: &str, text: &str) -> String {
    // Answers that come later go to the fake Slack, not to hooks.slack.com.
    let response_url = format!("{}{RESPONSE_PATH}", w.slack_api.uri()).replace(':', "%3A").replace('/', "%2F");
    let body = command_body(text)
        .replace("user_id=UALICE", &format!("user_id={user}"))
        .replace("https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT0TEAM%2F1%2Fx", &response_url);
    assert!(body.contains(&response_url), "answers go to the fake Slack, never to hooks.slack.com: {body}");
    let response = w.post_signed("/slack/commands", &body, &[]).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["response_type"], "ephemeral");
    answer["text"].as_str().unwrap().to_owned()
}

/// Slack busy for a moment (a 503 at the `response_url`) does not cost the answer: it
/// is sent again, once it is taken, and only once.
#[tokio::test]
async fn a_forget_answer_slack_could_not_take_at_once_is_sent_again() {
    let w = SlackWorld::start(&[], true).await;
    slack_refuses_answers_then_takes_them(&w, 1, 0).await;
    alice_says_something_then_forget_me(&w).await;
    w.run_for(1.0).await;
    let tries = answers_sent(&w).await;
    assert_eq!(tries.len(), 2, "refused once, then taken");
    assert_eq!(tries[0], tries[1], "the same answer");
}

/// Slack refusing the answer fails the delivery; the redelivery finds the forget done
/// (logged once, and what she said since is left alone) and, knowing the answer was not
/// shown, sends it again.
#[tokio::test]
async fn a_forget_answer_is_sent_again_only_when_it_surely_did_not_go_out() {
    let w = SlackWorld::start(&[], true).await;
    // Slack asks for a minute, longer than a chat call waits: the delivery fails.
    slack_refuses_answers_then_takes_them(&w, 1, 60).await;
    alice_says_something_then_forget_me(&w).await;
    assert_eq!(w.run_for_counting(1.0).await, 1, "Slack did not take the answer");
    assert_eq!(answers_sent(&w).await.len(), 1);
    // Meanwhile she speaks again: forgotten already, this is hers to be remembered.
    w.send_event(message(CH, "UALICE", "back from holiday", &w.ts(2, 1)), &[]).await;
    w.run_for(3600.0).await;
    assert_eq!(answers_sent(&w).await.len(), 2, "sent again by the redelivery, and taken");
    assert_eq!(forget_lines(&w), 1, "one forget line in the decision log");
    let kept: Vec<String> =
        w.store.messages_after(&ChannelId(CH.into()), None, 10).await.unwrap().iter().map(|m| m.text.clone()).collect();
    assert_eq!(kept, ["back from holiday"], "the redelivery only answered");
}

/// An answer whose sending timed out may have been shown: the redelivery does not send
/// it again (a second ephemeral message would be worse than none).
#[tokio::test]
async fn a_forget_answer_that_may_have_gone_out_is_not_sent_twice() {
    let w = SlackWorld::start(&[("CHAT_TIMEOUT_SECONDS", "1")], true).await;
    Mock::given(method("POST"))
        .and(path(RESPONSE_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok").set_delay(std::time::Duration::from_secs(3)))
        .mount(&w.slack_api)
        .await;
    alice_says_something_then_forget_me(&w).await;
    assert_eq!(w.run_for_counting(1.0).await, 1, "the answer timed out");
    assert_eq!(answers_sent(&w).await.len(), 1);
    w.run_for(3600.0).await;
    assert_eq!(answers_sent(&w).await.len(), 1, "not sent again");
}

/// A forget request whose worker fails halfway (after deleting the messages, before
/// the channel summary is wiped) is finished by the redelivery: the summary made from
/// them goes too, and the caller gets one answer, which says the first attempt's part
/// is not counted.
#[tokio::test]
async fn a_forget_request_that_fails_halfway_is_finished_and_answered_once() {
    use kuuki::ports::{ChannelStateStore, MessageStore};
    let (w, channel, summarized) = alice_spoke_and_was_summarized(&[]).await;
    // A channel she never wrote in, with facts (so forgetting looks there) and a summary.
    let elsewhere = ChannelId("C0OTHER".into());
    let other_summary = kuuki::domain::ChannelMemory { summary: "the build is green".into(), ..summarized };
    w.store.set_channel_memory(&elsewhere, other_summary).await.unwrap();
    let fact = taught(&w, &elsewhere, "CI runs nightly", &["UBOB"]);
    kuuki::ports::FactStore::put_fact(&*w.store, &fact).await.unwrap();

    let ack = command(&w, "forget-me").await;
    assert!(ack.starts_with("kuuki is forgetting you"), "{ack}");
    w.store.fail_next_writes(1);
    assert_eq!(w.run_for_counting(1.0).await, 1, "the first attempt dies wiping the summary");
    assert!(w.store.messages_after(&channel, None, 10).await.unwrap().is_empty(), "its messages went first");
    assert_eq!(w.store.channel_state(&channel).await.unwrap().memory.summary, "someone has a cat");
    assert!(answers_sent(&w).await.is_empty(), "no answer before it is done");

    w.run_for(1500.0).await;
    assert_eq!(w.store.channel_state(&channel).await.unwrap().memory.summary, "", "wiped, to be made anew");
    let untouched = w.store.channel_state(&elsewhere).await.unwrap().memory.summary.clone();
    assert_eq!(untouched, "the build is green", "a channel she never wrote in keeps its memory");
    let answered = answers_sent(&w).await;
    assert_eq!(answered.len(), 1, "{answered:?}");
    let text = answered[0]["text"].as_str().unwrap();
    assert!(text.contains("An earlier attempt was interrupted"), "{text}");
    assert_eq!(forget_lines(&w), 1, "one forget line in the decision log");
    w.run_for(3600.0).await;
    assert_eq!(answers_sent(&w).await.len(), 1, "answered once, whatever comes later");
}

#[tokio::test]
async fn why_names_the_rule_that_left_a_question_to_the_person_it_mentions() {
    let w = SlackWorld::start(&[("JUDGE_JITTER_RATIO", "0"), ("JUDGE_KEYWORDS", "invoice")], true).await;
    w.send_event(message(CH, "UALICE", "<@UCAROL> did the invoice go out?", &w.ts(0, 1)), &[]).await;
    w.run_for(31.0).await;
    let why = command(&w, "why").await;
    assert!(why.contains("addressed_to_other -60") && why.contains("question +20"), "{why}");
    assert!(why.contains("not settled yet") && why.contains("judge again later"), "{why}");
    assert!(why.contains("the question is for UCAROL"), "{why}");
}

/// The fake `users.info` describes `user` as a workspace admin (before the default
/// answer, which is nobody's admin).
async fn make_admin(w: &SlackWorld, user: &str) {
    Mock::given(method("POST"))
        .and(path("/users.info"))
        .and(body_string_contains(format!("user={user}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"ok": true, "user": {"id": user, "name": "admin", "is_admin": true, "profile": {"display_name": "Admin"}}}),
        ))
        .with_priority(1)
        .mount(&w.slack_api)
        .await;
}

/// kuuki's answers in the channel, without its announcements of changes.
async fn answers(w: &SlackWorld) -> Vec<Value> {
    let posts = w.calls("chat.postMessage").await;
    posts.into_iter().filter(|p| !is_announcement(p)).collect()
}

fn is_announcement(post: &Value) -> bool {
    post["metadata"]["event_payload"]["tag"].as_str().is_some_and(|tag| tag.starts_with("announce:"))
}

#[tokio::test]
async fn only_workspace_admins_may_mute_kuuki_and_each_change_is_announced_once() {
    let w = SlackWorld::start(&[], true).await;
    make_admin(&w, "UADMIN").await;
    Mock::given(method("POST"))
        .and(path("/users.info"))
        .and(body_string_contains("user=UBOB"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"ok": true, "user": {"id": "UBOB", "name": "bob", "is_admin": false, "is_owner": false}}),
        ))
        .with_priority(1)
        .mount(&w.slack_api)
        .await;
    let channel = ChannelId(CH.into());

    for text in ["mute 30m", "shadow all 2h", "unmute"] {
        let refused = command_as(&w, "UBOB", text).await;
        assert!(refused.starts_with("Sorry, only workspace admins and owners can change"), "{refused}");
        assert!(refused.contains("nothing changed"), "{refused}");
    }
    let state = w.deps.channels.channel_state(&channel).await.unwrap();
    assert_eq!((state.muted_until, state.shadow), (None, None), "refused, so unchanged");
    assert!(w.calls("chat.postMessage").await.is_empty(), "nothing announced");
    // Status is for everyone.
    assert!(command_as(&w, "UBOB", "status").await.starts_with("kuuki here"));

    let muted = command_as(&w, "UADMIN", "mute 90").await;
    assert!(muted.starts_with("Muted here until 2026-01-05 10:30 UTC"), "{muted}");
    assert_eq!(
        w.deps.channels.channel_state(&channel).await.unwrap().muted_until.map(|u| u.seconds_since(w.deps.clock.now())),
        Some(5400.0)
    );
    let posts = w.calls("chat.postMessage").await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["channel"], CH);
    assert!(posts[0].get("thread_ts").is_none(), "a top-level post everyone sees");
    assert_eq!(
        posts[0]["text"],
        "kuuki is muted here until 2026-01-05 10:30 UTC (set by <@UADMIN>): it will not join in unasked, and still answers mentions."
    );
    // The same change asked again is not announced again; users.info was asked once per person.
    assert!(command_as(&w, "UADMIN", "mute 90m").await.contains("Announced in the channel already"));
    assert_eq!(w.calls("chat.postMessage").await.len(), 1);
    let asked = w.slack_api.received_requests().await.unwrap().iter().filter(|r| r.url.path() == "/users.info").count();
    assert_eq!(asked, 2, "UBOB once, UADMIN once");

    // An owner may too; ending the mute is announced.
    assert!(command_as(&w, "UADMIN", "unmute").await.starts_with("Unmuted"));
    let posts = w.calls("chat.postMessage").await;
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[1]["text"], "kuuki may join in here again (unmuted by <@UADMIN>).");
}

#[tokio::test]
async fn when_slack_cannot_say_who_is_an_admin_nobody_is() {
    let w = SlackWorld::start(&[("COMMAND_MANAGERS", "UCAROL")], false).await;
    Mock::given(method("POST"))
        .and(path("/users.info"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "missing_scope"})))
        .mount(&w.slack_api)
        .await;
    SlackWorld::mount_default_api(&w.slack_api).await;
    let refused = command_as(&w, "UBOB", "shadow").await;
    assert!(refused.starts_with("Sorry, kuuki could not check whether you may change this"), "{refused}");
    assert_eq!(w.deps.channels.channel_state(&ChannelId(CH.into())).await.unwrap().shadow, None);
    // The allow-list needs no answer from Slack.
    let shadowed = command_as(&w, "UCAROL", "shadow").await;
    assert!(shadowed.starts_with("Shadow mode on until 2026-01-06 09:00 UTC"), "{shadowed}");
    let bob_refused = command_as(&w, "UBOB", "shadow off").await;
    assert!(bob_refused.starts_with("Sorry, kuuki could not check"), "{bob_refused}");
    assert!(w.deps.channels.channel_state(&ChannelId(CH.into())).await.unwrap().shadow.is_some());
}

#[tokio::test]
async fn the_slash_command_reports_explains_mutes_and_shadows() {
    let w = SlackWorld::start(&[("JUDGE_JITTER_RATIO", "0")], true).await;
    make_admin(&w, "UALICE").await;
    let status = command(&w, "status").await;
    assert!(status.contains("rules only, responds at a score of 60"), "{status}");
    assert!(status.contains("No response here yet"), "{status}");
    assert!(status.contains("No summary of this channel yet."), "{status}");
    assert_eq!(command(&w, "why").await, "No judgment in this channel yet.");

    // After a mention is answered, status shows cooldown and engagement.
    w.send_event(message(CH, "UALICE", "<@UKUUKI> hi", &w.ts(0, 1)), &[]).await;
    w.run_for(1.0).await;
    let status = command(&w, "status").await;
    assert!(status.contains("cooldown (-50)") && status.contains("engaged (+40)"), "{status}");
    assert!(status.contains("Responses in the last 30 minutes: 1"), "{status}");

    // why explains the last judgment with its rules. Alice's mention made her turn
    // kuuki's, not bob's question: it is an open question, judged again once it has
    // stood UNANSWERED_QUESTION_WAIT_SECONDS.
    w.send_event(message(CH, "UBOB", "anyone around?", &w.ts(10, 1)), &[]).await;
    w.run_for(31.0).await;
    let why = command(&w, "why").await;
    assert!(
        why.contains("anyone around?") && why.contains("question +20") && why.contains("judge again later"),
        "{why}"
    );

    // Muted: ambient messages are not judged on, mentions still answered.
    let muted = command(&w, "mute 30").await;
    assert!(muted.contains("Muted here until"), "{muted}");
    assert!(command(&w, "status").await.contains("muted until"));
    w.send_event(message(CH, "UBOB", "still there?", &w.ts(50, 1)), &[]).await;
    w.run_for(31.0).await;
    assert!(command(&w, "why").await.contains("muted"), "the judgment says it was muted");
    w.send_event(message(CH, "UBOB", "<@UKUUKI> are you muted?", &w.ts(90, 1)), &[]).await;
    w.run_for(1.0).await;
    assert_eq!(answers(&w).await.len(), 2, "mentions are answered while muted");
    assert!(command(&w, "unmute").await.contains("Unmuted"));
    assert!(command(&w, "mute forever").await.starts_with("Usage: /kuuki"));

    // Shadow mode for everything: decided and logged, never posted.
    assert!(command(&w, "shadow all").await.contains("posts nothing"));
    w.events();
    w.send_event(message(CH, "UBOB", "<@UKUUKI> shadow test", &w.ts(200, 1)), &[]).await;
    w.run_for(1.0).await;
    assert_eq!(answers(&w).await.len(), 2, "nothing posted in shadow mode");
    let shadowed = w.events().into_iter().any(|e| matches!(e.kind, EventKind::Respond { shadow: true, .. }));
    assert!(shadowed, "the answer is logged as shadowed");
    assert!(command(&w, "shadow off").await.contains("posts here again"));
    assert!(command(&w, "dance").await.starts_with("Usage: /kuuki"));
}

#[tokio::test]
async fn slash_commands_are_verified_and_validated_too() {
    let w = SlackWorld::start(&[], true).await;
    let response = w.post_raw("/slack/commands", &command_body("mute"), &[]).await;
    assert_eq!(response.status(), 401);
    let response = w.post_signed("/slack/commands", "command=%2Fkuuki&text=status", &[]).await;
    assert_eq!(response.status(), 400, "no channel_id");
    let state = kuuki::ports::ChannelStateStore::channel_state(&*w.store, &ChannelId(CH.into())).await.unwrap();
    assert_eq!(state.muted_until, None, "the unsigned mute changed nothing");
}

#[tokio::test]
async fn health_is_served() {
    let w = SlackWorld::start(&[], true).await;
    let response = w.http.get(format!("{}/healthz", w.base_url)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "ok");
}

#[tokio::test]
async fn prompts_name_people_by_their_slack_display_names_looked_up_once() {
    let llm =
        kuuki_e2e::RecordingLlm::new(r#"{"role": "generate", "reply": "こんにちは、Alice さん", "repeat": true}"#);
    let w = SlackWorld::start_with(&[], true, Some(llm.clone())).await;
    w.send_event(message(CH, "UALICE", "<@UKUUKI> おはよう", &w.ts(0, 1)), &[]).await;
    w.run_for(1.0).await;
    w.send_event(message(CH, "UALICE", "<@UKUUKI> もう一つ", &w.ts(2, 1)), &[]).await;
    w.run_for(1.0).await;
    let posts = w.calls("chat.postMessage").await;
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[0]["text"], "こんにちは、Alice さん");
    let prompts = llm.requests();
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1].user.contains("Alice: <@UKUUKI> もう一つ"), "{}", prompts[1].user);
    assert!(prompts[1].user.contains("kuuki: こんにちは、Alice さん"), "kuuki's own post is in the context");
    let lookups = w.slack_api.received_requests().await.unwrap();
    let lookups: Vec<_> = lookups.iter().filter(|r| r.url.path() == "/users.info").collect();
    assert_eq!(lookups.len(), 1, "cached after the first look-up");
    assert_eq!(lookups[0].body, b"user=UALICE", "a read method gets form fields");
}

#[tokio::test]
async fn long_replies_are_split_for_slack_and_posted_once() {
    let long = format!("{}\n\n{}\n\n{}", "あ".repeat(3000), "い".repeat(3000), "う".repeat(2000));
    let script = format!(r#"{{"role": "generate", "reply": {}}}"#, serde_json::to_string(&long).unwrap());
    let llm = kuuki_e2e::RecordingLlm::new(&script);
    let w = SlackWorld::start_with(&[], true, Some(llm)).await;
    let root = w.ts(0, 1);
    let mut mention = message(CH, "UALICE", "<@UKUUKI> 長めに説明して", &w.ts(1, 1));
    mention["thread_ts"] = json!(root);
    w.send_event(mention, &[]).await;
    w.run_for(1.0).await;
    let posts = w.calls("chat.postMessage").await;
    let lengths: Vec<usize> = posts.iter().map(|p| p["text"].as_str().unwrap().chars().count()).collect();
    assert_eq!(lengths, vec![3000, 3000, 2000], "split at paragraphs within 4,000 characters");
    assert!(posts.iter().all(|p| p["thread_ts"] == root.as_str()));
}

#[tokio::test]
async fn the_judge_may_choose_the_reaction() {
    let llm = kuuki_e2e::RecordingLlm::new(
        r#"{"role": "judge", "reply": {"should_respond": true, "reason": "a nod", "confidence": 0.8, "response_type": "react_only", "emoji": "raised_hands", "conversation_state": "active"}}"#,
    );
    // A one-message conversation may be joined (no short_conversation): the LLM is asked.
    let settings = [("BOT_TOPICS", "deploy"), ("JUDGE_KEYWORDS", "shipped"), ("JUDGE_MIN_CONVERSATION_MESSAGES", "1")];
    let w = SlackWorld::start_with(&settings, true, Some(llm)).await;
    w.send_event(message(CH, "UALICE", "deploy shipped", &w.ts(0, 1)), &[]).await;
    w.run_for(60.0).await;
    assert_eq!(
        w.calls("reactions.add").await,
        vec![json!({"channel": CH, "timestamp": w.ts(0, 1), "name": "raised_hands"})]
    );
}

#[tokio::test]
async fn a_thread_reply_is_judged_and_answered_with_the_message_that_started_the_thread() {
    let llm = kuuki_e2e::RecordingLlm::new(r#"{"role": "generate", "reply": "ステージングのログを見ましょう"}"#);
    let w = SlackWorld::start_with(&[], true, Some(llm.clone())).await;
    let root = w.ts(0, 1);
    w.send_event(message(CH, "UBOB", "deploy failed on staging", &root), &[]).await;
    w.run_for(2400.0).await;
    let mut reply = message(CH, "UALICE", "<@UKUUKI> any idea?", &w.ts(2400, 1));
    reply["thread_ts"] = json!(root);
    reply["parent_user_id"] = json!("UBOB");
    w.send_event(reply, &[]).await;
    w.run_for(1.0).await;
    let requests = llm.requests();
    let generate = requests.iter().find(|r| r.role == kuuki::ports::LlmRole::Generate).expect("a generation");
    let prompt = &generate.user;
    let opener = prompt.find("deploy failed on staging").expect("the thread's opening message is in the prompt");
    let question = prompt.find("<@UKUUKI> any idea?").unwrap();
    assert!(opener < question, "the opener comes first: {prompt}");
}

#[tokio::test]
async fn status_shows_what_kuuki_remembers_of_the_channel() {
    let w = SlackWorld::start(&[], true).await;
    kuuki::ports::ChannelStateStore::set_channel_memory(
        &*w.store,
        &ChannelId(CH.into()),
        kuuki::domain::ChannelMemory {
            summary: "the deploy was fixed".into(),
            history: "h".into(),
            mood: "relieved".into(),
            topic_keywords: vec!["deploy".into()],
            active_users: vec!["alice".into()],
            updated_at: Some(w.clock.now() - std::time::Duration::from_secs(120)),
            watermark: None,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let status = command(&w, "status").await;
    assert!(status.contains("summarized 2 min ago): the deploy was fixed"), "{status}");
    assert!(status.contains("Mood: relieved · Topics: deploy · People: alice"), "{status}");
}

/// A job of a queue batch that runs past its budget is stopped before the worker's
/// timeout and reported failed, to come back once the claim it took has run out,
/// beside the batch's other messages (Lambda would otherwise kill the whole batch at its timeout and SQS
/// bring every message back after 24 minutes).
#[tokio::test]
async fn a_job_that_overruns_is_stopped_before_the_worker_timeout_and_retried() {
    use kuuki::budget::JobKind;
    use kuuki::ports::InProcessQueue;
    use kuuki::worker::{QueueMessage, REDELIVERY_DELAY, run_batch};
    let budget = [
        ("WORKER_TIMEOUT_SECONDS", "12"),
        ("LLM_TIMEOUT_SECONDS", "1"),
        ("LLM_MAX_RETRIES", "0"),
        ("CHAT_TIMEOUT_SECONDS", "1"),
    ];
    let w = SlackWorld::start_with(&budget, true, Some(std::sync::Arc::new(kuuki_e2e::NeverAnswers))).await;
    w.send_event(message(CH, "UALICE", "<@UKUUKI> how do I deploy?", &w.ts(0, 1)), &[]).await;
    let job = w.queue.pop_due(w.clock.now()).expect("the mention queued an answer").job;
    let job = kuuki::domain::Job::clone(&job);
    assert!(matches!(job, kuuki::domain::Job::Respond { .. }), "{job:?}");
    let stuck = QueueMessage { id: "stuck".into(), job: Ok(job), deliveries: 0 };
    let not_a_job = QueueMessage { id: "garbage".into(), job: kuuki::domain::decode_job("not json"), deliveries: 0 };
    let started = std::time::Instant::now();
    let messages = [stuck, not_a_job];
    let deadline = w.deps.budget.job_deadline();
    let batch = run_batch(&w.deps, JobKind::Respond, &messages, deadline);
    let limit = w.deps.budget.worker_timeout + std::time::Duration::from_secs(5);
    let failed = tokio::time::timeout(limit, batch).await.expect("the batch ended by itself");
    let took = started.elapsed();
    assert!(took >= deadline, "it ran until the deadline");
    assert!(took < deadline + std::time::Duration::from_secs(2), "stopped there: {took:?}");
    let failed: Vec<_> = failed.iter().map(|f| (f.id.as_str(), f.retry_after)).collect();
    // Back once the claim it took (and could not release) has run out.
    let after_its_claim = (w.deps.budget.claim_lease() + std::time::Duration::from_secs(1)).max(REDELIVERY_DELAY);
    assert_eq!(failed, [("stuck", Some(after_its_claim)), ("garbage", None)], "both reported");
    assert!(w.calls("chat.postMessage").await.is_empty(), "nothing posted");
}

/// A model that never answers, counting the requests waiting on it.
#[derive(Default)]
struct CountsAndNeverAnswers(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl kuuki::ports::Llm for CountsAndNeverAnswers {
    async fn complete(
        &self,
        _request: kuuki::ports::LlmRequest,
    ) -> Result<kuuki::ports::LlmResponse, kuuki::ports::LlmError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::pending().await
    }
}

/// A fact `sources` taught in `channel`, under the id its content has there.
fn taught(w: &SlackWorld, channel: &ChannelId, content: &str, sources: &[&str]) -> kuuki::domain::Fact {
    kuuki::domain::Fact {
        id: kuuki::memory::reflect::fact_id(channel, content),
        channel: channel.clone(),
        content: content.into(),
        keywords: content.split_whitespace().map(str::to_lowercase).collect(),
        source_users: sources.iter().map(|s| s.to_string()).collect(),
        confidence: 0.9,
        shareable: false,
        created_at: w.clock.now(),
        confirmed_at: w.clock.now(),
        strength: 1,
        source_messages: Vec::new(),
        embedding: None,
    }
}

#[path = "slack/forget.rs"]
mod forget;
#[path = "slack/reactions.rs"]
mod reactions;
