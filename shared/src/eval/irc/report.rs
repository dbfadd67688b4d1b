//! The figures as text: the reference measure's own lines (a JSON object per log, the
//! `IRC summary` line, the barge-ins and pick-ups with `--verbose`), byte for byte, so
//! the two outputs can be compared with `diff`; and a Markdown table.

use std::fmt::Write;

use super::questions::{Fate, Question};
use super::{Counts, LogRun};

/// A log's line as the reference prints it: `{"log": …, "messages": …, …}`.
pub fn json_line(name: &str, c: &Counts) -> String {
    format!(
        "{{\"log\": {}, \"messages\": {}, \"posts\": {}, \"reactions\": {}, \"answered_qs\": {}, \"barge_ins\": {}, \"hanging_qs\": {}, \"pick_ups\": {}, \"llm_judge_calls\": {}}}",
        json_string(name),
        c.messages,
        c.posts,
        c.reactions,
        c.answered_qs,
        c.barge_ins,
        c.hanging_qs,
        c.pick_ups,
        c.llm_judge_calls
    )
}

/// A log that could not be replayed, as the reference prints it.
pub fn error_line(name: &str, error: &str) -> String {
    format!("{{\"log\": {}, \"error\": {}}}", json_string(name), json_string(error))
}

/// The reference's closing line over every log replayed.
pub fn summary_line(c: &Counts) -> String {
    format!(
        "IRC summary: {} messages, posts {:.1}/1000 msgs, barge-ins {}/{} answered questions ({:.1}%), pick-ups {}/{} hanging questions ({:.1}%), LLM judge calls {:.1}/1000 msgs",
        c.messages,
        c.posts_per_thousand_messages(),
        c.barge_ins,
        c.answered_qs,
        c.barge_in_percent(),
        c.pick_ups,
        c.hanging_qs,
        c.pick_up_percent(),
        c.judge_calls_per_thousand_messages()
    )
}

/// Each barge-in and pick-up of a log by `log:line`, as the reference's `--verbose`.
pub fn detail_lines(run: &LogRun) -> Vec<String> {
    let clipped = |q: &Question| python_repr(&q.text.chars().take(90).collect::<String>());
    let barge_ins = run.barge_ins.iter().map(|q| {
        let after = match q.fate {
            Fate::Answered { first_reply_after } => first_reply_after,
            Fate::Hanging => f64::NAN,
        };
        format!("  barge-in {}:{} <{}> {} (human reply after {after:.0}s)", run.name, q.line, q.nick, clipped(q))
    });
    let pick_ups =
        run.pick_ups.iter().map(|q| format!("  pick-up  {}:{} <{}> {}", run.name, q.line, q.nick, clipped(q)));
    barge_ins.chain(pick_ups).collect()
}

/// The table's head: one row a log, then the total.
pub fn table_head() -> String {
    "| log | messages | posts (/1,000 msgs) | reactions | barge-ins (of answered questions) | pick-ups (of hanging questions) | LLM judge calls (/1,000 msgs) |\n\
     | --- | --- | --- | --- | --- | --- | --- |"
        .to_owned()
}

pub fn table_row(name: &str, c: &Counts) -> String {
    format!(
        "| {name} | {} | {} ({:.1}) | {} | {}/{} ({:.1} %) | {}/{} ({:.1} %) | {} ({:.1}) |",
        c.messages,
        c.posts,
        c.posts_per_thousand_messages(),
        c.reactions,
        c.barge_ins,
        c.answered_qs,
        c.barge_in_percent(),
        c.pick_ups,
        c.hanging_qs,
        c.pick_up_percent(),
        c.llm_judge_calls,
        c.judge_calls_per_thousand_messages()
    )
}

/// A JSON string as Python's `json.dumps` writes it (`ensure_ascii`: `\uXXXX` beyond ASCII).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
    out
}

/// A string as Python's `repr` writes it: exact for ASCII (the corpus is ASCII); beyond
/// it, only the C1 controls, the no-break space and the soft hyphen are escaped.
fn python_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c < ' ' || ('\x7f'..='\u{a0}').contains(&c) || c == '\u{ad}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> Counts {
        Counts {
            messages: 3242,
            posts: 45,
            reactions: 0,
            answered_qs: 336,
            barge_ins: 6,
            hanging_qs: 98,
            pick_ups: 3,
            llm_judge_calls: 48,
        }
    }

    #[test]
    fn writes_the_references_lines() {
        assert_eq!(
            json_line("2004-11-15_03", &counts()),
            r#"{"log": "2004-11-15_03", "messages": 3242, "posts": 45, "reactions": 0, "answered_qs": 336, "barge_ins": 6, "hanging_qs": 98, "pick_ups": 3, "llm_judge_calls": 48}"#
        );
        assert_eq!(
            summary_line(&counts()),
            "IRC summary: 3242 messages, posts 13.9/1000 msgs, barge-ins 6/336 answered questions (1.8%), pick-ups 3/98 hanging questions (3.1%), LLM judge calls 14.8/1000 msgs"
        );
        assert_eq!(
            summary_line(&Counts::default()),
            "IRC summary: 0 messages, posts 0.0/1000 msgs, barge-ins 0/0 answered questions (0.0%), pick-ups 0/0 hanging questions (0.0%), LLM judge calls 0.0/1000 msgs"
        );
        assert_eq!(error_line("x", "bad \"t\"\né\x7f"), r#"{"log": "x", "error": "bad \"t\"\n\u00e9\u007f"}"#);
        assert_eq!(
            table_row("all", &counts()),
            "| all | 3242 | 45 (13.9) | 0 | 6/336 (1.8 %) | 3/98 (3.1 %) | 48 (14.8) |"
        );
        assert_eq!(table_head().lines().nth(1).unwrap().matches("---").count(), 7);
    }

    #[test]
    fn lists_barge_ins_and_pick_ups_as_the_reference() {
        let question = |line, text: &str, fate| Question { line, t: 0.0, nick: "nick".into(), text: text.into(), fate };
        let run = LogRun {
            name: "log".into(),
            counts: Counts::default(),
            barge_ins: vec![question(1029, "can't I? it's \"x\"", Fate::Answered { first_reply_after: 2.5 })],
            pick_ups: vec![question(1099, &"y?".repeat(50), Fate::Hanging)],
            left_hanging: Default::default(),
        };
        assert_eq!(
            detail_lines(&run),
            [
                r#"  barge-in log:1029 <nick> 'can\'t I? it\'s "x"' (human reply after 2s)"#.to_owned(),
                format!("  pick-up  log:1099 <nick> '{}'", "y?".repeat(45)),
            ]
        );
        assert_eq!(python_repr("it's"), "\"it's\"");
        assert_eq!(python_repr("a\\b\t\u{1}"), "'a\\\\b\\t\\x01'");
    }
}
