//! Every setting, parsed and validated once at start-up. Names and defaults follow the
//! source documents (docs/design.md §14). Nothing here reads the environment: the caller hands
//! in the variables (the environment, then `--set` overrides).

use std::collections::HashMap;
use std::time::Duration;

use secrecy::SecretString;
use thiserror::Error;

/// One documented setting: the settings table (docs/settings.md) is generated from this list.
pub struct SettingDoc {
    pub name: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

macro_rules! settings_doc {
    ($( $name:literal, $default:literal, $meaning:literal; )*) => {
        /// Every setting kuuki reads, with its default and meaning.
        pub const SETTINGS: &[SettingDoc] = &[
            $( SettingDoc { name: $name, default: $default, meaning: $meaning }, )*
        ];
    };
}

settings_doc! {
    "MEMORY_ENABLED", "true", "Short-term memory (the channel buffer). Ambient participation needs it; off, kuuki answers direct triggers with only the triggering message as context.";
    "CHANNEL_BUFFER_SIZE", "50", "Messages per conversation in the context window.";
    "CHANNEL_BUFFER_TTL_MINUTES", "30", "Messages older than this leave the context window.";
    "AUTONOMOUS_RESPONSE_ENABLED", "true", "Judge every message and take part unasked. Off: only direct triggers are answered (the channel is still summarized and reflected on).";
    "JUDGE_SCORE_THRESHOLD", "60", "Without the LLM judge, a score at or above this responds.";
    "COOLDOWN_SECONDS", "120", "After a response in a channel, scores get -50 for this long.";
    "ENGAGEMENT_DURATION_SECONDS", "300", "After a response in a channel, scores get +ENGAGEMENT_BOOST for this long.";
    "ENGAGEMENT_BOOST", "40", "Points added while engaged.";
    "JUDGE_KEYWORDS", "", "Comma-separated keywords; a message containing any gets +15 (once).";
    "LLM_JUDGE_ENABLED", "true with an LLM", "Ask the LLM judge for scores between the two LLM thresholds. Defaults to true whenever an LLM provider is configured.";
    "JUDGE_MODEL", "LLM_MODEL", "Model for the LLM judge.";
    "JUDGE_LLM_THRESHOLD_LOW", "20", "With the LLM judge, a score at or below this skips without asking.";
    "JUDGE_LLM_THRESHOLD_HIGH", "80", "With the LLM judge, a score at or above this responds without asking.";
    "RESPONSE_DIVERSITY_ENABLED", "true", "Choose between react_only, short_ack and full_response; off, every response is full_response.";
    "SUMMARIZE_EVERY_N_MESSAGES", "20", "Summarize a channel after this many new messages.";
    "SUMMARIZE_EVERY_N_MINUTES", "15", "Summarize a channel with new messages after this many minutes, whichever comes first.";
    "SUMMARIZE_MODEL", "LLM_MODEL", "Model for summaries.";
    "USER_PROFILE_ENABLED", "true", "Keep a profile of each person (messages seen, calls to kuuki, channels, first and last time: blind counters at ingress) and per-channel notes (topics, reflection's tags and summary); familiarity sets the tone of replies.";
    "FAMILIARITY_THRESHOLDS", "5,30,100", "The last message counts of stranger, acquaintance and regular: above the last, close.";
    "REFLECTION_ENABLED", "true", "Extract facts and profile notes from quiet periods.";
    "REFLECTION_LULL_MINUTES", "10", "Quiet minutes after which a channel is reflected on.";
    "REFLECTION_MIN_MESSAGES", "10", "Fewest new messages worth a reflection.";
    "REFLECTION_MAX_BUFFER_MESSAGES", "100", "Reflect anyway once this many new messages pile up.";
    "REFLECTION_MODEL", "LLM_MODEL", "Model for reflection.";
    "FACT_STORE_MAX_FACTS_PER_CHANNEL", "200", "Most facts kept per channel; the weakest go first.";
    "FACT_DECAY_HALF_LIFE_DAYS", "30", "A fact's search score halves every this many days.";
    "PROACTIVE_CONVERSATION_ENABLED", "false", "Open with a fresh shareable fact when a channel comes back after a silence (at most one a day per channel, in working hours, backing off when nobody answers).";
    "PROACTIVE_SILENCE_MINUTES", "60", "Silence after which a channel's next message counts as coming back (proactive conversation).";
    "PROACTIVE_TIMEZONE", "Asia/Tokyo", "The channels' time zone (IANA name) for proactive openers' working hours.";
    "PROACTIVE_WORKING_HOURS", "9-18", "Local hours (start-end, Monday to Friday) in which kuuki may open a conversation.";
    "VECTOR_SEARCH_ENABLED", "false", "Also rank facts by meaning: reflection stores an embedding with each new fact and a reply embeds its message once, scoring facts by cosine similarity blended with keyword overlap. Costs one embedding call per reflection and per reply in a channel with embedded facts (OPENAI_BASE_URL; with LLM_PROVIDER=none a local hashing embedder that knows spelling, not meaning).";
    "EMBEDDING_MODEL", "text-embedding-3-small", "Model for fact embeddings, asked at OPENAI_BASE_URL/embeddings when VECTOR_SEARCH_ENABLED. A fact whose embedding has another size (an earlier model's) ranks by keywords alone.";
    "BOT_NAME", "kuuki", "The bot's name; calling it is a direct trigger (80).";
    "BOT_ALIASES", "くうき", "Comma-separated other names that are a direct trigger too.";
    "BOT_TOPICS", "", "Comma-separated topics the bot knows about; a message about one gets +15.";
    "PERSONA_FILE", "", "TOML file with the persona (name, system_prompt, aliases, topics).";
    "PERSONA_TOML", "", "The persona's TOML itself (in Lambda, from the template's PersonaToml parameter); wins over PERSONA_FILE.";
    "PROMPT_LANGUAGE", "ja", "Language of the prompts: ja or en.";
    "JUDGE_MIN_WAIT_SECONDS", "30", "Ambient messages are judged this long after they arrive (a newer message in the thread supersedes).";
    "JUDGE_JITTER_RATIO", "0.3", "The wait varies by up to this fraction either way.";
    "JUDGE_RECENT_MESSAGES", "10", "N for the conversation-flow rules: the last N messages of the conversation.";
    "JUDGE_BUSY_MESSAGES_PER_MINUTE", "6", "When the newest 5 human messages among the last N came at this rate or faster, the conversation is lively (-10).";
    "JUDGE_SILENCE_MINUTES", "30", "A message after this much channel silence is a fresh start (+10).";
    "UNANSWERED_QUESTION_POINTS", "25", "Points for a question nobody has answered once it has stood UNANSWERED_QUESTION_WAIT_SECONDS, when kuuki was not addressed and it is nobody else's (`unanswered_question`). With the default an ordinary open question (question +20, no_mention -10) scores 35: the LLM's to decide, and below JUDGE_SCORE_THRESHOLD without an LLM.";
    "UNANSWERED_QUESTION_WAIT_SECONDS", "120", "How long a question stands before kuuki counts it unanswered (people often answer within 30-90 s); a judgment that would find it younger and could speak waits until then.";
    "ADDRESSED_TO_OTHER_POINTS", "-60", "Points for a turn meant for someone else: it mentions another person, or answers another person's question in a thread (`addressed_to_other`). Low enough that the LLM is never asked.";
    "JUDGE_MIN_CONVERSATION_MESSAGES", "3", "Fewest messages (anyone's, kuuki's too) the conversation must hold in the context window before kuuki chimes in unasked (seed 003's minimum, to follow the flow first). Fewer: `short_conversation` -40, unless the turn is an open question (a question stands on its own). Direct triggers are unaffected; 1 turns the rule off.";
    "JUDGE_CHANNEL_LIST_TOKENS", "300", "Budget (about 4 bytes a token) for the LLM judge's list of the workspace's other channels, each with a one-line memory (seed 004). Private channels and DMs are never listed; 0 leaves the list out. Needs MEMORY_ENABLED.";
    "ADDRESSED_TO_OTHER_WAIT_MINUTES", "60", "After this long without an answer from anyone, a question meant for someone else is open to kuuki again (`addressed_to_other` stops applying).";
    "IGNORE_OTHER_BOTS", "true", "Other bots' messages are stored but never judged (loop prevention).";
    "COMMAND_MANAGERS", "", "Comma-separated user ids (Slack `U…`, Discord snowflakes; in replay, transcript names) who may run `/kuuki mute`, `unmute` and `shadow` anywhere, besides Slack workspace admins and owners and Discord members with Manage Channels.";
    "MESSAGE_RETENTION_DAYS", "30", "Stored messages expire after this many days.";
    "PURGE_ON_UNINSTALL", "true", "When Slack says kuuki was removed from the workspace (app_uninstalled, or tokens_revoked naming its bot) and it is not installed again within UNINSTALL_PURGE_GRACE_HOURS, delete everything stored of that workspace (messages, channel memories, facts, notes, profiles, the workspace memory); Discord's data stays. Off: kuuki only stops answering there.";
    "UNINSTALL_PURGE_GRACE_HOURS", "72", "How long after an uninstall the workspace's data is kept: a reinstall within it (a message posted since delivered) keeps everything.";
    "LLM_PROVIDER", "none", "none, openai or anthropic (replay and serve also take --llm).";
    "LLM_MODEL", "gpt-4o-mini", "Model for generation, and for every role without its own model.";
    "LLM_TIMEOUT_SECONDS", "30", "How long one LLM call may take before it is retried or given up.";
    "LLM_MAX_RETRIES", "2", "Retries of an LLM call after a 429, a 5xx or a timeout (with backoff).";
    "LLM_STRUCTURED_OUTPUT", "json_schema", "How the roles that answer JSON (judge, summaries, reflection) ask for it: json_schema (OpenAI-compatible `response_format` with a strict JSON Schema; Anthropic: a forced tool call), json_object (llama.cpp's `{\"type\": \"json_object\", \"schema\": …}`; Anthropic: the tool call), off (the prompt's words alone). A server that refuses one as malformed (HTTP 400, 422 or 500 naming it) is asked with the next, once per step, for as long as the process runs.";
    "LLM_TEMPERATURE", "0.7", "Sampling temperature of replies and openers (0 to 2; Anthropic takes up to 1); `default` sends none, for models that take only their own.";
    "JUDGE_TEMPERATURE", "0.1", "Sampling temperature of the LLM judge; `default` sends none.";
    "SUMMARIZE_TEMPERATURE", "0.2", "Sampling temperature of summaries; `default` sends none.";
    "REFLECTION_TEMPERATURE", "0.2", "Sampling temperature of reflection; `default` sends none.";
    "WORKER_TIMEOUT_SECONDS", "240", "How long a worker may run one delivery (each worker Lambda's timeout). The LLM and chat budgets must fit in it (checked at start-up); queues make a job visible again after 6 times this, claims expire after it plus an eighth, and a job's AWS calls are cut off at that eighth, kept between 4 and 20 s.";
    "CHAT_TIMEOUT_SECONDS", "10", "How long one attempt of a Slack or Discord API call may take, and the longest 429 wait; a call waits out 429s while another attempt fits two attempts and one such wait.";
    "DIRECT_FAILURE_NOTICE", "true", "When an answer to a direct mention cannot be generated, post one short, honest line saying so; off, post nothing. Ambient answers never post a failure.";
    "OPENAI_BASE_URL", "https://api.openai.com/v1", "OpenAI-compatible endpoint.";
    "OPENAI_API_KEY", "", "Key for the OpenAI-compatible endpoint.";
    "ANTHROPIC_BASE_URL", "https://api.anthropic.com", "Anthropic Messages endpoint.";
    "ANTHROPIC_API_KEY", "", "Key for Anthropic.";
    "SLACK_SIGNING_SECRET", "", "Verifies Slack requests.";
    "SLACK_BOT_TOKEN", "", "Slack Web API token (xoxb-…).";
    "SLACK_API_BASE_URL", "https://slack.com/api", "Slack Web API base URL.";
    "SLACK_APP_TOKEN", "", "Slack app-level token (xapp-…, scope connections:write): set, `kuuki serve` reaches Slack over Socket Mode (no public URL, no signing secret needed).";
    "DISCORD_PUBLIC_KEY", "", "The Discord application's public key (64 hex digits): verifies interactions (Ed25519). Needed when DISCORD_BOT_TOKEN is set.";
    "DISCORD_BOT_TOKEN", "", "Discord bot token: set, kuuki serves Discord (REST posts, reactions, names).";
    "DISCORD_APPLICATION_ID", "", "The Discord application's id: `kuuki discord register` installs /kuuki under it.";
    "DISCORD_RELAY_SECRET", "", "Signs the Gateway relay's requests to /discord/events (HMAC-SHA256, like Slack's signing secret); unset, relayed events are refused.";
    "DISCORD_API_BASE_URL", "https://discord.com/api/v10", "Discord REST base URL.";
    "DISCORD_GATEWAY", "true", "With DISCORD_BOT_TOKEN, `kuuki serve` connects to the Discord Gateway itself (messages and interactions, no public URL); false when a separate relay feeds /discord/events.";
    "DISCORD_GATEWAY_URL", "", "Another Gateway address to connect to (tests, a gateway proxy); empty: the one Discord names.";
    "LOG_MESSAGE_TEXT", "false", "A debugging switch: the decision log of `kuuki serve` and the Lambdas carries message text, replies, facts and summaries (said at start-up). Off, it keeps ids, lengths, scores, rule names and reasons only; `kuuki replay` always keeps text.";
    "DATA_PATH", "kuuki.db", "`kuuki serve`: the SQLite file that keeps every memory tier, the ledger and the job queue (`--data`); `:memory:` keeps nothing across a restart.";
    "SLACK_SIGNING_SECRET_ARN", "", "In Lambda: the Secrets Manager secret holding SLACK_SIGNING_SECRET, read once per cold start. Likewise SLACK_BOT_TOKEN_ARN, OPENAI_API_KEY_ARN, ANTHROPIC_API_KEY_ARN, DISCORD_BOT_TOKEN_ARN, DISCORD_PUBLIC_KEY_ARN and DISCORD_RELAY_SECRET_ARN.";
    "MESSAGES_TABLE", "kuuki-messages", "DynamoDB table of messages (short-term memory).";
    "CHANNELS_TABLE", "kuuki-channels", "DynamoDB table of channel state (cooldown, engagement, history, mute).";
    "LEDGER_TABLE", "kuuki-ledger", "DynamoDB table of claims and the judgment cache.";
    "JUDGE_QUEUE_URL", "", "SQS queue of JUDGE jobs.";
    "RESPOND_QUEUE_URL", "", "SQS queue of RESPOND jobs.";
    "SUMMARIZE_QUEUE_URL", "", "SQS queue of SUMMARIZE jobs (and REMEMBER jobs, which queue them).";
    "REFLECT_QUEUE_URL", "", "SQS queue of REFLECT jobs (and the daily fact sweep).";
    "FORGET_QUEUE_URL", "", "SQS queue of FORGET jobs (forgetting a person on request) and their second looks (FORGET_LATE); the reflect worker runs them, apart from reflections so an answer never waits behind the model.";
    "JUDGE_QUEUE_ARN", "", "ARN of the JUDGE queue (the scheduler's target).";
    "RESPOND_QUEUE_ARN", "", "ARN of the RESPOND queue (the scheduler's target).";
    "SUMMARIZE_QUEUE_ARN", "", "ARN of the SUMMARIZE queue (the scheduler's target).";
    "REFLECT_QUEUE_ARN", "", "ARN of the REFLECT queue (the scheduler's target).";
    "FORGET_QUEUE_ARN", "", "ARN of the FORGET queue (the scheduler's target).";
    "FACTS_TABLE", "kuuki-facts", "DynamoDB table of facts, notes about people and their counters, and the workspace memory (long-term memory).";
    "SCHEDULE_GROUP", "kuuki", "EventBridge Scheduler group of one-time schedules.";
    "SCHEDULER_ROLE_ARN", "", "Role EventBridge Scheduler assumes to send to the queues.";
    "TALKATIVENESS_ENABLED", "true", "Learn from how each channel takes what kuuki says unasked (reactions to its posts, replies, being ignored, \"shh kuuki\", thanks): a per-channel offset added to unasked scores (direct triggers are never affected). Off: no signal is counted and no offset applied.";
    "TALKATIVENESS_MIN", "-40", "The lowest a channel's talkativeness offset goes (points added to unasked scores).";
    "TALKATIVENESS_MAX", "20", "The highest a channel's talkativeness offset goes.";
    "TALKATIVENESS_HALF_LIFE_DAYS", "7", "A channel's talkativeness offset halves toward 0 every this many days.";
    "FEEDBACK_POSITIVE_REACTIONS", "+1,thumbsup,heart,pray,tada,smile,smiley,grinning,white_check_mark,raised_hands,clap,👍,❤️,🙏,🎉,😄,😃,✅,🙌,👏", "Comma-separated reactions (Slack names or the emoji) that welcome one of kuuki's posts (+3 each).";
    "FEEDBACK_NEGATIVE_REACTIONS", "-1,thumbsdown,face_with_rolling_eyes,unamused,shushing_face,no_good,zipper_mouth_face,👎,🙄,😒,🤫,🙅,🙅‍♂️,🙅‍♀️,🤐", "Comma-separated reactions that turn one of kuuki's posts away (-6 each).";
}

mod talkativeness;
pub use talkativeness::TalkativenessSettings;

/// A setting's value was not acceptable; start-up stops with this message.
#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("invalid setting {name}={value:?}: {reason}")]
    Invalid { name: &'static str, value: String, reason: String },
    #[error("unknown setting {0:?} (see docs/settings.md)")]
    Unknown(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProvider {
    None,
    OpenAi,
    Anthropic,
}

/// `LLM_STRUCTURED_OUTPUT`: how a JSON answer is asked for, from the most exact form
/// down to none (the order a refused form steps down in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StructuredOutput {
    /// The prompt's words alone.
    Off,
    /// `response_format: {"type": "json_object", "schema": …}` (llama.cpp's form).
    JsonObject,
    /// `response_format: {"type": "json_schema", "json_schema": {…, "strict": true}}`.
    JsonSchema,
}

impl StructuredOutput {
    pub fn as_str(self) -> &'static str {
        match self {
            StructuredOutput::Off => "off",
            StructuredOutput::JsonObject => "json_object",
            StructuredOutput::JsonSchema => "json_schema",
        }
    }

    /// The form to ask with once a server refused this one.
    pub fn next(self) -> StructuredOutput {
        match self {
            StructuredOutput::JsonSchema => StructuredOutput::JsonObject,
            StructuredOutput::JsonObject | StructuredOutput::Off => StructuredOutput::Off,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptLanguage {
    Ja,
    En,
}

/// The validated settings. Field names follow the variables.
#[derive(Debug, Clone)]
pub struct Settings {
    pub memory_enabled: bool,
    pub channel_buffer_size: usize,
    pub channel_buffer_ttl: Duration,
    pub autonomous_response_enabled: bool,
    pub judge_score_threshold: i32,
    pub cooldown: Duration,
    pub engagement_duration: Duration,
    pub engagement_boost: i32,
    pub judge_keywords: Vec<String>,
    /// Whether the judge asks the LLM; [`Settings::for_llm`] settles it once the LLM
    /// (or its absence) is known.
    pub llm_judge_enabled: bool,
    /// LLM_JUDGE_ENABLED as written; unset follows whether there is an LLM.
    pub llm_judge_setting: Option<bool>,
    pub judge_model: String,
    pub judge_llm_threshold_low: i32,
    pub judge_llm_threshold_high: i32,
    pub response_diversity_enabled: bool,
    pub summarize_every_n_messages: u32,
    pub summarize_every_n_minutes: u32,
    pub summarize_model: String,
    pub user_profile_enabled: bool,
    pub familiarity_thresholds: [u32; 3],
    pub reflection_enabled: bool,
    pub reflection_lull_minutes: u32,
    pub reflection_min_messages: u32,
    pub reflection_max_buffer_messages: u32,
    pub reflection_model: String,
    pub fact_store_max_facts_per_channel: u32,
    pub fact_decay_half_life_days: f64,
    pub proactive_conversation_enabled: bool,
    pub proactive_silence_minutes: u32,
    pub proactive_timezone: jiff::tz::TimeZone,
    /// Local start and end hour (end excluded) of working hours, Monday to Friday.
    pub proactive_working_hours: (u8, u8),
    pub vector_search_enabled: bool,
    pub embedding_model: String,
    pub bot_name: String,
    pub bot_aliases: Vec<String>,
    pub bot_topics: Vec<String>,
    pub persona_file: Option<String>,
    pub prompt_language: PromptLanguage,
    pub judge_min_wait: Duration,
    pub judge_jitter_ratio: f64,
    pub judge_recent_messages: usize,
    pub judge_busy_messages_per_minute: f64,
    pub judge_silence: Duration,
    pub unanswered_question_points: i32,
    pub unanswered_question_wait: Duration,
    pub addressed_to_other_points: i32,
    pub addressed_to_other_wait: Duration,
    pub judge_min_conversation_messages: usize,
    pub judge_channel_list_tokens: usize,
    pub ignore_other_bots: bool,
    /// `COMMAND_MANAGERS`: who may change how kuuki takes part, wherever they are.
    pub command_managers: Vec<String>,
    pub message_retention_days: u32,
    /// `PURGE_ON_UNINSTALL`: forget a Slack workspace that removed kuuki, after the grace.
    pub purge_on_uninstall: bool,
    /// `UNINSTALL_PURGE_GRACE_HOURS`.
    pub uninstall_purge_grace: Duration,
    pub llm_provider: LlmProvider,
    pub llm_model: String,
    pub llm_timeout: Duration,
    pub llm_max_retries: u32,
    pub llm_structured_output: StructuredOutput,
    /// `LLM_TEMPERATURE` (generation) and the roles' own; `None`: sent as none.
    pub llm_temperature: Option<f64>,
    pub judge_temperature: Option<f64>,
    pub summarize_temperature: Option<f64>,
    pub reflection_temperature: Option<f64>,
    pub worker_timeout: Duration,
    pub chat_timeout: Duration,
    pub direct_failure_notice: bool,
    pub openai_base_url: String,
    pub openai_api_key: SecretString,
    pub anthropic_base_url: String,
    pub anthropic_api_key: SecretString,
    pub slack_signing_secret: SecretString,
    pub slack_bot_token: SecretString,
    pub slack_api_base_url: String,
    /// `SLACK_APP_TOKEN`: Socket Mode when set.
    pub slack_app_token: SecretString,
    pub discord_public_key: String,
    pub discord_bot_token: SecretString,
    pub discord_application_id: String,
    pub discord_relay_secret: SecretString,
    pub discord_api_base_url: String,
    /// `DISCORD_GATEWAY`: `kuuki serve` runs the Gateway in process.
    pub discord_gateway: bool,
    pub discord_gateway_url: String,
    /// `DATA_PATH`: `kuuki serve`'s SQLite file (`:memory:`: nothing kept).
    pub data_path: String,
    /// `LOG_MESSAGE_TEXT`: production logs carry people's words (debugging only).
    pub log_message_text: bool,
    pub messages_table: String,
    pub channels_table: String,
    pub ledger_table: String,
    pub judge_queue_url: String,
    pub respond_queue_url: String,
    pub summarize_queue_url: String,
    pub reflect_queue_url: String,
    pub reflect_queue_arn: String,
    pub forget_queue_url: String,
    pub forget_queue_arn: String,
    pub facts_table: String,
    pub judge_queue_arn: String,
    pub respond_queue_arn: String,
    pub summarize_queue_arn: String,
    pub schedule_group: String,
    pub scheduler_role_arn: String,
    /// `TALKATIVENESS_*`, `FEEDBACK_*` (`config/talkativeness.rs`).
    pub talkativeness: TalkativenessSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_vars(&HashMap::new()).expect("the defaults are valid")
    }
}

/// Reads one variable at a time, remembering the first error.
struct Reader<'a> {
    vars: &'a HashMap<String, String>,
}

impl Reader<'_> {
    fn raw(&self, name: &'static str) -> Option<&str> {
        debug_assert!(SETTINGS.iter().any(|s| s.name == name), "{name} is undocumented");
        self.vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn invalid(name: &'static str, value: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { name, value: value.to_owned(), reason: reason.into() }
    }

    fn string(&self, name: &'static str, default: &str) -> String {
        self.raw(name).unwrap_or(default).to_owned()
    }

    fn bool(&self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        self.opt_bool(name).map(|v| v.unwrap_or(default))
    }

    fn opt_bool(&self, name: &'static str) -> Result<Option<bool>, ConfigError> {
        let Some(v) = self.raw(name) else {
            return Ok(None);
        };
        match v.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Some(true)),
            "false" | "0" | "no" | "off" => Ok(Some(false)),
            _ => Err(Self::invalid(name, v, "expected true or false")),
        }
    }

