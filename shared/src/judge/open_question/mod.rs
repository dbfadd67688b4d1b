//! Open questions (issue 34): a question stays open, whatever else the channel talks
//! about, until something about it closes it: an answer, the asker taking it back, or
//! time. In a busy channel the next line is usually another conversation's, so "any
//! newer message" is no sign of an answer; these rules read who the later lines are
//! for. Sure closings (a reply in its thread or to it, the addressee's answer, the
//! asker taking it back or calling kuuki, kuuki's answer) close it; otherwise the
//! rules of issue 34 guess (the next line, shared words, a name call), or with
//! `REPLY_MODEL_THRESHOLD` the answered model ([`answered_model`], learned from
//! annotated chat, reading the [`reply_model`]'s scores of the later lines) says
//! whether people answered it. Pure functions over the messages, like the rest of the rules: the
//! open questions of a channel are its recent questions these rules leave open, read
//! from the messages every judgment reads anyway (docs/design.md §7.7).

pub mod answered_model;
pub mod reply_model;

use std::sync::Arc;

use crate::config::JudgeSettings;
use crate::domain::{Author, BotIdentity, Message, Timestamp};

use super::naming::KnownPeople;
use super::rules::{self, direct_trigger, is_question, lowercase};

/// How long before a question a person's line still counts as them being in another
/// conversation (so their next line after the question is more likely that
/// conversation's than an answer).
pub const TALKING_ELSEWHERE_SECONDS: f64 = 120.0;

/// What closed a question.
#[derive(Debug, Clone, PartialEq)]
pub enum Closing {
    /// Someone else replied in its thread (or, for a question in a thread, after it
    /// there), or replied to it (a Discord reply).
    AnsweredInThread,
    /// A line by someone else mentions the asker or calls them by name.
    NamesAsker,
    /// The person the question was for took their turn.
    AddresseeSpoke,
    /// The next line after the asker's turn, by the person they were talking with, in
    /// a channel holding one conversation, or opening like an answer ("yes", 「そう」).
    NextLine,
    /// A later line by someone else shares the question's words.
    SharedWords,
    /// People most likely answered it, or will: the answered model's probability
    /// reached `REPLY_MODEL_THRESHOLD` (the line it most believes answers, and the
    /// probability in percent).
    LikelyAnswered { by: Option<crate::domain::Ts>, percent: u8 },
    /// The asker took it back ("nvm", "found it", 「解決しました」).
    Withdrawn,
    /// The asker, or the person they were talking with, called kuuki after: the
    /// direct answer takes it.
    AskedKuuki,
    /// kuuki answered it already (in its thread, or its post answers the asker's turn).
    KuukiAnswered,
    /// It stood longer than `OPEN_QUESTION_EXPIRY_MINUTES`.
    Expired,
}

impl Closing {
    /// For the decision log: ids and figures, no words of anyone's.
    pub fn reason(&self) -> String {
        match self {
            Closing::AnsweredInThread => "the question was answered in its thread or by a reply to it".into(),
            Closing::AddresseeSpoke => "the person the question was for has answered".into(),
            Closing::NamesAsker => "someone answered the asker by name".into(),
            Closing::NextLine => "the question looks answered by the next line".into(),
            Closing::SharedWords => "the question looks answered by a line sharing its words".into(),
            Closing::LikelyAnswered { by: Some(by), percent } => {
                format!("the question looks answered, likeliest by message {by} (answered model: {percent} %)")
            }
            Closing::LikelyAnswered { by: None, percent } => {
                format!("the question looks answered (answered model: {percent} %)")
            }
            Closing::Withdrawn => "the asker took the question back".into(),
            Closing::AskedKuuki => "the asker, or the person they talked with, called kuuki since".into(),
            Closing::KuukiAnswered => "kuuki has answered the question already".into(),
            Closing::Expired => "the question expired (OPEN_QUESTION_EXPIRY_MINUTES)".into(),
        }
    }
}

