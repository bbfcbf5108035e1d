//! The browser test page (issue 21) in a real browser: headless Chromium
//! (Debian's `chromium`, installed by scripts/setup.sh) against
//! `bloatlab server --http` on loopback, driven by the DevTools protocol over
//! `--remote-debugging-pipe` (fds 3 and 4, NUL-separated JSON messages), so
//! the test can wait for the page's own state instead of a fixed time.
//!
//! * the page runs to the end with `?autostart=1&duration=2` and shows a
//!   grade and sane numbers, over `--http` and over `--https` (HTTP/2);
//! * its statistics (stats.js) agree with bloatlab-stats on the same samples;
//! * its probes go over connections that carry none of the load, over both
//!   (the DevTools `Network` domain's connection ids).

use crate::harness::{Proc, free_port};
use bloatlab_stats::rpm::{TRIM_FRACTION, trimmed_mean};
use bloatlab_stats::{bloat_grade, quantile};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A headless Chromium on a DevTools pipe, with one page attached; killed
/// by PID and reaped on drop. Also used by the lab tests (browser_lab.rs).
pub(crate) struct Browser {
    child: Child,
    pipe: UnixStream,
    buf: Vec<u8>,
    next_id: u64,
    session: String,
    /// Events (`method`s) kept for [`Browser::take_events`]; others are dropped.
    watch: Vec<String>,
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium; `insecure`: accept the server's self-signed
    /// certificate (`--ignore-certificate-errors`).
    pub(crate) fn start(insecure: bool) -> Browser {
        Browser::start_in(&[], insecure)
    }

