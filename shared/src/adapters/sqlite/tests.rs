//! The SQLite store on real files: the contract suite, what a restart takes up, and
//! how it refuses files it must not touch.

use std::sync::Arc;
use std::time::Duration;

use super::{OpenError, Recovered, SqliteStore, schema};
use crate::adapters::contract;
use crate::adapters::memory::VirtualClock;
use crate::domain::{ChannelId, Job, ThreadKey, Timestamp, Ts};
use crate::ports::{ChannelStateStore, ClaimOutcome, Clock, InProcessQueue, Ledger, MessageStore, Queue};

fn clock() -> Arc<VirtualClock> {
    Arc::new(VirtualClock::new(Timestamp(1_800_000_000 * 1_000_000)))
}

fn file_in(dir: &tempfile::TempDir) -> String {
    dir.path().join("kuuki.db").to_string_lossy().into_owned()
}

fn open(path: &str, clock: &Arc<VirtualClock>) -> SqliteStore {
    SqliteStore::open(path, clock.clone(), None).expect("the store opens")
}

#[tokio::test]
async fn the_sqlite_store_keeps_every_ports_contract() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let store = open(&file_in(&dir), &clock);
    contract::message_store(&store).await;
    contract::ledger(&store).await;
    contract::channel_states(&store).await;
    contract::facts(&store).await;
    contract::workspace_purge(&store).await;
    contract::workspaces_do_not_cross(&store).await;
    contract::installations(&store, &contract::test_sealer()).await;
    contract::in_process_queue(&store, &clock).await;
}

#[tokio::test]
async fn a_store_in_memory_keeps_the_contract_too() {
    let clock = clock();
    let store = open(":memory:", &clock);
    contract::message_store(&store).await;
    contract::in_process_queue(&store, &clock).await;
}

#[tokio::test]
async fn no_token_is_readable_in_the_data_file_or_its_wal() {
    use crate::ports::{InstallationKey, Installations};
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    let store = open(&path, &clock());
    let sealer = contract::test_sealer();
    let key = InstallationKey::team("T1");
    let token = "xoxb-1111-2222-never-in-clear";
    store.put_installation(&contract::an_installation(&sealer, key.clone(), token).await).await.unwrap();
    let read = store.installation(key.workspace_id()).await.unwrap().expect("stored");
    let bytes_of = |file: &str| std::fs::read(file).unwrap_or_default();
    let (file, wal) = (bytes_of(&path), bytes_of(&format!("{path}-wal")));
    assert!(!wal.is_empty() || !file.is_empty(), "the install was written somewhere");
    let holds = |bytes: &[u8], what: &str| bytes.windows(what.len()).any(|w| w == what.as_bytes());
    for (name, bytes) in [("the data file", &file), ("its WAL", &wal)] {
        assert!(!holds(bytes, "never-in-clear"), "{name} holds the token");
    }
    assert!(holds(&file, &read.bot_token.0) || holds(&wal, &read.bot_token.0), "the sealed token is what is kept");
}

/// Alice's message in `channel`, written at `at`.
fn message(channel: &str, at: Timestamp) -> Arc<crate::domain::Message> {
    Arc::new(crate::domain::Message {
        channel: ChannelId(channel.into()),
        ts: Ts::from_timestamp(at),
        thread_root: None,
        user: crate::domain::UserId("U1".into()),
        user_name: "alice".into(),
        text: "x".into(),
        author: crate::domain::Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at,
    })
}

fn judge(n: u32) -> Job {
    Job::Judge { thread: ThreadKey::top_level(ChannelId("C1".into())), ts: Ts::new(format!("{n}.000000")) }
}

