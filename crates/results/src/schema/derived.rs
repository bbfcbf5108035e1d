//! The `derived` section's records: plain data, written and read as they are. What
//! computes them from `raw` (with `bloatlab-stats`) is `crate::derived`; the schema itself
//! depends on no statistics code.

use serde::{Deserialize, Serialize};

use super::{DelayKindRecord, DirectionRecord};

/// Everything derived from `raw`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    /// Per latency series, per phase.
    pub latency: Vec<SeriesDerived>,
    /// Per phase, over all flows.
    pub throughput: Vec<ThroughputDerived>,
    /// The run's headline grade: its reference series' worst loaded phase
    /// (`bloatlab_stats::analysis::run_grade`); null when nothing could be graded (no
    /// round-trip series, no idle baseline, no reply under load). Added in version 5.
    pub run_grade: Option<RunGradeDerived>,
}

/// The headline grade of a run: **the grade of its worst loaded phase**, never a mean over
/// phases (the rule: `bloatlab_stats::grade`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunGradeDerived {
    /// The series graded: the reference probe series (`udp_be`, else another UDP series,
    /// else ICMP), a round trip.
    pub series: String,
    /// The loaded phase whose median rose most over the idle median.
    pub phase: String,
    /// That rise, ns (loaded median − idle median, 0 if it fell).
    pub increase_ns: u64,
    /// The grade of `increase_ns` on the table.
    pub grade: GradeRecord,
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

/// A bufferbloat grade, best first, spelled in the file as the grade table spells it
/// (`"A+"`, `"A"`, ..., `"F"`; there is no E). `bloatlab_stats::Grade` computes it
/// (`crate::convert`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GradeRecord {
    /// A+.
    #[serde(rename = "A+")]
    APlus,
    /// A.
    A,
    /// B.
    B,
    /// C.
    C,
    /// D.
    D,
    /// F.
    F,
}

impl GradeRecord {
    /// `"A+"`, `"A"`, ..., `"F"`: the spelling in the file, the terminal and the HTML.
    pub fn as_str(self) -> &'static str {
        match self {
            GradeRecord::APlus => "A+",
            GradeRecord::A => "A",
            GradeRecord::B => "B",
            GradeRecord::C => "C",
            GradeRecord::D => "D",
            GradeRecord::F => "F",
        }
    }
}

impl std::fmt::Display for GradeRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// Probes still unanswered, before their timeout, when the prober stopped (neither
    /// received nor lost; 0 in files written before this field).
    #[serde(default)]
    pub unfinished: u64,
    /// `lost / (sent - unfinished)`; null when no probe's fate is known.
    pub loss_fraction: Option<f64>,
    /// Extra copies.
    pub duplicates: u64,
    /// Out-of-order arrivals.
    pub late: u64,
    /// Delay distribution; null when nothing arrived.
    pub delay: Option<DelayDerived>,
    /// Phase median − idle median, ns (negative if latency fell); null for idle phases.
    pub induced_ns: Option<i64>,
    /// A+..F on the induced latency (the table in `bloatlab_stats::grade`); null for
    /// idle phases and one-way series.
    pub grade: Option<GradeRecord>,
    /// "Probe RPM": `60000 / trimmed mean` of this series' round trips in ms (loaded
    /// phases of RTT series). Not the draft's responsiveness, which `bloatlab rpm`
    /// measures over HTTP (docs/rpm.md); `rpm` in version 2 files (migrated).
    pub probe_rpm: Option<f64>,
    /// The draft's band of the probe RPM: Poor / Fair / Good / Excellent (`rpm_class` in
    /// version 2).
    pub probe_rpm_class: Option<String>,
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
