//! The lab's view of a run (`metadata.lab`) as text for the report: per direction of the
//! emulated link, what the emulator counted during the run (drops by cause, CE marks,
//! sojourn and backlog, its own lateness), and the warning shown beside the latency
//! figures when the emulator's release lateness p99 exceeded 1 ms.

use bloatlab_results::lab::{EmulatorRecord, LabRecord, PercentilesRecord};
use bloatlab_results::schema::DirectionRecord;

/// The threshold of [`late_warning`]: 1 ms at p99 (docs/statistics.md §7).
pub const LATE_P99_NS: u64 = 1_000_000;

fn name(d: DirectionRecord) -> &'static str {
    match d {
        DirectionRecord::Up => "up",
        DirectionRecord::Down => "down",
    }
}

fn ms(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |v| format!("{:.2} ms", v as f64 / 1e6))
}

fn pct(p: &PercentilesRecord) -> String {
    format!(
        "p50 {} p99 {} max {}",
        ms(p.p50_ns),
        ms(p.p99_ns),
        ms(p.max_ns)
    )
}

fn direction(d: &EmulatorRecord) -> String {
    format!(
        "{}: delivered {} pkts, dropped {} overflow / {} AQM / {} random loss, CE-marked {}, \
         sojourn {}, backlog p50 {} max {} pkts, emulator lateness {}",
        name(d.direction),
        d.dequeued_packets,
        d.drops.overflow,
        d.drops.aqm,
        d.drops.loss,
        d.ce_marked,
        pct(&d.sojourn),
        d.backlog.p50_packets.map_or("-".into(), |v| v.to_string()),
        d.backlog.max_packets.map_or("-".into(), |v| v.to_string()),
        pct(&d.lateness),
    )
}

/// `lab demo, host client: up: delivered …; down: …`.
pub fn summary(l: &LabRecord) -> String {
    let dirs: Vec<String> = l.directions.iter().map(direction).collect();
    let mut s = format!("lab {}, test on host {}", l.name, l.host);
    if !l.ecn.is_empty() {
        let ecn: Vec<String> = l.ecn.iter().map(|(h, v)| format!("{h}={v}")).collect();
        s.push_str(&format!(", tcp_ecn {}", ecn.join(" ")));
    }
    if dirs.is_empty() {
        s.push_str(": no emulator counters");
    } else {
        s.push_str(&format!(": {}", dirs.join("; ")));
    }
    if let Some(n) = l.tun_ring_drops.filter(|&n| n > 0) {
        s.push_str(&format!(
            "; {n} packets dropped in TUN rings (emulator overloaded)"
        ));
    }
    s
}

/// The warning for the latency figures when the emulator was late during the run: per
/// phase in which it fell behind (more than 2 % of a direction's packets over 1 ms late,
/// the rule that makes an experiment's point incomplete), else per direction whose whole-run
/// p99 exceeded 1 ms.
pub fn late_warning(l: &LabRecord) -> Option<String> {
    let behind: Vec<String> = l
        .phases
        .iter()
        .filter_map(|p| {
            let late = p.lateness.as_ref().filter(|x| x.fell_behind())?;
            Some(format!(
                "The lab's emulator released {:.1} % of the {} packets more than 1 ms late in \
                 phase {} (bound {:.1} %, p99 {}): the host was too busy, latency figures \
                 include host delay.",
                late.late_fraction().unwrap_or(0.0) * 100.0,
                name(p.direction),
                p.phase,
                bloatlab_results::lab::MAX_LATE_FRACTION * 100.0,
                ms(late.percentiles.p99_ns)
            ))
        })
        .collect();
    if !behind.is_empty() {
        return Some(behind.join(" "));
    }
    let late: Vec<String> = l
        .directions
        .iter()
        .filter(|d| d.lateness.p99_ns.is_some_and(|v| v > LATE_P99_NS))
        .map(|d| format!("{} p99 {}", name(d.direction), ms(d.lateness.p99_ns)))
        .collect();
    (!late.is_empty()).then(|| {
        format!(
            "The lab's emulator released packets late during this run ({}, above 1 ms): the \
             latency figures include up to that much emulator error.",
            late.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::lab::{BacklogRecord, DropsRecord};

    fn rec(p99_us: u64) -> LabRecord {
        LabRecord {
            name: "demo".into(),
            host: "client".into(),
            backend: "userspace".into(),
            ecn: [("client".to_string(), "1".to_string())].into(),
            tun_ring_drops: Some(0),
            directions: vec![EmulatorRecord {
                direction: DirectionRecord::Down,
                link: Default::default(),
                start_ns: 0,
                end_ns: 1,
                enqueued_packets: 10,
                dequeued_packets: 9,
                dequeued_bytes: 9000,
                drops: DropsRecord {
                    overflow: 0,
                    aqm: 1,
                    loss: 0,
                },
                ce_marked: 4,
                backlog: BacklogRecord::default(),
                sojourn: PercentilesRecord::default(),
                lateness: PercentilesRecord {
                    count: 9,
                    p50_ns: Some(10_000),
                    p90_ns: Some(20_000),
                    p99_ns: Some(p99_us * 1000),
                    max_ns: Some(p99_us * 2000),
                },
                stages: vec![],
            }],
            phases: vec![],
        }
    }

    #[test]
    fn lab_line_and_late_warning() {
        let s = summary(&rec(100));
        assert!(s.contains("CE-marked 4") && s.contains("1 AQM"), "{s}");
        assert!(s.contains("tcp_ecn client=1"), "{s}");
        assert_eq!(late_warning(&rec(100)), None);
        assert_eq!(late_warning(&rec(1000)), None, "exactly 1 ms is not over");
        let w = late_warning(&rec(7500)).unwrap();
        assert!(w.contains("down p99 7.50 ms"), "{w}");
        // issue 18: a phase in which the emulator fell behind is named instead; one on
        // time (2 % exactly) is not.
        let phase = |late_packets| bloatlab_results::lab::EmulatorPhaseRecord {
            phase: "loaded".into(),
            direction: DirectionRecord::Up,
            start_ns: 0,
            end_ns: 1,
            dequeued_bytes: 0,
            drops: 0,
            ce_marked: 0,
            utilisation: None,
            lateness: Some(bloatlab_results::lab::PhaseLatenessRecord {
                percentiles: PercentilesRecord {
                    count: 1000,
                    p99_ns: Some(7_200_000),
                    ..PercentilesRecord::default()
                },
                late_packets,
            }),
        };
        let mut r = rec(100);
        r.phases = vec![phase(20)];
        assert_eq!(late_warning(&r), None);
        r.phases = vec![phase(65)];
        assert_eq!(
            late_warning(&r).unwrap(),
            "The lab's emulator released 6.5 % of the up packets more than 1 ms late in phase \
             loaded (bound 2.0 %, p99 7.20 ms): the host was too busy, latency figures include \
             host delay."
        );
    }
}
