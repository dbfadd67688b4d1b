//! LLM adapters: scripted answers for replay and tests, and a wrapper that counts every
//! call by role. The HTTP providers arrive with the LLM issue.

mod script;

pub use script::{ScriptError, ScriptedLlm};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::ports::{Llm, LlmError, LlmRequest, LlmResponse, LlmRole, Usage};

/// Calls and tokens of one role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleUsage {
    pub calls: u64,
    pub failures: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Counts every call that passes through, by role.
pub struct CountingLlm {
    inner: Arc<dyn Llm>,
    usage: Mutex<BTreeMap<LlmRole, RoleUsage>>,
}

impl CountingLlm {
    pub fn new(inner: Arc<dyn Llm>) -> Self {
        Self {
            inner,
            usage: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn usage(&self) -> BTreeMap<LlmRole, RoleUsage> {
        self.usage.lock().expect("usage lock").clone()
    }
}

#[async_trait]
impl Llm for CountingLlm {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let role = request.role;
        let result = self.inner.complete(request).await;
        let mut usage = self.usage.lock().expect("usage lock");
        let entry = usage.entry(role).or_default();
        entry.calls += 1;
        match &result {
            Ok(LlmResponse {
                usage: Usage {
                    input_tokens,
                    output_tokens,
                },
                ..
            }) => {
                entry.input_tokens += input_tokens;
                entry.output_tokens += output_tokens;
            }
            Err(_) => entry.failures += 1,
        }
        result
    }
}
