//! `kuuki bench`: the figures of docs/benchmarks.md. `replay`: replay throughput on a generated
//! transcript; `ingress`: the ingress handler in-process (verify, parse, store,
//! enqueue), p50/p99; `http`: a load generator for a running `kuuki serve`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use kuuki::adapters::memory::{InProcess, MemoryLog, RecordingChat, TsMint, VirtualClock};
use kuuki::adapters::slack::{SigningSecret, SlackIdentity};
use kuuki::config::Settings;
use kuuki::deps::Deps;
use kuuki::domain::{Timestamp, UserId};
use kuuki::ports::Clock;
use kuuki::replay::{self, LogWriter, REPLAY_EPOCH, TranscriptLine};
use serde_json::json;

use crate::cli::{CommonArgs, print_summary, setup};

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Replay throughput on a generated transcript.
    Replay(ReplayBenchArgs),
    /// The ingress handler in-process: signed request in, stored and queued, p50/p99.
    Ingress(IngressBenchArgs),
    /// Load a running `kuuki serve` with signed Events API requests from this process.
    Http(HttpBenchArgs),
    /// LLM calls per 1,000 messages by role and tokens per judgment, with the projected
    /// cost, on the examples and a generated transcript with a scripted judge.
    Llm(LlmBenchArgs),
    /// Whether per-message work grows with the history kept: replays the same messages
    /// on an empty store and on one holding a long history, and compares the rates.
    History(HistoryBenchArgs),
    /// Every figure of the benchmark table, printed as that table (and written into
    /// docs/benchmarks.md with `--readme docs/benchmarks.md`).
    All(AllBenchArgs),
    /// `kuuki serve`'s SQLite store: replay throughput by size, bytes on disk a
    /// message, start-up on a large file.
    Sqlite(crate::bench_sqlite::SqliteBenchArgs),
    /// `kuuki serve` over Socket Mode: envelope-to-acknowledgement latency at a steady
    /// rate, against a stand-in Socket Mode server.
    SocketMode(crate::bench_socket_mode::SocketModeBenchArgs),
}

#[derive(Args)]
pub struct ReplayBenchArgs {
    /// Messages in the generated transcript.
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// Channels they are spread over.
    #[arg(long, default_value_t = 50)]
    channels: usize,
    /// Replays to run; the best and the median are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Print only the replays' wall times in seconds, sorted, as a JSON array (how
    /// `bench all` reads a run it started in a process of its own).
    #[arg(long)]
    json: bool,
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
];

/// Messages addressed to kuuki.
const DIRECT_TEXTS: &[&str] = &["<@bot> 今週の予定をまとめて", "kuuki どう思う？"];

/// A day-like transcript: channels take turns, a few people each, some threads, and
/// `direct_share` of the messages addressed to kuuki.
pub fn generate(messages: usize, channels: usize, direct_share: f64, seed: u64) -> Vec<TranscriptLine> {
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
                text: if rng.f64() < direct_share {
                    DIRECT_TEXTS[rng.usize(..DIRECT_TEXTS.len())]
                } else {
                    TEXTS[rng.usize(..TEXTS.len())]
                }
                .to_owned(),
                command: None,
                private: false,
                thread,
                channel: format!("ch{channel}"),
                bot: rng.u8(..100) == 0,
                reply_to_bot: false,
                reaction: None,
            }
        })
        .collect()
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        Bench::Replay(args) => replay_bench(args).await,
        Bench::Ingress(args) => ingress_bench(args).await.map(drop),
        Bench::Http(args) => http_bench(args).await.map(drop),
        Bench::Llm(args) => llm_bench(args).await,
        Bench::History(args) => history_bench(args).await,
        Bench::All(args) => all_bench(args).await,
        Bench::Sqlite(args) => crate::bench_sqlite::run(args).await,
        Bench::SocketMode(args) => crate::bench_socket_mode::run(args).await,
    }
}

