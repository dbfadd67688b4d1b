//! The chart's time axis: transcript seconds to x, with long silences cut out as
//! narrow breaks, and round tick times. Numbers only; the template draws them.

// Long silences are drawn as narrow breaks, or one burst of chat would be a smear
// at the edge of an hour-long axis. Only the largest few, so the axis stays honest.
pub(super) const BREAK_MIN_SECONDS: f64 = 600.0;
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

/// Maps transcript seconds to x, with long silences cut out as narrow breaks.
pub(super) struct TimeAxis {
    pub segments: Vec<Segment>,
}

/// A stretch of time drawn to scale.
pub(super) struct Segment {
    pub t0: f64,
    pub t1: f64,
    pub x0: f64,
    pub x1: f64,
}

impl Segment {
    pub fn x(&self, t: f64) -> f64 {
        let pad = SEG_PAD.min((self.x1 - self.x0) / 2.0);
        if self.t1 - self.t0 <= 0.0 {
            return (self.x0 + self.x1) / 2.0;
        }
        self.x0 + pad + (t - self.t0) / (self.t1 - self.t0) * (self.x1 - self.x0 - 2.0 * pad)
    }
}

impl TimeAxis {
    /// `times` sorted ascending.
    pub fn new(times: &[f64], x0: f64, width: f64) -> Self {
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

    pub fn x(&self, t: f64) -> f64 {
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
    pub fn ticks(&self) -> Vec<(f64, f64)> {
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

/// A tick label: "m:ss", or "h:mm:ss" from an hour on.
pub(super) fn fmt_clock(t: f64) -> String {
    let sign = if t < 0.0 { "-" } else { "" };
    let s = t.abs().floor() as u64;
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 { format!("{sign}{h}:{m:02}:{sec:02}") } else { format!("{sign}{m}:{sec:02}") }
}

/// A time in the table: like `fmt_clock`, with tenths when there are any ("0:32.8").
pub(super) fn fmt_time(t: f64) -> String {
    let tenths = (t.abs() * 10.0).round() as u64;
    let whole = fmt_clock((tenths / 10) as f64 * t.signum());
    match tenths % 10 {
        0 => whole,
        frac => format!("{whole}.{frac}"),
    }
}

/// A silence: "45s", "31m", "2h05m".
pub(super) fn fmt_gap(d: f64) -> String {
    let s = d.max(0.0).round() as u64;
    match s {
        0..90 => format!("{s}s"),
        90..5400 => format!("{}m", (s + 30) / 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}
