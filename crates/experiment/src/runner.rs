//! Running an experiment: for each run, a fresh lab (`lab up` with the point's options), a
//! `bloatlab server` in host `server` (with the `[server]` options), the test (or, with
//! `[client]`, `bloatlab client --json`) from host `client`, the lab's counters, then
//! `lab down`. Everything is a subprocess of the `bloatlab` binary, owned by guards.
//!
//! Output directory:
//!
//! ```text
//! DIR/plan.json              the experiment's name, file and every run of this shard
//! DIR/runs/RUN.json          the run's results file (written atomically by `bloatlab test`),
//!                            or for `[client]` runs the client's `--json` document
//! DIR/runs/RUN.lab.json      `lab status --json` after the run (per-stage counters)
//! DIR/runs/RUN.row.json      the run's summary row; written last, so it marks the run complete
//! DIR/summary.csv, DIR/summary.json, DIR/report.html
//! ```
//!
//! **Resume.** A run whose `RUN.row.json` exists is complete and kept; any other run (never
//! started, or stopped half-way with a results file marked interrupted) is run again.
//! **Ctrl-C** (the `stop` flag): the test in progress gets SIGINT, its run is not marked
//! complete, the lab is taken down by its guard, and every finished run stays as it is.

use crate::file::Experiment;
use crate::matrix::{self, Run, Section, Shard};
use crate::process::{self, LabGuard};
use crate::summary::{self, Row};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where and how to run.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The `bloatlab` binary.
    pub exe: PathBuf,
    /// Output directory.
    pub out: PathBuf,
    /// Lab name to use (1-16 of `a-z0-9-`).
    pub lab: String,
    /// Server port inside the lab.
    pub port: u16,
    /// Only this shard's points.
    pub shard: Option<Shard>,
}

/// Why an experiment stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The output directory holds another experiment's runs.
    #[error("{dir} holds runs of experiment {found:?}, not {want:?}; use another --out")]
    OtherExperiment {
        /// The directory.
        dir: String,
        /// Its experiment.
        found: String,
        /// Ours.
        want: String,
    },
    /// The output directory holds the other variant's runs (`--quick` or not) of the experiment.
    #[error(
        "{dir} holds the {found} runs of {name}; run the {want} variant into another --out (a resume would mix them)"
    )]
    OtherVariant {
        /// The directory.
        dir: String,
        /// The experiment.
        name: String,
        /// The variant in the directory (`quick` or `full`).
        found: &'static str,
        /// Ours.
        want: &'static str,
    },
    /// A file could not be written or read.
    #[error("{path}: {detail}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        detail: String,
    },
    /// Ctrl-C: finished runs are kept, the lab is down.
    #[error(
        "interrupted after {done} of {total} runs; finished runs are kept in {dir} (run again to resume)"
    )]
    Interrupted {
        /// Complete runs.
        done: usize,
        /// All runs of this shard.
        total: usize,
        /// The directory.
        dir: String,
    },
}

/// What happened to each run.
#[derive(Debug, Clone, PartialEq)]
pub enum RunStatus {
    /// Complete from an earlier invocation (resume).
    Kept,
    /// Ran now and completed.
    Done,
    /// Ran now and failed (the step and message); it will be redone on the next invocation.
    Failed(String),
}

/// Progress events for the terminal.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// A run starts: its 1-based position, the total, the run, and the estimated time left
    /// (runs still to do x the mean duration so far, or the test's length when unknown).
    Start {
        /// 1-based position.
        n: usize,
        /// Runs in this invocation.
        total: usize,
        /// The run.
        run: &'a Run,
        /// Estimated time left, this run included.
        left: Option<Duration>,
    },
    /// A run ended.
    End {
        /// The run.
        run: &'a Run,
        /// How.
        status: &'a RunStatus,
    },
}

/// The result of an invocation.
#[derive(Debug)]
pub struct Outcome {
    /// Every run of this shard with its status, in run order.
    pub runs: Vec<(Run, RunStatus)>,
    /// The summary rows of every complete run (kept and new), in run order.
    pub rows: Vec<Row>,
}

fn io(path: &Path, e: impl std::fmt::Display) -> RunError {
    RunError::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// Writes `bytes` to `path` atomically (temporary file + rename).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    bloatlab_results::write_atomic(path, |f| std::io::Write::write_all(f, bytes))
        .map_err(|e| io(path, e))
}

/// The runs directory of an output directory.
pub fn runs_dir(out: &Path) -> PathBuf {
    out.join("runs")
}

