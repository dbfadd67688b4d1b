//! A question's pick-up (issue 34, docs/design.md §7.7): every question gets its own
//! judgment once it has stood `UNANSWERED_QUESTION_WAIT_SECONDS`. In a busy channel
//! the JUDGE of a question is superseded by the next line, whoever writes it; the
//! pick-up is not: only what closes the question ([`super::open_question`]) ends it.
//! kuuki answers a question it picks up in a thread under it (a reply on Discord), so
//! everyone sees what it answers.

use std::sync::Arc;
use std::time::Duration;

use crate::context;
use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::{Author, Decision, EventKind, Job, Message, RespondMode, Stage, ThreadKey, Ts};
use crate::ports::{ClaimOutcome, PortResult};
use crate::record::record;

use super::naming::{self, KnownPeople};
use super::open_question::{Closing, QuestionView};
use super::rules::{self, is_question};
use super::{JUDGE_CLAIM_KEEP, Judged, Judgment, RULE_WINDOW_SLACK, judgment_of};

/// Handles a PICK_UP job. Errors are backend failures; the queue delivers it again.
pub async fn handle(deps: &Deps, thread: &ThreadKey, ts: &Ts) -> PortResult<()> {
    let channel = &thread.channel;
    let window = Window::read(deps, channel).await?;
    let Some(question) = window.get_message(deps, channel, ts).await? else {
        return drop_it(deps, thread, ts, "the message was deleted");
    };
    if !is_question(&question.text) {
        return drop_it(deps, thread, ts, "the message no longer asks anything (edited)");
    }
    let rule_window = deps.settings.judge.recent_messages + RULE_WINDOW_SLACK;
    let mut before = window.conversation_before(deps, &question, rule_window).await?;
    before.push(question.clone());
    let mut after = window.messages_after(deps, &question).await?;
    after.sort_by(|a, b| a.ts.cmp(&b.ts));
    let people = load_people(deps, &window, &question, &before, &after).await?;
    let view = QuestionView { question: &question, before: &before, after: &after };
    let now = deps.clock.now();
    let judge = &deps.settings.judge;
    // The asker's turn may have gone on ("not pushed yet"): the wait counts from its
    // last line.
    let due = view.asker_turn_end() + judge.unanswered_question_wait;
    if let Some(closing) = view.closing(&deps.bot_in(&question.channel), &people, now, judge) {
        // The answered model reads the question's aftermath as of its look, which has
        // not come while the asker is still writing: it is asked again then.
        let looked_too_soon = matches!(closing, Closing::LikelyAnswered { .. }) && now < due;
        if !looked_too_soon {
            return drop_it(deps, thread, ts, &closing.reason());
        }
    }
    // A question to kuuki (a reply to its answer) is the JUDGE's to answer, at once.
    let mut asked: Vec<Arc<Message>> = before.clone();
    asked.extend(view.asker_turn_after().iter().cloned());
    if rules::addressed_to_kuuki(&asked, &deps.bot_in(&question.channel)) {
        return drop_it(deps, thread, ts, "the question is to kuuki: its own judgment answers it");
    }
    // Someone else's to answer: its own judgment said so and looks again after
    // ADDRESSED_TO_OTHER_WAIT_MINUTES.
    if view.addressee(&deps.bot_in(&question.channel), &people).is_some() {
        return Ok(());
    }
    if now < due {
        let delay = Duration::from_secs(due.whole_seconds_after(now).max(1));
        return deps.enqueue_after(Job::PickUp { thread: thread.clone(), ts: ts.clone() }, delay).await;
    }
    if let Some(earlier) = earlier_in_burst(deps, &window, &view, &people).await? {
        let reason = format!("one pick-up per asker per burst: their open question {earlier} takes this one in");
        return drop_it(deps, thread, ts, &reason);
    }

    // A redelivered pick-up judges once; a JUDGE that decided about the question took it.
    let key = super::claim_key(channel, ts);
    match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        // Said nothing: in a quiet channel that is how most pick-ups end.
        ClaimOutcome::Completed => return Ok(()),
    }
    match judge_question(deps, &window, &view, &people).await {
        Ok(Judged::Decided) => deps.ledger.complete(&key, deps.clock.now(), JUDGE_CLAIM_KEEP).await,
        // Queued again for when kuuki's cooldown ends: that one takes the claim.
        Ok(Judged::Waiting) => deps.ledger.release(&key).await,
        Err(e) => {
            deps.ledger.release(&key).await?;
            Err(e)
        }
    }
}

