//! `kuuki replay`: the whole pipeline in one process on a virtual clock, a transcript
//! in and the decision log out (docs/design.md §15).

mod log;
pub mod report;
mod transcript;

pub use log::{LogWriter, Stats};
pub use transcript::{DEFAULT_CHANNEL, MAX_T, TranscriptError, TranscriptLine, TranscriptReaction, parse_transcript};

// foldhash, not SipHash: every transcript line looks up its channel, person and thread.
use foldhash::{HashMap, HashMapExt};
use smol_str::SmolStr;
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::llm::CountingLlm;
use crate::adapters::memory::{InProcess, MemoryLog, RecordingChat, TsMint, VirtualClock};
use crate::config::Settings;
use crate::deps::{Adapters, Deps, Surroundings};
use crate::domain::{Author, ChannelId, Message, Persona, Timestamp, Ts, UserId};
use crate::ingest::command::{SlashCommand, run_command};
use crate::ingest::{Incoming, ingest};
use crate::ports::{Clock, Embedder, InProcessQueue, Llm, PortError};
use crate::worker::run_due;

/// Where the virtual clock starts: Monday 2026-01-05 09:00 UTC, a working morning.
pub const REPLAY_EPOCH: Timestamp = Timestamp(1_767_603_600 * Timestamp::MICROS_PER_SECOND);
/// kuuki's user id in a replay, so `<@bot>` is a mention of it.
pub const REPLAY_BOT_USER: &str = "bot";

pub struct ReplayOptions {
    pub settings: Settings,
    pub persona: Persona,
    /// `None` runs on rules only.
    pub llm: Option<Arc<dyn Llm>>,
    /// Vector fact search (`adapters::llm::embedder_from_settings`); `None` is off.
    pub embedder: Option<Arc<dyn Embedder>>,
    pub seed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("a store or queue failed: {0}")]
    Port(#[from] PortError),
}

/// Replays `transcript`, handing each decision-log line to `writer` as it happens,
/// and runs until all queued work is done.
pub async fn replay(
    transcript: &[TranscriptLine],
    options: ReplayOptions,
    writer: &mut LogWriter<'_>,
) -> Result<Stats, ReplayError> {
    Replay::new(options).run(transcript, writer).await
}

/// One replay: the pipeline in one process, the virtual clock, and the transcript's
/// thread names.
pub struct Replay {
    deps: Deps,
    clock: Arc<VirtualClock>,
    mint: Arc<TsMint>,
    queue: Arc<dyn InProcessQueue>,
    log: Arc<MemoryLog>,
    counting: Option<Arc<CountingLlm>>,
    /// Channel -> thread ids of the transcript -> the thread's number in `threads`. An
    /// id is kept inline (a short text), so a lookup compares it in the table.
    thread_numbers: HashMap<String, HashMap<SmolStr, u32>>,
    threads: Vec<ThreadSlot>,
    /// Decision records on their way to the writer (kept, so its room is reused).
    events: Vec<crate::domain::Event>,
    /// The ids met so far, so each message shares its channel's and person's id text
    /// instead of allocating its own.
    channels: HashMap<String, ChannelId>,
    users: HashMap<String, UserId>,
}

/// A transcript's thread, by its number: the ts of the message that started it (once
/// written) and whether the log has heard its name. One cache line each: a reply to a
/// thread started long ago reads this line and no other of the replay's own, where a
/// map by id read its control bytes, its entry and the id's text.
#[derive(Default)]
#[repr(align(64))]
struct ThreadSlot {
    root: Option<Ts>,
    named: bool,
}

/// The shared id for `text`, made once.
fn interned<Id: Clone>(ids: &mut HashMap<String, Id>, text: &str, make: impl FnOnce(&str) -> Id) -> Id {
    if let Some(id) = ids.get(text) {
        return id.clone();
    }
    let id = make(text);
    ids.insert(text.to_owned(), id.clone());
    id
}

