//! People and privacy (issue 12), as a user meets them in a replay: commands run as a
//! person, what kuuki remembers of whom, and where.

use kuuki_e2e::Run;

#[test]
fn a_transcript_command_runs_as_its_user_and_its_answer_is_logged() {
    let log = Run::new(
        r#"{"t": 0, "user": "alice", "text": "デプロイ終わりました"}
{"t": 60, "user": "bob", "command": "/kuuki mute 30", "channel": "random"}
{"t": 120, "user": "alice", "command": "/kuuki status", "channel": "random"}"#,
    )
    .settings(&[("COMMAND_MANAGERS", "bob")])
    .log();
    let commands = log.kind("command");
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert_eq!(commands[0]["user"], "bob");
    assert_eq!(commands[0]["channel"], "random");
    assert_eq!(commands[0]["command"], "/kuuki mute 30");
    assert_eq!(commands[0]["t"], 60.0);
    let muted = commands[0]["answer"].as_str().unwrap();
    assert!(muted.starts_with("Muted here until 2026-01-05 09:31"), "{muted}");
    let status = commands[1]["answer"].as_str().unwrap();
    assert!(status.contains("muted until 2026-01-05 09:31"), "the mute held: {status}");
    assert_eq!(log.stats()["messages"], 1, "commands are not messages");
}

use kuuki::ports::LlmRole;
use kuuki_e2e::RecordingLlm;

