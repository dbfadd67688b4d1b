//! The AWS adapters on real local emulators: DynamoDB Local for the stores, moto for
//! SQS and EventBridge Scheduler. `scripts/test` starts them (scripts/with-emulators);
//! under a plain `cargo test` those that need them are listed as ignored.

use std::sync::Arc;
use std::time::Duration;

use kuuki::adapters::aws::dynamo::{DynamoStore, TableNames, create_tables};
use kuuki::adapters::aws::scheduler::{EventBridgeScheduler, ScheduleTargets, schedule_name};
use kuuki::adapters::aws::sqs::{QueueUrls, SqsQueue, decode_job};
use kuuki::adapters::contract;
use kuuki::adapters::memory::VirtualClock;
use kuuki::budget::JobKind;
use kuuki::domain::{ChannelId, Job, ThreadKey, Timestamp, Ts, Workspace};
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
    assert_eq!(
        store.workspace_memory(Workspace::Shared).await.unwrap(),
        WorkspaceMemory::default(),
        "nothing anywhere yet"
    );
    write_old().await;
    assert_eq!(
        store.workspace_memory(Workspace::Shared).await.unwrap(),
        old,
        "the old memory is read, its lines are not"
    );
    assert_eq!(store.workspace_memory_without_lines(Workspace::Shared).await.unwrap(), old, "also alone");
    let line = ChannelLine { channel: ChannelId("C-new".into()), line: "new news".into(), updated_at: at(60) };
    store.set_channel_line(&line.channel, Some(line.clone())).await.unwrap();
    let read = other.workspace_memory(Workspace::Shared).await.unwrap();
    assert_eq!(read, WorkspaceMemory { channel_lines: vec![line.clone()], ..old.clone() }, "a new line beside it");

    // A line removed (a forget's remake of that channel's memory) goes from the old
    // item too; the rest of it stays until the memory is written anew.
    store.set_channel_line(&ChannelId("C-old".into()), None).await.unwrap();
    let item = old_item().await.expect("the old item is still there");
    assert!(!item.contains_key("line#C-old") && item.contains_key("line#C-kept") && item.contains_key("workspace"));

    // The memory written anew (a forget's wipe): the old item is gone.
    other.set_workspace_memory(Workspace::Shared, WorkspaceMemory::default()).await.unwrap();
    assert_eq!(old_item().await, None, "the old item is deleted");
    let read = store.workspace_memory(Workspace::Shared).await.unwrap();
    assert_eq!(read, WorkspaceMemory { channel_lines: vec![line.clone()], ..WorkspaceMemory::default() });

    // An old item written again (an old version still running during a deploy): the
    // memory written anew wins over it, and the next write deletes it again.
    write_old().await;
    assert_eq!(store.workspace_memory(Workspace::Shared).await.unwrap(), read, "the memory written anew wins");
    assert_eq!(
        store.workspace_memory_without_lines(Workspace::Shared).await.unwrap(),
        WorkspaceMemory::default(),
        "also alone"
    );
    let fresh = WorkspaceMemory { history: "fresh".into(), updated_at: Some(at(120)), ..WorkspaceMemory::default() };
    store.set_workspace_memory(Workspace::Shared, fresh.clone()).await.unwrap();
    assert_eq!(old_item().await, None, "deleted again");
    assert_eq!(
        other.workspace_memory(Workspace::Shared).await.unwrap(),
        WorkspaceMemory { channel_lines: vec![line.clone()], ..fresh.clone() }
    );
    // Removing a line when no old item is left creates none.
    store.set_channel_line(&line.channel, None).await.unwrap();
    assert_eq!(old_item().await, None, "no old item made by a removal");
    assert_eq!(store.workspace_memory(Workspace::Shared).await.unwrap(), fresh, "a line is removed on its own");
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
    assert_eq!(store.workspace_memory_without_lines(Workspace::Shared).await.unwrap(), old);
    let dying = store_on(TableNames { facts: unique("no-such-facts"), ..tables.clone() });
    assert!(
        dying.set_workspace_memory(Workspace::Shared, WorkspaceMemory::default()).await.is_err(),
        "its write fails"
    );
    assert_eq!(
        store.workspace_memory_without_lines(Workspace::Shared).await.unwrap(),
        WorkspaceMemory::default(),
        "no old copy"
    );
    assert_eq!(store.workspace_memory(Workspace::Shared).await.unwrap(), WorkspaceMemory::default());
    let again = WorkspaceMemory { history: "a team".into(), ..WorkspaceMemory::default() };
    store.set_workspace_memory(Workspace::Shared, again.clone()).await.unwrap();
    assert_eq!(
        store.workspace_memory_without_lines(Workspace::Shared).await.unwrap(),
        again,
        "the write made again stores it"
    );
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
        unasked_post: None,
        pick_up: false,
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
    contract::workspaces_do_not_cross(&store).await;
    contract::installations(&store, &contract::test_sealer()).await;
}