/// Words with which askers take a question back, matched in their lowercase lines.
const WITHDRAWALS: &[&str] = &[
    "nvm",
    "never mind",
    "nevermind",
    "found it",
    "figured it out",
    "figured out",
    "got it working",
    "solved it",
    "sorted it",
    "no longer needed",
    "ignore my question",
    "ignore that",
    "解決しました",
    "解決した",
    "自己解決",
    "やっぱり大丈夫",
    "見つかりました",
    "見つけました",
    "わかりました",
    "分かりました",
];

/// Whether the asker's `text` takes their question back.
pub fn is_withdrawal(text: &str) -> bool {
    let lower = lowercase(text);
    WITHDRAWALS.iter().any(|w| lower.contains(w))
}

/// A question and what surrounds it.
pub struct QuestionView<'a> {
    pub question: &'a Message,
    /// The conversation up to and including the question, oldest first.
    pub before: &'a [Arc<Message>],
    /// What came after it, oldest first: its conversation, and the thread under it.
    pub after: &'a [Arc<Message>],
}

impl QuestionView<'_> {
    /// The asker's lines right after the question, nobody else in between (their
    /// turn goes on: "not pushed yet thankfully").
    pub fn asker_turn_after(&self) -> &[Arc<Message>] {
        let asker = self.question;
        let end = self
            .after
            .iter()
            .position(|m| m.user != asker.user || m.author != asker.author || m.thread_root != asker.thread_root)
            .unwrap_or(self.after.len());
        &self.after[..end]
    }

    /// When the asker's turn ended: the question's wait counts from then.
    pub fn asker_turn_end(&self) -> Timestamp {
        self.asker_turn_after().last().map_or(self.question.at, |m| m.at)
    }

    /// Whom the question is for when it is someone else's to answer (a mention, a
    /// name call, `nick:`), as [`rules::addressee`] tells it.
    pub fn addressee(&self, bot: &BotIdentity, people: &KnownPeople) -> Option<String> {
        rules::addressee(self.before, bot, people)
    }

    /// What closed the question by `now`, if anything did (`settings`: the expiry, the
    /// question's wait, and `REPLY_MODEL_THRESHOLD`: with it, the sure closings and the
    /// answered model decide, a name call being one of the model's features; without
    /// it, the rules of issue 34).
    pub fn closing(
        &self,
        bot: &BotIdentity,
        people: &KnownPeople,
        now: Timestamp,
        settings: &JudgeSettings,
    ) -> Option<Closing> {
        let expiry = settings.open_question_expiry.as_secs_f64();
        let closed = match settings.reply_model_threshold {
            Some(threshold) => {
                self.closed_by(bot, people, None, false).or_else(|| self.likely_answered(bot, people, now, threshold))
            }
            None => self.closed_by(bot, people, Some(settings.unanswered_question_wait), true),
        };
        closed.or_else(|| (now.seconds_since(self.question.at) > expiry).then_some(Closing::Expired))
    }

    /// Whether the answered model's probability that people answered the question (or
    /// will) reaches `threshold` as of `now`; the closing names the line it most
    /// believes answers.
    pub fn likely_answered(
        &self,
        bot: &BotIdentity,
        people: &KnownPeople,
        now: Timestamp,
        threshold: f64,
    ) -> Option<Closing> {
        let (probability, likeliest) = self.answered_probability(bot, people, now);
        (probability >= threshold).then(|| Closing::LikelyAnswered {
            by: likeliest.map(|i| self.after[i].ts.clone()),
            percent: (probability * 100.0).round().clamp(0.0, 100.0) as u8,
        })
    }

    /// What surely closed the question, whatever came before it: an answer in its
    /// thread or by name, the asker taking it back or calling kuuki, kuuki's answer in
    /// its thread. An answer picked up may still be dropped for these; a likely answer
    /// was looked for when it was judged.
    pub fn surely_closed(&self, bot: &BotIdentity, people: &KnownPeople) -> Option<Closing> {
        self.closed_by(bot, people, None, true)
    }

    /// With `likely` (the question's wait), also the
    /// lines that most likely answer it ([`Closing::NextLine`], [`Closing::SharedWords`],
    /// kuuki's answer right after the asker's turn).
    /// `names_are_sure`: a line calling the asker by name closes it ([`Closing::NamesAsker`]);
    /// the answered model reads that as one of its features instead.
    fn closed_by(
        &self,
        bot: &BotIdentity,
        people: &KnownPeople,
        likely: Option<std::time::Duration>,
        names_are_sure: bool,
    ) -> Option<Closing> {
        let next_line_by = likely.map(|wait| self.asker_turn_end() + wait);
        let likely = likely.is_some();
        let question = self.question;
        let asker = &question.user;
        let addressee = self.addressee(bot, people);
        // The people the asker called after asking.
        let mut asker_called: Vec<String> = Vec::new();
        let mut asker_spoke_since = false;
        let turn_len = self.asker_turn_after().len();
        let partner = self.talking_with();
        let one_conversation = likely && self.one_conversation(bot, people);
        let question_words = content_words(
            &std::iter::once(question.text.as_str())
                .chain(self.asker_turn_after().iter().map(|m| m.text.as_str()))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        let shares_words =
            |text: &str| !question_words.is_empty() && content_words(text).iter().any(|w| question_words.contains(w));
        for (i, m) in self.after.iter().enumerate() {
            let in_its_thread = m.thread_root.as_ref() == Some(&question.ts)
                || (question.thread_root.is_some() && m.thread_root == question.thread_root)
                || m.replies_to.as_ref() == Some(&question.ts);
            match m.author {
                Author::OwnBot => {
                    // kuuki's posts name the message they answer: the question or a line
                    // of the asker's turn.
                    let answers_the_turn = m.replies_to.as_ref().is_some_and(|answered| {
                        answered == &question.ts || self.asker_turn_after().iter().any(|t| &t.ts == answered)
                    });
                    if in_its_thread || answers_the_turn {
                        return Some(Closing::KuukiAnswered);
                    }
                    continue;
                }
                _ if m.user == *asker => {
                    if is_withdrawal(&m.text) {
                        return Some(Closing::Withdrawn);
                    }
                    if direct_trigger(m, bot).is_some() {
                        return Some(Closing::AskedKuuki);
                    }
                    // "ken: bring me a coffee?": ken's answer is to that, not the question.
                    asker_called.extend(called(m, bot, people));
                    asker_spoke_since |= i >= turn_len;
                }
                Author::OtherBot => {
                    if in_its_thread {
                        return Some(Closing::AnsweredInThread);
                    }
                }
                Author::Human => {
                    if in_its_thread {
                        return Some(Closing::AnsweredInThread);
                    }
                    let names_asker = called(m, bot, people).is_some_and(|who| is_person(question, &who, people));
                    // A name call may answer what the asker said since ("yuki: nice!"),
                    // or ask them something else (「satoさん、お昼どうします？」).
                    let answers_a_later_call = asker_spoke_since
                        || asker_called.iter().any(|who| is_person(m, who, people))
                        || about_something_else(m, shares_words(&m.text));
                    if names_are_sure && names_asker && !answers_a_later_call {
                        return Some(Closing::NamesAsker);
                    }
                    if addressee.as_deref().is_some_and(|who| is_person(m, who, people)) {
                        return Some(Closing::AddresseeSpoke);
                    }
                    // The person the asker was talking with asked kuuki about it.
                    if partner.is_some_and(|p| p == &m.user) && direct_trigger(m, bot).is_some() {
                        return Some(Closing::AskedKuuki);
                    }
                    if likely && !speaks_to_someone_else(m, question, bot, people) {
                        // A first line long after the question stood unanswered is
                        // the channel moving on, not an answer.
                        let first_after_turn = i == turn_len && next_line_by.is_some_and(|by| m.at <= by);
                        let partner_replies = partner.is_some_and(|p| p == &m.user);
                        let answer_like = partner_replies || one_conversation || opens_like_a_reply(&m.text);
                        if first_after_turn && answer_like {
                            return Some(Closing::NextLine);
                        }
                        if shares_words(&m.text) {
                            return Some(Closing::SharedWords);
                        }
                    }
                }
            }
        }
        None
    }

    /// The person the asker was just talking with: the other human who wrote last
    /// before the asker's turn, within [`TALKING_ELSEWHERE_SECONDS`], when nobody else
    /// wrote between them and the asker's line before (or before them, at all).
    fn talking_with(&self) -> Option<&crate::domain::UserId> {
        let turn = rules::turn(self.before);
        let start = self.before.len() - turn.len();
        let asker = &self.question.user;
        let mut humans = self.before[..start].iter().rev().filter(|m| m.author == Author::Human);
        // The asker's own earlier lines (before a kuuki line that split their turn) are
        // not a partner.
        let other = humans.find(|m| m.user != *asker)?;
        if turn[0].at.seconds_since(other.at) > TALKING_ELSEWHERE_SECONDS {
            return None;
        }
        let two_of_them = humans.find(|m| m.user != other.user).is_none_or(|m| m.user == *asker);
        two_of_them.then_some(&other.user)
    }
}

