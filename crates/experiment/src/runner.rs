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
//! DIR/runs/RUN.clock.json    `{"lab_up_start_unix_s", "lab_up_unix_s"}`: `lab up` ran between
//!                            (the lab's links, and a rate schedule, start in between)
//! DIR/runs/RUN.during.json   with `[during]`: the sidecar's output (`{out}`), and
//! DIR/runs/RUN.during.log    its stderr
//! DIR/runs/RUN.row.json      the run's summary row; written last, so it marks the run complete
//! DIR/summary.csv, DIR/summary.json, DIR/report.html
//! ```
//!
//! **Resume.** A run whose `RUN.row.json` exists is complete and kept; any other run (never
//! started, or stopped half-way with a results file marked interrupted) is run again.
//! **Ctrl-C** (the `stop` flag): the test in progress gets SIGINT, its run is not marked
//! complete, the lab is taken down by its guard, and every finished run stays as it is.

use crate::completeness::{self, Planned};
use crate::file::Experiment;
use crate::matrix::{self, Run, Shard};
use crate::summary::{self, Row};
use crate::verdict::{self, Judgement};
use bloatlab_suite::session::{self, LabSession};
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
    /// The experiment is over its expansion budget (checked before its runs are made).
    #[error("{0}")]
    Budget(#[from] crate::file::BudgetError),
    /// `experiment merge` refused the directories.
    #[error("experiment merge: {why}")]
    MergeRefused {
        /// Why, naming the directories.
        why: String,
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
    /// The summary rows of every complete run (kept and new), in run order, with their
    /// completeness ([`crate::completeness::annotate`]).
    pub rows: Vec<Row>,
    /// The verdict (built-ins) and every point's completeness, as written to the files.
    pub judgement: Judgement,
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
        "sha256": exp.digest,
        "text": exp.source,
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
    let runs = matrix::runs(exp, cfg.shard)?;
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
    // Every run of the plan, so a run that failed (no row) makes its point incomplete
    // instead of dropping it from the verdict.
    let planned: Vec<Planned> = runs
        .iter()
        .map(|r| Planned {
            run: r.name(),
            point: r.point.name(),
            why_missing: match statuses.iter().find(|(s, _)| s == r).map(|(_, st)| st) {
                Some(RunStatus::Failed(e)) => format!("the run failed: {e}"),
                Some(_) => "its row did not read".into(),
                None => "not run (interrupted)".into(),
            },
        })
        .collect();
    let (rows, judgement) =
        write_summary(&cfg.out, exp, &rows, &planned, &param_names(exp), false)?;
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
        judgement,
    })
}

/// The parameter names (summary columns) of an experiment.
pub fn param_names(exp: &Experiment) -> Vec<String> {
    exp.matrix.iter().map(|p| p.name.clone()).collect()
}

/// Writes `summary.csv`, `summary.json`, `verdict.txt` and `report.html` for `rows` of
/// `exp`; returns the rows with their completeness cells and the verdict. `planned`: every
/// run the plan asked for (one without a row makes its point incomplete). `partial`: a merge
/// that lacks shards (never judged).
///
/// `summary.json` is `{"experiment", "quick", "partial", "verdict": {..}, "columns",
/// "rows"}`, `verdict` being a [`Judgement`] (outcome, headline, criterion, the report's
/// numbers beside ours, each point's completeness).
pub fn write_summary(
    out: &Path,
    exp: &Experiment,
    rows: &[Row],
    planned: &[Planned],
    params: &[String],
    partial: bool,
) -> Result<(Vec<Row>, Judgement), RunError> {
    let mut rows = rows.to_vec();
    completeness::annotate(&mut rows, &completeness::probe_loss_bound(exp));
    let judgement = verdict::judge(exp, &rows, planned, partial);
    write_file(&out.join("summary.csv"), summary::to_csv(&rows).as_bytes())?;
    let mut doc = summary::to_json(&exp.name, &rows);
    doc["quick"] = exp.quick_variant.into();
    doc["partial"] = partial.into();
    doc["verdict"] = serde_json::to_value(&judgement).unwrap_or_default();
    let json = serde_json::to_vec_pretty(&doc).map_err(|e| io(&out.join("summary.json"), e))?;
    write_file(&out.join("summary.json"), &json)?;
    write_file(&out.join("verdict.txt"), judgement.to_text().as_bytes())?;
    let mut html = crate::html::with_top_block(
        crate::html::report(&exp.name, &rows, params),
        &judgement.to_html(),
    );
    if exp.name == "variable-link" {
        let block = crate::builtin::variable_link_plot::html_block(exp, out, &rows);
        match html.rfind("</body>") {
            Some(i) => html.insert_str(i, &block),
            None => html.push_str(&block),
        }
    }
    write_file(&out.join("report.html"), html.as_bytes())?;
    Ok((rows, judgement))
}