/// Installations' tokens sealed with a KMS key (moto's): the installations contract on
/// DynamoDB with that sealer, and a seal that opens only for its own installation, with
/// its own key, unchanged.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn tokens_sealed_with_a_kms_key_open_only_for_their_installation() {
    use kuuki::adapters::aws::kms::KmsSealer;
    use kuuki::ports::{PortError, Sealed, TokenSealer};
    use kuuki::secrecy::{ExposeSecret, SecretString};
    let (dynamo, moto) = emulators("tokens_sealed_with_a_kms_key_open_only_for_their_installation");
    let config = sdk(&moto).await;
    let kms = aws_sdk_kms::Client::new(&config);
    let key = |description: &'static str| {
        let kms = kms.clone();
        async move { kms.create_key().description(description).send().await.unwrap().key_metadata.unwrap().key_id }
    };
    let (ours, theirs) = (key("kuuki tokens").await, key("another key").await);
    let timeouts = kuuki::adapters::aws::config::ingress_timeouts();
    let sealer = KmsSealer::new(&config, timeouts.clone(), &ours);
    let store = dynamo_store(&dynamo, Arc::new(VirtualClock::new(REPLAY_EPOCH)), Duration::from_secs(86_400)).await;
    contract::installations(&store, &sealer).await;

    let sealed = sealer.seal(&SecretString::from("xoxb-kms-secret"), "T1").await.unwrap();
    assert!(sealed.0.starts_with("kms1.") && !sealed.0.contains("xoxb"), "{sealed:?}");
    assert_eq!(sealer.open(&sealed, "T1").await.unwrap().expose_secret(), "xoxb-kms-secret");
    let other_key = KmsSealer::new(&config, timeouts, &theirs);
    let mut changed = sealed.0.clone();
    changed.insert(10, if changed.as_bytes()[10] == b'A' { 'B' } else { 'A' });
    changed.remove(11);
    for refusal in [
        sealer.open(&sealed, "T2").await,
        other_key.open(&sealed, "T1").await,
        sealer.open(&Sealed(changed), "T1").await,
        sealer.open(&Sealed("v1.local.seal".into()), "T1").await,
    ] {
        let Err(PortError::Rejected { message, .. }) = refusal else { panic!("opened: {refusal:?}") };
        assert!(message.contains("TOKEN_KMS_KEY_ID") && !message.contains("xoxb"), "{message}");
    }
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
        replies_to: None,
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
    let newer = kuuki::adapters::aws::sqs::encode_job(&judge_job()).replace("\"v\":1", "\"v\":7");
    assert!(decode_job(&newer).unwrap_err().to_string().contains("version 7"), "{newer}");
    assert!(decode_job("not json").unwrap_err().to_string().contains("not a kuuki job"));
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

#[path = "aws/end_to_end.rs"]
mod end_to_end;

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
    let error = kuuki::adapters::aws::secrets::resolve(&client, &mut missing).await.unwrap_err().to_string();
    assert!(error.contains("OPENAI_API_KEY_ARN"), "{error}");
    assert!(!error.contains("xoxb-from"), "no secret value in errors");
}

#[path = "aws/costs.rs"]
mod costs;

#[path = "aws/timeouts.rs"]
mod timeouts;

#[path = "aws/workspaces.rs"]
mod workspaces;
