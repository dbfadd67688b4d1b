//! The `budget` group: how long a delivery, an LLM call and a chat call may take
//! (docs/design.md's time budget; `budget.rs` does the arithmetic).

use std::time::Duration;

use super::ConfigError;
use super::reader::Reader;
use crate::budget::TimeBudget;

#[derive(Debug, Clone)]
pub struct BudgetSettings {
    pub worker_timeout: Duration,
    pub llm_timeout: Duration,
    pub llm_max_retries: u32,
    pub chat_timeout: Duration,
}

impl BudgetSettings {
    pub(super) fn parse(r: &Reader) -> Result<BudgetSettings, ConfigError> {
        let budget = BudgetSettings {
            worker_timeout: Duration::from_secs(r.int(
                "WORKER_TIMEOUT_SECONDS",
                crate::budget::DEFAULT_WORKER_TIMEOUT_SECONDS as i64,
                2,
                900,
            )? as u64),
            llm_timeout: Duration::from_secs(r.int("LLM_TIMEOUT_SECONDS", 30, 1, 600)? as u64),
            llm_max_retries: r.int("LLM_MAX_RETRIES", 2, 0, 10)? as u32,
            chat_timeout: Duration::from_secs(r.int("CHAT_TIMEOUT_SECONDS", 10, 1, 60)? as u64),
        };
        budget.time_budget().check().map_err(|reason| ConfigError::Invalid {
            name: "WORKER_TIMEOUT_SECONDS",
            value: budget.worker_timeout.as_secs().to_string(),
            reason,
        })?;
        Ok(budget)
    }

    /// The time budget these settings give: checked at start-up, read by the workers,
    /// the queues and the template's numbers.
    pub fn time_budget(&self) -> TimeBudget {
        TimeBudget::new(self.worker_timeout, self.llm_timeout, self.llm_max_retries, self.chat_timeout)
    }
}