    fn int(&self, name: &'static str, default: i64, min: i64, max: i64) -> Result<i64, ConfigError> {
        let Some(v) = self.raw(name) else {
            return Ok(default);
        };
        let n: i64 = v.parse().map_err(|_| Self::invalid(name, v, "expected a whole number"))?;
        if n < min || n > max {
            return Err(Self::invalid(name, v, format!("must be between {min} and {max}")));
        }
        Ok(n)
    }

    fn float(&self, name: &'static str, default: f64, min: f64, max: f64) -> Result<f64, ConfigError> {
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
    fn temperature(&self, name: &'static str, default: f64) -> Result<Option<f64>, ConfigError> {
        if self.raw(name).is_some_and(|v| v.eq_ignore_ascii_case("default")) {
            return Ok(None);
        }
        Ok(Some(self.float(name, default, 0.0, 2.0)?))
    }

    fn seconds(&self, name: &'static str, default: i64, max: i64) -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs(self.int(name, default, 0, max)? as u64))
    }

    /// A credential: kept out of `Debug` output and logs.
    fn secret(&self, name: &'static str) -> SecretString {
        SecretString::from(self.string(name, ""))
    }

    fn list(&self, name: &'static str, default: &str) -> Vec<String> {
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

const DAY: i64 = 86_400;

impl Settings {
    /// The time budget these settings give (`budget.rs`): checked at start-up, read by
    /// the workers, the queues and the template's numbers.
    pub fn time_budget(&self) -> crate::budget::TimeBudget {
        crate::budget::TimeBudget::new(self.worker_timeout, self.llm_timeout, self.llm_max_retries, self.chat_timeout)
    }

    /// Parses and validates every setting from `vars`; unknown names are not looked at.
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Settings, ConfigError> {
        let r = Reader { vars };
        let llm_provider = match r.raw("LLM_PROVIDER") {
            None => LlmProvider::None,
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "none" => LlmProvider::None,
                "openai" => LlmProvider::OpenAi,
                "anthropic" => LlmProvider::Anthropic,
                _ => {
                    return Err(Reader::invalid("LLM_PROVIDER", v, "expected none, openai or anthropic"));
                }
            },
        };
        let llm_judge_setting = r.opt_bool("LLM_JUDGE_ENABLED")?;
        let llm_model = r.string("LLM_MODEL", "gpt-4o-mini");
        let model_or_default = |name| r.raw(name).map(str::to_owned).unwrap_or_else(|| llm_model.clone());

        let low = r.int("JUDGE_LLM_THRESHOLD_LOW", 20, 0, 100)? as i32;
        let high = r.int("JUDGE_LLM_THRESHOLD_HIGH", 80, 0, 100)? as i32;
        if low >= high {
            return Err(Reader::invalid(
                "JUDGE_LLM_THRESHOLD_LOW",
                &low.to_string(),
                format!("must be below JUDGE_LLM_THRESHOLD_HIGH ({high})"),
            ));
        }

        let familiarity_raw = r.string("FAMILIARITY_THRESHOLDS", "5,30,100");
        let familiarity_thresholds = parse_familiarity(&familiarity_raw).ok_or_else(|| {
            Reader::invalid(
                "FAMILIARITY_THRESHOLDS",
                &familiarity_raw,
                "expected three increasing whole numbers, like 5,30,100",
            )
        })?;

        let prompt_language = match r.raw("PROMPT_LANGUAGE").unwrap_or("ja") {
            "ja" => PromptLanguage::Ja,
            "en" => PromptLanguage::En,
            other => return Err(Reader::invalid("PROMPT_LANGUAGE", other, "expected ja or en")),
        };

        let bot_name = r.string("BOT_NAME", "kuuki");

        let settings = Settings {
            memory_enabled: r.bool("MEMORY_ENABLED", true)?,
            channel_buffer_size: r.int("CHANNEL_BUFFER_SIZE", 50, 1, 1000)? as usize,
            channel_buffer_ttl: Duration::from_secs(
                r.int("CHANNEL_BUFFER_TTL_MINUTES", 30, 1, 7 * 24 * 60)? as u64 * 60,
            ),
            autonomous_response_enabled: r.bool("AUTONOMOUS_RESPONSE_ENABLED", true)?,
            judge_score_threshold: r.int("JUDGE_SCORE_THRESHOLD", 60, 0, 100)? as i32,
            cooldown: r.seconds("COOLDOWN_SECONDS", 120, DAY)?,
            engagement_duration: r.seconds("ENGAGEMENT_DURATION_SECONDS", 300, DAY)?,
            engagement_boost: r.int("ENGAGEMENT_BOOST", 40, 0, 100)? as i32,
            judge_keywords: r.list("JUDGE_KEYWORDS", ""),
            llm_judge_enabled: llm_judge_setting.unwrap_or(llm_provider != LlmProvider::None),
            llm_judge_setting,
            judge_model: model_or_default("JUDGE_MODEL"),
            judge_llm_threshold_low: low,
            judge_llm_threshold_high: high,
            response_diversity_enabled: r.bool("RESPONSE_DIVERSITY_ENABLED", true)?,
            summarize_every_n_messages: r.int("SUMMARIZE_EVERY_N_MESSAGES", 20, 1, 10_000)? as u32,
            summarize_every_n_minutes: r.int("SUMMARIZE_EVERY_N_MINUTES", 15, 1, 7 * 24 * 60)? as u32,
            summarize_model: model_or_default("SUMMARIZE_MODEL"),
            user_profile_enabled: r.bool("USER_PROFILE_ENABLED", true)?,
            familiarity_thresholds,
            reflection_enabled: r.bool("REFLECTION_ENABLED", true)?,
            reflection_lull_minutes: r.int("REFLECTION_LULL_MINUTES", 10, 1, 7 * 24 * 60)? as u32,
            reflection_min_messages: r.int("REFLECTION_MIN_MESSAGES", 10, 1, 10_000)? as u32,
            reflection_max_buffer_messages: r.int("REFLECTION_MAX_BUFFER_MESSAGES", 100, 1, 10_000)? as u32,
            reflection_model: model_or_default("REFLECTION_MODEL"),
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
            embedding_model: r.string("EMBEDDING_MODEL", "text-embedding-3-small"),
            bot_aliases: r.list("BOT_ALIASES", "くうき"),
            bot_name,
            bot_topics: r.list("BOT_TOPICS", ""),
            persona_file: r.raw("PERSONA_FILE").map(str::to_owned),
            prompt_language,
            judge_min_wait: r.seconds("JUDGE_MIN_WAIT_SECONDS", 30, DAY)?,
            judge_jitter_ratio: r.float("JUDGE_JITTER_RATIO", 0.3, 0.0, 1.0)?,
            judge_recent_messages: r.int("JUDGE_RECENT_MESSAGES", 10, 2, 1000)? as usize,
            judge_busy_messages_per_minute: r.float("JUDGE_BUSY_MESSAGES_PER_MINUTE", 6.0, 0.1, 10_000.0)?,
            judge_silence: Duration::from_secs(r.int("JUDGE_SILENCE_MINUTES", 30, 1, 7 * 24 * 60)? as u64 * 60),
            unanswered_question_points: r.int("UNANSWERED_QUESTION_POINTS", 25, 0, 100)? as i32,
            unanswered_question_wait: r.seconds("UNANSWERED_QUESTION_WAIT_SECONDS", 120, 3600)?,
            addressed_to_other_points: r.int("ADDRESSED_TO_OTHER_POINTS", -60, -100, 0)? as i32,
            addressed_to_other_wait: Duration::from_secs(
                r.int("ADDRESSED_TO_OTHER_WAIT_MINUTES", 60, 1, 7 * 24 * 60)? as u64 * 60,
            ),
            judge_min_conversation_messages: r.int("JUDGE_MIN_CONVERSATION_MESSAGES", 3, 1, 100)? as usize,
            judge_channel_list_tokens: r.int("JUDGE_CHANNEL_LIST_TOKENS", 300, 0, 10_000)? as usize,
            ignore_other_bots: r.bool("IGNORE_OTHER_BOTS", true)?,
            command_managers: r.list("COMMAND_MANAGERS", ""),
            message_retention_days: r.int("MESSAGE_RETENTION_DAYS", 30, 1, 3650)? as u32,
            purge_on_uninstall: r.bool("PURGE_ON_UNINSTALL", true)?,
            uninstall_purge_grace: Duration::from_secs(
                r.int("UNINSTALL_PURGE_GRACE_HOURS", 72, 1, 24 * 365)? as u64 * 3600,
            ),
            llm_provider,
            llm_model,
            llm_timeout: Duration::from_secs(r.int("LLM_TIMEOUT_SECONDS", 30, 1, 600)? as u64),
            llm_max_retries: r.int("LLM_MAX_RETRIES", 2, 0, 10)? as u32,
            llm_structured_output: match r.raw("LLM_STRUCTURED_OUTPUT").unwrap_or("json_schema") {
                "json_schema" => StructuredOutput::JsonSchema,
                "json_object" => StructuredOutput::JsonObject,
                "off" => StructuredOutput::Off,
                other => {
                    return Err(Reader::invalid(
                        "LLM_STRUCTURED_OUTPUT",
                        other,
                        "expected json_schema, json_object or off",
                    ));
                }
            },
            llm_temperature: r.temperature("LLM_TEMPERATURE", 0.7)?,
            judge_temperature: r.temperature("JUDGE_TEMPERATURE", 0.1)?,
            summarize_temperature: r.temperature("SUMMARIZE_TEMPERATURE", 0.2)?,
            reflection_temperature: r.temperature("REFLECTION_TEMPERATURE", 0.2)?,
            worker_timeout: Duration::from_secs(r.int(
                "WORKER_TIMEOUT_SECONDS",
                crate::budget::DEFAULT_WORKER_TIMEOUT_SECONDS as i64,
                2,
                900,
            )? as u64),
            chat_timeout: Duration::from_secs(r.int("CHAT_TIMEOUT_SECONDS", 10, 1, 60)? as u64),
            direct_failure_notice: r.bool("DIRECT_FAILURE_NOTICE", true)?,
            openai_base_url: r.string("OPENAI_BASE_URL", "https://api.openai.com/v1"),
            openai_api_key: r.secret("OPENAI_API_KEY"),
            anthropic_base_url: r.string("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
            anthropic_api_key: r.secret("ANTHROPIC_API_KEY"),
            slack_signing_secret: r.secret("SLACK_SIGNING_SECRET"),
            slack_bot_token: r.secret("SLACK_BOT_TOKEN"),
            slack_api_base_url: r.string("SLACK_API_BASE_URL", "https://slack.com/api"),
            slack_app_token: r.secret("SLACK_APP_TOKEN"),
            discord_public_key: r.string("DISCORD_PUBLIC_KEY", ""),
            discord_bot_token: r.secret("DISCORD_BOT_TOKEN"),
            discord_application_id: r.string("DISCORD_APPLICATION_ID", ""),
            discord_relay_secret: r.secret("DISCORD_RELAY_SECRET"),
            discord_api_base_url: r.string("DISCORD_API_BASE_URL", "https://discord.com/api/v10"),
            discord_gateway: r.bool("DISCORD_GATEWAY", true)?,
            discord_gateway_url: r.string("DISCORD_GATEWAY_URL", ""),
            data_path: r.string("DATA_PATH", "kuuki.db"),
            log_message_text: r.bool("LOG_MESSAGE_TEXT", false)?,
            messages_table: r.string("MESSAGES_TABLE", "kuuki-messages"),
            channels_table: r.string("CHANNELS_TABLE", "kuuki-channels"),
            ledger_table: r.string("LEDGER_TABLE", "kuuki-ledger"),
            judge_queue_url: r.string("JUDGE_QUEUE_URL", ""),
            respond_queue_url: r.string("RESPOND_QUEUE_URL", ""),
            summarize_queue_url: r.string("SUMMARIZE_QUEUE_URL", ""),
            reflect_queue_url: r.string("REFLECT_QUEUE_URL", ""),
            reflect_queue_arn: r.string("REFLECT_QUEUE_ARN", ""),
            forget_queue_url: r.string("FORGET_QUEUE_URL", ""),
            forget_queue_arn: r.string("FORGET_QUEUE_ARN", ""),
            facts_table: r.string("FACTS_TABLE", "kuuki-facts"),
            judge_queue_arn: r.string("JUDGE_QUEUE_ARN", ""),
            respond_queue_arn: r.string("RESPOND_QUEUE_ARN", ""),
            summarize_queue_arn: r.string("SUMMARIZE_QUEUE_ARN", ""),
            schedule_group: r.string("SCHEDULE_GROUP", "kuuki"),
            scheduler_role_arn: r.string("SCHEDULER_ROLE_ARN", ""),
            talkativeness: talkativeness::parse(vars)?,
        };
        settings.time_budget().check().map_err(|reason| ConfigError::Invalid {
            name: "WORKER_TIMEOUT_SECONDS",
            value: settings.worker_timeout.as_secs().to_string(),
            reason,
        })?;
        Ok(settings)
    }

    /// These settings for a run with or without an LLM: an LLM object can be supplied
    /// without `LLM_PROVIDER` (a script in replay and tests), so the LLM judge follows
    /// the LLM itself, and is never on without one.
    pub fn for_llm(mut self, llm_present: bool) -> Self {
        self.llm_judge_enabled = llm_present && self.llm_judge_setting.unwrap_or(true);
        self
    }

    /// The sampling temperature of a role's calls (`None`: the server's own).
    pub fn temperature(&self, role: crate::ports::LlmRole) -> Option<f64> {
        use crate::ports::LlmRole;
        match role {
            LlmRole::Judge => self.judge_temperature,
            LlmRole::Generate => self.llm_temperature,
            LlmRole::Summarize => self.summarize_temperature,
            LlmRole::Reflect => self.reflection_temperature,
        }
    }

    /// Whether kuuki judges messages nobody addressed to it.
    pub fn ambient_enabled(&self) -> bool {
        self.autonomous_response_enabled && self.memory_enabled
    }
}

/// Checks that `name` is a setting, for `--set NAME=VALUE`.
pub fn check_known(name: &str) -> Result<(), ConfigError> {
    if SETTINGS.iter().any(|s| s.name == name) { Ok(()) } else { Err(ConfigError::Unknown(name.to_owned())) }
}

/// `9-18`: from 9:00 up to 18:00 local time.
fn parse_hours(raw: &str) -> Option<(u8, u8)> {
    let (start, end) = raw.split_once('-')?;
    let (start, end): (u8, u8) = (start.trim().parse().ok()?, end.trim().parse().ok()?);
    (start < end && end <= 24).then_some((start, end))
}

fn parse_familiarity(raw: &str) -> Option<[u32; 3]> {
    let parts: Vec<u32> = raw.split(',').map(|p| p.trim().parse().ok()).collect::<Option<_>>()?;
    match parts[..] {
        [a, b, c] if a < b && b < c => Some([a, b, c]),
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn credentials_never_show_in_debug_output() {
        let s = Settings::from_vars(&vars(&[
            ("SLACK_SIGNING_SECRET", "signing-s3cret"),
            ("SLACK_BOT_TOKEN", "xoxb-t0ken"),
            ("OPENAI_API_KEY", "sk-0penai"),
            ("ANTHROPIC_API_KEY", "sk-ant-key"),
            ("DISCORD_BOT_TOKEN", "discord-t0ken"),
        ]))
        .unwrap();
        let shown = format!("{s:?}");
        for secret in ["signing-s3cret", "xoxb-t0ken", "sk-0penai", "sk-ant-key", "discord-t0ken"] {
            assert!(!shown.contains(secret), "{secret} leaked into {shown}");
        }
        use secrecy::ExposeSecret;
        assert_eq!(s.slack_bot_token.expose_secret(), "xoxb-t0ken");
    }

    #[test]
    fn defaults_follow_the_source_documents() {
        let s = Settings::default();
        assert_eq!(s.channel_buffer_size, 50);
        assert_eq!(s.channel_buffer_ttl, Duration::from_secs(30 * 60));
        assert_eq!(s.judge_score_threshold, 60);
        assert_eq!(s.cooldown, Duration::from_secs(120));
        assert_eq!(s.engagement_duration, Duration::from_secs(300));
        assert_eq!(s.engagement_boost, 40);
        assert_eq!((s.judge_llm_threshold_low, s.judge_llm_threshold_high), (20, 80));
        assert_eq!(s.familiarity_thresholds, [5, 30, 100]);
        assert_eq!(s.judge_min_wait, Duration::from_secs(30));
        assert_eq!(s.judge_jitter_ratio, 0.3);
        assert_eq!(s.unanswered_question_wait, Duration::from_secs(120));
        assert_eq!(s.addressed_to_other_wait, Duration::from_secs(3600));
        assert_eq!(s.judge_min_conversation_messages, 3, "seed 003's EAVESDROP_MIN_MESSAGES");
        assert_eq!(s.judge_channel_list_tokens, 300);
        // An ordinary open question (question +20, no_mention -10) lands in the LLM band
        // and, without an LLM, below the threshold.
        let open_question = 20 - 10 + s.unanswered_question_points;
        assert!(s.judge_llm_threshold_low < open_question && open_question < s.judge_llm_threshold_high);
        assert!(open_question < s.judge_score_threshold);
        assert_eq!(s.bot_name, "kuuki");
        assert_eq!(s.bot_aliases, vec!["くうき"]);
        assert!(s.autonomous_response_enabled && s.memory_enabled && s.response_diversity_enabled);
        assert!(s.ignore_other_bots);
        assert!(!s.llm_judge_enabled, "no provider, no LLM judge");
        assert_eq!(s.llm_provider, LlmProvider::None);
    }

    #[test]
    fn llm_judge_defaults_on_with_a_provider_and_can_be_turned_off() {
        let s = Settings::from_vars(&vars(&[("LLM_PROVIDER", "openai")])).unwrap();
        assert!(s.llm_judge_enabled);
        let s = Settings::from_vars(&vars(&[("LLM_PROVIDER", "openai"), ("LLM_JUDGE_ENABLED", "false")])).unwrap();
        assert!(!s.llm_judge_enabled);
    }

    #[test]
    fn a_supplied_llm_turns_the_llm_judge_on_unless_it_is_turned_off() {
        let none = Settings::default();
        assert!(none.clone().for_llm(true).llm_judge_enabled, "an LLM without LLM_PROVIDER (a script)");
        assert!(!none.for_llm(false).llm_judge_enabled);
        let off = Settings::from_vars(&vars(&[("LLM_JUDGE_ENABLED", "false")])).unwrap();
        assert!(!off.for_llm(true).llm_judge_enabled);
        let on = Settings::from_vars(&vars(&[("LLM_JUDGE_ENABLED", "true")])).unwrap();
        assert!(!on.for_llm(false).llm_judge_enabled, "never on without an LLM to ask");
        let script = Settings::from_vars(&vars(&[("LLM_PROVIDER", "script")])).unwrap_err();
        assert!(script.to_string().contains("LLM_PROVIDER"), "{script}");
    }

    #[test]
    fn structured_output_and_temperatures_per_role() {
        let s = Settings::default();
        assert_eq!(s.llm_structured_output, StructuredOutput::JsonSchema);
        let roles = (s.llm_temperature, s.judge_temperature, s.summarize_temperature, s.reflection_temperature);
        assert_eq!(roles, (Some(0.7), Some(0.1), Some(0.2), Some(0.2)));
        let s = Settings::from_vars(&vars(&[
            ("LLM_STRUCTURED_OUTPUT", "json_object"),
            ("LLM_TEMPERATURE", "default"),
            ("JUDGE_TEMPERATURE", "0"),
        ]))
        .unwrap();
        assert_eq!(s.llm_structured_output, StructuredOutput::JsonObject);
        assert_eq!((s.llm_temperature, s.judge_temperature), (None, Some(0.0)));
        for (name, bad) in
            [("LLM_STRUCTURED_OUTPUT", "grammar"), ("JUDGE_TEMPERATURE", "3"), ("LLM_TEMPERATURE", "hot")]
        {
            let error = Settings::from_vars(&vars(&[(name, bad)])).unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
        }
        let steps: Vec<_> = std::iter::successors(Some(StructuredOutput::JsonSchema), |m| {
            (*m != StructuredOutput::Off).then(|| m.next())
        })
        .map(StructuredOutput::as_str)
        .collect();
        assert_eq!(steps, ["json_schema", "json_object", "off"]);
    }

    #[test]
    fn role_models_fall_back_to_llm_model() {
        let s = Settings::from_vars(&vars(&[("LLM_MODEL", "m1"), ("JUDGE_MODEL", "j1")])).unwrap();
        assert_eq!(s.judge_model, "j1");
        assert_eq!(s.summarize_model, "m1");
        assert_eq!(s.reflection_model, "m1");
    }

    #[test]
    fn invalid_values_name_the_setting() {
        let cases = [
            ("JUDGE_SCORE_THRESHOLD", "abc"),
            ("JUDGE_SCORE_THRESHOLD", "101"),
            ("COOLDOWN_SECONDS", "-1"),
            ("JUDGE_JITTER_RATIO", "1.5"),
            ("MEMORY_ENABLED", "maybe"),
            ("FAMILIARITY_THRESHOLDS", "30,5,100"),
            ("FAMILIARITY_THRESHOLDS", "5,30"),
            ("PROACTIVE_TIMEZONE", "Mars/Olympus"),
            ("PROACTIVE_WORKING_HOURS", "18-9"),
            ("PROACTIVE_WORKING_HOURS", "9-25"),
            ("PROACTIVE_WORKING_HOURS", "nine"),
            ("PROMPT_LANGUAGE", "fr"),
            ("LLM_PROVIDER", "gemini"),
            ("JUDGE_LLM_THRESHOLD_LOW", "90"),
        ];
        for (name, value) in cases {
            let err = Settings::from_vars(&vars(&[(name, value)])).unwrap_err();
            assert!(err.to_string().contains(name), "{name}={value}: {err}");
        }
    }

    #[test]
    fn lists_are_trimmed() {
        let s = Settings::from_vars(&vars(&[("JUDGE_KEYWORDS", " deploy , 障害,,"), ("BOT_ALIASES", "")])).unwrap();
        assert_eq!(s.judge_keywords, vec!["deploy", "障害"]);
        assert!(s.bot_aliases.is_empty(), "an empty list is a list with nothing in it");
    }

    #[test]
    fn unknown_names_are_reported() {
        assert!(check_known("COOLDOWN_SECONDS").is_ok());
        assert_eq!(check_known("COOLDOWN"), Err(ConfigError::Unknown("COOLDOWN".into())));
    }
}

/// The persona file (`PERSONA_FILE`, `--persona`): TOML with `name`, `system_prompt`,
/// and optionally `aliases` and `topics`, which replace BOT_NAME, BOT_ALIASES and
/// BOT_TOPICS.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaFile {
    pub name: Option<String>,
    pub system_prompt: Option<String>,
    pub aliases: Option<Vec<String>>,
    pub topics: Option<Vec<String>>,
}

impl PersonaFile {
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}

/// The persona a Lambda is given: `PERSONA_TOML` (the TOML itself, from the template's
/// `PersonaToml` parameter, since a Lambda has no file of its own to point at), else the
/// file `PERSONA_FILE` names, else none (the built-in persona). An error names the
/// variable.
pub fn persona_from_vars(vars: &HashMap<String, String>) -> Result<Option<PersonaFile>, String> {
    let set = |name: &str| vars.get(name).filter(|v| !v.trim().is_empty());
    if let Some(text) = set("PERSONA_TOML") {
        return PersonaFile::parse(text).map(Some).map_err(|e| format!("PERSONA_TOML: {e}"));
    }
    if let Some(path) = set("PERSONA_FILE") {
        let text = std::fs::read_to_string(path).map_err(|e| format!("PERSONA_FILE {path}: {e}"))?;
        return PersonaFile::parse(&text).map(Some).map_err(|e| format!("PERSONA_FILE {path}: {e}"));
    }
    Ok(None)
}

#[cfg(test)]
mod persona_from_vars_tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn persona_toml_text_becomes_the_persona() {
        let text = include_str!("../../examples/persona.toml");
        let file = persona_from_vars(&vars(&[("PERSONA_TOML", text), ("PERSONA_FILE", "/nowhere/persona.toml")]))
            .unwrap()
            .expect("PERSONA_TOML is set");
        let persona = Settings::from_vars(&HashMap::new()).unwrap().persona(Some(&file));
        assert_eq!(persona.name, "kuuki");
        assert!(persona.system_prompt.contains("開発チーム"), "{}", persona.system_prompt);
        assert_eq!(persona.aliases, vec!["くうき"]);
        assert!(persona.topics.contains(&"staging".to_owned()), "{:?}", persona.topics);
    }

    #[test]
    fn bad_persona_toml_names_the_variable() {
        let error = persona_from_vars(&vars(&[("PERSONA_TOML", "name = \"unterminated")])).unwrap_err();
        assert!(error.starts_with("PERSONA_TOML"), "{error}");
        let error = persona_from_vars(&vars(&[("PERSONA_TOML", "nickname = \"kuu\"")])).unwrap_err();
        assert!(error.starts_with("PERSONA_TOML"), "an unknown field is an error too: {error}");
    }

    #[test]
    fn persona_file_is_read_when_there_is_no_persona_toml() {
        let dir = std::env::temp_dir().join(format!("kuuki-persona-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("persona.toml");
        std::fs::write(&path, "name = \"sora\"").unwrap();
        let path = path.to_str().unwrap();
        let file = persona_from_vars(&vars(&[("PERSONA_TOML", " "), ("PERSONA_FILE", path)])).unwrap();
        assert_eq!(file.and_then(|f| f.name).as_deref(), Some("sora"));
        std::fs::remove_dir_all(&dir).unwrap();
        let error = persona_from_vars(&vars(&[("PERSONA_FILE", path)])).unwrap_err();
        assert!(error.starts_with("PERSONA_FILE"), "{error}");
    }

    #[test]
    fn neither_variable_means_the_built_in_persona() {
        assert!(persona_from_vars(&vars(&[("PERSONA_TOML", "")])).unwrap().is_none());
    }
}

impl Settings {
    /// The persona: the file's fields where given, the settings otherwise.
    pub fn persona(&self, file: Option<&PersonaFile>) -> crate::domain::Persona {
        let file = file.cloned().unwrap_or_default();
        let default_prompt = match self.prompt_language {
            PromptLanguage::Ja => format!(
                "あなたは「{}」。チームのチャンネルにいる、空気を読める気さくな同僚です。短く自然な日本語で話します。",
                file.name.as_deref().unwrap_or(&self.bot_name)
            ),
            PromptLanguage::En => format!(
                "You are {}, a friendly colleague in the team's channel who reads the room. You speak briefly and naturally.",
                file.name.as_deref().unwrap_or(&self.bot_name)
            ),
        };
        crate::domain::Persona {
            name: file.name.unwrap_or_else(|| self.bot_name.clone()),
            system_prompt: file.system_prompt.unwrap_or(default_prompt),
            aliases: file.aliases.unwrap_or_else(|| self.bot_aliases.clone()),
            topics: file.topics.unwrap_or_else(|| self.bot_topics.clone()),
        }
    }
}
