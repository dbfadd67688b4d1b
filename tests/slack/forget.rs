//! Forgetting over Slack: `/kuuki forget-me` and `/kuuki forget` as signed slash
//! commands, the second look, and memory work that outlasts a forget.

use super::*;

/// `/kuuki forget-me` over a signed slash command: the caller's stored messages and
/// profile go, someone else's stay; `/kuuki forget` of another person is refused to a
/// non-admin and changes nothing.
#[tokio::test]
async fn forget_me_over_a_signed_slash_command_removes_the_caller_only() {
    use kuuki::domain::UserId;
    use kuuki::ports::{FactStore, MessageStore};
    let w = SlackWorld::start(&[], true).await;
    w.send_event(message(CH, "UALICE", "my cat is Miso", &w.ts(0, 1)), &[]).await;
    w.send_event(message(CH, "UBOB", "deploys on Monday", &w.ts(0, 2)), &[]).await;
    let stored = |w: &SlackWorld| {
        let store = w.store.clone();
        async move { store.messages_after(&ChannelId(CH.into()), None, 10).await.unwrap() }
    };
    assert_eq!(stored(&w).await.len(), 2);

    let refused = command_as(&w, "UBOB", "forget <@UALICE>").await;
    assert!(refused.starts_with("Sorry, only workspace admins and owners"), "{refused}");
    assert_eq!(stored(&w).await.len(), 2, "refused, so nothing forgotten");

    Mock::given(method("POST"))
        .and(path(RESPONSE_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&w.slack_api)
        .await;
    let ack = command(&w, "forget-me").await;
    assert!(ack.starts_with("kuuki is forgetting you"), "answered within Slack's 3 s: {ack}");
    assert_eq!(stored(&w).await.len(), 2, "forgetting is the worker's");
    w.run_for(1.0).await;
    let answers = answers_sent(&w).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["response_type"], "ephemeral");
    let answer = answers[0]["text"].as_str().unwrap();
    assert!(answer.starts_with("Forgotten you: 1 stored message(s)"), "{answer}");
    let left: Vec<String> = stored(&w).await.into_iter().map(|m| m.user.0.to_string()).collect();
    assert_eq!(left, ["UBOB"]);
    assert_eq!(w.store.profile(Workspace::Shared, &UserId("UALICE".into())).await.unwrap(), None);
    assert!(w.store.profile(Workspace::Shared, &UserId("UBOB".into())).await.unwrap().is_some());
}

/// A model that, asked to reflect or to summarize, waits while Alice is forgotten (as a
/// slow model would while another worker carries out her request), then answers with
/// what it learned from and about her and Bob (a summary names her cat only when her
/// message was in the prompt).
struct ForgetsAliceWhileReflecting {
    deps: std::sync::OnceLock<std::sync::Arc<kuuki::deps::Deps>>,
    /// What the reflection answers.
    reflection: fn() -> Value,
}

#[async_trait::async_trait]
impl kuuki::ports::Llm for ForgetsAliceWhileReflecting {
    async fn complete(
        &self,
        request: kuuki::ports::LlmRequest,
    ) -> Result<kuuki::ports::LlmResponse, kuuki::ports::LlmError> {
        use kuuki::ports::LlmRole;
        let deps = self.deps.get().expect("the world's deps");
        let alice = kuuki::domain::UserId("UALICE".into());
        kuuki::memory::forget::forget_user(deps, &alice, &ChannelId(CH.into()), None).await.unwrap();
        let reply = match request.role {
            LlmRole::Reflect => (self.reflection)(),
            LlmRole::Summarize if request.user.contains("Miso") => json!({
                "summary": "alice has a cat called Miso; bob deploys on Mondays", "history": "a team channel",
                "mood": "calm", "topic_keywords": ["cat"], "active_users": ["alice", "bob"],
            }),
            LlmRole::Summarize => json!({
                "summary": "bob deploys on Mondays", "history": "a team channel",
                "mood": "calm", "topic_keywords": ["deploy"], "active_users": ["bob"],
            }),
            other => return Err(kuuki::ports::LlmError::Failed(format!("no {other:?} call expected"))),
        };
        Ok(kuuki::ports::LlmResponse {
            text: reply.to_string(),
            usage: Default::default(),
            finish: kuuki::ports::Finish::Complete,
        })
    }
}

