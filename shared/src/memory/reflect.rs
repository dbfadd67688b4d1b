//! Reflection (spec 001 tier three): when a channel falls quiet for
//! `REFLECTION_LULL_MINUTES` after at least `REFLECTION_MIN_MESSAGES` new messages, or
//! when `REFLECTION_MAX_BUFFER_MESSAGES` pile up, the LLM extracts facts worth
//! remembering and notes about people. A watermark keeps the same messages from
//! yielding the same facts twice; a fact restated strengthens the one known.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::keywords::{jaccard, keywords};
use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::{Author, ChannelId, EventKind, Fact, Job, Message, Stage, Timestamp, Ts, UserId};
use crate::ports::{ChannelState, FactRevision, LlmRequest, LlmRole, MemoryTask, PortResult};
use crate::prompts::answers::{AnswerError, answer_object, answer_strings, read_answer};
use crate::prompts::fence::fence_safe;
use crate::record::record;

/// Most new messages one reflection reads (the rest wait for the next one).
const MAX_MESSAGES: usize = 200;
/// The channel's newest messages a lull job reads first to find a newer one (kuuki's
/// own answers do not count, so a few).
const OUTRUN_CHECK: usize = 5;
/// Keyword overlap at which a new fact is the same as a known one.
const SAME_FACT: f64 = 0.6;
/// A fact whose weight (confidence × decay) falls under this is forgotten.
pub const FORGET_BELOW: f64 = 0.05;
/// Facts a reply may draw on.
pub const FACTS_PER_REPLY: usize = 3;
/// A fact about the speaker counts this much more.
const SPEAKER_BOOST: f64 = 1.5;
const CLAIM_KEEP: Duration = Duration::from_secs(24 * 3600);

/// Called for each handled message (`memory::queue_due`): reflect now when the buffer
/// is full, else after the lull. Returns when a lull's reflection is queued for, to be
/// noted ([`ChannelState::reflection_lull_at`]: a judgment with its note, others when
/// this call queued the job); `None` when this message queued none.
///
/// One lull job per channel at a time, not one per message: a judgment before the time
/// the last one noted queues none, because the job queued then finds this message when
/// it runs and queues itself again, for a lull after the newest message (`handle`). So
/// a noted time is never later than the run that will see the message: a job's run
/// that reflects comes a lull after every message stored before it, and a message
/// stored after it finds every time noted before it passed. A job may have a twin (a
/// redelivery after it queued itself again, two triggers that ran before either's note
/// was written, an outrun full-buffer job): both wait for the same quiet, and the
/// reflection's claim lets one of them reflect.
pub async fn maybe_queue(
    deps: &Deps,
    window: &Window,
    channel: &ChannelId,
    newest: &Message,
    state: &ChannelState,
) -> PortResult<Option<LullNote>> {
    let s = &deps.settings;
    let now = deps.clock.now();
    if deps.llm.is_none()
        || !s.memory.reflection_enabled
        || !s.memory.enabled
        || state.retry_after(MemoryTask::Reflection).is_some_and(|t| t > now)
    {
        return Ok(None);
    }
    let max = s.memory.reflection_max_buffer_messages as usize;
    // Counted in the window the caller read; the store is asked only when the window
    // holds fewer than `max` and does not reach back to the watermark.
    let new = window.count_after(deps, channel, state.reflection_watermark.as_ref(), &newest.ts, max).await?;
    if new < s.memory.reflection_min_messages as usize {
        return Ok(None);
    }
    let job = Job::Reflect { channel: channel.clone(), ts: newest.ts.clone() };
    if new >= max {
        // Marked for a moment, so the messages handled around it do not queue it again.
        if !state.mark_blocked(MemoryTask::Reflection, now + IMMEDIATE_MARK, now)
            && deps.channels.mark_due(channel, MemoryTask::Reflection, now + IMMEDIATE_MARK, now).await?
        {
            deps.enqueue_after(job, Duration::ZERO).await?;
        }
        return Ok(None);
    }
    let due = newest.at + lull(deps);
    // Held while queueing: the jobs of one batch run together and read the state
    // before any of them has noted its job, so they ask this process's notes too.
    let mut queued = deps.lull_reflections.lock().await;
    let noted = state.reflection_lull_at.into_iter().chain(queued.get(channel).copied()).max();
    if let Some(noted) = noted.filter(|noted| *noted > now) {
        let due = due.max(noted);
        queued.insert(channel.clone(), due);
        return Ok(Some(LullNote { at: due, queued: false }));
    }
    deps.enqueue_after(job, Duration::from_secs(due.whole_seconds_after(now))).await?;
    queued.retain(|_, noted| *noted > now);
    queued.insert(channel.clone(), due);
    Ok(Some(LullNote { at: due, queued: true }))
}

/// When a lull's reflection will run ([`maybe_queue`]), and whether this message's
/// handling queued it (then what is not a judgment notes it on its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LullNote {
    pub at: Timestamp,
    pub queued: bool,
}

fn lull(deps: &Deps) -> Duration {
    Duration::from_secs(u64::from(deps.settings.memory.reflection_lull_minutes) * 60)
}

