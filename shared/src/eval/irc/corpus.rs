//! The IRC disentanglement corpus' files (Kummerfeld et al., ACL 2019): `NAME.ascii.txt`,
//! one message a line, and `NAME.annotation.txt`, one reply link a line. Read as the
//! reference measure reads them (`../shared/irc/measure.py`), so `kuuki eval irc` and a
//! model trained on the same logs see the same lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Where the shared corpus' training logs are, from the repository's root (77 #ubuntu
/// logs; the repository vendors only the dev logs, `eval/irc/dev`).
pub const SHARED_TRAIN_DIR: &str = "../shared/irc/train";

const LOG_SUFFIX: &str = ".ascii.txt";
const ANNOTATION_SUFFIX: &str = ".annotation.txt";

/// A chat line: `[hh:mm] <nick> text`, or `channel yyyy-mm-dd [hh:mm:ss] <nick> text` as
/// some channels' logs are kept. System lines (`=== x has joined`) are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatLine {
    pub hour: u32,
    pub minute: u32,
    pub second: Option<u32>,
    pub nick: String,
    /// As written after the nick (not stripped).
    pub text: String,
}

impl ChatLine {
    /// Minutes since midnight (seconds are not used: most logs have none).
    pub fn minute_of_day(&self) -> i64 {
        i64::from(self.hour) * 60 + i64::from(self.minute)
    }
}

/// Whitespace as Python's `str.isspace` (and so the reference's `\s` and `strip()`) has
/// it: Unicode's, and the four ASCII separators.
pub(crate) fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// `text` without leading and trailing whitespace, as Python's `str.strip()`.
pub(crate) fn python_strip(text: &str) -> &str {
    text.trim_matches(is_python_space)
}

/// Reads one log line, as the reference's pattern
/// `^(?:\S+ \d{4}-\d\d-\d\d )?\[(\d\d):(\d\d)(?::(\d\d))?\] <([^>]+)>\s(.*)$` does
/// (digits ASCII: the corpus is).
pub fn parse_chat_line(line: &str) -> Option<ChatLine> {
    prefixed(line).or_else(|| bracketed(line))
}

/// `channel yyyy-mm-dd ` before the bracket.
fn prefixed(line: &str) -> Option<ChatLine> {
    let channel_end = line.find(is_python_space).filter(|&end| end > 0)?;
    let rest = line[channel_end..].strip_prefix(' ')?;
    let date = rest.get(..11)?.as_bytes();
    let digits = |range: std::ops::Range<usize>| date[range].iter().all(u8::is_ascii_digit);
    let is_date =
        digits(0..4) && date[4] == b'-' && digits(5..7) && date[7] == b'-' && digits(8..10) && date[10] == b' ';
    if !is_date {
        return None;
    }
    bracketed(&rest[11..])
}

/// `[hh:mm] <nick> text` or `[hh:mm:ss] <nick> text`.
fn bracketed(line: &str) -> Option<ChatLine> {
    let rest = line.strip_prefix('[')?;
    let (hour, rest) = two_digits(rest)?;
    let (minute, rest) = two_digits(rest.strip_prefix(':')?)?;
    let (second, rest) = match rest.strip_prefix(':').and_then(two_digits) {
        Some((second, rest)) => (Some(second), rest),
        None => (None, rest),
    };
    let rest = rest.strip_prefix("] <")?;
    let nick_end = rest.find('>').filter(|&end| end > 0)?;
    let nick = &rest[..nick_end];
    let mut after = rest[nick_end + 1..].chars();
    if !after.next().is_some_and(is_python_space) {
        return None;
    }
    Some(ChatLine { hour, minute, second, nick: nick.to_owned(), text: after.as_str().to_owned() })
}

fn two_digits(text: &str) -> Option<(u32, &str)> {
    let digits = text.get(..2)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, &text[2..]))
}

#[derive(Debug, Error, PartialEq)]
pub enum CorpusError {
    #[error("{file} line {line}: expected `A B -` (two line numbers and a mark), not {text:?}")]
    Annotation { file: String, line: usize, text: String },
    #[error("reading {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("no logs (`*{LOG_SUFFIX}`) in {0}")]
    NoLogs(String),
}

/// One annotated log.
#[derive(Debug, Clone, PartialEq)]
pub struct IrcLog {
    /// The file name without `.ascii.txt`, e.g. `2004-11-15_03`.
    pub name: String,
    /// Every line of the log, numbered from 0 as the annotation numbers them.
    pub lines: Vec<String>,
    /// The annotation: line -> the later lines that reply to it. `A A` (the start of a
    /// conversation) is kept as A replying to itself.
    pub replies: BTreeMap<usize, BTreeSet<usize>>,
}

