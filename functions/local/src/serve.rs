//! `kuuki serve`: the real ingress routes on a local address, the workers in-process
//! on the real clock, the embedded store, and the real Slack Web API.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use kuuki::adapters::llm::CountingLlm;
use kuuki::adapters::memory::InProcess;
use kuuki::adapters::slack::{SigningSecret, SlackClient};
use kuuki::adapters::system::{JsonLinesLog, SystemClock};
use kuuki::deps::Deps;
use kuuki::domain::UserId;
use kuuki::ports::Clock;
use kuuki_ingress::{Ingress, app};

use crate::cli::{CommonArgs, setup};

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    #[command(flatten)]
    common: CommonArgs,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = setup(&args.common)?.options;
    let settings = options.settings;
    if settings.slack_signing_secret.is_empty() {
        bail!("SLACK_SIGNING_SECRET is not set: kuuki serve verifies every request with it");
    }
    if settings.slack_bot_token.is_empty() {
        bail!("SLACK_BOT_TOKEN is not set: kuuki serve posts with it");
    }
    let slack = Arc::new(SlackClient::new(&settings.slack_api_base_url, &settings.slack_bot_token));
    let me = slack
        .auth_test()
        .await
        .with_context(|| format!("auth.test at {} (is SLACK_BOT_TOKEN right?)", settings.slack_api_base_url))?;
    eprintln!("kuuki serve: signed in to Slack as bot user {}", me.user_id);

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let parts = InProcess::new(clock);
    let queue = parts.queue.clone();
    let secret = SigningSecret::new(settings.slack_signing_secret.clone());
    let deps = Arc::new(Deps::new(
        settings,
        options.persona,
        UserId(me.user_id.clone()),
        parts.adapters(
            slack,
            options.llm.map(|llm| Arc::new(CountingLlm::new(llm)) as Arc<dyn kuuki::ports::Llm>),
            Arc::new(JsonLinesLog::new(std::io::stdout())),
        ),
        options.seed,
    ));
    let workers = tokio::spawn(kuuki::worker::run_forever(deps.clone(), queue));
    let router = app(Arc::new(Ingress { deps, secret, slack: me }));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    eprintln!(
        "kuuki serve: listening on http://{} (POST /slack/events, POST /slack/commands, GET /healthz)",
        listener.local_addr()?
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving")?;
    workers.abort();
    Ok(())
}
