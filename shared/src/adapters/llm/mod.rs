//! LLM adapters: OpenAI-compatible chat completions and Anthropic Messages over HTTP,
//! scripted answers for replay and tests, and a wrapper that counts every call by role;
//! embedders for vector fact search.

mod anthropic;
mod capped;
mod embeddings;
mod http;
mod openai;
mod script;
mod structured;

pub use anthropic::Anthropic;
pub use capped::CappedOutput;
pub use embeddings::{KEYWORD_HASH_DIMENSIONS, KeywordHashEmbedder, OpenAiEmbeddings};
pub use http::HttpPolicy;
pub use openai::OpenAiCompatible;
pub use script::{ScriptError, ScriptedLlm};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use secrecy::ExposeSecret;

use crate::config::{ConfigError, LlmProvider, Settings};
use crate::ports::{Embedder, Llm, LlmError, LlmRequest, LlmResponse, LlmRole, Usage};

/// `LLM_TIMEOUT_SECONDS` and `LLM_MAX_RETRIES` for every call to a model.
fn http_policy(settings: &Settings) -> HttpPolicy {
    HttpPolicy {
        timeout: settings.budget.llm_timeout,
        max_retries: settings.budget.llm_max_retries,
        backoff: std::time::Duration::from_millis(500),
        max_retry_wait: crate::budget::llm_retry_wait_cap(settings.budget.llm_timeout),
    }
}

/// The HTTP provider `settings` name (`LLM_PROVIDER` openai or anthropic), or `None`
/// for the others. A provider that cannot work as configured is an error naming the
/// setting.
pub fn from_settings(settings: &Settings) -> Result<Option<Arc<dyn Llm>>, ConfigError> {
    let provider = provider_from_settings(settings)?;
    Ok(match settings.llm.max_output_tokens {
        Some(cap) => provider.map(|llm| Arc::new(CappedOutput::new(llm, cap)) as Arc<dyn Llm>),
        None => provider,
    })
}

fn provider_from_settings(settings: &Settings) -> Result<Option<Arc<dyn Llm>>, ConfigError> {
    let policy = http_policy(settings);
    Ok(match settings.llm.provider {
        LlmProvider::OpenAi => Some(Arc::new(
            OpenAiCompatible::new(&settings.llm.openai_base_url, settings.llm.openai_api_key.expose_secret(), policy)
                .with_structured_output(settings.llm.structured_output),
        )),
        LlmProvider::Anthropic => {
            if settings.llm.anthropic_api_key.expose_secret().is_empty() {
                return Err(ConfigError::Invalid {
                    name: "ANTHROPIC_API_KEY",
                    value: String::new(),
                    reason: "LLM_PROVIDER=anthropic needs a key".into(),
                });
            }
            Some(Arc::new(
                Anthropic::new(
                    &settings.llm.anthropic_base_url,
                    settings.llm.anthropic_api_key.expose_secret(),
                    policy,
                )
                .with_structured_output(settings.llm.structured_output),
            ))
        }
        LlmProvider::None => None,
    })
}

/// OpenAI's own endpoint, which needs a key (a local server may not).
const OPENAI_API: &str = "https://api.openai.com/v1";

/// The embedder for vector fact search: `None` unless `VECTOR_SEARCH_ENABLED`. With
/// `LLM_PROVIDER=openai` it calls the same endpoint as the chat model; Anthropic has no
/// embeddings, so with `anthropic` it calls `OPENAI_BASE_URL` too, which must then have
/// a key or point at a server of its own. With `none` (rules only, or an LLM script in
/// replay and tests) it is the local [`KeywordHashEmbedder`], which calls nothing.
pub fn embedder_from_settings(settings: &Settings) -> Result<Option<Arc<dyn Embedder>>, ConfigError> {
    if !settings.memory.vector_search_enabled {
        return Ok(None);
    }
    if settings.llm.provider == LlmProvider::None {
        return Ok(Some(Arc::new(KeywordHashEmbedder)));
    }
    let key = settings.llm.openai_api_key.expose_secret();
    let base_url = settings.llm.openai_base_url.trim_end_matches('/');
    if settings.llm.provider == LlmProvider::Anthropic && key.is_empty() && base_url == OPENAI_API {
        return Err(ConfigError::Invalid {
            name: "OPENAI_API_KEY",
            value: String::new(),
            reason: "VECTOR_SEARCH_ENABLED with LLM_PROVIDER=anthropic embeds through OPENAI_BASE_URL (Anthropic \
                     has no embeddings): set OPENAI_API_KEY, or OPENAI_BASE_URL to a server that needs none"
                .into(),
        });
    }
    Ok(Some(Arc::new(OpenAiEmbeddings::new(base_url, key, &settings.llm.embedding_model, http_policy(settings)))))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::from_vars(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap()
    }

    #[tokio::test]
    async fn vector_search_is_off_by_default_and_its_embedder_follows_the_provider() {
        assert!(embedder_from_settings(&settings(&[("LLM_PROVIDER", "openai")])).unwrap().is_none(), "off");
        let local = embedder_from_settings(&settings(&[("VECTOR_SEARCH_ENABLED", "true")])).unwrap().unwrap();
        let vectors = local.embed(&["deploy on Friday".to_string()]).await.unwrap();
        assert_eq!(vectors, vec![KeywordHashEmbedder::vector("deploy on Friday")], "no provider: the local one");
        let openai = [("VECTOR_SEARCH_ENABLED", "true"), ("LLM_PROVIDER", "openai")];
        assert!(embedder_from_settings(&settings(&openai)).unwrap().is_some());
        let keyless_anthropic =
            [("VECTOR_SEARCH_ENABLED", "true"), ("LLM_PROVIDER", "anthropic"), ("ANTHROPIC_API_KEY", "a")];
        let error = embedder_from_settings(&settings(&keyless_anthropic)).err().expect("OpenAI's API needs a key");
        assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
        let local_server = [
            ("VECTOR_SEARCH_ENABLED", "true"),
            ("LLM_PROVIDER", "anthropic"),
            ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
        ];
        assert!(embedder_from_settings(&settings(&local_server)).unwrap().is_some());
    }
}
