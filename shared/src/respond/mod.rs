//! The respond worker (docs/design.md §8.1): claim the answer, react or generate and post, then
//! record it so cooldown, engagement and the intervention history see it.

mod disclosure;
pub mod guard;
pub mod opener;
pub mod output;
mod persona_echo;
mod phrases;

use std::sync::Arc;
use std::time::Duration;

use crate::context;
use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::{
    Author, EventKind, FactUse, Familiarity, Intervention, Message, RespondMode, ResponseType, Stage, ThreadKey, Ts,
    deferred_interaction_key,
};
use crate::judge::rules;
use crate::ports::{ClaimOutcome, LlmRequest, LlmRole, PortError, PortResult, Post};
use crate::record::record;

/// How long a completed answer is remembered against redeliveries.
const CLAIM_KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// Token limits: a short acknowledgement is a line (spec 001: 50).
const SHORT_ACK_TOKENS: u32 = 50;
const FULL_RESPONSE_TOKENS: u32 = 1024;

/// Handles a RESPOND job. Errors are backend failures: the claim is released and the
/// queue delivers the job again, which never posts twice: a post that may have gone
/// out is looked for before anything is posted again.
pub async fn handle(
    deps: &Deps,
    thread: &ThreadKey,
    ts: &Ts,
    mode: RespondMode,
    response_type: ResponseType,
    emoji: Option<&str>,
) -> PortResult<()> {
    let channel = &thread.channel;
    // One read of the channel: the message, what came after it, its conversation.
    let window = Window::read(deps, channel).await?;
    let Some(target) = window.get_message(deps, channel, ts).await? else {
        record(deps, channel, thread.root.clone(), ts.clone(), dropped("the message was deleted"));
        return Ok(());
    };
    let newer = match mode {
        RespondMode::Ambient | RespondMode::Opener => {
            window.newer_message(deps, &target, |m| deps.is_participant(m)).await?
        }
        // A question picked up is still open unless something about it closed it.
        RespondMode::PickUp => crate::judge::pickup::settled_since(deps, &window, &target).await?,
        // Direct triggers that arrive together are answered once, by the newest.
        RespondMode::Direct => {
            window
                .newer_message(deps, &target, |m| {
                    deps.is_participant(m) && rules::direct_trigger(m, &deps.bot_in(&m.channel)).is_some()
                })
                .await?
        }
    };
    if let Some(newer) = newer {
        record(
            deps,
            channel,
            thread.root.clone(),
            ts.clone(),
            EventKind::Superseded { stage: Stage::Respond, by: newer.ts.clone() },
        );
        return Ok(());
    }

    let key = format!("respond:{channel}:{ts}");
    let now = deps.clock.now();
    let resumed = match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Claimed => false,
        ClaimOutcome::Resumed => true,
        // Another delivery is answering: try again once its lease has run out, in case
        // it died (dropping this delivery could lose the answer).
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        ClaimOutcome::Completed => {
            record(deps, channel, thread.root.clone(), ts.clone(), dropped("already answered"));
            return Ok(());
        }
    };
    let answering = Answering { target: &target, key: &key, mode, response_type };
    match answer(deps, &window, &answering, emoji, resumed).await {
        Ok(()) => Ok(()),
        // The platform refused (a missing channel, a revoked token): retrying would
        // fail the same way, so the answer is given up and logged.
        Err(PortError::Rejected { message, .. }) => {
            deps.ledger.complete(&key, deps.clock.now(), CLAIM_KEEP).await?;
            record(
                deps,
                channel,
                thread.root.clone(),
                ts.clone(),
                EventKind::RespondFailed { mode, response_type, reason: message, notice: None },
            );
            Ok(())
        }
        Err(e) => {
            deps.ledger.release(&key).await?;
            Err(e)
        }
    }
}

/// The answer being made: to which message, under which claim, how.
struct Answering<'a> {
    target: &'a Message,
    key: &'a str,
    mode: RespondMode,
    response_type: ResponseType,
}

