//! A browser test's result as the page posts it (its "Download JSON"
//! document, `kind: "bloatlab-browser-test"`, version 1; written by
//! `assets/browser/app.js` `resultJson`), checked field by field and turned
//! into a bloatlab results file ([`to_results`]) that `bloatlab report` reads.
//!
//! In the file (schema: `bloatlab_results::schema`):
//! * `raw.phases`: the page's phases (`idle`, then the loaded ones), times
//!   from the page's start in ns;
//! * `raw.latency`: one series `http_probe` (kind `rtt`): each probe's send
//!   time and round trip, `null` when it got no answer;
//! * `raw.throughput`: `download` and `upload` as the page counted their
//!   bytes (every 250 ms), with `tcp` holding the server's own TCP_INFO of
//!   the load connections (the sender's side for the download, the
//!   receiver's for the upload);
//! * `metadata.hosts`: `local` is this server, `remote` the client: its
//!   address and the `User-Agent` its requests carried;
//! * `metadata.extra.browser`: what the page computed (its grade, phase
//!   figures, verdict) and each load connection's TCP_INFO summary.
//!
//! The page's numbers are kept as it sent them but never trusted for the
//! report: `bloatlab report` recomputes everything from `raw`.

use super::ledger::{Finished, TestId};
use super::tcp::{ConnTcp, Dir};
use bloatlab_results::schema::{
    DelayKindRecord, DirectionRecord, FlowRecord, FlowTcpRecord, HostRecord, HostRole,
    LatencyRecord, PhaseKindRecord, PhaseRecord, ProbeRecord, TcpInfoRecord, TransferRecord,
};
use bloatlab_results::{Metadata, Raw, ResultsFile};
use serde::Deserialize;
use std::net::SocketAddr;

/// The page's document kind and version this server reads.
pub const KIND: &str = "bloatlab-browser-test";
pub const VERSION: u32 = 1;
/// The most characters of a user agent kept.
pub const MAX_USER_AGENT: usize = 512;
/// Phase, probe and sample counts beyond any real test of at most
/// `--browser-max-duration` (at 10 probes and 4 samples a second, an hour).
const MAX_ITEMS: usize = 40_000;

/// What is wrong with a posted result; shown to the page.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadResult {
    #[error("the result is not JSON of the page's form: {0}")]
    Json(String),
    #[error("the result is not a bloatlab browser test (kind {0:?}, version {1})")]
    NotOurs(String, u32),
    #[error("the result's {field} is out of range: {why}")]
    Field { field: String, why: String },
}

fn bad(field: impl Into<String>, why: impl Into<String>) -> BadResult {
    BadResult::Field {
        field: field.into(),
        why: why.into(),
    }
}

#[derive(Debug, Deserialize)]
pub struct PageResult {
    pub kind: String,
    pub version: u32,
    #[serde(default)]
    pub user_agent: Option<String>,
    #[serde(default)]
    pub cross_origin_isolated: bool,
    pub duration_s: u32,
    #[serde(default)]
    pub grade: Option<String>,
    #[serde(default)]
    pub induced_ms: Option<f64>,
    #[serde(default)]
    pub verdict: Vec<String>,
    pub phases: Vec<PagePhase>,
    pub probes: Vec<PageProbe>,
    pub throughput: Vec<PageBytes>,
    #[serde(default)]
    pub load_errors: LoadErrors,
}

/// Load requests that failed and were retried, per direction.
#[derive(Debug, Default, Deserialize, serde::Serialize)]
pub struct LoadErrors {
    #[serde(default)]
    pub down: u64,
    #[serde(default)]
    pub up: u64,
}

