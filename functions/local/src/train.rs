//! `kuuki train-reply-model`: learns the reply model from annotated logs and writes its
//! weights with where they came from and their figures on the dev logs
//! (shared/src/eval/irc/training.rs).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kuuki::eval::irc::{self, training};

#[derive(Args)]
pub struct TrainArgs {
    /// The training logs (`NAME.ascii.txt` with `NAME.annotation.txt`).
    #[arg(long, default_value = irc::SHARED_TRAIN_DIR)]
    train: PathBuf,
    /// The logs the figures are measured on (never trained on).
    #[arg(long, default_value = "eval/irc/dev")]
    dev: PathBuf,
    /// Where the weights go (the committed ones: the default).
    #[arg(long, default_value = "shared/src/judge/open_question/reply_weights.json")]
    out: PathBuf,
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let read = |dir: &PathBuf| -> anyhow::Result<Vec<training::QuestionPairs>> {
        let logs = irc::read_logs(dir).with_context(|| format!("reading the logs in {}", dir.display()))?;
        anyhow::ensure!(!logs.is_empty(), "no logs in {}", dir.display());
        Ok(logs.iter().flat_map(training::question_pairs).collect())
    };
    let train = read(&args.train)?;
    let dev = read(&args.dev)?;
    let logs = irc::corpus::log_names(&args.train)?.len();
    let pairs: usize = train.iter().map(|q| q.pairs.len()).sum();
    let trained_on = format!(
        "{logs} annotated #ubuntu logs (the IRC disentanglement corpus' training split, every other file: Kummerfeld et al., ACL 2019, CC-BY-4.0), {} questions, {pairs} pairs; `kuuki train-reply-model`",
        train.len()
    );
    let mut weights = training::fit(&train, trained_on);
    weights.dev = training::figures(&weights, &dev);
    let text = serde_json::to_string_pretty(&weights)? + "\n";
    // Written beside it, then renamed over it: a run that dies halfway leaves the old
    // weights whole.
    let partial = args.out.with_extension("json.partial");
    std::fs::write(&partial, &text).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &args.out).with_context(|| format!("replacing {}", args.out.display()))?;
    eprintln!("wrote {} ({pairs} training pairs)", args.out.display());
    println!("{}", serde_json::to_string_pretty(&weights.dev)?);
    Ok(())
}
