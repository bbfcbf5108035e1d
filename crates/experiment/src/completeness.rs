//! Whether a run, and so its point, happened as asked: the completeness rule.
//!
//! A run that went wrong cannot reproduce anything (docs/experiments.md, "Complete runs").
//! A run is **incomplete** when any of these holds:
//!
//! * it was interrupted (`interrupted` is true);
//! * a load flow failed, for instance stalled (no byte moved for 3 s, longer on a path with a
//!   long RTO: docs/engine.md) or was reset: the
//!   row's `failed.FLOW` column holds why (the flow's bytes before it failed are kept in its
//!   throughput columns, but its rate is no longer the rate asked for);
//! * an RTT probe series lost more than the stated bound of its probes in some phase
//!   (`lat.SERIES.rtt.PHASE.loss`; the bound is `[expect] max_probe_loss`, a fraction,
//!   default [`DEFAULT_MAX_PROBE_LOSS`]);
//! * a phase has no data: an RTT series without a single answered probe in a phase
//!   (`.count` 0), a probe the test planned (`probe.SERIES` lists the phases its plan spans)
//!   that left no cells for a phase at all (its prober printed nothing), or a loaded phase in
//!   which the flows moved nothing (`nodata.PHASE`);
//! * the lab's emulator fell behind its own schedule in some phase and direction: more than
//!   [`MAX_LATE_FRACTION`] of the packets it released there left more than 1 ms after their
//!   due time (`late.DIR.PHASE.over_1ms`, judged when the phase released at least
//!   [`MIN_LATE_PACKETS`] packets). Those packets reached their hosts late, so the run's
//!   latency figures include host delay, not only the link's (docs/experiments.md, "A busy
//!   host").
//!
//! A point is incomplete when any of its repetitions is, and when a run the plan asked for
//! has no row at all (it failed, or was never run: [`Planned`]). The rule reads only the
//! summary rows' cells and the plan, so it judges merged shards and old runs alike and is
//! tested on synthetic rows.

use crate::summary::Row;
use serde_json::Value;

/// Probe loss above this fraction of a phase's probes makes a run incomplete, unless the
/// experiment states its own bound (`[expect] max_probe_loss`). The field reports lost no
/// probes; a few percent allows for the odd probe lost to an AQM under full load.
pub const DEFAULT_MAX_PROBE_LOSS: f64 = 0.05;

pub use bloatlab_results::lab::{MAX_LATE_FRACTION, MIN_LATE_PACKETS};

/// The row column that holds whether the run is complete (`true`/`false`).
pub const COMPLETE: &str = "complete";
/// The row column that holds why a run is incomplete (`; `-separated causes).
pub const INCOMPLETE_BECAUSE: &str = "incomplete_because";

/// Why a run is incomplete.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Cause {
    /// The run was cut short.
    Interrupted,
    /// A load flow did not run as asked (a stall, a reset, a refusal).
    FlowFailed {
        /// The flow.
        flow: String,
        /// Its error message.
        why: String,
    },
    /// An RTT series lost more probes than the bound in a phase.
    ProbeLoss {
        /// `SERIES.KIND`, e.g. `udp_be.rtt`.
        series: String,
        /// The phase.
        phase: String,
        /// Fraction lost.
        loss: f64,
        /// The bound, a fraction.
        bound: f64,
    },
    /// A run the plan asked for has no result (it failed, or was not run).
    NoResult {
        /// Why, as far as known.
        why: String,
    },
    /// The emulator released too many packets late in a phase: the host was too busy.
    EmulatorLate {
        /// `up` or `down`.
        direction: String,
        /// The phase.
        phase: String,
        /// Fraction of the phase's packets released more than 1 ms late.
        late: f64,
        /// Their 99th percentile lateness, ms, if recorded.
        p99_ms: Option<f64>,
        /// The bound, a fraction ([`MAX_LATE_FRACTION`]).
        bound: f64,
    },
    /// A phase without data.
    EmptyPhase {
        /// The phase.
        phase: String,
        /// What is missing.
        what: String,
    },
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Interrupted => write!(f, "interrupted"),
            Cause::FlowFailed { flow, why } => write!(f, "flow {flow} failed: {why}"),
            Cause::ProbeLoss {
                series,
                phase,
                loss,
                bound,
            } => write!(
                f,
                "{series} lost {:.1} % of its probes in phase {phase} (bound {:.1} %)",
                loss * 100.0,
                bound * 100.0
            ),
            Cause::NoResult { why } => write!(f, "no result: {why}"),
            Cause::EmptyPhase { phase, what } => write!(f, "phase {phase}: {what}"),
            Cause::EmulatorLate {
                direction,
                phase,
                late,
                p99_ms,
                bound,
            } => {
                write!(
                    f,
                    "the emulator released {:.1} % of the {direction} packets more than 1 ms \
                     late in phase {phase} (bound {:.1} %",
                    late * 100.0,
                    bound * 100.0
                )?;
                if let Some(p) = p99_ms {
                    write!(f, ", p99 {p:.1} ms")?;
                }
                write!(
                    f,
                    "): the host was too busy, latency figures include host delay"
                )
            }
        }
    }
}

