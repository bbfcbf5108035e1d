//! `metadata.rpm`: what a `bloatlab rpm` session measured with the method of
//! draft-ietf-ippm-responsiveness-09 (docs/rpm.md). `bloatlab rpm --json` prints this
//! same record, with `"format": "bloatlab-rpm"` and `"version": 1` in front:
//!
//! ```text
//! {
//!   "config_url": "https://h:8443/.well-known/nq",
//!   "address": "10.77.0.2:8443",            what the test connected to
//!   "protocol": "h2" | "http/1.1",
//!   "tls": "TLSv1.3" | "TLSv1.2" | null,    null: plain HTTP
//!   "mode": "concurrent" | "sequential" | "download" | "upload",
//!   "self_probes": "h2_stream" | "tcp_info_rtt",   how http_l was measured
//!   "parameters": {"mad": 4, "interval_ns": 5000000000, "trim_fraction": 0.05,
//!                  "stdev_tolerance": 0.05, "max_connections": 16,
//!                  "max_probes_per_second": 100, "probe_capacity": 0.05,
//!                  "duration_ns": 60000000000, "stall_timeout_ns": 10000000000},
//!   "idle": {"latency_ns": 81000000, "rpm": 740.7, "samples": 10} | null,
//!   "download": {"run": "concurrent", "capacity_bps": 19100000, "confidence": "High",
//!                "connections": 9, "saturated_at_interval": 3,
//!                "moving_averages_bps": [9800000, 15100000, …]} | null,
//!   "upload": { same } | null,
//!   "responsiveness": [ {
//!     "run": "concurrent" | "download" | "upload",
//!     "start_ns": …, "end_ns": …, "ended": "stable" | "deadline", "intervals": 7,
//!     "rpm": 212.5 | null, "confidence": "Low" | "Medium" | "High",
//!     "band": "Poor" | "Fair" | "Good" | "Excellent" | null,
//!     "p90_rpm": 180.2 | null, "p90_band": … | null,
//!     "foreign_rpm": …, "loaded_rpm": …,            the two halves of rpm
//!     "trimmed": {"tcp_f_ns": …, "tls_f_ns": … | null, "http_f_ns": …, "http_l_ns": …} | null,
//!     "p90":     { same, 90th percentiles } | null,
//!     "samples": {"tcp_f": 120, "tls_f": 120, "http_f": 120, "http_l": 118},
//!     "failed_probes": {"foreign": 0, "self": 0},
//!     "rpm_series": [ {"interval": 3, "end_ns": …, "rpm": 230.1 | null} ],
//!     "phase": "loaded"                       bloatlab test rpm only: the test's phase
//!   } ],
//!   "elapsed_ns": 41230000000
//! }
//! ```
//!
//! Times are ns, rates bit/s, RPM round trips per minute; `null` is "not measured". The
//! probes themselves are in `raw.latency` (series `tcp_f`, `tls_f`, `http_f`, `http_l`)
//! and the load connections in `raw.throughput`.

use serde::{Deserialize, Serialize};

/// A `bloatlab rpm` session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmRecord {
    /// The config URL.
    pub config_url: String,
    /// The address the test connected to.
    pub address: String,
    /// `h2` or `http/1.1`.
    pub protocol: String,
    /// TLS version; `null` for plain HTTP.
    pub tls: Option<String>,
    /// `concurrent`, `sequential`, `download` or `upload`.
    pub mode: String,
    /// `h2_stream` (a GET on the load connection) or `tcp_info_rtt` (HTTP/1.1: the load
    /// connection's TCP RTT estimate).
    pub self_probes: String,
    /// The draft's parameters as run.
    pub parameters: RpmParametersRecord,
    /// Idle latency before the load.
    pub idle: Option<RpmIdleRecord>,
    /// Download capacity.
    pub download: Option<RpmCapacityRecord>,
    /// Upload capacity.
    pub upload: Option<RpmCapacityRecord>,
    /// One entry per run.
    pub responsiveness: Vec<RpmResponsivenessRecord>,
    /// How long the session took, ns.
    pub elapsed_ns: u64,
}

/// The draft's parameters (section 5.2) and the session's limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmParametersRecord {
    /// MAD, intervals.
    pub mad: u64,
    /// ID, ns.
    pub interval_ns: u64,
    /// The fraction of the largest samples the trimmed mean drops (TMP 95 % = 0.05).
    pub trim_fraction: f64,
    /// SDT, a fraction.
    pub stdev_tolerance: f64,
    /// MNP per direction.
    pub max_connections: u64,
    /// MPS.
    pub max_probes_per_second: u64,
    /// PTC, a fraction.
    pub probe_capacity: f64,
    /// Upper bound of the session, ns.
    pub duration_ns: u64,
    /// A load connection moving nothing this long fails the run, ns.
    pub stall_timeout_ns: u64,
}

