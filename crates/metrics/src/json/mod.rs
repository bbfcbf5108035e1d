//! The `--json` document (schema version 1) and the server-side report a
//! bloatlab server sends to a bloatlab client.
//!
//! # Conventions
//! * Units are in the field names: `bytes`, `bits_per_second`, `*_s`
//!   (seconds), `*_ms`, `*_us`, `*_ns`, `packets_per_second`.
//! * Times are offsets from the test start in seconds (`start_s`, `end_s`),
//!   except `test.start_unix_us` (wall clock, microseconds since the UNIX epoch).
//! * Values that do not exist are omitted (`null`-free output): e.g. no
//!   `tcp_info` block without a `TCP_INFO` sample, no `netpwr` when the delay
//!   was zero (iperf 2 prints `NAN`), no latency block without samples.
//! * Every stream has its `intervals` (one per `-i` report, possibly empty)
//!   and a `summary` (the whole test); `sum` holds the same for the sum of
//!   parallel streams. With both ends bloatlab, a stream's `server_side`
//!   carries the [`ServerSideReport`] of that stream.
//! * Versioning: [`SCHEMA_VERSION`] changes only for incompatible changes.
//!   Adding optional fields does not change it, so readers must ignore
//!   fields they do not know. A reader refuses a newer version with
//!   [`SchemaError::UnsupportedVersion`].
//!
//! # Example (abridged)
//! ```json
//! {
//!   "schema_version": 1,
//!   "tool": {"name": "bloatlab", "version": "0.1.0"},
//!   "role": "client", "protocol": "tcp",
//!   "test": {"start_unix_us": 1796205068000000, "clock": "realtime", "interval_s": 1.0,
//!            "duration_s": 3.0, "parallel": 1, "trip_times": true, "reverse": false,
//!            "full_duplex": false, "local": "127.0.0.1:35582", "remote": "127.0.0.1:5103",
//!            "congestion_control": "cubic"},
//!   "streams": [{
//!     "id": 1, "direction": "send",
//!     "intervals": [{"start_s": 0.0, "end_s": 1.0, "bytes": 1473249280,
//!                    "bits_per_second": 11785994240.0,
//!                    "tcp_send": {"writes": 11240, "write_errors": 0, "retransmits": 29,
//!                                 "tcp_info": {"cwnd_bytes": 4845668, "rtt_us": 251, "rttvar_us": 272},
//!                                 "netpwr": 5869519.04}}],
//!     "summary": {"start_s": 0.0, "end_s": 3.0143, "bytes": 5799848189, "...": "..."},
//!     "server_side": {"schema_version": 1, "...": "a ServerSideReport"}
//!   }]
//! }
//! ```
//! A receiving stream's records have `tcp_recv` (reads histogram, and with
//! trip-times `burst_latency` with `latency_ms_mean/min/max/stdev/p50/p90/p99`,
//! `in_progress_bytes`, `netpwr`) or `udp_recv` (`datagrams_total`, `lost`,
//! `loss_percent`, `out_of_order`, `duplicates`, `jitter_ms`,
//! `packets_per_second`, `latency`, `in_progress_packets`, `netpwr`).
//! Summaries carry the full latency `histogram` ([`HistogramRecord`]).

use serde::{Deserialize, Serialize};

mod records;
pub use crate::histogram::{BucketRecord, HistogramRecord};
pub use records::{
    IntervalRecord, LatencyRecord, PeerSenderTcpInfoRecord, RecvTcpInfoRecord, TcpInfoRecord,
    TcpRecvRecord, TcpSendRecord, UdpRecvRecord, UdpSendRecord, reads_bin_range, reads_dist,
};

/// The schema version this crate writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// The largest JSON text [`Document::from_json`] and
/// [`ServerSideReport::from_json`] accept (1 MiB, the BLXR frame limit).
pub const MAX_JSON_LEN: usize = 1 << 20;

