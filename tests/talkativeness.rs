//! Adaptive talkativeness (docs/design.md §7.6) as a user meets it: transcripts with
//! reactions and replies over days in, the decision log's posts and `feedback` lines out.

use kuuki_e2e::{Log, Run};
use serde_json::Value;

/// The LLM judge says yes to every question and no to the rest; the writer answers.
const JUDGE_QUESTIONS: &str = r#"{"role": "judge", "match": "?", "reply": {"should_respond": true, "reason": "an open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "judge", "reply": {"should_respond": false, "reason": "chatter", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "I think the runbook covers that: step 3.", "repeat": true}"#;

const SETTINGS: &[(&str, &str)] = &[("REFLECTION_ENABLED", "false")];

const DAY: u64 = 86_400;
const DAYS: u64 = 5;
const QUESTIONS_A_DAY: u64 = 8;

/// How a channel takes kuuki's unasked answers.
#[derive(Clone, Copy)]
enum Room {
    /// A 👎 on kuuki's latest post, and people talk on past it.
    TurnsAway,
    /// A 👍 and "thanks kuuki!".
    Welcomes,
}

/// Five working days in `channel`: eight questions a day nobody answers, an hour apart,
/// each followed by the room's response to whatever kuuki said last; a mention at the
/// end of each day.
fn week(channel: &str, room: Room) -> Vec<(u64, String)> {
    let mut lines = Vec::new();
    for day in 0..DAYS {
        for q in 0..QUESTIONS_A_DAY {
            let t = day * DAY + q * 3600;
            let ask = format!(
                r#"{{"t": {t}, "channel": "{channel}", "user": "alice", "text": "does anyone know where the day {day} report {q} lives?"}}"#
            );
            lines.push((t, ask));
            match room {
                Room::TurnsAway => {
                    lines.push((
                        t + 200,
                        format!(r#"{{"t": {}, "channel": "{channel}", "user": "dana", "reaction": "👎"}}"#, t + 200),
                    ));
                    for (i, text) in ["ok", "moving on", "back to the release"].iter().enumerate() {
                        let at = t + 250 + 50 * i as u64;
                        lines.push((
                            at,
                            format!(r#"{{"t": {at}, "channel": "{channel}", "user": "bob", "text": "{text}"}}"#),
                        ));
                    }
                }
                Room::Welcomes => {
                    lines.push((
                        t + 200,
                        format!(r#"{{"t": {}, "channel": "{channel}", "user": "erin", "reaction": "👍"}}"#, t + 200),
                    ));
                    lines.push((
                        t + 250,
                        format!(
                            r#"{{"t": {}, "channel": "{channel}", "user": "erin", "text": "thanks kuuki!"}}"#,
                            t + 250
                        ),
                    ));
                }
            }
        }
        let t = day * DAY + QUESTIONS_A_DAY * 3600;
        lines.push((
            t,
            format!(r#"{{"t": {t}, "channel": "{channel}", "user": "carol", "text": "<@bot> can you sum up today"}}"#),
        ));
    }
    lines
}

fn transcript(parts: &[Vec<(u64, String)>]) -> String {
    let mut all: Vec<&(u64, String)> = parts.iter().flatten().collect();
    all.sort_by_key(|(t, _)| *t);
    all.iter().map(|(_, line)| line.as_str()).collect::<Vec<_>>().join("\n")
}

/// Unasked posts (ambient answers and pick-ups, with words) in `channel`, per day.
fn unasked_posts_by_day(log: &Log, channel: &str) -> Vec<usize> {
    let mut days = vec![0; DAYS as usize];
    for r in log.kind("respond") {
        if r["channel"] == channel && (r["mode"] == "ambient" || r["mode"] == "pick_up") && r["type"] != "react_only" {
            days[(r["t"].as_f64().unwrap() as u64 / DAY) as usize] += 1;
        }
    }
    days
}

fn mentions_answered(log: &Log, channel: &str) -> usize {
    log.kind("respond").iter().filter(|r| r["channel"] == channel && r["mode"] == "direct").count()
}

#[test]
fn a_channel_that_turns_kuuki_down_hears_less_of_it_and_a_welcoming_one_keeps_it() {
    let text = transcript(&[week("cold", Room::TurnsAway), week("warm", Room::Welcomes)]);
    let log = Run::new(&text).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    let cold = unasked_posts_by_day(&log, "cold");
    let warm = unasked_posts_by_day(&log, "warm");
    let asked = (DAYS * QUESTIONS_A_DAY) as usize;
    let (cold_total, warm_total): (usize, usize) = (cold.iter().sum(), warm.iter().sum());
    assert!(cold[0] >= 2, "kuuki answers unasked at first: {cold:?}");
    let last = *cold.last().unwrap();
    assert!(last * 2 <= QUESTIONS_A_DAY as usize, "at most half the unasked answers by the end of the week: {cold:?}");
    assert!(cold_total * 2 <= asked, "{cold:?}");
    assert!(warm_total * 5 >= asked * 4, "a welcoming channel keeps at least 80 %: {warm:?}");
    assert!(*warm.last().unwrap() * 5 >= QUESTIONS_A_DAY as usize * 4, "{warm:?}");
    // Mentions are direct: answered every day in both.
    assert_eq!(mentions_answered(&log, "cold"), DAYS as usize);
    assert!(mentions_answered(&log, "warm") >= DAYS as usize, "{warm:?}");
    // The offset the judge added, as the log shows it, stays within its bounds.
    let offsets: Vec<f64> = log.kind("feedback").iter().map(|f| f["offset"].as_f64().unwrap()).collect();
    assert!(offsets.iter().all(|o| (-40.0..=20.0).contains(o)), "{offsets:?}");
    let cold_scores: Vec<i64> = log
        .kind("judge")
        .iter()
        .filter(|j| j["channel"] == "cold")
        .filter_map(|j| j["breakdown"]["talkativeness"].as_i64())
        .collect();
    assert!(cold_scores.iter().any(|p| *p < -20), "the offset reaches the judge: {cold_scores:?}");
}

#[test]
fn without_the_setting_nothing_is_learned() {
    let text = transcript(&[week("cold", Room::TurnsAway)]);
    let settings = [("REFLECTION_ENABLED", "false"), ("TALKATIVENESS_ENABLED", "false")];
    let log = Run::new(&text).script(JUDGE_QUESTIONS).settings(&settings).log();
    assert!(log.kind("feedback").is_empty());
    assert_eq!(unasked_posts_by_day(&log, "cold"), vec![QUESTIONS_A_DAY as usize; DAYS as usize]);
}

fn feedback(log: &Log) -> Vec<(String, f64, bool)> {
    log.kind("feedback")
        .iter()
        .map(|f| {
            (
                f["signal"].as_str().unwrap().to_owned(),
                f["weight"].as_f64().unwrap(),
                f["undone"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// kuuki answers the question at t=0 unasked (at 120 s, once it has stood).
const QUESTION: &str = r#"{"t": 0, "user": "alice", "text": "does anyone know where the runbook lives?"}"#;

#[test]
fn a_redelivered_reaction_counts_once_and_a_removed_one_is_undone() {
    let text = format!(
        "{QUESTION}\n{}\n{}\n{}\n{}",
        r#"{"t": 200, "user": "dana", "reaction": "👎"}"#,
        r#"{"t": 210, "user": "dana", "reaction": "👎"}"#,
        r#"{"t": 220, "user": "dana", "reaction": "👎", "removed": true}"#,
        r#"{"t": 230, "user": "erin", "reaction": "🎉"}"#,
    );
    let log = Run::new(&text).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    assert_eq!(log.kind("respond").len(), 1, "{log:?}");
    assert_eq!(
        feedback(&log),
        vec![
            ("negative_reaction".into(), -6.0, false),
            ("negative_reaction".into(), 6.0, true),
            ("positive_reaction".into(), 3.0, false),
        ],
        "{log:?}"
    );
    let last = log.kind("feedback").last().copied().unwrap();
    assert_eq!(last["offset"], 3.0);
    assert_eq!(last["user"], "erin");
    let post_t = last["post_t"].as_f64().unwrap();
    assert!((120.0..121.0).contains(&post_t), "on kuuki's post: {post_t}");
}

#[test]
fn a_post_people_talk_past_is_ignored_and_one_they_reply_to_is_engaged() {
    let ignored = format!(
        "{QUESTION}\n{}\n{}\n{}",
        r#"{"t": 200, "user": "bob", "text": "ok"}"#,
        r#"{"t": 250, "user": "carol", "text": "lunch at noon"}"#,
        r#"{"t": 300, "user": "bob", "text": "sounds good"}"#,
    );
    let log = Run::new(&ignored).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    assert_eq!(feedback(&log), vec![("ignored".into(), -6.0, false)], "{log:?}");
    // Two messages are not yet passing it by.
    let two = ignored.lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(feedback(&Run::new(&two).script(JUDGE_QUESTIONS).settings(SETTINGS).log()).is_empty());
    // A reaction in time means someone noticed it.
    let noticed = format!("{ignored}\n{}", r#"{"t": 400, "user": "erin", "reaction": "eyes"}"#);
    let log = Run::new(&noticed).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    assert_eq!(
        feedback(&log),
        vec![("ignored".into(), -6.0, false), ("other_reaction".into(), 0.0, false), ("ignored".into(), 6.0, true)],
        "{log:?}"
    );

    let replied = format!(
        "{QUESTION}\n{}\n{}",
        r#"{"t": 200, "user": "alice", "text": "that was it, found it", "thread": "r"}"#,
        r#"{"t": 200, "user": "bob", "text": "nice"}"#,
    );
    let log = Run::new(&replied).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    let signals: Vec<String> = feedback(&log).into_iter().map(|(s, _, _)| s).collect();
    assert!(!signals.contains(&"ignored".to_owned()), "{log:?}");
}

#[test]
fn being_told_to_hush_turns_kuuki_down_and_thanks_welcome_it_while_mentions_are_answered() {
    let text = format!(
        "{QUESTION}\n{}\n{}",
        r#"{"t": 200, "user": "bob", "text": "shh kuuki"}"#,
        // Past the ten minutes in which a mention takes the post up.
        r#"{"t": 900, "user": "alice", "text": "<@bot> where is the runbook"}"#,
    );
    let log = Run::new(&text).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    assert_eq!(feedback(&log), vec![("hushed".into(), -15.0, false)], "{log:?}");
    let hush_answer: Vec<&Value> = log.about("respond", 200.0);
    assert_eq!(hush_answer[0]["type"], "react_only", "a hush is answered with an emoji: {log:?}");
    assert_eq!(log.about("respond", 900.0)[0]["type"], "full_response", "a mention still is");

    let thanks = format!("{QUESTION}\n{}", r#"{"t": 200, "user": "alice", "text": "thanks kuuki!"}"#);
    let log = Run::new(&thanks).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    let mut signals = feedback(&log);
    signals.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(signals, vec![("engaged".into(), 4.0, false), ("thanked".into(), 4.0, false)], "{log:?}");
}

fn answers(log: &Log) -> Vec<String> {
    log.kind("command").iter().map(|c| c["answer"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn anyone_may_ask_for_quieter_or_louder_and_a_manager_may_reset() {
    let text = r#"{"t": 0, "user": "alice", "command": "/kuuki quieter"}
{"t": 10, "user": "alice", "command": "/kuuki quieter"}
{"t": 20, "user": "bob", "command": "/kuuki quieter"}
{"t": 30, "user": "dana", "command": "/kuuki quieter"}
{"t": 40, "user": "erin", "command": "/kuuki louder"}
{"t": 50, "user": "erin", "command": "/kuuki status"}
{"t": 100, "user": "alice", "text": "does anyone know where the runbook lives?"}
{"t": 400, "user": "alice", "text": "<@bot> where is the runbook"}
{"t": 500, "user": "bob", "command": "/kuuki talkativeness reset"}
{"t": 510, "user": "carol", "command": "/kuuki talkativeness reset"}
{"t": 520, "user": "carol", "command": "/kuuki talkativeness"}"#;
    let log = Run::new(text).script(JUDGE_QUESTIONS).settings(&[("COMMAND_MANAGERS", "carol")]).log();
    let answers = answers(&log);
    assert!(answers[0].contains("less often") && answers[0].contains("now -10"), "{answers:?}");
    assert!(answers[1].contains("Counted already today"), "one person's repeat counts once: {answers:?}");
    assert!(answers[4].contains("more often") && answers[4].contains("now -20"), "{answers:?}");
    let status = &answers[5];
    assert!(status.contains("Talkativeness here: -20 added to unasked scores"), "{status}");
    assert!(status.contains("- louder (+10, ") && status.contains("- quieter (-10, "), "{status}");
    // -20: the open question (45) drops to 25, still the LLM's; the mention is answered.
    let judged = log.about("judge", 100.0);
    let last = judged.last().unwrap();
    assert_eq!(last["breakdown"]["talkativeness"], -20, "{log:?}");
    assert_eq!(last["score"], 25);
    assert_eq!(log.about("respond", 400.0)[0]["mode"], "direct");
    assert!(!answers[6].contains("reset here"), "bob manages nothing: {answers:?}");
    // kuuki answered the question at 100 (25 is the LLM's, which said yes) and alice took
    // the answer up with her mention: engaged, +4.
    assert!(answers[7].contains("Talkativeness reset here (it was -16, now 0)"), "{answers:?}");
    assert!(
        answers[8].contains("Talkativeness here: +0") && answers[8].ends_with("- reset (+16, 10 s ago)"),
        "{answers:?}"
    );
    let signals: Vec<String> = feedback(&log).into_iter().map(|(s, _, _)| s).collect();
    assert_eq!(signals, ["quieter", "quieter", "quieter", "louder", "engaged", "reset"], "{log:?}");
}

#[test]
fn three_people_asking_for_quiet_keep_kuuki_out_of_an_open_question() {
    let text = r#"{"t": 0, "user": "alice", "command": "/kuuki quieter"}
{"t": 10, "user": "bob", "command": "/kuuki quieter"}
{"t": 20, "user": "dana", "command": "/kuuki quieter"}
{"t": 100, "user": "alice", "text": "does anyone know where the runbook lives?"}
{"t": 400, "user": "alice", "text": "<@bot> where is the runbook"}"#;
    let log = Run::new(text).script(JUDGE_QUESTIONS).log();
    let last = *log.about("judge", 100.0).last().unwrap();
    assert_eq!(last["breakdown"]["talkativeness"], -30, "{log:?}");
    assert_eq!(last["respond"], false, "{log:?}");
    assert!(log.about("respond", 100.0).is_empty());
    assert_eq!(log.about("respond", 400.0)[0]["mode"], "direct", "a mention is answered all the same");
    let without = Run::new(text).script(JUDGE_QUESTIONS).settings(&[("TALKATIVENESS_ENABLED", "false")]).log();
    assert_eq!(without.about("respond", 100.0).len(), 1, "answered when nothing is learned");
}

#[test]
fn a_hush_without_the_name_right_after_an_unasked_post_counts() {
    // kuuki answers in thread "q" unasked; "今はいいよ" there, without kuuki's name,
    // turns it down (and, not addressed to kuuki, is judged rather than answered).
    let text = r#"{"t": 0, "user": "alice", "text": "does anyone know where the runbook lives?", "thread": "q"}
{"t": 200, "user": "bob", "text": "今はいいよ", "thread": "q"}"#;
    let log = Run::new(text).script(JUDGE_QUESTIONS).settings(SETTINGS).log();
    assert_eq!(log.kind("respond").len(), 1, "{log:?}");
    assert_eq!(feedback(&log), vec![("hushed".into(), -15.0, false)], "{log:?}");
}
