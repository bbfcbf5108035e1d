//! `lab status` text from reports built by the producers' own types.

use super::*;
use crate::driver::calibrate::DelayTrim;
use crate::driver::histogram::Summary;
use crate::driver::host_track::HostTracker;
use crate::lab::LabStatus;
use crate::model::{LinkCounters, StageCounters};
use crate::netlink::qdisc_stats::QdiscStats;
use crate::spec::LabSpec;
use crate::state::{LabState, StateDir};
use std::time::Duration;

const US: fn(u64) -> Duration = Duration::from_micros;

/// The report `status::read` builds, for a lab whose emulator is not
/// this test (pid 0: reported dead).
fn report(spec: &LabSpec, counters: Option<LabStatus>) -> StatusReport {
    crate::status::report(LabState::new(spec, &StateDir::default()), counters)
}

fn counters(spec: &LabSpec, directions: Vec<(String, DirectionReport)>) -> LabStatus {
    LabStatus {
        name: spec.name.clone(),
        backend: spec.backend,
        uptime_s: 10.0,
        unix_time_s: 1010.0,
        directions,
        devices: vec![],
        tun_ring_drops: 0,
        qdiscs: vec![],
        calibration: None,
        host_tracking: None,
    }
}

/// A link that took 3 packets, sent 1, dropped 1 to its AQM, marked 1
/// and holds 1 (no sojourn yet).
fn link() -> bloatlab_emu::Counters {
    let mut c = bloatlab_emu::Counters::default();
    for _ in 0..3 {
        c.enqueued.add(1500);
    }
    c.dequeued.add(1500);
    c.dropped.aqm.add(1500);
    c.ce_marked.add(1500);
    c.backlog.add(1500);
    c
}

const LINK: &str = "link: enqueued 3 pkts, dequeued 1, dropped 1 (overflow 0, aqm 1, loss 0), \
                    CE-marked 1, backlog 1 pkts / 1500 B, sojourn ms p50 - p99 - max -";

#[test]
fn a_lab_without_counters_shows_hosts_and_settings_and_says_it_is_dead() {
    let mut spec = LabSpec::new("h14st");
    spec.ecn_hosts = vec!["client".into(), "server".into()];
    let text = render(&report(&spec, None));
    assert_eq!(
        text,
        "lab h14st: Userspace backend, emulator pid 0 NOT RUNNING (the lab is dead)\n  \
         client    10.77.0.1    fd00:77::1   netns bl-h14st-client\n  \
         server    10.77.0.2    fd00:77::2   netns bl-h14st-server\n  \
         up   rate - delay - jitter - loss - limit - qdisc - \n  \
         down rate - delay - jitter - loss - limit - qdisc - \n  \
         TCP ECN on: client, server\n"
    );
}

#[test]
fn counters_calibration_and_tracking_are_rendered_from_their_producers() {
    let spec = LabSpec::new("h14st");
    // Up: 10 ms, 30 us host share (taken out), 20 us release lateness (not: issue 18).
    let mut up_trim = DelayTrim::new(Duration::from_millis(10), US(30));
    // Down: 40 us configured, 30 us host share, 2 ms of release lateness.
    let mut down_trim = DelayTrim::new(US(40), US(30));
    for _ in 0..10 {
        up_trim.released(US(20));
        down_trim.released(US(2000));
    }
    up_trim.tick(Duration::ZERO);
    down_trim.tick(Duration::ZERO);
    let lateness = Summary {
        count: 100,
        mean_us: 15.0,
        p50_us: 12.4,
        p90_us: 30.0,
        p99_us: 80.6,
        p999_us: 200.0,
        max_us: 1234.0,
    };
    let up = DirectionReport {
        lateness,
        link: LinkCounters::single(link()),
        running: true,
        realtime: true,
        calibration: Some(up_trim.report()),
        ..DirectionReport::default()
    };
    let mut down = DirectionReport {
        lateness,
        link: LinkCounters::single(link()),
        running: true,
        demotions: 2,
        normal_mode: NormalMode::Prompt,
        calibration: Some(down_trim.report()),
        ..DirectionReport::default()
    };
    down.io.tx_packets = 100;
    down.io.tx_bytes = 150_000;
    down.io.unroutable = 1;
    down.io.rx_super = 3;
    down.io.tx_coalesced = 4;
    let mut c = counters(&spec, vec![("up".into(), up), ("down".into(), down)]);
    // 46 of 48 echo requests answered, 100 us over the probe delays, 40 us of it lateness.
    let rtt = 2 * path_probe::PROBE_DELAY + US(100);
    let bursts = [vec![rtt; 12], vec![rtt; 12], vec![rtt; 12], vec![rtt; 10]];
    c.calibration = Some(path_probe::derive(&bursts, US(40)));
    let mut tracker = HostTracker::new(US(30));
    tracker.discarded();
    tracker.sample(US(80));
    c.host_tracking = Some(tracker.report());
    c.tun_ring_drops = 7;
    let text = render(&report(&spec, Some(c)));
    let counters: Vec<&str> = text.lines().skip(5).collect();
    let want = [
        "  up   forwarded 0 pkts / 0 B, unroutable 0, lateness p50 12 us p99 81 us max 1234 us, SCHED_FIFO".to_string(),
        "       calibrated delay: configured 10.000 ms, applied 9.970 ms (path 30.0 us); release \
         lateness p50 20.0 us of the last 10 packets, not taken out (a packet never leaves before \
         its time); not removed: 20.0 us".to_string(),
        format!("       {LINK}"),
        "  down forwarded 100 pkts / 150000 B, unroutable 1, lateness p50 12 us p99 81 us max 1234 us, \
         normal priority at nice -20 with a 100 us slice (left SCHED_FIFO 2x: busy enough to \
         starve the hosts)".to_string(),
        "       offload: 3 TSO super-packets cut into wire packets, 4 coalesced writes".to_string(),
        "       calibrated delay: configured 0.040 ms, applied 0.010 ms (path 30.0 us); release \
         lateness p50 2000.0 us of the last 10 packets, not taken out (a packet never leaves \
         before its time); not removed: 2000.0 us".to_string(),
        format!("       {LINK}"),
        "  calibration at lab up: 46/48 echo requests client -> server through 1 ms + 1 ms: RTT p50 \
         2.100 ms p90 2.100 ms, overhead 100.0 us (of it release lateness 40.0 us), 30.0 us taken \
         out of each direction".to_string(),
        "  host path tracked since lab up: 1 idle probes (1 discarded for traffic), host overhead \
         median 80.0 us; 30.0 us taken out of each direction (lab up: 30.0 us; 0 changes); not \
         removed 10.0 us each way".to_string(),
        "  WARNING: emulator overloaded: 7 packets dropped in TUN rings before emulation".to_string(),
    ];
    assert_eq!(counters, want, "{text}");
}

