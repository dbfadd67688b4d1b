//! Counts AWS calls by service and operation (an SDK interceptor): the figure behind
//! "at most two AWS calls per ingested message".

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::config_bag::ConfigBag;

#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    calls: Arc<Mutex<BTreeMap<String, u64>>>,
    service: &'static str,
}

impl CallCounter {
    /// A counter for one service that shares its tally with `self`.
    pub fn for_service(&self, service: &'static str) -> CallCounter {
        CallCounter { calls: self.calls.clone(), service }
    }

    /// Calls so far by `service.Operation`.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().expect("counter lock").clone()
    }

    pub fn total(&self) -> u64 {
        self.calls().values().sum()
    }

    pub fn reset(&self) {
        self.calls.lock().expect("counter lock").clear();
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "kuuki-call-counter"
    }

    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg.load::<Metadata>().map_or("call", |m| m.name()).to_owned();
        *self.calls.lock().expect("counter lock").entry(format!("{}.{operation}", self.service)).or_default() += 1;
        Ok(())
    }
}
