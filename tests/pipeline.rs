//! What transcripts cannot express: platform retries and double deliveries, queue
//! redeliveries, edits and deletes, and kuuki's own messages.

use std::time::Duration;

use kuuki::adapters::memory::ChatCall;
use kuuki::domain::{Author, EventKind, Job, RespondMode, ResponseType, Stage};
use kuuki::ingest::{Incoming, IngestOutcome};
use kuuki::ports::{InProcessQueue, MessageStore, Queue};
use kuuki::worker::{MAX_DELIVERIES, run_job};
use kuuki_e2e::harness::Harness;

fn posts(h: &Harness) -> usize {
    h.chat.calls().iter().filter(|c| matches!(c, ChatCall::Post { .. })).count()
}

#[tokio::test]
async fn a_retried_or_doubly_delivered_message_is_stored_and_answered_once() {
    let h = Harness::new(&[]);
    let mention = h.message(0.0, "alice", "<@UBOT> hi", None);
    assert!(matches!(
        h.ingest(Incoming::Message(mention.clone())).await,
        IngestOutcome::Stored { queued: Some(_), .. }
    ));
    // Slack's retry, and the app_mention copy of the same (channel, ts).
    for _ in 0..2 {
        assert_eq!(h.ingest(Incoming::Message(mention.clone())).await, IngestOutcome::Duplicate);
    }
    assert_eq!(h.queue.len(), 1, "only the first delivery queued work");
    h.run_until(10.0).await;
    assert_eq!(posts(&h), 1);
    let messages: Vec<_> = h.events().into_iter().filter(|e| matches!(e.kind, EventKind::Message { .. })).collect();
    assert_eq!(messages.len(), 1);
}

#[tokio::test]
async fn a_redelivered_respond_job_never_posts_twice() {
    let h = Harness::new(&[]);
    let mention = h.message(0.0, "alice", "<@UBOT> hi", None);
    let IngestOutcome::Stored { queued: Some(job), .. } = h.ingest(Incoming::Message(mention)).await else {
        panic!("a job")
    };
    run_job(&h.deps, &job).await.unwrap();
    run_job(&h.deps, &job).await.unwrap();
    h.queue.enqueue(job.clone(), Duration::ZERO).await.unwrap();
    h.run_until(5.0).await;
    assert_eq!(posts(&h), 1);
    let dropped = h
        .events()
        .into_iter()
        .filter(|e| matches!(&e.kind, EventKind::Dropped { stage: Stage::Respond, reason } if reason.contains("already answered")))
        .count();
    // The second direct run, the queued original and the extra copy.
    assert_eq!(dropped, 3);
}

#[tokio::test]
async fn a_failed_post_is_retried_by_redelivery_and_posts_once() {
    let h = Harness::new(&[]);
    h.chat.fail_next(2);
    let mention = h.message(0.0, "alice", "<@UBOT> hi", None);
    h.ingest(Incoming::Message(mention)).await;
    h.run_until_expecting(200.0, 2).await;
    assert_eq!(posts(&h), 1, "the third delivery posted");
    let respond_at =
        h.events().into_iter().find(|e| matches!(e.kind, EventKind::Respond { .. })).map(|e| e.at).unwrap();
    assert_eq!(respond_at, h.at(150.0), "redelivered twice: 30 s, then 2 minutes later");
}

#[tokio::test]
async fn a_job_that_keeps_failing_goes_to_the_dead_letters() {
    let h = Harness::new(&[]);
    h.chat.fail_next(100);
    h.ingest(Incoming::Message(h.message(0.0, "alice", "<@UBOT> hi", None))).await;
    h.run_until_expecting(3600.0, MAX_DELIVERIES).await;
    assert!(h.queue.is_empty());
    let dead = h
        .events()
        .into_iter()
        .filter(|e| matches!(&e.kind, EventKind::Dropped { reason, .. } if reason.contains("dead letter")))
        .count();
    assert_eq!(dead, 1);
    assert_eq!(posts(&h), 0);
}