/// A lull job that found `newer`, a participant's message after its own: queued again
/// for a lull after it, and true, unless that lull is over already (false: reflect now).
async fn wait_again(deps: &Deps, channel: &ChannelId, newer: &Message) -> PortResult<bool> {
    let due = newer.at + lull(deps);
    let now = deps.clock.now();
    if due <= now {
        return Ok(false);
    }
    let job = Job::Reflect { channel: channel.clone(), ts: newer.ts.clone() };
    deps.enqueue_after(job, Duration::from_secs(due.whole_seconds_after(now))).await?;
    Ok(true)
}

/// The newest of `messages` (oldest first) a participant wrote, if it is after `ts`.
fn newest_participant_after<'m>(deps: &Deps, messages: &'m [Arc<Message>], ts: &Ts) -> Option<&'m Message> {
    messages.iter().rev().find(|m| deps.is_participant(m)).filter(|m| m.ts > *ts).map(|m| &**m)
}

/// How long a full-buffer reflection holds its mark.
const IMMEDIATE_MARK: Duration = Duration::from_secs(60);

#[derive(Serialize)]
struct ReflectContext<'a> {
    persona_name: &'a str,
    messages: Vec<String>,
    known_facts: Vec<String>,
}

/// Handles a REFLECT job. Errors are backend failures; the queue delivers again.
pub async fn handle(deps: &Deps, channel: &ChannelId, ts: &Ts) -> PortResult<()> {
    if deps.llm.is_none() {
        return Ok(());
    }
    // A lull job that finds a newer message waits again, for a lull after it: asked of
    // the channel's newest few messages first, one small read, before the channel's
    // state and its messages since the watermark (a full buffer does not wait for
    // this job: the judgment that filled it queued a reflection at once).
    let newest = deps.messages.channel_window(channel, OUTRUN_CHECK).await?;
    let mut ts = ts.clone();
    if let Some(newer) = newest_participant_after(deps, &newest.messages, &ts) {
        if wait_again(deps, channel, newer).await? {
            return Ok(());
        }
        ts = newer.ts.clone();
    }
    let s = &deps.settings;
    let state = deps.channels.channel_state(channel).await?;
    if state.retry_after(MemoryTask::Reflection).is_some_and(|t| t > deps.clock.now()) {
        return Ok(());
    }
    let read_at = deps.clock.now();
    let new = deps.messages.messages_after(channel, state.reflection_watermark.as_ref(), MAX_MESSAGES).await?;
    let full = new.len() >= s.memory.reflection_max_buffer_messages as usize;
    // Not quiet after all (the newest few were kuuki's own: its answers do not count,
    // a DM ends with one every time). A full buffer is reflected on now, and the quiet
    // after the newer message still gets its job: judgments before its noted time
    // queued none.
    if let Some(newer) = newest_participant_after(deps, &new, &ts) {
        if wait_again(deps, channel, newer).await? && !full {
            return Ok(());
        }
        ts = newer.ts.clone();
    }
    if new.len() < s.memory.reflection_min_messages as usize {
        return Ok(());
    }
    let watermark = state.reflection_watermark.as_ref().map_or("-", Ts::as_str);
    let key = format!("reflect:{channel}:{watermark}");
    match deps.ledger.claim(&key, deps.clock.now(), deps.budget.claim_lease()).await? {
        // Another delivery holds it and will do the work (or its lease runs out and
        // the next message queues it again).
        outcome if outcome.holds() => {}
        _ => return Ok(()),
    }
    let marked = state.reflection_due.is_some() || state.reflection_retry_after.is_some();
    let result = reflect_claimed(deps, channel, &ts, &new, (read_at, marked), &key).await;
    if result.is_err() {
        deps.ledger.release(&key).await?;
    }
    result
}