/// Whether the channel held one conversation when the question came: in the
/// [`TALKING_ELSEWHERE_SECONDS`] before it nobody else spoke to a particular person
/// other than the asker (by mention, name or `nick:`). Then whoever speaks next most
/// likely answers; with side talk going on, the next line is as likely another
/// conversation's, unless it opens like an answer.
impl QuestionView<'_> {
    fn one_conversation(&self, bot: &BotIdentity, people: &KnownPeople) -> bool {
        !self.before.iter().rev().take_while(|b| self.question.at.seconds_since(b.at) <= TALKING_ELSEWHERE_SECONDS).any(
            |b| {
                b.author == Author::Human
                    && b.user != self.question.user
                    && speaks_to_someone_else(b, self.question, bot, people)
            },
        )
    }
}

/// How answers open: "yes", "not yet", "you can…", 「そう」「自分見ます」. The next
/// line after a question that opens so answers it; a line that opens otherwise ("error
/// rate back to baseline", 「勉強会の告知出しました」) is as likely another
/// conversation's in a busy channel.
const REPLY_OPENINGS: &[&str] = &[
    "yes",
    "yeah",
    "yep",
    "yup",
    "no ",
    "no,",
    "no.",
    "nope",
    "nah",
    "not yet",
    "not really",
    "sure",
    "i think",
    "i guess",
    "i'd",
    "i would",
    "i can",
    "i'll",
    "i will",
    "i did",
    "i do",
    "me ",
    "me!",
    "me too",
    "probably",
    "maybe",
    "perhaps",
    "depends",
    "afaik",
    "iirc",
    "you can",
    "you need",
    "you could",
    "you should",
    "just ",
    "try ",
    "use ",
    "it's",
    "its ",
    "it is",
    "that's",
    "that is",
    "there's",
    "agree",
    "+1",
    "on it",
    "done",
    "good question",
    "not sure",
    "no idea",
    "dunno",
    "same",
    "correct",
    "right,",
    "exactly",
    "should be",
    "そう",
    "はい",
    "いいえ",
    "うん",
    "いや",
    "ええ",
    "自分",
    "私",
    "僕",
    "俺",
    "たぶん",
    "多分",
    "確か",
    "おそらく",
    "できます",
    "できる",
    "いけます",
    "いける",
    "大丈夫",
    "了解",
    "ですね",
    "それ",
    "あれ",
    "わからない",
    "分からない",
];

