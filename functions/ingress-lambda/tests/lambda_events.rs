//! The router behind Lambda: Function URL and API Gateway events, as lambda_http
//! turns them into requests (base64 bodies included), reach the same handlers.

use std::sync::Arc;

use base64::Engine;
use kuuki::adapters::memory::{InProcess, MemoryLog, MemoryStore, RecordingChat, TsMint, VirtualClock};
use kuuki::adapters::slack::{SigningSecret, SlackIdentity};
use kuuki::config::Settings;
use kuuki::deps::Deps;
use kuuki::domain::{ChannelId, Ts, UserId};
use kuuki::ports::MessageStore;
use kuuki::replay::REPLAY_EPOCH;
use kuuki_ingress::{Ingress, SlackIngress, app};
use serde_json::json;
use tower::ServiceExt;

const SECRET: &str = "lambda-test-secret";

fn world() -> (Arc<Ingress>, Arc<MemoryStore>) {
    let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
    let parts = InProcess::new(clock.clone());
    let settings = Settings::default();
    let persona = settings.persona(None);
    let deps = Deps::new(
        settings,
        persona,
        UserId("UKUUKI".into()),
        parts.adapters(
            Arc::new(RecordingChat::new(clock, Arc::new(TsMint::default()))),
            None,
            Arc::new(MemoryLog::default()),
        ),
        1,
    );
    let ingress = Arc::new(Ingress {
        deps: Arc::new(deps),
        slack: Some(SlackIngress::one(
            SigningSecret::new(SECRET),
            SlackIdentity { user_id: "UKUUKI".into(), bot_id: None },
        )),
        discord: None,
        metrics_for: None,
    });
    (ingress, parts.store)
}

fn signed_body(ingress: &Ingress) -> (String, String, String) {
    let body = json!({
        "type": "event_callback", "team_id": "T1", "event_id": "Ev9",
        "event": {"type": "message", "channel": "C1", "user": "UALICE", "text": "こんにちは <@UKUUKI>", "ts": "1767603600.000009"},
    })
    .to_string();
    let timestamp = (ingress.deps.clock.now().as_micros() / 1_000_000).to_string();
    let signature = SigningSecret::new(SECRET).sign(&timestamp, body.as_bytes());
    (body, timestamp, signature)
}

/// A Lambda Function URL event (the HTTP API v2 payload) with a base64 body.
fn function_url_event(body: &str, timestamp: &str, signature: &str, path: &str) -> String {
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "host": "abc.lambda-url.us-east-1.on.aws",
            "x-slack-request-timestamp": timestamp,
            "x-slack-signature": signature,
            "x-slack-retry-num": "1",
        },
        "requestContext": {
            "accountId": "anonymous", "apiId": "abc", "domainName": "abc.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abc", "requestId": "r1", "routeKey": "$default", "stage": "$default",
            "time": "05/Jan/2026:09:00:00 +0000", "timeEpoch": 1767603600000u64,
            "http": {"method": "POST", "path": path, "protocol": "HTTP/1.1", "sourceIp": "3.3.3.3", "userAgent": "Slackbot 1.0"},
        },
        "body": base64::engine::general_purpose::STANDARD.encode(body),
        "isBase64Encoded": true,
    })
    .to_string()
}