/// What a reflection learned from and about Alice and Bob.
fn reflection_about_alice_and_bob() -> Value {
    {
        json!({
            "facts": [
                {"content": "alice keeps a cat called Miso", "keywords": ["cat"], "source_users": ["alice"], "confidence": 0.9, "shareable": false},
                {"content": "the team deploys on Mondays", "keywords": ["deploy"], "source_users": ["bob"], "confidence": 0.9, "shareable": false},
            ],
            "profiles": [
                {"user": "alice", "tags": ["cats"], "summary": "has a cat"},
                {"user": "bob", "tags": ["deploys"], "summary": "deploys on Mondays"},
            ],
        })
    }
}

/// The same without profiles (`USER_PROFILE_ENABLED` off: nothing lists where she
/// wrote): the redelivery still wipes the summary of the channel whose messages the
/// first attempt deleted.
#[tokio::test]
async fn a_forget_that_fails_halfway_without_profiles_still_wipes_the_summary() {
    use kuuki::ports::ChannelStateStore;
    let (w, channel, _) = alice_spoke_and_was_summarized(&[("USER_PROFILE_ENABLED", "false")]).await;
    command(&w, "forget-me").await;
    w.store.fail_next_writes(1);
    assert_eq!(w.run_for_counting(1.0).await, 1, "the first attempt dies wiping the summary");
    assert!(w.store.messages_after(&channel, None, 10).await.unwrap().is_empty(), "its messages went first");
    w.run_for(1500.0).await;
    assert_eq!(w.store.channel_state(&channel).await.unwrap().memory.summary, "", "wiped by the redelivery");
    assert_eq!(answers_sent(&w).await.len(), 1);
}

/// A reflection that read Alice's messages before she was forgotten, and stores what it
/// learned after, keeps nothing from or about her (the forget removed her facts and
/// notes before this reflection wrote its own); what Bob said stays.
#[tokio::test]
async fn a_reflection_that_outlasts_a_forget_keeps_nothing_of_the_person() {
    use kuuki::ports::FactStore;
    let (w, channel) = alice_and_bob_spoke_with_a_model_that_forgets_her(("REFLECTION_MIN_MESSAGES", "2")).await;
    // Known before: a fact both taught, which the reflection strengthens (Bob says it
    // again) after the forget took Alice off it.
    let known = taught(&w, &channel, "the team deploys on Mondays", &["UALICE", "UBOB"]);
    w.store.put_fact(&known).await.unwrap();
    let facts = reflect_now(&w, &channel).await;
    let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(contents, ["the team deploys on Mondays"], "nothing learned from or about her");
    assert_eq!(facts[0].source_users, ["UBOB"], "strengthened as it is now, without her");
    assert!(w.store.user_note(&channel, &kuuki::domain::UserId("UALICE".into())).await.unwrap().is_none());
    assert!(w.store.user_note(&channel, &kuuki::domain::UserId("UBOB".into())).await.unwrap().is_some());
}

