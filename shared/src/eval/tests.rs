use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::adapters::llm::ScriptedLlm;
use crate::config::Settings;

const HEADER: &str = r#"{"eval": {"title": "t", "situation": "left-hanging"}}"#;

fn case(body: &str) -> EvalCase {
    parse_case("en/x.jsonl", &format!("{HEADER}\n{body}")).expect("a valid case")
}

fn parse_err(text: &str) -> EvalFileError {
    parse_case("en/x.jsonl", text).expect_err("an invalid case")
}

fn respond(t: f64, msg_t: f64, react: bool) -> Value {
    if react {
        json!({"t": t, "kind": "respond", "channel": "general", "thread": null, "msg_t": msg_t, "type": "react_only", "mode": "ambient", "emoji": "tada"})
    } else {
        json!({"t": t, "kind": "respond", "channel": "general", "thread": null, "msg_t": msg_t, "type": "full_response", "mode": "ambient", "text": "try git reset --soft HEAD~1"})
    }
}

fn verdicts(case: &EvalCase, log: &[Value]) -> Vec<(usize, Verdict)> {
    score(case, log).into_iter().map(|o| (o.message, o.verdict)).collect()
}

#[test]
fn reads_the_header_labels_and_comments() {
    let c = case(
        r#"# why: nobody answers
{"t": 0, "user": "alice", "text": "how do I undo a commit?", "expect": "speak", "within": [90, 900]}
{"t": 30, "user": "bob", "text": "lunch?", "channel": "random", "expect": "silent"}
{"t": 50, "user": "bob", "text": "ok"}"#,
    );
    assert_eq!((c.title.as_str(), c.situation.as_str(), c.language()), ("t", "left-hanging", "en"));
    assert_eq!(c.transcript.len(), 3);
    assert_eq!(c.transcript[1].channel, "random");
    assert_eq!(
        c.labels,
        vec![
            Label { line: 3, message: 0, t: 0.0, expect: Expect::Speak, within: Some((90.0, 900.0)) },
            Label { line: 4, message: 1, t: 30.0, expect: Expect::Silent, within: None },
        ]
    );
}

