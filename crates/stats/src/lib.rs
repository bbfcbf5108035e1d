//! Pure, deterministic statistics for latency-under-load tests.
//!
//! Nothing here reads a clock, touches a file or a socket: times are offsets from the
//! start of a run (`Duration`), sizes are [`bloatlab_units::Bytes`], rates are
//! [`bloatlab_units::BitRate`]. Every definition is written out in `docs/statistics.md`.
//!
//! * [`analysis`]: one series over a whole timeline: per-phase table, induced latency, grade, probe RPM.
//! * [`quantile`](mod@quantile): the one percentile definition (Hyndman–Fan type 7, numpy's default).
//! * [`histogram`]: the one streaming (log-linear) histogram, for distributions not kept sample by sample.
//! * [`phase`]: idle / loaded / recovery time ranges; summaries are per phase, so idle
//!   time can never leak into a loaded summary.
//! * [`latency`]: probe series and the min/p10/median/mean/p90/p99/max/count/loss table.
//! * [`throughput`]: per-flow, per-direction and total throughput; Jain's fairness.
//! * [`grade`]: induced latency (loaded median − idle median) and the A+..F grade.
//! * [`rpm`]: responsiveness in round trips per minute.
//! * [`conditions`]: did the load build a queue; was the host the bottleneck.
//! * [`timeseries`]: bucketing with explicit gaps and time-weighted means, for plots.
//! * [`emodel`]: ITU-T G.107 E-model R factor and MOS for the VoIP test.

#![forbid(unsafe_code)]

pub mod analysis;
pub mod conditions;
pub mod emodel;
pub mod grade;
pub mod histogram;
pub mod latency;
pub mod phase;
pub mod quantile;
pub mod rpm;
pub mod throughput;
pub mod timeseries;

pub use analysis::{
    PhaseAnalysis, RunGrade, analyze_series, reference_name, reference_series, run_grade,
};
pub use grade::{Grade, InducedLatency, bloat_grade};
pub use histogram::LogHistogram;
pub use latency::{
    DelayKind, DelayStats, LatencySeries, LatencySummary, ProbeOutcome, ProbeSample,
};
pub use phase::{Phase, PhaseKind, Timeline, TimelineError};
pub use quantile::{QuantileError, quantile, quantile_sorted};
pub use rpm::{Rpm, RpmClass};
pub use throughput::{
    Direction, FlowSeries, FlowThroughput, ThroughputSummary, TransferSample, jain_fairness,
};
