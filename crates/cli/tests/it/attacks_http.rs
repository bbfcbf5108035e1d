//! The HTTP service against clients that hold connections half-open (issue 20):
//! a TCP connection to --https that never starts its TLS handshake, or stops
//! half-way, is cut at `--handshake-timeout` (a stall), one that trickles its
//! ClientHello at `--http-wait-max`, one to --http that sends part of a request head (or
//! nothing more after a response) at `--http-header-timeout`, each counted in
//! the statistics line under its own reason, while clients that keep to the
//! deadlines are served; and a source that fills the connection table loses
//! its oldest connection to a client from another source. The deadlines' logic is unit-tested in
//! crates/http/src/deadlines.rs; these tests guard the flags and the wiring.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::{stdout, stop_http_server};
use crate::http_service::{curl, server};

/// Reads `s` until the server closes it; how long after `t0` that was, and
/// what was read. Panics if the server keeps it open 10 s.
fn closed_after(s: &mut TcpStream, t0: Instant) -> (Duration, String) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("still open after 10 s; read {got:?}")
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // A reset is a close too.
            Err(_) => break,
        }
    }
    (t0.elapsed(), String::from_utf8_lossy(&got).into_owned())
}

/// About `want` after `t0`: not before (the server's clock starts at accept,
/// after our connect) and not much later (the 250 ms loop tick, a busy machine).
fn assert_near(took: Duration, want: Duration, what: &str) {
    assert!(
        took >= want - Duration::from_millis(100) && took < want + Duration::from_millis(2500),
        "{what}: closed after {took:?}, the deadline was {want:?}"
    );
}

#[test]
fn a_silent_client_on_https_is_cut_at_the_handshake_deadline_and_counted() {
    // The head deadline (10 s by default) is far from the handshake's: the cut at
    // 1 s can only be the handshake deadline (before issue 20 it was
    // --header-timeout's 4 s).
    let (p, _, https) = server(&[
        "--no-iperf",
        "--https",
        "0",
        "--handshake-timeout",
        "1",
        "--http-wait-max",
        "3",
    ]);
    let base = https.unwrap();
    let hostport = base.trim_start_matches("https://").to_string();
    let t0 = Instant::now();
    let mut silent = TcpStream::connect(&hostport).unwrap();
    // A second one that starts a TLS record and stops there is cut as well.
    let mut partial = TcpStream::connect(&hostport).unwrap();
    partial
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .unwrap();
    // A third trickles its ClientHello a byte every 400 ms: never stalled for
    // the 1 s stall limit, it is cut at the 3 s wait max.
    let mut trickle = TcpStream::connect(&hostport).unwrap();
    let mut w = trickle.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let mut bytes = vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
        bytes.resize(40, 0);
        for b in bytes {
            if w.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(400));
        }
    });
    let (took, got) = closed_after(&mut silent, t0);
    assert_near(took, Duration::from_secs(1), "silent TLS client");
    assert!(got.is_empty(), "{got:?}");
    let (took, _) = closed_after(&mut partial, t0);
    assert_near(took, Duration::from_secs(1), "partial ClientHello");
    let (took, _) = closed_after(&mut trickle, t0);
    assert_near(took, Duration::from_secs(3), "trickled ClientHello");
    writer.join().unwrap();
    // A client that does its handshake is served.
    let o = curl(&[
        "-k",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{http_version}",
        &format!("{base}/api/v1/small"),
    ]);
    assert_eq!(stdout(&o), "200 2");
    let st = stop_http_server(p);
    assert_eq!((st.cut_handshake, st.cut_request_head), (3, 0), "{st:?}");
    assert_eq!((st.accepted, st.requests), (4, 1), "{st:?}");
}

#[test]
fn a_partial_or_late_request_head_on_http_is_cut_at_the_head_deadline_and_counted() {
    let (p, http, _) = server(&[
        "--no-iperf",
        "--http",
        "0",
        "--http-header-timeout",
        "1",
        // Never the one that cuts here: the handshake is HTTPS's.
        "--handshake-timeout",
        "30",
        // --header-timeout is the iperf service's: it does not lengthen ours.
        "--header-timeout",
        "30",
    ]);
    let base = http.unwrap();
    let hostport = base.trim_start_matches("http://").to_string();
    let one = Duration::from_secs(1);
    // A head that never ends (no blank line).
    let t0 = Instant::now();
    let mut partial = TcpStream::connect(&hostport).unwrap();
    partial
        .write_all(b"GET /api/v1/small HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // A client that connects and sends nothing (not even enough bytes to tell
    // HTTP/1.1 from HTTP/2).
    let mut silent = TcpStream::connect(&hostport).unwrap();
    let (took, got) = closed_after(&mut partial, t0);
    assert_near(took, one, "partial head");
    assert!(got.is_empty(), "no response to half a head: {got:?}");
    let (took, _) = closed_after(&mut silent, t0);
    assert_near(took, one, "silent plain client");
    // A head finished in time is served; on keep-alive, the wait for the next
    // head starts after the response, and it is cut 1 s later.
    let mut slow = TcpStream::connect(&hostport).unwrap();
    slow.write_all(b"GET /api/v1/small HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(400));
    slow.write_all(b"Host: x\r\n\r\n").unwrap();
    let t1 = Instant::now();
    let (took, got) = closed_after(&mut slow, t1);
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
    assert_near(took, one, "idle keep-alive connection");
    // And an ordinary client.
    let o = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{base}/api/v1/small"),
    ]);
    assert_eq!(stdout(&o), "200");
    let st = stop_http_server(p);
    assert_eq!((st.cut_handshake, st.cut_request_head), (0, 3), "{st:?}");
    assert_eq!((st.accepted, st.requests), (4, 2), "{st:?}");
}

#[test]
fn a_source_that_fills_the_connection_table_cannot_keep_another_source_out() {
    // --max-per-source as large as --max-connections: one source may fill the
    // table (4 connections holding half a head, each within its 10 s head stall
    // limit). A client from another address is still served: it takes the place
    // of the filling source's oldest connection (the engine's table, issue 19's
    // rule); before, it got 429 ("--max-connections (4) reached").
    let (p, http, _) = server(&[
        "--no-iperf",
        "--http",
        "0",
        "--max-connections",
        "4",
        "--max-per-source",
        "4",
    ]);
    let base = http.unwrap();
    let hostport = base.trim_start_matches("http://").to_string();
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(&hostport).unwrap();
            s.write_all(b"GET /api/v1/small HTTP/1.1\r\n").unwrap();
            // Admitted in this order: the first is the oldest.
            std::thread::sleep(Duration::from_millis(50));
            s
        })
        .collect();
    let t0 = Instant::now();
    let o = curl(&[
        "--interface",
        "127.0.0.2",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{base}/api/v1/small"),
    ]);
    assert_eq!(stdout(&o), "200", "{}", crate::harness::stderr(&o));
    // The oldest of the four was closed for it, at once, not at its deadline.
    let (took, got) = closed_after(&mut held[0], t0);
    assert!(took < Duration::from_secs(3), "closed after {took:?}");
    assert!(got.is_empty(), "{got:?}");
    // The others stay (until their own head deadline).
    held[1]
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b = [0u8; 1];
    let e = held[1].read(&mut b).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{e}"
    );
    drop(held);
    let st = stop_http_server(p);
    assert_eq!((st.accepted, st.refused, st.requests), (5, 0, 1), "{st:?}");
    // The one place given to the newcomer, counted where an operator reads it.
    assert_eq!(st.evicted, 1, "{st:?}");
}
