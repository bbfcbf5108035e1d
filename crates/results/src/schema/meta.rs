//! Typed metadata records (schema version 2): who talked to whom, on which kernel,
//! through which link and queue, with which plan and congestion control.
//!
//! Rule for every field: a value that was not measured or is not known is `None`,
//! written as JSON `null`, never `0` or `""`. Readers must ignore fields they do not
//! know, and writers may add optional fields without a version bump (an older reader
//! ignores them, a newer reader defaults them to `None`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::DirectionRecord;

/// The two ends of a test. `local` is the host that ran the command (the client),
/// `remote` the host it tested against (the server, probe responder or echo host).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostsRecord {
    /// This host.
    #[serde(default)]
    pub local: HostRecord,
    /// The far end.
    #[serde(default)]
    pub remote: HostRecord,
}

/// What a host did in the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostRole {
    /// Ran `bloatlab test`, `client` or `ping`.
    Client,
    /// A traffic server (`bloatlab server` or iperf 2 `-s`).
    Server,
    /// Answered UDP latency probes only (`bloatlab ping` against a responder).
    ProbeResponder,
    /// Answered ICMP echo requests (`bloatlab ping --icmp`).
    IcmpEcho,
}

/// One end of a test.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostRecord {
    /// IP address as used for the test (`10.77.0.2`, `::1`).
    #[serde(default)]
    pub address: Option<String>,
    /// Host name: as given on the command line for the remote end, the kernel's
    /// node name for the local end.
    #[serde(default)]
    pub name: Option<String>,
    /// TCP/UDP port of the remote end's service.
    #[serde(default)]
    pub port: Option<u16>,
    /// What the host did.
    #[serde(default)]
    pub role: Option<HostRole>,
    /// The traffic software and its version as it announced itself
    /// (`bloatlab 0.1.0`, `iperf 2.1.8`); `None` when it did not say.
    #[serde(default)]
    pub software: Option<String>,
}

impl HostRecord {
    /// `address`, else `name`: what to call the host in a legend or a table.
    pub fn label(&self) -> Option<&str> {
        self.address.as_deref().or(self.name.as_deref())
    }
}

/// `uname(2)` of the local host.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KernelRecord {
    /// `Linux`.
    #[serde(default)]
    pub sysname: Option<String>,
    /// `6.18.0-1-amd64`.
    #[serde(default)]
    pub release: Option<String>,
    /// The build string (`#1 SMP PREEMPT_DYNAMIC Debian 6.18.1-1 ...`).
    #[serde(default)]
    pub version: Option<String>,
    /// `x86_64`.
    #[serde(default)]
    pub machine: Option<String>,
}

impl KernelRecord {
    /// Nothing is known.
    pub fn is_empty(&self) -> bool {
        *self == KernelRecord::default()
    }
}

/// A queue discipline and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QdiscRecord {
    /// `fifo`, `codel`, `fq_codel`, `cake`, `tbf`, ...
    pub kind: String,
    /// The interface it sits on, when it is a kernel qdisc (`bl-veth0`); `None` for
    /// a stage of bloatlab's emulator.
    #[serde(default)]
    pub interface: Option<String>,
    /// Parameters as `name -> value` in tc's spelling (`target -> 5ms`, `ecn -> on`).
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
}

/// The emulated link of a lab run; `metadata.link` is `null` outside a lab.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkRecord {
    /// The lab's name (`bloatlab lab up NAME`).
    #[serde(default)]
    pub lab: Option<String>,
    /// `userspace` or `kernel`.
    #[serde(default)]
    pub backend: Option<String>,
    /// Client side to server side.
    #[serde(default)]
    pub up: LinkDirectionRecord,
    /// Server side to client side.
    #[serde(default)]
    pub down: LinkDirectionRecord,
}

/// One direction of an emulated link. `None` = not limited / the default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkDirectionRecord {
    /// Bottleneck rate, bit/s.
    #[serde(default)]
    pub rate_bps: Option<u64>,
    /// One-way propagation delay, ns.
    #[serde(default)]
    pub delay_ns: Option<u64>,
    /// Delay jitter, ns.
    #[serde(default)]
    pub jitter_ns: Option<u64>,
    /// Random loss, fraction 0..=1.
    #[serde(default)]
    pub loss_fraction: Option<f64>,
    /// Queue limit in packets.
    #[serde(default)]
    pub limit_packets: Option<u64>,
    /// Queue limit in bytes.
    #[serde(default)]
    pub limit_bytes: Option<u64>,
    /// Per-packet overhead added for the rate calculation, bytes (may be negative).
    #[serde(default)]
    pub overhead_bytes: Option<i64>,
    /// The queue discipline of this direction.
    #[serde(default)]
    pub qdisc: Option<QdiscRecord>,
    /// Minimum packet unit for the rate calculation, bytes (tc-cake `mpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpu_bytes: Option<u64>,
    /// Link-layer cell framing for the rate calculation: `atm` or `ptm` (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing: Option<String>,
    /// A chained direction (`lab up --stage`): its stages in the order packets cross
    /// them. Then `rate_bps`, the limits, `overhead_bytes`, `mpu_bytes`, `framing` and
    /// `qdisc` above are the bottleneck stage's (the one with the lowest rate) and
    /// `delay_ns` the whole chain's. Empty: a single link. Added after version 2 without
    /// a version bump: an older reader ignores it and still sees the bottleneck.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageRecord>,
}

