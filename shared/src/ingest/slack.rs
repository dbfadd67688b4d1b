//! A verified Slack Events API request: answer the URL check, or normalize the event
//! and ingest it. Verification happens before this, on the raw bytes.

use thiserror::Error;

use super::{ingest, ingest_retry};
use std::sync::Arc;

use crate::adapters::slack::{Envelope, Normalized, SlackIdentity, normalize_json, parse_envelope};
use crate::deps::Deps;
use crate::domain::{Timestamp, Workspace};
use crate::ports::PortError;
use crate::workspaces::Workspaces;

/// Which Slack workspaces a deployment serves.
pub enum SlackAccess {
    /// One, with `SLACK_BOT_TOKEN`: kuuki is this bot there.
    One(SlackIdentity),
    /// Many, each through its installation (`SLACK_CLIENT_ID`).
    Many(Arc<Workspaces>),
}

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
/// With many workspaces, an event of a workspace without an installation is
/// acknowledged (Slack would retry a refusal, and turn the endpoint off) with one log
/// line, and nothing is stored.
pub async fn handle_event(
    deps: &Deps,
    access: &SlackAccess,
    body: &[u8],
    retry: bool,
) -> Result<SlackReply, SlackIngressError> {
    let (event, team, event_time, enterprise, authorization) = match parse_envelope(body)? {
        Envelope::UrlVerification { challenge } => return Ok(SlackReply::Challenge(challenge)),
        Envelope::EventCallback { event, team_id, event_time, enterprise_id, authorizations, .. } => {
            (event, team_id, event_time, enterprise_id, authorizations.into_iter().next())
        }
        Envelope::AppRateLimited {} => return Ok(SlackReply::Ack("app_rate_limited".into())),
        Envelope::Other => return Ok(SlackReply::Ack("an envelope type kuuki does not use".into())),
    };
    let (me, workspace) = match access {
        SlackAccess::One(me) => (me.clone(), None),
        SlackAccess::Many(workspaces) => {
            let (enterprise, team, org_wide) = match &authorization {
                Some(a) => (a.enterprise_id.as_deref(), a.team_id.as_deref(), a.is_enterprise_install),
                None => (enterprise.as_deref(), team.as_deref(), false),
            };
            let Some(installed) = workspaces.of_event(enterprise, team, org_wide).await? else {
                tracing::warn!(team, enterprise, "an event of a Slack workspace kuuki is not installed in: not stored");
                return Ok(SlackReply::Ack("refused: the workspace is not installed".into()));
            };
            deps.know_workspace_bot(&installed.id, &installed.bot_user);
            let me = SlackIdentity { user_id: installed.bot_user.to_string(), bot_id: Some(installed.bot_id.clone()) };
            (me, Some(installed.id.clone()))
        }
    };
    let incoming = match normalize_json(&event, &me)? {
        Normalized::Incoming(incoming) => match &workspace {
            Some(workspace) => incoming.in_workspace(workspace),
            None => incoming,
        },
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
            let gone_from = workspace.as_deref().map_or(Workspace::Shared, Workspace::Slack);
            let done = crate::memory::purge::slack_access_gone(deps, gone_from, team.as_deref(), &what, at).await?;
            return Ok(SlackReply::Ack(done.describe().into()));
        }
    };
    let outcome = if retry { ingest_retry(deps, incoming).await? } else { ingest(deps, incoming).await? };
    Ok(SlackReply::Ack(outcome.describe()))
}