#[derive(Debug, Deserialize, serde::Serialize)]
pub struct PagePhase {
    pub name: String,
    pub kind: String,
    pub start_ms: f64,
    pub end_ms: f64,
    #[serde(default)]
    pub probes: Option<u64>,
    #[serde(default)]
    pub lost: Option<u64>,
    #[serde(default)]
    pub median_ms: Option<f64>,
    #[serde(default)]
    pub p90_ms: Option<f64>,
    #[serde(default)]
    pub induced_ms: Option<f64>,
    #[serde(default)]
    pub probe_rpm: Option<f64>,
    #[serde(default)]
    pub download_mbps: Option<f64>,
    #[serde(default)]
    pub upload_mbps: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct PageProbe {
    pub t_ms: f64,
    pub rtt_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
pub struct PageBytes {
    pub t_ms: f64,
    pub down_bytes: f64,
    pub up_bytes: f64,
}

/// Milliseconds (as the page's `performance.now()` gives them) as whole
/// nanoseconds, within `[0, limit_ms]`.
fn ns(field: &str, ms: f64, limit_ms: f64) -> Result<u64, BadResult> {
    if !ms.is_finite() || !(0.0..=limit_ms).contains(&ms) {
        return Err(bad(
            field,
            format!("{ms} ms is not within 0..={limit_ms} ms"),
        ));
    }
    Ok((ms * 1e6).round() as u64)
}

impl PageResult {
    /// Parses and checks a posted body; `limit_ms` is the longest a test
    /// may run (`--browser-max-duration`).
    pub fn parse(body: &[u8], limit_ms: f64) -> Result<PageResult, BadResult> {
        let r: PageResult =
            serde_json::from_slice(body).map_err(|e| BadResult::Json(e.to_string()))?;
        if r.kind != KIND || r.version != VERSION {
            return Err(BadResult::NotOurs(r.kind, r.version));
        }
        let want: Vec<&str> = crate::browser::PHASES.iter().map(|p| p.name).collect();
        let got: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
        if got != want {
            return Err(bad("phases", format!("{got:?}, expected {want:?}")));
        }
        for (i, list) in [r.probes.len(), r.throughput.len()].into_iter().enumerate() {
            if list > MAX_ITEMS {
                return Err(bad(["probes", "throughput"][i], "too many entries"));
            }
        }
        let mut end = 0;
        for p in &r.phases {
            let a = ns("phases.start_ms", p.start_ms, limit_ms)?;
            let b = ns("phases.end_ms", p.end_ms, limit_ms)?;
            if a < end || b <= a {
                return Err(bad("phases", format!("{:?} is empty or overlaps", p.name)));
            }
            end = b;
            let kind = if p.name == "idle" { "idle" } else { "loaded" };
            if p.kind != kind {
                return Err(bad("phases", format!("{:?} must be {kind}", p.name)));
            }
        }
        let mut prev = 0.0;
        for p in &r.probes {
            ns("probes.t_ms", p.t_ms, limit_ms)?;
            if let Some(rtt) = p.rtt_ms {
                ns("probes.rtt_ms", rtt, limit_ms)?;
            }
            if p.t_ms < prev {
                return Err(bad("probes", "not in time order"));
            }
            prev = p.t_ms;
        }
        let (mut t, mut d, mut u) = (-1.0, 0.0, 0.0);
        for s in &r.throughput {
            ns("throughput.t_ms", s.t_ms, limit_ms)?;
            let ok = |v: f64| (0.0..1e15).contains(&v);
            if !ok(s.down_bytes) || !ok(s.up_bytes) {
                return Err(bad("throughput", "byte counts must be finite and >= 0"));
            }
            if s.t_ms <= t || s.down_bytes < d || s.up_bytes < u {
                return Err(bad(
                    "throughput",
                    "samples must be cumulative and in time order",
                ));
            }
            (t, d, u) = (s.t_ms, s.down_bytes, s.up_bytes);
        }
        Ok(r)
    }
}

/// What the server knows of the test besides the page's document.
#[derive(Debug)]
pub struct Context<'a> {
    pub id: TestId,
    pub finished: &'a Finished,
    /// When the server started the test.
    pub start_time: jiff::Timestamp,
    /// The server's address the client used.
    pub local: SocketAddr,
    /// The client's `User-Agent` header, if any.
    pub user_agent: Option<String>,
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

fn tcp_record(c: Option<ConnTcp>) -> Option<TcpInfoRecord> {
    let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).ok();
    c.map(|c| TcpInfoRecord {
        retransmits: Some(u64::from(c.retransmits)),
        min_rtt_ns: ns(c.min_rtt),
        max_rtt_ns: ns(c.max_rtt),
        mean_rtt_ns: ns(c.mean_rtt()),
        ..TcpInfoRecord::default()
    })
}

/// The results file of a finished test.
pub fn to_results(page: &PageResult, cx: &Context<'_>) -> ResultsFile {
    let ms_ns = |ms: f64| (ms * 1e6).round() as u64;
    let phases = page
        .phases
        .iter()
        .map(|p| PhaseRecord {
            kind: if p.kind == "idle" {
                PhaseKindRecord::Idle
            } else {
                PhaseKindRecord::Loaded
            },
            name: p.name.clone(),
            start_ns: ms_ns(p.start_ms),
            end_ns: ms_ns(p.end_ms),
        })
        .collect();
    let samples = page
        .probes
        .iter()
        .map(|p| ProbeRecord {
            sent_ns: ms_ns(p.t_ms),
            delay_ns: p.rtt_ms.map(ms_ns),
            duplicates: 0,
            late: false,
            unfinished: false,
        })
        .collect();
    let transfers = |pick: fn(&PageBytes) -> f64| -> Vec<TransferRecord> {
        page.throughput
            .windows(2)
            .map(|w| TransferRecord {
                start_ns: ms_ns(w[0].t_ms),
                end_ns: ms_ns(w[1].t_ms),
                bytes: (pick(&w[1]) - pick(&w[0])).round() as u64,
            })
            .collect()
    };
    let tcp = &cx.finished.tcp;
    let throughput = vec![
        FlowRecord {
            name: "download".into(),
            direction: DirectionRecord::Down,
            samples: transfers(|s| s.down_bytes),
            tcp: FlowTcpRecord {
                sender: tcp_record(tcp.direction(Dir::Down)),
                receiver: None,
            },
            ecn: None,
        },
        FlowRecord {
            name: "upload".into(),
            direction: DirectionRecord::Up,
            samples: transfers(|s| s.up_bytes),
            tcp: FlowTcpRecord {
                sender: None,
                receiver: tcp_record(tcp.direction(Dir::Up)),
            },
            ecn: None,
        },
    ];
    let raw = Raw {
        phases,
        latency: vec![LatencyRecord {
            name: "http_probe".into(),
            kind: DelayKindRecord::Rtt,
            samples,
        }],
        throughput,
    };
    let mut m = Metadata::new(
        "browser",
        vec![format!("GET /?duration={}", page.duration_s)],
        cx.start_time,
    );
    m.title = Some(format!("browser test {}", cx.id));
    m.hosts.local = HostRecord {
        address: Some(cx.local.ip().to_string()),
        name: None,
        port: Some(cx.local.port()),
        role: Some(HostRole::Server),
        software: Some(format!("bloatlab {}", env!("CARGO_PKG_VERSION"))),
    };
    let ua = cx
        .user_agent
        .as_deref()
        .or(page.user_agent.as_deref())
        .map(|s| truncate(s, MAX_USER_AGENT));
    m.hosts.remote = HostRecord {
        address: Some(cx.finished.peer.to_string()),
        name: None,
        port: None,
        role: Some(HostRole::Client),
        software: ua.clone(),
    };
    let conns: Vec<serde_json::Value> = cx
        .finished
        .connections()
        .iter()
        .map(|(k, c)| {
            serde_json::json!({
                "client_port": k.peer.port(),
                "direction": match k.dir { Dir::Down => "down", Dir::Up => "up" },
                "first_ns": c.first.as_nanos() as u64,
                "last_ns": c.last.as_nanos() as u64,
                "rtt_samples": c.samples,
                "min_rtt_ns": (c.samples > 0).then_some(c.min_rtt.as_nanos() as u64),
                "mean_rtt_ns": (c.samples > 0).then_some(c.mean_rtt().as_nanos() as u64),
                "max_rtt_ns": (c.samples > 0).then_some(c.max_rtt.as_nanos() as u64),
                "retransmits": c.retransmits,
            })
        })
        .collect();
    let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
    m.extra.insert(
        "browser".into(),
        serde_json::json!({
            "test_id": cx.id.to_string(),
            "user_agent": ua,
            "cross_origin_isolated": page.cross_origin_isolated,
            "duration_s": page.duration_s,
            "page_grade": page.grade.as_deref().map(|g| truncate(g, 4)),
            "page_induced_ms": finite(page.induced_ms),
            "page_phases": page.phases,
            "verdict": page.verdict.iter().take(8).map(|v| truncate(v, 1000)).collect::<Vec<_>>(),
            "load_errors": page.load_errors,
            "server_tcp_connections": conns,
        }),
    );
    ResultsFile::new(m, raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal valid document of the page's form.
    fn doc() -> serde_json::Value {
        serde_json::json!({
            "kind": KIND, "version": 1, "duration_s": 2, "user_agent": "UA",
            "grade": "A", "induced_ms": 3.0, "verdict": ["fine"],
            "phases": [
                {"name": "idle", "kind": "idle", "start_ms": 0, "end_ms": 2000},
                {"name": "download", "kind": "loaded", "start_ms": 3000, "end_ms": 5000},
                {"name": "upload", "kind": "loaded", "start_ms": 6000, "end_ms": 8000},
                {"name": "bidirectional", "kind": "loaded", "start_ms": 9000, "end_ms": 11000}
            ],
            "probes": [{"t_ms": 0.5, "rtt_ms": 1.25}, {"t_ms": 100.5, "rtt_ms": null}],
            "throughput": [
                {"t_ms": 0, "down_bytes": 0, "up_bytes": 0},
                {"t_ms": 250, "down_bytes": 1000, "up_bytes": 10}
            ],
            "load_errors": {"down": 0, "up": 1}
        })
    }

    fn parse(v: &serde_json::Value) -> Result<PageResult, BadResult> {
        PageResult::parse(v.to_string().as_bytes(), 60_000.0)
    }

    #[test]
    fn a_page_document_becomes_a_results_file_report_reads() {
        let page = parse(&doc()).unwrap();
        let finished = Finished {
            peer: "192.0.2.7".parse().unwrap(),
            started: std::time::Instant::now(),
            tcp: Default::default(),
        };
        let file = to_results(
            &page,
            &Context {
                id: TestId(0xab),
                finished: &finished,
                start_time: jiff::Timestamp::UNIX_EPOCH,
                local: "127.0.0.1:8080".parse().unwrap(),
                user_agent: Some("Chromium/1".into()),
            },
        );
        let bytes = bloatlab_results::to_vec(&file).unwrap();
        let back = bloatlab_results::from_slice(&bytes).unwrap();
        assert_eq!(back.raw.phases.len(), 4);
        let probes = &back.raw.latency[0].samples;
        assert_eq!(
            (probes[0].sent_ns, probes[0].delay_ns),
            (500_000, Some(1_250_000))
        );
        assert_eq!(probes[1].delay_ns, None);
        assert_eq!(back.raw.throughput[0].samples[0].bytes, 1000);
        assert_eq!(
            back.metadata.hosts.remote.address.as_deref(),
            Some("192.0.2.7")
        );
        // The header's user agent, not the document's.
        assert_eq!(
            back.metadata.hosts.remote.software.as_deref(),
            Some("Chromium/1")
        );
        assert_eq!(
            back.metadata.extra["browser"]["test_id"],
            "00000000000000ab"
        );
        bloatlab_report::Run::new("t", back).unwrap();
    }

    #[test]
    fn malformed_documents_are_refused_naming_the_problem() {
        assert!(matches!(
            PageResult::parse(b"{", 1e3),
            Err(BadResult::Json(_))
        ));
        let cases: [(&str, serde_json::Value); 6] = [
            ("/kind", serde_json::json!("other")),
            ("/phases/1/name", serde_json::json!("upload")),
            ("/phases/1/end_ms", serde_json::json!(2500)),
            ("/probes/0/t_ms", serde_json::json!(1e12)),
            ("/probes/1/t_ms", serde_json::json!(0.1)),
            ("/throughput/1/down_bytes", serde_json::json!(-5)),
        ];
        for (at, v) in cases {
            let mut d = doc();
            *d.pointer_mut(at).unwrap() = v;
            let e = parse(&d).unwrap_err();
            assert!(!e.to_string().is_empty(), "{at}");
        }
    }
}