/// A JUDGE of `judged` that decided about its turn (rather than wait for a question's
/// pick-up) settles the pick-ups of the turn's other questions ("how do I…?" / "and
/// can I…?"): no question is judged twice. The judged message's own claim is the
/// JUDGE's, completed as it ends; a turn of one line costs no write.
pub(super) async fn settled_by_judgment(deps: &Deps, turn: &[Arc<Message>], judged: &Ts) -> PortResult<()> {
    for question in turn.iter().filter(|m| &m.ts != judged && is_question(&m.text)) {
        let key = super::claim_key(&question.channel, &question.ts);
        deps.ledger.complete(&key, deps.clock.now(), JUDGE_CLAIM_KEEP).await?;
    }
    Ok(())
}

/// Before a JUDGE of `judged` decides about its turn, it takes the claims of the turn's
/// other questions, so their pick-ups cannot judge them at the same time (a JUDGE
/// delivered late, or a long `JUDGE_MIN_WAIT_SECONDS`). A question whose pick-up has
/// judged it already is returned: the turn is decided. One a pick-up is judging now
/// makes this delivery fail and come back.
pub(super) async fn take_questions(deps: &Deps, turn: &[Arc<Message>], judged: &Ts) -> PortResult<Option<Ts>> {
    let now = deps.clock.now();
    for question in turn.iter().filter(|m| &m.ts != judged && is_question(&m.text)) {
        let key = super::claim_key(&question.channel, &question.ts);
        match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
            ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
            ClaimOutcome::Completed => return Ok(Some(question.ts.clone())),
            ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        }
    }
    Ok(None)
}

/// Puts kuuki's answers to questions it picked up, posted in threads under them, in
/// the top-level `conversation` of `target` they belong to by time (those before
/// `target`): the asker's "thanks, that worked" after one is a reply to kuuki, not the
/// rest of their question.
pub(super) async fn show_thread_answers(
    deps: &Deps,
    window: &Window,
    state: &crate::ports::ChannelState,
    target: &Message,
    conversation: &mut Vec<Arc<Message>>,
) -> PortResult<()> {
    if target.thread_root.is_some() {
        return Ok(());
    }
    let Some(first) = conversation.first().cloned() else {
        return Ok(());
    };
    for intervention in &state.interventions {
        let Some(post) = intervention.unasked_post.as_ref().filter(|_| intervention.thread.root.is_none()) else {
            continue;
        };
        if *post <= first.ts || *post >= target.ts || conversation.iter().any(|m| &m.ts == post) {
            continue;
        }
        if let Some(answer) = window.get_message(deps, &target.channel, post).await?
            && answer.thread_root.is_some()
        {
            let at = conversation.partition_point(|m| m.ts < answer.ts);
            conversation.insert(at, answer);
        }
    }
    Ok(())
}

