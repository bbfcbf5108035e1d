//! The fast attacks of issue 11 against a `bloatlab server` on loopback, as
//! tests: silent connections and garbage TCP must not cost the server threads,
//! fds or memory for longer than the header timeout, and a real test must
//! still pass afterwards. The slower replays (random and spoofed UDP, table
//! pinning, resource requests) are in `bench/attack.sh`.

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{BIN, Listen, Proc, free_port};

fn bin() -> &'static str {
    BIN
}

/// `bloatlab server -p PORT ARGS`, once it listens (read from /proc: waiting does not
/// start a test on it).
fn server(port: u16, args: &[&str]) -> Proc {
    let p = port.to_string();
    let s = Proc::bloatlab(&[&["server", "-p", &p][..], args].concat());
    s.wait_listening(port, Listen::Tcp);
    s
}

/// (threads, open fds, RSS in KiB) of a process, from /proc.
fn usage(pid: u32) -> (u64, u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    (field("Threads:"), fds, field("VmRSS:"))
}

fn real_test_passes(port: u16) {
    let o = Command::new(bin())
        .args(["client", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "a real test failed after the attack: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Waits up to `within` for `pred(usage)`; returns the last usage.
fn settle(pid: u32, within: Duration, pred: impl Fn((u64, u64, u64)) -> bool) -> (u64, u64, u64) {
    let t0 = Instant::now();
    loop {
        let u = usage(pid);
        if pred(u) || t0.elapsed() > within {
            return u;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn silent_connections_are_released_after_the_header_timeout() {
    let port = free_port();
    let srv = server(port, &["--header-timeout", "1", "--no-probes"]);
    let pid = srv.pid();
    let (threads0, fds0, _) = settle(pid, Duration::from_secs(2), |_| false);
    let conns: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert_eq!(conns.len(), 100);
    // Held open and silent: the server drops them after 1 s.
    let (threads, fds, _) = settle(pid, Duration::from_secs(10), |(t, f, _)| {
        t <= threads0 + 2 && f <= fds0 + 2
    });
    assert!(
        threads <= threads0 + 2 && fds <= fds0 + 2,
        "silent connections still cost {threads} threads (from {threads0}), {fds} fds (from {fds0})"
    );
    drop(conns);
    real_test_passes(port);
}

// Before issue 11's per-connection memory bound, 500 garbage connections grew
// the server's RSS from 6 MB to about 230 MB.
#[test]
fn garbage_tcp_costs_neither_threads_nor_memory_and_a_real_test_passes() {
    let port = free_port();
    let srv = server(port, &["--header-timeout", "1", "--no-probes"]);
    let pid = srv.pid();
    let (threads0, fds0, rss0) = settle(pid, Duration::from_secs(2), |_| false);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..500 {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            continue;
        };
        let junk: Vec<u8> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let _ = s.write_all(&junk);
    }
    let (threads, fds, rss) = settle(pid, Duration::from_secs(10), |(t, f, _)| {
        t <= threads0 + 2 && f <= fds0 + 2
    });
    assert!(threads <= threads0 + 2, "threads {threads0} -> {threads}");
    assert!(fds <= fds0 + 2, "fds {fds0} -> {fds}");
    assert!(
        rss < rss0 + 64 * 1024,
        "RSS grew from {rss0} KiB to {rss} KiB after 500 garbage connections"
    );
    real_test_passes(port);
}
