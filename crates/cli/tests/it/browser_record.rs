//! The operator's record of browser tests (issue 21): `bloatlab server
//! --http PORT --results-dir DIR`.
//!
//! * in headless Chromium: a test the server refuses (too long for
//!   `--browser-max-duration`) shows the reason in the page; a test left
//!   mid-way leaves no file; a finished one leaves exactly one file, which
//!   `bloatlab report` reads, which holds the server's TCP_INFO of the load
//!   connections, and which `/result/ID` shows under its CSP;
//! * over plain HTTP: a result of no started test, an oversize or endless
//!   body, a body cut short and a reused token are refused, and the hourly
//!   cap answers 429 with a reason.

use crate::browser_page::Browser;
use crate::harness::{Proc, free_port};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

fn server(dir: &Path, extra: &[&str]) -> (Proc, u16) {
    let port = free_port();
    let p = port.to_string();
    let d = dir.to_str().unwrap();
    let mut args = vec![
        "server",
        "--no-iperf",
        "-B",
        "127.0.0.1",
        "--http",
        &p,
        "--results-dir",
        d,
    ];
    args.extend_from_slice(extra);
    let server = Proc::bloatlab(&args);
    server.wait_out("the results line", crate::harness::READY, |s| {
        s.contains("Browser test results are kept in")
    });
    (server, port)
}

