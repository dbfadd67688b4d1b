//! `kuuki bench`: replay throughput on a generated transcript (README figures).

use std::time::Instant;

use clap::Args;
use kuuki::replay::{self, LogWriter, TranscriptLine};

use crate::cli::{CommonArgs, print_summary, setup};

#[derive(Args)]
pub struct BenchArgs {
    /// Messages in the generated transcript.
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// Channels they are spread over.
    #[arg(long, default_value_t = 50)]
    channels: usize,
    /// Replays to run; the best and the median are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[command(flatten)]
    common: CommonArgs,
}

const TEXTS: &[&str] = &[
    "おはようございます",
    "今日のデプロイはどうなった？",
    "レビューお願いします",
    "了解です",
    "lunch anyone?",
    "the build is green again",
    "ちょっと見てみます",
    "誰か CI の設定わかる人いますか？",
    "ありがとう！助かりました",
    "meeting moved to 3pm",
    "<@bot> 今週の予定をまとめて",
    "kuuki どう思う？",
];

/// A day-like transcript: channels take turns, a few people each, some threads.
pub fn generate(messages: usize, channels: usize, seed: u64) -> Vec<TranscriptLine> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut t = 0.0;
    (0..messages)
        .map(|i| {
            t += rng.f64() * 2.0;
            let channel = rng.usize(..channels.max(1));
            let thread = (rng.u8(..10) < 3).then(|| format!("th{}", rng.usize(..(messages / 50).max(1))));
            TranscriptLine {
                line: i + 1,
                t,
                user: format!("user{}", rng.usize(..8)),
                text: TEXTS[rng.usize(..TEXTS.len())].to_owned(),
                thread,
                channel: format!("ch{channel}"),
                bot: rng.u8(..100) == 0,
                reply_to_bot: false,
            }
        })
        .collect()
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let transcript = generate(args.messages, args.channels, 7);
    let mut times = Vec::new();
    for run in 0..args.runs.max(1) {
        let mut common = CommonArgs {
            llm: args.common.llm.clone(),
            set: args.common.set.clone(),
            seed: Some(args.common.seed.unwrap_or(1)),
            persona: args.common.persona.clone(),
        };
        common.seed = common.seed.or(Some(1));
        let setup = setup(&common)?;
        let seed = setup.options.seed;
        let mut sink = std::io::sink();
        let mut writer = LogWriter::new(&mut sink, false);
        let started = Instant::now();
        let stats = replay::replay(&transcript, setup.options, &mut writer).await?;
        let wall = started.elapsed().as_secs_f64();
        times.push(wall);
        if run == 0 {
            print_summary(&stats, wall, seed);
        }
    }
    times.sort_by(f64::total_cmp);
    let best = times[0];
    let median = times[times.len() / 2];
    println!(
        "replay throughput: {} messages, {} channels: best {:.3} s ({:.0} msg/s), median {:.3} s ({:.0} msg/s) over {} runs",
        args.messages,
        args.channels,
        best,
        args.messages as f64 / best,
        median,
        args.messages as f64 / median,
        times.len()
    );
    Ok(())
}
