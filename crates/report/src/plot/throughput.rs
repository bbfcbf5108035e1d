//! Throughput over time: upload, download and total (sums over the flows of each
//! direction), in Mbit/s, on a bucket grid ([`super::grid`]).
//!
//! A bucket where no flow of a direction has a sample is a gap in that direction's line.
//! Where some flows of a direction report and others do not (flows that start later,
//! sequential pulses), the sum covers the flows that report.

use std::time::Duration;

use bloatlab_stats::timeseries::{RateBucket, bucketize_flow, sum_rate_buckets};
use bloatlab_stats::{Direction, FlowSeries};

use super::grid;
use super::style::color;
use super::timeseries::{Line, TimeSeries};
use crate::run::Run;

fn to_points(buckets: &[RateBucket], width: Duration) -> Vec<(f64, Option<f64>)> {
    buckets
        .iter()
        .map(|b| {
            (
                (b.start + width / 2).as_secs_f64(),
                b.rate.map(|r| r.bits_per_sec_f64() / 1e6),
            )
        })
        .collect()
}

fn sum_line(
    per_flow: &[Vec<RateBucket>],
    width: Duration,
    label: &str,
    color: plotters::style::RGBColor,
    stroke: u32,
) -> Option<Line> {
    if per_flow.is_empty() {
        return None;
    }
    let sum: Vec<RateBucket> = sum_rate_buckets(per_flow).into_iter().map(|b| b.0).collect();
    Some(Line {
        label: label.to_owned(),
        color,
        width: stroke,
        points: to_points(&sum, width),
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
    let bucket = |f: &FlowSeries| bucketize_flow(f, Duration::ZERO, end, w).ok();
    let by_dir = |d: Direction| -> Vec<Vec<RateBucket>> {
        run.flows
            .iter()
            .filter(|f| f.direction == d)
            .filter_map(bucket)
            .collect()
    };
    let (down, up) = (by_dir(Direction::Down), by_dir(Direction::Up));
    let all: Vec<Vec<RateBucket>> = run.flows.iter().filter_map(bucket).collect();
    let lines = [
        sum_line(&down, w, "download", color(0), 2),
        sum_line(&up, w, "upload", color(1), 2),
        sum_line(&all, w, "total", color(7), 2),
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