#[test]
fn bad_files_name_the_line_and_the_reason() {
    let e = parse_err(r#"{"t": 0, "user": "a", "text": "x"}"#);
    assert_eq!(e.line, 1);
    assert!(e.reason.contains("header"), "{e}");

    let e = parse_err(&format!("{HEADER}\n{{\"t\": 0, \"user\": \"a\", \"text\": \"x\", \"expect\": \"speak\"}}"));
    assert_eq!(e.line, 2);
    assert!(e.reason.contains("within"), "{e}");

    let e = parse_err(&format!(
        "{HEADER}\n{{\"t\": 0, \"user\": \"a\", \"text\": \"x\", \"expect\": \"silent\", \"within\": [0, 1]}}"
    ));
    assert!(e.reason.contains("silent label takes no"), "{e}");

    let e = parse_err(&format!(
        "{HEADER}\n{{\"t\": 0, \"user\": \"a\", \"text\": \"x\", \"expect\": \"talk\", \"within\": [0, 1]}}"
    ));
    assert!(e.reason.contains("speak, react or silent"), "{e}");

    let e = parse_err(&format!(
        "{HEADER}\n{{\"t\": 0, \"user\": \"a\", \"text\": \"x\", \"expect\": \"react\", \"within\": [60, 10]}}"
    ));
    assert!(e.reason.contains("earliest <= latest"), "{e}");

    // The transcript's own errors keep the file's line numbers.
    let e = parse_err(&format!(
        "{HEADER}\n\n# c\n{{\"t\": 5, \"user\": \"a\", \"text\": \"x\"}}\n{{\"t\": 1, \"user\": \"a\", \"text\": \"y\"}}"
    ));
    assert_eq!(e.line, 5);
    assert!(e.reason.contains("backwards"), "{e}");

    let e = parse_err(&format!(
        "{HEADER}\n{{\"t\": 5, \"user\": \"a\", \"text\": \"x\"}}\n{{\"t\": 5, \"user\": \"b\", \"text\": \"y\"}}"
    ));
    assert_eq!(e.line, 3);
    assert!(e.reason.contains("same t (line 2)"), "{e}");

    let e = parse_err(&format!("{HEADER}\n{{\"t\": 5, \"user\": \"a\", \"text\": \"x\"}}\n{HEADER}"));
    assert!(e.reason.contains("first line"), "{e}");
    assert_eq!(parse_err(HEADER).reason, "no messages");
}

#[test]
fn a_post_in_the_window_is_right_outside_it_mistimed() {
    let c = case(
        r#"{"t": 100, "user": "alice", "text": "how do I undo a commit?", "expect": "speak", "within": [90, 900]}"#,
    );
    assert_eq!(verdicts(&c, &[respond(300.0, 100.0, false)]), vec![(0, Verdict::Right)]);
    let early = score(&c, &[respond(130.0, 100.0, false)]);
    assert_eq!(early[0].verdict, Verdict::Mistimed);
    assert_eq!(early[0].timing_error, Some(60.0));
    let late = score(&c, &[respond(1100.0, 100.0, false)]);
    assert_eq!(late[0].timing_error, Some(100.0));
    assert_eq!(verdicts(&c, &[respond(300.0, 100.0, true)]), vec![(0, Verdict::ReactedInstead)]);
    assert_eq!(verdicts(&c, &[]), vec![(0, Verdict::Missed)]);
    assert_eq!(
        verdicts(&c, &[respond(300.0, 100.0, false), respond(310.0, 100.0, false)]),
        vec![(0, Verdict::Right), (0, Verdict::Repeated)]
    );
}

#[test]
fn actions_at_unlabelled_points_intrude_and_follow_ups_belong_to_their_label() {
    let c = case(
        r#"{"t": 0, "user": "alice", "text": "how do I undo a commit?", "expect": "speak", "within": [0, 900]}
{"t": 10, "user": "alice", "text": "(keeping the changes)"}
{"t": 20, "user": "bob", "text": "no idea"}
{"t": 30, "user": "alice", "text": "hmm"}
{"t": 40, "user": "carol", "text": "thanks all", "expect": "react", "within": [0, 300]}"#,
    );
    // A post about alice's follow-up line answers her labelled question.
    assert_eq!(verdicts(&c, &[respond(150.0, 10.0, false)]), vec![(0, Verdict::Right), (4, Verdict::Missed)]);
    // After bob wrote, alice's next line is a point of its own: nobody asked for a post there.
    assert_eq!(
        verdicts(&c, &[respond(150.0, 30.0, false), respond(60.0, 40.0, false)]),
        vec![(0, Verdict::Missed), (3, Verdict::Intruded), (4, Verdict::SpokeInstead)]
    );
    // A post about something that is no transcript message is not scored.
    assert_eq!(verdicts(&c, &[respond(60.0, 999.0, false)]), vec![(0, Verdict::Missed), (4, Verdict::Missed)]);
}

fn result(c: EvalCase, log: Vec<Value>) -> CaseResult {
    let outcomes = score(&c, &log);
    CaseResult { case: c, outcomes, stats: Stats { messages: 5, ..Stats::default() }, log }
}

#[test]
fn the_summary_counts_precision_recall_reactions_and_timing() {
    let c = case(
        r#"{"t": 0, "user": "alice", "text": "q1?", "expect": "speak", "within": [0, 100]}
{"t": 200, "user": "bob", "text": "q2?", "expect": "speak", "within": [0, 100]}
{"t": 400, "user": "carol", "text": "<@ken> q3?", "expect": "silent"}
{"t": 600, "user": "dave", "text": "thanks!", "expect": "react", "within": [0, 60]}
{"t": 800, "user": "erin", "text": "lol"}"#,
    );
    let log = vec![
        respond(50.0, 0.0, false),    // right
        respond(450.0, 400.0, false), // intrudes on a silent label
        respond(700.0, 600.0, true),  // the reaction, 40 s late
        respond(810.0, 800.0, true),  // a stray reaction
    ];
    let s = Summary::of([&result(c, log)], Prices { input: 0.1, output: 0.4 });
    assert_eq!((s.speak_labels, s.speak_hits, s.posts), (2, 1, 2));
    assert_eq!((s.precision(), s.recall()), (0.5, 0.5));
    assert_eq!((s.react_labels, s.react_hits, s.stray_reactions), (1, 1, 1));
    assert_eq!(s.reaction_accuracy(), 1.0);
    assert_eq!((s.silent_labels, s.silent_kept), (1, 0));
    assert_eq!((s.timed, s.mistimed, s.mean_timing_error), (2, 1, 40.0));
}

#[tokio::test]
async fn a_case_replays_through_the_pipeline() {
    let c = case(
        r#"{"t": 0, "user": "alice", "text": "<@bot> how do I undo my last commit?", "expect": "speak", "within": [0, 30]}
{"t": 600, "user": "bob", "text": "<@ken> did the invoice go out?", "expect": "silent"}"#,
    );
    let llm = ScriptedLlm::parse(
        r#"{"role": "generate", "reply": "git reset --soft HEAD~1", "repeat": true}
{"role": "judge", "match": "invoice", "reply": {"should_respond": false, "reason": "ken's to answer", "confidence": 0.9, "conversation_state": "active"}}
{"role": "summarize", "reply": {"summary": "git help", "history": "", "mood": "calm", "topic_keywords": ["git"], "active_users": ["alice"]}, "repeat": true}"#,
    )
    .unwrap();
    let settings = Settings::from_vars(&HashMap::new()).unwrap().for_llm(true);
    let persona = settings.persona(None);
    let options = ReplayOptions { settings, persona, llm: Some(Arc::new(llm)), embedder: None, seed: 1 };
    let r = run_case(c, options).await.unwrap();
    assert_eq!((r.stats.failed_deliveries, r.stats.dropped), (0, 0), "{:#?}", r.log);
    let s = Summary::of([&r], Prices { input: 1.0, output: 1.0 });
    assert_eq!((s.speak_hits, s.posts, s.silent_kept), (1, 1, 1), "{:#?}", r.outcomes);
    // The answer, the channel summary and the workspace summary; and the judgment of
    // bob's question once ken has left it an hour (alice's mention was her turn's, so
    // the question is open then: issue 34).
    assert_eq!(s.llm_calls, 4, "{:?}\n{:#?}", r.stats.llm_calls, r.log);
    assert_eq!(r.stats.llm_calls.get("judge"), Some(&1), "{:?}", r.stats.llm_calls);
    assert!(s.dollars > 0.0);
    assert_eq!(r.outcomes[0].action.as_ref().unwrap().content, "git reset --soft HEAD~1");
}
