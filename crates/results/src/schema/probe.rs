//! `metadata.probe`: the settings and the session summary of `bloatlab ping` (which a
//! test suite also reads, for the prober's own lateness). Delays are signed ns:
//! one-way delays computed with an estimated clock offset can be slightly negative.

use serde::{Deserialize, Serialize};

use super::meta::ProbeModeRecord;

/// A probe session as `bloatlab ping --json` ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSessionRecord {
    /// UDP or ICMP.
    pub mode: ProbeModeRecord,
    /// Time between probes, ns.
    pub interval_ns: u64,
    /// Datagram size, bytes.
    pub size_bytes: u64,
    /// IP TOS byte; `None` = unmarked.
    #[serde(default)]
    pub tos: Option<u8>,
    /// Wait for a reply before counting a probe lost, ns.
    pub timeout_ns: u64,
    /// How one-way delays were computed.
    pub clock: ClockRecord,
    /// Counters and delay statistics of the whole session.
    pub summary: ProbeSummaryRecord,
    /// The lost probes and where they were lost.
    #[serde(default)]
    pub lost: Vec<LostProbeRecord>,
    /// One-way delays below zero written as 0 in `raw` (estimated clock offset).
    #[serde(default)]
    pub negative_owd_clamped: u64,
}

/// How the responder's clock relates to ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockMethod {
    /// Same kernel clock (loopback, namespaces of one host): one-way delays exact.
    Shared,
    /// Offset and drift estimated from minimum-delay samples.
    Estimated,
    /// No responder timestamps (ICMP).
    Unknown,
}

/// The clock estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockRecord {
    /// How it was obtained.
    pub method: ClockMethod,
    /// Same as `method == shared` (kept for readers of version 1 files).
    pub shared: bool,
    /// Responder minus client, ns.
    pub offset_ns: i64,
    /// Responder seconds gained per client second, parts per million.
    pub drift_ppm: f64,
    /// Samples the fit used.
    pub samples_used: u64,
}

/// Session counters and statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // Counter names as printed by `bloatlab ping`.
pub struct ProbeSummaryRecord {
    pub sent: u64,
    pub received: u64,
    pub lost_up: u64,
    pub lost_down: u64,
    pub lost_unknown: u64,
    pub duplicates: u64,
    pub late: u64,
    /// Unanswered when the prober stopped, before their timeout (neither received nor
    /// lost); 0 in files written before this field.
    #[serde(default)]
    pub unfinished: u64,
    /// Send slots skipped because the prober woke up late.
    pub skipped_slots: u64,
    /// Requests the responder said it had received; `None` for ICMP.
    #[serde(default)]
    pub server_rx_count: Option<u64>,
    #[serde(default)]
    pub rtt: Option<SignedDelayStats>,
    #[serde(default)]
    pub owd_up: Option<SignedDelayStats>,
    #[serde(default)]
    pub owd_down: Option<SignedDelayStats>,
    #[serde(default)]
    pub ipdv_rtt: Option<IpdvRecord>,
    #[serde(default)]
    pub ipdv_up: Option<IpdvRecord>,
    #[serde(default)]
    pub ipdv_down: Option<IpdvRecord>,
}

/// A delay distribution in signed ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names say it all.
pub struct SignedDelayStats {
    pub count: u64,
    pub min_ns: i64,
    pub p10_ns: i64,
    pub median_ns: i64,
    pub mean_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub max_ns: i64,
}

/// Inter-packet delay variation, RFC 3393: |D(i+1) - D(i)| over consecutive pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names say it all.
pub struct IpdvRecord {
    pub pairs: u64,
    pub mean_abs_ns: u64,
    pub median_abs_ns: u64,
    pub max_abs_ns: u64,
}

/// Where a lost probe was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossDirectionRecord {
    /// The responder never received it.
    Up,
    /// The reply was lost.
    Down,
    /// Not known.
    Unknown,
}

/// One lost probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostProbeRecord {
    /// Sequence number.
    pub seq: u64,
    /// Where.
    pub direction: LossDirectionRecord,
}
