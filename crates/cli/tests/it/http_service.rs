//! `bloatlab server --http / --https` end to end with tools no one here wrote:
//! curl (HTTP/1.1, h2c, h2 over TLS) and openssl (the certificate's
//! fingerprint). The service's own behaviour (every route, every cap) is
//! tested in crates/http with a hyper client; these tests guard the flags,
//! the wiring and what the operator sees.

use std::io::Read;
use std::net::TcpStream;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{BIN, Proc, READY, free_port, openssl_self_signed, stderr, stdout, tempdir};

/// Starts `bloatlab server ARGS -B 127.0.0.1` and returns it with the URLs it
/// printed (`http` and `https`, port 0 picks free ones).
pub(crate) fn server(args: &[&str]) -> (Proc, Option<String>, Option<String>) {
    let mut all = vec!["server", "-B", "127.0.0.1"];
    all.extend_from_slice(args);
    let p = Proc::bloatlab(&all);
    let want_http = args.contains(&"--http");
    let want_https = args.contains(&"--https");
    let out = p.wait_out("the HTTP service's URLs", READY, |s| {
        (!want_http || s.contains("http://")) && (!want_https || s.contains("fingerprint"))
    });
    let url = |scheme: &str| {
        out.split_whitespace()
            .find(|w| w.starts_with(scheme))
            .map(|w| w.trim_end_matches("/.well-known/nq").to_string())
    };
    let (h, s) = (url("http://"), url("https://"));
    (p, h, s)
}

pub(crate) fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("curl is installed (scripts/setup.sh)")
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn https_self_signed_prints_the_fingerprint_openssl_sees_and_serves_h2_and_h1() {
    let (p, _, https) = server(&["--no-iperf", "--https", "0"]);
    let base = https.unwrap();
    let out = p.out();
    let fp = out
        .lines()
        .find(|l| l.contains("self-signed") && l.contains("SHA-256 fingerprint"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_else(|| panic!("no fingerprint line\n{out}"))
        .to_string();
    // openssl computes the fingerprint of the certificate it was served.
    let hostport = base.trim_start_matches("https://");
    let pem = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            hostport,
            "-servername",
            "localhost",
            "-tls1_3",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let mut x509 = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut x509.stdin.take().unwrap(), &pem.stdout).unwrap();
    let seen = stdout(&x509.wait_with_output().unwrap());
    assert!(
        seen.trim().ends_with(&fp),
        "openssl saw {seen:?}, server printed {fp}"
    );
    // h2 (ALPN) for the config; its URLs name the host and port curl used.
    let o = curl(&[
        "-k",
        "--http2",
        "-w",
        "\n%{http_version}",
        &format!("{base}/.well-known/nq"),
    ]);
    let text = stdout(&o);
    let (json, version) = text.rsplit_once('\n').unwrap();
    assert_eq!(version, "2", "{text}{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        v["urls"]["small_download_url"],
        format!("{base}/api/v1/small")
    );
    assert_eq!(
        v["urls"]["large_https_download_url"],
        format!("{base}/api/v1/large")
    );
    // HTTP/1.1 over TLS: the small object is one byte.
    let o = curl(&[
        "-k",
        "--http1.1",
        "-w",
        "%{http_version} %{size_download}",
        "-o",
        "/dev/null",
        &format!("{base}/api/v1/small"),
    ]);
    assert_eq!(stdout(&o), "1.1 1", "{}", stderr(&o));
    // A large download streams (curl stops it after 3 s).
    let o = curl(&[
        "-k",
        "--http2",
        "-r",
        "0-",
        "--max-filesize",
        "100000000000",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download}",
        "--max-time",
        "3",
        &format!("{base}/api/v1/large"),
    ]);
    let got: u64 = stdout(&o).trim().parse().unwrap_or(0);
    assert!(
        got > 20_000_000,
        "large object: {got} bytes in 3 s; {}",
        stderr(&o)
    );
}

