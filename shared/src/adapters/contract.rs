//! The contract every adapter of a port must keep, as async checks over a trait
//! object. The in-process adapters run them in this crate's tests; the AWS adapters
//! run the same functions against local emulators, so the two cannot drift.
//! Each check panics with what broke. Stores must be empty when a check starts; the
//! names used are unique per check, so checks may share a store.

use std::time::Duration;

use crate::domain::{
    Author, ChannelId, ChannelLine, ChannelMemory, Decision, Fact, Intervention, JudgmentNote, Message, ResponseType,
    ThreadKey, Timestamp, Ts, UserId, UserNote, Workspace, WorkspaceMemory,
};
use crate::ports::{
    ChannelState, ChannelStateStore, ClaimOutcome, FactRevision, FactStore, InstallationKey, Installations, Ledger,
    MemoryTask, MessageStore, PutOutcome, Shadow, TokenSealer,
};

/// 2100-01-01. DynamoDB Local deletes items whose TTL has passed by the machine's
/// clock, at any moment: a ledger item dated in the past (its TTL a day after its
/// `until`) could vanish between two checks. Dated in the future, nothing the contract
/// writes expires while it runs.
const T0: i64 = 4_102_444_800 * 1_000_000;

fn at(secs: i64) -> Timestamp {
    Timestamp(T0 + secs * 1_000_000)
}

fn message(channel: &str, secs: i64, root: Option<i64>, text: &str) -> Message {
    Message {
        channel: ChannelId(channel.into()),
        ts: Ts::from_timestamp(at(secs)),
        thread_root: root.map(|r| Ts::from_timestamp(at(r))),
        user: UserId("U1".into()),
        user_name: "alice".into(),
        text: text.into(),
        author: Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at: at(secs),
    }
}

/// Waits (up to 10 s) until `thread` reads back `count` messages.
async fn settle(store: &dyn MessageStore, thread: &ThreadKey, count: usize) {
    for _ in 0..100 {
        if store.recent_in_thread(thread, Timestamp(0), 100).await.unwrap().len() == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{thread:?} never read back {count} messages");
}

/// Conditional put, get, edit, delete, windowed reads per conversation, the previous
/// message of a channel.
pub async fn message_store(store: &dyn MessageStore) {
    let ch = ChannelId("contract-messages".into());
    let m1 = message(&ch.0, 10, None, "one");
    assert_eq!(
        store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(&m1))).await.unwrap(),
        PutOutcome::Inserted
    );
    let mut again = m1.clone();
    again.text = "changed".into();
    assert_eq!(
        store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(&again))).await.unwrap(),
        PutOutcome::AlreadyExists,
        "a second put of (channel, ts)"
    );
    assert_eq!(store.get_message(&ch, &m1.ts).await.unwrap().unwrap().text, "one", "the first write wins");
    assert_eq!(store.get_message(&ChannelId("elsewhere".into()), &m1.ts).await.unwrap(), None);
    // A reply (Discord's) keeps the message it replies to; the others have none.
    let mut reply = message(&ch.0, 11, None, "a reply");
    reply.replies_to = Some(m1.ts.clone());
    store.put_message(&std::sync::Arc::new(reply.clone())).await.unwrap();
    assert_eq!(*store.get_message(&ch, &reply.ts).await.unwrap().unwrap(), reply);
    assert_eq!(store.get_message(&ch, &m1.ts).await.unwrap().unwrap().replies_to, None);
    assert!(store.delete_message(&ch, &reply.ts).await.unwrap());

    // A top level with a thread under m1, and another channel with the same ts.
    let m2 = message(&ch.0, 20, Some(10), "reply");
    let m3 = message(&ch.0, 30, None, "two");
    let m4 = message(&ch.0, 40, Some(10), "reply 2");
    let other = message("contract-other", 20, None, "other channel");
    for m in [&m2, &m3, &m4, &other] {
        assert_eq!(
            store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(m))).await.unwrap(),
            PutOutcome::Inserted
        );
    }
    let top = ThreadKey::top_level(ch.clone());
    let thread = ThreadKey::thread(ch.clone(), m1.ts.clone());
    let texts = |ms: Vec<std::sync::Arc<Message>>| ms.into_iter().map(|m| m.text.clone()).collect::<Vec<_>>();
    // Conversation reads may lag writes a little (a DynamoDB index is eventually
    // consistent); kuuki reads them seconds later, so the checks wait for them too.
    settle(store, &top, 2).await;
    settle(store, &thread, 2).await;
    assert_eq!(texts(store.recent_in_thread(&top, at(0), 10).await.unwrap()), ["one", "two"], "oldest first");
    assert_eq!(texts(store.recent_in_thread(&thread, at(0), 10).await.unwrap()), ["reply", "reply 2"]);
    assert_eq!(texts(store.recent_in_thread(&top, at(0), 1).await.unwrap()), ["two"], "the newest within the limit");
    assert_eq!(texts(store.recent_in_thread(&top, at(11), 10).await.unwrap()), ["two"], "since is inclusive of later");
    assert_eq!(texts(store.recent_in_thread(&top, at(30), 10).await.unwrap()), ["two"], "since is inclusive");
    assert!(
        store.recent_in_thread(&ThreadKey::top_level(ChannelId("nobody".into())), at(0), 10).await.unwrap().is_empty()
    );

    // A busy thread buries the top level: its newest messages are still found, behind
    // more thread replies than one page of a read holds.
    let busy = ChannelId("contract-busy-thread".into());
    let mut busy_messages = vec![message(&busy.0, 1, None, "opening"), message(&busy.0, 2, None, "root")];
    busy_messages.extend((0..230).map(|i| message(&busy.0, 10 + i, Some(2), "in the thread")));
    for m in &busy_messages {
        store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(m))).await.unwrap();
    }
    let busy_top = ThreadKey::top_level(busy.clone());
    settle(store, &ThreadKey::thread(busy.clone(), busy_messages[1].ts.clone()), 100).await;
    assert_eq!(texts(store.recent_in_thread(&busy_top, at(0), 5).await.unwrap()), ["opening", "root"]);
    assert_eq!(texts(store.recent_in_thread(&busy_top, at(2), 5).await.unwrap()), ["root"], "since still bounds it");

    // A thread's opener: Slack keeps the parent at the top level, a replay's thread
    // keeps its first message in the thread (then there is no opener outside it).
    let opener = |channel: &ChannelId, root: &Ts| {
        let (channel, root) = (channel.clone(), root.clone());
        async move { store.thread_opener(&channel, &root).await.unwrap().map(|m| m.text.clone()) }
    };
    assert_eq!(opener(&ch, &m1.ts).await.as_deref(), Some("one"), "a top-level parent opens its thread");
    let own = ChannelId("contract-own-root".into());
    let own_root = message(&own.0, 60, Some(60), "first in its thread");
    for m in [&own_root, &message(&own.0, 70, Some(60), "second")] {
        store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(m))).await.unwrap();
    }
    settle(store, &ThreadKey::thread(own.clone(), own_root.ts.clone()), 2).await;
    assert_eq!(opener(&own, &own_root.ts).await, None, "a root in its own thread opens nothing outside it");
    assert_eq!(opener(&ch, &Ts::new("1.000001")).await, None, "no such message");
    assert_eq!(opener(&ChannelId("contract-other".into()), &m1.ts).await, None, "another channel's ts");

    // The whole channel, every conversation, in time order.
    assert_eq!(texts(store.recent_in_channel(&ch, at(0), 10).await.unwrap()), ["one", "reply", "two", "reply 2"]);
    assert_eq!(texts(store.recent_in_channel(&ch, at(0), 2).await.unwrap()), ["two", "reply 2"]);
    assert_eq!(texts(store.recent_in_channel(&ch, at(25), 10).await.unwrap()), ["two", "reply 2"]);

    // The newest of the whole channel in one read, and whether that is all of it.
    let window = store.channel_window(&ch, 3).await.unwrap();
    assert_eq!(texts(window.messages), ["reply", "two", "reply 2"], "the newest, oldest first");
    assert!(!window.complete, "one more is stored");
    let window = store.channel_window(&ch, 10).await.unwrap();
    assert_eq!(texts(window.messages), ["one", "reply", "two", "reply 2"]);
    assert!(window.complete, "nothing older is stored");
    let nobody = store.channel_window(&ChannelId("nobody".into()), 10).await.unwrap();
    assert!(nobody.messages.is_empty() && nobody.complete);
    // The page before a window: older than the ts, newest of those, oldest first.
    let before = store.channel_window_before(&ch, &m4.ts, 2).await.unwrap();
    assert_eq!(texts(before.messages), ["reply", "two"], "the two before `reply 2`");
    assert!(!before.complete, "one more is stored before them");
    let before = store.channel_window_before(&ch, &m4.ts, 10).await.unwrap();
    assert_eq!(texts(before.messages), ["one", "reply", "two"]);
    assert!(before.complete, "nothing older is stored");
    let before = store.channel_window_before(&ch, &m1.ts, 10).await.unwrap();
    assert!(before.messages.is_empty() && before.complete, "nothing before the first");

    // Forward from a ts: the oldest first, after it (exclusive).
    assert_eq!(texts(store.messages_after(&ch, None, 2).await.unwrap()), ["one", "reply"]);
    assert_eq!(texts(store.messages_after(&ch, Some(&m2.ts), 10).await.unwrap()), ["two", "reply 2"]);
    assert!(store.messages_after(&ch, Some(&m4.ts), 10).await.unwrap().is_empty());

    // The previous message in the channel, any conversation, strictly before.
    let prev = |ts: &Ts| {
        let ts = ts.clone();
        let ch = ch.clone();
        async move { store.previous_in_channel(&ch, &ts).await.unwrap().map(|m| m.text.clone()) }
    };
    assert_eq!(prev(&m3.ts).await.as_deref(), Some("reply"));
    assert_eq!(prev(&m4.ts).await.as_deref(), Some("two"));
    assert_eq!(prev(&m1.ts).await, None);

    // Edits and deletes.
    assert!(store.update_text(&ch, &m3.ts, "two, edited").await.unwrap());
    assert_eq!(store.get_message(&ch, &m3.ts).await.unwrap().unwrap().text, "two, edited");
    assert!(!store.update_text(&ch, &Ts::new("1.000001"), "x").await.unwrap());
    assert!(store.delete_message(&ch, &m2.ts).await.unwrap());
    assert!(!store.delete_message(&ch, &m2.ts).await.unwrap(), "deleting twice");
    settle(store, &thread, 1).await;
    assert_eq!(store.get_message(&ch, &m2.ts).await.unwrap(), None);
    assert_eq!(texts(store.recent_in_thread(&thread, at(0), 10).await.unwrap()), ["reply 2"]);
    assert_eq!(prev(&m3.ts).await.as_deref(), Some("one"), "a deleted message is not previous");

    // A forget request: one person's messages go, everyone else's stay.
    let mut bobs = message(&ch.0, 50, None, "bob's");
    bobs.user = UserId("U2".into());
    store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(&bobs))).await.unwrap();
    // A forget's second look: only what was posted before its end (`at` 10, not 30).
    let u1 = UserId("U1".into());
    assert_eq!(store.delete_messages_by(&ch, &u1, Some(at(30))).await.unwrap(), 1, "one, posted before");
    assert_eq!(store.delete_messages_by(&ch, &u1, Some(at(30))).await.unwrap(), 0, "safe to repeat");
    assert_eq!(texts(store.messages_after(&ch, None, 10).await.unwrap()), ["two, edited", "reply 2", "bob's"]);
    assert_eq!(store.delete_messages_by(&ch, &u1, None).await.unwrap(), 2, "two and reply 2");
    assert_eq!(store.delete_messages_by(&ch, &u1, None).await.unwrap(), 0, "safe to repeat");
    assert_eq!(texts(store.messages_after(&ch, None, 10).await.unwrap()), ["bob's"]);
    assert_eq!(
        store.get_message(&ChannelId("contract-other".into()), &other.ts).await.unwrap().unwrap().text,
        "other channel"
    );
}