/// One stage of a chained direction, as configured.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StageRecord {
    /// The stage's name (`router`, `modem`; `path` for the direction's own delay/loss).
    pub name: String,
    /// The stage's words as given to `--stage` (absent for `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// Rate, bit/s (`None`: unlimited).
    #[serde(default)]
    pub rate_bps: Option<u64>,
    /// One-way delay added by the stage, ns.
    #[serde(default)]
    pub delay_ns: Option<u64>,
    /// Queue limit in packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u64>,
    /// Queue limit in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// Per-packet overhead for the rate calculation, bytes (may be negative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_bytes: Option<i64>,
    /// Minimum packet unit, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpu_bytes: Option<u64>,
    /// `atm` or `ptm` (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing: Option<String>,
    /// The stage's queue discipline (`kind` only: its parameters are in `spec`).
    pub qdisc: String,
}

/// How a probe stream measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeModeRecord {
    /// UDP probes to a bloatlab responder: RTT and both one-way delays.
    Udp,
    /// ICMP echo: RTT only.
    Icmp,
}

/// The test plan: what was asked for, before anything ran.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlanRecord {
    /// Idle time before the load, ns.
    pub idle_before_ns: u64,
    /// Length of each loaded phase, ns.
    pub loaded_ns: u64,
    /// Idle time after the load, ns.
    pub idle_after_ns: u64,
    /// Time between probes of each probe stream, ns.
    pub probe_interval_ns: u64,
    /// Throughput sampling interval of the load flows, ns.
    pub sample_interval_ns: u64,
    /// The load flows.
    #[serde(default)]
    pub flows: Vec<PlanFlowRecord>,
    /// The probe streams.
    #[serde(default)]
    pub probes: Vec<PlanProbeRecord>,
}

/// One planned load flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFlowRecord {
    /// Flow name (matches `raw.throughput[].name`).
    pub name: String,
    /// Up (the client sends) or down (the server sends).
    pub direction: DirectionRecord,
    /// Planned start, ns since the run start.
    pub start_ns: u64,
    /// Planned stop, ns since the run start.
    pub stop_ns: u64,
    /// IP TOS byte of its packets (DSCP = `tos >> 2`); `None` = unmarked.
    #[serde(default)]
    pub tos: Option<u8>,
    /// Congestion control asked for (`--cc`); `None` = the sender's default.
    #[serde(default)]
    pub congestion_control: Option<String>,
    /// Sequential transfers instead of one: `{bytes, count}`.
    #[serde(default)]
    pub pulses: Option<PulsesRecord>,
    /// IP family the flow used, when known (a mixed test such as `rrul46` fixes one per
    /// flow; otherwise known when the server was given as an address). Omitted when
    /// unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<IpFamilyRecord>,
    /// The server address the flow went to, when known. Omitted when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// The IP family of a flow or probe stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpFamilyRecord {
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
}

impl IpFamilyRecord {
    /// `IPv4` / `IPv6`, as people write them.
    pub fn label(self) -> &'static str {
        match self {
            IpFamilyRecord::Ipv4 => "IPv4",
            IpFamilyRecord::Ipv6 => "IPv6",
        }
    }
}

/// Sequential transfers of a pulse flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PulsesRecord {
    /// Bytes per transfer.
    pub bytes: u64,
    /// How many.
    pub count: u32,
}

/// One planned probe stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanProbeRecord {
    /// Series name (matches `raw.latency[].name`).
    pub name: String,
    /// UDP or ICMP.
    pub mode: ProbeModeRecord,
    /// Planned start, ns since the run start.
    pub start_ns: u64,
    /// Planned stop, ns since the run start.
    pub stop_ns: u64,
    /// Time between probes, ns.
    pub interval_ns: u64,
    /// IP TOS byte; `None` = unmarked.
    #[serde(default)]
    pub tos: Option<u8>,
    /// Datagram size, bytes; `None` = the prober's default.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Assessed as a VoIP stream (E-model).
    #[serde(default)]
    pub voip: bool,
    /// IP family, when known (as for flows). Omitted when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<IpFamilyRecord>,
    /// The server address probed, when known. Omitted when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// Which end of a flow sends its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowEnd {
    /// The local host (the client): upload flows.
    Local,
    /// The remote host (the server): download flows.
    Remote,
}

/// Congestion control: the host default, what was asked for, what each sender used.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CongestionControlRecord {
    /// The local host's default (`net.ipv4.tcp_congestion_control`).
    #[serde(default)]
    pub default: Option<String>,
    /// As given to `--cc` (comma-separated when it cycles over flows); `None` = not asked.
    #[serde(default)]
    pub requested: Option<String>,
    /// Per load flow.
    #[serde(default)]
    pub per_flow: Vec<FlowCongestionControl>,
}

/// One flow's congestion control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowCongestionControl {
    /// Flow name (matches `raw.throughput[].name`).
    pub flow: String,
    /// The end that sends the flow's data, whose congestion control matters.
    pub sender: FlowEnd,
    /// Asked for this flow; `None` = the sender's default.
    #[serde(default)]
    pub requested: Option<String>,
    /// Read back from the sending socket (`TCP_CONGESTION`); `None` = not known.
    #[serde(default)]
    pub used: Option<String>,
}