async fn reflect_claimed(
    deps: &Deps,
    channel: &ChannelId,
    ts: &Ts,
    new: &[Arc<Message>],
    (read_at, marked): (Timestamp, bool),
    key: &str,
) -> PortResult<()> {
    let Some(llm) = &deps.llm else { return Ok(()) };
    // Read once: the facts are written back only as read (see `merge_facts`).
    let known = deps.facts.facts_as_read(channel).await?;
    let prompt = deps.prompts.reflect(&ReflectContext {
        persona_name: &deps.persona.name,
        messages: new.iter().map(|m| line(deps, m)).collect(),
        known_facts: known.iter().map(|(f, _)| fence_safe(&f.content)).collect(),
    });
    let answer = llm
        .complete(LlmRequest {
            role: LlmRole::Reflect,
            model: deps.settings.llm.reflection_model.clone(),
            system: prompt.system,
            user: prompt.user,
            max_tokens: 1200,
            temperature: deps.settings.temperature(LlmRole::Reflect),
            schema: Some(crate::prompts::answers::reflection()),
            subject: format!("reflection on {channel}"),
        })
        .await;
    let (mut facts, mut notes) = match read_answer(answer, parse_reflection) {
        Ok(parsed) => parsed,
        Err(reason) => {
            // The next try waits a lull.
            let wait = lull(deps);
            let task = (MemoryTask::Reflection, Stage::Reflect);
            let reason = format!("unusable reflection: {reason}");
            return super::give_up_for_now(deps, key, channel, ts, task, wait, reason).await;
        }
    };
    let now = deps.clock.now();
    let speakers = Speakers(new);
    let people = People::of(deps, new, read_at);
    people.drop_forgotten(deps, &speakers, &mut facts, &mut notes).await?;
    let facts_merged = merge_facts(deps, channel, known, facts, (&speakers, &people), now).await?;
    if facts_merged.refused {
        // A write found its fact changed: maybe a forget at work. Asked again before the notes.
        people.drop_forgotten(deps, &speakers, &mut Vec::new(), &mut notes).await?;
    }
    // Notes only about people who spoke here, kept in this channel under their id.
    let mut noted = 0;
    for note in notes.iter().filter(|_| deps.settings.people.user_profile_enabled) {
        let Some(user) = speakers.id_of(&note.user) else {
            tracing::info!(name = %note.user, "a note about someone who did not speak here is not kept");
            continue;
        };
        noted += 1;
        // Added to the note without reading it: an answer may note their topics meanwhile.
        deps.facts.note_reflection(channel, user, &note.tags, &note.summary, now).await?;
    }
    let newest = new.last().map(|m| m.ts.clone()).expect("reflection needs messages");
    deps.channels.set_reflection_watermark(channel, newest).await?;
    // The marks are in the channel's large item: written only when there is one.
    if marked {
        deps.channels.clear_marks(channel, MemoryTask::Reflection).await?;
    }
    deps.ledger.complete(key, now, CLAIM_KEEP).await?;
    record(
        deps,
        channel,
        None,
        ts.clone(),
        EventKind::Reflect {
            messages: new.len(),
            facts_new: facts_merged.added,
            facts_strengthened: facts_merged.strengthened,
            profiles: noted,
            embedding_error: facts_merged.embedding_error,
        },
    );
    Ok(())
}

/// A fact as the LLM gives it, before it is merged.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFact {
    pub content: String,
    pub keywords: Vec<String>,
    /// Names (or ids) as the model wrote them.
    pub source_users: Vec<String>,
    /// The 1-based numbers of the messages it came from, as the prompt numbered them.
    pub messages: Vec<usize>,
    pub confidence: f64,
    pub shareable: bool,
}

/// A note about a person as the LLM gives it: `user` is a name (or an id).
#[derive(Debug, Clone, PartialEq)]
pub struct NewNote {
    pub user: String,
    pub tags: Vec<String>,
    pub summary: String,
}

/// Who wrote the messages reflected on, so the names a model writes become ids: notes
/// and sources are kept by id (a forget request finds them; names change).
struct Speakers<'a>(&'a [Arc<Message>]);

impl Speakers<'_> {
    fn id_of(&self, name_or_id: &str) -> Option<&UserId> {
        let m = self.0.iter().filter(|m| m.author != Author::OwnBot);
        m.clone()
            .find(|m| m.user.0 == name_or_id.into())
            .or_else(|| m.clone().find(|m| m.user_name == name_or_id))
            .map(|m| &m.user)
    }

    /// The messages a fact came from: the numbers the model gave when they are valid,
    /// else its sources' messages that share a keyword with it, else all of theirs.
    fn sources(&self, fact: &NewFact, sources: &[UserId], keywords: &[String]) -> Vec<Ts> {
        let numbered: Vec<Ts> = fact
            .messages
            .iter()
            .filter_map(|n| n.checked_sub(1).and_then(|i| self.0.get(i)))
            .map(|m| m.ts.clone())
            .collect();
        if !numbered.is_empty() {
            return numbered;
        }
        let theirs: Vec<&Message> = self.0.iter().map(|m| &**m).filter(|m| sources.contains(&m.user)).collect();
        let sharing: Vec<Ts> = theirs
            .iter()
            .filter(|m| super::keywords::keywords(&m.text).iter().any(|k| keywords.contains(k)))
            .map(|m| m.ts.clone())
            .collect();
        if sharing.is_empty() { theirs.iter().map(|m| m.ts.clone()).collect() } else { sharing }
    }
}

/// What one reflection did to the channel's facts.
struct Merged {
    added: usize,
    strengthened: usize,
    /// Why the facts to embed were stored without an embedding.
    embedding_error: Option<String>,
    /// Whether a write found its fact changed since it was read.
    refused: bool,
}

/// Everyone a reflection's messages are about: who spoke (with the name they wrote
/// under) and whom a message mentions, and when the messages were read.
struct People<'m> {
    checked: Vec<(&'m str, &'m str)>,
    read_at: Timestamp,
}

impl<'m> People<'m> {
    fn of(deps: &Deps, new: &'m [Arc<Message>], read_at: Timestamp) -> Self {
        let mut checked: Vec<(&str, &str)> = Vec::new();
        let bot = new.first().map_or_else(|| deps.bot.clone(), |m| deps.bot_in(&m.channel));
        let spoke = new.iter().filter(|m| m.author != Author::OwnBot).map(|m| (m.user.as_str(), m.user_name.as_str()));
        let mentioned = new.iter().flat_map(|m| crate::domain::mentioned_ids(&m.text)).map(|id| (id, ""));
        for (id, spoken_name) in spoke.chain(mentioned) {
            if !checked.iter().any(|(seen, _)| *seen == id) && !bot.is_me(id) {
                checked.push((id, spoken_name));
            }
        }
        People { checked, read_at }
    }

