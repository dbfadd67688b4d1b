//! The talkativeness band under a channel's timeline: the offset kuuki adds to unasked
//! scores there, over time (docs/design.md §7.6). Drawn from the `feedback` lines (each
//! the offset right after a signal), decaying toward 0 between them by the half-life,
//! 0 before the first. Only a channel with feedback gets the band.

use super::axis::{TimeAxis, fmt_time};
use super::line::Body;
use super::view::{Mark, OffsetBand};
use super::{Channel, TOOLTIP_CHARS, circle, clip};
use crate::domain::talkativeness::TalkativenessLimits;

/// The band's height, and its gap below the time axis.
pub(super) const BAND_H: f64 = 56.0;
pub(super) const BAND_GAP: f64 = 10.0;
/// Points drawn along each stretch between two signals, so the decay shows as a curve.
const DECAY_STEPS: u32 = 8;

/// The band for `c` at `top`, and a mark per signal (its tip says what moved it); `None`
/// for a channel without feedback.
pub(super) fn band(
    c: &Channel,
    axis: &TimeAxis,
    top: f64,
    limits: &TalkativenessLimits,
) -> Option<(OffsetBand, Vec<Mark>)> {
    let signals: Vec<(f64, f64, String)> = c
        .events
        .iter()
        .filter_map(|e| match &e.line.body {
            Body::Feedback(f) => {
                let offset = (*f.offset)?;
                let who = f.user.as_deref().map_or_else(String::new, |u| format!(" from {u}"));
                let undone = if f.undone.unwrap_or(false) { " taken back" } else { "" };
                let tip = format!(
                    "{}{who}{undone}: {:+} → talkativeness {offset:+} · {}",
                    f.signal.as_deref().unwrap_or("?"),
                    f.weight.unwrap_or(0.0),
                    fmt_time(e.at)
                );
                Some((e.at, offset, tip))
            }
            _ => None,
        })
        .collect();
    let first = signals.first()?;
    let span = (limits.max - limits.min).max(1.0);
    let y = |offset: f64| top + BAND_H * (limits.max - offset.clamp(limits.min, limits.max)) / span;
    let half_life = limits.half_life.as_secs_f64().max(1.0);
    let start = c.events.first().map_or(first.0, |e| e.at);
    let end = c.events.last().map_or(first.0, |e| e.at);
    let mut points = vec![(axis.x(start), y(0.0)), (axis.x(first.0), y(0.0))];
    let mut marks = Vec::new();
    for (i, (t, offset, tip)) in signals.iter().enumerate() {
        points.push((axis.x(*t), y(*offset)));
        let next = signals.get(i + 1).map_or(end, |s| s.0);
        for step in 1..=DECAY_STEPS {
            let at = t + (next - t) * f64::from(step) / f64::from(DECAY_STEPS);
            points.push((axis.x(at), y(offset * 0.5_f64.powf((at - t) / half_life))));
        }
        marks.push(Mark {
            row: None,
            tip: clip(tip, TOOLTIP_CHARS),
            shapes: vec![circle(axis.x(*t), y(*offset), 3.5, "talk-dot", None)],
        });
    }
    let points = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect::<Vec<_>>().join(" ");
    let band = OffsetBand {
        top,
        h: BAND_H,
        zero_y: y(0.0),
        max_label: format!("{:+}", limits.max),
        min_label: format!("{:+}", limits.min),
        points,
    };
    Some((band, marks))
}
