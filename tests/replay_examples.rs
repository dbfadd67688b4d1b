//! Golden tests: each example transcript replays to exactly its checked-in decision log
//! (`examples/NAME.log.jsonl`), with the command the README shows:
//! `kuuki replay examples/NAME.jsonl --seed 42 --persona examples/persona.toml --llm script:examples/NAME.llm.jsonl`.
//! After an intended change of behaviour, `UPDATE_GOLDEN=1 cargo test -p kuuki-e2e
//! --test replay_examples` rewrites them; read the diff like a code change.

use std::path::PathBuf;

use kuuki_e2e::{Log, Run};
use serde_json::json;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(examples().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Replays an example and checks it against its golden log.
fn golden(name: &str) -> Log {
    let transcript = read(&format!("{name}.jsonl"));
    let script = read(&format!("{name}.llm.jsonl"));
    let persona = read("persona.toml");
    let run = Run::new(&transcript).script(&script).persona(&persona).seed(42);
    let actual = run.text();
    let golden_path = examples().join(format!("{name}.log.jsonl"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        // CI must compare against the checked-in logs, never rewrite them into a pass.
        assert!(
            std::env::var_os("CI").is_none(),
            "UPDATE_GOLDEN is set under CI: golden logs are rewritten by hand, never in CI (unset one of them)"
        );
        std::fs::write(&golden_path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&golden_path).unwrap_or_default();
    if actual != expected {
        let first = actual
            .lines()
            .zip(expected.lines())
            .position(|(a, e)| a != e)
            .unwrap_or(actual.lines().count().min(expected.lines().count()));
        panic!(
            "{name}: the decision log differs from {} at line {}\nexpected: {}\nactual:   {}",
            golden_path.display(),
            first + 1,
            expected.lines().nth(first).unwrap_or("(end)"),
            actual.lines().nth(first).unwrap_or("(end)")
        );
    }
    run.log()
}

#[test]
fn team_channel() {
    let log = golden("team-channel");
    let responds = log.kind("respond");
    let summary: Vec<(f64, &str, &str)> = responds
        .iter()
        .map(|r| (r["msg_t"].as_f64().unwrap(), r["type"].as_str().unwrap(), r["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1200.0, "full_response", "direct"),  // the mention, at once
            (4200.0, "full_response", "pick_up"), // the Rust question nobody answered
            (4500.0, "react_only", "ambient"),    // carol's thanks: an emoji is enough
            (6000.0, "full_response", "direct"),  // the name call
        ],
        "{log:?}"
    );
    // The question stood 120 s unanswered (unanswered_question), then the judge's 60 s
    // delay; the answer goes in a thread under it.
    let rust = log.about("judge", 4200.0);
    assert_eq!(rust[0]["decision"], "wait", "{log:?}");
    assert_eq!(
        (rust[1]["pick_up"].clone(), rust[1]["breakdown"]["unanswered_question"].clone()),
        (json!(true), json!(25))
    );
    assert_eq!(responds[1]["t"], 4380.0, "judged at 4320, answered 60 s later");
    assert!(responds[1]["thread"].is_string(), "{}", responds[1]);
    // The lunch burst and the deploy thread cost one judgment each.
    assert!(log.about("judge", 1525.0).len() == 1 && log.about("superseded", 1500.0).len() == 1);
    assert_eq!(log.about("judge", 1525.0)[0]["breakdown"]["busy"], -10);
    // The CI bot is stored but never judged.
    assert!(log.about("judge", 900.0).is_empty());
    // Thanks right after an answer: cooldown and engagement cancel out, kuuki stays quiet.
    assert_eq!(log.about("judge", 1260.0)[0]["respond"], false);
}

#[test]
fn one_on_one() {
    let log = golden("one-on-one");
    let responds = log.kind("respond");
    assert_eq!(responds.len(), 1, "only the name call is answered: {log:?}");
    assert_eq!(responds[0]["msg_t"], 1800.0);
    for judge in log.kind("judge").iter().filter(|j| j["msg_t"] != 0.0) {
        assert_eq!(judge["respond"], false);
        if judge["decision"] == "wait" {
            // A question may be for the room until the other one answers: no one_on_one yet.
            assert_eq!(judge["breakdown"]["one_on_one"], json!(null), "{judge}");
            continue;
        }
        assert_eq!(judge["breakdown"]["one_on_one"], -20, "{judge}");
    }
    // Tom answered Maya's question (t 130), so its pick-up ended there.
    let picked_up = log.about("dropped", 80.0);
    assert_eq!(picked_up.last().unwrap()["stage"], "pick_up", "{log:?}");
    assert!(picked_up.last().unwrap()["reason"].as_str().unwrap().contains("answered"), "{log:?}");
    assert_eq!(log.stats()["llm_calls"]["judge"], 0, "a 1:1 chat never needs the LLM judge");
}

#[test]
fn unanswered_question() {
    let log = golden("unanswered-question");
    let judges = log.about("judge", 2400.0);
    assert_eq!(judges[0]["decision"], "wait", "the question stands 120 s first: {log:?}");
    let question = judges[1];
    assert_eq!((question["t"].clone(), question["pick_up"].clone()), (json!(2520.0), json!(true)));
    assert_eq!(question["breakdown"]["unanswered_question"], 25);
    assert_eq!(question["decision"], "llm");
    assert_eq!(question["respond"], true);
    let answer = log.about("respond", 2400.0)[0];
    assert_eq!(answer["t"], 2550.0, "judged once it had stood, answered 30 s later");
    assert_eq!(log.about("respond", 2650.0)[0]["type"], "short_ack");
    // ken's question and his own follow-up are one turn: the question still counts, and
    // its pick-up judges them together once the follow-up has stood 120 s.
    let ken = log.about("judge", 5000.0)[0];
    assert_eq!(ken["t"], 5140.0, "{ken}");
    assert_eq!(ken["breakdown"]["question"], 20, "{ken}");
    assert_eq!(ken["breakdown"]["unanswered_question"], 25, "{ken}");
    assert_eq!(log.about("respond", 5000.0)[0]["channel"], "インフラ");
    assert_eq!(log.stats()["responses"]["full_response"], 2);
}
