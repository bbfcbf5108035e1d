//! A real probe client keeps its probes while another source floods the
//! responder with valid requests, each from a new session (the worst case for
//! the session table: every datagram creates state). Loopback only: the flood
//! comes from 127.0.0.2, the client from 127.0.0.1.
//!
//! The suite runs 100 000 datagrams; `bench/probe_flood.sh` runs 1 000 000
//! through `BLOATLAB_FLOOD_DATAGRAMS` (docs/benchmarks.md has the result).
//! The flood is paced at `BLOATLAB_FLOOD_PPS` (default 100 000/s) so it is
//! bounded in time as well as count.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bloatlab_probe::client::{self, ClientConfig};
use bloatlab_probe::packet::Repr;
use bloatlab_probe::responder;
use bloatlab_probe::session::Limit;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Sends `count` requests with fresh session ids to `to` from 127.0.0.2 at
/// about `pps`; returns how many were sent and how long it took.
fn flood(to: SocketAddr, count: u64, pps: u64, stop: &AtomicBool) -> (u64, Duration) {
    let sock = UdpSocket::bind("127.0.0.2:0").expect("bind 127.0.0.2 (loopback)");
    let mut buf = [0u8; 80];
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while sent < count && !stop.load(Ordering::Relaxed) {
        // xorshift: a new session id per datagram.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        Repr::request(x, 0, Duration::from_secs(1))
            .emit(&mut buf)
            .unwrap();
        // ENOBUFS and friends just mean the flood was throttled.
        if sock.send_to(&buf, to).is_ok() {
            sent += 1;
        }
        if sent.is_multiple_of(256) {
            let due = Duration::from_secs_f64(sent as f64 / pps as f64);
            if let Some(wait) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
    (sent, t0.elapsed())
}

#[test]
fn probe_loss_stays_under_one_percent_during_a_session_flood() {
    let count = env_u64("BLOATLAB_FLOOD_DATAGRAMS", 100_000);
    let pps = env_u64("BLOATLAB_FLOOD_PPS", 100_000).max(1);
    let resp = responder::spawn("127.0.0.1:0".parse().unwrap()).unwrap();
    let target = resp.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = std::thread::spawn({
        let stop = stop.clone();
        move || flood(target, count, pps, &stop)
    });
    // Probes for the flood's planned length plus a margin, at 100 Hz.
    let secs = (count as f64 / pps as f64).ceil() + 1.0;
    let cfg = ClientConfig::new(target, Limit::Duration(Duration::from_secs_f64(secs)));
    let report = client::run(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    let (sent, took) = flooder.join().unwrap();
    let sum = report.summary();
    let loss = sum.lost() as f64 / sum.sent.max(1) as f64;
    let answered = resp.stats().answered.load(Ordering::Relaxed);
    eprintln!(
        "flood: {sent} datagrams in {took:?} ({:.0}/s); responder answered {answered}; \
         client: {} sent, {} received, {} lost ({:.3} %), rx_count {}",
        sent as f64 / took.as_secs_f64(),
        sum.sent,
        sum.received,
        sum.lost(),
        loss * 100.0,
        report.server_rx_count
    );
    assert!(sent >= count * 9 / 10, "the flood was not sent: {sent}");
    assert!(sum.sent >= 100, "{sum:?}");
    assert!(
        loss < 0.01,
        "probe loss {:.2} % under the flood",
        loss * 100.0
    );
    // The client's session kept its state: the responder counted (almost) every probe.
    assert!(
        report.server_rx_count + sum.lost() >= sum.sent,
        "session state lost: rx_count {} of {} sent",
        report.server_rx_count,
        sum.sent
    );
    resp.stop();
}