/// What one process wrote is there for the next; the jobs it had taken come back at
/// once (not after their visibility timeout), the claims it held are released, and a
/// claim whose holder had begun to post is resumed (look for the post first).
#[tokio::test]
async fn a_new_process_takes_up_at_once_what_the_last_one_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    let clock = clock();
    let now = crate::ports::Clock::now(&*clock);
    {
        let store = open(&path, &clock);
        assert_eq!(store.recovered(), Recovered::default());
        store.set_muted(&ChannelId("C1".into()), Some(now + Duration::from_secs(3600))).await.unwrap();
        store.enqueue(judge(1), Duration::ZERO).await.unwrap();
        store.enqueue(judge(2), Duration::from_secs(60)).await.unwrap();
        let taken = store.pop_due(now).expect("due");
        assert_eq!(*taken.job, judge(1));
        assert_eq!(store.claim("respond:a", now, Duration::from_secs(270)).await.unwrap(), ClaimOutcome::Claimed);
        assert_eq!(store.claim("respond:b", now, Duration::from_secs(270)).await.unwrap(), ClaimOutcome::Claimed);
        store.mark_posting("respond:b").await.unwrap();
        store.claim("judge:done", now, Duration::from_secs(270)).await.unwrap();
        store.complete("judge:done", now, Duration::from_secs(3600)).await.unwrap();
        // The process dies here: nothing is settled or released.
    }
    let store = open(&path, &clock);
    assert_eq!(store.recovered(), Recovered { jobs: 1, claims: 2 });
    let state = store.channel_state(&ChannelId("C1".into())).await.unwrap();
    assert!(state.muted_at(now), "the mute holds across the restart");
    let again = store.pop_due(now).expect("the taken job is visible at once");
    assert_eq!((Job::clone(&again.job), again.deliveries), (judge(1), 1), "its delivery counted");
    assert!(store.pop_due(now).is_none(), "the other is still waiting for its time");
    assert_eq!(store.next_due(), Some(now + Duration::from_secs(60)));
    assert_eq!(store.claim("respond:a", now, Duration::from_secs(270)).await.unwrap(), ClaimOutcome::Claimed);
    assert_eq!(store.claim("respond:b", now, Duration::from_secs(270)).await.unwrap(), ClaimOutcome::Resumed);
    assert_eq!(store.claim("judge:done", now, Duration::from_secs(270)).await.unwrap(), ClaimOutcome::Completed);
}

#[tokio::test]
async fn a_second_process_on_the_same_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    let clock = clock();
    let first = open(&path, &clock);
    let error = SqliteStore::open(&path, clock.clone(), None).err().expect("refused");
    assert!(matches!(error, OpenError::Locked { .. }), "{error}");
    assert!(error.to_string().contains("in use by another process"), "{error}");
    drop(first);
    open(&path, &clock);
}

#[test]
fn a_file_that_is_no_database_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let error = SqliteStore::open(&path, clock(), None).err().expect("refused");
    assert!(matches!(error, OpenError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains(&path), "names the file: {error}");
    assert_eq!(std::fs::read(&path).unwrap(), garbage, "not a byte changed");
}

#[test]
fn a_file_from_a_newer_build_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    drop(open(&path, &clock()));
    let newer = schema::SCHEMA_VERSION + 1;
    rusqlite::Connection::open(&path).unwrap().pragma_update(None, "user_version", newer).unwrap();
    let before = std::fs::read(&path).unwrap();
    let error = SqliteStore::open(&path, clock(), None).err().expect("refused");
    let text = error.to_string();
    assert!(matches!(error, OpenError::Newer { .. }), "{text}");
    assert!(text.contains(&format!("format {newer}")) && text.contains(&format!("up to {}", schema::SCHEMA_VERSION)));
    assert_eq!(std::fs::read(&path).unwrap(), before, "left as it was");
}

/// A file of an older layout is brought up to date at open, keeping what it holds.
#[tokio::test]
async fn an_older_file_is_migrated_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    let clock = clock();
    let older = schema::MIGRATIONS;
    {
        let store = SqliteStore::open_with(&path, clock.clone(), None, older).unwrap();
        store.cache_put("kept", "value", Timestamp(i64::MAX)).await.unwrap();
    }
    let next = [schema::MIGRATIONS, &["CREATE TABLE added_later (x INTEGER)"]].concat();
    let store = SqliteStore::open_with(&path, clock.clone(), None, &next).unwrap();
    {
        let conn = store.lock();
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, next.len() as i64);
        conn.execute("INSERT INTO added_later (x) VALUES (1)", []).expect("the new step ran");
    }
    assert_eq!(store.cache_get("kept", Timestamp(0)).await.unwrap().as_deref(), Some("value"));
}

/// A migration that fails leaves the file at its old version, whole.
#[test]
fn a_failed_migration_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    drop(open(&path, &clock()));
    let broken = [schema::MIGRATIONS, &["CREATE TABLE half (x INTEGER); NOT SQL AT ALL"]].concat();
    assert!(SqliteStore::open_with(&path, clock(), None, &broken).is_err());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION);
    let half: i64 =
        conn.query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'", [], |row| row.get(0)).unwrap();
    assert_eq!(half, 0, "the failed step's first statement was rolled back");
}

