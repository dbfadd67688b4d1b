//! The transcript format of docs/design.md §15, docs/replay.md: one JSON object per line.

use serde::Deserialize;
use thiserror::Error;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    t: f64,
    user: String,
    #[serde(default)]
    text: Option<String>,
    /// A `/kuuki` command run as `user` instead of a message.
    #[serde(default)]
    command: Option<String>,
    /// The channel is private (a private channel or a DM): nothing said there feeds
    /// the workspace memory or another channel.
    #[serde(default)]
    private: bool,
    #[serde(default)]
    thread: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    bot: bool,
    #[serde(default)]
    reply_to_bot: bool,
    /// A reaction by `user` instead of a message: on kuuki's latest post in the
    /// channel (or in `thread`), or on the message written at `to_t`.
    #[serde(default)]
    reaction: Option<String>,
    #[serde(default)]
    to_t: Option<f64>,
    /// The reaction is taken off.
    #[serde(default)]
    removed: bool,
}

/// A reaction line: `{"t": T, "user": U, "reaction": "👎"}` (docs/replay.md).
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptReaction {
    pub emoji: String,
    /// On the message written at this transcript time; `None`: kuuki's latest post in
    /// the channel (anywhere) or, with `thread`, in that thread.
    pub to_t: Option<f64>,
    pub removed: bool,
}

/// One message of a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptLine {
    /// 1-based line number in the file.
    pub line: usize,
    /// Seconds from the start.
    pub t: f64,
    pub user: String,
    /// The message; empty for a command line.
    pub text: String,
    /// A `/kuuki …` command run as `user` in `channel` (its answer is logged), instead
    /// of a message.
    pub command: Option<String>,
    /// The channel is private: set on any line of the channel marks all of it.
    pub private: bool,
    /// A thread id; the first message with a new id starts that thread.
    pub thread: Option<String>,
    pub channel: String,
    /// Another bot wrote this.
    pub bot: bool,
    /// A reply to kuuki's last message in the channel (as a Discord reply is).
    pub reply_to_bot: bool,
    /// A reaction instead of a message (`text` empty).
    pub reaction: Option<TranscriptReaction>,
}

#[derive(Debug, Error, PartialEq)]
#[error("transcript line {line}: {reason}")]
pub struct TranscriptError {
    pub line: usize,
    pub reason: String,
}

pub const DEFAULT_CHANNEL: &str = "general";
/// The slash command a transcript's command lines run.
pub const COMMAND: &str = "/kuuki";
/// The latest `t` a transcript may use: ten years of chat.
pub const MAX_T: f64 = 10.0 * 365.0 * 86_400.0;

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
        if parsed.reaction.is_none() && (parsed.to_t.is_some() || parsed.removed) {
            return Err(err("to_t and removed belong to a reaction line".into()));
        }
        let reaction = match parsed.reaction {
            None => None,
            Some(_) if parsed.text.is_some() || parsed.command.is_some() => {
                return Err(err("a line is a message, a command or a reaction, not two".into()));
            }
            Some(_) if parsed.bot || parsed.reply_to_bot => {
                return Err(err("a reaction has no bot or reply_to_bot".into()));
            }
            Some(emoji) if emoji.trim().is_empty() => return Err(err("reaction is empty".into())),
            Some(_) if parsed.to_t.is_some_and(|to| !(0.0..=parsed.t).contains(&to)) => {
                return Err(err("to_t must be a time at or before the reaction's t".into()));
            }
            Some(emoji) => {
                Some(TranscriptReaction { emoji: emoji.trim().to_owned(), to_t: parsed.to_t, removed: parsed.removed })
            }
        };
        let (text, command) = match (parsed.text, parsed.command) {
            (None, None) if reaction.is_some() => (String::new(), None),
            (Some(_), Some(_)) => return Err(err("a line is a message (text) or a command, not both".into())),
            (None, None) => return Err(err("missing field `text` (or `command`)".into())),
            (Some(text), None) if text.trim().is_empty() => return Err(err("text is empty".into())),
            (Some(text), None) => (text, None),
            (None, Some(command)) => {
                let command = command.trim().to_owned();
                if !command.starts_with(COMMAND)
                    || command[COMMAND.len()..].chars().next().is_some_and(|c| !c.is_whitespace())
                {
                    return Err(err(format!("a command starts with {COMMAND}, not {command:?}")));
                }
                if parsed.thread.is_some() || parsed.bot || parsed.reply_to_bot {
                    return Err(err("a command has no thread, bot or reply_to_bot".into()));
                }
                (String::new(), Some(command))
            }
        };
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
            text,
            command,
            private: parsed.private,
            thread: parsed.thread,
            channel,
            bot: parsed.bot,
            reply_to_bot: parsed.reply_to_bot,
            reaction,
        });
    }
    // A channel is private as a whole: one line saying so marks every line of it.
    let private: std::collections::HashSet<String> =
        out.iter().filter(|l| l.private).map(|l| l.channel.clone()).collect();
    for line in &mut out {
        line.private = private.contains(&line.channel);
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
    fn reads_command_lines_and_private_channels() {
        let lines = parse_transcript(
            r#"{"t": 0, "user": "alice", "text": "secret plan", "channel": "dm-alice", "private": true}
{"t": 90000, "user": "alice", "command": "/kuuki forget-me"}
{"t": 90001, "user": "bob", "text": "hi", "channel": "dm-alice"}"#,
        )
        .unwrap();
        assert!(lines[0].private);
        assert_eq!(lines[0].command, None);
        assert_eq!(lines[1].command.as_deref(), Some("/kuuki forget-me"));
        assert_eq!(lines[1].text, "");
        assert_eq!(lines[1].channel, "general");
        assert!(!lines[1].private);
        assert!(lines[2].private, "one line marks the whole channel private");
    }

    #[test]
    fn errors_name_the_line_and_the_reason() {
        let cases = [
            ("{\"t\": 0, \"user\": \"a\"}", 1, "missing field `text`"),
            ("{\"t\": 0, \"user\": \"a\", \"text\": \"x\", \"command\": \"/kuuki why\"}", 1, "not both"),
            ("{\"t\": 0, \"user\": \"a\", \"command\": \"/other why\"}", 1, "starts with /kuuki"),
            ("{\"t\": 0, \"user\": \"a\", \"command\": \"/kuukiwhy\"}", 1, "starts with /kuuki"),
            ("{\"t\": 0, \"user\": \"a\", \"command\": \"/kuuki why\", \"thread\": \"t\"}", 1, "has no thread"),
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