/// A chat line of a log, for training: who said what when, and which lines it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct IrcMessage {
    /// The line number (the annotation's).
    pub line: usize,
    /// Minutes since the midnight before the log's first chat line: a clock more than ten
    /// hours behind the line before starts the next day, as in the reference measure.
    pub minute: i64,
    pub nick: String,
    /// Stripped of surrounding whitespace; may be empty.
    pub text: String,
    /// The earlier lines this one replies to, by the annotation (none: unannotated, or
    /// the start of a conversation).
    pub replies_to: Vec<usize>,
}

/// A clock this many minutes behind the line before it has passed midnight.
pub(crate) const NEXT_DAY_AFTER_MINUTES_BACK: i64 = 600;

impl IrcLog {
    /// Reads a log's text and its annotation's text (`A B -` a line, B replying to A).
    pub fn parse(name: &str, log: &str, annotation: &str) -> Result<Self, CorpusError> {
        let lines = universal_newlines(log).split('\n').map(str::to_owned).collect();
        let mut replies: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (i, raw) in universal_newlines(annotation).lines().enumerate() {
            let fields: Vec<&str> = raw.split(is_python_space).filter(|f| !f.is_empty()).collect();
            if fields.is_empty() {
                continue;
            }
            let wrong = || CorpusError::Annotation {
                file: format!("{name}{ANNOTATION_SUFFIX}"),
                line: i + 1,
                text: raw.to_owned(),
            };
            let [a, b, _] = fields[..] else { return Err(wrong()) };
            let (a, b): (usize, usize) = (a.parse().map_err(|_| wrong())?, b.parse().map_err(|_| wrong())?);
            replies.entry(a.min(b)).or_default().insert(a.max(b));
        }
        Ok(IrcLog { name: name.to_owned(), lines, replies })
    }

    /// The chat line at `line`, if it is one.
    pub fn chat_line(&self, line: usize) -> Option<ChatLine> {
        self.lines.get(line).and_then(|l| parse_chat_line(l))
    }

    /// The first annotated line: the first the annotation links to an earlier line or
    /// marks as a conversation's start (1000 in the #ubuntu logs; their links may reach
    /// back into the context lines before it).
    pub fn first_annotated_line(&self) -> Option<usize> {
        self.replies.values().filter_map(|children| children.first()).min().copied()
    }

    /// Every chat line of the log in order, with its time and the lines it replies to.
    pub fn messages(&self) -> Vec<IrcMessage> {
        let mut parents: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (&parent, children) in &self.replies {
            for &child in children.iter().filter(|&&c| c != parent) {
                parents.entry(child).or_default().push(parent);
            }
        }
        let mut day = 0;
        let mut last_minute = None;
        let mut out = Vec::new();
        for (line, text) in self.lines.iter().enumerate() {
            let Some(chat) = parse_chat_line(text) else { continue };
            let minute = chat.minute_of_day();
            if last_minute.is_some_and(|last| minute < last - NEXT_DAY_AFTER_MINUTES_BACK) {
                day += 1;
            }
            last_minute = Some(minute);
            out.push(IrcMessage {
                line,
                minute: day * 1440 + minute,
                text: python_strip(&chat.text).to_owned(),
                nick: chat.nick,
                replies_to: parents.remove(&line).unwrap_or_default(),
            });
        }
        out
    }
}

/// Line ends as Python's text files read them: `\r\n` and a lone `\r` are `\n`.
fn universal_newlines(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\r') { text.replace("\r\n", "\n").replace('\r', "\n").into() } else { text.into() }
}

