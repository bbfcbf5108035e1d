//! `bloatlab demo`: build a lab (20 Mbit/s, 80 ms RTT), run RRUL against a deep FIFO and
//! then against FQ-CoDel, print the two side by side, write the HTML report, and leave
//! nothing behind.
//!
//! Everything runs as subprocesses of this binary (`lab up`, `lab exec ... server`,
//! `lab exec ... test rrul`, `report`, `lab down`) in a [`LabSession`], which owns the
//! cleanup: the server is killed by PID and the lab is taken down (`lab down NAME`) when
//! it drops, on success, error and Ctrl-C alike.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::session::{self, LabSession, SessionError, last_line};
use bloatlab_results::ResultsFile;
use bloatlab_results::schema::DelayKindRecord;
use bloatlab_results::schema::derived::GradeRecord;

/// The demo's knobs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// The `bloatlab` executable.
    pub exe: PathBuf,
    /// Lab name (1-16 of `a-z0-9-`); its namespaces are `bl-NAME-*`.
    pub lab: String,
    /// Bottleneck rate, tc spelling.
    pub rate: String,
    /// One-way delay, tc spelling (RTT = 2x).
    pub delay: String,
    /// Deep FIFO limit, tc spelling.
    pub fifo_limit: String,
    /// Loaded seconds of each RRUL run.
    pub loaded: Duration,
    /// Idle seconds before and after.
    pub idle: Duration,
    /// Server port inside the lab.
    pub port: u16,
    /// Where results and the report go.
    pub out_dir: PathBuf,
}

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A step failed.
    #[error("{step}: {detail}")]
    Step {
        /// What was being done.
        step: String,
        /// What went wrong (the subprocess's message).
        detail: String,
    },
    /// Ctrl-C.
    #[error("interrupted; the lab was taken down")]
    Interrupted,
}

fn step(step: impl Into<String>, detail: impl Into<String>) -> DemoError {
    DemoError::Step {
        step: step.into(),
        detail: detail.into(),
    }
}

/// One configuration's run.
#[derive(Debug, Clone)]
pub struct DemoRun {
    /// `fifo` or `fq_codel`.
    pub label: String,
    /// Its results file.
    pub path: PathBuf,
    /// The loaded file.
    pub file: ResultsFile,
    /// The `test` command's summary (stdout).
    pub summary: String,
}

/// What the demo produced.
#[derive(Debug, Clone)]
pub struct DemoOutcome {
    /// The runs, FIFO first.
    pub runs: Vec<DemoRun>,
    /// The HTML report, or why it was not written.
    pub html: Result<PathBuf, String>,
}

impl From<SessionError> for DemoError {
    fn from(e: SessionError) -> DemoError {
        match e {
            SessionError::Step { step: s, detail } => step(s, detail),
            SessionError::Interrupted => DemoError::Interrupted,
        }
    }
}

fn check_stop(stop: &AtomicBool) -> Result<(), DemoError> {
    if stop.load(Ordering::Relaxed) {
        Err(DemoError::Interrupted)
    } else {
        Ok(())
    }
}

