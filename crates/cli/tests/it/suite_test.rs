//! `bloatlab test` end to end on loopback with short lengths (`-l 2`, 1 s idle).
//!
//! Each test starts its own `bloatlab server` on a free port and kills it by PID when it
//! ends.

use bloatlab_testkit::tier;
use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bloatlab_results::schema::{DelayKindRecord, DirectionRecord, PhaseKindRecord};

use bloatlab_results::ResultsFile;
use std::path::Path;

use crate::harness::{BIN, Listen, Proc, free_port, tempdir};

fn bin() -> &'static str {
    BIN
}

/// `bloatlab server` on `port` (TCP flows, and UDP latency probes on the same port).
fn server(port: u16) -> Proc {
    server_with(port, &[])
}

/// `bloatlab server -p PORT ARGS`, accepting flows and probes.
fn server_with(port: u16, args: &[&str]) -> Proc {
    let p = port.to_string();
    let srv = Proc::bloatlab(&[&["server", "-p", &p][..], args].concat());
    srv.wait_listening(port, Listen::Both);
    srv
}

fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The body the tests below share: `bloatlab test NAME 127.0.0.1 -p PORT ARGS -o
/// DIR/NAME.json` against the server on `port`. Asserts it exited 0 (naming the test, its
/// stderr and stdout) and returns its stdout (the summary, or the document with `--json`)
/// and the results file it wrote.
fn run_test_on(port: u16, dir: &Path, name: &str, args: &[&str]) -> (String, ResultsFile) {
    let file = dir.join(format!("{name}.json"));
    let (p, f) = (port.to_string(), file.display().to_string());
    let out = run(&[&["test", name, "127.0.0.1", "-p", &p, "-o", &f][..], args].concat());
    let so = text(&out.stdout);
    assert!(
        out.status.success(),
        "{name} {args:?}: stderr: {}\nstdout: {so}",
        text(&out.stderr)
    );
    let f = bloatlab_results::load(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(f.metadata.test, name);
    (so, f)
}

#[test]
fn rrul_writes_a_results_file_with_8_flows_and_every_probe_series() {
    if !tier::root("rrul_writes_a_results_file_with_8_flows_and_every_probe_series") {
        return;
    }
    let port = free_port();
    let _srv = server(port);
    let tmp = tempdir();
    let (printed, f) = run_test_on(
        port,
        tmp.path(),
        "rrul",
        &["-l", "2", "--idle", "1", "--json"],
    );
    // --json prints the same document that was saved.
    let printed =
        bloatlab_results::from_slice(printed.as_bytes()).expect("stdout is a results document");
    assert_eq!(printed.raw, f.raw);
    assert!(!f.metadata.interrupted);
    assert!(f.metadata.kernel.release.is_some());
    assert_eq!(
        f.metadata.hosts.remote.address.as_deref(),
        Some("127.0.0.1")
    );
    assert!(f.metadata.command_line.iter().any(|a| a == "rrul"));

    let phases: Vec<(PhaseKindRecord, u64, u64)> = f
        .raw
        .phases
        .iter()
        .map(|p| (p.kind, p.start_ns, p.end_ns))
        .collect();
    let s = 1_000_000_000;
    assert_eq!(
        phases,
        [
            (PhaseKindRecord::Idle, 0, s),
            (PhaseKindRecord::Loaded, s, 3 * s),
            (PhaseKindRecord::Recovery, 3 * s, 4 * s)
        ]
    );

    assert_eq!(f.raw.throughput.len(), 8, "4 up + 4 down flows");
    let ups = f
        .raw
        .throughput
        .iter()
        .filter(|t| t.direction == DirectionRecord::Up)
        .count();
    assert_eq!(ups, 4);
    for flow in &f.raw.throughput {
        let bytes: u64 = flow.samples.iter().map(|x| x.bytes).sum();
        assert!(bytes > 0, "{} moved no bytes", flow.name);
        // Flows run in the loaded phase: they start after 0.9 s and end by 4 s.
        let first = flow.samples.iter().map(|x| x.start_ns).min().unwrap();
        let last = flow.samples.iter().map(|x| x.end_ns).max().unwrap();
        assert!(
            first >= 9 * s / 10 && last <= 4 * s,
            "{}: {first}..{last}",
            flow.name
        );
        assert!(
            flow.samples.len() >= 5,
            "{}: 0.2 s samples over 2 s",
            flow.name
        );
    }
    let names: Vec<&str> = f.raw.throughput.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"tcp_up_ef") && names.contains(&"tcp_down_bk"),
        "{names:?}"
    );

    for probe in ["udp_ef", "udp_bk", "udp_be"] {
        let rtt = f
            .raw
            .latency
            .iter()
            .find(|l| l.name == probe && l.kind == DelayKindRecord::Rtt)
            .unwrap_or_else(|| panic!("no {probe} RTT series"));
        // 4 s at 100 Hz is 400 probes; allow a loaded 2-core machine to skip many.
        assert!(
            rtt.samples.len() >= 100,
            "{probe}: {} probes",
            rtt.samples.len()
        );
        let received = rtt.samples.iter().filter(|x| x.delay_ns.is_some()).count();
        assert!(
            received * 10 >= rtt.samples.len() * 9,
            "{probe}: {received} answered"
        );
        assert!(rtt.samples.iter().all(|x| x.sent_ns < 6 * s));
    }
    // ICMP needs CAP_NET_RAW (or ping_group_range); CI runs as root.
    assert!(
        f.raw.latency.iter().any(|l| l.name == "icmp"),
        "no icmp series"
    );
    let d = f.derived.as_ref().expect("derived section");
    let loaded = d.throughput.iter().find(|t| t.phase == "loaded").unwrap();
    assert!(loaded.up_bps > 0 && loaded.down_bps > 0);
    sample_has_the_shape_of(&f);
}