/// Memory answers for any channel: a summary naming who spoke, no facts unless a test
/// scripts them first.
const MEMORY_SCRIPT: &str = r#"{"role": "summarize", "reply": {"summary": "people talked", "history": "", "mood": "calm", "topic_keywords": [], "active_users": []}, "repeat": true}
{"role": "reflect", "reply": {"facts": [], "profiles": []}, "repeat": true}
{"role": "judge", "reply": {"should_respond": false, "reason": "no need", "confidence": 0.7, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "はい、わかりました。", "repeat": true}"#;

fn prompts(llm: &RecordingLlm, role: LlmRole) -> Vec<String> {
    llm.requests().into_iter().filter(|r| r.role == role).map(|r| r.prompt()).collect()
}

/// A transcript line as JSON text.
fn line(t: f64, user: &str, text: &str, channel: &str) -> String {
    serde_json::json!({"t": t, "user": user, "text": text, "channel": channel}).to_string()
}

#[test]
fn familiarity_rises_with_the_messages_seen_and_the_tone_follows() {
    let mut lines = vec![line(0.0, "alice", "<@bot> はじめまして、デプロイの手順を教えてください", "general")];
    // Forty messages over three days: alice becomes a regular (31-100).
    for i in 0..40 {
        lines.push(line(
            3600.0 + f64::from(i) * 5400.0,
            "alice",
            &format!("作業メモ {i}: ビルドを直しています"),
            "general",
        ));
    }
    lines.push(line(3.0 * 86_400.0, "alice", "<@bot> 今日もよろしく", "general"));
    let transcript = lines.join("\n");
    let llm = RecordingLlm::new(MEMORY_SCRIPT);
    let log = Run::new(&transcript).settings(&[("PROMPT_LANGUAGE", "en")]).llm(llm.clone()).log();
    assert_eq!(log.kind("respond").len(), 2, "both mentions answered");
    let generated = prompts(&llm, LlmRole::Generate);
    assert_eq!(generated.len(), 2);
    assert!(generated[0].contains("You have hardly talked with them yet (1 messages)"), "{}", generated[0]);
    assert!(generated[1].contains("A regular you talk with often (42 messages)"), "{}", generated[1]);
    assert!(!generated[1].contains("hardly talked"), "{}", generated[1]);
    // What she spoke of is remembered here, for the next answer.
    assert!(generated[1].contains("Topics they brought up before: デプロイ"), "{}", generated[1]);
    assert!(!generated[1].contains("Topics they brought up before: bot"), "a mention is not a topic");

    // Off: no profile, no tone.
    let llm = RecordingLlm::new(MEMORY_SCRIPT);
    Run::new(&transcript)
        .settings(&[("PROMPT_LANGUAGE", "en"), ("USER_PROFILE_ENABLED", "false")])
        .llm(llm.clone())
        .log();
    assert!(prompts(&llm, LlmRole::Generate).iter().all(|p| !p.contains("The person you answer")));
}

/// Reflection on the private channel learns a fact and a note about alice.
const PRIVATE_SCRIPT: &str = r#"{"role": "reflect", "match": "dm-alice", "reply": {"facts": [{"content": "alice's secret project is Phoenix", "keywords": ["phoenix", "project"], "source_users": ["alice"], "confidence": 0.9, "shareable": true}], "profiles": [{"user": "alice", "tags": ["phoenix-lead"], "summary": "planning the Phoenix launch in secret"}]}}
"#;

#[test]
fn what_is_learned_in_a_private_channel_never_reaches_a_public_reply() {
    let mut lines = Vec::new();
    for i in 0..12 {
        lines.push(
            serde_json::json!({"t": f64::from(i) * 30.0, "user": "alice", "channel": "dm-alice", "private": true,
                "text": format!("phoenix project note {i}: the launch plan")})
            .to_string(),
        );
    }
    // After the lull the private channel is reflected on; then alice asks in both places.
    lines.push(line(3600.0, "alice", "<@bot> what do you know about the phoenix project?", "general"));
    lines.push(line(3700.0, "alice", "<@bot> what do you know about the phoenix project?", "dm-alice"));
    // Why kuuki answered as it did: the facts it was given, where it was given any.
    for channel in ["dm-alice", "general"] {
        lines.push(
            serde_json::json!({"t": 3800.0, "user": "alice", "command": "/kuuki why", "channel": channel}).to_string(),
        );
    }
    let transcript = lines.join("\n");
    let llm = RecordingLlm::new(&format!("{PRIVATE_SCRIPT}{MEMORY_SCRIPT}"));
    let log = Run::new(&transcript).settings(&[("PROMPT_LANGUAGE", "en")]).llm(llm.clone()).log();
    assert_eq!(log.kind("reflect")[0]["facts_new"], 1, "{:?}", log.kind("reflect"));
    let responds = log.kind("respond");
    assert_eq!(responds.len(), 2);
    let generated = prompts(&llm, LlmRole::Generate);
    let (public, private) = (&generated[0], &generated[1]);
    for secret in ["secret project is Phoenix", "phoenix-lead", "planning the Phoenix launch"] {
        assert!(!public.contains(secret), "{secret:?} reached #general:\n{public}");
        // The control: in the private channel itself kuuki does remember.
        assert!(private.contains(secret), "{secret:?} missing in the private channel:\n{private}");
    }
    assert_eq!(responds[0]["channel"], "general");
    assert!(responds[0].get("facts").is_none(), "no facts given in #general: {}", responds[0]);
    assert_eq!(responds[1]["facts"][0]["content"], "alice's secret project is Phoenix", "{}", responds[1]);
    let whys: Vec<&str> = log.kind("command").iter().map(|c| c["answer"].as_str().unwrap()).collect();
    assert!(
        whys[0].contains("given these facts:\n- alice's secret project is Phoenix (score "),
        "/kuuki why in the DM: {}",
        whys[0]
    );
    assert!(whys[1].contains("no remembered facts were used."), "/kuuki why in #general: {}", whys[1]);
    assert!(!whys[1].contains("Phoenix"), "{}", whys[1]);
    // The workspace memory and the other channels never hear of it either.
    let elsewhere: Vec<_> = llm.requests().into_iter().filter(|r| !r.subject.contains("dm-alice")).collect();
    assert!(elsewhere.iter().any(|r| r.subject == "summary of general"), "general was summarized");
    for r in elsewhere.iter().filter(|r| r.role != LlmRole::Generate) {
        let prompt = r.prompt();
        assert!(!prompt.contains("phoenix project note") && !prompt.contains("Phoenix launch"), "{prompt}");
    }
}

const FORGET_SCRIPT: &str = r#"{"role": "reflect", "reply": {"facts": [{"content": "alice loves curry on Fridays", "keywords": ["curry", "fridays"], "source_users": ["alice"], "messages": [1], "confidence": 0.9, "shareable": true}, {"content": "the team deploys on Mondays", "keywords": ["deploys", "mondays"], "source_users": ["alice", "bob"], "confidence": 0.9, "shareable": true}], "profiles": [{"user": "alice", "tags": ["curry-fan"], "summary": "talks about lunch"}, {"user": "bob", "tags": ["deployer"], "summary": "runs deploys"}]}}
"#;

#[test]
fn forget_me_removes_a_person_from_every_later_reply_and_every_store() {
    let mut lines = Vec::new();
    for i in 0..6 {
        let t = f64::from(i) * 60.0;
        lines.push(line(t, "alice", &format!("curry on fridays is the best lunch {i}"), "general"));
        lines.push(line(t + 30.0, "bob", &format!("we deploys on mondays, checklist item {i}"), "general"));
    }
    lines.push(line(1000.0, "bob", "<@bot> any curry plans for fridays?", "general"));
    lines.push(serde_json::json!({"t": 90_000.0, "user": "alice", "command": "/kuuki forget-me"}).to_string());
    lines.push(line(90_100.0, "bob", "<@bot> any curry plans for fridays? and mondays deploys?", "general"));
    lines.push(serde_json::json!({"t": 95_000.0, "user": "alice", "command": "/kuuki memory"}).to_string());
    let transcript = lines.join("\n");
    let llm = RecordingLlm::new(&format!("{FORGET_SCRIPT}{MEMORY_SCRIPT}"));
    let log = Run::new(&transcript).settings(&[("PROMPT_LANGUAGE", "en")]).llm(llm.clone()).log();

    let generated = prompts(&llm, LlmRole::Generate);
    assert_eq!(generated.len(), 2);
    // The control: before, kuuki remembered alice.
    assert!(generated[0].contains("alice loves curry on Fridays"), "{}", generated[0]);
    assert!(generated[0].contains("curry on fridays is the best lunch"), "{}", generated[0]);
    // After: not her fact, not her messages; the fact bob shares stays.
    assert!(!generated[1].contains("alice loves curry"), "{}", generated[1]);
    assert!(!generated[1].contains("best lunch"), "{}", generated[1]);
    assert!(generated[1].contains("the team deploys on Mondays"), "{}", generated[1]);

    let forget = log.kind("forget");
    assert_eq!(forget.len(), 1, "{forget:?}");
    assert_eq!(forget[0]["user"], "alice");
    assert_eq!(forget[0]["messages"], 6);
    assert_eq!(forget[0]["facts_removed"], 1);
    assert_eq!(forget[0]["facts_edited"], 1);
    assert_eq!(forget[0]["notes"], 1);
    assert_eq!(forget[0]["summaries"], 1);
    let commands = log.kind("command");
    let answer = commands[0]["answer"].as_str().unwrap();
    assert!(answer.starts_with("Forgotten you: 6 stored message(s), 1 fact(s) removed"), "{answer}");
    // The channel's summary was made anew without her.
    let summaries: Vec<_> = llm
        .requests()
        .into_iter()
        .filter(|r| r.role == LlmRole::Summarize && r.subject == "summary of general")
        .collect();
    // The first summary starts from nothing; the one made anew after the forget does too.
    let from_scratch: Vec<_> = summaries.iter().filter(|r| r.user.contains("Recent flow: (none)")).collect();
    assert_eq!(from_scratch.len(), 2, "the first summary and the one made anew");
    let remade = from_scratch[1];
    assert!(!remade.prompt().contains("best lunch"), "{}", remade.prompt());
    assert!(remade.user.contains("checklist item"), "bob's messages are summarized: {}", remade.user);
    assert!(log.kind("summary").iter().any(|s| s["t"].as_f64().unwrap() >= 90_000.0), "a summary after the forget");
    // What kuuki remembers of her now.
    let memory = commands[1]["answer"].as_str().unwrap();
    assert!(memory.contains("About you: 0 message(s) seen"), "{memory}");
    assert!(memory.contains("Nothing noted about you in this channel."), "{memory}");
    assert!(!memory.contains("alice loves curry"), "{memory}");
    assert!(memory.contains("the team deploys on Mondays (weight"), "{memory}");
    assert!(memory.contains("from bob)"), "alice is no longer a source: {memory}");
}

#[tokio::test]
async fn a_deleted_message_takes_the_facts_it_alone_taught_with_it() {
    use kuuki::domain::{ChannelId, EventKind};
    use kuuki::ingest::Incoming;
    use kuuki::ports::FactStore;
    use kuuki_e2e::harness::Harness;

    let script = r#"{"role": "reflect", "reply": {"facts": [{"content": "alice has a cat named Miso", "keywords": ["cat", "miso"], "source_users": ["alice"], "messages": [1], "confidence": 0.9, "shareable": true}, {"content": "bob moved to Osaka", "keywords": ["osaka"], "source_users": ["bob"], "messages": [2, 3], "confidence": 0.9, "shareable": true}], "profiles": []}}"#;
    let llm = RecordingLlm::new(&format!("{script}\n{MEMORY_SCRIPT}"));
    let h = Harness::with_llm(&[], Some(llm));
    let mut sent = Vec::new();
    for i in 0..12 {
        let (user, text) = match i {
            0 => ("alice", "my cat Miso knocked over the monitor".to_owned()),
            1 => ("bob", "I moved to Osaka last week".to_owned()),
            2 => ("bob", "Osaka has great food".to_owned()),
            _ => (if i % 2 == 0 { "alice" } else { "bob" }, format!("small talk {i}")),
        };
        let m = h.message(f64::from(i) * 20.0, user, &text, None);
        sent.push(m.ts.clone());
        h.ingest(Incoming::Message(m)).await;
    }
    h.run_until(2000.0).await;
    let general = ChannelId("general".into());
    let contents =
        || async { h.store.facts(&general).await.unwrap().into_iter().map(|f| f.content).collect::<Vec<_>>() };
    let mut learned = contents().await;
    learned.sort();
    assert_eq!(learned, ["alice has a cat named Miso", "bob moved to Osaka"]);
    h.events();

    h.ingest(Incoming::Deleted { channel: general.clone(), ts: sent[0].clone() }).await;
    assert_eq!(contents().await, ["bob moved to Osaka"], "its only source is gone");
    let forgets: Vec<_> = h.events().into_iter().filter(|e| matches!(e.kind, EventKind::Forget { .. })).collect();
    assert_eq!(forgets.len(), 1);
    assert!(matches!(forgets[0].kind, EventKind::Forget { user: None, facts_removed: 1, facts_edited: 0, .. }));

    // One of two sources deleted: the fact stays, learned from the other.
    h.ingest(Incoming::Deleted { channel: general.clone(), ts: sent[1].clone() }).await;
    let facts = h.store.facts(&general).await.unwrap();
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].source_messages, vec![sent[2].clone()]);
    // A redelivered delete changes nothing more; the last source takes the fact.
    h.ingest(Incoming::Deleted { channel: general.clone(), ts: sent[1].clone() }).await;
    assert_eq!(h.store.facts(&general).await.unwrap().len(), 1);
    h.ingest(Incoming::Deleted { channel: general.clone(), ts: sent[2].clone() }).await;
    assert!(h.store.facts(&general).await.unwrap().is_empty());
}

