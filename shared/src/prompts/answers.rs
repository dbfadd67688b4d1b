//! The JSON answers the prompts ask for, as JSON Schemas, written once: the providers
//! send them as structured output (`LLM_STRUCTURED_OUTPUT`), and the tests below check
//! that every answer a schema allows is one its parser takes
//! ([`crate::judge::verdict::parse_verdict`], [`crate::memory::summarize::parse_summary`]
//! and `parse_workspace`, [`crate::memory::reflect::parse_reflection`]).
//!
//! They keep to what OpenAI's strict mode accepts, so one schema serves every server:
//! every object lists all its properties in `required` and has `additionalProperties:
//! false`; a field the prompt calls optional is nullable (`anyOf` with `{"type":
//! "null"}`, which llama.cpp's grammars read with the branch's own constraints, where
//! a list of types would drop them); the only other keywords are `enum`, `pattern`,
//! `minimum` and `maxItems`. A number a parser bounds is an enumeration: llama.cpp's
//! grammars keep no `minimum` or `maximum`.

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::ports::AnswerSchema;

/// An answer that is not what its schema asks for: the work it was for changes
/// nothing and is tried again later. Its text names the field, never the answer's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("not JSON ({0})")]
    NotJson(String),
    #[error("not a JSON object")]
    NotAnObject,
    /// `field` is not of the shape it must have (`what`: "be a list", "hold strings", …).
    #[error("{field} must {what}")]
    MustBe { field: String, what: &'static str },
    /// An item of a list lacks what it cannot go without ("a fact needs content").
    #[error("a {item} needs {needs}")]
    Missing { item: &'static str, needs: &'static str },
}

impl AnswerError {
    pub fn must_be(field: &str, what: &'static str) -> AnswerError {
        AnswerError::MustBe { field: field.to_owned(), what }
    }
}

/// `body` with the raw control characters inside its JSON strings escaped: small
/// models (and llama.cpp's grammar) let a raw line break into a string, which JSON
/// forbids but which means nothing else. Borrowed when there is none.
pub fn escape_raw_controls(body: &str) -> std::borrow::Cow<'_, str> {
    let (mut in_string, mut escaped) = (false, false);
    let needs = body.chars().any(|c| {
        let raw = in_string && !escaped && c < ' ';
        let was_escaped = escaped;
        escaped = in_string && !escaped && c == '\\';
        if c == '"' && !was_escaped {
            in_string = !in_string;
        }
        raw
    });
    if !needs {
        return std::borrow::Cow::Borrowed(body);
    }
    let (mut out, mut in_string, mut escaped) = (String::with_capacity(body.len() + 8), false, false);
    for c in body.chars() {
        if in_string && !escaped && c < ' ' {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                other => out.push_str(&format!("\\u{:04x}", u32::from(other))),
            }
            continue;
        }
        let was_escaped = escaped;
        escaped = in_string && !escaped && c == '\\';
        if c == '"' && !was_escaped {
            in_string = !in_string;
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

/// The JSON object of an answer, read past a Markdown fence a model may put around it.
pub fn answer_object(raw: &str) -> Result<serde_json::Map<String, Value>, AnswerError> {
    let body = raw.trim();
    let body = body.strip_prefix("```json").or_else(|| body.strip_prefix("```")).unwrap_or(body);
    let body = body.strip_suffix("```").unwrap_or(body).trim();
    let body = escape_raw_controls(body);
    match serde_json::from_str::<Value>(&body).map_err(|e| AnswerError::NotJson(e.to_string()))? {
        Value::Object(o) => Ok(o),
        _ => Err(AnswerError::NotAnObject),
    }
}

/// A model's answer read by `parse`; the reason it is unusable names a failed call, or an
/// answer the model did not finish (cut off at its token limit, filtered), as such: that
/// is the model's length or refusal, not a shape kuuki failed to read.
pub fn read_answer<T, E: std::fmt::Display>(
    answer: Result<crate::ports::LlmResponse, E>,
    parse: impl FnOnce(&str) -> Result<T, AnswerError>,
) -> Result<T, String> {
    use crate::ports::Finish;
    let answer = answer.map_err(|e| e.to_string())?;
    parse(&answer.text).map_err(|e| match answer.finish {
        Finish::Complete => e.to_string(),
        unfinished => format!("the answer was {unfinished} ({e})"),
    })
}

/// A list of strings; absent or null is an empty list.
pub fn answer_strings(v: Option<&Value>, field: &str) -> Result<Vec<String>, AnswerError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(|| AnswerError::must_be(field, "hold strings")))
            .collect(),
        Some(_) => Err(AnswerError::must_be(field, "be a list")),
    }
}

