//! The judge worker (docs/design.md §7): a queued JUDGE for one message decides whether,
//! when and how kuuki takes part.

pub mod naming;
pub mod open_question;
pub(crate) mod own_conversation;
mod people;
pub mod pickup;
pub mod rules;
pub mod verdict;

use std::sync::Arc;
use std::time::Duration;

use crate::deps::Deps;
use crate::domain::{
    Author, ConversationState, Decision, EventKind, Job, JudgmentNote, LlmVerdict, Message, RespondMode, ResponseType,
    Stage, ThreadKey, Timestamp, Ts,
};
use crate::ports::{ClaimOutcome, LlmRequest, LlmRole, PortResult, Usage};
use crate::record::record;

/// The longest wait the LLM judge may ask for before answering: a reply later than an
/// hour no longer answers anything.
pub const MAX_RESPONSE_DELAY_SECONDS: u32 = 3600;
/// Messages loaded beyond the rules' N: kuuki's own replies after the target, and the
/// speaker's turn, may sit there.
const RULE_WINDOW_SLACK: usize = 6;
/// A judged message is not judged again for this long.
const JUDGE_CLAIM_KEEP: Duration = Duration::from_secs(24 * 3600);
use crate::context;
use crate::conversation::{Window, newest};

/// Handles a JUDGE job. Errors are backend failures; the queue delivers the job again.
pub async fn handle(deps: &Deps, thread: &ThreadKey, ts: &Ts) -> PortResult<()> {
    let channel = &thread.channel;
    // One read of the channel serves the judgment: the message, what came after it,
    // its conversation, the message before the turn, the memory triggers' counts.
    let window = Window::read(deps, channel).await?;
    let Some(target) = window.get_message(deps, channel, ts).await? else {
        record(deps, channel, thread.root.clone(), ts.clone(), dropped("the message was deleted"));
        return Ok(());
    };
    let after = window.messages_after(deps, &target).await?;
    if let Some(newer) = newest(&after, |m| deps.is_participant(m)) {
        record(
            deps,
            channel,
            thread.root.clone(),
            ts.clone(),
            EventKind::Superseded { stage: Stage::Judge, by: newer.ts.clone() },
        );
        return Ok(());
    }
    // Newer human messages superseded this job; what is left after it is kuuki's or
    // another bot's, and either answers a question as well. The same read serves both.
    let answered = newest(&after, |m| m.user != target.user || m.author != target.author).is_some();

    // A redelivered or re-sent JUDGE for the same message judges once.
    let key = claim_key(channel, ts);
    let now = deps.clock.now();
    match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        ClaimOutcome::Completed => {
            record(deps, channel, thread.root.clone(), ts.clone(), dropped("already judged"));
            return Ok(());
        }
    }
    match judge_claimed(deps, &window, thread, ts, &target, answered).await {
        Ok(Judged::Decided) => deps.ledger.complete(&key, deps.clock.now(), JUDGE_CLAIM_KEEP).await,
        // The re-queued judgment takes the claim again; completing it here would drop
        // that one as "already judged".
        Ok(Judged::Waiting) => deps.ledger.release(&key).await,
        Err(e) => {
            deps.ledger.release(&key).await?;
            Err(e)
        }
    }
}

/// The ledger key under which a message is judged once: by its JUDGE, or, for a
/// question, by its pick-up (§7.7), whichever decides first.
pub(crate) fn claim_key(channel: &crate::domain::ChannelId, ts: &Ts) -> String {
    format!("judge:{channel}:{ts}")
}

/// How a claimed judgment ended.
enum Judged {
    Decided,
    /// Queued again for when a time-dependent rule settles, left to the question's
    /// pick-up, or (a pick-up) queued again for kuuki's cooldown to end.
    Waiting,
}