/// Makes and records the answer.
async fn answer(
    deps: &Deps,
    window: &Window,
    answering: &Answering<'_>,
    chosen_emoji: Option<&str>,
    resumed: bool,
) -> PortResult<()> {
    let Answering { target, key, mode, response_type } = *answering;
    let channel = &target.channel;
    let state = deps.channels.channel_state(channel).await?;
    // Slack took kuuki's access away: no post is tried (and none retried).
    if let Some(reason) = crate::memory::purge::stopped_by_uninstall(deps, &state, target).await? {
        deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
        record(deps, channel, target.thread_root.clone(), target.ts.clone(), dropped(reason));
        return Ok(());
    }
    // Shadow mode: decided and logged, not posted (in plain shadow mode, direct answers
    // are still posted).
    let silenced = state.silenced_at(deps.clock.now(), mode);
    // An earlier attempt began to post and its outcome is unknown (it crashed, timed
    // out, or never heard back): if its post is there, the answer is done.
    let found = if resumed && response_type != ResponseType::ReactOnly {
        deps.chat.find_post(channel, answer_thread(deps, target, mode).as_ref(), &target.ts, key).await?
    } else {
        None
    };
    // The whole window only when a model will read it; the history quotes a few.
    let conversation = if deps.llm.is_some() && response_type != ResponseType::ReactOnly && found.is_none() {
        context::load_conversation(deps, window, target).await?
    } else {
        context::load_recent(deps, window, target, context::EXCERPT_MESSAGES).await?
    };
    let mut facts = Vec::new();
    let (posted_ts, text, emoji) = match (response_type, found) {
        (_, Some(found)) => {
            tracing::info!(key, ts = %found.ts, "an earlier attempt's post was found; not posting again");
            deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
            store_own(deps, target, answer_thread(deps, target, mode), &found.ts, &found.text).await?;
            (Some(found.ts), Some(found.text), None)
        }
        (ResponseType::ReactOnly, None) => {
            let emoji = chosen_emoji.unwrap_or_else(|| rules::pick_emoji(&target.text));
            if !silenced {
                // Reactions repeat harmlessly (`already_reacted`).
                deps.chat.add_reaction(channel, &target.ts, emoji).await?;
            }
            deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
            (None, None, Some(emoji.to_owned()))
        }
        (ResponseType::ShortAck | ResponseType::FullResponse, None) => {
            let generated = generate(deps, window, target, &conversation, &state, response_type, mode).await?;
            facts = generated.facts;
            let text = match generated.text {
                Ok(text) => text,
                Err(reason) => {
                    fail_generation(deps, answering, silenced, reason).await?;
                    queue_memory(deps, window, answering, &state).await;
                    return Ok(());
                }
            };
            if silenced {
                deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
                (None, Some(text), None)
            } else {
                let posted = post(deps, target, key, mode, &text).await?;
                (Some(posted), Some(text), None)
            }
        }
    };
    queue_memory(deps, window, answering, &state).await;
    // Let go before the intervention is recorded in it, so the in-process store
    // changes its copy in place instead of copying it.
    drop(state);
    // In shadow mode kuuki did not speak: no cooldown, no engagement, no history.
    if !silenced {
        deps.channels
            .record_intervention(
                channel,
                Intervention {
                    at: deps.clock.now(),
                    // The question's conversation, where its talk goes on (cooldown and
                    // engagement read it; a pick-up's post sits in a thread under it).
                    thread: target.thread_key(),
                    response_type,
                    excerpt: context::excerpt(&conversation),
                    facts: facts.clone(),
                    // Only a post said unasked: how the channel takes it is watched.
                    unasked_post: posted_ts.clone().filter(|_| mode.unasked()),
                    pick_up: mode == RespondMode::PickUp,
                },
            )
            .await?;
    }
    record(
        deps,
        channel,
        target.thread_root.clone(),
        target.ts.clone(),
        EventKind::Respond {
            mode,
            response_type,
            posted_in: answer_thread(deps, target, mode),
            posted_ts,
            text,
            emoji,
            shadow: silenced,
            facts,
        },
    );
    Ok(())
}

/// A direct trigger has no judgment to run the memory triggers; an ambient answer's
/// judge ran them already. The channel state read for the answer serves them, and so
/// does the window read before it: they count up to the message answered, so kuuki's
/// own reply counts at the next message on every store (a summary comes a message later
/// at most). Run once the answer is out; a redelivery that runs them again is harmless
/// (marks dedupe).
async fn queue_memory(deps: &Deps, window: &Window, answering: &Answering<'_>, state: &crate::ports::ChannelState) {
    if answering.mode == RespondMode::Direct && crate::memory::enabled(deps) {
        crate::memory::queue_due_and_note(deps, window, answering.target, state).await;
    }
    // No judgment read this message: the talkativeness signals it carries (thanks, a
    // hush, a reply to an unasked post) are read here. Counted once, at the next
    // message if this fails.
    if answering.mode == RespondMode::Direct
        && let Err(error) = crate::talkativeness::notice(deps, window, state, answering.target).await
    {
        tracing::warn!(%error, channel = %answering.target.channel, "talkativeness signals not counted");
    }
}

