//! `kuuki train-reply-model`: learns the reply model from annotated logs and writes its
//! weights with where they came from and their figures on the dev logs
//! (shared/src/eval/irc/training.rs).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kuuki::eval::irc::{self, training};
use serde_json::json;

#[derive(Args)]
pub struct TrainArgs {
    /// The training logs (`NAME.ascii.txt` with `NAME.annotation.txt`).
    #[arg(long, default_value = irc::SHARED_TRAIN_DIR)]
    train: PathBuf,
    /// The logs the figures are measured on (never trained on).
    #[arg(long, default_value = "eval/irc/dev")]
    dev: PathBuf,
    /// Where the reply model's weights go (the committed ones: the default).
    #[arg(long, default_value = "shared/src/judge/open_question/reply_weights.json")]
    out: PathBuf,
    /// Where the answered model goes (the committed one: the default).
    #[arg(long, default_value = "shared/src/judge/open_question/answered_model.json")]
    answered_out: PathBuf,
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let read = |dir: &PathBuf| -> anyhow::Result<Vec<irc::IrcLog>> {
        let logs = irc::read_logs(dir).with_context(|| format!("reading the logs in {}", dir.display()))?;
        anyhow::ensure!(!logs.is_empty(), "no logs in {}", dir.display());
        Ok(logs)
    };
    let (train_logs, dev_logs) = (read(&args.train)?, read(&args.dev)?);
    let train: Vec<training::QuestionPairs> = train_logs.iter().flat_map(training::question_pairs).collect();
    let dev: Vec<training::QuestionPairs> = dev_logs.iter().flat_map(training::question_pairs).collect();
    let logs = irc::corpus::log_names(&args.train)?.len();
    let pairs: usize = train.iter().map(|q| q.pairs.len()).sum();
    let trained_on = format!(
        "{logs} annotated #ubuntu logs (the IRC disentanglement corpus' training split, every other file: Kummerfeld et al., ACL 2019, CC-BY-4.0), {} questions, {pairs} pairs; `kuuki train-reply-model`",
        train.len()
    );
    let mut weights = training::fit(&train, trained_on);
    weights.dev = training::figures(&weights, &dev);
    // The answered model reads the reply model's probabilities: the ones just learned.
    let looks = |logs: &[irc::IrcLog]| -> Vec<training::QuestionLooks> {
        logs.iter().flat_map(|log| training::question_looks(log, &weights)).collect()
    };
    let (train_looks, dev_looks) = (looks(&train_logs), looks(&dev_logs));
    let trained_on = format!(
        "{logs} annotated #ubuntu logs (as the reply model), {} questions each looked at {:?} s after the asker's turn; `kuuki train-reply-model`",
        train_looks.len(),
        training::LOOKS
    );
    let mut answered = training::fit_answered(&train_looks, trained_on);
    answered.dev = training::answered_figures(&answered, &dev_looks);
    // Both written beside their files, then renamed over them: a run that dies halfway
    // leaves the old files whole (and the two agreeing, but for a death between the
    // renames).
    let weights_text = serde_json::to_string_pretty(&weights)? + "\n";
    let answered_text = answered.to_file_text();
    let mut renames = Vec::new();
    for (out, text) in [(&args.out, &weights_text), (&args.answered_out, &answered_text)] {
        let partial = out.with_extension("json.partial");
        std::fs::write(&partial, text).with_context(|| format!("writing {}", partial.display()))?;
        renames.push((partial, out));
    }
    for (partial, out) in renames {
        std::fs::rename(&partial, out).with_context(|| format!("replacing {}", out.display()))?;
    }
    eprintln!("wrote {} ({pairs} training pairs) and {}", args.out.display(), args.answered_out.display());
    println!("{}", serde_json::to_string_pretty(&json!({"reply_model": weights.dev, "answered_model": answered.dev}))?);
    Ok(())
}
