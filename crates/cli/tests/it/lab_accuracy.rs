//! Accuracy of the userspace emulator as independent tools see it: fping
//! and iperf3 run inside `lab exec` must measure the configured delay, rate
//! and queueing. Each test is a few seconds of traffic; they run one at a
//! time (a shared lock) so they do not load each other's links.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::load;
use std::time::Duration;

/// fping from the client to the server while `load` runs; returns RTTs (ms).
/// fping's timeout with `-C` is the period, so `period_ms` must exceed the
/// largest RTT expected.
fn rtts_under_load(lab: &LabGuard, period_ms: u32, load: impl FnOnce() -> f64) -> (Vec<f64>, f64) {
    std::thread::scope(|s| {
        let pinger = s.spawn(|| {
            // Let the queue build for 1 s, then sample for ~1.5 s.
            std::thread::sleep(Duration::from_millis(1000));
            fping_rtts(lab, "client", "10.77.0.2", 1500 / period_ms, period_ms)
        });
        let goodput = load();
        (pinger.join().expect("pinger"), goodput)
    })
}

#[test]
fn idle_rtt_is_twice_the_one_way_delay() {
    if !tier::root("idle_rtt_is_twice_the_one_way_delay") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("rtt", &["--delay", "20ms"]);
    let mut rtts = fping_rtts(&lab, "client", "10.77.0.2", 20, 50);
    assert!(rtts.len() >= 18, "{rtts:?}");
    let m = median(&mut rtts);
    eprintln!("idle RTT median {m:.3} ms (configured 40)");
    assert!(
        (m - 40.0).abs() <= 0.5,
        "median idle RTT {m} ms, want 40 +- 0.5 ({rtts:?})"
    );
    // Asymmetric delays add up the same way.
    drop(lab);
    let lab = LabGuard::up("rtt", &["--up-delay", "5ms", "--down-delay", "15ms"]);
    let mut rtts = fping_rtts(&lab, "server", "10.77.0.1", 20, 50);
    let m = median(&mut rtts);
    assert!(
        (m - 20.0).abs() <= 0.5,
        "median idle RTT {m} ms, want 20 +- 0.5 ({rtts:?})"
    );
}

#[test]
fn bulk_tcp_gets_90_to_100_percent_of_the_rate() {
    if !tier::root("bulk_tcp_gets_90_to_100_percent_of_the_rate") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("bulk", &["--rate", "20mbit", "--delay", "5ms"]);
    let _srv = lab.iperf3_server();
    let g = iperf3_goodput(&lab, &[]);
    eprintln!("TCP goodput {:.2} Mbit/s through 20 Mbit/s", g / 1e6);
    let r = 20e6;
    assert!(
        (0.9 * r..=r).contains(&g),
        "TCP goodput {:.2} Mbit/s through a 20 Mbit/s link",
        g / 1e6
    );
}

#[test]
fn fifo_rtt_under_load_is_base_plus_buffer_over_rate() {
    if !tier::root("fifo_rtt_under_load_is_base_plus_buffer_over_rate") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    // base RTT 20 ms; B = 50 KiB at 20 Mbit/s = 20.48 ms of queue.
    let lab = LabGuard::up(
        "fifo",
        &[
            "--rate", "20mbit", "--delay", "10ms", "--qdisc", "fifo", "--limit", "50kb",
        ],
    );
    let _srv = lab.iperf3_server();
    // A UDP flood above the rate keeps the FIFO full (TCP's sawtooth would
    // drain it after each loss), so every echo request that gets in waits
    // behind B bytes. The expected 40.5 ms is too close to a 50 ms fping
    // period (= its timeout) for slow replies to count.
    let (mut rtts, _) = rtts_under_load(&lab, 80, || {
        iperf3_goodput(&lab, &["-u", "-b", "26M", "-l", "1400", "-t", "4"])
    });
    assert!(rtts.len() >= 5, "too few echo replies under load: {rtts:?}");
    let want = 20.0 + 51_200.0 * 8.0 / 20e6 * 1e3;
    let m = median(&mut rtts);
    eprintln!(
        "FIFO RTT under load median {m:.2} ms, want {want:.2} ({} replies)",
        rtts.len()
    );
    assert!(
        (m - want).abs() <= 0.1 * want,
        "median RTT under load {m:.2} ms, want {want:.2} +- 10% ({rtts:?})"
    );
}

#[test]
fn fq_codel_keeps_latency_low_at_full_throughput() {
    if !tier::root("fq_codel_keeps_latency_low_at_full_throughput") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "fqc",
        &["--rate", "20mbit", "--delay", "10ms", "--qdisc", "fq_codel"],
    );
    let _srv = lab.iperf3_server();
    let (mut rtts, g) = rtts_under_load(&lab, 50, || iperf3_goodput(&lab, &["-P", "2", "-t", "4"]));
    assert!(rtts.len() >= 25, "{rtts:?}");
    let m = median(&mut rtts);
    eprintln!(
        "fq_codel RTT under load median {m:.2} ms, goodput {:.2} Mbit/s",
        g / 1e6
    );
    assert!(
        m <= 20.0 + 15.0,
        "median RTT under load {m:.2} ms > base 20 + 15 ({rtts:?})"
    );
    assert!(g >= 0.9 * 20e6, "goodput {:.2} Mbit/s < 90% of 20", g / 1e6);
}

