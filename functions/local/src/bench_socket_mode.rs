//! `kuuki bench socket-mode`: `kuuki serve` (this executable, on a fresh SQLite file)
//! against a stand-in Socket Mode server on 127.0.0.1 sending `events_api` envelopes at
//! a steady rate: how long each waits for its acknowledgement (stored and queued).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_websockets::{Message, ServerBuilder};

#[derive(Args)]
pub struct SocketModeBenchArgs {
    /// Envelopes a second.
    #[arg(long, default_value_t = 1000)]
    rate: u32,
    /// Seconds of load.
    #[arg(long, default_value_t = 10)]
    seconds: u32,
}

/// An ordinary message (judged an hour later: nothing is posted during the load).
fn envelope(i: u64, now: u64) -> String {
    json!({
        "envelope_id": format!("env-{i}"), "type": "events_api", "accepts_response_payload": false,
        "retry_attempt": 0, "retry_reason": "",
        "payload": {
            "type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": format!("Ev{i}"),
            "event_time": now,
            "event": {"type": "message", "channel": format!("C{}", i % 50), "channel_type": "channel",
                      "user": format!("U{}", i % 8), "text": "the build is green again",
                      "ts": format!("{now}.{:06}", i % 1_000_000)},
        },
    })
    .to_string()
}

/// The Slack Web API kuuki calls at start-up, `apps.connections.open` pointing at `ws`.
async fn stand_in_web_api(ws: String) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let api =
        axum::Router::new().fallback(move || {
            let ws = ws.clone();
            async move {
                axum::Json(json!({"ok": true, "user_id": "UKUUKI", "bot_id": "BKUUKI", "ts": "1.000001", "url": ws}))
            }
        });
    tokio::spawn(async move { axum::serve(listener, api).await });
    Ok(url)
}

pub async fn run(args: SocketModeBenchArgs) -> anyhow::Result<()> {
    let socket = TcpListener::bind("127.0.0.1:0").await?;
    let ws = format!("ws://{}/link", socket.local_addr()?);
    let api = stand_in_web_api(ws).await?;
    let data = std::env::temp_dir().join(format!("kuuki-bench-socket-mode-{}.db", std::process::id()));
    let data = data.to_string_lossy().into_owned();
    let mut server = std::process::Command::new(std::env::current_exe()?)
        .args(["serve", "--listen", "127.0.0.1:0", "--data", &data])
        .env("SLACK_APP_TOKEN", "xapp-bench")
        .env("SLACK_BOT_TOKEN", "xoxb-bench")
        .env("SLACK_API_BASE_URL", &api)
        .env("JUDGE_MIN_WAIT_SECONDS", "3600")
        .env_remove("SLACK_SIGNING_SECRET")
        .env_remove("LLM_PROVIDER")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let measured = load(socket, &args).await;
    server.kill().ok();
    server.wait().ok();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{data}{suffix}"));
    }
    let (mut latencies, sent, wall) = measured?;
    if latencies.len() < sent {
        bail!("{} of {sent} envelopes were acknowledged", latencies.len());
    }
    latencies.sort();
    let at = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "socket mode: {sent} envelopes at {} a second ({:.0} sent a second): envelope to ack p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.rate,
        sent as f64 / wall,
        at(0.5),
        at(0.99),
        at(1.0)
    );
    Ok(())
}

/// Greets kuuki's connection, sends the envelopes on a steady clock while reading the
/// acknowledgements, and waits (10 s at most) for the last ones.
async fn load(socket: TcpListener, args: &SocketModeBenchArgs) -> anyhow::Result<(Vec<Duration>, usize, f64)> {
    let (stream, _) = tokio::time::timeout(Duration::from_secs(30), socket.accept())
        .await
        .context("kuuki serve did not connect within 30 s")??;
    let (_, mut link) = ServerBuilder::new().accept(stream).await?;
    link.send(Message::text(json!({"type": "hello", "num_connections": 1}).to_string())).await?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let total = u64::from(args.rate) * u64::from(args.seconds);
    let interval = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    let mut sent_at: HashMap<String, Instant> = HashMap::with_capacity(total as usize);
    let mut latencies = Vec::with_capacity(total as usize);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut next = 0;
    let mut last_sent = started;
    let drain_until = loop {
        tokio::select! {
            _ = ticks.tick(), if next < total => {
                sent_at.insert(format!("env-{next}"), Instant::now());
                link.send(Message::text(envelope(next, now))).await?;
                next += 1;
                last_sent = Instant::now();
            }
            frame = link.next() => {
                let frame = frame.context("kuuki closed the connection")??;
                if let Some(text) = frame.as_text()
                    && let Ok(ack) = serde_json::from_str::<serde_json::Value>(text)
                    && let Some(at) = ack["envelope_id"].as_str().and_then(|id| sent_at.remove(id))
                {
                    latencies.push(at.elapsed());
                }
            }
            () = tokio::time::sleep(Duration::from_millis(50)), if next >= total => {
                if sent_at.is_empty() || last_sent.elapsed() > Duration::from_secs(10) {
                    break last_sent;
                }
            }
        }
    };
    Ok((latencies, total as usize, (drain_until - started).as_secs_f64()))
}