/// Work that read Alice's messages before her forget and wrote after the forget had
/// looked at the channel (a reflection that checked the forget marks just before the
/// forget set them, an answer noting her topics), and a message of hers posted before
/// the forget that Slack delivers late, are caught by the forget's second look, once
/// every job that could still be running has ended and Slack's retries are over: what
/// was learned from what she wrote before the forget goes, in a channel the forget did
/// not look in too, and her note and the late message; a fact learned only from what
/// she wrote after it stays (she spoke again), as does her new message and what Bob
/// taught. The second look answers nobody and is logged as a look again, once.
#[tokio::test]
async fn a_forgets_second_look_removes_what_work_in_flight_wrote_after_it_looked() {
    use kuuki::domain::UserId;
    use kuuki::ports::{ChannelStateStore, FactStore};
    let w = SlackWorld::start(&[], true).await;
    slack_refuses_answers_then_takes_them(&w, 0, 0).await;
    let channel = ChannelId(CH.into());
    let elsewhere = ChannelId("C0ELSEWHERE".into());
    let alice = UserId("UALICE".into());
    w.send_event(message(CH, "UALICE", "my cat is Miso", &w.ts(0, 1)), &[]).await;
    w.run_for(60.0).await;
    let asked = w.clock.now();
    command(&w, "forget-me").await;
    w.run_for(5.0).await;
    assert_eq!(answers_sent(&w).await.len(), 1, "the forget is done and answered");
    assert_eq!(forget_lines(&w), 1);
    let learned = |channel: &ChannelId, content: &str, sources: &[&str], from: Ts| kuuki::domain::Fact {
        source_messages: vec![from],
        ..taught(&w, channel, content, sources)
    };
    // What work in flight writes after the forget looked, and what she says after it.
    let before = Ts::new(w.ts(0, 1));
    let since = Ts::from_timestamp(w.clock.now() + std::time::Duration::from_secs(1));
    for fact in [
        learned(&channel, "her cat is called Miso", &["UALICE"], before.clone()),
        learned(&channel, "the team deploys on Mondays", &["UALICE", "UBOB"], before.clone()),
        learned(&channel, "standups are at ten", &["UBOB"], before.clone()),
        learned(&channel, "the office moves in May", &["UALICE"], since.clone()),
        learned(&elsewhere, "<@UALICE> keeps a cat", &["UBOB"], before.clone()),
    ] {
        w.store.put_fact(&fact).await.unwrap();
    }
    w.store.note_reflection(&channel, &alice, &["cats".into()], "has a cat", w.clock.now()).await.unwrap();
    // Slack's retry of a message she posted before the forget, and one she posts after.
    w.send_event(message(CH, "UALICE", "my cat's vet is Dr. Sato", &w.ts(30, 2)), &[]).await;
    w.send_event(message(CH, "UALICE", "the office moves in May", &w.ts(80, 3)), &[]).await;
    let hers = async || {
        let stored = w.store.messages_after(&channel, None, 10).await.unwrap();
        stored.iter().filter(|m| m.user == alice).map(|m| m.text.clone()).collect::<Vec<_>>()
    };
    assert_eq!(hers().await, ["my cat's vet is Dr. Sato", "the office moves in May"]);
    // A summary made after the forget's wipe from what was stored then, the late one too.
    let generation = summarized_since_the_forget(&w, &channel).await;
    let contents = async |channel: &ChannelId| {
        let mut facts: Vec<(String, Vec<String>)> =
            w.store.facts(channel).await.unwrap().into_iter().map(|f| (f.content, f.source_users)).collect();
        facts.sort();
        facts
    };
    let fact = |content: &str, sources: &[&str]| (content.to_owned(), sources.iter().map(|s| s.to_string()).collect());

    // Not while a job that read before the forget's end may still run.
    let lease = w.deps.budget.claim_lease().as_secs_f64();
    w.run_for(lease - 10.0).await;
    assert_eq!(contents(&channel).await.len(), 4, "still there while work that read before the forget may run");
    assert_eq!(hers().await.len(), 2);
    // Once Slack's retries (ten minutes) and the jobs that read them (a lease) are over,
    // and not before.
    w.run_for(2.0 * lease + 600.0 - 10.0 - w.clock.now().seconds_since(asked)).await;
    assert_eq!(contents(&channel).await.len(), 4, "still there while a job that read a late message may run");
    w.run_for(20.0).await;
    assert_eq!(
        contents(&channel).await,
        [
            fact("standups are at ten", &["UBOB"]),
            fact("the office moves in May", &["UALICE"]),
            fact("the team deploys on Mondays", &["UBOB"]),
        ]
    );
    assert_eq!(contents(&elsewhere).await, [], "a channel the forget did not look in");
    assert!(w.store.user_note(&channel, &alice).await.unwrap().is_none(), "her note went too");
    assert_eq!(hers().await, ["the office moves in May"], "the late message went, the new one stays");
    let memory = w.store.channel_state(&channel).await.unwrap().memory.clone();
    assert_eq!((memory.summary.as_str(), memory.generation), ("", generation + 1), "made anew without it");
    assert_eq!(answers_sent(&w).await.len(), 1, "the second look answers nobody");
    let looks: Vec<_> = w
        .log
        .take()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Forget { facts_removed, facts_edited, notes, messages, summaries, late, .. } => {
                Some((late, messages, facts_removed, facts_edited, notes, summaries))
            }
            _ => None,
        })
        .collect();
    assert_eq!(looks, [(true, 1, 2, 1, 1, 1)], "a message, two facts removed, one edited, the note, the summary");
    w.run_for(3600.0).await;
    assert_eq!(forget_lines(&w), 0, "it looks once");
}