    /// Someone forgotten since their messages were read (the model took a while): the
    /// forget may have removed their facts and notes already, so nothing learned from
    /// or about them is kept. That is anyone who spoke here, or whom a message here
    /// mentions (a fact about them may come from what others said).
    async fn drop_forgotten(
        &self,
        deps: &Deps,
        speakers: &Speakers<'_>,
        facts: &mut Vec<NewFact>,
        notes: &mut Vec<NewNote>,
    ) -> PortResult<()> {
        let users: Vec<UserId> = self.checked.iter().map(|(id, _)| UserId((*id).into())).collect();
        let marks = super::forget::forgotten_among(deps, &users, self.read_at).await?;
        let mut forgotten: Vec<(UserId, String)> = Vec::new();
        for ((user, (_, spoken_name)), name) in users.into_iter().zip(&self.checked).zip(marks) {
            if let Some(name) = name {
                // By the display name the forget looked up (a message's name may be the
                // id, as Slack gives people's), and by the name they wrote under here.
                if !spoken_name.is_empty() && *spoken_name != name {
                    forgotten.push((user.clone(), (*spoken_name).to_owned()));
                }
                forgotten.push((user, name));
            }
        }
        if !forgotten.is_empty() {
            let theirs =
                |name_or_id: &str| speakers.id_of(name_or_id).is_some_and(|id| forgotten.iter().any(|(u, _)| u == id));
            let names_them =
                |text: &str| forgotten.iter().any(|(user, name)| super::forget::names_person(text, user, name));
            facts.retain(|fact| !fact.source_users.iter().any(|s| theirs(s)) && !names_them(&fact.content));
            notes.retain(|note| !theirs(&note.user));
        }
        Ok(())
    }
}

/// Stores new facts: one restating a known fact strengthens it; then the channel keeps
/// at most `FACT_STORE_MAX_FACTS_PER_CHANNEL`, and forgets those too faded to matter.
/// With vector search on, the facts that have no embedding yet get one, all in one call.
///
/// `known` is the channel's facts as read before the model's answer: each write finds
/// its fact as read or is refused (a forget may have edited or removed it meanwhile,
/// and a fact written back from the old copy would bring the person back). The facts
/// a refused write carried are merged again into the facts as they are then, after
/// asking again who was forgotten; after [`MERGE_ATTEMPTS`] the rest are dropped.
async fn merge_facts(
    deps: &Deps,
    channel: &ChannelId,
    mut known: Vec<(Fact, FactRevision)>,
    mut pending: Vec<NewFact>,
    (speakers, people): (&Speakers<'_>, &People<'_>),
    now: Timestamp,
) -> PortResult<Merged> {
    let mut merged = Merged { added: 0, strengthened: 0, embedding_error: None, refused: false };
    for attempt in 1..=MERGE_ATTEMPTS {
        let (mut facts, revisions): (Vec<Fact>, Vec<Option<FactRevision>>) =
            known.into_iter().map(|(fact, revision)| (fact, Some(revision))).unzip();
        // Where each pending fact went (an index into `facts`), and whether it is new.
        let targets: Vec<(usize, bool)> =
            pending.iter().map(|fact| merge_one(channel, &mut facts, fact, speakers, now)).collect();
        let mut changed: Vec<usize> = targets.iter().map(|&(index, _)| index).collect();
        changed.sort_unstable();
        changed.dedup();
        if let Some(error) = embed_facts(deps, channel, &mut facts, &changed).await {
            merged.embedding_error = Some(error);
        }
        let mut refused = Vec::new();
        for &index in &changed {
            let read = revisions.get(index).copied().flatten();
            if !deps.facts.put_fact_if_unchanged(&facts[index], read).await? {
                refused.push(index);
            }
        }
        for &(_, new) in targets.iter().filter(|(index, _)| !refused.contains(index)) {
            if new {
                merged.added += 1;
            } else {
                merged.strengthened += 1;
            }
        }
        if refused.is_empty() {
            forget_faded(deps, channel, facts, now).await?;
            return Ok(merged);
        }
        merged.refused = true;
        pending = pending
            .into_iter()
            .zip(&targets)
            .filter(|(_, (index, _))| refused.contains(index))
            .map(|(f, _)| f)
            .collect();
        if attempt == MERGE_ATTEMPTS {
            // Failing the job would make its redelivery strengthen again what was stored.
            tracing::warn!(%channel, dropped = pending.len(), "facts kept changing while a reflection stored its own: the rest dropped");
            return Ok(merged);
        }
        tracing::info!(%channel, attempt, refused = refused.len(), "facts changed while the reflection waited: merged again");
        // A refusal may be a forget at work: asked again, before merging into what it left.
        people.drop_forgotten(deps, speakers, &mut pending, &mut Vec::new()).await?;
        known = deps.facts.facts_as_read(channel).await?;
    }
    Ok(merged)
}

/// How often a reflection merges its facts into facts changed meanwhile before it drops
/// the rest (a job that failed instead would strengthen again, when delivered again,
/// what it had stored).
const MERGE_ATTEMPTS: usize = 3;

