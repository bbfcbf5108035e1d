//! Per-span records of the JSON document: what one report line carries,
//! built from the accumulators' snapshots, plus their validation on load.

use super::{SchemaError, finite};
use crate::histogram::{HistogramError, HistogramRecord, LatencyHistogram};
use crate::reads::{READ_BINS, ReadsDist};
use crate::tcp_recv::TcpRecvSnapshot;
use crate::tcp_send::TcpSendSnapshot;
use crate::udp_recv::UdpRecvSnapshot;
use crate::udp_send::UdpSendSnapshot;
use crate::welford::LatencyStats;
use serde::{Deserialize, Serialize};

/// One report line's worth of data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Span start, seconds from the test start.
    pub start_s: f64,
    /// Span end, seconds from the test start.
    pub end_s: f64,
    /// Bytes transferred in the span.
    pub bytes: u64,
    /// `bytes × 8 / (end_s − start_s)`.
    pub bits_per_second: f64,
    /// TCP sender columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_send: Option<TcpSendRecord>,
    /// TCP receiver columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_recv: Option<TcpRecvRecord>,
    /// UDP sender columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_send: Option<UdpSendRecord>,
    /// UDP receiver columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_recv: Option<UdpRecvRecord>,
}

/// TCP sender data (`-e` columns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpSendRecord {
    /// Successful `write()` calls.
    pub writes: u64,
    /// Non-fatal write errors.
    pub write_errors: u64,
    /// Retransmitted segments (delta of `tcpi_total_retrans`; cumulative in a
    /// summary). Absent when `TCP_INFO` was not sampled (without `-e`): not
    /// measured is never 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Last `TCP_INFO` sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpInfoRecord>,
    /// NetPwr with the sampled RTT (absent when the RTT was 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netpwr: Option<f64>,
    /// A paced sender's sleeps (`-b`, `--near-congestion`; absent when it never slept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_waits: Option<u64>,
    /// How long past their planned wake-ups those sleeps ended, summed, microseconds: the
    /// time a busy host kept the paced sender from running (absent with `paced_waits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_late_us: Option<u64>,
}

/// A `TCP_INFO` sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfoRecord {
    /// `snd_cwnd × snd_mss`, bytes.
    pub cwnd_bytes: u64,
    /// Smoothed RTT, microseconds.
    pub rtt_us: u64,
    /// RTT variation, microseconds.
    pub rttvar_us: u64,
    /// `tcpi_delivered_ce`: segments delivered with an ECN CE mark since the
    /// connection began (cumulative; absent when the kernel does not report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_ce: Option<u64>,
    /// `tcpi_bytes_acked`: payload bytes the receiver acknowledged since the
    /// connection began (cumulative; absent when the kernel does not report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
}

/// TCP receiver data (`-e` columns, plus trip-times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpRecvRecord {
    /// Successful `read()` calls.
    pub reads: u64,
    /// Width of a `Reads=Dist` bin, bytes.
    pub reads_bin_width_bytes: u64,
    /// `Reads=Dist`: reads per bin (bin i holds sizes `i·w+1 ..= (i+1)·w`).
    pub reads_histogram: [u64; READ_BINS],
    /// Burst (write→read) latency (with `--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_latency: Option<LatencyRecord>,
    /// inP: bytes in progress by Little's law (with `--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress_bytes: Option<f64>,
    /// NetPwr with the mean burst latency (with `--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netpwr: Option<f64>,
    /// The receiving socket's `TCP_INFO` at the end of the stream (a client's
    /// receive summary; absent when not sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<RecvTcpInfoRecord>,
}

/// A receiving socket's `TCP_INFO`, cumulative over the connection. Each field is
/// absent when the kernel does not report it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RecvTcpInfoRecord {
    /// `tcpi_rcv_rtt`: the receiver's RTT estimate, microseconds (absent when 0:
    /// the kernel had no estimate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_rtt_us: Option<u64>,
    /// `tcpi_rcv_ooopack`: data segments that arrived out of order (a loss signal
    /// seen at the receiver; Linux 5.4+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_order_packets: Option<u64>,
    /// `tcpi_received_ce`: segments received with an ECN CE mark (Linux 6.18+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_ce: Option<u64>,
}