/// A summary of `channel` made after a forget's wipe from what was stored then (a late
/// message of the person's among it); returns the memory's generation.
async fn summarized_since_the_forget(w: &SlackWorld, channel: &ChannelId) -> u32 {
    use kuuki::ports::ChannelStateStore;
    let generation = w.store.channel_state(channel).await.unwrap().memory.generation;
    let summarized = kuuki::domain::ChannelMemory {
        summary: "someone's cat sees Dr. Sato".into(),
        updated_at: Some(w.clock.now()),
        generation,
        ..Default::default()
    };
    assert!(w.store.set_channel_memory(channel, summarized).await.unwrap());
    generation
}

/// A forget's second look that dies between deleting a late-delivered message and
/// making the channel's memory anew (a summary made since held what the message said),
/// at the memory's write or before it at a fact's edit, makes it anew on its
/// redelivery, though it finds no message of theirs left; the log line counts what the
/// whole look removed (the late message the first attempt deleted too).
#[tokio::test]
async fn a_second_look_that_dies_before_remaking_the_memory_remakes_it_when_delivered_again() {
    second_look_dies_then_remakes(LookDies::AtTheMemory).await;
}

#[tokio::test]
async fn a_second_look_that_dies_at_a_fact_remakes_the_memory_when_delivered_again() {
    second_look_dies_then_remakes(LookDies::AtAFact).await;
}

enum LookDies {
    /// The memory's write fails (the late message and the facts are done).
    AtTheMemory,
    /// A fact's edit keeps being refused (another write each time), so the look gives
    /// up before the memory (the late message is done).
    AtAFact,
}