impl Replay {
    pub fn new(options: ReplayOptions) -> Self {
        let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
        // Like `kuuki serve` and DynamoDB's TTL: old messages and expired claims go, so
        // a long replay holds what production would, not its whole history.
        let parts = InProcess::with_retention(clock.clone(), Self::retention(&options));
        Self::on_store(options, clock, parts.store, parts.queue)
    }

    /// How long the replay's store keeps a message (`MESSAGE_RETENTION_DAYS`).
    pub fn retention(options: &ReplayOptions) -> Duration {
        Duration::from_secs(u64::from(options.settings.memory.message_retention_days) * 86_400)
    }

    /// The replay on `store` (every memory tier and the ledger) and `queue`, both on
    /// `clock`, which starts at [`REPLAY_EPOCH`]: `kuuki bench` replays on the SQLite
    /// store this way.
    pub fn on_store<S, Q>(options: ReplayOptions, clock: Arc<VirtualClock>, store: Arc<S>, queue: Arc<Q>) -> Self
    where
        S: crate::ports::MessageStore
            + crate::ports::ChannelStateStore
            + crate::ports::FactStore
            + crate::ports::Ledger
            + 'static,
        Q: crate::ports::Queue + crate::ports::Scheduler + crate::ports::InProcessQueue + 'static,
    {
        queue.set_visibility_timeout(options.settings.time_budget().visibility_timeout());
        let log = Arc::new(MemoryLog::default());
        let mint = Arc::new(TsMint::default());
        let chat = Arc::new(RecordingChat::new(clock.clone(), mint.clone()));
        let counting = options.llm.map(|llm| Arc::new(CountingLlm::new(llm)));
        let around = Surroundings {
            chat,
            llm: counting.clone().map(|c| c as Arc<dyn Llm>),
            clock: clock.clone(),
            log: log.clone(),
        };
        let adapters =
            Adapters::from_store(store, queue.clone(), queue.clone(), around).with_embedder(options.embedder);
        let deps = Deps::new(options.settings, options.persona, UserId(REPLAY_BOT_USER.into()), adapters, options.seed);
        Replay {
            deps,
            clock,
            mint,
            queue,
            log,
            counting,
            thread_numbers: HashMap::new(),
            threads: Vec::new(),
            events: Vec::new(),
            channels: HashMap::new(),
            users: HashMap::new(),
        }
    }

    /// Stores `lines` as history the replay starts from: kept like any message, never
    /// judged or answered, nothing logged (benchmarks of a store already full).
    pub async fn store_history(&mut self, lines: &[TranscriptLine]) -> Result<(), ReplayError> {
        for line in lines.iter().filter(|l| l.command.is_none() && l.reaction.is_none()) {
            let at = REPLAY_EPOCH + Duration::from_secs_f64(line.t);
            self.clock.advance_to(at);
            let thread = line.thread.as_deref().map(|id| self.thread_number(&line.channel, id).0);
            let message = self.message(line, at, thread, |_, _, _| false);
            self.deps.messages.put_message(&Arc::new(message)).await?;
        }
        Ok(())
    }

    /// The number of the transcript's thread `id` in `channel`, and whether it is new.
    fn thread_number(&mut self, channel: &str, id: &str) -> (u32, bool) {
        let numbers = match self.thread_numbers.get_mut(channel) {
            Some(numbers) => numbers,
            None => self.thread_numbers.entry(channel.to_owned()).or_default(),
        };
        if let Some(number) = numbers.get(id) {
            return (*number, false);
        }
        let number = u32::try_from(self.threads.len()).expect("fewer than 2^32 threads");
        numbers.insert(SmolStr::new(id), number);
        self.threads.push(ThreadSlot::default());
        (number, true)
    }

