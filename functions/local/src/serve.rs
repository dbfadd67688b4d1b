//! `kuuki serve`: the real ingress routes on a local address, Slack over Socket Mode
//! and the Discord Gateway when their tokens are set, the workers in-process on the
//! real clock, every memory tier and the job queue in one SQLite file (or on AWS with
//! `--aws`), and the real platform APIs; `/metrics` and `/healthz` for whoever runs it
//! (`operations.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kuuki::adapters::aws::AwsAdapters;
use kuuki::adapters::aws::sqs::poll_forever;
use kuuki::adapters::llm::CountingLlm;
use kuuki::adapters::metrics::{MeteredLlm, MeteredLog, Metrics};
use kuuki::adapters::platforms::{Role, connect_with};
use kuuki::adapters::slack::oauth::SlackOAuthClient;
use kuuki::adapters::sqlite::SqliteStore;
use kuuki::adapters::system::{JsonLinesLog, SystemClock};
use kuuki::budget::JobKind;
use kuuki::deps::{Adapters, Deps, Surroundings};
use kuuki::domain::UserId;
use kuuki::install::Installer;
use kuuki::ports::{Clock, Installations, SlackTokens};
use kuuki::workspaces::Workspaces;
use kuuki_discord_gateway::{ConnectionState, Stats};
use kuuki_ingress::{Ingress, ServerLimits, app_with, serve_http};