async fn second_look_dies_then_remakes(dies: LookDies) {
    use kuuki::ports::{ChannelStateStore, FactStore};
    let w = SlackWorld::start(&[], true).await;
    slack_refuses_answers_then_takes_them(&w, 0, 0).await;
    let channel = ChannelId(CH.into());
    w.send_event(message(CH, "UALICE", "my cat is Miso", &w.ts(0, 1)), &[]).await;
    w.run_for(60.0).await;
    let asked = w.clock.now();
    command(&w, "forget-me").await;
    w.run_for(5.0).await;
    assert_eq!(forget_lines(&w), 1);
    // Slack's retry of a message she posted before, a summary made from it, and a fact
    // she and Bob taught, learned from it.
    w.send_event(message(CH, "UALICE", "my cat's vet is Dr. Sato", &w.ts(30, 2)), &[]).await;
    w.run_for(60.0).await;
    let generation = summarized_since_the_forget(&w, &channel).await;
    let shared = kuuki::domain::Fact {
        source_messages: vec![Ts::new(w.ts(30, 2))],
        ..taught(&w, &channel, "the vet is Dr. Sato", &["UALICE", "UBOB"])
    };
    w.store.put_fact(&shared).await.unwrap();
    let lease = w.deps.budget.claim_lease().as_secs_f64();
    w.run_for(2.0 * lease + 600.0 - 10.0 - w.clock.now().seconds_since(asked)).await;
    match dies {
        LookDies::AtTheMemory => w.store.fail_next_writes(1),
        LookDies::AtAFact => w.store.refuse_next_fact_writes(5),
    }
    assert_eq!(w.run_for_counting(20.0).await, 1, "the look dies");
    assert!(w.store.messages_after(&channel, None, 10).await.unwrap().is_empty(), "the late message went first");
    assert_eq!(w.store.channel_state(&channel).await.unwrap().memory.summary, "someone's cat sees Dr. Sato");
    w.run_for(lease + 60.0).await;
    let memory = w.store.channel_state(&channel).await.unwrap().memory.clone();
    assert_eq!((memory.summary.as_str(), memory.generation), ("", generation + 1), "made anew by the redelivery");
    let facts = w.store.facts(&channel).await.unwrap();
    assert_eq!(facts.iter().map(|f| f.source_users.clone()).collect::<Vec<_>>(), [["UBOB"]], "Bob's alone");
    let looks: Vec<_> = w
        .log
        .take()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Forget { messages, summaries, late, .. } => Some((late, messages, summaries)),
            _ => None,
        })
        .collect();
    assert_eq!(looks, [(true, 1, 1)], "one line, counting what every attempt removed");
}

/// A reflection whose fact writes find the facts changed meanwhile (another write came
/// between: a forget's edit, a twin's reflection, the sweep's delete) merges what those
/// writes carried into the facts as they are then: each fact counted once, none lost.
/// One whose writes keep finding them changed stores what it could and drops the rest
/// (failing, its redelivery would strengthen again what it stored).
#[tokio::test]
async fn a_reflection_whose_facts_changed_meanwhile_merges_again_and_counts_each_once() {
    use kuuki::domain::EventKind;
    use kuuki::ports::FactStore;
    let script = r#"{"role": "reflect", "reply": {"facts": [{"content": "the team deploys on Mondays", "keywords": ["deploy"], "source_users": ["bob"], "confidence": 0.9, "shareable": false}, {"content": "standups are at ten", "keywords": ["standup"], "source_users": ["alice"], "confidence": 0.9, "shareable": false}], "profiles": []}, "repeat": true}"#;
    let llm = std::sync::Arc::new(DeletesAFactWhileAnswering {
        inner: kuuki::adapters::llm::ScriptedLlm::parse(script).unwrap(),
        store: std::sync::OnceLock::new(),
        delete: std::sync::Mutex::new(None),
    });
    let w = SlackWorld::start_with(&[("REFLECTION_MIN_MESSAGES", "2")], true, Some(llm.clone())).await;
    llm.store.set(w.store.clone()).ok().expect("set once");
    let channel = ChannelId(CH.into());
    let say = |n: u32, user: &str, name: &str, text: &str| kuuki::domain::Message {
        channel: channel.clone(),
        ts: Ts::new(w.ts(0, n)),
        thread_root: None,
        user: kuuki::domain::UserId(user.into()),
        user_name: name.into(),
        text: text.into(),
        author: Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at: w.clock.now(),
    };
    let mut said = 0;
    let mut two_more = async || {
        for (user, name, text) in [("UALICE", "alice", "standup at ten?"), ("UBOB", "bob", "we deploy on Mondays")] {
            said += 1;
            w.store.put_message(&std::sync::Arc::new(say(said, user, name, text))).await.unwrap();
        }
    };
    let deploys = taught(&w, &channel, "the team deploys on Mondays", &["UBOB"]);
    w.store.put_fact(&deploys).await.unwrap();
    let strengths = async || {
        let mut strengths: Vec<(String, u32)> =
            w.store.facts(&channel).await.unwrap().into_iter().map(|f| (f.content, f.strength)).collect();
        strengths.sort();
        strengths
    };
    let counted = || {
        let events = w.log.take();
        let counts = events.iter().filter_map(|e| match &e.kind {
            EventKind::Reflect { facts_new, facts_strengthened, .. } => Some((*facts_new, *facts_strengthened)),
            _ => None,
        });
        counts.collect::<Vec<_>>()
    };
    let fact = |content: &str, strength: u32| (content.to_owned(), strength);

    // The first write finds its fact changed: the reflection merges it again.
    two_more().await;
    w.store.refuse_next_fact_writes(1);
    reflect_now(&w, &channel).await;
    assert_eq!(strengths().await, [fact("standups are at ten", 1), fact("the team deploys on Mondays", 2)]);
    assert_eq!(counted(), [(1, 1)], "one added, one strengthened, each once");

    // The fact it strengthens was deleted since it was read (the sweep, a forget): it
    // comes back as learned anew, not from the copy read.
    two_more().await;
    *llm.delete.lock().unwrap() = Some((channel.clone(), deploys.id.clone()));
    reflect_now(&w, &channel).await;
    assert!(llm.delete.lock().unwrap().is_none(), "deleted while the model answered");
    assert_eq!(strengths().await, [fact("standups are at ten", 2), fact("the team deploys on Mondays", 1)]);
    assert_eq!(counted(), [(1, 1)], "the deleted one added again, the other strengthened");

    // Every write keeps finding its fact changed (three tries of two writes): nothing
    // more is stored, and the reflection completes (no failure, no redelivery).
    two_more().await;
    w.store.refuse_next_fact_writes(6);
    reflect_now(&w, &channel).await;
    assert_eq!(strengths().await, [fact("standups are at ten", 2), fact("the team deploys on Mondays", 1)]);
    assert_eq!(counted(), [(0, 0)], "nothing stored, nothing counted");
}

