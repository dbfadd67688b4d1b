//! Forgetting (docs/design.md §10): a person who asks (`/kuuki forget-me`, or a manager's
//! `/kuuki forget @user`) is removed from every memory tier, and a deleted message is
//! removed from the facts it was the only source of. A Discord member who manages
//! channels in one server forgets the person in that server's channels only.
//!
//! Every step deletes or rewrites what is still there, so a request that dies halfway
//! is finished by running it again; the person's profile goes last because it lists
//! the channels to look in. Each run first queues its second look ([`look_again`]),
//! which removes what work in flight and late deliveries stored of them after it, and
//! records its end for it as it ends.

use std::time::Duration;

use super::keywords::contains_phrase;
use crate::deps::Deps;
use crate::domain::{
    ChannelId, ChannelMemory, CommandReply, EventKind, Job, SLACK_WORKSPACE, Timestamp, Ts, UserId, WorkspaceMemory,
    discord_server, is_discord_id,
};
use crate::ports::{ClaimOutcome, PortError, PortResult};
use crate::record::record;

/// A request is remembered as answered (and what it removed, between attempts) past
/// the time the caller's way back stays valid (Slack's 30 minutes).
const REQUEST_KEEP: Duration = Duration::from_secs(24 * 60 * 60);
/// Marks a request that began without finishing (see [`carry_out`]).
const STARTED: &str = "started";
/// How long a forget is remembered for memory work that read the person's messages
/// before it and stores what it learned after it (see [`forgotten_since`]): far past
/// any job's lease.
const FORGOTTEN_KEEP: Duration = Duration::from_secs(24 * 60 * 60);

/// Whether `text` names the person by id or by display name (`name`, may be empty):
/// whole words, so a name inside another word ("Sam" in "Samsung") is not them.
pub fn names_person(text: &str, user: &UserId, name: &str) -> bool {
    contains_phrase(text, &user.0) || contains_phrase(text, name)
}

fn forgotten_key(user: &UserId) -> String {
    format!("forgotten:{user}")
}

/// Notes that `user` (display name `name`, may be empty) is being forgotten (`done:
/// false`: whatever read their messages before the forget ends counts as before it)
/// or was just forgotten, with the time.
async fn mark_forgotten(deps: &Deps, user: &UserId, name: &str, done: bool) -> PortResult<()> {
    let now = deps.clock.now();
    // "In progress" outlives a failed attempt until its redelivery (which marks it
    // again), not a day: a forget that never finishes does not silence memory work.
    let (at, keep) = if done { (now.0, FORGOTTEN_KEEP) } else { (i64::MAX, deps.budget.visibility_timeout() * 2) };
    deps.ledger.cache_put(&forgotten_key(user), &format!("{at}\t{name}"), now + keep).await
}

/// Whether `user` was forgotten at or after `read_at`, and then by which display name
/// (empty when unknown): memory work that read their messages, or messages about them,
/// then and stores what it learned now must keep nothing of them (the forget may have
/// removed their facts and notes before this work wrote its own).
pub async fn forgotten_since(
    deps: &Deps,
    user: &UserId,
    read_at: crate::domain::Timestamp,
) -> PortResult<Option<String>> {
    Ok(forgotten_among(deps, std::slice::from_ref(user), read_at).await?.pop().flatten())
}

/// [`forgotten_since`] of each of `users`, in their order, in one read.
pub async fn forgotten_among(
    deps: &Deps,
    users: &[UserId],
    read_at: crate::domain::Timestamp,
) -> PortResult<Vec<Option<String>>> {
    let keys: Vec<String> = users.iter().map(forgotten_key).collect();
    let marks = deps.ledger.cache_get_many(&keys, deps.clock.now()).await?;
    Ok(marks
        .into_iter()
        .map(|marked| {
            let marked = marked?;
            let (at, name) = read_mark(&marked);
            at.filter(|at| *at >= read_at.0).map(|_| name.to_owned())
        })
        .collect())
}

/// A forget mark's time (`i64::MAX` while in progress) and display name; marks written
/// before the name was kept hold the time alone.
fn read_mark(marked: &str) -> (Option<i64>, &str) {
    let (at, name) = marked.split_once('\t').unwrap_or((marked, ""));
    (at.parse().ok(), name)
}

impl std::ops::Add for Forgotten {
    type Output = Forgotten;
    fn add(self, more: Forgotten) -> Forgotten {
        Forgotten {
            messages: self.messages + more.messages,
            facts_removed: self.facts_removed + more.facts_removed,
            facts_edited: self.facts_edited + more.facts_edited,
            notes: self.notes + more.notes,
            summaries: self.summaries + more.summaries,
            profile: self.profile || more.profile,
            profile_kept: self.profile_kept || more.profile_kept,
            unplaced: self.unplaced + more.unplaced,
        }
    }
}

