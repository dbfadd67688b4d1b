//! Which question each of kuuki's posts was about, as the reference measure attributes
//! them: from the decision log's `respond` lines, by the judged message's time.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::questions::Question;
use super::transcript::Said;

/// A post is about its judged turn's author's latest question at most this long before
/// the judged message (seconds).
pub const ATTRIBUTION_WINDOW_SECONDS: f64 = 180.0;

/// What kuuki did in a replay: the judged message's time of each post (not reactions),
/// and how many reactions it made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Responses {
    pub post_msg_t: Vec<f64>,
    pub reactions: u64,
}

/// The posts and reactions of a decision log. Every `respond` line counts, shadowed or
/// not, as in the reference; a post is dated by its `msg_t`, else its `t`.
pub fn responses(log: &[Value]) -> Responses {
    let mut out = Responses::default();
    for line in log.iter().filter(|l| l["kind"] == "respond") {
        if line["type"] == "react_only" {
            out.reactions += 1;
        } else if let Some(msg_t) = line.get("msg_t").unwrap_or(&line["t"]).as_f64() {
            out.post_msg_t.push(msg_t);
        }
    }
    out
}

/// The lines of the questions posts were about: for each post, the judged message's
/// author's latest question at or before it, within [`ATTRIBUTION_WINDOW_SECONDS`]. A post
/// about no replayed message (kuuki's own) or by nobody's question is about none.
pub fn attribute(post_msg_t: &[f64], said: &[Said], questions: &[Question]) -> BTreeSet<usize> {
    // Transcript times are unique (strictly increasing), so a time names a message.
    let author_at: HashMap<u64, &str> = said.iter().map(|s| (s.t.to_bits(), s.nick.as_str())).collect();
    let mut by_time: Vec<&Question> = questions.iter().collect();
    by_time.sort_by(|a, b| a.t.total_cmp(&b.t));
    let mut hit = BTreeSet::new();
    for &msg_t in post_msg_t {
        let Some(author) = author_at.get(&msg_t.to_bits()) else { continue };
        let latest = by_time
            .iter()
            .rev()
            .find(|q| q.nick == *author && msg_t - ATTRIBUTION_WINDOW_SECONDS <= q.t && q.t <= msg_t);
        if let Some(question) = latest {
            hit.insert(question.line);
        }
    }
    hit
}

/// What kuuki last decided about each of `questions` (by the judged message's time):
/// `stage: reason` of its last `judge`, `dropped` or `respond` line, ids and figures
/// folded to `…` so the same reason counts once; "nothing logged" when none. Counted by
/// reason, for `kuuki eval irc --why`.
pub fn last_decisions(log: &[Value], questions: &[&Question]) -> BTreeMap<String, u64> {
    let mut last: HashMap<u64, &Value> = HashMap::new();
    for line in log.iter().filter(|l| matches!(l["kind"].as_str(), Some("judge" | "dropped" | "respond"))) {
        if let Some(msg_t) = line["msg_t"].as_f64() {
            last.insert(msg_t.to_bits(), line);
        }
    }
    let mut counts = BTreeMap::new();
    for question in questions {
        let reason = match last.get(&question.t.to_bits()) {
            None => "nothing logged".to_owned(),
            Some(line) if line["kind"] == "respond" => format!("respond: {}", line["mode"].as_str().unwrap_or("?")),
            Some(line) => {
                let stage = line["stage"].as_str().unwrap_or(line["kind"].as_str().unwrap_or("?"));
                format!("{stage}: {}", fold_ids(line["reason"].as_str().unwrap_or("")))
            }
        };
        *counts.entry(reason).or_default() += 1;
    }
    counts
}

/// `reason` with every run of three or more digits and dots (a message id, a figure)
/// and every percentage's digits as `…`.
fn fold_ids(reason: &str) -> String {
    let folded = fold_long_numbers(reason);
    let mut out = String::with_capacity(folded.len());
    for (i, piece) in folded.split(" %").enumerate() {
        if i > 0 {
            // The digits before " %" are a figure.
            let figure = out.len() - out.trim_end_matches(|c: char| c.is_ascii_digit()).len();
            if figure > 0 {
                out.truncate(out.len() - figure);
                out.push('…');
            }
            out.push_str(" %");
        }
        out.push_str(piece);
    }
    out
}