/// Replays of one transcript, each on a fresh store that first holds `history`
/// (stored, not replayed): the wall times of the transcript alone, sorted.
async fn time_replays(
    common: &CommonArgs,
    history: &[TranscriptLine],
    transcript: &[TranscriptLine],
    runs: usize,
    summary: bool,
) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::new();
    for run in 0..runs.max(1) {
        let common = CommonArgs {
            llm: common.llm.clone(),
            set: common.set.clone(),
            seed: Some(common.seed.unwrap_or(1)),
            persona: common.persona.clone(),
        };
        let setup = setup(&common)?;
        let seed = setup.options.seed;
        let mut replay = replay::Replay::new(setup.options);
        replay.store_history(history).await?;
        let mut sink = std::io::sink();
        let mut writer = LogWriter::new(&mut sink, false);
        let started = Instant::now();
        let stats = replay.run(transcript, &mut writer).await?;
        let wall = started.elapsed().as_secs_f64();
        drop(writer);
        drop(replay);
        times.push(wall);
        if run == 0 && summary {
            print_summary(&stats, wall, seed);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

async fn replay_bench(args: ReplayBenchArgs) -> anyhow::Result<()> {
    let transcript = generate(args.messages, args.channels, 1.0 / 6.0, 7);
    let times = time_replays(&args.common, &[], &transcript, args.runs, !args.json).await?;
    if args.json {
        println!("{}", serde_json::to_string(&times)?);
        return Ok(());
    }
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

#[derive(Args)]
pub struct IngressBenchArgs {
    /// Requests to handle.
    #[arg(long, default_value_t = 50_000)]
    requests: usize,
}

#[derive(Args)]
pub struct HttpBenchArgs {
    /// The server, e.g. http://127.0.0.1:3000.
    #[arg(long)]
    target: String,
    /// The server's SLACK_SIGNING_SECRET.
    #[arg(long)]
    secret: String,
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
}

/// A realistic Events API message event for request `i`: a new message each time.
fn event_body(i: usize, ts_base: i64) -> String {
    let text = TEXTS[i % TEXTS.len()].replace("<@bot>", "<@UKUUKI>");
    json!({
        "token": "legacy", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
        "event_id": format!("Ev{i}"), "event_time": ts_base,
        "authorizations": [{"team_id": "T1", "user_id": "UKUUKI", "is_bot": true}],
        "event": {
            "type": "message", "channel": format!("C{}", i % 50), "user": format!("U{}", i % 8),
            "text": text, "ts": format!("{ts_base}.{:06}", i), "channel_type": "channel",
            "blocks": [{"type": "rich_text", "block_id": "b", "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}]}],
        },
    })
    .to_string()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Requests per second and latencies in µs of one load run.
struct Latencies {
    per_second: f64,
    p50: f64,
    p99: f64,
}

fn report(what: &str, mut latencies: Vec<Duration>, wall: Duration) -> Latencies {
    latencies.sort();
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let figures = Latencies {
        per_second: latencies.len() as f64 / wall.as_secs_f64(),
        p50: micros(percentile(&latencies, 0.50)),
        p99: micros(percentile(&latencies, 0.99)),
    };
    println!(
        "{what}: {} requests in {:.3} s ({:.0} requests/s); latency p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        latencies.len(),
        wall.as_secs_f64(),
        figures.per_second,
        figures.p50,
        figures.p99,
        latencies.last().map_or(0.0, |d| micros(*d)),
    );
    figures
}

async fn ingress_bench(args: IngressBenchArgs) -> anyhow::Result<Latencies> {
    use tower::ServiceExt;
    let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
    let parts = InProcess::new(clock.clone());
    let queue = parts.queue.clone();
    let settings = Settings::default();
    let persona = settings.persona(None);
    let deps = Deps::new(
        settings,
        persona,
        UserId("UKUUKI".into()),
        parts.adapters(
            Arc::new(RecordingChat::new(clock.clone(), Arc::new(TsMint::default()))),
            None,
            Arc::new(MemoryLog::default()),
        ),
        1,
    );
    let secret = SigningSecret::new("bench-secret");
    let router = kuuki_ingress::app(Arc::new(kuuki_ingress::Ingress {
        deps: Arc::new(deps),
        slack: Some(kuuki_ingress::SlackIngress::one(
            secret.clone(),
            SlackIdentity { user_id: "UKUUKI".into(), bot_id: None },
        )),
        discord: None,
        metrics_for: None,
    }));
    let now = clock.now().as_micros() / Timestamp::MICROS_PER_SECOND;
    let timestamp = now.to_string();
    let requests: Vec<_> = (0..args.requests)
        .map(|i| {
            let body = event_body(i, now);
            let signature = secret.sign(&timestamp, body.as_bytes());
            axum::http::Request::post("/slack/events")
                .header("content-type", "application/json")
                .header("x-slack-request-timestamp", &timestamp)
                .header("x-slack-signature", signature)
                .body(axum::body::Body::from(body))
                .expect("a request")
        })
        .collect();
    let mut latencies = Vec::with_capacity(requests.len());
    let started = Instant::now();
    for request in requests {
        let t = Instant::now();
        let response = router.clone().oneshot(request).await?;
        latencies.push(t.elapsed());
        if !response.status().is_success() {
            bail!("the handler answered {}", response.status());
        }
    }
    let wall = started.elapsed();
    let figures = report("ingress handler in-process (verify, parse, store, enqueue)", latencies, wall);
    println!("queued jobs: {}", queue.len());
    Ok(figures)
}

async fn http_bench(args: HttpBenchArgs) -> anyhow::Result<Latencies> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency).build()?;
    let secret = SigningSecret::new(args.secret.clone());
    let url = format!("{}/slack/events", args.target.trim_end_matches('/'));
    client
        .get(format!("{}/healthz", args.target.trim_end_matches('/')))
        .send()
        .await
        .context("is kuuki serve running?")?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() as i64;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency.max(1) {
        let (client, secret, url, next) = (client.clone(), secret.clone(), url.clone(), next.clone());
        let total = args.requests;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, anyhow::Error>(latencies);
                }
                let body = event_body(i, now);
                let timestamp = now.to_string();
                let signature = secret.sign(&timestamp, body.as_bytes());
                let t = Instant::now();
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-slack-request-timestamp", &timestamp)
                    .header("x-slack-signature", signature)
                    .body(body)
                    .send()
                    .await?;
                latencies.push(t.elapsed());
                if !response.status().is_success() {
                    bail!("the server answered {}", response.status());
                }
            }
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    Ok(report(&format!("kuuki serve over HTTP, {} connections", args.concurrency), latencies, started.elapsed()))
}

#[derive(Args)]
pub struct LlmBenchArgs {
    /// Messages in the generated transcript.
    #[arg(long, default_value_t = 10_000)]
    messages: usize,
    /// Channels they are spread over.
    #[arg(long, default_value_t = 20)]
    channels: usize,
    /// Share of messages that mention or name kuuki (each is answered, one generate call).
    #[arg(long, default_value_t = 0.03)]
    direct_share: f64,
    /// Dollars per million input tokens (default: a Flash-Lite-class model).
    #[arg(long, default_value_t = 0.10)]
    input_price: f64,
    /// Dollars per million output tokens.
    #[arg(long, default_value_t = 0.40)]
    output_price: f64,
    /// Where the examples are.
    #[arg(long, default_value = "examples")]
    examples: std::path::PathBuf,
    /// Also write the generated transcript's decision log here.
    #[arg(long)]
    log: Option<std::path::PathBuf>,
}

/// The generated transcript's judge: answers questions in full after a short wait,
/// nods at the rest with a reaction now and then, mostly stays out.
const GENERATED_SCRIPT: &str = r#"{"role": "judge", "match": "？", "reply": {"should_respond": true, "reason": "an open question", "confidence": 0.8, "delay_seconds": 20, "response_type": "full_response", "conversation_state": "active"}, "repeat": true}
{"role": "judge", "match": "ありがとう", "reply": {"should_respond": true, "reason": "a nod", "confidence": 0.8, "response_type": "react_only", "conversation_state": "ending"}, "repeat": true}
{"role": "judge", "reply": {"should_respond": false, "reason": "nothing to add", "confidence": 0.7, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "それなら、まず CI のログを見てみるのが早いと思います。", "repeat": true}
{"role": "reflect", "reply": {"facts": [{"content": "デプロイは CI が通ってから", "keywords": ["デプロイ", "ci"], "source_users": ["user1"], "confidence": 0.7, "shareable": false}], "profiles": []}, "repeat": true}
{"role": "summarize", "match": "workspace", "reply": {"history": "開発チームのワークスペース", "recent_events": "デプロイと CI の話が続いている"}, "repeat": true}
{"role": "summarize", "reply": {"summary": "デプロイと CI とお昼の話", "history": "開発の相談の場", "mood": "和やか", "topic_keywords": ["デプロイ", "CI"], "active_users": ["user1", "user2"]}, "repeat": true}"#;

async fn llm_bench(args: LlmBenchArgs) -> anyhow::Result<()> {
    println!(
        "| transcript | messages | judge calls / 1,000 | generate calls / 1,000 | all calls / 1,000 | tokens / judgment | projected $ / 1,000 messages |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let persona_path = args.examples.join("persona.toml");
    let mut runs: Vec<(String, Vec<TranscriptLine>, String, Option<std::path::PathBuf>)> = Vec::new();
    for name in ["team-channel", "one-on-one", "unanswered-question"] {
        let transcript = std::fs::read_to_string(args.examples.join(format!("{name}.jsonl"))).with_context(|| {
            format!("reading the example {name} (run from the repository root, or pass --examples)")
        })?;
        let script = std::fs::read_to_string(args.examples.join(format!("{name}.llm.jsonl")))?;
        runs.push((name.to_owned(), replay::parse_transcript(&transcript)?, script, Some(persona_path.clone())));
    }
    runs.push((
        format!("generated, {} channels, {:.0} % addressed to kuuki", args.channels, args.direct_share * 100.0),
        generate(args.messages, args.channels, args.direct_share, 11),
        GENERATED_SCRIPT.to_owned(),
        None,
    ));
    for (name, transcript, script, persona) in runs {
        let dir = tempfile_path(&name);
        std::fs::write(&dir, &script)?;
        let common =
            CommonArgs { llm: Some(format!("script:{}", dir.display())), set: vec![], seed: Some(42), persona };
        let setup = setup(&common)?;
        std::fs::remove_file(&dir).ok();
        let mut out: Box<dyn std::io::Write> = match (&args.log, persona_free(&name)) {
            (Some(path), true) => Box::new(std::io::BufWriter::new(std::fs::File::create(path)?)),
            _ => Box::new(std::io::sink()),
        };
        let mut writer = LogWriter::new(&mut out, false);
        let stats = replay::replay(&transcript, setup.options, &mut writer).await?;
        drop(writer);
        let per_thousand = |n: u64| n as f64 * 1000.0 / stats.messages as f64;
        let calls = |role: &str| stats.llm_calls.get(role).copied().unwrap_or(0);
        let all: u64 = stats.llm_calls.values().sum();
        let judge_tokens = stats.llm_tokens.get("judge").copied().unwrap_or(0);
        let (input, output) =
            stats.llm_usage.values().fold((0, 0), |(i, o), u| (i + u.input_tokens, o + u.output_tokens));
        let dollars = (input as f64 * args.input_price + output as f64 * args.output_price) / 1e6;
        println!(
            "| {name} | {} | {:.0} | {:.0} | {:.0} | {} | {:.4} |",
            stats.messages,
            per_thousand(calls("judge")),
            per_thousand(calls("generate")),
            per_thousand(all),
            if calls("judge") > 0 { (judge_tokens / calls("judge")).to_string() } else { "-".into() },
            dollars * 1000.0 / stats.messages as f64,
        );
    }
    println!(
        "\nTokens are estimated at four bytes a token (scripted answers); prices ${}/M input, ${}/M output.",
        args.input_price, args.output_price
    );
    Ok(())
}

/// The generated run is the one without a persona file.
fn persona_free(name: &str) -> bool {
    name.starts_with("generated")
}

fn tempfile_path(name: &str) -> std::path::PathBuf {
    let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    std::env::temp_dir().join(format!("kuuki-bench-{}-{safe}.jsonl", std::process::id()))
}

#[derive(Args)]
pub struct HistoryBenchArgs {
    /// Messages replayed and timed.
    #[arg(long, default_value_t = 10_000)]
    messages: usize,
    /// Messages stored before them: the history kept.
    #[arg(long, default_value_t = 190_000)]
    history: usize,
    #[arg(long, default_value_t = 50)]
    channels: usize,
    /// Replays of each kind; the best counts.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Fail when the rate with the history is below this share of the rate without
    /// (a ratio of two runs on the same machine, not a time).
    #[arg(long)]
    min_ratio: Option<f64>,
    /// Print only the two rates, `[empty, full]` in messages/s, as a JSON array.
    #[arg(long)]
    json: bool,
}

/// Messages per second replaying `messages` on an empty store and on one that holds
/// `history` older messages first.
async fn history_rates(messages: usize, history: usize, channels: usize, runs: usize) -> anyhow::Result<(f64, f64)> {
    let old = generate(history, channels, 1.0 / 6.0, 7);
    let mut new = generate(messages, channels, 1.0 / 6.0, 8);
    let offset = old.last().map_or(0.0, |l| l.t);
    for line in &mut new {
        line.t += offset;
    }
    let common = CommonArgs { llm: Some("none".into()), set: vec![], seed: Some(1), persona: None };
    let empty = time_replays(&common, &[], &new, runs, false).await?[0];
    let full = time_replays(&common, &old, &new, runs, false).await?[0];
    Ok((messages as f64 / empty, messages as f64 / full))
}

async fn history_bench(args: HistoryBenchArgs) -> anyhow::Result<()> {
    let (empty, full) = history_rates(args.messages, args.history, args.channels, args.runs).await?;
    if args.json {
        println!("{}", serde_json::to_string(&[empty, full])?);
        return Ok(());
    }
    let ratio = full / empty;
    println!(
        "history: {} messages replayed on an empty store {empty:.0} msg/s, after {} stored {full:.0} msg/s: ratio {ratio:.2}",
        args.messages, args.history
    );
    if let Some(min) = args.min_ratio
        && ratio < min
    {
        bail!("per-message work grows with the history kept: ratio {ratio:.2} is below {min}");
    }
    Ok(())
}

#[derive(Args)]
pub struct AllBenchArgs {
    /// Small sizes: checks that every figure can be made (the benchmarks page's test), in seconds.
    #[arg(long)]
    quick: bool,
    /// Replace the table between the `bench all` markers of this file (docs/benchmarks.md)
    /// with this run's.
    #[arg(long)]
    readme: Option<std::path::PathBuf>,
}

/// Where `kuuki bench all` writes its table in docs/benchmarks.md (named when it was in
/// the README).
pub const README_BEGIN: &str = "<!-- kuuki bench all: begin -->";
pub const README_END: &str = "<!-- kuuki bench all: end -->";

/// The resident memory of this process, in bytes (Linux).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Bytes of resident memory per message stored in the in-process store, over
/// `messages` generated ones (every index included).
async fn memory_per_message(messages: usize) -> anyhow::Result<Option<f64>> {
    let lines = generate(messages, 50, 1.0 / 6.0, 7);
    let mut replay = replay::Replay::new(
        setup(&CommonArgs { llm: Some("none".into()), set: vec![], seed: Some(1), persona: None })?.options,
    );
    let before = resident_bytes();
    replay.store_history(&lines).await?;
    let after = resident_bytes();
    drop(replay);
    Ok(before.zip(after).map(|(b, a)| a.saturating_sub(b) as f64 / messages as f64))
}

/// Starts `kuuki serve` (this executable) against a stand-in Slack Web API and loads it
/// from this process: the figures of `scripts/bench-serve`.
async fn serve_figures(requests: usize) -> anyhow::Result<Latencies> {
    let slack = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let slack_url = format!("http://{}", slack.local_addr()?);
    let stand_in = axum::Router::new().fallback(|| async {
        axum::Json(json!({"ok": true, "user_id": "UKUUKI", "bot_id": "BKUUKI", "ts": "1.000001"}))
    });
    tokio::spawn(async move { axum::serve(slack, stand_in).await });
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let target = format!("http://127.0.0.1:{port}");
    // On its SQLite file, as a self-hosted kuuki runs; removed after.
    let data = std::env::temp_dir().join(format!("kuuki-bench-serve-{}.db", std::process::id()));
    let data = data.to_string_lossy().into_owned();
    let mut server = std::process::Command::new(std::env::current_exe()?)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data", &data])
        .env("SLACK_SIGNING_SECRET", "bench-secret")
        .env("SLACK_BOT_TOKEN", "xoxb-bench")
        .env("SLACK_API_BASE_URL", &slack_url)
        .env("JUDGE_MIN_WAIT_SECONDS", "3600")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..100 {
        if client.get(format!("{target}/healthz")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let figures = if up {
        http_bench(HttpBenchArgs { target, secret: "bench-secret".into(), requests, concurrency: 32 }).await
    } else {
        Err(anyhow::anyhow!("kuuki serve did not come up"))
    };
    server.kill().ok();
    server.wait().ok();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{data}{suffix}"));
    }
    figures
}

/// Runs `kuuki bench <args> --json` in a process of its own and reads the numbers it
/// prints: each figure is measured on a fresh heap, as the command in its row would
/// measure it, whatever ran before it.
fn in_own_process(args: &str) -> anyhow::Result<Vec<f64>> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .arg("bench")
        .args(args.split(' '))
        .arg("--json")
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("starting a benchmark process")?;
    if !out.status.success() {
        bail!("`kuuki bench {args}` failed: {}", out.status);
    }
    let stdout = String::from_utf8(out.stdout)?;
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("reading the figures of `kuuki bench {args}`: {last}"))
}

/// The sorted wall times of `runs` replays of `messages` generated messages (rules
/// only) in each of two processes of their own: where a process's heap happens to lie
/// moves its rate by several percent on this machine, so one process is one draw.
fn replay_times(messages: usize, runs: usize) -> anyhow::Result<Vec<f64>> {
    let args = format!("replay --messages {messages} --runs {runs} --llm none --seed 1");
    let mut times = in_own_process(&args)?;
    times.extend(in_own_process(&args)?);
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// Rounds of the growth row: a 10,000-message replay best of seven in a process of its
/// own, then a 200,000-message one best of three, alternating. One process is one draw
/// (where its heap lies moves its rate by several percent here, and the 10,000-message
/// figure most), so the row gives the median of the rounds' ratios, not the ratio of two
/// bests, which read 0.83 to 0.96 for the same code.
const GROWTH_ROUNDS: usize = 7;

/// The growth row's figures: medians over the rounds, and the rounds' lowest and
/// highest ratio.
struct Growth {
    small_rate: f64,
    large_rate: f64,
    ratio: f64,
    rounds: usize,
    lowest: f64,
    highest: f64,
}

fn growth_rounds(small: usize, large: usize, rounds: usize) -> anyhow::Result<Growth> {
    // The best rate of one process replaying `messages` `runs` times.
    let best = |messages: usize, runs: usize| -> anyhow::Result<f64> {
        let times = in_own_process(&format!("replay --messages {messages} --runs {runs} --llm none --seed 1"))?;
        let fastest = times.into_iter().min_by(f64::total_cmp).context("a replay process timed no run")?;
        Ok(messages as f64 / fastest)
    };
    let (mut smalls, mut larges, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        let (small_rate, large_rate) = (best(small, 7)?, best(large, 3)?);
        smalls.push(small_rate);
        larges.push(large_rate);
        ratios.push(large_rate / small_rate);
    }
    for figures in [&mut smalls, &mut larges, &mut ratios] {
        figures.sort_by(f64::total_cmp);
    }
    let middle = ratios.len() / 2;
    Ok(Growth {
        small_rate: smalls[middle],
        large_rate: larges[middle],
        ratio: ratios[middle],
        rounds: ratios.len(),
        lowest: ratios[0],
        highest: ratios[ratios.len() - 1],
    })
}

/// The benchmark table's rows: (what, command, result).
type Row = (&'static str, &'static str, String);

async fn all_bench(args: AllBenchArgs) -> anyhow::Result<()> {
    // Full sizes are the README's; quick ones only prove every row can be made.
    let scale = |full: usize, quick: usize| if args.quick { quick } else { full };
    let runs = scale(3, 1);
    let mut rows: Vec<Row> = Vec::new();
    // First, before other runs leave freed memory for the allocator to reuse.
    let stored = scale(200_000, 4_000);
    let per_message = memory_per_message(stored).await?;

    let n = scale(100_000, 2_000);
    let times = replay_times(n, runs)?;
    rows.push((
        "replay throughput",
        "`kuuki bench replay`",
        format!(
            "{n} generated messages, 50 channels, rules only: best {:.2} s, {:.0} messages/s; median {:.0} (goal: 200,000)",
            times[0],
            n as f64 / times[0],
            n as f64 / times[times.len() / 2]
        ),
    ));

    let (small, large) = (scale(10_000, 500), scale(200_000, 4_000));
    let growth = growth_rounds(small, large, scale(GROWTH_ROUNDS, 1))?;
    rows.push((
        "replay rate as the transcript grows",
        "`kuuki bench replay --messages N`",
        format!(
            "{small}: {:.0} messages/s; {large}: {:.0} messages/s; ratio {:.2}, the median of {} alternating rounds ({:.2} to {:.2}) (goal: at least 0.9)",
            growth.small_rate,
            growth.large_rate,
            growth.ratio,
            growth.rounds,
            growth.lowest,
            growth.highest,
        ),
    ));

    let (timed, history) = (scale(10_000, 500), scale(190_000, 4_000));
    let history_run = format!("history --messages {timed} --history {history} --runs {runs}");
    let rates = in_own_process(&history_run)?;
    let [empty, full] = rates[..] else { bail!("`kuuki bench {history_run}` printed {rates:?}, not two rates") };
    rows.push((
        "replay rate with a long history stored",
        "`kuuki bench history`",
        format!(
            "{timed} messages on an empty store: {empty:.0} messages/s; after {history} stored: {full:.0} messages/s; ratio {:.2} (the test command fails below 0.8)",
            full / empty
        ),
    ));

    rows.push((
        "memory per stored message",
        "`kuuki bench all`",
        match per_message {
            Some(bytes) => format!(
                "{bytes:.0} bytes resident per message over {stored} stored (text, ids and the three indexes); `MESSAGE_RETENTION_DAYS` bounds how many are kept"
            ),
            None => "not measured: no /proc/self/statm".into(),
        },
    ));

    let ingress = ingress_bench(IngressBenchArgs { requests: scale(50_000, 500) }).await?;
    rows.push((
        "ingress handler in-process",
        "`kuuki bench ingress`",
        format!(
            "signed Events API requests through the router (verify, parse, conditional put, enqueue): p50 {:.1} µs, p99 {:.1} µs; {:.0} requests/s",
            ingress.p50, ingress.p99, ingress.per_second
        ),
    ));

    let serve = serve_figures(scale(20_000, 200)).await?;
    rows.push((
        "`kuuki serve` over HTTP",
        "`scripts/bench-serve`",
        format!(
            "from a second process, 32 connections: {:.0} requests/s; p50 {:.2} ms, p99 {:.2} ms (goal: 20,000 requests/s, p99 under 5 ms)",
            serve.per_second,
            serve.p50 / 1000.0,
            serve.p99 / 1000.0
        ),
    ));

    let table = table(&rows);
    println!("\n{table}");
    if let Some(path) = args.readme {
        let readme = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let (Some(begin), Some(end)) = (readme.find(README_BEGIN), readme.find(README_END)) else {
            bail!("{} has no `{README_BEGIN}` … `{README_END}` markers", path.display());
        };
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load = load.split_whitespace().next().unwrap_or("unknown");
        let now = Timestamp(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_micros() as i64);
        let written = format!(
            "{README_BEGIN}\nMeasured by `kuuki bench all --readme docs/benchmarks.md` on {} ({} build, {} cores, load average {load} at the end):\n\n{table}{README_END}",
            &now.to_utc_string()[..10],
            if cfg!(debug_assertions) { "debug" } else { "release" },
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        let updated = format!("{}{written}{}", &readme[..begin], &readme[end + README_END.len()..]);
        std::fs::write(&path, updated)?;
        println!("wrote the table into {}", path.display());
    }
    Ok(())
}

/// The rows as a Markdown table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from("| what | command | result |\n| --- | --- | --- |\n");
    for (what, command, result) in rows {
        out.push_str(&format!("| {what} | {command} | {result} |\n"));
    }
    out
}
