//! The current (version 5) schema of a bloatlab results file.
//!
//! ```text
//! {
//!   "format": "bloatlab-results",          constant, identifies the file
//!   "version": 5,                          schema version, see crate::migrate
//!   "metadata": {
//!     "bloatlab_version": "0.1.0",
//!     "test": "rrul",                      test name
//!     "title": "…",                        optional, free text
//!     "command_line": ["bloatlab", "test", "rrul", "10.0.0.2"],
//!     "start_time": "2026-12-02T11:00:00Z",  RFC 3339
//!     "interrupted": false,                true if the run was cut short (Ctrl-C)
//!     "hosts": {"local":  {"address": null, "name": "box", "port": null,
//!                          "role": "client", "software": "bloatlab 0.1.0"},
//!               "remote": {"address": "10.0.0.2", "name": null, "port": 5001,
//!                          "role": "server", "software": "bloatlab 0.1.0"}},
//!     "kernel": {"sysname": "Linux", "release": "6.18.0", "version": "#1 SMP …",
//!                "machine": "x86_64"},
//!     "sysctls": { "net.ipv4.tcp_ecn": "1", ... }   strings
//!     "congestion_control": {"default": "bbr", "requested": "cubic",
//!         "per_flow": [{"flow": "tcp_up_be", "sender": "local"|"remote",
//!                       "requested": "cubic", "used": "cubic"}]},
//!     "qdisc": [ {"kind": "fq_codel", "interface": "eth0", "parameters": {"target": "5ms"}} ],
//!     "link": null | {"lab": "demo", "backend": "userspace",
//!                     "up":   {"rate_bps": 20000000, "delay_ns": 40000000, "jitter_ns": null,
//!                              "loss_fraction": null, "limit_packets": 1000,
//!                              "limit_bytes": null, "overhead_bytes": null,
//!                              "qdisc": {"kind": "fifo", ...}},
//!                     "down": {...}},
//!     "plan": null | {"idle_before_ns": …, "loaded_ns": …, "idle_after_ns": …,
//!                     "probe_interval_ns": …, "sample_interval_ns": …,
//!                     "flows":  [{"name", "direction", "start_ns", "stop_ns", "tos",
//!                                 "congestion_control", "pulses": null|{"bytes","count"},
//!                                 "family": "ipv4"|"ipv6", "address"}],   (both omitted when unknown)
//!                     "probes": [{"name", "mode": "udp"|"icmp", "start_ns", "stop_ns",
//!                                 "interval_ns", "tos", "size_bytes", "voip",
//!                                 "family", "address"}]},
//!     "probe": null | { bloatlab ping's settings and session summary, see schema::probe },
//!     "rpm": (omitted unless bloatlab rpm or bloatlab test rpm) { the responsiveness session, see schema::rpm },
//!     "lab": (omitted outside a lab) { the lab's view of the run, see crate::lab },
//!     "cpu_utilisation": [0.12, 0.4],     (omitted when empty) this host's CPU use in loaded
//!                                          phases, one sample per 500 ms, 0..=1 of the machine
//!     "notes": ["flow tcp_up_be: …"],      (omitted when empty) what the run noted about itself
//!     "incomplete": (omitted unless a journal recovery did not reach the end)
//!                   {"phase_reached": "loaded"|null, "reached_ns": …,
//!                    "runners_missing": ["tcp_up_be"], "reason": "…"},
//!     "extra":              { free-form }   what has no record yet (flow_failures, …)
//!   },
//!   "raw": {                               what was measured; never rewritten
//!     "phases": [ {"kind": "idle"|"loaded"|"recovery", "name": "idle",
//!                  "start_ns": 0, "end_ns": 5000000000}, ... ],
//!     "latency": [ {"name": "udp_ef", "kind": "rtt"|"owd_up"|"owd_down",
//!                   "samples": [ {"sent_ns": 12, "delay_ns": 20000000},
//!                                {"sent_ns": 22, "delay_ns": null},        lost
//!                                {"sent_ns": 32, "delay_ns": 5, "duplicates": 1, "late": true} ] } ],
//!     "throughput": [ {"name": "tcp_up_be", "direction": "up"|"down",
//!                      "samples": [ {"start_ns": 0, "end_ns": 200000000, "bytes": 123456} ],
//!                      "tcp": {"sender":   null | {"retransmits": 3, "delivered_ce": null,
//!                                                  "min_rtt_ns": …, "max_rtt_ns": …},
//!                              "receiver": null | {…}} } ]
//!   },
//!   "derived": { ... } | null             numbers computed from "raw" (records: schema::derived; computed by crate::derived);
//!                                          informational, recomputable, never read back;
//!                                          its "run_grade": {"series": "udp_be", "phase": "upload",
//!                                          "increase_ns": …, "grade": "B"} | null is the headline
//!                                          grade, the worst loaded phase's (version 5)
//! }
//! ```
//!
//! All times are integer nanoseconds since the start of the run (`*_ns`), byte counts are
//! integers, rates are bits per second (`*_bps`). **Not measured is `null`, never 0**:
//! every record field that a run may not know is an `Option`. A latency series is
//! identified by its name *and* its kind: `udp_be` (rtt) and `udp_be` (owd_down) are two
//! series. Unknown fields are ignored when reading, so optional fields can be added
//! without a version bump.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use derived::Derived;

