//! The ingress routes as one axum [`Router`], served by the Lambda and by
//! `kuuki serve`: `POST /slack/events`, `POST /slack/commands`,
//! `POST /discord/interactions`, `POST /discord/events` (the Gateway relay),
//! `GET /healthz`. Each handler verifies the signature on the raw bytes, then calls
//! `shared`; a platform without credentials is not served (404). Serving many Slack
//! workspaces, `GET /slack/install` and `GET /slack/oauth_redirect` add kuuki to one
//! ("Add to Slack", `install.rs`).
//! [`serve_http`] serves it on a TCP listener with timeouts and a connection cap.

mod install;
mod server;

pub use server::{ServerLimits, serve_http};

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kuuki::adapters::discord::{DiscordIdentity, DiscordPublicKey};
use kuuki::adapters::platforms::Connected;
use kuuki::adapters::slack::{Scheme, SignatureError, SigningSecret, SlackIdentity};
use kuuki::deps::Deps;
use kuuki::ingest::command::{parse_command, run_command};
use kuuki::ingest::discord::{DiscordIngressError, handle_interaction, handle_relay_event};
use kuuki::ingest::slack::{SlackAccess, SlackIngressError, SlackReply, handle_event};
use kuuki::install::Installer;
use kuuki::secrecy::ExposeSecret;
use serde_json::json;

/// Largest request body accepted; larger ones get 413 before anything is read.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The ephemeral answer to a slash command that failed on a backend (over HTTP and
/// over Socket Mode alike).
pub const COMMAND_FAILED: &str = "kuuki could not do that just now; please try again in a moment.";

/// The relay's signature: Slack's scheme under kuuki's own header names.
pub const RELAY: Scheme = Scheme {
    timestamp_header: "X-Kuuki-Relay-Timestamp",
    signature_header: "X-Kuuki-Relay-Signature",
    secret_setting: "DISCORD_RELAY_SECRET",
};

/// Slack, when it is served: the signing secret and which workspaces.
pub struct SlackIngress {
    pub secret: SigningSecret,
    pub access: SlackAccess,
    /// Serving many workspaces: "Add to Slack".
    pub install: Option<Arc<Installer>>,
}

impl SlackIngress {
    /// The one workspace `SLACK_BOT_TOKEN` is of, where kuuki is `identity`.
    pub fn one(secret: SigningSecret, identity: SlackIdentity) -> Self {
        SlackIngress { secret, access: SlackAccess::One(identity), install: None }
    }
}

/// Discord, when it is served: the application's public key (interactions), the
/// relay's secret (Gateway events) and who kuuki is there. Without a public key (the
/// Gateway runs in process: interactions come over it) `/discord/interactions` is 404;
/// without a relay secret there, `/discord/events` too (nothing relays to it).
pub struct DiscordIngress {
    pub public_key: Option<DiscordPublicKey>,
    pub relay_secret: Option<SigningSecret>,
    pub identity: DiscordIdentity,
}

/// What the handlers share, built once per process (per Lambda cold start).
pub struct Ingress {
    pub deps: Arc<Deps>,
    pub slack: Option<SlackIngress>,
    pub discord: Option<DiscordIngress>,
    /// In Lambda, the function's name: rejections and duplicates become CloudWatch
    /// metrics (EMF lines on stdout).
    pub metrics_for: Option<String>,
}