/// A generation that failed or gave something unfit to post: nothing in ambient mode;
/// for a direct mention one short, honest line (`DIRECT_FAILURE_NOTICE`), so the person
/// who asked is not left waiting. Either way the answer is complete: a model that
/// failed once is not asked again by a redelivery.
async fn fail_generation(deps: &Deps, answering: &Answering<'_>, silenced: bool, reason: String) -> PortResult<()> {
    let target = answering.target;
    let notice = (answering.mode == RespondMode::Direct && deps.settings.judge.direct_failure_notice && !silenced)
        .then(|| failure_notice(deps.settings.bot.prompt_language).to_owned());
    match &notice {
        Some(text) => {
            post(deps, target, answering.key, answering.mode, text).await?;
        }
        None => deps.ledger.complete(answering.key, deps.clock.now(), CLAIM_KEEP).await?,
    }
    record(
        deps,
        &target.channel,
        target.thread_root.clone(),
        target.ts.clone(),
        EventKind::RespondFailed { mode: answering.mode, response_type: answering.response_type, reason, notice },
    );
    Ok(())
}

/// The one line a direct mention gets when no answer can be made.
pub fn failure_notice(language: crate::config::PromptLanguage) -> &'static str {
    match language {
        crate::config::PromptLanguage::Ja => {
            "ごめんなさい、今はうまく答えられません。少し時間をおいてもう一度呼んでください。"
        }
        crate::config::PromptLanguage::En => "Sorry, I can't answer right now. Please ask me again in a little while.",
    }
}

/// Posts `text` where `target` was written, in parts when it is longer than the
/// platform takes. The claim is marked as posting first (so a later attempt looks for
/// this post before posting) and completed after the first part (a redelivery must
/// never post again: a lost tail is better than a repeated head); each part is stored
/// as kuuki's own message. Returns the first part's ts.
pub(crate) async fn post(deps: &Deps, target: &Message, key: &str, mode: RespondMode, text: &str) -> PortResult<Ts> {
    let parts = match deps.chat.max_message_chars(&target.channel) {
        Some(limit) => split_message(text, limit),
        None => vec![text.to_owned()],
    };
    deps.ledger.mark_posting(key).await?;
    // `/kuuki ask` on Discord left a deferred interaction for this message to complete.
    let completes = if mode == RespondMode::Direct && target.channel.is_discord() {
        let at = deps.clock.now();
        deps.ledger.cache_get(&deferred_interaction_key(&target.channel, &target.ts), at).await?
    } else {
        None
    };
    let thread_root = answer_thread(deps, target, mode);
    let mut first = None;
    for part in parts {
        let post = Post {
            channel: target.channel.clone(),
            thread_root: thread_root.clone(),
            text: part.clone(),
            tag: first.is_none().then(|| key.to_owned()),
            // A direct answer replies to the message that called kuuki (a Discord reply);
            // so does a question's pick-up where it cannot open a thread under it.
            reply_to: (first.is_none()
                && ((mode == RespondMode::Direct && completes.is_none())
                    || (mode == RespondMode::PickUp && thread_root.as_ref() != Some(&target.ts))))
            .then(|| target.ts.clone()),
            completes: completes.clone().filter(|_| first.is_none()),
        };
        let posted = match deps.chat.post_message(&post).await {
            Ok(posted) => posted,
            // A later part: the answer stands (its head is posted); the tail is lost.
            Err(error) if first.is_some() => {
                tracing::warn!(%error, key, "a later part of a long answer could not be posted");
                break;
            }
            Err(error) => return Err(error),
        };
        if first.is_none() {
            deps.ledger.complete(key, deps.clock.now(), CLAIM_KEEP).await?;
            first = Some(posted.clone());
        }
        store_own(deps, target, thread_root.clone(), &posted, &part).await?;
    }
    Ok(first.expect("split_message returns at least one part, and the first one was posted"))
}

/// Where kuuki's answer to `target` goes: its conversation, or for a question picked
/// up at the top level, a thread under it where the platform has threads (so everyone
/// sees what it answers; elsewhere the post replies to it).
fn answer_thread(deps: &Deps, target: &Message, mode: RespondMode) -> Option<Ts> {
    match &target.thread_root {
        None if mode == RespondMode::PickUp && deps.chat.threads(&target.channel) => Some(target.ts.clone()),
        root => root.clone(),
    }
}

