//! Two Slack workspaces on one deployment (issue 45), over signed HTTP: the same
//! channel and person ids and the same words in both, a fact and a workspace memory in
//! each. Each is answered with its own token and bot, neither's memory reaches the
//! other's prompts, and `/kuuki memory`, `forget-me` and an uninstall's purge touch one
//! workspace only.

use std::sync::Arc;

use kuuki::domain::{ChannelId, ChannelLine, Fact, Timestamp, UserId, Workspace, WorkspaceMemory};
use kuuki::ports::{ChannelStateStore, Clock, FactStore, Installations, LlmRole, MessageStore};
use kuuki_e2e::RecordingLlm;
use kuuki_e2e::slack_world::{SlackWorld, message};
use serde_json::{Value, json};

const ALICE: &str = "UALICE";
const HOUR: f64 = 3600.0;

/// `team`'s channel `C1`, as the store keys it.
fn c1(team: &str) -> ChannelId {
    ChannelId::slack_in(team, "C1")
}

fn fact(team: &str, vault: &str, at: Timestamp) -> Fact {
    Fact {
        id: format!("vault-{team}"),
        channel: c1(team),
        content: format!("the deploy key is in the {vault} vault"),
        keywords: vec!["deploy".into(), "key".into(), "vault".into()],
        source_users: vec![ALICE.into()],
        confidence: 0.9,
        shareable: false,
        created_at: at,
        confirmed_at: at,
        strength: 1,
        source_messages: Vec::new(),
        embedding: None,
    }
}

/// The envelope Slack sends for `event` in `team`, for the installation of bot `bot`.
fn envelope_in(team: &str, bot: &str, event: Value) -> String {
    json!({
        "type": "event_callback", "team_id": team, "api_app_id": "A0KUUKI", "event": event,
        "event_id": format!("Ev{team}{}", event["ts"].as_str().unwrap_or("0").replace('.', "")),
        "event_time": 1767603600,
        "authorizations": [{"enterprise_id": null, "team_id": team, "user_id": bot, "is_bot": true, "is_enterprise_install": false}],
    })
    .to_string()
}

/// A slash command from Alice in `team`'s `C1`, answered at once; its ephemeral text.
async fn command_in(w: &SlackWorld, team: &str, text: &str) -> String {
    let body = serde_urlencoded::to_string([
        ("command", "/kuuki"),
        ("text", text),
        ("team_id", team),
        ("channel_id", "C1"),
        ("user_id", ALICE),
        ("is_enterprise_install", "false"),
    ])
    .unwrap();
    let response = w.post_signed("/slack/commands", &body, &[]).await;
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.unwrap()["text"].as_str().unwrap().to_owned()
}

/// Two workspaces kuuki is installed in, each knowing something of its own.
async fn two_workspaces(llm: Arc<RecordingLlm>) -> (SlackWorld, Arc<kuuki::workspaces::Workspaces>) {
    let settings = [("UNINSTALL_PURGE_GRACE_HOURS", "1"), ("JUDGE_JITTER_RATIO", "0")];
    let (w, workspaces) = SlackWorld::start_many(&settings, Some(llm)).await;
    SlackWorld::installed(&workspaces, "T1", "UBOT1", "xoxb-one").await;
    SlackWorld::installed(&workspaces, "T2", "UBOT2", "xoxb-two").await;
    let now = w.clock.now();
    for (team, vault, history) in
        [("T1", "orchid", "team one ships on Fridays"), ("T2", "tulip", "team two ships on Mondays")]
    {
        w.store.put_fact(&fact(team, vault, now)).await.unwrap();
        let workspace = Workspace::Slack(team);
        let memory = WorkspaceMemory { history: history.into(), updated_at: Some(now), ..Default::default() };
        w.store.set_workspace_memory(workspace, memory).await.unwrap();
        let other = ChannelId::slack_in(team, "C2");
        let line = ChannelLine { channel: other.clone(), line: format!("{vault} planning"), updated_at: now };
        w.store.set_channel_line(&other, Some(line)).await.unwrap();
    }
    (w, workspaces)
}

