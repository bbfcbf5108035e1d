//! Latency CDFs of the loaded phases, overlaying every round-trip series of every run
//! (one-way series have their own lines in the latency time series and rows in the
//! tables; a CDF mixing both kinds would put unlike delays side by side).
//!
//! Each curve is the empirical CDF of the delays of probes **sent during the run's
//! loaded phases** (idle and recovery time would dilute the loaded distribution, the
//! flent summary mistake). Runs without a loaded phase contribute all their probes,
//! which the legend says. Lost probes are not part of a delay distribution; the loss is
//! in the tables. Up to 1000 points a curve is drawn as the exact step function; longer
//! series are drawn through 1000 type-7 quantiles.

use std::time::Duration;

use bloatlab_results::schema::PhaseKindRecord;
use bloatlab_stats::{DelayKind, quantile_sorted};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::DrawResult;
use super::style::{bold, color, font};
use crate::run::Run;
use crate::view::series_label;

/// Points per curve beyond which quantiles are used instead of every sample.
const MAX_STEPS: usize = 1000;

/// One CDF curve.
#[derive(Debug, Clone)]
pub struct Curve {
    /// Legend text.
    pub label: String,
    /// `(delay ms, cumulative percent)`.
    pub points: Vec<(f64, f64)>,
}

/// The curve through sorted delays.
pub fn curve_points(sorted: &[Duration]) -> Vec<(f64, f64)> {
    let n = sorted.len();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    if n == 0 {
        return Vec::new();
    }
    if n <= MAX_STEPS {
        let mut pts = Vec::with_capacity(2 * n);
        for (i, &d) in sorted.iter().enumerate() {
            pts.push((ms(d), i as f64 * 100.0 / n as f64));
            pts.push((ms(d), (i + 1) as f64 * 100.0 / n as f64));
        }
        return pts;
    }
    (0..=MAX_STEPS)
        .filter_map(|k| {
            let q = k as f64 / MAX_STEPS as f64;
            quantile_sorted(sorted, q).ok().map(|d| (ms(d), q * 100.0))
        })
        .collect()
}

/// Every curve for `runs`.
pub fn curves(runs: &[Run]) -> Vec<Curve> {
    let mut out = Vec::new();
    for run in runs {
        let loaded: Vec<_> = run
            .timeline
            .phases()
            .iter()
            .zip(&run.file.raw.phases)
            .filter(|(_, r)| r.kind == PhaseKindRecord::Loaded)
            .map(|(p, _)| p)
            .collect();
        for s in run
            .latency
            .iter()
            .filter(|s| s.kind == DelayKind::RoundTrip)
        {
            let mut d: Vec<Duration> = if loaded.is_empty() {
                s.samples.iter().filter_map(|p| p.delay()).collect()
            } else {
                loaded.iter().flat_map(|p| s.delays_in(p)).collect()
            };
            d.sort_unstable();
            let mut label = if runs.len() > 1 {
                format!("{}: {}", run.label, series_label(&s.name, s.kind.into()))
            } else {
                series_label(&s.name, s.kind.into())
            };
            if loaded.is_empty() {
                label.push_str(" (all phases)");
            }
            out.push(Curve {
                label,
                points: curve_points(&d),
            });
        }
    }
    out
}

/// Draws the CDF chart.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Run]) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let curves = curves(runs);
    let x_max = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let x_max = if x_max > 0.0 { x_max * 1.05 } else { 1.0 };
    let mut chart = ChartBuilder::on(root)
        .caption("latency CDF, loaded phase", bold(18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..100.0)?;
    chart
        .configure_mesh()
        .x_desc("delay (ms)")
        .y_desc("probes with delay ≤ x (%)")
        .label_style(font(13))
        .axis_desc_style(font(14))
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (i, c) in curves.iter().enumerate() {
        let col = color(i);
        let legend = move |(x, y): (i32, i32)| {
            PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(3))
        };
        if c.points.is_empty() {
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                .label(format!("{} (no data)", c.label))
                .legend(legend);
        } else {
            chart
                .draw_series(LineSeries::new(c.points.clone(), col.stroke_width(2)))?
                .label(c.label.clone())
                .legend(legend);
        }
    }
    super::finish(root, &mut chart, SeriesLabelPosition::LowerRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_function_reaches_100_percent() {
        let ms = Duration::from_millis;
        let p = curve_points(&[ms(10), ms(20), ms(20), ms(40)]);
        assert_eq!(p.first(), Some(&(10.0, 0.0)));
        assert_eq!(p[1], (10.0, 25.0));
        assert_eq!(p.last(), Some(&(40.0, 100.0)));
        let many: Vec<Duration> = (0..5000).map(ms).collect();
        let q = curve_points(&many);
        assert_eq!(q.len(), MAX_STEPS + 1);
        assert_eq!(q[500], (2499.5, 50.0));
        assert!(curve_points(&[]).is_empty());
    }
}
