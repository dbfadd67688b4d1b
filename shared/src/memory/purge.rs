//! A Slack workspace that removed kuuki (`app_uninstalled`, or `tokens_revoked` naming
//! its bot): kuuki stops there at once, and once `UNINSTALL_PURGE_GRACE_HOURS` have
//! passed without the app coming back, forgets everything it stored of the workspace
//! (`PURGE_ON_UNINSTALL`).
//!
//! The mark that access is gone is kept beside the channel states
//! ([`ChannelStateStore::mark_slack_gone`]), so every job that reads a Slack channel's
//! state anyway (a judgment, an answer, an opener, a REMEMBER) learns it without a call
//! of its own and stops there with a `dropped` line. A message posted since the mark
//! that Slack delivered shows the app was installed again: the job about it clears the
//! mark (conditionally, once) and goes on, and the purge then finds no mark and does
//! nothing. A deployment serving one Slack workspace purges every Slack channel in the
//! store (the shared workspace's); one serving many purges that workspace's channels
//! (`T…/C…`), profiles and memory, then its installation, and no other workspace's.
//! Discord's channels and people are left alone.
//!
//! [`ChannelStateStore::mark_slack_gone`]: crate::ports::ChannelStateStore::mark_slack_gone

use std::time::Duration;

use crate::deps::Deps;
use crate::domain::{ChannelId, EventKind, Job, Message, Platform, Timestamp, Ts, Workspace, WorkspaceMemory};
use crate::ports::{ChannelState, ClaimOutcome, PortResult};
use crate::record::record;

/// A message counts as showing the app is back only when posted this long after the
/// mark: Slack's event time is in whole seconds, and a message posted just before the
/// uninstall may be delivered (or retried) just after it. Installing an app again takes
/// a person longer than this.
pub const REINSTALL_MARGIN: Duration = Duration::from_secs(60);

/// How long a finished purge is remembered (and what it removed, between attempts):
/// as long as the forget queue's dead letters, so a redriven purge job finds it done.
const PURGE_KEEP: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// What a Slack event saying access is gone did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessGone {
    /// This delivery marked it (logged, and the purge queued).
    Marked,
    /// Marked already: a retry, or the other of the two events of one uninstall.
    AlreadyMarked,
}

impl AccessGone {
    pub fn describe(&self) -> &'static str {
        match self {
            AccessGone::Marked => "Slack access gone: marked",
            AccessGone::AlreadyMarked => "Slack access gone: marked already",
        }
    }
}

/// Slack said kuuki's access to workspace `team` went at `at` (the event's time):
/// marks it, queues the purge for the end of the grace period (`PURGE_ON_UNINSTALL`)
/// and logs it, once. A retry of the event, or the other of the two events an
/// uninstall sends (their order is not guaranteed), finds the mark and does nothing.
/// The purge is queued before the mark is set (a conditional write), so a delivery
/// that dies in between leaves no mark, and its retry queues it again (the purge is
/// safe to run twice). With many workspaces, the workspace's installation goes at
/// once too (its token is dead): its events and jobs are refused from then on, and a
/// reinstall stores a new one.
pub async fn slack_access_gone(
    deps: &Deps,
    workspace: Workspace<'_>,
    team: Option<&str>,
    event: &str,
    at: Timestamp,
) -> PortResult<AccessGone> {
    if let (Workspace::Slack(id), Some(workspaces)) = (workspace, &deps.workspaces)
        && workspaces.installed_at(id).await?.is_some_and(|installed| installed > at)
    {
        // A late retry of an uninstall the workspace has since undone by installing
        // kuuki again: nothing to stop or purge.
        tracing::info!(workspace = id, event, "an access-gone event from before the workspace's reinstall: ignored");
        return Ok(AccessGone::AlreadyMarked);
    }
    let outcome = mark_access_gone(deps, workspace, team, event, at).await?;
    if let (Workspace::Slack(id), Some(workspaces)) = (workspace, &deps.workspaces)
        && workspaces.uninstall(id, at).await?
    {
        tracing::info!(workspace = id, "the workspace's installation removed: it uninstalled kuuki");
    }
    Ok(outcome)
}

