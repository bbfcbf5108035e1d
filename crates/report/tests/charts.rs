//! Charts: every kind renders as PNG and SVG with the embedded fonts; gaps and loss
//! follow the drawing rules.

mod common;

use std::time::Duration;

use bloatlab_report::plot::timeseries::segments;
use bloatlab_report::plot::{self, ChartKind, charts, render_png, render_svg};
use common::*;

#[test]
fn v1_sample_draws_every_chart_as_png_and_svg() {
    let runs = vec![v1()];
    let list = charts(&runs);
    let ids: Vec<&str> = list.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["throughput", "latency", "latency-cdf", "latency-box"]);
    for c in &list {
        let png = render_png(c, &runs).unwrap();
        let (w, h, colours) = png_stats(&png);
        assert_eq!((w, h), plot::size(c, &runs), "{}", c.id);
        // Anti-aliased text, lines in several colours and phase shading.
        assert!(colours > 50, "{}: only {colours} colours", c.id);
        let svg = render_svg(c, &runs).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{}",
            c.id
        );
        assert!(
            svg.matches("<text").count() >= 8,
            "{}: axis labels missing",
            c.id
        );
    }
}

#[test]
fn comparison_prefixes_per_run_charts_and_overlays_runs() {
    let runs = fifo_vs_fqcodel();
    let ids: Vec<String> = charts(&runs).into_iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [
            "fifo-throughput",
            "fifo-latency",
            "fq_codel-throughput",
            "fq_codel-latency",
            "latency-cdf",
            "latency-box"
        ]
    );
    // One CDF curve per run and round-trip series, labelled with the run and the kind.
    let curves = plot::cdf::curves(&runs);
    assert_eq!(curves.len(), 6);
    assert_eq!(curves[0].label, "fifo: udp_ef (rtt)");
    assert_eq!(curves[3].label, "fq_codel: udp_ef (rtt)");
    assert_eq!(curves[0].points.last().unwrap().1, 100.0);
    // Boxes: per run and series, one per phase; FIFO loaded median far above FQ-CoDel's.
    let groups = plot::boxplot::groups(&runs);
    assert_eq!(groups.len(), 6);
    assert_eq!(groups[0].boxes.len(), 3);
    let loaded = |g: usize| groups[g].boxes[1].1.unwrap().median;
    assert!(
        loaded(0) > 60.0 && loaded(3) < 30.0,
        "{} {}",
        loaded(0),
        loaded(3)
    );
    for c in charts(&runs) {
        let png = render_png(&c, &runs).unwrap();
        assert!(png_stats(&png).2 > 50, "{}", c.id);
    }
}

#[test]
fn missing_probes_leave_a_gap_and_lost_probes_are_marked() {
    let runs = fifo_vs_fqcodel();
    let ts = plot::latency::chart(&runs[0]).unwrap();
    // One line per series, named with its kind: udp_ef and udp_be each have a round
    // trip and two one-way series.
    let labels: Vec<&str> = ts.lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "udp_ef (rtt)",
            "udp_ef (owd up)",
            "udp_ef (owd down)",
            "udp_be (rtt)",
            "udp_be (owd up)",
            "udp_be (owd down)",
            "icmp (rtt)"
        ]
    );
    // udp_be has no probe sent in [4.0, 4.4) s: its line breaks there.
    let be = &ts.lines[3];
    let in_hole: Vec<_> = be
        .points
        .iter()
        .filter(|(t, _)| *t > 4.05 && *t < 4.35)
        .collect();
    assert!(!in_hole.is_empty() && in_hole.iter().all(|p| p.1.is_none()));
    assert!(segments(&be.points).len() >= 2);
    // ef has loss but no hole: one mark per lost probe.
    let lost = runs[0].latency[0]
        .samples
        .iter()
        .filter(|s| s.delay().is_none())
        .count();
    assert!(lost > 5);
    assert_eq!(ts.marks[0].times.len(), lost);
    assert!(ts.marks[0].label.starts_with("udp_ef (rtt): lost"));
    // Marked once per probe stream, on its round trip.
    assert_eq!(ts.marks.len(), 3);
    // FQ-CoDel lost nothing: no marks.
    assert!(plot::latency::chart(&runs[1]).unwrap().marks.is_empty());
}

#[test]
fn a_flow_that_stops_reporting_makes_the_sum_unknown_not_smaller() {
    let runs = fifo_vs_fqcodel();
    let ts = plot::throughput::chart(&runs[0]).unwrap();
    let labels: Vec<&str> = ts.lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(labels, ["download", "upload", "total"]);
    let values = |line: usize, from: f64, to: f64| -> Vec<Option<f64>> {
        ts.lines[line]
            .points
            .iter()
            .filter(|p| p.0 > from && p.0 < to)
            .map(|p| p.1)
            .collect()
    };
    // No flow runs during the idle phase: a gap, not zero.
    assert!(values(0, 0.0, 1.9).iter().all(Option::is_none));
    // tcp_down_be misses [5.0, 5.5) s: download and total are unknown there (gaps),
    // upload is complete and drawn.
    for line in [0, 2] {
        let hole = values(line, 5.06, 5.44);
        assert!(
            !hole.is_empty() && hole.iter().all(Option::is_none),
            "{hole:?}"
        );
    }
    assert!(values(1, 5.06, 5.44).iter().all(Option::is_some));
    // Steady state around it: 15 + 7 Mbit/s down, plus up to 0.8 Mbit/s of byte pattern per flow.
    let steady = values(0, 6.0, 7.0);
    assert!(
        steady
            .iter()
            .all(|v| v.is_some_and(|v| (22.0..24.0).contains(&v))),
        "{steady:?}"
    );
    assert_eq!(ts.phases.len(), 3);
    assert!(ts.x_end >= 10.0 - 1e-9);
}

#[test]
fn flows_outside_their_span_add_nothing() {
    use bloatlab_report::plot::throughput::{Bucketed, sum_active};
    use bloatlab_stats::{Direction, FlowSeries, TransferSample};
    use bloatlab_units::Bytes;
    let s = Duration::from_secs;
    // Two sequential 1 s pulses of 1 MB (8 Mbit/s each), back to back.
    let pulse = |name: &str, at: u64| FlowSeries {
        name: name.into(),
        direction: Direction::Up,
        samples: vec![TransferSample {
            start: s(at),
            end: s(at + 1),
            bytes: Bytes(1_000_000),
        }],
    };
    let w = Duration::from_millis(500);
    let flows: Vec<Bucketed> = [pulse("a", 1), pulse("b", 2)]
        .iter()
        .map(|f| Bucketed::new(f, s(4), w).unwrap())
        .collect();
    assert_eq!(
        sum_active(&flows, w),
        [
            None,
            None,
            Some(8e6),
            Some(8e6),
            Some(8e6),
            Some(8e6),
            None,
            None
        ]
    );
}

#[test]
fn chart_kinds_are_stable() {
    let runs = vec![v1()];
    let kinds: Vec<ChartKind> = charts(&runs).into_iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            ChartKind::Throughput(0),
            ChartKind::Latency(0),
            ChartKind::Cdf,
            ChartKind::Box
        ]
    );
}
