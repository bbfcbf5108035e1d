//! `bloatlab demo`: build a lab (20 Mbit/s, 80 ms RTT), run RRUL against a deep FIFO and
//! then against FQ-CoDel, print the two side by side, write the HTML report, and leave
//! nothing behind.
//!
//! Everything runs as subprocesses of this binary (`lab up`, `lab exec ... server`,
//! `lab exec ... test rrul`, `report`, `lab down`) in a [`LabSession`], which owns the
//! cleanup: the server is killed by PID and the lab is taken down (`lab down NAME`) when
//! it drops, on success, error and Ctrl-C alike.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::session::{self, LabSession, SessionError, last_line};
use bloatlab_report::Run;
use bloatlab_report::view::Comparison;
use bloatlab_results::ResultsFile;

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
    /// The two labs, checked before anything starts: the same link with a deep FIFO
    /// (`--fifo-limit`) and with FQ-CoDel. Named `lab`; `lab up` gets them written back
    /// ([`bloatlab_invoke::lab::to_argv`]).
    pub labs: DemoLabs,
    /// Loaded seconds of each RRUL run.
    pub loaded: Duration,
    /// Idle seconds before and after.
    pub idle: Duration,
    /// Server port inside the lab.
    pub port: u16,
    /// Where results and the report go.
    pub out_dir: PathBuf,
}

/// The demo's two labs.
#[derive(Debug, Clone)]
pub struct DemoLabs {
    /// The deep FIFO.
    pub fifo: bloatlab_lab::LabSpec,
    /// FQ-CoDel on the same link.
    pub fq_codel: bloatlab_lab::LabSpec,
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

/// Runs one RRUL in a fresh lab `spec`.
fn run_one(
    cfg: &DemoConfig,
    label: &str,
    spec: &bloatlab_lab::LabSpec,
    stop: &AtomicBool,
    say: &mut dyn FnMut(&str),
) -> Result<DemoRun, DemoError> {
    // `lab up NAME OPTIONS...`: the session names the lab.
    let argv = bloatlab_invoke::lab::to_argv(spec);
    let up: Vec<&str> = argv.iter().skip(3).map(String::as_str).collect();
    say(&format!(
        "building lab {} ({} {}, {} one way, {})",
        cfg.lab,
        label,
        cfg.rate,
        cfg.delay,
        up.join(" ")
    ));
    // Taken down (server first) when it drops, on every path out of here.
    let mut lab = LabSession::up(&cfg.exe, &cfg.lab, &up, stop)?;
    lab.start_server(
        &bloatlab_invoke::server::ServerInvocation::on_port(cfg.port),
        stop,
    )?;
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
    let params = crate::TestParams {
        loaded: cfg.loaded,
        idle_before: cfg.idle,
        idle_after: cfg.idle,
        ..crate::TestParams::default()
    };
    let mut argv = bloatlab_invoke::test::to_argv("rrul", &server, &params);
    argv.extend([
        "-p".to_owned(),
        cfg.port.to_string(),
        "-o".to_owned(),
        path_s,
        "--title".to_owned(),
        title,
    ]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let o = lab
        .run_in("client", &argv, stop)
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
    let fifo = run_one(cfg, "fifo", &cfg.labs.fifo, stop, say)?;
    let fq = run_one(cfg, "fq_codel", &cfg.labs.fq_codel, stop, say)?;
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

/// The runs side by side: `bloatlab report A B`'s comparison
/// ([`bloatlab_report::view::Comparison::headline`]: the reference series' rows, the
/// throughput and the headline grade), every figure recomputed from the files' raw samples
/// as `bloatlab report` does, never read from their stored `derived` section.
pub fn side_by_side(runs: &[(&str, &ResultsFile)]) -> String {
    let loaded: Result<Vec<Run>, _> = runs
        .iter()
        .map(|(label, file)| Run::new(*label, (*file).clone()))
        .collect();
    match loaded {
        Ok(runs) => bloatlab_report::table::comparison(&Comparison::headline(&runs)),
        Err(e) => format!("cannot compare the runs: {e}\n"),
    }
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
            let l = t
                .lines()
                .find(|l| l.starts_with(p))
                .unwrap_or_else(|| panic!("no {p} in {t}"));
            l[p.len()..].split_whitespace().map(str::to_owned).collect()
        };
        assert_eq!(
            cells("udp_be (rtt): loaded median (ms)"),
            ["680.0", "82.00"],
            "{t}"
        );
        assert_eq!(
            cells("udp_be (rtt): loaded induced (ms)"),
            ["+600.0", "+2.00"],
            "{t}"
        );
        assert_eq!(cells("udp_be (rtt): loaded grade"), ["F", "A+"], "{t}");
        // 5 MB over the 2 s loaded phase = 20 Mbit/s.
        assert_eq!(
            cells("throughput loaded up (Mbit/s)"),
            ["20.00", "20.00"],
            "{t}"
        );
        assert_eq!(
            cells("udp_be (rtt): idle median (ms)"),
            ["80.00", "80.00"],
            "{t}"
        );
        assert_eq!(
            cells("bufferbloat grade (worst loaded phase)"),
            ["F", "(loaded,", "+600.0)", "A+", "(loaded,", "+2.00)"],
            "{t}"
        );
        // The same cells as `bloatlab report A B`'s comparison.
        let runs = [
            Run::new("fifo", a).unwrap(),
            Run::new("fq_codel", b).unwrap(),
        ];
        let full = bloatlab_report::table::comparison(&Comparison::new(&runs));
        let line = |text: &str, p: &str| {
            text.lines()
                .find(|l| l.starts_with(p))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        };
        for p in [
            "udp_be (rtt): loaded grade",
            "throughput loaded up (Mbit/s)",
        ] {
            // Column widths differ with the rows shown; the cells do not.
            assert_eq!(line(&t, p), line(&full, p), "{p}");
        }
    }

    /// The comparison is recomputed from raw samples: a stale stored `derived` section
    /// (here one claiming 1 ms under load) changes nothing.
    #[test]
    fn side_by_side_never_reads_the_stored_derived_section() {
        let a = run(680);
        let mut stale = a.clone();
        let d = stale.derived.as_mut().unwrap();
        for s in &mut d.latency {
            for p in &mut s.phases {
                p.grade = Some(bloatlab_results::derived::GradeRecord::APlus);
            }
        }
        d.run_grade = None;
        assert_eq!(
            side_by_side(&[("fifo", &a)]),
            side_by_side(&[("fifo", &stale)])
        );
    }
}
