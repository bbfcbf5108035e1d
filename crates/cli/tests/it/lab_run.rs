//! `bloatlab test` inside a lab (`lab exec NAME client -- bloatlab test ...`): the lab's
//! view of the run in the results file, working-condition checks that are right on AQMs,
//! ECN changed on a running lab, and the probe-load warning. One lab test per physical
//! claim; the pure checks are in bloatlab-stats and bloatlab-suite.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::tempdir;
use crate::harness::{Listen, Proc, load};
use bloatlab_results::ResultsFile;
use bloatlab_results::schema::DirectionRecord;

/// `bloatlab server` in the lab's server host, killed (by PID) on drop.
fn server(lab: &LabGuard) -> Proc {
    lab.serve("server", &[BIN, "server"], Listen::Tcp, 5001)
}

/// Runs `bloatlab test ARGS... 10.77.0.2 -o FILE` from the client host; returns the
/// summary and the results file.
fn test_in_lab(lab: &LabGuard, args: &[&str]) -> (String, ResultsFile) {
    let tmp = tempdir();
    let out = tmp.path().join("run.json");
    let out_s = out.display().to_string();
    let mut v = vec![BIN, "test"];
    v.extend_from_slice(args);
    v.extend_from_slice(&["10.77.0.2", "-o", &out_s]);
    let o = lab.exec("client", &v);
    let text = stdout(&o);
    assert!(
        o.status.success(),
        "test {args:?} failed: {text}{}",
        stderr(&o)
    );
    let file = bloatlab_results::load(&out).expect("results file");
    (text, file)
}

fn dir(
    lab: &bloatlab_results::lab::LabRecord,
    d: DirectionRecord,
) -> &bloatlab_results::lab::EmulatorRecord {
    lab.directions
        .iter()
        .find(|x| x.direction == d)
        .unwrap_or_else(|| panic!("no {d:?} record in {lab:?}"))
}

/// issue 9: RRUL through an AQM ended with "the load did not build a queue" on a full
/// link with thousands of AQM drops. Through a saturated FQ-CoDel or CAKE lab there is no
/// such warning, and the results file carries the lab's view of the run.
#[test]
fn saturated_aqm_lab_reaches_working_conditions_and_is_recorded() {
    if !tier::root("saturated_aqm_lab_reaches_working_conditions_and_is_recorded") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    for qdisc in ["fq_codel", "cake"] {
        let lab = LabGuard::up(
            "aqm",
            &["--rate", "20mbit", "--delay", "10ms", "--qdisc", qdisc],
        );
        let _srv = server(&lab);
        let (text, file) = test_in_lab(&lab, &["rrul", "-l", "4", "--idle", "1"]);
        assert!(
            !text.contains("did not build a queue"),
            "{qdisc}: false warning:\n{text}"
        );
        assert!(
            text.contains("ok: the load reached working conditions"),
            "{qdisc}:\n{text}"
        );
        // issue 9: inside a lab, metadata.link and qdisc were empty.
        let link = file.metadata.link.as_ref().expect("metadata.link");
        assert_eq!(link.lab.as_deref(), Some(lab.name.as_str()));
        assert_eq!(link.up.rate_bps, Some(20_000_000));
        assert_eq!(link.down.delay_ns, Some(10_000_000));
        assert_eq!(file.metadata.qdisc.len(), 2);
        assert_eq!(file.metadata.qdisc[1].kind, qdisc);
        let labr = file.metadata.lab.as_ref().expect("metadata.lab");
        assert_eq!(labr.name, lab.name);
        assert_eq!(labr.host, "client");
        assert_eq!(labr.directions.len(), 2, "{labr:?}");
        let up = dir(labr, DirectionRecord::Up);
        assert_eq!(up.link.qdisc.as_ref().map(|q| q.kind.as_str()), Some(qdisc));
        assert_eq!(up.link.rate_bps, Some(20_000_000));
        // 4 s at 20 Mbit/s is ~6600 full packets; the window spans the whole run.
        assert!(up.dequeued_packets > 4000, "{up:?}");
        assert!(up.end_ns > 5_000_000_000, "{up:?}");
        assert!(
            up.lateness.count > 0 && up.lateness.p99_ns.is_some(),
            "{up:?}"
        );
        assert!(up.sojourn.count > 0, "{up:?}");
        assert!(up.backlog.samples >= 5, "{up:?}");
        let drops: u64 = labr
            .directions
            .iter()
            .map(|d| d.drops.aqm + d.drops.overflow)
            .sum();
        assert!(drops > 0, "{qdisc}: a saturated AQM drops: {labr:?}");
        let loaded = labr
            .phases
            .iter()
            .filter(|p| p.phase == "loaded")
            .filter_map(|p| p.utilisation)
            .fold(0.0, f64::max);
        assert!(loaded > 0.85, "{qdisc}: loaded utilisation {loaded}");
        // issue 18: each phase carries the emulator's release lateness of its packets
        // (the loaded phase: thousands, at most all the run's).
        let late = labr
            .phases
            .iter()
            .find(|p| p.phase == "loaded" && p.direction == DirectionRecord::Up)
            .and_then(|p| p.lateness)
            .expect("the loaded phase's lateness");
        assert!(
            late.percentiles.count > 1000 && late.percentiles.count <= up.lateness.count,
            "{late:?} of {up:?}"
        );
        assert!(late.late_packets <= late.percentiles.count, "{late:?}");
        assert!(
            text.contains(&format!("Lab {}", lab.name)) && text.contains("CE-marked"),
            "{text}"
        );
    }
}

