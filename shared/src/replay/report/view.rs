//! The view model: what `report.html.j2` draws, as plain data. Coordinates are numbers
//! in SVG units, computed in `mod.rs` and `axis.rs`; text is plain text, escaped by the
//! template on output.

use serde::Serialize;

#[derive(Serialize)]
pub(super) struct Page {
    pub title: String,
    pub thresholds: String,
    pub stats: Vec<Stat>,
    /// The totals were counted from the lines: the log has no stats line.
    pub derived: bool,
    /// Lines that were not JSON objects.
    pub skipped: usize,
    pub channels: Vec<ChannelView>,
    pub legend: Vec<LegendItem>,
    pub break_min: String,
}

#[derive(Serialize)]
pub(super) struct Stat {
    pub value: String,
    pub label: &'static str,
    pub detail: String,
    pub warn: bool,
}

#[derive(Serialize)]
pub(super) struct ChannelView {
    pub index: usize,
    pub name: String,
    pub toc_name: String,
    pub messages: usize,
    pub judgments: usize,
    pub responses: usize,
    pub superseded: usize,
    pub first: String,
    pub last: String,
    pub chart: Chart,
    pub rows: Vec<Row>,
    /// All events, when more than `rows` are shown.
    pub total: usize,
}

/// One channel's SVG. Coordinates are numbers; the template formats them.
#[derive(Serialize)]
pub(super) struct Chart {
    pub width: f64,
    pub height: f64,
    pub ml: f64,
    pub mt: f64,
    pub plot_w: f64,
    pub plot_h: f64,
    pub x_end: f64,
    pub lanes_bottom: f64,
    pub grid: Vec<Grid>,
    pub zones: Vec<Zone>,
    pub threshold_lines: Vec<Threshold>,
    pub labels: Vec<Label>,
    pub lanes: Vec<Lane>,
    pub ticks: Vec<Tick>,
    pub breaks: Vec<Break>,
    pub links: Vec<Link>,
    pub marks: Vec<Mark>,
    /// The talkativeness offset over time, for a channel with feedback.
    pub talk: Option<OffsetBand>,
}

/// The band that draws a channel's talkativeness offset over time.
#[derive(Serialize)]
pub(super) struct OffsetBand {
    pub top: f64,
    pub h: f64,
    pub zero_y: f64,
    pub max_label: String,
    pub min_label: String,
    /// An SVG polyline's points.
    pub points: String,
}

#[derive(Serialize)]
pub(super) struct Grid {
    pub y: f64,
    pub score: u32,
}

#[derive(Serialize)]
pub(super) struct Zone {
    pub class: &'static str,
    pub y: f64,
    pub h: f64,
}

#[derive(Serialize)]
pub(super) struct Threshold {
    pub class: &'static str,
    pub y: f64,
}

#[derive(Serialize)]
pub(super) struct Label {
    pub class: &'static str,
    pub x: f64,
    pub y: f64,
    pub text: String,
}

#[derive(Serialize)]
pub(super) struct Lane {
    pub top: f64,
    pub h: f64,
    pub y: f64,
    pub name: String,
}

#[derive(Serialize)]
pub(super) struct Tick {
    pub x: f64,
    pub label: String,
}

/// A silence cut out of the axis, between `x0` and `x1`.
#[derive(Serialize)]
pub(super) struct Break {
    pub x0: f64,
    pub x1: f64,
    pub gap: String,
    pub from: String,
    pub to: String,
}

/// A judgment (or a direct trigger) tied to the response it caused.
#[derive(Serialize)]
pub(super) struct Link {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
}

#[derive(Serialize)]
pub(super) struct Mark {
    /// The table row the mark links to, when that row is shown.
    pub row: Option<String>,
    pub tip: String,
    pub shapes: Vec<Shape>,
}

#[derive(Serialize)]
#[serde(tag = "shape", rename_all = "snake_case")]
pub(super) enum Shape {
    Circle { class: &'static str, cx: f64, cy: f64, r: f64, fill: Option<&'static str> },
    Rect { class: &'static str, x: f64, y: f64, w: f64, h: f64, rx: Option<f64>, fill: Option<&'static str> },
    Path { class: &'static str, d: String, fill: Option<&'static str> },
}

#[derive(Serialize)]
pub(super) struct LegendItem {
    pub shapes: Vec<Shape>,
    pub label: String,
}

#[derive(Serialize)]
pub(super) struct Row {
    pub id: String,
    /// The kind, reduced to characters safe in a class name.
    pub class: String,
    pub time: String,
    pub thread: Option<ThreadTag>,
    pub who: Who,
    pub score: Option<ScoreCell>,
    pub what: What,
}

#[derive(Serialize)]
pub(super) struct ThreadTag {
    pub name: String,
    pub hue: u32,
}

#[derive(Serialize)]
#[serde(tag = "who", rename_all = "snake_case")]
pub(super) enum Who {
    User {
        name: String,
        color: &'static str,
    },
    Bot {
        name: String,
    },
    /// The system: a stage or the memory.
    Sys {
        label: String,
    },
}

#[derive(Serialize)]
pub(super) struct ScoreCell {
    pub value: String,
    /// The bar's length, 0..100.
    pub width: f64,
    pub respond: bool,
}

/// The "what" cell, by kind.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum What {
    Message {
        text: String,
        trigger: Option<String>,
        author: Option<String>,
    },
    Edited {
        msg_at: String,
        text: String,
    },
    Deleted {
        msg_at: String,
    },
    Judge {
        outcome: String,
        decided_by: String,
        respond: bool,
        llm: bool,
        chips: Vec<Chip>,
        reason: Option<String>,
        user: String,
        msg_at: String,
        llm_error: Option<String>,
    },
    Respond {
        type_class: String,
        type_name: String,
        mode: String,
        shadow: bool,
        content: String,
        msg_at: String,
    },
    RespondFailed {
        type_name: String,
        mode: String,
        reason: String,
        notice: Option<String>,
        msg_at: String,
    },
    Superseded {
        stage: String,
        msg_at: String,
        by: String,
    },
    Dropped {
        stage: String,
        msg_at: String,
        reason: String,
    },
    Summary {
        messages: Option<u64>,
        workspace: bool,
        summary: String,
        mood: String,
        topics: String,
    },
    Reflect {
        messages: Option<u64>,
        facts_new: Option<u64>,
        facts_strengthened: Option<u64>,
        profiles: Option<u64>,
    },
    Forget {
        /// `None`: a deleted message's facts.
        user: Option<String>,
        messages: Option<u64>,
        facts_removed: Option<u64>,
        facts_edited: Option<u64>,
        notes: Option<u64>,
        summaries: Option<u64>,
        /// A forget's second look, not a request.
        late: bool,
    },
    Command {
        user: String,
        command: String,
        answer: String,
        announced: Option<String>,
    },
    SlackAccess {
        gone: bool,
        reason: String,
    },
    Purge {
        channels: Option<u64>,
        messages: Option<u64>,
        facts: Option<u64>,
        notes: Option<u64>,
        profiles: Option<u64>,
    },
    Feedback {
        signal: String,
        user: Option<String>,
        /// Signed, as "-6" or "+3".
        weight: String,
        offset: String,
        undone: bool,
    },
    /// Unknown kinds, and judgments without a score, as they were logged.
    Raw {
        json: String,
    },
}

/// A rule's points in a judgment.
#[derive(Serialize)]
pub(super) struct Chip {
    pub name: String,
    pub points: String,
    /// "pos", "neg" or "".
    pub sign: &'static str,
}
