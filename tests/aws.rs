//! The AWS adapters on real local emulators: DynamoDB Local for the stores, moto for
//! SQS and EventBridge Scheduler. `scripts/test` starts them (scripts/with-emulators);
//! under a plain `cargo test` these tests say they were skipped.

use std::sync::Arc;
use std::time::Duration;

use kuuki::adapters::aws::dynamo::{DynamoStore, TableNames, create_tables};
use kuuki::adapters::aws::scheduler::{EventBridgeScheduler, ScheduleTargets, schedule_name};
use kuuki::adapters::aws::sqs::{QueueUrls, SqsQueue, decode_job};
use kuuki::adapters::contract;
use kuuki::adapters::memory::VirtualClock;
use kuuki::budget::JobKind;
use kuuki::domain::{ChannelId, Job, ThreadKey, Timestamp, Ts};
use kuuki::ports::{ClaimOutcome, Clock, Ledger, Queue, Scheduler};
use kuuki::replay::REPLAY_EPOCH;

/// The emulators' endpoints. The tests that need them are `#[ignore]`d, so a plain
/// `cargo test` lists them as ignored; run asked for (`--include-ignored`, as
/// ./scripts/test does under scripts/with-emulators) without the emulators, they fail.
fn emulators(test: &str) -> (String, String) {
    match (std::env::var("KUUKI_DYNAMODB_ENDPOINT"), std::env::var("KUUKI_MOTO_ENDPOINT")) {
        (Ok(dynamo), Ok(moto)) => (dynamo, moto),
        _ => panic!(
            "{test}: no local AWS emulators (./scripts/test starts them; or scripts/with-emulators cargo test -- --include-ignored)"
        ),
    }
}

async fn sdk(endpoint: &str) -> aws_config::SdkConfig {
    let mut config = kuuki::adapters::aws::config::load().await.into_builder();
    config.set_endpoint_url(Some(endpoint.to_owned()));
    config.build()
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), fastrand_suffix())
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000_007
}

/// A store on fresh tables. DynamoDB Local deletes expired items by the machine's
/// clock, so messages written at a fixed past date must be given a `retention` that
/// reaches past today, or they vanish while a test reads them; ledger items (TTL a day
/// after their `until`) must be claimed at today or later, whatever `clock` says.
async fn dynamo_store(endpoint: &str, clock: Arc<VirtualClock>, retention: Duration) -> DynamoStore {
    dynamo_store_with_client(endpoint, clock, retention).await.0
}

/// A client and tables of their own, created.
async fn fresh_tables(endpoint: &str) -> (aws_sdk_dynamodb::Client, TableNames) {
    let client = aws_sdk_dynamodb::Client::new(&sdk(endpoint).await);
    let tables = TableNames {
        messages: unique("messages"),
        channels: unique("channels"),
        ledger: unique("ledger"),
        facts: unique("facts"),
    };
    create_tables(&client, &tables).await.expect("tables are created");
    (client, tables)
}

/// A store as [`dynamo_store`] makes it, with a client and the channels table's name
/// to write and read its items directly.
async fn dynamo_store_with_client(
    endpoint: &str,
    clock: Arc<VirtualClock>,
    retention: Duration,
) -> (DynamoStore, aws_sdk_dynamodb::Client, String) {
    let (client, tables) = fresh_tables(endpoint).await;
    create_tables(&client, &tables).await.expect("creating again is a no-op");
    let channels = tables.channels.clone();
    (DynamoStore::new(client.clone(), tables, clock, retention), client, channels)
}

/// A judgment item whose noted lull time cannot be read (written by hand, or by a
/// future version): the channel's state still reads, as if no lull were noted (one
/// more reflection job at worst), and nothing else in it is lost.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn an_unreadable_noted_lull_time_reads_as_none() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use kuuki::ports::ChannelStateStore;
    let (dynamo, _) = emulators("an_unreadable_noted_lull_time_reads_as_none");
    let (store, client, table) = dynamo_store_with_client(
        &dynamo,
        Arc::new(VirtualClock::new(REPLAY_EPOCH)),
        Duration::from_secs(3650 * 86_400),
    )
    .await;
    let channel = ChannelId("C-garbled".into());
    store.set_reflection_watermark(&channel, Ts::new("1767603600.000100")).await.unwrap();
    for garbled in [AttributeValue::S("soon".into()), AttributeValue::N("1.5".into())] {
        client
            .update_item()
            .table_name(&table)
            .key("channel", AttributeValue::S(format!("#judgment#{}", channel.0)))
            .update_expression("SET reflection_lull_at = :l")
            .expression_attribute_values(":l", garbled.clone())
            .send()
            .await
            .unwrap();
        let state = store.channel_state(&channel).await.expect("the state still reads");
        assert_eq!(state.reflection_lull_at, None, "{garbled:?} reads as no noted time");
        assert_eq!(state.reflection_watermark, Some(Ts::new("1767603600.000100")), "the rest of the item is read");
    }
    store.note_lull_reflection(&channel, Timestamp(REPLAY_EPOCH.0 + 600_000_000)).await.unwrap();
    let state = store.channel_state(&channel).await.unwrap();
    assert_eq!(state.reflection_lull_at, Some(Timestamp(REPLAY_EPOCH.0 + 600_000_000)), "a new note replaces it");
}

/// The workspace memory as it was kept before (one channels-table item holding the
/// memory and every channel's line): its memory is read until the memory is written
/// where it is now (its lines are not: each comes back with its channel's next
/// summary); every write of the memory deletes it first, even when an old version
/// wrote it again during a deploy, and a line removed is removed from it too (a
/// forget's remake of a channel's memory).
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn the_old_workspace_item_is_read_until_the_memory_is_written_anew_and_then_deleted() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use kuuki::domain::{ChannelLine, WorkspaceMemory};
    use kuuki::ports::ChannelStateStore;
    let test = "the_old_workspace_item_is_read_until_the_memory_is_written_anew_and_then_deleted";
    let (dynamo, _) = emulators(test);
    let (client, tables) = fresh_tables(&dynamo).await;
    let table = tables.channels.clone();
    // Two processes (Lambda containers) on the same tables.
    let process = || {
        let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
        DynamoStore::new(client.clone(), tables.clone(), clock, Duration::from_secs(3650 * 86_400))
    };
    let (store, other) = (process(), process());
    let at = |s: i64| Timestamp(REPLAY_EPOCH.0 + s * 1_000_000);
    let old = WorkspaceMemory {
        history: "the team moved to the new office".into(),
        recent_events: "a release on Friday".into(),
        updated_at: Some(at(0)),
        channel_lines: Vec::new(),
    };
    let old_line = |c: &str| ChannelLine { channel: ChannelId(c.into()), line: "old news".into(), updated_at: at(0) };
    let old_item = || async {
        let key = AttributeValue::S("#workspace".into());
        client.get_item().table_name(&table).key("channel", key).consistent_read(true).send().await.unwrap().item
    };
    let write_old = || async {
        client
            .put_item()
            .table_name(&table)
            .item("channel", AttributeValue::S("#workspace".into()))
            .item("workspace", AttributeValue::S(serde_json::to_string(&old).unwrap()))
            .item("line#C-old", AttributeValue::S(serde_json::to_string(&old_line("C-old")).unwrap()))
            .item("line#C-kept", AttributeValue::S(serde_json::to_string(&old_line("C-kept")).unwrap()))
            .send()
            .await
            .unwrap();
    };
    assert_eq!(store.workspace_memory().await.unwrap(), WorkspaceMemory::default(), "nothing anywhere yet");
    write_old().await;
    assert_eq!(store.workspace_memory().await.unwrap(), old, "the old memory is read, its lines are not");
    assert_eq!(store.workspace_memory_without_lines().await.unwrap(), old, "also alone");
    let line = ChannelLine { channel: ChannelId("C-new".into()), line: "new news".into(), updated_at: at(60) };
    store.set_channel_line(&line.channel, Some(line.clone())).await.unwrap();
    let read = other.workspace_memory().await.unwrap();
    assert_eq!(read, WorkspaceMemory { channel_lines: vec![line.clone()], ..old.clone() }, "a new line beside it");

    // A line removed (a forget's remake of that channel's memory) goes from the old
    // item too; the rest of it stays until the memory is written anew.
    store.set_channel_line(&ChannelId("C-old".into()), None).await.unwrap();
    let item = old_item().await.expect("the old item is still there");
    assert!(!item.contains_key("line#C-old") && item.contains_key("line#C-kept") && item.contains_key("workspace"));

    // The memory written anew (a forget's wipe): the old item is gone.
    other.set_workspace_memory(WorkspaceMemory::default()).await.unwrap();
    assert_eq!(old_item().await, None, "the old item is deleted");
    let read = store.workspace_memory().await.unwrap();
    assert_eq!(read, WorkspaceMemory { channel_lines: vec![line.clone()], ..WorkspaceMemory::default() });

    // An old item written again (an old version still running during a deploy): the
    // memory written anew wins over it, and the next write deletes it again.
    write_old().await;
    assert_eq!(store.workspace_memory().await.unwrap(), read, "the memory written anew wins");
    assert_eq!(store.workspace_memory_without_lines().await.unwrap(), WorkspaceMemory::default(), "also alone");
    let fresh = WorkspaceMemory { history: "fresh".into(), updated_at: Some(at(120)), ..WorkspaceMemory::default() };
    store.set_workspace_memory(fresh.clone()).await.unwrap();
    assert_eq!(old_item().await, None, "deleted again");
    assert_eq!(
        other.workspace_memory().await.unwrap(),
        WorkspaceMemory { channel_lines: vec![line.clone()], ..fresh.clone() }
    );
    // Removing a line when no old item is left creates none.
    store.set_channel_line(&line.channel, None).await.unwrap();
    assert_eq!(old_item().await, None, "no old item made by a removal");
    assert_eq!(store.workspace_memory().await.unwrap(), fresh, "a line is removed on its own");
}

/// A write of the workspace memory that dies after deleting the old item (its own write
/// fails: here a facts table that is not there) leaves no copy of the old memory: what
/// is read then is none, not the old text, and the write made again stores the memory.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_workspace_memory_write_that_dies_halfway_leaves_no_old_copy() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use kuuki::domain::WorkspaceMemory;
    use kuuki::ports::ChannelStateStore;
    let (dynamo, _) = emulators("a_workspace_memory_write_that_dies_halfway_leaves_no_old_copy");
    let (client, tables) = fresh_tables(&dynamo).await;
    let store_on = |tables: TableNames| {
        let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
        DynamoStore::new(client.clone(), tables, clock, Duration::from_secs(3650 * 86_400))
    };
    let old = WorkspaceMemory { history: "UALICE has a cat named Miso".into(), ..WorkspaceMemory::default() };
    client
        .put_item()
        .table_name(&tables.channels)
        .item("channel", AttributeValue::S("#workspace".into()))
        .item("workspace", AttributeValue::S(serde_json::to_string(&old).unwrap()))
        .send()
        .await
        .unwrap();
    let store = store_on(tables.clone());
    assert_eq!(store.workspace_memory_without_lines().await.unwrap(), old);
    let dying = store_on(TableNames { facts: unique("no-such-facts"), ..tables.clone() });
    assert!(dying.set_workspace_memory(WorkspaceMemory::default()).await.is_err(), "its write fails");
    assert_eq!(store.workspace_memory_without_lines().await.unwrap(), WorkspaceMemory::default(), "no old copy");
    assert_eq!(store.workspace_memory().await.unwrap(), WorkspaceMemory::default());
    let again = WorkspaceMemory { history: "a team".into(), ..WorkspaceMemory::default() };
    store.set_workspace_memory(again.clone()).await.unwrap();
    assert_eq!(store.workspace_memory_without_lines().await.unwrap(), again, "the write made again stores it");
}

/// A fact stored before facts had revisions (no `rev`): read as revision 0, a write
/// conditional on that goes through once, and not after another write came between.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_fact_stored_before_revisions_is_written_conditionally_too() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use kuuki::domain::Fact;
    use kuuki::ports::{FactRevision, FactStore};
    let (dynamo, _) = emulators("a_fact_stored_before_revisions_is_written_conditionally_too");
    let (client, tables) = fresh_tables(&dynamo).await;
    let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
    let store = DynamoStore::new(client.clone(), tables.clone(), clock, Duration::from_secs(3650 * 86_400));
    let channel = ChannelId("C-old-facts".into());
    let fact = Fact {
        id: "f1".into(),
        channel: channel.clone(),
        content: "the team deploys on Mondays".into(),
        keywords: vec!["deploy".into()],
        source_users: vec!["UBOB".into()],
        confidence: 0.9,
        shareable: false,
        created_at: REPLAY_EPOCH,
        confirmed_at: REPLAY_EPOCH,
        strength: 1,
        source_messages: Vec::new(),
        embedding: None,
    };
    client
        .put_item()
        .table_name(&tables.facts)
        .item("scope", AttributeValue::S(channel.0.to_string()))
        .item("id", AttributeValue::S("f1".into()))
        .item("fact", AttributeValue::S(serde_json::to_string(&fact).unwrap()))
        .send()
        .await
        .unwrap();
    let read = store.facts_as_read(&channel).await.unwrap();
    assert_eq!(read, vec![(fact.clone(), FactRevision(0))], "read as revision 0");
    let stronger = Fact { strength: 2, ..fact.clone() };
    assert!(store.put_fact_if_unchanged(&stronger, Some(FactRevision(0))).await.unwrap(), "unchanged since read");
    let (stored, revision) = store.facts_as_read(&channel).await.unwrap().remove(0);
    assert_eq!((stored.strength, revision != FactRevision(0)), (2, true), "stored with a revision now");
    let stale = Fact { strength: 9, ..fact.clone() };
    assert!(!store.put_fact_if_unchanged(&stale, Some(FactRevision(0))).await.unwrap(), "written since");
    assert_eq!(store.facts(&channel).await.unwrap(), vec![stronger]);
}

