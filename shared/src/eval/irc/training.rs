//! Training the reply model (`kuuki train-reply-model`): every (question, later line by
//! someone else) pair of the annotated logs, its features as the open-question tracker
//! computes them ([`QuestionView::reply_features`]), labelled by the corpus' human reply
//! links; a logistic regression fitted by Newton's method (deterministic: the same logs
//! give the same weights to the last digit). Its figures on other logs tell how the
//! model, and a threshold on it, separate the questions people answered from the ones
//! they left hanging at the moment a pick-up looks.

use std::sync::Arc;

use serde_json::json;

use std::time::Duration;

use super::boosting::{self, BoostParams};
use super::corpus::IrcLog;
use super::questions::{Fate, Question, classify};
use super::transcript::{ANNOTATED_FROM, CHANNEL, CONTEXT_FROM, REPLAYED_UNTIL, Said, build_transcript};
use crate::domain::{Author, BotIdentity, ChannelId, Message, Timestamp, Ts, UserId};
use crate::judge::naming::KnownPeople;
use crate::judge::open_question::QuestionView;
use crate::judge::open_question::answered_model::{AnsweredFeatures, AnsweredModel, FEATURES as ANSWERED_FEATURES};
use crate::judge::open_question::reply_model::{FEATURES, ReplyFeatures, ReplyWeights};

/// Lines after a question whose pairs are learned from: later than this, an answer is
/// rare (0.3 % of the training logs' answered questions) and a pick-up long past.
pub const CANDIDATE_SECONDS: f64 = 600.0;
/// The lines before a question the tracker reads (JUDGE_RECENT_MESSAGES and the slack).
pub const LINES_BEFORE: usize = 16;
/// L2 penalty on the weights (not the bias): keeps rare features' weights finite.
const L2: f64 = 1.0;
/// When kuuki's pick-up looks, by default (UNANSWERED_QUESTION_WAIT_SECONDS).
pub const LOOK_AFTER_SECONDS: f64 = 120.0;
/// How long after a question the answered model's rows read its aftermath.
pub const AFTERMATH_SECONDS: f64 = 900.0;
/// When the answered model's rows look: seconds after the asker's turn ended.
pub const LOOKS: [f64; 6] = [60.0, 120.0, 180.0, 300.0, 450.0, 600.0];
/// The looks and thresholds whose answered-model figures are reported.
pub const REPORTED_LOOKS: [f64; 3] = [120.0, 180.0, 300.0];
pub const ANSWERED_THRESHOLDS: [f64; 6] = [0.1, 0.15, 0.2, 0.25, 0.3, 0.4];
/// The thresholds whose figures are reported.
pub const THRESHOLDS: [f64; 7] = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];

/// One question of a log, as the tracker sees it, with its pairs.
pub struct QuestionPairs {
    pub fate: Fate,
    /// The question's time in the transcript.
    pub t: f64,
    /// Each later line by someone else within [`CANDIDATE_SECONDS`]: its time after the
    /// question, its features, and whether a human reply link joins it to the question.
    pub pairs: Vec<(f64, ReplyFeatures, bool)>,
}

fn message(said: &Said) -> Arc<Message> {
    let at = Timestamp::from_secs_f64(1_100_000_000.0 + said.t);
    Arc::new(Message {
        channel: ChannelId(CHANNEL.into()),
        ts: Ts::from_timestamp(at),
        thread_root: None,
        user: UserId(said.nick.as_str().into()),
        user_name: said.nick.clone(),
        text: said.text.clone(),
        author: Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at,
    })
}