fn fold_long_numbers(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut run = String::new();
    for c in reason.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (c == '.' && !run.is_empty()) {
            run.push(c);
            continue;
        }
        if run.len() >= 3 {
            out.push('…');
        } else {
            out.push_str(&run);
        }
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::questions::Fate;
    use super::*;

    fn said(line: usize, t: f64, nick: &str) -> Said {
        Said { line, t, nick: nick.into(), text: "x?".into() }
    }

    fn question(line: usize, t: f64, nick: &str) -> Question {
        Question { line, t, nick: nick.into(), text: "x?".into(), fate: Fate::Hanging }
    }

    #[test]
    fn a_post_goes_to_its_judged_authors_latest_question_in_the_window() {
        let lines = [
            said(1, 0.0, "a"),
            said(2, 10.0, "a"),
            said(3, 20.0, "b"),
            said(4, 30.0, "a"),
            said(5, 190.0, "a"),
            said(6, 300.0, "a"),
            said(7, 400.0, "c"),
        ];
        let questions = [question(1, 0.0, "a"), question(2, 10.0, "a"), question(3, 20.0, "b")];
        // Judged at a's follow-up (30 s): a's latest question, not b's later one.
        assert_eq!(attribute(&[30.0], &lines, &questions), BTreeSet::from([2]));
        // At the question itself; at b's; 180 s after a's question exactly.
        assert_eq!(attribute(&[10.0, 20.0, 190.0], &lines, &questions), BTreeSet::from([2, 3]));
        // Too late (a's line 290 s after its question), by a person with no question, at
        // no message's time (kuuki's own post), before any question.
        assert_eq!(attribute(&[300.0, 400.0, 30.5], &lines, &questions), BTreeSet::new());
        assert_eq!(attribute(&[0.0], &lines, &questions[1..]), BTreeSet::new(), "a later question is no answer");
    }

    #[test]
    fn reads_posts_and_reactions_from_the_log() {
        let log = [
            json!({"t": 5.0, "kind": "judge", "msg_t": 1.0}),
            json!({"t": 6.0, "kind": "respond", "msg_t": 1.0, "type": "full_response"}),
            json!({"t": 7.0, "kind": "respond", "msg_t": 2.0, "type": "short_ack", "shadow": true}),
            json!({"t": 8.0, "kind": "respond", "msg_t": 3.0, "type": "react_only"}),
            json!({"t": 9.0, "kind": "respond", "type": "full_response"}),
        ];
        assert_eq!(responses(&log), Responses { post_msg_t: vec![1.0, 2.0, 9.0], reactions: 1 });
    }

    #[test]
    fn each_hanging_question_counts_under_what_kuuki_last_decided_about_it() {
        let question = |t: f64| Question { line: 1000, t, nick: "ana".into(), text: "x?".into(), fate: Fate::Hanging };
        let (a, b, c, d) = (question(10.0), question(20.0), question(30.0), question(40.0));
        let log = vec![
            json!({"kind": "judge", "msg_t": 10.0, "reason": "the score stayed below the threshold"}),
            json!({"kind": "judge", "msg_t": 20.0, "decision": "wait", "reason": "the question has stood 30 s"}),
            json!({"kind": "dropped", "msg_t": 20.0, "stage": "pick_up",
                   "reason": "the question looks answered by message 1767603738.000000 (reply model: 98 %)"}),
            json!({"kind": "respond", "msg_t": 30.0, "mode": "pick_up", "type": "full_response"}),
            json!({"kind": "superseded", "msg_t": 40.0}),
        ];
        let counts = last_decisions(&log, &[&a, &b, &c, &d]);
        let expected: BTreeMap<String, u64> = [
            ("judge: the score stayed below the threshold", 1),
            ("pick_up: the question looks answered by message … (reply model: … %)", 1),
            ("respond: pick_up", 1),
            ("nothing logged", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(counts, expected);
    }
}