/// The names of the logs in `dir` (`NAME.ascii.txt`), sorted.
pub fn log_names(dir: &Path) -> Result<Vec<String>, CorpusError> {
    let unreadable = |e: std::io::Error| CorpusError::Read { path: dir.display().to_string(), reason: e.to_string() };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let file_name = entry.map_err(unreadable)?.file_name();
        if let Some(name) = file_name.to_str().and_then(|n| n.strip_suffix(LOG_SUFFIX)) {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Reads the log `name` of `dir` and its annotation (undecodable bytes become U+FFFD).
pub fn read_log(dir: &Path, name: &str) -> Result<IrcLog, CorpusError> {
    let read = |suffix: &str| {
        let path: PathBuf = dir.join(format!("{name}{suffix}"));
        std::fs::read(&path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|e| CorpusError::Read { path: path.display().to_string(), reason: e.to_string() })
    };
    IrcLog::parse(name, &read(LOG_SUFFIX)?, &read(ANNOTATION_SUFFIX)?)
}

/// Every log of `dir`, in name order: for a training command, e.g. on
/// [`SHARED_TRAIN_DIR`], each log's [`IrcLog::messages`] with their reply links.
pub fn read_logs(dir: &Path) -> Result<Vec<IrcLog>, CorpusError> {
    let names = log_names(dir)?;
    if names.is_empty() {
        return Err(CorpusError::NoLogs(dir.display().to_string()));
    }
    names.iter().map(|name| read_log(dir, name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(hour: u32, minute: u32, second: Option<u32>, nick: &str, text: &str) -> Option<ChatLine> {
        Some(ChatLine { hour, minute, second, nick: nick.into(), text: text.into() })
    }

    #[test]
    fn reads_both_line_formats_and_skips_system_lines() {
        assert_eq!(parse_chat_line("[12:18] <tweaked> ok how many?"), chat(12, 18, None, "tweaked", "ok how many?"));
        assert_eq!(
            parse_chat_line("linux 2005-03-01 [01:02:03] <Felicia> rat .. lol"),
            chat(1, 2, Some(3), "Felicia", "rat .. lol")
        );
        assert_eq!(parse_chat_line("[12:18] <|trey|> a > b "), chat(12, 18, None, "|trey|", "a > b "));
        // One whitespace after the nick belongs to the format, the rest to the text.
        assert_eq!(parse_chat_line("[00:00] <a>\t  x"), chat(0, 0, None, "a", "  x"));
        assert_eq!(parse_chat_line("[00:00] <a> "), chat(0, 0, None, "a", ""));
        for not_chat in [
            "=== tweaked has joined #ubuntu",
            "[12:18] * tweaked waves",
            "[12:18] <> empty nick",
            "[12:18] <a>no space",
            "[12:18] <a>",
            "[1:18] <a> x",
            "[12:18:5] <a> x",
            "[12:18]  <a> x",
            " [12:18] <a> x",
            "linux 05-03-01 [01:02] <a> x",
            "linux  2005-03-01 [01:02] <a> x",
            "",
        ] {
            assert_eq!(parse_chat_line(not_chat), None, "{not_chat:?}");
        }
    }

    #[test]
    fn reads_the_links_both_ways_round_and_the_messages_with_their_parents() {
        let log = IrcLog::parse(
            "x",
            "[23:50] <a> hi\n=== b joined\n[23:51] <b> a: hi?\r\n[00:05] <a> b: yes\n[00:06] <c>  \n",
            "0 0 -\n0 2 -\n\n3 2 -\n",
        )
        .unwrap();
        assert_eq!(log.lines.len(), 6, "the last line end leaves an empty line, as Python's split");
        assert_eq!(log.replies[&0], BTreeSet::from([0, 2]));
        assert_eq!(log.replies[&2], BTreeSet::from([3]), "a link is read from the earlier line");
        assert_eq!(log.first_annotated_line(), Some(0));
        let messages = log.messages();
        let summary: Vec<(usize, i64, &str, &str, &[usize])> =
            messages.iter().map(|m| (m.line, m.minute, m.nick.as_str(), m.text.as_str(), &m.replies_to[..])).collect();
        assert_eq!(
            summary,
            [
                (0, 23 * 60 + 50, "a", "hi", &[][..]),
                (2, 23 * 60 + 51, "b", "a: hi?", &[0][..]),
                (3, 1440 + 5, "a", "b: yes", &[2][..]),
                (4, 1440 + 6, "c", "", &[][..]),
            ]
        );
    }

    #[test]
    fn the_annotated_lines_begin_at_the_first_reply_not_at_a_context_line_it_answers() {
        let log = IrcLog::parse("x", "", "5 9 -\n7 7 -\n9 12 -\n").unwrap();
        assert_eq!(log.first_annotated_line(), Some(7));
        assert_eq!(IrcLog::parse("x", "", "").unwrap().first_annotated_line(), None);
    }

    #[test]
    fn a_wrong_annotation_line_is_named() {
        let err = IrcLog::parse("x", "", "1 2 -\n1 2\n").unwrap_err();
        assert!(matches!(err, CorpusError::Annotation { line: 2, .. }), "{err}");
        assert!(IrcLog::parse("x", "", "1 b -\n").is_err());
    }

    #[test]
    fn reads_a_folder_of_logs_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b", "a"] {
            std::fs::write(dir.path().join(format!("{name}.ascii.txt")), "[00:00] <n> hi\n").unwrap();
            std::fs::write(dir.path().join(format!("{name}.annotation.txt")), "0 0 -\n").unwrap();
        }
        std::fs::write(dir.path().join("README.md"), "not a log").unwrap();
        let logs = read_logs(dir.path()).unwrap();
        assert_eq!(logs.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        std::fs::remove_file(dir.path().join("a.annotation.txt")).unwrap();
        assert!(matches!(read_logs(dir.path()), Err(CorpusError::Read { .. })));
        assert!(matches!(read_logs(&dir.path().join("README.md")), Err(CorpusError::Read { .. })));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(read_logs(empty.path()), Err(CorpusError::NoLogs(_))));
    }
}