pub(crate) fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// The whole `--json` output of one bloatlab client or server run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Always [`SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The program that wrote the document.
    pub tool: ToolInfo,
    /// Which end wrote it.
    pub role: Role,
    /// Transport.
    pub protocol: Protocol,
    /// Test parameters.
    pub test: TestInfo,
    /// One record per stream and direction (a full-duplex stream has two).
    pub streams: Vec<StreamRecord>,
    /// The `[SUM]` of parallel streams (absent with a single stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<SumRecord>,
    /// CPU time the writing program spent on the test, and per GB it moved
    /// (absent when the kernel would not say; issue 24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuRecord>,
    /// On a client: the bloatlab server's CPU time for this test, from its
    /// report frames (BLXR, [`ServerSideReport::cpu`]), over the bytes this
    /// client counted (issue 24). Absent with an iperf 2 peer (its wire
    /// protocol has no place for it), an older bloatlab server, and on tests
    /// where the server sends no report (reverse and full-duplex TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_cpu: Option<CpuRecord>,
}

/// CPU cost of a test at one end: `getrusage(RUSAGE_SELF)` of the program that
/// wrote the document, from before its first connection to its report, all
/// threads. A server running several tests at once counts them all in each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuRecord {
    /// Always `"process"` (the whole program; see the type docs).
    pub scope: String,
    /// Time in our own code, seconds.
    pub user_s: f64,
    /// Time in the kernel on our behalf (system calls: copies, TCP), seconds.
    pub system_s: f64,
    /// Bytes this end sent plus received (payload, all streams).
    pub bytes: u64,
    /// `(user_s + system_s) / (bytes / 1e9)`: CPU seconds per GB (10^9 bytes)
    /// moved; absent when no byte moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s_per_gb: Option<f64>,
}

impl CpuRecord {
    /// The record of `user` and `system` CPU time spent moving `bytes`.
    pub fn new(user: std::time::Duration, system: std::time::Duration, bytes: u64) -> CpuRecord {
        let total = (user + system).as_secs_f64();
        CpuRecord {
            scope: "process".into(),
            user_s: user.as_secs_f64(),
            system_s: system.as_secs_f64(),
            bytes,
            cpu_s_per_gb: (bytes > 0).then(|| total / (bytes as f64 / 1e9)),
        }
    }

    /// The same from seconds a peer sent (clamped to zero when negative or
    /// not a number, which [`CpuRecord::validate`] refuses anyway).
    pub fn from_seconds(user_s: f64, system_s: f64, bytes: u64) -> CpuRecord {
        let d = |s: f64| std::time::Duration::try_from_secs_f64(s).unwrap_or_default();
        CpuRecord::new(d(user_s), d(system_s), bytes)
    }

    /// User plus system seconds.
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    /// Both ends' CPU seconds per GB: `(self + peer) / (bytes / 1e9)`, over
    /// this end's bytes (the peer's record covers the same test). Absent
    /// when no byte moved.
    pub fn combined_s_per_gb(&self, peer: &CpuRecord) -> Option<f64> {
        (self.bytes > 0).then(|| (self.total_s() + peer.total_s()) / (self.bytes as f64 / 1e9))
    }

    /// The `-e` line of the peer's record and the two ends together:
    /// `[CPU] server 0.80 s (user 0.05, sys 0.75): 0.064 CPU-s/GB; client+server 0.150 CPU-s/GB`.
    pub fn peer_console_line(&self, own: &CpuRecord) -> String {
        let fmt = |v: Option<f64>| v.map_or("-".to_owned(), |p| format!("{p:.3}"));
        format!(
            "[CPU] server {:.2} s (user {:.2}, sys {:.2}): {} CPU-s/GB; client+server {} CPU-s/GB",
            self.total_s(),
            self.user_s,
            self.system_s,
            fmt(self.cpu_s_per_gb),
            fmt(own.combined_s_per_gb(self)),
        )
    }

