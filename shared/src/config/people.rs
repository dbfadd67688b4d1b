//! The `people` group: what kuuki keeps of each person and who may change how it takes part.

use super::ConfigError;
use super::reader::Reader;

#[derive(Debug, Clone)]
pub struct PeopleSettings {
    pub user_profile_enabled: bool,
    pub familiarity_thresholds: [u32; 3],
    /// `COMMAND_MANAGERS`: who may change how kuuki takes part, wherever they are.
    pub command_managers: Vec<String>,
}

impl PeopleSettings {
    pub(super) fn parse(r: &Reader) -> Result<PeopleSettings, ConfigError> {
        let familiarity_raw = r.string("FAMILIARITY_THRESHOLDS", "5,30,100");
        let familiarity_thresholds = parse_familiarity(&familiarity_raw).ok_or_else(|| {
            Reader::invalid(
                "FAMILIARITY_THRESHOLDS",
                &familiarity_raw,
                "expected three increasing whole numbers, like 5,30,100",
            )
        })?;
        Ok(PeopleSettings {
            user_profile_enabled: r.bool("USER_PROFILE_ENABLED", true)?,
            familiarity_thresholds,
            command_managers: r.list("COMMAND_MANAGERS", ""),
        })
    }
}

fn parse_familiarity(raw: &str) -> Option<[u32; 3]> {
    let parts: Vec<u32> = raw.split(',').map(|p| p.trim().parse().ok()).collect::<Option<_>>()?;
    match parts[..] {
        [a, b, c] if a < b && b < c => Some([a, b, c]),
        _ => None,
    }
}
