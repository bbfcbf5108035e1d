//! Bridge between UDP receiver statistics and iperf 2's AckFIN
//! (`server_hdr`, parsed by `bloatlab_wire::ServerReportRepr`).
//!
//! * Server: [`server_report`] fills the AckFIN from the final
//!   [`UdpRecvSnapshot`] exactly as iperf 2.1.8's `write_UDP_AckFIN`
//!   (`src/Reports.c:891`) does: counts of the whole test, jitter, transit
//!   min/max/sum/mean, Welford M2 × 1e12, `cntIPG = datagrams / duration`
//!   (truncated) and `IPGsum = 1`.
//! * Client: [`UdpRecvSnapshot::from_server_report`] turns a received
//!   AckFIN into a snapshot that [`crate::Console::udp_recv_line`] prints as
//!   the `Server Report:` line (enhanced iff the AckFIN has the extension).
//!
//! Everything saturates: a hostile or broken AckFIN (negative counts, NaN
//! transit) yields odd numbers, never a panic.

use crate::interval::Span;
use crate::udp_recv::UdpRecvSnapshot;
use crate::welford::{LatencyStats, Welford};
use bloatlab_wire::{ServerFlags, ServerReportExt, ServerReportRepr, SplitDouble};
use std::time::Duration;

/// The AckFIN a server sends for its final snapshot `total` (span from 0).
/// `enhanced`: the test ran with `-e` or `--trip-times` (sets
/// `SERVER_HEADER_EXTEND` and the transit extension).
pub fn server_report(total: &UdpRecvSnapshot, enhanced: bool) -> ServerReportRepr {
    let w = total.latency.welford_secs();
    let secs = total.span.secs();
    let cnt_ipg = if secs > 0.0 {
        total.datagrams as f64 / secs
    } else {
        0.0
    };
    let mut flags = ServerFlags::VERSION1 | ServerFlags::SEQNO64B;
    if enhanced {
        flags |= ServerFlags::EXTEND;
    }
    ServerReportRepr {
        flags: ServerFlags(flags),
        total_bytes: total.bytes,
        duration: total.span.end,
        lost: i64::try_from(total.lost).unwrap_or(i64::MAX),
        out_of_order: i64::try_from(total.out_of_order).unwrap_or(i64::MAX),
        datagrams: i64::try_from(total.datagrams).unwrap_or(i64::MAX),
        jitter: SplitDouble::from_f64(total.jitter.as_secs_f64()),
        ext: enhanced.then(|| ServerReportExt {
            min_transit: SplitDouble::from_f64(w.min()),
            max_transit: SplitDouble::from_f64(w.max()),
            sum_transit: SplitDouble::from_f64(w.sum()),
            mean_transit: SplitDouble::from_f64(w.mean()),
            m2_transit: SplitDouble::from_f64(w.m2() * 1e12),
            vd_transit: SplitDouble::default(),
            cnt_transit: i32::try_from(w.count()).unwrap_or(i32::MAX),
            // `as` truncates like C's (long) cast and saturates.
            cnt_ipg: cnt_ipg as i32,
            ipg_sum: 1,
        }),
    }
}

