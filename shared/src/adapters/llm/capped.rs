//! `LLM_MAX_OUTPUT_TOKENS`: one cap on every call's answer, whatever its role asks for.

use std::sync::Arc;

use async_trait::async_trait;

use crate::ports::{Llm, LlmError, LlmRequest, LlmResponse};

/// A model whose answers are never longer than `max_tokens`: a request asking for more
/// is sent asking for `max_tokens` (a small model on a slow CPU that rambles to a role's
/// own limit would otherwise run out the call's time).
pub struct CappedOutput {
    inner: Arc<dyn Llm>,
    max_tokens: u32,
}

impl CappedOutput {
    pub fn new(inner: Arc<dyn Llm>, max_tokens: u32) -> Self {
        Self { inner, max_tokens }
    }
}

#[async_trait]
impl Llm for CappedOutput {
    async fn complete(&self, mut request: LlmRequest) -> Result<LlmResponse, LlmError> {
        request.max_tokens = request.max_tokens.min(self.max_tokens);
        self.inner.complete(request).await
    }
}