    /// Refuses impossible values from a peer: times and the ratio must be
    /// finite and non-negative.
    pub(crate) fn validate(&self, at: &str) -> Result<(), SchemaError> {
        for (name, v) in [
            ("user_s", Some(self.user_s)),
            ("system_s", Some(self.system_s)),
            ("cpu_s_per_gb", self.cpu_s_per_gb),
        ] {
            if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
                return Err(SchemaError::Invalid {
                    field: format!("{at}.{name}"),
                    reason: "must be a finite non-negative number".into(),
                });
            }
        }
        Ok(())
    }

    /// The `-e` line: `[CPU] 1.23 s (user 0.10, sys 1.13) for 12.50 GB: 0.098 CPU-s/GB (process)`.
    pub fn console_line(&self) -> String {
        let per = self
            .cpu_s_per_gb
            .map_or("-".to_owned(), |p| format!("{p:.3}"));
        format!(
            "[CPU] {:.2} s (user {:.2}, sys {:.2}) for {:.2} GB: {per} CPU-s/GB (process)",
            self.user_s + self.system_s,
            self.user_s,
            self.system_s,
            self.bytes as f64 / 1e9
        )
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn cpu_per_gb_is_total_cpu_over_gigabytes() {
        let r = CpuRecord::new(
            Duration::from_millis(250),
            Duration::from_millis(750),
            4_000_000_000,
        );
        assert_eq!(r.cpu_s_per_gb, Some(0.25));
        assert_eq!(
            r.console_line(),
            "[CPU] 1.00 s (user 0.25, sys 0.75) for 4.00 GB: 0.250 CPU-s/GB (process)"
        );
        let none = CpuRecord::new(Duration::from_millis(5), Duration::ZERO, 0);
        assert_eq!(none.cpu_s_per_gb, None, "no bytes, no ratio (not infinity)");
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"cpu_s_per_gb\":0.25"), "{text}");
        assert_eq!(serde_json::from_str::<CpuRecord>(&text).unwrap(), r);
    }

    #[test]
    fn client_plus_server_cpu_per_gb_adds_both_over_the_clients_bytes() {
        let own = CpuRecord::new(
            Duration::from_millis(500),
            Duration::from_millis(500),
            4_000_000_000,
        );
        // The server counted its own bytes (one stream of several): ignored.
        let peer = CpuRecord::from_seconds(0.25, 0.75, 1_000_000_000);
        assert_eq!(peer.cpu_s_per_gb, Some(1.0));
        assert_eq!(own.combined_s_per_gb(&peer), Some(0.5));
        assert_eq!(
            peer.peer_console_line(&own),
            "[CPU] server 1.00 s (user 0.25, sys 0.75): 1.000 CPU-s/GB; client+server 0.500 CPU-s/GB"
        );
        let idle = CpuRecord::new(Duration::ZERO, Duration::ZERO, 0);
        assert_eq!(idle.combined_s_per_gb(&peer), None);
        assert_eq!(CpuRecord::from_seconds(f64::NAN, -1.0, 1).total_s(), 0.0);
    }

    #[test]
    fn a_peers_impossible_cpu_values_are_refused() {
        let mut r = CpuRecord::from_seconds(0.5, 0.5, 1_000_000_000);
        assert!(r.validate("cpu").is_ok());
        r.system_s = f64::INFINITY;
        assert!(r.validate("cpu").is_err());
        r.system_s = 0.5;
        r.cpu_s_per_gb = Some(-1.0);
        let err = r.validate("cpu").unwrap_err().to_string();
        assert!(err.contains("cpu.cpu_s_per_gb"), "{err}");
    }
}

/// Program name and version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// `"bloatlab"`.
    pub name: String,
    /// Its version.
    pub version: String,
}

