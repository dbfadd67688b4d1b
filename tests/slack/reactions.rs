//! Reactions over Slack's Events API (`reaction_added`, `reaction_removed`): how people
//! take kuuki's posts moves the channel's talkativeness (docs/design.md §7.6).

use super::*;
use kuuki::ports::ChannelStateStore;

fn reaction(kind: &str, user: &str, emoji: &str, ts: &str) -> Value {
    json!({"type": kind, "user": user, "reaction": emoji, "item_user": BOT_USER,
        "item": {"type": "message", "channel": CH, "ts": ts}, "event_ts": "1767603700.000100"})
}

/// (signal, weight, undone) of each `feedback` record so far.
fn feedback(w: &SlackWorld) -> Vec<(&'static str, f64, bool)> {
    w.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Feedback { signal, weight, undone, .. } => Some((signal.as_str(), weight, undone)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_reaction_on_kuukis_post_counts_once_and_its_removal_undoes_it() {
    let w = SlackWorld::start(&[], true).await;
    let asked = w.ts(0, 100);
    w.send_event(message(CH, "UALICE", "<@UKUUKI> where is the runbook?", &asked), &[]).await;
    w.run_for(10.0).await;
    let posts = w.store.messages_after(&ChannelId(CH.into()), None, 10).await.unwrap();
    let own = posts.iter().find(|m| m.author == Author::OwnBot).expect("kuuki answered").ts.to_string();

    // On someone else's message: nothing.
    assert_eq!(w.send_event(reaction("reaction_added", "UBOB", "-1", &asked), &[]).await.status(), 200);
    assert!(feedback(&w).is_empty());
    // On kuuki's post: counted, and Slack's retry of it is not counted again.
    assert_eq!(w.send_event(reaction("reaction_added", "UBOB", "-1", &own), &[]).await.status(), 200);
    let retry = [("x-slack-retry-num", "1"), ("x-slack-retry-reason", "http_timeout")];
    assert_eq!(w.send_event(reaction("reaction_added", "UBOB", "-1", &own), &retry).await.status(), 200);
    assert_eq!(feedback(&w), vec![("negative_reaction", -6.0, false)]);
    let offset = || async {
        let state = w.store.channel_state(&ChannelId(CH.into())).await.unwrap();
        state.talkativeness.offset_at(w.clock.now(), &kuuki::domain::talkativeness::TalkativenessLimits::default())
    };
    assert_eq!(offset().await, -6.0);
    // kuuki's own reaction (a react-only answer) is no signal; a welcoming one is.
    w.send_event(reaction("reaction_added", BOT_USER, "+1", &own), &[]).await;
    w.send_event(reaction("reaction_added", "UCAROL", "+1", &own), &[]).await;
    assert_eq!(offset().await, -3.0);
    // Taken off: undone, once.
    w.send_event(reaction("reaction_removed", "UBOB", "-1", &own), &[]).await;
    w.send_event(reaction("reaction_removed", "UBOB", "-1", &own), &[]).await;
    assert_eq!(offset().await, 3.0);
    // (The log is read as it goes: these are the records since the last look.)
    assert_eq!(feedback(&w), vec![("positive_reaction", 3.0, false), ("negative_reaction", 6.0, true)]);
}

#[tokio::test]
async fn a_reaction_on_a_file_is_ignored_and_one_with_a_bad_ts_is_refused() {
    let w = SlackWorld::start(&[], true).await;
    let mut on_file = reaction("reaction_added", "UBOB", "-1", "1767603600.000100");
    on_file["item"] = json!({"type": "file", "file": "F1"});
    assert_eq!(w.send_event(on_file, &[]).await.status(), 200);
    let bad = reaction("reaction_added", "UBOB", "-1", "yesterday");
    assert_eq!(w.send_event(bad, &[]).await.status(), 400);
    assert!(feedback(&w).is_empty());
}