/// A queued forget request (`Job::Forget`): forgets `user` (safe to repeat) and shows
/// what went to whoever asked, once. What a run removed is kept until the answer is
/// out, so a redelivery after a finished run answers with it, not with "nothing
/// stored"; a run that died halfway leaves only a mark, and the answer says its part
/// is not counted. An answer the platform refused (busy) is sent by the redelivery; one
/// that may have gone out (the call timed out, or a worker died while sending) is sent
/// again only where that edits it (Discord), never as a second message (Slack).
pub async fn carry_out(
    deps: &Deps,
    channel: &ChannelId,
    user: &UserId,
    whom: &str,
    ts: &Ts,
    reply: &CommandReply,
    server: Option<&str>,
) -> PortResult<()> {
    let key = format!("forget:{channel}:{user}:{ts}");
    let now = deps.clock.now();
    let resumed = match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Completed => return Ok(()),
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        ClaimOutcome::Claimed => false,
        ClaimOutcome::Resumed => true,
    };
    let asked = Asked { channel, user, whom, reply, server };
    match forget_and_answer(deps, &key, &asked, resumed).await {
        Ok(()) => deps.ledger.complete(&key, deps.clock.now(), REQUEST_KEEP).await,
        Err(error) => {
            // The redelivery need not wait out this attempt's lease (a posting mark stays).
            if let Err(release) = deps.ledger.release(&key).await {
                tracing::warn!(error = %release, %key, "could not release a failed forget request");
            }
            Err(error)
        }
    }
}

/// A forget request as a [`Job::Forget`] carries it.
struct Asked<'a> {
    channel: &'a ChannelId,
    user: &'a UserId,
    whom: &'a str,
    reply: &'a CommandReply,
    server: Option<&'a str>,
}