impl Default for ToolInfo {
    fn default() -> ToolInfo {
        ToolInfo {
            name: "bloatlab".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// Which end wrote a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `bloatlab client`.
    Client,
    /// `bloatlab server`.
    Server,
}

/// Transport protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// Data direction of a stream, seen from the document's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// This end sent the data.
    Send,
    /// This end received the data.
    Receive,
}

/// Test parameters. All optional fields are omitted when not applicable.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TestInfo {
    /// Wall-clock start of the test, microseconds since the UNIX epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_us: Option<u64>,
    /// Clock used for one-way delays: `"realtime"` (CLOCK_REALTIME on both
    /// hosts, like iperf 2; needs NTP/PTP across hosts) or `"monotonic"`
    /// (same-host lab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// Report interval (`-i`), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// Requested duration (`-t`), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Requested amount (`-n`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_bytes: Option<u64>,
    /// Write/read length (`-l`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_bytes: Option<u64>,
    /// UDP/TCP target rate (`-b`), bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_bits_per_second: Option<u64>,
    /// Number of parallel streams (`-P`).
    #[serde(default)]
    pub parallel: u32,
    /// `--trip-times`.
    #[serde(default)]
    pub trip_times: bool,
    /// `-R` / `--reverse`.
    #[serde(default)]
    pub reverse: bool,
    /// `--full-duplex`.
    #[serde(default)]
    pub full_duplex: bool,
    /// `--near-congestion` weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_congestion_weight: Option<f64>,
    /// TCP congestion control in use (`-Z` or the system default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
    /// Local address of the first stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// Remote address of the first stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The peer's version, when it announced one (`2.1.8`, `bloatlab 0.1.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_version: Option<String>,
    /// The peer program and version when it is bloatlab (`bloatlab 0.1.0`, from its
    /// hello or its report); absent for an iperf 2 peer or when it said nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_software: Option<String>,
}

/// One stream in one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamRecord {
    /// iperf 2's transfer id (the `1` of `[  1]`).
    pub id: u32,
    /// Direction seen from this end.
    pub direction: Direction,
    /// Local address, if different streams use different ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// Remote address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Interval records in time order.
    #[serde(default)]
    pub intervals: Vec<IntervalRecord>,
    /// The whole-test record.
    pub summary: IntervalRecord,
    /// The peer's measurements of this stream (both ends bloatlab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side: Option<ServerSideReport>,
    /// TCP congestion control of this stream's *sender*, read back from its
    /// socket (`TCP_CONGESTION`): this end's for a `send` record; for a
    /// `receive` record on a client, the bloatlab server's, from its
    /// [`SenderHello`]. Absent when unknown (e.g. an iperf 2 server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_congestion_control: Option<String>,
    /// On a client's `receive` record: the bloatlab server's sending socket's
    /// final `TCP_INFO` (retransmits, RTT, CE marks), from the flow query.
    /// Absent when not measured (an iperf 2 or older bloatlab server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_sender_tcp_info: Option<PeerSenderTcpInfoRecord>,
    /// Whether ECN was negotiated on this stream's connection (`TCP_INFO`
    /// `tcpi_options`, read on this end; TCP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_negotiated: Option<bool>,
}

/// The `[SUM]` of parallel streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SumRecord {
    /// Direction seen from this end.
    pub direction: Direction,
    /// Number of streams summed.
    pub streams: u32,
    /// Interval sums.
    #[serde(default)]
    pub intervals: Vec<IntervalRecord>,
    /// Whole-test sum.
    pub summary: IntervalRecord,
}