/// Claims: one holder at a time, expiry, completion, release.
pub async fn ledger(ledger: &dyn Ledger) {
    let lease = Duration::from_secs(300);
    let key = "contract:claim";
    assert_eq!(ledger.claim(key, at(0), lease).await.unwrap(), ClaimOutcome::Claimed);
    assert_eq!(ledger.claim(key, at(10), lease).await.unwrap(), ClaimOutcome::InProgress { until: at(300) });
    assert_eq!(
        ledger.claim(key, at(301), lease).await.unwrap(),
        ClaimOutcome::Claimed,
        "an expired claim can be taken"
    );
    ledger.complete(key, at(302), Duration::from_secs(3600)).await.unwrap();
    assert_eq!(ledger.claim(key, at(303), lease).await.unwrap(), ClaimOutcome::Completed);
    ledger.release(key).await.unwrap();
    assert_eq!(
        ledger.claim(key, at(304), lease).await.unwrap(),
        ClaimOutcome::Completed,
        "release leaves completed work"
    );

    let key = "contract:release";
    assert_eq!(ledger.claim(key, at(0), lease).await.unwrap(), ClaimOutcome::Claimed);
    ledger.release(key).await.unwrap();
    assert_eq!(ledger.claim(key, at(1), lease).await.unwrap(), ClaimOutcome::Claimed, "released work can be claimed");
    assert_eq!(
        ledger.claim("contract:other", at(1), lease).await.unwrap(),
        ClaimOutcome::Claimed,
        "keys are independent"
    );

    // A holder that began to post and then died or gave up: the next holder is told.
    let key = "contract:posting";
    assert_eq!(ledger.claim(key, at(0), lease).await.unwrap(), ClaimOutcome::Claimed);
    ledger.mark_posting(key).await.unwrap();
    assert_eq!(ledger.claim(key, at(10), lease).await.unwrap(), ClaimOutcome::InProgress { until: at(300) });
    assert_eq!(ledger.claim(key, at(301), lease).await.unwrap(), ClaimOutcome::Resumed, "after a crash");
    ledger.release(key).await.unwrap();
    assert_eq!(ledger.claim(key, at(302), lease).await.unwrap(), ClaimOutcome::Resumed, "after a release");
    ledger.complete(key, at(303), Duration::from_secs(3600)).await.unwrap();
    ledger.mark_posting(key).await.unwrap();
    assert_eq!(
        ledger.claim(key, at(304), lease).await.unwrap(),
        ClaimOutcome::Completed,
        "a mark never reopens done work"
    );

    // The cache: values until their expiry, replaced by a newer put.
    assert_eq!(ledger.cache_get("contract:cache", at(0)).await.unwrap(), None);
    ledger.cache_put("contract:cache", "{\"a\":1}", at(100)).await.unwrap();
    assert_eq!(ledger.cache_get("contract:cache", at(99)).await.unwrap().as_deref(), Some("{\"a\":1}"));
    assert_eq!(ledger.cache_get("contract:cache", at(100)).await.unwrap(), None, "expired at its time");
    ledger.cache_put("contract:cache", "b", at(300)).await.unwrap();
    assert_eq!(ledger.cache_get("contract:cache", at(200)).await.unwrap().as_deref(), Some("b"));
    assert_eq!(ledger.cache_get("contract:claim", at(0)).await.unwrap(), None, "claims are not cache entries");
    // An empty value is a value (a channel placed in no server is remembered as "").
    ledger.cache_put("contract:empty", "", at(300)).await.unwrap();
    assert_eq!(ledger.cache_get("contract:empty", at(200)).await.unwrap().as_deref(), Some(""));
    // Several at once, in the order asked, a key asked twice answered twice; missing,
    // expired and claims are none.
    ledger.cache_put("contract:soon", "gone", at(150)).await.unwrap();
    let keys: Vec<String> =
        ["contract:cache", "contract:missing", "contract:soon", "contract:claim", "contract:empty", "contract:cache"]
            .map(String::from)
            .into();
    let values = ledger.cache_get_many(&keys, at(200)).await.unwrap();
    assert_eq!(values, [Some("b".into()), None, None, None, Some(String::new()), Some("b".into())]);
    assert_eq!(ledger.cache_get_many(&[], at(200)).await.unwrap(), Vec::<Option<String>>::new());
    // More than one read's worth of keys (a read takes 100), found in each.
    let many: Vec<String> = (0..230).rev().map(|i| format!("contract:many:{i:03}")).collect();
    for i in [5, 120, 225] {
        ledger.cache_put(&many[i], &format!("value {i}"), at(300)).await.unwrap();
    }
    let values = ledger.cache_get_many(&many, at(200)).await.unwrap();
    let found: Vec<(usize, &str)> =
        values.iter().enumerate().filter_map(|(i, v)| v.as_deref().map(|v| (i, v))).collect();
    assert_eq!(found, [(5, "value 5"), (120, "value 120"), (225, "value 225")]);
}