use crate::cli::{CommonArgs, setup};
use crate::operations::Operations;

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Use DynamoDB, SQS and the Scheduler as the AWS environment configures them
    /// (AWS_ENDPOINT_URL* for emulators), with in-process SQS pollers.
    #[arg(long)]
    aws: bool,
    /// The SQLite file that keeps every memory tier, the ledger and the job queue
    /// (default: the setting DATA_PATH, `kuuki.db`); `:memory:` keeps nothing across a
    /// restart. Not with --aws.
    #[arg(long, conflicts_with = "aws")]
    data: Option<String>,
    /// Seconds a stop (SIGTERM, Ctrl-C) gives running jobs to finish; one still running
    /// then is taken up again when kuuki starts.
    #[arg(long, default_value_t = 8)]
    stop_timeout_secs: u64,
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
    /// Seconds Slack's Socket Mode or the Discord Gateway may be down before `GET
    /// /healthz` answers 503 (as it does at once while the data file is failing).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    unhealthy_after_secs: u64,
    #[command(flatten)]
    common: CommonArgs,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = setup(&args.common)?.options;
    let settings = options.settings;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // The data file first: one that is locked, damaged or newer stops start-up before
    // anything else is done, and is left as it was.
    let store = if args.aws {
        None
    } else {
        let path = args.data.clone().unwrap_or_else(|| settings.storage.data_path.clone());
        let retention = Duration::from_secs(u64::from(settings.memory.message_retention_days) * 86_400);
        let store = SqliteStore::open(&path, clock.clone(), Some(retention))?;
        let recovered = store.recovered();
        eprintln!(
            "kuuki serve: data in {path} ({} jobs and {} claims taken up from the last run)",
            recovered.jobs, recovered.claims
        );
        Some(Arc::new(store))
    };
    // SIGTERM or SIGINT: every part stops taking events, running jobs get a moment.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let signalled = stop_signals()?;
    tokio::spawn(async move {
        signalled.await;
        let _ = stop.send(true);
    });
    // With --aws, the tables and queues as the AWS environment configures them.
    let aws_config = match args.aws {
        true => Some(kuuki::adapters::aws::config::load().await),
        false => None,
    };
    let ingress_aws =
        aws_config.as_ref().map(|config| AwsAdapters::for_role(config, Role::Ingress, &settings, clock.clone()));
    // Many Slack workspaces (SLACK_CLIENT_ID): their installations, in the same store.
    let workspaces = if settings.platforms.slack_many_workspaces() {
        let timeouts = kuuki::adapters::aws::config::job_timeouts(&settings.time_budget());
        let sealer = kuuki::adapters::aws::kms::token_sealer(&settings.platforms, timeouts).await?;
        let installations: Arc<dyn Installations> = match (&store, &ingress_aws) {
            (Some(store), _) => store.clone(),
            (None, Some(aws)) => aws.store.clone(),
            (None, None) => unreachable!("a store or AWS"),
        };
        let platforms = &settings.platforms;
        let oauth = SlackOAuthClient::new(
            &platforms.slack_api_base_url,
            &platforms.slack_client_id,
            platforms.slack_client_secret.clone(),
            settings.budget.chat_timeout,
        );
        let ledger: Arc<dyn kuuki::ports::Ledger> = match (&store, &ingress_aws) {
            (Some(store), _) => store.clone(),
            (_, Some(aws)) => aws.store.clone(),
            (None, None) => unreachable!("a store or AWS"),
        };
        let workspaces = Workspaces::new(installations, sealer, clock.clone());
        Some(Arc::new(workspaces.with_rotation(Arc::new(oauth), ledger)))
    } else {
        None
    };
    // Slack, Discord or both: each platform whose token is set (or Slack's installations).
    let tokens = workspaces.clone().map(|w| w as Arc<dyn SlackTokens>);
    let connected = connect_with(&settings, Role::Ingress, tokens).await.map_err(anyhow::Error::msg)?;
    if let Some(workspaces) = &workspaces {
        let installed = workspaces.installed_workspaces().await?;
        eprintln!("kuuki serve: serving the Slack workspaces that install kuuki ({} installed now)", installed.len());
    }
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

    // Counted for `/metrics` as they happen: model calls, decision records, jobs.
    let metrics = Arc::new(Metrics::new());
    let llm = options.llm.map(|llm| {
        let counted = Arc::new(CountingLlm::new(llm));
        Arc::new(MeteredLlm::new(counted, metrics.clone())) as Arc<dyn kuuki::ports::Llm>
    });
    let log_text = kuuki::domain::LogText::from_setting(settings.storage.log_message_text);
    if settings.storage.log_message_text {
        eprintln!(
            "kuuki serve: LOG_MESSAGE_TEXT=true: the decision log on stdout carries message text, replies, facts and summaries (a debugging switch)"
        );
    }
    let written = Arc::new(JsonLinesLog::new(std::io::stdout(), log_text));
    let log = Arc::new(MeteredLog::new(written, metrics.clone()));
    let (deps, workers) = if args.aws {
        let urls = [
            &settings.storage.judge_queue_url,
            &settings.storage.respond_queue_url,
            &settings.storage.summarize_queue_url,
            &settings.storage.reflect_queue_url,
            &settings.storage.forget_queue_url,
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
            let deps = also.iter().cloned().fold(deps, Deps::also_known_as);
            Arc::new(match &workspaces {
                Some(workspaces) => deps.with_workspaces(workspaces.clone()),
                None => deps,
            })
        };
        let config = aws_config.as_ref().expect("loaded with --aws");
        let jobs = AwsAdapters::for_role(config, Role::Worker, &settings, clock.clone());
        let workers = deps_on(&jobs);
        let (client, urls) = (jobs.queue.client().clone(), jobs.queue.urls().clone());
        let pollers = JobKind::ALL
            .into_iter()
            .map(|kind| {
                tokio::spawn(poll_forever(workers.clone(), client.clone(), kind, urls.for_kind(kind).to_owned()))
            })
            .collect();
        (deps_on(ingress_aws.as_ref().expect("built with --aws")), pollers)
    } else {
        let store = store.clone().expect("opened unless --aws");
        let around = Surroundings { chat, llm, clock, log };
        let adapters =
            Adapters::from_store(store.clone(), store.clone(), store.clone(), around).with_embedder(options.embedder);
        let deps = Deps::new(settings, options.persona, user, adapters, options.seed);
        let deps = also.into_iter().fold(deps, Deps::also_known_as);
        let deps = Arc::new(match &workspaces {
            Some(workspaces) => deps.with_workspaces(workspaces.clone()),
            None => deps,
        });
        let drain = Duration::from_secs(args.stop_timeout_secs);
        let observer = Some(metrics.clone() as Arc<dyn kuuki::ports::JobObserver>);
        let workers = kuuki::worker::run_until_stopped(deps.clone(), store, stopping.clone(), drain, observer);
        (deps, vec![tokio::spawn(workers)])
    };
    let install = workspaces.map(|workspaces| {
        let platforms = &deps.settings.platforms;
        let oauth = SlackOAuthClient::new(
            &platforms.slack_api_base_url,
            &platforms.slack_client_id,
            platforms.slack_client_secret.clone(),
            deps.settings.budget.chat_timeout,
        );
        Arc::new(Installer::new(&deps.settings, workspaces, Arc::new(oauth)))
    });
    let ingress = Arc::new(Ingress::new(deps, &connected, None, install)?);
    // The platforms' own connections (Socket Mode, the Discord Gateway): each task ends
    // when `stopping` turns true, or with an error that stops kuuki (a revoked token).
    let mut platforms: Vec<tokio::task::JoinHandle<anyhow::Result<()>>> = Vec::new();
    let (slack, discord) = (Arc::new(ConnectionState::default()), Arc::new(Stats::default()));
    let socket_mode = crate::socket_mode::start(ingress.deps.clone(), &connected, stopping.clone(), slack.clone())?;
    let slack = socket_mode.map(|task| platforms.push(task)).map(|()| slack);
    let gateway = crate::discord_gateway::start(ingress.deps.clone(), &connected, stopping.clone(), discord.clone())?;
    let discord = gateway.map(|task| platforms.push(task)).map(|()| discord);
    let operations = Arc::new(Operations {
        metrics,
        store,
        clock: ingress.deps.clock.clone(),
        slack,
        discord,
        unhealthy_after: Duration::from_secs(args.unhealthy_after_secs),
    });
    let mut routes = ingress.routes();
    routes.push("GET /metrics");
    let routes = routes.join(", ");
    let router = app_with(ingress.clone(), operations.router());
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    eprintln!("kuuki serve: listening on http://{} ({routes})", listener.local_addr()?);
    let limits = ServerLimits {
        header_timeout: Duration::from_secs(args.header_timeout_secs),
        request_timeout: Duration::from_secs(args.request_timeout_secs),
        max_connections: args.max_connections,
    };
    let mut http_stopping = stopping.clone();
    let serving = serve_http(listener, router, limits, async move {
        let _ = http_stopping.wait_for(|stop| *stop).await;
    });
    // A platform's error (a refused token) stops kuuki at once; otherwise it runs until
    // a stop signal, then gives the platforms a moment to close their connections.
    tokio::select! {
        served = serving => served.context("serving")?,
        error = first_failure(&mut platforms) => return Err(error),
    }
    platforms_stopped(platforms).await?;
    if args.aws {
        // SQS keeps what was not deleted: a job cut short comes back to a poller.
        for worker in workers {
            worker.abort();
        }
    } else {
        // The in-process workers finish or set aside their running jobs themselves.
        for worker in workers {
            let _ = worker.await;
        }
    }
    Ok(())
}

