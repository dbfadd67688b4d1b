//! Training the reply model (`kuuki train-reply-model`): every (question, later line by
//! someone else) pair of the annotated logs, its features as the open-question tracker
//! computes them ([`QuestionView::reply_features`]), labelled by the corpus' human reply
//! links; a logistic regression fitted by Newton's method (deterministic: the same logs
//! give the same weights to the last digit). Its figures on other logs tell how the
//! model, and a threshold on it, separate the questions people answered from the ones
//! they left hanging at the moment a pick-up looks.

use std::sync::Arc;

use serde_json::json;

use super::corpus::IrcLog;
use super::questions::{Fate, classify};
use super::transcript::{ANNOTATED_FROM, CHANNEL, CONTEXT_FROM, REPLAYED_UNTIL, Said, build_transcript};
use crate::domain::{Author, BotIdentity, ChannelId, Message, Timestamp, Ts, UserId};
use crate::judge::naming::KnownPeople;
use crate::judge::open_question::QuestionView;
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

/// The questions of `log` (lines with `?` from the annotated part on, answered or
/// hanging as the measure decides) with their pairs.
pub fn question_pairs(log: &IrcLog) -> Vec<QuestionPairs> {
    let transcript = build_transcript(&log.lines, CONTEXT_FROM, REPLAYED_UNTIL);
    let said = &transcript.said;
    let messages: Vec<Arc<Message>> = said.iter().map(message).collect();
    let bot = BotIdentity::new(UserId("UKUUKI".into()), "kuuki", &[]);
    let mut out = Vec::new();
    for question in classify(said, &log.replies, ANNOTATED_FROM) {
        let Some(at) = said.iter().position(|s| s.line == question.line) else { continue };
        let from = at.saturating_sub(LINES_BEFORE);
        let before: Vec<Arc<Message>> =
            messages[from..=at].iter().filter(|m| messages[at].at.seconds_since(m.at) <= 1800.0).cloned().collect();
        let after: Vec<Arc<Message>> = messages[at + 1..]
            .iter()
            .take_while(|m| m.at.seconds_since(messages[at].at) <= CANDIDATE_SECONDS)
            .cloned()
            .collect();
        let people = KnownPeople::of_messages(before.iter().chain(after.iter()));
        let view = QuestionView { question: &messages[at], before: &before, after: &after };
        let replies = log.replies.get(&question.line);
        let pairs = view
            .reply_features(&bot, &people)
            .into_iter()
            .map(|(i, features)| {
                let line = said[at + 1 + i].line;
                let linked = replies.is_some_and(|r| r.contains(&line));
                (after[i].at.seconds_since(messages[at].at), features, linked)
            })
            .collect();
        out.push(QuestionPairs { fate: question.fate, t: question.t, pairs });
    }
    out
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

    #[test]
    fn gaussian_elimination_solves_a_small_system() {
        let x = solve(vec![vec![2.0, 1.0], vec![1.0, 3.0]], vec![3.0, 5.0]);
        assert!((x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12, "{x:?}");
    }
}
