//! The `judge` group: whether and how kuuki takes part unasked (scores, waits, the LLM
//! judge's band, cooldown and engagement, the conversation-flow rules).

use std::time::Duration;

use super::ConfigError;
use super::llm::LlmProvider;
use super::reader::{DAY, Reader};

#[derive(Debug, Clone)]
pub struct JudgeSettings {
    pub autonomous_response_enabled: bool,
    pub score_threshold: i32,
    pub cooldown: Duration,
    pub engagement_duration: Duration,
    pub engagement_boost: i32,
    pub keywords: Vec<String>,
    /// Whether the judge asks the LLM; [`super::Settings::for_llm`] settles it once the
    /// LLM (or its absence) is known.
    pub llm_enabled: bool,
    /// LLM_JUDGE_ENABLED as written; unset follows whether there is an LLM.
    pub llm_setting: Option<bool>,
    pub llm_threshold_low: i32,
    pub llm_threshold_high: i32,
    pub response_diversity_enabled: bool,
    pub min_wait: Duration,
    pub jitter_ratio: f64,
    pub recent_messages: usize,
    pub busy_messages_per_minute: f64,
    pub silence: Duration,
    pub unanswered_question_points: i32,
    pub unanswered_question_wait: Duration,
    pub open_question_expiry: Duration,
    /// `REPLY_MODEL_THRESHOLD`: an open question whose answered-model probability
    /// reaches this counts as answered; `None` (`off`, the default): issue 34's closing
    /// rules.
    pub reply_model_threshold: Option<f64>,
    pub max_unasked_posts_per_hour: usize,
    pub addressed_to_other_points: i32,
    pub addressed_to_other_wait: Duration,
    pub min_conversation_messages: usize,
    pub channel_list_tokens: usize,
    pub ignore_other_bots: bool,
    pub direct_failure_notice: bool,
}

impl JudgeSettings {
    /// `provider`: the LLM judge defaults to on whenever there is one.
    pub(super) fn parse(r: &Reader, provider: LlmProvider) -> Result<JudgeSettings, ConfigError> {
        let llm_setting = r.opt_bool("LLM_JUDGE_ENABLED")?;
        let low = r.int("JUDGE_LLM_THRESHOLD_LOW", 20, 0, 100)? as i32;
        let high = r.int("JUDGE_LLM_THRESHOLD_HIGH", 80, 0, 100)? as i32;
        if low >= high {
            return Err(Reader::invalid(
                "JUDGE_LLM_THRESHOLD_LOW",
                &low.to_string(),
                format!("must be below JUDGE_LLM_THRESHOLD_HIGH ({high})"),
            ));
        }
        Ok(JudgeSettings {
            autonomous_response_enabled: r.bool("AUTONOMOUS_RESPONSE_ENABLED", true)?,
            score_threshold: r.int("JUDGE_SCORE_THRESHOLD", 60, 0, 100)? as i32,
            cooldown: r.seconds("COOLDOWN_SECONDS", 120, DAY)?,
            engagement_duration: r.seconds("ENGAGEMENT_DURATION_SECONDS", 300, DAY)?,
            engagement_boost: r.int("ENGAGEMENT_BOOST", 40, 0, 100)? as i32,
            keywords: r.list("JUDGE_KEYWORDS", ""),
            llm_enabled: llm_setting.unwrap_or(provider != LlmProvider::None),
            llm_setting,
            llm_threshold_low: low,
            llm_threshold_high: high,
            response_diversity_enabled: r.bool("RESPONSE_DIVERSITY_ENABLED", true)?,
            min_wait: r.seconds("JUDGE_MIN_WAIT_SECONDS", 30, DAY)?,
            jitter_ratio: r.float("JUDGE_JITTER_RATIO", 0.3, 0.0, 1.0)?,
            recent_messages: r.int("JUDGE_RECENT_MESSAGES", 10, 2, 1000)? as usize,
            busy_messages_per_minute: r.float("JUDGE_BUSY_MESSAGES_PER_MINUTE", 6.0, 0.1, 10_000.0)?,
            silence: r.minutes("JUDGE_SILENCE_MINUTES", 30, 1, 7 * 24 * 60)?,
            unanswered_question_points: r.int("UNANSWERED_QUESTION_POINTS", 25, 0, 100)? as i32,
            unanswered_question_wait: r.seconds("UNANSWERED_QUESTION_WAIT_SECONDS", 120, 3600)?,
            open_question_expiry: r.minutes("OPEN_QUESTION_EXPIRY_MINUTES", 30, 1, 24 * 60)?,
            reply_model_threshold: match r.raw("REPLY_MODEL_THRESHOLD") {
                None | Some("off") => None,
                Some(_) => Some(r.float("REPLY_MODEL_THRESHOLD", 0.25, 0.01, 1.0)?),
            },
            max_unasked_posts_per_hour: r.int(
                "CHANNEL_MAX_UNASKED_POSTS_PER_HOUR",
                4,
                0,
                crate::ports::ChannelState::KEPT_INTERVENTIONS as i64,
            )? as usize,
            addressed_to_other_points: r.int("ADDRESSED_TO_OTHER_POINTS", -60, -100, 0)? as i32,
            addressed_to_other_wait: r.minutes("ADDRESSED_TO_OTHER_WAIT_MINUTES", 60, 1, 7 * 24 * 60)?,
            min_conversation_messages: r.int("JUDGE_MIN_CONVERSATION_MESSAGES", 3, 1, 100)? as usize,
            channel_list_tokens: r.int("JUDGE_CHANNEL_LIST_TOKENS", 300, 0, 10_000)? as usize,
            ignore_other_bots: r.bool("IGNORE_OTHER_BOTS", true)?,
            direct_failure_notice: r.bool("DIRECT_FAILURE_NOTICE", true)?,
        })
    }
}