/// A channel item written before the answers and the judgment had items of their own
/// (interventions in the JSON and as `iv#` attributes, `last_judgment` beside them):
/// its next update moves them out, without replacing anything newer there, and the
/// channel item lets go of them (people's words must not outlive their retention in
/// an item nothing trims any more).
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn an_old_channel_item_moves_its_answers_out_at_its_next_update() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use kuuki::domain::{Decision, Intervention, JudgmentNote, ResponseType, UserId};
    use kuuki::ports::{ChannelState, ChannelStateStore};
    let (dynamo, _) = emulators("an_old_channel_item_moves_its_answers_out_at_its_next_update");
    let (store, client, table) = dynamo_store_with_client(
        &dynamo,
        Arc::new(VirtualClock::new(REPLAY_EPOCH)),
        Duration::from_secs(3650 * 86_400),
    )
    .await;
    let channel = ChannelId("C-old".into());
    let at = |secs: i64| Timestamp(REPLAY_EPOCH.0 + secs * Timestamp::MICROS_PER_SECOND);
    let answer = |secs: i64| Intervention {
        at: at(secs),
        thread: ThreadKey::top_level(channel.clone()),
        response_type: ResponseType::ShortAck,
        excerpt: format!("what was said at {secs}"),
        facts: Vec::new(),
    };
    let note = |secs: i64| JudgmentNote {
        at: at(secs),
        ts: Ts::from_timestamp(at(secs)),
        user: UserId("U1".into()),
        text: format!("judged at {secs}"),
        score: 10,
        breakdown: Default::default(),
        decision: Decision::Skip,
        respond: false,
        response_type: None,
        reason: "quiet".into(),
    };
    let in_json = ChannelState { interventions: vec![answer(10), answer(20)], ..ChannelState::default() };
    let s = |v: String| AttributeValue::S(v);
    // Writes an item as an older version left it.
    let put_as_written = |key: String, attributes: Vec<(String, AttributeValue)>| {
        let mut put = client.put_item().table_name(&table).item("channel", s(key));
        for (name, value) in attributes {
            put = put.item(name, value);
        }
        async move { put.send().await.unwrap() }
    };
    put_as_written(
        channel.0.to_string(),
        vec![
            ("version".into(), AttributeValue::N("3".into())),
            ("state".into(), s(serde_json::to_string(&in_json).unwrap())),
            (format!("iv#{:020}#-", at(30).0), s(serde_json::to_string(&answer(30)).unwrap())),
            ("last_judgment".into(), s(serde_json::to_string(&note(5)).unwrap())),
        ],
    )
    .await;
    // A worker of the new layout answered and judged since (newer than what moves).
    store.record_intervention(&channel, answer(50)).await.unwrap();
    store.record_judgment(&channel, note(60), Some(at(70))).await.unwrap();
    let before = store.channel_state(&channel).await.unwrap();
    assert_eq!(before.interventions.iter().map(|i| i.at).collect::<Vec<_>>(), [at(10), at(20), at(30), at(50)]);

    store.set_muted(&channel, Some(at(1000))).await.unwrap();
    let item = client
        .get_item()
        .table_name(&table)
        .key("channel", s(channel.0.to_string()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let left: Vec<&String> = item.keys().filter(|k| k.starts_with("iv#") || *k == "last_judgment").collect();
    assert!(left.is_empty(), "the channel item let go of {left:?}");
    let json = item["state"].as_s().unwrap();
    assert!(!json.contains("what was said"), "no excerpt left in the channel's JSON: {json}");

    let after = store.channel_state(&channel).await.unwrap();
    assert_eq!(
        after.interventions.iter().map(|i| (i.at, i.excerpt.as_str())).collect::<Vec<_>>(),
        [(at(10), ""), (at(20), ""), (at(30), ""), (at(50), "what was said at 50")],
        "every answer kept, the newest in full"
    );
    assert_eq!(after.last_judgment, Some(note(60)), "the newer judgment stays");
    assert_eq!(after.reflection_lull_at, Some(at(70)), "and the lull's reflection noted with it");
    assert_eq!(after.muted_until, Some(at(1000)));
    assert_eq!(after.last_response_at, Some(at(50)));
    // Again (a retry, or the next update): nothing left to move, nothing changes.
    store.set_muted(&channel, Some(at(1000))).await.unwrap();
    assert_eq!(store.channel_state(&channel).await.unwrap(), after);

    // Nothing newer where they move: the old answers and judgment are read as they were.
    let quiet = ChannelId("C-older".into());
    put_as_written(
        quiet.0.to_string(),
        vec![
            ("version".into(), AttributeValue::N("1".into())),
            ("state".into(), s(serde_json::to_string(&in_json).unwrap())),
            ("last_judgment".into(), s(serde_json::to_string(&note(5)).unwrap())),
        ],
    )
    .await;
    store.set_muted(&quiet, None).await.unwrap();
    let moved = store.channel_state(&quiet).await.unwrap();
    assert_eq!(
        moved.interventions.iter().map(|i| (i.at, i.excerpt.as_str())).collect::<Vec<_>>(),
        [(at(10), ""), (at(20), "what was said at 20")]
    );
    assert_eq!(moved.last_judgment, Some(note(5)));

    // An answers item the version before wrote: a newer answer in full as `last` (and
    // its compact `iv#`), with no time beside it. Neither what moves in (older) nor a
    // resumed answer older than `last` may take its place.
    let mixed = ChannelId("C-mixed".into());
    let newer_compact = Intervention { excerpt: String::new(), ..answer(200) };
    let items: [(String, Vec<(String, AttributeValue)>); 2] = [
        (
            mixed.0.to_string(),
            vec![
                ("version".into(), AttributeValue::N("1".into())),
                ("state".into(), s(serde_json::to_string(&in_json).unwrap())),
            ],
        ),
        (
            format!("#answers#{}", mixed.0),
            vec![
                ("last".into(), s(serde_json::to_string(&answer(200)).unwrap())),
                (format!("iv#{:020}#-", at(200).0), s(serde_json::to_string(&newer_compact).unwrap())),
            ],
        ),
    ];
    for (key, attributes) in items {
        put_as_written(key, attributes).await;
    }
    store.set_muted(&mixed, None).await.unwrap();
    store.record_intervention(&mixed, answer(150)).await.unwrap();
    let kept = store.channel_state(&mixed).await.unwrap();
    assert_eq!(
        kept.interventions.iter().map(|i| (i.at, i.excerpt.as_str())).collect::<Vec<_>>(),
        [(at(10), ""), (at(20), ""), (at(150), ""), (at(200), "what was said at 200")],
        "the newest keeps its excerpt"
    );

    // Bad input: a `last` that cannot be read is replaced by the new answer, and the
    // answer is recorded (an error after the write would fail every redelivery).
    let corrupt = ChannelId("C-corrupt".into());
    put_as_written(format!("#answers#{}", corrupt.0), vec![("last".into(), s("{not json".into()))]).await;
    store.record_intervention(&corrupt, answer(300)).await.expect("recorded despite the unreadable last answer");
    let read = store.channel_state(&corrupt).await.unwrap();
    assert_eq!(
        read.interventions.iter().map(|i| (i.at, i.excerpt.as_str())).collect::<Vec<_>>(),
        [(at(300), "what was said at 300")]
    );
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn the_dynamodb_store_keeps_the_port_contract() {
    let (dynamo, _) = emulators("the_dynamodb_store_keeps_the_port_contract");
    let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
    // The contract writes in 2100, so the emulator's TTL deleter leaves its items alone;
    // this clock (2026) only decides what reads count as expired: none of them.
    let store = dynamo_store(&dynamo, clock, Duration::from_secs(3650 * 86_400)).await;
    contract::message_store(&store).await;
    contract::ledger(&store).await;
    contract::channel_states(&store).await;
    contract::facts(&store).await;
    contract::workspace_purge(&store).await;
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn expired_messages_are_not_read_though_ttl_deletes_late() {
    let (dynamo, _) = emulators("expired_messages_are_not_read_though_ttl_deletes_late");
    // Written now, so the emulator's own TTL deleter (real clock) leaves it for 30 days;
    // the store's clock then moves past the retention.
    let written = kuuki::ports::Clock::now(&kuuki::adapters::system::SystemClock);
    let clock = Arc::new(VirtualClock::new(written));
    let store = dynamo_store(&dynamo, clock.clone(), Duration::from_secs(30 * 86_400)).await;
    let channel = ChannelId("ttl".into());
    let message = kuuki::domain::Message {
        channel: channel.clone(),
        ts: Ts::from_timestamp(written),
        thread_root: None,
        user: kuuki::domain::UserId("U1".into()),
        user_name: "alice".into(),
        text: "old".into(),
        author: kuuki::domain::Author::Human,
        replies_to_bot: false,
        in_dm: false,
        private_channel: false,
        at: written,
    };
    use kuuki::ports::MessageStore;
    store.put_message(&Arc::new(message.clone())).await.unwrap();
    assert!(store.get_message(&channel, &message.ts).await.unwrap().is_some());
    clock.advance_to(written + Duration::from_secs(31 * 86_400));
    assert!(store.get_message(&channel, &message.ts).await.unwrap().is_none(), "past MESSAGE_RETENTION_DAYS");
    let thread = ThreadKey::top_level(channel.clone());
    assert!(store.recent_in_thread(&thread, Timestamp(0), 10).await.unwrap().is_empty());
}

async fn queue_urls(moto: &str) -> (aws_sdk_sqs::Client, QueueUrls) {
    let client = aws_sdk_sqs::Client::new(&sdk(moto).await);
    let mut urls = Vec::new();
    for name in JobKind::ALL.map(JobKind::as_str) {
        let out = client.create_queue().queue_name(unique(name)).send().await.expect("a queue");
        urls.push(out.queue_url.unwrap());
    }
    (
        client,
        QueueUrls {
            judge: urls[0].clone(),
            respond: urls[1].clone(),
            summarize: urls[2].clone(),
            reflect: urls[3].clone(),
            forget: urls[4].clone(),
        },
    )
}

fn judge_job() -> Job {
    Job::Judge { thread: ThreadKey::top_level(ChannelId("C1".into())), ts: Ts::new("1767603600.000100") }
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn sqs_carries_versioned_jobs_to_their_worker_queue_with_their_delay() {
    let (_, moto) = emulators("sqs_carries_versioned_jobs_to_their_worker_queue_with_their_delay");
    let (client, urls) = queue_urls(&moto).await;
    let queue = SqsQueue::new(client.clone(), urls.clone());
    queue.enqueue(judge_job(), Duration::ZERO).await.unwrap();
    queue.enqueue(judge_job(), Duration::from_secs(2)).await.unwrap();
    let error = queue.enqueue(judge_job(), Duration::from_secs(901)).await.unwrap_err();
    assert!(error.to_string().contains("beyond SQS's 900 s"), "{error}");

    let now = client.receive_message().queue_url(&urls.judge).max_number_of_messages(10).send().await.unwrap();
    let messages = now.messages.unwrap_or_default();
    assert_eq!(messages.len(), 1, "the delayed one is not visible yet");
    let body = messages[0].body.as_deref().unwrap();
    assert!(body.contains("\"v\":1"), "versioned: {body}");
    assert_eq!(decode_job(body).unwrap(), judge_job());
    let respond = client.receive_message().queue_url(&urls.respond).send().await.unwrap();
    assert!(respond.messages.unwrap_or_default().is_empty(), "judge jobs go to the judge queue");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = client.receive_message().queue_url(&urls.judge).max_number_of_messages(10).send().await.unwrap();
    assert_eq!(later.messages.unwrap_or_default().len(), 1, "the delayed one arrives after its delay");
    let newer = kuuki::adapters::aws::sqs::encode_job(&judge_job()).replace("\"v\":1", "\"v\":5");
    assert!(decode_job(&newer).unwrap_err().contains("version 5"), "{newer}");
    assert!(decode_job("not json").unwrap_err().contains("not a kuuki job"));
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn long_delays_become_one_time_schedules_that_delete_themselves() {
    let (_, moto) = emulators("long_delays_become_one_time_schedules_that_delete_themselves");
    let config = sdk(&moto).await;
    let client = aws_sdk_scheduler::Client::new(&config);
    let group = unique("kuuki");
    client.create_schedule_group().name(&group).send().await.expect("a schedule group");
    let scheduler = EventBridgeScheduler::new(
        client.clone(),
        ScheduleTargets {
            group: group.clone(),
            role_arn: "arn:aws:iam::123456789012:role/kuuki-scheduler".into(),
            judge_queue_arn: "arn:aws:sqs:us-east-1:123456789012:kuuki-judge".into(),
            respond_queue_arn: "arn:aws:sqs:us-east-1:123456789012:kuuki-respond".into(),
            summarize_queue_arn: "arn:aws:sqs:us-east-1:123456789012:kuuki-summarize".into(),
            reflect_queue_arn: "arn:aws:sqs:us-east-1:123456789012:kuuki-reflect".into(),
            forget_queue_arn: "arn:aws:sqs:us-east-1:123456789012:kuuki-forget".into(),
        },
    );
    let at = REPLAY_EPOCH + Duration::from_secs(3600);
    scheduler.schedule_once(judge_job(), at).await.unwrap();
    scheduler.schedule_once(judge_job(), at).await.expect("the same job at the same time is one schedule");
    let schedule = client
        .get_schedule()
        .group_name(&group)
        .name(schedule_name(&judge_job(), at))
        .send()
        .await
        .expect("the schedule exists");
    assert_eq!(schedule.schedule_expression(), Some("at(2026-01-05T10:00:00)"));
    assert_eq!(schedule.action_after_completion().map(|a| a.as_str()), Some("DELETE"));
    let target = schedule.target().unwrap();
    assert_eq!(target.arn(), "arn:aws:sqs:us-east-1:123456789012:kuuki-judge");
    assert_eq!(decode_job(target.input().unwrap()).unwrap(), judge_job());
    let listed = client.list_schedules().group_name(&group).send().await.unwrap();
    assert_eq!(listed.schedules().len(), 1);
}

/// kuuki end to end on the emulators: signed Slack requests over HTTP into the
/// ingress router, jobs through SQS into the judge and respond handlers, posts out
/// to a fake Slack API.
mod end_to_end {
    use std::collections::HashMap;
    use std::sync::Arc;

    use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::adapters::aws::calls::CallCounter;
    use kuuki::adapters::aws::dynamo::{TableNames, create_tables};
    use kuuki::adapters::memory::MemoryLog;
    use kuuki::adapters::slack::{SigningSecret, SlackClient, SlackIdentity};
    use kuuki::adapters::system::SystemClock;
    use kuuki::budget::JobKind;
    use kuuki::config::Settings;
    use kuuki::deps::Deps;
    use kuuki::domain::{ChannelId, Job, UserId};
    use kuuki_e2e::slack_world::{BOT_USER, SlackWorld, envelope, message};
    use kuuki_lambda::handle_sqs_event;
    use serde_json::json;

    use super::{emulators, queue_urls, sdk, unique};

    pub(crate) struct World {
        pub(super) deps: Arc<Deps>,
        sqs: aws_sdk_sqs::Client,
        pub(super) urls: kuuki::adapters::aws::sqs::QueueUrls,
        /// The workers' SQS adapter (counted), which settles failed messages.
        queue: Arc<kuuki::adapters::aws::sqs::SqsQueue>,
        slack_api: wiremock::MockServer,
        base_url: String,
        pub(super) counter: CallCounter,
        secret: SigningSecret,
        tables: TableNames,
        /// The memory jobs (SUMMARIZE, REFLECT) queued (SQS holds a delayed one out of
        /// a test's reach until its delay is over).
        memory_jobs: Arc<RecordingQueue>,
        /// The model, when the cost world has one: its calls are counted (a worker
        /// waits for each, and Lambda bills the wait).
        pub(super) model: Option<Arc<kuuki_e2e::RecordingLlm>>,
    }

    /// The queue port, passing every job on and keeping each memory job it queued.
    struct RecordingQueue {
        inner: Arc<dyn kuuki::ports::Queue>,
        memory_jobs: std::sync::Mutex<Vec<Job>>,
    }

    #[async_trait::async_trait]
    impl kuuki::ports::Queue for RecordingQueue {
        async fn enqueue(&self, job: Job, delay: std::time::Duration) -> kuuki::ports::PortResult<()> {
            let memory = matches!(job, Job::Summarize { .. } | Job::Reflect { .. }).then(|| job.clone());
            self.inner.enqueue(job, delay).await?;
            self.memory_jobs.lock().unwrap().extend(memory);
            Ok(())
        }
    }

    pub(super) async fn world_for_costs(dynamo: &str, moto: &str) -> World {
        world(dynamo, moto, &[("JUDGE_MIN_WAIT_SECONDS", "0")]).await
    }

    /// The cost world with a model (a script: the judge declines, answers are canned),
    /// so the LLM judge and the memory triggers run as they do in production.
    pub(super) async fn world_for_costs_with_llm(dynamo: &str, moto: &str) -> World {
        let script = r#"{"role": "judge", "reply": {"should_respond": false, "reason": "no need", "confidence": 0.7, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "手順は wiki にあります。", "repeat": true}
{"role": "summarize", "match": "workspace", "reply": {"history": "開発チームのワークスペース", "recent_events": "デプロイの準備"}, "repeat": true}
{"role": "summarize", "reply": {"summary": "デプロイの手順を確認し、昼食の相談をした。", "history": "デプロイと日々の相談", "mood": "和やか", "topic_keywords": ["デプロイ", "昼食"], "active_users": ["U0", "U1", "U2"]}, "repeat": true}
{"role": "reflect", "reply": {"facts": [{"content": "デプロイの手順は wiki にある", "keywords": ["デプロイ", "手順", "wiki"], "source_users": ["U1"], "confidence": 0.8, "shareable": true}], "profiles": [{"user": "U1", "tags": ["デプロイ担当"], "summary": "デプロイを見ている"}]}, "repeat": true}"#;
        let model = kuuki_e2e::RecordingLlm::new(script);
        let mut w = world_with(dynamo, moto, &[("JUDGE_MIN_WAIT_SECONDS", "0")], Some(model.clone())).await;
        w.model = Some(model);
        w
    }

    async fn world(dynamo: &str, moto: &str, settings: &[(&str, &str)]) -> World {
        world_with(dynamo, moto, settings, None).await
    }

    async fn world_with(
        dynamo: &str,
        moto: &str,
        settings: &[(&str, &str)],
        llm: Option<Arc<dyn kuuki::ports::Llm>>,
    ) -> World {
        world_logged(dynamo, moto, settings, llm, Arc::new(MemoryLog::default())).await
    }

    /// Like [`world_with`], with the decision log `log` (a Lambda's `EmfLog`).
    pub(super) async fn world_logged(
        dynamo: &str,
        moto: &str,
        settings: &[(&str, &str)],
        llm: Option<Arc<dyn kuuki::ports::Llm>>,
        log: Arc<dyn kuuki::ports::DecisionLog>,
    ) -> World {
        let tables = TableNames {
            messages: unique("messages"),
            channels: unique("channels"),
            ledger: unique("ledger"),
            facts: unique("facts"),
        };
        create_tables(&aws_sdk_dynamodb::Client::new(&sdk(dynamo).await), &tables).await.unwrap();
        let (sqs, urls) = queue_urls(moto).await;
        let mut vars: HashMap<String, String> = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        for (k, v) in [
            ("MESSAGES_TABLE", &tables.messages),
            ("CHANNELS_TABLE", &tables.channels),
            ("LEDGER_TABLE", &tables.ledger),
            ("JUDGE_QUEUE_URL", &urls.judge),
            ("RESPOND_QUEUE_URL", &urls.respond),
            ("SUMMARIZE_QUEUE_URL", &urls.summarize),
            ("REFLECT_QUEUE_URL", &urls.reflect),
            ("FORGET_QUEUE_URL", &urls.forget),
            ("FACTS_TABLE", &tables.facts),
        ] {
            vars.insert(k.into(), v.clone());
        }
        vars.insert("SLACK_SIGNING_SECRET".into(), "e2e-secret".into());
        let settings = Settings::from_vars(&vars).unwrap().for_llm(llm.is_some());
        // The stack's schedule group (the template makes it): long delays (a forget's
        // second look) are scheduled there. Made once per moto; a second make is refused.
        let scheduler = aws_sdk_scheduler::Client::new(&sdk(moto).await);
        let _ = scheduler.create_schedule_group().name(&settings.schedule_group).send().await;
        let counter = CallCounter::default();
        let aws = AwsAdapters::build_counted(&settings, Arc::new(SystemClock), Some(&counter)).await;
        let slack_api = wiremock::MockServer::start().await;
        SlackWorld::mount_default_api(&slack_api).await;
        let chat = Arc::new(SlackClient::new(&slack_api.uri(), "xoxb-e2e"));
        let persona = settings.persona(None);
        let mut adapters = aws.adapters(chat, llm, log);
        let memory_jobs = Arc::new(RecordingQueue { inner: adapters.queue, memory_jobs: Default::default() });
        adapters.queue = memory_jobs.clone();
        let deps = Arc::new(Deps::new(settings, persona, UserId(BOT_USER.into()), adapters, 3));
        let ingress = Arc::new(kuuki_ingress::Ingress {
            deps: deps.clone(),
            slack: Some(kuuki_ingress::SlackIngress {
                secret: SigningSecret::new("e2e-secret"),
                identity: SlackIdentity { user_id: BOT_USER.into(), bot_id: None },
            }),
            discord: None,
            metrics_for: None,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, kuuki_ingress::app(ingress)).await.unwrap() });
        let queue = aws.queue.clone();
        let secret = SigningSecret::new("e2e-secret");
        World { deps, sqs, urls, queue, slack_api, base_url, counter, secret, tables, memory_jobs, model: None }
    }

    impl World {
        pub(super) async fn deliver_text(&self, text: &str, n: u32) -> u16 {
            self.deliver_text_in(text, n, None).await
        }

        /// Like [`World::deliver_text`], as a reply in the thread begun by `root` when given.
        pub(super) async fn deliver_text_in(&self, text: &str, n: u32, root: Option<&str>) -> u16 {
            let mut event = message("C0COST", &format!("U{}", n % 3), text, &now_ts(n + 100));
            if let Some(root) = root {
                event["thread_ts"] = json!(root);
            }
            self.deliver(event, false).await
        }

        async fn deliver(&self, event: serde_json::Value, retry: bool) -> u16 {
            let body = envelope(event).to_string();
            let timestamp =
                (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()).to_string();
            let mut request = reqwest::Client::new()
                .post(format!("{}/slack/events", self.base_url))
                .header("content-type", "application/json")
                .header("x-slack-request-timestamp", &timestamp)
                .header("x-slack-signature", self.secret.sign(&timestamp, body.as_bytes()))
                .body(body);
            if retry {
                request = request.header("x-slack-retry-num", "1");
            }
            self.counter.acting_as("IngressFunction");
            let status = request.send().await.unwrap().status().as_u16();
            self.counter.acting_as("");
            status
        }

        /// Fails unless the SAM template's policy of each function allows every
        /// DynamoDB action it was seen to make, on that table (or index): the emulators
        /// check no permissions, AWS does.
        pub(super) fn assert_the_template_allows_what_was_done(&self) {
            let template: serde_yaml::Value = serde_yaml::from_str(
                &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml")).unwrap(),
            )
            .unwrap();
            // The template's name for what a call was on, as its policies write it.
            let logical = |resource: &str| match resource {
                t if t == self.tables.messages => "MessagesTable",
                t if t == self.tables.channels => "ChannelsTable",
                t if t == self.tables.ledger => "LedgerTable",
                t if t == self.tables.facts => "FactsTable",
                q if q == self.urls.judge => "JudgeQueue",
                q if q == self.urls.respond => "RespondQueue",
                q if q == self.urls.summarize => "SummarizeQueue",
                q if q == self.urls.reflect => "ReflectQueue",
                q if q == self.urls.forget => "ForgetQueue",
                other => panic!("a table or queue the template does not know: {other}"),
            };
            let accesses = self.counter.accesses();
            assert!(accesses.iter().any(|a| !a.function.is_empty()), "the functions' calls were seen");
            let mut missing = Vec::new();
            for access in accesses.iter().filter(|a| !a.function.is_empty()) {
                // Schedules are named per job; the policy allows the group's.
                let resource = if access.resource == "schedule" {
                    "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*"
                        .to_owned()
                } else {
                    let name = logical(&access.resource);
                    match &access.index {
                        Some(index) => format!("${{{name}.Arn}}/index/{index}"),
                        None => format!("{name}.Arn"),
                    }
                };
                let statements: Vec<serde_yaml::Value> =
                    template["Resources"][&access.function]["Properties"]["Policies"]
                        .as_sequence()
                        .unwrap_or_else(|| panic!("{} has policies", access.function))
                        .iter()
                        .flat_map(|policy| policy["Statement"].as_sequence().cloned().unwrap_or_default())
                        .collect();
                let allows = |action: &str, resource: &str| {
                    statements.iter().any(|statement| {
                        let listed = |value: &serde_yaml::Value| -> Vec<String> {
                            let one = |v: &serde_yaml::Value| match v {
                                serde_yaml::Value::Tagged(tagged) => {
                                    tagged.value.as_str().unwrap_or_default().to_owned()
                                }
                                other => other.as_str().unwrap_or_default().to_owned(),
                            };
                            match value.as_sequence() {
                                Some(items) => items.iter().map(one).collect(),
                                None => vec![one(value)],
                            }
                        };
                        statement["Effect"] == "Allow"
                            && listed(&statement["Action"]).iter().any(|a| a == action)
                            && listed(&statement["Resource"]).iter().any(|r| r == resource)
                    })
                };
                if !allows(&access.action, &resource) {
                    missing.push(format!("{} {} on {resource}", access.function, access.action));
                }
                // A schedule is made with the role it will send as, which takes PassRole.
                if access.action == "scheduler:CreateSchedule" && !allows("iam:PassRole", "SchedulerRole.Arn") {
                    missing.push(format!("{} iam:PassRole on SchedulerRole.Arn", access.function));
                }
            }
            assert!(missing.is_empty(), "infra/template.yaml does not allow what the functions do: {missing:#?}");
        }

        /// Makes the cost channel look like one kuuki has lived in for a while, so the
        /// measured capacity units are those of a mature channel, not an empty one
        /// (DynamoDB charges a read and a write by the item's size): a full window of
        /// earlier messages, a channel memory, and the kept interventions, each with a
        /// full excerpt (200 characters of Japanese, 600 bytes).
        pub(super) async fn mature_channel(&self) {
            use kuuki::domain::{
                Author, ChannelId, ChannelMemory, Intervention, Message, ResponseType, ThreadKey, Timestamp, Ts,
            };
            let channel = ChannelId("C0COST".into());
            let now = self.deps.clock.now();
            let hours_ago = |hours: i64, i: i64| Timestamp(now.0 - hours * 3_600_000_000 + i * 1_000_000);
            let line = "デプロイの手順を確認して、ステージングで動かしてから本番に出します。";
            let mut newest = Ts::new("0.000000");
            for i in 0..self.deps.settings.channel_buffer_size as i64 {
                let at = hours_ago(2, i);
                let message = Message {
                    channel: channel.clone(),
                    ts: Ts::from_timestamp(at),
                    thread_root: None,
                    user: UserId(format!("U{}", i % 3).into()),
                    user_name: format!("user{}", i % 3),
                    text: line.into(),
                    author: Author::Human,
                    replies_to_bot: false,
                    in_dm: false,
                    private_channel: false,
                    at,
                };
                self.deps.messages.put_message(&Arc::new(message.clone())).await.unwrap();
                newest = message.ts;
            }
            let memory = ChannelMemory {
                summary: line.repeat(12),
                history: line.repeat(12),
                mood: "落ち着いている".into(),
                topic_keywords: (0..10).map(|i| format!("話題{i}")).collect(),
                active_users: (0..5).map(|i| format!("U{i}")).collect(),
                updated_at: Some(hours_ago(2, 60)),
                // Summarized and reflected on up to the newest of them.
                watermark: Some(newest.clone()),
                ..ChannelMemory::default()
            };
            self.deps.channels.set_channel_memory(&channel, memory).await.unwrap();
            self.deps.channels.set_reflection_watermark(&channel, newest).await.unwrap();
            // A workspace of twenty channels, its memory refreshed ten minutes ago (a
            // refresh comes once in four summary periods for the whole workspace: not a
            // cost of this channel's messages), and facts learned here before.
            let workspace = kuuki::domain::WorkspaceMemory {
                history: line.repeat(12),
                recent_events: line.repeat(12),
                updated_at: Some(hours_ago(0, -600)),
                channel_lines: Vec::new(),
            };
            self.deps.channels.set_workspace_memory(workspace).await.unwrap();
            for i in 0..20 {
                let other = ChannelId(format!("C0OTHER{i}").into());
                let other_line = kuuki::domain::ChannelLine {
                    channel: other.clone(),
                    line: line.chars().cycle().take(120).collect(),
                    updated_at: hours_ago(1, i),
                };
                self.deps.channels.set_channel_line(&other, Some(other_line)).await.unwrap();
            }
            for i in 0..20 {
                let fact = kuuki::domain::Fact {
                    id: format!("fact-{i}"),
                    channel: channel.clone(),
                    content: line.chars().cycle().take(60).collect(),
                    keywords: (0..5).map(|k| format!("話題{k}")).collect(),
                    source_users: vec![format!("U{}", i % 3)],
                    confidence: 0.8,
                    shareable: true,
                    created_at: hours_ago(48, i),
                    confirmed_at: hours_ago(48, i),
                    strength: 1,
                    source_messages: Vec::new(),
                    embedding: None,
                };
                self.deps.facts.put_fact(&fact).await.unwrap();
            }
            let excerpt: String = line.chars().cycle().take(200).collect();
            for i in 0..kuuki::ports::ChannelState::KEPT_INTERVENTIONS as i64 {
                let intervention = Intervention {
                    at: hours_ago(4, i * 60),
                    thread: ThreadKey::top_level(channel.clone()),
                    response_type: ResponseType::FullResponse,
                    excerpt: excerpt.clone(),
                    facts: Vec::new(),
                };
                self.deps.channels.record_intervention(&channel, intervention).await.unwrap();
            }
        }

        /// A busy channel whose talk is in threads: after [`World::mature_channel`], three
        /// threads begun 25 minutes ago and 60 replies in them over the last 20 minutes,
        /// so the newest `CHANNEL_BUFFER_SIZE` messages are all replies and reach back
        /// less than `CHANNEL_BUFFER_TTL_MINUTES`. Returns the threads' roots.
        pub(super) async fn busy_threads(&self) -> Vec<kuuki::domain::Ts> {
            use kuuki::domain::{Author, ChannelId, Message, Timestamp, Ts};
            let channel = ChannelId("C0COST".into());
            let now = self.deps.clock.now();
            let minutes_ago = |minutes: i64, i: i64| Timestamp(now.0 - minutes * 60_000_000 + i * 1_000_000);
            let line = "ステージングで確認しました。ログも見ておきます。";
            let put = |at: Timestamp, thread_root: Option<Ts>, i: i64| {
                let message = Message {
                    channel: channel.clone(),
                    ts: Ts::from_timestamp(at),
                    thread_root,
                    user: UserId(format!("U{}", i % 3).into()),
                    user_name: format!("user{}", i % 3),
                    text: line.into(),
                    author: Author::Human,
                    replies_to_bot: false,
                    in_dm: false,
                    private_channel: false,
                    at,
                };
                async move { self.deps.messages.put_message(&Arc::new(message)).await.unwrap() }
            };
            let roots: Vec<Ts> = (0..3).map(|i| Ts::from_timestamp(minutes_ago(25, i))).collect();
            for i in 0..3 {
                put(minutes_ago(25, i), None, i).await;
            }
            for i in 0..60 {
                put(minutes_ago(20, i * 15), Some(roots[i as usize % 3].clone()), i).await;
            }
            roots
        }

        /// How many messages wait on the queue at `url` for their delay to pass.
        pub(super) async fn delayed(&self, url: &str) -> usize {
            use aws_sdk_sqs::types::QueueAttributeName;
            let out = self
                .sqs
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
                .send()
                .await
                .unwrap();
            let attributes = out.attributes.unwrap_or_default();
            attributes[&QueueAttributeName::ApproximateNumberOfMessagesDelayed].parse().unwrap()
        }

        /// The `kind` jobs queued so far (SUMMARIZE or REFLECT), taken.
        pub(super) fn take_queued(&self, kind: JobKind) -> Vec<Job> {
            let mut jobs = self.memory_jobs.memory_jobs.lock().unwrap();
            let (taken, left) = std::mem::take(&mut *jobs).into_iter().partition(|job| kind.runs(job));
            *jobs = left;
            taken
        }

        /// Runs `job` as the worker of its `kind` runs it. Returns the failed records.
        pub(super) async fn run_as_worker(&self, kind: JobKind, job: Job) -> usize {
            self.counter.acting_as(match kind {
                JobKind::Summarize => "SummarizeFunction",
                JobKind::Reflect => "ReflectFunction",
                _ => unreachable!("memory work only"),
            });
            let response = handle_sqs_event(&self.deps, &self.queue, kind, event_of(&[job]), None).await;
            self.counter.acting_as("");
            response.batch_item_failures.len()
        }

        /// What SQS would hand the Lambda: the queue's visible messages as an event,
        /// visible again at once (so a test can deliver them again when it likes).
        pub(super) async fn receive(&self, url: &str) -> SqsEvent {
            self.receive_for(url, 0).await
        }

        /// Like [`World::receive`], invisible for `visibility` seconds as a Lambda poller
        /// takes them (the queue's visibility timeout).
        pub(super) async fn receive_for(&self, url: &str, visibility: i32) -> SqsEvent {
            use aws_sdk_sqs::types::MessageSystemAttributeName;
            let out = self
                .sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .visibility_timeout(visibility)
                .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
                .send()
                .await
                .unwrap();
            let mut event = SqsEvent::default();
            event.records = out
                .messages
                .unwrap_or_default()
                .into_iter()
                .map(|m| {
                    let mut record = SqsMessage::default();
                    record.message_id = m.message_id;
                    record.receipt_handle = m.receipt_handle;
                    // As Lambda names the queue a record came from (moto's account and region).
                    record.event_source_arn =
                        Some(format!("arn:aws:sqs:us-east-1:123456789012:{}", url.rsplit('/').next().unwrap()));
                    record.body = m.body;
                    record.attributes = m
                        .attributes
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(name, value)| (name.as_str().to_owned(), value))
                        .collect();
                    record
                })
                .collect();
            event
        }

        /// Hands the judge and respond queues' messages to the workers, deleting the
        /// ones that succeeded as Lambda's event source mapping does, until both are
        /// empty (at most `rounds` times). Returns the failed records and the records
        /// handed to the workers.
        pub(super) async fn drain(&self, rounds: usize) -> (usize, usize) {
            let (mut failed, mut jobs) = (0, 0);
            for _ in 0..rounds {
                let mut handled = 0;
                for kind in [JobKind::Judge, JobKind::Respond] {
                    let url = self.urls.for_kind(kind);
                    let event = self.receive(url).await;
                    if event.records.is_empty() {
                        continue;
                    }
                    handled += event.records.len();
                    jobs += event.records.len();
                    self.counter.acting_as(match kind {
                        JobKind::Judge => "JudgeFunction",
                        _ => "RespondFunction",
                    });
                    let response = handle_sqs_event(&self.deps, &self.queue, kind, event.clone(), None).await;
                    self.counter.acting_as("");
                    failed += response.batch_item_failures.len();
                    for record in &event.records {
                        let ok = !response
                            .batch_item_failures
                            .iter()
                            .any(|f| Some(&f.item_identifier) == record.message_id.as_ref());
                        if ok {
                            let handle = record.receipt_handle.as_deref().expect("a receipt handle");
                            self.sqs.delete_message().queue_url(url).receipt_handle(handle).send().await.unwrap();
                        }
                    }
                }
                if handled == 0 {
                    break;
                }
            }
            (failed, jobs)
        }

        pub(super) async fn slack_calls(&self, api: &str) -> Vec<serde_json::Value> {
            self.slack_api
                .received_requests()
                .await
                .unwrap_or_default()
                .into_iter()
                .filter(|r| r.url.path() == format!("/{api}"))
                .map(|r| serde_json::from_slice(&r.body).unwrap())
                .collect()
        }
    }

    fn now_ts(n: u32) -> String {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        format!("{secs}.{n:06}")
    }

    /// An SQS event of `jobs`, as Lambda's poller would hand it over.
    fn event_of(jobs: &[Job]) -> SqsEvent {
        let mut event = SqsEvent::default();
        event.records = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| {
                let mut record = SqsMessage::default();
                record.message_id = Some(format!("m{i}"));
                record.body = Some(kuuki::adapters::aws::sqs::encode_job(job));
                record
            })
            .collect();
        event
    }

    /// The memory workers do their work on DynamoDB and SQS, and the template lets each
    /// do exactly that (the emulators check no permissions; AWS does).
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn the_memory_workers_run_within_their_policies() {
        let (dynamo, moto) = emulators("the_memory_workers_run_within_their_policies");
        let script = r#"{"role": "judge", "reply": {"should_respond": false, "reason": "no need", "confidence": 0.7, "conversation_state": "active"}, "repeat": true}
{"role": "summarize", "match": "workspace", "reply": {"history": "deploys happen here", "recent_events": "a deploy stalled"}, "repeat": true}
{"role": "summarize", "reply": {"summary": "a deploy stalled on a lock", "history": "deploys", "mood": "calm", "topic_keywords": ["deploy"], "active_users": ["U0", "U1"]}, "repeat": true}
{"role": "reflect", "reply": {"facts": [{"content": "Staging deploys can stall on the migration lock", "keywords": ["staging", "deploy", "lock"], "source_users": ["U0"], "confidence": 0.8, "shareable": true}], "profiles": [{"user": "U1", "tags": ["infra"], "summary": "fixed the lock"}]}, "repeat": true}"#;
        let llm: Arc<dyn kuuki::ports::Llm> = Arc::new(kuuki::adapters::llm::ScriptedLlm::parse(script).unwrap());
        let settings = [("JUDGE_MIN_WAIT_SECONDS", "0"), ("REFLECTION_MIN_MESSAGES", "3")];
        let w = world_with(&dynamo, &moto, &settings, Some(llm)).await;
        for (i, text) in
            ["the staging deploy stalled", "it waits on the migration lock", "fixed, it runs"].iter().enumerate()
        {
            assert_eq!(w.deliver_text(text, i as u32).await, 200);
        }
        let channel = ChannelId("C0COST".into());
        let newest = w.deps.messages.channel_window(&channel, 1).await.unwrap().messages[0].ts.clone();
        for (kind, function, job) in [
            (JobKind::Summarize, "SummarizeFunction", Job::Summarize { channel: channel.clone(), ts: newest.clone() }),
            (JobKind::Reflect, "ReflectFunction", Job::Reflect { channel: channel.clone(), ts: newest.clone() }),
            (JobKind::Reflect, "ReflectFunction", Job::SweepFacts),
        ] {
            w.counter.acting_as(function);
            let response = handle_sqs_event(&w.deps, &w.queue, kind, event_of(std::slice::from_ref(&job)), None).await;
            w.counter.acting_as("");
            assert!(response.batch_item_failures.is_empty(), "{job:?} failed");
        }
        let state = w.deps.channels.channel_state(&channel).await.unwrap();
        assert_eq!(state.memory.summary, "a deploy stalled on a lock", "the summary was stored");
        assert_eq!(w.deps.facts.facts(&channel).await.unwrap().len(), 1, "the reflection's fact was stored");
        w.assert_the_template_allows_what_was_done();
    }

    /// What a Lambda writes to its log: the decision records (each with its EMF line),
    /// and the tracing lines, into one buffer.
    #[derive(Clone, Default)]
    struct LambdaLog(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for LambdaLog {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl LambdaLog {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    /// Messages with a known phrase through the ingress and every worker's Lambda handler
    /// (the judge's verdict, the answer, the summary, the reflection's fact and note carry
    /// it too): the Lambdas' log keeps ids and decisions, never the words. With
    /// `LogText::Kept` (LOG_MESSAGE_TEXT=true) the same run logs them.
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn the_lambdas_logs_keep_no_words() {
        let (dynamo, moto) = emulators("the_lambdas_logs_keep_no_words");
        const PHRASE: &str = "periwinkle-otter";
        let script = format!(
            r#"{{"role": "judge", "reply": {{"should_respond": true, "reason": "they ask about {PHRASE}", "confidence": 0.9, "conversation_state": "active"}}, "repeat": true}}
{{"role": "generate", "reply": "The {PHRASE} runbook is on the wiki.", "repeat": true}}
{{"role": "summarize", "match": "workspace", "reply": {{"history": "{PHRASE} history", "recent_events": "{PHRASE} events"}}, "repeat": true}}
{{"role": "summarize", "reply": {{"summary": "talked about {PHRASE}", "history": "{PHRASE}", "mood": "{PHRASE}", "topic_keywords": ["{PHRASE}"], "active_users": ["U0", "U1"]}}, "repeat": true}}
{{"role": "reflect", "reply": {{"facts": [{{"content": "{PHRASE} owns the deploys", "keywords": ["{PHRASE}"], "source_users": ["U0"], "confidence": 0.8, "shareable": true}}], "profiles": [{{"user": "U1", "tags": ["{PHRASE}"], "summary": "asks about {PHRASE}"}}]}}, "repeat": true}}"#
        );
        for text in [kuuki::domain::LogText::Withheld, kuuki::domain::LogText::Kept] {
            let log = LambdaLog::default();
            let subscriber = tracing_subscriber::fmt().json().with_writer({
                let log = log.clone();
                move || log.clone()
            });
            let _tracing = tracing::subscriber::set_default(subscriber.finish());
            let llm: Arc<dyn kuuki::ports::Llm> = Arc::new(kuuki::adapters::llm::ScriptedLlm::parse(&script).unwrap());
            let records = Arc::new(kuuki::adapters::aws::emf::EmfLog::new(log.clone(), "kuuki-fn", text));
            let settings = [("JUDGE_MIN_WAIT_SECONDS", "0"), ("REFLECTION_MIN_MESSAGES", "3")];
            let w = world_logged(&dynamo, &moto, &settings, Some(llm), records).await;
            for (i, line) in [
                format!("who owns {PHRASE}?"),
                format!("I think {PHRASE} does"),
                format!("<@UKUUKI> is {PHRASE} on call?"),
            ]
            .iter()
            .enumerate()
            {
                assert_eq!(w.deliver_text(line, i as u32).await, 200);
            }
            let (failed, _) = w.drain(6).await;
            assert_eq!(failed, 0);
            // A question to the room after the answer: judged by the rules.
            assert_eq!(w.deliver_text(&format!("does {PHRASE} page anyone?"), 3).await, 200);
            assert_eq!(w.drain(6).await.0, 0);
            let channel = ChannelId("C0COST".into());
            let newest = w.deps.messages.channel_window(&channel, 1).await.unwrap().messages[0].ts.clone();
            for (kind, job) in [
                (JobKind::Summarize, Job::Summarize { channel: channel.clone(), ts: newest.clone() }),
                (JobKind::Reflect, Job::Reflect { channel: channel.clone(), ts: newest.clone() }),
            ] {
                assert_eq!(w.run_as_worker(kind, job).await, 0);
            }
            assert!(
                w.slack_calls("chat.postMessage").await.iter().any(|p| p["text"].as_str().unwrap().contains(PHRASE)),
                "kuuki answered with the phrase: {}",
                log.text()
            );
            let logged = log.text();
            for kind in ["message", "judge", "respond", "summary", "reflect"] {
                assert!(logged.contains(&format!("\"kind\":\"{kind}\"")), "no {kind} record in:\n{logged}");
            }
            match text {
                kuuki::domain::LogText::Withheld => assert!(!logged.contains(PHRASE), "words in the logs:\n{logged}"),
                kuuki::domain::LogText::Kept => assert!(logged.contains(PHRASE), "LOG_MESSAGE_TEXT keeps the words"),
            }
        }
    }

    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn a_mention_delivered_three_times_and_redelivered_by_sqs_posts_once() {
        let (dynamo, moto) = emulators("a_mention_delivered_three_times_and_redelivered_by_sqs_posts_once");
        let w = world(&dynamo, &moto, &[]).await;
        let ts = now_ts(7);
        let mention = message("C0E2E", "UALICE", "<@UKUUKI> 今日のリリースは？", &ts);
        let mut app_mention = mention.clone();
        app_mention["type"] = json!("app_mention");
        w.counter.reset();
        assert_eq!(w.deliver(mention.clone(), false).await, 200);
        let first_delivery = w.counter.calls();
        assert_eq!(w.deliver(app_mention, false).await, 200);
        assert_eq!(w.deliver(mention, true).await, 200);
        assert_eq!(
            first_delivery.values().sum::<u64>(),
            3,
            "one conditional put, one SQS send and one counter update per new message: {first_delivery:?}"
        );

        // The respond queue holds the job (twice: the retry re-queued it).
        let event = w.receive(&w.urls.respond).await;
        assert!(!event.records.is_empty());
        // The batch's records run at once: one answers; a copy that meets its claim
        // still held fails for a retry instead of being dropped.
        let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event.clone(), None).await;
        assert!(response.batch_item_failures.len() < event.records.len(), "one copy answered");
        // SQS delivers the same records again (a visibility timeout ran out): every copy
        // finds the answer done.
        let again = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, None).await;
        assert!(again.batch_item_failures.is_empty());
        let posts = w.slack_calls("chat.postMessage").await;
        assert_eq!(posts.len(), 1, "{posts:?}");
        assert_eq!(posts[0]["channel"], "C0E2E");
    }

    /// A job that fails because Slack is busy comes back after the first redelivery
    /// delay (30 s), not at the queue's visibility timeout (24 minutes): the worker
    /// Lambda tells SQS, and its policy lets it.
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn a_job_that_failed_on_a_busy_slack_comes_back_after_the_redelivery_delay() {
        let (dynamo, moto) = emulators("a_job_that_failed_on_a_busy_slack_comes_back_after_the_redelivery_delay");
        let w = world(&dynamo, &moto, &[]).await;
        // A 429 asking for longer than a chat call waits (15 s, over CHAT_TIMEOUT_SECONDS):
        // short ones are waited out within the delivery; this one fails it.
        wiremock::Mock::given(wiremock::matchers::path("/chat.postMessage"))
            .respond_with(wiremock::ResponseTemplate::new(429).insert_header("retry-after", "15"))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&w.slack_api)
            .await;
        // The next delivery looks for a post an earlier one may have made: none.
        wiremock::Mock::given(wiremock::matchers::path("/conversations.history"))
            .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(json!({"ok": true, "messages": []})))
            .mount(&w.slack_api)
            .await;
        assert_eq!(w.deliver(message("C0BUSY", "UALICE", "<@UKUUKI> hi", &now_ts(4)), false).await, 200);
        let visibility = w.deps.budget.visibility_timeout().as_secs() as i32;
        let event = w.receive_for(&w.urls.respond, visibility).await;
        assert_eq!(event.records.len(), 1);
        w.counter.acting_as("RespondFunction");
        let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, None).await;
        w.counter.acting_as("");
        assert_eq!(response.batch_item_failures.len(), 1, "Slack was busy: the job failed");
        // Back after the first redelivery delay (30 s; Slack's 15 s is sooner, and a limit
        // that outlasted a wait inside the call would spend the deliveries), not after
        // the visibility timeout.
        let failed_at = std::time::Instant::now();
        let again = loop {
            let event = w.receive_for(&w.urls.respond, visibility).await;
            if !event.records.is_empty() {
                break event;
            }
            assert!(failed_at.elapsed().as_secs() < 45, "not back within 45 s");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        };
        let back_after = failed_at.elapsed().as_secs_f64();
        assert!((28.0..45.0).contains(&back_after), "back after {back_after:.1} s");
        assert_eq!(again.records.len(), 1);
        assert_eq!(again.records[0].attributes.get("ApproximateReceiveCount").map(String::as_str), Some("2"));
        w.counter.acting_as("RespondFunction");
        let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, again, None).await;
        w.counter.acting_as("");
        assert!(response.batch_item_failures.is_empty(), "the second delivery answered");
        let posts = w.slack_calls("chat.postMessage").await;
        assert_eq!(posts.len(), 2, "one refused, one posted: {posts:?}");
        w.assert_the_template_allows_what_was_done();
    }

    /// An invocation with little time left (Lambda's deadline, from its context) stops
    /// a job that overruns early enough to settle the batch and answer, and reports it.
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn a_job_is_stopped_within_the_time_the_invocation_has_left() {
        let (dynamo, moto) = emulators("a_job_is_stopped_within_the_time_the_invocation_has_left");
        let w = world_with(&dynamo, &moto, &[], Some(Arc::new(kuuki_e2e::NeverAnswers))).await;
        assert_eq!(w.deliver(message("C0LATE", "UALICE", "<@UKUUKI> hi", &now_ts(5)), false).await, 200);
        let event = w.receive(&w.urls.respond).await;
        assert_eq!(event.records.len(), 1);
        // 10 s left: the settle share (7.5 s) and a second for the answer leave 1.5 s.
        let started = std::time::Instant::now();
        let left = Some(std::time::Duration::from_secs(10));
        let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, left).await;
        let took = started.elapsed();
        assert_eq!(response.batch_item_failures.len(), 1, "the stopped job is reported");
        assert!(took >= std::time::Duration::from_millis(1500), "it ran until then: {took:?}");
        assert!(took < std::time::Duration::from_secs(9), "and no longer: {took:?}");
    }

    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn an_ambient_message_goes_through_the_judge_queue_to_a_reaction() {
        let (dynamo, moto) = emulators("an_ambient_message_goes_through_the_judge_queue_to_a_reaction");
        let w = world(&dynamo, &moto, &[("JUDGE_MIN_WAIT_SECONDS", "0"), ("JUDGE_SCORE_THRESHOLD", "0")]).await;
        let ts = now_ts(9);
        assert_eq!(w.deliver(message("C0AMB", "UBOB", "deploy done 🎉", &ts), false).await, 200);
        let judged = handle_sqs_event(&w.deps, &w.queue, JobKind::Judge, w.receive(&w.urls.judge).await, None).await;
        assert!(judged.batch_item_failures.is_empty());
        let answered =
            handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, w.receive(&w.urls.respond).await, None).await;
        assert!(answered.batch_item_failures.is_empty());
        assert_eq!(
            w.slack_calls("reactions.add").await,
            vec![json!({"channel": "C0AMB", "timestamp": ts, "name": "tada"})]
        );
    }

    /// A judgment that waits past SQS's 15 minutes is handed to EventBridge Scheduler by
    /// the ingress: the schedule is made, and the ingress's policy allows it (with the
    /// PassRole it takes), so the IAM check covers the scheduler too.
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn a_long_judgment_wait_is_scheduled_within_the_ingress_policy() {
        let (dynamo, moto) = emulators("a_long_judgment_wait_is_scheduled_within_the_ingress_policy");
        let group = unique("kuuki");
        let scheduler = aws_sdk_scheduler::Client::new(&sdk(&moto).await);
        scheduler.create_schedule_group().name(&group).send().await.expect("a schedule group");
        let settings = [
            ("JUDGE_MIN_WAIT_SECONDS", "1200"),
            ("SCHEDULE_GROUP", group.as_str()),
            ("SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/kuuki-scheduler"),
            ("JUDGE_QUEUE_ARN", "arn:aws:sqs:us-east-1:123456789012:kuuki-judge"),
        ];
        let w = world(&dynamo, &moto, &settings).await;
        w.counter.reset();
        assert_eq!(w.deliver(message("C0LATE", "UBOB", "anyone around later?", &now_ts(11)), false).await, 200);
        assert_eq!(w.counter.calls().get("scheduler.CreateSchedule"), Some(&1), "{:?}", w.counter.calls());
        let listed = scheduler.list_schedules().group_name(&group).send().await.unwrap();
        assert_eq!(listed.schedules().len(), 1, "the judgment waits in the scheduler");
        w.assert_the_template_allows_what_was_done();
    }

    /// An uninstall on DynamoDB: the ingress marks Slack's access gone (the event's time
    /// is long past here, so the purge is queued at once, on the forget queue), a Slack
    /// channel's state read carries the mark, and the reflect function's purge empties
    /// the Slack channels while a Discord channel keeps its message: every call within
    /// the template's policies.
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn an_uninstalled_workspace_is_purged_from_the_tables_within_the_policies() {
        use kuuki::domain::{ChannelId, Timestamp, Ts};
        let (dynamo, moto) = emulators("an_uninstalled_workspace_is_purged_from_the_tables_within_the_policies");
        let w = world(&dynamo, &moto, &[]).await;
        let (slack, discord) = (ChannelId("C0GONE".into()), ChannelId("41771983423143940".into()));
        for n in 0..3 {
            assert_eq!(w.deliver(message("C0GONE", "UALICE", "my cat is Miso", &now_ts(n + 40)), false).await, 200);
        }
        let at = w.deps.clock.now();
        let theirs = kuuki::domain::Message {
            channel: discord.clone(),
            ts: Ts::new("1301213485260619790"),
            thread_root: None,
            user: UserId("80351110224678912".into()),
            user_name: "bob".into(),
            text: "my dog is Pochi".into(),
            author: kuuki::domain::Author::Human,
            replies_to_bot: false,
            in_dm: false,
            private_channel: false,
            at,
        };
        w.deps.messages.put_message(&Arc::new(theirs)).await.unwrap();
        w.deps.channels.set_muted(&slack, Some(Timestamp(at.0 + 3_600_000_000))).await.unwrap();
        for _ in 0..2 {
            assert_eq!(w.deliver(json!({"type": "app_uninstalled"}), true).await, 200);
        }
        let gone = w.deps.channels.slack_gone().await.unwrap().expect("marked");
        assert_eq!(w.deps.channels.channel_state(&slack).await.unwrap().slack_gone, Some(gone));
        let event = w.receive(&w.urls.forget).await;
        assert_eq!(event.records.len(), 1, "one purge on the forget queue");
        w.counter.acting_as("ReflectFunction");
        for _ in 0..2 {
            let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Forget, event.clone(), None).await;
            assert!(response.batch_item_failures.is_empty(), "the purge failed");
        }
        w.counter.acting_as("");
        w.assert_the_template_allows_what_was_done();
        assert!(w.deps.messages.messages_after(&slack, None, 10).await.unwrap().is_empty());
        assert!(!w.deps.channels.state_channels().await.unwrap().contains(&slack));
        assert_eq!(w.deps.facts.profile(&UserId("UALICE".into())).await.unwrap(), None);
        assert_eq!(w.deps.messages.message_channels().await.unwrap(), std::slice::from_ref(&discord));
        assert_eq!(w.deps.messages.messages_after(&discord, None, 10).await.unwrap().len(), 1, "Discord's stays");
    }

    /// `/kuuki forget-me` on DynamoDB: the person's messages, profile, notes and the
    /// facts only they taught are gone from the tables; a shared fact stays without them.
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn forget_me_empties_the_tables_of_a_person() {
        use kuuki::domain::{ChannelId, Fact, Timestamp, Ts};
        use kuuki::ingest::command::{SlashCommand, run_command};
        let (dynamo, moto) = emulators("forget_me_empties_the_tables_of_a_person");
        let w = world(&dynamo, &moto, &[]).await;
        let channel = ChannelId("C0FGT".into());
        let (alice, bob) = (UserId("UALICE".into()), UserId("UBOB".into()));
        for (n, (user, text)) in
            [("UALICE", "my cat is Miso"), ("UBOB", "deploys on Monday"), ("UALICE", "curry!")].into_iter().enumerate()
        {
            assert_eq!(w.deliver(message("C0FGT", user, text, &now_ts(n as u32 + 20)), false).await, 200);
        }
        // Older ones of hers, more than one batch of deletes holds (25).
        for i in 0..28 {
            let at = Timestamp(w.deps.clock.now().0 - 3_600_000_000 + i * 1_000_000);
            let older = kuuki::domain::Message {
                channel: channel.clone(),
                ts: Ts::from_timestamp(at),
                thread_root: None,
                user: alice.clone(),
                user_name: "alice".into(),
                text: format!("an older thought, number {i}"),
                author: kuuki::domain::Author::Human,
                replies_to_bot: false,
                in_dm: false,
                private_channel: false,
                at,
            };
            w.deps.messages.put_message(&Arc::new(older)).await.unwrap();
        }
        let now = Timestamp::from_secs_f64(1.0e9);
        let fact = |id: &str, content: &str, sources: &[&str]| Fact {
            id: id.into(),
            channel: channel.clone(),
            content: content.into(),
            keywords: vec!["k".into()],
            source_users: sources.iter().map(|s| s.to_string()).collect(),
            confidence: 0.9,
            shareable: false,
            created_at: now,
            confirmed_at: now,
            strength: 1,
            source_messages: vec![Ts::new("1.000001")],
            embedding: None,
        };
        w.deps.facts.put_fact(&fact("f1", "her cat is Miso", &["UALICE"])).await.unwrap();
        w.deps.facts.put_fact(&fact("f2", "the team deploys on Mondays", &["UALICE", "UBOB"])).await.unwrap();
        w.deps.facts.note_reflection(&channel, &alice, &["cats".into()], "", now).await.unwrap();
        assert_eq!(w.deps.facts.profile(&alice).await.unwrap().map(|p| p.interactions), Some(2));
        // The workspace memory where a version before 2026-11-27 kept it (one item in the
        // channels table), naming her: the forget reads it, and its wipe deletes it.
        let client = aws_sdk_dynamodb::Client::new(&sdk(&dynamo).await);
        let old_key = aws_sdk_dynamodb::types::AttributeValue::S("#workspace".into());
        let old =
            kuuki::domain::WorkspaceMemory { history: "UALICE has a cat named Miso".into(), ..Default::default() };
        client
            .put_item()
            .table_name(&w.tables.channels)
            .item("channel", old_key.clone())
            .item("workspace", aws_sdk_dynamodb::types::AttributeValue::S(serde_json::to_string(&old).unwrap()))
            .send()
            .await
            .unwrap();
        assert_eq!(w.deps.channels.workspace_memory().await.unwrap().history, old.history);

        // Slack's way back for the answer: the stand-in's origin (hooks.slack.com in
        // production).
        let response_path = "/commands/T0TEAM/1/forget";
        wiremock::Mock::given(wiremock::matchers::path(response_path))
            .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("ok"))
            .mount(&w.slack_api)
            .await;
        let command = SlashCommand {
            command: "/kuuki".into(),
            text: "forget-me".into(),
            channel_id: channel.0.to_string(),
            user_id: alice.0.to_string(),
            may_manage_channel: None,
            response_url: Some(format!("{}{response_path}", w.slack_api.uri())),
            discord_reply: None,
            server: None,
        };
        // Slash commands are answered by the ingress function: forgetting is queued.
        w.counter.acting_as("IngressFunction");
        let ack = run_command(&w.deps, &command).await.unwrap();
        // A manager's mute is announced in the channel once (a ledger claim).
        let mute = SlashCommand { text: "mute 30m".into(), may_manage_channel: Some(true), ..command.clone() };
        let muted = run_command(&w.deps, &mute).await.unwrap();
        w.counter.acting_as("");
        assert!(ack.starts_with("kuuki is forgetting you"), "{ack}");
        assert_eq!(w.deps.messages.messages_after(&channel, None, 100).await.unwrap().len(), 31, "not yet");
        // The reflect worker carries it out from the forget queue (never behind
        // reflections) and answers through the response_url; the same delivery again
        // (SQS redelivers) neither forgets more nor answers twice.
        assert!(w.receive(&w.urls.reflect).await.records.is_empty(), "nothing on the reflect queue");
        let event = w.receive(&w.urls.forget).await;
        assert_eq!(event.records.len(), 1, "one forget job on the forget queue");
        let kind = kuuki_lambda::event_kind(&w.queue, &[JobKind::Reflect, JobKind::Forget], &event);
        assert_eq!(kind, JobKind::Forget, "the reflect worker knows the event's queue by its source");
        w.counter.acting_as("ReflectFunction");
        for _ in 0..2 {
            let response = handle_sqs_event(&w.deps, &w.queue, kind, event.clone(), None).await;
            assert!(response.batch_item_failures.is_empty(), "the forget job failed");
        }
        w.counter.acting_as("");
        w.assert_the_template_allows_what_was_done();
        assert!(w.deps.channels.channel_state(&channel).await.unwrap().muted_until.is_some(), "{muted}");
        let answers = w.slack_calls(response_path.trim_start_matches('/')).await;
        assert_eq!(answers.len(), 1, "answered once: {answers:?}");
        assert_eq!(answers[0]["response_type"], "ephemeral");
        let answer = answers[0]["text"].as_str().unwrap();
        assert!(
            answer.starts_with("Forgotten you: 30 stored message(s), 1 fact(s) removed, 1 fact(s) kept"),
            "{answer}"
        );
        let left = w.deps.messages.messages_after(&channel, None, 100).await.unwrap();
        assert_eq!(left.iter().map(|m| m.user.as_str()).collect::<Vec<_>>(), ["UBOB"]);
        let facts = w.deps.facts.facts(&channel).await.unwrap();
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].source_users, vec!["UBOB"]);
        assert_eq!(w.deps.facts.user_note(&channel, &alice).await.unwrap(), None);
        assert_eq!(w.deps.facts.profile(&alice).await.unwrap(), None);
        assert!(w.deps.facts.profile(&bob).await.unwrap().is_some(), "bob is still known");
        let old_item =
            client.get_item().table_name(&w.tables.channels).key("channel", old_key).consistent_read(true).send();
        assert_eq!(old_item.await.unwrap().item, None, "the old workspace item naming her is deleted");
        assert_eq!(w.deps.channels.workspace_memory().await.unwrap(), kuuki::domain::WorkspaceMemory::default());
        // Asked again (without a way back, so at once): nothing left, nothing changes.
        let at_once = SlashCommand { response_url: None, ..command.clone() };
        let again = run_command(&w.deps, &at_once).await.unwrap();
        assert_eq!(again, "kuuki had nothing stored about you.");
        assert_eq!(w.deps.facts.facts(&channel).await.unwrap().len(), 1);
    }

    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn a_bad_record_fails_alone() {
        let (dynamo, moto) = emulators("a_bad_record_fails_alone");
        let w = world(&dynamo, &moto, &[]).await;
        assert_eq!(w.deliver(message("C0BAD", "UALICE", "<@UKUUKI> hi", &now_ts(3)), false).await, 200);
        let mut event = w.receive(&w.urls.respond).await;
        let mut bad = SqsMessage::default();
        bad.message_id = Some("not-a-job".into());
        bad.body = Some("{\"hello\": 1}".into());
        event.records.push(bad);
        let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, None).await;
        let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
        assert_eq!(failed, vec!["not-a-job".to_string()]);
        assert_eq!(w.slack_calls("chat.postMessage").await.len(), 1, "the good record was answered");
    }

    /// An event from a queue the worker does not read (a mapping pointed at the wrong
    /// queue) is taken as the worker's first kind, and its jobs, of another worker's
    /// kind, fail without running (on to that queue's dead letters): a reflect worker
    /// given the respond queue's event posts nothing.
    #[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
    #[tokio::test]
    async fn an_event_from_another_workers_queue_runs_nothing() {
        let (dynamo, moto) = emulators("an_event_from_another_workers_queue_runs_nothing");
        let w = world(&dynamo, &moto, &[]).await;
        assert_eq!(w.deliver(message("C0ELSE", "UALICE", "<@UKUUKI> hi", &now_ts(3)), false).await, 200);
        let event = w.receive(&w.urls.respond).await;
        assert_eq!(event.records.len(), 1, "the mention queued its answer");
        let kind = kuuki_lambda::event_kind(&w.queue, &[JobKind::Reflect, JobKind::Forget], &event);
        assert_eq!(kind, JobKind::Reflect, "the respond queue is none of the reflect worker's");
        let response = handle_sqs_event(&w.deps, &w.queue, kind, event.clone(), None).await;
        assert_eq!(response.batch_item_failures.len(), 1, "the respond job failed there");
        assert!(w.slack_calls("chat.postMessage").await.is_empty(), "nothing was posted by the wrong worker");
        // Its own worker answers it.
        let kind = kuuki_lambda::event_kind(&w.queue, &[JobKind::Respond], &event);
        let response = handle_sqs_event(&w.deps, &w.queue, kind, event, None).await;
        assert!(response.batch_item_failures.is_empty());
        assert_eq!(w.slack_calls("chat.postMessage").await.len(), 1);
    }
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn secrets_given_as_arns_are_read_once_from_secrets_manager() {
    let (_, moto) = emulators("secrets_given_as_arns_are_read_once_from_secrets_manager");
    let client = aws_sdk_secretsmanager::Client::new(&sdk(&moto).await);
    let created = client
        .create_secret()
        .name(unique("kuuki-slack-token"))
        .secret_string("xoxb-from-secrets-manager\n")
        .send()
        .await
        .unwrap();
    let arn = created.arn.unwrap();
    let mut vars: std::collections::HashMap<String, String> = [
        ("SLACK_BOT_TOKEN_ARN".to_string(), arn.clone()),
        ("SLACK_SIGNING_SECRET".to_string(), "set directly".to_string()),
        ("SLACK_SIGNING_SECRET_ARN".to_string(), arn.clone()),
    ]
    .into();
    kuuki::adapters::aws::secrets::resolve(&client, &mut vars).await.unwrap();
    assert_eq!(vars["SLACK_BOT_TOKEN"], "xoxb-from-secrets-manager");
    assert_eq!(vars["SLACK_SIGNING_SECRET"], "set directly", "a value set directly wins");
    let mut missing: std::collections::HashMap<String, String> =
        [("OPENAI_API_KEY_ARN".to_string(), format!("{arn}-gone"))].into();
    let error = kuuki::adapters::aws::secrets::resolve(&client, &mut missing).await.unwrap_err();
    assert!(error.contains("OPENAI_API_KEY_ARN"), "{error}");
    assert!(!error.contains("xoxb-from"), "no secret value in errors");
}

