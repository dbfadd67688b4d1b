//! What a production log may say of a decision: ids, counts, lengths, scores, rule names
//! and reasons, never what people wrote, what kuuki answered, or what it remembers
//! (facts, notes, summaries). Logs outlive the store's retention and a forget
//! (`/kuuki forget-me` and deleted messages never reach CloudWatch or journald), so
//! words stay in the store, where forgetting reaches them (`/kuuki why` reads them
//! there). `LOG_MESSAGE_TEXT=true` keeps them, for debugging; `kuuki replay` always
//! does (the transcript is the developer's own).
//!
//! Each record kind keeps an allowlist of fields, so a field added later is left out
//! until someone decides it carries no words.

use serde_json::{Map, Value, json};

use super::Event;

/// Whether a log line carries people's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogText {
    /// Ids and numbers only (the default of `kuuki serve` and the Lambdas).
    #[default]
    Withheld,
    /// Everything, as the replay's decision log shows it (`LOG_MESSAGE_TEXT=true`).
    Kept,
}

impl LogText {
    pub fn from_setting(log_message_text: bool) -> LogText {
        if log_message_text { LogText::Kept } else { LogText::Withheld }
    }
}

impl Event {
    /// The record as one log line, with or without words.
    pub fn to_log_json(&self, text: LogText) -> Value {
        let mut line = self.to_json();
        if text == LogText::Withheld {
            let event = line["event"].take();
            line["event"] = without_words(self.kind.name(), event);
        }
        line
    }
}

/// Fields of each kind that carry no words, kept as they are.
fn kept_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "message" => &["kind", "user", "author", "trigger"],
        "judge" => &[
            "kind",
            "user",
            "score",
            "breakdown",
            "decision",
            "llm_called",
            "respond",
            "response_type",
            "delay_seconds",
            "llm_cached",
            "llm_usage",
        ],
        "superseded" => &["kind", "stage", "by"],
        "dropped" => &["kind", "stage"],
        "respond" => &["kind", "mode", "response_type", "posted_in", "posted_ts", "emoji", "shadow"],
        "respond_failed" => &["kind", "mode", "response_type", "notice"],
        "reflect" => &["kind", "messages", "facts_new", "facts_strengthened", "profiles"],
        "summary" => &["kind", "messages", "active_users", "workspace"],
        "forget" => &[
            "kind",
            "user",
            "messages",
            "facts_removed",
            "facts_edited",
            "notes",
            "summaries",
            "server",
            "unplaced",
            "late",
        ],
        "command" => &["kind", "user"],
        "slack_access" => &["kind", "gone", "team", "purge_at"],
        "purge" => &["kind", "team", "channels", "messages", "facts", "notes", "profiles"],
        "feedback" => &["kind", "signal", "user", "post", "weight", "offset", "undone"],
        "edited" | "deleted" => &["kind"],
        _ => &["kind"],
    }
}

/// Fields whose words are replaced by their length in characters (`text` becomes
/// `text_chars`).
const COUNTED_FIELDS: &[&str] = &["text", "answer", "announced", "summary"];

/// Fields written by kuuki's code (reasons, errors) that may quote a message or a reply:
/// kept with every quoted part cut out.
const REASON_FIELDS: &[&str] = &["reason", "llm_error", "embedding_error"];

fn without_words(kind: &str, event: Value) -> Value {
    let Value::Object(fields) = event else { return event };
    let mut out = Map::new();
    for (name, value) in fields {
        let name = name.as_str();
        if kept_fields(kind).contains(&name) {
            out.insert(name.to_owned(), value);
        } else if COUNTED_FIELDS.contains(&name) {
            out.insert(format!("{name}_chars"), chars(&value));
        } else if REASON_FIELDS.contains(&name) {
            out.insert(name.to_owned(), value.as_str().map_or(Value::Null, |r| Value::String(without_quotes(r))));
        } else {
            match (kind, name) {
                ("judge", "llm") => {
                    out.insert("llm".into(), verdict_without_words(value));
                }
                ("respond", "facts") => {
                    out.insert("facts".into(), facts_without_content(value));
                }
                ("summary", "topic_keywords") => {
                    out.insert("topic_keywords".into(), json!(value.as_array().map_or(0, Vec::len)));
                }
                ("command", "command") => {
                    out.insert("command".into(), command_name(&value));
                }
                // Anything else (a display name, a mood, a field added later) is left out.
                _ => {}
            }
        }
    }
    if kind == "judge" && out.get("llm").is_some_and(|llm| !llm.is_null()) {
        // The model decided, and the judgment's reason is its words (the verdict keeps
        // their length).
        out.remove("reason");
    }
    Value::Object(out)
}

fn chars(value: &Value) -> Value {
    value.as_str().map_or(Value::Null, |text| json!(text.chars().count()))
}

/// The LLM's verdict without its reason (the model's words): its length instead.
fn verdict_without_words(verdict: Value) -> Value {
    let Value::Object(mut fields) = verdict else { return verdict };
    let reason = fields.remove("reason").unwrap_or(Value::Null);
    fields.insert("reason_chars".into(), chars(&reason));
    Value::Object(fields)
}