/// Judges an open question as the asker's turn stands now, and queues the answer in a
/// thread under it when kuuki should speak.
async fn judge_question(
    deps: &Deps,
    window: &Window,
    view: &QuestionView<'_>,
    people: &KnownPeople,
) -> PortResult<Judged> {
    let question = view.question;
    let channel = &question.channel;
    let state = deps.channels.channel_state(channel).await?;
    if let Some(reason) = crate::memory::purge::stopped_by_uninstall(deps, &state, question).await? {
        return drop_it(deps, &question.thread_key(), &question.ts, reason).map(|()| Judged::Decided);
    }
    if state.muted_at(deps.clock.now()) {
        drop(state);
        let mut judgment = Judgment::skip("kuuki is muted in this channel");
        judgment.breakdown.insert("muted".into(), 0);
        judgment.pick_up = true;
        return judgment.record(deps, question, None).await.map(|()| Judged::Decided);
    }
    // The rules read the asker's whole turn, its follow-up lines too.
    let mut conversation: Vec<Arc<Message>> = view.before.to_vec();
    conversation.extend(view.asker_turn_after().iter().cloned());
    let target = conversation.last().expect("the question is in it").clone();
    let turn_start = rules::turn(&conversation).first().map_or(&target.ts, |m| &m.ts).clone();
    let previous = window.previous_in_channel(deps, channel, &turn_start).await?;
    let previous_at = previous.as_ref().map(|m| m.at);
    let bot = deps.bot_in(channel);
    let input = rules::RuleInput {
        message: &target,
        conversation: &conversation,
        previous_in_channel: previous.map(|m| m.at),
        last_response_at: state.last_response_at,
        last_response_here: super::last_response_in(&state, &target.thread_root),
        now: deps.clock.now(),
        // The open-question rules read what came after, and found no answer.
        answered: false,
        bot: &bot,
        people,
    };
    let offset = crate::talkativeness::offset(deps, &state);
    let mut scored = rules::score(&input, &deps.settings);
    crate::talkativeness::add_offset(&mut scored, offset);
    // The cooldown holds up to and including its last second.
    let cooldown_end = state.last_response_at.map(|at| at + deps.settings.judge.cooldown + Duration::from_secs(1));
    if let Some(end) = cooldown_end.filter(|end| *end > input.now) {
        let mut settled = rules::score(&rules::RuleInput { now: end, ..input }, &deps.settings);
        crate::talkativeness::add_offset(&mut settled, offset);
        if rules::decide(settled.score, &deps.settings, deps.llm.is_some()) != Decision::Skip {
            drop(state);
            let delay = end.whole_seconds_after(input.now).max(1);
            deps.enqueue_after(
                Job::PickUp { thread: question.thread_key(), ts: question.ts.clone() },
                Duration::from_secs(delay),
            )
            .await?;
            let mut judgment =
                Judgment::skip("kuuki spoke here moments ago: the question waits for the cooldown to end");
            judgment.score = scored.score;
            judgment.breakdown = scored.breakdown.to_map();
            judgment.decision = Decision::Wait;
            judgment.delay_seconds = u32::try_from(delay).unwrap_or(u32::MAX);
            judgment.pick_up = true;
            return judgment.record(deps, question, None).await.map(|()| Judged::Waiting);
        }
    }
    // With the answered model on, the judge is shown the lines that may answer the
    // question and says whether one does (what a line says, no feature reads).
    let maybe_answers = match deps.settings.judge.reply_model_threshold {
        Some(_) => view.maybe_answers(&deps.bot_in(&view.question.channel), people),
        None => Vec::new(),
    };
    let mut judgment = judgment_of(deps, window, &target, &state, people, &scored, &maybe_answers).await?;
    let opener_state = state.opener.clone();
    drop(state);
    judgment.pick_up = true;
    if judgment.decision == Decision::Wait {
        judgment.decision = Decision::Skip;
    }
    let (respond, response_type, delay) = (judgment.respond, judgment.response_type, judgment.delay_seconds);
    let emoji = judgment.llm.as_ref().and_then(|v| v.emoji.clone());
    // Logged and kept as the question's judgment: what `/kuuki why` and the eval read.
    judgment.record(deps, question, None).await?;
    if !respond {
        crate::memory::proactive::maybe_queue(deps, &target, previous_at, &opener_state).await?;
    } else {
        let job = Job::Respond {
            thread: question.thread_key(),
            ts: question.ts.clone(),
            mode: RespondMode::PickUp,
            response_type,
            emoji,
        };
        deps.enqueue_after(job, Duration::from_secs(delay.into())).await?;
    }
    Ok(Judged::Decided)
}