pub mod derived;
pub mod meta;
pub mod probe;
pub mod rpm;

pub use meta::{
    CongestionControlRecord, FlowCongestionControl, FlowEnd, HostRecord, HostRole, HostsRecord,
    IpFamilyRecord, KernelRecord, LinkDirectionRecord, LinkRecord, PlanFlowRecord, PlanProbeRecord,
    PlanRecord, ProbeModeRecord, PulsesRecord, QdiscRecord, StageRecord,
};
pub use probe::{
    ClockMethod, ClockRecord, IpdvRecord, LossDirectionRecord, LostProbeRecord, ProbeSessionRecord,
    ProbeSummaryRecord, SignedDelayStats,
};
pub use rpm::{
    RpmCapacityRecord, RpmFailedRecord, RpmIdleRecord, RpmIntervalRecord, RpmParametersRecord,
    RpmPartsRecord, RpmRecord, RpmResponsivenessRecord, RpmSamplesRecord,
};

/// The value of the `format` field.
pub const FORMAT: &str = "bloatlab-results";

/// The schema version this build writes (and the newest it reads).
pub const CURRENT_VERSION: u32 = 5;

/// A whole results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsFile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`CURRENT_VERSION`] once loaded (older files are migrated).
    pub version: u32,
    /// Who, what, where, when.
    pub metadata: Metadata,
    /// The samples.
    pub raw: Raw,
    /// Figures computed from `raw` when the file was written.
    #[serde(default)]
    pub derived: Option<Derived>,
}

impl ResultsFile {
    /// A file of the current version with no derived section.
    pub fn new(metadata: Metadata, raw: Raw) -> ResultsFile {
        ResultsFile {
            format: FORMAT.to_owned(),
            version: CURRENT_VERSION,
            metadata,
            raw,
            derived: None,
        }
    }
}

/// A free-form map of settings (JSON values keyed by name), for what has no record yet.
pub type FreeForm = BTreeMap<String, Value>;

