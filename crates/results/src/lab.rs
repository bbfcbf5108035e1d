//! The lab's view of a run (`metadata.lab`): which lab the test ran in, each direction's
//! link settings, and what the emulator counted during the run.
//!
//! ```text
//! "lab": {
//!   "name": "demo", "host": "client", "backend": "userspace",
//!   "ecn": {"client": "1", "server": "2"},          net.ipv4.tcp_ecn per host at the start
//!   "tun_ring_drops": 0,                            packets lost before emulation (overload)
//!   "directions": [ {
//!     "direction": "up",
//!     "link": {"rate_bps": 20000000, "delay_ns": 40000000, ..., "qdisc": {"kind": "fq_codel", ...}},
//!     "start_ns": 120000000, "end_ns": 70150000000,   the window counted, run time
//!     "enqueued_packets": 10, "dequeued_packets": 9, "dequeued_bytes": 13500,
//!     "drops": {"overflow": 0, "aqm": 1, "loss": 0},  packets, by who dropped them
//!     "ce_marked": 0,                                 packets marked CE
//!     "backlog": {"samples": 140, "p50_packets": 3, "p90_packets": 9, "max_packets": 12,
//!                 "max_bytes": 18000, "end_packets": 0},  qdisc backlog, sampled ~2/s
//!     "sojourn": {"count": 9, "p50_ns": 1, "p90_ns": 2, "p99_ns": 3, "max_ns": 4},
//!     "lateness": {"count": 9, "p50_ns": 1, "p90_ns": 2, "p99_ns": 3, "max_ns": 4}
//!   } ],
//!   "phases": [ {"phase": "loaded", "direction": "up", "dequeued_bytes": 1, "drops": 0,
//!                "ce_marked": 0, "utilisation": 0.97,
//!                "lateness": {"count": 9, "p50_ns": 1, "p90_ns": 2, "p99_ns": 3, "max_ns": 4,
//!                             "late_packets": 0}} ]   released > 1 ms late
//! }
//! ```
//!
//! `sojourn` is the time packets waited in the emulated qdisc; `lateness` is the emulator's
//! own error (how late it released packets after their due time): above 1 ms at p99 the
//! latency figures of the run carry that error. Percentiles are `null` without samples.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::schema::{DirectionRecord, LinkDirectionRecord};

/// The lab a run went through, as the emulator saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabRecord {
    /// Lab name.
    pub name: String,
    /// The lab host the test ran on (`client`, ...).
    pub host: String,
    /// `userspace` or `kernel`.
    pub backend: String,
    /// `net.ipv4.tcp_ecn` of each lab host when the run started (`"1"` = requests ECN).
    #[serde(default)]
    pub ecn: BTreeMap<String, String>,
    /// Packets dropped in the TUN rings during the run (the emulator read too slowly);
    /// `None` = not measured.
    #[serde(default)]
    pub tun_ring_drops: Option<u64>,
    /// One record per direction of the emulated link.
    #[serde(default)]
    pub directions: Vec<EmulatorRecord>,
    /// The emulator's counters per phase and direction.
    #[serde(default)]
    pub phases: Vec<EmulatorPhaseRecord>,
}

/// Drops by cause, packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropsRecord {
    /// The queue was full.
    pub overflow: u64,
    /// The AQM's control law.
    pub aqm: u64,
    /// The random loss model (not congestion).
    pub loss: u64,
}

/// Percentiles of a duration, ns; `None` without samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PercentilesRecord {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_ns: Option<u64>,
    /// 90th percentile.
    pub p90_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// Largest.
    pub max_ns: Option<u64>,
}

/// The qdisc backlog, sampled during the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BacklogRecord {
    /// Samples taken.
    pub samples: u64,
    /// Median, packets.
    pub p50_packets: Option<u64>,
    /// 90th percentile, packets.
    pub p90_packets: Option<u64>,
    /// Largest sample, packets.
    pub max_packets: Option<u64>,
    /// Largest sample, bytes.
    pub max_bytes: Option<u64>,
    /// At the end of the run, packets.
    pub end_packets: u64,
}

/// What one direction of the emulator did during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorRecord {
    /// Up (client to server) or down.
    pub direction: DirectionRecord,
    /// The direction's settings (the same record as `metadata.link`).
    pub link: LinkDirectionRecord,
    /// Start of the counted window, ns since the run start (negative values are clamped
    /// to 0: the first snapshot may predate the run by up to 0.5 s).
    pub start_ns: u64,
    /// End of the counted window, ns since the run start.
    pub end_ns: u64,
    /// Packets that entered the link.
    pub enqueued_packets: u64,
    /// Packets the link delivered.
    pub dequeued_packets: u64,
    /// Bytes (IP lengths) the link delivered.
    pub dequeued_bytes: u64,
    /// Drops by cause.
    pub drops: DropsRecord,
    /// Packets marked CE.
    pub ce_marked: u64,
    /// The qdisc backlog.
    pub backlog: BacklogRecord,
    /// Time packets waited in the qdisc.
    pub sojourn: PercentilesRecord,
    /// The emulator's release lateness (its own timing error).
    pub lateness: PercentilesRecord,
    /// A chained direction: each stage's counters over the same window, in chain order
    /// (the fields above sum them). Empty: a single link. Added after version 2 without
    /// a version bump (older readers ignore it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageCountersRecord>,
}

