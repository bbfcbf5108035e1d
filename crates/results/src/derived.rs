//! The `derived` section: figures computed from `raw` with `bloatlab-stats`, stored for
//! people and tools reading the file directly (`jq`). bloatlab itself always recomputes
//! from `raw`, so a stale or hand-edited `derived` section never changes a report.
//!
//! Definitions: `docs/statistics.md` (quantiles are Hyndman–Fan type 7; phases by send
//! time; induced latency = phase median − first idle median; DSLReports grade table).

use bloatlab_stats::throughput::summarize_throughput;
use bloatlab_stats::{DelayStats, analyze_series};
use serde::{Deserialize, Serialize};

use crate::convert::{RawError, nanos};
use crate::schema::{DelayKindRecord, DirectionRecord, Raw};

/// Everything derived from `raw`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    /// Per latency series, per phase.
    pub latency: Vec<SeriesDerived>,
    /// Per phase, over all flows.
    pub throughput: Vec<ThroughputDerived>,
}

/// One latency series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesDerived {
    /// Series name.
    pub name: String,
    /// What the delays are.
    pub kind: DelayKindRecord,
    /// One entry per phase, in time order.
    pub phases: Vec<LatencyPhaseDerived>,
}

/// One series in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPhaseDerived {
    /// Phase name.
    pub phase: String,
    /// Probes sent in the phase.
    pub sent: u64,
    /// Probes received.
    pub received: u64,
    /// Probes lost.
    pub lost: u64,
    /// `lost / sent`; null when nothing was sent.
    pub loss_fraction: Option<f64>,
    /// Extra copies.
    pub duplicates: u64,
    /// Out-of-order arrivals.
    pub late: u64,
    /// Delay distribution; null when nothing arrived.
    pub delay: Option<DelayDerived>,
    /// Phase median − idle median, ns (negative if latency fell); null for idle phases.
    pub induced_ns: Option<i64>,
    /// A+..F on the induced latency.
    pub grade: Option<String>,
    /// Round trips per minute (loaded phases of RTT series).
    pub rpm: Option<f64>,
    /// Poor / Fair / Good / Excellent.
    pub rpm_class: Option<String>,
}

/// A delay distribution, all in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names say it all.
pub struct DelayDerived {
    pub count: u64,
    pub min_ns: u64,
    pub p10_ns: u64,
    pub median_ns: u64,
    pub mean_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

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

/// All flows over one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputDerived {
    /// Phase name.
    pub phase: String,
    /// Per flow.
    pub flows: Vec<FlowDerived>,
    /// Sum of upload flows' mean rates, bit/s.
    pub up_bps: u64,
    /// Sum of download flows' mean rates, bit/s.
    pub down_bps: u64,
    /// `up_bps + down_bps`.
    pub total_bps: u64,
    /// Jain's index over upload flows; null if undefined (no flows / all zero).
    pub fairness_up: Option<f64>,
    /// Jain's index over download flows.
    pub fairness_down: Option<f64>,
    /// Jain's index over all flows.
    pub fairness_all: Option<f64>,
}

/// One flow over one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowDerived {
    /// Flow name.
    pub name: String,
    /// Up or down.
    pub direction: DirectionRecord,
    /// Bytes in the phase.
    pub bytes: u64,
    /// Mean rate over the covered part of the phase, bit/s.
    pub mean_bps: u64,
    /// Covered fraction of the phase, 0..1.
    pub coverage: f64,
}

impl Derived {
    /// Computes every figure from `raw`. Fails only if the phases are invalid.
    pub fn compute(raw: &Raw) -> Result<Derived, RawError> {
        let timeline = raw.timeline()?;
        let latency = raw
            .latency_series()
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
                        grade: a.grade.map(|g| g.to_string()),
                        rpm: a.rpm.map(|r| r.rpm),
                        rpm_class: a.rpm.map(|r| r.class().to_string()),
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
        })
    }
}
