//! `bloatlab ping` end to end on loopback: the standalone responder (`ping --serve`)
//! in one process, the client in another. Every responder process is killed by PID on
//! drop; each run sends 50 probes at 10 ms (about half a second of traffic).

use bloatlab_testkit::tier;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{BIN, Proc, READY};

fn bin() -> &'static str {
    BIN
}

/// `bloatlab ping --serve 127.0.0.1:0`, killed on drop, and the port it bound.
struct Responder {
    _proc: Proc,
    port: u16,
}

impl Responder {
    fn start() -> Responder {
        let proc = Proc::bloatlab(&["ping", "--serve", "127.0.0.1:0"]);
        // Ready once it prints "bloatlab probe responder listening on 127.0.0.1:PORT (UDP)".
        let out = proc.wait_out("the responder's address", READY, |s| s.contains('\n'));
        let line = out.lines().next().unwrap_or_default();
        let port = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("127.0.0.1:"))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Responder { _proc: proc, port }
    }
}

fn ping(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("ping")
        .args(args)
        .output()
        .expect("run bloatlab ping")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn ping_loopback_text_summary() {
    let r = Responder::start();
    let port = r.port.to_string();
    let o = ping(&[
        "127.0.0.1",
        "-p",
        &port,
        "-c",
        "50",
        "--interval",
        "10ms",
        "-v",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("50 sent, 50 received, 0.0% loss"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("seq=")).count(),
        50,
        "{out}"
    );
    assert!(out.contains("clock: shared"), "{out}");
    for row in ["rtt ", "up ", "down "] {
        assert!(
            out.lines().any(|l| l.starts_with(row)),
            "no {row} row in {out}"
        );
    }
}

fn ns(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn ping_loopback_json_has_exact_one_way_delays() {
    let r = Responder::start();
    let port = r.port.to_string();
    let o = ping(&[
        "127.0.0.1",
        "-p",
        &port,
        "-c",
        "50",
        "--interval",
        "10ms",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "stderr:\n{err}");
    let doc: Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    assert_eq!(doc["format"], "bloatlab-results");
    assert_eq!(doc["metadata"]["test"], "ping");
    let probe = &doc["metadata"]["probe"];
    // One clock on both ends: the one-way delays are timestamp differences, nothing estimated.
    assert_eq!(probe["clock"]["shared"], true);
    assert_eq!(probe["clock"]["method"], "shared");
    assert_eq!(probe["clock"]["offset_ns"], 0);
    assert_eq!(probe["clock"]["samples_used"], 0);
    assert_eq!(probe["summary"]["sent"], 50);
    assert_eq!(probe["summary"]["received"], 50);
    assert_eq!(probe["summary"]["lost_up"], 0);
    assert_eq!(probe["summary"]["lost_down"], 0);
    assert_eq!(doc["metadata"]["hosts"]["remote"]["address"], "127.0.0.1");
    assert_eq!(
        doc["metadata"]["hosts"]["remote"]["role"],
        "probe_responder"
    );
    // The suite reads this very output (bloatlab test's probe runners).
    let run = bloatlab_suite::collect::parse_ping(out.as_bytes()).expect("the suite reads it");
    assert_eq!(run.interval, Some(Duration::from_millis(10)));
    assert_eq!(run.series.len(), 3);
    assert!(!run.interrupted);
    let latency = doc["raw"]["latency"].as_array().unwrap();
    let series = |kind: &str| -> Vec<Value> {
        latency
            .iter()
            .find(|s| s["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} series"))["samples"]
            .as_array()
            .unwrap()
            .clone()
    };
    let (rtt, up, down) = (series("rtt"), series("owd_up"), series("owd_down"));
    assert_eq!((rtt.len(), up.len(), down.len()), (50, 50, 50));
    let mut last_sent = -1;
    for i in 0..50 {
        let sent = ns(&rtt[i]["sent_ns"]);
        assert!(sent > last_sent, "send times increase");
        last_sent = sent;
        let (rt, u, d) = (
            ns(&rtt[i]["delay_ns"]),
            ns(&up[i]["delay_ns"]),
            ns(&down[i]["delay_ns"]),
        );
        assert!(rt > 0 && rt < 1_000_000_000, "rtt {rt} ns");
        // Strictly positive: a datagram takes time to cross loopback, so a zero or negative
        // one-way delay would mean a clamped or offset-corrected value, not a measured one.
        assert!(u > 0 && d > 0, "probe {i}: up {u} ns, down {d} ns");
        // On one clock up + down is the RTT exactly: the RTT leaves out the responder's
        // turnaround (kernel receive stamp to send), as the one-way delays do.
        assert_eq!(u + d, rt, "up {u} + down {d} against rtt {rt}");
    }
    // isochronous: probe 49 is due 490 ms after the start (later only if slots were skipped)
    assert!(
        (490_000_000..10_000_000_000).contains(&last_sent),
        "{last_sent}"
    );
}

#[test]
fn ping_icmp_localhost() {
    if !tier::root("ping_icmp_localhost") {
        return;
    }
    let o = ping(&["127.0.0.1", "--icmp", "-c", "20", "--interval", "10ms"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("ICMP echo"), "{out}");
    assert!(out.contains("20 sent, 20 received"), "{out}");
    assert!(
        !out.lines().any(|l| l.starts_with("up ")),
        "ICMP has no one-way rows: {out}"
    );
}

#[test]
fn ping_without_responder_says_so() {
    // A UDP port nobody listens on (bound, then released).
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let start = Instant::now();
    let o = ping(&["127.0.0.1", "-p", &port, "-c", "5"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "127.0.0.1:{port} did not answer bloatlab probes (is `bloatlab server` running there?)"
        )),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn ping_invalid_host_is_a_clear_error() {
    let o = ping(&["no such host!", "-c", "1"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot resolve `no such host!`"), "{err}");
}

#[test]
fn ping_bad_size_is_a_usage_error() {
    let o = ping(&["127.0.0.1", "-c", "1", "--size", "10"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("probe size 10 bytes"), "{err}");
}

#[test]
fn responder_survives_garbage_then_answers() {
    let r = Responder::start();
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for len in [0usize, 1, 79, 80, 81, 1400] {
        sock.send_to(&vec![0xa5; len], ("127.0.0.1", r.port))
            .unwrap();
    }
    let port = r.port.to_string();
    let o = ping(&["127.0.0.1", "-p", &port, "-c", "10", "--interval", "10ms"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("10 sent, 10 received"), "{out}");
}

/// A run that mostly failed exits 1 after its report: the responder dies
/// 0.2 s into a 1 s run (a dead link or emulator), so ~80 % are lost.
#[test]
fn ping_exits_1_when_most_probes_are_lost() {
    let run = |extra: &[&str]| {
        let r = Responder::start();
        let port = r.port.to_string();
        let mut args = vec![
            "127.0.0.1",
            "-p",
            &port,
            "-c",
            "50",
            "-i",
            "20ms",
            "--timeout",
            "0.3",
        ];
        args.extend_from_slice(extra);
        let child = Command::new(bin())
            .arg("ping")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run bloatlab ping");
        std::thread::sleep(Duration::from_millis(200));
        drop(r);
        child.wait_with_output().unwrap()
    };
    let o = run(&[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("more than --max-loss 50%"), "{err}");
    assert!(out.contains("probe statistics"), "{out}");
    // Allowed to lose them all: the report stands.
    let o = run(&["--max-loss", "100"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
}