async fn mention_in(w: &SlackWorld, team: &str, bot: &str, secs: u64) {
    let event = message("C1", ALICE, &format!("<@{bot}> where is the deploy key?"), &w.ts(secs, 1));
    let response = w.post_signed("/slack/events", &envelope_in(team, bot, event), &[]).await;
    assert_eq!(response.status(), 200);
}

/// The posts Slack got: the token each came with, and its channel.
async fn posts(w: &SlackWorld) -> Vec<(String, String)> {
    let requests = w.slack_api.received_requests().await.unwrap_or_default();
    let posts = requests.iter().filter(|r| r.url.path() == "/chat.postMessage");
    posts
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            (r.headers["authorization"].to_str().unwrap().to_owned(), body["channel"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn each_workspace_is_answered_with_its_own_token_from_its_own_memory() {
    let llm = RecordingLlm::new(r#"{"role": "generate", "reply": "It is in the vault.", "repeat": true}"#);
    let (w, _) = two_workspaces(llm.clone()).await;
    mention_in(&w, "T1", "UBOT1", 0).await;
    mention_in(&w, "T2", "UBOT2", 0).await;
    w.run_for(60.0).await;

    let mut posted = posts(&w).await;
    posted.sort();
    let expected = [("Bearer xoxb-one", "C1"), ("Bearer xoxb-two", "C1")].map(|(a, c)| (a.to_owned(), c.to_owned()));
    assert_eq!(posted, expected, "each answered in its own channel with its own token");
    let prompts: Vec<String> = llm
        .requests()
        .into_iter()
        .filter(|r| r.role == LlmRole::Generate)
        .map(|r| format!("{}\n{}", r.system, r.user))
        .collect();
    assert_eq!(prompts.len(), 2);
    for (own, others) in [(["orchid", "Fridays"], ["tulip", "Mondays"]), (["tulip", "Mondays"], ["orchid", "Fridays"])]
    {
        let prompt = prompts.iter().find(|p| p.contains(own[0])).unwrap_or_else(|| panic!("{own:?}: {prompts:?}"));
        assert!(prompt.contains(own[1]), "its workspace memory: {prompt}");
        for theirs in others {
            assert!(!prompt.contains(theirs), "{theirs} crossed into {own:?}'s prompt: {prompt}");
        }
    }
    // The same person and channel ids: two messages, one in each workspace.
    for team in ["T1", "T2"] {
        let stored = w.store.messages_after(&c1(team), None, 10).await.unwrap();
        assert!(stored.iter().any(|m| m.user.as_str() == ALICE), "{team} keeps its own");
    }
    let memory = command_in(&w, "T1", "memory").await;
    assert!(!memory.contains("tulip") && !memory.contains("T2"), "/kuuki memory of T1 only: {memory}");
    let status = command_in(&w, "T2", "status").await;
    assert!(status.contains("Workspace: T2"), "{status}");
    let unknown = command_in(&w, "T3", "status").await;
    assert!(unknown.contains("not installed"), "{unknown}");
}

#[tokio::test]
async fn forget_me_and_an_uninstall_touch_one_workspace_only() {
    let llm = RecordingLlm::new(r#"{"role": "generate", "reply": "ok", "repeat": true}"#);
    let (w, workspaces) = two_workspaces(llm).await;
    for team in ["T1", "T2"] {
        let event = message("C1", ALICE, "my cat is Miso", &w.ts(0, 2));
        let bot = if team == "T1" { "UBOT1" } else { "UBOT2" };
        assert_eq!(w.post_signed("/slack/events", &envelope_in(team, bot, event), &[]).await.status(), 200);
    }
    w.run_for(60.0).await;
    let alice = UserId(ALICE.into());
    assert!(w.store.profile(Workspace::Slack("T1"), &alice).await.unwrap().is_some());

    // Alice asks to be forgotten in T1: T2 keeps what it holds of her.
    let ack = command_in(&w, "T1", "forget-me").await;
    assert!(ack.starts_with("Forgotten you: 1 stored message(s), 1 fact(s) removed"), "T1's alone: {ack}");
    w.run_for(60.0).await;
    let of_alice = async |team: &str| {
        let stored = w.store.messages_after(&c1(team), None, 10).await.unwrap();
        stored.iter().filter(|m| m.user.as_str() == ALICE).count()
    };
    assert_eq!((of_alice("T1").await, of_alice("T2").await), (0, 1));
    assert_eq!(w.store.profile(Workspace::Slack("T1"), &alice).await.unwrap(), None);
    assert!(w.store.profile(Workspace::Slack("T2"), &alice).await.unwrap().is_some());
    assert_eq!(w.store.facts(&c1("T1")).await.unwrap(), Vec::new(), "her fact in T1 went");
    assert_eq!(w.store.facts(&c1("T2")).await.unwrap().len(), 1, "T2's stays");

    // T1 uninstalls kuuki: its installation goes at once, its data after the grace.
    let uninstalled = envelope_in("T1", "UBOT1", json!({"type": "app_uninstalled"}));
    assert_eq!(w.post_signed("/slack/events", &uninstalled, &[]).await.status(), 200);
    assert_eq!(w.store.installation("T1").await.unwrap(), None);
    assert!(workspaces.installed("T2").await.unwrap().is_some());
    w.run_for(2.0 * HOUR).await;
    assert!(w.store.messages_after(&c1("T1"), None, 10).await.unwrap().is_empty(), "T1 purged");
    assert_eq!(w.store.workspace_memory(Workspace::Slack("T1")).await.unwrap(), WorkspaceMemory::default());
    assert_eq!(of_alice("T2").await, 1, "T2 untouched");
    assert_eq!(w.store.facts(&c1("T2")).await.unwrap().len(), 1);
    let t2 = w.store.workspace_memory(Workspace::Slack("T2")).await.unwrap();
    assert_eq!((t2.history.as_str(), t2.channel_lines.len()), ("team two ships on Mondays", 1));
    assert!(w.store.profile(Workspace::Slack("T2"), &alice).await.unwrap().is_some());
    // T1's events are refused now; T2 is answered as before.
    mention_in(&w, "T1", "UBOT1", 3 * 3600).await;
    mention_in(&w, "T2", "UBOT2", 3 * 3600).await;
    w.run_for(60.0).await;
    let tokens: Vec<String> = posts(&w).await.into_iter().map(|(token, _)| token).collect();
    assert!(tokens.iter().all(|t| t == "Bearer xoxb-two") && !tokens.is_empty(), "{tokens:?}");
}

#[tokio::test]
async fn an_enterprise_grid_org_wide_install_answers_in_two_of_its_workspaces() {
    let llm = RecordingLlm::new(r#"{"role": "generate", "reply": "hello", "repeat": true}"#);
    let (w, workspaces) = SlackWorld::start_many(&[], Some(llm)).await;
    let grant = kuuki::ports::SlackGrant {
        key: kuuki::ports::InstallationKey { enterprise: Some("E1".into()), team: None },
        app_id: "A0KUUKI".into(),
        team_name: String::new(),
        enterprise_name: Some("Org One".into()),
        installer: UserId("WADMIN".into()),
        bot_token: "xoxb-org".into(),
        bot_user_id: UserId("UBOTORG".into()),
        bot_id: "BORG".into(),
        bot_scopes: vec!["chat:write".into()],
        refresh_token: None,
        expires_in_seconds: None,
    };
    workspaces.install(&grant, w.clock.now()).await.unwrap();
    // Events from two of the org's workspaces, each delivered for the org's install.
    for (team, channel) in [("T1", "C1"), ("T2", "C9")] {
        let event = message(channel, ALICE, "<@UBOTORG> hi", &w.ts(0, 1));
        let body = json!({
            "type": "event_callback", "team_id": team, "enterprise_id": "E1", "event": event,
            "event_id": format!("Ev{team}"), "event_time": 1767603600,
            "authorizations": [{"enterprise_id": "E1", "team_id": null, "user_id": "UBOTORG", "is_bot": true, "is_enterprise_install": true}],
        })
        .to_string();
        assert_eq!(w.post_signed("/slack/events", &body, &[]).await.status(), 200);
    }
    w.run_for(60.0).await;
    let mut posted = posts(&w).await;
    posted.sort();
    let expected = [("Bearer xoxb-org", "C1"), ("Bearer xoxb-org", "C9")].map(|(a, c)| (a.to_owned(), c.to_owned()));
    assert_eq!(posted, expected, "both answered with the org's token");
    for channel in ["C1", "C9"] {
        let stored = w.store.messages_after(&ChannelId::slack_in("E1", channel), None, 10).await.unwrap();
        assert_eq!(stored.len(), 2, "kept as the org's ({channel}): the question and the answer");
    }
}

#[tokio::test]
async fn a_late_retry_of_an_uninstall_leaves_the_reinstall_alone() {
    let llm = RecordingLlm::new(r#"{"role": "generate", "reply": "here", "repeat": true}"#);
    let (w, workspaces) = two_workspaces(llm).await;
    let uninstalled = envelope_in("T1", "UBOT1", json!({"type": "app_uninstalled"}));
    assert_eq!(w.post_signed("/slack/events", &uninstalled, &[]).await.status(), 200);
    assert!(workspaces.installed("T1").await.unwrap().is_none(), "gone at the uninstall");
    // Installed again a minute later, then Slack retries the old event.
    w.clock.advance_to(w.clock.now() + std::time::Duration::from_secs(60));
    SlackWorld::installed_at(&workspaces, "T1", "UBOT1", "xoxb-one-again", w.clock.now()).await;
    w.store.clear_slack_gone(Workspace::Slack("T1"), Timestamp(1_767_603_600_000_000)).await.unwrap();
    let retried = w.post_signed("/slack/events", &uninstalled, &[("x-slack-retry-num", "1")]).await;
    assert_eq!(retried.status(), 200);
    assert!(w.store.installation("T1").await.unwrap().is_some(), "the reinstall stays");
    assert_eq!(w.store.slack_gone(Workspace::Slack("T1")).await.unwrap(), None, "and is not marked gone");
    mention_in(&w, "T1", "UBOT1", 120).await;
    w.run_for(2.0 * HOUR).await;
    let tokens: Vec<String> = posts(&w).await.into_iter().map(|(token, _)| token).collect();
    assert_eq!(tokens, ["Bearer xoxb-one-again"], "answered with the new token, nothing purged");
    assert_eq!(w.store.facts(&c1("T1")).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_forget_asked_before_an_uninstall_is_still_carried_out() {
    let llm = RecordingLlm::new(r#"{"role": "generate", "reply": "ok", "repeat": true}"#);
    let (w, workspaces) = two_workspaces(llm).await;
    let said = message("C1", ALICE, "my cat is Miso", &w.ts(0, 2));
    assert_eq!(w.post_signed("/slack/events", &envelope_in("T1", "UBOT1", said), &[]).await.status(), 200);
    w.run_for(60.0).await;
    // Asked with a way back (so queued), then the workspace removes kuuki before it runs.
    let forget = kuuki::domain::Job::Forget {
        channel: c1("T1"),
        user: UserId(ALICE.into()),
        whom: "you".into(),
        ts: kuuki::domain::Ts::new(w.ts(61, 1)),
        reply: kuuki::domain::CommandReply::Slack { response_url: format!("{}/commands/T1/1/x", w.slack_api.uri()) },
        server: None,
    };
    w.deps.enqueue_after(forget, std::time::Duration::from_secs(5)).await.unwrap();
    let uninstalled = envelope_in("T1", "UBOT1", json!({"type": "app_uninstalled"}));
    assert_eq!(w.post_signed("/slack/events", &uninstalled, &[]).await.status(), 200);
    assert!(workspaces.installed("T1").await.unwrap().is_none());
    w.run_for(30.0).await;
    let stored = w.store.messages_after(&c1("T1"), None, 10).await.unwrap();
    assert!(stored.iter().all(|m| m.user.as_str() != ALICE), "her message went before the purge: {stored:?}");
    assert_eq!(w.store.facts(&c1("T1")).await.unwrap(), Vec::new(), "and the fact she taught");
}