fn opens_like_a_reply(text: &str) -> bool {
    let lower = lowercase(text.trim_start());
    REPLY_OPENINGS.iter().any(|opening| lower.starts_with(opening))
}

/// Whether a line calling or naming the asker is about something else than their
/// question: it asks them something else (「kentaさん、歓迎ランチにしません？」) or
/// thanks them ("green! thanks dan"), sharing none of the question's words.
fn about_something_else(m: &Message, shares_words: bool) -> bool {
    !shares_words && (is_question(&m.text) || rules::is_thanks(&m.text))
}

/// Whether the lowercase `text` names `name` (lowercase) as a word: no letter, digit,
/// `_` or `-` of a nick right before or after it, so 「kentaさん」 and "ken:" name them
/// and "kenneth" does not name "ken".
pub(super) fn names(text: &str, name: &str) -> bool {
    let nick_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    text.match_indices(name).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(nick_char)
            && !text[at + name.len()..].chars().next().is_some_and(nick_char)
    })
}

/// Whether `m` is written by the person `who` names (an id, a name or a nick).
fn is_person(m: &Message, who: &str, people: &KnownPeople) -> bool {
    m.user.as_str() == who
        || lowercase(&m.user_name) == who
        || lowercase(&m.user_name).split_whitespace().next() == Some(who)
        || people.names_of(&m.user).any(|n| n == who)
}

