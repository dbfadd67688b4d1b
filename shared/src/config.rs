//! Every setting, parsed and validated once at start-up. Names and defaults follow the
//! source documents (docs/design.md §14). Nothing here reads the environment: the caller hands
//! in the variables (the environment, then `--set` overrides).
//!
//! The settings come in groups, each parsed by its own function in its own file: `llm`
//! (model servers and models), `judge` (taking part unasked), `talkativeness` (what kuuki learns from how a channel takes
//! its unasked words), `memory` (what is kept
//! and for how long), `people` (profiles and who may command kuuki), `bot` (name and
//! persona), `platforms` (Slack and Discord), `budget` (timeouts) and `storage` (where
//! things are kept, what the logs keep).

use std::collections::HashMap;

use thiserror::Error;

mod budget;
mod catalog;
mod judge;
mod llm;
mod memory;
mod people;
mod persona;
mod platforms;
mod reader;
mod storage;
mod talkativeness;
#[cfg(test)]
mod tests;

pub use budget::BudgetSettings;
pub use catalog::{SETTINGS, SettingDoc};
pub use judge::JudgeSettings;
pub use llm::{LlmProvider, LlmSettings, StructuredOutput};
pub use memory::MemorySettings;
pub use people::PeopleSettings;
pub use persona::{BotSettings, PersonaError, PersonaFile, PromptLanguage, persona_from_vars};
pub use platforms::PlatformSettings;
pub(crate) use reader::Reader;
pub use storage::StorageSettings;
pub use talkativeness::TalkativenessSettings;

/// A setting's value was not acceptable; start-up stops with this message.
#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("invalid setting {name}={value:?}: {reason}")]
    Invalid { name: &'static str, value: String, reason: String },
    #[error("unknown setting {0:?} (see docs/settings.md)")]
    Unknown(String),
}

/// The validated settings, by group. Field names follow the variables.
#[derive(Debug, Clone)]
pub struct Settings {
    pub llm: LlmSettings,
    pub judge: JudgeSettings,
    pub memory: MemorySettings,
    pub people: PeopleSettings,
    pub bot: BotSettings,
    pub platforms: PlatformSettings,
    pub budget: BudgetSettings,
    pub storage: StorageSettings,
    /// `TALKATIVENESS_*`, `FEEDBACK_*` (`config/talkativeness.rs`).
    pub talkativeness: TalkativenessSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_vars(&HashMap::new()).expect("the defaults are valid")
    }
}

impl Settings {
    /// Parses and validates every setting from `vars`; unknown names are not looked at.
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Settings, ConfigError> {
        let r = Reader { vars };
        let llm = LlmSettings::parse(&r)?;
        Ok(Settings {
            judge: JudgeSettings::parse(&r, llm.provider)?,
            llm,
            memory: MemorySettings::parse(&r)?,
            people: PeopleSettings::parse(&r)?,
            bot: BotSettings::parse(&r)?,
            platforms: PlatformSettings::parse(&r)?,
            budget: BudgetSettings::parse(&r)?,
            storage: StorageSettings::parse(&r)?,
            talkativeness: talkativeness::parse(vars)?,
        })
    }

    /// The time budget these settings give (`budget.rs`): checked at start-up, read by
    /// the workers, the queues and the template's numbers.
    pub fn time_budget(&self) -> crate::budget::TimeBudget {
        self.budget.time_budget()
    }

    /// These settings for a run with or without an LLM: an LLM object can be supplied
    /// without `LLM_PROVIDER` (a script in replay and tests), so the LLM judge follows
    /// the LLM itself, and is never on without one.
    pub fn for_llm(mut self, llm_present: bool) -> Self {
        self.judge.llm_enabled = llm_present && self.judge.llm_setting.unwrap_or(true);
        self
    }

    /// The sampling temperature of a role's calls (`None`: the server's own).
    pub fn temperature(&self, role: crate::ports::LlmRole) -> Option<f64> {
        self.llm.temperature(role)
    }

    /// Whether kuuki judges messages nobody addressed to it.
    pub fn ambient_enabled(&self) -> bool {
        self.judge.autonomous_response_enabled && self.memory.enabled
    }

    /// The persona: the persona file's fields where given, the settings otherwise.
    pub fn persona(&self, file: Option<&PersonaFile>) -> crate::domain::Persona {
        self.bot.persona(file)
    }
}

/// Checks that `name` is a setting, for `--set NAME=VALUE`.
pub fn check_known(name: &str) -> Result<(), ConfigError> {
    if SETTINGS.iter().any(|s| s.name == name) { Ok(()) } else { Err(ConfigError::Unknown(name.to_owned())) }
}

/// The settings table of docs/settings.md, generated so it cannot drift from the code.
pub fn settings_markdown() -> String {
    let mut out = String::from("| name | default | meaning |\n| --- | --- | --- |\n");
    for s in SETTINGS {
        let default = if s.default.is_empty() { "(empty)" } else { s.default };
        out.push_str(&format!("| `{}` | `{}` | {} |\n", s.name, default, s.meaning));
    }
    out
}
