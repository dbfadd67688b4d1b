//! The answered model (issue 44): the probability that people have answered a question,
//! or will, read from everything that followed it until a pick-up looks. The reply
//! model ([`super::reply_model`]) scores each later line alone; which questions people
//! take up shows as much in the question's whole aftermath: whether anyone called the
//! asker, whether the asker answered someone or thanked them, asked again, or fell
//! silent while others talked among themselves, how long since. Gradient-boosted trees
//! over those features, learned from human reply links in annotated IRC logs
//! (`kuuki train-reply-model`, `shared/src/eval/irc/boosting.rs`), committed in
//! `answered_model.json` with where they came from and their dev figures. Evaluated in
//! microseconds: a few hundred comparisons.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};

use crate::domain::{Author, BotIdentity, Message, Timestamp, UserId};

use super::super::naming::KnownPeople;
use super::super::rules::{is_question, lowercase};
use super::reply_model::{REPLY_MODEL, ReplyWeights, TALKED_WITH_SECONDS};
use super::{
    QuestionView, about_something_else, called, content_words, is_person, names, opens_like_a_reply,
    speaks_to_someone_else,
};

/// What a feature reads when what it times never happened.
pub const NEVER_SECONDS: f64 = 3600.0;

/// The features' names, in the order of [`AnsweredFeatures::values`].
pub const FEATURES: [&str; 28] = [
    "seconds_since_turn",
    "best_reply",
    "second_reply",
    "question_calls_someone",
    "addressee_spoke",
    "lines_calling_asker",
    "lines_naming_asker",
    "first_naming_seconds",
    "asker_lines_since",
    "asker_called_someone",
    "asker_called_back",
    "asker_thanks",
    "asker_asked_again",
    "first_asker_seconds",
    "other_lines",
    "other_people",
    "first_other_seconds",
    "first_other_opens_like_a_reply",
    "first_other_calls_someone_else",
    "first_other_answers_a_call_elsewhere",
    "lines_sharing_words",
    "talked_with_someone",
    "has_partner",
    "one_conversation",
    "asker_lines_before",
    "people_before",
    "question_length",
    "asks_anyone",
];

/// Words with which an asker thanks whoever helped ("thanks", 「ありがとう」).
const THANKS: &[&str] = &[
    "thanks",
    "thank you",
    "thx",
    "thank u",
    "cheers",
    "ty ",
    "that worked",
    "it worked",
    "works now",
    "ありがとう",
    "助かり",
    "できました",
];

/// Words that ask the room rather than a person ("anyone", 「誰か」).
const ASKS_ANYONE: &[&str] =
    &["anyone", "any one", "anybody", "someone", "somebody", "does any", "誰か", "だれか", "どなたか"];

/// One question's features as of a look.
#[derive(Debug, Clone, PartialEq)]
pub struct AnsweredFeatures {
    pub values: [f64; FEATURES.len()],
    /// The later line the reply model most believes answers it (its index in `after`).
    pub likeliest: Option<usize>,
}

/// A tree's node: a split sends a row to `yes` when its feature is below `below`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Node {
    Split { feature: usize, below: f64, yes: usize, no: usize },
    Leaf { value: f64 },
}

/// The learned trees, as `kuuki train-reply-model` writes them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnsweredModel {
    pub features: Vec<String>,
    pub base: f64,
    pub trees: Vec<Vec<Node>>,
    /// Where they came from: the logs, the rows, the command.
    pub trained_on: String,
    /// Their figures on the dev logs, as the training command printed them.
    pub dev: serde_json::Value,
}

impl AnsweredModel {
    /// The probability that the question with `features` is answered.
    pub fn probability(&self, features: &AnsweredFeatures) -> f64 {
        let z = self.base + self.trees.iter().map(|tree| value_of(tree, &features.values)).sum::<f64>();
        1.0 / (1.0 + (-z).exp())
    }

    /// Reads a model the training command wrote: its features must be this build's, in
    /// this order, and every split must point further down its tree (so reading one
    /// always ends at a leaf).
    pub fn parse(json: &str) -> Result<AnsweredModel, String> {
        let model: AnsweredModel = serde_json::from_str(json).map_err(|e| e.to_string())?;
        if model.features != FEATURES {
            return Err(format!("the model is for features {:?}, this build has {FEATURES:?}", model.features));
        }
        for (t, tree) in model.trees.iter().enumerate() {
            for (at, node) in tree.iter().enumerate() {
                if let Node::Split { feature, yes, no, .. } = node
                    && (*feature >= FEATURES.len()
                        || *yes <= at
                        || *no <= at
                        || *yes >= tree.len()
                        || *no >= tree.len())
                {
                    return Err(format!("tree {t} node {at} points outside the tree or its features"));
                }
            }
            if tree.is_empty() {
                return Err(format!("tree {t} is empty"));
            }
        }
        Ok(model)
    }