#[test]
fn http_beside_iperf_serves_h2c_and_discards_an_upload_without_growing() {
    let port = free_port();
    let ps = port.to_string();
    let (p, http, _) = server(&["-p", &ps, "--http", "0"]);
    let base = http.unwrap();
    // The iperf-compatible service is still there.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    let o = curl(&[
        "--http2-prior-knowledge",
        "-w",
        "%{http_version} %{size_download}",
        "-o",
        "/dev/null",
        &format!("{base}/api/v1/small"),
    ]);
    assert_eq!(stdout(&o), "2 1", "{}", stderr(&o));
    // 300 MB through the sink: counted, and the server does not hold it.
    let before = rss_kib(p.pid());
    let mut c = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "60",
            "-T",
            "-",
            &format!("{base}/api/v1/upload"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..300 {
        std::io::Write::write_all(&mut stdin, &chunk).unwrap();
    }
    drop(stdin);
    let o = c.wait_with_output().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    assert_eq!(v["received_bytes"], 300u64 << 20);
    let grew = rss_kib(p.pid()).saturating_sub(before);
    assert!(
        grew < 40 * 1024,
        "server RSS grew by {grew} KiB for a 300 MiB upload"
    );
}

#[test]
fn http_per_source_cap_gives_429_with_retry_after_and_max_duration_ends_a_download() {
    let (_p, http, _) = server(&[
        "--no-iperf",
        "--http",
        "0",
        "--max-per-source",
        "1",
        "--max-duration",
        "2",
    ]);
    let base = http.unwrap();
    let hostport = base.trim_start_matches("http://").to_string();
    // One connection holds the only slot this source has.
    let held = TcpStream::connect(&hostport).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let o = curl(&["-i", &format!("{base}/api/v1/small")]);
    let head = stdout(&o).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert!(head.contains("retry-after: 5"), "{head}");
    assert!(head.contains("--max-per-source (1)"), "{head}");
    // The held connection is closed by --max-duration (2 s), freeing the slot;
    // then a download is cut at 2 s as well.
    let mut held = held;
    held.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 1];
    assert!(matches!(held.read(&mut buf), Ok(0) | Err(_)));
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let o = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{base}/api/v1/large"),
    ]);
    let took = t0.elapsed();
    assert_eq!(stdout(&o), "200", "{}", stderr(&o));
    assert!(!o.status.success(), "a cut download is an error for curl");
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(8),
        "{took:?}"
    );
}

#[test]
fn http_permit_key_is_required_by_header_or_query() {
    let (_p, http, _) = server(&["--no-iperf", "--http", "0", "--permit-key=abcd1234"]);
    let base = http.unwrap();
    let code = |args: &[&str]| {
        let mut a = vec!["-o", "/dev/null", "-w", "%{http_code}"];
        a.extend_from_slice(args);
        stdout(&curl(&a))
    };
    assert_eq!(code(&[&format!("{base}/api/v1/small")]), "403");
    assert_eq!(code(&[&format!("{base}/api/v1/small?key=abcd1234")]), "200");
    assert_eq!(
        code(&[
            "-H",
            "x-bloatlab-permit-key: abcd1234",
            &format!("{base}/api/v1/small")
        ]),
        "200"
    );
}

#[test]
fn bad_tls_files_and_flag_mistakes_exit_non_zero_with_a_clear_message() {
    let dir = tempdir();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let missing = dir.path().join("missing-key.pem");
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(["server", "-B", "127.0.0.1", "--no-iperf", "--https", "0"])
            .args(args)
            .output()
            .unwrap()
    };
    let j = junk.to_str().unwrap();
    let o = run(&["--tls-cert", j, "--tls-key", j]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--tls-cert") && stderr(&o).contains("junk.pem"),
        "{}",
        stderr(&o)
    );
    // A real certificate (made by openssl) with a missing key, then with a key
    // that is not its own: each names the file.
    let (cert, key, other) = (
        dir.path().join("c.pem"),
        dir.path().join("k.pem"),
        dir.path().join("other.pem"),
    );
    openssl_self_signed(&cert, &key, "/CN=localhost", &[]);
    let ok = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-out",
        ])
        .arg(&other)
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", stderr(&ok));
    let c = cert.to_str().unwrap();
    let o = run(&["--tls-cert", c, "--tls-key", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--tls-key") && stderr(&o).contains("missing-key.pem"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--tls-cert", c, "--tls-key", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("other.pem"), "{}", stderr(&o));
    // The pair that belongs together starts (and prints where it listens).
    let (p, _, https) = server(&[
        "--no-iperf",
        "--https",
        "0",
        "--tls-cert",
        c,
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(
        https.is_some() && p.out().contains("from --tls-cert"),
        "{}",
        p.transcript()
    );
    // --no-iperf alone would serve nothing; --tls-cert needs --tls-key.
    let o = Command::new(BIN)
        .args(["server", "--no-iperf"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--no-iperf needs --http"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--tls-cert", j]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--tls-key"), "{}", stderr(&o));
}
