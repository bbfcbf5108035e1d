//! Issue 19's reflection, deadline and log-budget attacks against a
//! `bloatlab server` on loopback, as tests (deliverables 1, 4, 5 and their
//! part of 8). Each names the figure it guards against; the
//! amplification table of docs/security.md is what
//! `every_reply_the_server_sends_is_measured_and_bounded` measures.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use bloatlab_engine::config::{Amount, ClientConfig, Direction, Protocol};
use bloatlab_engine::udp::datagram::{Template, header_repr, stamp};
use bloatlab_os::clock::realtime_now;
use bloatlab_units::{BitRate, Bytes};

use crate::harness::{BIN, Listen, Proc, free_port};

/// `bloatlab server -u -p PORT ARGS`, once its socket is bound.
fn udp_server(args: &[&str]) -> (Proc, u16) {
    let port = free_port();
    let p = port.to_string();
    let s = Proc::bloatlab(&[&["server", "-u", "-p", &p][..], args].concat());
    s.wait_listening(port, Listen::Udp);
    (s, port)
}

/// A client's first datagram: `len` bytes asking for `dir`, `amount` at
/// `rate`; `iperf` clears the BLAB marker, as an iperf 2 client's header
/// (which cannot do the cookie exchange) looks.
pub(crate) fn header(dir: Direction, amount: Amount, rate: u64, len: u64, iperf: bool) -> Vec<u8> {
    let mut c = ClientConfig::new("127.0.0.1");
    c.protocol = Protocol::Udp;
    c.direction = dir;
    c.amount = amount;
    c.buffer_len = Some(Bytes(len));
    let h = header_repr(&c, realtime_now(), BitRate(rate));
    let mut b = Template::new(h, Bytes(len)).unwrap().bytes;
    if iperf {
        b[40..48].fill(0);
    }
    stamp(&mut b, 1, realtime_now());
    b
}

pub(crate) fn secs(n: u64) -> Amount {
    Amount::Time(Duration::from_secs(n))
}

/// A socket bound to `ip` (any 127/8 address is local), with a short read timeout.
pub(crate) fn sock(ip: [u8; 4]) -> UdpSocket {
    let s = UdpSocket::bind(SocketAddr::from((ip, 0))).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s
}

/// Every datagram `s` receives within `within`: (count, bytes, first length).
pub(crate) fn drain(s: &UdpSocket, within: Duration) -> (u64, u64, Vec<usize>) {
    let (mut n, mut bytes, mut lens) = (0, 0, Vec::new());
    let mut buf = vec![0u8; 65_536];
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if let Ok(k) = s.recv(&mut buf) {
            n += 1;
            bytes += k as u64;
            if lens.len() < 4 {
                lens.push(k);
            }
        }
    }
    (n, bytes, lens)
}

/// Every datagram `s` receives until `want` have arrived (or 5 s passed)
/// and then none for `quiet`: (count, bytes, first lengths). Waiting for
/// the replies a test expects, rather than for a fixed window, keeps a
/// loaded machine (CI runs tests side by side) from turning a late reply
/// into a missing one; the quiet tail still catches replies beyond `want`.
pub(crate) fn drain_replies(s: &UdpSocket, want: u64, quiet: Duration) -> (u64, u64, Vec<usize>) {
    const PATIENCE: Duration = Duration::from_secs(5);
    let (mut n, mut bytes, mut lens) = (0, 0, Vec::new());
    let mut buf = vec![0u8; 65_536];
    let t0 = Instant::now();
    let mut last = t0;
    loop {
        if let Ok(k) = s.recv(&mut buf) {
            n += 1;
            bytes += k as u64;
            if lens.len() < 4 {
                lens.push(k);
            }
            last = Instant::now();
        }
        let waited_enough = n >= want || t0.elapsed() >= PATIENCE;
        if waited_enough && last.elapsed() >= quiet {
            return (n, bytes, lens);
        }
    }
}

