//! OpenAI-compatible chat completions (`OPENAI_BASE_URL`): OpenAI, Gemini's compatible
//! endpoint, Ollama, vLLM.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{HttpPolicy, Refused, client, clip, decode, post_json_asking};
use super::structured::StructuredMode;
use crate::config::StructuredOutput;
use crate::ports::{Finish, Llm, LlmError, LlmRequest, LlmResponse, Usage};

/// Words of an error body that name the structured-output part of a request.
const FORMAT_WORDS: &[&str] = &["response_format", "json_schema", "json_object", "schema"];

pub struct OpenAiCompatible {
    http: reqwest::Client,
    policy: HttpPolicy,
    base_url: String,
    api_key: String,
    structured: StructuredMode,
}

impl OpenAiCompatible {
    /// `base_url` ends before `/chat/completions` (`https://api.openai.com/v1`); an
    /// empty key sends no Authorization header (local servers). JSON answers are asked
    /// for as `json_schema` (see [`OpenAiCompatible::with_structured_output`]).
    pub fn new(base_url: &str, api_key: &str, policy: HttpPolicy) -> Self {
        OpenAiCompatible {
            http: client(&policy),
            policy,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
            structured: StructuredMode::new(StructuredOutput::JsonSchema),
        }
    }

    /// Asks for JSON answers in this form first (`LLM_STRUCTURED_OUTPUT`).
    pub fn with_structured_output(mut self, start: StructuredOutput) -> Self {
        self.structured = StructuredMode::new(start);
        self
    }
}

/// The request body: kuuki's instructions as the system message, the data and the
/// question as the user message, and the answer's schema in the form `mode` says.
fn body(request: &LlmRequest, mode: StructuredOutput) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [
            {"role": "system", "content": request.system},
            {"role": "user", "content": request.user},
        ],
    });
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(schema) = request.schema {
        match mode {
            StructuredOutput::JsonSchema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": schema.name, "schema": schema.schema, "strict": true},
                });
            }
            StructuredOutput::JsonObject => {
                body["response_format"] = json!({"type": "json_object", "schema": schema.schema});
            }
            StructuredOutput::Off => {}
        }
    }
    body
}

#[async_trait]
impl Llm for OpenAiCompatible {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let bearer = format!("Bearer {}", self.api_key);
        let headers: Vec<(&str, &str)> =
            if self.api_key.is_empty() { vec![] } else { vec![("authorization", &bearer)] };
        let url = format!("{}/chat/completions", self.base_url);
        let mut mode = if request.schema.is_some() { self.structured.current() } else { StructuredOutput::Off };
        let answer = loop {
            let asking = (mode != StructuredOutput::Off).then_some(FORMAT_WORDS);
            let body = body(&request, mode);
            match post_json_asking(&self.http, &self.policy, "openai", &url, &headers, &body, asking).await {
                Ok(answer) => break answer,
                Err(Refused::Format(status)) => {
                    mode = self.structured.step_down("openai", mode, mode.next(), status.as_u16());
                }
                Err(Refused::Failed(error)) => return Err(error),
            }
        };
        let answer: Completion = decode("openai", answer)?;
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