/// Every question of `log` (lines with `?` from the annotated part on, answered or
/// hanging as the measure decides) as the tracker sees it: the lines before it, and
/// those within `seconds_after` after it. `each` gets the question, its view, the
/// people around it and the transcript's index of the question's line.
fn each_question(
    log: &IrcLog,
    seconds_after: f64,
    mut each: impl FnMut(&Question, &QuestionView<'_>, &KnownPeople, &[Said], usize),
) {
    let transcript = build_transcript(&log.lines, CONTEXT_FROM, REPLAYED_UNTIL);
    let said = &transcript.said;
    let messages: Vec<Arc<Message>> = said.iter().map(message).collect();
    for question in classify(said, &log.replies, ANNOTATED_FROM) {
        let Some(at) = said.iter().position(|s| s.line == question.line) else { continue };
        let from = at.saturating_sub(LINES_BEFORE);
        let before: Vec<Arc<Message>> =
            messages[from..=at].iter().filter(|m| messages[at].at.seconds_since(m.at) <= 1800.0).cloned().collect();
        let after: Vec<Arc<Message>> = messages[at + 1..]
            .iter()
            .take_while(|m| m.at.seconds_since(messages[at].at) <= seconds_after)
            .cloned()
            .collect();
        let people = KnownPeople::of_messages(before.iter().chain(after.iter()));
        let view = QuestionView { question: &messages[at], before: &before, after: &after };
        each(&question, &view, &people, said, at);
    }
}

fn bot() -> BotIdentity {
    BotIdentity::new(UserId("UKUUKI".into()), "kuuki", &[])
}

/// The questions of `log` with their pairs.
pub fn question_pairs(log: &IrcLog) -> Vec<QuestionPairs> {
    let bot = bot();
    let mut out = Vec::new();
    each_question(log, CANDIDATE_SECONDS, |question, view, people, said, at| {
        let replies = log.replies.get(&question.line);
        let pairs = view
            .reply_features(&bot, people)
            .into_iter()
            .map(|(i, features)| {
                let line = said[at + 1 + i].line;
                let linked = replies.is_some_and(|r| r.contains(&line));
                (view.after[i].at.seconds_since(view.question.at), features, linked)
            })
            .collect();
        out.push(QuestionPairs { fate: question.fate, t: question.t, pairs });
    });
    out
}

/// One question of a log with its features at each of [`LOOKS`].
pub struct QuestionLooks {
    pub fate: Fate,
    /// Each look's seconds after the asker's turn ended, and the features then.
    pub looks: Vec<(f64, AnsweredFeatures)>,
}

/// The questions of `log` with their features at each of [`LOOKS`], the reply model
/// `reply` scoring their later lines.
pub fn question_looks(log: &IrcLog, reply: &ReplyWeights) -> Vec<QuestionLooks> {
    let bot = bot();
    let mut out = Vec::new();
    each_question(log, AFTERMATH_SECONDS, |question, view, people, _, _| {
        let turn_end = view.asker_turn_end();
        let looks = LOOKS
            .iter()
            .map(|&look| (look, view.answered_features(&bot, people, turn_end + Duration::from_secs_f64(look), reply)))
            .collect();
        out.push(QuestionLooks { fate: question.fate, looks });
    });
    out
}

/// Fits the answered model to the looks of `questions`: a question is answered when a
/// human reply link joins another person's line to it, whenever that came (a pick-up
/// that posts on it barges in either way).
pub fn fit_answered(questions: &[QuestionLooks], trained_on: String) -> AnsweredModel {
    let rows: Vec<(Vec<f64>, bool)> = questions
        .iter()
        .flat_map(|q| q.looks.iter().map(move |(_, f)| (f.values.to_vec(), q.fate != Fate::Hanging)))
        .collect();
    let boosted = boosting::fit(&rows, BoostParams::default());
    AnsweredModel {
        features: ANSWERED_FEATURES.iter().map(|f| f.to_string()).collect(),
        base: boosted.base,
        trees: boosted.trees,
        trained_on,
        dev: serde_json::Value::Null,
    }
}

/// How `model` does on `questions`: at each look of [`REPORTED_LOOKS`] and each
/// threshold, how many hanging questions it leaves open (what a pick-up can take up)
/// and how many answered ones it leaves open (where a pick-up would barge in).
pub fn answered_figures(model: &AnsweredModel, questions: &[QuestionLooks]) -> serde_json::Value {
    let hanging = questions.iter().filter(|q| q.fate == Fate::Hanging).count();
    let answered = questions.len() - hanging;
    let by_look: Vec<serde_json::Value> = REPORTED_LOOKS
        .iter()
        .map(|&look| {
            let at_look: Vec<(bool, f64)> = questions
                .iter()
                .filter_map(|q| {
                    let (_, f) = q.looks.iter().find(|(l, _)| *l == look)?;
                    Some((q.fate == Fate::Hanging, model.probability(f)))
                })
                .collect();
            let by_threshold: Vec<serde_json::Value> = ANSWERED_THRESHOLDS
                .iter()
                .map(|&t| {
                    let open = |hanging: bool| at_look.iter().filter(|(h, p)| *h == hanging && *p < t).count();
                    json!({
                        "threshold": t,
                        "hanging_left_open": format!("{}/{hanging}", open(true)),
                        "answered_left_open": format!("{}/{answered}", open(false)),
                    })
                })
                .collect();
            json!({ "look_after_seconds": look, "by_threshold": by_threshold })
        })
        .collect();
    json!({ "questions": questions.len(), "by_look": by_look })
}

/// Fits the weights to the pairs of `questions` (Newton's method with an L2 penalty).
pub fn fit(questions: &[QuestionPairs], trained_on: String) -> ReplyWeights {
    let n = FEATURES.len() + 1;
    let rows: Vec<(Vec<f64>, f64)> = questions
        .iter()
        .flat_map(|q| q.pairs.iter())
        .map(|(_, f, y)| {
            let mut x = f.values.to_vec();
            x.push(1.0);
            (x, if *y { 1.0 } else { 0.0 })
        })
        .collect();
    let mut w = vec![0.0; n];
    for _ in 0..50 {
        let mut gradient = vec![0.0; n];
        let mut hessian = vec![vec![0.0; n]; n];
        for (x, y) in &rows {
            let z: f64 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            let weight = (p * (1.0 - p)).max(1e-12);
            for ((g, h), xi) in gradient.iter_mut().zip(hessian.iter_mut()).zip(x) {
                *g += (y - p) * xi;
                for (hij, xj) in h.iter_mut().zip(x) {
                    *hij += weight * xi * xj;
                }
            }
        }
        for (i, (g, wi)) in gradient.iter_mut().zip(&w).enumerate().take(n - 1) {
            *g -= L2 * wi;
            hessian[i][i] += L2;
        }
        let step = solve(hessian, gradient);
        let size: f64 = step.iter().map(|s| s * s).sum::<f64>().sqrt();
        for (wi, si) in w.iter_mut().zip(&step) {
            *wi += si;
        }
        if size < 1e-10 {
            break;
        }
    }
    let bias = w.pop().unwrap_or(0.0);
    ReplyWeights {
        features: FEATURES.iter().map(|f| f.to_string()).collect(),
        weights: w.iter().map(|v| round9(*v)).collect(),
        bias: round9(bias),
        trained_on,
        dev: serde_json::Value::Null,
    }
}

/// Nine decimals: the weights file reads the same after any rebuild.
fn round9(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, pivot);
        b.swap(col, pivot);
        let p = a[col][col];
        if p.abs() < 1e-15 {
            continue;
        }
        for row in col + 1..n {
            let factor = a[row][col] / p;
            if factor == 0.0 {
                continue;
            }
            let (upper, lower) = a.split_at_mut(row);
            for (x, p) in lower[0][col..].iter_mut().zip(&upper[col][col..]) {
                *x -= factor * p;
            }
            b[row] -= factor * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let rest: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = if a[row][row].abs() < 1e-15 { 0.0 } else { (b[row] - rest) / a[row][row] };
    }
    x
}

