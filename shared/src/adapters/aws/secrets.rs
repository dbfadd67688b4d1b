//! Secrets in Lambda: the template passes each secret's ARN (`SLACK_BOT_TOKEN_ARN`,
//! ...); the cold start reads them from Secrets Manager once and hands the values to
//! the settings as if they had been set directly. A value set directly wins.

use std::collections::HashMap;

use aws_sdk_secretsmanager::Client;

/// The settings that may come from Secrets Manager.
pub const SECRET_SETTINGS: &[&str] = &[
    "SLACK_SIGNING_SECRET",
    "SLACK_BOT_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DISCORD_BOT_TOKEN",
    "DISCORD_PUBLIC_KEY",
];

/// Fills `vars[NAME]` from the secret `vars[NAME_ARN]` names, for every secret setting
/// that is not set directly. An error names the setting, never the value.
pub async fn resolve(client: &Client, vars: &mut HashMap<String, String>) -> Result<(), String> {
    for name in SECRET_SETTINGS {
        let arn_name = format!("{name}_ARN");
        let Some(arn) = vars.get(&arn_name).filter(|a| !a.trim().is_empty()).cloned() else {
            continue;
        };
        if vars.get(*name).is_some_and(|v| !v.is_empty()) {
            continue;
        }
        let secret = client
            .get_secret_value()
            .secret_id(&arn)
            .send()
            .await
            .map_err(|e| format!("reading {arn_name} from Secrets Manager: {}", aws_sdk_secretsmanager::error::DisplayErrorContext(e)))?;
        let value = secret
            .secret_string
            .ok_or_else(|| format!("{arn_name} names a secret without a string value"))?;
        vars.insert((*name).to_owned(), value.trim().to_owned());
    }
    Ok(())
}
