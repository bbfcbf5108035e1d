//! The browser test page (issue 21, deliverable 4) in a real browser through a lab:
//! headless Chromium in the lab's client namespace (`ip netns exec`) against
//! `bloatlab server --http` in the server namespace, on 20 Mbit/s with 40 ms each way.
//!
//! * a deep FIFO (1000 packets, 600 ms of queue each way) gives a loaded median of
//!   150 ms or more and a grade of C or worse; FQ-CoDel keeps it at 100 ms or less
//!   and grades A or better;
//! * in both, the page's loaded median is within 15 % of `bloatlab ping` (UDP probes,
//!   10 a second) run at the same time from the same namespace over the same windows,
//!   and its download within 15 % of the link's TCP goodput.
//!
//! A screenshot of the finished page is written before the checks and removed only
//! when they all pass; its path is printed.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bloatlab_testkit::tier;
use serde_json::{Value, json};

use crate::browser_page::Browser;
use crate::harness::lab::LabGuard;
use crate::harness::{BIN, Listen};

/// Each loaded phase's length (`?duration=`), s. 5 s: the page's capacity is the mean
/// after the first second, so 4 s of it; the medians rest on about 50 probes a phase.
const PHASE_S: u64 = 5;
/// The link's TCP goodput: 1448 payload bytes per 1500-byte packet at 20 Mbit/s.
const GOODPUT_MBPS: f64 = 20.0 * 1448.0 / 1500.0;

/// What one run through the lab measured.
struct Run {
    /// The page's result document (`window.bloatlab.result`).
    page: Value,
    /// The page's probe RTTs (ms) in its loaded phases.
    browser_loaded: Vec<f64>,
    /// `bloatlab ping`'s RTTs (ms) in the same windows.
    ping_loaded: Vec<f64>,
    /// The screenshot of the finished page (removed by [`Run::passed`]).
    screenshot: PathBuf,
}

impl Run {
    fn passed(self) {
        let _ = std::fs::remove_file(&self.screenshot);
    }
}

fn median(v: &[f64]) -> f64 {
    assert!(!v.is_empty());
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    // Type 7, as the page and bloatlab-stats.
    let h = (v.len() - 1) as f64 * 0.5;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

fn epoch_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1e3
}

/// Standard base64 (DevTools' screenshot data) to bytes; `None` on a bad character.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=') {
        acc = (acc << 6) | val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Takes a PNG screenshot of the page and writes it to `path`.
pub(crate) fn save_screenshot(b: &mut Browser, path: &std::path::Path) {
    let shot = b.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = base64_decode(shot["data"].as_str().unwrap_or("")).expect("base64 from DevTools");
    std::fs::write(path, png).unwrap();
}