/// What one stage of a chain did over the counted window.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StageCountersRecord {
    /// The stage's name.
    pub name: String,
    /// Its rate at the end of the window, bit/s (`lab set --stage-rate` may change it).
    #[serde(default)]
    pub rate_bps: Option<u64>,
    /// Packets the stage delivered.
    pub dequeued_packets: u64,
    /// Bytes (IP lengths) the stage delivered.
    pub dequeued_bytes: u64,
    /// Drops by cause.
    pub drops: DropsRecord,
    /// Packets marked CE.
    pub ce_marked: u64,
    /// Time packets waited in the stage's qdisc.
    pub sojourn: PercentilesRecord,
}

/// The emulator's counters over one phase of the run, one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorPhaseRecord {
    /// Phase name.
    pub phase: String,
    /// Up or down.
    pub direction: DirectionRecord,
    /// The window counted (status snapshots nearest the phase edges), ns since run start.
    pub start_ns: u64,
    /// End of that window.
    pub end_ns: u64,
    /// Bytes the link delivered in the window.
    pub dequeued_bytes: u64,
    /// Congestion drops (overflow + AQM; random loss is not counted).
    pub drops: u64,
    /// Packets marked CE.
    pub ce_marked: u64,
    /// Delivered bits over the link rate in the window (0..=1, a little above 1 when the
    /// window edges are uneven); `None` when the link is unshaped.
    pub utilisation: Option<f64>,
    /// The emulator's release lateness of the packets it released in the window (its own
    /// timing error: how long after their due time they left); `None` in files written
    /// before it was recorded. Added without a version bump (older readers ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness: Option<PhaseLatenessRecord>,
}

/// A packet released more than this after its due time counts as late in
/// [`PhaseLatenessRecord::late_packets`]: 1 ms (docs/lab.md, "Release lateness").
pub const LATE_RELEASE_NS: u64 = 1_000_000;

/// An emulator **fell behind** in a phase when more than this fraction of the packets it
/// released there in one direction left more than [`LATE_RELEASE_NS`] late: 2 %. Then more
/// than 2 % of that phase's packets carry over 1 ms of host delay on top of the link's, and a
/// round trip crosses two directions, so the medians and 90th percentiles the experiments
/// judge may rest on host delay. Measured on report 4 `--quick` (docs/experiments.md, "A busy
/// host"): on-time runs, calm or beside busy loops and another lab at 1 Gbit/s, released at
/// most 1.3 % of a loaded phase's packets that late (p99 at most 2 ms).
pub const MAX_LATE_FRACTION: f64 = 0.02;

/// A phase is judged for lateness only when it released at least this many packets in the
/// direction: with fewer (an idle phase's few probes) one late packet is already a large
/// fraction.
pub const MIN_LATE_PACKETS: u64 = 200;

/// The emulator's release lateness over one phase window, one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseLatenessRecord {
    /// Percentiles over the packets released in the window.
    #[serde(flatten)]
    pub percentiles: PercentilesRecord,
    /// Of those, packets released more than [`LATE_RELEASE_NS`] late (to within the
    /// histogram's 3 % bucket width).
    pub late_packets: u64,
}

impl PhaseLatenessRecord {
    /// The fraction of packets released more than [`LATE_RELEASE_NS`] late; `None` without
    /// packets.
    pub fn late_fraction(&self) -> Option<f64> {
        (self.percentiles.count > 0)
            .then(|| self.late_packets as f64 / self.percentiles.count as f64)
    }

    /// Whether the emulator fell behind: at least [`MIN_LATE_PACKETS`] packets, of which
    /// more than [`MAX_LATE_FRACTION`] were released more than 1 ms late.
    pub fn fell_behind(&self) -> bool {
        fell_behind(self.percentiles.count, self.late_fraction().unwrap_or(0.0))
    }
}

/// The rule of [`PhaseLatenessRecord::fell_behind`] on its two numbers: `packets` released
/// in the phase and direction, and the fraction of them more than 1 ms late (as
/// `summary.csv`'s `late.DIR.PHASE.packets` and `.over_1ms` hold them).
pub fn fell_behind(packets: u64, late_fraction: f64) -> bool {
    packets >= MIN_LATE_PACKETS && late_fraction > MAX_LATE_FRACTION
}

impl LabRecord {
    /// The largest release-lateness p99 over the directions, if any was measured.
    pub fn worst_lateness_p99_ns(&self) -> Option<u64> {
        self.directions
            .iter()
            .filter_map(|d| d.lateness.p99_ns)
            .max()
    }
}
