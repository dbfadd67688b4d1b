//! The relay's settings, read once from the environment at start-up.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use kuuki::adapters::slack::signature::SigningSecret;
use thiserror::Error;

/// How a failed POST to ingress is retried: back-off doubling from `first_delay` up to
/// `max_delay`, until `give_up_after` has passed since the first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub first_delay: Duration,
    pub max_delay: Duration,
    pub give_up_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            give_up_after: Duration::from_secs(600),
        }
    }
}

/// Everything the relay needs. Its `Debug` never shows the token or the secret.
#[derive(Clone)]
pub struct Settings {
    /// `DISCORD_BOT_TOKEN` (with or without the `Bot ` prefix).
    pub bot_token: String,
    /// `DISCORD_RELAY_SECRET`: the same value ingress has.
    pub relay_secret: SigningSecret,
    /// `KUUKI_INGRESS_URL`: the base URL of ingress; dispatches go to `/discord/events`.
    pub ingress_url: String,
    /// `DISCORD_GATEWAY_URL`: another gateway to connect to (tests, a gateway proxy);
    /// unset, Discord's own `wss://gateway.discord.gg`.
    pub gateway_url: Option<String>,
    /// `RELAY_HEALTH_LISTEN`: where `GET /healthz` is served (default `0.0.0.0:8080`).
    pub health_listen: SocketAddr,
    /// `RELAY_METRICS_INTERVAL_SECONDS`: how often the EMF metrics line is printed (60).
    pub metrics_interval: Duration,
    /// `RELAY_UNHEALTHY_AFTER_SECONDS`: `/healthz` answers 503 once the relay has been
    /// without a gateway session this long (300).
    pub unhealthy_after: Duration,
    /// `RELAY_RETRY_GIVE_UP_SECONDS`: how long one dispatch is retried (600).
    pub retry: RetryPolicy,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("{0} is not set")]
    Missing(&'static str),
    #[error("{name} is not valid: {reason}")]
    Invalid { name: &'static str, reason: String },
}

impl Settings {
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::from_map(&std::env::vars().collect())
    }

    pub fn from_map(env: &HashMap<String, String>) -> Result<Self, SettingsError> {
        let get = |name: &str| env.get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let required = |name: &'static str| get(name).ok_or(SettingsError::Missing(name));
        let seconds = |name: &'static str, default: u64| -> Result<Duration, SettingsError> {
            match get(name) {
                None => Ok(Duration::from_secs(default)),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
                    _ => Err(SettingsError::Invalid {
                        name,
                        reason: format!("{v:?} is not a positive number of seconds"),
                    }),
                },
            }
        };
        let ingress_url = required("KUUKI_INGRESS_URL")?;
        if !(ingress_url.starts_with("http://") || ingress_url.starts_with("https://")) {
            return Err(SettingsError::Invalid { name: "KUUKI_INGRESS_URL", reason: "not an http(s) URL".into() });
        }
        let gateway_url = get("DISCORD_GATEWAY_URL").map(|u| u.trim_end_matches('/').to_owned());
        if let Some(url) = &gateway_url
            && !(url.starts_with("ws://") || url.starts_with("wss://"))
        {
            return Err(SettingsError::Invalid { name: "DISCORD_GATEWAY_URL", reason: "not a ws(s) URL".into() });
        }
        let health_listen = get("RELAY_HEALTH_LISTEN").unwrap_or_else(|| "0.0.0.0:8080".into());
        let health_listen = health_listen.parse().map_err(|_| SettingsError::Invalid {
            name: "RELAY_HEALTH_LISTEN",
            reason: format!("{health_listen:?} is not an address:port"),
        })?;
        Ok(Settings {
            bot_token: required("DISCORD_BOT_TOKEN")?,
            relay_secret: SigningSecret::new(required("DISCORD_RELAY_SECRET")?),
            ingress_url,
            gateway_url,
            health_listen,
            metrics_interval: seconds("RELAY_METRICS_INTERVAL_SECONDS", 60)?,
            unhealthy_after: seconds("RELAY_UNHEALTHY_AFTER_SECONDS", 300)?,
            retry: RetryPolicy {
                give_up_after: seconds("RELAY_RETRY_GIVE_UP_SECONDS", 600)?,
                ..RetryPolicy::default()
            },
        })
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("bot_token", &"..")
            .field("relay_secret", &self.relay_secret)
            .field("ingress_url", &self.ingress_url)
            .field("gateway_url", &self.gateway_url)
            .field("health_listen", &self.health_listen)
            .field("metrics_interval", &self.metrics_interval)
            .field("unhealthy_after", &self.unhealthy_after)
            .field("retry", &self.retry)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    const BASE: [(&str, &str); 3] = [
        ("DISCORD_BOT_TOKEN", "token-123"),
        ("DISCORD_RELAY_SECRET", "relay-secret"),
        ("KUUKI_INGRESS_URL", "https://kuuki.example/"),
    ];

    #[test]
    fn the_three_required_settings_and_the_defaults() {
        let s = Settings::from_map(&env(&BASE)).unwrap();
        assert_eq!(s.bot_token, "token-123");
        assert_eq!(s.gateway_url, None);
        assert_eq!(s.health_listen, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(s.metrics_interval, Duration::from_secs(60));
        assert_eq!(s.retry, RetryPolicy::default());
        let shown = format!("{s:?}");
        assert!(!shown.contains("token-123") && !shown.contains("relay-secret"), "{shown}");
        for missing in ["DISCORD_BOT_TOKEN", "DISCORD_RELAY_SECRET", "KUUKI_INGRESS_URL"] {
            let mut e = env(&BASE);
            e.remove(missing);
            assert_eq!(Settings::from_map(&e).unwrap_err(), SettingsError::Missing(missing));
        }
    }

    #[test]
    fn overrides_are_checked() {
        let mut e = env(&BASE);
        e.insert("DISCORD_GATEWAY_URL".into(), "ws://127.0.0.1:9999/".into());
        e.insert("RELAY_RETRY_GIVE_UP_SECONDS".into(), "30".into());
        let s = Settings::from_map(&e).unwrap();
        assert_eq!(s.gateway_url.as_deref(), Some("ws://127.0.0.1:9999"));
        assert_eq!(s.retry.give_up_after, Duration::from_secs(30));
        e.insert("DISCORD_GATEWAY_URL".into(), "http://nope".into());
        assert!(matches!(Settings::from_map(&e), Err(SettingsError::Invalid { name: "DISCORD_GATEWAY_URL", .. })));
        let mut e = env(&BASE);
        e.insert("RELAY_METRICS_INTERVAL_SECONDS".into(), "0".into());
        assert!(Settings::from_map(&e).is_err());
    }
}
