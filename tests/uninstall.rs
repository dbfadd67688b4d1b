//! A Slack workspace that removes kuuki, over real HTTP: signed `app_uninstalled` and
//! `tokens_revoked` events in, then what kuuki still posts (nothing) and what the store
//! still holds once the grace period is over (nothing of the workspace; a Discord
//! channel's data in the same store stays), or after a reinstall within it (everything).

use std::sync::Arc;

use kuuki::domain::{
    ChannelId, ChannelLine, ChannelMemory, EventKind, Fact, Job, Message, Timestamp, Ts, UserId, Workspace,
    WorkspaceMemory,
};
use kuuki::ports::{ChannelStateStore, Clock, FactStore, MessageStore};
use kuuki_e2e::slack_world::{BOT_USER, SlackWorld, envelope, message};
use serde_json::{Value, json};

const CH: &str = "C0GENERAL";
const ALICE: &str = "UALICE";
/// A Discord channel and person the same deployment serves.
const DISCORD_CH: &str = "41771983423143938";
const DISCORD_USER: &str = "80351110224678912";
const HOUR: f64 = 3600.0;
/// `UNINSTALL_PURGE_GRACE_HOURS`' default.
const GRACE_HOURS: f64 = 72.0;

fn channel(id: &str) -> ChannelId {
    ChannelId(id.into())
}

fn fact(channel: &str, user: &str, content: &str, at: Timestamp) -> Fact {
    Fact {
        id: format!("fact-{channel}"),
        channel: ChannelId(channel.into()),
        content: content.into(),
        keywords: vec!["cat".into()],
        source_users: vec![user.into()],
        confidence: 0.9,
        shareable: false,
        created_at: at,
        confirmed_at: at,
        strength: 1,
        source_messages: Vec::new(),
        embedding: None,
    }
}

/// Alice said something in the Slack channel (stored and counted by the ingress, judged
/// since), and kuuki learned from it: a fact, a note, the channel's memory and line,
/// the workspace memory. A Discord channel of the same deployment holds the same kinds.
async fn a_workspace_kuuki_knows(w: &SlackWorld) {
    w.send_event(message(CH, ALICE, "my cat is Miso", &w.ts(0, 1)), &[]).await;
    w.run_for(60.0).await;
    let now = w.clock.now();
    let store = &w.store;
    let memory = ChannelMemory { summary: "Alice has a cat".into(), updated_at: Some(now), ..Default::default() };
    for (ch, user) in [(CH, ALICE), (DISCORD_CH, DISCORD_USER)] {
        store.put_fact(&fact(ch, user, "has a cat called Miso", now)).await.unwrap();
        store
            .note_reflection(&channel(ch), &UserId(user.into()), &["cats".into()], "spoke of a cat", now)
            .await
            .unwrap();
        store.set_channel_memory(&channel(ch), memory.clone()).await.unwrap();
    }
    let line = ChannelLine { channel: channel(CH), line: "cats".into(), updated_at: now };
    store.set_channel_line(&channel(CH), Some(line)).await.unwrap();
    let workspace = WorkspaceMemory { history: "Alice has a cat".into(), ..Default::default() };
    store.set_workspace_memory(Workspace::Shared, workspace).await.unwrap();
    let discord = Message {
        channel: channel(DISCORD_CH),
        ts: Ts::new("1301213485260619786"),
        thread_root: None,
        user: UserId(DISCORD_USER.into()),
        user_name: "bob".into(),
        text: "my dog is Pochi".into(),
        author: kuuki::domain::Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at: now,
    };
    store.put_message(&Arc::new(discord)).await.unwrap();
    store.count_message(&UserId(DISCORD_USER.into()), &channel(DISCORD_CH), now, false).await.unwrap();
}

/// An Events API envelope around `event` from kuuki's workspace, happening now.
async fn send_now(w: &SlackWorld, event: Value, id: &str, extra: &[(&str, &str)]) -> reqwest::Response {
    let mut body = envelope(event);
    body["event_id"] = json!(id);
    body["event_time"] = json!(w.now_secs());
    w.post_signed("/slack/events", &body.to_string(), extra).await
}

fn uninstalled() -> Value {
    json!({"type": "app_uninstalled"})
}

fn tokens_revoked(bots: &[&str]) -> Value {
    json!({"type": "tokens_revoked", "tokens": {"oauth": [ALICE], "bot": bots}})
}

fn purges_waiting(w: &SlackWorld) -> Vec<Timestamp> {
    w.queue.waiting(|job| matches!(job, Job::PurgeSlack { .. }))
}

/// A `purge` line's counts: channels, messages, facts, notes, profiles.
type Purged = (usize, usize, usize, usize, usize);

