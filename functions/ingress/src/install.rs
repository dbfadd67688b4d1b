//! "Add to Slack" over HTTP (issue 45): `GET /slack/install` sends the browser to
//! Slack's authorize page with a state in a cookie bound to it; `GET
//! /slack/oauth_redirect` takes Slack's redirect back and stores the installation
//! ([`kuuki::install::Installer`]). The pages and the log lines name neither the code
//! nor a token; each answer ends the state's cookie but the first.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use kuuki::install::{Redirect, STATE_COOKIE, STATE_LASTS};

use crate::{Ingress, header as header_of, not_served};

/// Where Slack sends the browser back: `SLACK_REDIRECT_URI`, or this host's
/// `/slack/oauth_redirect` (http for a local host, else https, or as a proxy says).
fn redirect_uri(ingress: &Ingress, headers: &HeaderMap) -> Option<String> {
    let configured = &ingress.deps.settings.platforms.slack_redirect_uri;
    if !configured.is_empty() {
        return Some(configured.clone());
    }
    let host = header_of(headers, "host")?;
    if host.is_empty() || host.contains(['/', '\\', '@', ' ']) {
        return None;
    }
    let local = host.starts_with("127.0.0.1") || host.starts_with("localhost") || host.starts_with("[::1]");
    let scheme = match header_of(headers, "x-forwarded-proto") {
        Some(proto @ ("http" | "https")) => proto,
        _ if local => "http",
        _ => "https",
    };
    Some(format!("{scheme}://{host}/slack/oauth_redirect"))
}

fn cookie(value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!("{STATE_COOKIE}={value}; Path=/slack; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}");
    HeaderValue::from_str(&text).expect("a state is cookie-safe")
}

/// The state cookie the browser sent.
fn state_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == STATE_COOKIE)
        .map(|(_, value)| value)
}

fn escaped(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '&' => "&amp;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

fn page(status: StatusCode, title: &str, text: &str, secure: bool) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>kuuki: {}</title></head>\
         <body><h1>{}</h1><p>{}</p></body></html>",
        escaped(title),
        escaped(title),
        escaped(text)
    );
    let mut response = (status, Html(body)).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie("", 0, secure));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

pub(crate) async fn slack_install(State(ingress): State<Arc<Ingress>>, headers: HeaderMap) -> Response {
    let Some(installer) = ingress.slack.as_ref().and_then(|slack| slack.install.as_ref()) else {
        return not_served("Installing into Slack workspaces");
    };
    let Some(redirect_uri) = redirect_uri(&ingress, &headers) else {
        return (StatusCode::BAD_REQUEST, "no Host to send Slack back to: set SLACK_REDIRECT_URI").into_response();
    };
    let started = installer.start(&ingress.deps, &redirect_uri);
    let secure = redirect_uri.starts_with("https://");
    let mut response = StatusCode::FOUND.into_response();
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_str(&started.location).expect("a URL is a header value"));
    headers.insert(header::SET_COOKIE, cookie(&started.state, STATE_LASTS.as_secs(), secure));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

pub(crate) async fn slack_oauth_redirect(
    State(ingress): State<Arc<Ingress>>,
    headers: HeaderMap,
    Query(redirect): Query<Redirect>,
) -> Response {
    let Some(installer) = ingress.slack.as_ref().and_then(|slack| slack.install.as_ref()) else {
        return not_served("Installing into Slack workspaces");
    };
    let Some(redirect_uri) = redirect_uri(&ingress, &headers) else {
        return (StatusCode::BAD_REQUEST, "no Host to send Slack back to: set SLACK_REDIRECT_URI").into_response();
    };
    let secure = redirect_uri.starts_with("https://");
    match installer.finish(&ingress.deps, &redirect, state_cookie(&headers), &redirect_uri).await {
        Ok(installation) => {
            let text = format!(
                "kuuki is installed in {}. Invite @kuuki to a channel to start; this page can be closed.",
                if installation.team_name.is_empty() { "the workspace" } else { &installation.team_name }
            );
            page(StatusCode::OK, "installed", &text, secure)
        }
        Err(refusal) => {
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
            tracing::warn!(?refusal, status = status.as_u16(), "an install into Slack was refused; nothing stored");
            page(status, "not installed", &refusal.to_string(), secure)
        }
    }
}
