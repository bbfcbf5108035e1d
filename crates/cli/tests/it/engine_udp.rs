//! bloatlab UDP client against bloatlab UDP server over loopback.
//!
//! Every test uses its own free port, runs 1-2 s of traffic, and kills the
//! server it started by PID (Drop guard). Assertions use `--json` where
//! numbers matter, and generous bounds where a loaded 2-core CI machine
//! could shift them.

use serde_json::Value;
use std::net::UdpSocket;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::harness::{BIN, Listen, Proc, free_port};

fn bin() -> &'static str {
    BIN
}

/// A running `bloatlab server -u`, killed (by PID) on drop.
struct Server {
    proc: Proc,
    port: u16,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let port = free_port();
        let p = port.to_string();
        let proc = Proc::bloatlab(&[&["server", "-u", "-p", &p][..], extra].concat());
        let s = Server { proc, port };
        if !extra.contains(&"--json") {
            s.wait_for("Server listening");
        } else {
            // No banner with --json: ready once the socket is bound.
            s.proc.wait_listening(port, Listen::Udp);
        }
        s
    }

    fn stderr(&self) -> String {
        self.proc.err()
    }

    /// Waits (up to 10 s) until stdout contains `needle` `n` times.
    fn wait_for_n(&self, needle: &str, n: usize) -> String {
        self.wait_until(|s| s.matches(needle).count() >= n)
    }

    /// Waits (up to 10 s) until stdout satisfies `done`.
    fn wait_until(&self, done: impl Fn(&str) -> bool) -> String {
        self.proc
            .poll_out(Duration::from_secs(10), done)
            .unwrap_or_else(|s| s)
    }

    fn wait_for(&self, needle: &str) -> String {
        self.wait_for_n(needle, 1)
    }

    fn alive(&mut self) -> bool {
        self.proc.alive()
    }
}

