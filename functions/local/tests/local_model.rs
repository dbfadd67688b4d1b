//! kuuki against a real model server, as a user runs it: `scripts/with-local-model`
//! serves Gemma 3 270M with llama.cpp's own server (PyPI's prebuilt `xllamacpp`, the
//! model's chat template) and this test replays a short transcript through `kuuki replay
//! --llm openai` against it. A base model that small writes nonsense, so what is checked
//! is the protocol, never the words: every judgment, summary and reflection is JSON
//! kuuki can use, token counts come back, no call fails or runs out its time (and the
//! failure names the calls that did), the server takes `json_schema` as asked, and the
//! judge's prompt reaches the model with the conversation in it. Without the server (no
//! `KUUKI_LOCAL_MODEL_URL`) it says SKIPPED, unless `KUUKI_REQUIRE_LOCAL_MODEL` is set
//! (`./scripts/test` sets it).

use std::io::Write;
use std::process::Command;

use serde_json::Value;

/// The endpoint `scripts/with-local-model` serves, or `None` (the test is skipped).
fn local_model(test: &str) -> Option<(String, String)> {
    let url = std::env::var("KUUKI_LOCAL_MODEL_URL").ok();
    let model = std::env::var("KUUKI_LOCAL_MODEL").unwrap_or_else(|_| "local".into());
    if url.is_none() {
        assert!(
            std::env::var_os("KUUKI_REQUIRE_LOCAL_MODEL").is_none(),
            "{test}: KUUKI_REQUIRE_LOCAL_MODEL is set but no local model server is"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no local model (scripts/with-local-model cargo test)");
    }
    url.map(|url| (url, model))
}

/// `text` without the terminal's colour codes.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn a_transcript_replays_through_a_real_local_model() {
    let Some((url, model)) = local_model("a_transcript_replays_through_a_real_local_model") else { return };
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let out = Command::new(env!("CARGO_BIN_EXE_kuuki"))
        .args(["replay", &format!("{examples}/unanswered-question.jsonl"), "--llm", "openai", "--seed", "42"])
        .args(["--persona", &format!("{examples}/persona.toml")])
        // A small model on two cores writes 5-20 tokens a second with this portable
        // build (the slower with other builds beside it): every answer is capped at 160
        // tokens (its verdicts, summaries and reflections take 30-90; replies would
        // otherwise ramble to 1,024, a minute or more each), so a call takes well under
        // a minute of its 300 s. One attempt each, so a call that ran out its time
        // shows as failed.
        .args(["--set", "LLM_MAX_OUTPUT_TOKENS=160", "--set", "LLM_TIMEOUT_SECONDS=300"])
        .args(["--set", "LLM_MAX_RETRIES=0", "--set", "WORKER_TIMEOUT_SECONDS=900"])
        // The help channel's four messages are enough for a reflection.
        .args(["--set", "REFLECTION_MIN_MESSAGES=3"])
        .env("OPENAI_BASE_URL", &url)
        .env("LLM_MODEL", &model)
        .env("KUUKI_LOG", "kuuki::llm=info,kuuki::adapters::llm=warn,warn")
        .env_remove("OPENAI_API_KEY")
        .env_remove("LLM_PROVIDER")
        .env_remove("LLM_STRUCTURED_OUTPUT")
        .env_remove("PERSONA_FILE")
        .output()
        .expect("kuuki runs");
    let stderr = plain(&String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let log: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kind = |k: &str| log.iter().filter(|l| l["kind"] == k).collect::<Vec<_>>();
    let stats = *kind("stats").last().expect("a stats line");

    // Every judgment the model was asked for is a verdict, with the model's own counts;
    // the conversation is in what it read (the old layout's fixed user line was 17).
    let judged: Vec<&Value> = kind("judge").into_iter().filter(|j| j["llm_called"] == true).collect();
    assert!(!judged.is_empty(), "the model judged: {log:?}");
    for judgment in &judged {
        assert!(judgment.get("llm_error").is_none() && judgment["llm"].is_object(), "{judgment}");
        assert!(judgment["llm_tokens"]["input"].as_u64().unwrap() >= 150, "the conversation reached it: {judgment}");
        assert!(judgment["llm_tokens"]["output"].as_u64().unwrap() > 0, "{judgment}");
    }
    assert_eq!(stats["llm_unusable"], 0, "{stats}");
    // Every summary and reflection the model finished was read: one is dropped as
    // unusable only when the model did not finish it (this 270M model can ramble inside
    // a string up to its token limit; kuuki drops that answer and tries again later).
    let dropped = kind("dropped");
    let unusable: Vec<&&Value> =
        dropped.iter().filter(|d| d["reason"].as_str().unwrap_or("").contains("unusable")).collect();
    let cut_off =
        |d: &&&Value| d["reason"].as_str().unwrap_or("").contains("the answer was cut off at the token limit");
    let unread: Vec<_> = unusable.iter().filter(|d| !cut_off(d)).collect();
    assert!(unread.is_empty(), "{unread:?}");
    let reflection_cut_off = unusable.iter().any(|d| cut_off(d) && d["stage"] == "reflect");
    assert!(stats["summaries"].as_u64().unwrap() >= 1, "{stats}");
    assert!(stats["reflections"].as_u64().unwrap() >= 1 || reflection_cut_off, "{stats}");
    assert_eq!(stats["failed_deliveries"], 0, "{stats}");

    // Each role's calls came back with token counts, and every call succeeded: none
    // failed, none ran out its time. A failure names the calls, with their role and
    // how long each took, and the lines that said why.
    let calls: Vec<&str> = stderr.lines().filter(|l| l.contains("kuuki::llm: LLM call")).collect();
    let counted: u64 = stats["llm_calls"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(calls.len() as u64, counted, "{stderr}");
    let failed: Vec<&&str> = calls.iter().filter(|c| !c.contains("ok=true")).collect();
    let why: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("timed out") || l.contains("retrying") || l.contains("LLM error"))
        .collect();
    assert!(
        failed.is_empty() && why.is_empty(),
        "calls that failed or ran out their time (LLM_TIMEOUT_SECONDS=300):\n{}\nwhy:\n{}",
        failed.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("\n"),
        why.join("\n")
    );
    for (role, n) in stats["llm_calls"].as_object().unwrap() {
        if n.as_u64().unwrap() > 0 {
            assert!(stats["llm_tokens"][role].as_u64().unwrap() > 0, "{role}: {stats}");
        }
    }

    // llama.cpp's server takes `json_schema` (the default form): kuuki never stepped down.
    let stepped: Vec<&str> = stderr.lines().filter(|l| l.contains("structured output")).collect();
    assert!(stepped.is_empty(), "{stepped:?}");
}

/// `scripts/with-local-model` run as the test command runs it, around `command`.
fn with_local_model(command: &str, time_limit: Option<&str>) -> (std::process::Output, std::time::Duration) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/with-local-model");
    let mut run = Command::new(script);
    run.args(["sh", "-c", command]);
    if let Some(limit) = time_limit {
        run.env("KUUKI_LOCAL_MODEL_TIME_LIMIT", limit);
    }
    let started = std::time::Instant::now();
    let out = run.output().expect("scripts/with-local-model runs");
    (out, started.elapsed())
}

