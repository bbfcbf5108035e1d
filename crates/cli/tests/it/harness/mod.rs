//! What every integration test shares, in one place:
//!
//! * [`Proc`]: a child process killed by PID and reaped on drop, its stdout and stderr
//!   drained by threads (so a chatty child never blocks on a full pipe), with readiness
//!   checks: wait for a line ([`Proc::wait_out`]) or for a listening port
//!   ([`Proc::wait_listening`]) instead of sleeping a fixed time.
//! * [`free_port`]: a port free for TCP and UDP alike, outside the ephemeral range.
//! * [`tempdir`]: a fresh directory (`tempfile`), removed when the guard drops.
//! * [`lab`]: labs brought up for a test and always torn down.
//! * [`load`]: the load lock. Cargo used to run each test file as its own binary, one
//!   after another, so a timing-sensitive lab measurement never ran beside a loopback
//!   flow at 17 Gbit/s. In one binary it would; the lock keeps it apart (rules in its
//!   module doc).
//! * [`rpm_peers`]: RPM peers no one here wrote (Cloudflare's mach, nginx as
//!   network-quality/server's example) for the interop tests.
//! * [`wire`]: a tcpdump capture in a lab host, read back as the handshakes of a
//!   client's short connections.

pub mod lab;
pub mod load;
mod proc;
pub mod rpm_peers;
pub mod wire;

pub use proc::{Listen, Proc, READY};

use std::net::{TcpListener, UdpSocket};
use std::process::Output;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_bloatlab");

/// A port free for both TCP and UDP right now (servers listen on both: TCP
/// flows and UDP latency probes share the port), and one the kernel will not
/// hand to a client socket meanwhile.
///
/// Why not port 0: the kernel's answer is an ephemeral port, and CI runs
/// tests side by side whose clients open thousands of connections (the
/// attack tests). A client's connect() can take the port between this
/// function and the server's bind(), and the server then exits with
/// EADDRINUSE while `wait_listening` sees someone else's socket. So the
/// ports come from below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`), which connect() never picks, each one
/// once per test binary.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (lo, hi) = test_port_range();
    let span = u32::from(hi - lo);
    // Start where another test binary running now is unlikely to be.
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = lo + ((start + k) % span) as u16;
        if bindable(port) {
            return port;
        }
    }
    panic!("no free port in {lo}..{hi} for TCP and UDP");
}

/// The ports [`free_port`] hands out: from 10000 up to the start of the
/// ephemeral range (at most 32768, Linux's default start).
fn test_port_range() -> (u16, u16) {
    const LOW: u16 = 10_000;
    let start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768)
        .min(32_768);
    assert!(
        start >= LOW + 1_000,
        "net.ipv4.ip_local_port_range starts at {start}: too low to keep test servers' ports \
         (from {LOW}) out of the clients' ephemeral ports"
    );
    (LOW, start)
}

/// Whether a server could bind `port` on every address, TCP and UDP (IPv6
/// only where the host has it).
fn bindable(port: u16) -> bool {
    let v6_free = |r: std::io::Result<()>| {
        r.is_ok() || r.is_err_and(|e| e.kind() != std::io::ErrorKind::AddrInUse)
    };
    TcpListener::bind(("0.0.0.0", port)).is_ok()
        && UdpSocket::bind(("0.0.0.0", port)).is_ok()
        && v6_free(TcpListener::bind(("::", port)).map(drop))
        && v6_free(UdpSocket::bind(("::", port)).map(drop))
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
    /// Connections ended to give their place to another source.
    pub evicted: u64,
}

/// Stops a `bloatlab server --no-iperf` with SIGTERM (by its PID), asserts
/// it exits 0 and returns its statistics line.
pub fn stop_http_server(mut server: Proc) -> HttpStats {
    bloatlab_os::process::signal(server.pid(), libc::SIGTERM).expect("SIGTERM our server");
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
    assert_eq!(n.len(), 9, "{line}");
    HttpStats {
        accepted: n[0],
        refused: n[1],
        peak_open: n[2],
        requests: n[3],
        sent: n[4],
        received: n[5],
        cut_handshake: n[6],
        cut_request_head: n[7],
        evicted: n[8],
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
