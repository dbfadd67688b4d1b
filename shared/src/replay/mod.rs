//! `kuuki replay`: the whole pipeline in one process on a virtual clock, a transcript
//! in and the decision log out (DESIGN §7).

mod log;
pub mod report;
mod transcript;

pub use log::{LogWriter, Stats};
pub use transcript::{DEFAULT_CHANNEL, TranscriptError, TranscriptLine, parse_transcript};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::llm::CountingLlm;
use crate::adapters::memory::{InProcess, MemoryLog, RecordingChat, TsMint, VirtualClock};
use crate::config::Settings;
use crate::deps::Deps;
use crate::domain::{Author, ChannelId, Message, Persona, Timestamp, Ts, UserId};
use crate::ingest::{Incoming, ingest};
use crate::ports::{Clock, Llm, PortError};
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
    let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
    let mint = Arc::new(TsMint::default());
    let parts = InProcess::new(clock.clone());
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
        parts.adapters(chat, counting.clone().map(|c| c as Arc<dyn Llm>), log.clone()),
        options.seed,
    );

    // Thread ids of the transcript -> the ts of the message that started each thread.
    let mut roots: HashMap<(String, String), Ts> = HashMap::new();
    let advance = |at: Timestamp| clock.advance_to(at);
    for line in transcript {
        let at = REPLAY_EPOCH + Duration::from_secs_f64(line.t);
        let failed = run_due(&deps, &queue, at, advance).await;
        writer.count_failed_deliveries(failed);
        writer.write_events(log.take());
        clock.advance_to(at);

        let ts = mint.mint(at);
        let thread_root = line.thread.as_ref().map(|id| {
            let root = roots.entry((line.channel.clone(), id.clone())).or_insert_with(|| ts.clone()).clone();
            writer.name_thread(&line.channel, &root, id);
            root
        });
        let message = Message {
            channel: ChannelId(line.channel.clone()),
            ts,
            thread_root,
            user: UserId(line.user.clone()),
            user_name: line.user.clone(),
            text: line.text.clone(),
            author: if line.bot { Author::OtherBot } else { Author::Human },
            replies_to_bot: line.reply_to_bot,
            in_dm: false,
            private_channel: false,
            at,
        };
        ingest(&deps, Incoming::Message(message)).await?;
        writer.count_message();
        writer.write_events(log.take());
    }
    let failed = run_due(&deps, &queue, Timestamp(i64::MAX), advance).await;
    writer.count_failed_deliveries(failed);
    writer.write_events(log.take());
    let usage = counting.map(|c| c.usage()).unwrap_or_default();
    Ok(writer.finish(clock.now(), usage))
}