/// Stores a message kuuki posted in `thread_root` of `target`'s channel as its own, written when
/// its id says it was posted (a post an earlier attempt made and a resumed one found
/// is older than now: the conversation reads count on `at` growing with the ts).
async fn store_own(deps: &Deps, target: &Message, thread_root: Option<Ts>, ts: &Ts, text: &str) -> PortResult<()> {
    let now = deps.clock.now();
    let own = Message {
        channel: target.channel.clone(),
        ts: ts.clone(),
        thread_root,
        user: deps.bot_in(&target.channel).user_in(&target.channel).clone(),
        user_name: deps.persona.name.clone(),
        text: text.to_owned(),
        author: Author::OwnBot,
        replies_to_bot: false,
        replies_to: Some(target.ts.clone()),
        in_dm: target.in_dm,
        private_channel: target.private_channel,
        at: ts.posted_at().map_or(now, |posted| posted.min(now)),
    };
    deps.messages.put_message(&std::sync::Arc::new(own)).await?;
    Ok(())
}

/// Splits `text` into parts of at most `limit` characters, at a paragraph, a line, a
/// sentence or a space when one is near, mid-word only when nothing else is.
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while rest.chars().count() > limit {
        let cut_at = crate::domain::first_chars(rest, limit).len();
        let window = &rest[..cut_at];
        let boundary = ["\n\n", "\n", "。", ". ", "！", "? ", "？", " "]
            .iter()
            .filter_map(|sep| window.rfind(sep).map(|i| i + sep.len()))
            .find(|&i| i > cut_at / 2);
        let cut = boundary.unwrap_or(cut_at);
        parts.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest.to_owned());
    }
    parts
}

/// A generated answer and the facts it was given.
struct Generated {
    /// The text to post, or why there is none (nothing is posted).
    text: Result<String, String>,
    facts: Vec<FactUse>,
}

/// `target`'s text and the lines its writer added after it in its conversation, each
/// within `wait` of the one before (their burst: a follow-up, a second question that
/// joined this one's pick-up), from `conversation`.
fn asker_turn_from(target: &Message, conversation: &[Arc<Message>], wait: std::time::Duration) -> String {
    let mut lines = vec![target.text.as_str()];
    let mut last = target.at;
    let start = conversation.iter().position(|m| m.ts == target.ts).map_or(conversation.len(), |i| i + 1);
    for m in &conversation[start..] {
        let theirs = m.user == target.user && m.author == target.author && m.thread_root == target.thread_root;
        if theirs && m.at.seconds_since(last) <= wait.as_secs_f64() {
            lines.push(&m.text);
            last = m.at;
        }
    }
    lines.join("\n")
}

/// The text to post. The error is a backend failure.
async fn generate(
    deps: &Deps,
    window: &Window,
    target: &Message,
    conversation: &[Arc<Message>],
    state: &crate::ports::ChannelState,
    response_type: ResponseType,
    mode: RespondMode,
) -> PortResult<Generated> {
    // A question picked up is answered with the asker's lines after it ("not pushed
    // yet"), as they were judged.
    let asked = match mode {
        RespondMode::PickUp => asker_turn_from(target, conversation, deps.settings.judge.unanswered_question_wait),
        _ => target.text.clone(),
    };
    let Some(llm) = &deps.llm else {
        return Ok(Generated { text: Ok(placeholder(deps, target, response_type)), facts: Vec::new() });
    };
    let mut ctx = context::build(deps, window, target, conversation, state, response_type).await?;
    let mut facts = Vec::new();
    // Facts are looked up only now that kuuki answers (spec 001), in this channel only.
    if deps.settings.memory.enabled {
        let stored = deps.facts.facts(&target.channel).await?;
        let now = deps.clock.now();
        let half_life = deps.settings.memory.fact_decay_half_life_days;
        let embedding = message_embedding(deps, &stored, target).await;
        facts = crate::memory::reflect::search(&stored, &asked, embedding.as_deref(), &target.user.0, now, half_life)
            .into_iter()
            .map(|m| FactUse { id: m.fact.id, content: m.fact.content, score: (m.score * 1000.0).round() / 1000.0 })
            .collect();
        ctx.facts = facts.iter().map(|f| crate::prompts::fence::fence_safe(&f.content)).collect();
        if deps.settings.people.user_profile_enabled {
            ctx.speaker = Some(speaker(deps, target, conversation).await?);
        }
    }
    let prompt = deps.prompts.generate(&ctx);
    let request = LlmRequest {
        role: LlmRole::Generate,
        model: deps.settings.llm.model.clone(),
        system: prompt.system.clone(),
        user: prompt.user.clone(),
        max_tokens: match response_type {
            ResponseType::ShortAck => SHORT_ACK_TOKENS,
            _ => FULL_RESPONSE_TOKENS,
        },
        temperature: deps.settings.temperature(LlmRole::Generate),
        schema: None,
        subject: asked,
    };
    let text = match llm.complete(request).await {
        Ok(response) => output::fit_to_post(&response)
            .and_then(|()| guard::check_reply(&response.text, &prompt.whole(), &deps.persona.name)),
        Err(e) => Err(e.to_string()),
    };
    Ok(Generated { text, facts })
}