async fn judge_claimed(
    deps: &Deps,
    window: &Window,
    thread: &ThreadKey,
    ts: &Ts,
    target: &Arc<Message>,
    answered: bool,
) -> PortResult<Judged> {
    let channel = &thread.channel;
    let target = target.clone();
    // The rules read the last N messages; the LLM, when asked, reads the whole window.
    let rule_window = deps.settings.judge.recent_messages + RULE_WINDOW_SLACK;
    let mut conversation = context::load_recent(deps, window, &target, rule_window).await?;
    let state = deps.channels.channel_state(channel).await?;
    pickup::show_thread_answers(deps, window, &state, &target, &mut conversation).await?;
    // Slack took kuuki's access away: nothing more is judged or remembered there.
    if let Some(reason) = crate::memory::purge::stopped_by_uninstall(deps, &state, &target).await? {
        record(deps, channel, thread.root.clone(), ts.clone(), dropped(reason));
        return Ok(Judged::Decided);
    }
    // Before any early return: a muted channel, or one where kuuki spoke last, still
    // remembers.
    let lull = crate::memory::queue_due(deps, window, &target, &state).await.map(|note| note.at);
    // How the channel took kuuki's words; counted again (once) at the next message if
    // it fails now.
    if let Err(error) = crate::talkativeness::notice(deps, window, &state, &target).await {
        tracing::warn!(%error, channel = %channel, "talkativeness signals not counted");
    }
    let upto = &conversation[..conversation.partition_point(|m| m.ts <= target.ts)];
    // The state is let go before the judgment is recorded in it, so the in-process
    // store updates its copy in place instead of copying it.
    if conversation.last().is_some_and(|m| m.author == Author::OwnBot && m.ts > target.ts) {
        drop(state);
        let mut judgment = Judgment::skip("kuuki spoke last in this conversation");
        judgment.breakdown.insert("bot_spoke_last".into(), 0);
        judgment.record(deps, &target, lull).await?;
        return pickup::settled_by_judgment(deps, rules::turn(upto), ts).await.map(|()| Judged::Decided);
    }
    if state.muted_at(deps.clock.now()) {
        drop(state);
        let mut judgment = Judgment::skip("kuuki is muted in this channel");
        judgment.breakdown.insert("muted".into(), 0);
        judgment.record(deps, &target, lull).await?;
        return pickup::settled_by_judgment(deps, rules::turn(upto), ts).await.map(|()| Judged::Decided);
    }
    let turn_start = rules::turn(upto).first().map_or(&target.ts, |m| &m.ts);
    let previous = window.previous_in_channel(deps, channel, turn_start).await?;
    let previous_at = previous.as_ref().map(|m| m.at);
    let people = people::load(deps, window, &target, rules::turn(upto)).await?;
    let bot = deps.bot_in(channel);
    let input = rules::RuleInput {
        message: &target,
        conversation: upto,
        previous_in_channel: previous.map(|m| m.at),
        last_response_at: state.last_response_at,
        last_response_here: last_response_in(&state, &target.thread_root),
        now: deps.clock.now(),
        answered,
        bot: &bot,
        people: &people,
    };
    // How the channel has taken kuuki's unasked words lately (§7.6).
    let offset = crate::talkativeness::offset(deps, &state);
    let mut scored = rules::score(&input, &deps.settings);
    crate::talkativeness::add_offset(&mut scored, offset);
    let llm_available = deps.llm.is_some();
    // A question that clears the threshold already (a follow-up while kuuki is engaged)
    // is answered at its judgment: the pick-up is for the ones that do not.
    let clears_now =
        |pending: &&crate::domain::Pending| pending.picked_up && scored.score >= deps.settings.judge.score_threshold;
    if let Some(pending) = scored.pending.as_ref().filter(|p| !clears_now(p)) {
        // Wait only when the settled rules could make kuuki speak; otherwise decide now.
        // A question's pick-up waits out kuuki's cooldown, so the rules are read past it.
        let settles_at = match (pending.picked_up, state.last_response_at) {
            (true, Some(at)) => pending.at.max(at + deps.settings.judge.cooldown + Duration::from_secs(1)),
            _ => pending.at,
        };
        let mut settled = rules::score(&rules::RuleInput { now: settles_at, ..input }, &deps.settings);
        crate::talkativeness::add_offset(&mut settled, offset);
        if rules::decide(settled.score, &deps.settings, llm_available) != Decision::Skip {
            drop(state);
            // Either way the claim is let go: the re-queued JUDGE, or the question's
            // pick-up, takes it.
            return wait(deps, thread, ts, &target, &scored, pending, lull).await.map(|()| Judged::Waiting);
        }
    }
    // The turn's other questions are judged here: their pick-ups must not judge them too.
    if let Some(taken) = pickup::take_questions(deps, rules::turn(upto), ts).await? {
        drop(state);
        let judgment = Judgment::skip(&format!("the question {taken} of this turn was judged by its pick-up"));
        return judgment.record(deps, &target, lull).await.map(|()| Judged::Decided);
    }
    let judgment = judgment_of(deps, window, &target, &state, &people, &scored, &[]).await?;
    // Whether openers were stopped here; the state itself is let go before recording.
    let opener_state = state.opener.clone();
    drop(state);
    let respond = judgment.respond;
    let (response_type, delay) = (judgment.response_type, judgment.delay_seconds);
    let emoji = judgment.llm.as_ref().and_then(|v| v.emoji.clone());
    judgment.record(deps, &target, lull).await?;
    pickup::settled_by_judgment(deps, rules::turn(upto), ts).await?;
    if respond {
        let job =
            Job::Respond { thread: thread.clone(), ts: ts.clone(), mode: RespondMode::Ambient, response_type, emoji };
        deps.enqueue_after(job, Duration::from_secs(delay.into())).await?;
    } else {
        crate::memory::proactive::maybe_queue(deps, &target, previous_at, &opener_state).await?;
    }
    Ok(Judged::Decided)
}

