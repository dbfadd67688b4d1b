use std::collections::HashMap;

use super::*;
use crate::domain::{ChannelId, Ts, UserId};

const T0: i64 = 1_767_603_600;

fn at(secs: f64) -> Timestamp {
    Timestamp((T0 as f64 * 1e6 + secs * 1e6) as i64)
}

fn msg(secs: f64, user: &str, text: &str) -> Message {
    Message {
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
    }
}

fn bot() -> BotIdentity {
    BotIdentity::new(UserId("UBOT".into()), "kuuki", &["くうき".into()])
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    let vars: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Settings::from_vars(&vars).unwrap()
}

/// Scores the last message of `conversation`, judged `judge_delay` seconds after it
/// was written, with the previous message in the channel `silence` seconds before.
struct Case {
    conversation: Vec<Message>,
    last_response: Option<f64>,
    /// When kuuki last spoke in this conversation, if not at `last_response`.
    last_response_here: Option<f64>,
    silence: Option<f64>,
    judge_delay: f64,
    /// Someone else wrote after the last message.
    answered: bool,
    /// The channel's people beyond the conversation.
    people: KnownPeople,
}

impl Case {
    fn new(conversation: Vec<Message>) -> Self {
        Case {
            conversation,
            last_response: None,
            last_response_here: None,
            silence: Some(60.0),
            judge_delay: 30.0,
            answered: false,
            people: KnownPeople::default(),
        }
    }

    fn score(&self, settings: &Settings) -> RuleScore {
        let conversation: Vec<Arc<Message>> = self.conversation.iter().cloned().map(Arc::new).collect();
        let message = self.conversation.last().unwrap();
        let bot = bot();
        score(
            &RuleInput {
                message,
                conversation: &conversation,
                previous_in_channel: self.silence.map(|s| Timestamp(message.at.0 - (s * 1e6) as i64)),
                last_response_at: self.last_response.map(at),
                last_response_here: self.last_response_here.or(self.last_response).map(at),
                now: Timestamp(message.at.0 + (self.judge_delay * 1e6) as i64),
                answered: self.answered,
                bot: &bot,
                people: &self.people,
            },
            settings,
        )
    }
}

fn one(text: &str) -> Case {
    Case::new(vec![msg(1000.0, "alice", text)])
}

fn points_of(s: &RuleScore, rule: &str) -> Option<i32> {
    s.breakdown.0.iter().find(|(r, _)| r == rule).map(|(_, p)| *p)
}

#[test]
fn direct_triggers() {
    let b = bot();
    assert_eq!(direct_trigger(&msg(0.0, "a", "<@UBOT> hi"), &b), Some(DirectTrigger::Mention));
    assert_eq!(direct_trigger(&msg(0.0, "a", "<@!UBOT> hi"), &b), Some(DirectTrigger::Mention));
    assert_eq!(direct_trigger(&msg(0.0, "a", "<@UOTHER> hi"), &b), None);
    let mut reply = msg(0.0, "a", "sure");
    reply.replies_to_bot = true;
    assert_eq!(direct_trigger(&reply, &b), Some(DirectTrigger::Reply));
    assert_eq!(direct_trigger(&msg(0.0, "a", "Kuuki, lunch?"), &b), Some(DirectTrigger::Name));
    assert_eq!(direct_trigger(&msg(0.0, "a", "ねえくうきはどう思う"), &b), Some(DirectTrigger::Name));
    assert_eq!(direct_trigger(&msg(0.0, "a", "kuukiness is a word"), &b), None);
    assert_eq!(direct_trigger(&msg(0.0, "a", "nothing here"), &b), None);
    assert_eq!(DirectTrigger::Mention.score(), 100);
    assert_eq!(DirectTrigger::Reply.score(), 100);
    assert_eq!(DirectTrigger::Name.score(), 80);
}

#[test]
fn question_adds_20_with_either_question_mark() {
    let s = Settings::default();
    assert_eq!(points_of(&one("lunch?").score(&s), "question"), Some(20));
    assert_eq!(points_of(&one("お昼どうする？  ").score(&s), "question"), Some(20));
    assert_eq!(points_of(&one("what? no.").score(&s), "question"), None);
}

#[test]
fn thanks_is_thanks_without_a_question_or_a_request() {
    for text in ["that's the one, thanks!! 🙏", "できました！ありがとうございます🙏", "kuuki ty!", "助かりました"]
    {
        assert!(is_thanks(text), "{text}");
    }
    for text in [
        "thanks! how do I do the same for views?",
        "ありがとう、もう一つ教えてほしいんだけど",
        "thanks, could you also check the staging logs",
        "お願いします",
        "the deploy is done",
    ] {
        assert!(!is_thanks(text), "{text}");
    }
}