/// `text` without the platform's markup (`<@U123>` mentions, `<https://…|links>`),
/// which would read as topics.
fn without_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Topics kept per person and channel (spec 001's `last_topic`).
const LAST_TOPICS: usize = 8;

/// Who kuuki answers: their familiarity from the workspace counters, what it noted
/// about them in this channel. Notes the topics they speak of now for next time (this
/// channel's note only: what someone says in one channel stays there).
async fn speaker(deps: &Deps, target: &Message, conversation: &[Arc<Message>]) -> PortResult<context::SpeakerContext> {
    let (profile, note) = deps.facts.profile_and_note(&target.channel, &target.user).await?;
    let interactions = profile.map_or(0, |p| p.interactions);
    let familiarity = Familiarity::of(interactions, deps.settings.people.familiarity_thresholds);
    let speaker = context::SpeakerContext::new(familiarity, interactions, note.as_ref());
    let mut topics: Vec<String> = Vec::new();
    let theirs = conversation.iter().map(|m| &**m).chain(std::iter::once(target)).filter(|m| m.user == target.user);
    for m in theirs.collect::<Vec<_>>().into_iter().rev() {
        for k in crate::memory::keywords::keywords(&without_markup(&m.text)) {
            if topics.len() < LAST_TOPICS && !topics.contains(&k) {
                topics.push(k);
            }
        }
    }
    if !topics.is_empty() && note.as_ref().is_none_or(|n| n.last_topics != topics) {
        // The topics alone: a reflection may add to the note meanwhile.
        deps.facts.note_topics(&target.channel, &target.user, &topics, deps.clock.now()).await?;
    }
    Ok(speaker)
}

/// The embedding of the message answered, for vector fact search: one call, made only
/// when the channel has facts with embeddings to compare. A failed call leaves the
/// search to keywords; the reply is made all the same.
async fn message_embedding(deps: &Deps, facts: &[crate::domain::Fact], target: &Message) -> Option<Vec<f32>> {
    let embedder = deps.embedder.as_ref()?;
    if !facts.iter().any(|f| f.embedding.is_some()) {
        return None;
    }
    match embedder.embed(std::slice::from_ref(&target.text)).await {
        Ok(mut vectors) if vectors.len() == 1 => vectors.pop(),
        Ok(vectors) => {
            tracing::warn!(got = vectors.len(), "asked for one embedding; facts are searched by keywords");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "could not embed the message; facts are searched by keywords");
            None
        }
    }
}

/// With `--llm none`: a visible stand-in that says what kuuki would have said.
fn placeholder(deps: &Deps, target: &Message, response_type: ResponseType) -> String {
    let quoted = crate::domain::first_chars(&target.text, 40);
    format!("[{} {} to {}: \"{}\"]", deps.persona.name, response_type.as_str(), target.user_name, quoted)
}

fn dropped(reason: &str) -> EventKind {
    EventKind::Dropped { stage: Stage::Respond, reason: reason.into() }
}

#[cfg(test)]
mod tests {
    use super::split_message;

    #[test]
    fn short_replies_are_one_part() {
        assert_eq!(split_message("hello", 10), vec!["hello"]);
        assert_eq!(split_message("", 10), vec![""]);
    }

    #[test]
    fn long_replies_split_at_natural_boundaries_within_the_limit() {
        let text = format!("{}\n\n{}", "a".repeat(30), "b".repeat(30));
        assert_eq!(split_message(&text, 40), vec!["a".repeat(30), "b".repeat(30)]);
        let ja = "今日はデプロイの日です。".repeat(10);
        let parts = split_message(&ja, 50);
        assert!(parts.iter().all(|p| p.chars().count() <= 50 && p.ends_with('。')), "{parts:?}");
        assert_eq!(parts.concat(), ja);
        let words = "word ".repeat(30);
        let parts = split_message(&words, 23);
        assert!(parts.iter().all(|p| p.chars().count() <= 23 && !p.ends_with(' ')), "{parts:?}");
        // Nothing to split at: cut mid-word, never over the limit, nothing lost.
        let blob = "x".repeat(95);
        let parts = split_message(&blob, 40);
        assert_eq!(parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(), vec![40, 40, 15]);
    }
}