/// One run; `Err` carries the failed step and its message.
fn run_one(exp: &Experiment, cfg: &RunnerConfig, r: &Run, stop: &AtomicBool) -> Result<(), String> {
    // The typed spec written back (`lab up`'s own flags read it to the same spec); the
    // file was checked before the first run, so this fails only if it changed since.
    let spec = crate::points::lab(exp, &r.point).map_err(|e| e.to_string())?;
    let lab_args = bloatlab_invoke::lab::to_argv(&spec);
    // `lab up NAME OPTIONS...`: the session names the lab.
    let up: Vec<&str> = lab_args.iter().skip(3).map(String::as_str).collect();
    let unix_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let lab_up_start = unix_now();
    // Taken down (its server first) when it drops: on success, failure and Ctrl-C.
    let mut lab = LabSession::up(&cfg.exe, &cfg.lab, &up, stop).map_err(|e| e.to_string())?;
    // The lab's links start between the two (a rate schedule or trace starts with them):
    // plots place the line's capacity on the test's clock from these.
    let clock = runs_dir(&cfg.out).join(format!("{}.clock.json", r.name()));
    write_file(
        &clock,
        serde_json::json!({ "lab_up_start_unix_s": lab_up_start, "lab_up_unix_s": unix_now() })
            .to_string()
            .as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let server = point_server(exp, &r.point, cfg.port).map_err(|e| e.to_string())?;
    lab.start_server(&server, stop).map_err(|e| e.to_string())?;
    let sidecar = start_during(exp, cfg, r)?;
    let results = runs_dir(&cfg.out).join(format!("{}.json", r.name()));
    // A `bloatlab test` records the emulator's lateness per phase itself; a client run
    // has it from the lab's counters before and after it (its one phase, `loaded`).
    let before = exp.client.as_ref().map(|_| lab.status_json());
    let measured = match exp.client {
        Some(_) => Measured::Client(Box::new(run_client(exp, cfg, &lab, r, &results, stop)?)),
        None => Measured::Test(Box::new(run_test(exp, cfg, &lab, r, &results, stop)?)),
    };
    // A sidecar that ended before the test did, or failed, fails the run: its arm did not
    // run as planned.
    if let Some(s) = sidecar {
        s.stop()?;
    }
    // Counters are published every 200 ms and written every 500 ms: wait for the last
    // packets of the run to be counted.
    std::thread::sleep(Duration::from_millis(1200));
    let st = lab.status_json();
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
            let late = summary::client_lateness(before.as_ref().unwrap_or(&st), &st);
            summary::client_row(&name, &point, r.rep, params, doc, &late, &st["counters"])
        }
    };
    let row_path = runs_dir(&cfg.out).join(format!("{}.row.json", r.name()));
    let bytes = serde_json::to_vec_pretty(&row).map_err(|e| e.to_string())?;
    write_file(&row_path, &bytes).map_err(|e| e.to_string())
}

/// The point's typed `[server]` on the runner's `port`: the lab session starts it from
/// its `to_argv` (checked before the first run, as the lab's spec is).
pub(crate) fn point_server(
    exp: &Experiment,
    point: &crate::matrix::Point,
    port: u16,
) -> Result<bloatlab_invoke::server::ServerInvocation, crate::points::PointError> {
    let mut server = crate::points::server(exp, point)?;
    server.engine.port = port;
    Ok(server)
}

