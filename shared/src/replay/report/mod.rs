//! The HTML timeline report of a replay: one self-contained page (inline CSS and SVG,
//! no scripts, fonts or images, so it opens offline and can be mailed around) that
//! shows, per channel, when messages arrived, how each was scored against the
//! thresholds, and what the bot did about it.
//!
//! Three parts: `line.rs` reads the decision log into typed lines (why lines and not
//! `Event`s is said there); this file turns them into a view model, plain data with
//! the chart's geometry already computed (axis, breaks, ticks, mark positions), and
//! `report.html.j2` draws it. Every piece of log text reaches the page through the
//! template's HTML auto-escaping; nothing here writes markup. Tooltips are built here
//! as plain text (they are text content of an SVG `<title>`), and escaped like the rest.

mod axis;
mod line;
mod talkativeness;
#[cfg(test)]
mod tests;
mod view;

use std::collections::HashMap;

use minijinja::{AutoEscape, Environment, Value as JValue};
use serde_json::{Map, Value};

use crate::config::Settings;
use crate::domain::{Author, Decision, ResponseType};
use axis::{BREAK_MIN_SECONDS, TimeAxis, fmt_clock, fmt_gap, fmt_time};
use line::{Body, JudgeLine, Line, Read, StatsLine, name};
use view::*;

const TEMPLATE: &str = include_str!("report.html.j2");

/// Table rows shown per channel; the chart above the table still draws every event.
const MAX_ROWS_PER_CHANNEL: usize = 500;
/// Table rows over the whole page, so a replay of many busy channels stays openable.
const MAX_ROWS_TOTAL: usize = 10_000;
/// Characters of log text kept in a tooltip, and in a table cell.
const TOOLTIP_CHARS: usize = 240;
const CELL_CHARS: usize = 600;
/// Characters of a name (user, thread, label) in a table cell, and in the contents.
const NAME_CHARS: usize = 40;
const TOC_NAME_CHARS: usize = 60;

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
/// Tick labels closer than this to the previous one are left out.
const MIN_TICK_LABEL_GAP: f64 = 46.0;

/// Users get colours in order of first appearance, so the first ten never clash.
/// Green and grey are left out: they mean "responded" and "skipped" in the chart.
const USER_COLORS: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#e15759", "#17becf", "#b07aa1", "#edc948", "#ff9da7", "#9c755f", "#76b7b2", "#bcbd22"];
const NO_USER_COLOR: &str = "#6b7280";

/// A self-contained HTML page of the replay's decision log.
pub fn render(title: &str, lines: &[Value], settings: &Settings) -> String {
    let page = page(title, lines, settings);
    environment()
        .get_template("report")
        .expect("added in environment()")
        .render(minijinja::context! { page })
        .expect("the report renders")
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    // Control characters other than newline and tab have no business in a page (and
    // some are not allowed in SVG): every value printed is stripped of them, then
    // HTML-escaped as usual.
    env.set_formatter(|out, state, value| {
        let cleaned = match value.as_str() {
            Some(s) if !value.is_safe() && s.chars().any(is_stray_control) => {
                Some(JValue::from(s.chars().filter(|c| !is_stray_control(*c)).collect::<String>()))
            }
            _ => None,
        };
        minijinja::escape_formatter(out, state, cleaned.as_ref().unwrap_or(value))
    });
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    // Coordinates as the chart wants them: one decimal, none, or as short as exact.
    env.add_filter("f1", |v: f64| format!("{v:.1}"));
    env.add_filter("f0", |v: f64| format!("{v:.0}"));
    env.add_filter("n", |v: f64| v.to_string());
    env.add_template("report", TEMPLATE).expect("the embedded report template parses");
    env
}

fn is_stray_control(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

// ---------------------------------------------------------------------------
// Building it

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
        if s.judge.llm_enabled {
            Thresholds::Band { low: s.judge.llm_threshold_low, high: s.judge.llm_threshold_high }
        } else {
            Thresholds::Score(s.judge.score_threshold)
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
    talk: crate::domain::talkativeness::TalkativenessLimits,
    colors: &'a UserColors,
    bot: &'a str,
}

/// One log line, placed in time.
struct Ev<'a> {
    /// Where to draw it: `t`, or the time of the line before when `t` is missing.
    at: f64,
    line: Line<'a>,
}

struct Channel<'a> {
    name: String,
    events: Vec<Ev<'a>>,
}

struct Grouped<'a> {
    channels: Vec<Channel<'a>>,
    stats: Option<StatsLine>,
    skipped: usize,
}