async fn mark_access_gone(
    deps: &Deps,
    workspace: Workspace<'_>,
    team: Option<&str>,
    event: &str,
    at: Timestamp,
) -> PortResult<AccessGone> {
    if deps.channels.slack_gone(workspace).await?.is_some() {
        return Ok(AccessGone::AlreadyMarked);
    }
    let purge_at = deps.settings.memory.purge_on_uninstall.then(|| at + deps.settings.memory.uninstall_purge_grace);
    if let Some(purge_at) = purge_at {
        let job = Job::PurgeSlack {
            team: team.unwrap_or_default().to_owned(),
            gone_at: Ts::from_timestamp(at),
            workspace: workspace.id().map(str::to_owned),
        };
        let now = deps.clock.now();
        let delay = Duration::from_micros(purge_at.as_micros().saturating_sub(now.as_micros()).max(0) as u64);
        deps.enqueue_after(job, delay).await?;
    }
    if !deps.channels.mark_slack_gone(workspace, at).await? {
        return Ok(AccessGone::AlreadyMarked);
    }
    tracing::warn!(team, event, gone_at = %at.to_utc_string(), purge_at = ?purge_at.map(Timestamp::to_utc_string),
        "Slack took kuuki's access to the workspace away: no more answers there");
    record(
        deps,
        &ChannelId(team.unwrap_or("slack").into()),
        None,
        Ts::from_timestamp(at),
        EventKind::SlackAccess { gone: true, team: team.map(str::to_owned), reason: event.to_owned(), purge_at },
    );
    Ok(AccessGone::Marked)
}

/// Whether a job about `message` (its channel's state read as `state`) must stop
/// because Slack's access to the workspace is gone: the reason to drop it with. A
/// message posted after the mark (by [`REINSTALL_MARGIN`]) shows the app is installed
/// again: the mark is cleared if it still stands (one delivery clears and logs it) and
/// the job goes on.
pub async fn stopped_by_uninstall(
    deps: &Deps,
    state: &ChannelState,
    message: &Message,
) -> PortResult<Option<&'static str>> {
    let Some(gone) = state.slack_gone else { return Ok(None) };
    if message.at < gone + REINSTALL_MARGIN {
        return Ok(Some("Slack access is gone (kuuki was uninstalled or its token revoked)"));
    }
    if deps.channels.clear_slack_gone(message.channel.workspace(), gone).await? {
        tracing::info!(channel = %message.channel, ts = %message.ts, gone_at = %gone.to_utc_string(),
            "a message posted since Slack's access went was delivered: installed again, access mark cleared");
        record(
            deps,
            &message.channel,
            message.thread_root.clone(),
            message.ts.clone(),
            EventKind::SlackAccess {
                gone: false,
                team: None,
                reason: "a message posted since was delivered".into(),
                purge_at: None,
            },
        );
    }
    Ok(None)
}

/// What a purge removed, kept between attempts so its line counts them all.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Purged {
    pub channels: usize,
    pub messages: usize,
    pub facts: usize,
    pub notes: usize,
    pub profiles: usize,
}

