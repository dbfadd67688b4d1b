//! Proactive openers (issue 12): kuuki opens with a fresh shareable fact when a channel
//! comes back after a silence, once a day at most, backing off when nobody answers,
//! never outside working hours, and not again after a clear no.

use kuuki_e2e::{Log, RecordingLlm, Run};

const HOUR: f64 = 3600.0;

const SCRIPT: &str = r#"{"role": "reflect", "reply": {"facts": [{"content": "Spice Garden is the team's favourite curry shop", "keywords": ["curry", "lunch", "spice"], "source_users": ["alice"], "confidence": 0.9, "shareable": true}, {"content": "Friday is curry lunch day", "keywords": ["curry", "lunch", "friday"], "source_users": ["bob"], "confidence": 0.8, "shareable": true}, {"content": "bob's salary is private", "keywords": ["curry", "lunch"], "source_users": ["bob"], "confidence": 0.9, "shareable": false}], "profiles": []}}
{"role": "generate", "match": "opener:", "reply": "By the way, curry talk again? I remember something about that.", "repeat": true}
{"role": "summarize", "reply": {"summary": "lunch talk", "history": "", "mood": "calm", "topic_keywords": [], "active_users": []}, "repeat": true}
{"role": "reflect", "reply": {"facts": [], "profiles": []}, "repeat": true}
{"role": "judge", "reply": {"should_respond": false, "reason": "no need", "confidence": 0.7, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "Happy to help.", "repeat": true}"#;

const SETTINGS: &[(&str, &str)] = &[
    ("PROACTIVE_CONVERSATION_ENABLED", "true"),
    ("PROACTIVE_TIMEZONE", "UTC"),
    ("PROACTIVE_WORKING_HOURS", "9-18"),
    ("PROMPT_LANGUAGE", "en"),
];

fn line(t: f64, user: &str, text: &str) -> String {
    serde_json::json!({"t": t, "user": user, "text": text}).to_string()
}

/// kuuki answers a mention (so it is welcome), then a lunch chat it reflects on.
fn welcome_and_facts() -> Vec<String> {
    let mut lines = vec![line(0.0, "alice", "<@bot> good morning, what is on today?")];
    for i in 0..12 {
        let who = if i % 2 == 0 { "alice" } else { "bob" };
        lines.push(line(60.0 + f64::from(i) * 30.0, who, &format!("curry lunch plans, part {i}")));
    }
    lines
}

fn openers(log: &Log) -> Vec<&serde_json::Value> {
    log.kind("respond").into_iter().filter(|r| r["mode"] == "opener").collect()
}

fn no_opener_reasons(log: &Log) -> Vec<(f64, String)> {
    log.kind("dropped")
        .into_iter()
        .filter_map(|d| {
            let reason = d["reason"].as_str()?;
            reason.starts_with("no opener").then(|| (d["msg_t"].as_f64().unwrap(), reason.to_owned()))
        })
        .collect()
}

#[test]
fn an_opener_fires_once_a_day_backs_off_when_unanswered_and_stops_after_a_no() {
    let mut lines = welcome_and_facts();
    lines.extend([
        // Monday 12:00: the channel comes back after two hours; kuuki opens.
        line(3.0 * HOUR, "bob", "anyone up for curry lunch today?"),
        // Monday 15:00: back again; nobody answered the opener within half an hour, so
        // the wait for the next doubled from a day to two.
        line(6.0 * HOUR, "carol", "curry lunch again tomorrow?"),
        // Tuesday 12:00: still within the two days.
        line(27.0 * HOUR, "bob", "curry lunch on Tuesday?"),
        // Wednesday 13:00: two days on; a second fact, never the first again.
        line(52.0 * HOUR, "alice", "curry lunch, who is in?"),
        line(52.0 * HOUR + 300.0, "carol", "stop, not now please"),
        // Thursday 12:00: someone said no, so no more openers here.
        line(75.0 * HOUR, "bob", "curry lunch today?"),
    ]);
    let transcript = lines.join("\n");
    let llm = RecordingLlm::new(SCRIPT);
    let log = Run::new(&transcript).settings(SETTINGS).llm(llm.clone()).log();

    let opened = openers(&log);
    assert_eq!(opened.len(), 2, "{opened:?}\n{:?}", no_opener_reasons(&log));
    assert_eq!(opened[0]["msg_t"], 3.0 * HOUR);
    assert_eq!(opened[0]["text"], "By the way, curry talk again? I remember something about that.");
    assert_eq!(opened[0]["facts"][0]["content"], "Friday is curry lunch day");
    assert_eq!(opened[1]["msg_t"], 52.0 * HOUR);
    assert_eq!(
        opened[1]["facts"][0]["content"], "Spice Garden is the team's favourite curry shop",
        "a fact is shared once"
    );
    // The opener prompt carries the fact, never a fact that is not shareable.
    let prompts: Vec<String> =
        llm.requests().into_iter().filter(|r| r.subject.starts_with("opener:")).map(|r| r.prompt()).collect();
    assert_eq!(prompts.len(), 2);
    assert!(prompts[0].contains("Friday is curry lunch day"), "{}", prompts[0]);
    assert!(prompts.iter().all(|p| !p.contains("salary")));

    let reasons = no_opener_reasons(&log);
    let reason_at = |t: f64| reasons.iter().find(|(at, _)| *at == t).map(|(_, r)| r.as_str()).unwrap_or("(none)");
    // The opener went out at 12:02:20 (the question's two-minute wait, then a pause).
    assert_eq!(reason_at(6.0 * HOUR), "no opener: the next opener waits until 2026-01-07 12:02:20 UTC", "{reasons:?}");
    assert_eq!(reason_at(27.0 * HOUR), "no opener: the next opener waits until 2026-01-07 12:02:20 UTC");
    assert!(reason_at(75.0 * HOUR).contains("someone asked kuuki to stop"), "{reasons:?}");
}

#[test]
fn no_opener_outside_working_hours_where_kuuki_was_never_welcome_or_when_off() {
    // Monday 20:00 UTC: after hours.
    let mut late = welcome_and_facts();
    late.push(line(11.0 * HOUR, "bob", "curry lunch tomorrow?"));
    let log = Run::new(&late.join("\n")).settings(SETTINGS).llm(RecordingLlm::new(SCRIPT)).log();
    assert!(openers(&log).is_empty());
    assert_eq!(no_opener_reasons(&log), vec![(11.0 * HOUR, "no opener: outside working hours".to_owned())]);

    // The same comeback at noon in Tokyo's working hours is 03:00 UTC: in hours there.
    let tokyo: Vec<(&str, &str)> =
        SETTINGS.iter().map(|(k, v)| if *k == "PROACTIVE_TIMEZONE" { (*k, "Asia/Tokyo") } else { (*k, *v) }).collect();
    let mut tokyo_noon = welcome_and_facts();
    tokyo_noon.push(line(18.0 * HOUR, "bob", "curry lunch today?"));
    let log = Run::new(&tokyo_noon.join("\n")).settings(&tokyo).llm(RecordingLlm::new(SCRIPT)).log();
    assert_eq!(openers(&log).len(), 1, "{:?}", no_opener_reasons(&log));

    // kuuki never took part here: not welcome.
    let mut unwelcome = welcome_and_facts();
    unwelcome.remove(0);
    unwelcome.push(line(3.0 * HOUR, "bob", "anyone up for curry lunch today?"));
    let log = Run::new(&unwelcome.join("\n")).settings(SETTINGS).llm(RecordingLlm::new(SCRIPT)).log();
    assert!(openers(&log).is_empty());
    assert!(no_opener_reasons(&log)[0].1.contains("has not taken part here"), "{:?}", no_opener_reasons(&log));

    // Off by default: not even considered.
    let mut off = welcome_and_facts();
    off.push(line(3.0 * HOUR, "bob", "anyone up for curry lunch today?"));
    let log = Run::new(&off.join("\n")).settings(&[("PROMPT_LANGUAGE", "en")]).llm(RecordingLlm::new(SCRIPT)).log();
    assert!(openers(&log).is_empty());
    assert!(no_opener_reasons(&log).is_empty());
}

#[test]
fn an_answered_opener_keeps_the_wait_at_a_day() {
    let mut lines = welcome_and_facts();
    lines.extend([
        line(3.0 * HOUR, "bob", "anyone up for curry lunch today?"),
        // After the question's wait and the opener's pause: an answer to the opener.
        line(3.0 * HOUR + 300.0, "alice", "oh nice, I love that place"),
        // Monday 15:00: one opener a day, even an answered one.
        line(6.0 * HOUR, "carol", "curry lunch plans for later?"),
        // Tuesday 13:00: answered, so a day later is fine.
        line(28.0 * HOUR, "bob", "curry lunch again?"),
    ]);
    let log = Run::new(&lines.join("\n")).settings(SETTINGS).llm(RecordingLlm::new(SCRIPT)).log();
    let opened = openers(&log);
    assert_eq!(opened.len(), 2, "{:?}", no_opener_reasons(&log));
    assert_eq!(opened[1]["msg_t"], 28.0 * HOUR);
    assert_eq!(
        no_opener_reasons(&log),
        vec![(6.0 * HOUR, "no opener: the next opener waits until 2026-01-06 12:02:20 UTC".to_owned())]
    );
}

/// The opener's post went out but its answer was lost (a timeout after the platform
/// posted): the redelivered job finds the post instead of opening twice, and notes it.
#[tokio::test]
async fn an_opener_whose_answer_was_lost_is_found_not_posted_again() {
    use kuuki::adapters::memory::ChatCall;
    use kuuki::domain::ChannelId;
    use kuuki::ingest::Incoming;
    use kuuki::ports::ChannelStateStore;
    use kuuki_e2e::harness::Harness;

    let h = Harness::with_llm(SETTINGS, Some(RecordingLlm::new(SCRIPT)));
    h.ingest(Incoming::Message(h.message(0.0, "alice", "<@UBOT> good morning, what is on today?", None))).await;
    for i in 0..12 {
        let who = if i % 2 == 0 { "alice" } else { "bob" };
        let m = h.message(60.0 + f64::from(i) * 30.0, who, &format!("curry lunch plans, part {i}"), None);
        h.ingest(Incoming::Message(m)).await;
    }
    h.run_until(2000.0).await;
    h.chat.lose_next_answers(1);
    h.ingest(Incoming::Message(h.message(3.0 * HOUR, "bob", "anyone up for curry lunch today?", None))).await;
    h.run_until_expecting(5.0 * HOUR, 1).await;

    let openers: Vec<_> = h
        .chat
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            ChatCall::Post { post, ts } if post.tag.as_deref().is_some_and(|t| t.starts_with("open:")) => Some(ts),
            _ => None,
        })
        .collect();
    assert_eq!(openers.len(), 1, "posted once, found by the redelivery");
    let opener = h.store.channel_state(&ChannelId("general".into())).await.unwrap().opener.clone();
    assert_eq!(opener.shared_facts.len(), 1, "{opener:?}");
    assert_eq!(opener.pending.as_ref(), Some(&openers[0]), "the found post is the one awaiting answers");
}
