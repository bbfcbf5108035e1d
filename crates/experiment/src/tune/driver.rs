//! Runs the search for each direction: applies each rate the search asks for, measures, and
//! records; reports progress; stops on Ctrl-C (the `stop` flag). The original rates are put
//! back by a [`RestoreGuard`] on every exit path; in a lab, the server it started is killed
//! by its guard and the results files live in a temporary directory removed at the end.

use super::measure::{self, Direction, Load};
use super::rate::{RateControl, RateError, RestoreGuard, Target};
use super::search::{CurvePoint, Measurement, Search, SearchConfig, Step, Verdict};
use bloatlab_suite::session::{self, LabSession};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where the load runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// In lab `lab`: a server is started in host `server`, the load runs from `client`.
    Lab(String),
    /// On this machine, against a `bloatlab server` at this address.
    Server(String),
}

/// Everything a tune run needs (checked by the CLI).
#[derive(Debug, Clone)]
pub struct TuneConfig {
    /// The `bloatlab` binary.
    pub exe: PathBuf,
    /// Where the load runs.
    pub place: Place,
    /// Where rates go.
    pub target: Target,
    /// Directions, in order.
    pub directions: Vec<Direction>,
    /// The search.
    pub search: SearchConfig,
    /// Each measurement's load.
    pub load: Load,
    /// Server port.
    pub port: u16,
    /// Rate to put back per direction when it cannot be read (a command), bit/s.
    pub restore_bps: Option<u64>,
    /// At the end, leave the recommended rate applied instead of the original.
    pub apply: bool,
}

/// Why tuning stopped.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Applying or reading a rate failed.
    #[error(transparent)]
    Rate(#[from] RateError),
    /// A measurement failed.
    #[error("{direction} at {rate_kbit} kbit/s: {message}")]
    Measure {
        /// `up` / `down`.
        direction: &'static str,
        /// The rate.
        rate_kbit: u64,
        /// What failed.
        message: String,
    },
    /// Setting up (server, temporary directory) failed.
    #[error("{0}")]
    Setup(String),
}

/// One direction's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DirectionResult {
    /// Which.
    pub direction: Direction,
    /// How the search ended (`None`: interrupted).
    pub verdict: Option<Verdict>,
    /// kbit/s.
    pub recommended_kbit: Option<u64>,
    /// The rate before tuning, bit/s (when it could be read).
    pub original_bps: Option<u64>,
    /// Every rate measured, in measurement order.
    pub curve: Vec<CurvePoint>,
}

impl DirectionResult {
    /// The point of the highest rate measured.
    pub fn top(&self) -> Option<&CurvePoint> {
        self.curve.iter().max_by_key(|p| p.rate_kbit)
    }
    /// The point of the recommended rate.
    pub fn recommended(&self) -> Option<&CurvePoint> {
        let r = self.recommended_kbit?;
        self.curve.iter().find(|p| p.rate_kbit == r)
    }
    /// Throughput at the highest rate tried minus at the recommendation, Mbit/s, and as a
    /// fraction of the former.
    pub fn given_up(&self) -> Option<(f64, f64)> {
        let best = self.top()?.throughput_mbit();
        let ours = self.recommended()?.throughput_mbit();
        let lost = best - ours;
        Some((lost, if best > 0.0 { lost / best } else { 0.0 }))
    }
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Per direction, in order (directions not reached are absent).
    pub results: Vec<DirectionResult>,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
    /// What was done with the rates at the end (one line per direction).
    pub restored: Vec<String>,
}

/// Progress events.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A measurement starts.
    Probe {
        /// Which direction.
        direction: Direction,
        /// 1-based measurement number in this direction.
        n: usize,
        /// The rate, kbit/s.
        rate_kbit: u64,
        /// 1-based repeat.
        rep: u32,
        /// Repeats at most.
        repeats: u32,
    },
    /// A measurement ended.
    Measured {
        /// Which direction.
        direction: Direction,
        /// The rate, kbit/s.
        rate_kbit: u64,
        /// What it gave.
        m: &'a Measurement,
    },
}