    /// The stored message for a transcript line written at `at`, in the thread numbered
    /// `thread`; `named` hears of the thread (channel, root, transcript id).
    fn message(
        &mut self,
        line: &TranscriptLine,
        at: Timestamp,
        thread: Option<u32>,
        mut named: impl FnMut(&str, &Ts, &str) -> bool,
    ) -> Message {
        let ts = self.mint.mint(at);
        let thread_root = thread.map(|number| {
            let slot = &mut self.threads[number as usize];
            let root = slot.root.get_or_insert_with(|| ts.clone());
            // The log hears a thread's name once (history is not logged: named later).
            if !slot.named {
                slot.named = named(&line.channel, root, line.thread.as_deref().unwrap_or_default());
            }
            root.clone()
        });
        Message {
            channel: interned(&mut self.channels, &line.channel, |c| ChannelId(c.into())),
            ts,
            thread_root,
            user: interned(&mut self.users, &line.user, |u| UserId(u.into())),
            user_name: line.user.clone(),
            text: line.text.clone(),
            author: if line.bot { Author::OtherBot } else { Author::Human },
            replies_to_bot: line.reply_to_bot,
            replies_to: None,
            in_dm: false,
            private_channel: line.private,
            at,
        }
    }

    /// Replays `transcript` and runs until all queued work is done. The store is kept
    /// until the replay is dropped, so a benchmark can time the replay without the
    /// teardown.
    pub async fn run(
        &mut self,
        transcript: &[TranscriptLine],
        writer: &mut LogWriter<'_>,
    ) -> Result<Stats, ReplayError> {
        let clock = self.clock.clone();
        let advance = |at: Timestamp| clock.advance_to(at);
        // Threads numbered before the replay, while nothing else competes for the
        // cache: the loop then reads a thread's slot by its number.
        let mut new_threads: HashMap<&str, usize> = HashMap::new();
        let numbers: Vec<Option<u32>> = transcript
            .iter()
            .map(|line| {
                let id = line.thread.as_deref().filter(|_| line.command.is_none() && line.reaction.is_none())?;
                let (number, new) = self.thread_number(&line.channel, id);
                *new_threads.entry(line.channel.as_str()).or_default() += usize::from(new);
                Some(number)
            })
            .collect();
        for (channel, threads) in new_threads {
            writer.make_room_for_threads(channel, threads);
        }
        for (line, thread) in transcript.iter().zip(numbers) {
            let at = REPLAY_EPOCH + Duration::from_secs_f64(line.t);
            let failed = run_due(&self.deps, &*self.queue, at, advance).await;
            writer.count_failed_deliveries(failed);
            self.log.swap(&mut self.events);
            writer.write_events(&mut self.events);
            clock.advance_to(at);

            if let Some(command) = &line.command {
                let (name, text) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
                let command = SlashCommand {
                    command: name.to_owned(),
                    text: text.trim().to_owned(),
                    channel_id: line.channel.clone(),
                    user_id: line.user.clone(),
                    // A transcript's managers are the ones `COMMAND_MANAGERS` names.
                    may_manage_channel: None,
                    // No way back: the answer is logged at once.
                    response_url: None,
                    team_id: None,
                    enterprise_id: None,
                    is_enterprise_install: false,
                    discord_reply: None,
                    server: None,
                };
                run_command(&self.deps, &command).await?;
                self.log.swap(&mut self.events);
                writer.write_events(&mut self.events);
                continue;
            }
            if let Some(reaction) = &line.reaction {
                self.react(line, reaction).await?;
                self.log.swap(&mut self.events);
                writer.write_events(&mut self.events);
                continue;
            }
            let message = self.message(line, at, thread, |channel, root, id| {
                writer.name_thread(channel, root, id);
                true
            });
            ingest(&self.deps, Incoming::Message(message)).await?;
            writer.count_message();
            self.log.swap(&mut self.events);
            writer.write_events(&mut self.events);
        }
        let failed = run_due(&self.deps, &*self.queue, Timestamp(i64::MAX), advance).await;
        writer.count_failed_deliveries(failed);
        self.log.swap(&mut self.events);
        writer.write_events(&mut self.events);
        let usage = self.counting.as_ref().map(|c| c.usage()).unwrap_or_default();
        Ok(writer.finish(clock.now(), usage))
    }
}

