//! `kuuki bench sqlite`: the SQLite store of `kuuki serve` measured. Replay throughput
//! on a data file at growing sizes (does per-message work stay flat?), bytes on disk
//! per stored message, and how long opening a file that holds many messages takes.

use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use kuuki::adapters::memory::VirtualClock;
use kuuki::adapters::sqlite::SqliteStore;
use kuuki::replay::{self, LogWriter, REPLAY_EPOCH};

use crate::bench::generate;
use crate::cli::{CommonArgs, setup};

#[derive(Args)]
pub struct SqliteBenchArgs {
    /// Transcript sizes replayed on a fresh data file, smallest first: the first is the
    /// base the others' rates are compared with.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,200000")]
    messages: Vec<usize>,
    /// Channels the messages are spread over.
    #[arg(long, default_value_t = 50)]
    channels: usize,
    /// Messages in the file whose opening is timed (0: not timed).
    #[arg(long, default_value_t = 1_000_000)]
    startup_messages: usize,
    /// Where the data files go (removed after); a fast local disk, like a server's.
    #[arg(long, default_value_t = std::env::temp_dir().display().to_string())]
    dir: String,
}

fn remove_data_file(path: &str) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
}

fn data_file_bytes(path: &str) -> u64 {
    ["", "-wal"].iter().filter_map(|suffix| std::fs::metadata(format!("{path}{suffix}")).ok()).map(|m| m.len()).sum()
}

fn options() -> anyhow::Result<replay::ReplayOptions> {
    let common = CommonArgs { llm: Some("none".into()), set: vec![], seed: Some(1), persona: None };
    Ok(setup(&common)?.options)
}

/// One replay of `messages` generated messages on a new file: messages a second, and
/// the file's bytes per message stored.
async fn replay_on_a_file(path: &str, messages: usize, channels: usize) -> anyhow::Result<(f64, f64)> {
    remove_data_file(path);
    let transcript = generate(messages, channels, 1.0 / 6.0, 7);
    let options = options()?;
    let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
    let store = Arc::new(SqliteStore::open(path, clock.clone(), Some(replay::Replay::retention(&options)))?);
    let mut replay = replay::Replay::on_store(options, clock, store.clone(), store);
    let mut sink = std::io::sink();
    let mut writer = LogWriter::new(&mut sink, false);
    let started = Instant::now();
    replay.run(&transcript, &mut writer).await?;
    let rate = messages as f64 / started.elapsed().as_secs_f64();
    drop(writer);
    drop(replay);
    let bytes = data_file_bytes(path) as f64 / messages as f64;
    remove_data_file(path);
    Ok((rate, bytes))
}

/// Fills a file with `messages` stored messages, then times opening it as `kuuki
/// serve` does at start-up.
async fn startup_seconds(path: &str, messages: usize, channels: usize) -> anyhow::Result<f64> {
    remove_data_file(path);
    {
        let options = options()?;
        let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
        // No retention while filling: the generated day stays whole.
        let store = Arc::new(SqliteStore::open(path, clock.clone(), None)?);
        let mut replay = replay::Replay::on_store(options, clock, store.clone(), store);
        for chunk in generate(messages, channels, 0.0, 11).chunks(100_000) {
            replay.store_history(chunk).await?;
        }
    }
    let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
    let started = Instant::now();
    let store = SqliteStore::open(path, clock, None)?;
    let seconds = started.elapsed().as_secs_f64();
    drop(store);
    remove_data_file(path);
    Ok(seconds)
}

pub async fn run(args: SqliteBenchArgs) -> anyhow::Result<()> {
    let path = format!("{}/kuuki-bench-{}.db", args.dir.trim_end_matches('/'), std::process::id());
    let mut base = None;
    for &messages in &args.messages {
        let (rate, bytes) = replay_on_a_file(&path, messages, args.channels).await?;
        let base_rate = *base.get_or_insert(rate);
        println!(
            "sqlite replay: {messages} messages, {} channels: {rate:.0} msg/s (ratio to the first {:.2}), {bytes:.0} bytes on disk a message",
            args.channels,
            rate / base_rate
        );
    }
    if args.startup_messages > 0 {
        let seconds = startup_seconds(&path, args.startup_messages, args.channels).await?;
        println!("sqlite start-up: opening a file of {} messages took {seconds:.3} s", args.startup_messages);
    }
    Ok(())
}
