//! `kuuki eval irc DIR`: replays annotated IRC logs and prints the measure the project is
//! judged by, per log and in total, as the reference `measure.py` does
//! (shared/src/eval/irc); floors make it a test.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use clap::Args;
use kuuki::eval::irc::{self, Counts, report};

use crate::cli::{CommonArgs, setup_with_script};

#[derive(Args)]
pub struct IrcArgs {
    /// The folder of logs, `NAME.ascii.txt` each with its `NAME.annotation.txt` (the
    /// training logs: ../shared/irc/train).
    #[arg(default_value = "eval/irc/dev")]
    dir: PathBuf,
    /// none (rules only), openai, anthropic, or script:FILE. Default: the reference's
    /// scripted judge (`eval/irc/policy.llm.jsonl`, built in).
    #[arg(long)]
    llm: Option<String>,
    /// Override a setting (repeatable), over the environment and the reference's
    /// AUTONOMOUS_RESPONSE_ENABLED=true and PROMPT_LANGUAGE=en.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seed for the judge's jitter (the reference's by default).
    #[arg(long, default_value_t = irc::SEED)]
    seed: u64,
    /// Print the reference's own lines: a JSON object per log, then its summary line.
    #[arg(long)]
    json: bool,
    /// Also list each barge-in and pick-up by `log:line`.
    #[arg(long)]
    verbose: bool,
    /// Also count, by reason, what kuuki last decided about each hanging question it did
    /// not take up (the closing that dropped its pick-up, a judgment below the
    /// threshold, …): where to look when tuning.
    #[arg(long)]
    why: bool,
    /// Fail (exit 1) when fewer than this percentage of the hanging questions are picked up.
    #[arg(long, value_name = "PCT")]
    min_pick_ups: Option<f64>,
    /// Fail (exit 1) when kuuki posts on more than this percentage of the answered questions.
    #[arg(long, value_name = "PCT")]
    max_barge_ins: Option<f64>,
    /// Fail (exit 1) when the LLM judge is called more than this often per 1,000 messages.
    #[arg(long, value_name = "PER_1000")]
    max_judge_calls: Option<f64>,
}

pub async fn run(args: IrcArgs) -> anyhow::Result<()> {
    let mut set: Vec<String> = irc::SETTINGS.iter().map(|s| s.to_string()).collect();
    set.extend(args.set.iter().cloned());
    let common = CommonArgs { llm: args.llm.clone(), set, seed: Some(args.seed), persona: None };
    let names = irc::corpus::log_names(&args.dir)?;
    if names.is_empty() {
        bail!("no logs (NAME.ascii.txt) in {}", args.dir.display());
    }
    let llm = args.llm.as_deref().unwrap_or("the reference's script");
    if !args.json {
        println!("kuuki eval irc: {} logs in {}, LLM {llm}, seed {}\n", names.len(), args.dir.display(), args.seed);
        println!("{}", report::table_head());
    }

    let started = Instant::now();
    let (mut total, mut details, mut failed) = (Counts::default(), Vec::new(), Vec::new());
    let mut left_hanging: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for name in &names {
        let log = irc::read_log(&args.dir, name)?;
        // A fresh setup each log: the reference runs one `kuuki replay` a log.
        let options = setup_with_script(&common, Some(irc::POLICY))?.options;
        match irc::run_log(&log, options).await {
            Ok(run) => {
                let lines = if args.verbose { report::detail_lines(&run) } else { Vec::new() };
                if args.json {
                    lines.iter().for_each(|line| println!("{line}"));
                    println!("{}", report::json_line(name, &run.counts));
                } else {
                    details.extend(lines);
                    println!("{}", report::table_row(name, &run.counts));
                }
                total += run.counts;
                for (reason, n) in run.left_hanging {
                    *left_hanging.entry(reason).or_default() += n;
                }
            }
            Err(error) => {
                println!("{}", report::error_line(name, &error.to_string()));
                failed.push(name.as_str());
            }
        }
    }
    if !args.json {
        println!("{}\n", report::table_row("total", &total));
        if args.verbose {
            println!("barge-ins and pick-ups:");
            details.iter().for_each(|line| println!("{line}"));
            println!();
        }
    }
    if args.why {
        println!("hanging questions not taken up, by what kuuki last decided about them:");
        let mut by_count: Vec<(String, u64)> = left_hanging.into_iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        by_count.iter().for_each(|(reason, n)| println!("{n:5}  {reason}"));
        println!();
    }
    println!("{}", report::summary_line(&total));
    eprintln!("replayed {} logs in {:.1} s", names.len() - failed.len(), started.elapsed().as_secs_f64());

    if !failed.is_empty() {
        bail!("{} of {} logs could not be replayed: {}", failed.len(), names.len(), failed.join(", "));
    }
    let missed = missed_floors(&args, &total);
    if !missed.is_empty() {
        bail!("missed the floor: {}", missed.join("; "));
    }
    Ok(())
}

/// Each floor of `args` the figures miss, said with the figure.
fn missed_floors(args: &IrcArgs, c: &Counts) -> Vec<String> {
    let mut missed = Vec::new();
    if let Some(floor) = args.min_pick_ups.filter(|&floor| c.pick_up_percent() < floor) {
        missed.push(format!(
            "pick-ups {:.2} % ({}/{} hanging questions) < {floor} %",
            c.pick_up_percent(),
            c.pick_ups,
            c.hanging_qs
        ));
    }
    if let Some(ceiling) = args.max_barge_ins.filter(|&ceiling| c.barge_in_percent() > ceiling) {
        missed.push(format!(
            "barge-ins {:.2} % ({}/{} answered questions) > {ceiling} %",
            c.barge_in_percent(),
            c.barge_ins,
            c.answered_qs
        ));
    }
    if let Some(ceiling) = args.max_judge_calls.filter(|&ceiling| c.judge_calls_per_thousand_messages() > ceiling) {
        missed.push(format!(
            "LLM judge calls {:.2} ({} in {} messages) > {ceiling} per 1,000 messages",
            c.judge_calls_per_thousand_messages(),
            c.llm_judge_calls,
            c.messages
        ));
    }
    missed
}