/// The final `TCP_INFO` of a flow's sending socket on the *peer* (a bloatlab
/// server's sender on a reverse or full-duplex test), fetched with the flow
/// query (docs/wire.md). Absent fields were not measured.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PeerSenderTcpInfoRecord {
    /// `tcpi_total_retrans`: retransmitted segments over the whole flow.
    pub retransmits: u64,
    /// Smoothed RTT at the end, microseconds.
    pub rtt_us: u64,
    /// RTT variance at the end, microseconds.
    pub rttvar_us: u64,
    /// `tcpi_min_rtt`, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u64>,
    /// Congestion window at the end, bytes (cwnd x MSS).
    pub cwnd_bytes: u64,
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_delivered_ce`: segments delivered with an ECN CE mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_ce: Option<u64>,
    /// ECN was negotiated on the connection (`TCPI_OPT_ECN`).
    pub ecn_negotiated: bool,
    /// The sender saw ECN echoes (`TCPI_OPT_ECN_SEEN`).
    pub ecn_seen: bool,
}

/// UDP sender data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpSendRecord {
    /// Datagrams sent.
    pub datagrams: u64,
    /// Non-fatal write errors.
    pub write_errors: u64,
    /// iperf 2's PPS: datagrams / Σ send gaps.
    pub packets_per_second: f64,
}

/// UDP receiver data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpRecvRecord {
    /// Datagrams the sender sent in the span (highest id − previous highest id).
    pub datagrams_total: u64,
    /// iperf 2's Lost: gaps − out-of-order, floored at 0.
    pub lost: u64,
    /// `100 × lost / datagrams_total`.
    pub loss_percent: f64,
    /// Datagrams at or below the highest id (late + duplicates).
    pub out_of_order: u64,
    /// Exact duplicates among `out_of_order`.
    pub duplicates: u64,
    /// RFC 3550 jitter at the end of the span, milliseconds.
    pub jitter_ms: f64,
    /// Datagrams received (`Rx`).
    pub datagrams_received: u64,
    /// iperf 2's PPS: datagrams / Σ inter-arrival gaps.
    pub packets_per_second: f64,
    /// One-way latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyRecord>,
    /// inP: packets in progress `round(λ·mean)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress_packets: Option<i64>,
    /// `round(λ·stdev)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress_packets_stdev: Option<i64>,
    /// NetPwr with the mean latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netpwr: Option<f64>,
}

/// Latency statistics, milliseconds. Percentiles come from the histogram
/// (nearest rank, within 1.6 %; see [`crate::histogram`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRecord {
    /// Samples.
    pub count: u64,
    /// Samples that were negative (clock skew between hosts).
    pub negative_count: u64,
    /// Mean.
    pub latency_ms_mean: f64,
    /// Minimum.
    pub latency_ms_min: f64,
    /// Maximum.
    pub latency_ms_max: f64,
    /// Sample standard deviation (0 below two samples).
    pub latency_ms_stdev: f64,
    /// Median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms_p50: Option<f64>,
    /// 90th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms_p90: Option<f64>,
    /// 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms_p99: Option<f64>,
    /// The full distribution (in summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramRecord>,
}

impl LatencyRecord {
    /// From statistics and their distribution; `None` without samples.
    pub fn new(
        stats: &LatencyStats,
        hist: &LatencyHistogram,
        with_histogram: bool,
    ) -> Option<LatencyRecord> {
        if stats.count() == 0 {
            return None;
        }
        let w = stats.welford_secs();
        let pct = |p: f64| hist.percentile(p).map(|t| t.as_millis_f64());
        Some(LatencyRecord {
            count: stats.count(),
            negative_count: stats.negative_count(),
            latency_ms_mean: finite(w.mean() * 1e3).unwrap_or(0.0),
            latency_ms_min: finite(w.min() * 1e3).unwrap_or(0.0),
            latency_ms_max: finite(w.max() * 1e3).unwrap_or(0.0),
            latency_ms_stdev: finite(w.stdev() * 1e3).unwrap_or(0.0),
            latency_ms_p50: pct(50.0),
            latency_ms_p90: pct(90.0),
            latency_ms_p99: pct(99.0),
            histogram: (with_histogram && hist.count() > 0).then(|| hist.to_record()),
        })
    }
}