#[test]
fn questions_without_a_final_mark_are_questions() {
    for text in [
        "ugh, committed to main. how do I undo the last commit but keep the changes",
        "anyone know why rustc keeps saying `borrowed value does not live long enough`",
        "ok dumb question: is it 'a URL' or 'an URL'? I've written it both ways",
        "is there a quick way to see which queries are the slowest? postgres 14",
        "trying to figure out the right way to cache ~/.cargo between runs",
        "So is there a flag for that",
        "直前のコミット取り消したいんだけど、変更は残したい。どうやるんだっけ",
        "sccache も併用したらもっと速くなるのかな。キャッシュかぶりそうな気もするけど",
        "どっち使えばいいんだっけ…",
        "ステージングのログってどこで見られますか",
        "このエラーの意味、誰か教えてください",
        "ビルドの直し方教えて〜",
    ] {
        assert!(is_question(text), "{text}");
    }
    for text in [
        "what? no.",
        "deployed to staging, all green",
        "see https://example.com/search?q=kuuki for the list",
        "how nice is that",
        "that's the one, thanks!! 🙏",
        "お昼はカレーにしました",
        "ステージングのログは Grafana で見られます。",
        "which is why I moved it",
        "昨日教えてもらったやつ、入れたら通るようになったよ",
    ] {
        assert!(!is_question(text), "{text}");
    }
}

#[test]
fn keywords_add_15_once() {
    let s = settings(&[("JUDGE_KEYWORDS", "deploy,障害")]);
    assert_eq!(points_of(&one("Deploy の障害です").score(&s), "keyword"), Some(15));
    let r = one("deploy deploy 障害").score(&s);
    assert_eq!(r.breakdown.0.iter().filter(|(k, _)| k == "keyword").count(), 1);
    assert_eq!(points_of(&one("nothing").score(&s), "keyword"), None);
}

#[test]
fn bot_topics_add_15() {
    let s = settings(&[("BOT_TOPICS", "Rust,天気")]);
    assert_eq!(points_of(&one("rust の async むずい").score(&s), "bot_topic"), Some(15));
    assert_eq!(points_of(&one("明日の天気").score(&s), "bot_topic"), Some(15));
    assert_eq!(points_of(&one("go generics").score(&s), "bot_topic"), None);
}

#[test]
fn cooldown_and_engagement_offset_each_other_on_the_spec_timeline() {
    let s = Settings::default();
    // Response at t=1000-x; message at 1000; judged at 1030.
    let mut c = one("hmm");
    c.judge_delay = 0.0;
    // Inside cooldown (and engagement): +40 -50.
    c.last_response = Some(1000.0 - 60.0);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "engagement"), Some(40));
    assert_eq!(points_of(&r, "cooldown"), Some(-50));
    assert!(r.engaged);
    // Cooldown boundary: exactly COOLDOWN_SECONDS is still inside, one more is out.
    c.last_response = Some(1000.0 - 120.0);
    assert_eq!(points_of(&c.score(&s), "cooldown"), Some(-50));
    c.last_response = Some(1000.0 - 121.0);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "cooldown"), None);
    assert_eq!(points_of(&r, "engagement"), Some(40));
    // Engagement boundary: exactly 300 s inside, 301 out.
    c.last_response = Some(1000.0 - 300.0);
    assert_eq!(points_of(&c.score(&s), "engagement"), Some(40));
    c.last_response = Some(1000.0 - 301.0);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "engagement"), None);
    assert!(!r.engaged);
}

#[test]
fn cooldown_counts_to_the_judgment_engagement_to_the_message() {
    let s = Settings::default();
    let mut c = one("hmm");
    // Written 100 s after the response, judged 30 s later: 130 s > cooldown.
    c.last_response = Some(900.0);
    c.judge_delay = 30.0;
    assert_eq!(points_of(&c.score(&s), "cooldown"), None);
    // A message written before kuuki's response is not engaged with it, but kuuki
    // is still in cooldown when judging it.
    c.last_response = Some(1010.0);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "engagement"), None);
    assert_eq!(points_of(&r, "cooldown"), Some(-50));
}

#[test]
fn engagement_is_for_the_conversation_kuuki_spoke_in() {
    let s = Settings::default();
    let mut c = one("and then?");
    c.last_response = Some(950.0);
    c.last_response_here = Some(-10_000.0);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "engagement"), None, "kuuki spoke elsewhere in the channel");
    assert_eq!(points_of(&r, "cooldown"), Some(-50), "but cooldown is channel-wide");
}

#[test]
fn engagement_boost_is_a_setting() {
    let s = settings(&[("ENGAGEMENT_BOOST", "25"), ("ENGAGEMENT_DURATION_SECONDS", "600"), ("COOLDOWN_SECONDS", "10")]);
    let mut c = one("hmm");
    c.last_response = Some(1000.0 - 500.0);
    assert_eq!(points_of(&c.score(&s), "engagement"), Some(25));
}