#[tokio::test]
async fn kuukis_own_messages_are_stored_never_judged() {
    let h = Harness::new(&[]);
    let mut own = h.message(0.0, "UBOT", "I said this", None);
    own.author = Author::OwnBot;
    assert_eq!(h.ingest(Incoming::Message(own.clone())).await, IngestOutcome::Stored { trigger: None, queued: None });
    assert!(h.stored(&own.ts).await.is_some());
    assert!(h.queue.is_empty());
}

#[tokio::test]
async fn kuukis_post_is_stored_and_a_platform_echo_of_it_is_a_duplicate() {
    let h = Harness::new(&[]);
    h.ingest(Incoming::Message(h.message(0.0, "alice", "<@UBOT> hi", None))).await;
    h.run_until(1.0).await;
    let Some(ChatCall::Post { ts, post }) = h.chat.calls().into_iter().next() else { panic!("a post") };
    let stored = h.stored(&ts).await.expect("the bot's post is stored");
    assert_eq!(stored.author, Author::OwnBot);
    assert_eq!(stored.text, post.text);
    // Slack echoes the bot's own message as an event: same (channel, ts).
    let echo = kuuki::domain::Message { text: "echo".into(), ..kuuki::domain::Message::clone(&stored) };
    assert_eq!(h.ingest(Incoming::Message(echo)).await, IngestOutcome::Duplicate);
}

#[tokio::test]
async fn the_bot_spoke_last_so_the_judgment_skips_without_scoring() {
    let h = Harness::new(&[("JUDGE_JITTER_RATIO", "0")]);
    let question = h.message(0.0, "alice", "anyone?", None);
    h.ingest(Incoming::Message(question.clone())).await;
    // kuuki answered in this conversation before the judgment ran (a slow direct answer).
    let mut own = h.message(10.0, "UBOT", "yes, me", None);
    own.author = Author::OwnBot;
    h.store.put_message(&std::sync::Arc::new(own)).await.unwrap();
    h.run_until(60.0).await;
    let judge = h
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::Judge { breakdown, respond, llm_called, .. } => Some((breakdown, respond, llm_called)),
            _ => None,
        })
        .expect("a judgment");
    assert!(judge.0.contains_key("bot_spoke_last"), "{judge:?}");
    assert!(!judge.1 && !judge.2);
}

#[tokio::test]
async fn a_deleted_message_is_not_judged_or_answered() {
    let h = Harness::new(&[]);
    let m = h.message(0.0, "alice", "oops wrong channel", None);
    h.ingest(Incoming::Message(m.clone())).await;
    assert_eq!(
        h.ingest(Incoming::Deleted { channel: m.channel.clone(), ts: m.ts.clone() }).await,
        IngestOutcome::Deleted(true)
    );
    assert!(h.stored(&m.ts).await.is_none());
    h.run_until(100.0).await;
    let kinds: Vec<_> = h.events().into_iter().map(|e| e.kind.name()).collect();
    assert_eq!(kinds, vec!["message", "deleted", "dropped"]);
    // Deleting again changes nothing.
    assert_eq!(
        h.ingest(Incoming::Deleted { channel: m.channel.clone(), ts: m.ts.clone() }).await,
        IngestOutcome::Deleted(false)
    );
}

#[tokio::test]
async fn an_edit_updates_the_stored_text() {
    let h = Harness::new(&[]);
    let m = h.message(0.0, "alice", "helo", None);
    h.ingest(Incoming::Message(m.clone())).await;
    let edited = Incoming::Edited { channel: m.channel.clone(), ts: m.ts.clone(), text: "hello".into() };
    assert_eq!(h.ingest(edited).await, IngestOutcome::Edited(true));
    assert_eq!(h.stored(&m.ts).await.unwrap().text, "hello");
    let missing =
        Incoming::Edited { channel: m.channel.clone(), ts: kuuki::domain::Ts::new("1.000001"), text: "x".into() };
    assert_eq!(h.ingest(missing).await, IngestOutcome::Edited(false));
}