/// Files in `dir` (results and anything half-written).
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// One HTTP/1.1 request; the answer's status, headers and body.
fn request(port: u16, head: &str, body: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let req = format!("{head}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    // The server may answer (413) and close before the body is all sent.
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = headers
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (status, headers.to_lowercase(), body.to_owned())
}

fn start(port: u16) -> (u16, String, String) {
    request(
        port,
        "POST /api/v1/browser/start?duration=2 HTTP/1.1\r\nContent-Length: 0",
        b"",
    )
}

fn post_result(port: u16, id: &str, token: &str, body: &[u8]) -> (u16, String, String) {
    let head = format!(
        "POST /api/v1/browser/result?id={id} HTTP/1.1\r\nx-bloatlab-test-token: {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}",
        body.len()
    );
    request(port, &head, body)
}

/// A small document of the page's form.
fn page_doc() -> Value {
    json!({
        "kind": "bloatlab-browser-test", "version": 1, "duration_s": 2,
        "phases": [
            {"name": "idle", "kind": "idle", "start_ms": 0, "end_ms": 2000},
            {"name": "download", "kind": "loaded", "start_ms": 3000, "end_ms": 5000},
            {"name": "upload", "kind": "loaded", "start_ms": 6000, "end_ms": 8000},
            {"name": "bidirectional", "kind": "loaded", "start_ms": 9000, "end_ms": 11000}
        ],
        "probes": [{"t_ms": 500, "rtt_ms": 1.5}, {"t_ms": 3500, "rtt_ms": 9.0},
                   {"t_ms": 6500, "rtt_ms": 8.0}, {"t_ms": 9500, "rtt_ms": 12.0}],
        "throughput": [{"t_ms": 0, "down_bytes": 0, "up_bytes": 0},
                       {"t_ms": 4000, "down_bytes": 1e6, "up_bytes": 0}]
    })
}

#[test]
fn results_of_no_started_test_oversize_cut_short_or_reused_are_refused() {
    let dir = crate::harness::tempdir();
    let (_server, port) = server(
        dir.path(),
        &[
            "--browser-max-result",
            "2K",
            "--browser-tests-per-hour",
            "2",
        ],
    );
    let ok_body = page_doc().to_string();
    let token = "0123456789abcdef0123456789abcdef";
    let (st, _, msg) = post_result(port, "0123456789abcdef", token, ok_body.as_bytes());
    assert_eq!(st, 403, "{msg}");
    assert!(msg.contains("no test with this id was started"), "{msg}");

    let (st, _, t) = start(port);
    assert_eq!(st, 200, "{t}");
    let t: Value = serde_json::from_str(&t).unwrap();
    let (id, token) = (t["id"].as_str().unwrap(), t["token"].as_str().unwrap());
    assert_eq!(t["store"], true);
    // Over --browser-max-result: by Content-Length, and chunked without one
    // (an endless body is cut at the cap, not buffered).
    let (st, _, msg) = post_result(port, id, token, &[b' '; 5000]);
    assert_eq!(st, 413, "{msg}");
    assert!(msg.contains("--browser-max-result"), "{msg}");
    let chunk = format!("{:x}\r\n{}\r\n", 1500, " ".repeat(1500));
    let endless = chunk.repeat(64);
    let head = format!(
        "POST /api/v1/browser/result?id={id} HTTP/1.1\r\nx-bloatlab-test-token: {token}\r\n\
         Transfer-Encoding: chunked"
    );
    let (st, _, msg) = request(port, &head, endless.as_bytes());
    assert_eq!(st, 413, "{msg}");
    // A body cut short (the tab closed while posting): nothing stored.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /api/v1/browser/result?id={id} HTTP/1.1\r\nHost: x\r\n\
         x-bloatlab-test-token: {token}\r\nContent-Length: {}\r\n\r\n{}",
        ok_body.len(),
        &ok_body[..ok_body.len() / 2]
    )
    .unwrap();
    drop(s);
    // Not the page's form: refused, naming the problem.
    let (st, _, msg) = post_result(port, id, token, b"{\"kind\": 1}");
    assert_eq!(st, 400, "{msg}");
    assert_eq!(files(dir.path()), Vec::<String>::new());
    // The real thing is stored once; the token does not work again.
    let (st, _, msg) = post_result(port, id, token, ok_body.as_bytes());
    assert_eq!(st, 201, "{msg}");
    let url = serde_json::from_str::<Value>(&msg).unwrap()["url"].clone();
    assert_eq!(url, format!("/result/{id}"));
    let (st, _, msg) = post_result(port, id, token, ok_body.as_bytes());
    assert_eq!(st, 409, "{msg}");
    assert!(msg.contains("already stored"), "{msg}");
    assert_eq!(files(dir.path()), [format!("{id}.json")]);
    // --browser-tests-per-hour 2: the third start is refused, with why.
    assert_eq!(start(port).0, 200);
    let (st, headers, msg) = start(port);
    assert_eq!(st, 429, "{msg}");
    assert!(headers.contains("retry-after: "), "{headers}");
    assert!(msg.contains("--browser-tests-per-hour"), "{msg}");
    // The result page, and no page for ids never stored.
    let (st, headers, html) = request(port, &format!("GET /result/{id} HTTP/1.1"), b"");
    assert_eq!(st, 200, "{html}");
    assert!(
        headers.contains("content-security-policy: default-src 'none'; style-src 'sha256-"),
        "{headers}"
    );
    assert!(html.contains(&format!("browser test {id}")), "{html}");
    let (st, _, _) = request(port, "GET /result/0000000000000000 HTTP/1.1", b"");
    assert_eq!(st, 404);
    let (st, _, _) = request(port, "GET /result/..%2fx HTTP/1.1", b"");
    assert_eq!(st, 404);
}