#[test]
fn one_on_one_is_exactly_two_humans_in_the_recent_window() {
    let s = Settings::default();
    let two = Case::new(vec![msg(900.0, "alice", "a"), msg(950.0, "bob", "b"), msg(1000.0, "alice", "c")]);
    assert_eq!(points_of(&two.score(&s), "one_on_one"), Some(-20));
    let three = Case::new(vec![msg(900.0, "carol", "a"), msg(950.0, "bob", "b"), msg(1000.0, "alice", "c")]);
    assert_eq!(points_of(&three.score(&s), "one_on_one"), None);
    assert_eq!(points_of(&one("alone").score(&s), "one_on_one"), None);
    // Carol left the window of the last N messages: a 1:1 again.
    let s3 = settings(&[("JUDGE_RECENT_MESSAGES", "3")]);
    let mut conv = vec![msg(800.0, "carol", "x")];
    conv.extend([msg(900.0, "alice", "a"), msg(950.0, "bob", "b"), msg(1000.0, "alice", "c")]);
    assert_eq!(points_of(&Case::new(conv).score(&s3), "one_on_one"), Some(-20));
}

#[test]
fn no_mention_unless_the_judged_turn_addresses_kuuki() {
    let s = settings(&[("JUDGE_RECENT_MESSAGES", "3")]);
    assert_eq!(points_of(&one("hi").score(&s), "no_mention"), Some(-10));
    // The speaker's own turn mentions or names kuuki, on any of its lines.
    let mentioned =
        Case::new(vec![msg(900.0, "bob", "x"), msg(950.0, "alice", "<@UBOT> hi"), msg(1000.0, "alice", "y")]);
    assert_eq!(points_of(&mentioned.score(&s), "no_mention"), None);
    let named = Case::new(vec![msg(900.0, "bob", "x"), msg(950.0, "alice", "kuuki?"), msg(1000.0, "alice", "y")]);
    assert_eq!(points_of(&named.score(&s), "no_mention"), None);
    // Someone else's mention earlier in the window made their turn kuuki's, not alice's.
    let earlier = Case::new(vec![msg(900.0, "bob", "<@UBOT> hi"), msg(950.0, "bob", "x"), msg(1000.0, "alice", "y")]);
    assert_eq!(points_of(&earlier.score(&s), "no_mention"), Some(-10));
    let earlier_named = Case::new(vec![msg(900.0, "bob", "kuuki?"), msg(1000.0, "alice", "y")]);
    assert_eq!(points_of(&earlier_named.score(&s), "no_mention"), Some(-10));
    // A follow-up right after kuuki answered the speaker replies to kuuki; anyone
    // else's line there does not.
    let mut answer = msg(950.0, "kuuki", "Thursdays");
    answer.author = Author::OwnBot;
    let follow_up = |user: &str| {
        Case::new(vec![msg(900.0, "alice", "<@UBOT> deploy day?"), answer.clone(), msg(1000.0, user, "who approves?")])
    };
    assert_eq!(points_of(&follow_up("alice").score(&s), "no_mention"), None);
    assert_eq!(points_of(&follow_up("bob").score(&s), "no_mention"), Some(-10));
}

#[test]
fn a_question_after_someone_elses_name_call_is_still_an_open_question() {
    // Issue 34: a question asked 16 minutes after "kuuki, any curry place?" scored 20
    // (no unanswered_question) and was dropped without asking the LLM.
    let s = Settings::default();
    let mut own_bot = msg(15.0, "kuuki", "Try the place by the station.");
    own_bot.author = Author::OwnBot;
    let mut c = Case::new(vec![
        msg(0.0, "bob", "kuuki, any curry place near here?"),
        own_bot,
        msg(300.0, "dave", "thanks, going there now"),
        msg(960.0, "carol", "does anyone know where the spare HDMI cable went?"),
    ]);
    c.judge_delay = 120.0;
    let r = c.score(&s);
    assert_eq!(points_of(&r, "no_mention"), Some(-10), "{:?}", r.breakdown);
    assert_eq!(points_of(&r, "unanswered_question"), Some(25), "{:?}", r.breakdown);
    assert_eq!(r.score, 35, "the LLM's band: {:?}", r.breakdown);
}

#[test]
fn a_lively_conversation_costs_10() {
    let s = Settings::default();
    let users = ["a", "b", "c", "d", "e"];
    // Five messages in 40 s: 6 a minute.
    let busy = Case::new(users.iter().enumerate().map(|(i, u)| msg(960.0 + 10.0 * i as f64, u, "x")).collect());
    assert_eq!(points_of(&busy.score(&s), "busy"), Some(-10));
    // Five messages in 41 s: under 6 a minute.
    let calm = Case::new(users.iter().enumerate().map(|(i, u)| msg(959.0 + 10.25 * i as f64, u, "x")).collect());
    assert_eq!(points_of(&calm.score(&s), "busy"), None);
    // Four messages are never lively, however fast.
    let few = Case::new(users[..4].iter().map(|u| msg(1000.0, u, "x")).collect());
    assert_eq!(points_of(&few.score(&s), "busy"), None);
    // A burst after a slow start is lively: older messages do not dilute it.
    let mut conv: Vec<Message> = (0..5).map(|i| msg(100.0 * i as f64, "z", "slow")).collect();
    conv.extend(users.iter().enumerate().map(|(i, u)| msg(990.0 + 2.0 * i as f64, u, "x")));
    assert_eq!(points_of(&Case::new(conv).score(&s), "busy"), Some(-10));
}

