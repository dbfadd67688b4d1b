//! The catalog of settings: every variable kuuki reads, its default and meaning. The
//! settings page (docs/settings.md) is generated from it, and a name not in it is refused.

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
    "UNANSWERED_QUESTION_WAIT_SECONDS", "120", "How long a question stands before kuuki counts it unanswered (people often answer within 30-90 s). Every question gets its own pick-up then (docs/design.md §7.7): judged if still open, whatever else the channel talked about meanwhile.";
    "REPLY_MODEL_THRESHOLD", "off", "A help channel's setting. With a number (0.01 to 1; 0.25 tuned on the training logs), an open question's pick-up asks the answered model, learned from annotated IRC logs, how likely people answered it (or will), and leaves it when that reaches the number; only sure closings (a reply in its thread, the addressee's answer, a withdrawal, kuuki's answer) close it otherwise, a name call or shared words being the model's features, not verdicts; and only the asker can pass a pick-up's answer by (talkativeness). `off`: issue 34's closing rules (a name call, the next line, shared words). On the IRC dev logs with UNANSWERED_QUESTION_WAIT_SECONDS=180 and a cap of 20 it takes up 28.6 % of the hanging questions at 1.2 % barge-ins (the rules: 3.1 % at 1.8 %); off by default because in small team channels, the labelled conversations, its recall falls to 0.65 (docs/judgment.md).";
    "OPEN_QUESTION_EXPIRY_MINUTES", "30", "A question still open after this long is no longer taken up: the moment has passed.";
    "CHANNEL_MAX_UNASKED_POSTS_PER_HOUR", "4", "At most this many posts kuuki makes unasked in a channel in any hour (pick-ups and ambient answers; reactions and answers to mentions do not count). 0: none. At most 20 (the answers a channel keeps). A team channel of a few people keeps the default; a help channel where strangers' questions often go unanswered wants more (20: on the #ubuntu dev logs the default cap leaves 2 of 98 hanging questions picked up where 20 leaves 3, with barge-ins 4 and 6 of 336; docs/judgment.md).";
    "ADDRESSED_TO_OTHER_POINTS", "-60", "Points for a turn meant for someone else: it mentions another person, or answers another person's question in a thread (`addressed_to_other`). Low enough that the LLM is never asked.";
    "JUDGE_MIN_CONVERSATION_MESSAGES", "3", "Fewest messages (anyone's, kuuki's too) the conversation must hold in the context window before kuuki chimes in unasked (seed 003's minimum, to follow the flow first). Fewer: `short_conversation` -40, unless the turn is an open question (a question stands on its own). Direct triggers are unaffected; 1 turns the rule off.";
    "JUDGE_CHANNEL_LIST_TOKENS", "300", "Budget (about 4 bytes a token) for the LLM judge's list of the workspace's other channels, each with a one-line memory (seed 004). Private channels and DMs are never listed; 0 leaves the list out. Needs MEMORY_ENABLED.";
    "ADDRESSED_TO_OTHER_WAIT_MINUTES", "60", "After this long without an answer from anyone, a question meant for someone else is open to kuuki again (`addressed_to_other` stops applying).";
    "IGNORE_OTHER_BOTS", "true", "Other bots' messages are stored but never judged (loop prevention).";
    "COMMAND_MANAGERS", "", "Comma-separated user ids (Slack `U…`, Discord snowflakes; in replay, transcript names) who may run `/kuuki mute`, `unmute` and `shadow` anywhere, besides Slack workspace admins and owners and Discord members with Manage Channels. Serving many Slack workspaces (SLACK_CLIENT_ID), a Slack entry is `T…/U…` and counts in that workspace only.";
    "MESSAGE_RETENTION_DAYS", "30", "Stored messages expire after this many days.";
    "PURGE_ON_UNINSTALL", "true", "When Slack says kuuki was removed from the workspace (app_uninstalled, or tokens_revoked naming its bot) and it is not installed again within UNINSTALL_PURGE_GRACE_HOURS, delete everything stored of that workspace (messages, channel memories, facts, notes, profiles, the workspace memory); Discord's data stays. Off: kuuki only stops answering there.";
    "UNINSTALL_PURGE_GRACE_HOURS", "72", "How long after an uninstall the workspace's data is kept: a reinstall within it (a message posted since delivered) keeps everything.";
    "LLM_PROVIDER", "none", "none, openai or anthropic (replay and serve also take --llm).";
    "LLM_MODEL", "gpt-4o-mini", "Model for generation, and for every role without its own model.";
    "LLM_TIMEOUT_SECONDS", "30", "How long one LLM call may take before it is retried or given up.";
    "LLM_MAX_RETRIES", "2", "Retries of an LLM call after a 429, a 5xx or a timeout (with backoff).";
    "LLM_STRUCTURED_OUTPUT", "json_schema", "How the roles that answer JSON (judge, summaries, reflection) ask for it: json_schema (OpenAI-compatible `response_format` with a strict JSON Schema; Anthropic: a forced tool call), json_object (llama.cpp's `{\"type\": \"json_object\", \"schema\": …}`; Anthropic: the tool call), off (the prompt's words alone). A server that refuses one as malformed (HTTP 400, 422 or 500 naming it) is asked with the next, once per step, for as long as the process runs.";
    "LLM_MAX_OUTPUT_TOKENS", "0", "A cap on the tokens of every answer the model writes, whatever the role asks for (the judge 300, summaries 800, replies 1,024, reflection 1,200); 0: each role's own. For a small model on a slow CPU, where a rambling answer would otherwise run out a call's time; a capped answer that was cut off is dropped as one the model did not finish (0 to 100000).";
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
    "SLACK_CLIENT_ID", "", "The Slack app's client id: set, kuuki serves many workspaces on one deployment, each added through \"Add to Slack\" (`/slack/install`, OAuth v2) with its own token, kept sealed; SLACK_BOT_TOKEN and SLACK_APP_TOKEN must then be unset. Every process needs TOKEN_ENCRYPTION_KEY; the ingress also SLACK_CLIENT_SECRET, SLACK_STATE_SECRET and SLACK_SIGNING_SECRET.";
    "SLACK_CLIENT_SECRET", "", "The Slack app's client secret (\"Basic Information\"): exchanges an install's code for its token.";
    "SLACK_STATE_SECRET", "", "Signs the state of an install in progress (at least 32 characters; any random string): a redirect whose state this deployment did not make, for another browser, used or older than 10 minutes is refused.";
    "SLACK_REDIRECT_URI", "", "The absolute URL of `/slack/oauth_redirect` as the app's manifest lists it; empty: built from the request's host (https unless the host is 127.0.0.1 or localhost).";
    "SLACK_AUTHORIZE_URL", "https://slack.com/oauth/v2/authorize", "Where `/slack/install` sends the browser (Slack's OAuth v2 authorize page).";
    "TOKEN_ENCRYPTION_KEY", "", "32 bytes as 64 hex digits (`openssl rand -hex 32`): seals every installation's tokens in the store (AES-256-GCM). Keep it: a changed key leaves the stored tokens unreadable, and each workspace must be added again.";
    "TOKEN_KMS_KEY_ID", "", "On AWS: the KMS key (id, ARN or alias) that seals the installations' tokens instead of TOKEN_ENCRYPTION_KEY (Encrypt/Decrypt with the workspace as encryption context); the stack makes one and keeps it on delete.";
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
    "SLACK_SIGNING_SECRET_ARN", "", "In Lambda: the Secrets Manager secret holding SLACK_SIGNING_SECRET, read once per cold start. Likewise SLACK_BOT_TOKEN_ARN, SLACK_CLIENT_SECRET_ARN, SLACK_STATE_SECRET_ARN, TOKEN_ENCRYPTION_KEY_ARN, OPENAI_API_KEY_ARN, ANTHROPIC_API_KEY_ARN, DISCORD_BOT_TOKEN_ARN, DISCORD_PUBLIC_KEY_ARN and DISCORD_RELAY_SECRET_ARN.";
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
