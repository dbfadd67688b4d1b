//! A verified Slack Events API request: answer the URL check, or normalize the event
//! and ingest it. Verification happens before this, on the raw bytes.

use thiserror::Error;

use super::{ingest, ingest_retry};
use crate::adapters::slack::{Envelope, Normalized, SlackIdentity, normalize_json, parse_envelope};
use crate::deps::Deps;
use crate::domain::Timestamp;
use crate::ports::PortError;

#[derive(Debug, Clone, PartialEq)]
pub enum SlackReply {
    /// Answer `url_verification` with this challenge.
    Challenge(String),
    /// Acknowledge: the event was stored and queued, was a duplicate, is ignored, or is
    /// unusable (logged; refusing it would only make Slack retry it).
    Ack(String),
}

#[derive(Debug, Error)]
pub enum SlackIngressError {
    /// A signed request whose body is not an Events API envelope, or a message whose ts
    /// is not a Slack timestamp (400).
    #[error(transparent)]
    Malformed(#[from] crate::adapters::slack::events::EventError),
    /// A store or queue failed (500; Slack retries, and retries are idempotent).
    #[error(transparent)]
    Backend(#[from] PortError),
}

/// `retry` is whether Slack marked the request as a retry (`X-Slack-Retry-Num`).
pub async fn handle_event(
    deps: &Deps,
    me: &SlackIdentity,
    body: &[u8],
    retry: bool,
) -> Result<SlackReply, SlackIngressError> {
    let (event, team, event_time) = match parse_envelope(body)? {
        Envelope::UrlVerification { challenge } => return Ok(SlackReply::Challenge(challenge)),
        Envelope::EventCallback { event, team_id, event_time, .. } => (event, team_id, event_time),
        Envelope::AppRateLimited {} => return Ok(SlackReply::Ack("app_rate_limited".into())),
        Envelope::Other => return Ok(SlackReply::Ack("an envelope type kuuki does not use".into())),
    };
    let incoming = match normalize_json(&event, me)? {
        Normalized::Incoming(incoming) => incoming,
        Normalized::Ignored(reason) => {
            tracing::debug!(%reason, "Slack event ignored");
            return Ok(SlackReply::Ack(format!("ignored: {reason}")));
        }
        Normalized::Unusable(reason) => {
            // A reader's error may quote the event's text.
            let logged = crate::domain::without_quotes(&reason);
            tracing::warn!(reason = %logged, "acknowledged a Slack event kuuki cannot use; nothing stored");
            return Ok(SlackReply::Ack(format!("unusable: {reason}")));
        }
        Normalized::AccessGone(what) => {
            // The event's own time (a retry carries the same), else now.
            let at = event_time
                .and_then(|secs| secs.checked_mul(Timestamp::MICROS_PER_SECOND))
                .map_or_else(|| deps.clock.now(), Timestamp);
            let done = crate::memory::purge::slack_access_gone(deps, team.as_deref(), &what, at).await?;
            return Ok(SlackReply::Ack(done.describe().into()));
        }
    };
    let outcome = if retry { ingest_retry(deps, incoming).await? } else { ingest(deps, incoming).await? };
    Ok(SlackReply::Ack(outcome.describe()))
}
