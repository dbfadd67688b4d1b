use std::sync::Arc;

use super::ledger::*;
use super::messages::*;
use super::*;
use crate::adapters::memory::VirtualClock;
use crate::domain::{Author, UserId};
use crate::ports::Clock;

fn message(channel: &str, secs: i64) -> Message {
    let at = Timestamp(secs * 1_000_000);
    Message {
        channel: ChannelId(channel.into()),
        ts: Ts::from_timestamp(at),
        thread_root: None,
        user: UserId("U1".into()),
        user_name: "alice".into(),
        text: "x".into(),
        author: Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at,
    }
}

/// Threads are kept in the order of their roots, and a reply to an old message can
/// begin a thread after newer ones began: each is found, loses a message and goes
/// when empty on its own, whichever way the messages go (deleted, or forgotten
/// with the person who wrote them).
#[tokio::test]
async fn threads_begun_out_of_order_are_found_and_go_alone() {
    let store = MemoryStore::new();
    let reply = |secs: i64, root: i64, user: &str| {
        let mut m = message("c", secs);
        m.thread_root = Some(Ts::from_timestamp(Timestamp(root * 1_000_000)));
        m.user = UserId(user.into());
        Arc::new(m)
    };
    for secs in [10, 20, 30] {
        store.put_message(&Arc::new(message("c", secs))).await.unwrap();
    }
    // Threads on 30, then 10, then 20 (roots out of order), and a text ts's thread.
    for m in [reply(40, 30, "U1"), reply(50, 10, "U1"), reply(60, 20, "U2"), reply(70, 10, "U2")] {
        store.put_message(&m).await.unwrap();
    }
    let texts_root = Ts::new("not-a-number");
    let mut odd = message("c", 80);
    odd.thread_root = Some(texts_root.clone());
    store.put_message(&Arc::new(odd)).await.unwrap();

    let thread = |root: Option<Ts>| {
        let store = &store;
        async move {
            let key = ThreadKey { channel: ChannelId("c".into()), root };
            let found = store.recent_in_thread(&key, Timestamp(0), 10).await.unwrap();
            found.iter().map(|m| m.at.0 / 1_000_000).collect::<Vec<_>>()
        }
    };
    let root = |secs: i64| Some(Ts::from_timestamp(Timestamp(secs * 1_000_000)));
    assert_eq!(thread(None).await, [10, 20, 30]);
    assert_eq!(thread(root(10)).await, [50, 70]);
    assert_eq!(thread(root(20)).await, [60]);
    assert_eq!(thread(root(30)).await, [40]);
    assert_eq!(thread(Some(texts_root.clone())).await, [80]);
    assert_eq!(thread(root(25)).await, Vec::<i64>::new());

    assert!(store.delete_message(&ChannelId("c".into()), &reply(40, 30, "U1").ts).await.unwrap());
    assert_eq!(thread(root(30)).await, Vec::<i64>::new());
    assert_eq!(store.lock().channels[&ChannelId("c".into())].threads.len(), 3, "the emptied thread went");
    assert_eq!(store.delete_messages_by(&ChannelId("c".into()), &UserId("U2".into()), None).await.unwrap(), 2);
    assert_eq!(thread(root(10)).await, [50]);
    assert_eq!(thread(root(20)).await, Vec::<i64>::new());
    assert_eq!(thread(Some(texts_root)).await, [80]);
    assert_eq!(store.lock().channels[&ChannelId("c".into())].threads.len(), 2, "the thread of U2 alone went");
    assert_eq!(thread(None).await, [10, 20, 30]);
}