/// A served platform whose requests could not be verified; the text names the setting.
#[derive(Debug, thiserror::Error)]
pub enum IngressSetupError {
    #[error(
        "SLACK_SIGNING_SECRET is not set: every Slack request is verified with it \
         (or set SLACK_APP_TOKEN to take Slack's events over Socket Mode)"
    )]
    NoSlackSigningSecret,
    #[error(transparent)]
    DiscordPublicKey(#[from] kuuki::adapters::discord::PublicKeyError),
    #[error("{0} is not set: the ingress needs it to add kuuki to Slack workspaces (SLACK_CLIENT_ID is set)")]
    NoInstallSecret(&'static str),
}

impl Ingress {
    /// The routes for the platforms `connected` signed in to, with their secrets from
    /// the settings. A served platform without its verifying secret is an error that
    /// names the setting (every request would be refused), except Slack over Socket Mode
    /// (`SLACK_APP_TOKEN`): its events come over the websocket, and the HTTP routes are
    /// served only when the signing secret is set too (404 otherwise).
    /// Serving many Slack workspaces, `install` is the install flow and `deps` holds
    /// their installations.
    pub fn new(
        deps: Arc<Deps>,
        connected: &Connected,
        metrics_for: Option<String>,
        install: Option<Arc<Installer>>,
    ) -> Result<Ingress, IngressSetupError> {
        let settings = &deps.settings;
        let socket_mode = !settings.platforms.slack_app_token.expose_secret().is_empty();
        let slack = match (&connected.slack, &deps.workspaces, install) {
            (_, Some(workspaces), Some(install)) => {
                if let Some(missing) = settings.platforms.install_secret_missing() {
                    return Err(IngressSetupError::NoInstallSecret(missing));
                }
                let secret = SigningSecret::new(settings.platforms.slack_signing_secret.expose_secret());
                Some(SlackIngress { secret, access: SlackAccess::Many(workspaces.clone()), install: Some(install) })
            }
            (Some(identity), _, _) => {
                let secret = settings.platforms.slack_signing_secret.expose_secret();
                if secret.is_empty() && !socket_mode {
                    return Err(IngressSetupError::NoSlackSigningSecret);
                }
                (!secret.is_empty()).then(|| SlackIngress::one(SigningSecret::new(secret), identity.clone()))
            }
            _ => None,
        };
        let discord = match &connected.discord {
            Some(identity) => {
                // With the Gateway in this process (`DISCORD_GATEWAY`, `kuuki serve`),
                // interactions and messages come over it: the HTTP routes are optional.
                let gateway = settings.platforms.discord_gateway;
                let public_key = if gateway && settings.platforms.discord_public_key.trim().is_empty() {
                    None
                } else {
                    Some(DiscordPublicKey::from_hex(&settings.platforms.discord_public_key)?)
                };
                let relay_secret = settings.platforms.discord_relay_secret.expose_secret();
                if relay_secret.is_empty() && !gateway {
                    tracing::warn!("DISCORD_RELAY_SECRET is not set: relayed Discord messages are refused");
                }
                // With the Gateway in process and no relay secret nothing relays here.
                let relay_secret = (!(relay_secret.is_empty() && gateway)).then(|| SigningSecret::new(relay_secret));
                Some(DiscordIngress { public_key, relay_secret, identity: identity.clone() })
            }
            None => None,
        };
        Ok(Ingress { deps, slack, discord, metrics_for })
    }

    /// The routes this process answers, for the start-up line.
    pub fn routes(&self) -> Vec<&'static str> {
        let mut routes = Vec::new();
        if let Some(slack) = &self.slack {
            routes.extend(["POST /slack/events", "POST /slack/commands"]);
            if slack.install.is_some() {
                routes.extend(["GET /slack/install", "GET /slack/oauth_redirect"]);
            }
        }
        if let Some(discord) = &self.discord {
            if discord.public_key.is_some() {
                routes.push("POST /discord/interactions");
            }
            if discord.relay_secret.is_some() {
                routes.push("POST /discord/events");
            }
        }
        routes.push("GET /healthz");
        routes
    }

    fn count(&self, metric: &str) {
        if let Some(function) = &self.metrics_for {
            let now_ms = self.deps.clock.now().as_micros() / 1000;
            println!("{}", count_line(now_ms, function, metric));
        }
    }
}

/// The EMF line counting one `metric` (`SignatureRejections`, `Duplicates`) of the
/// ingress `function` (the alarms and the dashboard read these).
pub fn count_line(now_ms: i64, function: &str, metric: &str) -> serde_json::Value {
    kuuki::adapters::aws::emf::line(now_ms, &[("Function", function)], &[(metric, 1.0, "Count")])
}

pub fn app(ingress: Arc<Ingress>) -> Router {
    app_with(ingress, Router::new().route("/healthz", get(|| async { "ok" })))
}

/// The platforms' routes beside `own`, which serves `/healthz` (and in `kuuki serve`
/// `/metrics`): what says whether this process is well depends on where it runs.
pub fn app_with(ingress: Arc<Ingress>, own: Router) -> Router {
    let routes = Router::new()
        .route("/slack/events", post(slack_events))
        .route("/slack/commands", post(slack_commands))
        .route("/slack/install", get(install::slack_install))
        .route("/slack/oauth_redirect", get(install::slack_oauth_redirect))
        .route("/discord/interactions", post(discord_interactions))
        .route("/discord/events", post(discord_events))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(ingress)
        .merge(own);
    // A Lambda Function URL ends in "/", so "the URL + /slack/events" pasted into Slack
    // is `//slack/events`: leading slashes are made one before the routes are matched.
    Router::new().fallback_service(tower::ServiceExt::map_request(routes, one_leading_slash))
}

/// `request` with its path's leading slashes made one (`//slack/events` is
/// `/slack/events`); the query is kept.
fn one_leading_slash<B>(mut request: axum::http::Request<B>) -> axum::http::Request<B> {
    let path = request.uri().path();
    if path.starts_with("//") {
        let trimmed = format!("/{}", path.trim_start_matches('/'));
        let path_and_query = match request.uri().query() {
            Some(query) => format!("{trimmed}?{query}"),
            None => trimmed,
        };
        let mut parts = request.uri().clone().into_parts();
        if let Ok(path_and_query) = path_and_query.parse() {
            parts.path_and_query = Some(path_and_query);
            if let Ok(uri) = axum::http::Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
        }
    }
    request
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether Slack signed these exact bytes recently.
fn verify(ingress: &Ingress, slack: &SlackIngress, headers: &HeaderMap, body: &[u8]) -> Result<(), SignatureError> {
    slack.secret.verify(
        header(headers, "x-slack-request-timestamp"),
        header(headers, "x-slack-signature"),
        body,
        ingress.deps.clock.now(),
    )
}

/// 401 with the reason, which is logged too; it never holds the expected signature.
fn refuse(ingress: &Ingress, error: impl std::fmt::Display) -> Response {
    ingress.count("SignatureRejections");
    tracing::warn!(%error, "refused an unsigned or badly signed request");
    (StatusCode::UNAUTHORIZED, error.to_string()).into_response()
}

/// 404 for a platform this deployment does not serve (its credentials are not set).
fn not_served(platform: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("{platform} is not served here: its credentials are not set")).into_response()
}