/// Polls until `f` gives a value, or fails after `within`.
fn eventually<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what} after {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_finished_browser_test_leaves_one_file_report_reads_and_result_shows() {
    let dir = crate::harness::tempdir();
    let (_server, port) = server(dir.path(), &["--browser-max-duration", "40"]);
    let base = format!("http://127.0.0.1:{port}/");
    let mut b = Browser::start(false);
    // Refused: 10 s phases need 53 s; the page says why.
    b.open(&format!("{base}?autostart=1&duration=10"));
    assert_eq!(
        b.wait_state(&["error", "done"], Duration::from_secs(20)),
        "error"
    );
    let msg = b.eval("document.getElementById('message').textContent");
    assert!(
        msg.contains("did not start the test") && msg.contains("--browser-max-duration 40"),
        "{msg}"
    );
    // Left mid-way: the page goes, no file comes.
    b.open(&format!("{base}?autostart=1&duration=2"));
    b.wait_state(&["running"], Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(3));
    b.open("about:blank");
    // A whole test.
    b.open(&format!("{base}?autostart=1&duration=2"));
    let state = b.wait_state(&["done", "error"], Duration::from_secs(50));
    assert_eq!(state, "done", "{}", b.eval("String(window.bloatlab.error)"));
    let url = b.eval("String(window.bloatlab.resultUrl)");
    assert!(
        url.starts_with("/result/"),
        "{url} {}",
        b.eval("String(window.bloatlab.submitError)")
    );
    assert_eq!(
        b.eval("document.getElementById('result-link').getAttribute('href')"),
        url
    );
    let id = &url["/result/".len()..];
    // Only the finished test's file, nothing half-written: the abandoned one
    // would be older.
    assert_eq!(files(dir.path()), [format!("{id}.json")]);
    let path = dir.path().join(format!("{id}.json"));
    let file = bloatlab_results::load(&path).unwrap();
    assert_eq!(file.metadata.test, "browser");
    let remote = &file.metadata.hosts.remote;
    assert_eq!(remote.address.as_deref(), Some("127.0.0.1"));
    assert!(
        remote.software.as_deref().unwrap_or("").contains("Chrome"),
        "{remote:?}"
    );
    let names: Vec<&str> = file.raw.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["idle", "download", "upload", "bidirectional"]);
    let probes = &file.raw.latency[0].samples;
    assert!(
        (85..=115).contains(&probes.len()),
        "{} probes",
        probes.len()
    );
    // The server's own TCP_INFO of the load connections, both directions.
    let down = file.raw.throughput[0]
        .tcp
        .sender
        .expect("download sender TCP_INFO");
    let up = file.raw.throughput[1]
        .tcp
        .receiver
        .expect("upload receiver TCP_INFO");
    for t in [down, up] {
        assert!(t.retransmits.is_some(), "{t:?}");
        let (min, max) = (t.min_rtt_ns.unwrap(), t.max_rtt_ns.unwrap());
        assert!(min > 0 && min <= max && max < 2_000_000_000, "{t:?}");
    }
    let conns = file.metadata.extra["browser"]["server_tcp_connections"]
        .as_array()
        .unwrap();
    assert!(conns.len() >= 2, "{conns:?}");
    // bloatlab report reads it.
    let o = std::process::Command::new(crate::harness::BIN)
        .args(["report", path.to_str().unwrap()])
        .output()
        .unwrap();
    let out = crate::harness::stdout(&o);
    assert!(o.status.success(), "{out}{}", crate::harness::stderr(&o));
    assert!(
        out.contains("bidirectional") && out.contains("http_probe"),
        "{out}"
    );
    // /result/ID renders in the browser, its inline style allowed by the
    // CSP's hash (a wrong hash leaves the h1 without its border).
    b.open(&format!("http://127.0.0.1:{port}{url}"));
    let border = eventually(Duration::from_secs(10), "the result page", || {
        let s = b.eval(
            "document.querySelector('h1') ? getComputedStyle(document.querySelector('h1')).borderBottomStyle : ''",
        );
        (!s.is_empty()).then_some(s)
    });
    assert_eq!(border, "solid");
    assert!(b.eval("document.title").contains(id));
    assert_eq!(
        b.eval("String(document.querySelectorAll('svg').length > 0)"),
        "true"
    );
}

#[test]
fn results_dir_mistakes_are_usage_errors_that_name_the_flag() {
    let dir = crate::harness::tempdir();
    let missing = dir.path().join("missing");
    let port = free_port().to_string();
    for (args, want) in [
        (
            vec![
                "server",
                "--no-iperf",
                "--results-dir",
                missing.to_str().unwrap(),
            ],
            "--no-iperf needs --http",
        ),
        (
            vec!["server", "--results-dir", dir.path().to_str().unwrap()],
            "--results-dir needs --http PORT or --https PORT",
        ),
        (
            vec![
                "server",
                "--no-iperf",
                "-B",
                "127.0.0.1",
                "--http",
                &port,
                "--results-dir",
                missing.to_str().unwrap(),
            ],
            "--results-dir",
        ),
    ] {
        let o = std::process::Command::new(crate::harness::BIN)
            .args(&args)
            .output()
            .unwrap();
        let err = crate::harness::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert_eq!(files(dir.path()), Vec::<String>::new());
}
