//! A latency series is its name and its kind: `udp_be` (rtt) and `udp_be` (owd down)
//! are two series, and the headline figures come from the round trip.

mod common;

use bloatlab_report::results::schema::DelayKindRecord;
use bloatlab_report::table;
use bloatlab_report::view::Comparison;
use common::*;

fn row<'a>(c: &'a Comparison, metric: &str) -> Option<&'a Vec<String>> {
    c.rows
        .iter()
        .find(|r| r.metric == metric)
        .map(|r| &r.values)
}

/// Regression (issue 9): the comparison showed the one-way *down* delay under the plain
/// name `udp_be`, with its +3 ms rise graded A+, for a FIFO run whose round trip rose by
/// a hundred ms: a name-keyed map kept the last series of that name.
#[test]
fn rtt_and_owd_series_sharing_a_name_compare_as_the_rtt() {
    let runs = fifo_vs_fqcodel();
    // The fixture has the shape the bug needs: same name, rtt first, owd_down last.
    let kinds: Vec<DelayKindRecord> = runs[0]
        .derived
        .latency
        .iter()
        .filter(|s| s.name == "udp_be")
        .map(|s| s.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            DelayKindRecord::Rtt,
            DelayKindRecord::OwdUp,
            DelayKindRecord::OwdDown
        ]
    );
    let figures = |kind| {
        runs[0]
            .derived
            .latency
            .iter()
            .find(|s| s.name == "udp_be" && s.kind == kind)
            .unwrap()
            .phases[1]
            .clone()
    };
    let (rtt, down) = (
        figures(DelayKindRecord::Rtt),
        figures(DelayKindRecord::OwdDown),
    );
    // The round trip rose a lot, the down way by at most 3 ms.
    assert!(rtt.induced_ns.unwrap() > 50_000_000, "{rtt:?}");
    assert!(down.induced_ns.unwrap() <= 3_100_000, "{down:?}");
    let rtt_grade = rtt.grade.unwrap().to_string();
    assert_ne!(rtt_grade, "A+");
    assert_eq!(down.grade, None, "one-way series are not graded");

    let c = Comparison::new(&runs);
    let grade = row(&c, "udp_be (rtt): loaded grade").expect("rtt grade row");
    assert_eq!(grade[0], rtt_grade);
    assert_eq!(grade[1], "A+", "FQ-CoDel");
    let induced = row(&c, "udp_be (rtt): loaded induced (ms)").unwrap();
    assert_eq!(
        induced[0],
        bloatlab_report::view::signed_ms(rtt.induced_ns.unwrap())
    );
    let rpm = row(&c, "udp_be (rtt): loaded probe RPM").unwrap();
    assert_eq!(rpm[0], format!("{:.0}", rtt.probe_rpm.unwrap()));
    // One-way rows are there, named as such, without headline figures.
    let median = row(&c, "udp_be (owd down): loaded median (ms)").unwrap();
    assert_eq!(
        median[0],
        bloatlab_report::view::ms(down.delay.unwrap().median_ns)
    );
    for headline in ["grade", "induced (ms)", "probe RPM"] {
        assert!(row(&c, &format!("udp_be (owd down): loaded {headline}")).is_none());
    }
    // No row under the bare name, anywhere.
    assert!(c.rows.iter().all(|r| !r.metric.starts_with("udp_be:")));
    // Round-trip series come first.
    assert!(c.rows[0].metric.contains("(rtt)"), "{}", c.rows[0].metric);
    // The terminal table prints the same cells.
    let text = table::comparison(&c);
    let line = text
        .lines()
        .find(|l| l.starts_with("udp_be (rtt): loaded grade"))
        .unwrap();
    let cells: Vec<&str> = line.split_whitespace().rev().take(2).collect();
    assert_eq!(cells, ["A+", rtt_grade.as_str()], "{line}");
}