/// How long a sidecar gets to start (autorate: its responder, first probes and base rate)
/// before the test starts; the test's own idle phase follows.
const DURING_SETTLE: Duration = Duration::from_millis(1500);

/// Starts the point's `[during]` command, if it has one: its typed plan written back as
/// `bloatlab autorate ...` on this host (autorate enters the run's lab itself), stderr to
/// `runs/RUN.during.log`, `{out}` = `runs/RUN.during.json`.
fn start_during(
    exp: &Experiment,
    cfg: &RunnerConfig,
    r: &Run,
) -> Result<Option<crate::sidecar::Sidecar>, String> {
    // Typed as when the file was checked; fails only if it changed since.
    let Some(during) = crate::during::of_point(exp, &r.point).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let dir = runs_dir(&cfg.out);
    let out = dir.join(format!("{}.during.json", r.name()));
    let args = during.to_argv(&cfg.lab, &out);
    let log = dir.join(format!("{}.during.log", r.name()));
    let mut s = crate::sidecar::Sidecar::start(&cfg.exe, &args, &log)?;
    std::thread::sleep(DURING_SETTLE);
    s.check_running()?;
    Ok(Some(s))
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
    lab: &LabSession,
    r: &Run,
    results: &Path,
    stop: &AtomicBool,
) -> Result<bloatlab_results::ResultsFile, String> {
    let results_s = results.to_string_lossy().into_owned();
    // A journal left by an earlier attempt at this run that was killed would make
    // `bloatlab test` refuse to start; the run is measured again, so it goes.
    let _ = bloatlab_suite::journal::remove(&bloatlab_suite::journal::path_for(results));
    let title = format!("{} {} rep {}", exp.name, r.point.label(), r.rep);
    // The point's typed `[test]` with the runner's port, file and title: the child's
    // command line is its `to_argv` (checked before the first run).
    let run = crate::points::test_run(exp, &r.point, cfg.port, results.to_path_buf(), title)
        .map_err(|e| e.to_string())?
        .ok_or("the point has no [test]")?;
    let test_name = run.test.clone();
    let argv = run.to_argv();
    let t: Vec<&str> = argv.iter().map(String::as_str).collect();
    let o = lab
        .run_in("client", &t, stop)
        .map_err(|e| format!("test: {e}"))?;
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted".into());
    }
    if !o.status.success() {
        return Err(format!(
            "test {}: {}",
            test_name,
            session::last_line(&o.stderr)
        ));
    }
    bloatlab_results::load(results).map_err(|e| format!("reading {results_s}: {e}"))
}

/// `bloatlab client SERVER --json` from host `client`; its document (checked against the
/// schema) is written to `results` atomically.
fn run_client(
    exp: &Experiment,
    cfg: &RunnerConfig,
    lab: &LabSession,
    r: &Run,
    results: &Path,
    stop: &AtomicBool,
) -> Result<bloatlab_metrics::json::Document, String> {
    // The point's typed `[client]` with the runner's port and `--json`: the child's
    // command line is its `to_argv` (checked before the first run).
    let client = crate::points::client_run(exp, &r.point, cfg.port)
        .map_err(|e| e.to_string())?
        .ok_or("the point has no [client]")?;
    let argv = bloatlab_invoke::client::to_argv(&client);
    let c: Vec<&str> = argv.iter().map(String::as_str).collect();
    let o = lab
        .run_in("client", &c, stop)
        .map_err(|e| format!("client: {e}"))?;
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted".into());
    }
    if !o.status.success() {
        return Err(format!("client: {}", session::last_line(&o.stderr)));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let doc = bloatlab_metrics::json::Document::from_json(&text)
        .map_err(|e| format!("client: its --json output does not read: {e}"))?;
    write_file(results, &o.stdout).map_err(|e| e.to_string())?;
    Ok(doc)
}