/// An emoji name as the judge may give it (Slack's: lowercase letters, digits, `_`,
/// `-`, `+`, `'`).
const EMOJI_PATTERN: &str = "^[a-z0-9_+'-]{1,64}$";
/// Text that starts with something besides a space (a fact's content, a person's
/// name). Anchored and free of `.` and `\s`, which llama.cpp's grammars cannot take,
/// and without quotes, backslashes or control characters, which its grammars would
/// write into the JSON unescaped.
const NOT_BLANK_PATTERN: &str = "^[^ \u{3000}\\t\\n\\r\"\\\\][^\"\\\\\\t\\n\\r]*$";
/// Most items of a list: a bound for a small model that would go on listing until
/// its token limit cut the answer off (one wrote 250 message numbers), low enough that
/// a whole answer fits the role's token limit. (No `maxLength` on text: llama.cpp's
/// grammars spell it out one optional character at a time, and a long one stops the
/// server.)
const MOST_FACTS: u64 = 8;
const MOST_KEYWORDS: u64 = 5;
const MOST_PEOPLE: u64 = 20;
const MOST_TOPICS: u64 = 10;
const MOST_SOURCES: u64 = 8;

/// A confidence: tenths from 0 to 1. An enumeration rather than `minimum` and
/// `maximum`, which llama.cpp's grammars do not keep for numbers (a small model
/// answered 256).
fn confidence() -> Value {
    json!({"type": "number", "enum": [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]})
}

/// The judge's delays to choose from, in seconds (0 at once, 30-120 to watch,
/// 180-600 not to break the flow): an enumeration, since llama.cpp's grammars keep no
/// bounds on an integer and a small model writes sixteen digits.
const DELAYS: [u32; 10] = [0, 10, 30, 60, 90, 120, 180, 300, 450, 600];

fn strings(most: u64) -> Value {
    json!({"type": "array", "maxItems": most, "items": {"type": "string"}})
}

/// The judge's verdict: `{"should_respond", "reason", "confidence", "delay_seconds",
/// "response_type", "conversation_state", "emoji"}`.
pub fn verdict() -> &'static AnswerSchema {
    static SCHEMA: LazyLock<AnswerSchema> = LazyLock::new(|| AnswerSchema {
        name: "judgment",
        schema: json!({
            "type": "object",
            "properties": {
                "should_respond": {"type": "boolean"},
                "reason": {"type": "string"},
                "confidence": confidence(),
                "delay_seconds": {"type": "integer", "enum": DELAYS},
                "response_type": {"type": "string", "enum": ["react_only", "short_ack", "full_response"]},
                "conversation_state": {
                    "type": "string",
                    "enum": ["active", "ending", "misunderstanding", "conflict"],
                },
                "emoji": {"anyOf": [{"type": "string", "pattern": EMOJI_PATTERN}, {"type": "null"}]},
            },
            "required": [
                "should_respond", "reason", "confidence", "delay_seconds", "response_type",
                "conversation_state", "emoji",
            ],
            "additionalProperties": false,
        }),
    });
    &SCHEMA
}

/// The judge's answer at a question's pick-up shown the lines that may answer it:
/// [`verdict`] and `already_answered`.
pub fn verdict_with_answered() -> &'static AnswerSchema {
    static SCHEMA: LazyLock<AnswerSchema> = LazyLock::new(|| {
        let mut schema = verdict().schema.clone();
        schema["properties"]["already_answered"] = json!({"type": "boolean"});
        schema["required"].as_array_mut().expect("a list").push(json!("already_answered"));
        AnswerSchema { name: "judgment", schema }
    });
    &SCHEMA
}

/// A channel's memory: `{"summary", "history", "mood", "topic_keywords", "active_users"}`.
pub fn channel_summary() -> &'static AnswerSchema {
    static SCHEMA: LazyLock<AnswerSchema> = LazyLock::new(|| AnswerSchema {
        name: "channel_summary",
        schema: json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "history": {"type": "string"},
                "mood": {"type": "string"},
                "topic_keywords": strings(MOST_TOPICS),
                "active_users": strings(MOST_PEOPLE),
            },
            "required": ["summary", "history", "mood", "topic_keywords", "active_users"],
            "additionalProperties": false,
        }),
    });
    &SCHEMA
}

