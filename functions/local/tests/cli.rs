//! `kuuki replay` as a user runs it: files in, stdout, stderr and the exit code out.

use std::path::Path;
use std::process::{Command, Output};

fn kuuki(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(args)
        .env_remove("LLM_PROVIDER")
        .env_remove("PERSONA_FILE")
        .output()
        .expect("kuuki runs")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const TRANSCRIPT: &str = r#"{"t": 0, "user": "alice", "text": "<@bot> おはよう"}
{"t": 5, "user": "bob", "text": "deploy どうなった？"}"#;

#[test]
fn replay_prints_the_log_on_stdout_and_a_summary_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(dir.path(), "t.jsonl", TRANSCRIPT);
    let out = kuuki(&["replay", &t, "--seed", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["kind"], "message");
    assert_eq!(lines.last().unwrap()["kind"], "stats");
    assert!(lines.iter().any(|l| l["kind"] == "respond"));
    assert!(err.contains("replayed 2 messages"), "{err}");
    assert!(err.contains("seed 1"), "{err}");
}

#[test]
fn a_bad_transcript_line_fails_with_its_number_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let t =
        write(dir.path(), "t.jsonl", "{\"t\": 0, \"user\": \"a\", \"text\": \"x\"}\n\n{\"t\": 1, \"user\": \"a\"}\n");
    let out = kuuki(&["replay", &t]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("transcript line 3") && err.contains("missing field `text`"), "{err}");
    assert!(out.stdout.is_empty(), "nothing replayed");
}

