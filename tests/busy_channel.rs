//! Judgment in busy channels (issue 34) as a user meets it: a transcript in, the
//! decision log out. Several conversations interleave; people answer by name prefix.

use kuuki_e2e::Run;

/// A judge that takes up anything it is asked about, and a writer that always answers:
/// what these tests look at is whether the LLM is asked at all.
const YES: &str = r#"{"role": "judge", "reply": {"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "here is what I know", "repeat": true}"#;

/// Someone else's name call earlier in the channel does not make a later question
/// kuuki's: the question is still open, counted unanswered and put to the LLM.
#[test]
fn a_name_call_earlier_in_the_window_leaves_later_questions_open() {
    let log = Run::new(
        r#"{"t": 0, "user": "bob", "text": "kuuki, any curry place near the office?"}
{"t": 40, "user": "dave", "text": "the one by the station is good"}
{"t": 300, "user": "erin", "text": "back from lunch"}
{"t": 960, "user": "carol", "text": "does anyone know where the spare HDMI cable went?"}"#,
    )
    .script(YES)
    .settings(&[("JUDGE_JITTER_RATIO", "0")])
    .log();
    let judges = log.about("judge", 960.0);
    let last = judges.last().expect("carol's question is judged");
    assert_eq!(last["breakdown"]["no_mention"], -10, "{log:?}");
    assert_eq!(last["breakdown"]["unanswered_question"], 25, "{log:?}");
    assert_eq!(last["decision"], "llm", "{log:?}");
    assert_eq!(log.about("respond", 960.0).len(), 1, "{log:?}");
}

/// `nick: text` addresses that person as `<@nick>` would, even when they last spoke
/// further back than the judge's window of the conversation: the question is theirs
/// and the LLM is not asked.
#[test]
fn a_question_called_by_nick_is_that_persons() {
    let mut lines = vec![r#"{"t": 0, "user": "bob", "text": "I'll look at the vpn after lunch"}"#.to_owned()];
    for i in 1..=20 {
        let (user, text) = if i % 2 == 0 { ("carol", "the release notes need a line") } else { ("dave", "on it") };
        lines.push(format!(r#"{{"t": {}, "user": "{user}", "text": "{text} {i}"}}"#, i * 30));
    }
    lines.push(r#"{"t": 900, "user": "alice", "text": "bob: is the vpn up again?"}"#.to_owned());
    lines.push(r#"{"t": 1000, "user": "erin", "text": "erin here\ndave, is the build green?"}"#.to_owned());
    let transcript = lines.join("\n");
    let log = Run::new(&transcript).script(YES).settings(&[("JUDGE_JITTER_RATIO", "0")]).log();
    for (t, who) in [(900.0, "bob"), (1000.0, "dave")] {
        let judge = log.about("judge", t)[0];
        assert_eq!(judge["breakdown"]["addressed_to_other"], -60, "{t}: {log:?}");
        assert!(judge["reason"].as_str().unwrap().contains(&format!("for {who}")), "{judge}");
        assert_eq!(judge["llm_called"], false, "{judge}");
        // Theirs for ADDRESSED_TO_OTHER_WAIT_MINUTES: nothing from kuuki before that.
        let early = log.about("respond", t).iter().filter(|r| r["t"].as_f64().unwrap() < t + 3600.0).count();
        assert_eq!(early, 0, "{log:?}");
    }
}

/// On Slack a message carries the person's id, not their name: a `Name: …` call is
/// read against the display names (users.info; the fake names everyone "Alice").
#[tokio::test]
async fn on_slack_a_nick_call_is_read_against_display_names() {
    use kuuki::domain::EventKind;
    use kuuki_e2e::slack_world::{SlackWorld, message};
    let w = SlackWorld::start(&[("JUDGE_JITTER_RATIO", "0")], true).await;
    w.send_event(message("C0GENERAL", "UBOB", "morning", &w.ts(0, 1)), &[]).await;
    w.run_for(60.0).await;
    let asked = w.ts(60, 1);
    w.send_event(message("C0GENERAL", "UCAROL", "Alice: is the deploy done?", &asked), &[]).await;
    w.run_for(60.0).await;
    let judged: Vec<_> = w
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Judge { breakdown, reason, .. } if e.ts.as_str() == asked => Some((breakdown, reason)),
            _ => None,
        })
        .collect();
    let (breakdown, reason) = judged.first().expect("carol's question is judged");
    assert_eq!(breakdown.get("addressed_to_other"), Some(&-60), "{judged:?}");
    assert!(reason.contains("for alice"), "{reason}");
    let lookups = w.slack_api.received_requests().await.unwrap();
    assert!(lookups.iter().any(|r| r.url.path() == "/users.info"), "the names were looked up");
}
