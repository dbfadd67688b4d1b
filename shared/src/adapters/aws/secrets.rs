//! Secrets in Lambda: the template passes each secret's ARN (`SLACK_BOT_TOKEN_ARN`,
//! ...); the cold start reads them from Secrets Manager once, all at the same time (the
//! cold start waits for the slowest read, not for the sum), and hands the values to
//! the settings as if they had been set directly. A value set directly wins.

use std::collections::HashMap;

use aws_sdk_secretsmanager::Client;

/// The settings that may come from Secrets Manager.
pub const SECRET_SETTINGS: &[&str] = &[
    "SLACK_SIGNING_SECRET",
    "SLACK_BOT_TOKEN",
    "SLACK_CLIENT_SECRET",
    "SLACK_STATE_SECRET",
    "TOKEN_ENCRYPTION_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DISCORD_BOT_TOKEN",
    "DISCORD_PUBLIC_KEY",
    "DISCORD_RELAY_SECRET",
];

/// A secret that could not be read; the text names the setting, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("reading {arn_name} from Secrets Manager: {detail}")]
    Read { arn_name: String, detail: String },
    #[error("{arn_name} names a secret without a string value")]
    NoString { arn_name: String },
}

/// Every secret that could not be read, in `SECRET_SETTINGS` order.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct SecretsError(pub Vec<SecretError>);

/// Fills `vars[NAME]` from the secret `vars[NAME_ARN]` names, for every secret setting
/// that is not set directly, reading the secrets concurrently. Errors name the
/// setting, never the value; every failed read is reported, in `SECRET_SETTINGS` order.
pub async fn resolve(client: &Client, vars: &mut HashMap<String, String>) -> Result<(), SecretsError> {
    let mut reads = tokio::task::JoinSet::new();
    for (order, name) in SECRET_SETTINGS.iter().enumerate() {
        let arn_name = format!("{name}_ARN");
        let Some(arn) = vars.get(&arn_name).filter(|a| !a.trim().is_empty()).cloned() else {
            continue;
        };
        if vars.get(*name).is_some_and(|v| !v.is_empty()) {
            continue;
        }
        let client = client.clone();
        reads.spawn(async move { (order, *name, read(&client, &arn_name, &arn).await) });
    }
    let mut results = reads.join_all().await;
    results.sort_by_key(|(order, ..)| *order);
    let mut errors = Vec::new();
    for (_, name, value) in results {
        match value {
            Ok(value) => {
                vars.insert(name.to_owned(), value);
            }
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(SecretsError(errors)) }
}

/// The trimmed string value of the secret `arn`, which the variable `arn_name` gave.
async fn read(client: &Client, arn_name: &str, arn: &str) -> Result<String, SecretError> {
    let secret = client.get_secret_value().secret_id(arn).send().await.map_err(|e| SecretError::Read {
        arn_name: arn_name.to_owned(),
        detail: aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string(),
    })?;
    let value = secret.secret_string.ok_or_else(|| SecretError::NoString { arn_name: arn_name.to_owned() })?;
    Ok(value.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use aws_sdk_secretsmanager::config::{BehaviorVersion, Credentials, Region};
    use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
    use serde_json::json;
    use wiremock::matchers::{body_partial_json, header, method};
    use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

    use super::*;

    const SLOW_READ: Duration = Duration::from_secs(2);

    /// Answers with `answer`, noting when each request arrived.
    struct NotingArrivals {
        arrivals: Arc<Mutex<Vec<Instant>>>,
        answer: ResponseTemplate,
    }

    impl Respond for NotingArrivals {
        fn respond(&self, _: &Request) -> ResponseTemplate {
            self.arrivals.lock().unwrap().push(Instant::now());
            self.answer.clone()
        }
    }

    /// A Secrets Manager whose every `GetSecretValue` answers after `SLOW_READ`; the
    /// requests' arrival times go to `arrivals`.
    async fn slow_secrets_manager(secrets: &[(&str, &str)], arrivals: &Arc<Mutex<Vec<Instant>>>) -> MockServer {
        let server = MockServer::start().await;
        for (arn, value) in secrets {
            Mock::given(method("POST"))
                .and(header("x-amz-target", "secretsmanager.GetSecretValue"))
                .and(body_partial_json(json!({"SecretId": arn})))
                .respond_with(NotingArrivals {
                    arrivals: arrivals.clone(),
                    answer: ResponseTemplate::new(200)
                        .set_delay(SLOW_READ)
                        .insert_header("content-type", "application/x-amz-json-1.1")
                        .set_body_json(json!({"ARN": arn, "Name": arn, "SecretString": value})),
                })
                .expect(1)
                .mount(&server)
                .await;
        }
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(400)
                    .insert_header("content-type", "application/x-amz-json-1.1")
                    .set_body_json(json!({"__type": "ResourceNotFoundException", "message": "Secrets Manager can't find the specified secret."})),
            )
            .mount(&server)
            .await;
        server
    }

    fn client(endpoint: &str) -> Client {
        let http =
            aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https();
        let config = aws_sdk_secretsmanager::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .endpoint_url(endpoint)
            .http_client(http)
            .build();
        Client::from_conf(config)
    }

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn secrets_are_read_once_each_and_at_the_same_time() {
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let secrets = [("arn:bot", "xoxb-1\n"), ("arn:openai", "sk-2"), ("arn:discord", "dt-3")];
        let server = slow_secrets_manager(&secrets, &arrivals).await;
        let mut vars = vars(&[
            ("SLACK_BOT_TOKEN_ARN", "arn:bot"),
            ("OPENAI_API_KEY_ARN", "arn:openai"),
            ("DISCORD_BOT_TOKEN_ARN", "arn:discord"),
            ("SLACK_SIGNING_SECRET_ARN", "arn:never-read"),
            ("SLACK_SIGNING_SECRET", "set directly"),
        ]);
        resolve(&client(&server.uri()), &mut vars).await.unwrap();
        assert_eq!(
            (vars["SLACK_BOT_TOKEN"].as_str(), vars["OPENAI_API_KEY"].as_str(), vars["DISCORD_BOT_TOKEN"].as_str()),
            ("xoxb-1", "sk-2", "dt-3")
        );
        assert_eq!(vars["SLACK_SIGNING_SECRET"], "set directly", "a value set directly wins");
        // Together, every read is asked before the first answer comes back; one after
        // another, each would wait for the previous answer.
        let arrivals = arrivals.lock().unwrap().clone();
        assert_eq!(arrivals.len(), 3);
        let spread = arrivals.iter().max().unwrap().duration_since(*arrivals.iter().min().unwrap());
        assert!(spread < SLOW_READ, "the reads were asked {spread:?} apart");
    }

    #[tokio::test]
    async fn a_failed_read_names_the_setting_never_a_value() {
        let server = slow_secrets_manager(&[("arn:bot", "xoxb-secret-value")], &Arc::default()).await;
        let mut vars = vars(&[("SLACK_BOT_TOKEN_ARN", "arn:bot"), ("OPENAI_API_KEY_ARN", "arn:missing")]);
        let error = resolve(&client(&server.uri()), &mut vars).await.unwrap_err().to_string();
        assert!(error.contains("OPENAI_API_KEY_ARN"), "{error}");
        assert!(!error.contains("xoxb-secret-value"), "no secret value in errors: {error}");
    }
}