/// Merges `fact` into `facts`: strengthens the one it restates (same id, or keywords
/// alike), else adds it. Where it went, and whether it was added.
fn merge_one(
    channel: &ChannelId,
    facts: &mut Vec<Fact>,
    fact: &NewFact,
    speakers: &Speakers<'_>,
    now: Timestamp,
) -> (usize, bool) {
    let source_users: Vec<String> =
        fact.source_users.iter().map(|u| speakers.id_of(u).map_or_else(|| u.clone(), |id| id.0.to_string())).collect();
    let source_ids: Vec<UserId> = source_users.iter().map(|u| UserId(u.clone().into())).collect();
    let mut kws: Vec<String> = fact.keywords.iter().map(|k| k.to_lowercase()).collect();
    for k in keywords(&fact.content) {
        if !kws.contains(&k) {
            kws.push(k);
        }
    }
    let source_messages = speakers.sources(fact, &source_ids, &kws);
    let id = fact_id(channel, &fact.content);
    match facts.iter().position(|f| f.id == id || jaccard(&f.keywords, &kws) >= SAME_FACT) {
        Some(index) => {
            let same = &mut facts[index];
            same.strength += 1;
            same.confidence = same.confidence.max(fact.confidence);
            same.confirmed_at = now;
            same.shareable |= fact.shareable;
            for u in source_users {
                if !same.source_users.contains(&u) {
                    same.source_users.push(u);
                }
            }
            for ts in source_messages {
                if !same.source_messages.contains(&ts) {
                    same.source_messages.push(ts);
                }
            }
            (index, false)
        }
        None => {
            facts.push(Fact {
                id,
                channel: channel.clone(),
                content: fact.content.clone(),
                keywords: kws,
                source_users,
                confidence: fact.confidence,
                shareable: fact.shareable,
                created_at: now,
                confirmed_at: now,
                strength: 1,
                source_messages,
                embedding: None,
            });
            (facts.len() - 1, true)
        }
    }
}

/// Keeps the channel's `FACT_STORE_MAX_FACTS_PER_CHANNEL` weightiest facts and forgets
/// those too faded to matter.
async fn forget_faded(deps: &Deps, channel: &ChannelId, mut facts: Vec<Fact>, now: Timestamp) -> PortResult<()> {
    let half_life = deps.settings.memory.fact_decay_half_life_days;
    let weight = |f: &Fact| f.confidence * decay(f, now, half_life) * f64::from(f.strength);
    facts.sort_by(|a, b| weight(b).total_cmp(&weight(a)));
    let keep = deps.settings.memory.fact_store_max_facts_per_channel as usize;
    for (i, f) in facts.iter().enumerate() {
        if i >= keep || f.confidence * decay(f, now, half_life) < FORGET_BELOW {
            deps.facts.delete_fact(channel, &f.id).await?;
        }
    }
    Ok(())
}

/// Embeds the facts at `indices` that have no embedding (new ones, and restated ones
/// learned while vector search was off or its call failed) in one call. A failed call
/// loses nothing: the facts are stored without and rank by keywords; the error is
/// returned for the decision log.
async fn embed_facts(deps: &Deps, channel: &ChannelId, facts: &mut [Fact], indices: &[usize]) -> Option<String> {
    let embedder = deps.embedder.as_ref()?;
    let missing: Vec<usize> = indices.iter().copied().filter(|&i| facts[i].embedding.is_none()).collect();
    if missing.is_empty() {
        return None;
    }
    let texts: Vec<String> = missing.iter().map(|&i| facts[i].content.clone()).collect();
    match embedder.embed(&texts).await {
        Ok(vectors) if vectors.len() == texts.len() => {
            for (i, vector) in missing.into_iter().zip(vectors) {
                facts[i].embedding = Some(vector);
            }
            None
        }
        Ok(vectors) => Some(format!("asked for {} embeddings, got {}", texts.len(), vectors.len())),
        Err(error) => {
            tracing::warn!(%channel, %error, facts = texts.len(), "facts stored without embeddings");
            Some(error.to_string())
        }
    }
}

/// The daily clean-up: every channel forgets the facts that faded under the floor.
pub async fn sweep(deps: &Deps) -> PortResult<()> {
    let now = deps.clock.now();
    let half_life = deps.settings.memory.fact_decay_half_life_days;
    for channel in deps.facts.fact_channels().await? {
        for fact in deps.facts.facts(&channel).await? {
            if fact.confidence * decay(&fact, now, half_life) < FORGET_BELOW {
                deps.facts.delete_fact(&channel, &fact.id).await?;
            }
        }
    }
    Ok(())
}

/// 0.5^(age / half-life), age from when the fact was last confirmed.
pub fn decay(fact: &Fact, now: Timestamp, half_life_days: f64) -> f64 {
    let age_days = now.seconds_since(fact.confirmed_at).max(0.0) / 86_400.0;
    0.5_f64.powf(age_days / half_life_days)
}

