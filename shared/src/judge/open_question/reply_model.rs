//! The reply model (issue 44): the probability that a later line answers an earlier
//! question, from what kuuki has on every platform: who the line calls and whom its
//! author last talked with, how long after the question and the asker's last line it
//! came, turn-taking, the words it shares with the question weighted by how rare they
//! are in the conversation, whether it asks or opens like an answer. A logistic
//! regression learned from human reply links in annotated IRC logs
//! (`kuuki train-reply-model`, `shared/src/eval/irc/training.rs`); its weights are
//! committed in `reply_weights.json` with where they came from and their dev figures
//! (docs/judgment.md). The closing guesses of issue 34 (the next line, shared words, a
//! name call) are its features, not verdicts.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};

use crate::domain::{Author, BotIdentity, Message, UserId};

use super::super::naming::KnownPeople;
use super::super::rules::{is_question, lowercase};
use super::{
    QuestionView, TALKING_ELSEWHERE_SECONDS, about_something_else, called, content_words, is_person, names,
    opens_like_a_reply, speaks_to_someone_else,
};

/// The judge is shown at most this many lines that may answer a question…
pub const MAYBE_ANSWERS: usize = 3;
/// …each at least this likely to (by the reply model).
pub const MAYBE_ANSWER_PROBABILITY: f64 = 0.05;

/// How far back a line's author counts as having talked with the asker.
pub const TALKED_WITH_SECONDS: f64 = 600.0;

/// The features' names, in the order of [`ReplyFeatures::values`] and the weights.
pub const FEATURES: [&str; 22] = [
    "calls_asker",
    "names_asker_anywhere",
    "calls_someone_else",
    "is_addressee",
    "is_partner",
    "talked_with_asker",
    "asker_called_author_since",
    "first_after_turn",
    "lines_between",
    "seconds_since_question",
    "seconds_since_asker",
    "shared_words_rarity",
    "shares_a_word",
    "asks",
    "opens_like_a_reply",
    "asker_spoke_since",
    "one_conversation",
    "author_spoke_before",
    "length",
    "has_link",
    "question_calls_someone",
    "answers_a_call_elsewhere",
];

/// One (question, later line) pair's features, each scaled to about 0..1.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyFeatures {
    pub values: [f64; FEATURES.len()],
}

/// A later line that may answer the question: its place in the view's `after`, its
/// features and the model's probability.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub index: usize,
    pub features: ReplyFeatures,
    pub probability: f64,
}

/// The learned weights, as `kuuki train-reply-model` writes them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplyWeights {
    pub features: Vec<String>,
    pub weights: Vec<f64>,
    pub bias: f64,
    /// Where they came from: the logs, the pairs, the command.
    pub trained_on: String,
    /// Their figures on the dev logs, as the training command printed them.
    pub dev: serde_json::Value,
}

impl ReplyWeights {
    /// The probability that a line with `features` answers the question.
    pub fn probability(&self, features: &ReplyFeatures) -> f64 {
        let z = self.bias + self.weights.iter().zip(features.values.iter()).map(|(w, x)| w * x).sum::<f64>();
        1.0 / (1.0 + (-z).exp())
    }

    /// Reads weights written by the training command; their features must be this
    /// build's, in this order.
    pub fn parse(json: &str) -> Result<ReplyWeights, String> {
        let weights: ReplyWeights = serde_json::from_str(json).map_err(|e| e.to_string())?;
        if weights.features != FEATURES || weights.weights.len() != FEATURES.len() {
            return Err(format!("the weights are for features {:?}, this build has {FEATURES:?}", weights.features));
        }
        Ok(weights)
    }
}

/// The committed weights (`reply_weights.json`).
pub static REPLY_MODEL: LazyLock<ReplyWeights> = LazyLock::new(|| {
    ReplyWeights::parse(include_str!("reply_weights.json")).expect("reply_weights.json matches this build's features")
});

/// How rare each word is in a conversation: `ln((n + 1) / (lines with it + 1))`.
struct Rarity {
    lines: f64,
    lines_with: HashMap<String, u32>,
}

impl Rarity {
    fn of<'m>(messages: impl Iterator<Item = &'m Arc<Message>>) -> Rarity {
        let mut lines = 0.0;
        let mut lines_with: HashMap<String, u32> = HashMap::new();
        for m in messages {
            lines += 1.0;
            for word in content_words(&m.text) {
                *lines_with.entry(word).or_default() += 1;
            }
        }
        Rarity { lines, lines_with }
    }

    fn of_word(&self, word: &str) -> f64 {
        let with = f64::from(self.lines_with.get(word).copied().unwrap_or(0));
        ((self.lines + 1.0) / (with + 1.0)).ln()
    }
}

/// `ln(1 + x) / ln(1 + scale)`: 0 at 0, 1 at `scale`, slowly on after it.
fn log_scaled(x: f64, scale: f64) -> f64 {
    (1.0 + x.max(0.0)).ln() / (1.0 + scale).ln()
}