#[tokio::test]
async fn mentions_that_arrive_together_are_answered_once() {
    let h = Harness::new(&[]);
    let first = h.message(0.0, "alice", "<@UBOT> can you check the deploy", None);
    let second = h.message(0.0, "bob", "<@UBOT> and the migration too", None);
    h.ingest(Incoming::Message(first)).await;
    h.ingest(Incoming::Message(second)).await;
    h.run_until(5.0).await;
    assert_eq!(posts(&h), 1);
    let superseded = h
        .events()
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::Superseded { stage: Stage::Respond, .. }))
        .count();
    assert_eq!(superseded, 1);
}

#[tokio::test]
async fn a_react_only_job_adds_one_reaction_and_counts_as_a_response() {
    let h = Harness::new(&[]);
    let m = h.message(0.0, "alice", "ありがとう", None);
    h.ingest(Incoming::Message(m.clone())).await;
    let job = Job::Respond {
        thread: m.thread_key(),
        ts: m.ts.clone(),
        mode: RespondMode::Ambient,
        response_type: ResponseType::ReactOnly,
        emoji: None,
    };
    run_job(&h.deps, &job).await.unwrap();
    run_job(&h.deps, &job).await.unwrap();
    let reactions: Vec<_> = h.chat.calls();
    assert_eq!(reactions.len(), 1);
    assert!(matches!(&reactions[0], ChatCall::Reaction { emoji, ts, .. } if emoji == "pray" && *ts == m.ts));
    let state = kuuki::ports::ChannelStateStore::channel_state(&*h.store, &m.channel).await.unwrap();
    assert_eq!(state.last_response_at, Some(h.now()));
    assert_eq!(state.interventions.len(), 1);
}

#[tokio::test]
async fn delays_beyond_the_queue_limit_go_through_the_scheduler() {
    let h = Harness::new(&[]);
    let m = h.message(0.0, "alice", "later", None);
    h.ingest(Incoming::Message(m.clone())).await;
    let job = Job::Respond {
        thread: m.thread_key(),
        ts: m.ts.clone(),
        mode: RespondMode::Ambient,
        response_type: ResponseType::ReactOnly,
        emoji: None,
    };
    h.deps.enqueue_after(job.clone(), Duration::from_secs(900)).await.unwrap();
    assert_eq!(h.queue.scheduled_once(), 0, "900 s fits in a queue message");
    h.deps.enqueue_after(job, Duration::from_secs(901)).await.unwrap();
    assert_eq!(h.queue.scheduled_once(), 1);
}

#[tokio::test]
async fn a_redelivered_judgment_reuses_the_cached_llm_answer() {
    let llm = kuuki_e2e::RecordingLlm::new(
        r#"{"role": "judge", "reply": {"should_respond": false, "reason": "not needed", "confidence": 0.95, "conversation_state": "active"}}"#,
    );
    // A one-message conversation may be joined (no short_conversation): the LLM is asked.
    let settings = [
        ("BOT_TOPICS", "deploy"),
        ("JUDGE_KEYWORDS", "deploy"),
        ("JUDGE_JITTER_RATIO", "0"),
        ("JUDGE_MIN_CONVERSATION_MESSAGES", "1"),
    ];
    let h = Harness::with_llm(&settings, Some(llm.clone()));
    h.ingest(Incoming::Message(h.message(0.0, "alice", "deploy notes", None))).await;
    // The first delivery asks the model, then fails to record its judgment.
    h.store.fail_next_writes(1);
    h.run_until_expecting(31.0, 1).await;
    assert_eq!(llm.requests().len(), 1);
    // The redelivery 30 s later finds the answer cached: no second call.
    h.run_until(120.0).await;
    assert_eq!(llm.requests().len(), 1, "the script had one answer and was asked once");
    let judgments: Vec<_> = h
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Judge { llm_cached, llm_called, respond, .. } => Some((llm_cached, llm_called, respond)),
            _ => None,
        })
        .collect();
    assert_eq!(judgments, vec![(true, false, false)]);
}

