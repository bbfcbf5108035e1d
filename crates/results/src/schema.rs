//! The current (version 1) schema of a bloatlab results file.
//!
//! ```text
//! {
//!   "format": "bloatlab-results",          constant, identifies the file
//!   "version": 1,                          schema version, see crate::migrate
//!   "metadata": {
//!     "bloatlab_version": "0.1.0",
//!     "test": "rrul",                      test name
//!     "title": "…",                        optional, free text
//!     "command_line": ["bloatlab", "test", "rrul", "10.0.0.2"],
//!     "start_time": "2026-12-02T11:00:00Z",  RFC 3339
//!     "interrupted": false,                true if the run was cut short (Ctrl-C)
//!     "hosts":              { free-form },   e.g. {"local": {...}, "remote": {...}}
//!     "kernel":             { free-form },   e.g. {"release": "6.18.0", ...}
//!     "sysctls":            { "net.ipv4.tcp_ecn": "1", ... }   strings
//!     "congestion_control": { free-form },   e.g. per flow
//!     "qdisc":              { free-form },
//!     "link":               { free-form },   rate, delay, buffer of a lab link
//!     "lab":                { ... },         optional: the lab's view of the run (crate::lab)
//!     "extra":              { free-form }
//!   },
//!   "raw": {                               what was measured; never rewritten
//!     "phases": [ {"kind": "idle"|"loaded"|"recovery", "name": "idle",
//!                  "start_ns": 0, "end_ns": 5000000000}, ... ],
//!     "latency": [ {"name": "udp_ef", "kind": "rtt"|"owd_up"|"owd_down",
//!                   "samples": [ {"sent_ns": 12, "delay_ns": 20000000},
//!                                {"sent_ns": 22, "delay_ns": null},        lost
//!                                {"sent_ns": 32, "delay_ns": 5, "duplicates": 1, "late": true} ] } ],
//!     "throughput": [ {"name": "tcp_up_be", "direction": "up"|"down",
//!                      "samples": [ {"start_ns": 0, "end_ns": 200000000, "bytes": 123456} ] } ]
//!   },
//!   "derived": { ... } | null             numbers computed from "raw" (crate::derived);
//!                                          informational, recomputable, never read back
//! }
//! ```
//!
//! All times are integer nanoseconds since the start of the run (`*_ns`), byte counts are
//! integers, rates are bits per second (`*_bps`). Unknown fields are ignored when reading.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::derived::Derived;

/// The value of the `format` field.
pub const FORMAT: &str = "bloatlab-results";

/// The schema version this build writes (and the newest it reads).
pub const CURRENT_VERSION: u32 = 1;

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

    /// Recomputes the `derived` section from `raw` (see [`Derived::compute`]).
    pub fn with_derived(mut self) -> Result<ResultsFile, crate::RawError> {
        self.derived = Some(Derived::compute(&self.raw)?);
        Ok(self)
    }
}

/// A free-form map of settings (JSON values keyed by name).
pub type FreeForm = BTreeMap<String, Value>;

/// Run metadata. Free-form maps hold whatever the drivers could collect; absent maps
/// read as empty.
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
    /// Hosts involved (addresses, names, roles).
    #[serde(default)]
    pub hosts: FreeForm,
    /// Kernel name, release, version.
    #[serde(default)]
    pub kernel: FreeForm,
    /// Relevant sysctls, name to value as read from `/proc/sys`.
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// Congestion control in use (default and per flow).
    #[serde(default)]
    pub congestion_control: FreeForm,
    /// Queue disciplines and their parameters.
    #[serde(default)]
    pub qdisc: FreeForm,
    /// Link settings (rate, delay, buffer, offloads).
    #[serde(default)]
    pub link: FreeForm,
    /// The lab the run went through and what its emulator counted (crate::lab); `None`
    /// outside a lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<crate::lab::LabRecord>,
    /// Anything else.
    #[serde(default)]
    pub extra: FreeForm,
}

impl Metadata {
    /// Metadata with the required fields and empty maps.
    pub fn new(test: &str, command_line: Vec<String>, start_time: Timestamp) -> Metadata {
        Metadata {
            bloatlab_version: env!("CARGO_PKG_VERSION").to_owned(),
            test: test.to_owned(),
            title: None,
            command_line,
            start_time,
            interrupted: false,
            hosts: FreeForm::new(),
            kernel: FreeForm::new(),
            sysctls: BTreeMap::new(),
            congestion_control: FreeForm::new(),
            qdisc: FreeForm::new(),
            link: FreeForm::new(),
            lab: None,
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
    /// Delay in ns; `null` if the probe was lost.
    pub delay_ns: Option<u64>,
    /// Extra copies received (omitted when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicates: u32,
    /// Arrived out of order (omitted when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub late: bool,
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