/// The last response time and a bounded intervention history per channel.
pub async fn channel_states(store: &dyn ChannelStateStore) {
    let ch = ChannelId("contract-state".into());
    assert_eq!(*store.channel_state(&ch).await.unwrap(), ChannelState::default());
    let intervention = |secs: i64| Intervention {
        at: at(secs),
        thread: ThreadKey::top_level(ch.clone()),
        response_type: ResponseType::ShortAck,
        excerpt: format!("at {secs}"),
        facts: vec![crate::domain::FactUse { id: "f1".into(), content: "fact".into(), score: 0.25 }],
        unasked_post: None,
        pick_up: false,
    };
    store.record_intervention(&ch, intervention(100)).await.unwrap();
    store.record_intervention(&ch, intervention(50)).await.unwrap();
    store.record_intervention(&ch, intervention(50)).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.last_response_at, Some(at(100)), "the latest response, not the last recorded");
    assert_eq!(state.interventions.len(), 2, "a repeated record (a redelivery) is kept once");
    assert_eq!(
        state.interventions.iter().map(|i| (i.at, i.excerpt.as_str())).collect::<Vec<_>>(),
        [(at(50), ""), (at(100), "at 100")],
        "in time order, the newest in full though an older one was recorded after it"
    );
    // Enough that a store keeping them apart has to trim (DynamoDB: past 30).
    for i in 0..(ChannelState::KEPT_INTERVENTIONS as i64 + 15) {
        store.record_intervention(&ch, intervention(200 + i)).await.unwrap();
    }
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.interventions.len(), ChannelState::KEPT_INTERVENTIONS, "bounded");
    let newest = 200 + ChannelState::KEPT_INTERVENTIONS as i64 + 14;
    assert_eq!(*state.interventions.last().unwrap(), intervention(newest), "the newest in full");
    assert_eq!(
        state.interventions.first().unwrap().at,
        at(newest - (ChannelState::KEPT_INTERVENTIONS as i64 - 1)),
        "the newest kept"
    );
    assert!(
        state.interventions[..ChannelState::KEPT_INTERVENTIONS - 1]
            .iter()
            .all(|i| i.excerpt.is_empty() && i.facts.is_empty()),
        "only the newest keeps its excerpt and facts: {:?}",
        state.interventions
    );
    assert_eq!(state.last_response_at, Some(at(newest)));
    assert_eq!(*store.channel_state(&ChannelId("contract-quiet".into())).await.unwrap(), ChannelState::default());

    // Mute, shadow and the last judgment live beside the history without disturbing it.
    store.set_muted(&ch, Some(at(1000))).await.unwrap();
    let shadow = Shadow { until: Some(at(2000)), all: false };
    store.set_shadow(&ch, Some(shadow)).await.unwrap();
    let note = JudgmentNote {
        at: at(500),
        ts: Ts::from_timestamp(at(470)),
        user: UserId("U1".into()),
        text: "anyone?".into(),
        score: 35,
        breakdown: [("question".into(), 20)].into_iter().collect(),
        decision: Decision::Llm,
        respond: true,
        response_type: Some(ResponseType::FullResponse),
        reason: "unanswered".into(),
    };
    store.record_judgment(&ch, note.clone(), None).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.reflection_lull_at, None, "no lull's reflection noted");
    assert!(state.muted_at(at(999)) && !state.muted_at(at(1000)));
    assert_eq!(state.shadow, Some(shadow));
    assert_eq!(state.shadow_at(at(1999)), Some(shadow), "in force until it ends");
    assert_eq!(state.shadow_at(at(2000)), None, "and over by itself then");
    assert_eq!(state.last_judgment, Some(note.clone()));
    // `shadow all` replaces it, and its `all` survives the round trip.
    let everything = Shadow { until: Some(at(3000)), all: true };
    store.set_shadow(&ch, Some(everything)).await.unwrap();
    assert_eq!(store.channel_state(&ch).await.unwrap().shadow, Some(everything));
    assert_eq!(state.interventions.len(), ChannelState::KEPT_INTERVENTIONS);
    store.set_muted(&ch, None).await.unwrap();
    store.set_shadow(&ch, None).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!((state.muted_until, state.shadow), (None, None));
    assert!(state.last_judgment.is_some());

    // Memories: a summary due blocks another until its time; a new memory clears it.
    assert!(store.mark_due(&ch, MemoryTask::Summary, at(900), at(0)).await.unwrap());
    store.set_muted(&ch, None).await.unwrap();
    store.record_judgment(&ch, note.clone(), Some(at(1300))).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.summary_due, Some(at(900)), "other writes keep the mark");
    assert_eq!(state.last_judgment.as_ref(), Some(&note));
    assert_eq!(state.reflection_lull_at, Some(at(1300)), "the lull's reflection is noted with the judgment");
    // The channel's other writes keep it; a judgment that queued none leaves it; the
    // next noted time replaces it.
    store.set_muted(&ch, Some(at(5))).await.unwrap();
    store.set_muted(&ch, None).await.unwrap();
    let newer = JudgmentNote { score: 10, ..note.clone() };
    store.record_judgment(&ch, newer.clone(), None).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!((state.last_judgment.as_ref(), state.reflection_lull_at), (Some(&newer), Some(at(1300))));
    store.record_judgment(&ch, note.clone(), Some(at(1250))).await.unwrap();
    assert_eq!(store.channel_state(&ch).await.unwrap().reflection_lull_at, Some(at(1250)));
    // Noted on its own (a direct answer's trigger), the judgment's note kept beside it.
    store.note_lull_reflection(&ch, at(1400)).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!((state.reflection_lull_at, state.last_judgment.as_ref()), (Some(at(1400)), Some(&note)));
    store.record_judgment(&ch, newer.clone(), None).await.unwrap();
    assert_eq!(store.channel_state(&ch).await.unwrap().reflection_lull_at, Some(at(1400)));
    assert!(!store.mark_due(&ch, MemoryTask::Summary, at(950), at(10)).await.unwrap(), "one is pending");
    assert!(store.mark_due(&ch, MemoryTask::Summary, at(60), at(10)).await.unwrap(), "an earlier one takes its place");
    assert!(!store.mark_due(&ch, MemoryTask::Summary, at(70), at(11)).await.unwrap(), "then that one is pending");
    assert!(store.mark_due(&ch, MemoryTask::Summary, at(2000), at(901)).await.unwrap(), "the pending one is past");
    store.clear_marks(&ch, MemoryTask::Summary).await.unwrap();
    assert!(store.mark_due(&ch, MemoryTask::Summary, at(2100), at(902)).await.unwrap(), "cleared");
    let memory = ChannelMemory {
        summary: "deploys".into(),
        history: "h".into(),
        mood: "calm".into(),
        topic_keywords: vec!["deploy".into()],
        active_users: vec!["alice".into()],
        updated_at: Some(at(1000)),
        watermark: Some(Ts::from_timestamp(at(999))),
        generation: 2,
        private: false,
    };
    store.defer(&ch, MemoryTask::Summary, at(1500)).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!((state.summary_due, state.summary_retry_after), (None, Some(at(1500))));
    assert!(store.set_channel_memory(&ch, memory.clone()).await.unwrap());
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.memory, memory);
    assert_eq!((state.summary_due, state.summary_retry_after), (None, None));
    assert_eq!(state.interventions.len(), ChannelState::KEPT_INTERVENTIONS, "the rest of the state stays");
    // A memory made from an older generation (before a forget wiped it) is not stored.
    let older = ChannelMemory { summary: "made before the wipe".into(), generation: 1, ..memory.clone() };
    assert!(!store.set_channel_memory(&ch, older).await.unwrap());
    assert_eq!(store.channel_state(&ch).await.unwrap().memory, memory, "the newer generation stays");
    // Reflection marks work like the summary's; the watermark leaves them, for the
    // reflection to clear.
    assert!(store.mark_due(&ch, MemoryTask::Reflection, at(60), at(0)).await.unwrap());
    assert!(!store.mark_due(&ch, MemoryTask::Reflection, at(70), at(10)).await.unwrap(), "one is marked still");
    assert!(
        store.mark_due(&ch, MemoryTask::Summary, at(3000), at(20)).await.unwrap(),
        "each task has its own marks: a reflection's does not block a summary"
    );
    assert!(!store.mark_due(&ch, MemoryTask::Reflection, at(80), at(20)).await.unwrap(), "nor the other way");
    store.defer(&ch, MemoryTask::Reflection, at(700)).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!((state.reflection_due, state.reflection_retry_after), (None, Some(at(700))));
    store.set_reflection_watermark(&ch, Ts::from_timestamp(at(600))).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.reflection_watermark, Some(Ts::from_timestamp(at(600))));
    assert_eq!((state.reflection_due, state.reflection_retry_after), (None, Some(at(700))));
    // The channel's other writes keep it; the next one replaces it.
    store.set_muted(&ch, None).await.unwrap();
    store.clear_marks(&ch, MemoryTask::Reflection).await.unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.reflection_watermark, Some(Ts::from_timestamp(at(600))));
    assert_eq!((state.reflection_due, state.reflection_retry_after), (None, None));
    store.set_reflection_watermark(&ch, Ts::from_timestamp(at(650))).await.unwrap();
    assert_eq!(store.channel_state(&ch).await.unwrap().reflection_watermark, Some(Ts::from_timestamp(at(650))));
    assert_eq!(store.workspace_memory(Workspace::Shared).await.unwrap(), WorkspaceMemory::default());
    assert_eq!(store.workspace_memory_without_lines(Workspace::Shared).await.unwrap(), WorkspaceMemory::default());
    let workspace = WorkspaceMemory {
        history: "a team".into(),
        recent_events: "a release".into(),
        updated_at: Some(at(1000)),
        channel_lines: Vec::new(),
    };
    store.set_workspace_memory(Workspace::Shared, workspace.clone()).await.unwrap();
    assert_eq!(store.workspace_memory(Workspace::Shared).await.unwrap(), workspace);
    // Channel lines: newest first, each channel's replaced or removed on its own, and
    // kept when the workspace memory is written again.
    let line =
        |c: &str, t: i64| ChannelLine { channel: ChannelId(c.into()), line: format!("{c} at {t}"), updated_at: at(t) };
    store.set_channel_line(&ChannelId("dev".into()), Some(line("dev", 1100))).await.unwrap();
    store.set_channel_line(&ChannelId("ops".into()), Some(line("ops", 1200))).await.unwrap();
    store.set_channel_line(&ChannelId("dev".into()), Some(line("dev", 1300))).await.unwrap();
    store.set_channel_line(&ChannelId("hr".into()), Some(line("hr", 1400))).await.unwrap();
    store.set_channel_line(&ChannelId("hr".into()), None).await.unwrap();
    store.set_workspace_memory(Workspace::Shared, workspace.clone()).await.unwrap();
    let read = store.workspace_memory(Workspace::Shared).await.unwrap();
    assert_eq!(read.channel_lines, vec![line("dev", 1300), line("ops", 1200)]);
    assert_eq!(WorkspaceMemory { channel_lines: Vec::new(), ..read }, workspace);
    assert_eq!(store.workspace_memory_without_lines(Workspace::Shared).await.unwrap(), workspace, "the memory alone");
    talkativeness(store).await;
}