/// A scripted model that, when asked, first deletes the fact it was told to (once).
struct DeletesAFactWhileAnswering {
    inner: kuuki::adapters::llm::ScriptedLlm,
    store: std::sync::OnceLock<std::sync::Arc<kuuki::adapters::memory::MemoryStore>>,
    delete: std::sync::Mutex<Option<(ChannelId, String)>>,
}

#[async_trait::async_trait]
impl kuuki::ports::Llm for DeletesAFactWhileAnswering {
    async fn complete(
        &self,
        request: kuuki::ports::LlmRequest,
    ) -> Result<kuuki::ports::LlmResponse, kuuki::ports::LlmError> {
        use kuuki::ports::FactStore;
        let delete = self.delete.lock().unwrap().take();
        if let Some((channel, id)) = delete {
            self.store.get().expect("the world's store").delete_fact(&channel, &id).await.unwrap();
        }
        self.inner.complete(request).await
    }
}

/// A summary made from Alice's message, written after she was forgotten (the forget
/// wiped the memory and queued its remake meanwhile), is dropped: the memory is made
/// anew from what is left, without her.
#[tokio::test]
async fn a_summary_that_outlasts_a_forget_is_dropped_and_made_anew_without_the_person() {
    use kuuki::ports::ChannelStateStore;
    let (w, channel) = alice_and_bob_spoke_with_a_model_that_forgets_her(("SUMMARIZE_EVERY_N_MESSAGES", "2")).await;
    // Summarized once before, so the forget has a memory to wipe.
    let before = kuuki::domain::ChannelMemory {
        summary: "a quiet channel".into(),
        updated_at: Some(w.clock.now()),
        ..Default::default()
    };
    w.store.set_channel_memory(&channel, before).await.unwrap();
    let newest = w.store.channel_window(&channel, 1).await.unwrap().messages[0].ts.clone();
    w.deps
        .enqueue_after(
            kuuki::domain::Job::Summarize { channel: channel.clone(), ts: newest },
            std::time::Duration::ZERO,
        )
        .await
        .unwrap();
    w.run_for(10.0).await;
    let memory = w.store.channel_state(&channel).await.unwrap().memory.clone();
    assert_eq!(memory.summary, "bob deploys on Mondays", "made anew from what is left");
    assert_eq!(memory.generation, 1, "the forget's generation");
}