#[tokio::test]
async fn a_redelivered_waiting_judgment_still_judges_once() {
    let llm = kuuki_e2e::RecordingLlm::new(
        r#"{"role": "judge", "reply": {"should_respond": true, "reason": "unanswered", "confidence": 0.9, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "git reset --soft HEAD~1", "repeat": true}"#,
    );
    let h = Harness::with_llm(&[("JUDGE_JITTER_RATIO", "0")], Some(llm.clone()));
    let question = h.message(0.0, "alice", "how do I undo my last commit?", None);
    let IngestOutcome::Stored { queued: Some(job), .. } = h.ingest(Incoming::Message(question)).await else {
        panic!("a judge job")
    };
    // The delivery at 30 s waits for the question to stand; a redelivery of it waits too.
    h.run_until(31.0).await;
    run_job(&h.deps, &job).await.unwrap();
    h.run_until(300.0).await;
    let events = h.events();
    let decisions: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Judge { decision, .. } => Some(*decision),
            _ => None,
        })
        .collect();
    use kuuki::domain::Decision;
    // Both wait and leave the question to its pick-up (docs/design.md §7.7), which
    // judges it once.
    assert_eq!(decisions, vec![Decision::Wait, Decision::Wait, Decision::Llm]);
    let already = events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::Dropped { stage: Stage::Judge, reason } if reason.contains("already judged")))
        .count();
    assert_eq!(already, 0, "no JUDGE is queued again: the pick-up judges the question: {events:?}");
    assert_eq!(posts(&h), 1);
    let judge_calls = llm.requests().iter().filter(|r| r.role == kuuki::ports::LlmRole::Judge).count();
    assert_eq!(judge_calls, 1);
}

#[test]
fn confident_judgments_stand_longer() {
    use kuuki::judge::cache_lifetime;
    assert_eq!(cache_lifetime(0.95), Duration::from_secs(12 * 3600));
    assert_eq!(cache_lifetime(0.9), Duration::from_secs(12 * 3600));
    assert_eq!(cache_lifetime(0.7), Duration::from_secs(3600));
    assert_eq!(cache_lifetime(0.69), Duration::from_secs(600));
    assert!(cache_lifetime(0.0) >= Duration::from_secs(300), "never under five minutes");
}

#[tokio::test]
async fn the_daily_sweep_forgets_faded_facts_only() {
    use kuuki::domain::{ChannelId, Fact};
    use kuuki::ports::FactStore;
    let h = Harness::new(&[("FACT_DECAY_HALF_LIFE_DAYS", "30")]);
    let fact = |id: &str, days_old: u64| Fact {
        id: id.into(),
        channel: ChannelId("general".into()),
        content: id.into(),
        keywords: vec![],
        source_users: vec![],
        confidence: 0.9,
        shareable: false,
        created_at: h.at(0.0),
        confirmed_at: h.at(0.0) - Duration::from_secs(days_old * 86_400),
        strength: 1,
        source_messages: Vec::new(),
        embedding: None,
    };
    h.store.put_fact(&fact("fresh", 1)).await.unwrap();
    // 0.9 × 0.5^(150/30) ≈ 0.028: under the floor.
    h.store.put_fact(&fact("faded", 150)).await.unwrap();
    run_job(&h.deps, &Job::SweepFacts).await.unwrap();
    let left: Vec<String> =
        h.store.facts(&ChannelId("general".into())).await.unwrap().into_iter().map(|f| f.id).collect();
    assert_eq!(left, vec!["fresh"]);
}

/// Memory on whether kuuki takes part or not: a channel summary, a workspace refresh,
/// a reflection, and an answer for direct messages.
const MEMORY_SCRIPT: &str = r#"{"role": "summarize", "match": "workspace", "reply": {"history": "a team workspace", "recent_events": "deploys"}, "repeat": true}
{"role": "summarize", "reply": {"summary": "they planned the deploy", "history": "deploys happen here", "mood": "calm", "topic_keywords": ["deploy"], "active_users": ["alice", "bob"]}, "repeat": true}
{"role": "reflect", "reply": {"facts": [{"content": "alice deploys on Fridays", "keywords": ["deploy", "friday"], "source_users": ["alice"], "confidence": 0.9, "shareable": true}], "profiles": []}, "repeat": true}
{"role": "generate", "reply": "got it", "repeat": true}"#;