/// The workspace's memory: `{"history", "recent_events"}`.
pub fn workspace_summary() -> &'static AnswerSchema {
    static SCHEMA: LazyLock<AnswerSchema> = LazyLock::new(|| AnswerSchema {
        name: "workspace_summary",
        schema: json!({
            "type": "object",
            "properties": {
                "history": {"type": "string"},
                "recent_events": {"type": "string"},
            },
            "required": ["history", "recent_events"],
            "additionalProperties": false,
        }),
    });
    &SCHEMA
}

/// A reflection: `{"facts": [{"content", "keywords", "source_users", "messages",
/// "confidence", "shareable"}], "profiles": [{"user", "tags", "summary"}]}`.
pub fn reflection() -> &'static AnswerSchema {
    static SCHEMA: LazyLock<AnswerSchema> = LazyLock::new(|| AnswerSchema {
        name: "reflection",
        schema: json!({
            "type": "object",
            "properties": {
                "facts": {
                    "type": "array",
                    "maxItems": MOST_FACTS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "pattern": NOT_BLANK_PATTERN},
                            "keywords": strings(MOST_KEYWORDS),
                            "source_users": strings(MOST_KEYWORDS),
                            "messages": {
                                "type": "array",
                                "maxItems": MOST_SOURCES,
                                "items": {"type": "integer", "minimum": 1},
                            },
                            "confidence": confidence(),
                            "shareable": {"type": "boolean"},
                        },
                        "required": ["content", "keywords", "source_users", "messages", "confidence", "shareable"],
                        "additionalProperties": false,
                    },
                },
                "profiles": {
                    "type": "array",
                    "maxItems": MOST_FACTS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "user": {"type": "string", "pattern": NOT_BLANK_PATTERN},
                            "tags": strings(MOST_KEYWORDS),
                            "summary": {"type": "string"},
                        },
                        "required": ["user", "tags", "summary"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["facts", "profiles"],
            "additionalProperties": false,
        }),
    });
    &SCHEMA
}

