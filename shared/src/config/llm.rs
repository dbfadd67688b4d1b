//! The `llm` group: which model server, which models, how JSON answers are asked for,
//! and the sampling temperatures. (How long a call may take is the budget's.)

use secrecy::SecretString;

use super::ConfigError;
use super::reader::Reader;
use crate::ports::LlmRole;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProvider {
    None,
    OpenAi,
    Anthropic,
}

/// `LLM_STRUCTURED_OUTPUT`: how a JSON answer is asked for, from the most exact form
/// down to none (the order a refused form steps down in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StructuredOutput {
    /// The prompt's words alone.
    Off,
    /// `response_format: {"type": "json_object", "schema": …}` (llama.cpp's form).
    JsonObject,
    /// `response_format: {"type": "json_schema", "json_schema": {…, "strict": true}}`.
    JsonSchema,
}

impl StructuredOutput {
    pub fn as_str(self) -> &'static str {
        match self {
            StructuredOutput::Off => "off",
            StructuredOutput::JsonObject => "json_object",
            StructuredOutput::JsonSchema => "json_schema",
        }
    }

    /// The form to ask with once a server refused this one.
    pub fn next(self) -> StructuredOutput {
        match self {
            StructuredOutput::JsonSchema => StructuredOutput::JsonObject,
            StructuredOutput::JsonObject | StructuredOutput::Off => StructuredOutput::Off,
        }
    }
}

/// `LLM_*`, the roles' models and temperatures, and the two providers' endpoints.
#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub provider: LlmProvider,
    /// `LLM_MODEL`: generation's, and every role's without its own.
    pub model: String,
    pub judge_model: String,
    pub summarize_model: String,
    pub reflection_model: String,
    pub embedding_model: String,
    pub structured_output: StructuredOutput,
    /// `LLM_MAX_OUTPUT_TOKENS`: every call's answer at most this long; `None`: the roles' own.
    pub max_output_tokens: Option<u32>,
    /// `LLM_TEMPERATURE` (replies and openers) and the roles' own; `None`: sent as none.
    pub generate_temperature: Option<f64>,
    pub judge_temperature: Option<f64>,
    pub summarize_temperature: Option<f64>,
    pub reflection_temperature: Option<f64>,
    pub openai_base_url: String,
    pub openai_api_key: SecretString,
    pub anthropic_base_url: String,
    pub anthropic_api_key: SecretString,
}

impl LlmSettings {
    pub(super) fn parse(r: &Reader) -> Result<LlmSettings, ConfigError> {
        let provider = match r.raw("LLM_PROVIDER") {
            None => LlmProvider::None,
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "none" => LlmProvider::None,
                "openai" => LlmProvider::OpenAi,
                "anthropic" => LlmProvider::Anthropic,
                _ => return Err(Reader::invalid("LLM_PROVIDER", v, "expected none, openai or anthropic")),
            },
        };
        let model = r.string("LLM_MODEL", "gpt-4o-mini");
        let model_or_default = |name| r.raw(name).map(str::to_owned).unwrap_or_else(|| model.clone());
        let structured_output = match r.raw("LLM_STRUCTURED_OUTPUT").unwrap_or("json_schema") {
            "json_schema" => StructuredOutput::JsonSchema,
            "json_object" => StructuredOutput::JsonObject,
            "off" => StructuredOutput::Off,
            other => {
                return Err(Reader::invalid(
                    "LLM_STRUCTURED_OUTPUT",
                    other,
                    "expected json_schema, json_object or off",
                ));
            }
        };
        Ok(LlmSettings {
            provider,
            judge_model: model_or_default("JUDGE_MODEL"),
            summarize_model: model_or_default("SUMMARIZE_MODEL"),
            reflection_model: model_or_default("REFLECTION_MODEL"),
            embedding_model: r.string("EMBEDDING_MODEL", "text-embedding-3-small"),
            structured_output,
            max_output_tokens: match r.int("LLM_MAX_OUTPUT_TOKENS", 0, 0, 100_000)? {
                0 => None,
                n => Some(n as u32),
            },
            generate_temperature: r.temperature("LLM_TEMPERATURE", 0.7)?,
            judge_temperature: r.temperature("JUDGE_TEMPERATURE", 0.1)?,
            summarize_temperature: r.temperature("SUMMARIZE_TEMPERATURE", 0.2)?,
            reflection_temperature: r.temperature("REFLECTION_TEMPERATURE", 0.2)?,
            openai_base_url: r.string("OPENAI_BASE_URL", "https://api.openai.com/v1"),
            openai_api_key: r.secret("OPENAI_API_KEY"),
            anthropic_base_url: r.string("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
            anthropic_api_key: r.secret("ANTHROPIC_API_KEY"),
            model,
        })
    }

    /// The sampling temperature of a role's calls (`None`: the server's own).
    pub fn temperature(&self, role: LlmRole) -> Option<f64> {
        match role {
            LlmRole::Judge => self.judge_temperature,
            LlmRole::Generate => self.generate_temperature,
            LlmRole::Summarize => self.summarize_temperature,
            LlmRole::Reflect => self.reflection_temperature,
        }
    }
}