/// kuuki's last response in the conversation `root` (engagement). The state is the
/// channel's: its interventions differ by thread root alone.
fn last_response_in(state: &crate::ports::ChannelState, root: &Option<Ts>) -> Option<Timestamp> {
    state.interventions.iter().filter(|i| &i.thread.root == root).map(|i| i.at).max()
}

/// The judgment the rules' `scored` make for `target` (the last line of the judged
/// turn): what the thresholds say, the LLM judge's verdict when they leave it to it,
/// and the cap on unasked posts. The JUDGE of a message and a question's pick-up both
/// decide here.
async fn judgment_of(
    deps: &Deps,
    window: &Window,
    target: &Arc<Message>,
    state: &crate::ports::ChannelState,
    people: &rules::KnownPeople,
    scored: &crate::domain::RuleScore,
    maybe_answers: &[Arc<Message>],
) -> PortResult<Judgment> {
    let llm_available = deps.llm.is_some();
    let mut decision = rules::decide(scored.score, &deps.settings, llm_available);
    // A turn meant for someone else is theirs to answer: the LLM is not asked about it.
    let for_other = scored.for_other.as_ref();
    if for_other.is_some() && decision == Decision::Llm {
        decision = Decision::Skip;
    }
    let ladder = rules::response_type(scored.score, scored.engaged, scored.question, &deps.settings);
    let mut judgment = Judgment {
        score: scored.score,
        breakdown: scored.breakdown.to_map(),
        decision,
        llm_called: false,
        respond: decision == Decision::Respond,
        response_type: ladder,
        delay_seconds: 0,
        llm: None,
        llm_error: None,
        llm_cached: false,
        llm_usage: None,
        reason: match (decision, for_other) {
            (Decision::Skip, Some(who)) => format!("the turn is for {who}, not kuuki: the LLM is not asked"),
            (Decision::Respond, _) => "the score reached the threshold".into(),
            (Decision::Skip, None) => "the score stayed below the threshold".into(),
            (Decision::Llm | Decision::Wait, _) => String::new(),
        },
        pick_up: false,
    };
    if decision == Decision::Llm {
        let mut whole = context::load_conversation(deps, window, target).await?;
        pickup::show_thread_answers(deps, window, state, target, &mut whole).await?;
        let upto_whole = &whole[..whole.partition_point(|m| m.ts <= target.ts)];
        let (verdict, cached, usage) = ask_llm(deps, window, target, upto_whole, state, people, maybe_answers).await?;
        judgment.llm_called = !cached;
        judgment.llm_cached = cached;
        judgment.llm_usage = usage;
        match verdict {
            Ok(verdict) => {
                judgment.respond = verdict.should_respond && verdict.conversation_state != ConversationState::Ending;
                judgment.reason = if verdict.should_respond && !judgment.respond {
                    "the conversation is ending".into()
                } else {
                    verdict.reason.clone()
                };
                if deps.settings.judge.response_diversity_enabled {
                    judgment.response_type = verdict.response_type.unwrap_or(ladder);
                }
                judgment.delay_seconds = verdict.delay_seconds.unwrap_or(0).min(MAX_RESPONSE_DELAY_SECONDS);
                if verdict.already_answered == Some(true) && !maybe_answers.is_empty() {
                    judgment.respond = false;
                    let ids: Vec<&str> = maybe_answers.iter().map(|m| m.ts.as_str()).collect();
                    judgment.reason = format!("the LLM judge found it answered by one of messages {}", ids.join(", "));
                }
                judgment.llm = Some(verdict);
            }
            Err(error) => {
                judgment.respond = false;
                judgment.reason = "the LLM judge gave no usable answer".into();
                judgment.llm_error = Some(error);
            }
        }
    }
    cap_unasked_posts(&mut judgment, state, deps.clock.now(), deps.settings.judge.max_unasked_posts_per_hour);
    Ok(judgment)
}

