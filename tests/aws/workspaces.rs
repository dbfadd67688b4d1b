//! Many Slack workspaces on one deployment (issue 45) on the emulators: their data
//! apart on the tables within the template's policies, and a hundred of them at once.

use std::sync::Arc;

use kuuki::adapters::memory::MemoryLog;
use kuuki::budget::JobKind;
use kuuki::domain::ChannelId;
use kuuki_e2e::slack_world::{SlackWorld, message};
use kuuki_lambda::handle_sqs_event;
use serde_json::json;

use super::end_to_end::{now_ts, world_serving};
use super::{emulators, sdk};

/// Two Slack workspaces on the tables (issue 45): each installed (its token sealed in
/// the channels table), each mention answered with its workspace's token, an
/// uninstall removing one installation and purging that workspace alone, every call
/// within the template's policies.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn two_workspaces_on_the_tables_stay_apart_within_the_policies() {
    let (dynamo, moto) = emulators("two_workspaces_on_the_tables_stay_apart_within_the_policies");
    let (w, workspaces) = world_serving(&dynamo, &moto, &[], None, Arc::new(MemoryLog::default()), true).await;
    let workspaces = workspaces.expect("many workspaces");
    w.counter.acting_as("IngressFunction");
    SlackWorld::installed(&workspaces, "T1", "UBOT1", "xoxb-one").await;
    SlackWorld::installed(&workspaces, "T2", "UBOT2", "xoxb-two").await;
    w.counter.acting_as("");
    let item = aws_sdk_dynamodb::Client::new(&sdk(&dynamo).await)
        .get_item()
        .table_name(&w.tables.channels)
        .key("channel", aws_sdk_dynamodb::types::AttributeValue::S("#install#T1".into()))
        .send()
        .await
        .unwrap();
    let sealed = format!("{:?}", item.item.expect("the installation's item"));
    assert!(!sealed.contains("xoxb-one") && sealed.contains("UBOT1"), "the token is sealed in the item: {sealed}");
    for (n, (team, bot)) in [("T1", "UBOT1"), ("T2", "UBOT2")].into_iter().enumerate() {
        let event = message("C0MANY", "UALICE", &format!("<@{bot}> the deploy key?"), &now_ts(n as u32 + 70));
        assert_eq!(w.deliver_in(team, bot, event).await, 200);
    }
    let (failed, _) = w.drain(5).await;
    assert_eq!(failed, 0);
    let requests = w.slack_api.received_requests().await.unwrap();
    let posts = requests.iter().filter(|r| r.url.path() == "/chat.postMessage");
    let mut tokens: Vec<String> = posts.map(|r| r.headers["authorization"].to_str().unwrap().to_owned()).collect();
    tokens.sort();
    assert_eq!(tokens, ["Bearer xoxb-one", "Bearer xoxb-two"], "each with its own token");
    for team in ["T1", "T2"] {
        let stored = w.deps.messages.messages_after(&ChannelId::slack_in(team, "C0MANY"), None, 10).await.unwrap();
        assert!(stored.iter().any(|m| m.user.as_str() == "UALICE"), "{team} keeps its own");
    }

    // T1 removes kuuki: its installation goes at once, its data with the purge.
    let gone = json!({"type": "app_uninstalled"});
    assert_eq!(w.deliver_in("T1", "UBOT1", gone).await, 200);
    assert!(workspaces.installed("T1").await.unwrap().is_none(), "its installation is gone");
    let event = w.receive(&w.urls.forget).await;
    assert_eq!(event.records.len(), 1, "one purge on the forget queue");
    w.counter.acting_as("ReflectFunction");
    let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Forget, event, None).await;
    assert!(response.batch_item_failures.is_empty(), "the purge failed");
    w.counter.acting_as("");
    w.assert_the_template_allows_what_was_done();
    let t1 = w.deps.messages.messages_after(&ChannelId::slack_in("T1", "C0MANY"), None, 10).await.unwrap();
    let t2 = w.deps.messages.messages_after(&ChannelId::slack_in("T2", "C0MANY"), None, 10).await.unwrap();
    assert!(t1.is_empty() && !t2.is_empty(), "T1 purged, T2 kept");
    assert!(workspaces.installed("T2").await.unwrap().is_some());
}

/// A hundred workspaces of ten channels each (the same channel ids `C0`…`C9` in every
/// one), a message in every channel sent at once (fifty in flight): every request
/// answered, every message kept under its own workspace's channel and nowhere else,
/// and every judgment run without an error.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_workspaces_of_ten_channels_at_once() {
    let (dynamo, moto) = emulators("a_hundred_workspaces_of_ten_channels_at_once");
    let settings = [("JUDGE_MIN_WAIT_SECONDS", "0")];
    let (w, workspaces) = world_serving(&dynamo, &moto, &settings, None, Arc::new(MemoryLog::default()), true).await;
    let workspaces = workspaces.expect("many workspaces");
    let teams: Vec<String> = (0..100).map(|i| format!("T9L{i:03}")).collect();
    for team in &teams {
        SlackWorld::installed(&workspaces, team, &format!("UB{team}"), &format!("xoxb-{team}")).await;
    }
    let w = Arc::new(w);
    let in_flight = Arc::new(tokio::sync::Semaphore::new(50));
    let mut sends = tokio::task::JoinSet::new();
    for (t, team) in teams.iter().enumerate() {
        for c in 0..10u32 {
            let (w, in_flight, team) = (w.clone(), in_flight.clone(), team.clone());
            sends.spawn(async move {
                let _slot = in_flight.acquire().await.unwrap();
                let text = format!("ok from {team}/C{c}");
                let event = message(&format!("C{c}"), "UALICE", &text, &now_ts(t as u32 * 10 + c));
                w.deliver_in(&team, &format!("UB{team}"), event).await
            });
        }
    }
    let statuses = sends.join_all().await;
    assert_eq!(statuses.len(), 1000);
    assert!(statuses.iter().all(|status| *status == 200), "every event answered 200");

    let mut stored = w.deps.messages.message_channels().await.unwrap();
    stored.retain(|c| c.as_str().starts_with("T9L"));
    assert_eq!(stored.len(), 1000, "one channel per workspace and channel id");
    for team in &teams {
        for c in 0..10 {
            let channel = ChannelId::slack_in(team, &format!("C{c}"));
            let messages = w.deps.messages.messages_after(&channel, None, 10).await.unwrap();
            let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
            assert_eq!(texts, [format!("ok from {team}/C{c}")], "{channel} holds its own message alone");
        }
    }
    let bare = w.deps.messages.message_channels().await.unwrap();
    assert!(bare.iter().all(|c| !c.as_str().starts_with('C')), "no channel id without its workspace");
    let (failed, jobs) = w.drain(200).await;
    assert_eq!((failed, jobs), (0, 1000), "every judgment ran, none failed");
}
