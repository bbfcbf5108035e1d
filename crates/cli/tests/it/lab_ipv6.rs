//! IPv6 through the lab (issue 13): every host has `fd00:77::X` besides
//! `10.77.0.X`, `lab exec` names it in `BLOATLAB_<HOST>6`, and independent
//! tools (ping -6, iperf3 -6, irtt -6) and bloatlab's own engine and suites
//! see the configured delay, rate and ECN marks over IPv6.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::tempdir;
use crate::harness::{Listen, load};

const SERVER6: &str = "fd00:77::2";

/// Receiver goodput (bit/s) of `iperf3 -6` from the client to the server.
fn iperf3_goodput6(lab: &LabGuard, extra: &[&str]) -> f64 {
    let mut args = vec![
        "iperf3", "-6", "-c", SERVER6, "-t", "3", "-O", "1", "-J", "-C", "cubic",
    ];
    args.extend_from_slice(extra);
    let o = lab.exec("client", &args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("iperf3 JSON: {e}: {}{}", stdout(&o), stderr(&o)));
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no goodput in {v}"))
}

/// Median RTT (ms) of `n` single `ping -6` runs (their summary lines have
/// microseconds; per-reply lines round to three digits).
fn ping6_median(lab: &LabGuard, n: u32) -> f64 {
    let script = format!(
        "for i in $(seq {n}); do ping -6 -n -c 1 -W 3 \"$BLOATLAB_SERVER6\" | tail -1; sleep 0.01; done"
    );
    let o = lab.exec("client", &["sh", "-c", &script]);
    let mut rtts = ping_summary_rtts(&o);
    assert!(
        rtts.len() as u32 >= n / 2,
        "ping -6: {}{}",
        stdout(&o),
        stderr(&o)
    );
    median(&mut rtts)
}

