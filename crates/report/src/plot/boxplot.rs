//! Box plots of round-trip delay per run, series and phase (one-way series are in the
//! latency time series and the tables).
//!
//! Each box summarises the delays of one series in one phase (probes by send time,
//! lost probes excluded):
//!
//! * box: 25th to 75th percentile; bar across it: median;
//! * whiskers: **10th and 90th percentiles** (not min/max, which one outlier decides;
//!   the tables give min, max and p99);
//! * all quantiles are type 7 (`bloatlab_stats::quantile`), as in the tables.
//!
//! Boxes are grouped by `run: series`, one per phase, filled with the phase colour.

use bloatlab_results::schema::PhaseKindRecord;
use bloatlab_stats::{DelayKind, quantile_sorted};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::DrawResult;
use super::style::{bold, font, phase_fill, phase_stroke};
use crate::run::Run;
use crate::view::series_label;

/// The five numbers a box shows, in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Whisker {
    /// 10th percentile (lower whisker end).
    pub p10: f64,
    /// 25th percentile (box bottom).
    pub p25: f64,
    /// Median.
    pub median: f64,
    /// 75th percentile (box top).
    pub p75: f64,
    /// 90th percentile (upper whisker end).
    pub p90: f64,
}

impl Whisker {
    /// From delays sorted ascending; `None` if empty.
    pub fn from_sorted(sorted: &[std::time::Duration]) -> Option<Whisker> {
        let q = |p| {
            quantile_sorted(sorted, p)
                .ok()
                .map(|d| d.as_secs_f64() * 1e3)
        };
        Some(Whisker {
            p10: q(0.10)?,
            p25: q(0.25)?,
            median: q(0.5)?,
            p75: q(0.75)?,
            p90: q(0.90)?,
        })
    }
}

/// One group of boxes (one series of one run).
#[derive(Debug, Clone)]
pub struct Group {
    /// `run: series`, or the series name for a single run.
    pub label: String,
    /// One slot per phase of the run: kind and the box (None if no probe arrived).
    pub boxes: Vec<(PhaseKindRecord, Option<Whisker>)>,
}

/// Every group for `runs`.
pub fn groups(runs: &[Run]) -> Vec<Group> {
    let mut out = Vec::new();
    for run in runs {
        for s in run
            .latency
            .iter()
            .filter(|s| s.kind == DelayKind::RoundTrip)
        {
            let boxes = run
                .timeline
                .phases()
                .iter()
                .zip(&run.file.raw.phases)
                .map(|(p, r)| {
                    let mut d = s.delays_in(p);
                    d.sort_unstable();
                    (r.kind, Whisker::from_sorted(&d))
                })
                .collect();
            out.push(Group {
                label: if runs.len() > 1 {
                    format!("{}: {}", run.label, series_label(&s.name, s.kind.into()))
                } else {
                    s.name.clone()
                },
                boxes,
            });
        }
    }
    out
}

/// Width of the box chart: wide enough for every box.
pub fn width(runs: &[Run]) -> u32 {
    let boxes: usize = groups(runs).iter().map(|g| g.boxes.len()).sum();
    (boxes as u32 * 36 + 200).clamp(super::style::SIZE.0, 4000)
}

/// Draws the box chart.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Run]) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let groups = groups(runs);
    let n = groups.len().max(1);
    let y_max = groups
        .iter()
        .flat_map(|g| g.boxes.iter().filter_map(|b| b.1.map(|w| w.p90)))
        .fold(0.0f64, f64::max);
    // Headroom for the legend.
    let y_max = if y_max > 0.0 { y_max * 1.25 } else { 1.0 };
    let centers: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(
            "delay per phase (box p25-p75, bar median, whiskers p10-p90)",
            bold(18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("delay (ms)")
        .label_style(font(13))
        .axis_desc_style(font(14))
        .light_line_style(TRANSPARENT)
        // Group names are drawn below, centred under each group.
        .x_labels(0)
        .draw()?;
    let label_style = font(13).pos(Pos::new(HPos::Center, VPos::Top));
    for (c, l) in centers.iter().zip(&labels) {
        let (px, py) = chart.backend_coord(&(*c, 0.0));
        root.draw(&Text::new(l.clone(), (px, py + 8), label_style.clone()))?;
    }
    for (gi, g) in groups.iter().enumerate() {
        let slots = g.boxes.len().max(1) as f64;
        for (pi, (kind, w)) in g.boxes.iter().enumerate() {
            let Some(w) = w else { continue };
            let slot = 0.8 / slots;
            let c = gi as f64 + 0.1 + slot * (pi as f64 + 0.5);
            let half = slot * 0.35;
            let stroke = phase_stroke(*kind);
            let cap = half * 0.6;
            let thin = stroke.stroke_width(1);
            let paths = [
                vec![(c, w.p10), (c, w.p25)],
                vec![(c, w.p75), (c, w.p90)],
                vec![(c - cap, w.p10), (c + cap, w.p10)],
                vec![(c - cap, w.p90), (c + cap, w.p90)],
            ];
            chart.draw_series(paths.into_iter().map(|p| PathElement::new(p, thin)))?;
            let corners = [(c - half, w.p25), (c + half, w.p75)];
            chart.draw_series([
                Rectangle::new(corners, phase_fill(*kind).filled()),
                Rectangle::new(corners, thin),
            ])?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(c - half, w.median), (c + half, w.median)],
                BLACK.stroke_width(2),
            )))?;
        }
    }
    for kind in [
        PhaseKindRecord::Idle,
        PhaseKindRecord::Loaded,
        PhaseKindRecord::Recovery,
    ] {
        if groups.iter().any(|g| g.boxes.iter().any(|b| b.0 == kind)) {
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                .label(format!("{kind:?}").to_lowercase())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 16, y + 5)], phase_fill(kind).filled())
                });
        }
    }
    super::finish(root, &mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn whiskers_are_type7_p10_p90() {
        let d: Vec<Duration> = (1..=11).map(|i| Duration::from_millis(i * 10)).collect();
        let w = Whisker::from_sorted(&d).unwrap();
        assert_eq!(
            (w.p10, w.p25, w.median, w.p75, w.p90),
            (20.0, 35.0, 60.0, 85.0, 100.0)
        );
        assert_eq!(Whisker::from_sorted(&[]), None);
    }
}