/// Run metadata. Every record defaults to "nothing known" when absent from the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// `CARGO_PKG_VERSION` of the bloatlab that wrote the file.
    pub bloatlab_version: String,
    /// The test name (`rrul`, `tcp_upload`, …).
    pub test: String,
    /// Optional user-supplied title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The command line, one argument per element.
    pub command_line: Vec<String>,
    /// When the run started (RFC 3339 in the file).
    pub start_time: Timestamp,
    /// The run was cut short; `raw` holds what was measured until then.
    #[serde(default)]
    pub interrupted: bool,
    /// The two ends.
    #[serde(default)]
    pub hosts: HostsRecord,
    /// The local kernel.
    #[serde(default)]
    pub kernel: KernelRecord,
    /// Relevant sysctls, name to value as read from `/proc/sys`.
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// Congestion control: default, requested, used per flow.
    #[serde(default)]
    pub congestion_control: CongestionControlRecord,
    /// Queue disciplines on the path that bloatlab knows of (empty: none known).
    #[serde(default)]
    pub qdisc: Vec<QdiscRecord>,
    /// The emulated link of a lab run; `null` outside a lab.
    #[serde(default)]
    pub link: Option<LinkRecord>,
    /// The test plan; `null` for runs without one (`ping`).
    #[serde(default)]
    pub plan: Option<PlanRecord>,
    /// The probe session of `bloatlab ping`; `null` otherwise.
    #[serde(default)]
    pub probe: Option<ProbeSessionRecord>,
    /// A `bloatlab rpm` session (schema::rpm), or the draft's run of `bloatlab test rpm`
    /// (its runs name their test phase); omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<RpmRecord>,
    /// The lab the run went through and what its emulator counted (crate::lab); `None`
    /// outside a lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<crate::lab::LabRecord>,
    /// This host's CPU utilisation during loaded phases: one sample per 500 ms, each the
    /// busy fraction (0..=1) of the whole machine. Empty when not sampled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_utilisation: Vec<f64>,
    /// What the run noted about itself (a flow or probe that failed and why, ...), one
    /// line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Set on a run recovered from its journal that did not reach its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<IncompleteRecord>,
    /// Anything else, for what has no record yet (`flow_failures`, `recovered_from_journal`,
    /// `pulse_durations_ns`, a browser test's page figures, ...).
    #[serde(default)]
    pub extra: FreeForm,
}

/// How far a run recovered from its journal got (`metadata.incomplete`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncompleteRecord {
    /// The phase the run was in when it stopped (`None`: before the first).
    pub phase_reached: Option<String>,
    /// When it stopped, nanoseconds since the start of the run.
    pub reached_ns: u64,
    /// Runners that should have been running by then and left no output.
    #[serde(default)]
    pub runners_missing: Vec<String>,
    /// Why the run did not end.
    pub reason: String,
}

impl Metadata {
    /// The median of [`Metadata::cpu_utilisation`] and its largest sample, as fractions
    /// (0..=1); `None` when there are no samples.
    pub fn cpu_median_max(&self) -> Option<(f64, f64)> {
        let q = |q| bloatlab_stats::quantile::quantile_f64(&self.cpu_utilisation, q).ok();
        Some((q(0.5)?, q(1.0)?))
    }

    /// Metadata with the required fields and nothing else known.
    pub fn new(test: &str, command_line: Vec<String>, start_time: Timestamp) -> Metadata {
        Metadata {
            bloatlab_version: env!("CARGO_PKG_VERSION").to_owned(),
            test: test.to_owned(),
            title: None,
            command_line,
            start_time,
            interrupted: false,
            hosts: HostsRecord::default(),
            kernel: KernelRecord::default(),
            sysctls: BTreeMap::new(),
            congestion_control: CongestionControlRecord::default(),
            qdisc: Vec::new(),
            link: None,
            plan: None,
            probe: None,
            rpm: None,
            lab: None,
            cpu_utilisation: Vec::new(),
            notes: Vec::new(),
            incomplete: None,
            extra: FreeForm::new(),
        }
    }
}

/// The measured samples.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Raw {
    /// Phase boundaries, in time order.
    #[serde(default)]
    pub phases: Vec<PhaseRecord>,
    /// One entry per latency probe series.
    #[serde(default)]
    pub latency: Vec<LatencyRecord>,
    /// One entry per load flow.
    #[serde(default)]
    pub throughput: Vec<FlowRecord>,
}

/// `idle`, `loaded` or `recovery`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKindRecord {
    /// Baseline, no load.
    Idle,
    /// Load running.
    Loaded,
    /// After the load.
    Recovery,
}

/// One phase, `[start_ns, end_ns)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseRecord {
    /// Phase kind.
    pub kind: PhaseKindRecord,
    /// Unique name.
    pub name: String,
    /// Start, ns since the run start (inclusive).
    pub start_ns: u64,
    /// End, ns since the run start (exclusive).
    pub end_ns: u64,
}

/// What a latency series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayKindRecord {
    /// Round-trip time.
    Rtt,
    /// One-way delay, client to server.
    OwdUp,
    /// One-way delay, server to client.
    OwdDown,
}