#[test]
fn first_message_after_silence_adds_10() {
    let s = Settings::default();
    let mut c = one("hello again");
    c.silence = Some(30.0 * 60.0);
    assert_eq!(points_of(&c.score(&s), "after_silence"), Some(10));
    c.silence = Some(30.0 * 60.0 - 1.0);
    assert_eq!(points_of(&c.score(&s), "after_silence"), None);
    c.silence = None;
    assert_eq!(points_of(&c.score(&s), "after_silence"), Some(10), "a channel's first message");
}

#[test]
fn fading_replies_cost_10_or_15() {
    let s = Settings::default();
    let conv = |lens: [usize; 6]| {
        Case::new(
            lens.iter()
                .enumerate()
                .map(|(i, n)| msg(900.0 + 10.0 * i as f64, if i % 2 == 0 { "a" } else { "b" }, &"x".repeat(*n)))
                .collect(),
        )
    };
    assert_eq!(points_of(&conv([40, 40, 40, 10, 10, 10]).score(&s), "fading"), Some(-15));
    assert_eq!(points_of(&conv([40, 40, 40, 25, 25, 25]).score(&s), "fading"), Some(-10));
    // Exactly 3/4 is not fading yet; exactly half is the milder penalty.
    assert_eq!(points_of(&conv([40, 40, 40, 30, 30, 30]).score(&s), "fading"), None);
    assert_eq!(points_of(&conv([40, 40, 40, 20, 20, 20]).score(&s), "fading"), Some(-10));
    assert_eq!(points_of(&conv([10, 10, 10, 40, 40, 40]).score(&s), "fading"), None);
    // Fewer than six messages: nothing to compare.
    let five = Case::new((0..5).map(|i| msg(900.0 + i as f64, "a", if i < 3 { "long long" } else { "x" })).collect());
    assert_eq!(points_of(&five.score(&s), "fading"), None);
}

#[test]
fn content_rules_read_the_speakers_whole_turn() {
    let s = settings(&[("BOT_TOPICS", "CI")]);
    let mut c = Case::new(vec![
        msg(0.0, "bob", "what?"),
        msg(900.0, "ken", "CI のキャッシュってどこで消せるんだっけ？"),
        msg(920.0, "ken", "急ぎではないです"),
    ]);
    c.silence = Some(3600.0);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "question"), Some(20), "{:?}", r.breakdown);
    assert_eq!(points_of(&r, "bot_topic"), Some(15));
    assert!(r.question);
    // Someone else in between ends the turn: bob's question is not ken's.
    let c = Case::new(vec![msg(900.0, "bob", "CI?"), msg(920.0, "ken", "急ぎではないです")]);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "question"), None);
    assert_eq!(points_of(&r, "bot_topic"), None);
}

fn in_thread(mut m: Message, root: f64) -> Message {
    m.thread_root = Some(Ts::from_timestamp(at(root)));
    m
}

#[test]
fn an_open_question_counts_as_unanswered_once_it_has_stood_the_wait() {
    let s = Settings::default();
    let mut c = one("how do I undo my last commit but keep the changes?");
    c.judge_delay = 119.0;
    let young = c.score(&s);
    assert_eq!(points_of(&young, "unanswered_question"), None);
    let pending = young.pending.expect("the rule settles later");
    assert_eq!(pending.at, at(1000.0 + 120.0), "the question's own age, not the judgment's");
    c.judge_delay = 120.0;
    let stood = c.score(&s);
    assert_eq!(points_of(&stood, "unanswered_question"), Some(25));
    assert_eq!(stood.pending, None, "settled: a re-queued judgment decides");
    // question 20 - no_mention 10 + 25: the LLM's band, below the rules-only threshold.
    assert_eq!(stood.score, 35);
    assert_eq!(decide(stood.score, &settings(&[("LLM_JUDGE_ENABLED", "true")]), true), Decision::Llm);
    assert_eq!(decide(stood.score, &s, false), Decision::Skip);
    let s = settings(&[("UNANSWERED_QUESTION_POINTS", "40"), ("UNANSWERED_QUESTION_WAIT_SECONDS", "60")]);
    c.judge_delay = 60.0;
    assert_eq!(points_of(&c.score(&s), "unanswered_question"), Some(40));
}