/// Expired claims go in a sweep once as many claims again were made as were
/// current at the last one: the table stays within twice what is current, and an
/// abandoned post (a claim marked posting) stays for whoever takes the work over.
#[tokio::test]
async fn expired_claims_are_swept_and_abandoned_posts_kept() {
    let day = Duration::from_secs(86_400);
    let clock = Arc::new(VirtualClock::new(Timestamp(0)));
    let store = MemoryStore::with_retention(day, clock.clone());
    let lease = Duration::from_secs(60);
    store.claim("posting", clock.now(), lease).await.unwrap();
    store.mark_posting("posting").await.unwrap();
    let mut ts = 0;
    let mut put = async |store: &MemoryStore| {
        ts += 1;
        store.put_message(&Arc::new(message("c", ts))).await.unwrap();
    };
    for i in 0..3 * CLAIMS_BEFORE_SWEEPING {
        let key = format!("judge:{i}");
        store.claim(&key, clock.now(), lease).await.unwrap();
        store.complete(&key, clock.now(), Duration::from_secs(3600)).await.unwrap();
        put(&store).await;
        clock.advance_to(clock.now() + Duration::from_secs(1));
        let held = store.lock().claims.len();
        // At most an hour's claims (3,600) are current at once.
        assert!(held <= 2 * CLAIMS_BEFORE_SWEEPING + PRUNE_EVERY as usize, "{held} claims held after {i}");
    }
    // Swept: an hour-old claim is gone, not just expired; the abandoned post stays.
    assert!(store.lock().claims.len() < 2 * CLAIMS_BEFORE_SWEEPING);
    assert!(store.lock().claims.get(&store.claim_keys.of("judge:0")).is_none());
    assert_eq!(store.claim("posting", clock.now(), lease).await.unwrap(), ClaimOutcome::Resumed);
    // An expired claim not yet swept is no claim.
    assert_eq!(store.claim("judge:12000", clock.now(), lease).await.unwrap(), ClaimOutcome::Completed);
    clock.advance_to(clock.now() + Duration::from_secs(3601));
    assert_eq!(store.claim("judge:12000", clock.now(), lease).await.unwrap(), ClaimOutcome::Claimed);
}

/// A claim reads the same whether it is still among the recent claims or was moved
/// on to the large table: completed, marked, released or taken again.
#[tokio::test]
async fn claims_read_the_same_before_and_after_they_move_on() {
    let store = MemoryStore::new();
    let (lease, keep) = (Duration::from_secs(60), Duration::from_secs(3600));
    let at = |s: i64| Timestamp(s * 1_000_000);
    for moved in [false, true] {
        let key = format!("judge:{moved}");
        assert_eq!(store.claim(&key, at(0), lease).await.unwrap(), ClaimOutcome::Claimed);
        if moved {
            store.lock().claims.move_on();
            assert!(store.lock().claims.recent.is_empty(), "moved on");
        }
        assert_eq!(store.claim(&key, at(1), lease).await.unwrap(), ClaimOutcome::InProgress { until: at(60) });
        store.mark_posting(&key).await.unwrap();
        store.release(&key).await.unwrap();
        assert_eq!(store.claim(&key, at(2), lease).await.unwrap(), ClaimOutcome::Resumed, "moved: {moved}");
        store.complete(&key, at(3), keep).await.unwrap();
        assert_eq!(store.claim(&key, at(4), lease).await.unwrap(), ClaimOutcome::Completed, "moved: {moved}");
        assert_eq!(store.lock().claims.len(), usize::from(moved) + 1, "each claim held once");
    }
    // The recent table moves on by itself once full, and nothing is lost.
    for i in 0..RECENT_CLAIMS {
        store.claim(&format!("respond:{i}"), at(5), lease).await.unwrap();
    }
    assert!(store.lock().claims.recent.len() < RECENT_CLAIMS);
    assert_eq!(store.lock().claims.len(), RECENT_CLAIMS + 2);
    assert_eq!(store.claim("respond:0", at(6), lease).await.unwrap(), ClaimOutcome::InProgress { until: at(65) });
}