/// anchors §7.1: a window-limited single flow through a deep FIFO on a fast link builds
/// no queue, and the warning must still show (no drops, a sliver of the capacity).
#[test]
fn window_limited_flow_through_a_deep_fifo_still_warns() {
    if !tier::root("window_limited_flow_through_a_deep_fifo_still_warns") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "wlim",
        &["--rate", "200mbit", "--delay", "10ms", "--limit", "10000p"],
    );
    // A 32 KB receive buffer at the server caps the upload's window: ~13 Mbit/s at 20 ms.
    let o = lab.exec(
        "server",
        &[
            "sh",
            "-c",
            "echo '4096 32768 32768' > /proc/sys/net/ipv4/tcp_rmem",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let _srv = server(&lab);
    let (text, file) = test_in_lab(&lab, &["tcp_upload", "-l", "3", "--idle", "1"]);
    assert!(text.contains("did not build a queue"), "{text}");
    let labr = file.metadata.lab.expect("metadata.lab");
    let up = dir(&labr, DirectionRecord::Up);
    assert_eq!(up.drops.overflow + up.drops.aqm, 0, "{up:?}");
    let u = labr
        .phases
        .iter()
        .find(|p| p.phase == "loaded" && p.direction == DirectionRecord::Up)
        .and_then(|p| p.utilisation)
        .expect("utilisation");
    assert!(u < 0.3, "window-limited flow used {u} of the link");
}

/// issue 9 deliverable 6: ECN per test on a running lab. `test --ecn on` makes the
/// flows negotiate ECN, the emulator's CE marks are counted per stage and shown, and the
/// host's setting is restored afterwards; `lab set --ecn` changes it for good.
#[test]
fn ecn_is_switched_on_a_running_lab_and_marks_are_counted() {
    if !tier::root("ecn_is_switched_on_a_running_lab_and_marks_are_counted") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "ecn",
        &["--rate", "20mbit", "--delay", "10ms", "--qdisc", "fq_codel"],
    );
    let _srv = server(&lab);
    let ecn_of = |host: &str| {
        stdout(&lab.exec(host, &["cat", "/proc/sys/net/ipv4/tcp_ecn"]))
            .trim()
            .to_string()
    };
    assert_eq!(ecn_of("client"), "2", "kernel default");
    let (text, file) = test_in_lab(
        &lab,
        &["tcp_upload", "-l", "3", "--idle", "1", "--ecn", "on"],
    );
    let file_copy = file.clone();
    let labr = file.metadata.lab.expect("metadata.lab");
    assert_eq!(labr.ecn.get("client").map(String::as_str), Some("1"));
    let up = dir(&labr, DirectionRecord::Up);
    assert!(up.ce_marked > 0, "no CE marks with ECN on: {up:?}");
    assert_eq!(
        up.drops.aqm, 0,
        "the AQM dropped ECN-capable packets: {up:?}"
    );
    assert!(
        text.contains(&format!("CE-marked {}", up.ce_marked)),
        "{text}"
    );
    assert_eq!(ecn_of("client"), "2", "restored after the run");
    // The report shows the same counts.
    let tmp = tempdir();
    let dir = tmp.path().join("rep");
    std::fs::create_dir_all(&dir).unwrap();
    let (json, html) = (dir.join("run.json"), dir.join("run.html"));
    bloatlab_results::save(&json, &file_copy).expect("save");
    let o = bl(&[
        "report",
        &json.display().to_string(),
        "--html",
        &html.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("lab emulator") && page.contains(&format!("CE-marked {}", up.ce_marked)),
        "the report lacks the lab's counts"
    );

    let o = bl(&["lab", "set", &lab.name, "--ecn", "client=on"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(ecn_of("client"), "1");
    let st = lab.status_typed().expect("status");
    assert_eq!(st.spec.ecn_hosts, ["client"]);
    assert!(stdout(&bl(&["lab", "status", &lab.name])).contains("TCP ECN on: client"));
    let o = bl(&["lab", "set", &lab.name, "--ecn", "nobody=on"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("nobody"), "{}", stderr(&o));
}

/// issue 9 deliverable 9: probes every 10 ms on a 737 kbit/s uplink take a large share of
/// it; the run says so (and not for the fast downlink).
#[test]
fn probes_taking_over_5_percent_of_a_slow_uplink_are_flagged() {
    if !tier::root("probes_taking_over_5_percent_of_a_slow_uplink_are_flagged") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "prb",
        &[
            "--up-rate",
            "737kbit",
            "--down-rate",
            "20mbit",
            "--delay",
            "5ms",
        ],
    );
    let _srv = server(&lab);
    let (text, _) = test_in_lab(&lab, &["ping", "-l", "2"]);
    assert!(text.contains("take 23 % of the up link"), "{text}");
    assert!(!text.contains("of the down link"), "{text}");
}

/// `--ecn` outside a lab is refused before anything runs (exit 2, naming the option).
#[test]
fn ecn_outside_a_lab_is_a_usage_error() {
    let o = std::process::Command::new(BIN)
        .args(["test", "rrul", "127.0.0.1", "--ecn", "on", "-l", "1"])
        .env_remove("BLOATLAB_LAB")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--ecn needs a lab"), "{}", stderr(&o));
}

/// The `up N` total of the summary's throughput table (Mbit/s).
fn up_total(text: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix("up ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no up total in:\n{text}"))
}

/// issue 18 deliverable 8: `test tcp_nup --flows 8` printed 19.90 Mbit/s up on a
/// 20 Mbit/s link, more than its 19.31 Mbit/s of payload (1448 of every 1500 bytes):
/// the flows end with an RST, so no server report is relayed, and the sender's written
/// bytes were counted. Every upload figure is what the receiver acknowledged, below the
/// payload capacity, and the link was still used (no undercount either).
#[test]
fn upload_throughput_is_what_arrived_below_the_links_payload_capacity() {
    if !tier::root("upload_throughput_is_what_arrived_below_the_links_payload_capacity") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up("arr", &["--rate", "20mbit", "--delay", "10ms"]);
    let _srv = server(&lab);
    let (text, file) = test_in_lab(&lab, &["tcp_nup", "--flows", "8", "-l", "3", "--idle", "1"]);
    let payload_mbit = 20.0 * 1448.0 / 1500.0;
    let up = up_total(&text);
    assert!(
        up <= payload_mbit && up > 0.8 * payload_mbit,
        "up {up} Mbit/s on a link carrying {payload_mbit:.2} Mbit/s of payload:\n{text}"
    );
    // The samples are counts of what arrived, not multiples of the 128 KiB writes.
    let odd = file
        .raw
        .throughput
        .iter()
        .flat_map(|f| &f.samples)
        .filter(|s| s.bytes % 131_072 != 0)
        .count();
    assert!(odd > 0, "every sample is a whole number of writes");
}

/// issue 18 deliverable 9: through a chain (`--up-stage`) the summary and the results
/// file said rate -, qdisc fifo, no stages, and the probes' share was not checked. Now
/// the direction's rate and qdisc are its bottleneck's, each stage and its counters are
/// recorded and printed, the link's use is not summed over stages, and the probes' share
/// counts the shaper's ATM cells: UDP 108 B + 44 = 4 cells (212 B), ICMP 100 B + 44 =
/// 3 cells (159 B), at 100 Hz 296.8 kbit/s = 15 % of 2 Mbit/s (IP bytes alone: 8 %).
#[test]
fn a_chained_lab_is_described_with_its_stages_and_its_bottleneck() {
    if !tier::root("a_chained_lab_is_described_with_its_stages_and_its_bottleneck") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "chr",
        &[
            "--delay",
            "10ms",
            "--up-stage",
            "name=shaper rate=2mbit qdisc=fq_codel overhead=44 framing=atm",
            "--up-stage",
            "name=modem rate=3mbit qdisc=fifo limit=50kb",
            "--down-rate",
            "20mbit",
        ],
    );
    let _srv = server(&lab);
    let (text, file) = test_in_lab(&lab, &["tcp_upload", "-l", "3", "--idle", "1"]);
    let link = file.metadata.link.as_ref().expect("metadata.link");
    assert_eq!(link.up.rate_bps, Some(2_000_000), "{link:?}");
    assert_eq!(
        link.up.qdisc.as_ref().map(|q| q.kind.as_str()),
        Some("fq_codel")
    );
    assert_eq!(link.up.framing.as_deref(), Some("atm"));
    assert_eq!(link.up.delay_ns, Some(10_000_000));
    let names: Vec<&str> = link.up.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["shaper", "modem", "path"]);
    let labr = file.metadata.lab.as_ref().expect("metadata.lab");
    let up = dir(labr, DirectionRecord::Up);
    assert_eq!(up.link.rate_bps, Some(2_000_000));
    let counted: Vec<&str> = up.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(counted, ["shaper", "modem", "path"]);
    assert!(up.stages[0].dequeued_packets > 300, "{up:?}");
    assert_eq!(
        up.dequeued_packets, up.stages[2].dequeued_packets,
        "delivered is the last stage's, not the sum"
    );
    let used = labr
        .phases
        .iter()
        .filter(|p| p.phase == "loaded" && p.direction == DirectionRecord::Up)
        .find_map(|p| p.utilisation)
        .expect("utilisation of the chain");
    assert!(used > 0.7 && used < 1.1, "used {used} of the bottleneck");
    assert!(
        text.contains("up   rate 2.000 Mbit/s") && text.contains("stage shaper"),
        "{text}"
    );
    assert!(text.contains("take 15 % of the up link"), "{text}");
}