#[test]
fn a_question_someone_answered_or_that_addressed_kuuki_is_not_unanswered() {
    let s = Settings::default();
    let mut answered = one("lunch?");
    answered.judge_delay = 300.0;
    assert_eq!(points_of(&answered.score(&s), "unanswered_question"), Some(25));
    answered.answered = true;
    let r = answered.score(&s);
    assert_eq!(points_of(&r, "unanswered_question"), None);
    assert_eq!(r.pending, None);
    let mut statement = one("lunch is at noon");
    statement.judge_delay = 300.0;
    assert_eq!(points_of(&statement.score(&s), "unanswered_question"), None);
    assert_eq!(statement.score(&s).pending, None);
    // The asker's own turn addressed kuuki: the question is kuuki's, answered as such.
    let mut with_kuuki =
        Case::new(vec![msg(900.0, "alice", "<@UBOT> deploy day?"), msg(1000.0, "alice", "and who approves?")]);
    with_kuuki.judge_delay = 300.0;
    let r = with_kuuki.score(&s);
    assert_eq!(points_of(&r, "unanswered_question"), None);
    assert_eq!(r.pending, None);
}

#[test]
fn mentions_of_other_people_are_found_in_every_platforms_form() {
    let b = bot();
    assert_eq!(mentioned_others("<@carol> did the invoice go out?", &b), vec!["carol"]);
    assert_eq!(mentioned_others("cc <@U123|ken> and <@!456>", &b), vec!["U123", "456"]);
    assert!(mentioned_others("<@UBOT> hi, and <@!UBOT>", &b).is_empty(), "kuuki is not another person");
    assert!(mentioned_others("<@&789> role ping, <!here>, <@ broken, <@>", &b).is_empty());
    assert!(mentioned_others("a < b and c@d > e", &b).is_empty());
}

#[test]
fn a_turn_that_mentions_someone_else_is_theirs_until_the_wait_is_over() {
    let s = Settings::default();
    let mut c = one("<@carol> did the invoice go out?");
    let r = c.score(&s);
    assert_eq!(points_of(&r, "addressed_to_other"), Some(-60));
    assert_eq!(r.for_other.as_deref(), Some("carol"));
    assert_eq!(points_of(&r, "unanswered_question"), None, "carol's question, not an open one");
    assert_eq!(r.pending.as_ref().map(|p| p.at), Some(at(1000.0 + 3600.0)));
    assert!(r.pending.unwrap().reason.contains("carol"));
    c.judge_delay = 3599.0;
    assert_eq!(points_of(&c.score(&s), "addressed_to_other"), Some(-60));
    // Carol has not answered for the whole wait: the question is open to anyone.
    c.judge_delay = 3600.0;
    let r = c.score(&s);
    assert_eq!(points_of(&r, "addressed_to_other"), None);
    assert_eq!(r.for_other, None);
    assert_eq!(points_of(&r, "unanswered_question"), Some(25));
    assert_eq!(r.pending, None);
    // Not a question: nothing to wait for.
    let thanks = one("thanks <@carol>!");
    let r = thanks.score(&s);
    assert_eq!(points_of(&r, "addressed_to_other"), Some(-60));
    assert_eq!(r.pending, None);
    let s = settings(&[("ADDRESSED_TO_OTHER_POINTS", "-30"), ("ADDRESSED_TO_OTHER_WAIT_MINUTES", "5")]);
    let mut c = one("<@carol> did the invoice go out?");
    assert_eq!(points_of(&c.score(&s), "addressed_to_other"), Some(-30));
    c.judge_delay = 300.0;
    assert_eq!(points_of(&c.score(&s), "addressed_to_other"), None);
}

#[test]
fn a_thread_reply_to_another_persons_question_is_theirs() {
    let s = Settings::default();
    let asked = msg(900.0, "alice", "which region is staging in?");
    let reply = |text: &str| in_thread(msg(1000.0, "bob", text), 900.0);
    let r = Case::new(vec![asked.clone(), reply("do you mean the db or the app?")]).score(&s);
    assert_eq!(points_of(&r, "addressed_to_other"), Some(-60));
    assert_eq!(r.for_other.as_deref(), Some("alice"));
    let r = Case::new(vec![asked.clone(), reply("eu-west-1")]).score(&s);
    assert_eq!(points_of(&r, "addressed_to_other"), Some(-60), "an answer is for the asker too");
    // Not a question before it, the speaker's own question, a bot's, or the top level.
    let said = msg(900.0, "alice", "staging is slow today");
    assert_eq!(points_of(&Case::new(vec![said, reply("why?")]).score(&s), "addressed_to_other"), None);
    let own = Case::new(vec![msg(900.0, "bob", "which region?"), reply("anyone?")]);
    assert_eq!(points_of(&own.score(&s), "addressed_to_other"), None);
    let mut from_bot = asked.clone();
    from_bot.author = Author::OwnBot;
    assert_eq!(points_of(&Case::new(vec![from_bot, reply("the db")]).score(&s), "addressed_to_other"), None);
    let top_level = Case::new(vec![asked, msg(1000.0, "bob", "eu-west-1?")]);
    assert_eq!(points_of(&top_level.score(&s), "addressed_to_other"), None);
}

