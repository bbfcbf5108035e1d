//! Real sockets on loopback: responder and client in one process.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bloatlab_probe::ProbeError;
use bloatlab_probe::client::{self, ClientConfig, Mode};
use bloatlab_probe::clock::ClockMethod;
use bloatlab_probe::responder;
use bloatlab_probe::session::{Limit, ReplyEvent};

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn udp_probes_over_loopback_measure_exact_one_way_delays() {
    let resp = responder::spawn(localhost()).unwrap();
    let mut cfg = ClientConfig::new(resp.local_addr(), Limit::Count(50));
    cfg.size = 200;
    let stop = AtomicBool::new(false);
    let mut answered = 0;
    let report = client::run(&cfg, &stop, |line| {
        if matches!(line.event, ReplyEvent::Answered { .. }) {
            answered += 1;
            assert!(
                line.one_way.is_some(),
                "shared clock gives per-probe one-way delays"
            );
        }
    })
    .unwrap();
    assert_eq!(answered, 50);
    let sum = report.summary();
    assert_eq!((sum.sent, sum.received, sum.lost()), (50, 50, 0));
    assert_eq!(sum.clock.method, ClockMethod::Shared);
    assert_eq!(report.server_rx_count, 50);
    for p in &report.probes {
        let rtt = p.rtt.unwrap();
        assert!(
            rtt > Duration::ZERO && rtt < Duration::from_secs(1),
            "{p:?}"
        );
        let (up, down) = (p.up.unwrap(), p.down.unwrap());
        assert!(up.as_nanos() >= 0 && down.as_nanos() >= 0, "{p:?}");
        // up + down + responder processing time = RTT exactly on one clock
        let sum = up.as_nanos() + down.as_nanos();
        assert!(sum <= rtt.as_nanos() as i64, "{p:?}");
    }
    // The responder counts a reply after send_to returns, so the client can hold all 50
    // before the last is counted (seen 2 runs in 5 on a loaded machine): wait for it.
    let answered = || resp.stats().answered.load(Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    while answered() < 50 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(answered(), 50);
    resp.stop();
}

#[test]
fn ipv6_loopback_works() {
    let resp = responder::spawn("[::1]:0".parse().unwrap()).unwrap();
    let cfg = ClientConfig::new(resp.local_addr(), Limit::Count(5));
    let report = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    assert_eq!(report.summary().received, 5);
}

#[test]
fn bad_datagrams_do_not_kill_the_responder() {
    let resp = responder::spawn(localhost()).unwrap();
    let junk = UdpSocket::bind(localhost()).unwrap();
    let mut bufs: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0xff; 79], vec![0xff; 1500]];
    // a probe request truncated by one byte, and one with a future version
    let mut req = vec![0u8; 80];
    bloatlab_probe::packet::Repr::request(1, 1, Duration::from_secs(1))
        .emit(&mut req)
        .unwrap();
    bufs.push(req[..79].to_vec());
    let mut v2 = req.clone();
    v2[4] = 2;
    bufs.push(v2);
    for b in &bufs {
        junk.send_to(b, resp.local_addr()).unwrap();
    }
    let cfg = ClientConfig::new(resp.local_addr(), Limit::Count(10));
    let report = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    assert_eq!(report.summary().received, 10);
    assert!(resp.is_running());
    assert_eq!(
        resp.stats().ignored.load(Ordering::Relaxed),
        bufs.len() as u64
    );
}

