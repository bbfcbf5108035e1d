//! Issue 19's attacks that only unit tests covered, replayed on loopback or in a lab of
//! our own, each asserting its figure:
//!
//! * `--max-reverse-rate` is one budget: `-R -P 8` and separate clients from other
//!   addresses together receive about the cap (before: 81 Mbit/s for `-P 8` and 121 for
//!   12 clients under `--max-reverse-rate 10m`);
//! * an unkeyed flood of 4,000 probe requests/s from a keyed `bloatlab ping`'s own
//!   address costs it no probes (before: 12.7 % loss);
//! * the emulator's delay line: a rate x delay above its bound is refused at `lab up`,
//!   and a link without a rate under a fast flow keeps the emulator's memory bounded
//!   (before: `--delay 1000s` and a 300 Mbit/s flow grew RSS from 6.7 to 321 MB in 8 s).

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bloatlab_probe::packet::Repr;
use bloatlab_testkit::tier;

use crate::harness::lab::{LabGuard, bl, unique};
use crate::harness::{BIN, Listen, Proc, free_port, load, stderr, stdout};

fn server(port: u16, args: &[&str], listen: Listen) -> Proc {
    let p = port.to_string();
    let s = Proc::bloatlab(&[&["server", "-p", &p][..], args].concat());
    s.wait_listening(port, listen);
    s
}

/// Starts `bloatlab client ARGS` with its output piped.
fn spawn_client(args: &[&str]) -> Child {
    Command::new(BIN)
        .arg("client")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The bytes of every stream's whole-test line of a `-y C` report (`-P 1`: its one
/// line; `-P N`: the N stream lines, not the sum, whose id is -1).
fn csv_stream_bytes(csv: &str) -> u64 {
    csv.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f.len() >= 9 && f[5].parse::<i32>().is_ok_and(|id| id > 0))
        .filter(|f| f[6].starts_with("0.0-"))
        .filter_map(|f| f[7].parse::<u64>().ok())
        .sum()
}

// Issue 19, attack 4: `--max-reverse-rate 10m` was per connection, so `-R -b 10m -P 8`
// got 81 Mbit/s and 12 separate clients 121. The cap is one budget per source and one
// for all TCP senders (4 x by default): `-P 8` from 127.0.0.1 gets at most its source's
// 10 Mbit/s, and with four clients from 127.0.0.2-5, all at once, the five sources get
// the global 40 together.
#[test]
fn one_max_reverse_rate_budget_holds_p_8_and_separate_clients_together() {
    // A rate measured against a bound: alone (harness::load).
    let _x = load::exclusive();
    let port = free_port();
    let _srv = server(
        port,
        &["--max-reverse-rate", "10m", "--no-probes"],
        Listen::Tcp,
    );
    let p = port.to_string();
    const SECS: f64 = 4.0;
    // 16 KB writes: each stream's first write goes before it is charged, so 12
    // streams add at most 192 KB (0.4 Mbit/s over 4 s) to the budget.
    let common = [
        "-p", &p, "-R", "-b", "10m", "-l", "16K", "-t", "4", "-y", "C",
    ];
    let mut clients = vec![spawn_client(
        &[&["127.0.0.1", "-P", "8"][..], &common[..]].concat(),
    )];
    for src in 2..=5 {
        let bind = format!("127.0.0.{src}");
        clients.push(spawn_client(
            &[&["127.0.0.1", "-B", &bind][..], &common[..]].concat(),
        ));
    }
    let mut per_client = Vec::new();
    for c in clients {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
        let bytes = csv_stream_bytes(&stdout(&o));
        assert!(bytes > 0, "no stream line: {}", stdout(&o));
        per_client.push(bytes as f64 * 8.0 / SECS / 1e6);
    }
    let mbps: f64 = per_client.iter().sum();
    eprintln!("12 reverse streams from 5 sources: {per_client:.1?} Mbit/s, {mbps:.1} together");
    // -P 8 from one source shares that source's budget: the cap plus its
    // 100 ms of credit and the first writes; unshared it was 8 x 10 = 80.
    assert!(
        (2.0..=13.0).contains(&per_client[0]),
        "-R -P 8 at -b 10m under --max-reverse-rate 10m received {:.1} Mbit/s",
        per_client[0]
    );
    // Five sources asking 10 each meet the global budget, 4 x the per-source
    // one by default (docs/engine.md): 40 Mbit/s plus its credit and the
    // first writes; unshared it was 12 x 10 = 120 Mbit/s.
    assert!(
        (20.0..=46.0).contains(&mbps),
        "12 reverse streams from 5 sources at -b 10m under --max-reverse-rate 10m \
         (total 4 x 10m) received {mbps:.1} Mbit/s together"
    );
}