/// At most `cap` unasked posts an hour in a channel (`CHANNEL_MAX_UNASKED_POSTS_PER_HOUR`):
/// a post past it is not made. A reaction is not a post and still goes.
fn cap_unasked_posts(judgment: &mut Judgment, state: &crate::ports::ChannelState, now: Timestamp, cap: usize) {
    if !judgment.respond || judgment.response_type == ResponseType::ReactOnly {
        return;
    }
    let hour_ago = now - Duration::from_secs(3600);
    let posts = state.interventions.iter().filter(|i| i.unasked_post.is_some() && i.at > hour_ago).count();
    if posts >= cap {
        judgment.respond = false;
        judgment.reason = format!(
            "{posts} unasked posts in the last hour already (CHANNEL_MAX_UNASKED_POSTS_PER_HOUR {cap}): not another"
        );
        judgment.breakdown.insert("unasked_post_cap".into(), 0);
    }
}

/// Logs a judgment that waits for `pending` and queues the same JUDGE again for then,
/// unless the question's pick-up judges it then (queued with the question, superseded
/// only by what answers it). A newer message in the conversation supersedes a queued
/// JUDGE as usual; when it comes back the rule has settled, so it decides.
async fn wait(
    deps: &Deps,
    thread: &ThreadKey,
    ts: &Ts,
    target: &Message,
    scored: &crate::domain::RuleScore,
    pending: &crate::domain::Pending,
    lull: Option<Timestamp>,
) -> PortResult<()> {
    let delay = u32::try_from(pending.at.whole_seconds_after(deps.clock.now())).unwrap_or(u32::MAX);
    if !pending.picked_up {
        let job = Job::Judge { thread: thread.clone(), ts: ts.clone() };
        deps.enqueue_after(job, Duration::from_secs(delay.into())).await?;
    }
    let mut judgment = Judgment::skip(&pending.reason);
    judgment.score = scored.score;
    judgment.breakdown = scored.breakdown.to_map();
    judgment.decision = Decision::Wait;
    judgment.delay_seconds = delay;
    judgment.record(deps, target, lull).await
}

/// Asks the LLM judge. The outer error is a backend failure (retry the job); the
/// inner one an unusable answer (do not respond).
async fn ask_llm(
    deps: &Deps,
    window: &Window,
    target: &Message,
    conversation: &[Arc<Message>],
    state: &crate::ports::ChannelState,
    people: &rules::KnownPeople,
    maybe_answers: &[Arc<Message>],
) -> PortResult<(Result<LlmVerdict, String>, bool, Option<Usage>)> {
    let Some(llm) = &deps.llm else {
        return Ok((Err("no LLM is configured".into()), false, None));
    };
    // A question in a busy channel is judged on its own lines, not the last N
    // interleaved ones; the cache key follows, so other people's chatter does not
    // change it.
    let own = match target.thread_root {
        Some(_) => None,
        None => {
            // Answers name the asker by their display name (Slack's messages carry ids);
            // the prompt asks for the same names, cached by the client.
            let humans = conversation.iter().map(|m| &**m).filter(|m| m.author == Author::Human);
            let names = context::display_names(deps, humans).await;
            let mut people = people.clone();
            people.extend(rules::KnownPeople::new(names.iter().map(|(user, name)| (user, name.as_str()))));
            own_conversation::own_conversation(conversation, &deps.bot_in(&target.channel), &people)
        }
    };
    let shown = own.as_deref().unwrap_or(conversation);
    let mut ctx = context::build(deps, window, target, shown, state, ResponseType::FullResponse).await?;
    ctx.own_lines_only = own.is_some();
    ctx.maybe_answers = context::prompt_lines(deps, maybe_answers).await;
    let cache_key = format!("judge-cache:{}", ctx.conversation_hash(target));
    let now = deps.clock.now();
    if let Some(cached) = deps.ledger.cache_get(&cache_key, now).await?
        && let Ok(verdict) = serde_json::from_str::<LlmVerdict>(&cached)
    {
        return Ok((Ok(verdict), true, None));
    }
    let prompt = deps.prompts.judge(&ctx);
    let request = LlmRequest {
        role: LlmRole::Judge,
        model: deps.settings.llm.judge_model.clone(),
        system: prompt.system,
        user: prompt.user,
        max_tokens: 300,
        temperature: deps.settings.temperature(LlmRole::Judge),
        schema: Some(match maybe_answers {
            [] => crate::prompts::answers::verdict(),
            _ => crate::prompts::answers::verdict_with_answered(),
        }),
        // The speaker's whole turn: the line judged may be an afterthought ("no rush").
        subject: match rules::turn(conversation) {
            [] => target.text.clone(),
            turn => turn.iter().map(|m| m.text.as_str()).collect::<Vec<_>>().join("\n"),
        },
    };
    let (verdict, usage) = match llm.complete(request).await {
        Ok(response) => (verdict::parse_verdict(&response.text).map_err(|e| e.to_string()), Some(response.usage)),
        Err(e) => (Err(e.to_string()), None),
    };
    if let Ok(v) = &verdict {
        let json = serde_json::to_string(v).expect("verdicts serialize");
        deps.ledger.cache_put(&cache_key, &json, now + cache_lifetime(v.confidence)).await?;
    }
    Ok((verdict, false, usage))
}

