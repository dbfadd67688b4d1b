//! The closing rules of an open question, one by one, and the chatter that closes
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::Settings;
use crate::domain::{ChannelId, Ts, UserId};

const T0: i64 = 1_767_603_600;

fn at(secs: f64) -> Timestamp {
    Timestamp((T0 as f64 * 1e6 + secs * 1e6) as i64)
}

pub(super) fn msg(secs: f64, user: &str, text: &str) -> Arc<Message> {
    Arc::new(Message {
        channel: ChannelId("c".into()),
        ts: Ts::from_timestamp(at(secs)),
        thread_root: None,
        user: UserId(user.into()),
        user_name: user.into(),
        text: text.into(),
        author: Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at: at(secs),
    })
}

fn in_thread(secs: f64, user: &str, text: &str, root: f64) -> Arc<Message> {
    let mut m = (*msg(secs, user, text)).clone();
    m.thread_root = Some(Ts::from_timestamp(at(root)));
    Arc::new(m)
}

fn kuuki(secs: f64, text: &str) -> Arc<Message> {
    let mut m = (*msg(secs, "UBOT", text)).clone();
    m.author = Author::OwnBot;
    Arc::new(m)
}

fn bot() -> BotIdentity {
    BotIdentity::new(UserId("UBOT".into()), "kuuki", &["くうき".into()])
}

/// What closes the question at 100 s (the last line of `before`), judged at `now` s.
fn closing_at(before: &[Arc<Message>], after: &[Arc<Message>], now: f64) -> Option<Closing> {
    let question = before.last().unwrap().clone();
    let people = KnownPeople::of_messages(before.iter().chain(after.iter()));
    let view = QuestionView { question: &question, before, after };
    view.closing(&bot(), &people, at(now), &Settings::default().judge)
}

/// A busy channel: two other conversations going on by name before the question.
fn busy_before(question: &str) -> Vec<Arc<Message>> {
    vec![
        msg(40.0, "ken", "tom: did the deploy finish?"),
        msg(50.0, "tom", "ken: yes, canary at 50%"),
        msg(70.0, "lena", "marco: lunch at 12?"),
        msg(80.0, "marco", "lena: sure"),
        msg(100.0, "priya", question),
    ]
}

const QUESTION: &str = "how do I undo the last commit but keep the changes";

#[test]
fn unrelated_chatter_closes_nothing() {
    let before = busy_before(QUESTION);
    let after = [
        msg(110.0, "ken", "tom: rolling to 100%"),
        msg(120.0, "lena", "marco: 🍜"),
        msg(135.0, "tom", "ken: 👍"),
        msg(150.0, "marco", "the logging disk is at 78% again"),
    ];
    assert_eq!(closing_at(&before, &after, 220.0), None);
}

#[test]
fn a_reply_in_its_thread_closes_it() {
    let before = busy_before(QUESTION);
    let after = [msg(110.0, "ken", "tom: rolling"), in_thread(130.0, "tom", "git reset --soft HEAD~1", 100.0)];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::AnsweredInThread));
}

#[test]
fn a_reply_to_it_closes_it() {
    let before = busy_before(QUESTION);
    let mut reply = (*msg(130.0, "tom", "reset --soft")).clone();
    reply.replies_to = Some(before.last().unwrap().ts.clone());
    let after = [msg(110.0, "ken", "tom: rolling"), Arc::new(reply)];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::AnsweredInThread));
}

#[test]
fn a_line_that_names_or_mentions_the_asker_closes_it() {
    let before = busy_before(QUESTION);
    for answer in ["priya: git reset --soft HEAD~1", "priya, reset --soft", "<@priya> reset --soft"] {
        let after = [msg(110.0, "ken", "tom: rolling"), msg(130.0, "tom", answer)];
        assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::NamesAsker), "{answer}");
    }
    // In Japanese, with an honorific.
    let before = busy_before("コミット取り消す方法ってどうやるんだっけ");
    let after = [msg(130.0, "tom", "priyaさん、git reset --soft HEAD~1 です")];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::NamesAsker));
}

#[test]
fn a_name_call_that_answers_something_else_the_asker_said_closes_nothing() {
    let before = busy_before(QUESTION);
    // The asker asked ken for a coffee since: ken's answer is to that.
    let after = [msg(110.0, "priya", "ken: bring me a coffee?"), msg(120.0, "ken", "priya: sure, oat?")];
    assert_eq!(closing_at(&before, &after, 220.0), None);
    // Someone asks the asker about lunch.
    let after = [msg(110.0, "ken", "tom: rolling"), msg(120.0, "lena", "priya: lunch today?")];
    assert_eq!(closing_at(&before, &after, 220.0), None);
}

#[test]
fn the_addressees_next_turn_closes_a_question_meant_for_them() {
    let before = busy_before("ken: did you deploy the fix?");
    let after = [msg(110.0, "lena", "marco: 🍜"), msg(130.0, "ken", "not yet, after lunch")];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::AddresseeSpoke));
}

