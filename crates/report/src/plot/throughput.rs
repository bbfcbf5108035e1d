//! Throughput over time: upload, download and total (sums over the flows of each
//! direction), in Mbit/s, on a bucket grid ([`super::grid`]).
//!
//! Summing flows honestly ([`sum_active`]): outside a flow's own span (before its first
//! sample, after its last) the flow is not running and adds nothing, so flows that start
//! late or run one after another (pulses) sum correctly. *Inside* its span, a bucket the
//! flow has no sample for is missing data, and then the sum is unknown: a gap, never an
//! undercount. A bucket where no flow runs at all is a gap too.

use std::time::Duration;

use bloatlab_stats::timeseries::{RateBucket, bucketize_flow};
use bloatlab_stats::{Direction, FlowSeries};

use super::grid;
use super::style::color;
use super::timeseries::{Line, TimeSeries};
use crate::run::Run;

/// A flow's buckets plus the time span its samples cover, `[first start, last end)`.
#[derive(Debug, Clone)]
pub struct Bucketed {
    /// First sample start .. last sample end.
    pub span: (Duration, Duration),
    /// Its buckets on the shared grid.
    pub buckets: Vec<RateBucket>,
}

impl Bucketed {
    /// Buckets `flow` on `[0, end)` in steps of `width`; `None` if it has no samples or
    /// the grid is invalid.
    pub fn new(flow: &FlowSeries, end: Duration, width: Duration) -> Option<Bucketed> {
        let first = flow.samples.iter().map(|s| s.start).min()?;
        let last = flow.samples.iter().map(|s| s.end).max()?;
        Some(Bucketed {
            span: (first, last),
            buckets: bucketize_flow(flow, Duration::ZERO, end, width).ok()?,
        })
    }
}

/// Sums flows per bucket, in bit/s, by the rule in the module docs.
pub fn sum_active(flows: &[Bucketed], width: Duration) -> Vec<Option<f64>> {
    sum_and_count(flows, width)
        .into_iter()
        .map(|v| v.map(|(s, _)| s))
        .collect()
}

/// Like [`sum_active`], with the number of flows running in each bucket.
pub fn sum_and_count(flows: &[Bucketed], width: Duration) -> Vec<Option<(f64, usize)>> {
    let len = flows.iter().map(|f| f.buckets.len()).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            let mut sum = 0.0;
            let mut running = 0;
            for f in flows {
                let Some(b) = f.buckets.get(i) else { continue };
                let (a, z) = (b.start, b.start + width);
                if z <= f.span.0 || a >= f.span.1 {
                    continue; // not running yet, or finished
                }
                running += 1;
                sum += b.rate?.bits_per_sec_f64();
            }
            (running > 0).then_some((sum, running))
        })
        .collect()
}

fn sum_line(
    flows: &[Bucketed],
    width: Duration,
    label: &str,
    color: plotters::style::RGBColor,
) -> Option<Line> {
    let first = flows.first()?;
    let points = first
        .buckets
        .iter()
        .zip(sum_active(flows, width))
        .map(|(b, v)| ((b.start + width / 2).as_secs_f64(), v.map(|v| v / 1e6)))
        .collect();
    Some(Line {
        label: label.to_owned(),
        color,
        width: 2,
        points,
    })
}

/// The throughput chart of one run; `None` if the run has no flows.
pub fn chart(run: &Run) -> Option<TimeSeries<'_>> {
    if run.flows.is_empty() {
        return None;
    }
    let end = run.end();
    let natural = run.flows.iter().filter_map(grid::sample_length).min();
    let w = grid::width(natural, 1.0, end);
    let bucketed = |d: Option<Direction>| -> Vec<Bucketed> {
        run.flows
            .iter()
            .filter(|f| d.is_none_or(|d| f.direction == d))
            .filter_map(|f| Bucketed::new(f, end, w))
            .collect()
    };
    let lines = [
        sum_line(&bucketed(Some(Direction::Down)), w, "download", color(0)),
        sum_line(&bucketed(Some(Direction::Up)), w, "upload", color(1)),
        sum_line(&bucketed(None), w, "total", color(7)),
    ]
    .into_iter()
    .flatten()
    .collect();
    Some(TimeSeries {
        title: format!("{}: throughput", run.label),
        y_desc: "throughput (Mbit/s)",
        x_end: end.as_secs_f64(),
        phases: &run.file.raw.phases,
        lines,
        marks: Vec::new(),
    })
}
