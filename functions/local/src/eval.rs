//! `kuuki eval`: replays the labelled conversations of `eval/` and prints how kuuki's
//! judgment compares with the labels (shared/src/eval).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use kuuki::eval::{self, CaseResult, Prices, Summary, report};

use crate::cli::{CommonArgs, setup};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: Option<EvalCommand>,
    /// The folder of labelled conversations (`*.jsonl`, in sub-folders by language).
    #[arg(default_value = "eval")]
    dir: PathBuf,
    /// none (rules only), openai, anthropic, or script:FILE. Default: the scripted
    /// policy `DIR/policy.llm.jsonl`, so the figures do not depend on a provider.
    #[arg(long)]
    llm: Option<String>,
    /// Override a setting (repeatable), over the environment.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seed for the judge's jitter.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// TOML persona. Default: `DIR/persona.toml`.
    #[arg(long)]
    persona: Option<PathBuf>,
    /// Only the conversations whose file name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Also write an HTML page with every miss and its decision trace.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Fail (exit 1) when the precision of speaking is below this.
    #[arg(long, default_value_t = 0.0)]
    min_precision: f64,
    /// Fail (exit 1) when the recall of speaking is below this.
    #[arg(long, default_value_t = 0.0)]
    min_recall: f64,
    /// Fail (exit 1) when one situation's figure is below a floor:
    /// `SITUATION:METRIC=VALUE`, METRIC one of precision, recall, hanging-recall
    /// (e.g. `busy-channel:hanging-recall=0.6`). Repeatable.
    #[arg(long = "min-situation", value_name = "SITUATION:METRIC=VALUE", value_parser = parse_situation_floor)]
    min_situation: Vec<SituationFloor>,
    /// Dollars per million input tokens, for the projected cost (a Flash-Lite-class model).
    #[arg(long, default_value_t = 0.10)]
    input_price: f64,
    /// Dollars per million output tokens.
    #[arg(long, default_value_t = 0.40)]
    output_price: f64,
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Replay annotated IRC logs (`NAME.ascii.txt` with `NAME.annotation.txt`) and print
    /// the measure the project is judged by: barge-ins, pick-ups, posts and LLM judge
    /// calls per 1,000 messages, per log and in total (`../shared/irc/README.md`).
    Irc(crate::eval_irc::IrcArgs),
}

/// A floor under one situation's figure (`--min-situation`).
#[derive(Debug, Clone)]
struct SituationFloor {
    situation: String,
    metric: Metric,
    value: f64,
}

#[derive(Debug, Clone, Copy)]
enum Metric {
    Precision,
    Recall,
    HangingRecall,
}

