//! The OPEN job (`memory::proactive` decides; this posts): kuuki opens with a fresh
//! shareable fact in a channel that came back after a silence. Claimed like any answer,
//! so a redelivered job never opens twice.

use serde::Serialize;

use super::CLAIM_KEEP;
use crate::deps::Deps;
use crate::domain::{EventKind, Fact, FactUse, Intervention, Message, RespondMode, ResponseType, ThreadKey, Ts};
use crate::memory::proactive;
use crate::ports::{ChannelState, ClaimOutcome, LlmRequest, LlmRole, OpenerState, PortResult};
use crate::prompts::fence::fence_safe;
use crate::record::record;

/// An opener is a line or two.
const OPENER_TOKENS: u32 = 120;

#[derive(Serialize)]
struct OpenerContext<'a> {
    persona: &'a crate::domain::Persona,
    message: MessageLine,
    fact: String,
}

#[derive(Serialize)]
struct MessageLine {
    name: String,
    text: String,
}

/// Handles an OPEN job. Errors are backend failures; the queue delivers again.
pub async fn handle(deps: &Deps, thread: &ThreadKey, ts: &Ts) -> PortResult<()> {
    let channel = &thread.channel;
    if !deps.settings.memory.proactive_conversation_enabled {
        return Ok(());
    }
    let Some(target) = deps.messages.get_message(channel, ts).await? else { return Ok(()) };
    let now = deps.clock.now();
    let state = deps.channels.channel_state(channel).await?;
    if let Some(reason) = crate::memory::purge::stopped_by_uninstall(deps, &state, &target).await? {
        record(deps, channel, thread.root.clone(), ts.clone(), super::dropped(reason));
        return Ok(());
    }
    let opener = proactive::settle(deps, channel, &state, now).await?;
    if opener != state.opener {
        deps.channels.set_opener(channel, opener.clone()).await?;
    }
    let fact = match proactive::choose(deps, &target, &state, &opener).await? {
        Ok(fact) => fact,
        Err(reason) => {
            record(deps, channel, thread.root.clone(), ts.clone(), super::dropped(&format!("no opener: {reason}")));
            return Ok(());
        }
    };
    let key = format!("open:{channel}:{ts}");
    let resumed = match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Claimed => false,
        // An earlier delivery began to post and its outcome is unknown: look first.
        ClaimOutcome::Resumed => true,
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        // The opener went out but the delivery died before noting it (the state still
        // let this one through): note it now, so no second opener comes today.
        ClaimOutcome::Completed => {
            return deps.channels.set_opener(channel, proactive::after_opening(opener, &fact, None, now)).await;
        }
    };
    let result = open_claimed(deps, &target, &state, opener, &fact, &key, resumed).await;
    if result.is_err() {
        // Given back so the redelivery can open (a posting mark stays).
        deps.ledger.release(&key).await?;
    }
    result
}

/// Makes, posts and records the opener under its claim.
async fn open_claimed(
    deps: &Deps,
    target: &Message,
    state: &ChannelState,
    opener: OpenerState,
    fact: &Fact,
    key: &str,
    resumed: bool,
) -> PortResult<()> {
    let channel = &target.channel;
    let now = deps.clock.now();
    let used = vec![FactUse { id: fact.id.clone(), content: fact.content.clone(), score: 1.0 }];
    let silenced = state.silenced_at(now, RespondMode::Opener);
    let found = if resumed && !silenced {
        deps.chat.find_post(channel, target.thread_root.as_ref(), &target.ts, key).await?
    } else {
        None
    };
    let (text, posted) = match found {
        Some(found) => {
            deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
            super::store_own(deps, target, target.thread_root.clone(), &found.ts, &found.text).await?;
            (found.text, Some(found.ts))
        }
        None => {
            let text = match opener_text(deps, target, &fact.content).await {
                Ok(text) => text,
                Err(reason) => {
                    // Nothing is posted; the claim is done so a redelivery does not ask again.
                    deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
                    let kind = EventKind::RespondFailed {
                        mode: RespondMode::Opener,
                        response_type: ResponseType::ShortAck,
                        reason,
                        notice: None,
                    };
                    record(deps, channel, target.thread_root.clone(), target.ts.clone(), kind);
                    return Ok(());
                }
            };
            let posted = if silenced {
                deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
                None
            } else {
                Some(super::post(deps, target, key, RespondMode::Opener, &text).await?)
            };
            (text, posted)
        }
    };
    let now = deps.clock.now();
    if !silenced {
        let intervention = Intervention {
            at: now,
            thread: target.thread_key(),
            response_type: ResponseType::ShortAck,
            excerpt: crate::context::excerpt(std::slice::from_ref(target)),
            facts: used.clone(),
            unasked_post: None,
            pick_up: false,
        };
        deps.channels.record_intervention(channel, intervention).await?;
    }
    deps.channels.set_opener(channel, proactive::after_opening(opener, fact, posted.clone(), now)).await?;
    record(
        deps,
        channel,
        target.thread_root.clone(),
        target.ts.clone(),
        EventKind::Respond {
            mode: RespondMode::Opener,
            response_type: ResponseType::ShortAck,
            posted_in: target.thread_root.clone(),
            posted_ts: posted,
            text: Some(text),
            emoji: None,
            shadow: silenced,
            facts: used,
        },
    );
    Ok(())
}

/// The opener's words: the model's, or with `--llm none` a visible stand-in.
async fn opener_text(deps: &Deps, target: &Message, fact: &str) -> Result<String, String> {
    let Some(llm) = &deps.llm else {
        let quoted: String = fact.chars().take(60).collect();
        return Ok(format!("[{} opener: \"{quoted}\"]", deps.persona.name));
    };
    let prompt = deps.prompts.opener(&OpenerContext {
        persona: &deps.persona,
        message: MessageLine { name: fence_safe(&target.user_name), text: fence_safe(&target.text) },
        fact: fence_safe(fact),
    });
    let response = llm
        .complete(LlmRequest {
            role: LlmRole::Generate,
            model: deps.settings.llm.model.clone(),
            system: prompt.system.clone(),
            user: prompt.user.clone(),
            max_tokens: OPENER_TOKENS,
            temperature: deps.settings.temperature(LlmRole::Generate),
            schema: None,
            subject: format!("opener: {}", target.text),
        })
        .await
        .map_err(|e| e.to_string())?;
    super::output::fit_to_post(&response)?;
    super::guard::check_reply(&response.text, &prompt.whole(), &deps.persona.name)
}
