//! `bloatlab test rpm` on loopback: the draft's responsiveness run (`bloatlab rpm`) as the
//! loaded phase's load against `bloatlab server -p P --https H` (the iperf service answers
//! the UDP probes, the HTTPS service the draft's client), and both RPMs in the results file,
//! the summary and the report, each under its own name; and the failures that must not
//! pass for a result: no HTTP service there, a certificate the test does not trust.
//! The draft's physics through a lab is rpm_client.rs's; `bloatlab test rpm` in a lab is the last test here.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bloatlab_results::schema::{DelayKindRecord, PhaseKindRecord};
use bloatlab_testkit::tier;

use crate::harness::{
    BIN, Listen, Proc, free_port, https_url_and_fingerprint, load, stderr, stdout, tempdir,
};

/// `bloatlab server -p PORT --https 0 -B 127.0.0.1`: the guard, its HTTPS port and the
/// certificate's fingerprint, once both services listen.
fn server(port: u16) -> (Proc, u16, String) {
    let p = port.to_string();
    let srv = Proc::bloatlab(&["server", "-p", &p, "--https", "0", "-B", "127.0.0.1"]);
    srv.wait_listening(port, Listen::Both);
    let (url, fp) = https_url_and_fingerprint(&srv);
    let https = url
        .strip_prefix("https://127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no HTTPS port in {url}"));
    (srv, https, fp)
}

fn test(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["test", "rpm", "127.0.0.1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run bloatlab test rpm")
}

