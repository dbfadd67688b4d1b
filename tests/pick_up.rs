//! A question's pick-up (issue 34, docs/design.md §7.7) as a user meets it: a busy
//! channel's transcript in, the decision log out; a redelivered pick-up; the post in a
//! thread under the question on Slack.

use kuuki_e2e::Run;
use serde_json::Value;

/// A judge that takes up anything it is asked about, and a writer that always answers.
const YES: &str = r#"{"role": "judge", "reply": {"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "git reset --soft HEAD~1 keeps the changes staged", "repeat": true}"#;

const SETTINGS: &[(&str, &str)] = &[("JUDGE_JITTER_RATIO", "0")];

/// Two conversations by name prefix around `question` (written at 100 s), then
/// `after` lines; every line is someone else's business.
fn busy(question: &str, after: &str) -> String {
    format!(
        r#"{{"t": 40, "user": "ken", "text": "tom: did the deploy finish?"}}
{{"t": 50, "user": "tom", "text": "ken: yes, canary at 50%"}}
{{"t": 70, "user": "lena", "text": "marco: lunch at 12?"}}
{{"t": 80, "user": "marco", "text": "lena: sure"}}
{{"t": 100, "user": "priya", "text": "{question}"}}
{after}"#
    )
}

const CHATTER: &str = r#"{"t": 110, "user": "ken", "text": "tom: rolling to 100%"}
{"t": 118, "user": "lena", "text": "marco: ramen or curry?"}
{"t": 126, "user": "marco", "text": "lena: ramen"}
{"t": 135, "user": "tom", "text": "ken: 👍"}
{"t": 150, "user": "lena", "text": "marco: booked for 12"}
{"t": 170, "user": "ken", "text": "tom: error rate flat"}"#;

fn pick_up_judgment(log: &kuuki_e2e::Log, t: f64) -> Option<&Value> {
    log.about("judge", t).into_iter().find(|j| j["pick_up"] == true)
}

/// Each newer line supersedes the question's own JUDGE; its pick-up survives the
/// chatter, is judged once the question has stood two minutes, and kuuki answers in a
/// thread under it.
#[test]
fn a_question_survives_unrelated_chatter_and_is_answered_in_its_thread() {
    for question in
        ["how do I undo the last commit but keep the changes", "コミットを取り消して変更は残す方法ってどうやるんだっけ"]
    {
        let log = Run::new(&busy(question, CHATTER)).script(YES).settings(SETTINGS).log();
        assert!(!log.about("superseded", 100.0).is_empty(), "the JUDGE was superseded: {log:?}");
        let judged = pick_up_judgment(&log, 100.0).unwrap_or_else(|| panic!("picked up: {log:?}"));
        assert_eq!(judged["t"], 220.0, "at the question's wait: {judged}");
        assert_eq!(judged["breakdown"]["unanswered_question"], 25, "{judged}");
        let answers = log.about("respond", 100.0);
        assert_eq!(answers.len(), 1, "{log:?}");
        assert_eq!(answers[0]["mode"], "pick_up");
        assert!(answers[0]["thread"].is_string(), "in a thread under the question: {}", answers[0]);
    }
}

