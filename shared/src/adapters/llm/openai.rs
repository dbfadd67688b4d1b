//! OpenAI-compatible chat completions (`OPENAI_BASE_URL`): OpenAI, Gemini's compatible
//! endpoint, Ollama, vLLM.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{HttpPolicy, client, clip, decode, post_json};
use crate::ports::{Finish, Llm, LlmError, LlmRequest, LlmResponse, Usage};

pub struct OpenAiCompatible {
    http: reqwest::Client,
    policy: HttpPolicy,
    base_url: String,
    api_key: String,
}

impl OpenAiCompatible {
    /// `base_url` ends before `/chat/completions` (`https://api.openai.com/v1`); an
    /// empty key sends no Authorization header (local servers).
    pub fn new(base_url: &str, api_key: &str, policy: HttpPolicy) -> Self {
        OpenAiCompatible {
            http: client(&policy),
            policy,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
        }
    }
}

#[async_trait]
impl Llm for OpenAiCompatible {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let body = json!({
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": super::USER_TURN},
            ],
        });
        let bearer = format!("Bearer {}", self.api_key);
        let headers: Vec<(&str, &str)> =
            if self.api_key.is_empty() { vec![] } else { vec![("authorization", &bearer)] };
        let url = format!("{}/chat/completions", self.base_url);
        let answer: Completion =
            decode("openai", post_json(&self.http, &self.policy, "openai", &url, &headers, &body).await?)?;
        // Some compatible servers and proxies answer 200 with an error object.
        if let Some(error) = answer.error.filter(|e| !e.is_null()) {
            let message = error["message"].as_str().map_or_else(|| error.to_string(), str::to_owned);
            return Err(LlmError::Failed(format!("openai: an error in a 200 answer: {}", clip(&message))));
        }
        let choice = answer.choices.into_iter().next().unwrap_or_default();
        let finish = match choice.finish_reason.as_deref() {
            None | Some("stop") => Finish::Complete,
            Some("length") => Finish::Truncated,
            Some("content_filter") => Finish::Filtered,
            Some(other) => Finish::Other(other.to_owned()),
        };
        let text = choice
            .message
            .content
            .ok_or_else(|| LlmError::Failed("openai: the answer has no choices[0].message.content".into()))?;
        let usage = answer.usage.unwrap_or_default();
        Ok(LlmResponse {
            text,
            usage: Usage {
                input_tokens: usage.prompt_tokens.unwrap_or(0),
                output_tokens: usage.completion_tokens.unwrap_or(0),
            },
            finish,
        })
    }
}

/// A chat completion as far as kuuki reads it; a missing or null field reads as absent.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Completion {
    /// A string or an object, depending on the server.
    error: Option<Value>,
    choices: Vec<Choice>,
    usage: Option<CompletionUsage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Choice {
    message: ChoiceMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ChoiceMessage {
    content: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CompletionUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}