    /// [`Browser::start`] with Chromium run through `wrapper` (for example
    /// `ip netns exec NS`, which keeps fds 3 and 4 open across its exec).
    pub(crate) fn start_in(wrapper: &[&str], insecure: bool) -> Browser {
        let profile = crate::harness::tempdir();
        let (ours, theirs) = UnixStream::pair().unwrap();
        let fd = theirs.as_raw_fd();
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg("/usr/bin/chromium");
                c
            }
            None => Command::new("/usr/bin/chromium"),
        };
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
            "--window-size=800,1300",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(insecure.then_some("--ignore-certificate-errors"))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // The child reads DevTools commands on fd 3 and writes answers on fd 4,
        // both our socket's other end.
        bloatlab_os::process::inherit_fd_as(&mut cmd, fd, &[3, 4]);
        let child = cmd
            .spawn()
            .expect("/usr/bin/chromium runs (Debian package `chromium`, scripts/setup.sh)");
        drop(theirs);
        ours.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut b = Browser {
            child,
            pipe: ours,
            buf: Vec::new(),
            next_id: 0,
            session: String::new(),
            watch: Vec::new(),
            events: Vec::new(),
            _profile: profile,
        };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let t = target["targetId"].as_str().unwrap().to_owned();
        let s = b.call(
            "Target.attachToTarget",
            json!({"targetId": t, "flatten": true}),
        );
        b.session = s["sessionId"].as_str().unwrap().to_owned();
        b
    }

    /// Sends a command (to the page once attached) and returns its result.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.pipe.write_all(&bytes).unwrap();
        loop {
            while let Some(end) = self.buf.iter().position(|&b| b == 0) {
                let m: Value = serde_json::from_slice(&self.buf[..end]).unwrap();
                self.buf.drain(..=end);
                if m["id"] == id {
                    assert!(m.get("error").is_none(), "{method}: {m}");
                    return m["result"].clone();
                }
                if self.watch.iter().any(|w| m["method"] == w.as_str()) {
                    self.events.push(m);
                }
            }
            let mut chunk = [0u8; 65536];
            let n = self.pipe.read(&mut chunk).expect("chromium answers");
            assert!(n > 0, "chromium closed its DevTools pipe");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Keeps the events named `methods` that arrive from now on (they are
    /// read while commands wait for their answers).
    pub(crate) fn watch(&mut self, methods: &[&str]) {
        self.watch = methods.iter().map(|m| m.to_string()).collect();
    }

    /// The kept events so far, oldest first.
    pub(crate) fn take_events(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.events)
    }

    /// Evaluates a JS expression that returns a string in the page.
    pub(crate) fn eval(&mut self, expr: &str) -> String {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].as_str().unwrap_or("").to_owned()
    }

    pub(crate) fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
    }

    /// Polls `window.bloatlab.state` until it is one of `states`.
    pub(crate) fn wait_state(&mut self, states: &[&str], within: Duration) -> String {
        let end = Instant::now() + within;
        loop {
            let s = self.eval("String(window.bloatlab && window.bloatlab.state)");
            if states.contains(&s.as_str()) {
                return s;
            }
            assert!(Instant::now() < end, "page still {s:?} after {within:?}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `bloatlab server --no-iperf --http PORT` (`--https PORT`, with its
/// self-signed certificate) on loopback and the page URL it printed.
fn server(https: bool) -> (Proc, String) {
    let port = free_port();
    let p = port.to_string();
    let (flag, scheme) = if https {
        ("--https", "https")
    } else {
        ("--http", "http")
    };
    let server = Proc::bloatlab(&["server", "--no-iperf", "-B", "127.0.0.1", flag, &p]);
    let out = server.wait_out("the page URL", crate::harness::READY, |s| {
        s.contains("Browser bufferbloat test page:")
    });
    let url = out
        .lines()
        .find_map(|l| l.strip_prefix("Browser bufferbloat test page: "))
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(url, format!("{scheme}://127.0.0.1:{port}/"));
    (server, url)
}

#[test]
fn the_page_runs_to_a_grade_in_headless_chromium() {
    page_runs_to_a_grade(false);
}

/// Over HTTPS (the server's self-signed certificate) the browser speaks
/// HTTP/2; the page and its load share one connection, the probes take
/// another (checked by `the_probes_have_connections_of_their_own_over_http2`).
#[test]
fn the_page_runs_to_a_grade_over_https_and_http2() {
    page_runs_to_a_grade(true);
}

fn page_runs_to_a_grade(https: bool) {
    let (_server, url) = server(https);
    let mut b = Browser::start(https);
    b.open(&format!("{url}?autostart=1&duration=2"));
    // 2 s idle + 3 x 2 s loaded + 3 s of pauses + grace: about 12 s.
    let state = b.wait_state(&["done", "error"], Duration::from_secs(50));
    let error = b.eval("String(window.bloatlab.error)");
    assert_eq!(state, "done", "{error}");
    let r: Value = serde_json::from_str(&b.eval("JSON.stringify(window.bloatlab.result)")).unwrap();
    let grades = ["A+", "A", "B", "C", "D", "F"];
    let grade = r["grade"].as_str().unwrap();
    assert!(grades.contains(&grade), "{grade}");
    // The page shows what the result says.
    assert_eq!(
        b.eval("document.getElementById('grade').textContent"),
        grade
    );
    assert_eq!(b.eval("document.body.dataset.state"), "done");
    assert!(
        !b.eval("document.getElementById('verdict').textContent")
            .is_empty()
    );
    let phases = r["phases"].as_array().unwrap();
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["idle", "download", "upload", "bidirectional"]);
    for p in phases {
        let n = p["probes"].as_u64().unwrap();
        // 10 probes a second for 2 s; a busy 2-core machine may miss a few.
        assert!((14..=21).contains(&n), "{p}");
        assert!(p["lost"].as_u64().unwrap() <= 2, "{p}");
        let median = p["median_ms"].as_f64().unwrap();
        let p90 = p["p90_ms"].as_f64().unwrap();
        assert!(median > 0.0 && median <= p90 && p90 < 500.0, "{p}");
    }
    for (phase, dir) in [(1, "download_mbps"), (2, "upload_mbps")] {
        let v = phases[phase][dir].as_f64().unwrap();
        // Loopback moves gigabits; anything under 50 Mbit/s is broken load.
        assert!(v > 50.0, "{dir} {v}");
    }
    assert_eq!(r["capacity_mbps"]["download"], phases[1]["download_mbps"]);
    let idle = phases[0]["median_ms"].as_f64().unwrap();
    assert!(idle < 50.0, "loopback idle median {idle} ms");
    for p in &phases[1..] {
        let rpm = p["probe_rpm"].as_f64().unwrap();
        assert!(rpm > 60.0, "{p}");
    }
    // The grade follows from the induced latency on bloatlab's own table, and that
    // latency is the worst loaded phase's (the phase it names), not a mean.
    let induced = r["induced_ms"].as_f64().unwrap();
    let want = bloat_grade(Duration::from_nanos((induced * 1e6).round() as u64));
    assert_eq!(grade, want.as_str(), "induced {induced} ms");
    let worst = phases[1..]
        .iter()
        .map(|p| p["induced_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(induced, worst, "{phases:?}");
    let named = phases
        .iter()
        .find(|p| p["name"] == r["grade_phase"])
        .unwrap_or_else(|| panic!("grade_phase {}", r["grade_phase"]));
    assert_eq!(named["induced_ms"].as_f64(), Some(induced));
    // Probes went on through the pauses too: about 10 a second for 11 s.
    let probes = r["probes"].as_array().unwrap().len();
    assert!((85..=115).contains(&probes), "{probes} probes");
}

/// The probes run on a connection of their own (issue 21: "loaded latency
/// measured throughout by small requests on their own connection"): the
/// page sends them without credentials, which Chromium keeps in another
/// connection pool than the load's. Checked with the connection id
/// Chromium reports in each response (`Network.responseReceived`).
#[test]
fn the_probes_have_connections_of_their_own_over_http1() {
    probes_on_their_own_connections(false);
}

#[test]
fn the_probes_have_connections_of_their_own_over_http2() {
    probes_on_their_own_connections(true);
}

/// One request the page made, as the DevTools `Network` domain saw it.
#[derive(Default)]
struct Request {
    url: String,
    /// `Response.connectionId` and `Response.protocol`, once answered.
    connection: Option<(u64, String)>,
}

fn probes_on_their_own_connections(https: bool) {
    use bloatlab_http::routes::{LARGE, SMALL, UPLOAD};
    let (_server, url) = server(https);
    let mut b = Browser::start(https);
    b.watch(&["Network.requestWillBeSent", "Network.responseReceived"]);
    // No bodies kept for inspection: the load is gigabytes.
    b.call(
        "Network.enable",
        json!({"maxTotalBufferSize": 0, "maxResourceBufferSize": 0}),
    );
    // The shortest run the page allows: 1 s per phase, about 7 s in all.
    b.open(&format!("{url}?autostart=1&duration=1"));
    let state = b.wait_state(&["done", "error"], Duration::from_secs(40));
    let error = b.eval("String(window.bloatlab.error)");
    assert_eq!(state, "done", "{error}");
    let r: Value = serde_json::from_str(&b.eval("JSON.stringify(window.bloatlab.result)")).unwrap();
    let mut reqs: BTreeMap<String, Request> = BTreeMap::new();
    for e in b.take_events() {
        let p = &e["params"];
        let req = reqs.entry(p["requestId"].to_string()).or_default();
        if e["method"] == "Network.requestWillBeSent" {
            req.url = p["request"]["url"].as_str().unwrap().to_owned();
        } else {
            let resp = &p["response"];
            let id = resp["connectionId"].as_f64().unwrap_or(0.0) as u64;
            let proto = resp["protocol"].as_str().unwrap_or("?").to_owned();
            req.connection = Some((id, proto));
        }
    }
    let path = |r: &Request| {
        let rest = r.url.splitn(4, '/').nth(3).unwrap_or("");
        format!("/{}", rest.split('?').next().unwrap())
    };
    // Probes by their slot number (`?p=RUN-K`), which grows with each one
    // sent, so they line up with the result's list of probes.
    let mut probes: Vec<(u64, &Request)> = reqs
        .values()
        .filter(|r| path(r) == SMALL)
        .map(|r| {
            let p = r.url.split("p=").nth(1).unwrap().split('&').next().unwrap();
            (p.rsplit('-').next().unwrap().parse().unwrap(), r)
        })
        .collect();
    probes.sort_by_key(|p| p.0);
    let sent = r["probes"].as_array().unwrap();
    assert_eq!(
        probes.len(),
        sent.len(),
        "probe requests seen vs the page's"
    );
    // Which load requests went over which connection.
    let mut load: BTreeMap<u64, BTreeMap<String, usize>> = BTreeMap::new();
    let want = if https { "h2" } else { "http/1.1" };
    for req in reqs
        .values()
        .filter(|r| [LARGE, UPLOAD].contains(&path(r).as_str()))
    {
        if let Some((id, proto)) = &req.connection {
            assert_eq!(proto, want, "{}", req.url);
            *load.entry(*id).or_default().entry(path(req)).or_default() += 1;
        }
    }
    let answered = |p: &str| load.values().filter_map(|m| m.get(p)).sum::<usize>();
    let (downloads, uploads) = (answered(LARGE), answered(UPLOAD));
    // 4 + 3 download streams, 4 + 3 upload streams at least.
    assert!(
        downloads >= 7 && uploads >= 7,
        "{downloads} downloads, {uploads} uploads answered"
    );
    let mut shared: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut own = BTreeSet::new();
    let mut per_phase: BTreeMap<&str, usize> = BTreeMap::new();
    for ((k, req), p) in probes.iter().zip(sent) {
        let Some((id, proto)) = &req.connection else {
            continue;
        };
        assert_eq!(proto, want, "{}", req.url);
        if load.contains_key(id) {
            shared.entry(*id).or_default().push(*k);
        } else {
            own.insert(*id);
        }
        let t = p["t_ms"].as_f64().unwrap();
        for ph in r["phases"].as_array().unwrap() {
            if ph["start_ms"].as_f64().unwrap() <= t && t < ph["end_ms"].as_f64().unwrap() {
                *per_phase.entry(ph["name"].as_str().unwrap()).or_default() += 1;
            }
        }
    }
    let report: Vec<String> = shared
        .iter()
        .map(|(id, ks)| format!("connection {id}: probes {ks:?} and load {:?}", load[id]))
        .collect();
    assert!(
        report.is_empty(),
        "probes shared a connection with the load ({want}):\n{}",
        report.join("\n")
    );
    for phase in ["download", "upload", "bidirectional"] {
        let n = per_phase.get(phase).copied().unwrap_or(0);
        // 10 a second for 1 s; a busy 2-core machine may miss a few.
        assert!(n >= 6, "{n} answered probes in {phase}: {per_phase:?}");
    }
    eprintln!(
        "{want}: probes on connections {own:?}; load on {:?} ({downloads} downloads, {uploads} uploads); probes per phase {per_phase:?}",
        load.keys().collect::<Vec<_>>()
    );
}

/// Deterministic pseudo-random round trips in whole nanoseconds.
fn samples(seed: u64, n: usize, lo_ms: u64, hi_ms: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo_ms * 1_000_000 + (x >> 33) % ((hi_ms - lo_ms) * 1_000_000)
        })
        .collect()
}

fn durations(v: &[u64]) -> Vec<Duration> {
    v.iter().map(|&n| Duration::from_nanos(n)).collect()
}

/// The grade of a run as `bloatlab test` computes it: `bloatlab_stats::run_grade` over
/// a timeline of one idle phase and one loaded phase per sample set, one probe per
/// sample. Gives the increase, the grade and the index of the loaded phase it is of.
fn rust_grade(idle: &[u64], loaded: &[Vec<u64>]) -> (u64, &'static str, usize) {
    use bloatlab_stats::{DelayKind, LatencySeries, Phase, PhaseKind, ProbeSample, Timeline};
    let s = Duration::from_secs;
    let mut phases = vec![Phase::new(PhaseKind::Idle, s(0), s(1))];
    let mut samples = Vec::new();
    for (i, set) in std::iter::once(idle)
        .chain(loaded.iter().map(Vec::as_slice))
        .enumerate()
    {
        let start = s(i as u64);
        if i > 0 {
            phases.push(Phase {
                kind: PhaseKind::Loaded,
                name: format!("loaded{i}"),
                start,
                end: start + s(1),
            });
        }
        // Inside the phase, whatever the number of samples.
        let step = s(1) / (set.len() as u32 + 1);
        for (k, &d) in set.iter().enumerate() {
            samples.push(ProbeSample::received(
                start + step * k as u32,
                Duration::from_nanos(d),
            ));
        }
    }
    let series = LatencySeries {
        name: "udp_be".into(),
        kind: DelayKind::RoundTrip,
        samples,
    };
    let g = bloatlab_stats::run_grade(&[series], &Timeline::new(phases).unwrap()).unwrap();
    let index: usize = g.phase.trim_start_matches("loaded").parse().unwrap();
    (g.increase().as_nanos() as u64, g.grade.as_str(), index - 1)
}

#[test]
fn the_pages_statistics_agree_with_bloatlab_stats() {
    let (_server, url) = server(false);
    let mut b = Browser::start(false);
    b.open(&url);
    assert_eq!(
        b.wait_state(&["ready", "error"], Duration::from_secs(20)),
        "ready"
    );
    let sets: Vec<Vec<u64>> = vec![
        vec![7_000_000],
        vec![3_000_000, 1_000_000],
        samples(1, 7, 1, 40),
        samples(2, 20, 10, 300),
        samples(3, 101, 5, 900),
        samples(4, 999, 1, 3000),
        // Ties and a gap that rounds at .5 ns.
        vec![1, 2, 2, 2, 5, 1_000_000_001],
    ];
    let qs = [0.0, 0.1, 0.5, 0.9, 0.99, 1.0];
    for set in &sets {
        let js: Value = serde_json::from_str(&b.eval(&format!(
            "(() => {{ const S = window.bloatlab.stats; const x = {x:?}; \
             return JSON.stringify({{ q: {qs:?}.map(q => S.quantile(x, q)), \
             tm: S.trimmedMean(x, {TRIM_FRACTION}), rpm: S.probeRpm(x, {TRIM_FRACTION}) }}); }})()",
            x = set
        )))
        .unwrap();
        let d = durations(set);
        for (i, q) in qs.iter().enumerate() {
            let want = quantile(&d, *q).unwrap().as_nanos() as u64;
            assert_eq!(js["q"][i].as_u64(), Some(want), "q={q} of {set:?}");
        }
        let tm = trimmed_mean(&d, TRIM_FRACTION).unwrap();
        assert_eq!(js["tm"].as_u64(), Some(tm.as_nanos() as u64), "{set:?}");
        let rpm = bloatlab_stats::Rpm::from_loaded_rtts(&d).unwrap().rpm;
        assert_eq!(js["rpm"].as_f64(), Some(rpm), "{set:?}");
    }
    // The grade of whole runs, on the table the server sent the page,
    // including increases that land exactly on a bound.
    let idle = samples(5, 50, 10, 20);
    let idle_median = quantile(&durations(&idle), 0.5).unwrap().as_nanos() as u64;
    let runs: Vec<Vec<Vec<u64>>> = vec![
        vec![
            samples(6, 50, 10, 21),
            samples(7, 50, 12, 30),
            samples(8, 60, 15, 40),
        ],
        vec![samples(9, 80, 100, 400), samples(10, 80, 20, 60)],
        vec![samples(11, 40, 300, 2000)],
        vec![samples(12, 40, 1, 9)],
        vec![vec![idle_median + 30_000_000]],
        vec![vec![idle_median + 4_999_999], vec![idle_median + 5_000_001]],
        vec![vec![idle_median + 400_000_000]],
        // Where a mean and the rule differ: +1 ms and +55 ms average to 28 ms, an A; the
        // worst loaded phase is a B.
        vec![
            vec![idle_median + 1_000_000],
            vec![idle_median + 55_000_000],
        ],
        // Equal rises: the first phase is named.
        vec![
            vec![idle_median + 40_000_000],
            vec![idle_median + 40_000_000],
        ],
    ];
    for loaded in &runs {
        let js: Value = serde_json::from_str(&b.eval(&format!(
            "(async () => {{ const P = await (await fetch('/api/v1/browser')).json(); \
             return JSON.stringify(window.bloatlab.stats.gradeRun({idle:?}, {loaded:?}, P.grade)); }})()"
        )))
        .unwrap();
        let (inc, grade, phase) = rust_grade(&idle, loaded);
        assert_eq!(js["increase"].as_u64(), Some(inc), "{loaded:?}");
        assert_eq!(js["grade"], grade, "{loaded:?}");
        assert_eq!(js["phase"].as_u64(), Some(phase as u64), "{loaded:?}");
    }
    // The case above where a mean would have graded otherwise.
    let (inc, grade, phase) = rust_grade(
        &idle,
        &[
            vec![idle_median + 1_000_000],
            vec![idle_median + 55_000_000],
        ],
    );
    assert_eq!((inc, grade, phase), (55_000_000, "B", 1));
    assert_eq!(bloat_grade(Duration::from_millis(28)).as_str(), "A");
    // A bad option stops the page with a message that says what is allowed.
    for bad in ["abc", "0", "61", "2.5", "-1"] {
        // The previous page, should it still be there, is not taken for this one.
        b.eval("window.bloatlab.state = 'stale'; ''");
        b.open(&format!("{url}?autostart=1&duration={bad}"));
        assert_eq!(
            b.wait_state(&["error", "running", "done"], Duration::from_secs(20)),
            "error",
            "duration={bad}"
        );
        let msg = b.eval("document.getElementById('message').textContent");
        assert!(
            msg.contains(&format!("?duration=\"{bad}\"")) && msg.contains("from 1 to 60"),
            "{bad}: {msg}"
        );
    }
}
