//! Anthropic Messages (`ANTHROPIC_BASE_URL`).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{HttpPolicy, Refused, client, clip, decode, post_json_asking};
use super::structured::StructuredMode;
use crate::config::StructuredOutput;
use crate::ports::{Finish, Llm, LlmError, LlmRequest, LlmResponse, Usage};

/// The Messages API version kuuki speaks.
const API_VERSION: &str = "2023-06-01";
/// Words of an error body that name the tool kuuki forces for a JSON answer.
const FORMAT_WORDS: &[&str] = &["tool", "input_schema", "schema"];

pub struct Anthropic {
    http: reqwest::Client,
    policy: HttpPolicy,
    base_url: String,
    api_key: String,
    structured: StructuredMode,
}

impl Anthropic {
    /// `base_url` ends before `/v1/messages` (`https://api.anthropic.com`). JSON
    /// answers are asked for as a forced tool call.
    pub fn new(base_url: &str, api_key: &str, policy: HttpPolicy) -> Self {
        Anthropic {
            http: client(&policy),
            policy,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
            structured: StructuredMode::new(StructuredOutput::JsonSchema),
        }
    }

    /// `LLM_STRUCTURED_OUTPUT`: json_schema and json_object both force the tool call;
    /// off asks in the prompt's words alone.
    pub fn with_structured_output(mut self, start: StructuredOutput) -> Self {
        self.structured = StructuredMode::new(start);
        self
    }
}

/// The request body: kuuki's instructions as `system`, the data and the question as
/// the user turn; a JSON answer as the input of the one tool the model must call.
fn body(request: &LlmRequest, mode: StructuredOutput) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": request.system,
        "messages": [{"role": "user", "content": request.user}],
    });
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(schema) = request.schema.filter(|_| mode != StructuredOutput::Off) {
        body["tools"] = json!([{
            "name": schema.name,
            "description": "Give your answer as this tool's input.",
            "input_schema": schema.schema,
        }]);
        body["tool_choice"] = json!({"type": "tool", "name": schema.name});
    }
    body
}

#[async_trait]
impl Llm for Anthropic {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let url = format!("{}/v1/messages", self.base_url);
        let headers = [("x-api-key", self.api_key.as_str()), ("anthropic-version", API_VERSION)];
        let mut mode = if request.schema.is_some() { self.structured.current() } else { StructuredOutput::Off };
        let answer = loop {
            let asking = (mode != StructuredOutput::Off).then_some(FORMAT_WORDS);
            let body = body(&request, mode);
            match post_json_asking(&self.http, &self.policy, "anthropic", &url, &headers, &body, asking).await {
                Ok(answer) => break answer,
                // Both forms are the tool call: without it, the prompt's words alone.
                Err(Refused::Format(status)) => {
                    mode = self.structured.step_down("anthropic", mode, StructuredOutput::Off, status.as_u16());
                }
                Err(Refused::Failed(error)) => return Err(error),
            }
        };
        let answer: MessageAnswer = decode("anthropic", answer)?;
        if answer.kind.as_deref() == Some("error") {
            let error = answer.error.unwrap_or_default();
            let message = error["message"].as_str().map_or_else(|| error.to_string(), str::to_owned);
            return Err(LlmError::Failed(format!("anthropic: an error in a 200 answer: {}", clip(&message))));
        }
        let forced_tool = request.schema.is_some() && mode != StructuredOutput::Off;
        let finish = match answer.stop_reason.as_deref() {
            None | Some("end_turn") | Some("stop_sequence") => Finish::Complete,
            // The answer, when kuuki forced the tool call.
            Some("tool_use") if forced_tool => Finish::Complete,
            Some("max_tokens") => Finish::Truncated,
            Some("refusal") => Finish::Filtered,
            Some(other) => Finish::Other(other.to_owned()),
        };
        let blocks = answer.content.ok_or_else(|| LlmError::Failed("anthropic: the answer has no content".into()))?;
        let text: String = if forced_tool {
            // The tool's input is the JSON answer.
            blocks
                .into_iter()
                .find(|block| block.kind.as_deref() == Some("tool_use"))
                .and_then(|block| block.input)
                .map(|input| input.to_string())
                .ok_or_else(|| LlmError::Failed("anthropic: the answer has no tool_use block".into()))?
        } else {
            blocks.into_iter().filter(|block| block.kind.as_deref() == Some("text")).filter_map(|b| b.text).collect()
        };
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
    /// Text blocks only; other blocks (thinking) are skipped.
    text: Option<String>,
    /// A tool_use block's input: the JSON answer when kuuki forced the tool call.
    input: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct MessageUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}