/// What a bloatlab server measured on one stream, sent to a bloatlab client
/// at the end of the test as JSON inside the wire crate's `BLXR` frame.
///
/// It carries the receiver-side records of the stream: `tcp_recv` (reads
/// histogram, burst latency statistics and distribution, inP, NetPwr) or
/// `udp_recv` (loss, jitter, latency and its distribution, PPS).
///
/// ```
/// use bloatlab_metrics::json::ServerSideReport;
/// let text = r#"{"schema_version":1,"server_version":"bloatlab 0.1.0","stream_id":1,
///   "intervals":[],"summary":{"start_s":0.0,"end_s":1.0,"bytes":1000,"bits_per_second":8000.0}}"#;
/// let r = ServerSideReport::from_json(text.as_bytes()).unwrap();
/// assert_eq!(r.summary.bytes, 1000);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSideReport {
    /// Always [`SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The server program and version, e.g. `"bloatlab 0.1.0"`.
    pub server_version: String,
    /// The stream's transfer id on the server.
    pub stream_id: u32,
    /// The server's interval records.
    #[serde(default)]
    pub intervals: Vec<IntervalRecord>,
    /// The server's whole-test record.
    pub summary: IntervalRecord,
    /// The server process's CPU time from this stream's start to its report,
    /// all threads (so with `-P` each stream's record also counts the others',
    /// and a server running other tests counts those too); `bytes` are this
    /// stream's. Absent from older servers (issue 24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuRecord>,
}

impl ServerSideReport {
    /// A report from the server's records.
    pub fn new(
        stream_id: u32,
        intervals: Vec<IntervalRecord>,
        summary: IntervalRecord,
    ) -> ServerSideReport {
        ServerSideReport {
            schema_version: SCHEMA_VERSION,
            server_version: format!("bloatlab {}", env!("CARGO_PKG_VERSION")),
            stream_id,
            intervals,
            summary,
            cpu: None,
        }
    }

    /// The same report carrying the server's CPU time (see [`ServerSideReport::cpu`]).
    pub fn with_cpu(mut self, cpu: Option<CpuRecord>) -> ServerSideReport {
        self.cpu = cpu;
        self
    }

    /// Serialize to JSON bytes (the BLXR frame payload).
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing these plain structs cannot fail (no maps with non-string
        // keys, no non-finite floats: they are filtered at construction).
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parse and validate JSON from a peer. Never panics; rejects oversized
    /// input, unknown (newer) schema versions and inconsistent content.
    pub fn from_json(bytes: &[u8]) -> Result<ServerSideReport, SchemaError> {
        check_version(bytes)?;
        let r: ServerSideReport = serde_json::from_slice(bytes).map_err(SchemaError::Json)?;
        r.validate()?;
        Ok(r)
    }

    fn validate(&self) -> Result<(), SchemaError> {
        for (i, rec) in self.intervals.iter().enumerate() {
            rec.validate(&format!("intervals[{i}]"))?;
        }
        self.summary.validate("summary")?;
        match &self.cpu {
            Some(c) => c.validate("cpu"),
            None => Ok(()),
        }
    }
}

/// What a bloatlab server's sending socket really uses, sent before its data
/// on a reverse or full-duplex TCP test when the client asked for it
/// (wire extension block, `HELLO` flag; docs/wire.md), as JSON in a BLXR frame.
///
/// ```
/// use bloatlab_metrics::json::SenderHello;
/// let h = SenderHello::new(Some("cubic".into()), Some(16384));
/// let back = SenderHello::from_json(&h.to_json()).unwrap();
/// assert_eq!(back.congestion_control.as_deref(), Some("cubic"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderHello {
    /// Always [`SCHEMA_VERSION`] when written by this crate.
    pub schema_version: u32,
    /// The server program and version, e.g. `"bloatlab 0.1.0"`.
    pub server_version: String,
    /// `TCP_CONGESTION` read back from the server's sending socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
    /// `TCP_NOTSENT_LOWAT` read back from the server's sending socket, bytes
    /// (absent when not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_lowat_bytes: Option<u64>,
    /// The server keeps this flow's final sender `TCP_INFO` under the flow id
    /// the client sent, for a flow query (docs/wire.md). Absent = false (an
    /// older server, which must not be queried).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flow_recorded: bool,
}