/// How much meaning counts against keywords in the hybrid score (α): as much. Keywords
/// are exact where embeddings blur (names, jargon, ticket numbers); embeddings find a
/// fact said in other words or another language, where keywords see nothing. Equal
/// weights rank a fact that matches both ways above one that matches either way.
pub const VECTOR_WEIGHT: f64 = 0.5;
/// Cosine similarity at or under this says nothing: embedding models put unrelated texts
/// well above zero (OpenAI's text-embedding-3 around 0.1 to 0.2), so only what is above
/// it counts, rescaled to 0..1; otherwise every fact would match every message a little.
pub const MIN_SIMILARITY: f64 = 0.3;

/// A fact found for a reply and how well it matched.
#[derive(Debug, Clone, PartialEq)]
pub struct FactMatch {
    pub fact: Fact,
    /// Relevance × decay × speaker boost, above 0. Relevance is the keyword overlap
    /// (Jaccard, 0..1); with vector search, for a fact with an embedding, it is
    /// `VECTOR_WEIGHT` × similarity + (1 − `VECTOR_WEIGHT`) × overlap, also 0..1.
    pub score: f64,
}

/// The facts a reply to `text` by `speaker` may draw on, best first: relevance (keyword
/// overlap, blended with similarity to `text_embedding` when there is one), faded by
/// age, facts about the speaker first among equals.
pub fn search(
    facts: &[Fact],
    text: &str,
    text_embedding: Option<&[f32]>,
    speaker: &str,
    now: Timestamp,
    half_life_days: f64,
) -> Vec<FactMatch> {
    let query = keywords(text);
    let mut scored: Vec<(f64, &Fact)> = facts
        .iter()
        .map(|f| {
            let boost = if f.source_users.iter().any(|u| u == speaker) { SPEAKER_BOOST } else { 1.0 };
            (relevance(f, &query, text_embedding) * decay(f, now, half_life_days) * boost, f)
        })
        .filter(|(score, _)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(FACTS_PER_REPLY).map(|(score, f)| FactMatch { fact: f.clone(), score }).collect()
}

/// How well `fact` matches a message, 0..1. A fact without a comparable embedding (none,
/// or another model's size) ranks by its keywords alone, as with vector search off.
fn relevance(fact: &Fact, query: &[String], query_embedding: Option<&[f32]>) -> f64 {
    let overlap = jaccard(query, &fact.keywords);
    match (query_embedding, fact.embedding.as_deref()) {
        (Some(q), Some(f)) if q.len() == f.len() => {
            let similarity = ((cosine(q, f) - MIN_SIMILARITY) / (1.0 - MIN_SIMILARITY)).max(0.0);
            VECTOR_WEIGHT * similarity + (1.0 - VECTOR_WEIGHT) * overlap
        }
        _ => overlap,
    }
}

/// The cosine of the angle between two vectors, -1..1; 0 when either is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut aa, mut bb) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 { 0.0 } else { dot / (aa.sqrt() * bb.sqrt()) }
}

/// The id a fact's content has in a channel: the same content learned again is the
/// same fact.
pub fn fact_id(channel: &ChannelId, content: &str) -> String {
    let normalized: String = content.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    hex::encode(&Sha256::digest(format!("{channel}\n{normalized}"))[..12])
}

fn line(deps: &Deps, m: &Message) -> String {
    let name = match m.author {
        Author::OwnBot => deps.persona.name.clone(),
        _ => m.user_name.clone(),
    };
    fence_safe(&format!("{name}: {}", m.text))
}