    /// The model as a file: its header pretty, one tree a line.
    pub fn to_file_text(&self) -> String {
        let trees: Vec<String> = self.trees.iter().map(|t| format!("    {}", compact(t))).collect();
        format!(
            "{{\n  \"features\": {},\n  \"base\": {},\n  \"trained_on\": {},\n  \"dev\": {},\n  \"trees\": [\n{}\n  ]\n}}\n",
            compact(&self.features),
            compact(&self.base),
            compact(&self.trained_on),
            serde_json::to_string_pretty(&self.dev).unwrap_or_default().replace('\n', "\n  "),
            trees.join(",\n")
        )
    }
}

fn compact<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The value `tree` gives the feature values `x`.
pub fn value_of(tree: &[Node], x: &[f64]) -> f64 {
    let mut at = 0;
    loop {
        match &tree[at] {
            Node::Leaf { value } => return *value,
            Node::Split { feature, below, yes, no } => at = if x[*feature] < *below { *yes } else { *no },
        }
    }
}

/// The committed model (`answered_model.json`).
pub static ANSWERED_MODEL: LazyLock<AnsweredModel> = LazyLock::new(|| {
    AnsweredModel::parse(include_str!("answered_model.json"))
        .expect("answered_model.json matches this build's features")
});

fn contains_any(text: &str, words: &[&str]) -> bool {
    let lower = format!("{} ", lowercase(text));
    words.iter().any(|w| lower.contains(w))
}