/// One latency probe series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyRecord {
    /// Series name.
    pub name: String,
    /// What the delays are.
    pub kind: DelayKindRecord,
    /// The probes.
    #[serde(default)]
    pub samples: Vec<ProbeRecord>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// One probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Send time, ns since the run start.
    pub sent_ns: u64,
    /// Delay in ns; `null` if the probe was lost or is `unfinished`.
    pub delay_ns: Option<u64>,
    /// Extra copies received (omitted when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicates: u32,
    /// Arrived out of order (omitted when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub late: bool,
    /// No reply had come when the prober stopped, and the probe's timeout had not passed
    /// (a queue still draining at the end of the run): neither received nor lost, and left
    /// out of loss fractions. `delay_ns` is then `null`. Omitted when false; files written
    /// before this field counted such probes as lost.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unfinished: bool,
}

/// Flow direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectionRecord {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

/// One load flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Flow name.
    pub name: String,
    /// Up or down.
    pub direction: DirectionRecord,
    /// Transfer intervals.
    #[serde(default)]
    pub samples: Vec<TransferRecord>,
    /// TCP_INFO of the flow's two ends; `null` where it was not sampled.
    #[serde(default)]
    pub tcp: FlowTcpRecord,
    /// ECN of this flow: asked for, negotiated, CE marks. Omitted when nothing of it
    /// was known (files written before it existed serialize unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<FlowEcnRecord>,
}

/// ECN of one flow (RFC 3168): whether it asked, what its connection negotiated, and the
/// CE marks it met. Each field is `null` when not known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FlowEcnRecord {
    /// The flow asked for ECN: `test --ecn on` (every flow), `off` (none), `mix` (the
    /// flows given the ECN route). `null` without `--ecn` (the host's setting decided).
    #[serde(default)]
    pub requested: Option<bool>,
    /// ECN was negotiated on every connection of the flow (`TCP_INFO` options, read by
    /// the client).
    #[serde(default)]
    pub negotiated: Option<bool>,
    /// Segments that met a CE mark: the sender's `tcpi_delivered_ce` (an upload's
    /// client, a download's bloatlab server), else the receiver's `tcpi_received_ce`.
    #[serde(default)]
    pub ce_marks: Option<u64>,
}

/// TCP_INFO of both ends of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FlowTcpRecord {
    /// The end that sent the data (the client for up flows, the server for down).
    #[serde(default)]
    pub sender: Option<TcpInfoRecord>,
    /// The end that received it.
    #[serde(default)]
    pub receiver: Option<TcpInfoRecord>,
}

/// What one end's TCP_INFO said over the flow (tcp(7), `struct tcp_info`). Each field
/// is `null` when that end's kernel did not report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TcpInfoRecord {
    /// Segments retransmitted (`tcpi_total_retrans`), over the whole flow.
    #[serde(default)]
    pub retransmits: Option<u64>,
    /// Segments delivered with a CE mark (`tcpi_delivered_ce`, sender side).
    #[serde(default)]
    pub delivered_ce: Option<u64>,
    /// Smallest smoothed RTT seen (`tcpi_rtt`), ns.
    #[serde(default)]
    pub min_rtt_ns: Option<u64>,
    /// Largest smoothed RTT seen, ns.
    #[serde(default)]
    pub max_rtt_ns: Option<u64>,
    // The fields below are omitted when unknown (read back as `null`), so files written
    // before they existed serialize unchanged.
    /// Mean of the smoothed RTT samples (one per throughput interval), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_rtt_ns: Option<u64>,
    /// Segments received with a CE mark (`tcpi_received_ce`, receiver side, Linux 6.18+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_ce: Option<u64>,
    /// Data segments that arrived out of order (`tcpi_rcv_ooopack`, receiver side): loss
    /// as the receiver sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_order_packets: Option<u64>,
    /// The receiver's RTT estimate at the end (`tcpi_rcv_rtt`), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_rtt_ns: Option<u64>,
}

/// Bytes delivered during `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferRecord {
    /// Interval start, ns since the run start.
    pub start_ns: u64,
    /// Interval end, ns since the run start.
    pub end_ns: u64,
    /// Payload bytes.
    pub bytes: u64,
}
