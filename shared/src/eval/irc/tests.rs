//! A hand-made log through the whole measure: parsed, replayed with the reference's
//! script and settings, scored.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::adapters::llm::ScriptedLlm;
use crate::config::Settings;

fn options() -> ReplayOptions {
    let vars: HashMap<String, String> = SETTINGS
        .iter()
        .map(|pair| pair.split_once('=').expect("KEY=VALUE"))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let settings = Settings::from_vars(&vars).unwrap().for_llm(true);
    let persona = settings.persona(None);
    let llm = Arc::new(ScriptedLlm::parse(POLICY).unwrap());
    ReplayOptions { settings, persona, llm: Some(llm), embedder: None, seed: SEED }
}

/// A log of `lines` from line 900 (system lines before, as a log's unreplayed past).
fn log(lines: &[&str], annotation: &str) -> IrcLog {
    let mut text: Vec<&str> = vec!["=== someone joined #ubuntu"; transcript::CONTEXT_FROM];
    text.extend_from_slice(lines);
    IrcLog::parse("hand-made", &text.join("\n"), annotation).unwrap()
}

#[tokio::test]
async fn an_answered_question_is_left_to_its_answer_and_a_hanging_one_is_picked_up() {
    let mut lines = vec!["[10:00] <alice> morning all"];
    lines.extend(std::iter::repeat_n("=== bob joined #ubuntu", 99));
    lines.extend([
        // 1000: answered at once by carol (1001).
        "[10:05] <bob> how do I mount a usb stick?",
        "[10:05] <carol> bob: sudo mount /dev/sdb1 /mnt",
        "[10:05] <bob> carol: thanks",
        // 1003: nobody answers it, and the channel goes on for half an hour.
        "[10:10] <dave> why does apt hang at 99% on my laptop?",
        "[10:20] <erin> lunch soon",
        "[10:40] <frank> back",
        // 1006: too close to the end to be hanging.
        "[10:41] <gina> anyone else on 24.04?",
    ]);
    let run = run_log(&log(&lines, "1000 1001 -\n1001 1002 -\n1003 1003 -\n"), options()).await.unwrap();
    let c = run.counts;
    assert_eq!((c.messages, c.answered_qs, c.hanging_qs), (8, 1, 1));
    assert_eq!((c.barge_ins, c.pick_ups), (0, 1), "{run:?}");
    assert_eq!(run.pick_ups[0].line, 1003);
    assert!(c.posts >= 1 && c.llm_judge_calls >= 1, "{c:?}");
}

#[tokio::test]
async fn a_log_without_chat_or_with_a_clock_going_back_is_not_replayed() {
    let err = run_log(&log(&["=== nobody here"], ""), options()).await.unwrap_err();
    assert!(matches!(err, IrcError::NoMessages { from: 900, until: 1500 }), "{err}");
    // The first line is empty, so the first replayed one (a minute earlier) would be at -1 s.
    let err = run_log(&log(&["[10:05] <a>  ", "[10:04] <b> hi"], ""), options()).await.unwrap_err();
    assert!(matches!(err, IrcError::Unreplayable { line: 901, .. }), "{err}");
}

#[test]
fn rates_are_per_thousand_and_percent_and_zero_without_a_base() {
    let c = Counts {
        messages: 500,
        posts: 5,
        answered_qs: 40,
        barge_ins: 1,
        hanging_qs: 8,
        pick_ups: 2,
        ..Counts::default()
    };
    assert_eq!(c.posts_per_thousand_messages(), 10.0);
    assert_eq!((c.barge_in_percent(), c.pick_up_percent()), (2.5, 25.0));
    assert_eq!(Counts::default().pick_up_percent(), 0.0);
    let mut total = c;
    total += c;
    assert_eq!((total.messages, total.pick_ups), (1000, 4));
}