impl QuestionView<'_> {
    /// The question's features as of `now`, reading only the lines before it, with the
    /// reply model `reply` scoring each later line.
    pub fn answered_features(
        &self,
        bot: &BotIdentity,
        people: &KnownPeople,
        now: Timestamp,
        reply: &ReplyWeights,
    ) -> AnsweredFeatures {
        let seen = self.after.partition_point(|m| m.at <= now);
        let view = QuestionView { question: self.question, before: self.before, after: &self.after[..seen] };
        view.features_of_seen(bot, people, now, reply)
    }

    /// [`Self::answered_features`] of a view holding only the lines seen by `now`.
    fn features_of_seen(
        &self,
        bot: &BotIdentity,
        people: &KnownPeople,
        now: Timestamp,
        reply: &ReplyWeights,
    ) -> AnsweredFeatures {
        let question = self.question;
        let asker = &question.user;
        let turn = self.asker_turn_after();
        let turn_end = self.asker_turn_end();
        let mut scored: Vec<(usize, f64)> = self
            .reply_features(bot, people)
            .into_iter()
            .map(|(i, features)| (i, reply.probability(&features)))
            .collect();
        // The likeliest first; of equals, the earlier line.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let addressee = self.addressee(bot, people);
        let asker_names: Vec<String> = std::iter::once(lowercase(&question.user_name).into_owned())
            .chain(people.names_of(asker).map(str::to_owned))
            .filter(|name| name.chars().count() >= 3)
            .collect();
        let names_asker = |m: &Message| {
            let lower = lowercase(&m.text);
            asker_names.iter().any(|name| names(&lower, name))
        };
        let question_words = content_words(
            &std::iter::once(question.text.as_str())
                .chain(turn.iter().map(|m| m.text.as_str()))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        let mut f = Tally::default();
        let mut namers: HashSet<&UserId> = HashSet::new();
        let mut others: HashSet<&UserId> = HashSet::new();
        for (i, m) in self.after.iter().enumerate() {
            if m.thread_root != question.thread_root || m.author != Author::Human {
                continue;
            }
            let since_turn = m.at.seconds_since(turn_end);
            if m.user == *asker {
                if i < turn.len() {
                    continue;
                }
                f.asker_lines += 1.0;
                f.first_asker.get_or_insert(since_turn);
                if let Some(who) = called(m, bot, people) {
                    f.asker_called = true;
                    if namers
                        .iter()
                        .any(|namer| self.after.iter().any(|n| &n.user == *namer && is_person(n, &who, people)))
                    {
                        f.asker_called_back = true;
                    }
                }
                f.asker_thanks |= contains_any(&m.text, THANKS);
                f.asker_asked_again |= is_question(&m.text);
                continue;
            }
            others.insert(&m.user);
            f.other_lines += 1.0;
            if f.first_other.is_none() {
                f.first_other = Some(since_turn);
                f.first_opens_like_a_reply = opens_like_a_reply(&m.text);
                f.first_calls_someone_else = speaks_to_someone_else(m, question, bot, people);
                f.first_answers_elsewhere = self.answers_a_call_elsewhere(i, bot, people);
            }
            if addressee.as_deref().is_some_and(|who| is_person(m, who, people)) {
                f.addressee_spoke = true;
            }
            let shares_words =
                !question_words.is_empty() && content_words(&m.text).iter().any(|w| question_words.contains(w));
            if shares_words {
                f.sharing += 1.0;
            }
            if about_something_else(m, shares_words) {
                continue;
            }
            if called(m, bot, people).is_some_and(|who| is_person(question, &who, people)) {
                f.calling += 1.0;
            }
            if names_asker(m) {
                f.naming += 1.0;
                f.first_naming.get_or_insert(m.at.seconds_since(question.at));
                namers.insert(&m.user);
            }
        }
        let recent_before: Vec<&Arc<Message>> = self.before[..self.before.len().saturating_sub(1)]
            .iter()
            .filter(|m| m.author == Author::Human && question.at.seconds_since(m.at) <= TALKED_WITH_SECONDS)
            .collect();
        let people_before: HashSet<&UserId> = recent_before.iter().map(|m| &m.user).collect();
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        let question_text_len: usize =
            question.text.chars().count() + turn.iter().map(|m| m.text.chars().count()).sum::<usize>();
        let values = [
            now.seconds_since(turn_end).max(0.0),
            scored.first().map_or(0.0, |s| s.1),
            scored.get(1).map_or(0.0, |s| s.1),
            flag(addressee.is_some()),
            flag(f.addressee_spoke),
            f.calling,
            f.naming,
            f.first_naming.unwrap_or(NEVER_SECONDS),
            f.asker_lines,
            flag(f.asker_called),
            flag(f.asker_called_back),
            flag(f.asker_thanks),
            flag(f.asker_asked_again),
            f.first_asker.unwrap_or(NEVER_SECONDS),
            f.other_lines,
            others.len() as f64,
            f.first_other.unwrap_or(NEVER_SECONDS),
            flag(f.first_opens_like_a_reply),
            flag(f.first_calls_someone_else),
            flag(f.first_answers_elsewhere),
            f.sharing,
            flag(!self.talked_with_asker(bot, people).is_empty()),
            flag(self.talking_with().is_some()),
            flag(self.one_conversation(bot, people)),
            recent_before.iter().filter(|m| m.user == *asker).count() as f64,
            people_before.len() as f64,
            question_text_len as f64,
            flag(contains_any(&question.text, ASKS_ANYONE)),
        ];
        AnsweredFeatures { values, likeliest: scored.first().map(|s| s.0) }
    }

    /// The committed model's probability that the question is answered as of `now`,
    /// and the line it most believes answers it.
    pub fn answered_probability(
        &self,
        bot: &BotIdentity,
        people: &KnownPeople,
        now: Timestamp,
    ) -> (f64, Option<usize>) {
        let features = self.answered_features(bot, people, now, &REPLY_MODEL);
        (ANSWERED_MODEL.probability(&features), features.likeliest)
    }
}

/// What the walk over the later lines counts.
#[derive(Default)]
struct Tally {
    asker_lines: f64,
    first_asker: Option<f64>,
    asker_called: bool,
    asker_called_back: bool,
    asker_thanks: bool,
    asker_asked_again: bool,
    other_lines: f64,
    first_other: Option<f64>,
    first_opens_like_a_reply: bool,
    first_calls_someone_else: bool,
    first_answers_elsewhere: bool,
    addressee_spoke: bool,
    calling: f64,
    naming: f64,
    first_naming: Option<f64>,
    sharing: f64,
}

#[cfg(test)]
mod tests {
    use super::super::tests::msg;
    use super::*;

    fn feature(features: &AnsweredFeatures, name: &str) -> f64 {
        features.values[FEATURES.iter().position(|f| *f == name).expect("a feature")]
    }

    fn bot() -> BotIdentity {
        BotIdentity::new(UserId("UKUUKI".into()), "kuuki", &[])
    }

