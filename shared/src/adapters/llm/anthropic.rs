//! Anthropic Messages (`ANTHROPIC_BASE_URL`).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{HttpPolicy, client, clip, decode, post_json};
use crate::ports::{Finish, Llm, LlmError, LlmRequest, LlmResponse, Usage};

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
        let answer: MessageAnswer =
            decode("anthropic", post_json(&self.http, &self.policy, "anthropic", &url, &headers, &body).await?)?;
        if answer.kind.as_deref() == Some("error") {
            let error = answer.error.unwrap_or_default();
            let message = error["message"].as_str().map_or_else(|| error.to_string(), str::to_owned);
            return Err(LlmError::Failed(format!("anthropic: an error in a 200 answer: {}", clip(&message))));
        }
        let finish = match answer.stop_reason.as_deref() {
            None | Some("end_turn") | Some("stop_sequence") => Finish::Complete,
            Some("max_tokens") => Finish::Truncated,
            Some("refusal") => Finish::Filtered,
            Some(other) => Finish::Other(other.to_owned()),
        };
        let text: String = answer
            .content
            .ok_or_else(|| LlmError::Failed("anthropic: the answer has no content".into()))?
            .into_iter()
            .filter(|block| block.kind.as_deref() == Some("text"))
            .filter_map(|block| block.text)
            .collect();
        let usage = answer.usage.unwrap_or_default();
        Ok(LlmResponse {
            text,
            usage: Usage {
                input_tokens: usage.input_tokens.unwrap_or(0),
                output_tokens: usage.output_tokens.unwrap_or(0),
            },
            finish,
        })
    }
}

/// A Messages API answer as far as kuuki reads it; a missing or null field reads as
/// absent.
#[derive(Deserialize, Default)]
#[serde(default)]
struct MessageAnswer {
    #[serde(rename = "type")]
    kind: Option<String>,
    error: Option<Value>,
    stop_reason: Option<String>,
    content: Option<Vec<ContentBlock>>,
    usage: Option<MessageUsage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Text blocks only; other blocks (tool use, thinking) are skipped.
    text: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct MessageUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}
