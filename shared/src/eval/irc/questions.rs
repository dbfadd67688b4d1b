//! Which annotated lines are questions, and whether people answered them or left them
//! hanging, as the reference measure decides.

use std::collections::{BTreeMap, BTreeSet};

use super::transcript::Said;

/// A question is hanging only when at least this much log follows it (seconds).
pub const HANGING_AFTER_SECONDS: f64 = 900.0;

/// How people took a question.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fate {
    /// Another person's line replies to it; their first reply came this many seconds later.
    Answered { first_reply_after: f64 },
    /// Nobody else's line replies to it, and [`HANGING_AFTER_SECONDS`] of log follow.
    Hanging,
}

/// A question of the annotated lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub line: usize,
    pub t: f64,
    pub nick: String,
    pub text: String,
    pub fate: Fate,
}

/// The questions (lines with `?`) from `annotated_from` on, in line order: answered when a
/// replayed line of someone else replies to one by the annotation, hanging when none does
/// and enough log follows; a question near the end that nobody answered is neither.
pub fn classify(said: &[Said], replies: &BTreeMap<usize, BTreeSet<usize>>, annotated_from: usize) -> Vec<Question> {
    let Some(end) = said.iter().map(|s| s.t).reduce(f64::max) else { return Vec::new() };
    let by_line: BTreeMap<usize, &Said> = said.iter().map(|s| (s.line, s)).collect();
    let mut out = Vec::new();
    for s in said.iter().filter(|s| s.line >= annotated_from && s.text.contains('?')) {
        let first_reply = replies
            .get(&s.line)
            .into_iter()
            .flatten()
            .filter(|&&child| child != s.line)
            .filter_map(|child| by_line.get(child))
            .filter(|reply| reply.nick != s.nick)
            .map(|reply| reply.t)
            .reduce(f64::min);
        let fate = match first_reply {
            Some(t) => Fate::Answered { first_reply_after: t - s.t },
            None if end - s.t >= HANGING_AFTER_SECONDS => Fate::Hanging,
            None => continue,
        };
        out.push(Question { line: s.line, t: s.t, nick: s.nick.clone(), text: s.text.clone(), fate });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(line: usize, t: f64, nick: &str, text: &str) -> Said {
        Said { line, t, nick: nick.into(), text: text.into() }
    }

    #[test]
    fn answered_by_another_person_hanging_when_nobody_and_time_follows() {
        let lines = [
            said(5, 0.0, "a", "context question?"),
            said(10, 10.0, "a", "how do I mount it?"),
            said(11, 12.0, "a", "anyone?"),
            said(12, 40.0, "b", "a: mount -a"),
            said(13, 41.0, "a", "is it me?"),
            said(14, 50.0, "a", "never mind, is it the fstab?"),
            said(15, 60.0, "c", "a statement"),
            said(16, 1000.0, "d", "late question?"),
        ];
        let replies = BTreeMap::from([
            (5, BTreeSet::from([12])),
            (10, BTreeSet::from([10, 12, 15])),
            // Its author's own follow-up and a line that was not replayed answer nothing.
            (11, BTreeSet::from([11, 13, 99])),
            (14, BTreeSet::from([14])),
        ]);
        let questions = classify(&lines, &replies, 10);
        let fates: Vec<(usize, Fate)> = questions.iter().map(|q| (q.line, q.fate)).collect();
        assert_eq!(
            fates,
            [
                (10, Fate::Answered { first_reply_after: 30.0 }),
                (11, Fate::Hanging),
                (13, Fate::Hanging),
                (14, Fate::Hanging),
            ],
            "the context line is no question; the last one has too little log after it"
        );
        assert_eq!(questions[0].nick, "a");
        let hanging_by_the_second = [said(20, 0.0, "a", "x?"), said(21, 899.99, "b", "y"), said(22, 900.0, "b", "z")];
        assert_eq!(classify(&hanging_by_the_second[..2], &BTreeMap::new(), 0), []);
        assert_eq!(classify(&hanging_by_the_second, &BTreeMap::new(), 0)[0].fate, Fate::Hanging);
        assert_eq!(classify(&[], &replies, 0), []);
    }
}
