//! The settings' parsing: defaults, errors naming the setting, secrets kept out of `Debug`.

use std::time::Duration;

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
    assert_eq!(s.platforms.slack_bot_token.expose_secret(), "xoxb-t0ken");
}

#[test]
fn defaults_follow_the_source_documents() {
    let s = Settings::default();
    assert_eq!(s.memory.channel_buffer_size, 50);
    assert_eq!(s.memory.channel_buffer_ttl, Duration::from_secs(30 * 60));
    assert_eq!(s.judge.score_threshold, 60);
    assert_eq!(s.judge.cooldown, Duration::from_secs(120));
    assert_eq!(s.judge.engagement_duration, Duration::from_secs(300));
    assert_eq!(s.judge.engagement_boost, 40);
    assert_eq!((s.judge.llm_threshold_low, s.judge.llm_threshold_high), (20, 80));
    assert_eq!(s.people.familiarity_thresholds, [5, 30, 100]);
    assert_eq!(s.judge.min_wait, Duration::from_secs(30));
    assert_eq!(s.judge.jitter_ratio, 0.3);
    assert_eq!(s.judge.unanswered_question_wait, Duration::from_secs(120));
    assert_eq!(s.judge.addressed_to_other_wait, Duration::from_secs(3600));
    assert_eq!(s.judge.min_conversation_messages, 3, "seed 003's EAVESDROP_MIN_MESSAGES");
    assert_eq!(s.judge.channel_list_tokens, 300);
    // An ordinary open question (question +20, no_mention -10) lands in the LLM band
    // and, without an LLM, below the threshold.
    let open_question = 20 - 10 + s.judge.unanswered_question_points;
    assert!(s.judge.llm_threshold_low < open_question && open_question < s.judge.llm_threshold_high);
    assert!(open_question < s.judge.score_threshold);
    assert_eq!(s.bot.name, "kuuki");
    assert_eq!(s.bot.aliases, vec!["くうき"]);
    assert!(s.judge.autonomous_response_enabled && s.memory.enabled && s.judge.response_diversity_enabled);
    assert!(s.judge.ignore_other_bots);
    assert!(!s.judge.llm_enabled, "no provider, no LLM judge");
    assert_eq!(s.llm.provider, LlmProvider::None);
}

#[test]
fn llm_judge_defaults_on_with_a_provider_and_can_be_turned_off() {
    let s = Settings::from_vars(&vars(&[("LLM_PROVIDER", "openai")])).unwrap();
    assert!(s.judge.llm_enabled);
    let s = Settings::from_vars(&vars(&[("LLM_PROVIDER", "openai"), ("LLM_JUDGE_ENABLED", "false")])).unwrap();
    assert!(!s.judge.llm_enabled);
}

#[test]
fn a_supplied_llm_turns_the_llm_judge_on_unless_it_is_turned_off() {
    let none = Settings::default();
    assert!(none.clone().for_llm(true).judge.llm_enabled, "an LLM without LLM_PROVIDER (a script)");
    assert!(!none.for_llm(false).judge.llm_enabled);
    let off = Settings::from_vars(&vars(&[("LLM_JUDGE_ENABLED", "false")])).unwrap();
    assert!(!off.for_llm(true).judge.llm_enabled);
    let on = Settings::from_vars(&vars(&[("LLM_JUDGE_ENABLED", "true")])).unwrap();
    assert!(!on.for_llm(false).judge.llm_enabled, "never on without an LLM to ask");
    let script = Settings::from_vars(&vars(&[("LLM_PROVIDER", "script")])).unwrap_err();
    assert!(script.to_string().contains("LLM_PROVIDER"), "{script}");
}

#[test]
fn structured_output_and_temperatures_per_role() {
    let s = Settings::default();
    assert_eq!(s.llm.structured_output, StructuredOutput::JsonSchema);
    let roles = (
        s.llm.generate_temperature,
        s.llm.judge_temperature,
        s.llm.summarize_temperature,
        s.llm.reflection_temperature,
    );
    assert_eq!(roles, (Some(0.7), Some(0.1), Some(0.2), Some(0.2)));
    let s = Settings::from_vars(&vars(&[
        ("LLM_STRUCTURED_OUTPUT", "json_object"),
        ("LLM_TEMPERATURE", "default"),
        ("JUDGE_TEMPERATURE", "0"),
    ]))
    .unwrap();
    assert_eq!(s.llm.structured_output, StructuredOutput::JsonObject);
    assert_eq!((s.llm.generate_temperature, s.llm.judge_temperature), (None, Some(0.0)));
    for (name, bad) in [("LLM_STRUCTURED_OUTPUT", "grammar"), ("JUDGE_TEMPERATURE", "3"), ("LLM_TEMPERATURE", "hot")] {
        let error = Settings::from_vars(&vars(&[(name, bad)])).unwrap_err();
        assert!(error.to_string().contains(name), "{error}");
    }
    let steps: Vec<_> =
        std::iter::successors(Some(StructuredOutput::JsonSchema), |m| (*m != StructuredOutput::Off).then(|| m.next()))
            .map(StructuredOutput::as_str)
            .collect();
    assert_eq!(steps, ["json_schema", "json_object", "off"]);
}

