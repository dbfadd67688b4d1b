//! `kuuki serve`: the real ingress routes on a local address, the workers in-process
//! on the real clock, the embedded store, and the real Slack Web API.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kuuki::adapters::aws::AwsAdapters;
use kuuki::adapters::aws::sqs::poll_forever;
use kuuki::adapters::llm::CountingLlm;
use kuuki::adapters::memory::InProcess;
use kuuki::adapters::platforms::{Role, connect};
use kuuki::adapters::system::{JsonLinesLog, SystemClock};
use kuuki::budget::JobKind;
use kuuki::deps::Deps;
use kuuki::domain::UserId;
use kuuki::ports::Clock;
use kuuki_ingress::{Ingress, ServerLimits, app, serve_http};

use crate::cli::{CommonArgs, setup};

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Use DynamoDB, SQS and the Scheduler as the AWS environment configures them
    /// (AWS_ENDPOINT_URL* for emulators), with in-process SQS pollers.
    #[arg(long)]
    aws: bool,
    /// Seconds a connection may take to send a request's headers, counted from its
    /// first byte or its previous response: idle and slow connections close after it.
    #[arg(long, default_value_t = ServerLimits::default().header_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_secs: u64,
    /// Seconds a request may take from its headers to its answer, body included (408 after).
    #[arg(long, default_value_t = ServerLimits::default().request_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    request_timeout_secs: u64,
    /// Open connections at most; the next one closes the oldest one not inside a request.
    #[arg(long, default_value_t = ServerLimits::default().max_connections, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=u64::from(u32::MAX)))]
    max_connections: usize,
    #[command(flatten)]
    common: CommonArgs,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = setup(&args.common)?.options;
    let settings = options.settings;
    // Slack, Discord or both: each platform whose token is set.
    let connected = connect(&settings, Role::Ingress).await.map_err(anyhow::Error::msg)?;
    if let Some(me) = &connected.slack {
        eprintln!("kuuki serve: signed in to Slack as bot user {}", me.user_id);
    }
    if let Some(me) = &connected.discord {
        eprintln!("kuuki serve: signed in to Discord as bot user {}", me.user_id);
    }
    let chat: Arc<dyn kuuki::ports::Chat> = connected.chat.clone();
    let mut ids = connected.bot_ids().into_iter();
    let user = ids.next().expect("connect serves at least one platform");
    let also: Vec<UserId> = ids.collect();

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let llm = options.llm.map(|llm| Arc::new(CountingLlm::new(llm)) as Arc<dyn kuuki::ports::Llm>);
    let log = Arc::new(JsonLinesLog::new(std::io::stdout()));
    let (deps, workers) = if args.aws {
        let urls = [
            &settings.judge_queue_url,
            &settings.respond_queue_url,
            &settings.summarize_queue_url,
            &settings.reflect_queue_url,
            &settings.forget_queue_url,
        ];
        if urls.iter().any(|u| u.is_empty()) {
            bail!(
                "--aws needs JUDGE_QUEUE_URL, RESPOND_QUEUE_URL, SUMMARIZE_QUEUE_URL, REFLECT_QUEUE_URL and FORGET_QUEUE_URL (kuuki setup-aws prints them)"
            );
        }
        // As in AWS, the ingress and the workers each on clients of their own: the
        // ingress's calls are cut off sooner than a job's.
        let deps_on = |aws: &AwsAdapters| {
            let adapters = aws.adapters(chat.clone(), llm.clone(), log.clone()).with_embedder(options.embedder.clone());
            let deps = Deps::new(settings.clone(), options.persona.clone(), user.clone(), adapters, options.seed);
            Arc::new(also.iter().cloned().fold(deps, Deps::also_known_as))
        };
        let config = kuuki::adapters::aws::config::load().await;
        let jobs = AwsAdapters::for_role(&config, Role::Worker, &settings, clock.clone());
        let workers = deps_on(&jobs);
        let (client, urls) = (jobs.queue.client().clone(), jobs.queue.urls().clone());
        let pollers = JobKind::ALL
            .into_iter()
            .map(|kind| {
                tokio::spawn(poll_forever(workers.clone(), client.clone(), kind, urls.for_kind(kind).to_owned()))
            })
            .collect();
        (deps_on(&AwsAdapters::for_role(&config, Role::Ingress, &settings, clock)), pollers)
    } else {
        let retention = std::time::Duration::from_secs(u64::from(settings.message_retention_days) * 86_400);
        let parts = InProcess::with_retention(clock, retention);
        let queue = parts.queue.clone();
        let adapters = parts.adapters(chat, llm, log).with_embedder(options.embedder);
        let deps = Deps::new(settings, options.persona, user, adapters, options.seed);
        let deps = Arc::new(also.into_iter().fold(deps, Deps::also_known_as));
        (deps.clone(), vec![tokio::spawn(kuuki::worker::run_forever(deps, queue))])
    };
    let ingress = Ingress::new(deps, &connected, None).map_err(anyhow::Error::msg)?;
    let routes = ingress.routes().join(", ");
    let router = app(Arc::new(ingress));
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    eprintln!("kuuki serve: listening on http://{} ({routes})", listener.local_addr()?);
    let limits = ServerLimits {
        header_timeout: Duration::from_secs(args.header_timeout_secs),
        request_timeout: Duration::from_secs(args.request_timeout_secs),
        max_connections: args.max_connections,
    };
    serve_http(listener, router, limits, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .context("serving")?;
    for worker in workers {
        worker.abort();
    }
    Ok(())
}