#[test]
fn ipv6_addresses_ping_iperf3_and_irtt_see_the_configured_link() {
    if !tier::root("ipv6_addresses_ping_iperf3_and_irtt_see_the_configured_link") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("v6", &["--rate", "20mbit", "--delay", "10ms"]);
    let env = stdout(&lab.exec(
        "client",
        &[
            "sh",
            "-c",
            "echo $BLOATLAB_CLIENT6 $BLOATLAB_SERVER6 $BLOATLAB_SERVER",
        ],
    ));
    assert_eq!(env.trim(), "fd00:77::1 fd00:77::2 10.77.0.2");
    let addrs = stdout(&lab.exec(
        "server",
        &["ip", "-6", "-o", "addr", "show", "dev", "bl-server"],
    ));
    assert!(addrs.contains("fd00:77::2/64"), "{addrs}");

    // Delay: ping -6 sees the configured 20 ms round trip (calibrated).
    let m = ping6_median(&lab, 20);
    eprintln!("ping -6 median {m:.3} ms (configured 20)");
    assert!(
        (m - 20.0).abs() <= 0.3,
        "ping -6 median {m:.3} ms, want 20 +- 0.3"
    );

    // irtt over IPv6 (its own ~0.15 ms included, see lab_calibration.rs).
    let _irtt = lab.serve(
        "server",
        &["irtt", "server", "-b", "[fd00:77::2]:2112"],
        Listen::Udp,
        2112,
    );
    let o = lab.exec(
        "client",
        &[
            "irtt",
            "client",
            "-6",
            "-i",
            "10ms",
            "-d",
            "2s",
            "-Q",
            "-o",
            "-",
            "[fd00:77::2]:2112",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("irtt JSON: {e}: {}{}", stdout(&o), stderr(&o)));
    let mut rtts: Vec<f64> = v["round_trips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["delay"]["rtt"].as_f64())
        .map(|ns| ns / 1e6)
        .collect();
    assert!(rtts.len() >= 100, "irtt -6 replies: {}", rtts.len());
    let m = median(&mut rtts);
    eprintln!("irtt -6 median {m:.3} ms (configured 20)");
    assert!(
        (19.9..=20.5).contains(&m),
        "irtt -6 median {m:.3} ms, want 20"
    );

    // Rate: TCP over IPv6 gets 90-100 % of 20 Mbit/s.
    let _srv = lab.iperf3_server();
    let g = iperf3_goodput6(&lab, &[]);
    eprintln!("iperf3 -6 goodput {:.2} Mbit/s", g / 1e6);
    assert!(
        (0.9 * 20e6..=20e6).contains(&g),
        "iperf3 -6 goodput {:.2} Mbit/s",
        g / 1e6
    );
    let up = up_report(&lab);
    // IPv6 traffic was routed by destination, not dropped as unroutable.
    let tx = up["io"]["tx_packets"].as_u64().unwrap_or(0);
    let unroutable = up["io"]["unroutable"].as_u64().unwrap_or(u64::MAX);
    assert!(tx > 1000, "{up}");
    assert!(unroutable < 10, "IPv6 dropped as unroutable: {up}");
    assert_eq!(up["link"]["unparsed"], 0, "IPv6 headers not parsed: {up}");
}

#[test]
fn ipv6_ecn_marks_reach_the_receiver() {
    if !tier::root("ipv6_ecn_marks_reach_the_receiver") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "v6e",
        &[
            "--rate", "20mbit", "--delay", "10ms", "--qdisc", "fq_codel", "--ecn", "all",
        ],
    );
    let _srv = lab.iperf3_server();
    let g = iperf3_goodput6(&lab, &["-P", "2"]);
    assert!(g > 0.5 * 20e6, "goodput {g}");
    let link = &up_report(&lab)["link"];
    let marked = link["ce_marked"]["packets"].as_u64().expect("ce_marked");
    assert!(marked > 0, "no CE marks over IPv6: {link}");
    assert_eq!(link["dropped"]["aqm"]["packets"], 0, "{link}");
    // RFC 3168 in the traffic class: the receiving stack counts the marks.
    let seen = nstat(&lab, "server", "Ip6InCEPkts");
    eprintln!("IPv6 CE marks: emulator {marked}, receiver {seen}");
    assert_eq!(seen, marked);
}

#[test]
fn ipv6_passes_the_offloading_emulator_with_valid_checksums() {
    if !tier::root("ipv6_passes_the_offloading_emulator_with_valid_checksums") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("v6o", &["--offload", "--rate", "50mbit", "--delay", "2ms"]);
    let _srv = lab.iperf3_server();
    let g = iperf3_goodput6(&lab, &["-t", "2"]);
    eprintln!("iperf3 -6 with --offload: {:.1} Mbit/s", g / 1e6);
    assert!(g >= 0.85 * 50e6, "goodput {:.1} Mbit/s", g / 1e6);
    let io = &up_report(&lab)["io"];
    assert_eq!(io["rx_errors"], 0, "{io}");
    assert_eq!(io["tx_errors"], 0, "{io}");
    // TcpInCsumErrors counts IPv4 and IPv6 TCP.
    assert_eq!(nstat(&lab, "server", "TcpInCsumErrors"), 0);
    assert_eq!(nstat(&lab, "client", "TcpInCsumErrors"), 0);
}

/// bloatlab's own engine (`server -V`), ICMPv6 probes and the rrul suite
/// over IPv6.
#[test]
fn rrul_and_icmpv6_probes_run_over_ipv6_in_a_lab() {
    if !tier::root("rrul_and_icmpv6_probes_run_over_ipv6_in_a_lab") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("v6r", &["--rate", "20mbit", "--delay", "5ms"]);
    // ICMPv6 echo (RFC 4443) from `bloatlab ping --icmp`: the idle RTT is 10 ms.
    let o = lab.exec(
        "client",
        &[BIN, "ping", SERVER6, "--icmp", "-i", "20ms", "-t", "1"],
    );
    let text = stdout(&o);
    assert!(
        o.status.success(),
        "ping --icmp over IPv6: {text}{}",
        stderr(&o)
    );
    let median: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("rtt"))
        .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or_else(|| panic!("no rtt line: {text}"));
    assert!(
        (9.9..=10.5).contains(&median),
        "ICMPv6 median RTT {median} ms: {text}"
    );
    let _srv = lab.serve("server", &[BIN, "server", "-V"], Listen::Tcp, 5001);
    let tmp = tempdir();
    let file = tmp.path().join("rrul6.json");
    let f = file.to_str().unwrap();
    let o = lab.exec(
        "client",
        &[
            BIN, "test", "rrul", SERVER6, "-l", "2", "--idle", "1", "-o", f,
        ],
    );
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "rrul over IPv6 failed: {text}");
    assert!(
        !text.contains("probe icmp"),
        "the ICMP probe failed: {text}"
    );
    for flow in ["tcp_up_be", "tcp_down_ef"] {
        let rate = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(flow))
            .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {flow} in: {text}"));
        assert!(rate > 0.5, "{flow} {rate} Mbit/s over IPv6: {text}");
    }
}

/// The absolute value of one `nstat` counter, summed over the two hosts.
fn nstat_both(lab: &LabGuard, counter: &str) -> u64 {
    nstat(lab, "client", counter) + nstat(lab, "server", counter)
}