#[test]
fn the_asker_withdrawing_closes_it_in_both_languages() {
    for withdrawal in ["nvm, found it", "never mind", "ah found it, thanks", "解決しました！", "自己解決しました"]
    {
        let before = busy_before(QUESTION);
        let after = [msg(110.0, "ken", "tom: rolling"), msg(130.0, "priya", withdrawal)];
        assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::Withdrawn), "{withdrawal}");
    }
}

#[test]
fn the_asker_calling_kuuki_closes_it() {
    let before = busy_before(QUESTION);
    let after = [msg(110.0, "priya", "kuuki, any idea?")];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::AskedKuuki));
}

#[test]
fn kuukis_answer_in_its_thread_closes_it() {
    let before = busy_before(QUESTION);
    let mut answer = (*kuuki(225.0, "git reset --soft HEAD~1")).clone();
    answer.thread_root = Some(Ts::from_timestamp(at(100.0)));
    let after = [msg(110.0, "ken", "tom: rolling"), Arc::new(answer)];
    assert_eq!(closing_at(&before, &after, 230.0), Some(Closing::KuukiAnswered));
    // kuuki answering someone else at the top level closes nothing, even right after
    // the asker; its post answering the question (a Discord reply) does.
    let mut to_ken = (*kuuki(112.0, "a partial rollout")).clone();
    to_ken.replies_to = Some(Ts::from_timestamp(at(110.0)));
    let after = [msg(110.0, "ken", "kuuki, what's canary?"), Arc::new(to_ken.clone())];
    assert_eq!(closing_at(&before, &after, 230.0), None);
    let after = [Arc::new(to_ken)];
    assert_eq!(closing_at(&before, &after, 230.0), None);
    let mut to_priya = (*kuuki(120.0, "git reset --soft HEAD~1")).clone();
    to_priya.replies_to = Some(before.last().unwrap().ts.clone());
    assert_eq!(closing_at(&before, &[Arc::new(to_priya)], 230.0), Some(Closing::KuukiAnswered));
}

#[test]
fn it_expires() {
    let before = busy_before(QUESTION);
    let expiry = Settings::default().judge.open_question_expiry;
    assert_eq!(expiry, Duration::from_secs(30 * 60));
    assert_eq!(closing_at(&before, &[], 100.0 + 30.0 * 60.0 - 1.0), None);
    assert_eq!(closing_at(&before, &[], 100.0 + 30.0 * 60.0 + 1.0), Some(Closing::Expired));
}

#[test]
fn in_a_quiet_channel_the_next_line_answers_it() {
    let before =
        vec![msg(10.0, "lena", "CI is down to 6 minutes 🎉"), msg(100.0, "priya", "does it apply to e2e too?")];
    let after = [msg(130.0, "lena", "next week")];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::NextLine));
}

#[test]
fn in_a_busy_channel_the_next_line_answers_it_only_when_it_reads_like_an_answer_or_shares_its_words() {
    let before = busy_before("should we roll back the release?");
    let after = [msg(110.0, "ken", "yes, do it")];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::NextLine));
    let after = [msg(110.0, "marco", "the logging disk is at 78% again")];
    assert_eq!(closing_at(&before, &after, 220.0), None);
    let after = [msg(110.0, "marco", "lol"), msg(140.0, "tom", "the release is fine, the canary is green")];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::SharedWords));
    // A next line long after the question stood unanswered is the channel moving on.
    let before = vec![msg(100.0, "priya", "does anyone know how to rebase onto main?")];
    let after = [msg(400.0, "lena", "done for today")];
    assert_eq!(closing_at(&before, &after, 420.0), None);
}

#[test]
fn the_person_the_asker_was_talking_with_answers_it() {
    let mut before = busy_before(QUESTION);
    before.insert(4, msg(85.0, "priya", "tom: is main green?"));
    before.insert(5, msg(90.0, "tom", "priya: yes"));
    let after = [msg(110.0, "tom", "soft reset")];
    assert_eq!(closing_at(&before, &after, 220.0), Some(Closing::NextLine));
}

#[test]
fn only_sure_closings_count_once_it_was_picked_up() {
    let before = busy_before(QUESTION);
    let question = before.last().unwrap().clone();
    let after = [msg(110.0, "ken", "yes, do it")];
    let people = KnownPeople::of_messages(before.iter());
    let view = QuestionView { question: &question, before: &before, after: &after };
    assert_eq!(view.surely_closed(&bot(), &people), None);
    let after = [msg(110.0, "tom", "priya: reset --soft")];
    let view = QuestionView { question: &question, before: &before, after: &after };
    assert_eq!(view.surely_closed(&bot(), &people), Some(Closing::NamesAsker));
}

#[test]
fn content_words_read_english_words_and_japanese_runs() {
    assert_eq!(content_words("how do I skip a field with serde"), ["field", "serde", "skip"]);
    assert_eq!(content_words("ステージングの DB のコネクション数って"), ["コネクション", "ステージング"]);
    // Common words tell no topic.
    assert!(content_words("何か方法ってある？").is_empty());
}
