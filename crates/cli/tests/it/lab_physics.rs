//! No probe faster than physics (issue 18): under load, no `bloatlab ping` round trip
//! through a calibrated lab is shorter than the configured delays plus the probe's
//! serialization at the link's rate, with fq_codel and with a FIFO, while the idle median
//! stays within 0.1 ms of the same figure.
//!
//! Until issue 18 the calibration took each forwarding thread's median release lateness out
//! of its delay. Under load that lateness is the thread's own work, not its timer, and
//! feeds on itself up to the 1 ms cap per direction: report3 read a minimum of 77.7 ms
//! through 2 x 40 ms (docs/lab.md, "Calibrated delay").
//!
//! The floor a probe's RTT is held to is `2 x 40 ms + 2 x 43.2 us`: the probe is 108 IP
//! bytes (80 of payload), 43.2 us at 20 Mbit/s each way. The tolerance below it,
//! [`FLOOR_TOLERANCE_MS`], is the part of the calibration this test does not yet hold to
//! physics: the hosts' share (~65-75 us each way here) is measured on the idle link, and
//! under load the hosts' path is hot and shorter. Measured with the lateness trim gone
//! (2-core VM, other builds running): fq_codel loaded minimum 80.026 ms against a floor of
//! 80.086 (60 us below), while the lateness trim this issue removed could take up to 2 ms.
//! Not yet fixed (issue 18, deliverable 7): a host share that follows the load.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::load;
use std::time::Duration;

/// One-way delay of the lab.
const DELAY_MS: f64 = 40.0;
/// IP bytes of a default `bloatlab ping` request or reply: 20 + 8 + 80.
const PROBE_IP_BYTES: f64 = 108.0;
/// The link rate, bit/s.
const RATE: f64 = 20e6;
/// How far below the physical floor a probe may read (see the module docs): the hosts'
/// share measured idle, which a hot path under load does not pay in full (60 us seen).
const FLOOR_TOLERANCE_MS: f64 = 0.1;

/// The RTT floor: both delays plus the probe's serialization both ways (ms).
fn floor_ms() -> f64 {
    2.0 * DELAY_MS + 2.0 * PROBE_IP_BYTES * 8.0 / RATE * 1e3
}

/// RTTs (ms) of a `bloatlab ping` run from the client to the server, every 10 ms for
/// `secs` seconds (lost probes left out).
fn ping_rtts(lab: &LabGuard, secs: &str) -> Vec<f64> {
    let v = bloatlab_ping_json(lab, "10ms", secs);
    let rtt = v["raw"]["latency"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["kind"] == "rtt")
        .unwrap_or_else(|| panic!("no rtt series: {v}"));
    rtt["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["delay_ns"].as_f64())
        .map(|ns| ns / 1e6)
        .collect()
}

/// A 20 Mbit/s, 2 x 40 ms lab with `qdisc`: the idle median, then the minimum while four
/// TCP flows load each direction.
fn assert_physical(qdisc: &str, extra: &[&str]) {
    let mut args = vec!["--rate", "20mbit", "--delay", "40ms", "--qdisc", qdisc];
    args.extend_from_slice(extra);
    let lab = LabGuard::up("phys", &args);
    let _server = serve_and_wait(&lab, "10.77.0.2");
    let floor = floor_ms();

    // The idle median, from a second 2-s window if the first is off by more than 0.1 ms:
    // on the shared 2-core VM a whole window's median now and then shifts by 0.1-0.2 ms
    // (2 of 9 windows on 6 December, both qdiscs, the next window back within 0.03 ms):
    // the CPUs the ping client and the responder run on, against the forwarding threads'
    // (a same-CPU wake-up was 15-80 us cheaper; docs/lab.md, "Where the endpoints
    // run"), drawn again by each window's new ping. A calibration that is off misses in both.
    let mut idle_median = f64::NAN;
    for window in 1..=2 {
        let mut idle = ping_rtts(&lab, "2");
        assert!(idle.len() >= 150, "idle: {} replies", idle.len());
        idle_median = median(&mut idle);
        eprintln!(
            "{qdisc}: idle median {idle_median:.3} ms (window {window}), floor {floor:.3} ms"
        );
        if (idle_median - floor).abs() <= 0.1 {
            break;
        }
    }

    // Load both directions (an upload and a download of four flows each) and probe from
    // the second second on, while the queues are full.
    let client = |reverse: bool| {
        let mut a = vec![
            BIN,
            "client",
            "10.77.0.2",
            "-p",
            "5001",
            "-t",
            "7",
            "-P",
            "4",
        ];
        if reverse {
            a.push("-R");
        }
        lab.bg("client", &a)
    };
    let (_up, _down) = (client(false), client(true));
    std::thread::sleep(Duration::from_millis(1500));
    let loaded = ping_rtts(&lab, "4");
    let st = lab.status();
    assert!(loaded.len() >= 100, "loaded: {} replies", loaded.len());
    let min = loaded.iter().copied().fold(f64::INFINITY, f64::min);
    let mut sorted = loaded.clone();
    let loaded_median = median(&mut sorted);
    let dirs = &st["counters"]["directions"];
    let cal = |i: usize| dirs[i][1]["calibration"].clone();
    eprintln!(
        "{qdisc}: loaded min {min:.3} ms, median {loaded_median:.3} ms ({} replies); \
         calibration up {} down {}",
        loaded.len(),
        cal(0),
        cal(1)
    );
    let sent: u64 = (0..2)
        .filter_map(|i| dirs[i][1]["io"]["tx_bytes"].as_u64())
        .sum();
    assert!(sent > 5_000_000, "the load moved only {sent} bytes: {st}");
    assert!(
        min >= floor - FLOOR_TOLERANCE_MS,
        "{qdisc}: a probe under load took {min:.3} ms, faster than the {floor:.3} ms the \
         link's delays and serialization take"
    );
    assert!(
        (idle_median - floor).abs() <= 0.1,
        "{qdisc}: idle median {idle_median:.3} ms in two windows running, want {floor:.3} +- 0.1 ms"
    );
}

#[test]
fn fq_codel_under_load_no_probe_beats_the_delay() {
    if !tier::root("fq_codel_under_load_no_probe_beats_the_delay") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    assert_physical("fq_codel", &[]);
}

#[test]
fn fifo_under_load_no_probe_beats_the_delay() {
    if !tier::root("fifo_under_load_no_probe_beats_the_delay") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    // 100 packets: 60 ms of queue at 20 Mbit/s, enough to be sure the load queues.
    assert_physical("fifo", &["--limit", "100p"]);
}