/// How long a stop waits for the platforms' connections to close.
const PLATFORMS_STOP_WITHIN: Duration = Duration::from_secs(5);

/// The first error a platform's task ends with (one that ends well is let go);
/// pending while none has failed.
async fn first_failure(platforms: &mut Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) -> anyhow::Error {
    while !platforms.is_empty() {
        let (ended, index, _) = futures_util::future::select_all(platforms.iter_mut()).await;
        platforms.swap_remove(index);
        match ended {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return error,
            Err(failed) => return anyhow::anyhow!("a platform's connection task failed: {failed}"),
        }
    }
    std::future::pending().await
}

/// After a stop: the platforms' tasks, awaited for at most [`PLATFORMS_STOP_WITHIN`].
async fn platforms_stopped(platforms: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) -> anyhow::Result<()> {
    let Ok(ended) = tokio::time::timeout(PLATFORMS_STOP_WITHIN, futures_util::future::join_all(platforms)).await else {
        tracing::warn!("the platforms' connections did not close within {PLATFORMS_STOP_WITHIN:?}; stopping anyway");
        return Ok(());
    };
    for task in ended {
        task.context("a platform's connection task failed")??;
    }
    Ok(())
}

/// Listens for SIGTERM (systemd, docker stop) and SIGINT (Ctrl-C) from now on: a
/// signal that comes before the returned future is first polled is not missed (or
/// left to kill the process, the default action).
fn stop_signals() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
        Ok(async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
