//! The transcript format of DESIGN §7: one JSON object per line.

use serde::Deserialize;
use thiserror::Error;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    t: f64,
    user: String,
    text: String,
    #[serde(default)]
    thread: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    bot: bool,
    #[serde(default)]
    reply_to_bot: bool,
}

/// One message of a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptLine {
    /// 1-based line number in the file.
    pub line: usize,
    /// Seconds from the start.
    pub t: f64,
    pub user: String,
    pub text: String,
    /// A thread id; the first message with a new id starts that thread.
    pub thread: Option<String>,
    pub channel: String,
    /// Another bot wrote this.
    pub bot: bool,
    /// A reply to kuuki's last message in the channel (as a Discord reply is).
    pub reply_to_bot: bool,
}

#[derive(Debug, Error, PartialEq)]
#[error("transcript line {line}: {reason}")]
pub struct TranscriptError {
    pub line: usize,
    pub reason: String,
}

pub const DEFAULT_CHANNEL: &str = "general";
/// The latest `t` a transcript may use: ten years of chat.
const MAX_T: f64 = 10.0 * 365.0 * 86_400.0;

/// Parses a whole transcript; blank lines are skipped. Times must not go backwards.
pub fn parse_transcript(text: &str) -> Result<Vec<TranscriptLine>, TranscriptError> {
    let mut out = Vec::new();
    let mut last_t = 0.0_f64;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |reason: String| TranscriptError { line, reason };
        if raw.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(raw).map_err(|e| err(e.to_string()))?;
        if !parsed.t.is_finite() || !(0.0..=MAX_T).contains(&parsed.t) {
            return Err(err(format!("t must be from 0 to {MAX_T} seconds, not {}", parsed.t)));
        }
        if parsed.t < last_t {
            return Err(err(format!("t goes backwards ({} after {last_t})", parsed.t)));
        }
        last_t = parsed.t;
        if parsed.user.trim().is_empty() {
            return Err(err("user is empty".into()));
        }
        if parsed.text.trim().is_empty() {
            return Err(err("text is empty".into()));
        }
        let channel = parsed.channel.unwrap_or_else(|| DEFAULT_CHANNEL.to_owned());
        if channel.trim().is_empty() {
            return Err(err("channel is empty".into()));
        }
        if parsed.thread.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(err("thread is empty".into()));
        }
        out.push(TranscriptLine {
            line,
            t: parsed.t,
            user: parsed.user,
            text: parsed.text,
            thread: parsed.thread,
            channel,
            bot: parsed.bot,
            reply_to_bot: parsed.reply_to_bot,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_design_example() {
        let lines = parse_transcript(
            r#"{"t": 0, "user": "alice", "text": "おはよう"}
{"t": 12.5, "user": "bob", "text": "<@bot> 今日の天気は？", "thread": "t1", "channel": "general"}

{"t": 30, "user": "otherbot", "text": "beep", "bot": true}"#,
        )
        .unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].channel, "general");
        assert_eq!(lines[1].thread.as_deref(), Some("t1"));
        assert_eq!(lines[2].line, 4);
        assert!(lines[2].bot);
    }

    #[test]
    fn errors_name_the_line_and_the_reason() {
        let cases = [
            ("{\"t\": 0, \"user\": \"a\"}", 1, "missing field `text`"),
            ("{\"t\": 0, \"user\": \"a\", \"text\": \"x\"}\nnot json", 2, "expected"),
            (
                "{\"t\": 5, \"user\": \"a\", \"text\": \"x\"}\n{\"t\": 4, \"user\": \"a\", \"text\": \"x\"}",
                2,
                "backwards",
            ),
            ("{\"t\": -1, \"user\": \"a\", \"text\": \"x\"}", 1, "from 0 to"),
            ("{\"t\": 1e20, \"user\": \"a\", \"text\": \"x\"}", 1, "from 0 to"),
            ("{\"t\": 0, \"user\": \"\", \"text\": \"x\"}", 1, "user is empty"),
            ("{\"t\": 0, \"user\": \"a\", \"text\": \"  \"}", 1, "text is empty"),
            ("{\"t\": 0, \"user\": \"a\", \"text\": \"x\", \"colour\": 1}", 1, "unknown field `colour`"),
            ("{\"t\": \"soon\", \"user\": \"a\", \"text\": \"x\"}", 1, "invalid type"),
        ];
        for (text, line, reason) in cases {
            let err = parse_transcript(text).unwrap_err();
            assert_eq!(err.line, line, "{text}");
            assert!(err.reason.contains(reason), "{text}: {}", err.reason);
        }
    }
}