impl Replay {
    /// A transcript's reaction: on the message written at `to_t`, or on kuuki's latest
    /// post in the thread named or anywhere in the channel. One that finds no such
    /// message changes nothing (as a reaction on a message kuuki does not keep).
    async fn react(&mut self, line: &TranscriptLine, reaction: &TranscriptReaction) -> Result<(), ReplayError> {
        let channel = interned(&mut self.channels, &line.channel, |c| ChannelId(c.into()));
        let user = interned(&mut self.users, &line.user, |u| UserId(u.into()));
        let root = match &line.thread {
            None => None,
            Some(id) => {
                let number = self.thread_numbers.get(&line.channel).and_then(|numbers| numbers.get(id.as_str()));
                match number.and_then(|n| self.threads[*n as usize].root.clone()) {
                    Some(root) => Some(root),
                    None => return Ok(()),
                }
            }
        };
        // Every message of a long replay the store still keeps: reactions come late.
        const LOOK_BACK: usize = 100_000;
        let candidates = match &root {
            Some(root) => {
                let thread = crate::domain::ThreadKey::thread(channel.clone(), root.clone());
                self.deps.messages.recent_in_thread(&thread, REPLAY_EPOCH, LOOK_BACK).await?
            }
            None => self.deps.messages.recent_in_channel(&channel, REPLAY_EPOCH, LOOK_BACK).await?,
        };
        let target = match reaction.to_t {
            Some(to_t) => {
                let at = REPLAY_EPOCH + Duration::from_secs_f64(to_t);
                candidates.iter().find(|m| m.at == at)
            }
            None => candidates.iter().rev().find(|m| m.author == Author::OwnBot),
        };
        let Some(target) = target else { return Ok(()) };
        crate::talkativeness::reaction(&self.deps, &channel, &target.ts, &user, &reaction.emoji, reaction.removed)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn line(t: f64, channel: &str, thread: &str) -> TranscriptLine {
        TranscriptLine {
            line: 1,
            t,
            user: "alice".into(),
            text: "the deploy went fine".into(),
            command: None,
            private: false,
            thread: Some(thread.into()),
            channel: channel.into(),
            bot: false,
            reply_to_bot: false,
            reaction: None,
        }
    }

    /// A thread is its channel's and id's: one begun in the history goes on in the
    /// replay (and the log names it there), and the same id in another channel is
    /// another thread.
    #[tokio::test]
    async fn a_thread_begun_in_history_goes_on_and_an_id_is_its_channels() {
        let settings = Settings::from_vars(&std::collections::HashMap::new()).unwrap();
        let persona = settings.persona(None);
        let mut replay = Replay::new(ReplayOptions { settings, persona, llm: None, embedder: None, seed: 1 });
        replay.store_history(&[line(0.0, "a", "th1")]).await.unwrap();
        let mut out = Vec::new();
        let mut writer = LogWriter::new(&mut out, true);
        let transcript = [line(10.0, "a", "th1"), line(20.0, "b", "th1"), line(30.0, "b", "th1")];
        replay.run(&transcript, &mut writer).await.unwrap();

        let threads: Vec<&Value> =
            writer.kept().iter().filter(|l| l["kind"] == "message").map(|l| &l["thread"]).collect();
        assert_eq!(threads, [&Value::from("th1"); 3], "each message named by its thread's id");
        let store = &replay.deps.messages;
        let a = store.recent_in_channel(&ChannelId("a".into()), REPLAY_EPOCH, 10).await.unwrap();
        let b = store.recent_in_channel(&ChannelId("b".into()), REPLAY_EPOCH, 10).await.unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].thread_root.as_ref(), Some(&a[0].ts), "the reply goes on the thread begun in history");
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].thread_root.as_ref(), Some(&b[0].ts), "th1 in b begins with its first message there");
        assert_eq!(b[1].thread_root.as_ref(), Some(&b[0].ts));
    }
}
