//! A log's lines as a replay transcript, built as the reference measure builds it: the
//! 100 lines before the annotated ones as context, then the annotated lines up to 1500,
//! in channel `ubuntu`, messages within a minute spread over it in order.

use super::corpus::{NEXT_DAY_AFTER_MINUTES_BACK, parse_chat_line, python_strip};
use crate::replay::TranscriptLine;

/// The first line replayed: context for the annotated lines.
pub const CONTEXT_FROM: usize = 900;
/// The first annotated line of an #ubuntu log: questions are counted from here.
pub const ANNOTATED_FROM: usize = 1000;
/// The line the replay stops before.
pub const REPLAYED_UNTIL: usize = 1500;
/// The channel every log is replayed in.
pub const CHANNEL: &str = "ubuntu";

/// A replayed message: its log line, transcript time, author and text.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub line: usize,
    pub t: f64,
    pub nick: String,
    pub text: String,
}

/// The transcript and, line for line, what each of its messages was in the log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IrcTranscript {
    pub transcript: Vec<TranscriptLine>,
    pub said: Vec<Said>,
}

/// Logs keep minutes: a minute's k-th line (from 0) is put 2k seconds into it (at most
/// 58) plus k mod 7 hundredths, so none collide.
fn seconds_into_minute(k: u32) -> f64 {
    (f64::from(k) * 2.0).min(58.0) + f64::from(k % 7) * 0.01
}

/// `x` to three decimals, as Python's `round(x, 3)`: the nearest number to the decimal,
/// found from the exact decimal expansion (both round ties to even).
fn round_to_millis(x: f64) -> f64 {
    format!("{x:.3}").parse().expect("a formatted number parses")
}

/// The transcript of `lines[from..until]`: chat lines only, empty texts skipped (they still
/// take their place in their minute), times strictly increasing.
pub fn build_transcript(lines: &[String], from: usize, until: usize) -> IrcTranscript {
    let mut parsed = Vec::new();
    let (mut day, mut last_minute) = (0_i64, None::<i64>);
    for (line, text) in lines.iter().enumerate().take(until).skip(from) {
        let Some(chat) = parse_chat_line(text) else { continue };
        let minute = chat.minute_of_day();
        if last_minute.is_some_and(|last| minute < last - NEXT_DAY_AFTER_MINUTES_BACK) {
            day += 1;
        }
        last_minute = Some(minute);
        parsed.push((line, day * 1440 + minute, chat));
    }
    let Some(&(_, base, _)) = parsed.first() else { return IrcTranscript::default() };
    let mut in_minute: std::collections::HashMap<i64, u32> = std::collections::HashMap::new();
    let mut out = IrcTranscript::default();
    let mut previous = -1.0;
    for (line, minute, chat) in parsed {
        let k = in_minute.entry(minute).or_default();
        let spread = ((minute - base) * 60) as f64 + seconds_into_minute(*k);
        *k += 1;
        let text = python_strip(&chat.text);
        if text.is_empty() {
            continue;
        }
        // Strictly increasing: a clock that goes back a little keeps the order of the log.
        let mut t = round_to_millis(spread);
        if t <= previous {
            t = round_to_millis(previous + 0.01);
        }
        previous = t;
        out.transcript.push(TranscriptLine {
            line: out.transcript.len() + 1,
            t,
            user: chat.nick.clone(),
            text: text.to_owned(),
            command: None,
            private: false,
            thread: None,
            channel: CHANNEL.to_owned(),
            bot: false,
            reply_to_bot: false,
            reaction: None,
        });
        out.said.push(Said { line, t, nick: chat.nick, text: text.to_owned() });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.split('\n').map(str::to_owned).collect()
    }

    fn times(t: &IrcTranscript) -> Vec<(usize, f64)> {
        t.said.iter().map(|s| (s.line, s.t)).collect()
    }

    #[test]
    fn spreads_a_minutes_lines_over_it_counting_the_empty_ones() {
        let log =
            lines("[10:00] <a> one\n=== b joined\n[10:00] <b> two\n[10:00] <c>  \n[10:00] <a> four\n[10:02] <b> later");
        let t = build_transcript(&log, 0, 100);
        // The empty line is the minute's third (k = 2) and is not replayed.
        assert_eq!(times(&t), [(0, 0.0), (2, 2.01), (4, 6.03), (5, 120.0)]);
        assert_eq!(t.transcript.len(), 4);
        assert!(t.transcript.iter().all(|l| l.channel == "ubuntu"));
        assert_eq!((t.transcript[1].user.as_str(), t.transcript[1].text.as_str()), ("b", "two"));
        assert_eq!(t.transcript[1].line, 2, "numbered as a transcript file's lines");
    }

    #[test]
    fn a_busy_minute_stays_inside_it_and_times_strictly_increase() {
        let log: Vec<String> = (0..37).map(|i| format!("[10:00] <n{i}> line {i}")).collect();
        let t = build_transcript(&log, 0, 100);
        // 2 s apart up to 58 s, then every later line of the minute at 58 s plus k mod 7
        // hundredths, and raised a hundredth over the one before where that is not later.
        assert_eq!(t.said[28].t, 56.0);
        assert_eq!(t.said[29].t, 58.01);
        assert_eq!(t.said[30].t, 58.02);
        assert_eq!(t.said[34].t, 58.06);
        assert_eq!((t.said[35].t, t.said[36].t), (58.07, 58.08), "58.00 and 58.01 are not after 58.06");
        let log = lines("[10:00] <a> x\n[10:00] <b> x\n[09:59] <c> back a minute\n[10:01] <d> on");
        assert_eq!(times(&build_transcript(&log, 0, 100)), [(0, 0.0), (1, 2.01), (2, 2.02), (3, 60.0)]);
        let five_busy_minutes: Vec<String> = (0..300).map(|i| format!("[10:0{}] <n> x", i / 60)).collect();
        let t = build_transcript(&five_busy_minutes, 0, 300);
        assert_eq!(t.said.len(), 300);
        assert!(t.said.windows(2).all(|w| w[0].t < w[1].t));
        assert!(t.said[59].t < 60.0 && t.said[60].t == 60.0, "a minute's lines stay in it");
    }

    #[test]
    fn replays_only_its_range_and_rolls_over_midnight() {
        let log = lines("[23:59] <a> before\n[23:59] <b> first\n[00:01] <c> next day\n[00:02] <d> after");
        let t = build_transcript(&log, 1, 3);
        assert_eq!(times(&t), [(1, 0.0), (2, 120.0)]);
        assert!(build_transcript(&log, 4, 9).transcript.is_empty());
    }

    #[test]
    fn rounds_as_python_does() {
        // 0.01 * 3 is 0.030000000000000002; Python's round(…, 3) gives 0.03.
        assert_eq!(round_to_millis(0.01 * 3.0), 0.03);
        assert_eq!(round_to_millis(58.0 + 0.01 * 6.0), 58.06);
        assert_eq!(round_to_millis(0.0625), 0.062, "a tie goes to the even digit");
    }
}