/// The same in a channel never summarized before: the first summary, made from her
/// message, is not stored either (the forget moved the memory to a new generation).
#[tokio::test]
async fn a_first_summary_that_outlasts_a_forget_is_not_stored() {
    use kuuki::ports::ChannelStateStore;
    let (w, channel) = alice_and_bob_spoke_with_a_model_that_forgets_her(("SUMMARIZE_EVERY_N_MESSAGES", "2")).await;
    let newest = w.store.channel_window(&channel, 1).await.unwrap().messages[0].ts.clone();
    let summarize = kuuki::domain::Job::Summarize { channel: channel.clone(), ts: newest };
    w.deps.enqueue_after(summarize, std::time::Duration::ZERO).await.unwrap();
    w.run_for(10.0).await;
    let memory = w.store.channel_state(&channel).await.unwrap().memory.clone();
    assert!(!memory.summary.contains("Miso"), "{memory:?}");
    assert_eq!(memory.generation, 1);
}

/// A world whose model forgets Alice when called (see [`ForgetsAliceWhileReflecting`]),
/// with `setting`, where Alice and Bob each said one thing.
async fn alice_and_bob_spoke_with_a_model_that_forgets_her(setting: (&str, &str)) -> (SlackWorld, ChannelId) {
    let said = [("UALICE", "alice", "my cat is called Miso"), ("UBOB", "bob", "we deploy on Mondays")];
    world_with_a_model_that_forgets_alice(setting, reflection_about_alice_and_bob, &said).await
}

/// A world whose model forgets Alice when called and reflects `reflection`, where
/// each of `said` (id, name, text) was written in the channel.
async fn world_with_a_model_that_forgets_alice(
    setting: (&str, &str),
    reflection: fn() -> Value,
    said: &[(&str, &str, &str)],
) -> (SlackWorld, ChannelId) {
    let llm = std::sync::Arc::new(ForgetsAliceWhileReflecting { deps: std::sync::OnceLock::new(), reflection });
    let w = SlackWorld::start_with(&[setting], true, Some(llm.clone())).await;
    llm.deps.set(w.deps.clone()).ok().expect("set once");
    let channel = ChannelId(CH.into());
    for (n, (user, name, text)) in said.iter().enumerate() {
        let message = kuuki::domain::Message {
            channel: channel.clone(),
            ts: Ts::new(w.ts(0, n as u32 + 1)),
            thread_root: None,
            user: kuuki::domain::UserId((*user).into()),
            user_name: (*name).into(),
            text: (*text).into(),
            author: Author::Human,
            replies_to_bot: false,
            replies_to: None,
            in_dm: false,
            private_channel: false,
            at: w.clock.now(),
        };
        w.store.put_message(&std::sync::Arc::new(message)).await.unwrap();
    }
    (w, channel)
}

/// Reflects on `channel` now (up to its newest message); the facts it has after.
async fn reflect_now(w: &SlackWorld, channel: &ChannelId) -> Vec<kuuki::domain::Fact> {
    use kuuki::ports::FactStore;
    let newest = w.store.channel_window(channel, 1).await.unwrap().messages[0].ts.clone();
    w.deps
        .enqueue_after(kuuki::domain::Job::Reflect { channel: channel.clone(), ts: newest }, std::time::Duration::ZERO)
        .await
        .unwrap();
    w.run_for(10.0).await;
    w.store.facts(channel).await.unwrap()
}