#[test]
fn closed_port_is_reported_as_no_bloatlab_responder() {
    // Bind then drop, so the port is (almost certainly) closed.
    let port = UdpSocket::bind(localhost()).unwrap().local_addr().unwrap();
    let cfg = ClientConfig::new(port, Limit::Count(10));
    let err = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap_err();
    assert!(matches!(err, ProbeError::NoAnswer { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("did not answer bloatlab probes"), "{msg}");
    assert!(msg.contains(&port.to_string()), "{msg}");
}

#[test]
fn udp_echo_server_is_not_mistaken_for_a_responder() {
    // Reflects every datagram unchanged: our request magic comes back, not a reply.
    let echo = UdpSocket::bind(localhost()).unwrap();
    let addr = echo.local_addr().unwrap();
    echo.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let t = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut buf = [0u8; 2048];
            while !done.load(Ordering::Relaxed) {
                if let Ok((n, from)) = echo.recv_from(&mut buf) {
                    let _ = echo.send_to(&buf[..n], from);
                }
            }
        }
    });
    let mut cfg = ClientConfig::new(addr, Limit::Count(1000));
    cfg.no_answer_after = Duration::from_millis(500);
    let start = std::time::Instant::now();
    let err = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap_err();
    assert!(
        matches!(err, ProbeError::NoAnswer { refused: false, .. }),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    done.store(true, Ordering::Relaxed);
    t.join().unwrap();
}

#[test]
fn icmp_echo_to_localhost() {
    if !bloatlab_testkit::tier::root("icmp_echo_to_localhost") {
        return;
    }
    let mut cfg = ClientConfig::new("127.0.0.1:0".parse().unwrap(), Limit::Count(20));
    cfg.mode = Mode::Icmp;
    cfg.size = 64;
    let report = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    let sum = report.summary();
    assert_eq!((sum.sent, sum.received), (20, 20));
    assert!(
        sum.up.is_none() && sum.down.is_none(),
        "ICMP gives RTT only"
    );
    let rtt = sum.rtt.unwrap();
    assert!(
        rtt.min.as_nanos() > 0 && rtt.max.as_millis_f64() < 1000.0,
        "{rtt:?}"
    );
}

#[test]
fn stop_flag_ends_a_long_run_early() {
    let resp = responder::spawn(localhost()).unwrap();
    let cfg = ClientConfig::new(resp.local_addr(), Limit::Duration(Duration::from_secs(60)));
    let stop = AtomicBool::new(false);
    let mut n = 0;
    let report = client::run(&cfg, &stop, |_| {
        n += 1;
        if n == 20 {
            stop.store(true, Ordering::Relaxed);
        }
    })
    .unwrap();
    let sum = report.summary();
    assert!(sum.sent >= 20 && sum.sent < 1000, "{}", sum.sent);
    assert_eq!(sum.lost(), 0);
}

/// A stop behind a queue of several seconds: replies still in flight are waited for at most
/// `STOP_LINGER`, then count as lost, so the report comes out (a test driver kills a prober
/// that outlives its grace, and the whole series would be gone).
#[test]
fn a_stopped_prober_waits_at_most_the_linger_for_replies_in_flight() {
    let resp = responder::spawn(localhost()).unwrap();
    // A relay that forwards the first 20 requests and swallows the rest (a queue whose
    // replies would come seconds later).
    let relay = UdpSocket::bind(localhost()).unwrap();
    relay
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let relay_addr = relay.local_addr().unwrap();
    let mut cfg = ClientConfig::new(relay_addr, Limit::Duration(Duration::from_secs(60)));
    cfg.timeout = Duration::from_secs(30);
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let (report, stopped_at) = std::thread::scope(|scope| {
        scope.spawn(|| {
            let (mut forwarded, mut client) = (0, None);
            let mut buf = [0u8; 2048];
            while !done.load(Ordering::Relaxed) {
                let Ok((n, from)) = relay.recv_from(&mut buf) else {
                    continue;
                };
                if from == resp.local_addr() {
                    if let Some(c) = client {
                        let _ = relay.send_to(&buf[..n], c);
                    }
                } else if forwarded < 20 {
                    client = Some(from);
                    forwarded += 1;
                    let _ = relay.send_to(&buf[..n], resp.local_addr());
                }
            }
        });
        let mut answered = 0;
        let mut stopped_at = None;
        let report = client::run(&cfg, &stop, |line| {
            if matches!(line.event, ReplyEvent::Answered { .. }) {
                answered += 1;
            }
            if answered == 20 && stopped_at.is_none() {
                // Let a few more requests go out unanswered, then stop.
                std::thread::sleep(Duration::from_millis(100));
                stopped_at = Some(std::time::Instant::now());
                stop.store(true, Ordering::Relaxed);
            }
        })
        .unwrap();
        done.store(true, Ordering::Relaxed);
        (report, stopped_at.unwrap())
    });
    let took = stopped_at.elapsed();
    let sum = report.summary();
    assert_eq!(sum.received, 20, "{sum:?}");
    // The requests still in flight at the stop, before their 30 s timeout, are neither
    // received nor lost: they are unfinished, and the loss percentage leaves them out.
    assert!(sum.unfinished >= 1, "{sum:?}");
    assert_eq!((sum.lost(), sum.decided()), (0, 20), "{sum:?}");
    assert!(took >= client::STOP_LINGER, "{took:?}");
    assert!(
        took < Duration::from_secs(5),
        "not the 30 s timeout: {took:?}"
    );
    resp.stop();
}