/// A channel's talkativeness: each signal counted once however often it comes, a
/// removal undoing it once, kept with the state beside what else is written there,
/// and gone with the channel's state.
async fn talkativeness(store: &dyn ChannelStateStore) {
    use crate::domain::talkativeness::{FeedbackChange, SignalKind, TalkativenessLimits};
    let ch = ChannelId("contract-talk".into());
    let limits = TalkativenessLimits::default();
    let thumbs_down = FeedbackChange::Count {
        id: "reaction:100.000000:alice:-1".into(),
        kind: SignalKind::NegativeReaction,
        post: Some(Ts::new("100.000000")),
    };
    let first = store.apply_feedback(&ch, &thumbs_down, at(200), &limits).await.unwrap().expect("counted");
    assert_eq!((first.weight, first.offset_after), (-6.0, -6.0));
    // Everything at one moment: the offset's decay is the model's to test.
    assert_eq!(store.apply_feedback(&ch, &thumbs_down, at(200), &limits).await.unwrap(), None, "a redelivery");
    let ignored = FeedbackChange::Count { id: "ignored:100.000000".into(), kind: SignalKind::Ignored, post: None };
    store.apply_feedback(&ch, &ignored, at(200), &limits).await.unwrap().expect("counted");
    // Written beside the rest of the state, which stays as it was.
    store.set_muted(&ch, Some(at(5000))).await.unwrap();
    store
        .record_judgment(
            &ch,
            JudgmentNote {
                at: at(400),
                ts: Ts::new("400.000000"),
                user: UserId("bob".into()),
                text: "hi".into(),
                score: 10,
                breakdown: Default::default(),
                decision: crate::domain::Decision::Skip,
                respond: false,
                response_type: None,
                reason: "r".into(),
            },
            None,
        )
        .await
        .unwrap();
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.muted_until, Some(at(5000)));
    assert_eq!(state.talkativeness.offset_at(at(200), &limits), -12.0);
    let causes: Vec<_> = state.talkativeness.last_causes(5).map(|s| s.kind).collect();
    assert_eq!(causes, vec![SignalKind::Ignored, SignalKind::NegativeReaction]);
    assert_eq!(state.talkativeness.signal("reaction:100.000000:alice:-1").unwrap().post, Some(Ts::new("100.000000")));
    let removal = FeedbackChange::Undo { id: "reaction:100.000000:alice:-1".into() };
    assert!(store.apply_feedback(&ch, &removal, at(200), &limits).await.unwrap().is_some_and(|o| o.undone));
    assert_eq!(store.apply_feedback(&ch, &removal, at(200), &limits).await.unwrap(), None, "undone once");
    let state = store.channel_state(&ch).await.unwrap();
    assert_eq!(state.talkativeness.offset_at(at(200), &limits), -6.0);
    store.delete_channel_state(&ch).await.unwrap();
    assert!(store.channel_state(&ch).await.unwrap().talkativeness.is_empty(), "gone with the state");
}

/// Facts per channel, replaced by id, deleted; notes about people.
/// The fact `id` of `channel` with its revision, if stored.
async fn fact_as_read(store: &dyn FactStore, channel: &ChannelId, id: &str) -> Option<(Fact, FactRevision)> {
    store.facts_as_read(channel).await.unwrap().into_iter().find(|(f, _)| f.id == id)
}

