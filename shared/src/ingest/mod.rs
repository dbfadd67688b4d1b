//! What happens when a platform delivers a message (docs/design.md §2.1, ingress): store it once,
//! then queue an answer for a direct trigger or a delayed judgment (or, where kuuki
//! does not take part unasked, a delayed REMEMBER) for the rest.
//! At most three backend calls for a new message: the conditional put, then the enqueue
//! and the person's counters (`USER_PROFILE_ENABLED`) at once.

use std::time::Duration;

use crate::deps::Deps;
use crate::domain::{Author, DirectTrigger, EventKind, Job, LoggedMessage, Message, RespondMode, ResponseType};
use crate::judge::rules::{direct_trigger, is_thanks};
use crate::ports::{PortResult, PutOutcome};
use crate::record::record;

pub use crate::domain::Incoming;

#[derive(Debug, Clone, PartialEq)]
pub enum IngestOutcome {
    /// Stored before: a retry or the second delivery of a mention. Nothing else done.
    Duplicate,
    Stored {
        trigger: Option<DirectTrigger>,
        queued: Option<Job>,
    },
    /// Whether there was a stored message to change.
    Edited(bool),
    Deleted(bool),
    /// A reaction, counted as a talkativeness signal when it was on kuuki's post.
    Reaction,
}

impl IngestOutcome {
    /// What was done, for the acknowledgement's log line.
    pub fn describe(&self) -> String {
        let found = |found: bool| if found { "found" } else { "unknown message" };
        match self {
            IngestOutcome::Duplicate => "duplicate".into(),
            IngestOutcome::Stored { .. } => "stored".into(),
            IngestOutcome::Edited(f) => format!("edited ({})", found(*f)),
            IngestOutcome::Deleted(f) => format!("deleted ({})", found(*f)),
            IngestOutcome::Reaction => "reaction".into(),
        }
    }
}

pub mod command;
pub mod discord;
pub mod slack;

/// Like [`ingest`], for a platform's retry of a delivery (Slack's `X-Slack-Retry-Num`):
/// a message stored before gets its work queued again, because the first delivery
/// may have stored it and failed before queueing. The workers' claims make the
/// second job harmless when the first one was queued after all.
pub async fn ingest_retry(deps: &Deps, incoming: Incoming) -> PortResult<IngestOutcome> {
    let message = match &incoming {
        Incoming::Message(m) => m.clone(),
        _ => return ingest(deps, incoming).await,
    };
    let outcome = ingest(deps, incoming).await?;
    if outcome == IngestOutcome::Duplicate
        && let Some(stored) = deps.messages.get_message(&message.channel, &message.ts).await?
    {
        let trigger = direct_trigger(&stored, &deps.bot_in(&stored.channel));
        let jobs = plan(deps, &stored, trigger).into_iter().chain(pick_up(deps, &stored, trigger)).collect();
        deps.enqueue_all_after(jobs).await?;
    }
    Ok(outcome)
}

pub async fn ingest(deps: &Deps, incoming: Incoming) -> PortResult<IngestOutcome> {
    match incoming {
        Incoming::Message(message) => ingest_message(deps, message).await,
        Incoming::Edited { channel, ts, text } => {
            let found = deps.messages.update_text(&channel, &ts, &text).await?;
            if found {
                let thread_root = deps.messages.get_message(&channel, &ts).await?.and_then(|m| m.thread_root.clone());
                record(deps, &channel, thread_root, ts, EventKind::Edited { text });
            }
            Ok(IngestOutcome::Edited(found))
        }
        Incoming::Deleted { channel, ts } => {
            let stored = deps.messages.get_message(&channel, &ts).await?;
            let found = deps.messages.delete_message(&channel, &ts).await?;
            if found {
                let thread_root = stored.and_then(|m| m.thread_root.clone());
                record(deps, &channel, thread_root, ts.clone(), EventKind::Deleted);
            }
            // Even when the message was gone already: a delivery that deleted it may
            // have died before this.
            crate::memory::forget::forget_message(deps, &channel, &ts).await?;
            Ok(IngestOutcome::Deleted(found))
        }
        // Only a reaction on kuuki's own post means anything (§7.6); a redelivery
        // counts once.
        Incoming::Reaction { channel, ts, user, emoji, removed } => {
            crate::talkativeness::reaction(deps, &channel, &ts, &user, &emoji, removed).await?;
            Ok(IngestOutcome::Reaction)
        }
    }
}