async fn slack_events(State(ingress): State<Arc<Ingress>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(slack) = &ingress.slack else { return not_served("Slack") };
    if let Err(error) = verify(&ingress, slack, &headers, &body) {
        return refuse(&ingress, error);
    }
    let retry = headers.contains_key("x-slack-retry-num");
    match handle_event(&ingress.deps, &slack.access, &body, retry).await {
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
    let Some(slack) = &ingress.slack else { return not_served("Slack") };
    if let Err(error) = verify(&ingress, slack, &headers, &body) {
        return refuse(&ingress, error);
    }
    let mut command = match parse_command(&body) {
        Ok(command) => command,
        Err(error) => {
            tracing::warn!(%error, "refused a malformed slash command");
            return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
        }
    };
    if let SlackAccess::Many(workspaces) = &slack.access {
        let found = workspaces
            .of_event(command.enterprise_id.as_deref(), command.team_id.as_deref(), command.is_enterprise_install)
            .await;
        match found {
            Ok(Some(installed)) => {
                ingress.deps.know_workspace_bot(&installed.id, &installed.bot_user);
                command.channel_id =
                    kuuki::domain::ChannelId::slack_in(&installed.id, &command.channel_id).0.to_string();
            }
            Ok(None) => {
                tracing::warn!(
                    team = command.team_id.as_deref(),
                    "a command from a Slack workspace kuuki is not installed in"
                );
                let text = "kuuki is not installed in this workspace (add it again from its install link).";
                return axum::Json(json!({ "response_type": "ephemeral", "text": text })).into_response();
            }
            Err(error) => {
                tracing::error!(%error, "could not read the workspace's installation for a slash command");
                return axum::Json(json!({ "response_type": "ephemeral", "text": COMMAND_FAILED })).into_response();
            }
        }
    }
    match run_command(&ingress.deps, &command).await {
        Ok(text) => axum::Json(json!({ "response_type": "ephemeral", "text": text })).into_response(),
        Err(error) => {
            tracing::error!(%error, "slash command failed");
            axum::Json(json!({ "response_type": "ephemeral", "text": COMMAND_FAILED })).into_response()
        }
    }
}

/// Discord interactions: Ed25519 over timestamp + body, checked before anything is
/// read (Discord probes the endpoint with bad signatures and wants 401).
async fn discord_interactions(State(ingress): State<Arc<Ingress>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(discord) = &ingress.discord else { return not_served("Discord") };
    let Some(public_key) = &discord.public_key else {
        let why =
            "Discord interactions are not served here: DISCORD_PUBLIC_KEY is not set (they come over the Gateway)";
        return (StatusCode::NOT_FOUND, why).into_response();
    };
    let verified =
        public_key.verify(header(&headers, "x-signature-ed25519"), header(&headers, "x-signature-timestamp"), &body);
    if let Err(error) = verified {
        return refuse(&ingress, error);
    }
    match handle_interaction(&ingress.deps, &body).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(error) => discord_error(error),
    }
}

/// Gateway dispatches from kuuki's relay, signed like Slack's requests.
async fn discord_events(State(ingress): State<Arc<Ingress>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(discord) = &ingress.discord else { return not_served("Discord") };
    let Some(relay_secret) = &discord.relay_secret else {
        let why = "relayed Discord events are not served here: DISCORD_RELAY_SECRET is not set (the Gateway runs in this process)";
        return (StatusCode::NOT_FOUND, why).into_response();
    };
    let verified = relay_secret.verify_scheme(
        &RELAY,
        header(&headers, RELAY.timestamp_header),
        header(&headers, RELAY.signature_header),
        &body,
        ingress.deps.clock.now(),
    );
    if let Err(error) = verified {
        return refuse(&ingress, error);
    }
    let retry = headers.contains_key("x-kuuki-relay-retry");
    match handle_relay_event(&ingress.deps, &discord.identity, &body, retry).await {
        Ok(what) => {
            if what == "duplicate" {
                ingress.count("Duplicates");
            }
            tracing::debug!(%what, retry, "Discord event acknowledged");
            StatusCode::OK.into_response()
        }
        Err(error) => discord_error(error),
    }
}

fn discord_error(error: DiscordIngressError) -> Response {
    match error {
        DiscordIngressError::Backend(error) => {
            tracing::error!(%error, "could not store or queue a Discord request; it will be retried");
            (StatusCode::INTERNAL_SERVER_ERROR, "temporarily unavailable").into_response()
        }
        malformed => {
            tracing::warn!(error = %malformed, "refused a malformed Discord request");
            (StatusCode::BAD_REQUEST, malformed.to_string()).into_response()
        }
    }
}