/// The probe-loss bound of an experiment: one for every point (`[expect] max_probe_loss`
/// or [`DEFAULT_MAX_PROBE_LOSS`]), and the points the file bounds on their own
/// (`[expect] max_probe_loss_where`), where their loss is the phenomenon the experiment
/// measures rather than a fault (report 4's SQM-off point: probes tail-dropped by a full
/// modem FIFO). Every bound is stated in the file and printed with the verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LossBound {
    /// The bound of every other point, a fraction.
    pub default: f64,
    /// The points with a bound of their own.
    pub points: Vec<PointLossBound>,
}

/// A bound for the points where the matrix parameter `param` has the value `value`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PointLossBound {
    /// The `[matrix]` parameter (a row's cell of that name).
    pub param: String,
    /// Its value, as the row's cell holds it (a zipped value by its label).
    pub value: String,
    /// The bound, a fraction.
    pub bound: f64,
}

impl From<f64> for LossBound {
    fn from(default: f64) -> LossBound {
        LossBound {
            default,
            points: Vec::new(),
        }
    }
}

impl LossBound {
    /// The bound of `row`'s point.
    pub fn for_row(&self, row: &Row) -> f64 {
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        self.points
            .iter()
            .find(|p| row.get(&p.param).is_some_and(|v| text(v) == p.value))
            .map_or(self.default, |p| p.bound)
    }

    /// `10.0 %`, or `10.0 % (30.0 % where shaper=SQM off)`.
    pub fn describe(&self) -> String {
        let mut s = format!("{:.1} %", self.default * 100.0);
        if !self.points.is_empty() {
            let each: Vec<String> = self
                .points
                .iter()
                .map(|p| format!("{:.1} % where {}={}", p.bound * 100.0, p.param, p.value))
                .collect();
            s.push_str(&format!(" ({}, stated in the file)", each.join("; ")));
        }
        s
    }
}

/// The probe-loss bound of an experiment ([`LossBound`]).
pub fn probe_loss_bound(exp: &crate::Experiment) -> LossBound {
    let default = match exp.expect.get("max_probe_loss").map(|(v, _)| v) {
        Some(crate::file::Scalar::Float(x)) => *x,
        Some(crate::file::Scalar::Int(i)) => *i as f64,
        _ => DEFAULT_MAX_PROBE_LOSS,
    };
    LossBound {
        default,
        points: exp.probe_loss_where.clone(),
    }
}