/// Runs one RRUL in a fresh lab with `qdisc_args`.
fn run_one(
    cfg: &DemoConfig,
    label: &str,
    qdisc_args: &[&str],
    stop: &AtomicBool,
    say: &mut dyn FnMut(&str),
) -> Result<DemoRun, DemoError> {
    let mut up = vec!["--rate", &cfg.rate, "--delay", &cfg.delay];
    up.extend_from_slice(qdisc_args);
    say(&format!(
        "building lab {} ({} {}, {} one way, {})",
        cfg.lab,
        label,
        cfg.rate,
        cfg.delay,
        qdisc_args.join(" ")
    ));
    // Taken down (server first) when it drops, on every path out of here.
    let mut lab = LabSession::up(&cfg.exe, &cfg.lab, &up, stop)?;
    lab.start_server(cfg.port, &[], stop)?;
    let path = cfg.out_dir.join(format!("demo-{label}.json"));
    let path_s = path.to_string_lossy().into_owned();
    let loaded = crate::driver::secs_arg(cfg.loaded);
    let idle = if cfg.idle.is_zero() {
        "0".to_owned()
    } else {
        crate::driver::secs_arg(cfg.idle)
    };
    say(&format!(
        "running rrul against {label}: {idle} s idle, {loaded} s loaded, {idle} s idle"
    ));
    let title = format!("demo: {label}, {} / {} RTT", cfg.rate, cfg.delay);
    let server = session::server_addr().to_string();
    let port = cfg.port.to_string();
    let o = lab
        .run_in(
            "client",
            &[
                "test", "rrul", &server, "-p", &port, "-l", &loaded, "--idle", &idle, "-o",
                &path_s, "--title", &title,
            ],
            stop,
        )
        .map_err(|e| step("running rrul", e))?;
    check_stop(stop)?;
    if !o.status.success() {
        return Err(step(format!("rrul against {label}"), last_line(&o.stderr)));
    }
    let file = bloatlab_results::load(&path)
        .map_err(|e| step(format!("reading {}", path.display()), e.to_string()))?;
    Ok(DemoRun {
        label: label.to_owned(),
        path,
        file,
        summary: String::from_utf8_lossy(&o.stdout).into_owned(),
    })
}

/// Runs the whole demo. `say` receives progress lines.
pub fn run_demo(
    cfg: &DemoConfig,
    stop: &AtomicBool,
    say: &mut dyn FnMut(&str),
) -> Result<DemoOutcome, DemoError> {
    std::fs::create_dir_all(&cfg.out_dir)
        .map_err(|e| step(format!("creating {}", cfg.out_dir.display()), e.to_string()))?;
    let fifo = run_one(
        cfg,
        "fifo",
        &["--qdisc", "fifo", "--limit", &cfg.fifo_limit],
        stop,
        say,
    )?;
    let fq = run_one(cfg, "fq_codel", &["--qdisc", "fq_codel"], stop, say)?;
    let html_path = cfg.out_dir.join("demo.html");
    let html = {
        let a = fifo.path.to_string_lossy().into_owned();
        let b = fq.path.to_string_lossy().into_owned();
        let h = html_path.to_string_lossy().into_owned();
        match session::run_quiet(&cfg.exe, &["report", &a, &b, "--html", &h, "--quiet"]) {
            Ok(o) if o.status.success() => Ok(html_path),
            Ok(o) => Err(last_line(&o.stderr)),
            Err(e) => Err(e),
        }
    };
    Ok(DemoOutcome {
        runs: vec![fifo, fq],
        html,
    })
}

/// One column of the comparison.
#[derive(Debug, Clone, PartialEq)]
struct Column {
    label: String,
    idle_median_ms: Option<f64>,
    loaded: Option<[f64; 7]>,
    induced_ms: Option<f64>,
    grade: Option<GradeRecord>,
    up_mbit: Option<f64>,
    down_mbit: Option<f64>,
}

fn column(label: &str, file: &ResultsFile) -> Column {
    let series =
        bloatlab_stats::reference_series(&file.raw.latency_series()).map(|s| s.name.clone());
    let d = file.derived.as_ref();
    let s = d.and_then(|d| {
        d.latency
            .iter()
            .find(|s| Some(&s.name) == series.as_ref() && s.kind == DelayKindRecord::Rtt)
    });
    let ms = |ns: u64| ns as f64 / 1e6;
    let idle = s.and_then(|s| s.phases.iter().find(|p| p.phase == "idle"));
    let loaded = s.and_then(|s| s.phases.iter().find(|p| p.phase == "loaded"));
    let tp = d.and_then(|d| d.throughput.iter().find(|t| t.phase == "loaded"));
    Column {
        label: label.to_owned(),
        idle_median_ms: idle.and_then(|p| p.delay).map(|x| ms(x.median_ns)),
        loaded: loaded.and_then(|p| p.delay).map(|x| {
            [
                x.min_ns,
                x.p10_ns,
                x.median_ns,
                x.mean_ns,
                x.p90_ns,
                x.p99_ns,
                x.max_ns,
            ]
            .map(ms)
        }),
        induced_ms: loaded.and_then(|p| p.induced_ns).map(|v| v as f64 / 1e6),
        // The headline: the worst loaded phase (one loaded phase in RRUL).
        grade: d.and_then(|d| d.run_grade.as_ref()).map(|g| g.grade),
        up_mbit: tp.map(|t| t.up_bps as f64 / 1e6),
        down_mbit: tp.map(|t| t.down_bps as f64 / 1e6),
    }
}