/// What `experiment merge` joined.
#[derive(Debug)]
pub struct Merged {
    /// The experiment (its file as recorded in the shards' `plan.json`; the quick variant
    /// when the shards ran `--quick`).
    pub experiment: Experiment,
    /// The complete rows of every shard, by point number then repetition.
    pub rows: Vec<Row>,
    /// The parameter names.
    pub params: Vec<String>,
    /// Shards were missing or incomplete (only with `allow_partial`); what was missing.
    pub partial: Vec<String>,
    /// Every run of every shard of the plan (a missing shard's runs too), with why it has no
    /// row where it has none: its point is then incomplete.
    pub planned: Vec<Planned>,
}

/// One shard directory's `plan.json`.
struct ShardPlan {
    dir: String,
    experiment: String,
    quick: bool,
    sha256: Option<String>,
    text: Option<String>,
    shard: Option<Shard>,
    runs: Vec<String>,
}

fn read_plan(d: &Path) -> Result<ShardPlan, RunError> {
    let plan = d.join("plan.json");
    let b = std::fs::read(&plan).map_err(|e| io(&plan, e))?;
    let v: serde_json::Value = serde_json::from_slice(&b).map_err(|e| io(&plan, e))?;
    let shard = match v["shard"].as_str() {
        None => None,
        Some(s) => Some(s.parse::<Shard>().map_err(|e| io(&plan, e))?),
    };
    Ok(ShardPlan {
        dir: d.display().to_string(),
        experiment: v["experiment"].as_str().unwrap_or("").to_string(),
        quick: v["quick"].as_bool().unwrap_or(false),
        sha256: v["sha256"].as_str().map(str::to_string),
        text: v["text"].as_str().map(str::to_string),
        shard,
        runs: v["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect(),
    })
}

/// The number of a point or run name (`p1000_rate-8mbit_r1` -> 1000), for sorting.
pub fn point_number(name: &str) -> u64 {
    name.strip_prefix('p')
        .map(|r| {
            r.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|d| d.parse().ok())
        .unwrap_or(u64::MAX)
}

fn refuse(why: String) -> RunError {
    RunError::MergeRefused { why }
}

/// `experiment merge`: the complete rows of the shard directories `dirs`, checked to be the
/// shards of one run of one file: the same file content (SHA-256, not the name), the same
/// variant (quick or full), the same shard count, no shard twice and no run in two
/// directories, every shard present and every run of each shard complete. A missing or
/// incomplete shard is refused unless `allow_partial` (then [`Merged::partial`] says what
/// is missing). Rows are sorted by point number, then repetition.
pub fn merge(dirs: &[PathBuf], allow_partial: bool) -> Result<Merged, RunError> {
    let plans = dirs
        .iter()
        .map(|d| read_plan(d))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = plans.first() else {
        return Err(refuse("no shard directory given".into()));
    };
    for p in &plans {
        if p.sha256.is_none() || p.text.is_none() {
            return Err(refuse(format!(
                "{}: its plan.json does not record the experiment file's content (written by an older bloatlab); run that shard again into a new directory",
                p.dir
            )));
        }
    }
    for p in &plans[1..] {
        if p.sha256 != first.sha256 {
            return Err(refuse(format!(
                "{} and {} ran different experiment files ({} {} vs {} {}: the content differs)",
                first.dir,
                p.dir,
                first.experiment,
                short_hash(&first.sha256),
                p.experiment,
                short_hash(&p.sha256)
            )));
        }
        if p.quick != first.quick {
            let v = |q: bool| if q { "--quick" } else { "full" };
            return Err(refuse(format!(
                "{} holds {} runs and {} {} runs: quick and full runs do not merge",
                first.dir,
                v(first.quick),
                p.dir,
                v(p.quick)
            )));
        }
        let n =
            |s: &Option<Shard>| s.map_or("no shards".to_string(), |s| format!("{} shards", s.n));
        if p.shard.map(|s| s.n) != first.shard.map(|s| s.n) {
            return Err(refuse(format!(
                "{} ran {} and {} ran {}: the shard counts differ",
                first.dir,
                n(&first.shard),
                p.dir,
                n(&p.shard)
            )));
        }
    }
    // No shard twice, no run in two directories.
    for (i, a) in plans.iter().enumerate() {
        for b in &plans[i + 1..] {
            if let (Some(x), Some(y)) = (a.shard, b.shard)
                && x.k == y.k
            {
                return Err(refuse(format!(
                    "{} and {} are both shard {}/{}",
                    a.dir, b.dir, x.k, x.n
                )));
            }
            if let Some(r) = a.runs.iter().find(|r| b.runs.contains(r)) {
                return Err(refuse(format!(
                    "{} and {} overlap: both hold run {r}",
                    a.dir, b.dir
                )));
            }
        }
    }
    let quick = first.quick;
    let text = first.text.clone().unwrap_or_default();
    let mut exp = crate::file::parse(
        &format!("{}/plan.json", first.dir),
        &first.experiment,
        &text,
    )
    .map_err(|e| {
        refuse(format!(
            "the experiment recorded in {}/plan.json does not parse: {e}",
            first.dir
        ))
    })?;
    exp.name = first.experiment.clone();
    if quick {
        exp = exp.quick();
    }
    let mut partial = Vec::new();
    let mut planned: Vec<Planned> = Vec::new();
    if let Some(s) = first.shard {
        let missing: Vec<Shard> = (0..s.n)
            .filter(|k| !plans.iter().any(|p| p.shard.is_some_and(|x| x.k == *k)))
            .map(|k| Shard { k, n: s.n })
            .collect();
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|m| format!("{}/{}", m.k, m.n)).collect();
            partial.push(format!("shard {} missing", names.join(", ")));
        }
        // A missing shard's runs, as its plan would have listed them.
        for m in missing {
            let runs = matrix::runs(&exp, Some(m))?;
            let why = format!("shard {}/{} missing from the merge", m.k, m.n);
            planned.extend(
                runs.iter()
                    .map(|r| Planned::new(&r.name(), &r.point.name(), why.clone())),
            );
        }
    }
    let mut rows: Vec<Row> = Vec::new();
    for (p, d) in plans.iter().zip(dirs) {
        let mut absent = Vec::new();
        for run in &p.runs {
            match complete_row(d, run) {
                Some(row) => rows.push(row),
                None => absent.push(run.clone()),
            }
            planned.push(Planned {
                run: run.clone(),
                point: point_of_run(run).to_string(),
                why_missing: format!("not complete in {}", p.dir),
            });
        }
        if !absent.is_empty() {
            partial.push(format!(
                "{}: {} of {} runs not complete ({})",
                p.dir,
                absent.len(),
                p.runs.len(),
                absent.join(", ")
            ));
        }
    }
    if !partial.is_empty() && !allow_partial {
        return Err(refuse(format!(
            "{}; merge anyway with --allow-partial (the summary is then marked partial and not judged)",
            partial.join("; ")
        )));
    }
    rows.sort_by_key(|r| {
        let point = r.get("point").and_then(|v| v.as_str()).unwrap_or("");
        (
            point_number(point),
            point.to_string(),
            r.get("rep").and_then(|v| v.as_u64()).unwrap_or(0),
        )
    });
    planned.sort_by_key(|p| (point_number(&p.run), p.run.clone()));
    let params = param_names(&exp);
    Ok(Merged {
        experiment: exp,
        rows,
        params,
        partial,
        planned,
    })
}

/// The point of a run name (`p002_rate-8mbit_r1` -> `p002_rate-8mbit`, [`Run::name`]).
fn point_of_run(run: &str) -> &str {
    run.rsplit_once("_r").map_or(run, |(p, _)| p)
}

fn short_hash(h: &Option<String>) -> String {
    let h = h.as_deref().unwrap_or("?");
    format!("sha256 {}", &h[..h.len().min(12)])
}

#[cfg(test)]
mod merge_tests;