// Issue 19, attack 7: 4,000 unkeyed requests/s from a keyed client's own address cost it
// 12.7 % of its probes, because the source's reply budget (2,000/s) was charged before
// the HMAC was checked. Now unkeyed requests charge nothing.
#[test]
fn a_keyed_ping_keeps_its_probes_under_an_unkeyed_flood_from_its_own_address() {
    // Loss under load is the figure: alone (harness::load).
    let _x = load::exclusive();
    let port = free_port();
    let key = "h19v-probe-key";
    let _srv = server(port, &[&format!("--permit-key={key}")], Listen::Both);
    let flood = std::thread::spawn(move || {
        // From 127.0.0.1, like the client: the same source budget.
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(("127.0.0.1", port)).unwrap();
        let mut buf = [0u8; 96];
        let start = Instant::now();
        let mut sent = 0u64;
        // 40 requests every 10 ms (4,000/s) for 5 s, each a well-formed request
        // without a tag, a new session every 100 requests.
        while start.elapsed() < Duration::from_secs(5) {
            let tick = start + Duration::from_millis(10 * (sent / 40));
            if let Some(wait) = tick.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            for _ in 0..40 {
                Repr::request(0x00f1_00d0 + sent / 100, sent, start.elapsed())
                    .emit(&mut buf)
                    .unwrap();
                let _ = s.send(&buf);
                sent += 1;
            }
        }
        // The keyed responder answers none of them.
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let replies = std::iter::from_fn(|| s.recv(&mut buf).ok()).count();
        (sent, start.elapsed(), replies)
    });
    // The flood's first second spends the whole budget it could spend.
    std::thread::sleep(Duration::from_secs(1));
    let o = Command::new(BIN)
        .args([
            "ping",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-i",
            "10ms",
            "-c",
            "300",
            &format!("--permit-key={key}"),
        ])
        .stdin(Stdio::null())
        .env_remove("BLOATLAB_PERMIT_KEY")
        .output()
        .unwrap();
    let (sent, took, replies) = flood.join().unwrap();
    let rate = sent as f64 / took.as_secs_f64();
    assert!(rate > 3_500.0, "the flood sent only {rate:.0} requests/s");
    assert_eq!(replies, 0, "unkeyed requests were answered");
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    eprintln!("unkeyed flood at {rate:.0}/s; keyed ping: {out}");
    let received: u64 = out
        .split(" sent, ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary: {out}"));
    assert!(
        received >= 297,
        "the keyed client got {received} of 300 replies under the unkeyed flood: {out}"
    );
}

// Issue 19, attack 9: the delay line was outside the `--limit` memory bound. A rate x
// delay above its bound (256 MiB per direction) is refused at `lab up`, before anything
// is created.
#[test]
fn lab_up_refuses_a_delay_line_above_its_memory_bound() {
    if !tier::root("lab_up_refuses_a_delay_line_above_its_memory_bound") {
        return;
    }
    let name = unique("dl");
    let _guard = LabGuard::adopt(&name);
    // 300 Mbit/s x 1000 s: 37.5 GB in flight.
    let o = bl(&["lab", "up", &name, "--rate", "300mbit", "--delay", "1000s"]);
    assert!(!o.status.success(), "lab up accepted it: {}", stdout(&o));
    let e = stderr(&o);
    assert!(
        e.contains("delay") && e.contains("in flight") && e.contains("256 MiB"),
        "{e}"
    );
    assert!(
        crate::harness::lab::lab_namespaces(&name).is_empty(),
        "a refused lab left namespaces"
    );
}

