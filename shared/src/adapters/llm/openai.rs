//! OpenAI-compatible chat completions (`OPENAI_BASE_URL`): OpenAI, Gemini's compatible
//! endpoint, Ollama, vLLM.

use async_trait::async_trait;
use serde_json::json;

use super::http::{HttpPolicy, client, clip, post_json};
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
        let headers: Vec<(&str, &str)> = if self.api_key.is_empty() { vec![] } else { vec![("authorization", &bearer)] };
        let url = format!("{}/chat/completions", self.base_url);
        let answer = post_json(&self.http, &self.policy, "openai", &url, &headers, &body).await?;
        // Some compatible servers and proxies answer 200 with an error object.
        if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
            let message = error["message"].as_str().map_or_else(|| error.to_string(), str::to_owned);
            return Err(LlmError::Failed(format!("openai: an error in a 200 answer: {}", clip(&message))));
        }
        let finish = match answer["choices"][0]["finish_reason"].as_str() {
            None | Some("stop") => Finish::Complete,
            Some("length") => Finish::Truncated,
            Some("content_filter") => Finish::Filtered,
            Some(other) => Finish::Other(other.to_owned()),
        };
        let text = answer["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| LlmError::Failed("openai: the answer has no choices[0].message.content".into()))?;
        Ok(LlmResponse {
            text: text.to_owned(),
            usage: Usage {
                input_tokens: answer["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: answer["usage"]["completion_tokens"].as_u64().unwrap_or(0),
            },
            finish,
        })
    }
}