/// How long a judgment of an unchanged conversation stands: at least five minutes,
/// longer the surer the judge was (≥ 0.9: 12 h, ≥ 0.7: 1 h, else 10 min). A new
/// message changes the conversation and so the key.
pub fn cache_lifetime(confidence: f64) -> Duration {
    let tier = if confidence >= 0.9 {
        Duration::from_secs(12 * 3600)
    } else if confidence >= 0.7 {
        Duration::from_secs(3600)
    } else {
        Duration::from_secs(10 * 60)
    };
    tier.max(Duration::from_secs(5 * 60))
}

fn dropped(reason: &str) -> EventKind {
    EventKind::Dropped { stage: Stage::Judge, reason: reason.into() }
}

struct Judgment {
    score: i32,
    breakdown: std::collections::BTreeMap<crate::domain::RuleName, i32>,
    decision: Decision,
    llm_called: bool,
    respond: bool,
    response_type: ResponseType,
    delay_seconds: u32,
    llm: Option<LlmVerdict>,
    llm_error: Option<String>,
    llm_cached: bool,
    llm_usage: Option<Usage>,
    reason: String,
    /// Made by a question's pick-up.
    pick_up: bool,
}

impl Judgment {
    fn skip(reason: &str) -> Self {
        Judgment {
            score: 0,
            breakdown: Default::default(),
            decision: Decision::Skip,
            llm_called: false,
            respond: false,
            response_type: ResponseType::ReactOnly,
            delay_seconds: 0,
            llm: None,
            llm_error: None,
            llm_cached: false,
            llm_usage: None,
            reason: reason.into(),
            pick_up: false,
        }
    }

    /// Keeps the judgment for `/kuuki why`, with when a lull's reflection is queued for
    /// (`lull`, from the memory triggers), and logs it.
    async fn record(self, deps: &Deps, target: &Message, lull: Option<Timestamp>) -> PortResult<()> {
        let note = JudgmentNote {
            at: deps.clock.now(),
            ts: target.ts.clone(),
            user: target.user.clone(),
            text: target.text.clone(),
            score: self.score,
            breakdown: self.breakdown.clone(),
            decision: self.decision,
            respond: self.respond,
            response_type: self.respond.then_some(self.response_type),
            reason: self.reason.clone(),
        };
        deps.channels.record_judgment(&target.channel, note, lull).await?;
        record(
            deps,
            &target.channel,
            target.thread_root.clone(),
            target.ts.clone(),
            EventKind::Judge {
                user: target.user.clone(),
                score: self.score,
                breakdown: self.breakdown,
                decision: self.decision,
                llm_called: self.llm_called,
                respond: self.respond,
                response_type: self.respond.then_some(self.response_type),
                delay_seconds: self.delay_seconds,
                llm: self.llm,
                llm_error: self.llm_error,
                llm_cached: self.llm_cached,
                llm_usage: self.llm_usage,
                reason: self.reason,
                pick_up: self.pick_up,
            },
        );
        Ok(())
    }
}