/// A summary every 3 messages, a reflection after a 10-minute lull once 4 piled up.
const MEMORY_SETTINGS: [(&str, &str); 4] = [
    ("SUMMARIZE_EVERY_N_MESSAGES", "3"),
    ("REFLECTION_MIN_MESSAGES", "4"),
    ("REFLECTION_LULL_MINUTES", "10"),
    ("JUDGE_JITTER_RATIO", "0"),
];

fn remembering(extra: &[(&str, &str)]) -> Harness {
    let settings: Vec<(&str, &str)> = MEMORY_SETTINGS.iter().chain(extra).copied().collect();
    let llm = kuuki::adapters::llm::ScriptedLlm::parse(MEMORY_SCRIPT).expect("a valid script");
    Harness::with_llm(&settings, Some(std::sync::Arc::new(llm)))
}

/// Each summary and reflection as (kind, seconds from the start, messages read).
fn memory_lines(h: &Harness, events: &[kuuki::domain::Event]) -> Vec<(&'static str, f64, usize)> {
    events
        .iter()
        .filter_map(|e| {
            let at = e.at.seconds_since(h.at(0.0));
            match e.kind {
                EventKind::Summary { messages, .. } => Some(("summary", at, messages)),
                EventKind::Reflect { messages, .. } => Some(("reflect", at, messages)),
                _ => None,
            }
        })
        .collect()
}

#[tokio::test]
async fn direct_messages_are_summarized_and_reflected_on() {
    let h = remembering(&[]);
    for (secs, text) in [
        (0.0, "the deploy is on friday"),
        (60.0, "can you remind me on thursday"),
        (120.0, "and the release notes on monday"),
    ] {
        let mut dm = h.message(secs, "alice", text, None);
        dm.channel = kuuki::domain::ChannelId("D01".into());
        dm.in_dm = true;
        h.ingest(Incoming::Message(dm)).await;
        h.run_until(secs + 10.0).await;
    }
    h.run_until(3600.0).await;
    let events = h.events();
    assert_eq!(events.iter().filter(|e| matches!(e.kind, EventKind::Respond { .. })).count(), 3);
    assert!(!events.iter().any(|e| matches!(e.kind, EventKind::Judge { .. })), "every DM is a direct trigger");
    assert_eq!(
        memory_lines(&h, &events),
        vec![
            // The second answer makes four messages (two of them kuuki's): due now.
            ("summary", 60.0, 4),
            // Ten minutes after the last answer: kuuki's own answer does not break the lull.
            ("reflect", 720.0, 6),
            // The rest, a summary period after the previous summary.
            ("summary", 1020.0, 2),
        ],
        "{events:#?}"
    );
}

/// A direct answer's memory triggers count up to the message answered: kuuki's own
/// reply counts at the next message, in process as on DynamoDB (whose window is read
/// before the reply is posted). One DM with a summary every 2 messages: not due yet,
/// so the summary comes a summary period later.
#[tokio::test]
async fn a_direct_answer_counts_up_to_the_message_it_answers() {
    let h = remembering(&[("SUMMARIZE_EVERY_N_MESSAGES", "2"), ("REFLECTION_ENABLED", "false")]);
    let mut dm = h.message(0.0, "alice", "the deploy is on friday", None);
    dm.channel = kuuki::domain::ChannelId("D01".into());
    dm.in_dm = true;
    h.ingest(Incoming::Message(dm)).await;
    h.run_until(3600.0).await;
    let events = h.events();
    assert_eq!(events.iter().filter(|e| matches!(e.kind, EventKind::Respond { .. })).count(), 1);
    assert_eq!(memory_lines(&h, &events), vec![("summary", 900.0, 2)], "{events:#?}");
}

/// When the lull reflections waiting on the queue are due, in seconds from the start.
fn lull_reflections(h: &Harness) -> Vec<f64> {
    h.queue
        .waiting(|job| matches!(job, kuuki::domain::Job::Reflect { .. }))
        .into_iter()
        .map(|due| due.seconds_since(h.at(0.0)))
        .collect()
}

