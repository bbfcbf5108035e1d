//! `bloatlab server --https` under 100 concurrent RPM clients (issue 20,
//! deliverable 4): 1 600 HTTP/2-over-TLS connections at once (100 clients x
//! 16, the draft's maximum) from h2load (nghttp2's load generator, not
//! ours), downloading the large object, uploading and probing the small
//! one, against a server capped at 64 connections. The server must keep to
//! its caps (never more than 64 served at once, 429 + Retry-After beyond
//! them, descriptors, memory and threads bounded) and serve a real client
//! once the crowd is gone.

use crate::harness::{Proc, READY, free_port, stderr, stdout, stop_http_server, tempdir};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const MAX_CONNECTIONS: u64 = 64;
/// Seconds h2load keeps its connections busy.
const LOAD_SECONDS: u64 = 8;

/// Descriptors, resident memory (KiB) and threads of `pid` now.
fn footprint(pid: u32) -> (u64, u64, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (fds, field("VmRSS:"), field("Threads:"))
}

/// `h2load` against `url` with `clients` connections for LOAD_SECONDS.
fn h2load(url: &str, clients: u32, extra: &[&str]) -> std::process::Child {
    let c = clients.to_string();
    let d = LOAD_SECONDS.to_string();
    Command::new("h2load")
        .args([
            "-c", &c, "-t", "1", "-m", "1", "-D", &d, "-T", "20", "-N", "20",
        ])
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("h2load is installed (scripts/setup.sh: nghttp2-client)")
}

/// (2xx, 4xx) from h2load's "status codes:" line.
fn status_codes(o: &Output) -> (u64, u64) {
    let text = stdout(o);
    let line = text
        .lines()
        .find(|l| l.starts_with("status codes:"))
        .unwrap_or_else(|| panic!("no status line from h2load:\n{text}{}", stderr(o)));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    // "status codes: A 2xx, B 3xx, C 4xx, D 5xx": the digits of "2xx" count too.
    (n[0], n[4])
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sk", "--max-time", "10"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("curl is installed (scripts/setup.sh)")
}

/// `bloatlab server --no-iperf -B 127.0.0.1 --https PORT CAPS...`, once it
/// listens; with its port.
fn https_server(caps: &[&str]) -> (Proc, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["server", "--no-iperf", "-B", "127.0.0.1", "--https", &p];
    args.extend_from_slice(caps);
    let server = Proc::bloatlab(&args);
    server.wait_out("the HTTPS URL", READY, |s| s.contains("fingerprint"));
    (server, port)
}

