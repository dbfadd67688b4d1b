//! The HTML timeline report of a replay: one self-contained page (inline CSS and SVG,
//! no scripts, fonts or images, so it opens offline and can be mailed around) that
//! shows, per channel, when messages arrived, how each was scored against the
//! thresholds, and what the bot did about it.
//!
//! The decision log is read as loose JSON on purpose: a missing field or an unknown
//! kind is shown as it is rather than refused, because the report is most useful
//! exactly when the log looks odd.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::config::Settings;

/// Writing into a `String` cannot fail, so the `fmt::Result` is dropped here once.
macro_rules! w {
    ($($arg:tt)*) => {
        let _ = write!($($arg)*);
    };
}

/// Table rows shown per channel; the chart above the table still draws every event.
const MAX_ROWS_PER_CHANNEL: usize = 500;
/// Table rows over the whole page, so a replay of many busy channels stays openable.
const MAX_ROWS_TOTAL: usize = 10_000;
/// Characters of log text kept in a tooltip, and in a table cell.
const TOOLTIP_CHARS: usize = 240;
const CELL_CHARS: usize = 600;

// Chart geometry, in SVG units (pixels at 100% zoom).
const ML: f64 = 96.0; // left margin: score labels and lane names
const MR: f64 = 24.0;
/// Threshold labels repeat along a wide chart this many pixels apart.
const THRESHOLD_LABEL_EVERY: f64 = 1100.0;
const MT: f64 = 22.0;
const PLOT_H: f64 = 220.0; // the score area, 0..100
const LANE_GAP: f64 = 10.0;
const LANE_H: f64 = 24.0;
const LANES: usize = 3; // messages, the bot, superseded/dropped
const AXIS_H: f64 = 30.0;
const LANE_MESSAGES: usize = 0;
const LANE_BOT: usize = 1;
const LANE_SUPERSEDED: usize = 2;
/// Plot width: grows with the number of events so busy channels stay legible.
const MIN_PLOT_W: f64 = 1150.0;
const MAX_PLOT_W: f64 = 8000.0;
const PX_PER_EVENT: f64 = 6.0;

// Long silences are drawn as narrow breaks, or one burst of chat would be a smear
// at the edge of an hour-long axis. Only the largest few, so the axis stays honest.
const BREAK_MIN_SECONDS: f64 = 600.0;
const BREAK_MIN_SHARE: f64 = 0.03;
const MAX_BREAKS: usize = 12;
const BREAK_W: f64 = 40.0;
const MIN_SEG_W: f64 = 36.0;
const SEG_PAD: f64 = 10.0;
const TICK_SPACING: f64 = 84.0;
const NICE_STEPS: [f64; 18] = [
    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0,
    43200.0, 86400.0,
];

/// Users get colours in order of first appearance, so the first ten never clash.
/// Green and grey are left out: they mean "responded" and "skipped" in the chart.
const USER_COLORS: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#e15759", "#17becf", "#b07aa1", "#edc948", "#ff9da7", "#9c755f", "#76b7b2", "#bcbd22"];

/// A self-contained HTML page of the replay's decision log.
pub fn render(title: &str, lines: &[Value], settings: &Settings) -> String {
    let thresholds = Thresholds::from_settings(settings);
    let Grouped { channels, stats, skipped } = group(lines);
    let colors = UserColors::new(&channels);
    let ctx = Ctx { thresholds, colors: &colors, bot: &settings.bot_name };

    let mut out = String::with_capacity(16_384 + lines.len() * 700);
    page_head(&mut out, title);
    w!(out, "<header><h1>kuuki replay · {}</h1>", esc(title));
    w!(out, "<p class=\"sub\">{}</p>", esc(&thresholds.describe()));
    match stats {
        Some(stats) => stats_html(&mut out, stats, false),
        None => stats_html(&mut out, &derived_stats(&channels), true),
    }
    if skipped > 0 {
        w!(out, "<p class=\"note\">{skipped} log line(s) were not JSON objects and are left out.</p>");
    }
    if channels.len() > 1 {
        toc(&mut out, &channels);
    }
    out.push_str("</header>\n");

    if channels.is_empty() {
        out.push_str("<p class=\"empty\">No events: the decision log is empty.</p>\n");
    }
    let mut row_budget = MAX_ROWS_TOTAL;
    for (ci, channel) in channels.iter().enumerate() {
        channel_section(&mut out, ci, channel, &ctx, &mut row_budget);
    }
    w!(
        out,
        "<footer>Times are seconds since the replay started, shown as m:ss. Silences of {} or more may be \
         drawn as narrow breaks (not to scale). Hover a mark for details; click it to jump to its row.</footer>\n",
        fmt_gap(BREAK_MIN_SECONDS)
    );
    out.push_str("</body>\n</html>\n");
    out
}

/// The thresholds the judge applied, from the settings the replay ran with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Thresholds {
    /// Rules only: a score at or above this responds.
    Score(i32),
    /// LLM judge: at or below `low` skips, at or above `high` responds, between asks the LLM.
    Band { low: i32, high: i32 },
}

impl Thresholds {
    fn from_settings(s: &Settings) -> Self {
        // `Settings::for_llm` has turned the LLM judge off when there was no LLM to ask.
        if s.llm_judge_enabled {
            Thresholds::Band { low: s.judge_llm_threshold_low, high: s.judge_llm_threshold_high }
        } else {
            Thresholds::Score(s.judge_score_threshold)
        }
    }

    fn describe(&self) -> String {
        match self {
            Thresholds::Score(t) => format!("Rules only: a score of {t} or more responds."),
            Thresholds::Band { low, high } => format!(
                "LLM judge: a score of {low} or less skips, {high} or more responds, and the LLM is asked in between."
            ),
        }
    }
}

struct Ctx<'a> {
    thresholds: Thresholds,
    colors: &'a UserColors,
    bot: &'a str,
}

/// One log line, placed in time.
struct Ev<'a> {
    /// `t` as logged; `None` when missing or not a number.
    t: Option<f64>,
    /// Where to draw it: `t`, or the time of the line before when `t` is missing.
    at: f64,
    kind: &'a str,
    thread: Option<&'a str>,
    line: &'a Value,
}

struct Channel<'a> {
    name: String,
    events: Vec<Ev<'a>>,
}

struct Grouped<'a> {
    channels: Vec<Channel<'a>>,
    stats: Option<&'a Value>,
    skipped: usize,
}

/// Splits the log into channels (in order of first appearance, events in time order)
/// and the final stats line.
fn group(lines: &[Value]) -> Grouped<'_> {
    let mut channels: Vec<Channel> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut stats = None;
    let mut skipped = 0;
    let mut last_at = 0.0;
    for line in lines {
        if !line.is_object() {
            skipped += 1;
            continue;
        }
        let kind = str_of(line, "kind").unwrap_or("?");
        if kind == "stats" {
            stats = Some(line);
            continue;
        }
        let t = num(line, "t");
        let at = t.unwrap_or(last_at);
        last_at = at;
        let name = match line.get("channel") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => "(no channel)".to_owned(),
            Some(other) => other.to_string(),
        };
        let ci = *index.entry(name.clone()).or_insert_with(|| {
            channels.push(Channel { name, events: Vec::new() });
            channels.len() - 1
        });
        channels[ci].events.push(Ev { t, at, kind, thread: str_of(line, "thread"), line });
    }
    for c in &mut channels {
        // Stable: events at the same time keep the log's order (message before its response).
        c.events.sort_by(|a, b| a.at.total_cmp(&b.at));
    }
    Grouped { channels, stats, skipped }
}

struct UserColors(HashMap<String, &'static str>);

impl UserColors {
    fn new(channels: &[Channel]) -> Self {
        let mut map = HashMap::new();
        for e in channels.iter().flat_map(|c| &c.events) {
            if let Some(user) = str_of(e.line, "user") {
                let next = USER_COLORS[map.len() % USER_COLORS.len()];
                map.entry(user.to_owned()).or_insert(next);
            }
        }
        UserColors(map)
    }

    fn of(&self, user: &str) -> &'static str {
        self.0.get(user).copied().unwrap_or("#6b7280")
    }
}

// ---------------------------------------------------------------------------
// Page frame, stats and table of contents

fn page_head(out: &mut String, title: &str) {
    out.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    w!(out, "<title>kuuki replay · {}</title>\n<style>{}</style>\n</head>\n<body>\n", esc(title), CSS);
}

