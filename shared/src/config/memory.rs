//! The `memory` group: the context window, summaries, reflection and facts, proactive
//! openers, and how long (and whether) stored words are kept.

use std::time::Duration;

use super::ConfigError;
use super::reader::Reader;

#[derive(Debug, Clone)]
pub struct MemorySettings {
    /// `MEMORY_ENABLED`: short-term memory (the channel buffer).
    pub enabled: bool,
    pub channel_buffer_size: usize,
    pub channel_buffer_ttl: Duration,
    pub summarize_every_n_messages: u32,
    pub summarize_every_n_minutes: u32,
    pub reflection_enabled: bool,
    pub reflection_lull_minutes: u32,
    pub reflection_min_messages: u32,
    pub reflection_max_buffer_messages: u32,
    pub fact_store_max_facts_per_channel: u32,
    pub fact_decay_half_life_days: f64,
    pub proactive_conversation_enabled: bool,
    pub proactive_silence_minutes: u32,
    pub proactive_timezone: jiff::tz::TimeZone,
    /// Local start and end hour (end excluded) of working hours, Monday to Friday.
    pub proactive_working_hours: (u8, u8),
    pub vector_search_enabled: bool,
    pub message_retention_days: u32,
    /// `PURGE_ON_UNINSTALL`: forget a Slack workspace that removed kuuki, after the grace.
    pub purge_on_uninstall: bool,
    /// `UNINSTALL_PURGE_GRACE_HOURS`.
    pub uninstall_purge_grace: Duration,
}

impl MemorySettings {
    pub(super) fn parse(r: &Reader) -> Result<MemorySettings, ConfigError> {
        Ok(MemorySettings {
            enabled: r.bool("MEMORY_ENABLED", true)?,
            channel_buffer_size: r.int("CHANNEL_BUFFER_SIZE", 50, 1, 1000)? as usize,
            channel_buffer_ttl: r.minutes("CHANNEL_BUFFER_TTL_MINUTES", 30, 1, 7 * 24 * 60)?,
            summarize_every_n_messages: r.int("SUMMARIZE_EVERY_N_MESSAGES", 20, 1, 10_000)? as u32,
            summarize_every_n_minutes: r.int("SUMMARIZE_EVERY_N_MINUTES", 15, 1, 7 * 24 * 60)? as u32,
            reflection_enabled: r.bool("REFLECTION_ENABLED", true)?,
            reflection_lull_minutes: r.int("REFLECTION_LULL_MINUTES", 10, 1, 7 * 24 * 60)? as u32,
            reflection_min_messages: r.int("REFLECTION_MIN_MESSAGES", 10, 1, 10_000)? as u32,
            reflection_max_buffer_messages: r.int("REFLECTION_MAX_BUFFER_MESSAGES", 100, 1, 10_000)? as u32,
            fact_store_max_facts_per_channel: r.int("FACT_STORE_MAX_FACTS_PER_CHANNEL", 200, 1, 100_000)? as u32,
            fact_decay_half_life_days: r.float("FACT_DECAY_HALF_LIFE_DAYS", 30.0, 0.01, 36_500.0)?,
            proactive_conversation_enabled: r.bool("PROACTIVE_CONVERSATION_ENABLED", false)?,
            proactive_silence_minutes: r.int("PROACTIVE_SILENCE_MINUTES", 60, 1, 7 * 24 * 60)? as u32,
            proactive_timezone: {
                let name = r.string("PROACTIVE_TIMEZONE", "Asia/Tokyo");
                jiff::tz::TimeZone::get(&name).map_err(|_| {
                    Reader::invalid("PROACTIVE_TIMEZONE", &name, "expected an IANA time zone like Asia/Tokyo")
                })?
            },
            proactive_working_hours: {
                let raw = r.string("PROACTIVE_WORKING_HOURS", "9-18");
                parse_hours(&raw).ok_or_else(|| {
                    Reader::invalid(
                        "PROACTIVE_WORKING_HOURS",
                        &raw,
                        "expected start-end hours from 0 to 24, start before end",
                    )
                })?
            },
            vector_search_enabled: r.bool("VECTOR_SEARCH_ENABLED", false)?,
            message_retention_days: r.int("MESSAGE_RETENTION_DAYS", 30, 1, 3650)? as u32,
            purge_on_uninstall: r.bool("PURGE_ON_UNINSTALL", true)?,
            uninstall_purge_grace: Duration::from_secs(
                r.int("UNINSTALL_PURGE_GRACE_HOURS", 72, 1, 24 * 365)? as u64 * 3600,
            ),
        })
    }
}

/// `9-18`: from 9:00 up to 18:00 local time.
fn parse_hours(raw: &str) -> Option<(u8, u8)> {
    let (start, end) = raw.split_once('-')?;
    let (start, end): (u8, u8) = (start.trim().parse().ok()?, end.trim().parse().ok()?);
    (start < end && end <= 24).then_some((start, end))
}
