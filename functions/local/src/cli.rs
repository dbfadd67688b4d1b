use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use kuuki::adapters::llm::ScriptedLlm;
use kuuki::config::{self, PersonaFile, Settings};
use kuuki::ports::Llm;
use kuuki::replay::{self, LogWriter, ReplayOptions, Stats};

#[derive(Parser)]
#[command(name = "kuuki", version, about = "A chat participant that reads the room")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// `kuuki serve` answers HTTP and runs workers at once on every core; the rest
    /// (replay, benchmarks) run on one thread, which is faster for them.
    pub fn wants_threads(&self) -> bool {
        matches!(self.command, Command::Serve(_))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Replay a transcript through the whole pipeline on a virtual clock; the decision
    /// log goes to stdout, a summary to stderr.
    Replay(ReplayArgs),
    /// Print the settings table (name, default, meaning) as Markdown.
    Settings,
    /// Run kuuki for a team: Slack (Socket Mode or HTTP), the Discord Gateway, the
    /// workers, one SQLite file; GET /healthz and /metrics.
    ///
    /// One process: Slack over Socket Mode when SLACK_APP_TOKEN is set (its Events API
    /// over HTTP with SLACK_SIGNING_SECRET), Discord over the Gateway with
    /// DISCORD_BOT_TOKEN, the workers in process on the real clock, every memory tier
    /// and the job queue in one SQLite file (--data), or on AWS with --aws.
    Serve(crate::serve::ServeArgs),
    /// Create the DynamoDB tables, SQS queues and schedule group where the AWS
    /// environment points, and print the queue settings.
    SetupAws(crate::aws::SetupArgs),
    /// Measure replay throughput, the ingress, a running `kuuki serve`, LLM calls per
    /// 1,000 messages, the SQLite store and Socket Mode.
    Bench(crate::bench::BenchArgs),
    /// Replay the labelled conversations of `eval/` and measure judgment against the
    /// labels: precision and recall of speaking, reactions, timing, LLM calls and cost.
    Eval(crate::eval::EvalArgs),
    /// Discord set-up: `kuuki discord register` installs the /kuuki command.
    Discord(crate::discord::DiscordArgs),
    /// Learn the reply model (when a later line answers an open question) from
    /// annotated IRC logs and write its weights with their figures on the dev logs.
    TrainReplyModel(crate::train::TrainArgs),
}

#[derive(Args)]
pub struct CommonArgs {
    /// none (rules only), openai, anthropic, or script:FILE (canned answers).
    /// Default: LLM_PROVIDER.
    #[arg(long)]
    pub llm: Option<String>,
    /// Override a setting (repeatable), over the environment.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Seed for the judge's jitter; the same seed replays the same way.
    #[arg(long)]
    pub seed: Option<u64>,
    /// TOML persona file (name, system_prompt, aliases, topics). Default: PERSONA_FILE.
    #[arg(long)]
    pub persona: Option<PathBuf>,
}

#[derive(Args)]
struct ReplayArgs {
    /// The transcript: one JSON object per line.
    transcript: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
    /// Also write a self-contained HTML timeline of the replay.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Replay(args) => run_replay(args).await,
        Command::Settings => {
            print!("{}", config::settings_markdown());
            Ok(())
        }
        Command::Serve(args) => crate::serve::run(args).await,
        Command::SetupAws(args) => crate::aws::setup_aws(args).await,
        Command::Bench(args) => crate::bench::run(args).await,
        Command::Eval(args) => crate::eval::run(args).await,
        Command::Discord(args) => crate::discord::run(args).await,
        Command::TrainReplyModel(args) => crate::train::run(args),
    }
}

/// Settings, persona and LLM as the environment and the flags say.
pub struct Setup {
    pub options: ReplayOptions,
}

pub fn setup(common: &CommonArgs) -> anyhow::Result<Setup> {
    setup_with_script(common, None)
}