/// A temporary directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Tunes every direction of `cfg`.
pub fn run(
    cfg: &TuneConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, TuneError> {
    let control = RateControl {
        exe: cfg.exe.clone(),
        target: cfg.target.clone(),
    };
    // Read every original rate before changing anything.
    let mut originals = Vec::new();
    for &d in &cfg.directions {
        let bps = control.current(d)?.or(cfg.restore_bps);
        originals.push((d, bps));
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("bloatlab-tune-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0)
        .map_err(|e| TuneError::Setup(format!("{}: {e}", tmp.0.display())))?;
    // The user's lab: we start (and kill, when it drops) only our server in it.
    let lab = match &cfg.place {
        Place::Lab(lab) => {
            let mut s = LabSession::existing(&cfg.exe, lab);
            s.start_server(
                &bloatlab_invoke::server::ServerInvocation::on_port(cfg.port),
                stop,
            )
            .map_err(|e| TuneError::Setup(e.to_string()))?;
            Some(s)
        }
        Place::Server(_) => None,
    };
    let mut guard = RestoreGuard::new(control);
    let mut results = Vec::new();
    for &(dir, original) in &originals {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(bps) = original {
            guard.record(dir, bps);
        }
        let r = tune_direction(cfg, lab.as_ref(), dir, &guard, &tmp.0, stop, progress)?;
        let r = DirectionResult {
            original_bps: original,
            ..r
        };
        if cfg.apply
            && let Some(k) = r.recommended_kbit
        {
            guard.replace(dir, k * 1000);
        }
        results.push(r);
    }
    let restored = guard.restore();
    Ok(Outcome {
        interrupted: stop.load(Ordering::Relaxed),
        results,
        restored,
    })
}

fn tune_direction(
    cfg: &TuneConfig,
    lab: Option<&LabSession>,
    dir: Direction,
    guard: &RestoreGuard,
    tmp: &std::path::Path,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Event<'_>),
) -> Result<DirectionResult, TuneError> {
    let mut search = Search::new(cfg.search).map_err(|e| TuneError::Setup(e.to_string()))?;
    let mut n = 0;
    let mut applied: Option<u64> = None;
    loop {
        let (rate_kbit, rep) = match search.next() {
            Step::Done {
                verdict,
                recommended_kbit,
            } => {
                return Ok(DirectionResult {
                    direction: dir,
                    verdict: Some(verdict),
                    recommended_kbit,
                    original_bps: None,
                    curve: search.curve().to_vec(),
                });
            }
            Step::Measure { rate_kbit, rep } => (rate_kbit, rep),
        };
        if stop.load(Ordering::Relaxed) {
            return Ok(DirectionResult {
                direction: dir,
                verdict: None,
                recommended_kbit: None,
                original_bps: None,
                curve: search.curve().to_vec(),
            });
        }
        n += 1;
        progress(Event::Probe {
            direction: dir,
            n,
            rate_kbit,
            rep,
            repeats: cfg.search.repeats,
        });
        if applied != Some(rate_kbit) {
            guard.control().set(dir, rate_kbit * 1000)?;
            applied = Some(rate_kbit);
        }
        // One retry: on a loaded machine a single test can fail to start (a refused
        // connection while the previous one still closes); a second failure is real.
        let m = match measure_once(cfg, lab, dir, rate_kbit, rep, tmp, stop).or_else(|e| {
            if stop.load(Ordering::Relaxed) {
                return Err(e);
            }
            tracing::warn!("{} at {rate_kbit} kbit/s: {e}; measuring again", dir.name());
            std::thread::sleep(std::time::Duration::from_secs(1));
            measure_once(cfg, lab, dir, rate_kbit, rep, tmp, stop)
        }) {
            Ok(m) => m,
            Err(_) if stop.load(Ordering::Relaxed) => continue,
            Err(message) => {
                return Err(TuneError::Measure {
                    direction: dir.name(),
                    rate_kbit,
                    message,
                });
            }
        };
        progress(Event::Measured {
            direction: dir,
            rate_kbit,
            m: &m,
        });
        search.record(m);
    }
}

/// One load at the rate in place: `bloatlab test` (in the lab's client host, or here).
fn measure_once(
    cfg: &TuneConfig,
    lab: Option<&LabSession>,
    dir: Direction,
    rate_kbit: u64,
    rep: u32,
    tmp: &std::path::Path,
    stop: &AtomicBool,
) -> Result<Measurement, String> {
    let out = tmp.join(format!("{}-{rate_kbit}kbit-r{rep}.json", dir.name()));
    let _ = std::fs::remove_file(&out);
    let out_s = out.to_string_lossy().into_owned();
    let title = format!("tune {} {rate_kbit} kbit/s rep {rep}", dir.name());
    let host = match &cfg.place {
        Place::Lab(_) => session::server_addr().to_string(),
        Place::Server(addr) => addr.clone(),
    };
    let run = measure::test_run(&cfg.load, dir, &host, cfg.port, &out, &title);
    let argv = run.to_argv();
    let args: Vec<&str> = argv.iter().map(String::as_str).collect();
    let o = match lab {
        Some(lab) => lab.run_in("client", &args, stop)?,
        None => session::run_stoppable(&cfg.exe, &args, stop)?,
    };
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted".into());
    }
    if !o.status.success() {
        return Err(format!(
            "bloatlab test {}: {}",
            dir.test(),
            session::last_line(&o.stderr)
        ));
    }
    let file = bloatlab_results::load(&out).map_err(|e| format!("reading {out_s}: {e}"))?;
    let _ = std::fs::remove_file(&out);
    measure::measurement(&file, dir).map_err(|e| e.to_string())
}
