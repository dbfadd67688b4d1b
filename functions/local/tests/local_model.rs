//! kuuki against a real model server, as a user runs it: `scripts/with-local-model`
//! serves Gemma 3 270M with llama.cpp's server (PyPI's llama-cpp-python, `--chat_format
//! gemma`, a template that drops the system message) and this test replays a short
//! transcript through `kuuki replay --llm openai` against it. A base model that small
//! writes nonsense, so what is checked is the protocol, never the words: every
//! judgment, summary and reflection is JSON kuuki can use, token counts come back, no
//! call fails or runs out its time, the server's refusal of `json_schema` steps down to
//! its `json_object` form once, and the judge's prompt reaches the model with the
//! conversation in it. Without the server (no `KUUKI_LOCAL_MODEL_URL`) it says SKIPPED,
//! unless `KUUKI_REQUIRE_LOCAL_MODEL` is set (`./scripts/test` sets it).

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
        // A small model on two cores takes seconds a call, minutes for a long answer;
        // one attempt each, so a call that ran out its time shows as failed.
        .args(["--set", "LLM_TIMEOUT_SECONDS=300", "--set", "LLM_MAX_RETRIES=0", "--set", "WORKER_TIMEOUT_SECONDS=900"])
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
    // failed, none ran out its time.
    let calls: Vec<&str> = stderr.lines().filter(|l| l.contains("kuuki::llm: LLM call")).collect();
    let counted: u64 = stats["llm_calls"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(calls.len() as u64, counted, "{stderr}");
    assert!(calls.iter().all(|c| c.contains("ok=true")), "{stderr}");
    for (role, n) in stats["llm_calls"].as_object().unwrap() {
        if n.as_u64().unwrap() > 0 {
            assert!(stats["llm_tokens"][role].as_u64().unwrap() > 0, "{role}: {stats}");
        }
    }
    assert!(!stderr.contains("timed out") && !stderr.contains("retrying"), "{stderr}");

    // The server refuses `json_schema` (HTTP 500): kuuki stepped down to `json_object`
    // once, for the whole run.
    let stepped: Vec<&str> = stderr.lines().filter(|l| l.contains("structured output")).collect();
    assert_eq!(stepped.len(), 1, "{stderr}");
    assert!(stepped[0].contains(r#"refused="json_schema""#) && stepped[0].contains(r#"now="json_object""#));
}