/// Claim keys are seeded for each store, and their two halves apart: the same text
/// maps to other bits in another store, so no one can prepare texts that collide.
#[test]
fn claim_keys_are_seeded_for_each_store() {
    let (one, other) = (ClaimKeys::default(), ClaimKeys::default());
    let key = "respond:C1:1767603600.000100";
    assert_eq!(one.of(key), one.of(key), "the same store, the same key");
    assert_ne!(one.of(key), other.of(key), "another store, other seeds");
    let ClaimKey(bits) = one.of(key);
    assert_ne!(bits >> 64, bits & u128::from(u64::MAX), "two differently seeded halves");
}

/// The ts index answers as a sorted list would, whatever order messages came in
/// (mostly in order, some late, some again), at whatever pace, and wherever the
/// asked ts falls.
#[test]
fn the_ts_index_finds_what_a_sorted_list_finds() {
    let mut rng = fastrand::Rng::with_seed(3);
    for round in 0..50 {
        let mut index = ByTs::default();
        let mut reference: Vec<i64> = Vec::new();
        let mut clock = 0;
        for _ in 0..rng.usize(0..300) {
            // Mostly steady, now and then a lull (the guesses from the times err).
            clock += if rng.u8(..20) == 0 { rng.i64(100..2000) } else { rng.i64(1..4) };
            // Now and then a late one, now and then a repeat.
            let secs = if rng.u8(..10) == 0 { rng.i64(0..=clock) } else { clock };
            let m = Arc::new(message("c", secs));
            let fresh = reference.binary_search(&secs).is_err();
            assert_eq!(index.search(&m.ts).is_err(), fresh, "round {round}: {secs} stored already?");
            index.insert(m);
            if let Err(place) = reference.binary_search(&secs) {
                reference.insert(place, secs);
            }
        }
        let stored: Vec<i64> = index.0.iter().map(|e| e.message.at.0 / 1_000_000).collect();
        assert_eq!(stored, reference, "round {round}: in ts order, each once");
        for asked in 0..=clock + 1 {
            let ts = Ts::from_timestamp(Timestamp(asked * 1_000_000));
            assert_eq!(index.search(&ts), reference.binary_search(&asked), "round {round}: search {asked}");
            let after = reference.partition_point(|s| *s <= asked);
            assert_eq!(index.after(&ts), after, "round {round}: after {asked}");
        }
        if let Some(&gone) = reference.get(reference.len() / 2) {
            let ts = Ts::from_timestamp(Timestamp(gone * 1_000_000));
            assert!(index.remove(&ts).is_some());
            assert!(index.get(&ts).is_none() && index.remove(&ts).is_none(), "round {round}: removed once");
        }
    }
}

#[tokio::test]
async fn a_store_with_a_retention_forgets_old_messages() {
    let day = 86_400;
    let clock = Arc::new(VirtualClock::new(Timestamp(0)));
    let store = MemoryStore::with_retention(Duration::from_secs(day as u64), clock.clone());
    store.put_message(&std::sync::Arc::new(crate::domain::Message::clone(&message("old", 10)))).await.unwrap();
    clock.advance_to(Timestamp(2 * day * 1_000_000));
    for i in 0..PRUNE_EVERY as i64 {
        store
            .put_message(&std::sync::Arc::new(crate::domain::Message::clone(&message("new", 2 * day + i))))
            .await
            .unwrap();
    }
    assert!(
        store
            .get_message(&ChannelId("old".into()), &Ts::from_timestamp(Timestamp(10_000_000)))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .get_message(&ChannelId("new".into()), &Ts::from_timestamp(Timestamp(2 * day * 1_000_000)))
            .await
            .unwrap()
            .is_some()
    );
    let plain = MemoryStore::new();
    plain.put_message(&std::sync::Arc::new(crate::domain::Message::clone(&message("old", 10)))).await.unwrap();
    assert!(
        plain
            .get_message(&ChannelId("old".into()), &Ts::from_timestamp(Timestamp(10_000_000)))
            .await
            .unwrap()
            .is_some()
    );
}
