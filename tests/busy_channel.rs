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

/// The judge's prompt for `transcript`'s last line, fences named alike, as a snapshot
/// shows it.
fn judge_prompt(language: &str, transcript: &str) -> String {
    // Only the last line is taken up: other questions in the channel are left be, so
    // the prompt shows no answer of kuuki's to them.
    let last: serde_json::Value = serde_json::from_str(transcript.lines().last().unwrap()).unwrap();
    let subject = last["text"].as_str().unwrap();
    let script = format!(
        r#"{{"role": "judge", "match": {}, "reply": {{"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}}, "repeat": true}}
{{"role": "judge", "reply": {{"should_respond": false, "reason": "not for kuuki", "confidence": 0.9, "conversation_state": "active"}}, "repeat": true}}
{{"role": "generate", "reply": "here is what I know", "repeat": true}}"#,
        serde_json::Value::from(subject)
    );
    let llm = kuuki_e2e::RecordingLlm::new(&script);
    let settings = [("JUDGE_JITTER_RATIO", "0"), ("PROMPT_LANGUAGE", language)];
    let log = Run::new(transcript).llm(llm.clone()).settings(&settings).log();
    // The last line's judgment (its pick-up's); other questions in the channel have theirs.
    let judged = llm
        .requests()
        .into_iter()
        .filter(|r| r.role == kuuki::ports::LlmRole::Judge && r.subject.contains(subject))
        .collect::<Vec<_>>();
    assert_eq!(judged.len(), 1, "{log:?}");
    let user = &judged[0].user;
    // The fence's name is drawn per prompt.
    let fence_at = user.find("<conversation-").expect("a fenced conversation") + "<conversation-".len();
    let fence = &user[fence_at..fence_at + 6];
    user.replace(&format!("conversation-{fence}"), "conversation-XXXXXX")
}

/// A question in a busy channel is judged on its own lines: the asker's, the answers
/// that name them, the lines of the person they called; the standup chatter of two
/// others is left out.
#[test]
fn the_judge_sees_the_questions_own_lines_in_a_busy_channel() {
    let prompt = judge_prompt(
        "en",
        r#"{"t": 0, "user": "priya", "text": "tom: is the CI runner fixed?"}
{"t": 20, "user": "dave", "text": "standup notes are in the doc"}
{"t": 30, "user": "tom", "text": "not yet, maybe tomorrow"}
{"t": 40, "user": "erin", "text": "dave: did you add the db item?"}
{"t": 50, "user": "dave", "text": "erin: yes, under blockers"}
{"t": 60, "user": "erin", "text": "priya: there is a spare runner label, ci-spare"}
{"t": 70, "user": "dave", "text": "lunch at noon?"}
{"t": 90, "user": "priya", "text": "is there a way to make pytest show print output while the tests run?"}"#,
    );
    let judged = prompt.split("## The conversation to judge").nth(1).expect("the section");
    for kept in ["tom: is the CI runner", "not yet, maybe tomorrow", "priya: there is a spare runner", "pytest show"] {
        assert!(judged.contains(kept), "{kept}: {prompt}");
    }
    for left_out in ["standup notes", "did you add the db item", "under blockers", "lunch at noon"] {
        assert!(!judged.contains(left_out), "{left_out}: {prompt}");
    }
    insta::assert_snapshot!("judge_en_busy_own_lines", prompt);
}

#[test]
fn japanese_judge_prompt_of_a_question_in_a_busy_channel() {
    let prompt = judge_prompt(
        "ja",
        r#"{"t": 0, "user": "ken", "text": "yui: ステージングの証明書って更新した？"}
{"t": 20, "user": "sato", "text": "朝会のメモ、ドキュメントに貼りました"}
{"t": 30, "user": "yui", "text": "まだです、午後やります"}
{"t": 40, "user": "mio", "text": "sato: 来週の当番表もありますか"}
{"t": 50, "user": "sato", "text": "mio: 入れときました"}
{"t": 70, "user": "mio", "text": "お昼どこ行きます？"}
{"t": 90, "user": "ken", "text": "Rust で serde の flatten を enum に使うとエラーになるんですが、回避策ありますか"}"#,
    );
    let judged = prompt.split("## 判断対象の会話").nth(1).expect("the section");
    assert!(judged.contains("まだです、午後やります") && judged.contains("serde の flatten"), "{prompt}");
    assert!(!judged.contains("朝会のメモ") && !judged.contains("お昼どこ"), "{prompt}");
    insta::assert_snapshot!("judge_ja_busy_own_lines", prompt);
}

/// A quiet channel's question is judged against the whole flow: one other person's
/// lines may be the asker's own talk, names or not.
#[test]
fn a_question_with_one_other_person_around_is_judged_on_the_whole_flow() {
    let prompt = judge_prompt(
        "en",
        r#"{"t": 0, "user": "priya", "text": "the nightly build failed again"}
{"t": 30, "user": "tom", "text": "which job?"}
{"t": 90, "user": "priya", "text": "the migration one. any idea why it would time out only at night?"}"#,
    );
    assert!(prompt.contains("which job?"), "{prompt}");
    assert!(prompt.contains("## The conversation to judge (the channel)"), "{prompt}");
}