/// VmHWM (peak RSS) of `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

// Issue 19, attack 9: `--delay 1000s` under a 300 Mbit/s flow grew the emulator's RSS from
// 6.7 MB to 321 MB in 8 s, without bound. A link without a rate now holds at most 256 MiB
// in flight and drops the rest as overflow: under a UDP flood that fills the delay line,
// the emulator's peak RSS stays near the bound.
#[test]
fn a_rateless_lab_link_under_a_fast_flow_keeps_the_emulator_rss_bounded() {
    if !tier::root("a_rateless_lab_link_under_a_fast_flow_keeps_the_emulator_rss_bounded") {
        return;
    }
    // A flood through the emulator: alone (harness::load).
    let _x = load::exclusive();
    let lab = LabGuard::up("rss", &["--up-delay", "1000s", "--no-calibrate"]);
    let pid = lab.status()["pid"].as_u64().unwrap() as u32;
    let before = peak_rss_kib(pid);
    // Nothing listens and nothing arrives for 1000 s: every datagram stays in the delay
    // line. 64 KB datagrams (fragments through the lab) until 400 MiB went in.
    let o = lab.exec(
        "client",
        &[
            BIN,
            "client",
            "10.77.0.2",
            "-u",
            "-b",
            "2g",
            "-l",
            "63K",
            "-n",
            "400M",
        ],
    );
    let status = lab.status();
    let up = &status["counters"]["directions"]
        .as_array()
        .and_then(|d| d.iter().find(|x| x[0] == "up"))
        .map(|x| x[1].clone())
        .unwrap_or_default();
    let overflow = up["link"]["dropped"]["overflow"]["packets"]
        .as_u64()
        .unwrap_or(0);
    let peak = peak_rss_kib(pid);
    eprintln!("emulator peak RSS {before} -> {peak} KiB, {overflow} packets dropped as overflow");
    // The bound was reached (the emulator dropped past it), so without it the delay line
    // would have held everything that came in.
    assert!(
        overflow > 0,
        "the delay line never reached its bound (client: {}{}): {up}",
        stdout(&o),
        stderr(&o)
    );
    assert!(
        peak < before + (320 << 10),
        "the emulator's peak RSS went from {before} KiB to {peak} KiB (bound 256 MiB in \
         flight): {up}"
    );
}

// Issue 22: a program that starts a server (the lab session of `experiment`, `demo`,
// `tune`) gives it the permit key in $BLOATLAB_PERMIT_KEY, not on its command line, which
// /proc/PID/cmdline shows to every user. The server takes it from there: a test without
// the key is refused, one with it runs.
#[test]
fn a_server_takes_its_permit_key_from_the_environment_off_its_command_line() {
    let key = "h22s-env-key";
    let port = free_port();
    let p = port.to_string();
    let mut cmd = Command::new(BIN);
    cmd.args(["server", "-p", &p])
        .env("BLOATLAB_PERMIT_KEY", key);
    let srv = Proc::start(format!("bloatlab server -p {p} (key in env)"), cmd);
    srv.wait_listening(port, Listen::Tcp);
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", srv.pid())).unwrap();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains(key),
        "the key is on the command line"
    );
    let client = |with: Option<&str>| {
        let mut c = Command::new(BIN);
        c.args(["client", "127.0.0.1", "-p", &p, "-t", "0.5"])
            .stdin(Stdio::null())
            .env_remove("BLOATLAB_PERMIT_KEY");
        if let Some(k) = with {
            c.env("BLOATLAB_PERMIT_KEY", k);
        }
        c.output().unwrap()
    };
    let refused = client(None);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("the server refused the test"),
        "{}",
        stderr(&refused)
    );
    let keyed = client(Some(key));
    assert!(
        keyed.status.success(),
        "{}\n{}",
        stderr(&keyed),
        srv.transcript()
    );
}