/// flent's rrul46 (issue 13): half the flows and probes over IPv4, half over
/// IPv6, to one dual-stack server. Run through `lab exec` with no HOST, so it
/// also shows the lab defaults (BLOATLAB_SERVER, BLOATLAB_SERVER6).
#[test]
fn rrul46_carries_load_and_probes_over_both_families() {
    if !tier::root("rrul46_carries_load_and_probes_over_both_families") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("v46", &["--rate", "20mbit", "--delay", "5ms"]);
    // One `server -V` listens on :: and, with the namespace's default
    // bindv6only=0, takes IPv4 too (as a dual-stack netserver does for flent).
    let _srv = lab.serve("server", &[BIN, "server", "-V"], Listen::Tcp, 5001);
    let v6_before = nstat_both(&lab, "Ip6InReceives");
    let tmp = tempdir();
    let file = tmp.path().join("rrul46.json");
    let f = file.to_str().unwrap();
    let o = lab.exec(
        "client",
        &[
            BIN,
            "test",
            "rrul46",
            "-l",
            "3",
            "--idle",
            "1",
            "--probe-interval",
            "0.05",
            "-o",
            f,
        ],
    );
    let text = format!("{}{}", stdout(&o), stderr(&o));
    let loaded = bloatlab_results::load(&file);
    assert!(o.status.success(), "rrul46 failed: {text}");
    let v6_packets = nstat_both(&lab, "Ip6InReceives") - v6_before;
    let r = loaded.unwrap_or_else(|e| panic!("results file: {e}: {text}"));
    // The summary names each family's address and load.
    assert!(
        text.contains("server: IPv4 10.77.0.2 (") && text.contains("IPv6 fd00:77::2 ("),
        "{text}"
    );
    assert!(text.contains("by family: IPv4 up "), "{text}");
    let plan = r.metadata.plan.as_ref().expect("plan recorded");
    use bloatlab_results::schema::IpFamilyRecord::{Ipv4, Ipv6};
    let want = |name: &str| {
        if name.ends_with("_v6") {
            (Some(Ipv6), Some("fd00:77::2"))
        } else {
            (Some(Ipv4), Some("10.77.0.2"))
        }
    };
    assert_eq!(plan.flows.len(), 8);
    for fl in &plan.flows {
        assert_eq!((fl.family, fl.address.as_deref()), want(&fl.name), "{fl:?}");
    }
    assert_eq!(plan.probes.len(), 6);
    for q in &plan.probes {
        assert_eq!((q.family, q.address.as_deref()), want(&q.name), "{q:?}");
    }
    // Load over both families: every flow moved data in the loaded phase
    // (20 Mbit/s shared by 4 flows per direction: well over 0.5 Mbit/s each).
    for t in &r.raw.throughput {
        let bytes: u64 = t.samples.iter().map(|s| s.bytes).sum();
        assert!(
            bytes * 8 > 3 * 500_000 / 2,
            "{} carried {bytes} bytes: {text}",
            t.name
        );
    }
    // Probes over both families: every RTT series got most of its replies
    // (50 ms interval over 5 s: about 100 per series).
    for name in [
        "udp_be_v4",
        "udp_bk_v4",
        "icmp_v4",
        "udp_be_v6",
        "udp_bk_v6",
        "icmp_v6",
    ] {
        let s = r
            .raw
            .latency
            .iter()
            .find(|l| l.name == name && l.kind == bloatlab_results::schema::DelayKindRecord::Rtt)
            .unwrap_or_else(|| panic!("no {name} series: {text}"));
        let got = s.samples.iter().filter(|p| p.delay_ns.is_some()).count();
        assert!(got >= 70, "{name}: {got} replies: {text}");
        // 2 x 5 ms configured; under load the queue adds, never removes.
        let min = s.samples.iter().filter_map(|p| p.delay_ns).min().unwrap();
        assert!(min >= 9_500_000, "{name} min RTT {min} ns");
    }
    // The IPv6 half really went over IPv6: half the load of a 20 Mbit/s
    // link for 3 s is thousands of IPv6 packets at the two hosts.
    eprintln!("rrul46: {v6_packets} IPv6 packets received by the hosts");
    assert!(v6_packets > 2000, "only {v6_packets} IPv6 packets");
}

/// `--offload` segments IPv6 TSO super-packets too (TUN_F_TSO6,
/// offload/split.rs): the hosts hand over up to 64 KB of IPv6 TCP at a
/// time, the emulator cuts them into wire packets with valid checksums, and
/// bloatlab's own engine over IPv6 gets the shaped rate.
#[test]
fn ipv6_tso_super_packets_are_segmented_by_the_offloading_emulator() {
    if !tier::root("ipv6_tso_super_packets_are_segmented_by_the_offloading_emulator") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("v6t", &["--offload", "--rate", "200mbit", "--delay", "2ms"]);
    let _srv = lab.serve("server", &[BIN, "server", "-V"], Listen::Tcp, 5001);
    let bps = client_bps(&lab.exec(
        "client",
        &[BIN, "client", "-V", SERVER6, "-t", "2", "--json"],
    ));
    let up = up_report(&lab);
    let io = &up["io"];
    eprintln!("IPv6 with --offload: {:.1} Mbit/s, {io}", bps / 1e6);
    assert!(bps >= 0.8 * 200e6, "{:.1} Mbit/s", bps / 1e6);
    // Super-packets came in and were cut, nothing was refused.
    assert!(io["rx_super"].as_u64().unwrap_or(0) > 100, "{io}");
    assert_eq!(io["rx_errors"], 0, "{io}");
    assert_eq!(nstat(&lab, "server", "TcpInCsumErrors"), 0);
    assert!(nstat(&lab, "server", "Ip6InReceives") > 10_000);
}
