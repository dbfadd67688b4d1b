//! The OPEN job (`memory::proactive` decides; this posts): kuuki opens with a fresh
//! shareable fact in a channel that came back after a silence. Claimed like any answer,
//! so a redelivered job never opens twice.

use serde::Serialize;

use crate::deps::Deps;
use crate::domain::{EventKind, FactUse, Intervention, Message, RespondMode, ResponseType, Stage, ThreadKey, Ts};
use crate::memory::proactive;
use crate::ports::{ClaimOutcome, LlmRequest, LlmRole, PortResult};
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
    if !deps.settings.proactive_conversation_enabled {
        return Ok(());
    }
    let Some(target) = deps.messages.get_message(channel, ts).await? else { return Ok(()) };
    let now = deps.clock.now();
    let state = deps.channels.channel_state(channel).await?;
    let opener = proactive::settle(deps, channel, &state, now).await?;
    if opener != state.opener {
        deps.channels.set_opener(channel, opener.clone()).await?;
    }
    let fact = match proactive::choose(deps, &target, &state, &opener).await? {
        Ok(fact) => fact,
        Err(reason) => {
            record(deps, channel, thread.root.clone(), ts.clone(), skipped(format!("no opener: {reason}")));
            return Ok(());
        }
    };
    let key = format!("open:{channel}:{ts}");
    match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        ClaimOutcome::Completed => return Ok(()),
    }
    let used = vec![FactUse { id: fact.id.clone(), content: fact.content.clone(), score: 1.0 }];
    let text = match opener_text(deps, &target, &fact.content).await {
        Ok(text) => text,
        Err(reason) => {
            // Nothing is posted; the claim is done so a redelivery does not ask again.
            deps.ledger.complete(&key, deps.clock.now(), CLAIM_KEEP).await?;
            let kind = EventKind::RespondFailed {
                mode: RespondMode::Opener,
                response_type: ResponseType::ShortAck,
                reason,
                notice: None,
            };
            record(deps, channel, thread.root.clone(), ts.clone(), kind);
            return Ok(());
        }
    };
    let silenced = state.silenced_at(now, RespondMode::Opener);
    let posted = if silenced {
        deps.ledger.complete(&key, deps.clock.now(), CLAIM_KEEP).await?;
        None
    } else {
        Some(super::post(deps, &target, &key, RespondMode::Opener, &text).await?)
    };
    let now = deps.clock.now();
    if !silenced {
        let intervention = Intervention {
            at: now,
            thread: target.thread_key(),
            response_type: ResponseType::ShortAck,
            excerpt: crate::context::excerpt(std::slice::from_ref(&target)),
            facts: used.clone(),
        };
        deps.channels.record_intervention(channel, intervention).await?;
    }
    deps.channels.set_opener(channel, proactive::after_opening(opener, &fact, posted.clone(), now)).await?;
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

const CLAIM_KEEP: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

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
            model: deps.settings.llm_model.clone(),
            system: prompt.clone(),
            max_tokens: OPENER_TOKENS,
            subject: format!("opener: {}", target.text),
        })
        .await
        .map_err(|e| e.to_string())?;
    super::output::fit_to_post(&response)?;
    super::guard::check_reply(&response.text, &prompt, &deps.persona.name)
}

fn skipped(reason: String) -> EventKind {
    EventKind::Dropped { stage: Stage::Respond, reason }
}