/// What one cost scenario may cost: its name in the output, whether a (scripted) model
/// is configured, where the conversation is held, the AWS calls the workers may make per message by operation (an operation not
/// listed fails the test), the calls per message of the whole pipeline, and the dollars
/// per 1,000 messages.
#[derive(Clone, Copy)]
struct Costing {
    what: &'static str,
    with_llm: bool,
    place: Place,
    workers: &'static [(&'static str, f64)],
    /// Per message, the summaries' and reflections' own calls (memory work).
    memory: &'static [(&'static str, f64)],
    calls: f64,
    dollars: f64,
}

/// The goal: AWS at most $0.005 per 1,000 messages, with or without a model.
const DOLLARS_PER_THOUSAND: f64 = 0.005;

/// Rules only: today's figures rounded up (lower them as the pipeline gets cheaper; the
/// workers send nothing here: no judgment responds). 5.0 calls a message today; 7.5
/// before one channel read served each job, 5.1 before interventions were written
/// without a read.
const RULES_ONLY: Costing = Costing {
    what: "rules only",
    with_llm: false,
    place: Place::TopLevel,
    workers: &[
        // The channel's state: its item, its judgment item and its answers item at once.
        ("dynamodb.BatchGetItem", 0.2),
        ("dynamodb.PutItem", 0.5),
        ("dynamodb.Query", 1.0),
        ("dynamodb.UpdateItem", 0.5),
    ],
    memory: &[],
    calls: 5.0,
    dollars: DOLLARS_PER_THOUSAND,
};