#[test]
fn forgetting_someone_else_is_for_managers_and_everyone_is_told_what_was_removed() {
    let transcript = [
        line(0.0, "alice", "my cat Miso likes boxes", "general"),
        line(10.0, "alice", "and tuna", "general"),
        serde_json::json!({"t": 60.0, "user": "bob", "command": "/kuuki forget <@alice>"}).to_string(),
        serde_json::json!({"t": 70.0, "user": "carol", "command": "/kuuki forget"}).to_string(),
        serde_json::json!({"t": 80.0, "user": "carol", "command": "/kuuki forget <@alice>"}).to_string(),
        serde_json::json!({"t": 90.0, "user": "carol", "command": "/kuuki forget <@alice>"}).to_string(),
    ]
    .join("\n");
    let log = Run::new(&transcript).settings(&[("COMMAND_MANAGERS", "carol")]).log();
    let answers: Vec<&str> = log.kind("command").iter().map(|c| c["answer"].as_str().unwrap()).collect();
    assert!(answers[0].starts_with("Sorry, only workspace admins and owners, and <@carol>"), "{}", answers[0]);
    assert!(answers[1].starts_with("Whom should kuuki forget?"), "{}", answers[1]);
    assert!(answers[2].starts_with("Forgotten <@alice>: 2 stored message(s)"), "{}", answers[2]);
    assert_eq!(answers[3], "kuuki had nothing stored about <@alice>.", "the second time finds nothing");
    let forgets = log.kind("forget");
    assert_eq!(forgets.len(), 2, "bob's refused request forgot nothing: {forgets:?}");
    assert_eq!(forgets[0]["user"], "alice");
    assert_eq!(forgets[0]["messages"], 2);
}