impl UdpRecvSnapshot {
    /// The server's statistics as relayed in an AckFIN (the client's
    /// `Server Report:`). Latency fields are filled only when the AckFIN has
    /// the transit extension; the mean is `sum / count`, as iperf 2 prints it.
    pub fn from_server_report(r: &ServerReportRepr) -> UdpRecvSnapshot {
        let nonneg = |v: i64| u64::try_from(v).unwrap_or(0);
        let (latency, ipg_count, ipg_sum) = match &r.ext {
            Some(e) => {
                let n = u64::try_from(e.cnt_transit).unwrap_or(0);
                let sum = e.sum_transit.to_f64();
                let mean = if n > 0 { sum / n as f64 } else { 0.0 };
                let w = Welford::from_parts(
                    n,
                    sum,
                    mean,
                    e.m2_transit.to_f64() * 1e-12,
                    e.min_transit.to_f64(),
                    e.max_transit.to_f64(),
                );
                let negative = u64::from(e.min_transit.to_f64() < 0.0);
                (
                    LatencyStats::from_welford_secs(w, negative),
                    u64::try_from(e.cnt_ipg).unwrap_or(0),
                    Duration::from_secs(u64::try_from(e.ipg_sum).unwrap_or(0)),
                )
            }
            None => (LatencyStats::new(), 0, Duration::ZERO),
        };
        UdpRecvSnapshot {
            span: Span::from_zero(r.duration),
            bytes: r.total_bytes,
            datagrams: nonneg(r.datagrams),
            lost: nonneg(r.lost),
            out_of_order: nonneg(r.out_of_order),
            duplicates: 0,
            jitter: Duration::try_from_secs_f64(r.jitter.to_f64()).unwrap_or(Duration::ZERO),
            latency,
            histogram: crate::LatencyHistogram::new(),
            ipg_count,
            ipg_sum,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::{Console, StreamLabel};
    use crate::histogram::LatencyHistogram;
    use bloatlab_units::Bytes;
    use bloatlab_wire::AckFin;

    /// captures/08b: the server's final statistics, sent in the AckFIN and
    /// printed by the client as `Server Report:`.
    #[test]
    fn capture_08b_server_report_round_trip() {
        // The AckFIN truncates the transit sum to microseconds (19996 us here),
        // and the client prints NetPwr from sum / count.
        let n = 2554u64;
        let (mean, stdev) = (7.8293e-6, 0.004e-3);
        let total = UdpRecvSnapshot {
            span: Span::from_zero(Duration::from_micros(3_001_250)),
            bytes: Bytes(n * 1470),
            datagrams: n,
            lost: 0,
            out_of_order: 0,
            duplicates: 0,
            jitter: Duration::from_nanos(400),
            latency: LatencyStats::from_welford_secs(
                Welford::from_parts(
                    n,
                    mean * n as f64,
                    mean,
                    stdev * stdev * (n - 1) as f64,
                    2e-6,
                    117e-6,
                ),
                0,
            ),
            histogram: LatencyHistogram::new(),
            ipg_count: n,
            ipg_sum: Duration::from_micros(3_001_300),
        };
        let repr = server_report(&total, true);
        assert_eq!(repr.flags.0, 0xc800_0000);
        assert_eq!(repr.ext.unwrap().cnt_ipg, 850);
        let mut buf = [0u8; 128];
        repr.emit(&mut AckFin::new_unchecked(&mut buf[..]));
        let parsed = ServerReportRepr::parse(&AckFin::new_unchecked(&buf[..])).unwrap();
        let relayed = UdpRecvSnapshot::from_server_report(&parsed);
        assert_eq!(
            Console::default().udp_recv_line(StreamLabel::Id(1), &relayed, parsed.ext.is_some()),
            "[  1] 0.0000-3.0013 sec  3.58 MBytes  10.0 Mbits/sec   0.000 ms 0/2554 (0%) 0.008/0.002/0.117/0.004 ms 850 pps 850/0(0) pkts 159777"
        );
    }

    #[test]
    fn plain_report_has_no_extension() {
        let total = UdpRecvSnapshot {
            span: Span::from_zero(Duration::from_micros(3_001_300)),
            bytes: Bytes(3_754_380),
            datagrams: 2554,
            ..UdpRecvSnapshot::default()
        };
        let repr = server_report(&total, false);
        assert!(repr.ext.is_none());
        let relayed = UdpRecvSnapshot::from_server_report(&repr);
        assert_eq!(
            Console::default().udp_recv_line(StreamLabel::Id(1), &relayed, false),
            "[  1] 0.0000-3.0013 sec  3.58 MBytes  10.0 Mbits/sec   0.000 ms 0/2554 (0%)"
        );
    }

    #[test]
    fn hostile_values_saturate() {
        let r = ServerReportRepr {
            flags: ServerFlags(ServerFlags::EXTEND),
            total_bytes: Bytes(u64::MAX),
            duration: Duration::ZERO,
            lost: -5,
            out_of_order: i64::MIN,
            datagrams: -1,
            jitter: SplitDouble {
                int: -3,
                frac_e6: 0,
            },
            ext: Some(ServerReportExt {
                cnt_transit: -9,
                cnt_ipg: -1,
                ipg_sum: -1,
                m2_transit: SplitDouble {
                    int: i32::MIN,
                    frac_e6: 0,
                },
                ..ServerReportExt::default()
            }),
        };
        let s = UdpRecvSnapshot::from_server_report(&r);
        assert_eq!(
            (s.lost, s.out_of_order, s.datagrams, s.ipg_count),
            (0, 0, 0, 0)
        );
        assert_eq!(s.jitter, Duration::ZERO);
        // Formatting such a snapshot must not panic either.
        let _ = Console::default().udp_recv_line(StreamLabel::Id(1), &s, true);
    }
}