impl QuestionView<'_> {
    /// Every later top-level line by another person, with its features and the
    /// committed model's probability that it answers the question.
    pub fn reply_candidates(&self, bot: &BotIdentity, people: &KnownPeople) -> Vec<Candidate> {
        self.reply_features(bot, people)
            .into_iter()
            .map(|(index, features)| {
                let probability = REPLY_MODEL.probability(&features);
                Candidate { index, features, probability }
            })
            .collect()
    }

    /// The later lines the committed reply model thinks may answer the question: at
    /// most [`MAYBE_ANSWERS`] of those at [`MAYBE_ANSWER_PROBABILITY`] or more, in the
    /// order they were written (what the judge is shown at a pick-up).
    pub fn maybe_answers(&self, bot: &BotIdentity, people: &KnownPeople) -> Vec<Arc<Message>> {
        let mut candidates = self.reply_candidates(bot, people);
        candidates.retain(|c| c.probability >= MAYBE_ANSWER_PROBABILITY);
        candidates.sort_by(|a, b| b.probability.total_cmp(&a.probability).then(a.index.cmp(&b.index)));
        candidates.truncate(MAYBE_ANSWERS);
        candidates.sort_by_key(|c| c.index);
        candidates.into_iter().map(|c| self.after[c.index].clone()).collect()
    }

    /// The features of every later top-level line by another person (its index in
    /// `after`): what the model and its training read alike.
    pub fn reply_features(&self, bot: &BotIdentity, people: &KnownPeople) -> Vec<(usize, ReplyFeatures)> {
        let question = self.question;
        let asker = &question.user;
        let turn = self.asker_turn_after();
        let turn_len = turn.len();
        let question_words = content_words(
            &std::iter::once(question.text.as_str())
                .chain(turn.iter().map(|m| m.text.as_str()))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        let rarity = Rarity::of(self.before.iter().chain(self.after.iter()));
        let partner = self.talking_with().cloned();
        let addressee = self.addressee(bot, people);
        let one_conversation = self.one_conversation(bot, people);
        let talked_with = self.talked_with_asker(bot, people);
        let spoke_before: Vec<&UserId> = self
            .before
            .iter()
            .filter(|m| question.at.seconds_since(m.at) <= TALKED_WITH_SECONDS && m.author == Author::Human)
            .map(|m| &m.user)
            .collect();
        let mut asker_last = self.asker_turn_end();
        let mut asker_spoke_since = false;
        let mut asker_called: Vec<String> = Vec::new();
        let mut lines_between = 0.0;
        let mut out = Vec::new();
        for (i, m) in self.after.iter().enumerate() {
            if m.thread_root != question.thread_root {
                continue;
            }
            if m.user == *asker && m.author == question.author {
                asker_last = m.at;
                if i >= turn_len {
                    asker_spoke_since = true;
                    asker_called.extend(called(m, bot, people));
                }
                continue;
            }
            if m.author != Author::Human {
                continue;
            }
            let lower = lowercase(&m.text);
            let line_words = content_words(&m.text);
            let shared: Vec<&String> = line_words.iter().filter(|w| question_words.contains(w)).collect();
            let shared_rarity: f64 = shared.iter().map(|w| rarity.of_word(w)).sum();
            let names_anywhere = std::iter::once(lowercase(&question.user_name).into_owned())
                .chain(people.names_of(asker).map(str::to_owned))
                .filter(|name| name.chars().count() >= 3)
                .any(|name| names(&lower, &name));
            let flag = |b: bool| if b { 1.0 } else { 0.0 };
            let for_the_question = !about_something_else(m, !shared.is_empty());
            let values = [
                flag(for_the_question && called(m, bot, people).is_some_and(|who| is_person(question, &who, people))),
                flag(for_the_question && names_anywhere),
                flag(speaks_to_someone_else(m, question, bot, people)),
                flag(addressee.as_deref().is_some_and(|who| is_person(m, who, people))),
                flag(partner.as_ref() == Some(&m.user)),
                flag(talked_with.contains(&m.user)),
                flag(asker_called.iter().any(|who| is_person(m, who, people))),
                flag(i == turn_len),
                log_scaled(lines_between, 20.0),
                log_scaled(m.at.seconds_since(question.at), 600.0),
                log_scaled(m.at.seconds_since(asker_last), 600.0),
                (shared_rarity / 10.0).min(1.5),
                flag(!shared.is_empty()),
                flag(is_question(&m.text)),
                flag(opens_like_a_reply(&m.text)),
                flag(asker_spoke_since),
                flag(one_conversation),
                flag(spoke_before.contains(&&m.user)),
                log_scaled(m.text.chars().count() as f64, 200.0),
                flag(lower.contains("http://") || lower.contains("https://") || lower.contains("www.")),
                flag(addressee.is_some()),
                flag(self.answers_a_call_elsewhere(i, bot, people)),
            ];
            out.push((i, ReplyFeatures { values }));
            lines_between += 1.0;
        }
        out
    }

    /// Whether the author of `after[index]` was called, in the
    /// [`TALKING_ELSEWHERE_SECONDS`] before the line, by someone other than the asker
    /// ("marco: lunch at 12?"): their line most likely answers that call ("yeah, 12
    /// works"), not the question.
    pub(super) fn answers_a_call_elsewhere(&self, index: usize, bot: &BotIdentity, people: &KnownPeople) -> bool {
        let line = &self.after[index];
        let earlier = self.before.iter().chain(self.after[..index].iter()).rev();
        let last_call = earlier
            .take_while(|m| line.at.seconds_since(m.at) <= TALKING_ELSEWHERE_SECONDS)
            .filter(|m| m.author == Author::Human && m.user != line.user)
            .find(|m| called(m, bot, people).is_some_and(|who| is_person(line, &who, people)));
        last_call.is_some_and(|caller| caller.user != self.question.user)
    }

    /// The people who talked with the asker in the [`TALKED_WITH_SECONDS`] before the
    /// question: whom the asker called, and who called the asker.
    pub(super) fn talked_with_asker(&self, bot: &BotIdentity, people: &KnownPeople) -> Vec<UserId> {
        let question = self.question;
        let mut with = Vec::new();
        for m in self.before.iter().filter(|m| question.at.seconds_since(m.at) <= TALKED_WITH_SECONDS) {
            if m.author != Author::Human {
                continue;
            }
            let Some(who) = called(m, bot, people) else { continue };
            if m.user == question.user {
                if let Some(other) = self.before.iter().find(|b| b.user != question.user && is_person(b, &who, people))
                {
                    with.push(other.user.clone());
                }
            } else if is_person(question, &who, people) {
                with.push(m.user.clone());
            }
        }
        with
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::msg;
    use super::*;

    fn feature(features: &ReplyFeatures, name: &str) -> f64 {
        features.values[FEATURES.iter().position(|f| *f == name).expect("a feature")]
    }

    /// A busy channel: ana asks, bob and cy talk about something else, then dee answers
    /// ana by name with the question's rare word.
    #[test]
    fn features_read_who_a_line_calls_when_it_came_and_the_words_it_shares() {
        let before = vec![
            msg(0.0, "bob", "cy: did the build pass?"),
            msg(5.0, "cy", "bob: yes, green"),
            msg(10.0, "ana", "how do I mount an ntfs partition on boot?"),
        ];
        let after = vec![
            msg(12.0, "ana", "tried fstab already"),
            msg(20.0, "bob", "cy: great, thanks"),
            msg(70.0, "dee", "ana: put the ntfs partition in fstab with ntfs-3g"),
        ];
        let people = KnownPeople::of_messages(before.iter().chain(after.iter()));
        let view = QuestionView { question: &before[2], before: &before, after: &after };
        let bot = BotIdentity::new(UserId("UKUUKI".into()), "kuuki", &[]);
        let features = view.reply_features(&bot, &people);
        assert_eq!(
            features.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            [1, 2],
            "the asker's own line is no candidate"
        );
        let (bob, dee) = (&features[0].1, &features[1].1);
        assert_eq!(feature(bob, "calls_someone_else"), 1.0);
        assert_eq!(feature(bob, "calls_asker"), 0.0);
        assert_eq!(feature(bob, "first_after_turn"), 1.0);
        assert_eq!(feature(bob, "shares_a_word"), 0.0);
        assert_eq!(feature(dee, "calls_asker"), 1.0);
        assert_eq!(feature(dee, "names_asker_anywhere"), 1.0);
        assert_eq!(feature(dee, "first_after_turn"), 0.0);
        assert!(feature(dee, "shared_words_rarity") > 0.0 && feature(dee, "shares_a_word") == 1.0);
        assert!(feature(dee, "seconds_since_question") > feature(bob, "seconds_since_question"));
        assert!(feature(dee, "lines_between") > 0.0 && feature(bob, "lines_between") == 0.0);
        // The committed model believes dee answers and bob does not.
        let candidates = view.reply_candidates(&bot, &people);
        assert!(candidates[1].probability > 0.5, "{candidates:?}");
        assert!(candidates[0].probability < 0.1, "{candidates:?}");
    }

    #[test]
    fn weights_for_other_features_are_refused() {
        assert!(ReplyWeights::parse(include_str!("reply_weights.json")).is_ok());
        let other = r#"{"features": ["calls_asker"], "weights": [1.0], "bias": 0.0, "trained_on": "x", "dev": null}"#;
        let error = ReplyWeights::parse(other).expect_err("another build's features");
        assert!(error.contains("calls_asker"), "{error}");
        assert!(ReplyWeights::parse("{").is_err());
    }
}
