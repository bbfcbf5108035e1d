//! Loopback tests of the TCP server's bounds (connection caps, idle
//! timeouts, request caps, pacing sleeps) and of the client's exit
//! verdicts against fake peers built from raw sockets.

use super::client;
use super::handshake::client_header;
use super::server;
use crate::config::{Amount, ClientConfig, Direction, Out, OutputFormat, ServerConfig};
use crate::limits::ServerLimits;
use bloatlab_units::{BitRate, Bytes};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A server on a free loopback port, serving on its own thread for the
/// rest of the test process.
fn start(cfg: ServerConfig) -> SocketAddr {
    let cfg = ServerConfig {
        port: 0,
        socket: crate::config::SocketOptions {
            bind: Some("127.0.0.1:0".parse().unwrap()),
            ..Default::default()
        },
        format: OutputFormat::Json,
        out: Out::capture().0,
        ..cfg
    };
    let l = server::bind(&cfg).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || server::serve(&cfg, l));
    addr
}

fn client_cfg(addr: SocketAddr, secs: f64) -> ClientConfig {
    let mut c = ClientConfig::new(addr.ip().to_string());
    c.port = addr.port();
    c.amount = Amount::Time(Duration::from_secs_f64(secs));
    c.format = OutputFormat::Json;
    c.out = Out::capture().0;
    c
}

/// Waits until the server closes `s` (EOF or reset); returns how long it took.
fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut b = [0u8; 65536];
    while t0.elapsed() < limit {
        match s.read(&mut b) {
            Ok(0) => return Some(t0.elapsed()),
            Ok(_) => {}
            Err(e) if super::io::is_transient(&e) => {}
            Err(_) => return Some(t0.elapsed()),
        }
    }
    None
}

#[test]
fn a_connection_over_the_cap_is_closed_at_once_and_the_server_goes_on() {
    let addr = start(ServerConfig {
        max_connections: 2,
        header_timeout: Duration::from_secs(30),
        ..ServerConfig::default()
    });
    let _a = TcpStream::connect(addr).unwrap();
    let b = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut c = TcpStream::connect(addr).unwrap();
    let took = closed_within(&mut c, Duration::from_secs(2));
    assert!(took.is_some(), "the third connection was kept open");
    // A slot frees when a connection ends; a real test then runs.
    drop(b);
    std::thread::sleep(Duration::from_millis(200));
    let out = client::run(&client_cfg(addr, 0.3)).unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
}

#[test]
fn one_source_cannot_take_every_slot() {
    let addr = start(ServerConfig {
        max_per_source: 1,
        header_timeout: Duration::from_secs(30),
        ..ServerConfig::default()
    });
    let _a = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut b = TcpStream::connect(addr).unwrap();
    assert!(closed_within(&mut b, Duration::from_secs(2)).is_some());
}

#[test]
fn a_silent_peer_after_a_valid_header_is_dropped_after_the_idle_timeout() {
    let addr = start(ServerConfig {
        idle_timeout: Duration::from_millis(400),
        ..ServerConfig::default()
    });
    // -n tests had no deadline at all; -t ones none before -t + slop.
    for amount in [
        Amount::Bytes(Bytes(1 << 30)),
        Amount::Time(Duration::from_secs(600)),
    ] {
        let mut cfg = client_cfg(addr, 1.0);
        cfg.amount = amount;
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&client_header(&cfg, bloatlab_os::clock::realtime_now(), None).unwrap())
            .unwrap();
        let took = closed_within(&mut s, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{amount:?}: silent connection kept"));
        assert!(took >= Duration::from_millis(350), "{amount:?}: {took:?}");
    }
}

#[test]
fn requests_above_a_cap_are_refused_and_the_client_says_so() {
    let addr = start(ServerConfig {
        limits: ServerLimits {
            max_duration: Duration::from_secs(2),
            max_streams: 2,
            ..ServerLimits::default()
        },
        ..ServerConfig::default()
    });
    let t0 = Instant::now();
    let out = client::run(&client_cfg(addr, 5.0));
    let failed = match out {
        Ok(c) => !c.failures.is_empty(),
        Err(_) => true,
    };
    assert!(failed, "a -t 5 test against --max-duration 2 succeeded");
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    let mut many = client_cfg(addr, 0.3);
    many.parallel = 3;
    let failed = match client::run(&many) {
        Ok(c) => c.failures.len() == 3 || c.connections.is_empty(),
        Err(_) => true,
    };
    assert!(failed, "-P 3 against --max-streams 2 was served");
    // Within the caps: served.
    let out = client::run(&client_cfg(addr, 0.3)).unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
}

#[test]
fn a_paced_reverse_sender_stops_when_its_client_leaves() {
    // One slot: the next test runs only once the reverse test's thread,
    // which sleeps between writes at -b 1 kbit/s, noticed the close.
    let addr = start(ServerConfig {
        max_connections: 1,
        ..ServerConfig::default()
    });
    let mut cfg = client_cfg(addr, 3000.0);
    cfg.direction = Direction::Reverse;
    cfg.rate = Some(BitRate(1000));
    cfg.buffer_len = Some(Bytes(1000));
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&client_header(&cfg, bloatlab_os::clock::realtime_now(), None).unwrap())
        .unwrap();
    let mut b = [0u8; 1000];
    s.read_exact(&mut b).unwrap(); // the first write; the next is 8 s away
    drop(s);
    std::thread::sleep(Duration::from_millis(600));
    let out = client::run(&client_cfg(addr, 0.3)).unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
}