fn page(title: &str, lines: &[Value], settings: &Settings) -> Page {
    let thresholds = Thresholds::from_settings(settings);
    let Grouped { channels, stats, skipped } = group(lines);
    let colors = UserColors::new(&channels);
    let ctx = Ctx { thresholds, talk: settings.talkativeness.limits, colors: &colors, bot: &settings.bot.name };
    let derived = stats.is_none();
    let stats = match stats {
        Some(stats) => stats_view(&stats),
        None => stats_view(&derived_stats(&channels)),
    };
    let mut row_budget = MAX_ROWS_TOTAL;
    let channels = channels
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            let shown = c.events.len().min(MAX_ROWS_PER_CHANNEL).min(row_budget);
            row_budget -= shown;
            channel_view(ci, c, &ctx, shown)
        })
        .collect();
    Page {
        title: title.to_owned(),
        thresholds: thresholds.describe(),
        stats,
        derived,
        skipped,
        channels,
        legend: legend(&ctx),
        break_min: fmt_gap(BREAK_MIN_SECONDS),
    }
}

/// Splits the log into channels (in order of first appearance, events in time order)
/// and the final stats line.
fn group(lines: &[Value]) -> Grouped<'_> {
    let mut channels: Vec<Channel> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut stats = None;
    let mut skipped = 0;
    let mut last_at = 0.0;
    for raw in lines {
        let line = match line::read(raw) {
            Read::NotAnObject => {
                skipped += 1;
                continue;
            }
            Read::Stats(s) => {
                stats = Some(s);
                continue;
            }
            Read::Line(line) => line,
        };
        let at = line.t.unwrap_or(last_at);
        last_at = at;
        let ci = *index.entry(line.channel.clone()).or_insert_with(|| {
            channels.push(Channel { name: line.channel.clone(), events: Vec::new() });
            channels.len() - 1
        });
        channels[ci].events.push(Ev { at, line });
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
            let user = match &e.line.body {
                Body::Message(m) => m.user.as_deref(),
                Body::Judge(j) => j.user.as_deref(),
                _ => None,
            };
            if let Some(user) = user {
                let next = USER_COLORS[map.len() % USER_COLORS.len()];
                map.entry(user.to_owned()).or_insert(next);
            }
        }
        UserColors(map)
    }

    fn of(&self, user: &str) -> &'static str {
        self.0.get(user).copied().unwrap_or(NO_USER_COLOR)
    }
}

// ---------------------------------------------------------------------------
// Stats

/// The replay's totals, as cards.
fn stats_view(stats: &StatsLine) -> Vec<Stat> {
    let show = |n: Option<u64>| n.map_or_else(|| "–".to_owned(), |n| n.to_string());
    let stat = |value: String, label, detail: String, warn| Stat { value, label, detail, warn };
    let (responses, by_type) = tally(
        stats.responses.as_ref(),
        &[ResponseType::FullResponse, ResponseType::ShortAck, ResponseType::ReactOnly].map(ResponseType::as_str),
        false,
    );
    let (calls, by_role) = tally(stats.llm_calls.as_ref(), &[], true);
    let (tokens, _) = tally(stats.llm_tokens.as_ref(), &[], true);
    let llm_judged = stats.llm_judgments.map(|n| format!("{n} asked the LLM")).unwrap_or_default();
    let tokens = tokens.map(|t| format!("{t} tokens")).unwrap_or_default();
    let call_detail = [by_role, tokens].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" · ");
    let dropped = *stats.dropped;
    let failed = *stats.respond_failed;
    let mut cards = vec![
        stat(show(*stats.messages), "messages", String::new(), false),
        stat(show(*stats.judgments), "judgments", llm_judged, false),
        stat(show(responses), "responses", by_type, false),
        stat(show(calls), "LLM calls", call_detail, false),
        stat(show(*stats.superseded), "superseded", String::new(), false),
        stat(show(dropped), "dropped", String::new(), dropped.unwrap_or(0) > 0),
        stat(show(failed), "responses failed", String::new(), failed.unwrap_or(0) > 0),
    ];
    if let Some(t) = *stats.t {
        cards.push(stat(fmt_time(t), "replayed", "transcript time".into(), false));
    }
    cards
}