async fn call(ingress: Arc<Ingress>, event: &str) -> (u16, String) {
    let request = lambda_http::request::from_str(event).expect("lambda_http reads the event");
    let request = request.map(|body| axum::body::Body::from(body.to_vec()));
    let response = app(ingress).oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn a_function_url_event_with_a_base64_body_is_verified_and_stored() {
    let (ingress, store) = world();
    let (body, timestamp, signature) = signed_body(&ingress);
    let event = function_url_event(&body, &timestamp, &signature, "/slack/events");
    let (status, _) = call(ingress.clone(), &event).await;
    assert_eq!(status, 200);
    let stored = store.get_message(&ChannelId("C1".into()), &Ts::new("1767603600.000009")).await.unwrap();
    assert_eq!(stored.unwrap().text, "こんにちは <@UKUUKI>", "the base64 body was decoded before verifying");
}

#[tokio::test]
async fn a_lambda_event_with_a_bad_signature_is_refused() {
    let (ingress, store) = world();
    let (body, timestamp, _) = signed_body(&ingress);
    let forged = SigningSecret::new("forged").sign(&timestamp, body.as_bytes());
    let event = function_url_event(&body, &timestamp, &forged, "/slack/events");
    let (status, text) = call(ingress, &event).await;
    assert_eq!(status, 401);
    assert!(text.contains("does not match"));
    assert!(store.get_message(&ChannelId("C1".into()), &Ts::new("1767603600.000009")).await.unwrap().is_none());
}

#[tokio::test]
async fn an_api_gateway_http_event_with_a_plain_body_works_too() {
    let (ingress, _) = world();
    let body = json!({"type": "url_verification", "challenge": "abc123"}).to_string();
    let timestamp = (ingress.deps.clock.now().as_micros() / 1_000_000).to_string();
    let signature = SigningSecret::new(SECRET).sign(&timestamp, body.as_bytes());
    let mut event: serde_json::Value =
        serde_json::from_str(&function_url_event(&body, &timestamp, &signature, "/slack/events")).unwrap();
    event["body"] = json!(body);
    event["isBase64Encoded"] = json!(false);
    let (status, text) = call(ingress, &event.to_string()).await;
    assert_eq!(status, 200);
    assert!(text.contains("abc123"));
}

/// The stack's Function URL ends in "/", so the URL pasted into Slack may be
/// `https://….on.aws//slack/events`: Lambda passes the path as it came.
#[tokio::test]
async fn a_function_url_path_with_a_doubled_slash_is_served() {
    let (ingress, store) = world();
    let (body, timestamp, signature) = signed_body(&ingress);
    let event = function_url_event(&body, &timestamp, &signature, "//slack/events");
    let (status, _) = call(ingress.clone(), &event).await;
    assert_eq!(status, 200);
    assert!(store.get_message(&ChannelId("C1".into()), &Ts::new("1767603600.000009")).await.unwrap().is_some());
}

/// Slack's token endpoint, granting `code-T1` only.
struct GrantsT1;

#[async_trait::async_trait]
impl kuuki::ports::SlackOAuth for GrantsT1 {
    async fn exchange(&self, code: &str, _: &str) -> Result<kuuki::ports::SlackGrant, kuuki::ports::OAuthError> {
        if code != "code-T1" {
            return Err(kuuki::ports::OAuthError::Refused("invalid_code".into()));
        }
        Ok(kuuki::ports::SlackGrant {
            key: kuuki::ports::InstallationKey::team("T1"),
            app_id: "A1".into(),
            team_name: "Team T1".into(),
            enterprise_name: None,
            installer: UserId("UADMIN".into()),
            bot_token: "xoxb-t1".into(),
            bot_user_id: UserId("UBOT1".into()),
            bot_id: "BT1".into(),
            bot_scopes: vec![],
            refresh_token: None,
            expires_in_seconds: None,
        })
    }

    async fn refresh(
        &self,
        _: &kuuki::secrecy::SecretString,
    ) -> Result<kuuki::ports::RefreshedGrant, kuuki::ports::OAuthError> {
        Err(kuuki::ports::OAuthError::Refused("no rotation here".into()))
    }
}

/// A Function URL GET with the cookies a browser sends (the v2 payload's `cookies`).
fn function_url_get(path: &str, query: &str, cookies: &[&str]) -> String {
    json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
        "cookies": cookies,
        "headers": {"host": "abc.lambda-url.us-east-1.on.aws"},
        "requestContext": {
            "accountId": "anonymous", "apiId": "abc", "domainName": "abc.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abc", "requestId": "r2", "routeKey": "$default", "stage": "$default",
            "time": "05/Jan/2026:09:00:00 +0000", "timeEpoch": 1767603600000u64,
            "http": {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "3.3.3.3", "userAgent": "Firefox"},
        },
        "isBase64Encoded": false,
    })
    .to_string()
}

#[tokio::test]
async fn an_install_through_a_function_url_reads_the_cookie_lambda_hands_over() {
    let (one, store) = world();
    let sealer = Arc::new(kuuki::adapters::contract::test_sealer());
    let workspaces = Arc::new(kuuki::workspaces::Workspaces::new(store.clone(), sealer, one.deps.clock.clone()));
    let vars = [
        ("SLACK_CLIENT_ID", "1.2"),
        ("SLACK_STATE_SECRET", "a-state-secret-of-at-least-thirty-two-chars"),
        ("TOKEN_ENCRYPTION_KEY", &"ab".repeat(32)),
    ];
    let settings = Settings::from_vars(&vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap();
    let installer = kuuki::install::Installer::new(&settings, workspaces.clone(), Arc::new(GrantsT1));
    let access = kuuki::ingest::slack::SlackAccess::Many(workspaces.clone());
    let slack = SlackIngress { secret: SigningSecret::new(SECRET), access, install: Some(Arc::new(installer)) };
    let ingress = Arc::new(Ingress { deps: one.deps.clone(), slack: Some(slack), discord: None, metrics_for: None });

    let request = lambda_http::request::from_str(&function_url_get("/slack/install", "", &[])).unwrap();
    let response = app(ingress.clone()).oneshot(request.map(|b| axum::body::Body::from(b.to_vec()))).await.unwrap();
    assert_eq!(response.status(), 302);
    let location = response.headers()["location"].to_str().unwrap();
    assert!(
        location.contains("redirect_uri=https%3A%2F%2Fabc.lambda-url.us-east-1.on.aws%2Fslack%2Foauth_redirect"),
        "https, from the Function URL's host: {location}"
    );
    let cookie = response.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_owned();
    let state = pair.strip_prefix("kuuki-oauth-state=").unwrap();

    let query = format!("code=code-T1&state={state}");
    let (status, page) = call(ingress.clone(), &function_url_get("/slack/oauth_redirect", &query, &[&pair])).await;
    assert_eq!(status, 200, "{page}");
    assert!(workspaces.installed("T1").await.unwrap().is_some(), "stored");
    let (status, _) = call(ingress, &function_url_get("/slack/oauth_redirect", &query, &[])).await;
    assert_eq!(status, 400, "no cookie: refused");
}