/// With a model the LLM judge runs, and each judgment also checks whether a summary or
/// a reflection is due (counted in the channel read the judgment makes anyway). The
/// goal of at most six AWS calls a message: ingress and the workers 5.7 today, the
/// lull's reflection counted (one a lull, not one a judgment; 9.2 before one channel
/// read served each job, 6.0 before interventions were written without a read, 5.8
/// before an answer read the person's profile and note together). With
/// the memory work (one summary and one reflection for these ten messages, 1.8 calls a
/// message, 2.0 before the facts were read once and the note about a person written
/// without reading it) 7.5 calls. AWS $0.00702 a thousand
/// messages with the memory work ($0.00773 before each channel's line in the workspace
/// memory had an item of its own), $0.00522
/// without, Lambda's wait for the model (one generation, a reflection and a summary)
/// counted: over the goal (docs/aws.md, cost).
const WITH_AN_LLM: Costing = Costing {
    what: "with an LLM",
    with_llm: true,
    place: Place::TopLevel,
    workers: &[
        // The channel's state; an answer's profile and note of the person (together).
        ("dynamodb.BatchGetItem", 0.3),
        ("dynamodb.PutItem", 0.5),
        ("dynamodb.Query", 1.5),
        ("dynamodb.UpdateItem", 1.0),
        // The memory triggers queue a summary and a reflection for later.
        ("sqs.SendMessage", 0.5),
    ],
    memory: MEMORY_WORK,
    calls: 7.5,
    dollars: 0.0071,
};