/// What closes the question ends its pick-up: an answer by name, in its thread, the
/// asker taking it back, the person it was for answering.
#[test]
fn an_answer_or_a_withdrawal_ends_the_pick_up() {
    let cases = [
        (r#"{"t": 180, "user": "tom", "text": "priya: git reset --soft HEAD~1"}"#, "by name"),
        (r#"{"t": 180, "user": "tom", "thread": "q", "text": "reset --soft"}"#, "in its thread"),
        (r#"{"t": 180, "user": "priya", "text": "nvm, found it"}"#, "took the question back"),
        (r#"{"t": 180, "user": "priya", "text": "自己解決しました"}"#, "took the question back"),
    ];
    for (line, reason) in cases {
        let mut transcript = busy("how do I undo the last commit but keep the changes", &format!("{CHATTER}\n{line}"));
        if line.contains("\"thread\": \"q\"") {
            // The question starts the thread its answer goes in.
            transcript = transcript.replace(
                r#"{"t": 100, "user": "priya", "text""#,
                r#"{"t": 100, "user": "priya", "thread": "q", "text""#,
            );
        }
        let log = Run::new(&transcript).script(YES).settings(SETTINGS).log();
        assert!(log.about("respond", 100.0).is_empty(), "{reason}: {log:?}");
        let dropped = log.about("dropped", 100.0);
        assert!(
            dropped.iter().any(|d| d["stage"] == "pick_up" && d["reason"].as_str().unwrap().contains(reason)),
            "{reason}: {log:?}"
        );
    }
}

/// The asker's second question while the first waits joins it: one pick-up, one answer.
#[test]
fn one_pick_up_per_asker_per_burst() {
    let after = r#"{"t": 110, "user": "ken", "text": "tom: rolling to 100%"}
{"t": 130, "user": "priya", "text": "or should I use git revert instead?"}
{"t": 150, "user": "lena", "text": "marco: booked for 12"}"#;
    let log = Run::new(&busy("how do I undo the last commit but keep the changes", after))
        .script(YES)
        .settings(SETTINGS)
        .log();
    let posts: Vec<_> = log.kind("respond").into_iter().filter(|r| r["mode"] == "pick_up").collect();
    assert_eq!(posts.len(), 1, "{log:?}");
    assert_eq!(posts[0]["msg_t"], 100.0, "the first question of the burst: {log:?}");
    let joined = log.about("dropped", 130.0);
    assert!(joined.iter().any(|d| d["reason"].as_str().unwrap().contains("one pick-up per asker")), "{log:?}");
}

/// `CHANNEL_MAX_UNASKED_POSTS_PER_HOUR`: questions left hanging one after another get
/// at most that many unasked posts in an hour; the next is logged as capped.
#[test]
fn unasked_posts_are_capped_per_channel_and_hour() {
    let mut lines = Vec::new();
    for i in 0..4 {
        let t = 1000 + i * 400;
        lines.push(format!(
            r#"{{"t": {t}, "user": "u{i}", "text": "how do I rotate the staging api key number {i}?"}}"#
        ));
    }
    let transcript = lines.join("\n");
    let capped = [("JUDGE_JITTER_RATIO", "0"), ("CHANNEL_MAX_UNASKED_POSTS_PER_HOUR", "2")];
    let log = Run::new(&transcript).script(YES).settings(&capped).log();
    let posts = log.kind("respond").into_iter().filter(|r| r["mode"] == "pick_up").count();
    assert_eq!(posts, 2, "{log:?}");
    let third = pick_up_judgment(&log, 1800.0).expect("the third is judged");
    assert!(third["reason"].as_str().unwrap().contains("CHANNEL_MAX_UNASKED_POSTS_PER_HOUR"), "{third}");
    assert_eq!(third["respond"], false);
    // With the default of 4, all four are answered.
    let log = Run::new(&transcript).script(YES).settings(SETTINGS).log();
    assert_eq!(log.kind("respond").into_iter().filter(|r| r["mode"] == "pick_up").count(), 4, "{log:?}");
}

/// kuuki's cooldown holds a question back, not away: it is answered once the
/// cooldown is over.
#[test]
fn a_question_waits_out_kuukis_cooldown() {
    let transcript = r#"{"t": 0, "user": "ken", "text": "kuuki, what's a canary release?"}
{"t": 5, "user": "lena", "text": "marco: lunch?"}
{"t": 10, "user": "marco", "text": "lena: sure"}
{"t": 40, "user": "priya", "text": "how do I undo the last commit but keep the changes"}
{"t": 50, "user": "lena", "text": "marco: ramen?"}"#;
    let settings = [("JUDGE_JITTER_RATIO", "0"), ("COOLDOWN_SECONDS", "300")];
    let log = Run::new(transcript).script(YES).settings(&settings).log();
    let judged: Vec<_> = log.about("judge", 40.0).into_iter().filter(|j| j["pick_up"] == true).collect();
    assert_eq!(judged[0]["decision"], "wait", "{log:?}");
    let answer = log.about("respond", 40.0);
    assert_eq!(answer.len(), 1, "{log:?}");
    assert!(answer[0]["t"].as_f64().unwrap() > 300.0, "after the cooldown: {}", answer[0]);

    // With nothing else said (kuuki's answer in a thread: its cooldown, no engagement
    // here), the question's own JUDGE sees the cooldown last past the wait, and leaves
    // the question to its pick-up rather than deciding it away.
    let alone = r#"{"t": 0, "user": "ken", "thread": "k", "text": "kuuki, what's a canary release?"}
{"t": 40, "user": "priya", "text": "how do I undo the last commit but keep the changes"}"#;
    let log = Run::new(alone).script(YES).settings(&settings).log();
    let answer = log.about("respond", 40.0);
    assert_eq!(answer.len(), 1, "{log:?}");
    assert!(answer[0]["t"].as_f64().unwrap() > 300.0, "after the cooldown: {}", answer[0]);
}

/// A follow-up question while kuuki is engaged (its answer to ken, then someone else's
/// line, then ken asks again about a keyword: engagement +40, keyword +15, score 65
/// over the threshold of 60) is answered at its judgment, not held for its pick-up
/// two minutes later.
#[test]
fn an_engaged_follow_up_is_answered_at_its_judgment() {
    for (first, follow_up) in [
        ("kuuki, what's a canary release?", "how do I roll back a canary deploy?"),
        ("くうき、カナリアリリースって何？", "カナリアの deploy ってどうやって戻すんだっけ？"),
    ] {
        let transcript = format!(
            r#"{{"t": 0, "user": "ken", "text": "{first}"}}
{{"t": 130, "user": "lena", "text": "marco: lunch?"}}
{{"t": 140, "user": "ken", "text": "{follow_up}"}}"#
        );
        let settings = [("JUDGE_JITTER_RATIO", "0"), ("JUDGE_KEYWORDS", "deploy")];
        for llm in [Some(YES), None] {
            let run = Run::new(&transcript).settings(&settings);
            let log = match llm {
                Some(script) => run.script(script).log(),
                None => run.log(),
            };
            let answers = log.about("respond", 140.0);
            assert_eq!(answers.len(), 1, "{log:?}");
            assert_eq!(answers[0]["mode"], "ambient", "{}", answers[0]);
            let at = answers[0]["t"].as_f64().unwrap();
            assert!(at < 140.0 + 120.0, "at its judgment, not its pick-up's: {}", answers[0]);
            let judged = log.about("judge", 140.0);
            assert!(judged.iter().all(|j| j["decision"] != "wait"), "{judged:?}");
        }
    }
}

/// A pick-up delivered twice (SQS redelivery, a crash after the judgment) judges and
/// answers once.
#[tokio::test]
async fn a_redelivered_pick_up_judges_and_answers_once() {
    use kuuki::domain::{EventKind, Job};
    use kuuki::ingest::Incoming;
    use kuuki_e2e::harness::Harness;
    let llm: std::sync::Arc<dyn kuuki::ports::Llm> =
        std::sync::Arc::new(kuuki::adapters::llm::ScriptedLlm::parse(YES).unwrap());
    let h = Harness::with_llm(SETTINGS, Some(llm));
    let question = h.message(100.0, "priya", "how do I undo the last commit but keep the changes", None);
    h.ingest(Incoming::Message(question.clone())).await;
    h.run_until(300.0).await;
    let job = Job::PickUp { thread: question.thread_key(), ts: question.ts.clone() };
    kuuki::worker::run_job(&h.deps, &job).await.unwrap();
    h.run_until(400.0).await;
    let events = h.events();
    let judged = events.iter().filter(|e| matches!(e.kind, EventKind::Judge { pick_up: true, .. })).count();
    let answered = events.iter().filter(|e| matches!(e.kind, EventKind::Respond { .. })).count();
    assert_eq!((judged, answered), (1, 1), "{events:#?}");
    let posts =
        h.chat.calls().into_iter().filter(|c| matches!(c, kuuki::adapters::memory::ChatCall::Post { .. })).count();
    assert_eq!(posts, 1);
}

/// On Slack the answer goes in a thread under the question (`thread_ts`).
#[tokio::test]
async fn on_slack_the_answer_opens_a_thread_under_the_question() {
    use kuuki_e2e::slack_world::{SlackWorld, message};
    let llm: std::sync::Arc<dyn kuuki::ports::Llm> =
        std::sync::Arc::new(kuuki::adapters::llm::ScriptedLlm::parse(YES).unwrap());
    let w = SlackWorld::start_with(SETTINGS, true, Some(llm)).await;
    let asked = w.ts(0, 1);
    w.send_event(message("C0GENERAL", "UPRIYA", "how do I undo the last commit but keep the changes", &asked), &[])
        .await;
    w.send_event(message("C0GENERAL", "UKEN", "<@UTOM> rolling to 100%", &w.ts(10, 1)), &[]).await;
    w.run_for(200.0).await;
    let posts: Vec<Value> = w
        .slack_api
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.url.path() == "/chat.postMessage")
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["thread_ts"], asked.as_str(), "{}", posts[0]);
}

// Issue 44's cases the issue-34 guesses got wrong, in English and Japanese: a name
// call about something else; and with the answered model (`REPLY_MODEL_THRESHOLD`, a
// help channel's setting), a line sharing the question's words in a busy channel, and
// the answer it does see.

/// As [`YES`], answering the nginx question.
const YES_NGINX: &str = r#"{"role": "judge", "reply": {"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "they are under /var/log/nginx", "repeat": true}"#;

/// A help channel's settings (docs/judgment.md): the answered model, and a pick-up
/// that looks after three minutes.
const HELP_CHANNEL: &[(&str, &str)] =
    &[("JUDGE_JITTER_RATIO", "0"), ("REPLY_MODEL_THRESHOLD", "0.25"), ("UNANSWERED_QUESTION_WAIT_SECONDS", "180")];

const NGINX_EN: &str = "where are the nginx logs kept on the staging box?";
const NGINX_JA: &str = "ステージングのnginxのログってどこにありましたっけ？";

fn pick_up_post(log: &kuuki_e2e::Log, t: f64) -> Option<&Value> {
    log.about("respond", t).into_iter().find(|r| r["mode"] == "pick_up")
}

/// ken and tom talk about a deploy; priya asks `question` at 30 s; then `middle`, and a
/// last line at 400 s.
fn amid_deploy_talk(question: &str, middle: &str) -> String {
    format!(
        r#"{{"t": 0, "user": "ken", "text": "tom: did the deploy finish?"}}
{{"t": 10, "user": "tom", "text": "ken: canary at 50%"}}
{{"t": 30, "user": "priya", "text": "{question}"}}
{middle}
{{"t": 400, "user": "ken", "text": "tom: error rate flat"}}"#
    )
}

/// A line that calls the asker about a meeting right after the question asks them
/// something else: the question stays open.
#[test]
fn a_name_call_about_something_else_leaves_it_open() {
    let cases = [(NGINX_EN, "priya, are you joining the 3pm sync?"), (NGINX_JA, "priyaさん、15時の定例出ます？")];
    for (question, call) in cases {
        let transcript = amid_deploy_talk(
            question,
            &format!(
                r#"{{"t": 45, "user": "marco", "text": "{call}"}}
{{"t": 70, "user": "ken", "text": "tom: rolling to 100%"}}
{{"t": 90, "user": "tom", "text": "ken: 👍"}}"#
            ),
        );
        let log = Run::new(&transcript).script(YES_NGINX).settings(SETTINGS).log();
        assert!(pick_up_post(&log, 30.0).is_some(), "{call}: picked up: {log:?}");
    }
}

/// Three conversations and, at 65 s, someone's unaddressed `remark` after `question`
/// (at 30 s); nobody calls the asker.
fn busy_help_channel(question: &str, remark: &str) -> String {
    format!(
        r#"{{"t": 0, "user": "ken", "text": "tom: did the deploy finish?"}}
{{"t": 10, "user": "tom", "text": "ken: canary at 50%"}}
{{"t": 20, "user": "lena", "text": "marco: lunch at 12?"}}
{{"t": 25, "user": "marco", "text": "lena: sure"}}
{{"t": 30, "user": "priya", "text": "{question}"}}
{{"t": 40, "user": "ken", "text": "tom: rolling to 100%"}}
{{"t": 48, "user": "lena", "text": "marco: ramen or curry?"}}
{{"t": 56, "user": "marco", "text": "lena: ramen"}}
{{"t": 65, "user": "dee", "text": "{remark}"}}
{{"t": 80, "user": "lena", "text": "marco: booked for 12"}}
{{"t": 95, "user": "ken", "text": "tom: error rate flat"}}
{{"t": 110, "user": "sam", "text": "dee: did you see the new dashboards?"}}
{{"t": 125, "user": "dee", "text": "sam: yes, nice"}}
{{"t": 140, "user": "ken", "text": "tom: closing the deploy ticket"}}
{{"t": 400, "user": "ken", "text": "tom: all good"}}"#
    )
}

const REMARKS: [(&str, &str); 2] =
    [(NGINX_EN, "the staging box is slow again today"), (NGINX_JA, "今日もステージング遅いなあ")];

/// Someone's unaddressed remark sharing the question's words: the rules take it for
/// the answer; the answered model, reading that nobody called or answered the asker
/// while the channel talked on, leaves the question open.
#[test]
fn in_a_busy_help_channel_a_line_sharing_its_words_is_no_answer() {
    for (question, remark) in REMARKS {
        let transcript = busy_help_channel(question, remark);
        let rules = Run::new(&transcript).script(YES_NGINX).settings(SETTINGS).log();
        assert!(pick_up_post(&rules, 30.0).is_none(), "the rules' shared-words guess: {rules:?}");
        let log = Run::new(&transcript).script(YES_NGINX).settings(HELP_CHANNEL).log();
        let post = pick_up_post(&log, 30.0).unwrap_or_else(|| panic!("{remark}: picked up: {log:?}"));
        assert_eq!(post["t"], 210.0, "at the help channel's wait: {post}");
    }
}

/// With the answered model on, the judge is shown the lines that may answer the open
/// question and says whether one does (`already_answered`): then kuuki stays out,
/// logging the lines' ids.
#[test]
fn the_judge_may_find_a_picked_up_question_already_answered() {
    const ANSWERED: &str = r#"{"role": "judge", "reply": {"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active", "already_answered": true}, "repeat": true}
{"role": "generate", "reply": "they are under /var/log/nginx", "repeat": true}"#;
    for (question, remark) in REMARKS {
        let log = Run::new(&busy_help_channel(question, remark)).script(ANSWERED).settings(HELP_CHANNEL).log();
        assert!(pick_up_post(&log, 30.0).is_none(), "{remark}: {log:?}");
        let judged = pick_up_judgment(&log, 30.0).unwrap_or_else(|| panic!("judged: {log:?}"));
        assert_eq!(judged["llm"]["already_answered"], true, "{judged}");
        let remark_at = kuuki::replay::REPLAY_EPOCH + std::time::Duration::from_secs(65);
        let remark_id = kuuki::domain::Ts::from_timestamp(remark_at).to_string();
        let reason = judged["reason"].as_str().unwrap();
        assert!(reason.contains("found it answered") && reason.contains(&remark_id), "{reason}");
    }
}

/// The asker's turn goes on two minutes after the question ("tried restarting it"): the
/// pick-up that comes at the question's wait asks the answered model nothing yet and
/// comes back at the turn's end plus the wait, where it reads the whole aftermath.
#[test]
fn the_answered_model_looks_when_the_askers_turn_has_stood_its_wait() {
    for (question, more) in [(NGINX_EN, "tried restarting nginx already"), (NGINX_JA, "nginxの再起動はもう試しました")]
    {
        let transcript = format!(
            r#"{{"t": 0, "user": "ken", "text": "tom: did the deploy finish?"}}
{{"t": 10, "user": "tom", "text": "ken: canary at 50%"}}
{{"t": 30, "user": "priya", "text": "{question}"}}
{{"t": 150, "user": "priya", "text": "{more}"}}
{{"t": 160, "user": "ken", "text": "tom: rolling to 100%"}}
{{"t": 175, "user": "tom", "text": "ken: 👍"}}
{{"t": 190, "user": "lena", "text": "marco: lunch at 12?"}}
{{"t": 205, "user": "marco", "text": "lena: sure"}}
{{"t": 220, "user": "ken", "text": "tom: error rate flat"}}
{{"t": 240, "user": "lena", "text": "marco: ramen or curry?"}}
{{"t": 260, "user": "marco", "text": "lena: ramen"}}
{{"t": 280, "user": "ken", "text": "tom: closing the ticket"}}
{{"t": 700, "user": "ken", "text": "tom: all good"}}"#
        );
        let log = Run::new(&transcript).script(YES_NGINX).settings(HELP_CHANNEL).log();
        let dropped: Vec<_> = log.about("dropped", 30.0).into_iter().filter(|d| d["stage"] == "pick_up").collect();
        assert!(dropped.is_empty(), "{more}: not dropped before its look: {log:?}");
        let post = pick_up_post(&log, 30.0).unwrap_or_else(|| panic!("{more}: picked up: {log:?}"));
        assert_eq!(post["t"], 330.0, "at the turn's end plus the wait: {post}");
    }
}

/// An answer by name: the answered model sees it, the pick-up is dropped, and the
/// decision log names the likeliest answer by its id and the probability, no words.
#[test]
fn the_answered_model_sees_an_answer_by_name_and_logs_it_by_id() {
    let cases = [
        (NGINX_EN, "priya: /var/log/nginx on the box, rotated daily"),
        (NGINX_JA, "priyaさん、/var/log/nginx です。日次でローテートしてます"),
    ];
    for (question, answer) in cases {
        let transcript = amid_deploy_talk(
            question,
            &format!(
                r#"{{"t": 45, "user": "ken", "text": "tom: rolling to 100%"}}
{{"t": 60, "user": "marco", "text": "{answer}"}}
{{"t": 75, "user": "priya", "text": "marco: thanks!"}}"#
            ),
        );
        let log = Run::new(&transcript).script(YES_NGINX).settings(HELP_CHANNEL).log();
        assert!(pick_up_post(&log, 30.0).is_none(), "{answer}: {log:?}");
        let dropped = log.about("dropped", 30.0);
        let reason = dropped
            .iter()
            .find(|d| d["stage"] == "pick_up")
            .and_then(|d| d["reason"].as_str())
            .unwrap_or_else(|| panic!("dropped: {log:?}"));
        let answer_at = kuuki::replay::REPLAY_EPOCH + std::time::Duration::from_secs(60);
        let answer_id = kuuki::domain::Ts::from_timestamp(answer_at).to_string();
        assert!(reason.contains("answered model"), "{reason}");
        assert!(reason.contains(&answer_id), "names the answer's id {answer_id}: {reason}");
        assert!(!reason.contains("nginx") && !reason.contains("marco"), "ids and figures only: {reason}");
    }
}
