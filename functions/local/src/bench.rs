//! `kuuki bench`: the README's figures. `replay`: replay throughput on a generated
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
                thread,
                channel: format!("ch{channel}"),
                bot: rng.u8(..100) == 0,
                reply_to_bot: false,
            }
        })
        .collect()
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        Bench::Replay(args) => replay_bench(args).await,
        Bench::Ingress(args) => ingress_bench(args).await,
        Bench::Http(args) => http_bench(args).await,
        Bench::Llm(args) => llm_bench(args).await,
    }
}

async fn replay_bench(args: ReplayBenchArgs) -> anyhow::Result<()> {
    let transcript = generate(args.messages, args.channels, 1.0 / 6.0, 7);
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

fn report(what: &str, mut latencies: Vec<Duration>, wall: Duration) {
    latencies.sort();
    println!(
        "{what}: {} requests in {:.3} s ({:.0} requests/s); latency p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        latencies.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64(),
        percentile(&latencies, 0.50).as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6,
        latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e6),
    );
}

async fn ingress_bench(args: IngressBenchArgs) -> anyhow::Result<()> {
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
        slack: Some(kuuki_ingress::SlackIngress {
            secret: secret.clone(),
            identity: SlackIdentity { user_id: "UKUUKI".into(), bot_id: None },
        }),
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
    report("ingress handler in-process (verify, parse, store, enqueue)", latencies, wall);
    println!("queued jobs: {}", queue.len());
    Ok(())
}

async fn http_bench(args: HttpBenchArgs) -> anyhow::Result<()> {
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
    report(&format!("kuuki serve over HTTP, {} connections", args.concurrency), latencies, started.elapsed());
    Ok(())
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