/// As [`setup`], with `default_script` (an LLM script's text) as the model unless `--llm`
/// names one (the environment's `LLM_PROVIDER` is not read then).
pub fn setup_with_script(common: &CommonArgs, default_script: Option<&str>) -> anyhow::Result<Setup> {
    let mut vars: HashMap<String, String> = std::env::vars().collect();
    for pair in &common.set {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--set {pair:?}: expected KEY=VALUE");
        };
        config::check_known(key)?;
        vars.insert(key.to_owned(), value.to_owned());
    }
    // A script is an LLM object, not a provider: LLM_PROVIDER stays none for it.
    let (provider, script) = match (&common.llm, default_script) {
        (None, Some(text)) => {
            let script = ScriptedLlm::parse(text).context("in the default LLM script")?;
            ("none", Some(Arc::new(script) as Arc<dyn Llm>))
        }
        _ => {
            let choice = common.llm.clone().or_else(|| vars.get("LLM_PROVIDER").cloned());
            provider_or_script(choice.as_deref().unwrap_or("none"))?
        }
    };
    vars.insert("LLM_PROVIDER".into(), provider.into());
    let settings = Settings::from_vars(&vars)?;
    let llm = match script {
        Some(script) => Some(script),
        None => kuuki::adapters::llm::from_settings(&settings)?,
    };
    let embedder = kuuki::adapters::llm::embedder_from_settings(&settings)?;
    let settings = settings.for_llm(llm.is_some());

    let persona_path = common.persona.clone().or_else(|| settings.bot.persona_file.clone().map(PathBuf::from));
    let persona_file = match &persona_path {
        Some(path) => Some(read_persona(path)?),
        None => None,
    };
    let persona = settings.persona(persona_file.as_ref());
    let seed = common.seed.unwrap_or_else(|| fastrand::u64(..));
    Ok(Setup { options: ReplayOptions { settings, persona, llm, embedder, seed } })
}

/// The provider `--llm` (or `LLM_PROVIDER`) names, or the script it names read.
fn provider_or_script(choice: &str) -> anyhow::Result<(&'static str, Option<Arc<dyn Llm>>)> {
    Ok(match choice {
        "none" | "" => ("none", None),
        other if other.starts_with("script:") => {
            let path = &other["script:".len()..];
            let text = std::fs::read_to_string(path).with_context(|| format!("reading the LLM script {path}"))?;
            let script = ScriptedLlm::parse(&text).with_context(|| format!("in {path}"))?;
            ("none", Some(Arc::new(script)))
        }
        "openai" => ("openai", None),
        "anthropic" => ("anthropic", None),
        other => bail!("--llm {other:?}: expected none, openai, anthropic or script:FILE"),
    })
}

fn read_persona(path: &Path) -> anyhow::Result<PersonaFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the persona {}", path.display()))?;
    PersonaFile::parse(&text).map_err(|e| anyhow::anyhow!("persona {}: {e}", path.display()))
}

async fn run_replay(args: ReplayArgs) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(&args.transcript).with_context(|| format!("reading {}", args.transcript.display()))?;
    let transcript = replay::parse_transcript(&text).with_context(|| format!("in {}", args.transcript.display()))?;
    let setup = setup(&args.common)?;
    let seed = setup.options.seed;
    let report_settings = setup.options.settings.clone();

    let started = Instant::now();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut writer = LogWriter::new(&mut out, args.report.is_some());
    let stats = replay::replay(&transcript, setup.options, &mut writer).await?;
    if let Some(e) = writer.io_error() {
        bail!("writing the decision log: {e}");
    }
    if let Some(path) = &args.report {
        let title = args.transcript.display().to_string();
        let html = replay::report::render(&title, writer.kept(), &report_settings);
        std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))?;
    }
    drop(writer);
    out.flush()?;
    print_summary(&stats, started.elapsed().as_secs_f64(), seed);
    if let Some(path) = &args.report {
        eprintln!("report: {}", path.display());
    }
    Ok(())
}

pub fn print_summary(stats: &Stats, wall_seconds: f64, seed: u64) {
    let responses: Vec<String> = stats.responses.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let calls: Vec<String> = stats.llm_calls.iter().map(|(k, v)| format!("{k} {v}")).collect();
    eprintln!(
        "replayed {} messages ({:.0} s of chat) in {:.3} s, seed {seed}\n\
         judgments {} ({} asked the LLM), superseded {}, dropped {}, failed responses {}, failed deliveries {}\n\
         responses: {}\nLLM calls: {}",
        stats.messages,
        stats.duration_seconds,
        wall_seconds,
        stats.judgments,
        stats.llm_judgments,
        stats.superseded,
        stats.dropped,
        stats.respond_failed,
        stats.failed_deliveries,
        responses.join(", "),
        calls.join(", "),
    );
}
