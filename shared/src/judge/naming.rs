//! IRC and chat naming (issue 34): `nick: text` and `nick, text` at the start of a
//! line address that person, as a `<@id>` mention does. Busy channels answer by name
//! prefix; without this a reply "bob: try the staging flag" reads as a remark to the
//! room, and a question "bob: is the build green?" as an open question for anyone.
//! Pure functions, like the rest of the rules.

use std::sync::Arc;

use crate::domain::{Author, Message, UserId};

use super::rules::lowercase;

/// The people of a channel kuuki can tell by name: the humans of its recent window,
/// by the name their messages carry and, on a platform whose messages carry only an
/// id (Slack), by their display name.
#[derive(Debug, Default, Clone)]
pub struct KnownPeople {
    /// (person, lowercase name); one person may have several names.
    names: Vec<(UserId, String)>,
}

impl KnownPeople {
    pub fn new<'a>(people: impl IntoIterator<Item = (&'a UserId, &'a str)>) -> Self {
        let mut names: Vec<(UserId, String)> = Vec::new();
        for (user, name) in people {
            let name = lowercase(name.trim()).into_owned();
            if !name.is_empty() && !names.iter().any(|(u, n)| u == user && *n == name) {
                names.push((user.clone(), name));
            }
        }
        KnownPeople { names }
    }

    /// The humans of `messages`, by the names their messages carry.
    pub fn of_messages<'m>(messages: impl IntoIterator<Item = &'m Arc<Message>>) -> Self {
        Self::new(messages.into_iter().filter(|m| m.author == Author::Human).map(|m| (&m.user, m.user_name.as_str())))
    }

    /// Adds more names (display names looked up for the same people).
    pub fn extend(&mut self, more: KnownPeople) {
        for (user, name) in more.names {
            if !self.names.iter().any(|(u, n)| *u == user && *n == name) {
                self.names.push((user, name));
            }
        }
    }

    /// The name of the person other than `speaker` whom `nick` (lowercase) names: their
    /// whole name, or its first word ("yuki" for "Yuki Tanaka").
    pub fn named(&self, nick: &str, speaker: &UserId) -> Option<&str> {
        self.names
            .iter()
            .find(|(user, name)| user != speaker && (name == nick || name.split_whitespace().next() == Some(nick)))
            .map(|(_, name)| name.as_str())
    }

    /// Every name `user` goes by, and the first word of each (what a nick call uses).
    pub fn names_of<'s>(&'s self, user: &'s UserId) -> impl Iterator<Item = &'s str> + 's {
        self.names.iter().filter(move |(u, _)| u == user).flat_map(|(_, name)| {
            let first = name.split_whitespace().next().filter(|w| w != name);
            std::iter::once(name.as_str()).chain(first)
        })
    }

    /// The people `nick` (lowercase) names: their whole name, or its first word.
    pub fn users_named<'s>(&'s self, nick: &'s str) -> impl Iterator<Item = UserId> + 's {
        self.names
            .iter()
            .filter(move |(_, name)| name == nick || name.split_whitespace().next() == Some(nick))
            .map(|(user, _)| user.clone())
    }

    /// Whether `nick` names anyone at all, the speaker included.
    pub fn knows(&self, nick: &str) -> bool {
        self.names.iter().any(|(_, name)| name == nick || name.split_whitespace().next() == Some(nick))
    }
}

/// The nicks that open lines of `text` as `nick: …` or `nick, …` (lowercase, a leading
/// `@` dropped): the word before the first `:`/`,` of a line, made of the characters
/// nicks are made of. "12:30" and "https://…" open with no nick anyone has.
pub fn line_openings(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().filter_map(|line| {
        let line = line.trim_start();
        let line = line.strip_prefix('@').unwrap_or(line);
        let end = line.find(|c: char| !is_nick_char(c))?;
        let (nick, rest) = line.split_at(end);
        let called = rest.starts_with([':', ',', '：', '，']) && !rest.starts_with("://");
        (called && !nick.is_empty() && nick.chars().count() <= 32 && !nick.chars().all(|c| c.is_ascii_digit()))
            .then(|| lowercase(nick).into_owned())
    })
}

/// Characters of an IRC nick (RFC 2812's letters, digits and specials) and of chat
/// display names' first words (any letter, so 「たろう: …」 too).
fn is_nick_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '[' | ']' | '\\' | '`' | '^' | '{' | '}' | '|' | '.')
}

/// Whom a turn calls by nick: the first line of its messages that opens with the name
/// of a known person other than the speaker. kuuki's own names are direct triggers,
/// not this.
pub fn called_by_nick(turn: &[Arc<Message>], people: &KnownPeople) -> Option<String> {
    let speaker = &turn.last()?.user;
    turn.iter().flat_map(|m| line_openings(&m.text)).find_map(|nick| people.named(&nick, speaker).map(|_| nick))
}

/// Whether a turn opens a line with a nick none of `people` has: on a platform whose
/// messages carry only an id, the display names are worth looking up.
pub fn has_unknown_nick(turn: &[Arc<Message>], people: &KnownPeople) -> bool {
    turn.iter().flat_map(|m| line_openings(&m.text)).any(|nick| !people.knows(&nick))
}