/// `bloatlab_testkit::sample` (the fixture of the report tests) against a real run: the
/// same series identities (name and kind) and the same metadata fields known or unknown,
/// so the report tests cannot pass on a shape no producer writes.
fn sample_has_the_shape_of(real: &bloatlab_results::ResultsFile) {
    use bloatlab_results::schema::HostRecord;
    let sample = bloatlab_testkit::sample::rrul_like(bloatlab_testkit::sample::Queue::DeepFifo);
    let ids = |f: &bloatlab_results::ResultsFile| -> Vec<(String, DelayKindRecord)> {
        f.raw
            .latency
            .iter()
            .map(|l| (l.name.clone(), l.kind))
            .collect()
    };
    let real_ids = ids(real);
    for id in ids(&sample) {
        assert!(
            real_ids.contains(&id),
            "the sample has {id:?}, a real run does not"
        );
    }
    for (name, _) in ids(&sample) {
        // Every kind a real run has under that name, the sample has too.
        let kinds = |f| -> Vec<DelayKindRecord> {
            ids(f)
                .into_iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, k)| k)
                .collect()
        };
        assert_eq!(kinds(&sample), kinds(real), "{name}");
    }
    let known = |h: &HostRecord| {
        (
            h.address.is_some(),
            h.name.is_some(),
            h.port.is_some(),
            h.role,
            h.software.is_some(),
        )
    };
    let (s, r) = (&sample.metadata, &real.metadata);
    assert_eq!(known(&s.hosts.remote), known(&r.hosts.remote));
    assert_eq!(known(&s.hosts.local), known(&r.hosts.local));
    assert_eq!(s.kernel.sysname, r.kernel.sysname);
    assert!(r.kernel.release.is_some() && s.kernel.release.is_some());
}