/// Runs `bloatlab client 127.0.0.1 -u -p PORT ARGS` to completion.
fn client(port: u16, args: &[&str]) -> Output {
    Command::new(bin())
        .args(["client", "127.0.0.1", "-u", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run client")
}

/// The client's stdout; panics with both streams if it failed.
fn ok(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success(),
        "client failed: {:?}\n{out}\n{err}",
        o.status
    );
    out
}

fn json(o: &Output) -> Value {
    let s = ok(o);
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("bad JSON ({e}):\n{s}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// `a/b (c%)` -> (a, b) from a UDP report line.
fn lost_total(line: &str) -> (u64, u64) {
    let field = line
        .split_whitespace()
        .find(|w| w.contains('/') && w.chars().all(|c| c.is_ascii_digit() || c == '/'))
        .unwrap_or_else(|| panic!("no Lost/Total in {line}"));
    let (a, b) = field.split_once('/').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn paced_rate_is_within_a_few_percent_of_b() {
    // A rate within a few percent: alone (harness::load).
    let _x = crate::harness::load::exclusive();
    let s = Server::start(&[]);
    let j = json(&client(s.port, &["-b", "10m", "-t", "2", "--json"]));
    let st = &j["streams"][0];
    // The pacer forgets stalls longer than 10 ms (bounded catch-up), so a
    // starved CI machine can fall a little short; it must never overshoot.
    let sent_bps = f(&st["summary"]["bits_per_second"]);
    assert!(
        (9.5e6..=10.2e6).contains(&sent_bps),
        "sender rate {sent_bps} bit/s for -b 10m"
    );
    // 2 s at 10 Mbit/s of 1470-byte datagrams = 1701 datagrams.
    let n = u(&st["summary"]["udp_send"]["datagrams"]);
    assert!((1615..=1702).contains(&n), "{n} datagrams");
    let server = &st["server_side"]["summary"];
    let recv_bps = f(&server["bits_per_second"]);
    assert!(
        (9.5e6..=10.2e6).contains(&recv_bps),
        "receiver rate {recv_bps}"
    );
}

/// `-l 64` datagrams cut the test header short (as iperf 2.1.8's do); the server still
/// takes the test, and the run ends with its report (the load benchmark's UDP case).
#[test]
fn small_datagrams_that_cut_the_header_still_run_a_test() {
    let s = Server::start(&[]);
    let j = json(&client(
        s.port,
        &["-l", "64", "-b", "2m", "-t", "1", "--json"],
    ));
    let r = &j["streams"][0]["server_side"]["summary"]["udp_recv"];
    let got = u(&j["streams"][0]["server_side"]["summary"]["bytes"]);
    assert!(got > 200_000, "{j}");
    assert_eq!(got % 64, 0, "64-byte datagrams: {j}");
    assert_eq!(u(&r["lost"]), 0, "{r}");
    // A reverse test needs the rate the cut takes away: refused, and the server says why.
    let o = client(s.port, &["-l", "64", "-t", "1", "-R"]);
    assert!(!o.status.success());
    let log = s.stderr();
    assert!(
        log.contains("cut short by -l 64: its rate is missing"),
        "{log}"
    );
}

#[test]
fn low_rate_on_loopback_has_no_loss_and_small_nonnegative_latency() {
    let s = Server::start(&["-e"]);
    let j = json(&client(
        s.port,
        &["-b", "1m", "-t", "1", "--trip-times", "--json"],
    ));
    let side = &j["streams"][0]["server_side"];
    assert!(
        side["server_version"]
            .as_str()
            .unwrap()
            .starts_with("bloatlab"),
        "{side}"
    );
    let r = &side["summary"]["udp_recv"];
    assert_eq!(u(&r["lost"]), 0, "{r}");
    assert_eq!(u(&r["out_of_order"]), 0, "{r}");
    let jitter = f(&r["jitter_ms"]);
    assert!((0.0..5.0).contains(&jitter), "jitter {jitter} ms");
    let lat = &r["latency"];
    assert_eq!(u(&lat["negative_count"]), 0, "same host: never negative");
    let (min, mean, max) = (
        f(&lat["latency_ms_min"]),
        f(&lat["latency_ms_mean"]),
        f(&lat["latency_ms_max"]),
    );
    assert!(0.0 <= min && min <= mean && mean <= max, "{lat}");
    // Tens of microseconds normally; 5 ms leaves room for a loaded CI box.
    assert!(mean < 5.0, "mean latency {mean} ms");
    assert!(lat["histogram"].is_object(), "the distribution is relayed");
}

#[test]
fn server_report_relayed_equals_the_servers_own_final_numbers() {
    let s = Server::start(&["-e"]);
    let out = ok(&client(s.port, &["-b", "5m", "-t", "1", "-e"]));
    let srv = s.wait_for_n(" sec ", 1);
    // Client: the line after the Server Report header.
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("Server Report:"))
        .unwrap_or_else(|| panic!("no Server Report:\n{out}"));
    let relayed = lines
        .get(at + 2)
        .copied()
        .filter(|l| l.contains(" sec "))
        .unwrap_or_else(|| panic!("no report line:\n{out}"));
    let own = srv
        .lines()
        .rev()
        .find(|l| l.contains(" sec "))
        .unwrap_or_else(|| panic!("server printed no final line:\n{srv}"));
    // Same interval, transfer and Lost/Total; the AckFIN carries counts
    // exactly (latency and jitter only to the microsecond).
    let head = |l: &str| l.split("Bytes").next().unwrap().to_owned();
    assert_eq!(
        head(relayed),
        head(own),
        "\nclient: {relayed}\nserver: {own}"
    );
    assert_eq!(lost_total(relayed), lost_total(own));
    let (lost, total) = lost_total(own);
    assert_eq!(lost, 0);
    let sent: u64 = out
        .lines()
        .find_map(|l| l.split("Sent ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    // iperf 2's counting: Total = the FIN's id, "Sent" = that + 1 per FIN sent.
    assert!(
        total < sent && sent - total <= 3,
        "total {total} sent {sent}"
    );
    assert!(
        relayed.contains(" pps ") && relayed.contains(" ms "),
        "{relayed}"
    );
    // Issue 24: -e shows what the test cost the client.
    assert!(
        out.lines()
            .any(|l| l.starts_with("[CPU] ") && l.ends_with(" CPU-s/GB (process)")),
        "{out}"
    );
}

#[test]
fn json_carries_the_server_section_and_one_document_per_flow_on_the_server() {
    let s = Server::start(&["--json", "-i", "0.5"]);
    let j = json(&client(
        s.port,
        &["-b", "2m", "-t", "1", "-i", "0.5", "--json"],
    ));
    assert_eq!(j["protocol"], "udp");
    assert_eq!(j["role"], "client");
    let st = &j["streams"][0];
    assert_eq!(st["intervals"].as_array().unwrap().len(), 2, "{st}");
    let side = &st["server_side"];
    let server_total = u(&side["summary"]["udp_recv"]["datagrams_total"]);
    assert!(side["intervals"].as_array().unwrap().len() >= 2, "{side}");
    let sent = u(&st["summary"]["udp_send"]["datagrams"]);
    assert_eq!(server_total, sent + 1, "the FIN counts on the server");
    // Issue 24: the client's CPU cost, per byte it sent.
    assert_eq!(j["cpu"]["scope"], "process", "{j}");
    assert_eq!(u(&j["cpu"]["bytes"]), u(&st["summary"]["bytes"]), "{j}");
    // The server printed its own document with the same numbers.
    // The document is complete at its closing brace in column 0 (the
    // output is collected line by line, so a field inside can show up first).
    let srv = s.wait_for("\n}\n");
    let doc: Value = serde_json::from_str(&srv).unwrap_or_else(|e| panic!("{e}: {srv}"));
    assert_eq!(
        u(&doc["streams"][0]["summary"]["udp_recv"]["datagrams_total"]),
        server_total
    );
}

#[test]
fn parallel_streams_print_sum_lines_and_each_gets_a_server_report() {
    let s = Server::start(&[]);
    let out = ok(&client(
        s.port,
        &["-b", "2m", "-t", "2", "-i", "1", "-P", "2", "-e"],
    ));
    assert!(out.matches("Server Report:").count() == 2, "{out}");
    let sums: Vec<&str> = out.lines().filter(|l| l.starts_with("[SUM]")).collect();
    // Two intervals and the total.
    assert!(sums.len() >= 3, "{out}");
    let total = sums.last().unwrap();
    assert!(total.starts_with("[SUM] 0.0000-"), "{total}");
    // 2 x 2 Mbit/s.
    assert!(total.contains("Mbits/sec"), "{total}");
    let rate: f64 = total
        .split("Bytes")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!((3.7..=4.2).contains(&rate), "{total}");
    s.wait_for_n(" sec ", 2);
}

#[test]
fn bad_datagrams_do_not_kill_the_server() {
    let mut s = Server::start(&["-e"]);
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", s.port);
    for n in [0usize, 1, 7, 15] {
        junk.send_to(&vec![0xA5; n], to).unwrap();
    }
    // A stale FIN (negative id) and a huge random-looking datagram.
    let mut fin = vec![0u8; 200];
    fin[..4].copy_from_slice(&(-5i32).to_be_bytes());
    fin[12..16].copy_from_slice(&[0xff; 4]);
    junk.send_to(&fin, to).unwrap();
    junk.send_to(&vec![0x5A; 9000], to).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(s.alive(), "server died on junk: {}", s.stderr());
    // A real test still works.
    let out = ok(&client(s.port, &["-b", "1m", "-t", "1"]));
    assert!(out.contains("Server Report:"), "{out}");
    assert!(s.alive());
    // One log line for the junk source, not one per datagram.
    let warnings = s.stderr().matches("malformed").count();
    assert_eq!(warnings, 1, "{}", s.stderr());
}

#[test]
fn silent_flow_without_fin_is_finalized_after_the_idle_timeout() {
    use bloatlab_engine::config::{ClientConfig, DEFAULT_UDP_LEN_V4, DEFAULT_UDP_RATE, Protocol};
    use bloatlab_engine::udp::datagram::{Template, header_repr, stamp};

    let s = Server::start(&["-e", "--header-timeout", "1"]);
    let mut cfg = ClientConfig::new("127.0.0.1");
    cfg.protocol = Protocol::Udp;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let h = header_repr(&cfg, now, DEFAULT_UDP_RATE);
    let tmpl = Template::new(h, DEFAULT_UDP_LEN_V4).unwrap().bytes;
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    for id in 1..=20i64 {
        let mut d = tmpl.clone();
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        stamp(&mut d, id, t);
        sock.send_to(&d, ("127.0.0.1", s.port)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    // No FIN: after ~1 s of silence the server reports the flow anyway.
    let out = s.wait_for(" sec ");
    let line = out
        .lines()
        .find(|l| l.contains(" sec "))
        .unwrap_or_else(|| panic!("no final report:\n{out}\n{}", s.stderr()));
    assert_eq!(lost_total(line), (0, 20), "{line}");
    assert!(s.stderr().contains("idle"), "{}", s.stderr());
}

#[test]
fn no_server_is_a_clear_error_after_the_fin_retries() {
    let port = free_port();
    let t0 = Instant::now();
    let o = client(port, &["-b", "1m", "-t", "0.3"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("WARNING: did not receive ack of last datagram after 200 tries"),
        "{out}"
    );
    assert!(err.contains("no UDP server at 127.0.0.1:"), "{err}");
    // 0.3 s of sending + 200 FIN tries 10 ms apart.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

/// `[  1] Sent N datagrams` from a sender's output.
fn sent_datagrams(out: &str) -> u64 {
    let l = out
        .lines()
        .find(|l| l.contains("Sent ") && l.contains(" datagrams"))
        .unwrap_or_else(|| panic!("no Sent line in:\n{out}"));
    let n = l
        .split("Sent ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    n.parse().unwrap()
}

#[test]
fn reverse_client_receives_at_the_clients_rate_and_both_sides_agree() {
    let srv = Server::start(&["-e"]);
    let o = client(
        srv.port,
        &[
            "-R", "-e", "-b", "2m", "-l", "500", "-t", "2", "-i", "1", "--json",
        ],
    );
    let doc = json(&o);
    assert_eq!(doc["test"]["reverse"], true, "{doc}");
    let st = &doc["streams"][0];
    assert_eq!(st["direction"], "receive", "{doc}");
    let sum = &st["summary"];
    let r = &sum["udp_recv"];
    let total = u(&r["datagrams_total"]);
    let lost = u(&r["lost"]);
    // 2 Mbit/s of 500-byte datagrams for 2 s is 1000 datagrams (+ the FIN).
    assert!((880..=1120).contains(&total), "{sum}");
    assert!(lost <= total / 20, "{sum}");
    let bps = f(&sum["bits_per_second"]);
    assert!((1.7e6..2.3e6).contains(&bps), "{bps}");
    assert_eq!(u(&r["latency"]["negative_count"]), 0, "{sum}");
    assert!(f(&r["latency"]["latency_ms_mean"]) >= 0.0);
    // Interval records while receiving (-i 1 over 2 s).
    assert!(!st["intervals"].as_array().unwrap().is_empty(), "{st}");
    // The server sent: its "Sent N" is the FIN's id + 1, and the client's
    // Total is the FIN's id.
    let out = srv.wait_for("Sent ");
    assert!(out.contains("(reverse) (no-udp-fin)"), "{out}");
    assert!(out.contains("Write/Err"), "{out}");
    assert_eq!(sent_datagrams(&out), total + 1, "{out}\n{sum}");
}

#[test]
fn reverse_console_prints_star_labelled_receive_lines_with_latency() {
    let srv = Server::start(&[]);
    let o = client(
        srv.port,
        &[
            "-R",
            "-e",
            "--trip-times",
            "-b",
            "400k",
            "-l",
            "200",
            "-t",
            "1",
        ],
    );
    let out = ok(&o);
    assert!(out.contains("(reverse) (trip-times)"), "{out}");
    assert!(
        out.contains("Jitter   Lost/Total  Latency avg/min/max/stdev"),
        "{out}"
    );
    let last = out
        .lines()
        .rfind(|l| l.starts_with("[ *1] "))
        .unwrap_or_else(|| panic!("no [ *1] line:\n{out}"));
    let (lost, total) = lost_total(last);
    // 400 kbit/s of 200-byte datagrams for 1 s: 250 (+ the FIN).
    assert!((200..=300).contains(&total), "{last}");
    assert!(lost <= total / 20, "{last}");
    let srv_out = srv.wait_for("Sent ");
    assert!(srv_out.contains("(trip-times)"), "{srv_out}");
    assert_eq!(sent_datagrams(&srv_out), total + 1, "{srv_out}\n{out}");
}

#[test]
fn reverse_with_a_byte_amount_ends_on_the_servers_fin() {
    let srv = Server::start(&[]);
    let t0 = Instant::now();
    // 100 datagrams of 1000 bytes at 8 Mbit/s: 0.1 s of traffic.
    let o = client(
        srv.port,
        &["-R", "-n", "100000", "-l", "1000", "-b", "8m", "--json"],
    );
    let doc = json(&o);
    // Ended on the FIN, not on the 2 s silence timer.
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let r = &doc["streams"][0]["summary"]["udp_recv"];
    // 100 data datagrams and the FIN (-101).
    assert_eq!(u(&r["datagrams_total"]), 101, "{r}");
    assert!(u(&r["lost"]) <= 5, "{r}");
    assert_eq!(sent_datagrams(&srv.wait_for("Sent ")), 102);
}

#[test]
fn reverse_without_a_server_fails_after_the_header_retries() {
    let port = free_port();
    let t0 = Instant::now();
    let o = client(port, &["-R", "-t", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no UDP server at 127.0.0.1:"), "{err}");
    // 100 header tries, 0-20 ms apart.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

#[test]
fn full_duplex_both_ends_send_and_receive_and_the_counts_agree() {
    let srv = Server::start(&["-e"]);
    let o = client(
        srv.port,
        &[
            "--full-duplex",
            "-e",
            "-b",
            "2m",
            "-l",
            "500",
            "-t",
            "1",
            "--json",
        ],
    );
    let doc = json(&o);
    assert_eq!(doc["test"]["full_duplex"], true, "{doc}");
    let streams = doc["streams"].as_array().unwrap();
    let by_dir = |d: &str| {
        streams
            .iter()
            .find(|s| s["direction"] == d)
            .unwrap_or_else(|| panic!("no {d} stream in {doc}"))
    };
    let send = &by_dir("send")["summary"];
    let recv = &by_dir("receive")["summary"];
    // No AckFIN in full-duplex (NOUDPFIN), so no relayed server report.
    assert!(by_dir("send")["server_side"].is_null(), "{doc}");
    let r = &recv["udp_recv"];
    let total = u(&r["datagrams_total"]);
    let lost = u(&r["lost"]);
    // 2 Mbit/s of 500-byte datagrams for 1 s each way: 500 (+ the FIN).
    assert!((440..=560).contains(&total), "{recv}");
    assert!(lost <= total / 20, "{recv}");
    let sent = u(&send["udp_send"]["datagrams"]);
    assert!((440..=560).contains(&sent), "{send}");
    // The server printed both halves: its receive line (our datagrams and
    // our FIN) and its `[ *1]` send line with `Sent N` (its FIN id + 1).
    let out = srv.wait_for("Sent ");
    assert!(out.contains("(full-duplex) (no-udp-fin)"), "{out}");
    assert!(out.contains("[ *1] "), "{out}");
    assert_eq!(sent_datagrams(&out), total + 1, "{out}\n{recv}");
    let srv_recv = out
        .lines()
        .find(|l| l.starts_with("[  1] ") && l.contains('%'))
        .unwrap_or_else(|| panic!("no server receive line:\n{out}"));
    let (s_lost, s_total) = lost_total(srv_recv);
    // Our data datagrams and our FIN.
    assert_eq!(s_total, sent + 1, "{srv_recv}\n{send}");
    assert!(s_lost <= s_total / 20, "{srv_recv}");
}

#[test]
fn full_duplex_without_a_server_fails_with_a_clear_error() {
    let port = free_port();
    let t0 = Instant::now();
    let o = client(port, &["--full-duplex", "-t", "0.5", "-b", "1m"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no UDP server at 127.0.0.1:"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

/// A console report line: (label, span start, span end, rest).
fn report_line(line: &str) -> Option<(&str, f64, f64, &str)> {
    let (label, rest) = line.split_once("] ")?;
    let (span, rest) = rest.trim_start().split_once(" sec ")?;
    let (a, b) = span.split_once('-')?;
    Some((
        label.trim_start_matches('[').trim(),
        a.parse().ok()?,
        b.parse().ok()?,
        rest,
    ))
}

/// Checks every `[SUM]` line of a receiver's console output against the
/// per-stream lines of the same interval: Lost/Total add up exactly, the
/// rate within rounding. Returns the number of `[SUM]` lines checked.
fn check_recv_sums(out: &str, streams: usize) -> usize {
    let lines: Vec<_> = out.lines().filter_map(report_line).collect();
    let rate = |rest: &str| -> f64 {
        let w: Vec<&str> = rest.split_whitespace().collect();
        // Transfer, its unit, then the rate and its unit.
        let scale = match w[3].chars().next() {
            Some('K') => 1e3,
            Some('M') => 1e6,
            Some('G') => 1e9,
            _ => 1.0,
        };
        w[2].parse::<f64>().unwrap() * scale
    };
    let mut checked = 0;
    for (i, (_, start, end, rest)) in lines.iter().enumerate().filter(|(_, l)| l.0 == "SUM") {
        if rest.contains("out-of-order") {
            continue;
        }
        // The members: the nearest lines before the sum with the same start
        // (the total: start 0 and the longest spans).
        // (-t 2 -i 1: the totals are the only spans 0-2 s.)
        let total_span = |s: f64, e: f64| s == 0.0 && e > 1.5;
        let is_total = total_span(*start, *end);
        let members: Vec<_> = lines[..i]
            .iter()
            .rev()
            .filter(|(l, s, e, r)| {
                *l != "SUM"
                    && *s == *start
                    && total_span(*s, *e) == is_total
                    && !r.contains("out-of-order")
            })
            .take(streams)
            .collect();
        assert_eq!(members.len(), streams, "members of {rest}:\n{out}");
        let (lost, total) = lost_total(rest);
        let parts: Vec<(u64, u64)> = members.iter().map(|m| lost_total(m.3)).collect();
        assert_eq!(lost, parts.iter().map(|p| p.0).sum::<u64>(), "{out}");
        assert_eq!(total, parts.iter().map(|p| p.1).sum::<u64>(), "{out}");
        // Within rounding; a total spans its longest member, so a FIN
        // delayed on a loaded machine lowers the sum's rate a little.
        let sum_rate: f64 = members.iter().map(|m| rate(m.3)).sum();
        assert!(
            (rate(rest) - sum_rate).abs() <= 0.15 * sum_rate,
            "{rest} vs {sum_rate}:\n{out}"
        );
        checked += 1;
    }
    checked
}

#[test]
fn server_prints_sum_lines_for_the_flows_of_a_parallel_client() {
    let s = Server::start(&["-i", "1"]);
    let out = ok(&client(
        s.port,
        &["-b", "2m", "-t", "2", "-i", "1", "-P", "3"],
    ));
    assert_eq!(out.matches("Server Report:").count(), 3, "{out}");
    // [SUM-3] Sent adds up the streams' Sent figures, as in 2.1.8.
    let sent = |l: &str| -> u64 {
        let n = l.split("Sent ").nth(1).unwrap().split_whitespace().next();
        n.unwrap().parse().unwrap()
    };
    let (sums, each): (Vec<&str>, Vec<&str>) = out
        .lines()
        .filter(|l| l.contains("] Sent "))
        .partition(|l| l.starts_with("[SUM-3] Sent "));
    assert_eq!((sums.len(), each.len()), (1, 3), "{out}");
    assert_eq!(sent(sums[0]), each.iter().map(|l| sent(l)).sum::<u64>());
    // The final [SUM] follows the last flow's final line, printed as its
    // FIN arrives (before the client's Server Report).
    let finals = |srv: &str| {
        srv.lines()
            .filter_map(report_line)
            .filter(|l| l.0 == "SUM" && l.1 == 0.0 && l.2 > 1.5)
            .count()
    };
    let srv = s.wait_until(|srv| finals(srv) > 0);
    assert_eq!(finals(&srv), 1, "{srv}");
    // Two intervals and the total, each equal to its flows' sum.
    assert!(check_recv_sums(&srv, 3) >= 3, "{srv}");
    assert!(
        srv.contains("[ ID] Interval       Transfer     Bandwidth\n"),
        "{srv}"
    );
}

#[test]
fn server_json_is_one_document_per_parallel_client_with_a_receive_sum() {
    let s = Server::start(&["--json", "-i", "1"]);
    let c = json(&client(
        s.port,
        &["-b", "2m", "-t", "2", "-i", "1", "-P", "2", "--json"],
    ));
    assert_eq!(c["streams"].as_array().unwrap().len(), 2);
    let srv = s.wait_for("\n}\n");
    let doc: Value = serde_json::from_str(&srv).unwrap_or_else(|e| panic!("{e}: {srv}"));
    let streams = doc["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{doc}");
    let sum = &doc["sum"];
    assert_eq!(sum["direction"], "receive", "{doc}");
    assert_eq!(u(&sum["streams"]), 2);
    let total: u64 = streams.iter().map(|s| u(&s["summary"]["bytes"])).sum();
    assert_eq!(u(&sum["summary"]["bytes"]), total, "{doc}");
    let datagrams: u64 = streams
        .iter()
        .map(|s| u(&s["summary"]["udp_recv"]["datagrams_total"]))
        .sum();
    assert_eq!(u(&sum["summary"]["udp_recv"]["datagrams_total"]), datagrams);
    // Each interval sum equals its flows' intervals with the same start.
    let ivls = sum["intervals"].as_array().unwrap();
    assert!(ivls.len() >= 2, "{doc}");
    for i in ivls {
        let start = f(&i["start_s"]);
        let parts: u64 = streams
            .iter()
            .flat_map(|s| s["intervals"].as_array().unwrap())
            .filter(|x| f(&x["start_s"]) == start)
            .map(|x| u(&x["bytes"]))
            .sum();
        assert_eq!(u(&i["bytes"]), parts, "{doc}");
    }
    // The server's total equals what the client sent, plus one FIN each.
    let sent: u64 = c["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| u(&s["summary"]["udp_send"]["datagrams"]))
        .sum();
    assert_eq!(datagrams, sent + 2);
}

#[test]
fn reverse_parallel_client_prints_receive_sum_lines() {
    let s = Server::start(&[]);
    let out = ok(&client(
        s.port,
        &["-R", "-b", "2m", "-t", "2", "-i", "1", "-P", "2"],
    ));
    assert!(out.contains("[ *1]") && out.contains("[ *2]"), "{out}");
    assert!(check_recv_sums(&out, 2) >= 3, "{out}");
    let j = json(&client(
        s.port,
        &[
            "-R", "-b", "2m", "-t", "1", "-i", "0.5", "-P", "2", "-e", "--json",
        ],
    ));
    let sum = &j["sum"];
    assert_eq!(sum["direction"], "receive", "{j}");
    let streams = j["streams"].as_array().unwrap();
    let total: u64 = streams.iter().map(|s| u(&s["summary"]["bytes"])).sum();
    assert!(total > 0);
    assert_eq!(u(&sum["summary"]["bytes"]), total, "{j}");
}

#[test]
fn full_duplex_with_e_prints_fd_lines_on_both_ends() {
    let s = Server::start(&["-e", "-i", "1"]);
    let out = ok(&client(
        s.port,
        &["--full-duplex", "-e", "-b", "2m", "-t", "2", "-i", "1"],
    ));
    assert!(
        out.contains("[ ID] Interval       Transfer     Bandwidth    Datagrams   PPS\n"),
        "{out}"
    );
    let fd: Vec<_> = out
        .lines()
        .filter(|l| l.starts_with("[FD1] "))
        .filter_map(report_line)
        .collect();
    assert!(fd.len() >= 3, "{out}");
    // The total: the client's "Sent N" plus the datagrams it received.
    let total = fd.iter().find(|l| l.1 == 0.0 && l.2 > 1.5).expect("total");
    let n: u64 = total.3.split_whitespace().nth(4).unwrap().parse().unwrap();
    let recv_total = out
        .lines()
        .filter(|l| l.starts_with("[ *1] 0.0000-") && !l.contains("0.0000-1.0000"))
        .map(|l| lost_total(l).1)
        .next_back()
        .expect("receive total");
    assert_eq!(n, sent_datagrams(&out) + recv_total, "{out}");
    let srv = s.wait_until(|o| o.lines().filter(|l| l.starts_with("[FD1] ")).count() >= 3);
    assert!(srv.lines().any(|l| l.starts_with("[FD1] 0.0000-")), "{srv}");
}

#[test]
fn no_reverse_server_refuses_udp_reverse_and_serves_forward() {
    let srv = Server::start(&["--no-reverse"]);
    let o = client(srv.port, &["-R", "-t", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("reverse-test header datagrams"), "{err}");
    let t0 = Instant::now();
    while !srv.stderr().contains("--no-reverse") && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        srv.stderr().contains("refusing a UDP -R"),
        "{}",
        srv.stderr()
    );
    let o = client(srv.port, &["-t", "1", "-b", "1m"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