#[test]
fn ecn_marks_instead_of_drops_and_receiver_agrees() {
    if !tier::root("ecn_marks_instead_of_drops_and_receiver_agrees") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "ecn",
        &[
            "--rate", "20mbit", "--delay", "10ms", "--qdisc", "fq_codel", "--ecn", "all",
        ],
    );
    let _srv = lab.iperf3_server();
    let g = iperf3_goodput(&lab, &["-P", "2"]);
    assert!(g > 0.5 * 20e6, "goodput {g}");
    // Let the queues drain and the counters be published.
    std::thread::sleep(Duration::from_millis(1500));
    let st = lab.status();
    let up = &st["counters"]["directions"][0];
    assert_eq!(up[0], "up", "{st}");
    let link = &up[1]["link"];
    let marked = link["ce_marked"]["packets"].as_u64().expect("ce_marked");
    let aqm_drops = link["dropped"]["aqm"]["packets"]
        .as_u64()
        .expect("aqm drops");
    assert!(marked > 0, "no CE marks: {link}");
    assert_eq!(aqm_drops, 0, "AQM dropped ECN-capable packets: {link}");
    // nstat -a: absolute counters of the server's (fresh) namespace.
    let seen = nstat(&lab, "server", "IpExtInCEPkts");
    eprintln!("CE marks: emulator {marked}, receiver nstat {seen}");
    assert_eq!(
        seen, marked,
        "receiver saw {seen} CE packets, emulator marked {marked}"
    );
}

/// `--offload`: the hosts hand the emulator 64 KB super-packets, but the
/// emulated FIFO still holds wire packets: 100 packets at 20 Mbit/s are
/// 60 ms of queue, where 100 super-packets would be seconds
/// (emulation.md 4.3).
#[test]
fn offload_keeps_emulated_packets_wire_sized() {
    if !tier::root("offload_keeps_emulated_packets_wire_sized") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "offl",
        &[
            "--offload",
            "--rate",
            "20mbit",
            "--delay",
            "5ms",
            "--qdisc",
            "fifo",
            "--limit",
            "100p",
        ],
    );
    let _srv = lab.iperf3_server();
    let (rtts, g) = rtts_under_load(&lab, 120, || iperf3_goodput(&lab, &["-P", "2", "-t", "4"]));
    eprintln!("offload: goodput {:.2} Mbit/s, RTTs {rtts:?}", g / 1e6);
    assert!(rtts.len() >= 8, "too few echo replies under load: {rtts:?}");
    assert!(
        (0.9 * 20e6..=20e6).contains(&g),
        "TCP goodput {:.2} Mbit/s through a 20 Mbit/s link",
        g / 1e6
    );
    let queue_ms = 100.0 * 1500.0 * 8.0 / 20e6 * 1e3;
    let worst = rtts.iter().copied().fold(0.0, f64::max);
    assert!(
        worst <= 10.0 + queue_ms + 5.0,
        "RTT {worst:.1} ms under load > base 10 + {queue_ms} ms of FIFO ({rtts:?})"
    );
    let up = up_report(&lab);
    let io = &up["io"];
    assert!(io["rx_super"].as_u64() > Some(0), "no super-packets: {io}");
    assert_eq!(io["rx_errors"], 0, "{io}");
    let link = &up["link"];
    assert!(
        link["dropped"]["overflow"]["packets"].as_u64() > Some(0),
        "the FIFO never filled, so its bound was not tested: {link}"
    );
    // Everything in the queue plus the packet in service.
    let max_ms = link["sojourn"]["max_ns"].as_f64().unwrap() / 1e6;
    assert!(
        max_ms <= queue_ms + 1.0,
        "a packet waited {max_ms:.1} ms in a {queue_ms} ms FIFO: {link}"
    );
}

/// Unshaped, back-to-back segments leave the emulator as one write, and
/// the receiving stack accepts every frame (no checksum errors).
#[test]
fn offload_coalesces_and_the_receiver_accepts_the_frames() {
    if !tier::root("offload_coalesces_and_the_receiver_accepts_the_frames") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("offu", &["--offload", "--delay", "1ms"]);
    let _srv = lab.iperf3_server();
    let g = iperf3_goodput(&lab, &["-t", "2"]);
    assert!(g > 0.0, "goodput {g}");
    let io = &up_report(&lab)["io"];
    eprintln!("offload unshaped: {:.0} Mbit/s, {io}", g / 1e6);
    assert!(io["rx_super"].as_u64() > Some(0), "no super-packets: {io}");
    assert!(
        io["tx_coalesced"].as_u64() > Some(0),
        "no coalesced writes: {io}"
    );
    assert_eq!(io["rx_errors"], 0, "{io}");
    assert_eq!(io["tx_errors"], 0, "{io}");
    assert_eq!(nstat(&lab, "server", "TcpInCsumErrors"), 0);
    assert_eq!(nstat(&lab, "client", "TcpInCsumErrors"), 0);
}
