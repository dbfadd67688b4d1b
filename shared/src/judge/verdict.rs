//! Reading the LLM judge's answer (docs/design.md §7.4): strict JSON, a code fence or a
//! one-element array tolerated; anything else is an error and means "do not respond".

use serde_json::Value;
use thiserror::Error;

use crate::domain::{ConversationState, LlmVerdict, ResponseType};

#[derive(Debug, Error, PartialEq)]
#[error("unusable judge answer: {0}")]
pub struct VerdictError(pub String);

pub fn parse_verdict(raw: &str) -> Result<LlmVerdict, VerdictError> {
    let body = crate::prompts::answers::escape_raw_controls(strip_code_fence(raw.trim()));
    let value: Value = serde_json::from_str(&body).map_err(|e| VerdictError(format!("not JSON ({e})")))?;
    let object = match value {
        Value::Object(o) => o,
        Value::Array(mut items) if items.len() == 1 => match items.pop() {
            Some(Value::Object(o)) => o,
            _ => return Err(VerdictError("the array does not hold an object".into())),
        },
        _ => return Err(VerdictError("not a JSON object".into())),
    };
    let should_respond = object
        .get("should_respond")
        .and_then(Value::as_bool)
        .ok_or_else(|| VerdictError("should_respond must be true or false".into()))?;
    let reason = match object.get("reason") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(VerdictError("reason must be a string".into())),
    };
    let confidence = match object.get("confidence") {
        None | Some(Value::Null) => 1.0,
        Some(v) => v
            .as_f64()
            .filter(|c| (0.0..=1.0).contains(c))
            .ok_or_else(|| VerdictError("confidence must be a number from 0 to 1".into()))?,
    };
    let delay_seconds = match object.get("delay_seconds") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|d| u32::try_from(d).ok())
                .ok_or_else(|| VerdictError("delay_seconds must be a whole number of seconds, 0 or more".into()))?,
        ),
    };
    let response_type = match object.get("response_type") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_str()
                .and_then(ResponseType::parse)
                .ok_or_else(|| VerdictError("response_type must be react_only, short_ack or full_response".into()))?,
        ),
    };
    let conversation_state = match object.get("conversation_state") {
        None | Some(Value::Null) => ConversationState::Active,
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| {
            VerdictError("conversation_state must be active, ending, misunderstanding or conflict".into())
        })?,
    };
    let emoji = match object.get("emoji") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_str()
                .map(|e| e.trim_matches(':'))
                .filter(|e| is_emoji_name(e))
                .ok_or_else(|| VerdictError("emoji must be an emoji name like thumbsup".into()))?
                .to_owned(),
        ),
    };
    let already_answered = match object.get("already_answered") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_bool().ok_or_else(|| VerdictError("already_answered must be true or false".into()))?),
    };
    Ok(LlmVerdict {
        emoji,
        should_respond,
        reason,
        confidence,
        delay_seconds,
        response_type,
        conversation_state,
        already_answered,
    })
}

/// Slack emoji names: lowercase letters, digits, `_`, `-`, `+`, `'`, at most 64.
fn is_emoji_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-+'".contains(&b))
}

fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn already_answered_is_read_when_given() {
        let with = |v: &str| format!(r#"{{"should_respond": false, "reason": "x", "already_answered": {v}}}"#);
        assert_eq!(parse_verdict(&with("true")).unwrap().already_answered, Some(true));
        assert_eq!(parse_verdict(&with("false")).unwrap().already_answered, Some(false));
        assert_eq!(parse_verdict(&with("null")).unwrap().already_answered, None);
        assert_eq!(parse_verdict(r#"{"should_respond": true}"#).unwrap().already_answered, None);
        assert!(parse_verdict(&with("\"yes\"")).unwrap_err().0.contains("already_answered"));
    }

    #[test]
    fn reads_a_full_answer() {
        let v = parse_verdict(
            r#"{"should_respond": true, "reason": "unanswered question", "confidence": 0.8,
                "delay_seconds": 30, "response_type": "short_ack", "conversation_state": "active"}"#,
        )
        .unwrap();
        assert!(v.should_respond);
        assert_eq!(v.reason, "unanswered question");
        assert_eq!(v.confidence, 0.8);
        assert_eq!(v.delay_seconds, Some(30));
        assert_eq!(v.response_type, Some(ResponseType::ShortAck));
        assert_eq!(v.conversation_state, ConversationState::Active);
    }

    #[test]
    fn tolerates_a_code_fence_and_a_one_element_array() {
        assert!(parse_verdict("```json\n{\"should_respond\": true}\n```").unwrap().should_respond);
        assert!(!parse_verdict("[{\"should_respond\": false}]").unwrap().should_respond);
    }

    #[test]
    fn an_emoji_may_be_chosen() {
        let v = parse_verdict(r#"{"should_respond": true, "response_type": "react_only", "emoji": ":raised_hands:"}"#)
            .unwrap();
        assert_eq!(v.emoji.as_deref(), Some("raised_hands"));
        assert!(parse_verdict(r#"{"should_respond": true, "emoji": "<script>"}"#).is_err());
    }

    #[test]
    fn rejects_anything_else() {
        for bad in [
            "Sure! I think kuuki should respond.",
            "{\"should_respond\": \"yes\"}",
            "{}",
            "[{\"should_respond\": true}, {\"should_respond\": false}]",
            "{\"should_respond\": true, \"confidence\": 1.5}",
            "{\"should_respond\": true, \"delay_seconds\": -5}",
            "{\"should_respond\": true, \"response_type\": \"essay\"}",
            "{\"should_respond\": true, \"conversation_state\": \"bored\"}",
        ] {
            assert!(parse_verdict(bad).is_err(), "{bad}");
        }
    }
}