#[test]
fn a_chain_shows_each_stage_and_its_current_rate() {
    let spec = LabSpec::new("h14ch");
    let stage = |name: &str, rate| StageCounters {
        name: name.into(),
        rate_bit_s: rate,
        link: link(),
    };
    let up = DirectionReport {
        link: LinkCounters {
            total: link(),
            stages: vec![stage("shaper", Some(9_000_000)), stage("path", None)],
        },
        realtime: true,
        ..DirectionReport::default()
    };
    let text = render(&report(
        &spec,
        Some(counters(&spec, vec![("up".into(), up)])),
    ));
    let lines: Vec<&str> = text.lines().skip(6).collect();
    assert_eq!(
        lines,
        [
            format!("       chain (sojourn per packet, all stages): {LINK}"),
            format!(
                "       stage shaper   {}: {LINK}",
                bloatlab_units::BitRate(9_000_000)
            ),
            format!("       stage path     unlimited: {LINK}"),
        ],
        "{text}"
    );
}

#[test]
fn calibration_off_and_kernel_qdiscs_are_said() {
    let mut spec = LabSpec::new("h14nc");
    spec.driver.calibrate = false;
    let text = render(&report(&spec, Some(counters(&spec, vec![]))));
    assert!(text.ends_with(
        "  delay calibration off (--no-calibrate): idle RTTs include the emulator's overhead\n"
    ));
    let mut spec = LabSpec::new("h14k");
    spec.backend = Backend::Kernel;
    spec.driver.calibrate = false;
    let mut c = counters(&spec, vec![]);
    c.qdiscs = vec![(
        "up".into(),
        QdiscStats {
            handle: 0x10000,
            kind: "tbf".into(),
            bytes: 3000,
            packets: 2,
            drops: 1,
            overlimits: 5,
            qlen: 1,
            backlog_bytes: 1500,
            ..QdiscStats::default()
        },
    )];
    let text = render(&report(&spec, Some(c)));
    assert!(text.starts_with("lab h14k: Kernel backend, "), "{text}");
    assert!(
        text.ends_with(
            "  up   qdisc tbf 1: sent 3000 B / 2 pkts, dropped 1, overlimits 5, \
             backlog 1500 B / 1 pkts\n"
        ),
        "{text}"
    );
}

#[test]
fn the_scheduling_says_how_a_demoted_thread_runs_and_why_not_promptly() {
    let r = |realtime, normal_mode| DirectionReport {
        realtime,
        normal_mode,
        demotions: 1,
        ..DirectionReport::default()
    };
    let why = " (left SCHED_FIFO 1x: busy enough to starve the hosts)";
    let cases = [
        (r(true, NormalMode::Prompt), "SCHED_FIFO"),
        (r(false, NormalMode::Plain), "normal priority"),
        (
            r(false, NormalMode::Prompt),
            "normal priority at nice -20 with a 100 us slice",
        ),
        (
            r(false, NormalMode::NoCustomSlice),
            "normal priority (nice 0: no custom slices before Linux 6.12)",
        ),
        (
            r(false, NormalMode::Refused),
            "normal priority (nice 0: nice -20 refused)",
        ),
    ];
    for (report, policy) in cases {
        assert_eq!(scheduling(&report), format!("{policy}{why}"));
    }
    // A thread never demoted says only its policy.
    let never = DirectionReport::default();
    assert_eq!(scheduling(&never), "normal priority");
}