async fn ingest_message(deps: &Deps, message: Message) -> PortResult<IngestOutcome> {
    let message = std::sync::Arc::new(message);
    if deps.messages.put_message(&message).await? == PutOutcome::AlreadyExists {
        return Ok(IngestOutcome::Duplicate);
    }
    let participant = deps.is_participant(&message);
    let trigger = if participant { direct_trigger(&message, &deps.bot_in(&message.channel)) } else { None };
    record(
        deps,
        &message.channel,
        message.thread_root.clone(),
        message.ts.clone(),
        EventKind::Message { message: LoggedMessage(message.clone()), trigger },
    );
    let planned = plan(deps, &message, trigger);
    let picked_up = pick_up(deps, &message, trigger);
    // One request for both where the queue bills by request.
    let enqueue = deps.enqueue_all_after(planned.iter().chain(picked_up.iter()).cloned().collect());
    // Counted here, once: only the delivery that stored the message gets this far.
    let count = async {
        if participant && message.author == Author::Human && deps.settings.people.user_profile_enabled {
            let counted =
                deps.facts.count_message(&message.user, &message.channel, message.at, trigger.is_some()).await;
            // A lost count is a rounding error in a familiarity level, not worth a
            // redelivery (which would find the message stored and count nothing).
            if let Err(error) = counted {
                tracing::warn!(%error, user = %message.user, "the message was not counted in the person's profile");
            }
        }
    };
    let (queued, ()) = tokio::join!(enqueue, count);
    queued?;
    Ok(IngestOutcome::Stored { trigger, queued: planned.map(|(job, _)| job) })
}

/// A question kuuki may take up: its own judgment once it has stood
/// `UNANSWERED_QUESTION_WAIT_SECONDS` (docs/design.md §7.7), which only what answers
/// it supersedes. Not for a message addressed to kuuki (answered now) or a DM.
fn pick_up(deps: &Deps, message: &Message, trigger: Option<DirectTrigger>) -> Option<(Job, Duration)> {
    let asks = deps.is_participant(message)
        && trigger.is_none()
        && !message.in_dm
        && deps.settings.ambient_enabled()
        && crate::judge::rules::is_question(&message.text);
    asks.then(|| {
        let job = Job::PickUp { thread: message.thread_key(), ts: message.ts.clone() };
        (job, deps.settings.judge.unanswered_question_wait)
    })
}

/// The work a stored message calls for: an answer now for a direct trigger, a
/// judgment after the wait for the rest (where ambient participation is off, only the
/// memory triggers), nothing for kuuki's own or ignored messages.
fn plan(deps: &Deps, message: &Message, trigger: Option<DirectTrigger>) -> Option<(Job, Duration)> {
    if !deps.is_participant(message) {
        return None;
    }
    match trigger {
        Some(_) => Some((
            Job::Respond {
                thread: message.thread_key(),
                ts: message.ts.clone(),
                mode: RespondMode::Direct,
                // Thanks said to kuuki, or being told to hush, is answered with an
                // emoji, not a speech.
                response_type: if is_thanks(&message.text)
                    || crate::talkativeness::is_hush(&message.text, true, &deps.bot_in(&message.channel))
                {
                    ResponseType::ReactOnly
                } else {
                    ResponseType::FullResponse
                },
                emoji: None,
            },
            Duration::ZERO,
        )),
        None if deps.settings.ambient_enabled() => {
            Some((Job::Judge { thread: message.thread_key(), ts: message.ts.clone() }, deps.judge_wait()))
        }
        // Nothing to judge, but the channel still remembers (a judgment would have
        // run the memory triggers); debounced like a judgment.
        None if crate::memory::enabled(deps) => {
            Some((Job::Remember { thread: message.thread_key(), ts: message.ts.clone() }, deps.judge_wait()))
        }
        None => None,
    }
}