#[test]
fn a_conversation_shorter_than_the_minimum_costs_40_unless_it_is_an_open_question() {
    let s = Settings::default();
    let remark = |n: usize| {
        Case::new((0..n).map(|i| msg(900.0 + 10.0 * i as f64, ["a", "b", "c"][i % 3], "deploy done")).collect())
    };
    assert_eq!(points_of(&remark(1).score(&s), "short_conversation"), Some(-40));
    assert_eq!(points_of(&remark(2).score(&s), "short_conversation"), Some(-40), "one short of 3");
    assert_eq!(points_of(&remark(3).score(&s), "short_conversation"), None, "exactly the minimum");
    // kuuki's own messages are part of the conversation too.
    let mut with_kuuki = remark(3);
    with_kuuki.conversation[1].author = Author::OwnBot;
    assert_eq!(points_of(&with_kuuki.score(&s), "short_conversation"), None);
    // An open question stands on its own, before and after its wait.
    let mut question = one("how do I undo my last commit?");
    assert_eq!(points_of(&question.score(&s), "short_conversation"), None);
    question.judge_delay = 300.0;
    assert_eq!(points_of(&question.score(&s), "short_conversation"), None);
    // An answered question is no longer open: the minimum applies again.
    question.answered = true;
    assert_eq!(points_of(&question.score(&s), "short_conversation"), Some(-40));
    let s5 = settings(&[("JUDGE_MIN_CONVERSATION_MESSAGES", "5")]);
    assert_eq!(points_of(&remark(4).score(&s5), "short_conversation"), Some(-40));
    assert_eq!(points_of(&remark(5).score(&s5), "short_conversation"), None);
    let off = settings(&[("JUDGE_MIN_CONVERSATION_MESSAGES", "1")]);
    assert_eq!(points_of(&remark(1).score(&off), "short_conversation"), None);
}

#[test]
fn the_ranges_read_as_caseless_do_not_change_when_lowercased() {
    let ranges = [0x3000..=0x9FFF, 0x2000..=0x203F, 0xFF00..=0xFF20, 0xFF3B..=0xFFFF];
    for c in ranges.into_iter().flatten().filter_map(char::from_u32) {
        let text = c.to_string();
        assert!(only_ascii_letters_have_case(text.as_bytes()), "{c:?} U+{:04X}", c as u32);
        assert_eq!(text.to_lowercase(), text, "U+{:04X}", c as u32);
    }
    for text in ["Ａ", "Ｚ", "Ω", "Ⅰ", "É", "ǅ"] {
        assert!(!only_ascii_letters_have_case(text.as_bytes()), "{text}");
    }
}

#[test]
fn a_sentence_asks_by_its_opening_or_its_ending_after_fillers() {
    // Each phrase list read as it is written, one phrase at a time.
    let one_by_one = |sentence: &str| {
        let mut s = sentence.trim_start();
        while let Some(rest) = question_phrases::FILLERS.iter().find_map(|f| s.strip_prefix(f)) {
            s = rest.trim_start();
        }
        let end = s.trim_end_matches(|c: char| !c.is_alphanumeric());
        question_phrases::OPENINGS.iter().any(|o| s.starts_with(o))
            || question_phrases::JA_ENDINGS.iter().any(|e| end.ends_with(e))
    };
    let mut sentences =
        vec!["", "so ok how do i undo", "okay  also is there a way", "dumb questionwhy is it", "どこだっけ!!"];
    for phrase in question_phrases::OPENINGS.iter().chain(question_phrases::FILLERS).chain(question_phrases::JA_ENDINGS)
    {
        sentences.push(phrase);
    }
    let variants: Vec<String> = sentences
        .iter()
        .flat_map(|s| [s.to_string(), format!("so {s}"), format!("x{s}"), format!("{s} x"), format!("今日は{s}。")])
        .collect();
    for sentence in &variants {
        assert_eq!(asks(sentence), one_by_one(sentence), "{sentence:?}");
    }
    assert!(asks("ok so how do i undo") && asks("デプロイどうすればいいのかな") && !asks("lunch"));
}

#[test]
fn lowercase_borrows_only_what_is_lowercase_already() {
    use std::borrow::Cow;
    for text in ["おはよう、デプロイは？", "lunch anyone?", "", "ｋｕｕｋｉ", "日本語の café"] {
        assert!(matches!(lowercase(text), Cow::Borrowed(t) if t == text), "{text}");
    }
    for (text, lower) in [
        ("Hello", "hello"),
        ("ＫＵＵＫＩ さん", "ｋｕｕｋｉ さん"),
        ("ǅemal", "ǆemal"),
        ("ÉCOLE", "école"),
        ("日本語の Éc", "日本語の éc"),
    ] {
        assert!(matches!(lowercase(text), Cow::Owned(ref t) if t == lower), "{text}");
    }
}

#[test]
fn a_turn_is_the_trailing_run_of_one_author() {
    let conv: Vec<Arc<Message>> =
        [msg(0.0, "a", "1"), msg(1.0, "b", "2"), msg(2.0, "a", "3"), msg(3.0, "a", "4")].map(Arc::new).into();
    let t: Vec<&str> = turn(&conv).iter().map(|m| m.text.as_str()).collect();
    assert_eq!(t, vec!["3", "4"]);
    assert_eq!(turn(&conv[..1]).len(), 1);
    assert!(turn(&[]).is_empty());
}