/// A busy channel whose talk is in several conversations: each message is judged (none
/// supersedes another), and one reflection waits for the lull at a time, not one per
/// judgment. It is reflected on a lull after the last message, once; a message after
/// that reflection queues the next.
#[tokio::test]
async fn a_busy_channel_queues_one_lull_reflection_at_a_time() {
    let h = remembering(&[]);
    let reflections = |events: &[kuuki::domain::Event]| {
        memory_lines(&h, events).into_iter().filter(|(kind, ..)| *kind == "reflect").collect::<Vec<_>>()
    };
    let mut roots: Vec<kuuki::domain::Ts> = Vec::new();
    for i in 0..12 {
        let secs = 60.0 * i as f64;
        let user = ["alice", "bob", "carol"][i % 3];
        // Top-level messages opening three threads, then replies in each in turn.
        let root = (i >= 3).then(|| roots[i % 3].clone());
        let message = h.message(secs, user, "we deploy on friday", root.as_ref());
        if i < 3 {
            roots.push(message.ts.clone());
        }
        h.ingest(Incoming::Message(message)).await;
        h.run_until(secs + 59.0).await;
        let waiting = lull_reflections(&h);
        // From the fourth message (REFLECTION_MIN_MESSAGES) on: the first judgment's job,
        // a lull after its message, until it runs and waits again.
        if i >= 3 {
            assert_eq!(waiting, [180.0 + 600.0], "one reflection waiting after message {i}");
        }
    }
    let decided = |e: &&kuuki::domain::Event| matches!(e.kind, EventKind::Judge { decision, .. } if decision != kuuki::domain::Decision::Wait);
    let events = h.events();
    assert_eq!(events.iter().filter(decided).count(), 12, "every message judged: {events:#?}");
    h.run_until(780.0).await;
    assert_eq!(lull_reflections(&h), [660.0 + 600.0], "it ran, found newer messages and waits a lull after the last");
    h.run_until(3000.0).await;
    assert_eq!(reflections(&h.events()), vec![("reflect", 1260.0, 12)]);
    assert!(lull_reflections(&h).is_empty(), "nothing left waiting");
    // After the reflection: the next messages queue their own (the time noted passed).
    for (i, secs) in [3100.0, 3160.0, 3220.0, 3280.0].into_iter().enumerate() {
        let user = if i % 2 == 0 { "alice" } else { "bob" };
        h.ingest(Incoming::Message(h.message(secs, user, "and on monday", None))).await;
        h.run_until(secs + 59.0).await;
    }
    assert_eq!(
        lull_reflections(&h),
        [3280.0 + 600.0],
        "the last message's judgment queued it (a burst's earlier judgments were superseded)"
    );
    h.run_until(7200.0).await;
    assert_eq!(reflections(&h.events()), vec![("reflect", 3880.0, 4)]);
}

