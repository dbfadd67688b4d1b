//! Forgetting (docs/design.md §10): a person who asks (`/kuuki forget-me`, or a manager's
//! `/kuuki forget @user`) is removed from every memory tier, and a deleted message is
//! removed from the facts it was the only source of. A Discord member who manages
//! channels in one server forgets the person in that server's channels only.
//!
//! Every step deletes or rewrites what is still there, so a request that dies halfway
//! is finished by running it again; the person's profile goes last because it lists
//! the channels to look in. Each run first queues its second look ([`look_again`]),
//! which removes what work in flight and late deliveries stored of them after it, and
//! records its end for it as it ends. What a forget keeps in the ledger is typed in
//! `records.rs`; the per-channel sweep the forget and its second look share is
//! `sweep.rs`; the request's job `request.rs`; the second look `late.rs`.

use std::time::Duration;

use super::keywords::contains_phrase;
use crate::deps::Deps;
use crate::domain::{ChannelId, ChannelMemory, EventKind, SLACK_WORKSPACE, Ts, UserId, discord_server};
use crate::ports::{PortError, PortResult};
use crate::record::record;

mod late;
mod records;
mod request;
mod sweep;

use late::{DEAD_LETTER_KEEP, second_look_delay};
pub use late::{Late, look_again};
use records::{FORGOTTEN_KEEP, LookRecord, mark_forgotten, working_mark};
pub use records::{forgotten_among, forgotten_since};
pub use request::carry_out;
use sweep::{OwedRemake, Sweep, forget_in_workspace_memory, rewrite_facts};

/// Whether `text` names the person by id or by display name (`name`, may be empty):
/// whole words, so a name inside another word ("Sam" in "Samsung") is not them.
pub fn names_person(text: &str, user: &UserId, name: &str) -> bool {
    contains_phrase(text, &user.0) || contains_phrase(text, name)
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
    if !channel.is_discord() {
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

/// Among `channels` of `requested_in`'s workspace, those `server` reaches (all of them
/// when `None`), and how many could not be placed. `requested_in` is always one; the
/// Slack workspace reaches its own channels; a Discord server the channels Discord
/// puts in it, asked a few at a time (remembered in the ledger, see
/// [`in_discord_server`]).
async fn in_reach(
    deps: &Deps,
    channels: Vec<ChannelId>,
    server: Option<&str>,
    requested_in: &ChannelId,
) -> PortResult<(Vec<ChannelId>, usize)> {
    // A forget never reaches past the workspace it was asked in: with many Slack
    // workspaces on one deployment, each is its own (the shared one holds the one
    // Slack workspace a deployment serves alone, and Discord's servers).
    let workspace = requested_in.workspace();
    let channels: Vec<ChannelId> = channels.into_iter().filter(|c| c.workspace() == workspace).collect();
    let Some(server) = server else { return Ok((channels, 0)) };
    if server == SLACK_WORKSPACE {
        return Ok((channels.into_iter().filter(|c| c == requested_in || !c.is_discord()).collect(), 0));
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
    let name = match deps.chat.user_name(requested_in, user).await {
        Ok(name) if *name != *user.0 => name,
        _ => String::new(),
    };
    let profile = deps.facts.profile(requested_in.workspace(), user).await?;
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
    let sweep = Sweep { user, name: &name, before: None };
    // Where they wrote, a summary may hold what they said even after their messages
    // expired; and one that names them is made anew wherever it is.
    let in_memory = |memory: &ChannelMemory| {
        memory.active_users.iter().any(|u| sweep.mentions(u))
            || sweep.mentions(&memory.summary)
            || sweep.mentions(&memory.history)
    };
    for channel in &channels {
        // Kept while their messages here go and the memory is wiped: a run that dies
        // in between leaves it, and the next run wipes the memory though it finds no
        // message of theirs (with no profile to say they wrote here).
        let owed = OwedRemake { key: working_mark(user, channel), keep: FORGOTTEN_KEEP };
        let also = |memory: &ChannelMemory| wrote_in.contains(channel) || in_memory(memory);
        sweep.channel(deps, channel, &owed, Some(&also), &mut done, None).await?;
    }
    forget_in_workspace_memory(deps, requested_in.workspace(), user, &name).await?;
    if profile.is_some() && wrote_elsewhere {
        done.profile_kept = true;
    } else if profile.is_some() {
        deps.facts.delete_profile(requested_in.workspace(), user).await?;
        done.profile = true;
    }
    mark_forgotten(deps, user, &name, true).await?;
    // This run's end, for its own second look (the person's mark is the last forget's).
    let ended = deps.clock.now();
    let look = LookRecord::new(requested_in, user, &late_ts);
    look.set_run_ended(deps, ended, ended + second_look_delay(deps) + DEAD_LETTER_KEEP).await?;
    Ok(done)
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
    use crate::domain::{CommandReply, Job, Timestamp};
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
        async fn user_name(&self, _: &ChannelId, user: &UserId) -> PortResult<String> {
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
            replies_to: None,
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