impl IntervalRecord {
    fn base(span: crate::Span, bytes: u64) -> IntervalRecord {
        let secs = span.secs();
        IntervalRecord {
            start_s: span.start.as_secs_f64(),
            end_s: span.end.as_secs_f64(),
            bytes,
            bits_per_second: if secs > 0.0 {
                bytes as f64 * 8.0 / secs
            } else {
                0.0
            },
            tcp_send: None,
            tcp_recv: None,
            udp_send: None,
            udp_recv: None,
        }
    }

    /// From a TCP sender snapshot.
    pub fn from_tcp_send(s: &TcpSendSnapshot) -> IntervalRecord {
        let mut r = IntervalRecord::base(s.span, s.bytes.0);
        r.tcp_send = Some(TcpSendRecord {
            writes: s.writes,
            write_errors: s.write_errors,
            retransmits: s.tcp_info_sampled.then_some(s.retransmits),
            tcp_info: s.tcp_info.map(|i| TcpInfoRecord {
                cwnd_bytes: i.cwnd().0,
                rtt_us: u64::try_from(i.rtt.as_micros()).unwrap_or(u64::MAX),
                rttvar_us: u64::try_from(i.rttvar.as_micros()).unwrap_or(u64::MAX),
                delivered_ce: i.delivered_ce.map(u64::from),
                bytes_acked: i.bytes_acked,
            }),
            netpwr: s.net_power().and_then(finite),
            paced_waits: s.paced.map(|p| p.waits),
            paced_late_us: s
                .paced
                .map(|p| u64::try_from(p.late.as_micros()).unwrap_or(u64::MAX)),
        });
        r
    }

    /// From a TCP receiver snapshot; `with_histogram` adds the latency distribution.
    pub fn from_tcp_recv(s: &TcpRecvSnapshot, with_histogram: bool) -> IntervalRecord {
        let mut r = IntervalRecord::base(s.span, s.bytes.0);
        let burst = s
            .burst
            .as_ref()
            .and_then(|b| LatencyRecord::new(&b.latency, &b.histogram, with_histogram));
        let has_burst = burst.is_some();
        r.tcp_recv = Some(TcpRecvRecord {
            reads: s.reads.reads,
            reads_bin_width_bytes: s.reads.bin_width.0,
            reads_histogram: s.reads.bins,
            burst_latency: burst,
            in_progress_bytes: has_burst.then(|| s.in_progress_bytes()).and_then(finite),
            netpwr: if has_burst {
                s.net_power().and_then(finite)
            } else {
                None
            },
            tcp_info: None,
        });
        r
    }

    /// From a UDP sender snapshot.
    pub fn from_udp_send(s: &UdpSendSnapshot) -> IntervalRecord {
        let mut r = IntervalRecord::base(s.span, s.bytes.0);
        r.udp_send = Some(UdpSendRecord {
            datagrams: s.writes,
            write_errors: s.write_errors,
            packets_per_second: finite(s.pps()).unwrap_or(0.0),
        });
        r
    }

