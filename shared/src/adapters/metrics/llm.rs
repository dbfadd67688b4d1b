//! Model calls as metrics: calls, failures, tokens and time by role.

use std::sync::Arc;

use async_trait::async_trait;

use super::Metrics;
use crate::ports::{Llm, LlmError, LlmRequest, LlmResponse};

/// A model that counts each call through it in `metrics`.
pub struct MeteredLlm {
    inner: Arc<dyn Llm>,
    metrics: Arc<Metrics>,
}

impl MeteredLlm {
    pub fn new(inner: Arc<dyn Llm>, metrics: Arc<Metrics>) -> Self {
        MeteredLlm { inner, metrics }
    }
}

#[async_trait]
impl Llm for MeteredLlm {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let role = request.role;
        let started = tokio::time::Instant::now();
        let result = self.inner.complete(request).await;
        let tokens = result.as_ref().ok().map(|answer| (answer.usage.input_tokens, answer.usage.output_tokens));
        self.metrics.llm_call(role, tokens, started.elapsed());
        result
    }
}