#[test]
fn rpm_test_reports_the_drafts_rpm_beside_the_probe_rpm() {
    // ICMP probes, as every test's.
    if !tier::root("rpm_test_reports_the_drafts_rpm_beside_the_probe_rpm") {
        return;
    }
    let _load = load::shared();
    let port = free_port();
    let (_srv, https, fp) = server(port);
    let dir = tempdir();
    let file = dir.path().join("rpm.json");
    let (p, h) = (port.to_string(), https.to_string());
    let o = test(&[
        "-p",
        &p,
        "--rpm-port",
        &h,
        "--fingerprint",
        &fp,
        "--rpm-interval",
        "1s",
        "-l",
        "10",
        "--idle",
        "1",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "bloatlab test rpm failed:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let f = bloatlab_results::load(&file).expect("the results file loads");
    assert_eq!(f.metadata.test, "rpm");
    assert!(!f.metadata.interrupted);
    let rec = f.metadata.rpm.as_ref().expect("metadata.rpm");
    assert_eq!(
        rec.config_url,
        format!("https://127.0.0.1:{https}/.well-known/nq")
    );
    assert_eq!(
        (rec.protocol.as_str(), rec.mode.as_str()),
        ("h2", "concurrent")
    );
    let r = &rec.responsiveness[..];
    assert_eq!(r.len(), 1, "{r:?}");
    let draft = r[0].rpm.expect("the draft's RPM");
    // Loopback: somewhere between a 100 ms and a 10 us mean round trip.
    assert!((600.0..6_000_000.0).contains(&draft), "{r:?}");
    assert!(r[0].p90_rpm.is_some_and(|p| p > 0.0), "{r:?}");
    assert!(r[0].band.is_some() && r[0].trimmed.is_some(), "{r:?}");
    assert_eq!(r[0].phase.as_deref(), Some("loaded"));
    for c in [&rec.download, &rec.upload] {
        let c = c.as_ref().expect("both directions' capacity");
        assert!(c.capacity_bps > 1_000_000, "{c:?}");
    }
    // The loaded phase is the draft's run: after the idle second, within the plan's 10 s
    // (plus the child's start), and the recovery phase follows it.
    let ph: Vec<_> = f
        .raw
        .phases
        .iter()
        .map(|p| (p.kind, p.name.as_str(), p.start_ns, p.end_ns))
        .collect();
    assert_eq!(ph.len(), 3, "{ph:?}");
    assert_eq!((ph[0].0, ph[0].3), (PhaseKindRecord::Idle, 1_000_000_000));
    assert_eq!((ph[1].0, ph[1].1), (PhaseKindRecord::Loaded, "loaded"));
    assert!(
        ph[1].2 >= 1_000_000_000 && ph[1].3 <= 11_500_000_000,
        "{ph:?}"
    );
    assert!(ph[1].3 - ph[1].2 > 3_000_000_000, "{ph:?}");
    assert_eq!((ph[2].0, ph[2].2), (PhaseKindRecord::Recovery, ph[1].3));
    // The probes ran through every phase; their probe RPM in the loaded phase is there.
    let d = f.derived.as_ref().expect("derived");
    let probe_rpm = |series: &str| {
        d.latency
            .iter()
            .find(|s| s.name == series && s.kind == DelayKindRecord::Rtt)
            .and_then(|s| s.phases.iter().find(|p| p.phase == "loaded"))
            .and_then(|p| p.probe_rpm)
    };
    let udp = probe_rpm("udp_be").expect("udp_be's probe RPM in the loaded phase");
    assert!(udp > 0.0 && probe_rpm("icmp").is_some_and(|v| v > 0.0));
    // The summary names both, side by side.
    let text = stdout(&o);
    assert!(
        text.contains("RPM (draft) = draft-ietf-ippm-responsiveness"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("phase loaded: RPM (draft)"))
        .unwrap_or_else(|| panic!("no side-by-side line:\n{text}"));
    assert!(
        line.contains(&format!("RPM (draft) {draft:.0} ("))
            && line.contains(&format!("probe RPM udp_be {udp:.0}")),
        "{line}"
    );
    // The report shows them too (text and HTML).
    let rep = Command::new(BIN)
        .args(["report", file.to_str().unwrap()])
        .output()
        .unwrap();
    let text = stdout(&rep);
    assert!(rep.status.success(), "{}", stderr(&rep));
    assert!(
        text.contains("concurrent RPM (draft, trimmed mean)"),
        "{text}"
    );
    assert!(
        text.contains("concurrent probe RPM (phase loaded, UDP/ICMP probes)"),
        "{text}"
    );
    let html = dir.path().join("rpm.html");
    let rep = Command::new(BIN)
        .args(["report", file.to_str().unwrap(), "--html"])
        .arg(&html)
        .output()
        .unwrap();
    assert!(rep.status.success(), "{}", stderr(&rep));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("RPM (draft, trimmed mean)") && page.contains("probe RPM (phase loaded"));
}

/// The draft's run failing is the test failing: exit 1 with the client's words, early
/// (the drive stops when the load is gone), and no results file or journal left.
#[test]
fn a_failed_rpm_run_fails_the_test_and_writes_nothing() {
    if !tier::root("a_failed_rpm_run_fails_the_test_and_writes_nothing") {
        return;
    }
    let _load = load::shared();
    let port = free_port();
    let (_srv, https, _fp) = server(port);
    let dir = tempdir();
    let p = port.to_string();
    // No HTTP service on that port; then the server's self-signed certificate, not
    // trusted by the system's CAs.
    let nothing = free_port().to_string();
    let https = https.to_string();
    for (rpm_port, why) in [(&nothing, "onnection refused"), (&https, "certificate")] {
        let file = dir.path().join(format!("rpm-{rpm_port}.json"));
        let t0 = Instant::now();
        let o = test(&[
            "-p",
            &p,
            "--rpm-port",
            rpm_port,
            "-l",
            "30",
            "--idle",
            "1",
            "-o",
            file.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}{}", stdout(&o));
        assert!(
            err.contains(&format!(
                "the draft's responsiveness run (bloatlab rpm https://127.0.0.1:{rpm_port}/.well-known/nq) failed: "
            )) && err.contains(why),
            "{err}"
        );
        // Not the 30 s loaded phase: the run stopped when its load failed.
        assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
        assert!(!file.exists(), "a results file was written");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
}

/// `bloatlab test rpm` through a lab (20 Mbit/s, 40 ms each way, FQ-CoDel): physics
/// bounds both RPMs (an 80 ms base RTT allows at most 750), the draft's capacity is
/// the link's, the results carry the lab, and the two RPMs differ the way the docs
/// say they must through an AQM that isolates flows: the UDP probes get a queue of
/// their own and stay near the base RTT, while the draft's self probes ride the load
/// connections (docs/rpm.md). Measured (one run): draft 391 RPM, probe RPM 744,
/// download 20.43 Mbit/s.
#[test]
fn rpm_test_in_a_lab_is_bounded_by_physics_and_shows_both_rpms_apart() {
    use crate::harness::lab::LabGuard;
    if !tier::root("rpm_test_in_a_lab_is_bounded_by_physics_and_shows_both_rpms_apart") {
        return;
    }
    // Capacity within 10 %: timing-sensitive, alone.
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "trpm",
        &[
            "--rate", "20mbit", "--delay", "40ms", "--qdisc", "fq_codel", "--limit", "1000p",
        ],
    );
    let _srv = lab.serve(
        "server",
        &[
            BIN,
            "server",
            "-B",
            "10.77.0.2",
            "-p",
            "5001",
            "--https",
            "8443",
        ],
        Listen::Tcp,
        8443,
    );
    let dir = tempdir();
    let file = dir.path().join("rpm-lab.json");
    let o = lab.exec(
        "client",
        &[
            BIN,
            "test",
            "rpm",
            "10.77.0.2",
            "-p",
            "5001",
            "--rpm-port",
            "8443",
            "--insecure",
            "--rpm-interval",
            "1s",
            "-l",
            "20",
            "--idle",
            "2",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert!(
        o.status.success(),
        "bloatlab test rpm in a lab failed:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let f = bloatlab_results::load(&file).expect("the results file loads");
    assert!(f.metadata.lab.is_some(), "no lab context in the results");
    let rec = f.metadata.rpm.as_ref().expect("metadata.rpm");
    let draft = rec.responsiveness[0].rpm.expect("the draft's RPM");
    let cap = rec.download.as_ref().expect("download capacity");
    let down = cap.capacity_bps as f64;
    // What the capacity was taken from, for the record of runs (docs/rpm.md).
    eprintln!(
        "download saturated at interval {:?}, moving averages (Mbit/s) {:?}; upload {:?}",
        cap.saturated_at_interval,
        cap.moving_averages_bps
            .iter()
            .map(|&b| (b as f64 / 1e4).round() / 1e2)
            .collect::<Vec<_>>(),
        rec.upload
            .as_ref()
            .map(|u| (u.capacity_bps as f64 / 1e6, u.saturated_at_interval)),
    );
    // What the emulator delivered per phase and direction, Mbit/s of IP packets.
    for p in &f.metadata.lab.as_ref().expect("lab").phases {
        let secs = (p.end_ns.saturating_sub(p.start_ns) as f64 / 1e9).max(1e-9);
        eprintln!(
            "lab phase {} {:?}: {:.2} Mbit/s delivered, utilisation {:?}",
            p.phase,
            p.direction,
            p.dequeued_bytes as f64 * 8.0 / secs / 1e6,
            p.utilisation
        );
    }
    let d = f.derived.as_ref().expect("derived");
    let udp = d
        .latency
        .iter()
        .find(|s| s.name == "udp_be" && s.kind == DelayKindRecord::Rtt)
        .and_then(|s| s.phases.iter().find(|p| p.phase == "loaded"))
        .and_then(|p| p.probe_rpm)
        .expect("udp_be's probe RPM in the loaded phase");
    eprintln!(
        "draft RPM {draft:.0}, probe RPM {udp:.0}, download {:.2} Mbit/s",
        down / 1e6
    );
    for (what, rpm) in [("draft", draft), ("probe", udp)] {
        assert!(
            rpm > 0.0 && rpm <= 750.0,
            "{what} RPM {rpm} above what 80 ms allows"
        );
    }
    // 20 Mbit/s of 1500-byte packets carrying 1448 bytes of payload.
    let goodput = 20e6 * 1448.0 / 1500.0;
    assert!(
        (down / goodput - 1.0).abs() <= 0.10,
        "download capacity {:.2} Mbit/s, link goodput {:.2}",
        down / 1e6,
        goodput / 1e6
    );
    // The flow-isolating AQM keeps the probes' own queue short: their RPM is at least
    // 1.3x the draft's, whose self probes wait behind the load connections' bytes.
    assert!(
        udp >= 1.3 * draft && udp >= 500.0,
        "probe RPM {udp:.0}, draft RPM {draft:.0}"
    );
}