#[test]
fn size_out_of_range_is_rejected() {
    let mut cfg = ClientConfig::new("127.0.0.1:9".parse().unwrap(), Limit::Count(1));
    cfg.size = 79;
    let err = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap_err();
    assert!(
        matches!(
            err,
            ProbeError::BadSize {
                size: 79,
                min: 80,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn keyed_client_and_responder_talk_and_unkeyed_clients_get_nothing() {
    let key = b"abcd1234".to_vec();
    let resp = responder::spawn_keyed(localhost(), Some(key.clone())).unwrap();
    let cfg = ClientConfig::new(resp.local_addr(), Limit::Count(20));
    let report = client::run_keyed(&cfg, Some(&key), &AtomicBool::new(false), |_| {}).unwrap();
    assert_eq!(report.summary().received, 20);
    // No key, or the wrong one: the responder stays silent.
    let mut quiet = ClientConfig::new(resp.local_addr(), Limit::Count(5));
    quiet.no_answer_after = Duration::from_millis(500);
    assert!(client::run(&quiet, &AtomicBool::new(false), |_| {}).is_err());
    assert!(
        client::run_keyed(&quiet, Some(b"wrong-key"), &AtomicBool::new(false), |_| {}).is_err()
    );
    // A keyed client ignores an unkeyed responder's (untagged) replies.
    let open = responder::spawn(localhost()).unwrap();
    let mut cfg = ClientConfig::new(open.local_addr(), Limit::Count(5));
    cfg.no_answer_after = Duration::from_millis(500);
    assert!(client::run_keyed(&cfg, Some(&key), &AtomicBool::new(false), |_| {}).is_err());
    resp.stop();
    open.stop();
}

/// A session as a results file (what `bloatlab ping --json` prints): it round-trips through
/// the results crate, with the RTT and both one-way series of every probe.
#[test]
fn a_session_becomes_a_results_file_that_round_trips() {
    use bloatlab_probe::results_file::{Session, results_file};
    let resp = responder::spawn(localhost()).unwrap();
    let cfg = ClientConfig::new(resp.local_addr(), Limit::Count(5));
    let report = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    let session = Session {
        host: Some("127.0.0.1"),
        icmp: false,
        start: bloatlab_os::clock::realtime_now(),
        interrupted: false,
        argv: vec!["bloatlab".into(), "ping".into()],
    };
    let file = results_file(&session, &cfg, &report, &report.summary()).unwrap();
    let bytes = bloatlab_results::to_vec(&file).unwrap();
    let back = bloatlab_results::from_slice(&bytes).unwrap();
    assert_eq!(back.metadata.command_line, ["bloatlab", "ping"]);
    let names: Vec<_> = back.raw.latency.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(back.raw.latency.iter().all(|s| s.samples.len() == 5));
    assert!(back.derived.is_some());
    resp.stop();
}