/// The same conversation in a busy channel whose talk is in threads, rules only:
/// today's figures, rounded up. Over the goal (docs/aws.md, cost): messages in four
/// conversations do not supersede each other's judgments as a burst in one does (more
/// channel-state reads and writes), and the channel's newest 50 messages reach back
/// less than the context's 30 minutes, so a judging job reads the page before them
/// once (a Query) where it read each thread, the top level and a thread's opener on
/// its own before (7.2 calls a message then, with three GetItems: none allowed now).
/// 6.6 calls and $0.00558-0.00563 today (the higher since the mature channel's
/// reflection watermark is in its judgment item, which each state read then finds).
const RULES_ONLY_IN_BUSY_THREADS: Costing = Costing {
    what: "rules only, busy threads",
    with_llm: false,
    place: Place::BusyThreads,
    workers: &[
        ("dynamodb.BatchGetItem", 0.5),
        ("dynamodb.PutItem", 0.6),
        ("dynamodb.Query", 1.4),
        ("dynamodb.UpdateItem", 1.1),
    ],
    memory: &[],
    calls: 6.6,
    dollars: 0.0057,
};

/// The summary's and the reflection's own calls, per message of the cost conversation
/// (ten messages: one of each). The summary: the channel's state, its messages since
/// the last summary, the claim and its completion, the new memory (read first), the
/// channel's line in the workspace memory (an item of its own: 1 write unit, 12 when
/// every channel's line shared one item, before 2026-11-27), the workspace memory
/// without the lines (a GetItem; refreshed only once in four summary periods, not here). The reflection: the newest messages, the state, the messages
/// since its watermark, the claim and its completion, the facts (once: each write finds
/// its fact as read, or merges again; read again after the model's answer before
/// 2026-11-27), whether a speaker asked to be forgotten meanwhile (all at once),
/// the note about the person (added to without reading it, since 2026-11-27), the new
/// fact, the watermark (in the small judgment item).
/// 2.3 calls before the forget marks were read at once and the watermark written
/// without reading the channel's item first.
const MEMORY_WORK: &[(&str, f64)] = &[
    ("dynamodb.BatchGetItem", 0.3),
    ("dynamodb.GetItem", 0.2),
    ("dynamodb.PutItem", 0.4),
    ("dynamodb.Query", 0.4),
    ("dynamodb.UpdateItem", 0.5),
];