/// Why `row` is incomplete (empty: it is complete), probe loss judged against `bound`.
pub fn assess(row: &Row, bound: f64) -> Vec<Cause> {
    let mut causes = Vec::new();
    if row.get("interrupted").and_then(Value::as_bool) == Some(true) {
        causes.push(Cause::Interrupted);
    }
    for (k, v) in &row.cells {
        if let Some(flow) = k.strip_prefix("failed.") {
            causes.push(Cause::FlowFailed {
                flow: flow.to_string(),
                why: v.as_str().map_or_else(|| v.to_string(), str::to_string),
            });
        } else if let Some(phase) = k.strip_prefix("nodata.") {
            causes.push(Cause::EmptyPhase {
                phase: phase.to_string(),
                what: v.as_str().unwrap_or("the flows moved no byte").to_string(),
            });
        } else if let Some(series) = k.strip_prefix("probe.") {
            // A planned probe must have left cells in every phase its plan spans: a prober
            // that printed nothing leaves none, which no `.count` or `.loss` check can see.
            let phases = v.as_str().unwrap_or("");
            for phase in phases.split(',').filter(|p| !p.is_empty()) {
                if !has_series_phase(row, series, phase) {
                    causes.push(Cause::EmptyPhase {
                        phase: phase.to_string(),
                        what: format!("probe {series} left no result"),
                    });
                }
            }
        } else if let Some(rest) = k.strip_prefix("late.")
            && let Some(base) = rest.strip_suffix(".over_1ms")
            && let Some((direction, phase)) = base.split_once('.')
        {
            let late = v.as_f64().unwrap_or(0.0);
            let packets = row
                .get(&format!("late.{base}.packets"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if bloatlab_results::lab::fell_behind(packets, late) {
                causes.push(Cause::EmulatorLate {
                    direction: direction.to_string(),
                    phase: phase.to_string(),
                    late,
                    p99_ms: row
                        .get(&format!("late.{base}.p99_ms"))
                        .and_then(Value::as_f64),
                    bound: MAX_LATE_FRACTION,
                });
            }
        } else if let Some(rest) = k.strip_prefix("lat.")
            && let Some((series, phase, stat)) = rtt_cell(rest)
        {
            match stat {
                "loss" => {
                    let loss = v.as_f64().unwrap_or(0.0);
                    if loss > bound {
                        causes.push(Cause::ProbeLoss {
                            series,
                            phase,
                            loss,
                            bound,
                        });
                    }
                }
                "count" if v.as_u64() == Some(0) => causes.push(Cause::EmptyPhase {
                    phase,
                    what: format!("no probe of {series} answered"),
                }),
                _ => {}
            }
        }
    }
    causes
}

/// Whether `row` has a `lat.SERIES.KIND.PHASE.count` cell (any kind).
fn has_series_phase(row: &Row, series: &str, phase: &str) -> bool {
    row.cells.iter().any(|(k, _)| {
        k.strip_prefix("lat.")
            .and_then(|r| r.strip_prefix(series))
            .and_then(|r| r.strip_prefix('.'))
            .and_then(|r| r.strip_suffix(".count"))
            .and_then(|r| r.split_once('.'))
            .is_some_and(|(_kind, p)| p == phase)
    })
}

/// `SERIES.rtt.PHASE.STAT` -> (`SERIES.rtt`, PHASE, STAT), for RTT series only (a flow's
/// own one-way series in a `[client]` run is not a probe).
fn rtt_cell(rest: &str) -> Option<(String, String, &str)> {
    let (head, stat) = rest.rsplit_once('.')?;
    let (series_kind, phase) = head.rsplit_once('.')?;
    series_kind
        .ends_with(".rtt")
        .then(|| (series_kind.to_string(), phase.to_string(), stat))
}

/// Sets each row's [`COMPLETE`] and [`INCOMPLETE_BECAUSE`] cells (replacing any earlier
/// ones), probe loss judged against its point's `bound`.
pub fn annotate(rows: &mut [Row], bound: &LossBound) {
    for r in rows.iter_mut() {
        r.cells
            .retain(|(k, _)| k != COMPLETE && k != INCOMPLETE_BECAUSE);
        let causes = assess(r, bound.for_row(r));
        let because: Vec<String> = causes.iter().map(ToString::to_string).collect();
        // After `interrupted`, so the two sit together in the CSV.
        let at = r
            .cells
            .iter()
            .position(|(k, _)| k == "interrupted")
            .map_or(r.cells.len(), |i| i + 1);
        r.cells
            .insert(at, (COMPLETE.to_string(), Value::Bool(causes.is_empty())));
        r.cells.insert(
            at + 1,
            (
                INCOMPLETE_BECAUSE.to_string(),
                Value::String(because.join("; ")),
            ),
        );
    }
}

/// A run the plan asked for: its name, its point, and why it has no row if it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The run's name (`p001_..._r1`): its row's `run` cell.
    pub run: String,
    /// Its point's name.
    pub point: String,
    /// Why it has no row, when it has none (its failure, "not run", ...).
    pub why_missing: String,
}

impl Planned {
    /// Run `run` of point `point`; `why_missing` says why, should it have no row.
    pub fn new(run: &str, point: &str, why_missing: impl Into<String>) -> Planned {
        Planned {
            run: run.to_string(),
            point: point.to_string(),
            why_missing: why_missing.into(),
        }
    }
}

/// One point's completeness: complete only if every repetition is.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PointCompleteness {
    /// The point's name (`p001_...`).
    pub point: String,
    /// Repetitions with a row.
    pub runs: usize,
    /// Repetitions the plan asked for without a row (failed or not run).
    pub missing: usize,
    /// Whether every repetition has a row and is complete.
    pub complete: bool,
    /// Why not: per cause, the run it comes from (`RUN: cause`).
    pub causes: Vec<String>,
}