/// The facts an answer was given, by id and score.
fn facts_without_content(facts: Value) -> Value {
    let Value::Array(facts) = facts else { return facts };
    Value::Array(facts.into_iter().map(|fact| json!({"id": fact["id"], "score": fact["score"]})).collect())
}

/// `/kuuki ask what is …` as `/kuuki ask`: the command and its subcommand, not their
/// arguments (a question, a person).
fn command_name(command: &Value) -> Value {
    let text = command.as_str().unwrap_or_default();
    json!(text.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
}

/// `reason` with every quoted part ("…", “…”, 「…」, `…`) written as `"…"`.
pub fn without_quotes(reason: &str) -> String {
    const PAIRS: &[(char, char)] = &[('"', '"'), ('“', '”'), ('「', '」'), ('『', '』'), ('`', '`')];
    let mut out = String::with_capacity(reason.len());
    let mut closing: Option<char> = None;
    for c in reason.chars() {
        match closing {
            Some(close) if c == close => {
                out.push('…');
                out.push(c);
                closing = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if let Some((_, close)) = PAIRS.iter().find(|(open, _)| *open == c) {
                    closing = Some(*close);
                }
            }
        }
    }
    if closing.is_some() {
        // An unclosed quote: everything after it is cut.
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: &str = "periwinkle otter";

    fn assert_no_words(line: &Value) {
        assert!(!line.to_string().contains(WORDS), "words left in {line}");
    }

    #[test]
    fn each_kind_keeps_its_ids_and_numbers_and_loses_its_words() {
        let message = json!({"kind": "message", "user": "U1", "user_name": WORDS, "text": WORDS, "author": "human", "trigger": null});
        let line = without_words("message", message);
        assert_no_words(&line);
        assert_eq!(
            line,
            json!({"kind": "message", "user": "U1", "author": "human", "trigger": null, "text_chars": 16})
        );

        let judged = json!({"kind": "judge", "user": "U1", "score": 55, "decision": "llm", "llm_called": true,
            "respond": true, "reason": WORDS, "llm": {"should_respond": true, "reason": WORDS, "confidence": 0.8}});
        let line = without_words("judge", judged);
        assert_no_words(&line);
        assert_eq!(line["llm"], json!({"should_respond": true, "reason_chars": 16, "confidence": 0.8}));
        assert_eq!(line["score"], 55);
        let by_rules = json!({"kind": "judge", "score": 20, "reason": "score 20 below 40", "llm": null});
        assert_eq!(without_words("judge", by_rules)["reason"], "score 20 below 40", "the rules' reason is kept");

        let answered = json!({"kind": "respond", "text": WORDS, "emoji": null, "posted_ts": "1.2",
            "facts": [{"id": "f1", "content": WORDS, "score": 0.5}]});
        let line = without_words("respond", answered);
        assert_no_words(&line);
        assert_eq!(line["facts"], json!([{"id": "f1", "score": 0.5}]));

        let summary = json!({"kind": "summary", "messages": 3, "summary": WORDS, "mood": WORDS,
            "topic_keywords": [WORDS, "x"], "active_users": ["U1"], "workspace": false});
        let line = without_words("summary", summary);
        assert_no_words(&line);
        assert_eq!((line["topic_keywords"].as_u64(), line["summary_chars"].as_u64()), (Some(2), Some(16)));

        let command = json!({"kind": "command", "user": "U1", "command": format!("/kuuki ask {WORDS}"),
            "answer": WORDS, "announced": null});
        let line = without_words("command", command);
        assert_no_words(&line);
        assert_eq!(line["command"], "/kuuki ask");

        let failed = json!({"kind": "respond_failed", "reason": format!("the reply repeats kuuki's instructions (\"{WORDS}…\")")});
        let line = without_words("respond_failed", failed);
        assert_no_words(&line);
        assert_eq!(line["reason"], "the reply repeats kuuki's instructions (\"…\")");

        let purged = json!({"kind": "purge", "team": "T1", "channels": 2, "messages": 40, "facts": 3, "notes": 1, "profiles": 2});
        assert_eq!(without_words("purge", purged.clone()), purged, "a purge's counts are all kept");
        let gone =
            json!({"kind": "slack_access", "gone": true, "team": "T1", "reason": "app_uninstalled", "purge_at": 9});
        assert_eq!(without_words("slack_access", gone.clone()), gone);

        let feedback = json!({"kind": "feedback", "signal": "negative_reaction", "user": "U1", "post": "1.2",
            "weight": -6.0, "offset": -12.0, "undone": false});
        assert_eq!(without_words("feedback", feedback.clone()), feedback, "a signal is ids and numbers");

        let unknown = json!({"kind": "something_new", "text": WORDS, "note": WORDS});
        assert_no_words(&without_words("something_new", unknown));
    }

    #[test]
    fn quoted_parts_of_a_reason_are_cut_out() {
        assert_eq!(without_quotes("unusable summary: \"x y\" at 3"), "unusable summary: \"…\" at 3");
        assert_eq!(without_quotes("「秘密」と“words” and `code`"), "「…」と“…” and `…`");
        assert_eq!(without_quotes("kuuki's reason, no quotes"), "kuuki's reason, no quotes");
        assert_eq!(without_quotes("an unclosed \"quote goes on"), "an unclosed \"…");
    }
}