    fn busy_before(question: &str) -> Vec<Arc<Message>> {
        vec![msg(0.0, "bob", "cy: did the build pass?"), msg(5.0, "cy", "bob: yes, green"), msg(10.0, "ana", question)]
    }

    /// The aftermath read as of `now` seconds.
    fn features_at(before: &[Arc<Message>], after: &[Arc<Message>], now: f64) -> (AnsweredFeatures, f64) {
        let people = KnownPeople::of_messages(before.iter().chain(after.iter()));
        let view = QuestionView { question: before.last().unwrap(), before, after };
        let now = before[0].at + std::time::Duration::from_secs_f64(now);
        let features = view.answered_features(&bot(), &people, now, &REPLY_MODEL);
        let probability = ANSWERED_MODEL.probability(&features);
        (features, probability)
    }

    /// An answer by name with the question's word, the asker thanking: the features
    /// say so and the committed model believes it answered; the same channel talking
    /// on without a word to the asker, who asks again, leaves it most likely open.
    #[test]
    fn features_read_the_questions_aftermath() {
        let before = busy_before("how do I mount an ntfs partition on boot?");
        let answered = vec![
            msg(20.0, "bob", "cy: great, thanks"),
            msg(70.0, "dee", "ana: put the ntfs partition in fstab with ntfs-3g"),
            msg(80.0, "ana", "dee: thanks, that worked"),
            msg(400.0, "eve", "ana: also try nofail"),
        ];
        let (f, p) = features_at(&before, &answered, 190.0);
        assert_eq!(feature(&f, "seconds_since_turn"), 180.0);
        assert_eq!(feature(&f, "lines_calling_asker"), 1.0, "{f:?}");
        assert_eq!(feature(&f, "lines_naming_asker"), 1.0, "the line after the look is not read: {f:?}");
        assert_eq!(feature(&f, "first_naming_seconds"), 60.0);
        assert_eq!(feature(&f, "asker_called_someone"), 1.0);
        assert_eq!(feature(&f, "asker_called_back"), 1.0);
        assert_eq!(feature(&f, "asker_thanks"), 1.0);
        assert_eq!(feature(&f, "other_lines"), 2.0);
        assert_eq!(feature(&f, "other_people"), 2.0);
        assert_eq!(feature(&f, "first_other_seconds"), 10.0);
        assert_eq!(feature(&f, "first_other_calls_someone_else"), 1.0);
        assert_eq!(feature(&f, "lines_sharing_words"), 1.0);
        assert!(feature(&f, "best_reply") > 0.5, "{f:?}");
        assert_eq!(f.likeliest, Some(1), "dee's line");
        assert!(p > 0.8, "{p}");
        let answered_p = p;

        let mut hanging: Vec<Arc<Message>> = [
            ("bob", "cy: great, thanks"),
            ("cy", "bob: np"),
            ("dee", "eve: lunch?"),
            ("eve", "dee: sure"),
            ("bob", "cy: deploying now"),
            ("fay", "gus: did you get my email?"),
            ("gus", "fay: yes, replying now"),
            ("cy", "bob: canary looks fine"),
            ("dee", "eve: ramen or curry?"),
            ("eve", "dee: ramen"),
            ("bob", "cy: rolling to 100%"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (who, text))| msg(20.0 + 15.0 * i as f64, who, text))
        .collect();
        hanging.insert(7, msg(120.0, "ana", "anyone?"));
        // A busy channel before the question too.
        let mut crowd: Vec<Arc<Message>> = ["hal", "ivy", "jo", "kim", "lou"]
            .iter()
            .enumerate()
            .map(|(i, who)| msg(-300.0 + 40.0 * i as f64, who, "bob: morning"))
            .collect();
        crowd.extend(before.iter().cloned());
        let (f, p) = features_at(&crowd, &hanging, 490.0);
        assert_eq!(feature(&f, "lines_naming_asker"), 0.0);
        assert_eq!(feature(&f, "first_naming_seconds"), NEVER_SECONDS);
        assert_eq!(feature(&f, "asker_asked_again"), 1.0);
        assert_eq!(feature(&f, "first_asker_seconds"), 110.0);
        assert_eq!(feature(&f, "other_lines"), 11.0);
        assert_eq!(feature(&f, "other_people"), 6.0);
        // In #ubuntu about one such question in four still gets an answer later: the
        // model says so, and a help channel's threshold (0.25-0.3) decides.
        assert!(p < 0.3 && p < answered_p / 3.0, "{p}: {f:?}");
    }