pub async fn facts(store: &dyn FactStore) {
    let ch = ChannelId("contract-facts".into());
    assert!(store.facts(&ch).await.unwrap().is_empty());
    let fact = |id: &str, content: &str| Fact {
        id: id.into(),
        channel: ch.clone(),
        content: content.into(),
        keywords: vec!["deploy".into()],
        source_users: vec!["alice".into()],
        confidence: 0.8,
        shareable: true,
        created_at: at(0),
        confirmed_at: at(0),
        strength: 1,
        source_messages: vec![Ts::from_timestamp(at(0))],
        embedding: None,
    };
    store.put_fact(&fact("f1", "alice deploys on Fridays")).await.unwrap();
    store.put_fact(&fact("f2", "lunch is curry")).await.unwrap();
    let mut stronger = fact("f1", "alice deploys on Fridays");
    stronger.strength = 2;
    store.put_fact(&stronger).await.unwrap();
    let mut facts = store.facts(&ch).await.unwrap();
    facts.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(facts.len(), 2);
    assert_eq!(facts[0], stronger, "replaced by id");
    assert!(
        store.facts(&ChannelId("contract-elsewhere".into())).await.unwrap().is_empty(),
        "facts stay in their channel"
    );
    assert!(store.fact_channels().await.unwrap().contains(&ch));
    // An embedding round-trips exactly (f32s, not rounded through text), and is gone
    // when the fact is stored again without one.
    let mut embedded = fact("f3", "deploys wait for Friday");
    embedded.embedding = Some(vec![0.25, -1.5, 1e-7, f32::MAX, 0.1]);
    store.put_fact(&embedded).await.unwrap();
    let read = store.facts(&ch).await.unwrap().into_iter().find(|f| f.id == "f3").expect("stored");
    assert_eq!(read, embedded);
    store.put_fact(&fact("f3", "deploys wait for Friday")).await.unwrap();
    let read = store.facts(&ch).await.unwrap().into_iter().find(|f| f.id == "f3").expect("stored");
    assert_eq!(read.embedding, None);
    store.delete_fact(&ch, "f3").await.unwrap();
    store.delete_fact(&ch, "f2").await.unwrap();
    store.delete_fact(&ch, "f2").await.unwrap();
    assert_eq!(store.facts(&ch).await.unwrap().len(), 1);

    // A write conditional on the fact as read: it goes through while nothing else wrote
    // it, and not after another write (or a delete) came between; a new fact only
    // where none has its id.
    let as_read = |id: &'static str| fact_as_read(store, &ch, id);
    let (read, revision) = as_read("f1").await.expect("stored");
    assert_eq!(read, stronger, "read as stored");
    let mut strengthened = read.clone();
    strengthened.strength = 3;
    assert!(store.put_fact_if_unchanged(&strengthened, Some(revision)).await.unwrap(), "unchanged since read");
    let (read, newer) = as_read("f1").await.unwrap();
    assert_eq!((read.strength, newer != revision), (3, true), "stored, with a new revision");
    let mut stale = strengthened.clone();
    stale.strength = 9;
    assert!(!store.put_fact_if_unchanged(&stale, Some(revision)).await.unwrap(), "written since that read");
    let mut edited = strengthened.clone();
    edited.source_users.clear();
    store.put_fact(&edited).await.unwrap();
    assert!(!store.put_fact_if_unchanged(&stale, Some(newer)).await.unwrap(), "an unconditional write came between");
    assert_eq!(as_read("f1").await.unwrap().0, edited, "the refused writes changed nothing");
    assert!(!store.put_fact_if_unchanged(&stale, None).await.unwrap(), "not new: one has its id");
    let new = fact("f4", "standups are at ten");
    assert!(store.put_fact_if_unchanged(&new, None).await.unwrap(), "new");
    let (_, revision) = as_read("f4").await.unwrap();
    store.delete_fact(&ch, "f4").await.unwrap();
    assert!(!store.put_fact_if_unchanged(&new, Some(revision)).await.unwrap(), "deleted since read");
    assert!(as_read("f4").await.is_none(), "and not brought back");
    store.put_fact(&stronger).await.unwrap();

    // Notes about a person are kept per channel.
    let user = UserId("contract-user".into());
    let elsewhere = ChannelId("contract-elsewhere".into());
    assert_eq!(store.user_note(&ch, &user).await.unwrap(), None);
    // A reflection's and an answer's notes, each without reading: tags added as a set
    // (the same tag twice in one call too), the summary replaced unless empty, the
    // topics replaced, neither losing the other's.
    let tags = |tags: &[&str]| tags.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    store.note_reflection(&ch, &user, &tags(&["Rust", "Rust"]), "deploys", at(5)).await.unwrap();
    let note = UserNote {
        channel: ch.clone(),
        user: user.clone(),
        tags: vec!["Rust".into()],
        summary: "deploys".into(),
        last_topics: Vec::new(),
        updated_at: Some(at(5)),
    };
    assert_eq!(store.user_note(&ch, &user).await.unwrap(), Some(note.clone()));
    assert_eq!(store.user_note(&elsewhere, &user).await.unwrap(), None, "notes stay in their channel");
    assert!(!store.fact_channels().await.unwrap().iter().any(|c| c.0.starts_with('#')), "notes are not a channel");
    store.note_reflection(&ch, &user, &tags(&["infra", "Rust"]), "fixed the lock", at(6)).await.unwrap();
    store.note_topics(&ch, &user, &tags(&["lock", "deploy"]), at(7)).await.unwrap();
    store.note_reflection(&ch, &user, &tags(&["infra"]), "", at(8)).await.unwrap();
    let read = store.user_note(&ch, &user).await.unwrap().expect("noted");
    let mut kept = read.tags.clone();
    kept.sort();
    assert_eq!(kept, tags(&["Rust", "infra"]), "each tag once");
    assert_eq!(read.summary, "fixed the lock", "an empty summary leaves it");
    assert_eq!(read.last_topics, tags(&["lock", "deploy"]), "in their order");
    assert_eq!(read.updated_at, Some(at(8)));
    assert_eq!(store.user_note(&elsewhere, &user).await.unwrap(), None, "notes stay in their channel");
    // Made where there was none.
    let newcomer = UserId("contract-newcomer".into());
    store.note_topics(&ch, &newcomer, &tags(&["lunch"]), at(9)).await.unwrap();
    let made = store.user_note(&ch, &newcomer).await.unwrap().expect("made");
    assert_eq!(
        (made.channel, made.user, made.tags.len(), made.last_topics),
        (ch.clone(), newcomer.clone(), 0, tags(&["lunch"]))
    );
    store.delete_user_note(&ch, &newcomer).await.unwrap();
    assert_eq!(store.user_note(&ch, &newcomer).await.unwrap(), None, "deleted whole");
    store.delete_user_note(&ch, &user).await.unwrap();
    store.delete_user_note(&ch, &user).await.unwrap();
    assert_eq!(store.user_note(&ch, &user).await.unwrap(), None);

    // Counters: blind increments, channels as a set, first and last interaction.
    assert_eq!(store.profile(Workspace::Shared, &user).await.unwrap(), None);
    store.count_message(&user, &ch, at(10), false).await.unwrap();
    store.count_message(&user, &elsewhere, at(20), true).await.unwrap();
    store.count_message(&user, &ch, at(30), false).await.unwrap();
    let profile = store.profile(Workspace::Shared, &user).await.unwrap().expect("counted");
    assert_eq!((profile.interactions, profile.bot_mentions), (3, 1));
    let mut channels = profile.channels.clone();
    channels.sort();
    assert_eq!(channels, vec![elsewhere.clone(), ch.clone()]);
    assert_eq!((profile.first_interaction, profile.last_interaction), (Some(at(10)), Some(at(30))));
    assert!(!store.fact_channels().await.unwrap().iter().any(|c| c.0.starts_with('#')), "profiles are not a channel");
    // Read together: the profile with the note of that channel only, each or neither.
    assert_eq!(store.profile_and_note(&ch, &user).await.unwrap(), (Some(profile.clone()), None));
    store.note_reflection(&ch, &user, &tags(&["tea"]), "likes tea", at(40)).await.unwrap();
    store.note_reflection(&elsewhere, &user, &tags(&["coffee"]), "likes coffee", at(41)).await.unwrap();
    let (both, note) = store.profile_and_note(&ch, &user).await.unwrap();
    assert_eq!(both.as_ref(), Some(&profile));
    assert_eq!(note, store.user_note(&ch, &user).await.unwrap());
    assert_eq!(note.map(|n| (n.channel, n.user, n.summary)), Some((ch.clone(), user.clone(), "likes tea".into())));
    assert_eq!(store.profile_and_note(&ch, &newcomer).await.unwrap(), (None, None), "someone with neither");
    store.delete_profile(Workspace::Shared, &user).await.unwrap();
    let (gone, kept) = store.profile_and_note(&ch, &user).await.unwrap();
    assert_eq!((gone, kept.map(|n| n.summary)), (None, Some("likes tea".into())), "a note without a profile");
    store.delete_user_note(&ch, &user).await.unwrap();
    store.delete_user_note(&elsewhere, &user).await.unwrap();
    store.delete_profile(Workspace::Shared, &user).await.unwrap();
    assert_eq!(store.profile(Workspace::Shared, &user).await.unwrap(), None);
}

