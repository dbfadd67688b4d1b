//! `kuuki replay`: the whole pipeline in one process on a virtual clock, a transcript
//! in and the decision log out (DESIGN §7).

mod log;
pub mod report;
mod transcript;

pub use log::{LogWriter, Stats};
pub use transcript::{DEFAULT_CHANNEL, TranscriptError, TranscriptLine, parse_transcript};

// foldhash, not SipHash: every transcript line looks up its channel, person and thread.
use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::llm::CountingLlm;
use crate::adapters::memory::{InProcess, MemoryLog, RecordingChat, TsMint, VirtualClock};
use crate::config::Settings;
use crate::deps::Deps;
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
    queue: Arc<crate::adapters::memory::MemoryQueue>,
    log: Arc<MemoryLog>,
    counting: Option<Arc<CountingLlm>>,
    /// Channel -> thread ids of the transcript -> the ts of the message that started
    /// each thread, and whether the log has heard its name.
    roots: HashMap<String, HashMap<String, (Ts, bool)>>,
    /// Decision records on their way to the writer (kept, so its room is reused).
    events: Vec<crate::domain::Event>,
    /// The ids met so far, so each message shares its channel's and person's id text
    /// instead of allocating its own.
    channels: HashMap<String, ChannelId>,
    users: HashMap<String, UserId>,
}

/// How many of `transcript`'s messages are in a thread, by channel: at most as many
/// threads as that. The replay makes room for them at the start; maps that grow as
/// threads come rehash every entry at each doubling, from memory no cache holds in a
/// long replay.
fn thread_lines_by_channel(transcript: &[TranscriptLine]) -> HashMap<&str, usize> {
    let mut lines: HashMap<&str, usize> = HashMap::new();
    for line in transcript.iter().filter(|l| l.thread.is_some() && l.command.is_none()) {
        *lines.entry(line.channel.as_str()).or_default() += 1;
    }
    lines
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
        let mint = Arc::new(TsMint::default());
        // Like `kuuki serve` and DynamoDB's TTL: old messages and expired claims go, so
        // a long replay holds what production would, not its whole history.
        let retention = Duration::from_secs(u64::from(options.settings.message_retention_days) * 86_400);
        let parts = InProcess::with_retention(clock.clone(), retention);
        parts
            .queue
            .set_visibility_timeout(crate::budget::TimeBudget::from_settings(&options.settings).visibility_timeout());
        let queue = parts.queue.clone();
        let log = Arc::new(MemoryLog::default());
        let chat = Arc::new(RecordingChat::new(clock.clone(), mint.clone()));
        let counting = options.llm.map(|llm| Arc::new(CountingLlm::new(llm)));
        let deps = Deps::new(
            options.settings,
            options.persona,
            UserId(REPLAY_BOT_USER.into()),
            parts
                .adapters(chat, counting.clone().map(|c| c as Arc<dyn Llm>), log.clone())
                .with_embedder(options.embedder),
            options.seed,
        );
        Replay {
            deps,
            clock,
            mint,
            queue,
            log,
            counting,
            roots: HashMap::new(),
            events: Vec::new(),
            channels: HashMap::new(),
            users: HashMap::new(),
        }
    }

    /// Stores `lines` as history the replay starts from: kept like any message, never
    /// judged or answered, nothing logged (benchmarks of a store already full).
    pub async fn store_history(&mut self, lines: &[TranscriptLine]) -> Result<(), ReplayError> {
        for line in lines.iter().filter(|l| l.command.is_none()) {
            let at = REPLAY_EPOCH + Duration::from_secs_f64(line.t);
            self.clock.advance_to(at);
            let message = self.message(line, at, |_, _, _| false);
            self.deps.messages.put_message(&Arc::new(message)).await?;
        }
        Ok(())
    }

    /// The stored message for a transcript line written at `at`; `named` hears of the
    /// thread it is in (channel, root, transcript id).
    fn message(
        &mut self,
        line: &TranscriptLine,
        at: Timestamp,
        mut named: impl FnMut(&str, &Ts, &str) -> bool,
    ) -> Message {
        let ts = self.mint.mint(at);
        let thread_root = line.thread.as_ref().map(|id| {
            let roots = match self.roots.get_mut(&line.channel) {
                Some(roots) => roots,
                None => self.roots.entry(line.channel.clone()).or_default(),
            };
            let (root, known) = match roots.get_mut(id) {
                Some(root) => root,
                None => roots.entry(id.clone()).or_insert_with(|| (ts.clone(), false)),
            };
            // The log hears a thread's name once (history is not logged: named later).
            if !*known {
                *known = named(&line.channel, root, id);
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
        for (channel, lines) in thread_lines_by_channel(transcript) {
            self.roots.entry(channel.to_owned()).or_default().reserve(lines);
            writer.make_room_for_threads(channel, lines);
        }
        for line in transcript {
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
                    discord_reply: None,
                    server: None,
                };
                run_command(&self.deps, &command).await?;
                self.log.swap(&mut self.events);
                writer.write_events(&mut self.events);
                continue;
            }
            let message = self.message(line, at, |channel, root, id| {
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
