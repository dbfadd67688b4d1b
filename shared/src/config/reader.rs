//! Reading one variable at a time: a value parsed, bounded and named in its error.

use std::collections::HashMap;
use std::time::Duration;

use secrecy::SecretString;

use super::ConfigError;
use super::catalog::SETTINGS;

/// Reads one variable at a time, remembering the first error.
pub(crate) struct Reader<'a> {
    pub(crate) vars: &'a HashMap<String, String>,
}

impl Reader<'_> {
    pub(crate) fn raw(&self, name: &'static str) -> Option<&str> {
        debug_assert!(SETTINGS.iter().any(|s| s.name == name), "{name} is undocumented");
        self.vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    pub(crate) fn invalid(name: &'static str, value: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { name, value: value.to_owned(), reason: reason.into() }
    }

    pub(crate) fn string(&self, name: &'static str, default: &str) -> String {
        self.raw(name).unwrap_or(default).to_owned()
    }

    pub(crate) fn bool(&self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        self.opt_bool(name).map(|v| v.unwrap_or(default))
    }

    pub(crate) fn opt_bool(&self, name: &'static str) -> Result<Option<bool>, ConfigError> {
        let Some(v) = self.raw(name) else {
            return Ok(None);
        };
        match v.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Some(true)),
            "false" | "0" | "no" | "off" => Ok(Some(false)),
            _ => Err(Self::invalid(name, v, "expected true or false")),
        }
    }

    pub(crate) fn int(&self, name: &'static str, default: i64, min: i64, max: i64) -> Result<i64, ConfigError> {
        let Some(v) = self.raw(name) else {
            return Ok(default);
        };
        let n: i64 = v.parse().map_err(|_| Self::invalid(name, v, "expected a whole number"))?;
        if n < min || n > max {
            return Err(Self::invalid(name, v, format!("must be between {min} and {max}")));
        }
        Ok(n)
    }

    pub(crate) fn float(&self, name: &'static str, default: f64, min: f64, max: f64) -> Result<f64, ConfigError> {
        let Some(v) = self.raw(name) else {
            return Ok(default);
        };
        let n: f64 = v
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite())
            .ok_or_else(|| Self::invalid(name, v, "expected a number"))?;
        if n < min || n > max {
            return Err(Self::invalid(name, v, format!("must be between {min} and {max}")));
        }
        Ok(n)
    }

    /// A sampling temperature from 0 to 2, or `default`: none sent.
    pub(crate) fn temperature(&self, name: &'static str, default: f64) -> Result<Option<f64>, ConfigError> {
        if self.raw(name).is_some_and(|v| v.eq_ignore_ascii_case("default")) {
            return Ok(None);
        }
        Ok(Some(self.float(name, default, 0.0, 2.0)?))
    }

    pub(crate) fn seconds(&self, name: &'static str, default: i64, max: i64) -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs(self.int(name, default, 0, max)? as u64))
    }

    /// A credential: kept out of `Debug` output and logs.
    pub(crate) fn secret(&self, name: &'static str) -> SecretString {
        SecretString::from(self.string(name, ""))
    }

    pub(crate) fn list(&self, name: &'static str, default: &str) -> Vec<String> {
        self.vars
            .get(name)
            .map(String::as_str)
            .unwrap_or(default)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

pub(crate) const DAY: i64 = 86_400;

impl Reader<'_> {
    /// A whole number of minutes as a duration.
    pub(crate) fn minutes(
        &self,
        name: &'static str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs(self.int(name, default, min, max)? as u64 * 60))
    }
}
