//! `kuuki eval` on the repository's labelled set, as CI runs it: the scripted policy
//! must stay above the floor, so a change that makes kuuki chattier or deafer fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The floors for the scripted policy (docs/judgment.md). Raise them when
/// the judge gets better; never lower them to let a change through.
const MIN_PRECISION: &str = "0.80";
const MIN_RECALL: &str = "0.85";
/// The busy channels' own floors (issue 34): questions left hanging among interleaved
/// conversations are taken up (recall of the hanging ones) without barging in.
const BUSY_MIN_PRECISION: &str = "busy-channel:precision=0.85";
const BUSY_MIN_HANGING_RECALL: &str = "busy-channel:hanging-recall=0.60";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kuuki(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(args)
        .current_dir(repo())
        .env_remove("LLM_PROVIDER")
        .env_remove("PERSONA_FILE")
        .output()
        .expect("kuuki runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_scripted_policy_stays_above_the_floor_and_the_report_lists_the_misses() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("eval.html");
    let out = kuuki(&[
        "eval",
        "--min-precision",
        MIN_PRECISION,
        "--min-recall",
        MIN_RECALL,
        "--min-situation",
        BUSY_MIN_PRECISION,
        "--min-situation",
        BUSY_MIN_HANGING_RECALL,
        "--report",
        report.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "kuuki eval failed:\n{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("| all | "), "{stdout}");
    assert!(stdout.contains("| busy-channel | 12 | "), "the busy set is its own situation: {stdout}");
    assert!(!stdout.contains("deliveries failed"), "{stdout}");
    let html = std::fs::read_to_string(&report).unwrap();
    let misses = stdout.lines().filter(|l| l.starts_with("  ") && l.contains(".jsonl line ")).count();
    assert!(html.contains(&format!("Misses ({misses})")), "the report lists {misses} misses");
    // Each miss carries its decision trace with the rules by name.
    assert!(misses == 0 || html.contains("class=\"rule "), "no rules in the traces");
}

#[test]
fn a_situation_floor_above_its_figures_fails_with_the_reason_and_a_bad_one_is_refused() {
    let out = kuuki(&["eval", "--only", "busy", "--min-situation", "busy-channel:hanging-recall=1"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("below the floor: busy-channel hanging-recall"), "{}", text(&out.stderr));
    let out = kuuki(&["eval", "--only", "busy", "--min-situation", "busy-channel:speed=1"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("precision, recall or hanging-recall"), "{}", text(&out.stderr));
    let out = kuuki(&["eval", "--only", "en/05-", "--min-situation", "no-such:precision=0.5"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no conversation has that situation"), "{}", text(&out.stderr));
}

#[test]
fn a_floor_above_the_figures_fails_with_the_reason() {
    let out = kuuki(&["eval", "--only", "en/", "--min-precision", "1.01"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("below the floor: precision"), "{}", text(&out.stderr));
}

#[test]
fn the_set_is_large_bilingual_and_covers_the_situations() {
    let mut names = Vec::new();
    for lang in ["en", "ja"] {
        for entry in std::fs::read_dir(repo().join("eval").join(lang)).unwrap() {
            names.push(entry.unwrap().path());
        }
    }
    let mut by_lang = [0usize; 2];
    let mut situations = std::collections::BTreeSet::new();
    let mut labels = [0usize; 3];
    for path in &names {
        let name = path.strip_prefix(repo().join("eval")).unwrap().to_string_lossy().into_owned();
        let case =
            kuuki::eval::parse_case(&name, &std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{e}"));
        by_lang[usize::from(case.language() == "ja")] += 1;
        situations.insert(case.situation.clone());
        for l in &case.labels {
            labels[l.expect as usize] += 1;
        }
    }
    assert!(names.len() >= 60, "{} conversations", names.len());
    assert!(by_lang.iter().all(|&n| n * 5 >= names.len() * 2), "about half each: {by_lang:?}");
    for s in [
        "quick-answer",
        "left-hanging",
        "rhetorical",
        "addressed-to-someone",
        "thanks",
        "argument-cooling",
        "joke",
        "bot-chatter",
        "thread",
        "one-on-one",
        "busy-burst",
        "direct-mention",
        "busy-channel",
    ] {
        assert!(situations.contains(s), "no {s} conversation");
    }
    assert!(labels.iter().all(|&n| n >= 10), "speak, react, silent labels: {labels:?}");
}

/// `kuuki eval --llm openai` measures a real provider: here a fake OpenAI-compatible
/// server over HTTP, whose usage figures the table reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_provider_is_measured_through_its_api() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let llm = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": "git rebase --onto main old-base feature"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100},
        })))
        .mount(&llm)
        .await;
    let uri = llm.uri();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_kuuki"))
            .args(["eval", "--only", "en/05-", "--llm", "openai", "--input-price", "1", "--output-price", "10"])
            .current_dir(repo())
            .env("OPENAI_BASE_URL", uri)
            .env("LLM_MODEL", "eval-model")
            .env_remove("PERSONA_FILE")
            .output()
            .expect("kuuki runs")
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("LLM openai"), "{stdout}");
    let requests = llm.received_requests().await.unwrap();
    assert!(!requests.is_empty());
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body["model"], "eval-model");
    // The name call is answered through the provider: right, and priced from its usage.
    let all = stdout.lines().find(|l| l.starts_with("| all |")).unwrap();
    let cells: Vec<&str> = all.split('|').map(str::trim).collect();
    assert!(cells[5].starts_with("1.00 ("), "recall: {all}");
    let calls = requests.len() as f64;
    let messages: f64 = cells[3].parse().unwrap();
    let dollars = calls * (1000.0 * 1.0 + 100.0 * 10.0) / 1e6 * 1000.0 / messages;
    assert_eq!(cells[13], format!("{dollars:.4}"), "{all}");
}

/// `kuuki eval irc` on the vendored #ubuntu dev logs with a help channel's cap (the
/// measure the project is judged by, `../shared/irc/README.md`). The floors are the
/// figures measured when it came in (3/98 pick-ups, 6/336 barge-ins, 48 judge calls in
/// 3,242 messages): one pick-up fewer, one barge-in or one judge call more fails. Raise
/// them as the judge improves; never lower them to let a change through.
const IRC_DEV: &str = "eval/irc/dev";
const IRC_CAP: &str = "CHANNEL_MAX_UNASKED_POSTS_PER_HOUR=20";
const IRC_MIN_PICK_UPS: &str = "3.0";
const IRC_MAX_BARGE_INS: &str = "1.8";
const IRC_MAX_JUDGE_CALLS: &str = "14.9";

/// `kuuki eval irc` on the dev logs with the cap, and `flags`.
fn eval_irc_dev(flags: &[&str]) -> Output {
    kuuki(&[&["eval", "irc", IRC_DEV, "--set", IRC_CAP], flags].concat())
}

#[test]
fn the_irc_dev_logs_stay_within_their_floors() {
    let out = eval_irc_dev(&[
        "--min-pick-ups",
        IRC_MIN_PICK_UPS,
        "--max-barge-ins",
        IRC_MAX_BARGE_INS,
        "--max-judge-calls",
        IRC_MAX_JUDGE_CALLS,
        "--verbose",
        "--why",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "kuuki eval irc failed:\n{stdout}\n{}", text(&out.stderr));
    let rows = stdout.lines().filter(|l| l.starts_with("| 20")).count();
    assert_eq!(rows, 10, "a row for each dev log: {stdout}");
    assert!(stdout.contains("| total | 3242 | "), "every message of the ten logs replayed: {stdout}");
    let summary = stdout.lines().find(|l| l.starts_with("IRC summary: ")).expect("the summary line");
    let listed = stdout.lines().filter(|l| l.starts_with("  pick-up  ") || l.starts_with("  barge-in ")).count();
    let counted: usize = ["barge-ins ", "pick-ups "]
        .iter()
        .map(|name| summary.split(name).nth(1).and_then(|s| s.split('/').next()).unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(listed, counted, "--verbose lists each barge-in and pick-up: {stdout}");
    // --why counts every hanging question kuuki did not take up under one reason.
    let of = |name: &str| -> usize {
        let after = summary.split(name).nth(1).unwrap();
        let (n, total) = after.split_once('/').unwrap();
        let total: usize = total.split_whitespace().next().unwrap().parse().unwrap();
        total - n.parse::<usize>().unwrap()
    };
    let why = stdout.split("by what kuuki last decided about them:\n").nth(1).expect("the --why section");
    let left: usize = why
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(left, of("pick-ups "), "{stdout}");
}

/// A help channel's settings (docs/judgment.md): the answered model at the threshold
/// tuned on the training logs, the pick-up looking after three minutes. Floors at the
/// figures measured when it came in (28/98 pick-ups, 4/336 barge-ins, 94 judge calls
/// in 3,242 messages, the judge shown the lines that may answer each question); raise
/// them as the model improves, never lower them.
const IRC_HELP_CHANNEL: [&str; 4] =
    ["--set", "REPLY_MODEL_THRESHOLD=0.25", "--set", "UNANSWERED_QUESTION_WAIT_SECONDS=180"];

#[test]
fn the_irc_dev_logs_in_a_help_channel_stay_within_their_floors() {
    let floors = ["--min-pick-ups", "28.5", "--max-barge-ins", "1.2", "--max-judge-calls", "29.0"];
    let out = eval_irc_dev(&[&IRC_HELP_CHANNEL[..], &floors[..]].concat());
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "kuuki eval irc failed:\n{stdout}\n{}", text(&out.stderr));
}

#[test]
fn an_irc_floor_the_figures_miss_fails_and_names_each_one() {
    let out = eval_irc_dev(&["--min-pick-ups", "100", "--max-barge-ins", "0", "--max-judge-calls", "0", "--json"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for missed in ["missed the floor: pick-ups ", "barge-ins ", "LLM judge calls "] {
        assert!(stderr.contains(missed), "{missed}: {stderr}");
    }
    // --json prints the reference's lines: a JSON object per log, then the summary.
    let stdout = text(&out.stdout);
    let objects = stdout.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).count();
    assert_eq!(objects, 10, "{stdout}");
    assert!(stdout.lines().last().unwrap().starts_with("IRC summary: 3242 messages"), "{stdout}");
}

#[test]
fn the_vendored_irc_logs_keep_their_attribution() {
    let dir = repo().join("eval/irc");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for needed in ["Kummerfeld", "A Large-Scale Corpus for Conversation Disentanglement", "ACL 2019", "CC-BY-4.0"] {
        assert!(readme.contains(needed), "eval/irc/README.md names {needed}");
    }
    let licence = std::fs::read_to_string(dir.join("LICENSE-data.txt")).unwrap();
    assert!(licence.starts_with("Attribution 4.0 International"), "the licence's text");
    let logs = kuuki::eval::irc::read_logs(&repo().join(IRC_DEV)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(logs.len(), 10, "the corpus' whole dev split");
    assert!(logs.iter().all(|l| l.first_annotated_line() == Some(1000)), "lines 1000 onwards annotated");
}