    /// From a UDP receiver snapshot; `with_histogram` adds the latency distribution.
    pub fn from_udp_recv(s: &UdpRecvSnapshot, with_histogram: bool) -> IntervalRecord {
        let mut r = IntervalRecord::base(s.span, s.bytes.0);
        let latency = LatencyRecord::new(&s.latency, &s.histogram, with_histogram);
        let inp = latency.as_ref().map(|_| s.in_progress());
        r.udp_recv = Some(UdpRecvRecord {
            datagrams_total: s.datagrams,
            lost: s.lost,
            loss_percent: finite(s.loss_percent()).unwrap_or(0.0),
            out_of_order: s.out_of_order,
            duplicates: s.duplicates,
            jitter_ms: finite(s.jitter.as_secs_f64() * 1e3).unwrap_or(0.0),
            datagrams_received: s.ipg_count,
            packets_per_second: finite(s.pps()).unwrap_or(0.0),
            netpwr: latency
                .as_ref()
                .and_then(|_| s.net_power())
                .and_then(finite),
            latency,
            in_progress_packets: inp.map(|i| i.mean_packets),
            in_progress_packets_stdev: inp.map(|i| i.stdev_packets),
        });
        r
    }

    pub(super) fn validate(&self, at: &str) -> Result<(), SchemaError> {
        let bad = |field: &str, reason: &str| SchemaError::Invalid {
            field: format!("{at}.{field}"),
            reason: reason.to_string(),
        };
        for (name, v) in [
            ("start_s", self.start_s),
            ("end_s", self.end_s),
            ("bits_per_second", self.bits_per_second),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(bad(name, "must be a finite non-negative number"));
            }
        }
        if self.end_s < self.start_s {
            return Err(bad("end_s", "is before start_s"));
        }
        let lat = [
            self.tcp_recv
                .as_ref()
                .and_then(|r| r.burst_latency.as_ref()),
            self.udp_recv.as_ref().and_then(|r| r.latency.as_ref()),
        ];
        for (i, l) in lat.into_iter().flatten().enumerate() {
            let name = if i == 0 {
                "tcp_recv.burst_latency"
            } else {
                "udp_recv.latency"
            };
            if l.negative_count > l.count {
                return Err(bad(name, "negative_count exceeds count"));
            }
            if let Some(h) = &l.histogram {
                LatencyHistogram::from_record(h).map_err(|e: HistogramError| {
                    bad(&format!("{name}.histogram"), &e.to_string())
                })?;
            }
        }
        Ok(())
    }
}

/// Reads-histogram helper for consumers: the inclusive byte range of bin `i`.
pub fn reads_bin_range(bin_width_bytes: u64, i: usize) -> (u64, u64) {
    let i = i as u64;
    (i * bin_width_bytes + 1, (i + 1) * bin_width_bytes)
}

/// Rebuild a [`ReadsDist`] from a record (e.g. a peer's).
pub fn reads_dist(r: &TcpRecvRecord) -> ReadsDist {
    ReadsDist {
        bin_width: bloatlab_units::Bytes(r.reads_bin_width_bytes.max(1)),
        reads: r.reads,
        bins: r.reads_histogram,
    }
}

#[cfg(test)]
mod paced_tests {
    use super::*;
    use crate::interval::Span;
    use crate::tcp_send::{PacedWaits, TcpSendStats};
    use bloatlab_units::Bytes;
    use std::time::Duration;

    #[test]
    fn a_paced_senders_late_wakes_are_in_its_record_and_absent_unpaced() {
        let span = Span::from_zero(Duration::from_secs(1));
        let mut s = TcpSendStats::new();
        s.on_write(Bytes(131_072));
        let plain = IntervalRecord::from_tcp_send(&s.total(span));
        let t = plain.tcp_send.as_ref().unwrap();
        assert_eq!((t.paced_waits, t.paced_late_us), (None, None));
        let text = serde_json::to_string(&plain).unwrap();
        assert!(
            !text.contains("paced"),
            "unpaced: not measured, not 0: {text}"
        );
        s.on_paced_wait(Duration::from_micros(1_250));
        s.on_paced_wait(Duration::from_nanos(500));
        let snap = s.total(span);
        assert_eq!(
            snap.paced,
            Some(PacedWaits {
                waits: 2,
                late: Duration::from_nanos(1_250_500)
            })
        );
        let r = IntervalRecord::from_tcp_send(&snap);
        let t = r.tcp_send.as_ref().unwrap();
        assert_eq!((t.paced_waits, t.paced_late_us), (Some(2), Some(1_250)));
        let back: IntervalRecord =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
