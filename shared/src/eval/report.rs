//! The `kuuki eval --report` page: the figures, then every miss with its decision
//! trace (the conversation around the point and what each stage decided), from the
//! template `report.html.j2`. Self-contained: inline CSS, no scripts.

use minijinja::{AutoEscape, Environment};
use serde::Serialize;
use serde_json::Value;

use super::{CaseResult, Expect, Outcome, Summary, Verdict};

const TEMPLATE: &str = include_str!("report.html.j2");
/// Messages shown before a missed point, for context.
const CONTEXT_BEFORE: usize = 3;
/// Seconds of the decision log shown after a point's window (or its action) closes.
const TRACE_AFTER_SECONDS: f64 = 60.0;

/// A row of the figures table: all conversations, or one language.
#[derive(Serialize)]
pub struct Row<'a> {
    pub name: &'a str,
    pub summary: &'a Summary,
}

#[derive(Serialize)]
struct Figures<'a> {
    name: &'a str,
    conversations: usize,
    messages: u64,
    precision: String,
    recall: String,
    reactions: String,
    silent: String,
    on_time: String,
    llm_calls: String,
    tokens: String,
    dollars: String,
}

#[derive(Serialize)]
struct Miss<'a> {
    case: &'a str,
    title: &'a str,
    situation: &'a str,
    line: usize,
    t: f64,
    user: &'a str,
    text: &'a str,
    expected: String,
    verdict: &'static str,
    did: String,
    trace: Vec<TraceLine>,
}

#[derive(Serialize)]
struct TraceLine {
    t: f64,
    kind: String,
    /// The labelled point itself.
    point: bool,
    who: String,
    what: String,
    /// Judge lines: the rules that fired, by name, with their points.
    rules: Vec<(String, i64)>,
}

/// Renders the page. `prices` is what `dollars` was projected with, said under the table.
pub fn render(title: &str, rows: &[Row<'_>], results: &[CaseResult], prices_note: &str) -> String {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.add_template("report", TEMPLATE).expect("the embedded report template parses");
    let figures: Vec<Figures> = rows.iter().map(figures).collect();
    let misses: Vec<Miss> = results
        .iter()
        .flat_map(|r| r.outcomes.iter().filter(|o| o.verdict.is_miss()).map(move |o| miss(r, o)))
        .collect();
    env.get_template("report")
        .expect("added above")
        .render(minijinja::context! { title, figures, misses, prices_note })
        .expect("the report renders")
}

fn percent(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

fn figures<'a>(row: &Row<'a>) -> Figures<'a> {
    let s = row.summary;
    Figures {
        name: row.name,
        conversations: s.conversations,
        messages: s.messages,
        precision: format!("{} ({}/{})", percent(s.precision()), s.speak_hits, s.posts),
        recall: format!("{} ({}/{})", percent(s.recall()), s.speak_hits, s.speak_labels),
        reactions: format!(
            "{} ({}/{}), {} stray",
            percent(s.reaction_accuracy()),
            s.react_hits,
            s.react_labels,
            s.stray_reactions
        ),
        silent: format!("{}/{}", s.silent_kept, s.silent_labels),
        on_time: format!("{}/{}", s.timed - s.mistimed, s.timed),
        llm_calls: format!("{:.1}", s.per_hundred_messages(s.llm_calls)),
        tokens: format!("{:.0}", s.per_hundred_messages(s.input_tokens + s.output_tokens)),
        dollars: format!("{:.4}", s.dollars_per_thousand_messages()),
    }
}

pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Right => "right",
        Verdict::Mistimed => "mistimed",
        Verdict::Missed => "missed",
        Verdict::ReactedInstead => "reacted instead of speaking",
        Verdict::SpokeInstead => "spoke instead of reacting",
        Verdict::Intruded => "spoke where it should have stayed quiet",
        Verdict::Repeated => "acted twice",
    }
}

fn expected(o: &Outcome, labelled: bool) -> String {
    let window = |(from, to): (f64, f64)| format!("{from:.0}–{to:.0} s after");
    match (o.expect, o.within) {
        (Expect::Speak, Some(w)) => format!("speak, {}", window(w)),
        (Expect::React, Some(w)) => format!("react, {}", window(w)),
        (Expect::Silent, _) if labelled => "silent".into(),
        (Expect::Silent, _) => "silent (unlabelled)".into(),
        (_, None) => format!("{:?}", o.expect).to_lowercase(),
    }
}

fn miss<'a>(r: &'a CaseResult, o: &Outcome) -> Miss<'a> {
    let m = &r.case.transcript[o.message];
    let labelled = r.case.labels.iter().any(|l| l.message == o.message);
    let did = match &o.action {
        None => "nothing".into(),
        Some(a) if a.react => format!("reacted :{}: after {:.0} s ({})", a.content, a.t - m.t, a.mode),
        Some(a) => format!("posted after {:.0} s ({}): {}", a.t - m.t, a.mode, a.content),
    };
    let end =
        m.t + o.within.map_or(0.0, |w| w.1).max(o.action.as_ref().map_or(0.0, |a| a.t - m.t)) + TRACE_AFTER_SECONDS;
    Miss {
        case: &r.case.name,
        title: &r.case.title,
        situation: &r.case.situation,
        line: m.line,
        t: m.t,
        user: &m.user,
        text: &m.text,
        expected: expected(o, labelled),
        verdict: verdict_name(o.verdict),
        did,
        trace: trace(r, o.message, end),
    }
}

/// The point's channel from a few messages before it to `end`: messages and decisions.
fn trace(r: &CaseResult, message: usize, end: f64) -> Vec<TraceLine> {
    let m = &r.case.transcript[message];
    let start = r.case.transcript[..message]
        .iter()
        .filter(|o| o.channel == m.channel)
        .rev()
        .nth(CONTEXT_BEFORE - 1)
        .map_or(0.0, |o| o.t);
    r.log
        .iter()
        .filter(|l| l["channel"] == m.channel.as_str() && l["kind"] != "stats")
        .filter_map(|l| {
            let t = l["t"].as_f64()?;
            (start <= t && t <= end).then(|| trace_line(l, t, m.t))
        })
        .collect()
}

fn trace_line(l: &Value, t: f64, point_t: f64) -> TraceLine {
    let kind = l["kind"].as_str().unwrap_or("?").to_owned();
    let text = |key: &str| l[key].as_str().unwrap_or_default().to_owned();
    let thread = l["thread"].as_str().map(|t| format!(" (thread {t})")).unwrap_or_default();
    let about = l["msg_t"].as_f64().map(|at| format!("about the message at {at} s{thread}: ")).unwrap_or_default();
    let (who, what) = match kind.as_str() {
        "message" => (text("user"), format!("{}{thread}", text("text"))),
        "judge" => ("judge".into(), format!("{about}score {}, {}: {}", l["score"], text("decision"), text("reason"))),
        "respond" if l["type"] == "react_only" => ("kuuki".into(), format!("{about}reacted :{}:", text("emoji"))),
        "respond" => ("kuuki".into(), format!("{about}{} ({}): {}", text("type"), text("mode"), text("text"))),
        "superseded" => (text("stage"), format!("{about}superseded by the message at {} s", l["by_t"])),
        _ => (kind.clone(), format!("{about}{}", text("reason"))),
    };
    let rules = l["breakdown"]
        .as_object()
        .map(|b| b.iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0))).collect())
        .unwrap_or_default();
    TraceLine { point: kind == "message" && t == point_t, t, kind, who, what, rules }
}