#[test]
fn the_score_is_clamped_to_0_100() {
    let s = settings(&[
        ("JUDGE_KEYWORDS", "deploy"),
        ("BOT_TOPICS", "rust"),
        ("ENGAGEMENT_BOOST", "100"),
        ("COOLDOWN_SECONDS", "0"),
    ]);
    let mut high = one("rust deploy?");
    high.last_response = Some(990.0);
    high.judge_delay = 20.0;
    let r = high.score(&s);
    assert!(r.breakdown.total() > 100, "{:?}", r.breakdown);
    assert_eq!(r.score, 100);
    let mut low = Case::new(vec![msg(990.0, "a", "xxxxxxxxxx"), msg(1000.0, "b", "x")]);
    low.last_response = Some(1000.0 - 1000.0);
    low.judge_delay = 0.0;
    let s = settings(&[("ENGAGEMENT_DURATION_SECONDS", "10"), ("COOLDOWN_SECONDS", "2000")]);
    let r = low.score(&s);
    assert!(r.breakdown.total() < 0, "{:?}", r.breakdown);
    assert_eq!(r.score, 0);
}

#[test]
fn thresholds_without_the_llm_judge() {
    let s = Settings::default();
    assert_eq!(decide(60, &s, false), Decision::Respond);
    assert_eq!(decide(59, &s, false), Decision::Skip);
    let s = settings(&[("JUDGE_SCORE_THRESHOLD", "30")]);
    assert_eq!(decide(30, &s, false), Decision::Respond);
    // An LLM judge that is enabled but not available falls back to the threshold.
    let s = settings(&[("LLM_JUDGE_ENABLED", "true")]);
    assert_eq!(decide(50, &s, false), Decision::Skip);
}

#[test]
fn thresholds_with_the_llm_judge() {
    let s = settings(&[("LLM_JUDGE_ENABLED", "true")]);
    assert_eq!(decide(80, &s, true), Decision::Respond);
    assert_eq!(decide(79, &s, true), Decision::Llm);
    assert_eq!(decide(21, &s, true), Decision::Llm);
    assert_eq!(decide(20, &s, true), Decision::Skip);
    let off = settings(&[("LLM_PROVIDER", "openai"), ("LLM_JUDGE_ENABLED", "false")]);
    assert_eq!(decide(79, &off, true), Decision::Respond);
}

#[test]
fn the_response_ladder() {
    let s = Settings::default();
    assert_eq!(response_type(59, false, false, &s), ResponseType::ReactOnly);
    assert_eq!(response_type(60, false, false, &s), ResponseType::ShortAck);
    assert_eq!(response_type(79, false, false, &s), ResponseType::ShortAck);
    assert_eq!(response_type(60, true, false, &s), ResponseType::FullResponse);
    assert_eq!(response_type(80, false, false, &s), ResponseType::FullResponse);
    assert_eq!(response_type(30, false, true, &s), ResponseType::FullResponse);
    let flat = settings(&[("RESPONSE_DIVERSITY_ENABLED", "false")]);
    assert_eq!(response_type(10, false, false, &flat), ResponseType::FullResponse);
}

#[test]
fn emoji_follow_the_message() {
    assert_eq!(pick_emoji("どうする？"), "thinking_face");
    assert_eq!(pick_emoji("ありがとう"), "pray");
    assert_eq!(pick_emoji("deploy done"), "tada");
    assert_eq!(pick_emoji("草"), "joy");
    assert_eq!(pick_emoji("ふむ"), "eyes");
}

#[test]
fn a_turn_calling_someone_by_nick_is_theirs_like_a_mention() {
    let s = Settings::default();
    let mut c =
        Case::new(vec![msg(900.0, "carol", "standup moved to 10"), msg(1000.0, "alice", "bob: is the vpn up again?")]);
    // bob is not in this conversation's window, but the channel knows him.
    assert_eq!(points_of(&c.score(&s), "addressed_to_other"), None, "nobody called bob here yet");
    c.people = KnownPeople::new([(&UserId("bob".into()), "bob")]);
    let r = c.score(&s);
    assert_eq!(points_of(&r, "addressed_to_other"), Some(-60), "{:?}", r.breakdown);
    assert_eq!(r.for_other.as_deref(), Some("bob"));
    assert_eq!(points_of(&r, "unanswered_question"), None);
    // `nick, text`, on the second line of the turn's second message, by display name.
    let mut c = Case::new(vec![
        msg(900.0, "alice", "one more thing"),
        msg(1000.0, "alice", "the staging db is slow\nYuki, any idea why the replica lags?"),
    ]);
    c.people = KnownPeople::new([(&UserId("U2".into()), "Yuki Tanaka")]);
    assert_eq!(c.score(&s).for_other.as_deref(), Some("yuki"));
    // The speaker's own name, or a word that names nobody, is no call.
    let mut c = Case::new(vec![msg(1000.0, "alice", "alice: note to self, is the vpn up?")]);
    c.people = KnownPeople::new([(&UserId("alice".into()), "alice")]);
    assert_eq!(c.score(&s).for_other, None);
    let c = Case::new(vec![msg(900.0, "bob", "hi"), msg(1000.0, "alice", "note: is the vpn up?")]);
    assert_eq!(c.score(&s).for_other, None);
}