const CSS: &str = r#"
:root{--ink:#1f2430;--muted:#6b7280;--line:#e5e7eb;--resp:#1a9850;--skip:#9aa3b2;--llm:#7b3fe4;
--full:#2155c4;--ack:#0e9aa7;--react:#f0a020;--fail:#d7301f}
*{box-sizing:border-box}
body{margin:0;padding:22px 26px 40px;color:var(--ink);background:#f3f4f6;
font:14px/1.45 system-ui,-apple-system,"Segoe UI","Hiragino Sans","Hiragino Kaku Gothic ProN","Noto Sans CJK JP","Noto Sans JP","Yu Gothic",Meiryo,sans-serif}
h1{font-size:20px;margin:0 0 2px;word-break:break-all}
.sub{color:var(--muted);margin:0 0 14px}
.stats{display:flex;flex-wrap:wrap;gap:10px;margin:0 0 14px}
.stat{background:#fff;border:1px solid var(--line);border-radius:8px;padding:7px 14px;min-width:118px}
.stat strong{display:block;font-size:22px;line-height:1.2}
.stat span{color:var(--muted)}
.stat small{display:block;color:var(--muted);font-size:12px}
.stat.warn strong{color:var(--fail)}
.note,.empty,footer{color:var(--muted);font-size:13px}
.empty{background:#fff;border:1px dashed var(--line);border-radius:10px;padding:28px;text-align:center;font-size:15px}
nav.toc{margin:0 0 16px;font-size:13px;display:flex;flex-wrap:wrap;gap:4px 14px}
nav.toc a{color:var(--full);text-decoration:none}
nav.toc span{color:var(--muted)}
section.channel{background:#fff;border:1px solid var(--line);border-radius:10px;padding:14px 18px;margin:0 0 20px}
section.channel h2{font-size:17px;margin:0}
section.channel .counts{color:var(--muted);font-size:13px;margin:0 0 8px}
.chart-wrap{overflow-x:auto}
svg.chart{display:block}
svg text{font-family:inherit;font-size:11px;fill:#4b5563}
svg text.lane-name{font-weight:600}
svg text.zone{font-size:10px;fill:#9ca3af;letter-spacing:.04em}
svg text.thl,svg text.thl-llm{font-weight:700;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
svg text.thl{fill:var(--resp)}
svg text.thl-llm{fill:var(--llm)}
svg text.brk-label{fill:#6b7280;font-style:italic}
.chart a{cursor:pointer}
.chart a:hover>:not(title){stroke:#111;stroke-width:2}
.grid{stroke:#eef0f3}
.tick{stroke:#e7e9ed}
.lane{fill:#f7f8fa}
.plot-bg{fill:#fff;stroke:#e5e7eb}
.brk{fill:#eceef2}
.brk-edge{stroke:#b8bec9;stroke-dasharray:2 3}
.zone-resp{fill:#1a9850;fill-opacity:.07}
.zone-llm{fill:#7b3fe4;fill-opacity:.09}
.th{stroke:var(--resp);stroke-width:1.5;stroke-dasharray:6 4}
.th-llm{stroke:var(--llm);stroke-width:1.5;stroke-dasharray:6 4}
.link{stroke:var(--resp);stroke-width:1.2;stroke-dasharray:3 3;fill:none;opacity:.75}
.j-resp{fill:var(--resp);stroke:#fff;stroke-width:1.5}
.j-skip{fill:var(--skip);stroke:#fff;stroke-width:1.5}
.j-llm{fill:none;stroke:var(--llm);stroke-width:2}
.j-err{fill:none;stroke:var(--fail);stroke-width:2;stroke-dasharray:3 2}
.m-human{stroke:#fff;stroke-width:1}
.m-trigger{stroke:#111;stroke-width:1.5}
.m-bot{fill:#6b7280}
.m-own{fill:var(--full)}
.m-edit{fill:#fff;stroke:#6b7280;stroke-width:1.5}
.m-del,.s-drop{stroke:#6b7280;stroke-width:2}
.r-full{fill:var(--full)}
.r-ack{fill:var(--ack)}
.r-react{fill:var(--react);stroke:#b77400;stroke-width:1}
.r-other{fill:#6b7280}
.r-fail{stroke:var(--fail);stroke-width:2.5}
.s-sup{fill:#fff;stroke:#8b93a1;stroke-width:1.8}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:12px;color:var(--muted);margin:6px 0 12px}
.legend svg{vertical-align:-3px;margin-right:4px}
table.events{border-collapse:collapse;width:100%;font-size:13px}
table.events th,table.events td{text-align:left;padding:4px 8px;border-bottom:1px solid #f0f1f3;vertical-align:top}
table.events th{color:var(--muted);font-weight:600;font-size:12px;border-bottom:1px solid var(--line)}
td.time{font-variant-numeric:tabular-nums;white-space:nowrap;color:var(--muted)}
td.who{white-space:nowrap}
td.what{word-break:break-word}
tr.k-judge td{background:#fafbfc}
tr.k-respond td{background:#e8f6ee}
tr.k-respond td:first-child{box-shadow:inset 3px 0 var(--resp)}
tr.k-respond_failed td{background:#fdecea}
tr.k-respond_failed td:first-child{box-shadow:inset 3px 0 var(--fail)}
tr.k-superseded td,tr.k-dropped td,tr.k-edited td,tr.k-deleted td{color:var(--muted)}
tr:target td{background:#fff4c2}
.thread{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;white-space:nowrap;color:#1f2430}
.top{color:#c0c4cc}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:5px;vertical-align:0}
.badge{display:inline-block;font-size:11px;padding:0 6px;border-radius:4px;background:#eef0f3;color:#374151;margin-left:4px;white-space:nowrap}
.badge.trig{background:#1f2430;color:#fff}
.badge.t-full_response{background:var(--full);color:#fff}
.badge.t-short_ack{background:var(--ack);color:#fff}
.badge.t-react_only{background:var(--react);color:#1f2430}
.dec{font-weight:600}
.dec.yes{color:var(--resp)}
.dec.no{color:#6b7280}
.dec.llm{color:var(--llm)}
.dec.by{color:var(--muted);font-weight:400}
.chip{display:inline-block;font-size:11px;padding:0 5px;border-radius:4px;margin:1px 3px 1px 0;background:#f1f2f4;font-variant-numeric:tabular-nums}
.chip.pos{background:#e4f4ea;color:#106b3b}
.chip.neg{background:#fbe7e5;color:#a8261a}
.reason{color:var(--muted);font-size:12px}
.err{color:var(--fail);font-size:12px}
.score{font-weight:700;font-variant-numeric:tabular-nums}
.score.yes{color:var(--resp)}
.score.no{color:#6b7280}
.bar{display:inline-block;width:40px;height:5px;background:#eceef1;border-radius:3px;vertical-align:middle;margin-left:6px;overflow:hidden}
.bar i{display:block;height:100%}
.bot{font-weight:700;color:var(--resp)}
.sys{color:var(--muted);font-style:italic}
code{font-size:12px;word-break:break-all}
.cap{color:var(--muted);font-size:12px;margin:6px 0 0}
footer{margin-top:24px}
"#;

/// The replay's totals. `derived` says they were counted here because the log has
/// no stats line (a replay cut short), so the LLM totals are unknown.
fn stats_html(out: &mut String, stats: &Value, derived: bool) {
    let count = |key: &str| stats.get(key).and_then(Value::as_u64);
    let show = |n: Option<u64>| n.map_or_else(|| "–".to_owned(), |n| n.to_string());
    let (responses, by_type) = tally(stats.get("responses"), &["full_response", "short_ack", "react_only"], false);
    let (calls, by_role) = tally(stats.get("llm_calls"), &[], true);
    let (tokens, _) = tally(stats.get("llm_tokens"), &[], true);

    out.push_str("<div class=\"stats\">");
    stat(out, &show(count("messages")), "messages", "", false);
    let llm_judged = count("llm_judgments").map(|n| format!("{n} asked the LLM")).unwrap_or_default();
    stat(out, &show(count("judgments")), "judgments", &llm_judged, false);
    stat(out, &show(responses), "responses", &by_type, false);
    let tokens = tokens.map(|t| format!("{t} tokens")).unwrap_or_default();
    let call_detail = [by_role, tokens].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" · ");
    stat(out, &show(calls), "LLM calls", &call_detail, false);
    stat(out, &show(count("superseded")), "superseded", "", false);
    let dropped = count("dropped");
    stat(out, &show(dropped), "dropped", "", dropped.unwrap_or(0) > 0);
    let failed = count("respond_failed");
    stat(out, &show(failed), "responses failed", "", failed.unwrap_or(0) > 0);
    if let Some(t) = stats.get("t").and_then(Value::as_f64) {
        stat(out, &fmt_time(t), "replayed", "transcript time", false);
    }
    out.push_str("</div>");
    if derived {
        out.push_str("<p class=\"note\">No stats line in the log: the totals were counted from its lines.</p>");
    }
}

fn stat(out: &mut String, value: &str, label: &str, detail: &str, warn: bool) {
    w!(
        out,
        "<div class=\"stat{}\"><strong>{}</strong><span>{}</span>",
        if warn { " warn" } else { "" },
        esc(value),
        esc(label)
    );
    if !detail.is_empty() {
        w!(out, "<small>{}</small>", esc(detail));
    }
    out.push_str("</div>");
}

/// A `{name: count}` object as a total and "name n · name n", `first` names leading.
fn tally(v: Option<&Value>, first: &[&str], skip_zero: bool) -> (Option<u64>, String) {
    let Some(map) = v.and_then(Value::as_object) else {
        return (None, String::new());
    };
    let mut names: Vec<&str> = first.iter().copied().filter(|n| map.contains_key(*n)).collect();
    names.extend(map.keys().map(String::as_str).filter(|k| !first.contains(k)));
    let mut total = 0;
    let mut parts = Vec::new();
    for name in names {
        let n = map[name].as_u64().unwrap_or(0);
        total += n;
        if n > 0 || !skip_zero {
            parts.push(format!("{name} {n}"));
        }
    }
    (Some(total), parts.join(" · "))
}

/// The stats line's numbers, counted from the log lines.
fn derived_stats(channels: &[Channel]) -> Value {
    let events = || channels.iter().flat_map(|c| &c.events);
    let count = |kind: &str| events().filter(|e| e.kind == kind).count();
    let mut responses = serde_json::Map::new();
    for e in events().filter(|e| e.kind == "respond") {
        let ty = str_of(e.line, "type").unwrap_or("?");
        let n = responses.get(ty).and_then(Value::as_u64).unwrap_or(0);
        responses.insert(ty.to_owned(), json!(n + 1));
    }
    json!({
        "messages": count("message"),
        "judgments": count("judge"),
        "llm_judgments": events().filter(|e| e.kind == "judge" && bool_of(e.line, "llm_called")).count(),
        "superseded": count("superseded"),
        "dropped": count("dropped"),
        "respond_failed": count("respond_failed"),
        "responses": responses,
    })
}

fn toc(out: &mut String, channels: &[Channel]) {
    out.push_str("<nav class=\"toc\">");
    for (ci, c) in channels.iter().enumerate() {
        let n = Counts::of(c);
        w!(
            out,
            "<a href=\"#ch-{ci}\">#{}</a><span>{} msg · {} resp</span>",
            esc(&clip(&c.name, 60)),
            n.messages,
            n.responses
        );
    }
    out.push_str("</nav>");
}

#[derive(Default)]
struct Counts {
    messages: usize,
    judgments: usize,
    responses: usize,
    superseded: usize,
}

impl Counts {
    fn of(c: &Channel) -> Self {
        let mut n = Counts::default();
        for e in &c.events {
            match e.kind {
                "message" => n.messages += 1,
                "judge" => n.judgments += 1,
                "respond" => n.responses += 1,
                "superseded" => n.superseded += 1,
                _ => {}
            }
        }
        n
    }
}

// ---------------------------------------------------------------------------
// A channel: heading, chart, legend, table

fn channel_section(out: &mut String, ci: usize, c: &Channel, ctx: &Ctx, row_budget: &mut usize) {
    let n = Counts::of(c);
    let (first, last) = (c.events.first().map_or(0.0, |e| e.at), c.events.last().map_or(0.0, |e| e.at));
    w!(out, "<section class=\"channel\" id=\"ch-{ci}\">\n<h2>#{}</h2>", esc(&c.name));
    w!(
        out,
        "<p class=\"counts\">{} · {} · {} · {} superseded · {}–{}</p>\n",
        plural(n.messages, "message"),
        plural(n.judgments, "judgment"),
        plural(n.responses, "response"),
        n.superseded,
        fmt_time(first),
        fmt_time(last)
    );
    let shown = c.events.len().min(MAX_ROWS_PER_CHANNEL).min(*row_budget);
    *row_budget -= shown;
    chart(out, ci, c, ctx, shown);
    legend(out, ctx);
    table(out, ci, c, ctx, shown);
    out.push_str("</section>\n");
}

/// Maps transcript seconds to x, with long silences cut out as narrow breaks.
struct TimeAxis {
    segments: Vec<Segment>,
}

/// A stretch of time drawn to scale.
struct Segment {
    t0: f64,
    t1: f64,
    x0: f64,
    x1: f64,
}

impl Segment {
    fn x(&self, t: f64) -> f64 {
        let pad = SEG_PAD.min((self.x1 - self.x0) / 2.0);
        if self.t1 - self.t0 <= 0.0 {
            return (self.x0 + self.x1) / 2.0;
        }
        self.x0 + pad + (t - self.t0) / (self.t1 - self.t0) * (self.x1 - self.x0 - 2.0 * pad)
    }
}

impl TimeAxis {
    /// `times` sorted ascending.
    fn new(times: &[f64], x0: f64, width: f64) -> Self {
        let first = times.first().copied().unwrap_or(0.0);
        let last = times.last().copied().unwrap_or(first);
        let span = last - first;
        let mut gaps: Vec<(f64, usize)> = times
            .windows(2)
            .enumerate()
            .map(|(i, w)| (w[1] - w[0], i))
            .filter(|(gap, _)| *gap >= BREAK_MIN_SECONDS && *gap >= span * BREAK_MIN_SHARE)
            .collect();
        gaps.sort_by(|a, b| b.0.total_cmp(&a.0));
        gaps.truncate(MAX_BREAKS);
        let mut cuts: Vec<usize> = gaps.into_iter().map(|(_, i)| i).collect();
        cuts.sort_unstable();

        let mut bounds = Vec::with_capacity(cuts.len() + 1);
        let mut start = first;
        for i in cuts {
            bounds.push((start, times[i]));
            start = times[i + 1];
        }
        bounds.push((start, last));

        // Each stretch gets a minimum width (a lone burst stays visible) and shares
        // the rest in proportion to its duration.
        let n = bounds.len() as f64;
        let total: f64 = bounds.iter().map(|(a, b)| b - a).sum();
        let free = (width - (n - 1.0) * BREAK_W - n * MIN_SEG_W).max(0.0);
        let mut x = x0;
        let segments = bounds
            .into_iter()
            .map(|(t0, t1)| {
                let share = if total > 0.0 { (t1 - t0) / total } else { 1.0 / n };
                let w = MIN_SEG_W + free * share;
                let s = Segment { t0, t1, x0: x, x1: x + w };
                x += w + BREAK_W;
                s
            })
            .collect();
        TimeAxis { segments }
    }

    fn x(&self, t: f64) -> f64 {
        for (i, s) in self.segments.iter().enumerate() {
            if t <= s.t1 {
                if t >= s.t0 {
                    return s.x(t);
                }
                // In a break (times not used to build the axis): its middle.
                return match i {
                    0 => s.x0,
                    _ => (self.segments[i - 1].x1 + s.x0) / 2.0,
                };
            }
        }
        self.segments.last().map_or(0.0, |s| s.x(s.t1))
    }

    /// Tick positions and times: round times at a readable spacing in each stretch.
    fn ticks(&self) -> Vec<(f64, f64)> {
        let mut ticks = Vec::new();
        for s in &self.segments {
            let inner = s.x1 - s.x0 - 2.0 * SEG_PAD;
            let d = s.t1 - s.t0;
            let before = ticks.len();
            if d > 0.0 && inner > 0.0 {
                let step = NICE_STEPS
                    .iter()
                    .copied()
                    .find(|step| step * inner / d >= TICK_SPACING)
                    .unwrap_or(NICE_STEPS[NICE_STEPS.len() - 1]);
                let mut k = (s.t0 / step).ceil();
                while k * step <= s.t1 + 1e-9 {
                    ticks.push((s.x(k * step), k * step));
                    k += 1.0;
                }
            }
            if ticks.len() == before {
                ticks.push((s.x(s.t0), s.t0));
            }
        }
        ticks
    }
}

fn y_score(score: f64) -> f64 {
    MT + PLOT_H * (1.0 - score.clamp(0.0, 100.0) / 100.0)
}

fn lane_y(lane: usize) -> f64 {
    MT + PLOT_H + LANE_GAP + LANE_H * (lane as f64 + 0.5)
}

fn chart_height() -> f64 {
    MT + PLOT_H + LANE_GAP + LANE_H * LANES as f64 + AXIS_H
}

/// Key for matching a response or judgment to its message by time (ms precision).
fn time_key(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

fn chart(out: &mut String, ci: usize, c: &Channel, ctx: &Ctx, shown_rows: usize) {
    let times: Vec<f64> = c.events.iter().map(|e| e.at).collect();
    let plot_w = (c.events.len() as f64 * PX_PER_EVENT).clamp(MIN_PLOT_W, MAX_PLOT_W);
    let axis = TimeAxis::new(&times, ML, plot_w);
    let (x_end, width, height) = (ML + plot_w, ML + plot_w + MR, chart_height());
    let lanes_bottom = MT + PLOT_H + LANE_GAP + LANE_H * LANES as f64;

    w!(
        out,
        "<div class=\"chart-wrap\"><svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" \
         height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"timeline of #{}\">\n",
        esc(&c.name)
    );
    // Score area, horizontal grid and labels.
    w!(out, "<rect class=\"plot-bg\" x=\"{ML}\" y=\"{MT}\" width=\"{plot_w:.1}\" height=\"{PLOT_H}\"/>");
    for s in (0..=100).step_by(20) {
        let y = y_score(s as f64);
        w!(out, "<line class=\"grid\" x1=\"{ML}\" x2=\"{x_end:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>");
        w!(out, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{s}</text>", ML - 8.0, y + 4.0);
    }
    w!(out, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" class=\"lane-name\">score</text>", ML - 8.0, MT - 8.0);
    thresholds_svg(out, ctx.thresholds, x_end);
    // Lanes under the score area.
    let bot = clip(ctx.bot, 12);
    for (lane, name) in [(LANE_MESSAGES, "messages"), (LANE_BOT, &*bot), (LANE_SUPERSEDED, "superseded")] {
        let top = lane_y(lane) - LANE_H / 2.0;
        w!(
            out,
            "<rect class=\"lane\" x=\"{ML}\" y=\"{:.1}\" width=\"{plot_w:.1}\" height=\"{:.1}\"/>",
            top + 1.0,
            LANE_H - 2.0
        );
        w!(
            out,
            "<text class=\"lane-name\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            ML - 8.0,
            lane_y(lane) + 4.0,
            esc(name)
        );
    }
    // Time ticks, skipping labels that would overlap the previous one.
    let mut last_label = f64::NEG_INFINITY;
    for (x, t) in axis.ticks() {
        if x - last_label < 46.0 {
            continue;
        }
        last_label = x;
        w!(out, "<line class=\"tick\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{MT}\" y2=\"{:.1}\"/>", lanes_bottom + 4.0);
        w!(out, "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>", lanes_bottom + 17.0, fmt_clock(t));
    }
    // Breaks: silences cut out of the axis.
    for pair in axis.segments.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let gap = b.t0 - a.t1;
        w!(
            out,
            "<g><title>{} of silence ({}–{}), not drawn to scale</title>\
             <rect class=\"brk\" x=\"{:.1}\" y=\"{MT}\" width=\"{:.1}\" height=\"{:.1}\"/>\
             <line class=\"brk-edge\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{MT}\" y2=\"{:.1}\"/>\
             <line class=\"brk-edge\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{MT}\" y2=\"{:.1}\"/>\
             <text class=\"brk-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">+{}</text></g>",
            fmt_gap(gap),
            fmt_clock(a.t1),
            fmt_clock(b.t0),
            a.x1 + 3.0,
            BREAK_W - 6.0,
            lanes_bottom - MT,
            a.x1 + 3.0,
            a.x1 + 3.0,
            lanes_bottom,
            b.x0 - 3.0,
            b.x0 - 3.0,
            lanes_bottom,
            (a.x1 + b.x0) / 2.0,
            MT + PLOT_H / 2.0 + 4.0,
            fmt_gap(gap)
        );
    }

    // Marks, with the links from a judgment (or a direct trigger) to the response
    // drawn underneath them.
    let mut links = String::new();
    let mut marks = String::new();
    let mut judged: HashMap<i64, (f64, f64)> = HashMap::new();
    let mut messages: HashMap<i64, f64> = HashMap::new();
    for (i, e) in c.events.iter().enumerate() {
        let x = axis.x(e.at);
        let Some((shape, tip)) = mark(e, x, ctx) else {
            continue;
        };
        match e.kind {
            "message" => {
                messages.insert(time_key(e.at), x);
            }
            "judge" => {
                if let (Some(msg_t), Some(score)) = (num(e.line, "msg_t"), num(e.line, "score")) {
                    judged.insert(time_key(msg_t), (x, y_score(score)));
                }
            }
            "respond" | "respond_failed" => {
                let key = num(e.line, "msg_t").map(time_key);
                let from = key.and_then(|k| {
                    judged.get(&k).copied().or_else(|| messages.get(&k).map(|&mx| (mx, lane_y(LANE_MESSAGES))))
                });
                if let Some((fx, fy)) = from {
                    w!(
                        links,
                        "<line class=\"link\" x1=\"{fx:.1}\" y1=\"{fy:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>",
                        lane_y(LANE_BOT)
                    );
                }
            }
            _ => {}
        }
        // Marks link to their table row when the row is shown.
        if i < shown_rows {
            w!(marks, "<a href=\"#c{ci}-e{i}\"><title>{}</title>{shape}</a>\n", esc(&clip(&tip, TOOLTIP_CHARS)));
        } else {
            w!(marks, "<g><title>{}</title>{shape}</g>\n", esc(&clip(&tip, TOOLTIP_CHARS)));
        }
    }
    out.push_str(&links);
    out.push_str(&marks);
    out.push_str("</svg></div>\n");
}

/// The threshold line(s), the zones they make, and their labels. The labels sit on
/// the lines at the left and again every `THRESHOLD_LABEL_EVERY` pixels, so a wide
/// chart scrolled sideways still says which line is which.
fn thresholds_svg(out: &mut String, th: Thresholds, x_end: f64) {
    let zone_x = ML + 6.0;
    let line = |out: &mut String, class: &str, v: i32| {
        let y = y_score(v as f64);
        w!(out, "<line class=\"{class}\" x1=\"{ML}\" x2=\"{x_end:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>");
    };
    let label = |out: &mut String, class: &str, y: f64, text: &str| {
        let mut x = ML + 6.0;
        while x < x_end - 200.0 || x == ML + 6.0 {
            w!(out, "<text class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\">{text}</text>");
            x += THRESHOLD_LABEL_EVERY;
        }
    };
    let zone = |out: &mut String, y: f64, text: &str| {
        w!(out, "<text class=\"zone\" x=\"{zone_x:.1}\" y=\"{y:.1}\">{text}</text>");
    };
    match th {
        Thresholds::Score(v) => {
            let y = y_score(v as f64);
            w!(
                out,
                "<rect class=\"zone-resp\" x=\"{ML}\" y=\"{MT}\" width=\"{:.1}\" height=\"{:.1}\"/>",
                x_end - ML,
                y - MT
            );
            line(out, "th", v);
            if y - MT > 30.0 {
                zone(out, MT + 12.0, "RESPOND");
            }
            zone(out, y + 13.0, "SKIP");
            label(out, "thl", y - 5.0, &format!("threshold {v}"));
        }
        Thresholds::Band { low, high } => {
            let (yh, yl) = (y_score(high as f64), y_score(low as f64));
            w!(
                out,
                "<rect class=\"zone-resp\" x=\"{ML}\" y=\"{MT}\" width=\"{:.1}\" height=\"{:.1}\"/>",
                x_end - ML,
                yh - MT
            );
            w!(
                out,
                "<rect class=\"zone-llm\" x=\"{ML}\" y=\"{yh:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
                x_end - ML,
                (yl - yh).max(0.0)
            );
            line(out, "th", high);
            line(out, "th-llm", low);
            if yh - MT > 30.0 {
                zone(out, MT + 12.0, "RESPOND");
            }
            label(out, "thl", yh - 5.0, &format!("LLM high {high}"));
            // Close thresholds leave no room between the lines: the labels that would
            // collide there move below the low line or are left out.
            if yl - yh >= 30.0 {
                zone(out, yh + 13.0, "ASK THE LLM");
            }
            if yl - yh >= 16.0 {
                label(out, "thl-llm", yl - 5.0, &format!("LLM low {low}"));
                zone(out, yl + 13.0, "SKIP");
            } else {
                label(out, "thl-llm", yl + 13.0, &format!("LLM low {low}"));
            }
        }
    }
}

/// The SVG shape of one event at `x`, and its tooltip (plain text, escaped later).
/// Kinds the chart does not know are left to the table.
fn mark(e: &Ev, x: f64, ctx: &Ctx) -> Option<(String, String)> {
    let line = e.line;
    let when = fmt_time(e.at);
    let thread = e.thread.map(|t| format!(" · thread {t}")).unwrap_or_default();
    let msg_at = num(line, "msg_t").map(fmt_time).unwrap_or_else(|| "?".into());
    let ym = lane_y(LANE_MESSAGES);
    let yb = lane_y(LANE_BOT);
    let ys = lane_y(LANE_SUPERSEDED);
    Some(match e.kind {
        "message" => {
            let user = str_of(line, "user").unwrap_or("?");
            let text = str_of(line, "text").unwrap_or("");
            let mut tip = format!("{user}: {text}\n{when}{thread}");
            let shape = match (str_of(line, "author"), str_of(line, "trigger")) {
                (Some("own_bot"), _) => {
                    tip.push_str(" · the bot's own message");
                    square(x, ym, 4.5, "m-own", None)
                }
                (Some(author), _) => {
                    tip.push_str(&format!(" · {author}"));
                    square(x, ym, 4.5, "m-bot", None)
                }
                (None, Some(trigger)) => {
                    tip.push_str(&format!(" · direct trigger: {trigger}"));
                    diamond(x, ym, 7.0, "m-trigger", Some(ctx.colors.of(user)))
                }
                (None, None) => circle(x, ym, 4.5, "m-human", Some(ctx.colors.of(user))),
            };
            (shape, tip)
        }
        "edited" => (
            circle(x, ym, 3.5, "m-edit", None),
            format!("edited (message at {msg_at}): {}\n{when}{thread}", str_of(line, "text").unwrap_or("")),
        ),
        "deleted" => (cross(x, ym, 4.0, "m-del"), format!("message at {msg_at} deleted\n{when}{thread}")),
        "judge" => {
            let score = num(line, "score")?;
            let respond = bool_of(line, "respond");
            let mut shape = circle(x, y_score(score), 5.0, if respond { "j-resp" } else { "j-skip" }, None);
            if bool_of(line, "llm_called") {
                shape.push_str(&circle(x, y_score(score), 8.5, "j-llm", None));
            }
            if line.get("llm_error").is_some_and(|v| !v.is_null()) {
                shape.push_str(&circle(x, y_score(score), 11.5, "j-err", None));
            }
            (shape, judge_tip(line, &when, &thread, &msg_at))
        }
        "respond" => {
            let ty = str_of(line, "type").unwrap_or("?");
            let shape = match ty {
                "full_response" => format!(
                    "<rect class=\"r-full\" x=\"{:.1}\" y=\"{:.1}\" width=\"14\" height=\"11\" rx=\"3\"/>",
                    x - 7.0,
                    yb - 5.5
                ),
                "short_ack" => triangle(x, yb, 7.0, "r-ack"),
                "react_only" => circle(x, yb, 6.0, "r-react", None),
                _ => circle(x, yb, 5.0, "r-other", None),
            };
            let what = response_content(line);
            let mode = str_of(line, "mode").unwrap_or("?");
            let tip = format!("{} {ty} ({mode}): {what}\nfor the message at {msg_at} · {when}{thread}", ctx.bot);
            (shape, tip)
        }
        "respond_failed" => (
            cross(x, yb, 6.0, "r-fail"),
            format!(
                "{} {} failed ({}): {}\nfor the message at {msg_at} · {when}{thread}",
                ctx.bot,
                str_of(line, "type").unwrap_or("?"),
                str_of(line, "mode").unwrap_or("?"),
                str_of(line, "reason").unwrap_or("?")
            ),
        ),
        "superseded" => {
            let by = num(line, "by_t").map(fmt_time).unwrap_or_else(|| "?".into());
            (
                circle(x, ys, 5.0, "s-sup", None),
                format!(
                    "superseded by message at t={by} ({} stage)\nthe message at {msg_at} · {when}{thread}",
                    str_of(line, "stage").unwrap_or("?")
                ),
            )
        }
        "dropped" => (
            cross(x, ys, 4.5, "s-drop"),
            format!(
                "dropped at the {} stage: {}\nthe message at {msg_at} · {when}{thread}",
                str_of(line, "stage").unwrap_or("?"),
                str_of(line, "reason").unwrap_or("?")
            ),
        ),
        _ => return None,
    })
}

fn judge_tip(line: &Value, when: &str, thread: &str, msg_at: &str) -> String {
    let score = line.get("score").map(fmt_num).unwrap_or_else(|| "?".into());
    let mut tip = format!("score {score} → {} ({})\n", outcome(line), decision_label(line));
    let parts: Vec<String> = breakdown(line).iter().map(|(k, v)| format!("{k} {}", signed(v))).collect();
    if !parts.is_empty() {
        tip.push_str(&parts.join(", "));
        tip.push('\n');
    }
    if let Some(reason) = str_of(line, "reason") {
        tip.push_str(&format!("reason: {reason}\n"));
    }
    if let Some(err) = str_of(line, "llm_error") {
        tip.push_str(&format!("LLM error: {err}\n"));
    }
    let user = str_of(line, "user").unwrap_or("?");
    tip.push_str(&format!("{user}'s message at {msg_at} · judged at {when}{thread}"));
    tip
}

/// "respond full_response in 20s" or "skip".
fn outcome(line: &Value) -> String {
    if str_of(line, "decision") == Some("wait") {
        return match line.get("delay_seconds").filter(|v| v.is_number()) {
            Some(d) => format!("wait {}s", fmt_num(d)),
            None => "wait".into(),
        };
    }
    if !bool_of(line, "respond") {
        return "skip".into();
    }
    let mut s = "respond".to_owned();
    if let Some(ty) = str_of(line, "response_type") {
        s.push(' ');
        s.push_str(ty);
    }
    if let Some(d) = line.get("delay_seconds").filter(|v| v.is_number()) {
        s.push_str(&format!(" in {}s", fmt_num(d)));
    }
    s
}

/// Who decided: the score against the thresholds, or the LLM judge.
fn decision_label(line: &Value) -> String {
    match str_of(line, "decision") {
        Some("llm") => "asked the LLM".into(),
        Some("respond" | "skip") => "by score".into(),
        Some("wait") => "judged again later".into(),
        Some(other) => other.into(),
        None => "?".into(),
    }
}

fn breakdown(line: &Value) -> Vec<(&str, &Value)> {
    line.get("breakdown")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

/// What a response said: its text, or the emoji it reacted with.
fn response_content(line: &Value) -> String {
    match (str_of(line, "text"), str_of(line, "emoji")) {
        (Some(text), _) => text.to_owned(),
        (None, Some(emoji)) => format!(":{emoji}:"),
        (None, None) => String::new(),
    }
}

// Shapes. `fill` overrides the class colour (per-user colours).
fn fill_attr(fill: Option<&str>) -> String {
    fill.map(|f| format!(" fill=\"{f}\"")).unwrap_or_default()
}

fn circle(x: f64, y: f64, r: f64, class: &str, fill: Option<&str>) -> String {
    format!("<circle class=\"{class}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\"{}/>", fill_attr(fill))
}

fn square(x: f64, y: f64, half: f64, class: &str, fill: Option<&str>) -> String {
    format!(
        "<rect class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{}\" height=\"{}\"{}/>",
        x - half,
        y - half,
        half * 2.0,
        half * 2.0,
        fill_attr(fill)
    )
}

fn diamond(x: f64, y: f64, r: f64, class: &str, fill: Option<&str>) -> String {
    format!(
        "<path class=\"{class}\" d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\"{}/>",
        y - r,
        x + r,
        y + r,
        x - r,
        fill_attr(fill)
    )
}

fn triangle(x: f64, y: f64, r: f64, class: &str) -> String {
    format!(
        "<path class=\"{class}\" d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\"/>",
        y - r,
        x + r,
        y + r * 0.8,
        x - r,
        y + r * 0.8
    )
}

fn cross(x: f64, y: f64, r: f64, class: &str) -> String {
    format!(
        "<path class=\"{class}\" d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\"/>",
        x - r,
        y - r,
        x + r,
        y + r,
        x - r,
        y + r,
        x + r,
        y - r
    )
}

fn legend(out: &mut String, ctx: &Ctx) {
    let icon = |shape: String| format!("<svg width=\"18\" height=\"18\" viewBox=\"0 0 18 18\">{shape}</svg>");
    let rect = "<rect class=\"r-full\" x=\"2\" y=\"3.5\" width=\"14\" height=\"11\" rx=\"3\"/>".to_owned();
    let items = [
        (circle(9.0, 9.0, 4.5, "m-human", Some(USER_COLORS[0])), "message (colour = user)".to_owned()),
        (diamond(9.0, 9.0, 7.0, "m-trigger", Some(USER_COLORS[1])), "direct trigger (mention, reply, name)".into()),
        (square(9.0, 9.0, 4.5, "m-bot", None), "other bot".into()),
        (circle(9.0, 9.0, 5.0, "j-resp", None), "judged: respond".into()),
        (circle(9.0, 9.0, 5.0, "j-skip", None), "judged: skip".into()),
        (circle(9.0, 9.0, 3.5, "j-skip", None) + &circle(9.0, 9.0, 7.0, "j-llm", None), "LLM asked".into()),
        (rect, format!("{} full_response", ctx.bot)),
        (triangle(9.0, 10.0, 7.0, "r-ack"), "short_ack".into()),
        (circle(9.0, 9.0, 6.0, "r-react", None), "react_only".into()),
        (cross(9.0, 9.0, 5.5, "r-fail"), "response failed".into()),
        (circle(9.0, 9.0, 5.0, "s-sup", None), "superseded".into()),
        (cross(9.0, 9.0, 4.5, "s-drop"), "dropped".into()),
    ];
    out.push_str("<div class=\"legend\">");
    for (shape, label) in items {
        w!(out, "<span>{}{}</span>", icon(shape), esc(&label));
    }
    out.push_str("</div>\n");
}

// ---------------------------------------------------------------------------
// The table under the chart

fn table(out: &mut String, ci: usize, c: &Channel, ctx: &Ctx, shown: usize) {
    if c.events.is_empty() {
        return;
    }
    out.push_str(
        "<table class=\"events\"><thead><tr><th>time</th><th>thread</th><th>who</th><th>score</th>\
         <th>what</th></tr></thead><tbody>\n",
    );
    for (i, e) in c.events.iter().take(shown).enumerate() {
        row(out, ci, i, e, ctx);
    }
    out.push_str("</tbody></table>\n");
    if shown < c.events.len() {
        w!(
            out,
            "<p class=\"cap\">Showing the first {shown} of {} events; the chart above has them all.</p>\n",
            c.events.len()
        );
    }
}

fn row(out: &mut String, ci: usize, i: usize, e: &Ev, ctx: &Ctx) {
    let line = e.line;
    // Kinds become a class name, so anything unexpected is reduced to safe characters.
    let class: String = e.kind.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let time = e.t.map(fmt_time).unwrap_or_else(|| "?".into());
    let thread = match e.thread {
        Some(t) => format!(
            "<span class=\"thread\" style=\"background:hsl({} 70% 90%)\">{}</span>",
            hash(t) % 360,
            esc(&clip(t, 40))
        ),
        None => "<span class=\"top\">–</span>".into(),
    };
    let msg_at = num(line, "msg_t").map(fmt_time).unwrap_or_else(|| "?".into());
    let (who, score, what) = match e.kind {
        "message" => message_cells(line, ctx),
        "edited" => (
            sys("edited"),
            String::new(),
            format!("message at {msg_at} now reads: {}", text_cell(str_of(line, "text").unwrap_or(""))),
        ),
        "deleted" => (sys("deleted"), String::new(), format!("message at {msg_at} deleted")),
        "judge" if line.get("score").is_some() => judge_cells(line, &msg_at),
        "respond" => {
            let ty = str_of(line, "type").unwrap_or("?");
            (
                format!("<span class=\"bot\">{}</span>", esc(ctx.bot)),
                String::new(),
                format!(
                    "<span class=\"badge t-{}\">{}</span><span class=\"badge\">{}</span> {} \
                     <span class=\"reason\">· for the message at {msg_at}</span>",
                    class_safe(ty),
                    esc(ty),
                    esc(str_of(line, "mode").unwrap_or("?")),
                    text_cell(&response_content(line))
                ),
            )
        }
        "respond_failed" => (
            format!("<span class=\"bot\">{}</span>", esc(ctx.bot)),
            String::new(),
            format!(
                "<span class=\"err\">failed</span> <span class=\"badge\">{}</span><span class=\"badge\">{}</span> {} \
                 <span class=\"reason\">· for the message at {msg_at}</span>",
                esc(str_of(line, "type").unwrap_or("?")),
                esc(str_of(line, "mode").unwrap_or("?")),
                text_cell(str_of(line, "reason").unwrap_or("?"))
            ),
        ),
        "superseded" => (
            sys("superseded"),
            String::new(),
            format!(
                "the {} of the message at {msg_at} was superseded by the message at {}",
                esc(str_of(line, "stage").unwrap_or("?")),
                num(line, "by_t").map(fmt_time).unwrap_or_else(|| "?".into())
            ),
        ),
        "dropped" => (
            sys("dropped"),
            String::new(),
            format!(
                "the message at {msg_at} was dropped at the {} stage: {}",
                esc(str_of(line, "stage").unwrap_or("?")),
                text_cell(str_of(line, "reason").unwrap_or("?"))
            ),
        ),
        "summary" => {
            let topics: Vec<&str> = line
                .get("topic_keywords")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            (
                sys("memory"),
                String::new(),
                format!(
                    "<span class=\"badge\">summary of {} messages</span>{} {} \
                     <span class=\"reason\">· mood: {} · topics: {}</span>",
                    num(line, "messages").map_or("?".into(), |n| format!("{n}")),
                    if bool_of(line, "workspace") { "<span class=\"badge\">workspace too</span>" } else { "" },
                    text_cell(str_of(line, "summary").unwrap_or("")),
                    esc(&clip(str_of(line, "mood").unwrap_or(""), CELL_CHARS)),
                    esc(&clip(&topics.join(", "), CELL_CHARS))
                ),
            )
        }
        // Unknown kinds, and judgments without a score, as they were logged.
        other => (sys(other), String::new(), format!("<code>{}</code>", esc(&clip(&line.to_string(), CELL_CHARS)))),
    };
    w!(
        out,
        "<tr id=\"c{ci}-e{i}\" class=\"k-{class}\"><td class=\"time\">{time}</td><td>{thread}</td>\
         <td class=\"who\">{who}</td><td>{score}</td><td class=\"what\">{what}</td></tr>\n"
    );
}

fn message_cells(line: &Value, ctx: &Ctx) -> (String, String, String) {
    let user = str_of(line, "user").unwrap_or("?");
    let who =
        format!("<span class=\"dot\" style=\"background:{}\"></span>{}", ctx.colors.of(user), esc(&clip(user, 40)));
    let mut what = text_cell(str_of(line, "text").unwrap_or(""));
    if let Some(trigger) = str_of(line, "trigger") {
        w!(what, "<span class=\"badge trig\">{}</span>", esc(trigger));
    }
    if let Some(author) = str_of(line, "author") {
        w!(what, "<span class=\"badge\">{}</span>", esc(author));
    }
    (who, String::new(), what)
}

fn judge_cells(line: &Value, msg_at: &str) -> (String, String, String) {
    let respond = bool_of(line, "respond");
    let yes = if respond { "yes" } else { "no" };
    let score_v = num(line, "score").unwrap_or(0.0);
    let score = format!(
        "<span class=\"score {yes}\">{}</span><span class=\"bar\"><i style=\"width:{:.0}%;background:var(--{})\"></i></span>",
        line.get("score").map(fmt_num).unwrap_or_default(),
        score_v.clamp(0.0, 100.0),
        if respond { "resp" } else { "skip" }
    );
    let llm = bool_of(line, "llm_called");
    let mut what = format!(
        "<span class=\"dec {yes}\">{}</span> <span class=\"dec {}\">· {}</span> ",
        esc(&outcome(line)),
        if llm { "llm" } else { "by" },
        esc(&decision_label(line))
    );
    for (name, v) in breakdown(line) {
        let class = match v.as_f64() {
            Some(n) if n > 0.0 => "pos",
            Some(n) if n < 0.0 => "neg",
            _ => "",
        };
        w!(what, "<span class=\"chip {class}\">{} {}</span>", esc(name), esc(&signed(v)));
    }
    let user = str_of(line, "user").unwrap_or("?");
    w!(
        what,
        "<div class=\"reason\">{}{}'s message at {msg_at}</div>",
        str_of(line, "reason").map(|r| format!("{} · ", esc(&clip(r, CELL_CHARS)))).unwrap_or_default(),
        esc(&clip(user, 40))
    );
    if let Some(err) = str_of(line, "llm_error") {
        w!(what, "<div class=\"err\">LLM error: {}</div>", esc(&clip(err, CELL_CHARS)));
    }
    (sys("judge"), score, what)
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

fn sys(label: &str) -> String {
    format!("<span class=\"sys\">{}</span>", esc(&clip(label, 40)))
}

fn text_cell(text: &str) -> String {
    esc(&clip(text, CELL_CHARS))
}

fn class_safe(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

// ---------------------------------------------------------------------------
// Small helpers

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|n| n.is_finite())
}

fn bool_of(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// A JSON number as written ("20", "0.8"); anything else as JSON.
fn fmt_num(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Breakdown points with their sign: "+10", "−50".
fn signed(v: &Value) -> String {
    match v.as_f64() {
        Some(n) if n > 0.0 => format!("+{}", fmt_num(v)),
        Some(n) if n < 0.0 => format!("−{}", fmt_num(v).trim_start_matches('-')),
        _ => fmt_num(v),
    }
}

/// Escapes text for HTML and SVG content and attribute values. Control characters
/// other than newline and tab are dropped: they have no business in a page.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters, with "…" when cut.
fn clip(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]).into(),
        None => s.into(),
    }
}

/// A tick label: "m:ss", or "h:mm:ss" from an hour on.
fn fmt_clock(t: f64) -> String {
    let sign = if t < 0.0 { "-" } else { "" };
    let s = t.abs().floor() as u64;
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 { format!("{sign}{h}:{m:02}:{sec:02}") } else { format!("{sign}{m}:{sec:02}") }
}

/// A time in the table: like `fmt_clock`, with tenths when there are any ("0:32.8").
fn fmt_time(t: f64) -> String {
    let tenths = (t.abs() * 10.0).round() as u64;
    let whole = fmt_clock((tenths / 10) as f64 * t.signum());
    match tenths % 10 {
        0 => whole,
        frac => format!("{whole}.{frac}"),
    }
}

/// A silence: "45s", "31m", "2h05m".
fn fmt_gap(d: f64) -> String {
    let s = d.max(0.0).round() as u64;
    match s {
        0..90 => format!("{s}s"),
        90..5400 => format!("{}m", (s + 30) / 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

/// FNV-1a, for stable per-thread colours.
fn hash(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rules-only replay of two channels (the transcript in the report's brief).
    const SAMPLE: &str = r#"
{"t":0.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"おはよう"}
{"t":12.5,"kind":"message","channel":"general","thread":"t1","user":"bob","text":"<@bot> 今日の天気は？","trigger":"mention"}
{"t":12.5,"kind":"respond","channel":"general","thread":"t1","msg_t":12.5,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":32.827,"kind":"judge","channel":"general","thread":null,"msg_t":0.0,"user":"alice","score":0,"breakdown":{"after_silence":10,"cooldown":-50,"no_mention":-10},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":100.0,"kind":"message","channel":"dev","thread":null,"user":"carol","text":"誰か CI の設定わかる人いますか？"}
{"t":130.623,"kind":"judge","channel":"dev","thread":null,"msg_t":100.0,"user":"carol","score":20,"breakdown":{"after_silence":10,"no_mention":-10,"question":20},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":200.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done"}
{"t":201.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done 2"}
{"t":202.0,"kind":"message","channel":"general","thread":null,"user":"bob","text":"ok"}
{"t":223.174,"kind":"judge","channel":"general","thread":null,"msg_t":202.0,"user":"bob","score":10,"breakdown":{"engagement":40,"no_mention":-10,"one_on_one":-20},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":225.313,"kind":"superseded","channel":"general","thread":null,"msg_t":200.0,"stage":"judge","by_t":202.0}
{"t":236.02,"kind":"superseded","channel":"general","thread":null,"msg_t":201.0,"stage":"judge","by_t":202.0}
{"t":2000.0,"kind":"message","channel":"dev","thread":null,"user":"dave","text":"kuuki, what do you think?","trigger":"name"}
{"t":2000.0,"kind":"respond","channel":"dev","thread":null,"msg_t":2000.0,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":2000.0,"kind":"stats","channel":"*","thread":null,"messages":7,"judgments":3,"llm_judgments":0,"superseded":2,"dropped":0,"respond_failed":0,"llm_calls":{"generate":2,"judge":0,"reflect":0,"summarize":0},"llm_tokens":{"generate":482,"judge":0,"reflect":0,"summarize":0},"responses":{"full_response":2,"react_only":0,"short_ack":0}}
"#;

    /// The same replay with the LLM judge: carol's question is answered after asking it.
    const SAMPLE_LLM: &str = r#"
{"t":0.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"おはよう"}
{"t":12.5,"kind":"message","channel":"general","thread":"t1","user":"bob","text":"<@bot> 今日の天気は？","trigger":"mention"}
{"t":12.5,"kind":"respond","channel":"general","thread":"t1","msg_t":12.5,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":32.827,"kind":"judge","channel":"general","thread":null,"msg_t":0.0,"user":"alice","score":0,"breakdown":{"after_silence":10,"cooldown":-50,"no_mention":-10},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":100.0,"kind":"message","channel":"dev","thread":null,"user":"carol","text":"誰か CI の設定わかる人いますか？"}
{"t":130.623,"kind":"judge","channel":"dev","thread":null,"msg_t":100.0,"user":"carol","score":20,"breakdown":{"after_silence":10,"no_mention":-10,"question":20},"decision":"llm","llm_called":true,"respond":true,"reason":"nobody answered","response_type":"full_response","delay_seconds":20,"llm":{"should_respond":true,"reason":"nobody answered","confidence":0.8,"delay_seconds":20,"response_type":"full_response","conversation_state":"active"}}
{"t":150.623,"kind":"respond","channel":"dev","thread":null,"msg_t":100.0,"type":"full_response","mode":"ambient","text":"それなら私が見ますよ"}
{"t":200.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done"}
{"t":201.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done 2"}
{"t":202.0,"kind":"message","channel":"general","thread":null,"user":"bob","text":"ok"}
{"t":223.174,"kind":"judge","channel":"general","thread":null,"msg_t":202.0,"user":"bob","score":10,"breakdown":{"engagement":40,"no_mention":-10,"one_on_one":-20},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":225.313,"kind":"superseded","channel":"general","thread":null,"msg_t":200.0,"stage":"judge","by_t":202.0}
{"t":236.02,"kind":"superseded","channel":"general","thread":null,"msg_t":201.0,"stage":"judge","by_t":202.0}
{"t":2000.0,"kind":"message","channel":"dev","thread":null,"user":"dave","text":"kuuki, what do you think?","trigger":"name"}
{"t":2000.0,"kind":"respond","channel":"dev","thread":null,"msg_t":2000.0,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":2000.0,"kind":"stats","channel":"*","thread":null,"messages":7,"judgments":3,"llm_judgments":1,"superseded":2,"dropped":0,"respond_failed":0,"llm_calls":{"generate":3,"judge":1,"reflect":0,"summarize":0},"llm_tokens":{"generate":720,"judge":541,"reflect":0,"summarize":0},"responses":{"full_response":3,"react_only":0,"short_ack":0}}
"#;

    fn parse(text: &str) -> Vec<Value> {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("test logs are JSON"))
            .collect()
    }

    fn rules() -> Settings {
        Settings::default().for_llm(false)
    }

    fn with_llm_judge() -> Settings {
        Settings::default().for_llm(true)
    }

    /// Only the charts, so legend icons (which reuse the mark classes) are not counted.
    fn charts(html: &str) -> String {
        html.split("<svg class=\"chart\"").skip(1).map(|part| part.split("</svg>").next().unwrap_or("")).collect()
    }

    /// The part of the page for channel section `ci`.
    fn section(html: &str, ci: usize) -> &str {
        let start = html.find(&format!("id=\"ch-{ci}\"")).expect("section present");
        let end = html[start..].find("</section>").expect("section closed");
        &html[start..start + end]
    }

    fn message(t: f64, channel: &str, user: &str, text: &str) -> Value {
        json!({"t": t, "kind": "message", "channel": channel, "thread": null, "user": user, "text": text})
    }

    #[test]
    fn a_section_per_channel_in_order_of_first_appearance() {
        let html = render("sample", &parse(SAMPLE), &rules());
        assert_eq!(html.matches("<section class=\"channel\"").count(), 2);
        let general = html.find("<h2>#general</h2>").expect("general section");
        let dev = html.find("<h2>#dev</h2>").expect("dev section");
        assert!(general < dev, "general appears first in the log");
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 2);
        assert!(section(&html, 0).contains("5 messages · 2 judgments · 1 response · 2 superseded"));
    }

    #[test]
    fn rules_only_draws_the_score_threshold() {
        let mut settings = rules();
        settings.judge_score_threshold = 45;
        let html = render("sample", &parse(SAMPLE), &settings);
        assert!(html.contains(">threshold 45</text>"));
        assert!(html.contains(&format!("y1=\"{:.1}\"", y_score(45.0))), "the line is at 45");
        assert!(!html.contains("LLM low"));
        assert!(!html.contains("class=\"zone-llm\""));
        assert!(html.contains("Rules only: a score of 45 or more responds."));
    }

    #[test]
    fn the_llm_judge_draws_the_band() {
        let mut settings = with_llm_judge();
        settings.judge_llm_threshold_low = 25;
        settings.judge_llm_threshold_high = 75;
        let html = render("sample", &parse(SAMPLE_LLM), &settings);
        assert!(html.contains(">LLM low 25</text>"));
        assert!(html.contains(">LLM high 75</text>"));
        assert_eq!(html.matches("class=\"zone-llm\"").count(), 2, "one band per channel");
        assert!(!html.contains(">threshold "));
    }

    #[test]
    fn the_llm_judge_without_an_llm_uses_the_score_threshold() {
        let settings = Settings { llm_judge_setting: Some(true), ..Settings::default() }.for_llm(false);
        let html = render("sample", &parse(SAMPLE), &settings);
        assert!(html.contains(">threshold 60</text>"));
        assert!(!html.contains("LLM high"));
    }

    #[test]
    fn superseded_judgments_are_marked() {
        let html = render("sample", &parse(SAMPLE), &rules());
        let charts = charts(&html);
        assert_eq!(charts.matches("class=\"s-sup\"").count(), 2);
        assert!(charts.contains("superseded by message at t=3:22 (judge stage)"));
        assert!(charts.contains(&format!("cy=\"{:.1}\"", lane_y(LANE_SUPERSEDED))));
        assert_eq!(html.matches("class=\"k-superseded\"").count(), 2);
    }

    #[test]
    fn judgments_are_plotted_by_outcome() {
        let html = render("sample", &parse(SAMPLE_LLM), &with_llm_judge());
        let charts = charts(&html);
        assert_eq!(charts.matches("class=\"j-resp\"").count(), 1, "carol's question was answered");
        assert_eq!(charts.matches("class=\"j-skip\"").count(), 2);
        assert_eq!(charts.matches("class=\"j-llm\"").count(), 1, "the LLM was asked once");
        assert!(charts.contains(&format!("cy=\"{:.1}\" r=\"5\"", y_score(20.0))), "score 20 at its height");
        assert!(charts.contains("score 20 → respond full_response in 20s (asked the LLM)"));
        assert!(charts.contains("after_silence +10, no_mention −10, question +20"));
        assert!(html.contains("<span class=\"chip neg\">no_mention −10</span>"));
    }

    #[test]
    fn responses_are_drawn_and_listed() {
        let html = render("sample", &parse(SAMPLE_LLM), &with_llm_judge());
        let drawn = charts(&html);
        assert_eq!(drawn.matches("class=\"r-full\"").count(), 3);
        assert!(drawn.contains("kuuki full_response (ambient): それなら私が見ますよ"));
        // The ambient response is tied to the judgment that caused it.
        assert!(drawn.contains("class=\"link\""));
        assert_eq!(html.matches("class=\"k-respond\"").count(), 3, "responses are highlighted rows");

        let mut lines = parse(SAMPLE);
        lines.push(json!({"t": 300.0, "kind": "respond", "channel": "dev", "thread": "t9", "msg_t": 100.0,
            "type": "react_only", "mode": "ambient", "emoji": "thinking_face"}));
        let html = render("sample", &lines, &rules());
        assert_eq!(charts(&html).matches("class=\"r-react\"").count(), 1);
        assert!(html.contains(":thinking_face:"));
    }

    #[test]
    fn summaries_read_as_memory_rows() {
        let lines = vec![json!({"t": 930.0, "kind": "summary", "channel": "dev", "thread": null, "msg_t": 0.0,
            "messages": 8, "summary": "deploy <b>talk</b>", "mood": "calm", "topic_keywords": ["deploy", "CI"],
            "active_users": ["alice"], "workspace": true})];
        let html = render("t", &lines, &Settings::default());
        assert!(html.contains("summary of 8 messages"), "{html}");
        assert!(html.contains("workspace too"));
        assert!(html.contains("deploy &lt;b&gt;talk&lt;/b&gt;"));
        assert!(html.contains("topics: deploy, CI"));
    }

    #[test]
    fn log_text_is_escaped() {
        let hostile = "<script>alert(\"x\")</script> & 'q'";
        let lines = vec![
            json!({"t": 1.0, "kind": "message", "channel": "<img src=x onerror=alert(1)>",
                "thread": "x\" onmouseover=\"alert(1)", "user": "<b>mallory</b>", "text": hostile}),
            json!({"t": 31.0, "kind": "judge", "channel": "<img src=x onerror=alert(1)>", "thread": null,
                "msg_t": 1.0, "user": "<b>mallory</b>", "score": 70, "breakdown": {"<i>rule</i>": 70},
                "decision": "respond", "llm_called": false, "respond": true, "reason": hostile}),
            json!({"t": 31.0, "kind": "<svg onload=alert(1)>", "channel": "c"}),
        ];
        let html = render("</title><script>", &lines, &rules());
        assert!(!html.contains("<script"), "no script element");
        assert!(!html.contains("<img"));
        assert!(!html.contains("<b>mallory"));
        assert!(!html.contains("<i>rule"));
        assert!(!html.contains("<svg onload"));
        assert!(!html.contains("\" onmouseover=\""));
        assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"));
        assert!(html.contains("&lt;b&gt;mallory&lt;/b&gt;: &lt;script&gt;"), "the tooltip too");
    }

    #[test]
    fn stats_are_summarised() {
        let html = render("sample", &parse(SAMPLE_LLM), &with_llm_judge());
        assert!(html.contains("<strong>7</strong><span>messages</span>"));
        assert!(html.contains("<strong>3</strong><span>judgments</span><small>1 asked the LLM</small>"));
        assert!(html.contains(
            "<strong>3</strong><span>responses</span><small>full_response 3 · short_ack 0 · react_only 0</small>"
        ));
        assert!(
            html.contains("<strong>4</strong><span>LLM calls</span><small>generate 3 · judge 1 · 1261 tokens</small>")
        );
        assert!(html.contains("<strong>2</strong><span>superseded</span>"));
        assert!(html.contains("<strong>33:20</strong><span>replayed</span>"));
        assert!(!html.contains("No stats line"));
    }

    #[test]
    fn without_a_stats_line_the_totals_are_counted() {
        let mut lines = parse(SAMPLE_LLM);
        lines.pop();
        let html = render("cut short", &lines, &with_llm_judge());
        assert!(html.contains("No stats line"));
        assert!(html.contains("<strong>7</strong><span>messages</span>"));
        assert!(html.contains("<strong>3</strong><span>judgments</span><small>1 asked the LLM</small>"));
        assert!(html.contains("<strong>3</strong><span>responses</span><small>full_response 3</small>"));
        assert!(html.contains("<strong>–</strong><span>LLM calls</span>"));
    }

    #[test]
    fn an_empty_log_is_a_page_that_says_so() {
        let html = render("empty", &[], &rules());
        assert!(html.starts_with("<!doctype html>"));
        assert!(html.contains("<meta charset=\"utf-8\">"));
        assert!(html.contains("No events"));
        assert!(!html.contains("<section"));
        assert!(html.contains("<strong>0</strong><span>messages</span>"));
        assert!(html.trim_end().ends_with("</html>"));
    }

    #[test]
    fn a_single_event() {
        let html = render("one", &[message(5.0, "general", "alice", "hi")], &rules());
        assert_eq!(html.matches("<section class=\"channel\"").count(), 1);
        assert!(charts(&html).contains("<title>alice: hi\n0:05</title>"));
        assert!(html.contains("<tr id=\"c0-e0\" class=\"k-message\">"));
        assert!(html.contains("href=\"#c0-e0\""), "the mark links to its row");
    }

    #[test]
    fn a_long_replay_stays_bounded() {
        // 100 channels of 40 events: everything shown.
        let lines: Vec<Value> =
            (0..4000).map(|i| message(i as f64 * 3.0, &format!("ch{}", i % 100), "alice", "メッセージ")).collect();
        let html = render("many", &lines, &rules());
        assert_eq!(html.matches("<section class=\"channel\"").count(), 100);
        assert_eq!(html.matches("<tr id=").count(), 4000);
        assert!(html.len() < 8_000_000, "{} bytes", html.len());

        // One busy channel: the table stops at the cap, the chart has every event.
        let lines: Vec<Value> = (0..1200).map(|i| message(i as f64, "busy", "bob", "x")).collect();
        let html = render("busy", &lines, &rules());
        assert_eq!(html.matches("<tr id=").count(), MAX_ROWS_PER_CHANNEL);
        assert!(html.contains("Showing the first 500 of 1200 events"));
        assert_eq!(charts(&html).matches("class=\"m-human\"").count(), 1200);
        assert!(html.contains(&format!("width=\"{:.0}\"", ML + 1200.0 * PX_PER_EVENT + MR)), "the chart widens");

        // Many busy channels: the page-wide budget caps the rows.
        let lines: Vec<Value> =
            (0..30 * 600).map(|i| message(i as f64, &format!("c{}", i % 30), "carol", "y")).collect();
        let html = render("busier", &lines, &rules());
        assert_eq!(html.matches("<tr id=").count(), MAX_ROWS_TOTAL);
        assert!(html.contains("Showing the first 0 of 600 events"));
    }

    #[test]
    fn odd_lines_do_not_break_the_page() {
        let lines = vec![
            json!(5),
            json!({"kind": "mystery", "channel": "general", "payload": "p&q"}),
            json!({"t": "soon", "kind": "judge", "channel": "general"}),
            json!({"t": 2.0, "kind": "message"}),
            json!({"t": 3.0, "kind": "respond", "channel": "general"}),
            json!({"t": 4.0, "kind": "superseded", "channel": "general", "by_t": "x"}),
            json!({"t": f64::MAX, "kind": "message", "channel": 7, "user": null, "text": ["?"]}),
            json!({"t": -5.0, "kind": "stats", "channel": "*", "messages": "many", "responses": []}),
        ];
        let html = render("odd", &lines, &rules());
        assert!(html.contains("1 log line(s) were not JSON objects"));
        // Unknown kinds are shown raw (escaped), whatever order the keys come in.
        let mystery = html.split("class=\"k-mystery\"").nth(1).and_then(|r| r.split("</tr>").next()).unwrap_or("");
        assert!(mystery.contains("<code>"), "{mystery}");
        assert!(mystery.contains("&quot;payload&quot;:&quot;p&amp;q&quot;"), "{mystery}");
        assert!(html.contains("<h2>#(no channel)</h2>"));
        assert!(html.contains("<h2>#7</h2>"));
        assert!(html.contains("<strong>–</strong><span>messages</span>"));
        assert!(html.contains("superseded by message at t=?"));
    }

    #[test]
    fn japanese_text_renders() {
        let html = render("日本語", &parse(SAMPLE), &rules());
        assert!(html.contains("<meta charset=\"utf-8\">"));
        assert!(html.contains("おはよう"));
        assert!(html.contains("<title>kuuki replay · 日本語</title>"));
        let font = html.split("font:14px/1.45 ").nth(1).and_then(|f| f.split('}').next()).unwrap_or("");
        assert!(font.contains("Noto Sans CJK JP"));
        assert!(font.ends_with(",sans-serif"), "{font}");
    }

    #[test]
    fn a_long_silence_is_drawn_as_a_break() {
        let html = render("sample", &parse(SAMPLE), &rules());
        // #dev is quiet from 1:40 to 33:20.
        let dev = section(&html, 1);
        assert_eq!(dev.matches("class=\"brk\"").count(), 1);
        assert!(dev.contains(">+31m</text>"));
        assert!(dev.contains("31m of silence (2:10–33:20), not drawn to scale"));
        assert!(!section(&html, 0).contains("class=\"brk\""), "#general has no long silence");
        assert!(section(&html, 0).contains(">3:30</text>"), "tick labels");
    }

    #[test]
    fn the_axis_keeps_time_order() {
        let times = [0.0, 10.0, 20.0, 5000.0, 5010.0];
        let axis = TimeAxis::new(&times, ML, MIN_PLOT_W);
        assert_eq!(axis.segments.len(), 2);
        let xs: Vec<f64> = times.iter().map(|&t| axis.x(t)).collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
        assert!(xs[4] <= ML + MIN_PLOT_W);
        // One instant: a single segment, drawn in its middle.
        let axis = TimeAxis::new(&[7.0], ML, MIN_PLOT_W);
        assert_eq!(axis.x(7.0), ML + MIN_PLOT_W / 2.0);
    }

    #[test]
    fn times_read_as_clock_times() {
        assert_eq!(fmt_clock(0.0), "0:00");
        assert_eq!(fmt_clock(75.9), "1:15");
        assert_eq!(fmt_clock(3725.0), "1:02:05");
        assert_eq!(fmt_time(32.827), "0:32.8");
        assert_eq!(fmt_time(100.0), "1:40");
        assert_eq!(fmt_gap(1850.0), "31m");
        assert_eq!(fmt_gap(45.0), "45s");
        assert_eq!(fmt_gap(7500.0), "2h05m");
    }
}