/// Runs the page with `?autostart=1&duration=PHASE_S` in Chromium in the client
/// namespace of a lab with `qdisc` (1000-packet limit), `bloatlab ping` beside it.
fn through_lab(qdisc: &str) -> Run {
    let lab = LabGuard::up(
        "brw",
        &[
            "--rate", "20mbit", "--delay", "40ms", "--qdisc", qdisc, "--limit", "1000p",
        ],
    );
    // One server: the iperf-compatible service on 5001 answers `bloatlab ping`'s UDP
    // probes, the HTTP service on 8080 serves the page.
    let _server = lab.serve(
        "server",
        &[BIN, "server", "-p", "5001", "--http", "8080"],
        Listen::Tcp,
        8080,
    );
    // Chromium first (it takes seconds to start on a busy machine), then the ping,
    // then the page: the ping runs from before the page's first probe to after its
    // last. idle (5 s) + 3 loaded phases + 3 settle seconds + the page's grace, and a
    // margin.
    let ns = format!("bl-{}-client", lab.name);
    let mut b = Browser::start_in(&["ip", "netns", "exec", &ns], false);
    let total_s = PHASE_S + 3 * PHASE_S + 3 + 6;
    let ping_start = SystemTime::now();
    // Killed by PID if the test fails before it ends.
    let mut ping = lab.bg(
        "client",
        &[
            BIN,
            "ping",
            "10.77.0.2",
            "-p",
            "5001",
            "-i",
            "100ms",
            "-t",
            &total_s.to_string(),
            "--json",
        ],
    );
    b.open(&format!(
        "http://10.77.0.2:8080/?autostart=1&duration={PHASE_S}"
    ));
    // Polled here rather than with `wait_state`, which panics on a timeout: the
    // screenshot is taken whatever the page's state, and a page that never finished
    // is the one most worth seeing.
    let end = std::time::Instant::now() + Duration::from_secs(total_s + 30);
    let state = loop {
        let s = b.eval("String(window.bloatlab && window.bloatlab.state)");
        if s == "done" || s == "error" || std::time::Instant::now() > end {
            break s;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let screenshot = std::env::temp_dir().join(format!("bl-browser-lab-{}-{qdisc}.png", lab.name));
    save_screenshot(&mut b, &screenshot);
    eprintln!(
        "{qdisc}: screenshot of the finished page: {} (kept if the test fails)",
        screenshot.display()
    );
    let error = b.eval("String(window.bloatlab.error)");
    assert_eq!(state, "done", "{error}");
    let page: Value =
        serde_json::from_str(&b.eval("JSON.stringify(window.bloatlab.result)")).unwrap();
    drop(b);

    let st = ping.wait_exit(Duration::from_secs(total_s + 30));
    assert!(st.success(), "ping: {}", ping.transcript());
    let pv: Value = serde_json::from_str(&ping.out())
        .unwrap_or_else(|e| panic!("ping JSON: {e}: {}", ping.transcript()));
    let rtt = pv["raw"]["latency"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["kind"] == "rtt")
        .unwrap_or_else(|| panic!("no rtt series: {pv}"));
    // The ping's probes on the wall clock (ms since the epoch): its session starts
    // within a few ms of the spawn, far less than a phase.
    let ping0 = epoch_ms(ping_start);
    let ping_samples: Vec<(f64, f64)> = rtt["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let t = s["sent_ns"].as_f64()? / 1e6;
            Some((ping0 + t, s["delay_ns"].as_f64()? / 1e6))
        })
        .collect();
    // The page's clock: `started` is Date() at its t0, to the ms.
    let started = page["started"].as_str().unwrap();
    let page0 = parse_iso_ms(started);
    let loaded: Vec<(f64, f64)> = page["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "loaded")
        .map(|p| {
            (
                p["start_ms"].as_f64().unwrap(),
                p["end_ms"].as_f64().unwrap(),
            )
        })
        .collect();
    let within = |t: f64| loaded.iter().any(|&(a, z)| t >= a && t < z);
    let browser_loaded: Vec<f64> = page["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| within(p["t_ms"].as_f64().unwrap()))
        .filter_map(|p| p["rtt_ms"].as_f64())
        .collect();
    let ping_loaded: Vec<f64> = ping_samples
        .iter()
        .filter(|(t, _)| within(t - page0))
        .map(|&(_, r)| r)
        .collect();
    eprintln!(
        "{qdisc}: grade {} induced {} ms, capacity {}, phases {}; loaded medians: browser {:.1} ms \
         ({} probes), bloatlab ping {:.1} ms ({} probes); ping started {:.0} ms before the page",
        page["grade"],
        page["induced_ms"],
        page["capacity_mbps"],
        summary(&page),
        median(&browser_loaded),
        browser_loaded.len(),
        median(&ping_loaded),
        ping_loaded.len(),
        page0 - ping0,
    );
    Run {
        page,
        browser_loaded,
        ping_loaded,
        screenshot,
    }
}

/// Each phase's name, median and throughput, for the log.
fn summary(page: &Value) -> String {
    page["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}: median {} p90 {} down {} up {}",
                p["name"], p["median_ms"], p["p90_ms"], p["download_mbps"], p["upload_mbps"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `2026-12-06T03:11:15.123Z` (JavaScript's `toISOString`) as ms since the epoch.
fn parse_iso_ms(s: &str) -> f64 {
    let bad = || panic!("not an ISO time: {s}");
    let (date, time) = s
        .strip_suffix('Z')
        .and_then(|s| s.split_once('T'))
        .unwrap_or_else(bad);
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    secs as f64 * 1e3 + format!("0.{frac}").parse::<f64>().unwrap() * 1e3
}

/// The checks both qdiscs share: the page's loaded median within 15 % of `bloatlab
/// ping`'s over the same windows, its download within 15 % of the goodput.
fn check_against_ping_and_goodput(r: &Run) {
    let (b, p) = (median(&r.browser_loaded), median(&r.ping_loaded));
    assert!(
        r.ping_loaded.len() >= 100,
        "{} ping probes",
        r.ping_loaded.len()
    );
    assert!(
        r.browser_loaded.len() >= 100,
        "{} page probes",
        r.browser_loaded.len()
    );
    assert!(
        (b - p).abs() <= 0.15 * p,
        "page's loaded median {b:.1} ms, bloatlab ping's {p:.1} ms"
    );
    let down = r.page["capacity_mbps"]["download"].as_f64().unwrap();
    assert!(
        (down - GOODPUT_MBPS).abs() <= 0.15 * GOODPUT_MBPS,
        "page's download {down} Mbit/s, the link's goodput {GOODPUT_MBPS:.2}"
    );
}

#[test]
fn base64_decodes_as_rfc_4648_says() {
    // RFC 4648 section 10's test vectors.
    for (enc, dec) in [
        ("", ""),
        ("Zg==", "f"),
        ("Zm8=", "fo"),
        ("Zm9v", "foo"),
        ("Zm9vYg==", "foob"),
        ("Zm9vYmE=", "fooba"),
        ("Zm9vYmFy", "foobar"),
    ] {
        assert_eq!(base64_decode(enc).as_deref(), Some(dec.as_bytes()), "{enc}");
    }
    assert_eq!(base64_decode("+/+/"), Some(vec![0xfb, 0xff, 0xbf]));
    assert_eq!(base64_decode("Zm9v!"), None);
}

#[test]
fn parse_iso_ms_reads_javascripts_to_iso_string() {
    assert_eq!(parse_iso_ms("1970-01-01T00:00:00.000Z"), 0.0);
    // date -u -d 2026-12-06T03:11:15Z +%s = 1796526675
    assert_eq!(
        parse_iso_ms("2026-12-06T03:11:15.250Z"),
        1_796_526_675_250.0
    );
    assert_eq!(parse_iso_ms("2000-02-29T23:59:59.999Z"), 951_868_799_999.0);
}

#[test]
fn through_a_lab_fifo_grades_c_or_worse_and_agrees_with_bloatlab_ping() {
    if !tier::root("through_a_lab_fifo_grades_c_or_worse_and_agrees_with_bloatlab_ping") {
        return;
    }
    let r = through_lab("fifo");
    let m = median(&r.browser_loaded);
    assert!(m >= 150.0, "FIFO: page's loaded median {m:.1} ms");
    let grade = r.page["grade"].as_str().unwrap();
    assert!(["C", "D", "F"].contains(&grade), "FIFO: grade {grade}");
    check_against_ping_and_goodput(&r);
    r.passed();
}

#[test]
fn through_a_lab_fq_codel_grades_a_and_agrees_with_bloatlab_ping() {
    if !tier::root("through_a_lab_fq_codel_grades_a_and_agrees_with_bloatlab_ping") {
        return;
    }
    let r = through_lab("fq_codel");
    let m = median(&r.browser_loaded);
    assert!(m <= 100.0, "FQ-CoDel: page's loaded median {m:.1} ms");
    let grade = r.page["grade"].as_str().unwrap();
    assert!(["A+", "A"].contains(&grade), "FQ-CoDel: grade {grade}");
    check_against_ping_and_goodput(&r);
    r.passed();
}