/// Whom the line `m` calls: a person it mentions, or calls by name (「satoさん、…」,
/// "Yuki, could you…") or by `nick:` ([`rules::addressee`] of the line alone).
fn called(m: &Arc<Message>, bot: &BotIdentity, people: &KnownPeople) -> Option<String> {
    rules::addressee(std::slice::from_ref(m), bot, people)
}

/// Whether `m` calls kuuki, or someone other than the asker: then it belongs to that
/// conversation, not the question's.
fn speaks_to_someone_else(m: &Arc<Message>, question: &Message, bot: &BotIdentity, people: &KnownPeople) -> bool {
    direct_trigger(m, bot).is_some() || called(m, bot, people).is_some_and(|who| !is_person(question, &who, people))
}

/// English words that say nothing about a topic.
const STOP_WORDS: &[&str] = &[
    "the", "and", "you", "for", "but", "not", "can", "how", "was", "are", "any", "all", "its", "has", "had", "him",
    "her", "his", "she", "who", "why", "get", "got", "did", "does", "one", "our", "out", "now", "yes", "yet", "too",
    "use", "way", "see", "try", "let", "may", "off", "own", "say", "set", "new", "old", "lol", "hmm", "yep", "nope",
    "okay", "ok", "just", "i'm", "i'd", "i'll", "it's", "don't", "can't", "won't", "isn't", "you're", "we're", "about",
    "after", "again", "also", "anyone", "because", "before", "could", "does", "doing", "from", "have", "here", "into",
    "just", "know", "like", "make", "more", "need", "only", "really", "should", "some", "still", "that", "than",
    "their", "them", "then", "there", "these", "they", "thing", "this", "those", "what", "when", "where", "which",
    "while", "with", "would", "your", "yours", "it's", "that's", "what's", "there's", "thanks", "yeah", "please",
    "think", "want", "sure", "right", "good", "today", "morning",
];

/// Japanese words too common to tell a topic (method, check, setting, today …).
const JA_STOP_WORDS: &[&str] =
    &["方法", "確認", "設定", "今日", "明日", "時間", "大丈夫", "問題", "感じ", "場合", "必要", "自分", "全部", "本当"];

/// The words of `text` that carry its topic: English words of three letters or more
/// that are not common ones, runs of two or more kanji and runs of three or more
/// katakana (Japanese has no spaces: such a run is most often a word).
pub fn content_words(text: &str) -> Vec<String> {
    let lower = lowercase(text);
    let mut words: Vec<String> = lower
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| w.len() >= 3 && w.is_ascii() && !STOP_WORDS.contains(w) && !w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .collect();
    let mut run = String::new();
    let mut run_kind = None;
    for c in lower.chars().chain(std::iter::once(' ')) {
        let kind = script(c);
        if kind != run_kind {
            let long_enough = match run_kind {
                Some(Script::Kanji) => run.chars().count() >= 2,
                Some(Script::Katakana) => run.chars().count() >= 3,
                None => false,
            };
            if long_enough && !JA_STOP_WORDS.contains(&run.as_str()) {
                words.push(std::mem::take(&mut run));
            }
            run.clear();
            run_kind = kind;
        }
        if kind.is_some() {
            run.push(c);
        }
    }
    words.sort();
    words.dedup();
    words
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Script {
    Kanji,
    Katakana,
}

fn script(c: char) -> Option<Script> {
    match c {
        '\u{4E00}'..='\u{9FFF}' => Some(Script::Kanji),
        '\u{30A1}'..='\u{30FA}' | '\u{30FC}' => Some(Script::Katakana),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