/// A queued [`Job::PurgeSlack`]: once the grace period of the mark that still stands
/// has passed, everything stored of the Slack workspace goes, channel by channel (its
/// people's notes, its facts, its messages, then its state and line, which list it),
/// then the Slack people's profiles and the workspace memory (which blends every
/// platform: the Discord channels' part comes back from their memories at their next
/// summary). Safe to repeat and to die anywhere: every step removes what is still
/// there, and the lists are read again. A mark cleared since (installed again) or a
/// newer one (uninstalled again; its own purge comes later) leaves everything.
pub async fn purge_slack(deps: &Deps, team: &str, gone_at: &Ts, workspace_id: Option<&str>) -> PortResult<()> {
    let workspace = workspace_id.map_or(Workspace::Shared, Workspace::Slack);
    let Some(gone) = deps.channels.slack_gone(workspace).await? else {
        tracing::info!(team, %gone_at, "Slack access came back within the grace period: nothing purged");
        return Ok(());
    };
    if !deps.settings.memory.purge_on_uninstall {
        tracing::info!(team, %gone_at, "PURGE_ON_UNINSTALL is off: nothing purged");
        return Ok(());
    }
    let now = deps.clock.now();
    if now < gone + deps.settings.memory.uninstall_purge_grace {
        tracing::info!(team, %gone_at, "Slack access went again later: that mark's purge comes at its own time");
        return Ok(());
    }
    let key = match workspace_id {
        None => format!("purge-slack:{}", gone.as_micros()),
        Some(id) => format!("purge-slack:{id}:{}", gone.as_micros()),
    };
    match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Completed => return Ok(()),
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
    }
    match purge(deps, workspace, &key, gone).await {
        Ok(done) => {
            tracing::info!(
                team,
                channels = done.channels,
                messages = done.messages,
                facts = done.facts,
                notes = done.notes,
                profiles = done.profiles,
                "a Slack workspace's data purged after its uninstall"
            );
            record(
                deps,
                &ChannelId(if team.is_empty() { "slack".into() } else { team.into() }),
                None,
                gone_at.clone(),
                EventKind::Purge {
                    team: team.to_owned(),
                    channels: done.channels,
                    messages: done.messages,
                    facts: done.facts,
                    notes: done.notes,
                    profiles: done.profiles,
                },
            );
            deps.ledger.complete(&key, deps.clock.now(), PURGE_KEEP).await
        }
        Err(error) => {
            if let Err(release) = deps.ledger.release(&key).await {
                tracing::warn!(error = %release, %key, "could not release a failed purge");
            }
            Err(error)
        }
    }
}

/// Every Slack channel of `workspace` with something stored: messages, a state, facts.
async fn slack_channels(deps: &Deps, workspace: Workspace<'_>) -> PortResult<Vec<ChannelId>> {
    let mut channels = deps.messages.message_channels().await?;
    channels.extend(deps.channels.state_channels().await?);
    channels.extend(deps.facts.fact_channels().await?);
    channels.retain(|c| !c.is_discord() && c.workspace() == workspace);
    channels.sort();
    channels.dedup();
    Ok(channels)
}

/// The purge itself, under its claim `key`; what every attempt removed.
async fn purge(deps: &Deps, workspace: Workspace<'_>, key: &str, gone: Timestamp) -> PortResult<Purged> {
    let progress = format!("{key}:removed");
    let earlier = deps.ledger.cache_get(&progress, deps.clock.now()).await?;
    let mut done: Purged = earlier.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or_default();
    let save = async |done: &Purged| {
        let json = serde_json::to_string(done).expect("counts encode");
        deps.ledger.cache_put(&progress, &json, deps.clock.now() + PURGE_KEEP).await
    };
    for channel in slack_channels(deps, workspace).await? {
        for user in deps.facts.noted_users(&channel).await? {
            deps.facts.delete_user_note(&channel, &user).await?;
            done.notes += 1;
        }
        for fact in deps.facts.facts(&channel).await? {
            deps.facts.delete_fact(&channel, &fact.id).await?;
            done.facts += 1;
        }
        done.messages += deps.messages.delete_channel_messages(&channel).await?;
        save(&done).await?;
        // Last: its state (and the messages) list the channel for a run that died here.
        deps.channels.delete_channel_state(&channel).await?;
        done.channels += 1;
        save(&done).await?;
    }
    for user in deps.facts.profiled_users(workspace).await? {
        if user.platform() == Platform::Slack {
            deps.facts.delete_profile(workspace, &user).await?;
            done.profiles += 1;
        }
    }
    save(&done).await?;
    let memory = deps.channels.workspace_memory(workspace).await?;
    // A line left of a channel nothing else lists (its state went another way).
    for line in memory.channel_lines.iter().filter(|line| !line.channel.is_discord()) {
        deps.channels.set_channel_line(&line.channel, None).await?;
    }
    if (WorkspaceMemory { channel_lines: Vec::new(), ..memory }) != WorkspaceMemory::default() {
        deps.channels.set_workspace_memory(workspace, WorkspaceMemory::default()).await?;
    }
    // Last: with its installation gone, the workspace's events and jobs are refused.
    if let (Workspace::Slack(id), Some(workspaces)) = (workspace, &deps.workspaces)
        && workspaces.uninstall(id, gone).await?
    {
        tracing::info!(workspace = id, "the workspace's installation removed with its data");
    }
    Ok(done)
}