#[test]
fn a_line_opening_with_a_nick_and_a_colon_or_comma_names_it() {
    let openings = |t: &str| naming::line_openings(t).collect::<Vec<_>>();
    assert_eq!(openings("bob: try the staging flag"), vec!["bob"]);
    assert_eq!(openings("Bob_2, is the build green?"), vec!["bob_2"]);
    assert_eq!(openings("@dave: pushed"), vec!["dave"]);
    assert_eq!(openings("ok\n  carol: your turn"), vec!["carol"]);
    assert_eq!(openings("たろう：見ました？"), vec!["たろう"]);
    assert!(openings("see https://example.com/x").is_empty());
    assert!(openings("https://example.com: down").is_empty());
    assert!(openings("at 12:30, lunch").is_empty(), "a word before the colon is no nick");
    assert!(openings("12:30 works").is_empty());
    assert!(openings("bob said: no").is_empty(), "only the line's first word");
}

#[test]
fn a_nick_addresses_a_known_person_other_than_the_speaker() {
    let people = KnownPeople::new([
        (&UserId("U1".into()), "bob"),
        (&UserId("U2".into()), "Yuki Tanaka"),
        (&UserId("U3".into()), "alice"),
    ]);
    let turn = |text: &str| vec![Arc::new(msg(0.0, "U3", text))];
    assert_eq!(naming::called_by_nick(&turn("bob: try the staging flag"), &people).as_deref(), Some("bob"));
    assert_eq!(naming::called_by_nick(&turn("yuki, did it work?"), &people).as_deref(), Some("yuki"));
    assert_eq!(naming::called_by_nick(&turn("note: staging is down"), &people), None, "nobody is called note");
    assert_eq!(naming::called_by_nick(&turn("alice: reminder to self"), &people), None, "the speaker's own name");
    // Any line of any message of the turn.
    let two = vec![Arc::new(msg(0.0, "U3", "hmm")), Arc::new(msg(1.0, "U3", "thinking\nbob, what about the flag?"))];
    assert_eq!(naming::called_by_nick(&two, &people).as_deref(), Some("bob"));
    assert!(naming::has_unknown_nick(&turn("note: staging is down"), &people));
    assert!(!naming::has_unknown_nick(&turn("bob: hi"), &people));
    assert!(!naming::has_unknown_nick(&turn("no nick here"), &people));
}

#[test]
fn a_busy_channels_question_keeps_its_own_lines_for_the_judge() {
    use crate::judge::own_conversation::own_conversation;
    let mut kuuki_after_dave = msg(25.0, "kuuki", "the notes are pinned");
    kuuki_after_dave.author = Author::OwnBot;
    let mut kuuki_after_carol = msg(45.0, "kuuki", "try the ci-spare label");
    kuuki_after_carol.author = Author::OwnBot;
    let conversation: Vec<Arc<Message>> = [
        msg(0.0, "alice", "<@bob> is the runner fixed?"),
        msg(10.0, "dave", "standup notes?"),
        msg(20.0, "erin", "dave: in the doc"),
        kuuki_after_dave,
        msg(30.0, "bob", "not yet"),
        msg(40.0, "carol", "<@alice> there is a spare runner"),
        kuuki_after_carol,
        msg(50.0, "alice", "how do I make pytest show print output?"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let own = own_conversation(&conversation, &bot(), &KnownPeople::default()).expect("two others left out");
    let texts: Vec<&str> = own.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "<@bob> is the runner fixed?",
            "not yet",
            "<@alice> there is a spare runner",
            "try the ci-spare label",
            "how do I make pytest show print output?"
        ]
    );
    // A remark, a thread, or a channel where only one other person talks: the whole flow.
    let mut remark = conversation.clone();
    remark.push(Arc::new(msg(60.0, "erin", "deploying now")));
    assert!(own_conversation(&remark, &bot(), &KnownPeople::default()).is_none());
    let threaded: Vec<Arc<Message>> = conversation.iter().map(|m| Arc::new(in_thread((**m).clone(), 0.0))).collect();
    assert!(own_conversation(&threaded, &bot(), &KnownPeople::default()).is_none());
    let quiet: Vec<Arc<Message>> = [
        msg(0.0, "alice", "build broke"),
        msg(10.0, "tom", "which job?"),
        msg(20.0, "alice", "why would it time out?"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    assert!(own_conversation(&quiet, &bot(), &KnownPeople::default()).is_none());
}