/// The busy threads with a model: also the lull's reflection (one queued by the
/// judgments, which runs once, finds newer messages and queues itself again), and the
/// memory marks. The marks vary by a call or two from run to run (the jobs of one batch
/// run together, so two may both try a summary's mark the state did not show yet, and
/// both queue it): 7.9 to 8.2 calls and $0.0063-0.0067 in 8 runs without the memory
/// work, 9.6 to 10.2 and $0.0085-0.0091 with it and with Lambda's wait for the model
/// (5 runs; $0.0092-0.0098 before each channel's line had an item of its own);
/// ceilings a mark and a job above that. Since an answer reads the person's profile
/// and note in one BatchGetItem (not two GetItems): 7.8 and 9.6 calls, $0.00858 in
/// the first run; the BatchGetItem ceiling is the state reads and that one, as counted
/// (they do not vary from run to run). A fresh-clone CI run then drew three summaries
/// (the N-messages mark overtaking an N-minutes one in the same batch, each queueing
/// one): 10.4 calls and $0.00947, the judges' sends and updates and the summaries'
/// state reads and queries one more each; the ceilings allow one more summary than
/// that. 8.6 to 8.9 calls and $0.0069-0.0073 with a reflection queued by each
/// judgment, 9.2-9.5 calls before the page before the window (those jobs not counted).
const WITH_AN_LLM_IN_BUSY_THREADS: Costing = Costing {
    what: "with an LLM, busy threads",
    with_llm: true,
    place: Place::BusyThreads,
    workers: &[
        ("dynamodb.BatchGetItem", 0.6),
        ("dynamodb.PutItem", 0.6),
        // The workspace memory is a Query (of its own items) since 2026-11-27, not a GetItem.
        ("dynamodb.Query", 1.8),
        ("dynamodb.UpdateItem", 1.8),
        ("sqs.SendMessage", 0.7),
    ],
    // As in the one conversation, and a second or third summary when judgments queued
    // more than one: each reads the state and its messages, finds nothing new, and
    // writes nothing (no mark is left).
    memory: &[
        ("dynamodb.BatchGetItem", 0.6),
        ("dynamodb.GetItem", 0.2),
        ("dynamodb.PutItem", 0.4),
        ("dynamodb.Query", 0.7),
        ("dynamodb.UpdateItem", 0.5),
    ],
    calls: 10.8,
    dollars: 0.0097,
};