/// The side-by-side table of several RRUL runs (reference probe series, loaded phase).
pub fn side_by_side(runs: &[(&str, &ResultsFile)]) -> String {
    let cols: Vec<Column> = runs.iter().map(|(l, f)| column(l, f)).collect();
    let mut out = String::new();
    let f1 = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
    let _ = write!(out, "{:<28}", "");
    for c in &cols {
        let _ = write!(out, "{:>14}", c.label);
    }
    out.push('\n');
    let mut row = |name: &str, cells: Vec<String>| {
        let _ = write!(out, "{name:<28}");
        for c in cells {
            let _ = write!(out, "{c:>14}");
        }
        out.push('\n');
    };
    row(
        "idle median RTT (ms)",
        cols.iter().map(|c| f1(c.idle_median_ms)).collect(),
    );
    for (i, name) in ["min", "p10", "median", "mean", "p90", "p99", "max"]
        .iter()
        .enumerate()
    {
        row(
            &format!("loaded {name} RTT (ms)"),
            cols.iter().map(|c| f1(c.loaded.map(|l| l[i]))).collect(),
        );
    }
    row(
        "induced latency (ms)",
        cols.iter()
            .map(|c| c.induced_ms.map_or("-".into(), |v| format!("{v:+.1}")))
            .collect(),
    );
    row(
        "upload (Mbit/s)",
        cols.iter().map(|c| f1(c.up_mbit)).collect(),
    );
    row(
        "download (Mbit/s)",
        cols.iter().map(|c| f1(c.down_mbit)).collect(),
    );
    row(
        "bufferbloat grade",
        cols.iter()
            .map(|c| c.grade.map_or_else(|| "-".into(), |g| g.to_string()))
            .collect(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::Metadata;
    use bloatlab_results::schema::{FlowRecord, TransferRecord};

    fn run(loaded_rtt_ms: u64) -> ResultsFile {
        let ms = Duration::from_millis;
        let mut raw = bloatlab_testkit::sample::idle_then_loaded(
            ms(80),
            ms(loaded_rtt_ms),
            Duration::from_secs(3),
        );
        raw.throughput = vec![FlowRecord {
            name: "tcp_up_be".into(),
            ecn: None,
            direction: bloatlab_results::schema::DirectionRecord::Up,
            tcp: Default::default(),
            samples: vec![TransferRecord {
                start_ns: 1_000_000_000,
                end_ns: 3_000_000_000,
                bytes: 5_000_000,
            }],
        }];
        let meta = Metadata::new("rrul", vec![], jiff::Timestamp::UNIX_EPOCH);
        ResultsFile::new(meta, raw).with_derived().unwrap()
    }

    #[test]
    fn side_by_side_shows_the_difference() {
        let (a, b) = (run(680), run(82));
        let t = side_by_side(&[("fifo", &a), ("fq_codel", &b)]);
        let cells = |p: &str| -> Vec<String> {
            let l = t.lines().find(|l| l.starts_with(p)).unwrap();
            l[28..].split_whitespace().map(str::to_owned).collect()
        };
        assert_eq!(cells("loaded median RTT"), ["680.0", "82.0"], "{t}");
        assert_eq!(cells("induced latency"), ["+600.0", "+2.0"], "{t}");
        assert_eq!(cells("bufferbloat grade"), ["F", "A+"], "{t}");
        // 5 MB over the 2 s loaded phase = 20 Mbit/s.
        assert_eq!(cells("upload (Mbit/s)"), ["20.0", "20.0"], "{t}");
        assert_eq!(cells("idle median RTT"), ["80.0", "80.0"], "{t}");
    }
}