/// Idle latency: GETs of the small object on one connection before any load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmIdleRecord {
    /// Trimmed mean of the GET times, ns.
    pub latency_ns: u64,
    /// `60000 / latency in ms`.
    pub rpm: Option<f64>,
    /// GETs.
    pub samples: u64,
}

/// The capacity of one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmCapacityRecord {
    /// The run it was measured in.
    pub run: String,
    /// Goodput, bit/s: once saturated, over the intervals after the saturation interval
    /// (at least the last MAD); never saturated, the moving average at the last interval.
    /// Files written before 7 December 2026 hold the moving average at saturation.
    pub capacity_bps: u64,
    /// `Low`, `Medium`, `High` (draft section 5.4.1).
    pub confidence: String,
    /// Load connections opened.
    pub connections: u64,
    /// The interval (from 0) at whose end goodput was declared stable.
    pub saturated_at_interval: Option<u64>,
    /// The moving-average goodput at the end of each interval, bit/s (absent in files
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moving_averages_bps: Vec<u64>,
}

/// Per-kind aggregates, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpmPartsRecord {
    /// `tcp_f`.
    pub tcp_f_ns: u64,
    /// `tls_f`; `null` without TLS.
    pub tls_f_ns: Option<u64>,
    /// `http_f`.
    pub http_f_ns: u64,
    /// `http_l`.
    pub http_l_ns: u64,
}

/// Samples per kind that went into the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[allow(missing_docs)] // The draft's names.
pub struct RpmSamplesRecord {
    pub tcp_f: u64,
    pub tls_f: u64,
    pub http_f: u64,
    pub http_l: u64,
}

/// Failed probes per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RpmFailedRecord {
    /// Foreign probes.
    pub foreign: u64,
    /// Self probes.
    #[serde(rename = "self")]
    pub self_probes: u64,
}

/// Responsiveness at the end of one interval of the responsiveness stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RpmIntervalRecord {
    /// Interval, from 0.
    pub interval: u64,
    /// Its end, ns since the run start.
    pub end_ns: u64,
    /// Trimmed-mean RPM over the last MAD intervals; `null` without probes.
    pub rpm: Option<f64>,
}

/// The responsiveness of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmResponsivenessRecord {
    /// `concurrent`, `download` or `upload`.
    pub run: String,
    /// Run start, ns since the session start.
    pub start_ns: u64,
    /// Run end.
    pub end_ns: u64,
    /// `stable` or `deadline`.
    pub ended: String,
    /// Intervals completed.
    pub intervals: u64,
    /// The draft's responsiveness (trimmed means), RPM.
    pub rpm: Option<f64>,
    /// `Low`, `Medium`, `High`.
    pub confidence: String,
    /// `Poor` (< 300), `Fair` (< 1000), `Good` (< 6000), `Excellent`.
    pub band: Option<String>,
    /// The same formula with 90th percentiles, RPM.
    pub p90_rpm: Option<f64>,
    /// Its band.
    pub p90_band: Option<String>,
    /// `60000 / mean of the foreign parts`.
    pub foreign_rpm: Option<f64>,
    /// `60000 / http_l`.
    pub loaded_rpm: Option<f64>,
    /// Trimmed means.
    pub trimmed: Option<RpmPartsRecord>,
    /// 90th percentiles.
    pub p90: Option<RpmPartsRecord>,
    /// Samples per kind.
    pub samples: RpmSamplesRecord,
    /// Probes that failed (a new connection's handshake or a GET that did not complete),
    /// per kind: `{"foreign": 2, "self": 0}`. The run fails when probes mostly fail.
    #[serde(default)]
    pub failed_probes: RpmFailedRecord,
    /// The responsiveness stage, interval by interval.
    #[serde(default)]
    pub rpm_series: Vec<RpmIntervalRecord>,
    /// `bloatlab test rpm`: the test's phase this run was (`loaded`, or `download` and
    /// `upload` with `--sequential`), whose probe series' `probe_rpm` sits beside this
    /// `rpm` in `derived.latency`. Omitted by `bloatlab rpm` (its phases are named after
    /// the runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}