/// The `slack_access` lines (gone or back) and `purge` lines of the log so far.
fn access_and_purge_lines(events: &[kuuki::domain::Event]) -> (Vec<bool>, Vec<Purged>) {
    let access = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SlackAccess { gone, .. } => Some(*gone),
            _ => None,
        })
        .collect();
    let purges = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Purge { channels, messages, facts, notes, profiles, .. } => {
                Some((*channels, *messages, *facts, *notes, *profiles))
            }
            _ => None,
        })
        .collect();
    (access, purges)
}

/// The `dropped` lines about the message `ts`.
fn dropped_about(events: &[kuuki::domain::Event], ts: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.ts.as_str() == ts)
        .filter_map(|e| match &e.kind {
            EventKind::Dropped { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

/// Checks what the store still holds of the Slack workspace (`kept`: everything, or
/// nothing) and that the Discord channel's data is all there.
async fn workspace_is(w: &SlackWorld, kept: bool) {
    let (store, ch, alice) = (&w.store, channel(CH), UserId(ALICE.into()));
    let messages = store.messages_after(&ch, None, 100).await.unwrap();
    assert_eq!(!messages.is_empty(), kept, "the Slack channel's messages: {messages:?}");
    assert_eq!(!store.facts(&ch).await.unwrap().is_empty(), kept, "the Slack channel's facts");
    assert_eq!(store.user_note(&ch, &alice).await.unwrap().is_some(), kept, "Alice's note");
    assert_eq!(store.profile(Workspace::Shared, &alice).await.unwrap().is_some(), kept, "Alice's profile");
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.memory.summary == "Alice has a cat", kept, "the Slack channel's memory: {:?}", state.memory);
    assert_eq!(store.state_channels().await.unwrap().contains(&ch), kept);
    let workspace = store.workspace_memory(Workspace::Shared).await.unwrap();
    assert_eq!(workspace.history == "Alice has a cat", kept, "the workspace memory: {workspace:?}");
    assert_eq!(workspace.channel_lines.iter().any(|l| l.channel == ch), kept, "the channel's line");

    let (discord, bob) = (channel(DISCORD_CH), UserId(DISCORD_USER.into()));
    assert_eq!(store.messages_after(&discord, None, 100).await.unwrap().len(), 1, "Discord's message stays");
    assert_eq!(store.facts(&discord).await.unwrap().len(), 1, "Discord's fact stays");
    assert!(store.user_note(&discord, &bob).await.unwrap().is_some(), "Discord's note stays");
    assert!(store.profile(Workspace::Shared, &bob).await.unwrap().is_some(), "the Discord person's profile stays");
    assert_eq!(store.channel_state(&discord).await.unwrap().memory.summary, "Alice has a cat", "Discord's memory");
}

/// A mention Slack delivered just before the uninstall is not answered (no post is
/// tried: one `dropped` line); the event, retried and followed by its `tokens_revoked`,
/// is logged and queues its purge once; after the grace period everything of the
/// workspace is gone from the store, and the Discord channel's data is all there.
#[tokio::test]
async fn an_uninstalled_workspace_gets_no_answer_and_is_forgotten_after_the_grace_period() {
    let w = SlackWorld::start(&[], true).await;
    a_workspace_kuuki_knows(&w).await;
    let mention = w.ts(60, 2);
    w.send_event(message(CH, ALICE, "<@UKUUKI> are you there?", &mention), &[]).await;
    assert_eq!(send_now(&w, uninstalled(), "EvGONE", &[]).await.status(), 200);
    let purge_at = w.clock.now() + std::time::Duration::from_secs_f64(GRACE_HOURS * HOUR);
    assert_eq!(purges_waiting(&w), [purge_at], "the purge waits for the grace period");
    // Slack's retry of the event, and the tokens_revoked an uninstall sends too.
    let retry = [("x-slack-retry-num", "1"), ("x-slack-retry-reason", "http_timeout")];
    assert_eq!(send_now(&w, uninstalled(), "EvGONE", &retry).await.status(), 200);
    assert_eq!(send_now(&w, tokens_revoked(&[BOT_USER]), "EvREVOKED", &[]).await.status(), 200);
    assert_eq!(purges_waiting(&w), [purge_at], "queued once");

    w.run_for(60.0).await;
    assert!(w.calls("chat.postMessage").await.is_empty(), "no post is tried");
    let events = w.events();
    assert_eq!(access_and_purge_lines(&events).0, [true], "one line: access gone");
    let dropped = dropped_about(&events, &mention);
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert!(dropped[0].contains("Slack access is gone"), "{dropped:?}");
    workspace_is(&w, true).await;

    w.run_for(GRACE_HOURS * HOUR).await;
    assert!(purges_waiting(&w).is_empty());
    let (access, purges) = access_and_purge_lines(&w.events());
    assert!(access.is_empty(), "{access:?}");
    // Channels, Alice's and the mention's messages, the fact, the note, Alice's profile.
    assert_eq!(purges, [(1, 2, 1, 1, 1)]);
    workspace_is(&w, false).await;
    assert_eq!(w.store.message_channels().await.unwrap(), [channel(DISCORD_CH)]);
    assert!(w.calls("chat.postMessage").await.is_empty());
}

/// Installed again within the grace period: the first message posted since is
/// answered (it clears the mark, logged once), and the purge finds nothing to do.
/// Uninstalled once more later, the first uninstall's purge still leaves everything:
/// the workspace goes at the end of the second one's grace period.
#[tokio::test]
async fn a_reinstall_within_the_grace_period_keeps_everything() {
    let w = SlackWorld::start(&[], true).await;
    a_workspace_kuuki_knows(&w).await;
    assert_eq!(send_now(&w, uninstalled(), "EvGONE", &[]).await.status(), 200);
    w.run_for(HOUR).await;
    let back = w.ts(2 * 3600, 3);
    w.clock.advance_to(kuuki::replay::REPLAY_EPOCH + std::time::Duration::from_secs(2 * 3600));
    w.send_event(message(CH, ALICE, "<@UKUUKI> welcome back", &back), &[]).await;
    w.run_for(60.0).await;
    let posts = w.calls("chat.postMessage").await;
    assert_eq!(posts.len(), 1, "answered: {posts:?}");
    assert_eq!(w.store.slack_gone(Workspace::Shared).await.unwrap(), None, "the mark is cleared");
    w.run_for(HOUR).await;
    assert_eq!(send_now(&w, uninstalled(), "EvGONEAGAIN", &[]).await.status(), 200);
    assert_eq!(purges_waiting(&w).len(), 2, "the first uninstall's purge and the second's");

    // Past the first uninstall's grace period, within the second's.
    w.run_for((GRACE_HOURS - 1.0) * HOUR).await;
    let (access, purges) = access_and_purge_lines(&w.events());
    assert_eq!(access, [true, false, true], "gone, back, gone again: one line each");
    assert!(purges.is_empty(), "nothing purged: {purges:?}");
    assert_eq!(purges_waiting(&w).len(), 1, "the second's purge is still to come");
    workspace_is(&w, true).await;
    assert_eq!(w.store.messages_after(&channel(CH), None, 100).await.unwrap().len(), 3, "Alice's two and kuuki's");

    w.run_for(2.0 * HOUR).await;
    let (_, purges) = access_and_purge_lines(&w.events());
    assert_eq!(purges, [(1, 3, 1, 1, 1)], "at the end of the second's grace period");
    workspace_is(&w, false).await;
}

/// `tokens_revoked` listing only other users' tokens changes nothing; listing kuuki's
/// bot it is an uninstall: marked, and the purge queued.
#[tokio::test]
async fn revoked_tokens_are_an_uninstall_only_when_kuukis_bot_is_among_them() {
    let w = SlackWorld::start(&[], true).await;
    assert_eq!(send_now(&w, tokens_revoked(&["UOTHERBOT"]), "EvOTHERS", &[]).await.status(), 200);
    assert_eq!(w.store.slack_gone(Workspace::Shared).await.unwrap(), None);
    assert!(purges_waiting(&w).is_empty());
    assert!(access_and_purge_lines(&w.events()).0.is_empty());
    assert_eq!(send_now(&w, tokens_revoked(&["UOTHERBOT", BOT_USER]), "EvOURS", &[]).await.status(), 200);
    assert_eq!(w.store.slack_gone(Workspace::Shared).await.unwrap(), Some(w.clock.now()));
    assert_eq!(purges_waiting(&w).len(), 1);
    assert_eq!(access_and_purge_lines(&w.events()).0, [true]);
}

/// A purge that dies halfway (the store refuses the first channel's state after its
/// messages, fact and note went) is delivered again and finishes, and its one line
/// counts what both attempts removed.
#[tokio::test]
async fn a_purge_that_dies_halfway_is_finished_by_its_redelivery() {
    let w = SlackWorld::start(&[], true).await;
    a_workspace_kuuki_knows(&w).await;
    assert_eq!(send_now(&w, uninstalled(), "EvGONE", &[]).await.status(), 200);
    w.run_for(GRACE_HOURS * HOUR - 60.0).await;
    w.events();
    w.store.fail_next_writes(1);
    assert_eq!(w.run_for_counting(120.0).await, 1, "the first attempt failed");
    w.run_for(HOUR).await;
    let (_, purges) = access_and_purge_lines(&w.events());
    assert_eq!(purges, [(1, 1, 1, 1, 1)], "logged once, with the first attempt's part");
    workspace_is(&w, false).await;
}