/// With a retention, old messages go as new ones come (by the hour, however few), and
/// expired claims and cache entries with them (by the day); a claim whose holder began
/// to post stays for the next holder. What expired while no process ran goes at open.
#[tokio::test]
async fn a_store_with_a_retention_forgets_what_expired() {
    let clock = clock();
    let day = Duration::from_secs(86_400);
    let store = SqliteStore::open(":memory:", clock.clone(), Some(day)).unwrap();
    let start = crate::ports::Clock::now(&*clock);
    let old = message("old", start);
    store.put_message(&old).await.unwrap();
    store.claim("expired", start, Duration::from_secs(60)).await.unwrap();
    store.claim("abandoned", start, Duration::from_secs(60)).await.unwrap();
    store.mark_posting("abandoned").await.unwrap();
    store.cache_put("cached", "v", start + Duration::from_secs(60)).await.unwrap();
    clock.advance_to(start + 2 * day);
    // A quiet workspace: the first message after an hour prunes, whatever the count.
    store.put_message(&message("new", start + 2 * day)).await.unwrap();
    assert!(store.get_message(&old.channel, &old.ts).await.unwrap().is_none(), "the old message went");
    // The claims and the cache are swept by the day too.
    let conn = store.lock();
    let claims: Vec<String> = conn
        .prepare("SELECT key FROM claims")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(claims, ["abandoned"]);
    let cached: i64 = conn.query_row("SELECT COUNT(*) FROM cache", [], |row| row.get(0)).unwrap();
    assert_eq!(cached, 0);
}

/// A queued job this build cannot read (a newer build's) is set aside, not run and not
/// lost, and the jobs behind it still come.
#[tokio::test]
async fn a_job_this_build_cannot_read_is_set_aside() {
    let clock = clock();
    let store = open(":memory:", &clock);
    let now = crate::ports::Clock::now(&*clock);
    store
        .lock()
        .execute(
            "INSERT INTO jobs (job, visible_at, deliveries, taken) VALUES (?1, ?2, 0, 0)",
            rusqlite::params![r#"{"v":99,"job":"sweep_facts"}"#, now.as_micros()],
        )
        .unwrap();
    store.enqueue(judge(1), Duration::ZERO).await.unwrap();
    let delivery = store.pop_due(now).expect("the readable job");
    assert_eq!(*delivery.job, judge(1));
    let set_aside: String = store.lock().query_row("SELECT reason FROM dead_jobs", [], |row| row.get(0)).unwrap();
    assert!(set_aside.contains("version 99"), "{set_aside}");
}

#[tokio::test]
async fn what_expired_while_no_process_ran_goes_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    let clock = clock();
    let day = Duration::from_secs(86_400);
    let start = crate::ports::Clock::now(&*clock);
    let message = message("C1", start);
    SqliteStore::open(&path, clock.clone(), Some(day)).unwrap().put_message(&message).await.unwrap();
    clock.advance_to(start + 2 * day);
    let store = SqliteStore::open(&path, clock.clone(), Some(day)).unwrap();
    assert!(store.get_message(&message.channel, &message.ts).await.unwrap().is_none());
}

#[tokio::test]
async fn the_queues_stats_count_due_delayed_and_taken_jobs_and_the_oldest_due_ones_wait() {
    let clock = clock();
    let store = open(":memory:", &clock);
    let job = |n: u32| Job::Summarize { channel: ChannelId("C1".into()), ts: Ts::new(format!("{n}.000001")) };
    store.enqueue(job(1), Duration::ZERO).await.unwrap();
    store.enqueue(job(2), Duration::from_secs(10)).await.unwrap();
    store.enqueue(job(3), Duration::from_secs(60)).await.unwrap();
    clock.advance_to(clock.now() + Duration::from_secs(20));
    let taken = store.pop_due(clock.now()).expect("the first job is due");
    let stats = store.queue_depth(clock.now()).unwrap();
    assert_eq!((stats.due, stats.delayed, stats.in_delivery), (1, 1, 1), "{stats:?}");
    assert_eq!(stats.oldest_due, Duration::from_secs(10), "the second job is due since 10 s");
    store.ack(&taken);
    clock.advance_to(clock.now() + Duration::from_secs(100));
    let stats = store.queue_depth(clock.now()).unwrap();
    assert_eq!((stats.due, stats.delayed, stats.in_delivery), (2, 0, 0), "{stats:?}");
    assert_eq!(stats.oldest_due, Duration::from_secs(110));
}

/// A value that does not read is a counted error, and the store is failing until its
/// next write check of the file succeeds (the checkpointer's, on the real clock).
#[tokio::test]
async fn store_errors_are_counted_and_failing_lasts_until_a_write_check_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_in(&dir);
    let clock = clock();
    let store = open(&path, &clock);
    assert_eq!(store.health(), super::StoreHealth { errors: 0, failing: false });
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute("INSERT INTO channel_states (channel, state) VALUES ('C1', 'not json')", []).unwrap();
    assert!(store.channel_state(&ChannelId("C1".into())).await.is_err());
    assert_eq!(store.health(), super::StoreHealth { errors: 1, failing: true });
    let checked_by = std::time::Instant::now() + super::checkpoint::PROBE_EVERY * 2;
    while store.health().failing && std::time::Instant::now() < checked_by {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.health(), super::StoreHealth { errors: 1, failing: false }, "the file takes writes");
}