async fn forget_and_answer(deps: &Deps, key: &str, asked: &Asked<'_>, resumed: bool) -> PortResult<()> {
    let Asked { channel, user, whom, reply, server } = *asked;
    let now = deps.clock.now();
    let progress = format!("{key}:removed");
    let until = now + REQUEST_KEEP;
    let earlier = deps.ledger.cache_get(&progress, now).await?;
    if earlier.is_none() {
        deps.ledger.cache_put(&progress, STARTED, until).await?;
    }
    // A run that finished forgetting leaves only the answer to this one: what the
    // person wrote since is theirs to be remembered again.
    let finished = earlier.as_deref().filter(|json| *json != STARTED).and_then(|json| serde_json::from_str(json).ok());
    let already = finished.is_some();
    let (removed, interrupted) = match (finished, earlier.is_some()) {
        (Some(before), _) => (before, false),
        (None, interrupted) => (forget_user(deps, user, channel, server).await?, interrupted),
    };
    if !already {
        record_forgotten(deps, channel, user, &removed, server, false);
        let json = serde_json::to_string(&removed).expect("counts encode");
        deps.ledger.cache_put(&progress, &json, until).await?;
    }
    // Whether the last send is known not to have gone out ("1"), or may have ("0").
    let unsent_key = format!("{key}:unsent");
    let known_unsent = resumed && deps.ledger.cache_get(&unsent_key, now).await?.as_deref() == Some("1");
    if resumed && !reply.safe_to_repeat() && !known_unsent {
        tracing::warn!(%channel, %user, "a forget answer may have gone out before a worker died; not sent again");
    } else {
        let mut text = answer(&removed, whom, server);
        if interrupted {
            text.push_str(" (An earlier attempt was interrupted: what it removed is not counted here.)");
        }
        deps.ledger.mark_posting(key).await?;
        deps.ledger.cache_put(&unsent_key, "0", until).await?;
        match deps.chat.answer_command(reply, &text).await {
            Ok(()) => {}
            // The platform said it did not take it: the redelivery may send it.
            Err(error @ PortError::Busy { .. }) => {
                deps.ledger.cache_put(&unsent_key, "1", until).await?;
                return Err(error);
            }
            // An expired or used-up way back stays so: the forget is done, and trying
            // again would only end in the dead-letter queue.
            Err(PortError::Rejected { message, .. }) => {
                tracing::warn!(%channel, %user, %message, "the answer to a forget request could not be shown");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// What a forget request removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Forgotten {
    pub messages: usize,
    /// Facts they were the only source of (or that name them).
    pub facts_removed: usize,
    /// Facts that had other sources too: kept, without them.
    pub facts_edited: usize,
    pub notes: usize,
    /// Channels whose memory is being made anew without them.
    pub summaries: usize,
    pub profile: bool,
    /// A forget in one server left the profile (counters and the channels they wrote
    /// in, no content): they wrote outside it too.
    #[serde(default)]
    pub profile_kept: bool,
    /// Channels whose server the platform would not tell (deleted, or hidden from
    /// kuuki): a forget in one server could not search them.
    #[serde(default)]
    pub unplaced: usize,
}

impl Forgotten {
    /// The answer the person (or the manager) sees.
    pub fn describe(&self, whom: &str) -> String {
        if *self == Forgotten::default() {
            return format!("kuuki had nothing stored about {whom}.");
        }
        format!(
            "Forgotten {whom}: {} stored message(s), {} fact(s) removed, {} fact(s) kept without {whom}, {} note(s), \
             the profile{}; {} channel summar{} being made anew without {whom}.",
            self.messages,
            self.facts_removed,
            self.facts_edited,
            self.notes,
            match (self.profile, self.profile_kept) {
                (true, _) => "",
                (false, true) => " (kept: they wrote where this request does not reach)",
                (false, false) => " (there was none)",
            },
            self.summaries,
            if self.summaries == 1 { "y is" } else { "ies are" },
        )
    }
}

/// The answer to whoever asked; a forget in one Discord server says what it did not
/// reach.
pub fn answer(forgotten: &Forgotten, whom: &str, server: Option<&str>) -> String {
    let mut text = forgotten.describe(whom);
    if discord_server(server).is_some() {
        text.push_str(" Only this server's channels were searched: what was said elsewhere stays.");
        if forgotten.unplaced > 0 {
            text.push_str(&format!(
                " {} channel(s) Discord no longer shows kuuki could not be placed, so were not searched.",
                forgotten.unplaced
            ));
        }
    }
    text
}

/// Discord lookups of a channel's server at once.
const SERVER_LOOKUPS: usize = 8;

/// How long the ledger remembers a channel's server: a channel never moves, and any
/// worker (not only the one whose client asked) reads it, so a forget that ran out of
/// time goes on from where it stopped.
const SERVER_KEEP: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Whether `channel` is in the Discord server `server`; `None` when Discord would not
/// say (a channel it no longer shows kuuki).
async fn in_discord_server(
    deps: &Deps,
    channel: &ChannelId,
    server: &str,
    requested_in: &ChannelId,
) -> PortResult<Option<bool>> {
    if channel == requested_in {
        return Ok(Some(true));
    }
    if !is_discord_id(&channel.0) {
        return Ok(Some(false));
    }
    let key = format!("server-of:{channel}");
    // "" for a channel in no server (a DM).
    if let Some(known) = deps.ledger.cache_get(&key, deps.clock.now()).await? {
        return Ok(Some(known == server));
    }
    match deps.chat.server_of(channel).await {
        Ok(found) => {
            let found = found.unwrap_or_default();
            deps.ledger.cache_put(&key, &found, deps.clock.now() + SERVER_KEEP).await?;
            Ok(Some(found == server))
        }
        Err(PortError::Rejected { message, .. }) => {
            tracing::warn!(%channel, %message, "a channel Discord does not show: not searched");
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// Among `channels`, those `server` reaches (all of them when `None`), and how many
/// could not be placed. `requested_in` is always one; the Slack workspace reaches its
/// own channels (a deployment serves one); a Discord server the channels Discord puts
/// in it, asked a few at a time (remembered in the ledger, see [`in_discord_server`]).
async fn in_reach(
    deps: &Deps,
    channels: Vec<ChannelId>,
    server: Option<&str>,
    requested_in: &ChannelId,
) -> PortResult<(Vec<ChannelId>, usize)> {
    let Some(server) = server else { return Ok((channels, 0)) };
    if server == SLACK_WORKSPACE {
        return Ok((channels.into_iter().filter(|c| c == requested_in || !is_discord_id(&c.0)).collect(), 0));
    }
    let mut placed = Vec::with_capacity(channels.len());
    for some in channels.chunks(SERVER_LOOKUPS) {
        let lookups = some.iter().map(|channel| in_discord_server(deps, channel, server, requested_in));
        placed.extend(futures_util::future::try_join_all(lookups).await?);
    }
    let unplaced = placed.iter().filter(|p| p.is_none()).count();
    let kept = channels.into_iter().zip(placed).filter(|(_, p)| *p == Some(true)).map(|(c, _)| c).collect();
    Ok((kept, unplaced))
}

/// Removes everything stored about `user`: their messages, notes and profile, the facts
/// only they were the source of (or that name them), their name from the facts of
/// several sources, and the channel summaries they appear in, which are made anew from
/// the messages left. `requested_in` is searched even when no profile lists it.
/// `server`: only in that Discord server's (or the Slack workspace's) channels; the
/// profile (counters and where they wrote, no content) then stays when they wrote
/// elsewhere too, so a later request of their own still finds every channel. Queues
/// its second look ([`Job::ForgetLate`]) before anything goes, and records its end for
/// it.
pub async fn forget_user(
    deps: &Deps,
    user: &UserId,
    requested_in: &ChannelId,
    server: Option<&str>,
) -> PortResult<Forgotten> {
    let mut done = Forgotten::default();
    // Before anything goes (memory work storing meanwhile drops what it learned of
    // them), and with the time at the end (work that read their messages before then).
    // Older facts name people as the model wrote them: by display name.
    let name = match deps.chat.user_name(user).await {
        Ok(name) if *name != *user.0 => name,
        _ => String::new(),
    };
    let profile = deps.facts.profile(user).await?;
    let wrote_in: Vec<ChannelId> = profile.as_ref().map(|p| p.channels.clone()).unwrap_or_default();
    let mut channels = wrote_in.clone();
    // Each channel a forget in one Discord server places is a call to Discord: there,
    // only the channels with a fact from or about them (the loop below changes nothing
    // in the others but a summary that names them without a fact).
    let placing = discord_server(server).is_some();
    for channel in deps.facts.fact_channels().await?.into_iter().chain(std::iter::once(requested_in.clone())) {
        if channels.contains(&channel) {
            continue;
        }
        if placing && channel != *requested_in {
            let facts = deps.facts.facts(&channel).await?;
            if !facts.iter().any(|f| f.is_from(user, &name) || names_person(&f.content, user, &name)) {
                continue;
            }
        }
        channels.push(channel);
    }
    // Placed before the mark: an attempt that fails here has silenced no memory work.
    let (channels, unplaced) = in_reach(deps, channels, server, requested_in).await?;
    done.unplaced = unplaced;
    let wrote_elsewhere = wrote_in.iter().any(|channel| !channels.contains(channel));
    // Queued before anything goes, so a run that dies anywhere after has queued it (a
    // redelivery queues another: the second finds nothing left).
    let late_ts = Ts::from_timestamp(deps.clock.now());
    let late = Late { channel: requested_in, ts: &late_ts, user, name: &name, channels: &channels, server };
    deps.enqueue_after(late.job(), second_look_delay(deps)).await?;
    mark_forgotten(deps, user, &name, false).await?;
    let mentions = |text: &str| names_person(text, user, &name);
    for channel in &channels {
        // Kept while their messages here go and the memory is wiped: a run that dies
        // in between leaves it, and the next run wipes the memory though it finds no
        // message of theirs (with no profile to say they wrote here).
        let working_here = format!("forgetting:{user}:{channel}");
        let interrupted_here = deps.ledger.cache_get(&working_here, deps.clock.now()).await?.is_some();
        deps.ledger.cache_put(&working_here, "1", deps.clock.now() + FORGOTTEN_KEEP).await?;
        let messages = deps.messages.delete_messages_by(channel, user, None).await?;
        done.messages += messages;
        done = done + forget_facts_and_note(deps, channel, user, &name, |_| true).await?;
        let state = deps.channels.channel_state(channel).await?;
        let memory = &state.memory;
        let in_memory =
            memory.active_users.iter().any(|u| mentions(u)) || mentions(&memory.summary) || mentions(&memory.history);
        // Where they wrote, a summary may hold what they said even after their messages
        // expired; and a run that died between deleting them and wiping it finds no
        // message the next time, but the profile (deleted last) still lists the channel.
        let wrote_here = wrote_in.contains(channel) || interrupted_here;
        if (messages > 0 || wrote_here || in_memory)
            && make_memory_anew(deps, channel, memory, interrupted_here).await?
        {
            done.summaries += 1;
        }
        // Done here: the mark expires at once.
        deps.ledger.cache_put(&working_here, "", deps.clock.now()).await?;
    }
    forget_in_workspace_memory(deps, user, &name).await?;
    if profile.is_some() && wrote_elsewhere {
        done.profile_kept = true;
    } else if profile.is_some() {
        deps.facts.delete_profile(user).await?;
        done.profile = true;
    }
    mark_forgotten(deps, user, &name, true).await?;
    // This run's end, for its own second look (the person's mark is the last forget's).
    let ended = deps.clock.now();
    let key = ended_key(requested_in, user, &late_ts);
    deps.ledger.cache_put(&key, &ended.0.to_string(), ended + second_look_delay(deps) + DEAD_LETTER_KEEP).await?;
    Ok(done)
}

/// Where a forget run keeps when it ended, for the second look it queued (`late_ts`).
fn ended_key(requested_in: &ChannelId, user: &UserId, late_ts: &Ts) -> String {
    format!("forget-ended:{requested_in}:{user}:{late_ts}")
}

/// How long the forget queue's dead letters are kept (the template's
/// `MessageRetentionPeriod`): a second look redriven from there still finds its run's end.
const DEAD_LETTER_KEEP: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// How long after it was posted a message may still arrive: Slack retries an event it
/// could not deliver after one minute and after five; a Discord relay resends sooner.
const LATE_DELIVERY: Duration = Duration::from_secs(10 * 60);

/// When a forget's second look runs, counted from the forget's start: after the forget
/// has ended (within a worker timeout, under a claim lease), every message posted before
/// its end has arrived, and every job that read before its end or read such a late
/// message has ended too (a claim lease after each).
fn second_look_delay(deps: &Deps) -> Duration {
    let lease = deps.budget.claim_lease();
    lease + LATE_DELIVERY + lease
}

/// Whether a forget of `user` is being carried out now (its mark says in progress).
async fn forget_in_progress(deps: &Deps, user: &UserId) -> PortResult<bool> {
    let mark = deps.ledger.cache_get(&forgotten_key(user), deps.clock.now()).await?;
    Ok(mark.is_some_and(|marked| read_mark(&marked).0 == Some(i64::MAX)))
}

/// Removes from `channel`'s facts what came from `user` (display name `name`) or names
/// them, among the facts `learned_before` says yes to, and their note there.
async fn forget_facts_and_note(
    deps: &Deps,
    channel: &ChannelId,
    user: &UserId,
    name: &str,
    learned_before: impl Fn(&crate::domain::Fact) -> bool,
) -> PortResult<Forgotten> {
    let mut done = Forgotten::default();
    let mentions = |text: &str| names_person(text, user, name);
    (done.facts_removed, done.facts_edited) = rewrite_facts(deps, channel, |fact| {
        if !(fact.is_from(user, name) || mentions(&fact.content)) || !learned_before(fact) {
            return None;
        }
        let mut fact = fact.clone();
        fact.source_users.retain(|u| **u != *user.0 && u != name);
        // A fact that names them cannot be edited safely; it goes with them.
        Some((!fact.source_users.is_empty() && !mentions(&fact.content)).then_some(fact))
    })
    .await?;
    if deps.facts.user_note(channel, user).await?.is_some() {
        deps.facts.delete_user_note(channel, user).await?;
        done.notes += 1;
    }
    Ok(done)
}

/// Tries of [`rewrite_facts`] before it gives up (the job comes back).
const REWRITE_ATTEMPTS: usize = 5;

/// Applies `change` to each of `channel`'s facts: `None` leaves it, `Some(None)`
/// deletes it, `Some(Some(fact))` stores that edit, only if the fact is still as read
/// (a reflection's write between would otherwise be undone, or undo the edit); a
/// refused edit is made again on the fact as it is then. Returns how many were
/// removed and edited.
async fn rewrite_facts(
    deps: &Deps,
    channel: &ChannelId,
    change: impl Fn(&crate::domain::Fact) -> Option<Option<crate::domain::Fact>>,
) -> PortResult<(usize, usize)> {
    let (mut removed, mut edited) = (0, 0);
    for _ in 0..REWRITE_ATTEMPTS {
        let mut refused = false;
        for (fact, revision) in deps.facts.facts_as_read(channel).await? {
            match change(&fact) {
                None => {}
                Some(None) => {
                    deps.facts.delete_fact(channel, &fact.id).await?;
                    removed += 1;
                }
                Some(Some(edit)) => {
                    if deps.facts.put_fact_if_unchanged(&edit, Some(revision)).await? {
                        edited += 1;
                    } else {
                        refused = true;
                    }
                }
            }
        }
        if !refused {
            return Ok((removed, edited));
        }
    }
    Err(PortError::Busy {
        message: format!("the facts of {channel} kept changing under {REWRITE_ATTEMPTS} rewrites"),
        retry_after: Duration::from_secs(1),
    })
}

async fn forget_in_workspace_memory(deps: &Deps, user: &UserId, name: &str) -> PortResult<()> {
    let workspace = deps.channels.workspace_memory_without_lines().await?;
    let mentions = |text: &str| names_person(text, user, name);
    if mentions(&workspace.history) || mentions(&workspace.recent_events) {
        // Made anew from the channel memories at the next summary.
        deps.channels.set_workspace_memory(WorkspaceMemory::default()).await?;
    }
    Ok(())
}

/// A forget's second look ([`Job::ForgetLate`]).
pub struct Late<'a> {
    pub channel: &'a ChannelId,
    pub ts: &'a Ts,
    pub user: &'a UserId,
    pub name: &'a str,
    pub channels: &'a [ChannelId],
    pub server: Option<&'a str>,
}

impl Late<'_> {
    /// The queued job that carries this look.
    fn job(&self) -> Job {
        Job::ForgetLate {
            channel: self.channel.clone(),
            ts: self.ts.clone(),
            user: self.user.clone(),
            name: self.name.to_owned(),
            channels: self.channels.to_vec(),
            server: self.server.map(str::to_owned),
        }
    }
}

/// Runs a forget's second look: the forget marked the person before it began, and
/// memory work checks that mark before it writes, but work that checked just before
/// the mark and wrote after the forget had looked at that channel (a reflection's new
/// fact or note, an answer's topics) is only caught by looking again once every such
/// job has ended; and a message of theirs posted before the forget and delivered late
/// (a platform's retry) is stored after it. In the channels the forget reached, every
/// channel with a fact from or naming them learned before its end, and every channel
/// their profile (again) lists, within its reach: their
/// messages posted before it ended go (and the channel's memory is made anew from the
/// rest), facts from or naming them learned from messages older than its end are
/// removed or edited, their note goes (a note does not say which messages it came
/// from), and a workspace memory naming them is cleared. A fact learned only from what
/// was written after stays: they spoke again. Safe to repeat; recorded (as `late`)
/// only when it removed something.
pub async fn look_again(deps: &Deps, late: &Late<'_>) -> PortResult<()> {
    let Late { channel, ts, user, name, channels, server } = *late;
    let ended = deps.ledger.cache_get(&ended_key(channel, user, ts), deps.clock.now()).await?;
    let Some(until) = ended.and_then(|at| at.parse().ok()).map(Timestamp) else {
        if forget_in_progress(deps, user).await? {
            // Its run may still be going: this look comes again once it can have ended
            // (queued anew, not failed, so however long that takes it never ends in the
            // dead letters; the mark expires if the run never comes back).
            return deps.enqueue_after(late.job(), deps.budget.claim_lease()).await;
        }
        // The run that queued this died before it ended (its redelivery, if any, queued
        // a look of its own), or its end expired before a redrive.
        tracing::warn!(%user, "a forget's second look found no end of its run; it does nothing");
        return Ok(());
    };
    let key = format!("forget-late:{channel}:{user}:{ts}");
    let now = deps.clock.now();
    match deps.ledger.claim(&key, now, deps.budget.claim_lease()).await? {
        ClaimOutcome::Completed => return Ok(()),
        ClaimOutcome::InProgress { until } => return Err(ClaimOutcome::busy(&key, until, now)),
        ClaimOutcome::Claimed | ClaimOutcome::Resumed => {}
    }
    let looked = async {
        // A fact without its messages (stored before they were kept) is taken as old.
        let learned_before = |fact: &crate::domain::Fact| {
            fact.source_messages.is_empty()
                || fact.source_messages.iter().any(|m| m.posted_at().is_none_or(|at| at < until))
        };
        let mentions = |text: &str| names_person(text, user, name);
        // Besides the forget's channels: where a late message of theirs recreated their
        // profile, and where a fact learned since is from or about them.
        let mut more: Vec<ChannelId> = deps.facts.profile(user).await?.map(|p| p.channels).unwrap_or_default();
        for other in deps.facts.fact_channels().await? {
            if !channels.contains(&other) && !more.contains(&other) {
                let facts = deps.facts.facts(&other).await?;
                if facts.iter().any(|f| (f.is_from(user, name) || mentions(&f.content)) && learned_before(f)) {
                    more.push(other);
                }
            }
        }
        more.retain(|c| !channels.contains(c));
        more.sort();
        more.dedup();
        let (more, _) = in_reach(deps, more, server, channel).await?;
        // What earlier attempts removed, kept channel by channel: the log line counts
        // the whole look, not only the attempt that finished it.
        let progress = format!("{key}:removed");
        let earlier = deps.ledger.cache_get(&progress, deps.clock.now()).await?;
        let mut done: Forgotten = earlier.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or_default();
        let save = async |done: &Forgotten| {
            let json = serde_json::to_string(done).expect("counts encode");
            deps.ledger.cache_put(&progress, &json, deps.clock.now() + DEAD_LETTER_KEEP).await
        };
        for each in channels.iter().chain(&more) {
            // Set before their late messages go, kept until the memory is made anew: a
            // look that dies in between (at the facts, at the memory) remakes it on its
            // redelivery, which finds no message.
            let remaking = format!("{key}:remake:{each}");
            let interrupted = deps.ledger.cache_get(&remaking, deps.clock.now()).await?.is_some();
            deps.ledger.cache_put(&remaking, "1", deps.clock.now() + DEAD_LETTER_KEEP).await?;
            let messages = deps.messages.delete_messages_by(each, user, Some(until)).await?;
            if messages > 0 {
                done.messages += messages;
                save(&done).await?;
            }
            let here = forget_facts_and_note(deps, each, user, name, learned_before).await?;
            if here != Forgotten::default() {
                done = done + here;
                save(&done).await?;
            }
            if messages > 0 || interrupted {
                // A summary made since may hold what they said: made anew from the rest.
                let memory = deps.channels.channel_state(each).await?.memory.clone();
                if make_memory_anew(deps, each, &memory, interrupted).await? {
                    done.summaries += 1;
                }
            }
            // Done here: the mark expires at once.
            deps.ledger.cache_put(&remaking, "", deps.clock.now()).await?;
        }
        forget_in_workspace_memory(deps, user, name).await?;
        if done != Forgotten::default() {
            tracing::info!(%user, ?done, "a forget's second look removed what was stored of them after it");
            record_forgotten(deps, channel, user, &done, server, true);
        }
        Ok(())
    };
    match looked.await {
        Ok(()) => deps.ledger.complete(&key, deps.clock.now(), REQUEST_KEEP).await,
        Err(error) => {
            if let Err(release) = deps.ledger.release(&key).await {
                tracing::warn!(error = %release, %key, "could not release a forget's second look");
            }
            Err(error)
        }
    }
}

/// The decision record of a forget request: who, asked where, and what went.
pub fn record_forgotten(
    deps: &Deps,
    requested_in: &ChannelId,
    user: &UserId,
    done: &Forgotten,
    server: Option<&str>,
    late: bool,
) {
    record(
        deps,
        requested_in,
        None,
        Ts::from_timestamp(deps.clock.now()),
        EventKind::Forget {
            user: Some(user.clone()),
            messages: done.messages,
            facts_removed: done.facts_removed,
            facts_edited: done.facts_edited,
            notes: done.notes,
            summaries: done.summaries,
            server: server.map(str::to_owned),
            unplaced: done.unplaced,
            late,
        },
    );
}

/// Makes `channel`'s memory anew ([`remake_memory`]) once it was summarized, or when an
/// interrupted run owes it (it died after the wipe, so finds it empty); a memory never
/// summarized moves to a new generation instead, so a first summary being made from
/// what went is not stored (a memory of an older generation never is). Returns whether
/// it was made anew.
async fn make_memory_anew(deps: &Deps, channel: &ChannelId, memory: &ChannelMemory, owed: bool) -> PortResult<bool> {
    if memory.updated_at.is_some() || owed {
        remake_memory(deps, channel, memory).await?;
        return Ok(true);
    }
    let next = ChannelMemory { generation: memory.generation + 1, ..memory.clone() };
    deps.channels.set_channel_memory(channel, next).await?;
    Ok(false)
}

/// Wipes a channel's memory and queues a summary that makes it anew from the messages
/// still stored (the next generation, so it is not taken for a summary done before).
async fn remake_memory(deps: &Deps, channel: &ChannelId, memory: &ChannelMemory) -> PortResult<()> {
    let wiped =
        ChannelMemory { generation: memory.generation + 1, private: memory.private, ..ChannelMemory::default() };
    // A newer generation: always stored, and no summary made before it can undo it.
    deps.channels.set_channel_memory(channel, wiped).await?;
    deps.channels.set_channel_line(channel, None).await?;
    if crate::memory::enabled(deps) {
        let job = Job::Summarize { channel: channel.clone(), ts: Ts::from_timestamp(deps.clock.now()) };
        deps.enqueue_after(job, std::time::Duration::ZERO).await?;
    }
    Ok(())
}

/// A deleted message leaves the facts learned from it: those it was the only source
/// of are removed, the others forget it as a source. Safe to repeat.
pub async fn forget_message(deps: &Deps, channel: &ChannelId, ts: &Ts) -> PortResult<()> {
    let (removed, edited) = rewrite_facts(deps, channel, |fact| {
        if !fact.source_messages.contains(ts) {
            return None;
        }
        let mut fact = fact.clone();
        fact.source_messages.retain(|t| t != ts);
        Some((!fact.source_messages.is_empty()).then_some(fact))
    })
    .await?;
    if removed + edited > 0 {
        record(
            deps,
            channel,
            None,
            ts.clone(),
            EventKind::Forget {
                user: None,
                messages: 1,
                facts_removed: removed,
                facts_edited: edited,
                notes: 0,
                summaries: 0,
                server: None,
                unplaced: 0,
                late: false,
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::adapters::memory::{InProcess, MemoryLog, RecordingChat, TsMint, VirtualClock};
    use crate::config::Settings;
    use crate::domain::Timestamp;
    use crate::ports::Clock;

    /// Deps over the in-process store and a recording chat, on a virtual clock.
    fn in_process() -> (Deps, Arc<VirtualClock>) {
        let clock = Arc::new(VirtualClock::new(Timestamp(1_000_000_000)));
        let chat = Arc::new(RecordingChat::new(clock.clone(), Arc::new(TsMint::default())));
        (deps_over(&InProcess::new(clock.clone()), chat), clock)
    }

    /// A worker's deps over `parts` (another worker may share them), talking to `chat`.
    fn deps_over(parts: &InProcess, chat: Arc<dyn crate::ports::Chat>) -> Deps {
        let settings = Settings::from_vars(&HashMap::new()).unwrap();
        let adapters = parts.adapters(chat, None, Arc::new(MemoryLog::default()));
        Deps::new(settings.clone(), settings.persona(None), UserId("UKUUKI".into()), adapters, 1)
    }

    fn ids(ids: &[&str]) -> Vec<ChannelId> {
        ids.iter().map(|id| ChannelId((*id).into())).collect()
    }

    /// A Slack admin's forget reaches the Slack workspace's channels (its DMs too), not
    /// the Discord channels of a deployment serving both, and asks no platform.
    #[tokio::test]
    async fn a_slack_admins_forget_reaches_the_slack_workspace_only() {
        let (deps, _) = in_process();
        let all = ids(&["C1", "41771983423143938", "D9", "C2"]);
        let asked_in = ChannelId("C2".into());
        let (reached, unplaced) = in_reach(&deps, all.clone(), Some(SLACK_WORKSPACE), &asked_in).await.unwrap();
        assert_eq!((reached, unplaced), (ids(&["C1", "D9", "C2"]), 0));
        assert_eq!(in_reach(&deps, all.clone(), None, &asked_in).await.unwrap(), (all, 0), "everywhere");
    }

    /// A chat that places two Discord channels in two servers, counting the lookups.
    #[derive(Default)]
    struct Placing(std::sync::atomic::AtomicUsize);

    #[async_trait::async_trait]
    impl crate::ports::Chat for Placing {
        async fn post_message(&self, _: &crate::ports::Post) -> PortResult<Ts> {
            unreachable!("placing channels posts nothing")
        }
        async fn add_reaction(&self, _: &ChannelId, _: &Ts, _: &str) -> PortResult<()> {
            unreachable!("placing channels reacts to nothing")
        }
        async fn find_post(
            &self,
            _: &ChannelId,
            _: Option<&Ts>,
            _: &Ts,
            _: &str,
        ) -> PortResult<Option<crate::ports::FoundPost>> {
            unreachable!("placing channels looks for no post")
        }
        async fn user_name(&self, user: &UserId) -> PortResult<String> {
            Ok(user.0.to_string())
        }
        async fn answer_command(&self, _: &CommandReply, _: &str) -> PortResult<()> {
            unreachable!("placing channels answers nothing")
        }
        async fn server_of(&self, channel: &ChannelId) -> PortResult<Option<String>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(match channel.as_str() {
                "111" => Some("G1".into()),
                "222" => Some("G2".into()),
                _ => None,
            })
        }
    }

    /// A channel's server is asked of the platform once and then read from the ledger,
    /// by any worker: a forget that ran out of time does not ask again elsewhere.
    #[tokio::test]
    async fn a_channels_server_is_remembered_in_the_ledger_for_every_worker() {
        let parts = InProcess::new(Arc::new(VirtualClock::new(Timestamp(1_000_000_000))));
        let (all, asked_in) = (ids(&["111", "222", "333", "C1"]), ChannelId("444".into()));
        for expected_lookups in [3, 0] {
            // Another worker: its own client, the same ledger.
            let chat = Arc::new(Placing::default());
            let deps = deps_over(&parts, chat.clone());
            let reached = in_reach(&deps, all.clone(), Some("G1"), &asked_in).await.unwrap();
            assert_eq!(reached, (ids(&["111"]), 0), "G1's channel only (C1 is Slack's)");
            assert_eq!(chat.0.load(std::sync::atomic::Ordering::SeqCst), expected_lookups);
        }
    }

    /// A second look whose forget run is still going comes again a lease later (queued
    /// anew, never failed into the dead letters); one whose run never ended does nothing
    /// (not even under another forget's end: the person's messages stay).
    #[tokio::test]
    async fn a_second_look_waits_for_a_forget_in_progress_and_skips_a_run_that_did_not_end() {
        let clock = Arc::new(VirtualClock::new(Timestamp(1_000_000_000)));
        let parts = InProcess::new(clock.clone());
        let deps = deps_over(&parts, Arc::new(RecordingChat::new(clock.clone(), Arc::new(TsMint::default()))));
        let (channel, user) = (ChannelId("C1".into()), UserId("U1".into()));
        let said = crate::domain::Message {
            channel: channel.clone(),
            ts: Ts::from_timestamp(Timestamp(999_000_000)),
            thread_root: None,
            user: user.clone(),
            user_name: "alice".into(),
            text: "my cat is Miso".into(),
            author: crate::domain::Author::Human,
            replies_to_bot: false,
            in_dm: false,
            private_channel: false,
            at: Timestamp(999_000_000),
        };
        deps.messages.put_message(&Arc::new(said)).await.unwrap();
        let ts = Ts::new("1.000001");
        let channels = [channel.clone()];
        let late = Late { channel: &channel, ts: &ts, user: &user, name: "", channels: &channels, server: None };
        let looks = || parts.queue.waiting(|job| matches!(job, Job::ForgetLate { .. }));
        look_again(&deps, &late).await.expect("nothing to do");
        assert!(looks().is_empty());
        mark_forgotten(&deps, &user, "", false).await.unwrap();
        look_again(&deps, &late).await.expect("queued again, not failed");
        assert_eq!(looks(), [clock.now() + deps.budget.claim_lease()], "again once the run can have ended");
        mark_forgotten(&deps, &user, "", true).await.unwrap();
        look_again(&deps, &late).await.expect("another run's end is not this run's");
        let left = deps.messages.messages_after(&channel, None, 10).await.unwrap();
        assert_eq!(left.len(), 1, "nothing removed without its own run's end");
    }

    /// Memory work that read someone's messages before their forget ended, or while it
    /// runs, counts them forgotten; work that read after it ended does not (what they
    /// say after a forget is theirs to be remembered again).
    #[tokio::test]
    async fn a_person_counts_forgotten_for_work_that_read_before_the_forget_ended() {
        let (deps, clock) = in_process();
        let (alice, read) = (UserId("UALICE".into()), clock.now());
        assert_eq!(forgotten_since(&deps, &alice, read).await.unwrap(), None, "never forgotten");
        clock.advance_to(Timestamp(read.0 + 1_000_000));
        mark_forgotten(&deps, &alice, "Alice", false).await.unwrap();
        clock.advance_to(Timestamp(clock.now().0 + 1_000_000));
        let during = clock.now();
        let alice_named = Some("Alice".to_owned());
        assert_eq!(forgotten_since(&deps, &alice, read).await.unwrap(), alice_named, "read before it began");
        assert_eq!(forgotten_since(&deps, &alice, during).await.unwrap(), alice_named, "read while it runs");
        clock.advance_to(Timestamp(during.0 + 1_000_000));
        mark_forgotten(&deps, &alice, "Alice", true).await.unwrap();
        assert_eq!(forgotten_since(&deps, &alice, during).await.unwrap(), alice_named, "read before it ended");
        let after = Timestamp(clock.now().0 + 1);
        assert_eq!(forgotten_since(&deps, &alice, after).await.unwrap(), None, "read after it ended");
    }
}