/// A queue whose deliveries are settled in process (the in-process queue, the SQLite
/// store's): delays, a delivery invisible until settled or its visibility is over, a
/// late acknowledgement that still settles, a failed job put back and counted, and
/// jobs through the scheduler at their time. `clock` drives the queue's `now`.
pub async fn in_process_queue<Q>(queue: &Q, clock: &crate::adapters::memory::VirtualClock)
where
    Q: crate::ports::Queue + crate::ports::Scheduler + crate::ports::InProcessQueue + ?Sized,
{
    use crate::domain::Job;
    let job = |n: u32| Job::Judge {
        thread: ThreadKey::top_level(ChannelId("contract-queue".into())),
        ts: Ts::new(format!("{n}.000000")),
    };
    let start = clock_now(clock);
    let at = |secs: i64| Timestamp(start.0 + secs * 1_000_000);
    queue.set_visibility_timeout(Duration::from_secs(100));
    assert_eq!(queue.next_due(), None, "an empty queue has nothing due");
    queue.enqueue(job(1), Duration::from_secs(10)).await.unwrap();
    queue.enqueue(job(2), Duration::from_secs(20)).await.unwrap();
    assert_eq!(queue.next_due(), Some(at(10)));
    assert!(queue.pop_due(at(5)).is_none(), "not due yet");

    let first = queue.pop_due(at(10)).expect("due");
    assert_eq!((crate::domain::Job::clone(&first.job), first.deliveries), (job(1), 0));
    assert_eq!(queue.next_due(), Some(at(20)), "the delivered job is invisible");
    let second = queue.pop_due(at(20)).expect("due");
    assert_eq!(*second.job, job(2));
    queue.ack(&second);
    // The first was never settled (its worker died): back at 10 + 100.
    assert_eq!(queue.next_due(), Some(at(110)));
    assert!(queue.pop_due(at(109)).is_none());
    let again = queue.pop_due(at(110)).expect("visible again");
    assert_eq!((Job::clone(&again.job), again.deliveries, again.receipt), (job(1), 1, first.receipt));
    queue.ack(&again);
    assert_eq!(queue.next_due(), None, "settled jobs are gone");

    // Settled after it came back (a worker past its timeout): not delivered again.
    queue.enqueue(job(3), Duration::from_secs(110)).await.unwrap();
    let slow = queue.pop_due(at(110)).expect("due");
    queue.enqueue(job(4), Duration::from_secs(150)).await.unwrap();
    // At 210 job 3 is visible again, behind job 4, which goes first.
    let four = queue.pop_due(at(210)).expect("due");
    assert_eq!(*four.job, job(4));
    queue.ack(&four);
    queue.ack(&slow);
    assert_eq!(queue.next_due(), None, "job 3 settled late is not due");
    assert!(queue.pop_due(at(300)).is_none(), "and not delivered again");

    // Put back: comes again after the delay, counted.
    queue.enqueue(job(5), Duration::ZERO).await.unwrap();
    let failed = queue.pop_due(at(600)).expect("due");
    clock.advance_to(at(600));
    queue.redeliver(failed, Duration::from_secs(30));
    assert!(queue.pop_due(at(629)).is_none(), "not before the delay");
    let retry = queue.pop_due(at(630)).expect("back");
    assert_eq!((Job::clone(&retry.job), retry.deliveries), (job(5), 1));
    queue.ack(&retry);

    // The scheduler has no delay limit; ties go first come, first served.
    queue.schedule_once(job(6), at(100_000)).await.unwrap();
    queue.schedule_once(job(7), at(100_000)).await.unwrap();
    assert_eq!(queue.next_due(), Some(at(100_000)));
    let six = queue.pop_due(at(100_000)).expect("due");
    let seven = queue.pop_due(at(100_000)).expect("due");
    assert_eq!((Job::clone(&six.job), Job::clone(&seven.job)), (job(6), job(7)));
    queue.ack(&six);
    queue.ack(&seven);
    assert_eq!(queue.next_due(), None);

    // A delivery that never started (its worker stopped) goes back as it was: visible
    // at once, its delivery not counted.
    clock.advance_to(at(100_000));
    queue.enqueue(job(8), Duration::ZERO).await.unwrap();
    let unstarted = queue.pop_due(at(100_000)).expect("due");
    queue.put_back(unstarted);
    let again = queue.pop_due(at(100_000)).expect("visible at once");
    assert_eq!((Job::clone(&again.job), again.deliveries), (job(8), 0), "not counted");
    queue.ack(&again);
    assert_eq!(queue.next_due(), None);
}