/// Per point, in the plan's order (then order of first appearance in `rows`), whether it is
/// complete: every run of `planned` has a row and every row is complete. A planned run
/// without a row makes its point incomplete ([`Cause::NoResult`]), so a failed run cannot
/// silently drop its point; with an empty plan only the rows are judged.
pub fn points(rows: &[Row], planned: &[Planned], bound: &LossBound) -> Vec<PointCompleteness> {
    let mut out: Vec<PointCompleteness> = Vec::new();
    fn entry(out: &mut Vec<PointCompleteness>, p: &str) -> usize {
        match out.iter().position(|q| q.point == p) {
            Some(i) => i,
            None => {
                out.push(PointCompleteness {
                    point: p.to_string(),
                    runs: 0,
                    missing: 0,
                    complete: true,
                    causes: Vec::new(),
                });
                out.len() - 1
            }
        }
    }
    let run_of = |r: &Row| r.get("run").and_then(Value::as_str).map(str::to_string);
    for pl in planned {
        let i = entry(&mut out, &pl.point);
        if !rows
            .iter()
            .any(|r| run_of(r).as_deref() == Some(pl.run.as_str()))
        {
            let pc = &mut out[i];
            pc.missing += 1;
            pc.complete = false;
            let cause = Cause::NoResult {
                why: pl.why_missing.clone(),
            };
            pc.causes.push(format!("{}: {cause}", pl.run));
        }
    }
    for r in rows {
        let Some(p) = r.get("point").and_then(Value::as_str) else {
            continue;
        };
        let run = run_of(r).unwrap_or_else(|| p.to_string());
        let i = entry(&mut out, p);
        let pc = &mut out[i];
        pc.runs += 1;
        for c in assess(r, bound.for_row(r)) {
            pc.complete = false;
            pc.causes.push(format!("{run}: {c}"));
        }
    }
    out
}

