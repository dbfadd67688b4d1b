//! Anthropic Messages (`ANTHROPIC_BASE_URL`).

use async_trait::async_trait;
use serde_json::json;

use super::http::{HttpPolicy, client, post_json};
use crate::ports::{Llm, LlmError, LlmRequest, LlmResponse, Usage};

/// The Messages API version kuuki speaks.
const API_VERSION: &str = "2023-06-01";

pub struct Anthropic {
    http: reqwest::Client,
    policy: HttpPolicy,
    base_url: String,
    api_key: String,
}

impl Anthropic {
    /// `base_url` ends before `/v1/messages` (`https://api.anthropic.com`).
    pub fn new(base_url: &str, api_key: &str, policy: HttpPolicy) -> Self {
        Anthropic {
            http: client(&policy),
            policy,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
        }
    }
}

#[async_trait]
impl Llm for Anthropic {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let body = json!({
            "model": request.model,
            "max_tokens": request.max_tokens,
            "system": request.system,
            "messages": [{"role": "user", "content": super::USER_TURN}],
        });
        let url = format!("{}/v1/messages", self.base_url);
        let headers = [("x-api-key", self.api_key.as_str()), ("anthropic-version", API_VERSION)];
        let answer = post_json(&self.http, &self.policy, "anthropic", &url, &headers, &body).await?;
        let text: String = answer["content"]
            .as_array()
            .ok_or_else(|| LlmError::Failed("anthropic: the answer has no content".into()))?
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect();
        Ok(LlmResponse {
            text,
            usage: Usage {
                input_tokens: answer["usage"]["input_tokens"].as_u64().unwrap_or(0),
                output_tokens: answer["usage"]["output_tokens"].as_u64().unwrap_or(0),
            },
        })
    }
}