/// `{"facts": [{"content", "keywords", "source_users", "confidence", "shareable"}],
/// "profiles": [{"user", "tags", "summary"}]}`; anything else is an error.
pub fn parse_reflection(raw: &str) -> Result<(Vec<NewFact>, Vec<NewNote>), AnswerError> {
    let object = answer_object(raw)?;
    let mut facts = Vec::new();
    let listed =
        object.get("facts").and_then(Value::as_array).ok_or_else(|| AnswerError::must_be("facts", "be a list"))?;
    for f in listed {
        let content = f["content"]
            .as_str()
            .filter(|c| !c.trim().is_empty())
            .ok_or(AnswerError::Missing { item: "fact", needs: "content" })?;
        let confidence = f.get("confidence").and_then(Value::as_f64).unwrap_or(0.5);
        if !(0.0..=1.0).contains(&confidence) {
            return Err(AnswerError::must_be("confidence", "be from 0 to 1"));
        }
        facts.push(NewFact {
            content: content.trim().to_owned(),
            keywords: answer_strings(f.get("keywords"), "keywords")?,
            source_users: answer_strings(f.get("source_users"), "source_users")?,
            messages: match f.get("messages") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(numbers)) => numbers
                    .iter()
                    .map(|n| {
                        n.as_u64()
                            .map(|n| n as usize)
                            .ok_or_else(|| AnswerError::must_be("messages", "hold message numbers"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(AnswerError::must_be("messages", "be a list")),
            },
            confidence,
            shareable: f.get("shareable").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    let mut notes = Vec::new();
    for p in object.get("profiles").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        let user = p["user"]
            .as_str()
            .filter(|u| !u.is_empty())
            .ok_or(AnswerError::Missing { item: "profile", needs: "a user" })?;
        notes.push(NewNote {
            user: user.to_owned(),
            tags: answer_strings(p.get("tags"), "tags")?,
            summary: p.get("summary").and_then(Value::as_str).unwrap_or_default().to_owned(),
        });
    }
    Ok((facts, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(content: &str, kws: &[&str], users: &[&str], days_old: f64) -> Fact {
        let now = Timestamp(100 * 86_400 * 1_000_000);
        let at = Timestamp(now.0 - (days_old * 86_400.0 * 1e6) as i64);
        Fact {
            id: content.into(),
            channel: ChannelId("c".into()),
            content: content.into(),
            keywords: kws.iter().map(|k| k.to_string()).collect(),
            source_users: users.iter().map(|u| u.to_string()).collect(),
            confidence: 0.9,
            shareable: true,
            created_at: at,
            confirmed_at: at,
            strength: 1,
            source_messages: Vec::new(),
            embedding: None,
        }
    }

    fn embedded(mut fact: Fact, embedding: &[f32]) -> Fact {
        fact.embedding = Some(embedding.to_vec());
        fact
    }

    fn contents(found: &[FactMatch]) -> Vec<&str> {
        found.iter().map(|m| m.fact.content.as_str()).collect()
    }

    #[test]
    fn search_ranks_by_overlap_age_and_speaker() {
        let now = Timestamp(100 * 86_400 * 1_000_000);
        let facts = vec![
            fact("alice deploys on Fridays", &["デプロイ", "金曜"], &["alice"], 1.0),
            fact("old deploy story", &["デプロイ", "金曜"], &["bob"], 60.0),
            fact("lunch is curry", &["カレー"], &["bob"], 1.0),
        ];
        let found = search(&facts, "今日のデプロイは金曜？", None, "alice", now, 30.0);
        assert!(found[0].score > found[1].score, "{found:?}");
        assert_eq!(contents(&found), vec!["alice deploys on Fridays", "old deploy story"], "no overlap, not found");
        assert!((decay(&facts[1], now, 30.0) - 0.25).abs() < 1e-9, "two half-lives");
        // Full overlap ({デプロイ, 金曜} of {今日, デプロイ, 金曜}) = 2/3, × boost, × decay.
        let expected = 2.0 / 3.0 * SPEAKER_BOOST * decay(&facts[0], now, 30.0);
        assert!((found[0].score - expected).abs() < 1e-9, "{} != {expected}", found[0].score);
        assert!((found[1].score - 2.0 / 3.0 * 0.25).abs() < 1e-9, "{}", found[1].score);
    }

    #[test]
    fn cosine_of_vectors() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-9);
        assert!(cosine(&[1.0, 0.0], &[0.0, 2.0]).abs() < 1e-9);
        assert!((cosine(&[1.0, 1.0], &[-2.0, -2.0]) + 1.0).abs() < 1e-9);
        assert!((cosine(&[3.0, 4.0], &[4.0, 3.0]) - 0.96).abs() < 1e-6, "length does not matter");
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0, "no direction, no similarity");
    }

    #[test]
    fn a_fact_close_in_meaning_ranks_without_sharing_a_keyword() {
        let now = Timestamp(100 * 86_400 * 1_000_000);
        // The message asks about the release; the facts say "deploy" and "lunch".
        let query_vector = [1.0, 0.0, 0.0];
        let facts = vec![
            embedded(fact("lunch is curry", &["カレー"], &["bob"], 1.0), &[0.0, 0.0, 1.0]),
            embedded(fact("deploys happen on Fridays", &["deploys", "fridays"], &["bob"], 1.0), &[0.9, 0.1, 0.0]),
            fact("the release train leaves at noon", &["release", "train"], &["bob"], 1.0),
        ];
        let text = "when is the next release";
        let keyword_only = search(&facts, text, None, "alice", now, 30.0);
        assert_eq!(contents(&keyword_only), vec!["the release train leaves at noon"], "keywords see no deploy");
        let hybrid = search(&facts, text, Some(&query_vector), "alice", now, 30.0);
        assert_eq!(
            contents(&hybrid),
            vec!["deploys happen on Fridays", "the release train leaves at noon"],
            "the vector finds the deploy fact; the fact without an embedding still ranks by keywords; \
             curry is orthogonal"
        );
        let similarity = (cosine(&query_vector, &[0.9, 0.1, 0.0]) - MIN_SIMILARITY) / (1.0 - MIN_SIMILARITY);
        let expected = VECTOR_WEIGHT * similarity * decay(&facts[1], now, 30.0);
        assert!((hybrid[0].score - expected).abs() < 1e-9, "{} != {expected}", hybrid[0].score);
        // Without an embedding the score is the keyword score, vector or not.
        assert!((hybrid[1].score - keyword_only[0].score).abs() < 1e-12);
    }

    #[test]
    fn the_hybrid_ranks_a_match_both_ways_first_and_ignores_faint_similarity() {
        let now = Timestamp(100 * 86_400 * 1_000_000);
        let query_vector = [1.0, 0.0];
        let facts = vec![
            // Shares the keyword, but its vector points elsewhere.
            embedded(fact("deploy freeze story", &["deploy"], &["bob"], 1.0), &[0.0, 1.0]),
            // Shares the keyword and the meaning.
            embedded(fact("deploy on Fridays", &["deploy"], &["bob"], 1.0), &[1.0, 0.1]),
            // A faint similarity (cosine 0.2, under the floor) and no keyword: not a match.
            embedded(fact("lunch is curry", &["カレー"], &["bob"], 1.0), &[0.2, 0.98]),
            // Another model's size: compared by keywords alone.
            embedded(fact("deploy checklist", &["deploy", "checklist", "ops"], &["bob"], 1.0), &[1.0, 0.0, 0.0]),
        ];
        let found = search(&facts, "deploy", Some(&query_vector), "alice", now, 30.0);
        assert_eq!(contents(&found), vec!["deploy on Fridays", "deploy freeze story", "deploy checklist"]);
        let relevance_of = |i: usize| relevance(&facts[i], &keywords("deploy"), Some(&query_vector));
        assert!((relevance_of(0) - (1.0 - VECTOR_WEIGHT)).abs() < 1e-9, "overlap only: {}", relevance_of(0));
        assert!((relevance_of(3) - 1.0 / 3.0).abs() < 1e-9, "jaccard alone: {}", relevance_of(3));
        assert_eq!(relevance_of(2), 0.0);
    }

    #[test]
    fn reflections_are_strict_json() {
        let (facts, notes) = parse_reflection(
            r#"{"facts": [{"content": "alice は金曜にデプロイする", "keywords": ["デプロイ"], "source_users": ["alice"], "confidence": 0.8, "shareable": true}],
                "profiles": [{"user": "alice", "tags": ["Rust"], "summary": "デプロイ担当"}]}"#,
        )
        .unwrap();
        assert_eq!(facts[0].source_users, vec!["alice"]);
        assert_eq!(notes[0].tags, vec!["Rust"]);
        for bad in [
            "prose",
            r#"{"facts": "x"}"#,
            r#"{"facts": [{"content": ""}]}"#,
            r#"{"facts": [{"content": "x", "confidence": 3}]}"#,
        ] {
            assert!(parse_reflection(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_reflection(r#"{"facts": []}"#).unwrap(), (vec![], vec![]));
    }

    /// A write refused because its fact changed may be a forget at work: before the
    /// facts are merged again, who was forgotten is asked again, and what came from
    /// someone forgotten since (after the first asking) is not stored.
    #[tokio::test]
    async fn a_refused_write_asks_again_who_was_forgotten() {
        use crate::adapters::memory::{InProcess, MemoryLog, RecordingChat, TsMint, VirtualClock};
        use crate::ports::Clock;
        let clock = Arc::new(VirtualClock::new(Timestamp(1_000_000_000)));
        let parts = InProcess::new(clock.clone());
        let chat = Arc::new(RecordingChat::new(clock.clone(), Arc::new(TsMint::default())));
        let adapters = parts.adapters(chat, None, Arc::new(MemoryLog::default()));
        let settings = crate::config::Settings::from_vars(&std::collections::HashMap::new()).unwrap();
        let deps = Deps::new(settings.clone(), settings.persona(None), UserId("UKUUKI".into()), adapters, 1);
        let channel = ChannelId("C1".into());
        let said = |user: &str, name: &str, text: &str, n: i64| {
            Arc::new(Message {
                channel: channel.clone(),
                ts: Ts::from_timestamp(Timestamp(clock.now().0 + n)),
                thread_root: None,
                user: UserId(user.into()),
                user_name: name.into(),
                text: text.into(),
                author: Author::Human,
                replies_to_bot: false,
                replies_to: None,
                in_dm: false,
                private_channel: false,
                at: clock.now(),
            })
        };
        let messages =
            vec![said("UALICE", "alice", "my cat is Miso", 1), said("UBOB", "bob", "we deploy on Mondays", 2)];
        let read_at = clock.now();
        let (speakers, people) = (Speakers(&messages), People::of(&deps, &messages, read_at));
        let learned = |content: &str, from: &str| NewFact {
            content: content.into(),
            keywords: vec![content.split(' ').next_back().unwrap().to_lowercase()],
            source_users: vec![from.into()],
            messages: Vec::new(),
            confidence: 0.9,
            shareable: false,
        };
        let new =
            vec![learned("alice keeps a cat called Miso", "alice"), learned("the team deploys on Mondays", "bob")];
        // Nobody forgotten when the reflection first asked; then a forget of Alice
        // begins (its mark), and the first write is refused.
        let mut unchanged = new.clone();
        people.drop_forgotten(&deps, &speakers, &mut unchanged, &mut Vec::new()).await.unwrap();
        assert_eq!(unchanged, new);
        clock.advance_to(Timestamp(read_at.0 + 1_000_000));
        let mark = format!("{}\talice", clock.now().0);
        deps.ledger.cache_put("forgotten:UALICE", &mark, Timestamp(clock.now().0 + 3_600_000_000)).await.unwrap();
        parts.store.refuse_next_fact_writes(1);
        let merged = merge_facts(&deps, &channel, Vec::new(), new, (&speakers, &people), clock.now()).await.unwrap();
        let stored: Vec<String> = deps.facts.facts(&channel).await.unwrap().into_iter().map(|f| f.content).collect();
        assert_eq!(stored, ["the team deploys on Mondays"], "nothing from her stored on the second try");
        assert_eq!((merged.added, merged.strengthened, merged.refused), (1, 0, true));
    }
}