/// The server dying under the command (a crash in llama.cpp, say) stops the command at
/// once and says so with the server's log, instead of the command's model calls
/// failing one by one for minutes.
#[test]
fn a_model_server_that_dies_is_reported_at_once() {
    if local_model("a_model_server_that_dies_is_reported_at_once").is_none() {
        return;
    }
    let (out, took) =
        with_local_model(r#"kill -SEGV "$KUUKI_LOCAL_MODEL_PID"; sleep 600; echo the command went on"#, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the model server died (killed by SIGSEGV) while the command ran"), "{stderr}");
    assert!(stderr.contains("the server's log") && stderr.contains("listening on"), "its log's tail: {stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("the command went on"));
    // Not after the command's 600 s: the model's load and the stop take seconds.
    assert!(took < std::time::Duration::from_secs(120), "took {took:?}");
}

/// A command past KUUKI_LOCAL_MODEL_TIME_LIMIT is stopped and named so (exit 124).
#[test]
fn a_command_past_the_time_limit_is_stopped() {
    if local_model("a_command_past_the_time_limit_is_stopped").is_none() {
        return;
    }
    let (out, took) = with_local_model("sleep 600; echo the command went on", Some("2"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(stderr.contains("ran past KUUKI_LOCAL_MODEL_TIME_LIMIT (2 s)"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("the command went on"));
    assert!(took < std::time::Duration::from_secs(120), "took {took:?}");
}
