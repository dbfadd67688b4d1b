//! Canned LLM answers from a JSON-lines file (`--llm script:FILE`).
//!
//! Each line: `{"role": "judge", "reply": ..., "match": "...", "repeat": false}`.
//! `reply` is the raw text the model returns, or any JSON value (sent as its JSON
//! text). A call takes the first unused line of its role whose `match` (if any) occurs
//! in the call's subject (the message being judged or answered); `repeat: true` lines
//! are never used up. A call with no line left fails like a broken model would.

use std::sync::Mutex;

use async_trait::async_trait;
use serde::Deserialize;
use thiserror::Error;

use crate::ports::{Llm, LlmError, LlmRequest, LlmResponse, LlmRole, Usage};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    role: LlmRole,
    reply: serde_json::Value,
    #[serde(default, rename = "match")]
    matches: Option<String>,
    #[serde(default)]
    repeat: bool,
}

struct Entry {
    role: LlmRole,
    reply: String,
    matches: Option<String>,
    repeat: bool,
    used: bool,
}

#[derive(Debug, Error, PartialEq)]
#[error("LLM script line {line}: {reason}")]
pub struct ScriptError {
    pub line: usize,
    pub reason: String,
}

pub struct ScriptedLlm {
    entries: Mutex<Vec<Entry>>,
}

impl ScriptedLlm {
    pub fn parse(text: &str) -> Result<Self, ScriptError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let raw = raw.trim();
            if raw.is_empty() || raw.starts_with('#') {
                continue;
            }
            let line: Line =
                serde_json::from_str(raw).map_err(|e| ScriptError { line: i + 1, reason: e.to_string() })?;
            let reply = match line.reply {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            entries.push(Entry { role: line.role, reply, matches: line.matches, repeat: line.repeat, used: false });
        }
        Ok(Self { entries: Mutex::new(entries) })
    }
}

/// A rough token count for scripted calls: about four bytes a token.
fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

#[async_trait]
impl Llm for ScriptedLlm {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let mut entries = self.entries.lock().expect("script lock");
        let entry = entries
            .iter_mut()
            .find(|e| {
                e.role == request.role
                    && !e.used
                    && e.matches.as_ref().is_none_or(|m| request.subject.contains(m.as_str()))
            })
            .ok_or(LlmError::NoScriptedAnswer(request.role.as_str()))?;
        if !entry.repeat {
            entry.used = true;
        }
        Ok(LlmResponse {
            text: entry.reply.clone(),
            usage: Usage {
                input_tokens: estimate_tokens(&request.system) + estimate_tokens(&request.user),
                output_tokens: estimate_tokens(&entry.reply),
            },
            finish: crate::ports::Finish::Complete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(role: LlmRole, subject: &str) -> LlmRequest {
        LlmRequest {
            role,
            model: "m".into(),
            system: "prompt".into(),
            user: "the conversation".into(),
            max_tokens: 100,
            temperature: None,
            schema: None,
            subject: subject.into(),
        }
    }

    #[tokio::test]
    async fn answers_by_role_match_and_order() {
        let llm = ScriptedLlm::parse(
            r#"# comment
{"role": "judge", "match": "deploy", "reply": {"should_respond": true}}
{"role": "judge", "reply": "no"}
{"role": "generate", "reply": "hello", "repeat": true}"#,
        )
        .unwrap();
        assert_eq!(llm.complete(request(LlmRole::Judge, "lunch?")).await.unwrap().text, "no");
        assert_eq!(
            llm.complete(request(LlmRole::Judge, "the deploy")).await.unwrap().text,
            r#"{"should_respond":true}"#
        );
        assert_eq!(llm.complete(request(LlmRole::Judge, "again")).await, Err(LlmError::NoScriptedAnswer("judge")));
        for _ in 0..3 {
            assert_eq!(llm.complete(request(LlmRole::Generate, "x")).await.unwrap().text, "hello");
        }
    }

    #[test]
    fn bad_lines_name_their_number() {
        let err = ScriptedLlm::parse("{\"role\": \"judge\", \"reply\": \"x\"}\n{\"role\": \"oracle\", \"reply\": 1}")
            .err()
            .unwrap();
        assert_eq!(err.line, 2);
    }
}