/// A reflection on what Bob and Carol said about Alice, who did not speak.
fn reflection_about_alice_from_others() -> Value {
    json!({
        "facts": [
            {"content": "<@UALICE> keeps a cat called Miso", "keywords": ["cat"], "source_users": ["bob"], "confidence": 0.9, "shareable": false},
            {"content": "Alice is on leave next week", "keywords": ["leave"], "source_users": ["carol"], "confidence": 0.9, "shareable": false},
            {"content": "the team deploys on Mondays", "keywords": ["deploy"], "source_users": ["carol"], "confidence": 0.9, "shareable": false},
        ],
        "profiles": [],
    })
}

/// A reflection on what others said about Alice, stored after she was forgotten,
/// keeps nothing about her either, by her id or her display name: whether she only
/// was mentioned, or also spoke under the name Slack gives her messages (her id).
#[tokio::test]
async fn a_reflection_that_outlasts_a_forget_keeps_nothing_others_said_about_the_person() {
    let others = [
        ("UBOB", "bob", "<@UALICE> has a cat called Miso"),
        ("UCAROL", "carol", "she is on leave next week; we deploy on Mondays"),
    ];
    let she_spoke = [("UALICE", "UALICE", "see you all in two weeks"), others[0], others[1]];
    for (case, said) in [("mentioned only", &others[..]), ("spoke too", &she_spoke[..])] {
        let setting = ("REFLECTION_MIN_MESSAGES", "2");
        let (w, channel) =
            world_with_a_model_that_forgets_alice(setting, reflection_about_alice_from_others, said).await;
        let facts = reflect_now(&w, &channel).await;
        let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(contents, ["the team deploys on Mondays"], "{case}: nothing about her");
    }
}

/// `kuuki serve`: a forget request is answered while reflections wait for a model that
/// does not answer and hold every memory slot (forget requests have slots of their own,
/// as in AWS they have a queue and a concurrency of their own).
#[tokio::test]
async fn a_forget_is_answered_while_reflections_wait_for_the_model() {
    use kuuki::domain::Job;
    use kuuki::worker::Pool;
    use std::sync::atomic::Ordering;
    let llm = std::sync::Arc::new(CountsAndNeverAnswers::default());
    let w = SlackWorld::start_with(&[("REFLECTION_MIN_MESSAGES", "1")], true, Some(llm.clone())).await;
    slack_refuses_answers_then_takes_them(&w, 0, 0).await;
    // Something to reflect on in more channels than the memory pool has slots.
    let reflections = Pool::Memory.slots() + 1;
    for n in 0..reflections {
        let (channel, ts) = (format!("CREFLECT{n}"), w.ts(0, n as u32 + 1));
        w.send_event(message(&channel, "UBOB", "the deploy lock stalls staging", &ts), &[]).await;
        let reflect = Job::Reflect { channel: ChannelId(channel.as_str().into()), ts: kuuki::domain::Ts::new(&ts) };
        w.deps.queue.enqueue(reflect, std::time::Duration::ZERO).await.unwrap();
    }
    let workers = tokio::spawn(kuuki::worker::run_forever(w.deps.clone(), w.queue.clone()));
    for _ in 0..250 {
        if llm.0.load(Ordering::SeqCst) >= Pool::Memory.slots() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(llm.0.load(Ordering::SeqCst), Pool::Memory.slots(), "the reflections reached the model");
    // Alice asks to be forgotten; her answer comes while the model still keeps them.
    alice_says_something_then_forget_me(&w).await;
    let mut answers = Vec::new();
    for _ in 0..250 {
        answers = answers_sent(&w).await;
        if !answers.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let waiting = llm.0.load(Ordering::SeqCst);
    workers.abort();
    assert_eq!(answers.len(), 1, "the forget was answered: {answers:?}");
    assert!(answers[0]["text"].as_str().unwrap().starts_with("Forgotten you: 1 stored message(s)"), "{answers:?}");
    assert_eq!(waiting, Pool::Memory.slots(), "while every memory slot waited for the model");
}