/// A queue whose `nth` REFLECT job (counted from 1) is queued and then reported
/// failed: a worker that died after queueing it, before its own job was done.
struct DiesAfterQueueingReflection {
    inner: std::sync::Arc<dyn Queue>,
    nth: usize,
    seen: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl Queue for DiesAfterQueueingReflection {
    async fn enqueue(&self, job: Job, delay: Duration) -> kuuki::ports::PortResult<()> {
        let reflection = matches!(job, Job::Reflect { .. });
        self.inner.enqueue(job, delay).await?;
        if reflection && self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.nth {
            return Err(kuuki::ports::PortError::Backend { backend: "test", message: "died after queueing".into() });
        }
        Ok(())
    }
}

/// The lull's reflection finds newer messages and queues itself again, then dies
/// before its job is done: SQS delivers it again and it queues itself a second time.
/// The two copies run at the same lull; the channel is reflected on once.
#[tokio::test]
async fn a_lull_reflection_that_dies_after_queueing_itself_again_reflects_once() {
    let mut h = remembering(&[]);
    h.deps.queue = std::sync::Arc::new(DiesAfterQueueingReflection {
        inner: h.queue.clone(),
        // The first is the judgment's; the second the job's, when it runs at 780 s.
        nth: 2,
        seen: Default::default(),
    });
    for i in 0..8 {
        let secs = 60.0 * i as f64;
        let user = ["alice", "bob"][i % 2];
        h.ingest(Incoming::Message(h.message(secs, user, "we deploy on friday", None))).await;
        h.run_until(secs + 59.0).await;
    }
    h.run_until_expecting(779.0, 0).await;
    h.run_until_expecting(1000.0, 1).await;
    assert_eq!(lull_reflections(&h), [420.0 + 600.0, 420.0 + 600.0], "queued again by each delivery");
    h.run_until(3600.0).await;
    let reflected: Vec<_> = memory_lines(&h, &h.events()).into_iter().filter(|(kind, ..)| *kind == "reflect").collect();
    assert_eq!(reflected, vec![("reflect", 1020.0, 8)]);
    let facts = kuuki::ports::FactStore::facts(&*h.store, &kuuki::domain::ChannelId("general".into())).await.unwrap();
    assert_eq!(facts.len(), 1, "the fact learned once: {facts:?}");
}

/// A full buffer whose newest participant message hides behind other bots' posts (not
/// judged, not participants): the lull's job finds it in the messages it reads,
/// reflects on the full buffer at once and still waits for the quiet after it, so the
/// messages after the reflection, whose judgments queued none, are reflected on too.
#[tokio::test]
async fn a_full_buffer_reflected_on_early_still_leaves_a_job_for_the_quiet_after_it() {
    let h = remembering(&[("REFLECTION_MAX_BUFFER_MESSAGES", "12")]);
    let reflections = |events: &[kuuki::domain::Event]| {
        memory_lines(&h, events).into_iter().filter(|(kind, ..)| *kind == "reflect").collect::<Vec<_>>()
    };
    let say = |secs: f64, i: usize| h.message(secs, ["alice", "bob"][i % 2], "we deploy on friday", None);
    for i in 0..7 {
        let secs = if i < 6 { 60.0 * i as f64 } else { 400.0 };
        h.ingest(Incoming::Message(say(secs, i))).await;
        h.run_until(secs + 59.0).await;
    }
    for i in 0..6 {
        let mut post = h.message(470.0 + i as f64, "ci", "build passed", None);
        post.author = Author::OtherBot;
        h.ingest(Incoming::Message(post)).await;
    }
    h.run_until(799.0).await;
    let events = h.events();
    assert_eq!(
        reflections(&events),
        vec![("reflect", 780.0, 13)],
        "the full buffer, at the first job's time: {events:#?}"
    );
    assert_eq!(lull_reflections(&h), [400.0 + 600.0], "and a job for the quiet after the newest person's message");
    for (i, secs) in [800.0, 860.0, 920.0, 980.0].into_iter().enumerate() {
        h.ingest(Incoming::Message(say(secs, i))).await;
        h.run_until(secs + 59.0).await;
    }
    h.run_until(3600.0).await;
    assert_eq!(reflections(&h.events()), vec![("reflect", 980.0 + 600.0, 4)]);
}

/// Direct messages answered by two workers in turn (two Lambda containers: the jobs of
/// one do not see what the other keeps in its process): the answer that queued the
/// lull's reflection noted it in the store, so the other queues none.
#[tokio::test]
async fn direct_answers_in_two_processes_queue_one_lull_reflection() {
    let h = remembering(&[]);
    let vars: std::collections::HashMap<String, String> =
        MEMORY_SETTINGS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let settings = kuuki::config::Settings::from_vars(&vars).unwrap();
    let llm = kuuki::adapters::llm::ScriptedLlm::parse(MEMORY_SCRIPT).expect("a valid script");
    let around = kuuki::deps::Surroundings {
        chat: h.chat.clone(),
        llm: Some(std::sync::Arc::new(llm)),
        clock: h.clock.clone(),
        log: h.log.clone(),
    };
    let adapters = kuuki::deps::Adapters::from_store(h.store.clone(), h.queue.clone(), h.queue.clone(), around);
    let persona = settings.persona(None);
    let other = kuuki::deps::Deps::new(settings, persona, kuuki::domain::UserId("UBOT".into()), adapters, 2);
    for i in 0..6 {
        let secs = 60.0 * i as f64;
        let mut dm = h.message(secs, "alice", "remind me about the deploy", None);
        dm.channel = kuuki::domain::ChannelId("D01".into());
        dm.in_dm = true;
        h.ingest(Incoming::Message(dm)).await;
        let worker = if i % 2 == 0 { &h.deps } else { &other };
        let clock = h.clock.clone();
        let failed = kuuki::worker::run_due(worker, &*h.queue, h.at(secs + 30.0), move |t| clock.advance_to(t)).await;
        assert_eq!(failed, 0, "every delivery succeeded");
        h.clock.advance_to(h.at(secs + 30.0));
    }
    let answers = h.events().iter().filter(|e| matches!(e.kind, EventKind::Respond { .. })).count();
    assert_eq!(answers, 6, "each message answered");
    assert_eq!(lull_reflections(&h).len(), 1, "one lull's reflection waits: {:?}", lull_reflections(&h));
}

#[tokio::test]
async fn a_muted_channel_still_remembers() {
    let h = remembering(&[]);
    let general = kuuki::domain::ChannelId("general".into());
    h.deps.channels.set_muted(&general, Some(h.at(86_400.0))).await.unwrap();
    for (i, secs) in [0.0, 40.0, 80.0, 120.0].into_iter().enumerate() {
        let user = if i % 2 == 0 { "alice" } else { "bob" };
        h.ingest(Incoming::Message(h.message(secs, user, "we deploy on friday?", None))).await;
        h.run_until(secs + 35.0).await;
    }
    h.run_until(3600.0).await;
    let events = h.events();
    let judgments: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Judge { breakdown, respond, .. } => Some((breakdown.contains_key("muted"), *respond)),
            _ => None,
        })
        .collect();
    assert_eq!(judgments, vec![(true, false); 4], "every message judged, muted: {events:#?}");
    assert_eq!(posts(&h), 0);
    assert_eq!(
        memory_lines(&h, &events),
        vec![("summary", 110.0, 3), ("reflect", 720.0, 4), ("summary", 1050.0, 1)],
        "{events:#?}"
    );
}