/// The row of a complete run, if `RUN.row.json` exists and reads.
pub fn complete_row(out: &Path, run_name: &str) -> Option<Row> {
    let b = std::fs::read(runs_dir(out).join(format!("{run_name}.row.json"))).ok()?;
    serde_json::from_slice(&b).ok()
}

/// The address of the lab's server host.
pub const SERVER_ADDR: &str = "10.77.0.2";

/// Checks the output directory belongs to `exp` (or is new) and records the plan.
fn prepare(exp: &Experiment, cfg: &RunnerConfig, runs: &[Run]) -> Result<(), RunError> {
    let plan = cfg.out.join("plan.json");
    if let Ok(b) = std::fs::read(&plan) {
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
        let found = v["experiment"].as_str().unwrap_or("").to_string();
        if found != exp.name {
            return Err(RunError::OtherExperiment {
                dir: cfg.out.display().to_string(),
                found,
                want: exp.name.clone(),
            });
        }
        // Plans written before variants were recorded are full runs.
        let quick = v["quick"].as_bool().unwrap_or(false);
        if quick != exp.quick_variant {
            let variant = |q: bool| if q { "quick" } else { "full" };
            return Err(RunError::OtherVariant {
                dir: cfg.out.display().to_string(),
                name: exp.name.clone(),
                found: variant(quick),
                want: variant(exp.quick_variant),
            });
        }
    }
    std::fs::create_dir_all(runs_dir(&cfg.out)).map_err(|e| io(&cfg.out, e))?;
    let v = serde_json::json!({
        "experiment": exp.name,
        "quick": exp.quick_variant,
        "file": exp.file,
        "shard": cfg.shard.map(|s| format!("{}/{}", s.k, s.n)),
        "runs": runs.iter().map(Run::name).collect::<Vec<_>>(),
    });
    let bytes = serde_json::to_vec_pretty(&v).map_err(|e| io(&plan, e))?;
    write_file(&plan, &bytes)
}