#[test]
fn role_models_fall_back_to_llm_model() {
    let s = Settings::from_vars(&vars(&[("LLM_MODEL", "m1"), ("JUDGE_MODEL", "j1")])).unwrap();
    assert_eq!(s.llm.judge_model, "j1");
    assert_eq!(s.llm.summarize_model, "m1");
    assert_eq!(s.llm.reflection_model, "m1");
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
        ("OPEN_QUESTION_EXPIRY_MINUTES", "0"),
        ("OPEN_QUESTION_EXPIRY_MINUTES", "soon"),
        ("CHANNEL_MAX_UNASKED_POSTS_PER_HOUR", "21"),
        ("CHANNEL_MAX_UNASKED_POSTS_PER_HOUR", "-1"),
        ("LLM_MAX_OUTPUT_TOKENS", "100001"),
        ("LLM_MAX_OUTPUT_TOKENS", "lots"),
        ("REPLY_MODEL_THRESHOLD", "0"),
        ("REPLY_MODEL_THRESHOLD", "on"),
    ];
    for (name, value) in cases {
        let err = Settings::from_vars(&vars(&[(name, value)])).unwrap_err();
        assert!(err.to_string().contains(name), "{name}={value}: {err}");
    }
}

#[test]
fn lists_are_trimmed() {
    let s = Settings::from_vars(&vars(&[("JUDGE_KEYWORDS", " deploy , 障害,,"), ("BOT_ALIASES", "")])).unwrap();
    assert_eq!(s.judge.keywords, vec!["deploy", "障害"]);
    assert!(s.bot.aliases.is_empty(), "an empty list is a list with nothing in it");
}

#[test]
fn unknown_names_are_reported() {
    assert!(check_known("COOLDOWN_SECONDS").is_ok());
    assert_eq!(check_known("COOLDOWN"), Err(ConfigError::Unknown("COOLDOWN".into())));
}

#[test]
fn many_slack_workspaces_take_their_settings_together() {
    let key = "ab".repeat(32);
    let state = "s".repeat(32);
    let many = [
        ("SLACK_CLIENT_ID", "1234.5678"),
        ("SLACK_CLIENT_SECRET", "client-s3cret"),
        ("SLACK_STATE_SECRET", state.as_str()),
        ("SLACK_SIGNING_SECRET", "signing"),
        ("TOKEN_ENCRYPTION_KEY", key.as_str()),
    ];
    let s = Settings::from_vars(&vars(&many)).expect("all there");
    assert!(s.platforms.slack_many_workspaces());
    assert!(!Settings::default().platforms.slack_many_workspaces(), "one workspace unless a client id is set");
    assert_eq!(s.platforms.slack_authorize_url, "https://slack.com/oauth/v2/authorize");
    let shown = format!("{s:?}");
    for secret in ["client-s3cret", state.as_str(), key.as_str()] {
        assert!(!shown.contains(secret), "{secret} leaked into {shown}");
    }
    let refused = |pairs: &[(&str, &str)], name: &str| {
        let error = Settings::from_vars(&vars(pairs)).expect_err(name).to_string();
        assert!(error.contains(name), "{name}: {error}");
        for secret in ["client-s3cret", state.as_str(), key.as_str(), "xoxb-one", "xapp-one"] {
            assert!(!error.contains(secret), "{error} shows a secret");
        }
    };
    let keyless: Vec<_> = many.iter().copied().filter(|(name, _)| *name != "TOKEN_ENCRYPTION_KEY").collect();
    refused(&keyless, "TOKEN_ENCRYPTION_KEY");
    let with_kms: Vec<_> = keyless.iter().copied().chain([("TOKEN_KMS_KEY_ID", "alias/kuuki-tokens")]).collect();
    let on_aws = Settings::from_vars(&vars(&with_kms)).expect("a KMS key instead");
    assert_eq!(on_aws.platforms.token_kms_key_id, "alias/kuuki-tokens");
    assert_eq!(s.platforms.install_secret_missing(), None);
    // A worker opens tokens and needs the key alone; the ingress's install secrets are
    // its own check.
    for missing in ["SLACK_CLIENT_SECRET", "SLACK_STATE_SECRET", "SLACK_SIGNING_SECRET"] {
        let without: Vec<_> = many.iter().copied().filter(|(name, _)| *name != missing).collect();
        let worker = Settings::from_vars(&vars(&without)).expect("a worker's settings");
        assert_eq!(worker.platforms.install_secret_missing(), Some(missing));
    }
    let with = |extra: (&'static str, &'static str)| {
        let mut pairs: Vec<(&str, &str)> = many.to_vec();
        pairs.retain(|(name, _)| *name != extra.0);
        pairs.push(extra);
        pairs
    };
    refused(&with(("SLACK_BOT_TOKEN", "xoxb-one")), "SLACK_BOT_TOKEN");
    refused(&with(("SLACK_APP_TOKEN", "xapp-one")), "SLACK_APP_TOKEN");
    refused(&with(("SLACK_STATE_SECRET", "short")), "SLACK_STATE_SECRET");
    refused(&with(("TOKEN_ENCRYPTION_KEY", "abcd")), "TOKEN_ENCRYPTION_KEY");
    refused(&[("TOKEN_ENCRYPTION_KEY", "zz")], "TOKEN_ENCRYPTION_KEY");
    refused(&with(("SLACK_REDIRECT_URI", "kuuki.example/slack/oauth_redirect")), "SLACK_REDIRECT_URI");
    refused(&with(("SLACK_REDIRECT_URI", "https://kuuki.example/oauth")), "SLACK_REDIRECT_URI");
    let uri = Settings::from_vars(&vars(&with(("SLACK_REDIRECT_URI", "https://kuuki.example/slack/oauth_redirect"))));
    assert_eq!(uri.unwrap().platforms.slack_redirect_uri, "https://kuuki.example/slack/oauth_redirect");
}