#[tokio::test]
async fn two_conversations_handled_at_once_queue_one_summary() {
    // kuuki only answers mentions here, so every message gets a REMEMBER job; the
    // newest of each conversation runs the triggers, both at once, before a summary runs.
    let h = remembering(&[("AUTONOMOUS_RESPONSE_ENABLED", "false")]);
    let first = h.message(0.0, "alice", "deploy at 3?", None);
    h.ingest(Incoming::Message(first.clone())).await;
    h.ingest(Incoming::Message(h.message(1.0, "bob", "and the migration?", None))).await;
    let reply = h.message(1.0, "carol", "3 works", Some(&first.ts));
    let IngestOutcome::Stored { queued: Some(Job::Remember { .. }), trigger: None } =
        h.ingest(Incoming::Message(reply)).await
    else {
        panic!("a message nothing judges is remembered")
    };
    h.clock.advance_to(h.at(31.0));
    let mut due = Vec::new();
    while let Some(scheduled) = h.queue.pop_due(h.now()) {
        due.push(scheduled);
    }
    assert!(due.iter().all(|s| matches!(*s.job, Job::Remember { .. })) && due.len() == 3, "{due:?}");
    for scheduled in &due {
        run_job(&h.deps, &scheduled.job).await.unwrap();
        h.queue.ack(scheduled);
    }
    let mut queued = Vec::new();
    while let Some(scheduled) = h.queue.pop_due(h.now()) {
        queued.push(scheduled.job.clone());
        h.queue.ack(&scheduled);
    }
    let summaries: Vec<_> = queued.iter().filter(|j| matches!(***j, Job::Summarize { .. })).collect();
    assert_eq!(summaries.len(), 1, "the second conversation found the first one's summary in flight: {queued:?}");
    run_job(&h.deps, summaries[0]).await.unwrap();
    h.run_until(3600.0).await;
    let events = h.events();
    assert_eq!(memory_lines(&h, &events), vec![("summary", 31.0, 3)], "{events:#?}");
    assert!(!events.iter().any(|e| matches!(e.kind, EventKind::Judge { .. })));
}
