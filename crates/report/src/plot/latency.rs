//! Latency over time: one line per probe series (mean delay of the probes sent in each
//! bucket of the grid, [`super::grid`]), in ms. A bucket in which every probe was lost,
//! or none was sent, is a gap. Every lost probe is an `x` at its send time in the strip
//! under the axis, in its series' colour.

use std::time::Duration;

use bloatlab_stats::DelayKind;
use bloatlab_stats::timeseries::bucketize_latency;

use super::grid;
use super::style::color;
use super::timeseries::{Line, Marks, TimeSeries};
use crate::run::Run;
use crate::view::series_label;
use bloatlab_results::schema::DelayKindRecord;

/// The latency chart of one run; `None` if the run has no probe series.
pub fn chart(run: &Run) -> Option<TimeSeries<'_>> {
    if run.latency.is_empty() {
        return None;
    }
    let end = run.end() + Duration::from_nanos(1);
    let mut lines = Vec::new();
    let mut marks = Vec::new();
    for (i, s) in run.latency.iter().enumerate() {
        let w = grid::width(grid::probe_interval(s), 1.5, end);
        let label = series_label(&s.name, DelayKindRecord::from(s.kind));
        let points = bucketize_latency(s, Duration::ZERO, end, w)
            .map(|b| {
                b.iter()
                    .map(|b| {
                        (
                            (b.start + w / 2).as_secs_f64(),
                            b.mean.map(|d| d.as_secs_f64() * 1e3),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        lines.push(Line {
            label: label.clone(),
            color: color(i),
            width: 2,
            points,
        });
        // A probe lost is lost in all of its series: marked once, on the round trip
        // when the probe has one.
        let has_rtt = run
            .latency
            .iter()
            .any(|r| r.name == s.name && r.kind == DelayKind::RoundTrip);
        if s.kind != DelayKind::RoundTrip && has_rtt {
            continue;
        }
        let lost: Vec<f64> = s
            .samples
            .iter()
            .filter(|p| p.delay().is_none())
            .map(|p| p.sent.as_secs_f64())
            .collect();
        if !lost.is_empty() {
            marks.push(Marks {
                label: format!("{label}: lost ({})", lost.len()),
                color: color(i),
                times: lost,
            });
        }
    }
    Some(TimeSeries {
        title: format!("{}: latency", run.label),
        y_desc: "delay (ms)",
        x_end: end.as_secs_f64(),
        phases: &run.file.raw.phases,
        lines,
        marks,
    })
}