#[test]
fn a_missing_transcript_is_a_clear_error() {
    let out = kuuki(&["replay", "/nonexistent/t.jsonl"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("reading /nonexistent/t.jsonl"), "{}", stderr(&out));
}

#[test]
fn an_invalid_setting_fails_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(dir.path(), "t.jsonl", TRANSCRIPT);
    let out = kuuki(&["replay", &t, "--set", "COOLDOWN_SECONDS=soon"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("COOLDOWN_SECONDS"), "{}", stderr(&out));
    let out = kuuki(&["replay", &t, "--set", "COOLDOWN=5"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown setting \"COOLDOWN\""), "{}", stderr(&out));
    let out = kuuki(&["replay", &t, "--set", "JUDGE_SCORE_THRESHOLD"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("KEY=VALUE"), "{}", stderr(&out));
    // The environment is read too, and --set wins over it.
    let out = Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(["replay", &t, "--set", "ENGAGEMENT_BOOST=10"])
        .env("ENGAGEMENT_BOOST", "many")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(["replay", &t])
        .env("ENGAGEMENT_BOOST", "many")
        .output()
        .unwrap();
    assert!(stderr(&out).contains("ENGAGEMENT_BOOST"), "{}", stderr(&out));
}

#[test]
fn set_changes_the_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(dir.path(), "t.jsonl", r#"{"t": 0, "user": "alice", "text": "deploy done"}"#);
    let quiet = String::from_utf8(kuuki(&["replay", &t, "--seed", "1"]).stdout).unwrap();
    assert!(!quiet.contains("\"kind\":\"respond\""));
    let chatty =
        String::from_utf8(kuuki(&["replay", &t, "--seed", "1", "--set", "JUDGE_SCORE_THRESHOLD=0"]).stdout).unwrap();
    assert!(chatty.contains("\"kind\":\"respond\""), "{chatty}");
}

#[test]
fn llm_choices() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(dir.path(), "t.jsonl", TRANSCRIPT);
    let script =
        write(dir.path(), "s.jsonl", r#"{"role": "generate", "reply": "おはようございます！", "repeat": true}"#);
    let out = kuuki(&["replay", &t, "--llm", &format!("script:{script}")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8(out.stdout).unwrap().contains("おはようございます！"));

    let bad = write(dir.path(), "bad.jsonl", "{\"role\": \"oracle\", \"reply\": 1}");
    let out = kuuki(&["replay", &t, "--llm", &format!("script:{bad}")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("LLM script line 1"), "{}", stderr(&out));

    let out = Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(["replay", &t, "--llm", "anthropic"])
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("ANTHROPIC_API_KEY"), "{}", stderr(&out));

    let out = kuuki(&["replay", &t, "--llm", "magic"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("expected none, openai, anthropic or script:FILE"), "{}", stderr(&out));
}

#[test]
fn a_persona_file_names_the_bot() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(dir.path(), "t.jsonl", r#"{"t": 0, "user": "alice", "text": "mochi, hello"}"#);
    let persona = write(
        dir.path(),
        "p.toml",
        "name = \"mochi\"\nsystem_prompt = \"You are Mochi.\"\naliases = [\"もち\"]\ntopics = [\"rice\"]\n",
    );
    let out = kuuki(&["replay", &t, "--persona", &persona]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("\"trigger\":\"name\""), "{stdout}");
    assert!(stdout.contains("[mochi full_response to alice"), "{stdout}");

    let broken = write(dir.path(), "broken.toml", "name = \"x\"\nmood = 3\n");
    let out = kuuki(&["replay", &t, "--persona", &broken]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("mood"), "{}", stderr(&out));
}

#[test]
fn the_settings_table_lists_every_setting() {
    let out = kuuki(&["settings"]);
    let table = String::from_utf8(out.stdout).unwrap();
    for name in ["COOLDOWN_SECONDS", "JUDGE_MIN_WAIT_SECONDS", "BOT_ALIASES", "SLACK_API_BASE_URL"] {
        assert!(table.contains(&format!("`{name}`")), "{name}");
    }
}

#[test]
fn the_report_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(dir.path(), "t.jsonl", TRANSCRIPT);
    let report = dir.path().join("r.html");
    let out = kuuki(&["replay", &t, "--report", report.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.starts_with("<!doctype html") || html.starts_with("<!DOCTYPE html"), "{html}");
}

#[test]
fn the_settings_page_has_the_current_settings_table() {
    let table = String::from_utf8(kuuki(&["settings"]).stdout).unwrap();
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/settings.md")).unwrap();
    assert!(
        page.contains(&table),
        "docs/settings.md's settings table is out of date: run scripts/update-readme-settings (or paste the output of `kuuki settings`)"
    );
}

/// The Markdown table between the `kuuki bench all` markers of `text`: its header and
/// the first cell of each row.
fn bench_table_shape(text: &str) -> (String, Vec<String>) {
    let begin = text.find("<!-- kuuki bench all: begin -->").expect("the begin marker");
    let end = text.find("<!-- kuuki bench all: end -->").expect("the end marker");
    let rows: Vec<&str> = text[begin..end].lines().filter(|l| l.starts_with('|')).collect();
    let header = rows.first().expect("a table").to_string();
    let names = rows.iter().skip(2).map(|r| r.split('|').nth(1).unwrap_or("").trim().to_owned()).collect();
    (header, names)
}

#[test]
fn bench_all_makes_the_benchmarks_page_table_with_the_same_rows_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md");
    let committed = std::fs::read_to_string(&page).unwrap();
    let copy = write(dir.path(), "benchmarks.md", &committed);
    let out = kuuki(&["bench", "all", "--quick", "--readme", &copy]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rewritten = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(
        bench_table_shape(&rewritten),
        bench_table_shape(&committed),
        "the table in docs/benchmarks.md is not the last run's"
    );
    assert!(bench_table_shape(&committed).1.len() >= 6);
}

/// `kuuki --help` and `kuuki serve --help` say what the commands do today: serve runs
/// a team's kuuki over Socket Mode and the Gateway on one data file, with metrics.
#[test]
fn the_help_describes_the_commands_as_they_are() {
    let out = kuuki(&["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = String::from_utf8(out.stdout).unwrap();
    let serve_line = help.lines().find(|line| line.trim_start().starts_with("serve")).expect("serve is listed");
    assert!(!serve_line.contains("Slack ingress"), "{serve_line}");
    assert!(serve_line.contains("Slack") && serve_line.contains("Discord"), "{serve_line}");
    let bench_line = help.lines().find(|line| line.trim_start().starts_with("bench")).expect("bench is listed");
    assert!(bench_line.contains("SQLite") && bench_line.contains("Socket Mode"), "{bench_line}");

    let out = kuuki(&["serve", "--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = String::from_utf8(out.stdout).unwrap();
    for said in ["Socket Mode", "Gateway", "SQLite", "/metrics", "--unhealthy-after-secs"] {
        assert!(help.contains(said), "serve --help does not say {said}:\n{help}");
    }
}

/// `kuuki train-reply-model` with logs it cannot read says which folder and writes
/// nothing.
#[test]
fn train_reply_model_refuses_a_missing_folder_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("weights.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(["train-reply-model", "--train", "/no/such/logs", "--dev", "/no/such/logs"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("/no/such/logs"), "{stderr}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing written");
}