#[test]
fn notes_about_a_person_stay_in_the_public_channel_they_were_learned_in() {
    let script = r#"{"role": "reflect", "match": "dev", "reply": {"facts": [], "profiles": [{"user": "alice", "tags": ["rust-expert"], "summary": "debugging the borrow checker"}]}}
"#;
    let mut lines = Vec::new();
    for i in 0..12 {
        lines.push(line(f64::from(i) * 30.0, "alice", &format!("lifetimes again, attempt {i}"), "dev"));
    }
    lines.push(line(3600.0, "alice", "<@bot> any tips?", "random"));
    lines.push(line(3700.0, "alice", "<@bot> any tips?", "dev"));
    let llm = RecordingLlm::new(&format!("{script}{MEMORY_SCRIPT}"));
    let log = Run::new(&lines.join("\n")).settings(&[("PROMPT_LANGUAGE", "en")]).llm(llm.clone()).log();
    assert_eq!(log.kind("reflect")[0]["profiles"], 1, "{:?}", log.kind("reflect"));
    let generated = prompts(&llm, LlmRole::Generate);
    assert_eq!(generated.len(), 2);
    assert!(!generated[0].contains("rust-expert"), "#dev's note reached #random:\n{}", generated[0]);
    assert!(!generated[0].contains("borrow checker"), "{}", generated[0]);
    assert!(generated[1].contains("Traits: rust-expert"), "{}", generated[1]);
    assert!(generated[1].contains("Last time: debugging the borrow checker"), "{}", generated[1]);
}

/// A message counts once in its writer's profile, however often it is delivered: a
/// double delivery and a platform retry find it stored and count nothing.
#[tokio::test]
async fn a_redelivered_message_counts_once_in_the_profile() {
    use kuuki::domain::UserId;
    use kuuki::ingest::{Incoming, ingest_retry};
    use kuuki::ports::FactStore;
    use kuuki_e2e::harness::Harness;

    let h = Harness::new(&[]);
    let m = h.message(0.0, "alice", "<@UBOT> hello", None);
    h.ingest(Incoming::Message(m.clone())).await;
    h.ingest(Incoming::Message(m.clone())).await;
    ingest_retry(&h.deps, Incoming::Message(m)).await.unwrap();
    h.ingest(Incoming::Message(h.message(10.0, "alice", "and another", None))).await;
    let profile =
        h.store.profile(kuuki::domain::Workspace::Shared, &UserId("alice".into())).await.unwrap().expect("counted");
    assert_eq!((profile.interactions, profile.bot_mentions), (2, 1));
}
