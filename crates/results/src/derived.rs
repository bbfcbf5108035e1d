//! The `derived` section: figures computed from `raw` with `bloatlab-stats`, stored for
//! people and tools reading the file directly (`jq`). bloatlab itself always recomputes
//! from `raw`, so a stale or hand-edited `derived` section never changes a report.
//!
//! Definitions: `docs/statistics.md` (quantiles are Hyndman–Fan type 7; phases by send
//! time; induced latency = phase median − first idle median; DSLReports grade table).

use bloatlab_stats::throughput::summarize_throughput;
use bloatlab_stats::{DelayStats, RunGrade, Timeline, analyze_series, run_grade};

use crate::convert::{RawError, nanos};
pub use crate::schema::derived::{
    DelayDerived, Derived, FlowDerived, GradeRecord, LatencyPhaseDerived, RunGradeDerived,
    SeriesDerived, ThroughputDerived,
};
use crate::schema::{Raw, ResultsFile};

impl From<&DelayStats> for DelayDerived {
    fn from(d: &DelayStats) -> Self {
        DelayDerived {
            count: d.count,
            min_ns: nanos(d.min),
            p10_ns: nanos(d.p10),
            median_ns: nanos(d.median),
            mean_ns: nanos(d.mean),
            p90_ns: nanos(d.p90),
            p99_ns: nanos(d.p99),
            max_ns: nanos(d.max),
        }
    }
}

impl ResultsFile {
    /// Recomputes the `derived` section from `raw` (see [`Derived::compute`]).
    pub fn with_derived(mut self) -> Result<ResultsFile, crate::RawError> {
        self.derived = Some(Derived::compute(&self.raw)?);
        Ok(self)
    }
}

impl Derived {
    /// Computes every figure from `raw`. Fails only if the phases are invalid.
    pub fn compute(raw: &Raw) -> Result<Derived, RawError> {
        let timeline = raw.timeline()?;
        let series = raw.latency_series();
        let latency = series
            .iter()
            .map(|s| SeriesDerived {
                name: s.name.clone(),
                kind: s.kind.into(),
                phases: analyze_series(s, &timeline)
                    .iter()
                    .map(|a| LatencyPhaseDerived {
                        phase: a.phase.name.clone(),
                        sent: a.summary.sent,
                        received: a.summary.received,
                        lost: a.summary.lost,
                        unfinished: a.summary.unfinished,
                        loss_fraction: a.summary.loss_fraction(),
                        duplicates: a.summary.duplicates,
                        late: a.summary.late,
                        delay: a.summary.delay.as_ref().map(DelayDerived::from),
                        induced_ns: a.induced.map(|i| {
                            let d = i128::from(nanos(i.loaded_median))
                                - i128::from(nanos(i.idle_median));
                            // |d| < 2^64, clamp into i64 for the file.
                            d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
                        }),
                        grade: a.grade.map(GradeRecord::from),
                        probe_rpm: a.rpm.map(|r| r.rpm),
                        probe_rpm_class: a.rpm.map(|r| r.class().to_string()),
                    })
                    .collect(),
            })
            .collect();
        let flows = raw.flows();
        let throughput = if flows.is_empty() {
            Vec::new()
        } else {
            timeline
                .phases()
                .iter()
                .map(|p| {
                    let t = summarize_throughput(&flows, p);
                    ThroughputDerived {
                        phase: p.name.clone(),
                        flows: t
                            .flows
                            .iter()
                            .map(|f| FlowDerived {
                                name: f.name.clone(),
                                direction: f.direction.into(),
                                bytes: f.bytes.0,
                                mean_bps: f.mean.0,
                                coverage: f.coverage,
                            })
                            .collect(),
                        up_bps: t.up.0,
                        down_bps: t.down.0,
                        total_bps: t.total.0,
                        fairness_up: t.fairness_up.ok(),
                        fairness_down: t.fairness_down.ok(),
                        fairness_all: t.fairness_all.ok(),
                    }
                })
                .collect()
        };
        Ok(Derived {
            latency,
            throughput,
            run_grade: run_grade_of(&series, &timeline),
        })
    }
}

impl From<&RunGrade> for RunGradeDerived {
    fn from(g: &RunGrade) -> Self {
        RunGradeDerived {
            series: g.series.clone(),
            phase: g.phase.clone(),
            increase_ns: nanos(g.increase()),
            grade: g.grade.into(),
        }
    }
}

/// The headline grade of these series over `timeline` (`bloatlab_stats::run_grade`).
pub(crate) fn run_grade_of(
    series: &[bloatlab_stats::LatencySeries],
    timeline: &Timeline,
) -> Option<RunGradeDerived> {
    run_grade(series, timeline)
        .as_ref()
        .map(RunGradeDerived::from)
}