/// Every schema, for the tests and the providers' checks.
pub fn all() -> [&'static AnswerSchema; 5] {
    [verdict(), verdict_with_answered(), channel_summary(), workspace_summary(), reflection()]
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_raw_line_break_inside_a_string_is_read_as_one() {
        let raw = "{\"summary\": \"one\nline \\\"two\\\"\", \"n\": 1}";
        let object = answer_object(raw).unwrap();
        assert_eq!(object["summary"], "one\nline \"two\"");
        assert!(
            matches!(escape_raw_controls("{\"a\": \"b\"}\n"), std::borrow::Cow::Borrowed(_)),
            "between values: JSON's own"
        );
        assert!(answer_object("{\"a\": \"b\\\"\n\"}").is_ok());
    }
    use super::*;

    /// Strings the generator draws from: blank ones, spaces of other kinds, quotes,
    /// markup, emoji names good and bad, Japanese.
    const POOL: &[&str] = &[
        "",
        " ",
        "\u{3000}",
        "\t",
        " x",
        "x ",
        "thumbsup",
        ":eyes:",
        "+1",
        "raised_hands",
        "ThumbsUp",
        "<script>",
        "thumbs up",
        "a\"quote\"",
        "back\\slash",
        "two\nlines",
        "alice は金曜にデプロイする",
        "the deploy stalled on a migration lock",
    ];

    /// Every answer the schema allows is drawn from (a few at a time): each object
    /// with all its properties, each branch, type, value and bound.
    fn sample(schema: &Value, rng: &mut fastrand::Rng) -> Value {
        if let Some(branches) = schema["anyOf"].as_array() {
            return sample(&branches[rng.usize(..branches.len())], rng);
        }
        if let Some(values) = schema["enum"].as_array() {
            return values[rng.usize(..values.len())].clone();
        }
        let number = |rng: &mut fastrand::Rng| {
            let (min, max) = (schema["minimum"].as_f64().unwrap_or(-1e6), schema["maximum"].as_f64().unwrap_or(1e6));
            match rng.u8(..3) {
                0 => min,
                1 => max,
                _ => min + (max - min) * rng.f64(),
            }
        };
        match schema["type"].as_str().expect("a type") {
            "object" => Value::Object(
                schema["properties"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(name, property)| (name.clone(), sample(property, rng)))
                    .collect(),
            ),
            "array" => {
                let most = schema["maxItems"].as_u64().unwrap_or(3).min(3) as usize;
                Value::Array((0..=rng.usize(..=most)).skip(1).map(|_| sample(&schema["items"], rng)).collect())
            }
            "string" => {
                let pattern = schema["pattern"].as_str().map(|p| regex::Regex::new(p).unwrap());
                let allowed: Vec<&str> =
                    POOL.iter().copied().filter(|s| pattern.as_ref().is_none_or(|p| p.is_match(s))).collect();
                assert!(allowed.len() >= 2, "the pool has strings for {schema}");
                Value::from(allowed[rng.usize(..allowed.len())])
            }
            "number" => Value::from(number(rng)),
            "integer" => Value::from(number(rng).round() as i64),
            "boolean" => Value::from(rng.bool()),
            "null" => Value::Null,
            other => panic!("an unexpected type {other}"),
        }
    }

    /// Whether `schema` allows `value`, for the keywords the schemas use.
    fn allows(schema: &Value, value: &Value) -> bool {
        if let Some(branches) = schema["anyOf"].as_array() {
            return branches.iter().any(|branch| allows(branch, value));
        }
        if let Some(values) = schema["enum"].as_array()
            && !values.iter().any(|v| v.as_f64().zip(value.as_f64()).map_or(v == value, |(a, b)| a == b))
        {
            return false;
        }
        let at_least = |n: f64| schema["minimum"].as_f64().is_none_or(|min| n >= min);
        match (schema["type"].as_str().unwrap(), value) {
            ("object", Value::Object(o)) => {
                let properties = schema["properties"].as_object().unwrap();
                o.len() == properties.len()
                    && properties.iter().all(|(name, p)| o.get(name).is_some_and(|v| allows(p, v)))
            }
            ("array", Value::Array(items)) => {
                schema["maxItems"].as_u64().is_none_or(|most| items.len() as u64 <= most)
                    && items.iter().all(|item| allows(&schema["items"], item))
            }
            ("string", Value::String(text)) => {
                schema["pattern"].as_str().is_none_or(|p| regex::Regex::new(p).unwrap().is_match(text))
            }
            ("number", Value::Number(n)) => at_least(n.as_f64().unwrap()),
            ("integer", Value::Number(n)) => n.is_i64() && at_least(n.as_f64().unwrap()),
            ("boolean", Value::Bool(_)) | ("null", Value::Null) => true,
            _ => false,
        }
    }

    fn parses(schema: &AnswerSchema, answer: &str) -> Result<(), String> {
        match schema.name {
            "judgment" => crate::judge::verdict::parse_verdict(answer).map(drop).map_err(|e| e.to_string()),
            "channel_summary" => crate::memory::summarize::parse_summary(answer).map(drop).map_err(|e| e.to_string()),
            "workspace_summary" => {
                crate::memory::summarize::parse_workspace(answer).map(drop).map_err(|e| e.to_string())
            }
            "reflection" => crate::memory::reflect::parse_reflection(answer).map(drop).map_err(|e| e.to_string()),
            other => panic!("no parser for {other}"),
        }
    }

    /// A model that keeps to the schema (structured output) always gives an answer
    /// kuuki can use: the parsers take every answer the schemas allow.
    #[test]
    fn every_answer_a_schema_allows_parses() {
        let mut rng = fastrand::Rng::with_seed(37);
        for schema in all() {
            for _ in 0..500 {
                let answer = sample(&schema.schema, &mut rng);
                assert!(allows(&schema.schema, &answer), "{}: {answer}", schema.name);
                let answer = answer.to_string();
                if let Err(e) = parses(schema, &answer) {
                    panic!("{} allows {answer}, which its parser refuses: {e}", schema.name);
                }
            }
        }
    }

    /// What OpenAI's strict mode asks of a schema, everywhere in it: an object root,
    /// every property required, no other properties, and only keywords it knows.
    #[test]
    fn the_schemas_keep_to_openais_strict_mode() {
        fn check(schema: &Value, at: &str) {
            let object = schema.as_object().unwrap_or_else(|| panic!("{at}: a schema is an object"));
            for key in object.keys() {
                let known = [
                    "type",
                    "properties",
                    "required",
                    "additionalProperties",
                    "items",
                    "enum",
                    "anyOf",
                    "pattern",
                    "minimum",
                    "maxItems",
                ];
                assert!(known.contains(&key.as_str()), "{at}: {key} is not for strict mode");
            }
            if schema["type"] == "object" {
                let properties = schema["properties"].as_object().unwrap();
                let required: Vec<&str> =
                    schema["required"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
                assert_eq!(required, properties.keys().map(String::as_str).collect::<Vec<_>>(), "{at}");
                assert_eq!(schema["additionalProperties"], false, "{at}");
                for (name, property) in properties {
                    check(property, &format!("{at}.{name}"));
                }
            }
            if let Some(items) = object.get("items") {
                // A bounded list: a small model fills an unbounded one to its token limit.
                assert!(schema["maxItems"].as_u64().is_some_and(|most| most <= 20), "{at}: a list without a bound");
                check(items, &format!("{at}[]"));
            }
            for (i, branch) in schema["anyOf"].as_array().into_iter().flatten().enumerate() {
                check(branch, &format!("{at}|{i}"));
            }
            if let Some(pattern) = schema["pattern"].as_str() {
                // llama.cpp turns a pattern into grammar only when it is anchored.
                assert!(pattern.starts_with('^') && pattern.ends_with('$'), "{at}: {pattern}");
                assert!(!pattern.contains('.') && !pattern.contains("\\s"), "{at}: {pattern}");
            }
        }
        for schema in all() {
            assert_eq!(schema.schema["type"], "object", "{}", schema.name);
            let name_ok = schema.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            assert!(name_ok && schema.name.len() <= 64, "{}", schema.name);
            check(&schema.schema, schema.name);
        }
    }

    /// The examples the prompts show are answers the schemas allow (the judge's with
    /// its optional emoji as null), and answers that break a parser's rule are not.
    #[test]
    fn the_prompts_ask_for_what_the_schemas_describe() {
        let examples = [
            (verdict(), "judge", "{\"should_respond\""),
            (channel_summary(), "summarize", "{\"summary\""),
            (reflection(), "reflect", "{\"facts\""),
        ];
        let templates = |kind: &str| match kind {
            "judge" => [include_str!("judge.en.md.j2"), include_str!("judge.ja.md.j2")],
            "summarize" => [include_str!("summarize.en.md.j2"), include_str!("summarize.ja.md.j2")],
            _ => [include_str!("reflect.en.md.j2"), include_str!("reflect.ja.md.j2")],
        };
        for (schema, kind, opening) in examples {
            for template in templates(kind) {
                let line = template.lines().find(|l| l.starts_with(opening)).expect("an example");
                let mut example: Value = serde_json::from_str(line).unwrap();
                if kind == "judge" {
                    example["emoji"] = Value::Null;
                }
                assert!(allows(&schema.schema, &example), "{kind}: {example}");
            }
        }
        let workspace = include_str!("workspace.en.md.j2");
        let example = &workspace[workspace.find("{\"history\"").unwrap()..].lines().next().unwrap();
        assert!(allows(&workspace_summary().schema, &serde_json::from_str(example).unwrap()));
        for (schema, refused) in [
            (
                verdict(),
                r#"{"should_respond": true, "reason": "", "confidence": 256, "delay_seconds": 0, "response_type": "full_response", "conversation_state": "active", "emoji": null}"#,
            ),
            (
                verdict(),
                r#"{"should_respond": true, "reason": "", "confidence": 1, "delay_seconds": 1000000000000000, "response_type": "full_response", "conversation_state": "active", "emoji": null}"#,
            ),
            (
                verdict(),
                r#"{"should_respond": true, "reason": "", "confidence": 1, "delay_seconds": 0, "response_type": "full_response", "conversation_state": "active", "emoji": "Thumbs Up"}"#,
            ),
            (
                reflection(),
                r#"{"facts": [{"content": " ", "keywords": [], "source_users": [], "messages": [], "confidence": 0.5, "shareable": false}], "profiles": []}"#,
            ),
            (reflection(), r#"{"facts": [], "profiles": [{"user": "", "tags": [], "summary": ""}]}"#),
        ] {
            let refused: Value = serde_json::from_str(refused).unwrap();
            assert!(!allows(&schema.schema, &refused), "{refused}");
            assert!(parses(schema, &refused.to_string()).is_err(), "{refused}");
        }
    }
}
