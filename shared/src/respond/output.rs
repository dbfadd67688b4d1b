//! A model's answer is checked before it is posted: a provider may answer 200 with an
//! error message as the text, stop at the token limit, or have its answer filtered.
//! None of that is fit for a channel.

use crate::ports::{Finish, LlmResponse};

/// How an error message from a model server or proxy begins.
const ERROR_OPENINGS: &[&str] = &[
    "error:",
    "error ",
    "[error]",
    "err:",
    "exception:",
    "traceback (most recent call last)",
    "{\"error\"",
    "internal server error",
    "bad gateway",
    "service unavailable",
    "gateway timeout",
    "upstream ",
    "rate limit",
    "429 too many requests",
    "500 internal",
    "502 bad",
    "503 service",
    "504 gateway",
    "エラー:",
    "エラー：",
    "エラーが発生しました",
    "サーバーエラー",
];

/// Phrases that ask the reader to come back later: with an error word, an error message.
const RETRY_PHRASES: &[&str] = &[
    "please retry",
    "please try again",
    "try again later",
    "retry later",
    "しばらくしてから",
    "後でもう一度",
    "再度お試しください",
];
const ERROR_WORDS: &[&str] = &[
    "error",
    "overloaded",
    "unavailable",
    "rate limit",
    "quota",
    "timed out",
    "timeout",
    "failed",
    "エラー",
    "混雑",
    "失敗",
];
/// Error messages are short; a long answer that mentions errors is about them.
const ERROR_MESSAGE_MAX_CHARS: usize = 240;

/// Whether the model's answer may be posted; the reason when not.
pub fn fit_to_post(response: &LlmResponse) -> Result<(), String> {
    if response.finish != Finish::Complete {
        return Err(format!("the model's answer was {}", response.finish));
    }
    if response.text.trim().is_empty() {
        return Err("the model returned no text".into());
    }
    if looks_like_an_error(&response.text) {
        let shown: String = response.text.trim().chars().take(60).collect();
        return Err(format!("the model's text is an error message (\"{shown}\")"));
    }
    Ok(())
}

/// Whether `text` reads as an error message rather than an answer.
pub fn looks_like_an_error(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    if ERROR_OPENINGS.iter().any(|opening| lower.starts_with(opening)) {
        return true;
    }
    lower.chars().count() <= ERROR_MESSAGE_MAX_CHARS
        && RETRY_PHRASES.iter().any(|p| lower.contains(p))
        && ERROR_WORDS.iter().any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::Usage;

    fn answer(text: &str, finish: Finish) -> LlmResponse {
        LlmResponse { text: text.into(), usage: Usage::default(), finish }
    }

    #[test]
    fn error_messages_as_text_are_not_fit_to_post() {
        for text in [
            "Error: upstream model overloaded (503). Please retry later.",
            "error: rate limit exceeded",
            "{\"error\": {\"message\": \"The server had an error\"}}",
            "Internal Server Error",
            "upstream connect error or disconnect/reset before headers",
            "The model is currently overloaded. Please try again later.",
            "Request timed out; please retry in a few seconds.",
            "エラーが発生しました。しばらくしてから再度お試しください。",
            "サーバーが混雑しています。しばらくしてから再度お試しください。",
            "  ERROR: quota exhausted ",
        ] {
            assert!(fit_to_post(&answer(text, Finish::Complete)).is_err(), "{text}");
        }
    }

    #[test]
    fn answers_about_errors_are_fit_to_post() {
        for text in [
            "An internal server error (HTTP 500) means the server failed; check its logs first.",
            "そのエラーはたぶん認証の設定ですね。トークンを確認してみてください。",
            "Try again later? I think the deploy is still running, give it five minutes.",
            "おはよう！今日もよろしくね",
            "Errors in the nightly job come from the disk filling up: clean /tmp.",
        ] {
            assert_eq!(fit_to_post(&answer(text, Finish::Complete)), Ok(()), "{text}");
        }
    }

    #[test]
    fn only_a_normal_stop_is_fit_to_post() {
        assert!(fit_to_post(&answer("The answer is", Finish::Truncated)).unwrap_err().contains("token limit"));
        assert!(fit_to_post(&answer("…", Finish::Filtered)).unwrap_err().contains("filter"));
        assert!(fit_to_post(&answer("x", Finish::Other("tool_calls".into()))).unwrap_err().contains("tool_calls"));
        assert!(fit_to_post(&answer(" \n ", Finish::Complete)).is_err());
    }
}