/// What a Slack workspace's purge after an uninstall asks of the stores: the lists of
/// what is stored (other checks' names may be among them), a channel's messages and
/// state removed whole (again: nothing more), the notes of a channel, the profiles, and
/// the mark that Slack's access is gone, set and cleared conditionally and read with a
/// Slack channel's state (never a Discord one's). Leaves no mark.
pub async fn workspace_purge<S>(store: &S)
where
    S: MessageStore + ChannelStateStore + FactStore,
{
    let (gone, kept) = (ChannelId("contract-purge".into()), ChannelId("contract-purge-kept".into()));
    let discord = ChannelId("41771983423143939".into());
    for (channel, secs) in [(&gone, 10), (&gone, 20), (&kept, 10)] {
        let m = std::sync::Arc::new(message(&channel.0, secs, None, "purge me"));
        store.put_message(&m).await.unwrap();
    }
    let listed = store.message_channels().await.unwrap();
    assert!(listed.contains(&gone) && listed.contains(&kept), "every channel with messages: {listed:?}");
    assert_eq!(listed.iter().filter(|c| **c == gone).count(), 1, "each channel once: {listed:?}");
    assert_eq!(store.delete_channel_messages(&gone).await.unwrap(), 2);
    assert_eq!(store.delete_channel_messages(&gone).await.unwrap(), 0, "again: nothing more");
    assert!(!store.message_channels().await.unwrap().contains(&gone));
    assert_eq!(store.messages_after(&kept, None, 10).await.unwrap().len(), 1, "another channel keeps its own");

    store.set_muted(&gone, Some(at(100))).await.unwrap();
    let note = JudgmentNote {
        at: at(30),
        ts: Ts::from_timestamp(at(20)),
        user: UserId("U1".into()),
        text: "purge me".into(),
        score: 10,
        breakdown: Default::default(),
        decision: Decision::Skip,
        respond: false,
        response_type: None,
        reason: "quiet".into(),
    };
    store.record_judgment(&gone, note, Some(at(40))).await.unwrap();
    let answer = Intervention {
        at: at(35),
        thread: ThreadKey::top_level(gone.clone()),
        response_type: ResponseType::ShortAck,
        excerpt: "purge me".into(),
        facts: Vec::new(),
        unasked_post: None,
        pick_up: false,
    };
    store.record_intervention(&gone, answer).await.unwrap();
    let line = ChannelLine { channel: gone.clone(), line: "a purged channel".into(), updated_at: at(30) };
    store.set_channel_line(&gone, Some(line)).await.unwrap();
    store.set_muted(&kept, Some(at(100))).await.unwrap();
    let states = store.state_channels().await.unwrap();
    assert!(states.contains(&gone) && states.contains(&kept), "every channel with a state: {states:?}");
    assert_eq!(states.iter().filter(|c| **c == gone).count(), 1, "each channel once: {states:?}");
    for _ in 0..2 {
        store.delete_channel_state(&gone).await.expect("removed, and again: nothing more");
    }
    assert_eq!(*store.channel_state(&gone).await.unwrap(), ChannelState::default(), "nothing of it left");
    assert!(!store.state_channels().await.unwrap().contains(&gone));
    let lines = store.workspace_memory(Workspace::Shared).await.unwrap().channel_lines;
    assert!(lines.iter().all(|l| l.channel != gone), "its line went too: {lines:?}");
    assert_eq!(store.channel_state(&kept).await.unwrap().muted_until, Some(at(100)), "another keeps its own");

    let (u1, u2) = (UserId("U-purge-1".into()), UserId("U-purge-2".into()));
    store.note_reflection(&gone, &u1, &["tag".into()], "noted", at(10)).await.unwrap();
    store.note_topics(&gone, &u2, &["topic".into()], at(10)).await.unwrap();
    store.note_topics(&kept, &u1, &["topic".into()], at(10)).await.unwrap();
    let mut noted = store.noted_users(&gone).await.unwrap();
    noted.sort();
    assert_eq!(noted, [u1.clone(), u2.clone()], "everyone noted in that channel, no one else's channel");
    store.count_message(&u1, &gone, at(10), false).await.unwrap();
    let profiled = store.profiled_users(Workspace::Shared).await.unwrap();
    assert!(profiled.contains(&u1) && !profiled.contains(&u2), "everyone with a profile: {profiled:?}");

    assert_eq!(store.slack_gone(Workspace::Shared).await.unwrap(), None);
    assert!(store.mark_slack_gone(Workspace::Shared, at(50)).await.unwrap(), "marked");
    assert!(
        !store.mark_slack_gone(Workspace::Shared, at(60)).await.unwrap(),
        "marked once: a second mark changes nothing"
    );
    assert_eq!(store.slack_gone(Workspace::Shared).await.unwrap(), Some(at(50)));
    assert_eq!(store.channel_state(&kept).await.unwrap().slack_gone, Some(at(50)), "a Slack channel reads it");
    assert_eq!(store.channel_state(&discord).await.unwrap().slack_gone, None, "a Discord channel does not");
    assert!(!store.clear_slack_gone(Workspace::Shared, at(60)).await.unwrap(), "cleared only as it was read");
    assert!(store.clear_slack_gone(Workspace::Shared, at(50)).await.unwrap());
    assert!(!store.clear_slack_gone(Workspace::Shared, at(50)).await.unwrap(), "cleared once");
    assert_eq!(store.slack_gone(Workspace::Shared).await.unwrap(), None);
    assert_eq!(store.channel_state(&kept).await.unwrap().slack_gone, None);
    assert!(store.mark_slack_gone(Workspace::Shared, at(70)).await.unwrap(), "marked again after a clear");
    assert!(store.clear_slack_gone(Workspace::Shared, at(70)).await.unwrap());
}

/// Two Slack workspaces on one deployment (issue 45) with the same channel, the same
/// person and the same words, beside the shared workspace's channel of that id: no
/// message, state, line, workspace memory, fact, note, profile or access mark of one is
/// read in another. `T9X1` and `T9X10` share a prefix, as keys ranged by prefix would.
pub async fn workspaces_do_not_cross<S>(store: &S)
where
    S: MessageStore + ChannelStateStore + FactStore,
{
    let (one, ten, two) = (Workspace::Slack("T9X1"), Workspace::Slack("T9X10"), Workspace::Slack("T9X2"));
    let ids = ["T9X1/C9X", "T9X10/C9X", "T9X2/C9X", "C9X"];
    let [in_one, in_ten, in_two, shared] = ids.map(|id| ChannelId(id.into()));
    assert_eq!((in_one.workspace(), in_ten.workspace(), shared.workspace()), (one, ten, Workspace::Shared));
    let user = UserId("U9X".into());

    let said = std::sync::Arc::new(message(&in_one.0, 10, None, "the deploy key is in the vault"));
    store.put_message(&said).await.unwrap();
    for other in [&in_ten, &in_two, &shared] {
        assert!(store.messages_after(other, None, 10).await.unwrap().is_empty(), "{other} has no message");
    }

    store.set_muted(&in_one, Some(at(100))).await.unwrap();
    for other in [&in_ten, &in_two, &shared] {
        assert_eq!(store.channel_state(other).await.unwrap().muted_until, None, "{other} is not muted");
    }

    for (channel, secs) in [(&in_one, 1), (&in_ten, 2), (&in_two, 3), (&shared, 4)] {
        let line = ChannelLine { channel: channel.clone(), line: format!("{channel}'s line"), updated_at: at(secs) };
        store.set_channel_line(channel, Some(line)).await.unwrap();
    }
    let lines_of = async |workspace| {
        let lines = store.workspace_memory(workspace).await.unwrap().channel_lines;
        lines.into_iter().map(|l| l.channel.0.to_string()).filter(|c| ids.contains(&c.as_str())).collect::<Vec<_>>()
    };
    assert_eq!(lines_of(one).await, ["T9X1/C9X"], "only its own channel's line");
    assert_eq!(lines_of(ten).await, ["T9X10/C9X"]);
    assert_eq!(lines_of(two).await, ["T9X2/C9X"]);
    assert_eq!(lines_of(Workspace::Shared).await, ["C9X"]);
    let memory = WorkspaceMemory { history: "T9X1 ships on Fridays".into(), ..WorkspaceMemory::default() };
    store.set_workspace_memory(one, memory).await.unwrap();
    assert_eq!(store.workspace_memory_without_lines(one).await.unwrap().history, "T9X1 ships on Fridays");
    for other in [ten, two] {
        assert_eq!(store.workspace_memory_without_lines(other).await.unwrap(), WorkspaceMemory::default());
        assert_eq!(store.workspace_memory(other).await.unwrap().history, "", "{other:?}");
    }
    assert!(!store.workspace_memory(Workspace::Shared).await.unwrap().history.contains("T9X1"));

    let fact = Fact {
        id: "f9x".into(),
        channel: in_one.clone(),
        content: "the deploy key is in the vault".into(),
        keywords: vec!["deploy".into()],
        source_users: vec![user.0.to_string()],
        confidence: 0.8,
        shareable: true,
        created_at: at(10),
        confirmed_at: at(10),
        strength: 1,
        source_messages: vec![said.ts.clone()],
        embedding: None,
    };
    store.put_fact(&fact).await.unwrap();
    store.note_topics(&in_one, &user, &["vault".into()], at(10)).await.unwrap();
    for other in [&in_ten, &in_two, &shared] {
        assert!(store.facts(other).await.unwrap().is_empty(), "{other} has no fact");
        assert_eq!(store.user_note(other, &user).await.unwrap(), None, "{other} has no note");
    }

    store.count_message(&user, &in_one, at(10), false).await.unwrap();
    store.count_message(&user, &in_one, at(11), true).await.unwrap();
    store.count_message(&user, &in_two, at(12), false).await.unwrap();
    let counted = async |workspace| store.profile(workspace, &user).await.unwrap().map(|p| p.interactions);
    assert_eq!((counted(one).await, counted(two).await, counted(ten).await), (Some(2), Some(1), None));
    assert_eq!(counted(Workspace::Shared).await, None, "the shared workspace has no profile of theirs");
    let (profile, _) = store.profile_and_note(&in_two, &user).await.unwrap();
    assert_eq!(profile.map(|p| (p.interactions, p.channels)), Some((1, vec![in_two.clone()])));
    assert_eq!(store.profiled_users(one).await.unwrap(), std::slice::from_ref(&user));
    assert!(store.profiled_users(ten).await.unwrap().is_empty());
    assert!(!store.profiled_users(Workspace::Shared).await.unwrap().contains(&user));
    store.delete_profile(one, &user).await.unwrap();
    assert_eq!((counted(one).await, counted(two).await), (None, Some(1)), "one workspace's profile went");

    assert!(store.mark_slack_gone(one, at(50)).await.unwrap());
    assert!(store.mark_slack_gone(two, at(60)).await.unwrap(), "another workspace's mark is its own");
    assert_eq!(store.channel_state(&in_one).await.unwrap().slack_gone, Some(at(50)));
    assert_eq!(store.channel_state(&in_two).await.unwrap().slack_gone, Some(at(60)));
    assert_eq!(store.channel_state(&in_ten).await.unwrap().slack_gone, None);
    assert_eq!(store.channel_state(&shared).await.unwrap().slack_gone, None);
    assert_eq!(
        (store.slack_gone(Workspace::Shared).await.unwrap(), store.slack_gone(ten).await.unwrap()),
        (None, None)
    );
    assert!(store.clear_slack_gone(one, at(50)).await.unwrap());
    assert_eq!(store.slack_gone(two).await.unwrap(), Some(at(60)), "clearing one leaves the other's");
    assert!(store.clear_slack_gone(two, at(60)).await.unwrap());
}

