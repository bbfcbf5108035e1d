//! Files that load but hold odd data never make the report panic.

use bloatlab_report::results::schema::DelayKindRecord;
use bloatlab_report::results::schema::{
    DirectionRecord, FlowRecord, LatencyRecord, ProbeRecord, TransferRecord,
};
use bloatlab_report::results::{Metadata, Raw, ResultsFile};
use bloatlab_report::{Run, flent, html, plot};

fn file(raw: Raw) -> ResultsFile {
    let start: jiff::Timestamp = "2026-12-02T11:00:00Z".parse().unwrap();
    ResultsFile::new(Metadata::new("odd", vec![], start), raw)
}

#[test]
fn a_run_with_no_samples_renders_tables_and_no_charts() {
    let run = Run::new("empty", file(Raw::default())).unwrap();
    assert!(plot::charts(std::slice::from_ref(&run)).is_empty());
    let page = html::render(std::slice::from_ref(&run)).unwrap();
    assert!(page.contains("No latency series.") && page.contains("No load flows."));
    assert_eq!(page.matches("<svg").count(), 0);
    let doc = flent::document(&run, "e.flent.gz").unwrap();
    assert_eq!(doc["x_values"].as_array().unwrap().len(), 1);
}

#[test]
fn samples_centuries_after_the_start_do_not_panic() {
    let far = u64::MAX / 2;
    let raw = Raw {
        phases: vec![],
        latency: vec![LatencyRecord {
            name: "p".into(),
            kind: DelayKindRecord::Rtt,
            samples: vec![
                ProbeRecord {
                    sent_ns: 0,
                    delay_ns: Some(5_000_000),
                    duplicates: 0,
                    late: false,
                    unfinished: false,
                },
                ProbeRecord {
                    sent_ns: far,
                    delay_ns: Some(u64::MAX),
                    duplicates: u32::MAX,
                    late: true,
                    unfinished: false,
                },
                ProbeRecord {
                    sent_ns: u64::MAX,
                    delay_ns: None,
                    duplicates: 0,
                    late: false,
                    unfinished: false,
                },
            ],
        }],
        throughput: vec![FlowRecord {
            name: "f".into(),
            ecn: None,
            direction: DirectionRecord::Up,
            tcp: Default::default(),
            samples: vec![
                TransferRecord {
                    start_ns: 0,
                    end_ns: u64::MAX,
                    bytes: u64::MAX,
                },
                TransferRecord {
                    start_ns: 10,
                    end_ns: 5,
                    bytes: 1,
                },
            ],
        }],
    };
    let run = Run::new("far", file(raw)).unwrap();
    let runs = [run];
    for c in plot::charts(&runs) {
        plot::render_png(&c, &runs).unwrap();
        plot::render_svg(&c, &runs).unwrap();
    }
    html::render(&runs).unwrap();
    let e = flent::to_gzip(&runs[0], "far.flent.gz").unwrap_err();
    assert!(e.to_string().contains("more than 1000000 steps"), "{e}");
}
