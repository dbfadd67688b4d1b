//! `discord-gateway`: the relay as a long-running process (a container). Logs go to
//! stderr as JSON; stdout carries only the EMF metrics lines.
//! `discord-gateway healthcheck` asks a running relay's `/healthz` (for a container
//! health check in an image without curl).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kuuki_discord_gateway::{Settings, Stats, health_router, metrics_line, run};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    if std::env::args().nth(1).as_deref() == Some("healthcheck") {
        return healthcheck().await;
    }
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("discord-gateway: {error}");
            return ExitCode::from(2);
        }
    };
    let stats = Arc::new(Stats::default());

    let listener = match tokio::net::TcpListener::bind(settings.health_listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("discord-gateway: cannot listen on {}: {error}", settings.health_listen);
            return ExitCode::from(2);
        }
    };
    let router = health_router(stats.clone(), settings.unhealthy_after);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(error = %error, "the health server stopped");
        }
    });
    let metrics = tokio::spawn(print_metrics(stats.clone(), settings.metrics_interval));

    tracing::info!(ingress = %settings.ingress_url, gateway = ?settings.gateway_url, health = %settings.health_listen, "relaying Discord message dispatches");
    let result = run(&settings, stats.clone(), shutdown_signal()).await;
    metrics.abort();
    emit(&stats);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %error, "the relay stopped");
            ExitCode::FAILURE
        }
    }
}

async fn print_metrics(stats: Arc<Stats>, every: Duration) {
    let mut interval = tokio::time::interval(every);
    interval.tick().await;
    loop {
        interval.tick().await;
        emit(&stats);
    }
}

fn emit(stats: &Stats) {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let line = metrics_line(stats, ms);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
}

/// SIGTERM (ECS, docker stop) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

async fn healthcheck() -> ExitCode {
    let listen = std::env::var("RELAY_HEALTH_LISTEN").unwrap_or_else(|_| "0.0.0.0:8080".into());
    let port = listen.rsplit(':').next().unwrap_or("8080");
    let url = format!("http://127.0.0.1:{port}/healthz");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(3)).build().expect("a reqwest client builds");
    match client.get(&url).send().await {
        Ok(response) if response.status().is_success() => ExitCode::SUCCESS,
        Ok(response) => {
            eprintln!("{url}: {}", response.status());
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("{url}: {error}");
            ExitCode::FAILURE
        }
    }
}