impl Metric {
    fn of(self, s: &Summary) -> f64 {
        match self {
            Metric::Precision => s.precision(),
            Metric::Recall => s.recall(),
            Metric::HangingRecall => s.hanging_recall(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Metric::Precision => "precision",
            Metric::Recall => "recall",
            Metric::HangingRecall => "hanging-recall",
        }
    }
}

fn parse_situation_floor(text: &str) -> Result<SituationFloor, String> {
    let usage = || format!("`{text}`: expected SITUATION:METRIC=VALUE, e.g. busy-channel:hanging-recall=0.6");
    let (situation, rest) = text.split_once(':').ok_or_else(usage)?;
    let (metric, value) = rest.split_once('=').ok_or_else(usage)?;
    let metric = match metric {
        "precision" => Metric::Precision,
        "recall" => Metric::Recall,
        "hanging-recall" => Metric::HangingRecall,
        other => return Err(format!("`{other}`: the metric is precision, recall or hanging-recall")),
    };
    let value: f64 = value.parse().map_err(|_| usage())?;
    if situation.is_empty() || !(0.0..=1.0).contains(&value) {
        return Err(usage());
    }
    Ok(SituationFloor { situation: situation.to_owned(), metric, value })
}

/// The eval files under `dir`, sorted: every `*.jsonl` but LLM scripts (`*.llm.jsonl`).
fn eval_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).with_context(|| format!("reading {}", folder.display()))? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                folders.push(path);
            } else if name.ends_with(".jsonl") && !name.ends_with(".llm.jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

pub async fn run(args: EvalArgs) -> anyhow::Result<()> {
    if let Some(EvalCommand::Irc(irc)) = args.command {
        return crate::eval_irc::run(irc).await;
    }
    let llm = args.llm.clone().unwrap_or_else(|| format!("script:{}", args.dir.join("policy.llm.jsonl").display()));
    let common = CommonArgs {
        llm: Some(llm.clone()),
        set: args.set.clone(),
        seed: Some(args.seed),
        persona: Some(args.persona.clone().unwrap_or_else(|| args.dir.join("persona.toml"))),
    };
    let mut cases = Vec::new();
    for path in eval_files(&args.dir)? {
        let name = path.strip_prefix(&args.dir).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        if args.only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        cases.push(eval::parse_case(&name, &text)?);
    }
    if cases.is_empty() {
        bail!("no eval conversations in {}", args.dir.display());
    }

    let mut results: Vec<CaseResult> = Vec::with_capacity(cases.len());
    for case in cases {
        // A fresh setup each time: a script's answers are used up per conversation.
        let options = setup(&common)?.options;
        let name = case.name.clone();
        results.push(eval::run_case(case, options).await.with_context(|| format!("replaying {name}"))?);
    }

    let prices = Prices { input: args.input_price, output: args.output_price };
    let mut languages: Vec<&str> = results.iter().map(|r| r.case.language()).collect();
    languages.dedup();
    let overall = Summary::of(&results, prices);
    let by_language: Vec<(String, Summary)> = languages
        .iter()
        .map(|lang| {
            let s = Summary::of(results.iter().filter(|r| r.case.language() == *lang), prices);
            (lang.to_string(), s)
        })
        .collect();
    let mut rows = vec![report::Row { name: "all", summary: &overall }];
    rows.extend(by_language.iter().map(|(name, summary)| report::Row { name, summary }));
    let mut situations: Vec<&str> = results.iter().map(|r| r.case.situation.as_str()).collect();
    situations.sort_unstable();
    situations.dedup();
    let by_situation: Vec<(String, Summary)> = situations
        .iter()
        .map(|situation| {
            let s = Summary::of(results.iter().filter(|r| r.case.situation == *situation), prices);
            (situation.to_string(), s)
        })
        .collect();

    println!("kuuki eval: {} conversations in {}, LLM {llm}\n", overall.conversations, args.dir.display());
    print_table(&rows);
    println!("\nby situation:\n");
    let situation_rows: Vec<report::Row<'_>> =
        by_situation.iter().map(|(name, summary)| report::Row { name, summary }).collect();
    print_table(&situation_rows);
    let prices_note = format!(
        "Projected cost at ${}/M input and ${}/M output tokens{}.",
        args.input_price,
        args.output_price,
        if llm.starts_with("script:") { "; scripted calls count about four bytes a token" } else { "" }
    );
    println!("\n{prices_note}");
    let failed: u64 = results.iter().map(|r| r.stats.failed_deliveries).sum();
    if failed > 0 {
        println!("{failed} job deliveries failed (retried or dead-lettered): see the LLM's errors above");
    }

    println!("\nmisses:");
    for r in &results {
        for o in r.outcomes.iter().filter(|o| o.verdict.is_miss()) {
            let m = &r.case.transcript[o.message];
            println!(
                "  {} line {}: {} ({}: {})",
                r.case.name,
                m.line,
                report::verdict_name(o.verdict),
                m.user,
                clip(&m.text)
            );
        }
    }
    if let Some(path) = &args.report {
        let html = report::render(&args.dir.display().to_string(), &rows, &results, &prices_note);
        std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("report: {}", path.display());
    }

    let mut below = Vec::new();
    if overall.precision() < args.min_precision {
        below.push(format!("precision {:.3} < {}", overall.precision(), args.min_precision));
    }
    if overall.recall() < args.min_recall {
        below.push(format!("recall {:.3} < {}", overall.recall(), args.min_recall));
    }
    for floor in &args.min_situation {
        let Some((_, summary)) = by_situation.iter().find(|(name, _)| *name == floor.situation) else {
            bail!("--min-situation {}: no conversation has that situation", floor.situation);
        };
        let figure = floor.metric.of(summary);
        if figure < floor.value {
            below.push(format!("{} {} {figure:.3} < {}", floor.situation, floor.metric.name(), floor.value));
        }
    }
    if !below.is_empty() {
        bail!("below the floor: {}", below.join(", "));
    }
    Ok(())
}

fn clip(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(MAX).collect::<String>())
    }
}

fn print_table(rows: &[report::Row<'_>]) {
    println!(
        "| set | conversations | messages | precision | recall | hanging recall | reaction accuracy | silent kept | on time | mean timing error | LLM calls / 100 msgs | tokens / 100 msgs | $ / 1,000 msgs |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in rows {
        let s = row.summary;
        println!(
            "| {} | {} | {} | {:.2} ({}/{}) | {:.2} ({}/{}) | {:.2} ({}/{}) | {:.2} ({}/{}, {} stray) | {}/{} | {}/{} | {:.0} s | {:.1} | {:.0} | {:.4} |",
            row.name,
            s.conversations,
            s.messages,
            s.precision(),
            s.speak_hits,
            s.posts,
            s.recall(),
            s.speak_hits,
            s.speak_labels,
            s.hanging_recall(),
            s.hanging_hits,
            s.hanging_labels,
            s.reaction_accuracy(),
            s.react_hits,
            s.react_labels,
            s.stray_reactions,
            s.silent_kept,
            s.silent_labels,
            s.timed - s.mistimed,
            s.timed,
            s.mean_timing_error,
            s.per_hundred_messages(s.llm_calls),
            s.per_hundred_messages(s.input_tokens + s.output_tokens),
            s.dollars_per_thousand_messages(),
        );
    }
}