/// How `weights` do on `questions`: the pairs' log loss and, for each threshold, how
/// many of the questions people answered within [`LOOK_AFTER_SECONDS`] it finds
/// answered by then, and how many hanging questions it leaves open then.
pub fn figures(weights: &ReplyWeights, questions: &[QuestionPairs]) -> serde_json::Value {
    let mut loss = 0.0;
    let mut pairs = 0usize;
    for (_, f, y) in questions.iter().flat_map(|q| q.pairs.iter()) {
        let p = weights.probability(f).clamp(1e-9, 1.0 - 1e-9);
        loss -= if *y { p.ln() } else { (1.0 - p).ln() };
        pairs += 1;
    }
    let best_by_look = |q: &QuestionPairs| {
        q.pairs
            .iter()
            .filter(|(dt, _, _)| *dt <= LOOK_AFTER_SECONDS)
            .map(|(_, f, _)| weights.probability(f))
            .fold(0.0_f64, f64::max)
    };
    let answered_by_look: Vec<f64> = questions
        .iter()
        .filter(|q| matches!(q.fate, Fate::Answered { first_reply_after } if first_reply_after <= LOOK_AFTER_SECONDS))
        .map(best_by_look)
        .collect();
    let hanging: Vec<f64> = questions.iter().filter(|q| q.fate == Fate::Hanging).map(best_by_look).collect();
    let by_threshold: Vec<serde_json::Value> = THRESHOLDS
        .iter()
        .map(|&t| {
            let found = answered_by_look.iter().filter(|p| **p >= t).count();
            let left_open = hanging.iter().filter(|p| **p < t).count();
            json!({
                "threshold": t,
                "answered_found": format!("{found}/{}", answered_by_look.len()),
                "hanging_left_open": format!("{left_open}/{}", hanging.len()),
            })
        })
        .collect();
    json!({
        "pairs": pairs,
        "log_loss": round9(loss / pairs.max(1) as f64),
        "look_after_seconds": LOOK_AFTER_SECONDS,
        "by_threshold": by_threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev_logs(names: &[&str]) -> Vec<IrcLog> {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../eval/irc/dev"));
        names.iter().map(|n| super::super::read_log(dir, n).expect("a vendored log")).collect()
    }

    /// The committed weights' figures on the vendored dev logs, as the training command
    /// wrote them, come out again: the weights file and the code that reads the logs
    /// agree.
    #[test]
    fn the_committed_weights_reproduce_their_dev_figures() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../eval/irc/dev"));
        let logs = super::super::read_logs(dir).expect("the vendored dev logs");
        let questions: Vec<QuestionPairs> = logs.iter().flat_map(question_pairs).collect();
        let model = &*crate::judge::open_question::reply_model::REPLY_MODEL;
        assert_eq!(figures(model, &questions), model.dev);
    }

    /// Training is deterministic: the same logs give the same weights, and they learn
    /// that a line calling the asker answers more often than one calling someone else.
    #[test]
    fn training_on_a_small_fixture_is_reproducible_and_learns_the_obvious() {
        let logs = dev_logs(&["2004-11-15_03", "2005-06-27_12"]);
        let questions: Vec<QuestionPairs> = logs.iter().flat_map(question_pairs).collect();
        assert!(questions.iter().any(|q| q.pairs.iter().any(|(_, _, linked)| *linked)));
        let first = fit(&questions, "fixture".into());
        let second = fit(&questions, "fixture".into());
        assert_eq!(first.weights, second.weights);
        assert_eq!(first.bias, second.bias);
        let weight = |name: &str| first.weights[FEATURES.iter().position(|f| *f == name).unwrap()];
        assert!(weight("names_asker_anywhere") > weight("calls_someone_else"), "{first:?}");
        let learned = figures(&first, &questions)["log_loss"].as_f64().unwrap();
        let untrained = ReplyWeights { weights: vec![0.0; FEATURES.len()], bias: 0.0, ..first.clone() };
        assert!(learned < figures(&untrained, &questions)["log_loss"].as_f64().unwrap());
    }

    /// The committed answered model's figures on the vendored dev logs, as the
    /// training command wrote them, come out again (with the committed reply model
    /// scoring the lines, as it did there).
    #[test]
    fn the_committed_answered_model_reproduces_its_dev_figures() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../eval/irc/dev"));
        let logs = super::super::read_logs(dir).expect("the vendored dev logs");
        let reply = &*crate::judge::open_question::reply_model::REPLY_MODEL;
        let questions: Vec<QuestionLooks> = logs.iter().flat_map(|log| question_looks(log, reply)).collect();
        let model = &*crate::judge::open_question::answered_model::ANSWERED_MODEL;
        assert_eq!(answered_figures(model, &questions), model.dev);
    }

    /// The answered model's training is deterministic and learns: the same looks give
    /// the same trees, which separate the fixture's answered questions from its hanging
    /// ones better than the base rate alone.
    #[test]
    fn training_the_answered_model_on_a_small_fixture_is_reproducible_and_learns() {
        let logs = dev_logs(&["2004-11-15_03", "2005-06-27_12"]);
        let reply = &*crate::judge::open_question::reply_model::REPLY_MODEL;
        let questions: Vec<QuestionLooks> = logs.iter().flat_map(|log| question_looks(log, reply)).collect();
        assert!(questions.iter().any(|q| q.fate == Fate::Hanging) && questions.iter().any(|q| q.fate != Fate::Hanging));
        assert!(questions.iter().all(|q| q.looks.len() == LOOKS.len()));
        let first = fit_answered(&questions, "fixture".into());
        let second = fit_answered(&questions, "fixture".into());
        assert_eq!(first.trees, second.trees);
        assert_eq!(first.base, second.base);
        let loss = |model: &AnsweredModel| {
            let rows = questions.iter().flat_map(|q| q.looks.iter().map(move |(_, f)| (f, q.fate != Fate::Hanging)));
            rows.map(|(f, y)| {
                let p = model.probability(f).clamp(1e-9, 1.0 - 1e-9);
                if y { -p.ln() } else { -(1.0 - p).ln() }
            })
            .sum::<f64>()
        };
        let base_only = AnsweredModel { trees: Vec::new(), ..first.clone() };
        assert!(loss(&first) < 0.8 * loss(&base_only), "{} vs {}", loss(&first), loss(&base_only));
    }

    #[test]
    fn gaussian_elimination_solves_a_small_system() {
        let x = solve(vec![vec![2.0, 1.0], vec![1.0, 3.0]], vec![3.0, 5.0]);
        assert!((x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12, "{x:?}");
    }
}
