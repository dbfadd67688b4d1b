//! LLM adapters: OpenAI-compatible chat completions and Anthropic Messages over HTTP,
//! scripted answers for replay and tests, and a wrapper that counts every call by role.

mod anthropic;
mod http;
mod openai;
mod script;

pub use anthropic::Anthropic;
pub use http::HttpPolicy;
pub use openai::OpenAiCompatible;
pub use script::{ScriptError, ScriptedLlm};

/// Everything kuuki asks is in the system prompt; providers that need a user turn
/// (Anthropic, some compatible servers) get this one line.
pub const USER_TURN: &str = "Follow the instructions above and answer now.";

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use secrecy::ExposeSecret;

use crate::ports::{Llm, LlmError, LlmRequest, LlmResponse, LlmRole, Usage};

/// The HTTP provider `settings` name (`LLM_PROVIDER` openai or anthropic), or `None`
/// for the others. A provider that cannot work as configured is an error naming the
/// setting.
pub fn from_settings(settings: &crate::config::Settings) -> Result<Option<Arc<dyn Llm>>, crate::config::ConfigError> {
    use crate::config::{ConfigError, LlmProvider};
    let policy = HttpPolicy {
        timeout: settings.llm_timeout,
        max_retries: settings.llm_max_retries,
        backoff: std::time::Duration::from_millis(500),
        max_retry_wait: crate::budget::llm_retry_wait_cap(settings.llm_timeout),
    };
    Ok(match settings.llm_provider {
        LlmProvider::OpenAi => Some(Arc::new(OpenAiCompatible::new(
            &settings.openai_base_url,
            settings.openai_api_key.expose_secret(),
            policy,
        ))),
        LlmProvider::Anthropic => {
            if settings.anthropic_api_key.expose_secret().is_empty() {
                return Err(ConfigError::Invalid {
                    name: "ANTHROPIC_API_KEY",
                    value: String::new(),
                    reason: "LLM_PROVIDER=anthropic needs a key".into(),
                });
            }
            Some(Arc::new(Anthropic::new(
                &settings.anthropic_base_url,
                settings.anthropic_api_key.expose_secret(),
                policy,
            )))
        }
        LlmProvider::None => None,
    })
}

/// Calls, tokens and time of one role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleUsage {
    pub calls: u64,
    pub failures: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Wall time spent waiting for the model.
    pub latency: std::time::Duration,
}

/// Counts every call that passes through, by role.
pub struct CountingLlm {
    inner: Arc<dyn Llm>,
    usage: Mutex<BTreeMap<LlmRole, RoleUsage>>,
    /// In Lambda: also write each call as CloudWatch metrics (EMF) for this function.
    emf_function: Option<String>,
}

impl CountingLlm {
    pub fn new(inner: Arc<dyn Llm>) -> Self {
        Self { inner, usage: Mutex::new(BTreeMap::new()), emf_function: None }
    }

    /// Also emits every call's metrics (calls, failures, tokens, latency by role) as EMF.
    pub fn with_metrics(mut self, function: &str) -> Self {
        self.emf_function = Some(function.to_owned());
        self
    }

    pub fn usage(&self) -> BTreeMap<LlmRole, RoleUsage> {
        self.usage.lock().expect("usage lock").clone()
    }
}

#[async_trait]
impl Llm for CountingLlm {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let role = request.role;
        let started = std::time::Instant::now();
        let result = self.inner.complete(request).await;
        let latency = started.elapsed();
        let (input_tokens, output_tokens) = match &result {
            Ok(r) => (r.usage.input_tokens, r.usage.output_tokens),
            Err(_) => (0, 0),
        };
        tracing::info!(
            target: "kuuki::llm",
            role = role.as_str(),
            input_tokens,
            output_tokens,
            latency_ms = latency.as_millis() as u64,
            ok = result.is_ok(),
            "LLM call"
        );
        if let Some(function) = &self.emf_function {
            let now_ms =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
            let call = crate::adapters::aws::emf::LlmCall {
                function,
                role: role.as_str(),
                ok: result.is_ok(),
                input_tokens,
                output_tokens,
                latency,
            };
            let line = crate::adapters::aws::emf::llm_call_line(now_ms, &call);
            println!("{line}");
        }
        let mut usage = self.usage.lock().expect("usage lock");
        let entry = usage.entry(role).or_default();
        entry.calls += 1;
        entry.latency += latency;
        match &result {
            Ok(LlmResponse { usage: Usage { input_tokens, output_tokens }, .. }) => {
                entry.input_tokens += input_tokens;
                entry.output_tokens += output_tokens;
            }
            Err(_) => entry.failures += 1,
        }
        result
    }
}