#[test]
fn summary_voip_mos_and_pulses() {
    let port = free_port();
    let _srv = server(port);
    let tmp = tempdir();
    let (so, f) = run_test_on(port, tmp.path(), "voip", &["-l", "2", "--idle", "1"]);
    for want in [
        "Latency, round trip",
        "voip",
        "loaded",
        "VoIP idle",
        "MOS",
        "Bufferbloat grade",
    ] {
        assert!(so.contains(want), "missing {want:?} in:\n{so}");
    }
    assert!(
        f.raw
            .latency
            .iter()
            .any(|l| l.name == "voip" && l.kind == DelayKindRecord::OwdUp)
    );

    let (so, f) = run_test_on(
        port,
        tmp.path(),
        "one_vs_pulses",
        &[
            "-l",
            "2",
            "--idle",
            "0",
            "--pulses",
            "3",
            "--pulse-size",
            "100K",
        ],
    );
    assert!(so.contains("Pulses: 3 completed"), "{so}");
    let pulses = f
        .raw
        .throughput
        .iter()
        .find(|t| t.name == "tcp_up_pulses")
        .unwrap();
    let bytes: u64 = pulses.samples.iter().map(|x| x.bytes).sum();
    // 3 x 100 KiB; iperf 2 counts the test header in -n, so allow a little less.
    assert!(
        (3 * 100 * 1024 - 3 * 200..=3 * 100 * 1024).contains(&bytes),
        "{bytes}"
    );
}