/// AWS calls a conversation costs, by service and operation, for docs/aws.md's cost
/// figure: ten messages (one mention), every job through SQS into the workers.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn aws_calls_per_message_through_the_whole_pipeline() {
    measure_costs("aws_calls_per_message_through_the_whole_pipeline", &RULES_ONLY).await;
}

/// The same conversation with a model configured (its answers scripted): the figure the
/// docs/aws.md's cost table gives for a bot with an LLM.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn aws_calls_per_message_with_an_llm() {
    measure_costs("aws_calls_per_message_with_an_llm", &WITH_AN_LLM).await;
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn aws_calls_per_message_in_busy_threads() {
    measure_costs("aws_calls_per_message_in_busy_threads", &RULES_ONLY_IN_BUSY_THREADS).await;
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn aws_calls_per_message_in_busy_threads_with_an_llm() {
    measure_costs("aws_calls_per_message_in_busy_threads_with_an_llm", &WITH_AN_LLM_IN_BUSY_THREADS).await;
}

/// Runs the cost scenario `costing` on the emulators: see [`assert_calls_within`].
async fn measure_costs(test: &str, costing: &Costing) {
    let (dynamo, moto) = emulators(test);
    let w = if costing.with_llm {
        end_to_end::world_for_costs_with_llm(&dynamo, &moto).await
    } else {
        end_to_end::world_for_costs(&dynamo, &moto).await
    };
    assert_calls_within(&w, costing).await;
}

/// us-east-1 list prices (on-demand DynamoDB since its November 2024 cut; Lambda on
/// arm64) and docs/aws.md's assumptions about what the emulators cannot measure.
mod prices {
    pub const DYNAMODB_WRITE_UNIT: f64 = 0.625e-6;
    pub const DYNAMODB_READ_UNIT: f64 = 0.125e-6;
    pub const SQS_REQUEST: f64 = 0.40e-6;
    pub const LAMBDA_REQUEST: f64 = 0.20e-6;
    pub const LAMBDA_GB_SECOND: f64 = 0.0000133334;
    /// The template's `MemorySize` for every function.
    pub const LAMBDA_GB: f64 = 0.25;
    /// Assumed wall time of one invocation's own work (a few AWS calls).
    pub const LAMBDA_SECONDS: f64 = 0.05;
    /// Assumed wait for one model call, billed by Lambda as the worker waits (a
    /// Flash-Lite-class model's answer of a few hundred tokens; not measured here: the
    /// test's model is a script).
    pub const MODEL_CALL_SECONDS: f64 = 1.0;
    /// Lambda's queue poller receives and deletes each job: counted as a batch of one
    /// (two requests a job), as at low traffic.
    pub const SQS_REQUESTS_PER_JOB: f64 = 2.0;
}

/// Dollars per 1,000 messages, by part, from what one run measured.
#[derive(Debug)]
struct Cost {
    dynamodb_writes: f64,
    dynamodb_reads: f64,
    sqs: f64,
    lambda: f64,
}

impl Cost {
    fn of(
        calls: &std::collections::BTreeMap<String, u64>,
        units: kuuki::adapters::aws::calls::CapacityUnits,
        messages: usize,
        (jobs, model_calls): (usize, usize),
    ) -> Self {
        use prices::*;
        let per_thousand = 1000.0 / messages as f64;
        let sends: u64 = calls.iter().filter(|(op, _)| op.starts_with("sqs.")).map(|(_, n)| n).sum();
        // Each message is one ingress invocation; each job one worker invocation.
        let invocations = (messages + jobs) as f64;
        Cost {
            dynamodb_writes: units.write * DYNAMODB_WRITE_UNIT * per_thousand,
            dynamodb_reads: units.read * DYNAMODB_READ_UNIT * per_thousand,
            sqs: (sends as f64 + jobs as f64 * SQS_REQUESTS_PER_JOB) * SQS_REQUEST * per_thousand,
            lambda: (invocations * (LAMBDA_REQUEST + LAMBDA_GB * LAMBDA_SECONDS * LAMBDA_GB_SECOND)
                + model_calls as f64 * LAMBDA_GB * MODEL_CALL_SECONDS * LAMBDA_GB_SECOND)
                * per_thousand,
        }
    }

    fn total(&self) -> f64 {
        self.dynamodb_writes + self.dynamodb_reads + self.sqs + self.lambda
    }
}

/// Where the cost conversation is held.
#[derive(Clone, Copy)]
enum Place {
    /// At the top level of a channel whose last 50 messages are two hours old.
    TopLevel,
    /// In a busy channel whose talk is in threads ([`end_to_end::World::busy_threads`]):
    /// every other message a reply.
    BusyThreads,
}

/// A summary's twin (two judgments of one batch queued one each) finds nothing new
/// once the first has run, and writes nothing: no read and rewrite of the channel's
/// large item to clear a mark that is not there.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_summarys_twin_finds_nothing_new_and_writes_nothing() {
    let (dynamo, moto) = emulators("a_summarys_twin_finds_nothing_new_and_writes_nothing");
    let w = end_to_end::world_for_costs_with_llm(&dynamo, &moto).await;
    w.mature_channel().await;
    for (i, text) in ["おはよう", "deploy どう？", "見てます"].iter().enumerate() {
        assert_eq!(w.deliver_text(text, i as u32).await, 200);
    }
    let channel = ChannelId("C0COST".into());
    let job = Job::Summarize { channel: channel.clone(), ts: Ts::new("1.000000") };
    let before = w.deps.channels.channel_state(&channel).await.unwrap().memory.clone();
    assert_eq!(w.run_as_worker(JobKind::Summarize, job.clone()).await, 0);
    let after = w.deps.channels.channel_state(&channel).await.unwrap().memory.clone();
    assert_ne!(after.watermark, before.watermark, "the first summarized the new messages");
    w.counter.reset();
    assert_eq!(w.run_as_worker(JobKind::Summarize, job).await, 0);
    let calls = w.counter.calls();
    assert_eq!(
        calls.keys().map(String::as_str).collect::<Vec<_>>(),
        ["dynamodb.BatchGetItem", "dynamodb.Query"],
        "the twin reads the state and the messages since the summary, and no more: {calls:?}"
    );
    assert_eq!(w.deps.channels.channel_state(&channel).await.unwrap().memory, after, "and changes nothing");
}

/// Delivers the cost conversation, drains the judge and respond queues, prints the
/// calls per message and what they cost, and fails when an operation passes its
/// ceiling, the whole pipeline (ingress and workers) passes `costing.calls` calls a
/// message, or AWS passes `costing.dollars` per 1,000 messages.
async fn assert_calls_within(w: &end_to_end::World, costing: &Costing) {
    let Costing { what, place, workers: ceilings, calls: total_ceiling, dollars: dollars_ceiling, .. } = *costing;
    w.mature_channel().await;
    let roots = match place {
        Place::TopLevel => Vec::new(),
        Place::BusyThreads => w.busy_threads().await,
    };
    w.counter.reset();
    let texts = [
        "おはよう",
        "deploy どう？",
        "見てます",
        "<@UKUUKI> 手順どこ？",
        "ありがとう",
        "了解",
        "lunch?",
        "カレー",
        "いいね",
        "行く",
    ];
    for (i, text) in texts.iter().enumerate() {
        // In the busy channel every other message is a reply in one of its threads.
        let root = roots.get(i % 3).filter(|_| i % 2 == 0).map(|root| root.as_str());
        assert_eq!(w.deliver_text_in(text, i as u32, root).await, 200);
    }
    let ingress = w.counter.calls();
    let ingress_units = w.counter.capacity_units();
    assert_eq!(
        ingress.values().sum::<u64>(),
        3 * texts.len() as u64,
        "one conditional put, one SQS send and one blind counter update per message at ingress: {ingress:?}"
    );
    w.counter.reset();
    let (failed, jobs) = w.drain(5).await;
    assert_eq!(failed, 0, "every delivery succeeded");
    assert!(w.receive(&w.urls.judge).await.records.is_empty(), "the judge queue is drained");
    assert!(w.receive(&w.urls.respond).await.records.is_empty(), "the respond queue is drained");
    let posts = w.slack_calls("chat.postMessage").await;
    assert_eq!(posts.len(), 1, "one answer, to the one mention: {posts:?}");
    assert_eq!(posts[0]["channel"], "C0COST");
    w.assert_the_template_allows_what_was_done();

    let mut workers = w.counter.calls();
    let mut worker_units = w.counter.capacity_units();
    // The reflections queued for after the lull wait on the REFLECT queue out of the
    // test's reach (SQS holds each for its delay). One queued for a message older than
    // the channel's newest finds that one when it runs and queues itself again, a lull
    // after it: that run is counted (made here now: it does the same then), and is one
    // more job. One for the newest message reflects: memory work, below.
    let lull_jobs = w.take_queued(JobKind::Reflect);
    assert_eq!(lull_jobs.len(), w.delayed(&w.urls.reflect).await, "the queued reflections wait on the queue");
    let channel = kuuki::domain::ChannelId("C0COST".into());
    let window = w.deps.messages.channel_window(&channel, 10).await.unwrap();
    let newest = window.messages.iter().rfind(|m| w.deps.is_participant(m)).expect("people wrote").ts.clone();
    let (waiting_again, reflecting): (Vec<kuuki::domain::Job>, _) =
        lull_jobs.into_iter().partition(|job| matches!(job, kuuki::domain::Job::Reflect { ts, .. } if *ts < newest));
    w.counter.reset();
    for job in &waiting_again {
        assert_eq!(w.run_as_worker(JobKind::Reflect, job.clone()).await, 0);
    }
    let queued_again = w.take_queued(JobKind::Reflect);
    assert_eq!(queued_again.len(), waiting_again.len(), "each run queued itself again");
    w.assert_the_template_allows_what_was_done();
    for (op, n) in w.counter.calls() {
        *workers.entry(op).or_default() += n;
    }
    let again = w.counter.capacity_units();
    worker_units.read += again.read;
    worker_units.write += again.write;

    // Memory work: the summaries and the reflection this conversation queued, run now as
    // their workers will run them then (the model's answers scripted). The summary reads
    // the messages since the last one, the reflection those since its watermark: each
    // runs on the channel as it will be then, nothing newer coming.
    // In the order they come with the defaults: the reflection a lull (10 minutes)
    // after the last message, the summary a summary period (15) after the first.
    let model_calls = |w: &end_to_end::World| w.model.as_ref().map_or(0, |m| m.requests().len());
    let pipeline_model_calls = model_calls(w);
    w.counter.reset();
    let reflections: Vec<kuuki::domain::Job> = queued_again.into_iter().chain(reflecting).collect();
    for job in &reflections {
        assert_eq!(w.run_as_worker(JobKind::Reflect, job.clone()).await, 0);
    }
    let summaries = w.take_queued(JobKind::Summarize);
    for job in &summaries {
        assert_eq!(w.run_as_worker(JobKind::Summarize, job.clone()).await, 0);
    }
    w.assert_the_template_allows_what_was_done();
    let memory = w.counter.calls();
    let memory_units = w.counter.capacity_units();
    if costing.with_llm {
        assert!(!summaries.is_empty() && !reflections.is_empty(), "the conversation is summarized and reflected on");
        let state = w.deps.channels.channel_state(&channel).await.unwrap();
        assert_eq!(state.memory.watermark.as_ref(), Some(&newest), "the summary read up to the newest message");
        assert_eq!(state.reflection_watermark.as_ref(), Some(&newest), "and so did the reflection");
    } else {
        assert!(summaries.is_empty() && reflections.is_empty() && memory.is_empty(), "no memory work: {memory:?}");
    }
    assert!(w.take_queued(JobKind::Summarize).is_empty() && w.take_queued(JobKind::Reflect).is_empty());
    let pipeline_jobs = jobs + waiting_again.len();
    let jobs = pipeline_jobs + summaries.len() + reflections.len();

    // The pipeline (ingress and workers), then everything: with the memory work.
    type Units = kuuki::adapters::aws::calls::CapacityUnits;
    let plus = |mut calls: std::collections::BTreeMap<String, u64>, more: &std::collections::BTreeMap<String, u64>| {
        for (op, n) in more {
            *calls.entry(op.clone()).or_default() += n;
        }
        calls
    };
    let add = |a: Units, b: Units| Units { read: a.read + b.read, write: a.write + b.write };
    let pipeline = plus(ingress.clone(), &workers);
    let pipeline_units = add(ingress_units, worker_units);
    let pipeline_cost = Cost::of(&pipeline, pipeline_units, texts.len(), (pipeline_jobs, pipeline_model_calls));
    let all = plus(pipeline.clone(), &memory);
    let units = add(pipeline_units, memory_units);
    let all_model_calls = model_calls(w);
    let cost = Cost::of(&all, units, texts.len(), (jobs, all_model_calls));
    let total: u64 = all.values().sum();
    let n = texts.len() as f64;
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "AWS calls for {} messages, {what}: {total} ({:.1} per message); ingress {ingress:?}, workers {workers:?}, memory work {memory:?} (the test's own receives and deletes not counted)\n\
         DynamoDB capacity units per message: ingress {:.2} write, {:.2} read; workers {:.2} write, {:.2} read; memory work {:.2} write, {:.2} read; {jobs} jobs and {all_model_calls} model calls ({pipeline_model_calls} before the memory work) for {} messages\n\
         $ per 1,000 messages, {what}: DynamoDB writes {:.5}, reads {:.5}, SQS {:.5}, Lambda {:.5}, AWS total {:.5}\n\
         without the memory work: {:.1} calls a message; DynamoDB writes {:.5}, reads {:.5}, SQS {:.5}, Lambda {:.5}, AWS total {:.5}",
        texts.len(),
        total as f64 / n,
        ingress_units.write / n,
        ingress_units.read / n,
        worker_units.write / n,
        worker_units.read / n,
        memory_units.write / n,
        memory_units.read / n,
        texts.len(),
        cost.dynamodb_writes,
        cost.dynamodb_reads,
        cost.sqs,
        cost.lambda,
        cost.total(),
        pipeline.values().sum::<u64>() as f64 / n,
        pipeline_cost.dynamodb_writes,
        pipeline_cost.dynamodb_reads,
        pipeline_cost.sqs,
        pipeline_cost.lambda,
        pipeline_cost.total(),
    );
    assert!(ingress_units.write >= n, "DynamoDB reports the units of every message put: {units:?}");
    assert!(worker_units.read >= n, "DynamoDB reports the units of every channel read: {units:?}");
    for (part, calls, ceilings) in [("workers", &workers, ceilings), ("memory work", &memory, costing.memory)] {
        for (operation, count) in calls {
            let per_message = *count as f64 / n;
            let ceiling = ceilings
                .iter()
                .find(|(op, _)| op == operation)
                .map(|(_, c)| *c)
                .unwrap_or_else(|| panic!("{part} calls {operation}, which has no ceiling: {calls:?}"));
            assert!(
                per_message <= ceiling,
                "{part}: {operation}: {per_message} calls per message, ceiling {ceiling}: {calls:?}"
            );
        }
    }
    let per_message = total as f64 / n;
    assert!(
        per_message <= total_ceiling,
        "{per_message} AWS calls a message through the whole pipeline, ceiling {total_ceiling}: ingress {ingress:?}, workers {workers:?}, memory work {memory:?}"
    );
    assert!(
        cost.total() <= dollars_ceiling,
        "AWS ${:.5} per 1,000 messages {what}, goal ${dollars_ceiling}: {cost:?}",
        cost.total()
    );
}