/// The rows of complete points only.
pub fn complete_rows(rows: &[Row], bound: &LossBound) -> Vec<Row> {
    let pts = points(rows, &[], bound);
    rows.iter()
        .filter(|r| {
            let p = r.get("point").and_then(Value::as_str);
            pts.iter()
                .any(|q| Some(q.point.as_str()) == p && q.complete)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(run: &str, point: &str, extra: &[(&str, Value)]) -> Row {
        let mut cells: Vec<(String, Value)> = vec![
            ("run".into(), run.into()),
            ("point".into(), point.into()),
            ("interrupted".into(), false.into()),
            ("lat.udp_be.rtt.loaded.count".into(), 300.into()),
            ("lat.udp_be.rtt.loaded.loss".into(), 0.0.into()),
            ("lat.udp_be.rtt.idle.count".into(), 25.into()),
        ];
        for (k, v) in extra {
            cells.retain(|(c, _)| c != k);
            cells.push(((*k).into(), v.clone()));
        }
        Row { cells }
    }

    #[test]
    fn a_clean_run_is_complete() {
        assert!(assess(&row("p001_r1", "p001", &[]), 0.05).is_empty());
        // Loss at the bound is still complete; a one-way series of a flow is no probe.
        let r = row(
            "p001_r1",
            "p001",
            &[
                ("lat.udp_be.rtt.loaded.loss", 0.05.into()),
                ("lat.tcp_up_1.owd_up.loaded.count", 0.into()),
            ],
        );
        assert!(assess(&r, 0.05).is_empty());
    }

    #[test]
    fn a_stalled_flow_makes_the_run_incomplete() {
        let r = row(
            "p005_r1",
            "p005",
            &[(
                "failed.tcp_up_2",
                "stalled: the server read nothing for 3 s (at 18.700 s)".into(),
            )],
        );
        let c = assess(&r, 0.05);
        assert_eq!(c.len(), 1);
        assert!(
            c[0].to_string()
                .starts_with("flow tcp_up_2 failed: stalled"),
            "{}",
            c[0]
        );
    }

    #[test]
    fn probe_loss_above_the_bound_makes_the_run_incomplete() {
        // 70 of 300 probes lost under load (report4's 6089/737 point).
        let r = row(
            "p001_r1",
            "p001",
            &[("lat.udp_be.rtt.loaded.loss", (70.0 / 300.0).into())],
        );
        let c = assess(&r, 0.05);
        assert_eq!(
            c,
            vec![Cause::ProbeLoss {
                series: "udp_be.rtt".into(),
                phase: "loaded".into(),
                loss: 70.0 / 300.0,
                bound: 0.05
            }]
        );
        assert_eq!(
            c[0].to_string(),
            "udp_be.rtt lost 23.3 % of its probes in phase loaded (bound 5.0 %)"
        );
        // A looser stated bound accepts it.
        assert!(assess(&r, 0.25).is_empty());
    }

    #[test]
    fn an_empty_phase_makes_the_run_incomplete() {
        let no_probe = row("p1", "p1", &[("lat.udp_be.rtt.idle.count", 0.into())]);
        assert!(matches!(
            assess(&no_probe, 0.05).as_slice(),
            [Cause::EmptyPhase { phase, .. }] if phase == "idle"
        ));
        let no_bytes = row(
            "p1",
            "p1",
            &[("nodata.loaded", "the flows moved no byte".into())],
        );
        assert_eq!(
            assess(&no_bytes, 0.05)[0].to_string(),
            "phase loaded: the flows moved no byte"
        );
        let cut = row("p1", "p1", &[("interrupted", true.into())]);
        assert_eq!(assess(&cut, 0.05), vec![Cause::Interrupted]);
    }

    #[test]
    fn a_point_is_incomplete_if_any_repetition_is() {
        let rows = [
            row("p001_r1", "p001", &[]),
            row(
                "p001_r2",
                "p001",
                &[("lat.udp_be.rtt.loaded.loss", 0.2.into())],
            ),
            row("p002_r1", "p002", &[]),
        ];
        let pts = points(&rows, &[], &0.05.into());
        assert_eq!(pts.len(), 2);
        assert!(!pts[0].complete && pts[0].runs == 2);
        assert!(pts[0].causes[0].starts_with("p001_r2: udp_be.rtt lost 20.0 %"));
        assert!(pts[1].complete);
        let kept = complete_rows(&rows, &0.05.into());
        assert_eq!(kept.len(), 1);
        let mut rows = rows.to_vec();
        annotate(&mut rows, &0.05.into());
        assert_eq!(rows[1].get(COMPLETE), Some(&Value::Bool(false)));
        assert_eq!(rows[0].get(COMPLETE), Some(&Value::Bool(true)));
        assert_eq!(rows[0].cells[3].0, COMPLETE, "next to interrupted");
        // Annotating again replaces, never duplicates.
        annotate(&mut rows, &0.05.into());
        assert_eq!(
            rows[0].cells.iter().filter(|(k, _)| k == COMPLETE).count(),
            1
        );
    }

    #[test]
    fn a_planned_run_without_a_row_makes_its_point_incomplete() {
        // p002's only run failed (no row.json): before, its point vanished from the
        // completeness list and the experiment could still be judged.
        let rows = [row("p001_r1", "p001", &[]), row("p003_r1", "p003", &[])];
        let plan = [
            Planned::new("p001_r1", "p001", "not run"),
            Planned::new("p002_r1", "p002", "test rrul: the server did not answer"),
            Planned::new("p003_r1", "p003", "not run"),
        ];
        let pts = points(&rows, &plan, &0.05.into());
        let names: Vec<&str> = pts.iter().map(|p| p.point.as_str()).collect();
        assert_eq!(names, ["p001", "p002", "p003"], "in the plan's order");
        assert!(pts[0].complete && pts[2].complete);
        assert!(!pts[1].complete);
        assert_eq!((pts[1].runs, pts[1].missing), (0, 1));
        assert_eq!(
            pts[1].causes,
            ["p002_r1: no result: test rrul: the server did not answer"]
        );
        // One of two repetitions missing: incomplete too.
        let rows = [row("p001_r1", "p001", &[])];
        let plan = [
            Planned::new("p001_r1", "p001", "not run"),
            Planned::new("p001_r2", "p001", "not run (interrupted)"),
        ];
        let pts = points(&rows, &plan, &0.05.into());
        assert_eq!(pts.len(), 1);
        assert!(!pts[0].complete);
        assert_eq!((pts[0].runs, pts[0].missing), (1, 1));
        // Without a plan only the rows are judged (as before).
        assert!(points(&rows, &[], &0.05.into())[0].complete);
    }

    #[test]
    fn a_planned_probe_without_cells_is_an_empty_phase() {
        // The probe udp_bk was planned over idle and loaded but its prober printed nothing:
        // no lat.udp_bk.* cell at all, so no count or loss check could see it.
        let r = row(
            "p001_r1",
            "p001",
            &[
                ("probe.udp_be", "idle,loaded".into()),
                ("probe.udp_bk", "idle,loaded".into()),
            ],
        );
        let c = assess(&r, 0.05);
        assert_eq!(
            c.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "phase idle: probe udp_bk left no result",
                "phase loaded: probe udp_bk left no result"
            ]
        );
        // A series with cells for every planned phase is complete; a phase with cells of
        // another kind (the one-way series) counts too.
        let ok = row(
            "p001_r1",
            "p001",
            &[
                ("probe.udp_be", "idle,loaded".into()),
                ("probe.udp_ef", "loaded".into()),
                ("lat.udp_ef.owd_up.loaded.count", 3.into()),
            ],
        );
        assert!(assess(&ok, 0.05).is_empty(), "{:?}", assess(&ok, 0.05));
        // A similarly named series does not stand in for the planned one.
        let other = row(
            "p001_r1",
            "p001",
            &[
                ("probe.udp", "loaded".into()),
                ("lat.udp_x.rtt.loaded.count", 3.into()),
            ],
        );
        assert_eq!(assess(&other, 0.05).len(), 1);
    }

    /// A phase's lateness cells as [`crate::summary`] writes them.
    fn late(
        dir: &str,
        phase: &str,
        packets: u64,
        over_1ms: f64,
        p99_ms: f64,
    ) -> Vec<(String, Value)> {
        let b = format!("late.{dir}.{phase}");
        vec![
            (format!("{b}.packets"), packets.into()),
            (format!("{b}.p50_ms"), 0.05.into()),
            (format!("{b}.p99_ms"), p99_ms.into()),
            (format!("{b}.max_ms"), (p99_ms * 3.0).into()),
            (format!("{b}.over_1ms"), over_1ms.into()),
        ]
    }

    fn with(cells: Vec<(String, Value)>) -> Row {
        let mut r = row("p001_r1", "p001", &[]);
        r.cells.extend(cells);
        r
    }

    #[test]
    fn an_emulator_that_fell_behind_makes_the_run_incomplete() {
        // On time: a calm host (0.1 % late) in both directions and phases is complete, and
        // so is a run exactly at the bound.
        let mut calm = late("up", "loaded", 3000, 0.001, 0.4);
        calm.extend(late("down", "loaded", 6000, 0.0, 0.2));
        calm.extend(late("up", "idle", 300, 0.0, 0.1));
        calm.extend(late("up", "recovery", 199, 0.5, 20.0));
        calm.extend(late("down", "recovery", 900, MAX_LATE_FRACTION, 0.9));
        assert!(assess(&with(calm), 0.1).is_empty());
        // Just above the bound: incomplete.
        let just = with(late("up", "loaded", 3000, MAX_LATE_FRACTION + 0.0001, 1.1));
        assert_eq!(assess(&just, 0.1).len(), 1);
        // Behind: 6.5 % of the up packets of the loaded phase more than 1 ms late.
        let busy = with(late("up", "loaded", 3000, 0.065, 7.2));
        let c = assess(&busy, 0.1);
        assert_eq!(
            c,
            vec![Cause::EmulatorLate {
                direction: "up".into(),
                phase: "loaded".into(),
                late: 0.065,
                p99_ms: Some(7.2),
                bound: MAX_LATE_FRACTION,
            }]
        );
        assert_eq!(
            c[0].to_string(),
            "the emulator released 6.5 % of the up packets more than 1 ms late in phase \
             loaded (bound 2.0 %, p99 7.2 ms): the host was too busy, latency figures \
             include host delay"
        );
        // Any phase counts once it released enough packets; a phase of a few probes does not.
        assert_eq!(
            assess(&with(late("down", "recovery", 500, 0.03, 1.5)), 0.1).len(),
            1
        );
        assert!(assess(&with(late("up", "idle", 12, 0.5, 3.0)), 0.1).is_empty());
        // Its point is incomplete with that cause, and the rows say so.
        let mut rows = [busy, row("p002_r1", "p002", &[])];
        let pts = points(&rows, &[], &0.1.into());
        assert!(!pts[0].complete && pts[1].complete);
        assert!(pts[0].causes[0].starts_with("p001_r1: the emulator released 6.5 %"));
        annotate(&mut rows, &0.1.into());
        assert_eq!(rows[0].get(COMPLETE), Some(&Value::Bool(false)));
        assert!(
            rows[0]
                .get(INCOMPLETE_BECAUSE)
                .unwrap()
                .as_str()
                .unwrap()
                .contains("host was too busy")
        );
    }

    #[test]
    fn a_point_the_file_bounds_on_its_own_is_judged_by_its_bound_only() {
        // Report 4: 25 % of the loaded probes lost, at the SQM-off point and at a shaped one.
        let lossy = |run: &str, point: &str, shaper: &str| {
            let mut r = row(run, point, &[("lat.udp_be.rtt.loaded.loss", 0.25.into())]);
            r.cells.insert(3, ("shaper".into(), shaper.into()));
            r
        };
        let bound = LossBound {
            default: 0.1,
            points: vec![PointLossBound {
                param: "shaper".into(),
                value: "SQM off".into(),
                bound: 0.3,
            }],
        };
        let off = lossy("p005_r1", "p005", "SQM off");
        let shaped = lossy("p001_r1", "p001", "6089kbit/737kbit");
        assert_eq!(bound.for_row(&off), 0.3);
        assert_eq!(bound.for_row(&shaped), 0.1);
        let pts = points(&[shaped.clone(), off.clone()], &[], &bound);
        assert!(!pts[0].complete, "the shaped point keeps the 10 % bound");
        assert!(pts[0].causes[0].contains("(bound 10.0 %)"), "{:?}", pts[0]);
        assert!(pts[1].complete, "{:?}", pts[1]);
        // Above its own bound, SQM off is incomplete too.
        let worse = {
            let mut r = off.clone();
            r.cells.retain(|(k, _)| k != "lat.udp_be.rtt.loaded.loss");
            r.cells
                .push(("lat.udp_be.rtt.loaded.loss".into(), 0.35.into()));
            r
        };
        let c = assess(&worse, bound.for_row(&worse));
        assert!(
            c[0].to_string()
                .contains("35.0 % of its probes in phase loaded (bound 30.0 %)")
        );
        assert_eq!(
            bound.describe(),
            "10.0 % (30.0 % where shaper=SQM off, stated in the file)"
        );
        assert_eq!(LossBound::from(0.05).describe(), "5.0 %");
    }
}