#[test]
fn https_server_under_a_hundred_rpm_clients_keeps_its_caps_and_serves_afterwards() {
    let cap = MAX_CONNECTIONS.to_string();
    let (server, port) = https_server(&["--max-connections", &cap]);
    let pid = server.pid();
    let base = format!("https://127.0.0.1:{port}");
    let (fds0, rss0, threads0) = footprint(pid);

    let dir = tempdir();
    let upload = dir.path().join("upload");
    std::fs::write(&upload, vec![0u8; 1 << 20]).unwrap();
    let upload = upload.display().to_string();
    // 100 clients x 16 connections: 800 downloading, 600 uploading, 200
    // probing the small object, all at once.
    let crowd = vec![
        h2load(&format!("{base}/api/v1/large"), 800, &[]),
        h2load(&format!("{base}/api/v1/upload"), 600, &["-d", &upload]),
        h2load(&format!("{base}/api/v1/small"), 200, &[]),
    ];

    // While the crowd is there: the footprint, and what a newcomer is told.
    let (mut fds, mut rss, mut threads) = (fds0, rss0, threads0);
    let mut told = None;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(LOAD_SECONDS) {
        let (f, r, t) = footprint(pid);
        (fds, rss, threads) = (fds.max(f), rss.max(r), threads.max(t));
        if told.is_none() {
            let o = curl(&[
                "-D",
                "-",
                "-o",
                "/dev/null",
                &format!("{base}/api/v1/small"),
            ]);
            let head = stdout(&o).to_lowercase();
            if head.starts_with("http/2 429") {
                told = Some(head);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut ok = 0;
    let mut refused = 0;
    for c in crowd {
        let o = c.wait_with_output().unwrap();
        let (a, b) = status_codes(&o);
        ok += a;
        refused += b;
    }
    eprintln!(
        "under load: {fds} fds (idle {fds0}), VmRSS {rss} KiB (idle {rss0}), {threads} threads \
         (idle {threads0}); h2load: {ok} 2xx, {refused} 4xx"
    );
    let head = told.expect("a newcomer over the cap never got 429");
    assert!(head.contains("retry-after: 5"), "{head}");
    assert!(ok > 0, "nobody in the crowd was served");
    assert!(refused > 0, "nobody in the crowd got 429");
    // Descriptors: the listener and runtime's own, at most 64 served and at
    // most 64 refused connections reading their 429, plus a few accepted
    // this instant and about to be closed.
    assert!(
        fds <= fds0 + 2 * MAX_CONNECTIONS + 16,
        "{fds} descriptors open (idle {fds0})"
    );
    // Memory: HTTP/2 windows and TLS buffers of at most 128 connections.
    assert!(
        rss <= rss0 + 128 * 1024,
        "VmRSS {rss} KiB under load (idle {rss0})"
    );
    // The runtime's threads are fixed; no thread per connection.
    assert!(
        threads <= threads0 + 1,
        "{threads} threads (idle {threads0})"
    );

    // The crowd gone (refused connections linger 5 s at most), a real
    // client is served: config, probe, a second of download.
    std::thread::sleep(Duration::from_secs(6));
    let o = curl(&["--http2", &format!("{base}/.well-known/nq")]);
    assert!(stdout(&o).contains("large_download_url"), "{}", stderr(&o));
    let o = curl(&[
        "--http2",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{size_download}",
        &format!("{base}/api/v1/small"),
    ]);
    assert_eq!(stdout(&o), "200 1", "{}", stderr(&o));
    let o = curl(&[
        "--http2",
        "--max-time",
        "1",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download}",
        &format!("{base}/api/v1/large"),
    ]);
    let got: u64 = stdout(&o).trim().parse().unwrap_or(0);
    assert!(got > 1 << 20, "a download after the crowd got {got} bytes");

    // Never more than the cap served at once, by the server's own count.
    let st = stop_http_server(server);
    assert_eq!(st.peak_open, MAX_CONNECTIONS, "{st:?}");
    assert!(st.refused > 0 && st.accepted >= MAX_CONNECTIONS, "{st:?}");
}

#[test]
fn http_rate_cap_is_shared_by_parallel_downloads_and_uploads() {
    // Issue 19's rule on the HTTP service: --max-reverse-rate and --max-rate
    // are budgets for all connections of a source, and --max-total-* for
    // all sources together, not caps per request. 8 downloads and 8 uploads
    // (half from 127.0.0.2, another source) for 4 s against 16 Mbit/s
    // totals: per request they would have moved 8 times more.
    let (server, port) = https_server(&[
        "--max-rate",
        "16m",
        "--max-reverse-rate",
        "16m",
        "--max-total-rate",
        "16m",
        "--max-total-reverse-rate",
        "16m",
    ]);
    let dir = tempdir();
    let file = dir.path().join("upload");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let file = format!("@{}", file.display());
    let secs = 4.0;
    let t0 = Instant::now();
    let curls: Vec<_> = (0..16)
        .map(|i| {
            let from = if i % 2 == 0 { "127.0.0.1" } else { "127.0.0.2" };
            let mut cmd = Command::new("curl");
            cmd.args(["-sk", "--http2", "--max-time", "4", "--interface", from])
                .args(["-o", "/dev/null"]);
            if i < 8 {
                cmd.arg(format!("https://127.0.0.1:{port}/api/v1/large"));
            } else {
                cmd.args(["--data-binary", &file])
                    .arg(format!("https://127.0.0.1:{port}/api/v1/upload"));
            }
            cmd.stdin(Stdio::null()).spawn().expect("curl")
        })
        .collect();
    for mut c in curls {
        let _ = c.wait();
    }
    let elapsed = t0.elapsed().as_secs_f64().max(secs);
    let st = stop_http_server(server);
    let mbit = |bytes: u64| bytes as f64 * 8.0 / elapsed / 1e6;
    let (down, up) = (mbit(st.sent), mbit(st.received));
    eprintln!("downloads {down:.1} Mbit/s, uploads {up:.1} Mbit/s in all");
    // The cap, less TLS handshakes and curl's start (elapsed counts them:
    // a loaded machine starts 16 curls slowly); plus the 100 ms burst
    // and one 64 KiB chunk per connection ahead (0.6 MB over 4 s: 1.2 Mbit/s).
    for (what, rate) in [("downloads", down), ("uploads", up)] {
        assert!((5.0..=18.5).contains(&rate), "{what}: {rate:.1} Mbit/s");
    }
}