/// An endpoint that takes every connection and never answers (a hung network path).
async fn endpoint_that_never_answers() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    endpoint
}

/// An AWS endpoint that takes the connection and never answers (a hung network path)
/// fails the call within kuuki's AWS call timeout, with a timeout error, instead of
/// holding the job until Lambda kills its whole batch. Needs no emulator.
#[tokio::test]
async fn an_aws_call_that_gets_no_answer_fails_within_its_timeout() {
    use kuuki::budget::{AWS_ATTEMPT_TIMEOUT, AWS_CALL_TIMEOUT};
    let endpoint = endpoint_that_never_answers().await;
    let config = kuuki::adapters::aws::config::load().await;
    // On the client's own config: it wins over AWS_ENDPOINT_URL_DYNAMODB (the emulators').
    let config = aws_sdk_dynamodb::config::Builder::from(&config)
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "test"))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let started = std::time::Instant::now();
    let call = client
        .get_item()
        .table_name("messages")
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S("C1".into()))
        .send();
    let outcome = tokio::time::timeout(AWS_CALL_TIMEOUT + Duration::from_secs(15), call)
        .await
        .expect("the call ended by its own timeout, not the test's");
    let error = outcome.expect_err("no answer came");
    assert!(
        matches!(error, aws_sdk_dynamodb::error::SdkError::TimeoutError(_)),
        "a timeout, not another failure: {error:?}"
    );
    let took = started.elapsed();
    assert!(took >= AWS_ATTEMPT_TIMEOUT, "it waited for an answer first");
    assert!(took < AWS_CALL_TIMEOUT + Duration::from_secs(3), "cut off at the call's timeout: {took:?}");
}

/// A proxy to `upstream` that forwards every HTTP/1.1 request and its answer, except
/// that the first request whose body contains `marker` reaches the upstream and its
/// answer is dropped with the connection (an answer lost on the way back).
async fn proxy_losing_one_answer(upstream: String, marker: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// One whole HTTP message (headers and a Content-Length body), or None at the end.
    async fn read_message(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
        let mut data = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if data.len() >= end + 4 + length {
                    return Some(data);
                }
            }
            let read = stream.read(&mut buf).await.ok()?;
            if read == 0 {
                return None;
            }
            data.extend_from_slice(&buf[..read]);
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let (upstream, dropped) = (upstream.clone(), dropped.clone());
            tokio::spawn(async move {
                while let Some(request) = read_message(&mut client).await {
                    let mut server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                    server.write_all(&request).await.unwrap();
                    let Some(answer) = read_message(&mut server).await else { return };
                    let lose = String::from_utf8_lossy(&request).contains(marker)
                        && !dropped.swap(true, std::sync::atomic::Ordering::SeqCst);
                    if lose {
                        return;
                    }
                    client.write_all(&answer).await.unwrap();
                }
            });
        }
    });
    address
}

/// A claim whose first attempt DynamoDB applied but whose answer was lost is retried
/// by the SDK; the retry finds the claim its own call took and holds it, instead of
/// reading it as another delivery's and waiting out the lease.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_claim_retried_after_its_answer_was_lost_is_held_by_its_caller() {
    let (dynamo, _) = emulators("a_claim_retried_after_its_answer_was_lost_is_held_by_its_caller");
    // Now by the machine's clock: DynamoDB Local's TTL deleter (real clock) would remove
    // a claim dated in the past, and the second call would find the key free.
    let clock = Arc::new(VirtualClock::new(kuuki::ports::Clock::now(&kuuki::adapters::system::SystemClock)));
    let names = TableNames {
        messages: unique("messages"),
        channels: unique("channels"),
        ledger: unique("ledger"),
        facts: unique("facts"),
    };
    let direct = aws_sdk_dynamodb::Client::new(&sdk(&dynamo).await);
    create_tables(&direct, &names).await.unwrap();
    let proxy = proxy_losing_one_answer(dynamo.clone(), "respond:CLOST:1.000001").await;
    // On the client's own config: it wins over AWS_ENDPOINT_URL_DYNAMODB (the emulator's).
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk(&dynamo).await).endpoint_url(proxy).build();
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(config),
        names,
        clock.clone(),
        Duration::from_secs(3650 * 86_400),
    );
    let outcome = store.claim("respond:CLOST:1.000001", clock.now(), Duration::from_secs(270)).await.unwrap();
    assert_eq!(outcome, ClaimOutcome::Claimed, "the caller holds its own claim");
    let again = store.claim("respond:CLOST:1.000001", clock.now(), Duration::from_secs(270)).await.unwrap();
    assert!(matches!(again, ClaimOutcome::InProgress { .. }), "another call still finds it held: {again:?}");
}

/// An SDK configuration (kuuki's, from `config::load`) that sends every service to
/// `endpoint`, with test credentials, and reads no endpoint from the environment (the
/// emulators' `AWS_ENDPOINT_URL*` would otherwise win over it).
async fn config_for_fake(endpoint: String) -> aws_config::SdkConfig {
    /// Service settings from nowhere.
    #[derive(Debug)]
    struct NoEnvironment;
    impl aws_types::service_config::LoadServiceConfig for NoEnvironment {
        fn load_config(&self, _: aws_types::service_config::ServiceConfigKey<'_>) -> Option<String> {
            None
        }
    }
    let mut config = kuuki::adapters::aws::config::load().await.into_builder();
    config.set_endpoint_url(Some(endpoint));
    config.set_region(Some(aws_config::Region::new("us-east-1")));
    config.set_credentials_provider(Some(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
        aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "test"),
    )));
    config.set_service_config(Some(NoEnvironment));
    config.build()
}

/// Settings whose worker timeout (48 s) leaves a margin of 6 s: the LLM and chat calls
/// are made short to fit.
fn small_budget_settings() -> kuuki::config::Settings {
    let vars = std::collections::HashMap::from(
        [
            ("WORKER_TIMEOUT_SECONDS", "48"),
            ("LLM_TIMEOUT_SECONDS", "5"),
            ("LLM_MAX_RETRIES", "0"),
            ("CHAT_TIMEOUT_SECONDS", "2"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    kuuki::config::Settings::from_vars(&vars).unwrap()
}

/// How long a store read through `adapters` takes to fail against an endpoint that
/// never answers; it must fail with a timeout, by the clients' own cut-off.
async fn time_to_fail_a_hung_read(adapters: &kuuki::adapters::aws::AwsAdapters) -> Duration {
    use kuuki::budget::AWS_CALL_TIMEOUT;
    use kuuki::ports::MessageStore;
    let started = std::time::Instant::now();
    let (channel, ts) = (ChannelId("C1".into()), Ts::new("1767603600.000100"));
    let read = adapters.store.get_message(&channel, &ts);
    let outcome = tokio::time::timeout(AWS_CALL_TIMEOUT + Duration::from_secs(15), read)
        .await
        .expect("the call ended by its own timeout, not the test's");
    let error = outcome.expect_err("no answer came");
    assert!(error.to_string().contains("TimeoutError"), "a timeout, not another failure: {error}");
    started.elapsed()
}

/// With a small time budget the clients jobs use cut a call off within the job's
/// margin, not at the longest timeout: `WORKER_TIMEOUT_SECONDS=48` leaves a margin of
/// 6 s, so a store read from an endpoint that never answers fails after about 6 s (two
/// attempts of 3 s) where the default cut-off would hold the job for 20 s. Needs no
/// emulator.
#[tokio::test]
async fn a_small_budget_cuts_a_hung_aws_call_off_within_its_margin() {
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::adapters::platforms::Role;
    use kuuki::budget::TimeBudget;
    let settings = small_budget_settings();
    let budget = TimeBudget::from_settings(&settings);
    assert_eq!(budget.margin, Duration::from_secs(6));
    let config = config_for_fake(endpoint_that_never_answers().await).await;
    let adapters =
        AwsAdapters::for_role(&config, Role::Worker, &settings, Arc::new(kuuki::adapters::system::SystemClock));
    let took = time_to_fail_a_hung_read(&adapters).await;
    assert!(took >= budget.aws_attempt(), "it waited for an answer first: {took:?}");
    assert!(took < budget.margin + Duration::from_secs(2), "cut off within the margin: {took:?}");
}

/// The ingress's calls are cut off at the shortest (4 s: two attempts of 2 s), well
/// inside its own 10 s Lambda timeout, whatever the workers' budget: a hung call fails
/// the request with an error the log names instead of Lambda stopping it. Needs no
/// emulator.
#[tokio::test]
async fn the_ingress_cuts_a_hung_aws_call_off_inside_its_own_timeout() {
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::adapters::platforms::Role;
    use kuuki::budget::{AWS_MIN_ATTEMPT_TIMEOUT, AWS_MIN_CALL_TIMEOUT};
    // The default worker budget, whose job calls may take 20 s.
    let settings = kuuki::config::Settings::from_vars(&std::collections::HashMap::new()).unwrap();
    let config = config_for_fake(endpoint_that_never_answers().await).await;
    let adapters =
        AwsAdapters::for_role(&config, Role::Ingress, &settings, Arc::new(kuuki::adapters::system::SystemClock));
    let took = time_to_fail_a_hung_read(&adapters).await;
    assert!(took >= AWS_MIN_ATTEMPT_TIMEOUT, "it waited for an answer first: {took:?}");
    assert!(took < AWS_MIN_CALL_TIMEOUT + Duration::from_secs(2), "cut off at the shortest call: {took:?}");
}

/// The long poll of `kuuki serve --aws` keeps the longest cut-offs when the budget is
/// small: SQS answers a poll of an empty queue only after its wait (up to 5 s), and a
/// poll cut off at the small budget's 3 s attempt would lose what SQS handed it until
/// the visibility timeout. Here a fake SQS answers after 4 s with one message. Needs no
/// emulator.
#[tokio::test]
async fn a_long_poll_outlasts_a_small_budgets_attempts() {
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::budget::TimeBudget;
    use wiremock::matchers::{header, method};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let sqs = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("x-amz-target", "AmazonSQS.ReceiveMessage"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/x-amz-json-1.0")
                .set_body_string(r#"{"Messages": [{"MessageId": "m1", "ReceiptHandle": "r1", "Body": "{}"}]}"#)
                .set_delay(Duration::from_secs(4)),
        )
        .expect(1)
        .mount(&sqs)
        .await;
    let settings = small_budget_settings();
    assert!(
        TimeBudget::from_settings(&settings).aws_attempt() < Duration::from_secs(4),
        "the budget's attempts are shorter"
    );
    let config = config_for_fake(sqs.uri()).await;
    let adapters = AwsAdapters::for_jobs(&config, &settings, Arc::new(kuuki::adapters::system::SystemClock), None);
    let received =
        kuuki::adapters::aws::sqs::receive_batch(adapters.queue.client(), &format!("{}/queue/judge", sqs.uri()))
            .await
            .expect("the poll waited for SQS's answer");
    assert_eq!(received.iter().map(|m| m.message_id()).collect::<Vec<_>>(), [Some("m1")]);
}

/// Settling a batch (telling SQS when its failed messages come back) retries a stalled
/// attempt inside the settle window: its attempts are cut at half the window, not at
/// the job calls' 10 s, which would spend the whole window on one attempt and leave the
/// messages to the 24-minute visibility timeout. A fake SQS stalls the first attempt.
/// Needs no emulator.
#[tokio::test]
async fn settling_a_batch_retries_a_stalled_attempt_within_its_window() {
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::worker::FailedMessage;
    use wiremock::matchers::{header, method};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let sqs = MockServer::start().await;
    let target = || header("x-amz-target", "AmazonSQS.ChangeMessageVisibilityBatch");
    let answer = |delay: Duration| {
        ResponseTemplate::new(200)
            .insert_header("content-type", "application/x-amz-json-1.0")
            .set_body_string(r#"{"Successful": [{"Id": "0"}], "Failed": []}"#)
            .set_delay(delay)
    };
    Mock::given(method("POST"))
        .and(target())
        .respond_with(answer(Duration::from_secs(30)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&sqs)
        .await;
    Mock::given(method("POST")).and(target()).respond_with(answer(Duration::ZERO)).with_priority(2).mount(&sqs).await;
    let config = config_for_fake(sqs.uri()).await;
    let settings = kuuki::config::Settings::from_vars(&std::collections::HashMap::new()).unwrap();
    let adapters = AwsAdapters::for_jobs(&config, &settings, Arc::new(kuuki::adapters::system::SystemClock), None);
    let failed = [FailedMessage { id: "m1".into(), retry_after: Some(Duration::from_secs(30)) }];
    // Attempts of 4 s; a retry waits up to 1 s first (the SDK's backoff).
    let window = Duration::from_secs(8);
    kuuki::adapters::aws::sqs::retry_later(
        adapters.queue.client(),
        &format!("{}/queue/judge", sqs.uri()),
        &failed,
        |_| Some("receipt-1"),
        window,
    )
    .await;
    let calls = sqs.received_requests().await.unwrap_or_default().len();
    assert_eq!(calls, 2, "the stalled attempt was given up and retried within the {window:?} window");
}