/// A fake server: accepts one connection and hands it to `then`.
fn fake_server(then: impl FnOnce(TcpStream) + Send + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        if let Ok((s, _)) = l.accept() {
            then(s);
        }
    });
    addr
}

#[test]
fn a_peer_reset_fails_the_run() {
    let addr = fake_server(|mut s| {
        let mut b = [0u8; 60];
        let _ = s.read_exact(&mut b);
        std::thread::sleep(Duration::from_millis(50));
        // SO_LINGER 0: close() sends RST.
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    });
    let mut cfg = client_cfg(addr, 2.0);
    let (err, said) = Out::capture();
    cfg.err = err;
    let out = client::run(&cfg).unwrap();
    assert_eq!(out.failures.len(), 1, "{out:?}");
    // A reset before any data moved is a refusal (issue 19); how the sender
    // sees it (ECONNRESET or the peer's close between writes) decides the words.
    let ended = |t: &str| t.contains("reset") || t.contains("refused the test");
    assert!(ended(&out.failures[0].1), "{:?}", out.failures);
    // The failure is said on the run's error writer, not the process's stderr.
    let said = String::from_utf8(said.lock().unwrap().clone()).unwrap();
    assert!(said.starts_with("[  1] ") && ended(&said), "{said}");
}

/// The engine embedded: the server's readiness line (stdout carries only JSON) and its
/// rate-limited complaints about bad peers go to the writer in its config.
#[test]
fn a_servers_complaints_go_to_its_own_error_writer() {
    let (err, said) = Out::capture();
    let addr = start(ServerConfig {
        err,
        header_timeout: Duration::from_millis(200),
        ..ServerConfig::default()
    });
    let text = || String::from_utf8(said.lock().unwrap().clone()).unwrap();
    let said_within_5s = |what: &str| {
        let t0 = Instant::now();
        while !text().contains(what) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        text().contains(what)
    };
    let ready = format!("Server listening on TCP port {}", addr.port());
    assert!(said_within_5s(&ready), "{}", text());
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[0xff; 200]).unwrap();
    let complaint = "bloatlab server: dropping connection from 127.0.0.1:";
    assert!(said_within_5s(complaint), "{}", text());
}

#[test]
fn a_server_that_never_reads_is_a_stall_with_zero_rate_intervals() {
    let addr = fake_server(|s| {
        std::thread::sleep(Duration::from_secs(8));
        drop(s);
    });
    let mut cfg = client_cfg(addr, 6.0);
    cfg.interval = Some(Duration::from_millis(500));
    let t0 = Instant::now();
    let out = client::run(&cfg).unwrap();
    let took = t0.elapsed();
    assert_eq!(out.failures.len(), 1, "{:?}", out.failures);
    assert!(out.failures[0].1.contains("stalled"), "{:?}", out.failures);
    assert!(took < Duration::from_secs(6), "{took:?}");
    // Interval lines kept coming while nothing moved.
    let zero = out
        .send_intervals
        .iter()
        .filter(|(_, s)| s.bytes.0 == 0)
        .count();
    assert!(zero >= 3, "{:?}", out.send_intervals.len());
}

#[test]
fn drain_time_is_not_test_time() {
    // Reads everything, then waits 2 s before closing.
    let addr = fake_server(|mut s| {
        let mut b = vec![0u8; 1 << 16];
        while matches!(s.read(&mut b), Ok(n) if n > 0) {}
        std::thread::sleep(Duration::from_secs(2));
    });
    let out = client::run(&client_cfg(addr, 0.5)).unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let total = out.send_totals.values().next().unwrap();
    let secs = total.span.len().as_secs_f64();
    assert!(
        (0.45..0.9).contains(&secs),
        "reported {secs} s for a 0.5 s test"
    );
}

/// The engine embedded: a client's report goes to the writer in its config, not to the
/// process's stdout, and the run's results come back as values.
#[test]
fn a_clients_report_goes_to_its_own_writer() {
    let addr = start(ServerConfig::default());
    let mut cfg = client_cfg(addr, 0.3);
    cfg.format = OutputFormat::Console;
    cfg.interval = Some(Duration::from_millis(100));
    let (out, buf) = Out::capture();
    cfg.out = out;
    let collected = client::run(&cfg).unwrap();
    assert!(collected.failures.is_empty(), "{:?}", collected.failures);
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    assert!(text.starts_with("-----"), "{text}");
    assert!(
        text.contains(&format!(
            "Client connecting to 127.0.0.1, TCP port {}",
            addr.port()
        )),
        "{text}"
    );
    assert!(text.contains("[  1] local 127.0.0.1 port"), "{text}");
    assert!(text.contains("[  1] 0.0000-0.1000 sec"), "{text}");
    assert!(text.contains("[  1] 0.0000-0.3"), "{text}");
    assert!(!collected.send_totals.is_empty());
}
