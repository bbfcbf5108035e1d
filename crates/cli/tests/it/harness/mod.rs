//! What every integration test shares, in one place:
//!
//! * [`Proc`]: a child process killed by PID and reaped on drop, its stdout and stderr
//!   drained by threads (so a chatty child never blocks on a full pipe), with readiness
//!   checks: wait for a line ([`Proc::wait_out`]) or for a listening port
//!   ([`Proc::wait_listening`]) instead of sleeping a fixed time.
//! * [`free_port`]: a loopback port free for TCP and UDP alike.
//! * [`tempdir`]: a fresh directory (`tempfile`), removed when the guard drops.
//! * [`lab`]: labs brought up for a test and always torn down.
//! * [`load`]: the load lock. Cargo used to run each test file as its own binary, one
//!   after another, so a timing-sensitive lab measurement never ran beside a loopback
//!   flow at 17 Gbit/s. In one binary it would; the lock keeps it apart (rules in its
//!   module doc).
//! * [`rpm_peers`]: RPM peers no one here wrote (Cloudflare's mach, nginx as
//!   network-quality/server's example) for the interop tests.

pub mod lab;
pub mod load;
mod proc;
pub mod rpm_peers;

pub use proc::{Listen, Proc, READY};

use std::net::{TcpListener, UdpSocket};
use std::process::Output;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_bloatlab");

/// A loopback port free for both TCP and UDP right now (servers listen on both: TCP
/// flows and UDP latency probes share the port).
pub fn free_port() -> u16 {
    loop {
        let t = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral TCP port");
        let port = t.local_addr().expect("local address").port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A fresh directory under the system temp dir, removed with everything in it when the
/// guard drops (also when the test fails).
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("bl-it-")
        .tempdir()
        .expect("create a temp dir")
}

/// Polls `f` every 50 ms until it returns true or `timeout` passes; the last answer.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// A process's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The statistics line `bloatlab server --no-iperf --http/--https` prints
/// when it stops (`HTTP service: ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpStats {
    pub accepted: u64,
    pub refused: u64,
    /// Most admitted connections open at once.
    pub peak_open: u64,
    pub requests: u64,
    pub sent: u64,
    pub received: u64,
    /// Connections cut at `--handshake-timeout`.
    pub cut_handshake: u64,
    /// Connections cut at `--http-header-timeout`.
    pub cut_request_head: u64,
}

/// Stops a `bloatlab server --no-iperf` with SIGTERM (by its PID), asserts
/// it exits 0 and returns its statistics line.
pub fn stop_http_server(mut server: Proc) -> HttpStats {
    unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) };
    let st = server.wait_exit(Duration::from_secs(10));
    assert!(st.success(), "{st}\n{}", server.transcript());
    let out = server.out();
    let line = out
        .lines()
        .find(|l| l.starts_with("HTTP service:"))
        .unwrap_or_else(|| panic!("no statistics line\n{}", server.transcript()));
    eprintln!("{line}");
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(n.len(), 8, "{line}");
    HttpStats {
        accepted: n[0],
        refused: n[1],
        peak_open: n[2],
        requests: n[3],
        sent: n[4],
        received: n[5],
        cut_handshake: n[6],
        cut_request_head: n[7],
    }
}

/// A self-signed P-256 certificate and its key made by openssl (a tool no one
/// here wrote), valid one day, for `subject` (`/CN=...`) with `extra`
/// `openssl req` arguments (`-addext subjectAltName=...`).
pub fn openssl_self_signed(
    cert: &std::path::Path,
    key: &std::path::Path,
    subject: &str,
    extra: &[&str],
) {
    let o = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", subject])
        .args(extra)
        .arg("-keyout")
        .arg(key)
        .arg("-out")
        .arg(cert)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl is installed (scripts/setup.sh)");
    assert!(o.status.success(), "openssl req: {}", stderr(&o));
}

/// What `bloatlab server --https` printed once it listens: its base URL
/// (`https://ADDR:PORT`, without the config path) and its certificate's SHA-256
/// fingerprint.
pub fn https_url_and_fingerprint(server: &Proc) -> (String, String) {
    let out = server.wait_out("the HTTPS URL and fingerprint", READY, |s| {
        s.contains("https://") && s.contains("fingerprint")
    });
    let url = out
        .split_whitespace()
        .find(|w| w.starts_with("https://"))
        .unwrap()
        .trim_end_matches("/.well-known/nq")
        .to_owned();
    let fp = out
        .lines()
        .find(|l| l.contains("fingerprint"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap()
        .to_owned();
    (url, fp)
}