impl SenderHello {
    /// A hello from this build.
    pub fn new(congestion_control: Option<String>, notsent_lowat_bytes: Option<u64>) -> Self {
        SenderHello {
            schema_version: SCHEMA_VERSION,
            server_version: format!("bloatlab {}", env!("CARGO_PKG_VERSION")),
            congestion_control,
            notsent_lowat_bytes,
            flow_recorded: false,
        }
    }

    /// JSON bytes (the BLXR frame payload).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a peer's hello; never panics, rejects oversized input and newer versions.
    pub fn from_json(bytes: &[u8]) -> Result<SenderHello, SchemaError> {
        check_version(bytes)?;
        let h: SenderHello = serde_json::from_slice(bytes).map_err(SchemaError::Json)?;
        // What the peer's kernel reported, checked by the rule every name obeys.
        if let Some(cc) = &h.congestion_control
            && bloatlab_units::CongestionControl::new(cc).is_err()
        {
            return Err(SchemaError::Invalid {
                field: "congestion_control".into(),
                reason: "not a congestion control name".into(),
            });
        }
        Ok(h)
    }
}

impl Document {
    /// An empty document for `role`/`protocol` with the current version and tool info.
    pub fn new(role: Role, protocol: Protocol, test: TestInfo) -> Document {
        Document {
            schema_version: SCHEMA_VERSION,
            tool: ToolInfo::default(),
            role,
            protocol,
            test,
            streams: Vec::new(),
            sum: None,
            cpu: None,
            peer_cpu: None,
        }
    }

    /// Pretty-printed JSON text.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Parse and validate a document (e.g. a saved `--json` output).
    pub fn from_json(text: &str) -> Result<Document, SchemaError> {
        check_version(text.as_bytes())?;
        let d: Document = serde_json::from_str(text).map_err(SchemaError::Json)?;
        for (s, st) in d.streams.iter().enumerate() {
            for (i, rec) in st.intervals.iter().enumerate() {
                rec.validate(&format!("streams[{s}].intervals[{i}]"))?;
            }
            st.summary.validate(&format!("streams[{s}].summary"))?;
            if let Some(ss) = &st.server_side {
                ss.validate()?;
            }
        }
        if let Some(sum) = &d.sum {
            for (i, rec) in sum.intervals.iter().enumerate() {
                rec.validate(&format!("sum.intervals[{i}]"))?;
            }
            sum.summary.validate("sum.summary")?;
        }
        Ok(d)
    }
}

#[derive(Deserialize)]
struct VersionProbe {
    schema_version: Option<serde_json::Value>,
}

fn check_version(bytes: &[u8]) -> Result<(), SchemaError> {
    if bytes.len() > MAX_JSON_LEN {
        return Err(SchemaError::TooLarge {
            len: bytes.len(),
            max: MAX_JSON_LEN,
        });
    }
    let probe: VersionProbe = serde_json::from_slice(bytes).map_err(SchemaError::Json)?;
    let v = probe.schema_version.ok_or(SchemaError::MissingVersion)?;
    match v.as_u64() {
        Some(found) if found == u64::from(SCHEMA_VERSION) => Ok(()),
        Some(found) => Err(SchemaError::UnsupportedVersion {
            found,
            supported: SCHEMA_VERSION,
        }),
        None => Err(SchemaError::Invalid {
            field: "schema_version".into(),
            reason: format!("must be a non-negative integer, got {v}"),
        }),
    }
}

/// Why a JSON document or server report was rejected.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// No `schema_version` field.
    #[error("missing schema_version field")]
    MissingVersion,
    /// Written by a newer (or unknown) schema.
    #[error(
        "schema_version {found} is not supported (this bloatlab reads version {supported}); upgrade bloatlab to read it"
    )]
    UnsupportedVersion {
        /// The version in the input.
        found: u64,
        /// The version this build reads.
        supported: u32,
    },
    /// Larger than [`MAX_JSON_LEN`].
    #[error("JSON of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Input length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A field has an impossible value.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// Path of the field, e.g. `summary.tcp_recv.burst_latency.histogram`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}