// Issue 19, attack 1: one 1470-byte iperf-style `-R` request made a default
// server send 8,501 datagrams of 1470 B in 10 s (164,445 from a 76-B one).
#[test]
fn unverified_udp_reverse_is_refused_by_default_and_a_cookie_client_still_works() {
    let (srv, port) = udp_server(&[]);
    let s = sock([127, 0, 0, 3]);
    s.connect(("127.0.0.1", port)).unwrap();
    for dir in [Direction::Reverse, Direction::FullDuplex] {
        let req = header(dir, secs(10), 10_000_000, 1470, true);
        for _ in 0..5 {
            s.send(&req).unwrap();
        }
    }
    let (n, bytes, _) = drain(&s, Duration::from_millis(1500));
    assert_eq!(
        (n, bytes),
        (0, 0),
        "a default server sent to an unverified peer"
    );
    let log = srv.wait_err("the refusal", Duration::from_secs(5), |e| {
        e.contains("opts in with --unverified-reverse-rate")
    });
    assert!(log.contains("refusing a UDP test from 127.0.0.3"), "{log}");
    // A bloatlab client proves its address with the cookie and is served.
    let o = std::process::Command::new(BIN)
        .args(["client", "-u", "127.0.0.1", "-p", &port.to_string()])
        .args(["-R", "-t", "1", "-b", "1m"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn an_operator_who_opts_in_serves_unverified_reverse_within_rate_and_time() {
    // Tight timing bounds: nothing else may load the machine meanwhile.
    let _x = crate::harness::load::exclusive();
    let (_srv, port) = udp_server(&[
        "--unverified-reverse-rate",
        "1m",
        "--unverified-reverse-time",
        "1",
    ]);
    let s = sock([127, 0, 0, 4]);
    s.connect(("127.0.0.1", port)).unwrap();
    // Above the time cap: refused, nothing sent.
    s.send(&header(Direction::Reverse, secs(10), 1_000_000, 1470, true))
        .unwrap();
    assert_eq!(drain(&s, Duration::from_millis(500)).0, 0);
    // Within it: served, and no more than rate x time (125 kB) plus a FIN.
    s.send(&header(Direction::Reverse, secs(1), 1_000_000, 1470, true))
        .unwrap();
    let (n, bytes, _) = drain(&s, Duration::from_millis(2500));
    assert!(n > 20, "opted-in reverse test not served ({n} datagrams)");
    assert!(bytes <= 125_000 * 11 / 10 + 2 * 1470, "{bytes} bytes");
}

// docs/security.md, "Amplification": what each reply costs, measured.
#[test]
fn every_reply_the_server_sends_is_measured_and_bounded() {
    let (_udp, uport) = udp_server(&[]);
    let s = sock([127, 0, 0, 5]);
    s.connect(("127.0.0.1", uport)).unwrap();
    // Cookie reply: a bloatlab -R header without a cookie gets 36 bytes,
    // from the shortest header that can carry one (180 B) up.
    for len in [180u64, 1470] {
        let req = header(Direction::Reverse, secs(1), 1_000_000, len, false);
        s.send(&req).unwrap();
        let (n, bytes, lens) = drain_replies(&s, 1, Duration::from_millis(300));
        assert_eq!((n, lens), (1, vec![36]), "cookie reply to {len} B");
        assert!(bytes * 5 <= len, "cookie reply {bytes} B for {len} B");
    }
    // UDP AckFIN: a header and a FIN of 1470 B get one 128-byte AckFIN per
    // FIN; a forged header and short repeated FINs never get more bytes
    // than they sent (iperf-style and bloatlab headers alike).
    for (k, iperf) in [(6u8, true), (7, false)] {
        let f = sock([127, 0, 0, k]);
        f.connect(("127.0.0.1", uport)).unwrap();
        let mut d = header(Direction::Forward, secs(1), 1_000_000, 1470, iperf);
        let mut bytes_in = d.len() as u64;
        f.send(&d).unwrap();
        stamp(&mut d, -2, realtime_now());
        f.send(&d).unwrap();
        bytes_in += d.len() as u64;
        let (n, bytes_out, lens) = drain_replies(&f, 1, Duration::from_millis(300));
        // A bloatlab peer's AckFIN carries the report frame (about 1 kB
        // here), paid from the flow's 2940 bytes.
        assert_eq!(n, 1, "AckFIN (iperf header {iperf})");
        assert!(
            if iperf {
                lens == vec![128]
            } else {
                lens[0] > 128
            },
            "AckFIN of {lens:?} (iperf header {iperf})"
        );
        assert!(bytes_out <= bytes_in, "{bytes_out} B for {bytes_in} B");
        for seq in 3..23 {
            stamp(&mut d, -seq, realtime_now());
            f.send(&d[..20]).unwrap();
            bytes_in += 20;
        }
        let (n2, more, _) = drain_replies(&f, 0, Duration::from_secs(1));
        assert!(
            bytes_out + more <= bytes_in && n2 <= 4,
            "{n2} AckFINs, {} B out for {bytes_in} B in",
            bytes_out + more
        );
    }

    // The TCP server's port: probes (UDP), flow queries and tests (TCP).
    let tport = free_port();
    let p = tport.to_string();
    let tcp = Proc::bloatlab(&["server", "-p", &p]);
    tcp.wait_listening(tport, Listen::Tcp);
    // Probe reply: exactly the request's length, one for one.
    let q = sock([127, 0, 0, 8]);
    q.connect(("127.0.0.1", tport)).unwrap();
    let mut req = vec![0u8; 96];
    bloatlab_probe::packet::Repr::request(77, 1, realtime_now())
        .emit(&mut req)
        .unwrap();
    let ok = (0..20).any(|_| {
        q.send(&req).unwrap();
        drain(&q, Duration::from_millis(100)).2 == vec![96]
    });
    assert!(ok, "no 96-byte reply to a 96-byte probe");
    // Flow query: 18 bytes over TCP (the handshake proves the address)
    // get exactly 64.
    let query = bloatlab_wire::flow_query::FlowQueryRepr {
        flow_id: 0x1234_5678,
        key: None,
    }
    .to_vec()
    .unwrap();
    let mut t = TcpStream::connect(("127.0.0.1", tport)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    t.write_all(&query).unwrap();
    let mut reply = Vec::new();
    let _ = t.read_to_end(&mut reply);
    assert_eq!((query.len(), reply.len()), (18, 64), "flow query");
    // TCP forward test: the server's replies (ack, report) are a small
    // part of what the client sent.
    let mut c = ClientConfig::new("127.0.0.1");
    c.amount = secs(1);
    let hdr = bloatlab_engine::tcp::handshake::client_header(&c, realtime_now(), None).unwrap();
    let mut t = TcpStream::connect(("127.0.0.1", tport)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    t.write_all(&hdr).unwrap();
    let data = vec![0u8; 128 * 1024];
    t.write_all(&data).unwrap();
    t.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    let _ = t.read_to_end(&mut back);
    let sent = (hdr.len() + data.len()) as u64;
    assert!(
        (back.len() as u64) * 10 <= sent,
        "TCP forward test: {} B back for {sent} B",
        back.len()
    );
}

// Issue 19, attack 5, client side: "our client's -u -n 3M -b 1m against --max-duration 3
// still sends for 25.2 s and exits 0".
#[test]
fn our_udp_client_stops_at_the_server_deadline_and_exits_1_saying_so() {
    let (_srv, port) = udp_server(&["--max-duration", "1"]);
    let t0 = Instant::now();
    let out = std::process::Command::new(BIN)
        .args(["client", "127.0.0.1", "-u", "-p", &port.to_string()])
        .args(["-b", "1m", "-n", "3M"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let took = t0.elapsed();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // The server's AckFIN comes at 1 s + 2 s grace; -n 3M would take 25 s.
    assert!(took < Duration::from_secs(8), "ran {took:?}: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the server ended the test at its deadline"),
        "{stderr}"
    );
    // The server's report is printed, as after a FIN exchange.
    assert!(stdout.contains("Server Report"), "{stdout}");
}

// Issue 19, attack 5: "a flow whose header says -t 1 was received for 20 s".
#[test]
fn a_udp_flow_whose_header_says_t_1_is_ended_after_its_deadline_with_an_ack_fin() {
    // Tight timing bounds: nothing else may load the machine meanwhile.
    let _x = crate::harness::load::exclusive();
    let (srv, port) = udp_server(&[]);
    let s = sock([127, 0, 0, 9]);
    s.connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let mut d = header(Direction::Forward, secs(1), 1_000_000, 500, true);
    let t0 = Instant::now();
    let mut buf = [0u8; 2048];
    let mut ack_at = None;
    let mut seq = 1;
    // Keep sending for 4.5 s (deadline 1 s + 2 s grace).
    while t0.elapsed() < Duration::from_millis(4500) {
        stamp(&mut d, seq, realtime_now());
        s.send(&d).unwrap();
        seq += 1;
        if let Ok(n) = s.recv(&mut buf) {
            assert_eq!(n, 128, "an AckFIN");
            ack_at.get_or_insert(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let at = ack_at.expect("no AckFIN at the deadline");
    assert!(
        at >= Duration::from_millis(2800) && at <= Duration::from_millis(4400),
        "AckFIN at {at:?}, deadline 3 s"
    );
    // The client's own FIN (late) still gets it.
    stamp(&mut d, -seq, realtime_now());
    s.send(&d).unwrap();
    let (n, _, lens) = drain_replies(&s, 1, Duration::from_millis(300));
    assert_eq!((n, lens), (1, vec![128]), "AckFIN for the late FIN");
    let log = srv.err();
    assert!(log.contains("past its deadline"), "{log}");
    // One flow, not a new one per datagram after the end.
    assert_eq!(
        srv.out().matches("connected with").count(),
        1,
        "{}",
        srv.out()
    );
}

// Issue 19, attack 6: UDP idle-end warnings skipped the log budget: 24,576
// lines (4 MB) in 50 s, one per attacker datagram.
#[test]
fn udp_idle_end_warnings_stay_within_the_log_budget() {
    let (srv, port) = udp_server(&["--header-timeout", "1"]);
    let d = header(Direction::Forward, secs(1), 1_000_000, 200, true);
    // 1000 one-datagram flows from 5 sources (200 each: the 129th on of each
    // are refused by --max-streams, which counts flows).
    let t0 = Instant::now();
    for src in 10..15u8 {
        let socks: Vec<UdpSocket> = (0..200).map(|_| sock([127, 0, 0, src])).collect();
        for s in &socks {
            s.send_to(&d, ("127.0.0.1", port)).unwrap();
        }
    }
    // Every flow ends idle after 1 s.
    std::thread::sleep(Duration::from_millis(3000));
    let secs = t0.elapsed().as_secs() + 1;
    let log = srv.err();
    let lines = log.lines().count() as u64;
    // Burst 20, then 2 a second (loglimit), plus a line or two of start-up.
    assert!(
        lines <= 20 + 2 * secs + 3,
        "{lines} log lines in {secs} s for 1000 idle flows:\n{log}"
    );
    assert!(log.contains("suppressed") || lines >= 20, "{log}");
    // A flow of one datagram never became a test: no report lines on
    // stdout (issue 19 audit: each printed a `connected with` line and a
    // report).
    assert_eq!(
        srv.out().matches("connected with").count(),
        0,
        "{}",
        srv.out()
    );
}