/// A `{name: count}` object as a total and "name n · name n", `first` names leading.
fn tally(map: Option<&Map<String, Value>>, first: &[&str], skip_zero: bool) -> (Option<u64>, String) {
    let Some(map) = map else {
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

/// The stats line's numbers, counted from the log lines (the LLM totals stay unknown).
fn derived_stats(channels: &[Channel]) -> StatsLine {
    let events = || channels.iter().flat_map(|c| &c.events).map(|e| &e.line.body);
    let count = |kind: &str| Some(events().filter(|b| b.kind() == kind).count() as u64).into();
    let mut responses = Map::new();
    for b in events() {
        if let Body::Respond(r) = b {
            let ty = r.response_type.map_or("?", ResponseType::as_str);
            let n = responses.get(ty).and_then(Value::as_u64).unwrap_or(0);
            responses.insert(ty.to_owned(), Value::from(n + 1));
        }
    }
    let llm_judged = events().filter(|b| matches!(b, Body::Judge(j) if j.llm_called.unwrap_or(false))).count();
    StatsLine {
        messages: count("message"),
        judgments: count("judge"),
        llm_judgments: Some(llm_judged as u64).into(),
        superseded: count("superseded"),
        dropped: count("dropped"),
        respond_failed: count("respond_failed"),
        responses: Some(responses).into(),
        ..StatsLine::default()
    }
}

// ---------------------------------------------------------------------------
// A channel: heading, chart, table

fn channel_view(ci: usize, c: &Channel, ctx: &Ctx, shown: usize) -> ChannelView {
    let count = |kind: &str| c.events.iter().filter(|e| e.line.body.kind() == kind).count();
    let (first, last) = (c.events.first().map_or(0.0, |e| e.at), c.events.last().map_or(0.0, |e| e.at));
    ChannelView {
        index: ci,
        name: c.name.clone(),
        toc_name: clip(&c.name, TOC_NAME_CHARS),
        messages: count("message"),
        judgments: count("judge"),
        responses: count("respond"),
        superseded: count("superseded"),
        first: fmt_time(first),
        last: fmt_time(last),
        chart: chart(ci, c, ctx, shown),
        rows: c.events.iter().take(shown).enumerate().map(|(i, e)| row(ci, i, e, ctx)).collect(),
        total: c.events.len(),
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

fn chart(ci: usize, c: &Channel, ctx: &Ctx, shown_rows: usize) -> Chart {
    let times: Vec<f64> = c.events.iter().map(|e| e.at).collect();
    let plot_w = (c.events.len() as f64 * PX_PER_EVENT).clamp(MIN_PLOT_W, MAX_PLOT_W);
    let axis = TimeAxis::new(&times, ML, plot_w);
    let x_end = ML + plot_w;
    let lanes_bottom = MT + PLOT_H + LANE_GAP + LANE_H * LANES as f64;

    let grid = (0..=100).step_by(20).map(|score| Grid { y: y_score(f64::from(score)), score }).collect();
    let (zones, threshold_lines, labels) = thresholds(ctx.thresholds, x_end);
    let bot = clip(ctx.bot, 12);
    let lanes = [(LANE_MESSAGES, "messages"), (LANE_BOT, &*bot), (LANE_SUPERSEDED, "superseded")]
        .into_iter()
        .map(|(lane, name)| Lane {
            top: lane_y(lane) - LANE_H / 2.0,
            h: LANE_H,
            y: lane_y(lane),
            name: name.to_owned(),
        })
        .collect();
    // Time ticks, leaving out labels that would overlap the previous one.
    let mut last_label = f64::NEG_INFINITY;
    let mut ticks = Vec::new();
    for (x, t) in axis.ticks() {
        if x - last_label >= MIN_TICK_LABEL_GAP {
            last_label = x;
            ticks.push(Tick { x, label: fmt_clock(t) });
        }
    }
    let breaks = axis
        .segments
        .windows(2)
        .map(|pair| Break {
            x0: pair[0].x1,
            x1: pair[1].x0,
            gap: fmt_gap(pair[1].t0 - pair[0].t1),
            from: fmt_clock(pair[0].t1),
            to: fmt_clock(pair[1].t0),
        })
        .collect();

    // Marks, and the links from a judgment (or a direct trigger) to its response.
    let mut links = Vec::new();
    let mut marks = Vec::new();
    let mut judged: HashMap<i64, (f64, f64)> = HashMap::new();
    let mut messages: HashMap<i64, f64> = HashMap::new();
    for (i, e) in c.events.iter().enumerate() {
        let x = axis.x(e.at);
        let Some((shapes, tip)) = mark(e, x, ctx) else {
            continue;
        };
        match &e.line.body {
            Body::Message(_) => {
                messages.insert(time_key(e.at), x);
            }
            Body::Judge(j) => {
                if let (Some(msg_t), Some(score)) = (e.line.msg_t, *j.score) {
                    judged.insert(time_key(msg_t), (x, y_score(score)));
                }
            }
            Body::Respond(_) | Body::RespondFailed(_) => {
                let key = e.line.msg_t.map(time_key);
                let from = key.and_then(|k| {
                    judged.get(&k).copied().or_else(|| messages.get(&k).map(|&mx| (mx, lane_y(LANE_MESSAGES))))
                });
                if let Some((x1, y1)) = from {
                    links.push(Link { x1, y1, x2: x, y2: lane_y(LANE_BOT) });
                }
            }
            _ => {}
        }
        // Marks link to their table row when the row is shown.
        let row = (i < shown_rows).then(|| row_id(ci, i));
        marks.push(Mark { row, tip: clip(&tip, TOOLTIP_CHARS), shapes });
    }
    let talk = talkativeness::band(c, &axis, chart_height() + talkativeness::BAND_GAP, &ctx.talk);
    let height = chart_height() + talk.as_ref().map_or(0.0, |_| talkativeness::BAND_GAP + talkativeness::BAND_H + 8.0);
    let talk = talk.map(|(band, talk_marks)| {
        marks.extend(talk_marks);
        band
    });
    Chart {
        width: x_end + MR,
        height,
        ml: ML,
        mt: MT,
        plot_w,
        plot_h: PLOT_H,
        x_end,
        lanes_bottom,
        grid,
        zones,
        threshold_lines,
        labels,
        lanes,
        ticks,
        breaks,
        links,
        marks,
        talk,
    }
}

fn row_id(ci: usize, i: usize) -> String {
    format!("c{ci}-e{i}")
}

/// The threshold line(s), the zones they make, and their labels. The labels sit on
/// the lines at the left and again every `THRESHOLD_LABEL_EVERY` pixels, so a wide
/// chart scrolled sideways still says which line is which.
fn thresholds(th: Thresholds, x_end: f64) -> (Vec<Zone>, Vec<Threshold>, Vec<Label>) {
    let zone_x = ML + 6.0;
    let mut labels = Vec::new();
    let mut label = |class, y: f64, text: String| {
        let mut x = ML + 6.0;
        while x < x_end - 200.0 || x == ML + 6.0 {
            labels.push(Label { class, x, y, text: text.clone() });
            x += THRESHOLD_LABEL_EVERY;
        }
    };
    let zone_label = |y: f64, text: &str| Label { class: "zone", x: zone_x, y, text: text.to_owned() };
    let mut zone_labels = Vec::new();
    let (zones, lines) = match th {
        Thresholds::Score(v) => {
            let y = y_score(f64::from(v));
            if y - MT > 30.0 {
                zone_labels.push(zone_label(MT + 12.0, "RESPOND"));
            }
            zone_labels.push(zone_label(y + 13.0, "SKIP"));
            label("thl", y - 5.0, format!("threshold {v}"));
            (vec![Zone { class: "zone-resp", y: MT, h: y - MT }], vec![Threshold { class: "th", y }])
        }
        Thresholds::Band { low, high } => {
            let (yh, yl) = (y_score(f64::from(high)), y_score(f64::from(low)));
            if yh - MT > 30.0 {
                zone_labels.push(zone_label(MT + 12.0, "RESPOND"));
            }
            label("thl", yh - 5.0, format!("LLM high {high}"));
            // Close thresholds leave no room between the lines: the labels that would
            // collide there move below the low line or are left out.
            if yl - yh >= 30.0 {
                zone_labels.push(zone_label(yh + 13.0, "ASK THE LLM"));
            }
            if yl - yh >= 16.0 {
                label("thl-llm", yl - 5.0, format!("LLM low {low}"));
                zone_labels.push(zone_label(yl + 13.0, "SKIP"));
            } else {
                label("thl-llm", yl + 13.0, format!("LLM low {low}"));
            }
            (
                vec![
                    Zone { class: "zone-resp", y: MT, h: yh - MT },
                    Zone { class: "zone-llm", y: yh, h: (yl - yh).max(0.0) },
                ],
                vec![Threshold { class: "th", y: yh }, Threshold { class: "th-llm", y: yl }],
            )
        }
    };
    zone_labels.extend(labels);
    (zones, lines, zone_labels)
}

/// The shapes of one event at `x`, and its tooltip (plain text: the template escapes
/// it). Kinds the chart does not know are left to the table.
fn mark(e: &Ev, x: f64, ctx: &Ctx) -> Option<(Vec<Shape>, String)> {
    let line = &e.line;
    let when = fmt_time(e.at);
    let thread = line.thread.as_ref().map(|t| format!(" · thread {t}")).unwrap_or_default();
    let msg_at = opt_time(line.msg_t);
    let ym = lane_y(LANE_MESSAGES);
    let yb = lane_y(LANE_BOT);
    let ys = lane_y(LANE_SUPERSEDED);
    Some(match &line.body {
        Body::Message(m) => {
            let user = m.user.as_deref().unwrap_or("?");
            let text = m.text.as_deref().unwrap_or("");
            let mut tip = format!("{user}: {text}\n{when}{thread}");
            // The writer leaves `author` out for people.
            let shape = match (m.author.unwrap_or(Author::Human), *m.trigger) {
                (Author::OwnBot, _) => {
                    tip.push_str(" · the bot's own message");
                    square(x, ym, 4.5, "m-own", None)
                }
                (Author::OtherBot, _) => {
                    tip.push_str(" · other_bot");
                    square(x, ym, 4.5, "m-bot", None)
                }
                (Author::Human, Some(trigger)) => {
                    tip.push_str(&format!(" · direct trigger: {}", name(&trigger)));
                    diamond(x, ym, 7.0, "m-trigger", Some(ctx.colors.of(user)))
                }
                (Author::Human, None) => circle(x, ym, 4.5, "m-human", Some(ctx.colors.of(user))),
            };
            (vec![shape], tip)
        }
        Body::Edited(ed) => (
            vec![circle(x, ym, 3.5, "m-edit", None)],
            format!("edited (message at {msg_at}): {}\n{when}{thread}", ed.text.as_deref().unwrap_or("")),
        ),
        Body::Deleted => (vec![cross(x, ym, 4.0, "m-del")], format!("message at {msg_at} deleted\n{when}{thread}")),
        Body::Judge(j) => {
            let score = (*j.score)?;
            let y = y_score(score);
            let respond = j.respond.unwrap_or(false);
            let mut shapes = vec![circle(x, y, 5.0, if respond { "j-resp" } else { "j-skip" }, None)];
            if j.llm_called.unwrap_or(false) {
                shapes.push(circle(x, y, 8.5, "j-llm", None));
            }
            if j.llm_error.is_some() {
                shapes.push(circle(x, y, 11.5, "j-err", None));
            }
            (shapes, judge_tip(j, &when, &thread, &msg_at))
        }
        Body::Respond(r) => {
            let shape = match *r.response_type {
                Some(ResponseType::FullResponse) => Shape::Rect {
                    class: "r-full",
                    x: x - 7.0,
                    y: yb - 5.5,
                    w: 14.0,
                    h: 11.0,
                    rx: Some(3.0),
                    fill: None,
                },
                Some(ResponseType::ShortAck) => triangle(x, yb, 7.0, "r-ack"),
                Some(ResponseType::ReactOnly) => circle(x, yb, 6.0, "r-react", None),
                None => circle(x, yb, 5.0, "r-other", None),
            };
            let ty = r.response_type.map_or("?", ResponseType::as_str);
            let mode = r.mode.as_ref().map_or_else(|| "?".to_owned(), name);
            let shadow = if r.shadow.unwrap_or(false) { " · shadow mode: not posted" } else { "" };
            let tip = format!(
                "{} {ty} ({mode}): {}\nfor the message at {msg_at} · {when}{thread}{shadow}",
                ctx.bot,
                response_content(r.text.as_deref(), r.emoji.as_deref())
            );
            (vec![shape], tip)
        }
        Body::RespondFailed(f) => (
            vec![cross(x, yb, 6.0, "r-fail")],
            format!(
                "{} {} failed ({}): {}\nfor the message at {msg_at} · {when}{thread}",
                ctx.bot,
                f.response_type.map_or("?", ResponseType::as_str),
                f.mode.as_ref().map_or_else(|| "?".to_owned(), name),
                f.reason.as_deref().unwrap_or("?")
            ),
        ),
        Body::Superseded(s) => (
            vec![circle(x, ys, 5.0, "s-sup", None)],
            format!(
                "superseded by message at t={} ({} stage)\nthe message at {msg_at} · {when}{thread}",
                opt_time(*s.by_t),
                s.stage.as_ref().map_or_else(|| "?".to_owned(), name)
            ),
        ),
        Body::Dropped(d) => (
            vec![cross(x, ys, 4.5, "s-drop")],
            format!(
                "dropped at the {} stage: {}\nthe message at {msg_at} · {when}{thread}",
                d.stage.as_ref().map_or_else(|| "?".to_owned(), name),
                d.reason.as_deref().unwrap_or("?")
            ),
        ),
        Body::Summary(_)
        | Body::Reflect(_)
        | Body::Command(_)
        | Body::Forget(_)
        | Body::SlackAccess(_)
        | Body::Purge(_)
        | Body::Feedback(_)
        | Body::Other(_) => return None,
    })
}

fn judge_tip(j: &JudgeLine, when: &str, thread: &str, msg_at: &str) -> String {
    let score = j.score.map_or_else(|| "?".to_owned(), |s| s.to_string());
    let mut tip = format!("score {score} → {} ({})\n", outcome(j), decided_by(j));
    let parts: Vec<String> = chips(j).iter().map(|c| format!("{} {}", c.name, c.points)).collect();
    if !parts.is_empty() {
        tip.push_str(&parts.join(", "));
        tip.push('\n');
    }
    if let Some(reason) = j.reason.as_deref() {
        tip.push_str(&format!("reason: {reason}\n"));
    }
    if let Some(err) = j.llm_error.as_deref() {
        tip.push_str(&format!("LLM error: {err}\n"));
    }
    let user = j.user.as_deref().unwrap_or("?");
    tip.push_str(&format!("{user}'s message at {msg_at} · judged at {when}{thread}"));
    tip
}

/// "respond full_response in 20s", "wait 30s" or "skip".
fn outcome(j: &JudgeLine) -> String {
    if *j.decision == Some(Decision::Wait) {
        return match *j.delay_seconds {
            Some(d) => format!("wait {d}s"),
            None => "wait".into(),
        };
    }
    if !j.respond.unwrap_or(false) {
        return "skip".into();
    }
    let mut s = "respond".to_owned();
    if let Some(ty) = *j.response_type {
        s.push(' ');
        s.push_str(ty.as_str());
    }
    if let Some(d) = *j.delay_seconds {
        s.push_str(&format!(" in {d}s"));
    }
    s
}

/// Who decided: the score against the thresholds, or the LLM judge.
fn decided_by(j: &JudgeLine) -> &'static str {
    match *j.decision {
        Some(Decision::Llm) => "asked the LLM",
        Some(Decision::Respond | Decision::Skip) => "by score",
        Some(Decision::Wait) => "judged again later",
        None => "?",
    }
}

fn chips(j: &JudgeLine) -> Vec<Chip> {
    j.breakdown
        .iter()
        .flatten()
        .map(|(name, v)| Chip {
            name: name.clone(),
            points: signed(v),
            sign: match v.as_f64() {
                Some(n) if n > 0.0 => "pos",
                Some(n) if n < 0.0 => "neg",
                _ => "",
            },
        })
        .collect()
}

/// What a response said: its text, or the emoji it reacted with.
fn response_content(text: Option<&str>, emoji: Option<&str>) -> String {
    match (text, emoji) {
        (Some(text), _) => text.to_owned(),
        (None, Some(emoji)) => format!(":{emoji}:"),
        (None, None) => String::new(),
    }
}

// Shapes. `fill` overrides the class colour (per-user colours).

fn circle(x: f64, y: f64, r: f64, class: &'static str, fill: Option<&'static str>) -> Shape {
    Shape::Circle { class, cx: x, cy: y, r, fill }
}

fn square(x: f64, y: f64, half: f64, class: &'static str, fill: Option<&'static str>) -> Shape {
    Shape::Rect { class, x: x - half, y: y - half, w: half * 2.0, h: half * 2.0, rx: None, fill }
}

fn diamond(x: f64, y: f64, r: f64, class: &'static str, fill: Option<&'static str>) -> Shape {
    let d = format!("M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z", y - r, x + r, y + r, x - r);
    Shape::Path { class, d, fill }
}

fn triangle(x: f64, y: f64, r: f64, class: &'static str) -> Shape {
    let d = format!("M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z", y - r, x + r, y + r * 0.8, x - r, y + r * 0.8);
    Shape::Path { class, d, fill: None }
}

fn cross(x: f64, y: f64, r: f64, class: &'static str) -> Shape {
    let d = format!(
        "M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}",
        x - r,
        y - r,
        x + r,
        y + r,
        x - r,
        y + r,
        x + r,
        y - r
    );
    Shape::Path { class, d, fill: None }
}

fn legend(ctx: &Ctx) -> Vec<LegendItem> {
    let item = |shapes: Vec<Shape>, label: &str| LegendItem { shapes, label: label.to_owned() };
    let full = Shape::Rect { class: "r-full", x: 2.0, y: 3.5, w: 14.0, h: 11.0, rx: Some(3.0), fill: None };
    vec![
        item(vec![circle(9.0, 9.0, 4.5, "m-human", Some(USER_COLORS[0]))], "message (colour = user)"),
        item(vec![diamond(9.0, 9.0, 7.0, "m-trigger", Some(USER_COLORS[1]))], "direct trigger (mention, reply, name)"),
        item(vec![square(9.0, 9.0, 4.5, "m-bot", None)], "other bot"),
        item(vec![circle(9.0, 9.0, 5.0, "j-resp", None)], "judged: respond"),
        item(vec![circle(9.0, 9.0, 5.0, "j-skip", None)], "judged: skip"),
        item(vec![circle(9.0, 9.0, 3.5, "j-skip", None), circle(9.0, 9.0, 7.0, "j-llm", None)], "LLM asked"),
        item(vec![full], &format!("{} full_response", ctx.bot)),
        item(vec![triangle(9.0, 10.0, 7.0, "r-ack")], "short_ack"),
        item(vec![circle(9.0, 9.0, 6.0, "r-react", None)], "react_only"),
        item(vec![cross(9.0, 9.0, 5.5, "r-fail")], "response failed"),
        item(vec![circle(9.0, 9.0, 5.0, "s-sup", None)], "superseded"),
        item(vec![cross(9.0, 9.0, 4.5, "s-drop")], "dropped"),
    ]
}

// ---------------------------------------------------------------------------
// The table under the chart

fn row(ci: usize, i: usize, e: &Ev, ctx: &Ctx) -> Row {
    let line = &e.line;
    let msg_at = opt_time(line.msg_t);
    let sys = |label: &str| Who::Sys { label: clip(label, NAME_CHARS) };
    let bot = || Who::Bot { name: ctx.bot.to_owned() };
    let cell = |text: Option<&str>| clip(text.unwrap_or(""), CELL_CHARS);
    let stage = |s: &Option<crate::domain::Stage>| s.as_ref().map_or_else(|| "?".to_owned(), name);
    let (who, score, what) = match &line.body {
        Body::Message(m) => {
            let user = m.user.as_deref().unwrap_or("?");
            (
                Who::User { name: clip(user, NAME_CHARS), color: ctx.colors.of(user) },
                None,
                What::Message {
                    text: cell(m.text.as_deref()),
                    trigger: m.trigger.as_ref().map(name),
                    author: m.author.as_ref().map(name),
                },
            )
        }
        Body::Edited(ed) => (sys("edited"), None, What::Edited { msg_at, text: cell(ed.text.as_deref()) }),
        Body::Deleted => (sys("deleted"), None, What::Deleted { msg_at }),
        Body::Judge(j) if j.score.is_some() => {
            let respond = j.respond.unwrap_or(false);
            let score = j.score.unwrap_or(0.0);
            (
                sys("judge"),
                Some(ScoreCell { value: score.to_string(), width: score.clamp(0.0, 100.0), respond }),
                What::Judge {
                    outcome: outcome(j),
                    decided_by: decided_by(j).to_owned(),
                    respond,
                    llm: j.llm_called.unwrap_or(false),
                    chips: chips(j),
                    reason: j.reason.as_deref().map(|r| clip(r, CELL_CHARS)),
                    user: clip(j.user.as_deref().unwrap_or("?"), NAME_CHARS),
                    msg_at,
                    llm_error: j.llm_error.as_deref().map(|e| clip(e, CELL_CHARS)),
                },
            )
        }
        Body::Respond(r) => {
            let type_name = r.response_type.map_or("?", ResponseType::as_str);
            (
                bot(),
                None,
                What::Respond {
                    type_class: class_safe(type_name),
                    type_name: type_name.to_owned(),
                    mode: r.mode.as_ref().map_or_else(|| "?".to_owned(), name),
                    shadow: r.shadow.unwrap_or(false),
                    content: clip(&response_content(r.text.as_deref(), r.emoji.as_deref()), CELL_CHARS),
                    msg_at,
                },
            )
        }
        Body::RespondFailed(f) => (
            bot(),
            None,
            What::RespondFailed {
                type_name: f.response_type.map_or("?", ResponseType::as_str).to_owned(),
                mode: f.mode.as_ref().map_or_else(|| "?".to_owned(), name),
                reason: clip(f.reason.as_deref().unwrap_or("?"), CELL_CHARS),
                notice: f.notice.as_deref().map(|n| clip(n, CELL_CHARS)),
                msg_at,
            },
        ),
        Body::Superseded(s) => {
            (sys("superseded"), None, What::Superseded { stage: stage(&s.stage), msg_at, by: opt_time(*s.by_t) })
        }
        Body::Dropped(d) => (
            sys("dropped"),
            None,
            What::Dropped {
                stage: stage(&d.stage),
                msg_at,
                reason: clip(d.reason.as_deref().unwrap_or("?"), CELL_CHARS),
            },
        ),
        Body::Summary(s) => {
            let topics: Vec<&str> = s.topic_keywords.iter().flatten().filter_map(Value::as_str).collect();
            (
                sys("memory"),
                None,
                What::Summary {
                    messages: *s.messages,
                    workspace: s.workspace.unwrap_or(false),
                    summary: cell(s.summary.as_deref()),
                    mood: cell(s.mood.as_deref()),
                    topics: clip(&topics.join(", "), CELL_CHARS),
                },
            )
        }
        Body::Reflect(r) => (
            sys("memory"),
            None,
            What::Reflect {
                messages: *r.messages,
                facts_new: *r.facts_new,
                facts_strengthened: *r.facts_strengthened,
                profiles: *r.profiles,
            },
        ),
        Body::Forget(f) => (
            sys("memory"),
            None,
            What::Forget {
                user: f.user.as_deref().map(|u| clip(u, NAME_CHARS)),
                messages: *f.messages,
                facts_removed: *f.facts_removed,
                facts_edited: *f.facts_edited,
                notes: *f.notes,
                summaries: *f.summaries,
                late: f.late.unwrap_or(false),
            },
        ),
        Body::SlackAccess(a) => (
            sys("platform"),
            None,
            What::SlackAccess { gone: a.gone.unwrap_or(false), reason: cell(a.reason.as_deref()) },
        ),
        Body::Purge(p) => (
            sys("memory"),
            None,
            What::Purge {
                channels: *p.channels,
                messages: *p.messages,
                facts: *p.facts,
                notes: *p.notes,
                profiles: *p.profiles,
            },
        ),
        Body::Feedback(f) => (
            sys("talkativeness"),
            None,
            What::Feedback {
                signal: clip(f.signal.as_deref().unwrap_or("?"), NAME_CHARS),
                user: f.user.as_deref().map(|u| clip(u, NAME_CHARS)),
                weight: f.weight.map_or_else(|| "?".to_owned(), |w| format!("{w:+}")),
                offset: f.offset.map_or_else(|| "?".to_owned(), |o| format!("{o:+}")),
                undone: f.undone.unwrap_or(false),
            },
        ),
        Body::Command(c) => (
            sys("command"),
            None,
            What::Command {
                user: clip(c.user.as_deref().unwrap_or("?"), NAME_CHARS),
                command: clip(c.command.as_deref().unwrap_or("?"), CELL_CHARS),
                answer: clip(c.answer.as_deref().unwrap_or("?"), CELL_CHARS),
                announced: c.announced.as_deref().map(|a| clip(a, CELL_CHARS)),
            },
        ),
        // Unknown kinds, and judgments without a score, as they were logged.
        other => (sys(other.kind()), None, What::Raw { json: clip(&line.raw.to_string(), CELL_CHARS) }),
    };
    Row {
        id: row_id(ci, i),
        class: class_safe(line.body.kind()),
        time: opt_time(line.t),
        thread: line.thread.as_ref().map(|t| ThreadTag { name: clip(t, NAME_CHARS), hue: hash(t) % 360 }),
        who,
        score,
        what,
    }
}

// ---------------------------------------------------------------------------
// Small helpers

/// Kinds become class names, so anything unexpected is reduced to safe characters.
fn class_safe(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
}

/// A time as the table shows it, "?" when unknown.
fn opt_time(t: Option<f64>) -> String {
    t.map(fmt_time).unwrap_or_else(|| "?".into())
}

/// Breakdown points with their sign: "+10", "−50"; anything else as logged.
fn signed(v: &Value) -> String {
    let shown = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match v.as_f64() {
        Some(n) if n > 0.0 => format!("+{shown}"),
        Some(n) if n < 0.0 => format!("−{}", shown.trim_start_matches('-')),
        _ => shown,
    }
}

/// At most `max` characters, with "…" when cut.
fn clip(s: &str, max: usize) -> String {
    let kept = crate::domain::first_chars(s, max);
    if kept.len() < s.len() { format!("{kept}…") } else { s.to_owned() }
}

/// FNV-1a, for stable per-thread colours.
fn hash(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}