    /// A name call that asks the asker something else, or thanks them, is not read as
    /// naming them for their question; 「kentaさん」 names kenta, "kenneth" not ken.
    #[test]
    fn a_name_call_about_something_else_is_not_an_answer_and_names_read_japanese_honorifics() {
        let before = busy_before("where are the nginx logs kept on staging?");
        for line in ["ana, are you joining the 3pm sync?", "green! thanks ana & bob", "anaさん、お昼行きます？"]
        {
            let (f, _) = features_at(&before, &[msg(20.0, "dee", line)], 190.0);
            assert_eq!(feature(&f, "lines_calling_asker") + feature(&f, "lines_naming_asker"), 0.0, "{line}");
        }
        let (f, _) = features_at(&before, &[msg(20.0, "dee", "anaさん、/var/log/nginx です")], 190.0);
        assert_eq!(feature(&f, "lines_naming_asker"), 1.0, "{f:?}");
        assert!(super::super::names("kentaさん、どうぞ", "kenta"));
        assert!(super::super::names("ken: try this", "ken"));
        assert!(!super::super::names("kenneth: try this", "ken"));
        assert!(!super::super::names("ask_ken", "ken"));
    }

    /// "marco: lunch at 12?" then marco's "yeah, 12 works": his line answers that call.
    #[test]
    fn a_line_answering_a_call_elsewhere_is_read_as_such() {
        let before = vec![
            msg(0.0, "lena", "marco: lunch at 12?"),
            msg(10.0, "ana", "where are the nginx logs kept on staging?"),
        ];
        let after = vec![msg(20.0, "marco", "yeah, 12 works"), msg(30.0, "dee", "yeah, in /var/log/nginx")];
        let (f, _) = features_at(&before, &after, 190.0);
        assert_eq!(feature(&f, "first_other_answers_a_call_elsewhere"), 1.0);
        let people = KnownPeople::of_messages(before.iter().chain(after.iter()));
        let view = QuestionView { question: &before[1], before: &before, after: &after };
        assert!(view.answers_a_call_elsewhere(0, &bot(), &people));
        assert!(!view.answers_a_call_elsewhere(1, &bot(), &people));
    }

    #[test]
    fn models_for_other_features_or_with_broken_trees_are_refused() {
        let model = AnsweredModel::parse(include_str!("answered_model.json")).expect("the committed model");
        assert_eq!(AnsweredModel::parse(&model.to_file_text()).expect("written and read again").trees, model.trees);
        let other = r#"{"features": ["x"], "base": 0.0, "trees": [[{"value": 0.0}]], "trained_on": "", "dev": null}"#;
        assert!(AnsweredModel::parse(other).expect_err("other features").contains("features"));
        let backwards = AnsweredModel {
            trees: vec![vec![Node::Split { feature: 0, below: 1.0, yes: 0, no: 1 }, Node::Leaf { value: 0.0 }]],
            ..model.clone()
        };
        assert!(AnsweredModel::parse(&backwards.to_file_text()).is_err(), "a split pointing back would loop");
        let outside = AnsweredModel {
            trees: vec![vec![Node::Split { feature: FEATURES.len(), below: 1.0, yes: 1, no: 2 }]],
            ..model.clone()
        };
        assert!(AnsweredModel::parse(&outside.to_file_text()).is_err());
        assert!(AnsweredModel::parse("{").is_err());
    }

    /// A tree sends a row left when its feature is below the split, else right; the
    /// probability is the logistic of the base plus the trees' values.
    #[test]
    fn trees_are_read_left_below_the_split() {
        let tree = vec![
            Node::Split { feature: 1, below: 0.5, yes: 1, no: 2 },
            Node::Leaf { value: -1.0 },
            Node::Leaf { value: 2.0 },
        ];
        let mut x = [0.0; FEATURES.len()];
        assert_eq!(value_of(&tree, &x), -1.0);
        x[1] = 0.5;
        assert_eq!(value_of(&tree, &x), 2.0);
        let model = AnsweredModel {
            features: FEATURES.iter().map(|f| f.to_string()).collect(),
            base: -2.0,
            trees: vec![tree],
            trained_on: String::new(),
            dev: serde_json::Value::Null,
        };
        let p = model.probability(&AnsweredFeatures { values: x, likeliest: None });
        assert!((p - 0.5).abs() < 1e-12, "{p}");
    }
}