/// The asker's earlier question this one joins: asked while that one still waited for
/// its own pick-up and stood open, so that pick-up reads both (one per asker per
/// burst). Its thread is read too: an answer there closed it.
async fn earlier_in_burst(
    deps: &Deps,
    window: &Window,
    view: &QuestionView<'_>,
    people: &KnownPeople,
) -> PortResult<Option<Ts>> {
    let question = view.question;
    let wait = deps.settings.judge.unanswered_question_wait;
    let asked_before = &view.before[..view.before.len() - 1];
    for (i, earlier) in asked_before.iter().enumerate().rev() {
        if earlier.user != question.user
            || earlier.author != Author::Human
            || question.at.seconds_since(earlier.at) >= deps.settings.judge.open_question_expiry.as_secs_f64()
            || !is_question(&earlier.text)
        {
            continue;
        }
        let mut after: Vec<Arc<Message>> = view.before[i + 1..view.before.len() - 1].to_vec();
        if earlier.thread_root.is_none() {
            let thread = ThreadKey::thread(earlier.channel.clone(), earlier.ts.clone());
            let limit = deps.settings.memory.channel_buffer_size;
            let replies = window.recent_in_thread(deps, &thread, earlier.at, limit).await?;
            after.extend(replies.into_iter().filter(|m| m.ts > earlier.ts && m.ts < question.ts));
            after.sort_by(|a, b| a.ts.cmp(&b.ts));
        }
        let earlier_view = QuestionView { question: earlier, before: &view.before[..=i], after: &after };
        let waiting = question.at < earlier_view.asker_turn_end() + wait;
        let open =
            earlier_view.closing(&deps.bot_in(&question.channel), people, question.at, &deps.settings.judge).is_none();
        if waiting && open && earlier_view.addressee(&deps.bot_in(&question.channel), people).is_none() {
            return Ok(Some(earlier.ts.clone()));
        }
    }
    Ok(None)
}

/// The people the open-question rules can tell by name: the channel's, as the judge
/// reads them for a `nick:` call in the question, the humans around it, and their
/// display names when a later line calls a nick none of those is (Slack's messages
/// carry only an id).
async fn load_people(
    deps: &Deps,
    window: &Window,
    question: &Arc<Message>,
    before: &[Arc<Message>],
    after: &[Arc<Message>],
) -> PortResult<KnownPeople> {
    let around = || before.iter().chain(after.iter());
    let mut people = super::people::load(deps, window, question, std::slice::from_ref(question)).await?;
    people.extend(KnownPeople::of_messages(around()));
    if naming::has_unknown_nick(after, &people) {
        let humans = around().map(|m| &**m).filter(|m| m.author == Author::Human);
        let names = context::display_names(deps, humans).await;
        people.extend(KnownPeople::new(names.iter().map(|(user, name)| (user, name.as_str()))));
    }
    Ok(people)
}

/// The newest line after `question` when something about it surely closed it since it
/// was picked up (the RESPOND of a pick-up is superseded by that alone).
pub async fn settled_since(deps: &Deps, window: &Window, question: &Arc<Message>) -> PortResult<Option<Arc<Message>>> {
    let mut after = window.messages_after(deps, question).await?;
    after.sort_by(|a, b| a.ts.cmp(&b.ts));
    let before = [question.clone()];
    let people = KnownPeople::of_messages(before.iter().chain(after.iter()));
    let view = QuestionView { question, before: &before, after: &after };
    Ok(view.surely_closed(&deps.bot_in(&question.channel), &people).and(after.last().cloned()))
}

/// Logs why the pick-up of `ts` ends here.
fn drop_it(deps: &Deps, thread: &ThreadKey, ts: &Ts, reason: &str) -> PortResult<()> {
    let kind = EventKind::Dropped { stage: Stage::PickUp, reason: reason.into() };
    record(deps, &thread.channel, thread.root.clone(), ts.clone(), kind);
    Ok(())
}