/// An installation as `oauth.v2.access` would give it, its token sealed by `sealer`.
pub async fn an_installation(
    sealer: &dyn TokenSealer,
    key: InstallationKey,
    token: &str,
) -> crate::ports::Installation {
    let sealed = sealer.seal(&secrecy::SecretString::from(token), key.workspace_id()).await.unwrap();
    crate::ports::Installation {
        app_id: "A9X".into(),
        team_name: format!("team {key}"),
        enterprise_name: key.enterprise.as_ref().map(|e| format!("org {e}")),
        bot_user_id: UserId("U9XBOT".into()),
        bot_id: "B9X".into(),
        bot_scopes: vec!["chat:write".into(), "channels:history".into()],
        installer: UserId("U9XADMIN".into()),
        installed_at: at(0),
        bot_token: sealed,
        refresh_token: None,
        token_expires_at: None,
        revision: 0,
        key,
    }
}

/// Installations: stored by workspace (a team, or an org for an org-wide install,
/// apart from its workspaces' own), a reinstall a new revision, the token refresh
/// written only over the revision it read (of two workers, one writes), deleted once;
/// and the token sealed (what the store holds opens only for its own install).
pub async fn installations(store: &dyn Installations, sealer: &dyn TokenSealer) {
    use secrecy::ExposeSecret;
    let team = InstallationKey::team("T9I1");
    let in_org = InstallationKey { enterprise: Some("E9I".into()), team: Some("T9I2".into()) };
    let org_wide = InstallationKey { enterprise: Some("E9I".into()), team: None };
    assert_eq!(store.installation("T9I1").await.unwrap(), None);
    for (key, token) in [(&team, "xoxb-team"), (&in_org, "xoxb-in-org"), (&org_wide, "xoxb-org-wide")] {
        let installation = an_installation(sealer, key.clone(), token).await;
        assert_eq!(store.put_installation(&installation).await.unwrap(), 1, "a first install is revision 1");
    }
    let read = store.installation("T9I2").await.unwrap().expect("stored");
    assert_eq!((read.key.clone(), read.revision, read.team_name.as_str()), (in_org.clone(), 1, "team E9I/T9I2"));
    assert_eq!(sealer.open(&read.bot_token, "T9I2").await.unwrap().expose_secret(), "xoxb-in-org");
    assert!(sealer.open(&read.bot_token, "E9I").await.is_err(), "sealed for its own install only");
    let org = store.installation("E9I").await.unwrap().expect("the org-wide install, apart");
    assert!(org.key.is_enterprise_install());
    assert_eq!(sealer.open(&org.bot_token, "E9I").await.unwrap().expose_secret(), "xoxb-org-wide");
    let workspaces = store.installed_workspaces().await.unwrap();
    for workspace in ["T9I1", "T9I2", "E9I"] {
        assert!(workspaces.iter().any(|w| w == workspace), "{workspace} listed: {workspaces:?}");
    }

    let reinstall = an_installation(sealer, team.clone(), "xoxb-team-again").await;
    assert_eq!(store.put_installation(&reinstall).await.unwrap(), 2, "a reinstall is a new revision");
    let fresh = crate::ports::RefreshedTokens {
        bot_token: sealer.seal(&"xoxe.xoxb-refreshed".into(), "T9I1").await.unwrap(),
        refresh_token: Some(sealer.seal(&"xoxe-1-refresh".into(), "T9I1").await.unwrap()),
        expires_at: Some(at(43_200)),
    };
    assert!(!store.replace_tokens("T9I1", 1, &fresh).await.unwrap(), "read before the reinstall: not written");
    assert!(store.replace_tokens("T9I1", 2, &fresh).await.unwrap(), "written over the revision read");
    assert!(!store.replace_tokens("T9I1", 2, &fresh).await.unwrap(), "the second worker's write is refused");
    let refreshed = store.installation("T9I1").await.unwrap().expect("stored");
    assert_eq!((refreshed.revision, refreshed.token_expires_at), (3, Some(at(43_200))));
    assert_eq!(sealer.open(&refreshed.bot_token, "T9I1").await.unwrap().expose_secret(), "xoxe.xoxb-refreshed");
    assert_eq!(refreshed.bot_user_id, UserId("U9XBOT".into()), "the rest stays");

    assert!(store.delete_installation("T9I1").await.unwrap());
    assert!(!store.delete_installation("T9I1").await.unwrap(), "deleted once");
    assert_eq!(store.installation("T9I1").await.unwrap(), None);
    assert!(!store.replace_tokens("T9I1", 3, &fresh).await.unwrap(), "a deleted install is not refreshed");
    assert!(store.installation("T9I2").await.unwrap().is_some(), "the others stay");
    for workspace in ["T9I2", "E9I"] {
        store.delete_installation(workspace).await.unwrap();
    }
}

/// A sealer with a fixed key, for the contract's checks.
pub fn test_sealer() -> crate::adapters::sealer::LocalKeySealer {
    let key = "5a".repeat(32);
    crate::adapters::sealer::LocalKeySealer::from_hex(&secrecy::SecretString::from(key)).expect("64 hex digits")
}

fn clock_now(clock: &crate::adapters::memory::VirtualClock) -> Timestamp {
    use crate::ports::Clock;
    clock.now()
}

#[cfg(test)]
mod tests {
    use crate::adapters::memory::MemoryStore;

    #[tokio::test]
    async fn the_memory_store_keeps_the_contract() {
        let store = MemoryStore::new();
        super::message_store(&store).await;
        super::ledger(&store).await;
        super::channel_states(&store).await;
        super::facts(&store).await;
        super::workspace_purge(&store).await;
        super::workspaces_do_not_cross(&store).await;
        super::installations(&store, &super::test_sealer()).await;
    }
}
