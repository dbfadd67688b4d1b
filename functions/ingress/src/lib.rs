//! The ingress routes as one axum [`Router`], served by the Lambda and by
//! `kuuki serve`: `POST /slack/events`, `POST /slack/commands`, `GET /healthz`.
//! Each handler verifies the signature on the raw bytes, then calls `shared`.
//! [`serve_http`] serves it on a TCP listener with timeouts and a connection cap.

mod server;

pub use server::{ServerLimits, serve_http};

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kuuki::adapters::slack::{SignatureError, SigningSecret, SlackIdentity};
use kuuki::deps::Deps;
use kuuki::ingest::command::{parse_command, run_command};
use kuuki::ingest::slack::{SlackIngressError, SlackReply, handle_event};
use serde_json::json;

/// Largest request body accepted; larger ones get 413 before anything is read.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What the handlers share, built once per process (per Lambda cold start).
pub struct Ingress {
    pub deps: Arc<Deps>,
    pub secret: SigningSecret,
    pub slack: SlackIdentity,
    /// In Lambda, the function's name: rejections and duplicates become CloudWatch
    /// metrics (EMF lines on stdout).
    pub metrics_for: Option<String>,
}

impl Ingress {
    fn count(&self, metric: &str) {
        if let Some(function) = &self.metrics_for {
            let now_ms = self.deps.clock.now().as_micros() / 1000;
            let line = kuuki::adapters::aws::emf::line(now_ms, &[("Function", function)], &[(metric, 1.0, "Count")]);
            println!("{line}");
        }
    }
}

pub fn app(ingress: Arc<Ingress>) -> Router {
    Router::new()
        .route("/slack/events", post(slack_events))
        .route("/slack/commands", post(slack_commands))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(ingress)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether Slack signed these exact bytes recently.
fn verify(ingress: &Ingress, headers: &HeaderMap, body: &[u8]) -> Result<(), SignatureError> {
    ingress.secret.verify(
        header(headers, "x-slack-request-timestamp"),
        header(headers, "x-slack-signature"),
        body,
        ingress.deps.clock.now(),
    )
}

/// 401 with the reason, which is logged too; it never holds the expected signature.
fn refuse(ingress: &Ingress, error: SignatureError) -> Response {
    ingress.count("SignatureRejections");
    tracing::warn!(%error, "refused an unsigned or badly signed request");
    (StatusCode::UNAUTHORIZED, error.to_string()).into_response()
}

async fn slack_events(State(ingress): State<Arc<Ingress>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(error) = verify(&ingress, &headers, &body) {
        return refuse(&ingress, error);
    }
    let retry = headers.contains_key("x-slack-retry-num");
    match handle_event(&ingress.deps, &ingress.slack, &body, retry).await {
        Ok(SlackReply::Challenge(challenge)) => axum::Json(json!({ "challenge": challenge })).into_response(),
        Ok(SlackReply::Ack(what)) => {
            if what == "duplicate" {
                ingress.count("Duplicates");
            }
            tracing::debug!(%what, retry, "Slack event acknowledged");
            StatusCode::OK.into_response()
        }
        Err(SlackIngressError::Malformed(error)) => {
            tracing::warn!(%error, "refused a malformed Slack event");
            (StatusCode::BAD_REQUEST, error.to_string()).into_response()
        }
        Err(SlackIngressError::Backend(error)) => {
            tracing::error!(%error, "could not store or queue a Slack event; Slack will retry");
            (StatusCode::INTERNAL_SERVER_ERROR, "temporarily unavailable").into_response()
        }
    }
}

async fn slack_commands(State(ingress): State<Arc<Ingress>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(error) = verify(&ingress, &headers, &body) {
        return refuse(&ingress, error);
    }
    let command = match parse_command(&body) {
        Ok(command) => command,
        Err(error) => {
            tracing::warn!(%error, "refused a malformed slash command");
            return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
        }
    };
    match run_command(&ingress.deps, &command).await {
        Ok(text) => axum::Json(json!({ "response_type": "ephemeral", "text": text })).into_response(),
        Err(error) => {
            tracing::error!(%error, "slash command failed");
            axum::Json(json!({
                "response_type": "ephemeral",
                "text": "kuuki could not do that just now; please try again in a moment.",
            }))
            .into_response()
        }
    }
}