/// `rrul46` needs an address of each family, settled before any traffic:
/// without one it exits 2 naming `--v6`; `--v6` on a single-family test and a
/// missing HOST outside a lab are usage errors too. (No server runs here: a
/// run that got as far as traffic would exit 1.)
#[test]
fn rrul46_without_an_ipv6_address_and_misplaced_v6_exit_2() {
    let bare = |args: &[&str]| {
        let mut c = Command::new(bin());
        c.args(args);
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("BLOATLAB_")) {
            c.env_remove(k);
        }
        c.output().unwrap()
    };
    let o = bare(&["test", "rrul46", "127.0.0.1", "-l", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(e.contains("rrul46") && e.contains("--v6"), "{e}");
    let o = bare(&["test", "rrul46", "::1", "-l", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("IPv4 address"),
        "{}",
        text(&o.stderr)
    );
    // Both messages are wrapped in the source: a lost line continuation once put
    // 18 spaces in the middle of them.
    let no_runs_of_spaces = |e: &str| assert!(!e.contains("  "), "stray spaces in: {e:?}");
    let o = bare(&["test", "rrul", "127.0.0.1", "--v6", "::1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    no_runs_of_spaces(&text(&o.stderr));
    let o = bare(&["test", "rrul"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("BLOATLAB_SERVER"),
        "{}",
        text(&o.stderr)
    );
    no_runs_of_spaces(&text(&o.stderr));
}

#[test]
fn unknown_test_name_exits_2_and_lists_the_tests() {
    let out = run(&["test", "rrull", "127.0.0.1"]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(e.contains("unknown test \"rrull\""), "{e}");
    for t in [
        "rrul",
        "rrul_be",
        "tcp_nup",
        "speedtest",
        "one_vs_pulses",
        "voip",
    ] {
        assert!(e.contains(t), "{t} not listed in {e}");
    }
    let out = run(&["test", "--list"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("tcp_bidirectional"));
}

#[test]
fn no_server_is_a_clear_error() {
    let port = free_port();
    let p = port.to_string();
    let t0 = Instant::now();
    let out = run(&["test", "tcp_upload", "127.0.0.1", "-p", &p, "-l", "5"]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains(&format!("no server at 127.0.0.1:{port}")), "{e}");
    assert!(e.contains("refused"), "{e}");
    // Found by the pre-flight check, not after the 15 s run.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

#[test]
fn a_server_that_does_not_answer_probes_is_not_bloatlab() {
    // A TCP sink that swallows whatever it gets, as a non-bloatlab server would; no UDP.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut c = c;
                let mut buf = vec![0u8; 65536];
                while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    let p = port.to_string();
    let out = run(&["test", "rrul", "127.0.0.1", "-p", &p, "-l", "5"]);
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
    let e = text(&out.stderr);
    assert!(
        e.contains("did not answer any of bloatlab's UDP latency probes"),
        "{e}"
    );
    assert!(e.contains("not bloatlab"), "{e}");
}

#[test]
fn ctrl_c_saves_what_was_measured_and_exits_non_zero() {
    let port = free_port();
    let _srv = server(port);
    let tmp = tempdir();
    let dir = tmp.path().to_path_buf();
    let file = dir.join("cut.json");
    let p = port.to_string();
    let child = Command::new(bin())
        .args([
            "test",
            "tcp_upload",
            "127.0.0.1",
            "-p",
            &p,
            "-l",
            "20",
            "--idle",
            "1",
            "-o",
            file.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let _ = bloatlab_os::process::signal(child.id(), libc::SIGINT);
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "stopping took {:?}",
        t0.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("interrupted"),
        "{}",
        text(&out.stderr)
    );
    let f = bloatlab_results::load(&file).expect("the partial results load");
    assert!(f.metadata.interrupted);
    let end = f.raw.phases.last().unwrap().end_ns;
    assert!(
        end < 12_000_000_000,
        "phases cut where the run stopped, not at 22 s: {end}"
    );
    // What the runners measured before they stopped is kept: the client prints its
    // report on SIGINT (exit 130) and ping its summary, so both series have data.
    let kept = |name: &str| {
        f.raw
            .latency
            .iter()
            .any(|l| l.name == name && !l.samples.is_empty())
    };
    assert!(kept("udp_be"), "probe samples lost: {:?}", f.metadata.notes);
    assert!(
        f.raw
            .throughput
            .iter()
            .any(|t| t.name == "tcp_up_1" && !t.samples.is_empty()),
        "flow samples lost: {:?}",
        f.metadata.notes
    );
}

/// Every test in the catalogue not covered above runs end to end and writes a
/// results file with the flows its shape promises, each of which carried data,
/// and every probe series with samples.
#[test]
fn every_test_shape_runs_and_records_its_flows() {
    let port = free_port();
    let _srv = server(port);
    let tmp = tempdir();
    // (test, extra args, expected (up, down) flow counts)
    let cases: [(&str, &[&str], (usize, usize)); 8] = [
        ("ping", &[], (0, 0)),
        ("rrul_be", &[], (4, 4)),
        ("tcp_download", &[], (0, 1)),
        ("tcp_bidirectional", &[], (1, 1)),
        ("tcp_nup", &["--flows", "2"], (2, 0)),
        ("tcp_ndown", &["--flows", "2"], (0, 2)),
        ("speedtest", &["--flows", "2"], (2, 2)),
        ("one_vs_one", &[], (2, 0)),
    ];
    for (test, extra, (up, down)) in cases {
        let args = [&["-l", "2", "--idle", "0.5"][..], extra].concat();
        let (_, f) = run_test_on(port, tmp.path(), test, &args);
        let count = |d: DirectionRecord| {
            f.raw
                .throughput
                .iter()
                .filter(|t| t.direction == d)
                .inspect(|t| assert!(!t.samples.is_empty(), "{test}: flow {} has no data", t.name))
                .count()
        };
        assert_eq!(
            (count(DirectionRecord::Up), count(DirectionRecord::Down)),
            (up, down),
            "{test}: flows per direction"
        );
        assert!(!f.raw.latency.is_empty(), "{test}: no probe series");
        for l in &f.raw.latency {
            assert!(
                !l.samples.is_empty(),
                "{test}: probe series {} is empty",
                l.name
            );
        }
    }
}

/// `-o` into a directory that cannot be written is refused before the run
/// (exit 2, no traffic: there is not even a server here, which the run would
/// report with exit 1), not after the whole test with nothing saved.
#[test]
fn unwritable_output_is_refused_before_the_run() {
    let tmp = tempdir();
    let dir = tmp.path().to_path_buf();
    let file = dir.join("x.json");
    std::fs::write(&file, b"a file, not a directory").unwrap();
    let inside_a_file = file.join("y.json");
    for out in [
        dir.join("missing").join("x.json"),
        inside_a_file,
        dir.clone(),
    ] {
        let t0 = Instant::now();
        let o = run(&[
            "test",
            "tcp_upload",
            "127.0.0.1",
            "-p",
            "9",
            "-l",
            "2",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{out:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("checked before the run"),
            "{}",
            text(&o.stderr)
        );
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}

/// PIDs of the direct children of `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            v.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    v
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// SIGKILL of `bloatlab test` takes its runners (client, ping) with it.
#[test]
fn sigkill_of_test_leaves_no_runner_behind() {
    let port = free_port();
    let _srv = server(port);
    let tmp = tempdir();
    let dir = tmp.path().to_path_buf();
    let p = port.to_string();
    let file = dir.join("k.json");
    let mut child = Command::new(bin())
        .args([
            "test",
            "tcp_upload",
            "127.0.0.1",
            "-p",
            &p,
            "-l",
            "20",
            "--idle",
            "0",
            "-o",
            file.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Past the preflight (about 1 s): the 20 s flow client (`client ... -t 20`) is up.
    let is_client = |k: &u32| {
        std::fs::read(format!("/proc/{k}/cmdline")).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
            // `-t` is the flow's planned length (about 20 s; the preflight's is 1 s).
            let t = args
                .iter()
                .position(|a| *a == b"-t")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| std::str::from_utf8(v).ok()?.parse::<f64>().ok());
            args.contains(&&b"client"[..]) && t.is_some_and(|t| t >= 5.0)
        })
    };
    let t0 = Instant::now();
    let mut kids = Vec::new();
    let mut saw_client = false;
    while !saw_client && t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
        kids = children_of(child.id());
        saw_client = kids.iter().any(is_client);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(saw_client, "no flow client seen: {kids:?}");
    let left = runners_left_after(&kids, Duration::from_secs(5));
    assert!(left.is_empty(), "runners outlived bloatlab test: {left:?}");
}

/// Which of `kids` still run `within` after their parent died; those are SIGKILLed (by
/// PID: they are runners our test started).
fn runners_left_after(kids: &[u32], within: Duration) -> Vec<u32> {
    let t1 = Instant::now();
    while kids.iter().any(|&k| running(k)) && t1.elapsed() < within {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = kids.iter().copied().filter(|&k| running(k)).collect();
    for &k in &left {
        let _ = bloatlab_os::process::signal(k, libc::SIGKILL);
    }
    left
}

/// Runs `bloatlab test ARGS -o file` until its journal says it reached `phase` at least
/// `after` seconds into the run, SIGKILLs it, and waits (up to 10 s) for its runners,
/// which then report and exit. Returns the journal's path.
fn kill_in_phase(args: &[&str], file: &std::path::Path, phase: &str, after: f64) -> String {
    let journal = format!("{}.journal", file.display());
    let mut child = Command::new(bin())
        .args(args)
        .args(["-o", file.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reached = |j: &str| {
        j.lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|e| {
                e["event"] == "progress"
                    && e["phase"] == phase
                    && e["elapsed_ns"].as_f64().unwrap_or(0.0) >= after * 1e9
            })
        })
    };
    let t0 = Instant::now();
    let mut seen = false;
    let mut kids = Vec::new();
    while !seen && t0.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_millis(100));
        kids = children_of(child.id());
        seen = std::fs::read_to_string(&journal).is_ok_and(|j| reached(&j));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen, "the journal never reached {phase} at {after} s");
    let left = runners_left_after(&kids, Duration::from_secs(10));
    assert!(left.is_empty(), "runners outlived bloatlab test: {left:?}");
    journal
}

/// SIGKILL in the middle of the loaded phase: the journal and the runners' spool files
/// (they report on the SIGTERM their parent's death sends them) are recovered into a
/// results file marked incomplete, with the flow's and the probes' samples up to the
/// kill, that `bloatlab report` reads.
#[test]
fn a_sigkilled_run_is_recovered_from_its_journal() {
    if !tier::root("a_sigkilled_run_is_recovered_from_its_journal") {
        return;
    }
    let port = free_port();
    let _srv = server(port);
    let tmp = tempdir();
    let dir = tmp.path().to_path_buf();
    let file = dir.join("x.json");
    let p = port.to_string();
    let args = [
        "test",
        "tcp_upload",
        "127.0.0.1",
        "-p",
        &p,
        "-l",
        "30",
        "--idle",
        "1",
    ];
    let journal = kill_in_phase(&args, &file, "loaded", 3.0);
    assert!(!file.exists(), "killed before the save");
    // A new run cannot overwrite the journal of one that died.
    let o = run(&[&args[..], &["-o", file.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--recover"), "{}", text(&o.stderr));
    let o = run(&["test", "--recover", &journal]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("INCOMPLETE"),
        "{}",
        text(&o.stdout)
    );
    assert!(!std::path::Path::new(&journal).exists(), "journal removed");
    assert!(
        !std::path::Path::new(&format!("{journal}.d")).exists(),
        "spool directory removed"
    );
    let f = bloatlab_results::load(&file).expect("the recovered file loads");
    assert!(f.metadata.interrupted);
    let inc = f.metadata.incomplete.as_ref().expect("metadata.incomplete");
    assert_eq!(inc.phase_reached.as_deref(), Some("loaded"), "{inc:?}");
    assert_eq!(inc.runners_missing, Vec::<String>::new(), "{inc:?}");
    let end = f.raw.phases.last().unwrap().end_ns;
    assert!(
        (3_000_000_000..12_000_000_000).contains(&end),
        "phases cut where the run got: {end}"
    );
    assert!(
        f.raw
            .throughput
            .iter()
            .any(|t| t.name == "tcp_up_1" && t.samples.len() >= 5),
        "the flow's samples up to the kill are kept"
    );
    for probe in ["udp_be", "icmp"] {
        let answered = f
            .raw
            .latency
            .iter()
            .filter(|l| l.name == probe)
            .flat_map(|l| &l.samples)
            .filter(|s| s.delay_ns.is_some())
            .count();
        assert!(answered >= 100, "{probe}: {answered} samples kept");
    }
    let o = run(&["report", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("interrupted"),
        "{}",
        text(&o.stdout)
    );
    // A journal that is not one: exit 2 naming the line, nothing written.
    let bad = dir.join("bad.json.journal");
    std::fs::write(&bad, "not a journal\n").unwrap();
    let o = run(&["test", "--recover", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("journal line 1"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.join("bad.json").exists(), "nothing half-written");
}

/// A server started with --permit-key serves a test that passes the key to every flow
/// and probe stream, and refuses the same test without it (exit 1, saying why).
#[test]
fn a_keyed_server_serves_a_keyed_test_and_refuses_an_unkeyed_one() {
    let port = free_port();
    let p = port.to_string();
    let _srv = server_with(port, &["--permit-key=h11suitekey"]);
    let tmp = tempdir();
    let dir = tmp.path().to_path_buf();
    // The name run_test_on gives the keyed run's file below.
    let file = dir.join("tcp_bidirectional.json");
    let base = [
        "test",
        "tcp_bidirectional",
        "127.0.0.1",
        "-p",
        &p,
        "-l",
        "2",
        "--idle",
        "1",
        "-o",
        file.to_str().unwrap(),
    ];
    let o = run(&base);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("refused the test") && err.contains("--permit-key=KEY"),
        "{err}"
    );
    assert!(!file.exists());
    assert!(
        !dir.join("tcp_bidirectional.json.journal").exists(),
        "no journal left"
    );
    let (_, f) = run_test_on(
        port,
        &dir,
        "tcp_bidirectional",
        &["-l", "2", "--idle", "1", "--permit-key=h11suitekey"],
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(!saved.contains("h11suitekey"), "the key is a secret");
    for flow in ["tcp_up_1", "tcp_down_1"] {
        assert!(
            f.raw
                .throughput
                .iter()
                .any(|t| t.name == flow && !t.samples.is_empty()),
            "{flow} carried no data: {:?}",
            f.metadata.notes
        );
    }
    assert!(
        f.raw
            .latency
            .iter()
            .any(|l| l.name == "udp_be" && l.samples.iter().any(|s| s.delay_ns.is_some())),
        "the keyed probes were answered"
    );
}