/// Runs (or resumes) the experiment.
pub fn run(
    exp: &Experiment,
    cfg: &RunnerConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, RunError> {
    let runs = matrix::runs(exp, cfg.shard);
    prepare(exp, cfg, &runs)?;
    let todo = runs
        .iter()
        .filter(|r| complete_row(&cfg.out, &r.name()).is_none())
        .count();
    let mut statuses = Vec::new();
    let mut n = 0;
    let mut spent = Duration::ZERO;
    let mut timed = 0u32;
    for r in &runs {
        if complete_row(&cfg.out, &r.name()).is_some() {
            statuses.push((r.clone(), RunStatus::Kept));
            continue;
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        n += 1;
        let left = (timed > 0).then(|| spent / timed * (todo - n + 1) as u32);
        progress(Event::Start {
            n,
            total: todo,
            run: r,
            left,
        });
        let t0 = Instant::now();
        let status = match run_one(exp, cfg, r, stop) {
            Ok(()) => RunStatus::Done,
            Err(e) => RunStatus::Failed(e),
        };
        spent += t0.elapsed();
        timed += 1;
        progress(Event::End {
            run: r,
            status: &status,
        });
        statuses.push((r.clone(), status));
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let rows: Vec<Row> = runs
        .iter()
        .filter_map(|r| complete_row(&cfg.out, &r.name()))
        .collect();
    write_summary(&cfg.out, &exp.name, &rows, &param_names(exp))?;
    if stop.load(Ordering::Relaxed) {
        return Err(RunError::Interrupted {
            done: rows.len(),
            total: runs.len(),
            dir: cfg.out.display().to_string(),
        });
    }
    Ok(Outcome {
        runs: statuses,
        rows,
    })
}

/// The parameter names (summary columns) of an experiment.
pub fn param_names(exp: &Experiment) -> Vec<String> {
    exp.matrix.iter().map(|p| p.name.clone()).collect()
}

/// Writes `summary.csv`, `summary.json` and `report.html` for `rows`.
pub fn write_summary(
    out: &Path,
    name: &str,
    rows: &[Row],
    params: &[String],
) -> Result<(), RunError> {
    write_file(&out.join("summary.csv"), summary::to_csv(rows).as_bytes())?;
    let json = serde_json::to_vec_pretty(&summary::to_json(name, rows))
        .map_err(|e| io(&out.join("summary.json"), e))?;
    write_file(&out.join("summary.json"), &json)?;
    let html = crate::html::report(name, rows, params);
    write_file(&out.join("report.html"), html.as_bytes())
}

/// One run; `Err` carries the failed step and its message.
fn run_one(exp: &Experiment, cfg: &RunnerConfig, r: &Run, stop: &AtomicBool) -> Result<(), String> {
    let exe = cfg.exe.as_path();
    let exe_s = exe.to_string_lossy().into_owned();
    let lab_args = matrix::argv(exp, Section::Lab, &r.point);
    let mut up: Vec<&str> = vec!["lab", "up", &cfg.lab];
    up.extend(lab_args.iter().map(|(s, _)| s.as_str()));
    // The guard exists before `lab up`, so a half-built lab is removed too.
    let _lab = LabGuard {
        exe: exe.to_path_buf(),
        name: cfg.lab.clone(),
    };
    let o = process::quiet(exe, &up).map_err(|e| format!("lab up: {e}"))?;
    if !o.status.success() {
        return Err(format!("lab up: {}", process::last_line(&o.stderr)));
    }
    let port = cfg.port.to_string();
    let server_args = matrix::argv(exp, Section::Server, &r.point);
    let mut server: Vec<&str> = vec![
        "lab", "exec", &cfg.lab, "server", "--", &exe_s, "server", "-p", &port,
    ];
    server.extend(server_args.iter().map(|(s, _)| s.as_str()));
    // Killed by PID when the guard drops: on success, failure and Ctrl-C.
    let _server = process::spawn(exe, &server).map_err(|e| format!("server: {e}"))?;
    wait_for_server(exe, &cfg.lab, &port, stop)?;
    let results = runs_dir(&cfg.out).join(format!("{}.json", r.name()));
    let measured = match exp.client {
        Some(_) => Measured::Client(Box::new(run_client(exp, cfg, r, &results, stop)?)),
        None => Measured::Test(Box::new(run_test(exp, cfg, r, &results, stop)?)),
    };
    // Counters are published every 200 ms and written every 500 ms: wait for the last
    // packets of the run to be counted.
    std::thread::sleep(Duration::from_millis(1200));
    let st = process::quiet(exe, &["lab", "status", &cfg.lab, "--json"])
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .unwrap_or_default();
    let lab_json = runs_dir(&cfg.out).join(format!("{}.lab.json", r.name()));
    write_file(
        &lab_json,
        serde_json::to_vec_pretty(&st)
            .unwrap_or_default()
            .as_slice(),
    )
    .map_err(|e| e.to_string())?;
    let (name, point, params) = (r.name(), r.point.name(), &r.point.params);
    let row = match &measured {
        Measured::Test(file) => summary::row(&name, &point, r.rep, params, file, &st["counters"]),
        Measured::Client(doc) => {
            summary::client_row(&name, &point, r.rep, params, doc, &st["counters"])
        }
    };
    let row_path = runs_dir(&cfg.out).join(format!("{}.row.json", r.name()));
    let bytes = serde_json::to_vec_pretty(&row).map_err(|e| e.to_string())?;
    write_file(&row_path, &bytes).map_err(|e| e.to_string())
}

/// What a run measured.
enum Measured {
    /// A `bloatlab test` results file.
    Test(Box<bloatlab_results::ResultsFile>),
    /// A `bloatlab client --json` document.
    Client(Box<bloatlab_metrics::json::Document>),
}

/// `bloatlab test` from host `client`; it writes `results` itself.
fn run_test(
    exp: &Experiment,
    cfg: &RunnerConfig,
    r: &Run,
    results: &Path,
    stop: &AtomicBool,
) -> Result<bloatlab_results::ResultsFile, String> {
    let exe = cfg.exe.as_path();
    let exe_s = exe.to_string_lossy().into_owned();
    let port = cfg.port.to_string();
    let results_s = results.to_string_lossy().into_owned();
    // A journal left by an earlier attempt at this run that was killed would make
    // `bloatlab test` refuse to start; the run is measured again, so it goes.
    let _ = bloatlab_suite::journal::remove(&bloatlab_suite::journal::path_for(results));
    let title = format!("{} {} rep {}", exp.name, r.point.label(), r.rep);
    let test_args = matrix::argv(exp, Section::Test, &r.point);
    let test_name = matrix::test_name(exp, &r.point);
    let mut t: Vec<&str> = vec![
        "lab",
        "exec",
        &cfg.lab,
        "client",
        "--",
        &exe_s,
        "test",
        &test_name,
        SERVER_ADDR,
        "-p",
        &port,
        "-o",
        &results_s,
        "--title",
        &title,
    ];
    t.extend(test_args.iter().map(|(s, _)| s.as_str()));
    let o = process::stoppable(exe, &t, stop).map_err(|e| format!("test: {e}"))?;
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted".into());
    }
    if !o.status.success() {
        return Err(format!(
            "test {}: {}",
            test_name,
            process::last_line(&o.stderr)
        ));
    }
    bloatlab_results::load(results).map_err(|e| format!("reading {results_s}: {e}"))
}

/// `bloatlab client SERVER --json` from host `client`; its document (checked against the
/// schema) is written to `results` atomically.
fn run_client(
    exp: &Experiment,
    cfg: &RunnerConfig,
    r: &Run,
    results: &Path,
    stop: &AtomicBool,
) -> Result<bloatlab_metrics::json::Document, String> {
    let exe = cfg.exe.as_path();
    let exe_s = exe.to_string_lossy().into_owned();
    let port = cfg.port.to_string();
    let args = matrix::argv(exp, Section::Client, &r.point);
    let mut c: Vec<&str> = vec![
        "lab",
        "exec",
        &cfg.lab,
        "client",
        "--",
        &exe_s,
        "client",
        SERVER_ADDR,
        "-p",
        &port,
        "--json",
    ];
    c.extend(args.iter().map(|(s, _)| s.as_str()));
    let o = process::stoppable(exe, &c, stop).map_err(|e| format!("client: {e}"))?;
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted".into());
    }
    if !o.status.success() {
        return Err(format!("client: {}", process::last_line(&o.stderr)));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let doc = bloatlab_metrics::json::Document::from_json(&text)
        .map_err(|e| format!("client: its --json output does not read: {e}"))?;
    write_file(results, &o.stdout).map_err(|e| e.to_string())?;
    Ok(doc)
}

/// Waits (at most 15 s) until the lab's server answers a latency probe.
pub fn wait_for_server(exe: &Path, lab: &str, port: &str, stop: &AtomicBool) -> Result<(), String> {
    let exe_s = exe.to_string_lossy().into_owned();
    let t0 = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let o = process::quiet(
            exe,
            &[
                "lab",
                "exec",
                lab,
                "client",
                "--",
                &exe_s,
                "ping",
                SERVER_ADDR,
                "-p",
                port,
                "-c",
                "1",
                "--timeout",
                "1",
                "--json",
            ],
        )?;
        let answered = o.status.success()
            && bloatlab_suite::collect::parse_ping(&o.stdout).is_ok_and(|p| {
                p.series
                    .iter()
                    .any(|s| s.samples.iter().any(|x| x.delay_ns.is_some()))
            });
        if answered {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(15) {
            return Err("the server in the lab did not answer probes within 15 s".into());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `experiment merge`: the complete rows of several output directories (shards), one row per
/// run name (the first directory wins), in point and repetition order.
pub fn merge(dirs: &[PathBuf]) -> Result<(String, Vec<Row>, Vec<String>), RunError> {
    let mut name: Option<String> = None;
    let mut rows: Vec<Row> = Vec::new();
    for d in dirs {
        let plan = d.join("plan.json");
        let b = std::fs::read(&plan).map_err(|e| io(&plan, e))?;
        let v: serde_json::Value = serde_json::from_slice(&b).map_err(|e| io(&plan, e))?;
        let n = v["experiment"].as_str().unwrap_or("").to_string();
        match &name {
            None => name = Some(n),
            Some(m) if *m != n => {
                return Err(RunError::OtherExperiment {
                    dir: d.display().to_string(),
                    found: n,
                    want: m.clone(),
                });
            }
            Some(_) => {}
        }
        for run in v["runs"].as_array().into_iter().flatten() {
            let Some(run) = run.as_str() else { continue };
            if rows
                .iter()
                .any(|r| r.get("run").and_then(|v| v.as_str()) == Some(run))
            {
                continue;
            }
            if let Some(row) = complete_row(d, run) {
                rows.push(row);
            }
        }
    }
    rows.sort_by_key(|r| {
        (
            r.get("point")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string(),
            r.get("rep").and_then(|v| v.as_u64()).unwrap_or(0),
        )
    });
    // Parameters: the columns between `rep` and `interrupted`.
    let cols = summary::columns(&rows);
    let params = cols
        .iter()
        .skip_while(|c| *c != "rep")
        .skip(1)
        .take_while(|c| *c != "interrupted")
        .cloned()
        .collect();
    Ok((name.unwrap_or_default(), rows, params))
}
