//! The UDP "Server Report" on the wire: the AckFIN bytes a server sends
//! and the parse a client does (iperf 2.1.8 `write_UDP_AckFIN`, README 5.9).
//!
//! The mapping between the final statistics and the `server_hdr` fields is
//! METRICS' (`bloatlab_metrics::ack_fin`), the byte layout WIRE's; this
//! module joins them for the drivers and pins the result against the real
//! iperf 2.1.8 AckFIN of `wire/w07`.
//!
//! The transit extension (`SERVER_HEADER_EXTEND`) is sent only when the
//! server runs `-e` or the client asked for trip-times, like 2.1.8: without
//! it a 2.1.8 client prints the plain `Jitter Lost/Total Datagrams` report.

use bloatlab_metrics::ack_fin::server_report;
use bloatlab_metrics::udp_recv::UdpRecvSnapshot;
use bloatlab_units::Bytes;
use bloatlab_wire::ack_fin::ACK_FIN_LEN;
use bloatlab_wire::{AckFin, ServerReportRepr, WireError};
use std::time::Duration;

/// The 128 AckFIN bytes for a receiver's final snapshot.
pub fn ack_fin_bytes(total: &UdpRecvSnapshot, extended: bool) -> Vec<u8> {
    let report = server_report(total, extended);
    let mut buf = vec![0u8; report.buffer_len()];
    report.emit(&mut AckFin::new_unchecked(&mut buf[..]));
    buf
}

/// Parses AckFIN bytes (128 B, or more when a bloatlab report frame follows).
/// A stale 52-byte `client_hdr_ack` and short input are errors.
pub fn parse_ack_fin(bytes: &[u8]) -> Result<ServerReportRepr, WireError> {
    let n = bytes.len().min(ACK_FIN_LEN);
    ServerReportRepr::parse(&AckFin::new_unchecked(&bytes[..n]))
}

/// What the client knows about what it sent, to judge the server's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentFacts {
    /// Ids used: data datagrams plus FINs.
    pub ids: u64,
    /// Bytes of every datagram sent, FINs included.
    pub bytes: Bytes,
    /// From the first datagram to the last FIN.
    pub elapsed: Duration,
}

/// Why a server's report cannot be true.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Impossible {
    #[error("negative count ({field} = {value})")]
    Negative { field: &'static str, value: i64 },
    #[error("{datagrams} datagrams, but only {sent} were sent")]
    Datagrams { datagrams: i64, sent: u64 },
    #[error("{lost} lost of {datagrams}")]
    Lost { lost: i64, datagrams: i64 },
    #[error("{got} received, but only {sent} were sent")]
    Bytes { got: Bytes, sent: Bytes },
    #[error("a duration of {got:?} for a test of {elapsed:?}")]
    Duration { got: Duration, elapsed: Duration },
    #[error("jitter {0} s")]
    Jitter(f64),
}

/// Checks a peer's AckFIN against what we sent: impossible values are
/// reported as such, never printed as measurements (a forged AckFIN of
/// 0xff bytes would otherwise print as 16384 PBytes).
pub fn check_server_report(r: &ServerReportRepr, sent: &SentFacts) -> Result<(), Impossible> {
    for (field, value) in [
        ("datagrams", r.datagrams),
        ("lost", r.lost),
        ("out_of_order", r.out_of_order),
    ] {
        if value < 0 {
            return Err(Impossible::Negative { field, value });
        }
    }
    if r.datagrams.unsigned_abs() > sent.ids {
        return Err(Impossible::Datagrams {
            datagrams: r.datagrams,
            sent: sent.ids,
        });
    }
    if r.lost > r.datagrams {
        return Err(Impossible::Lost {
            lost: r.lost,
            datagrams: r.datagrams,
        });
    }
    if r.total_bytes > sent.bytes {
        return Err(Impossible::Bytes {
            got: r.total_bytes,
            sent: sent.bytes,
        });
    }
    // The server's span is within ours, give or take clock granularity
    // and a FIN that took the whole retry budget.
    if r.duration > sent.elapsed + Duration::from_secs(5) {
        return Err(Impossible::Duration {
            got: r.duration,
            elapsed: sent.elapsed,
        });
    }
    let j = r.jitter.to_f64();
    if !j.is_finite() || !(0.0..=3600.0).contains(&j) {
        return Err(Impossible::Jitter(j));
    }
    Ok(())
}

/// The snapshot a client prints as its `Server Report:` line.
pub fn snapshot_from_server_report(r: &ServerReportRepr) -> UdpRecvSnapshot {
    UdpRecvSnapshot::from_server_report(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_metrics::console::{Console, StreamLabel};
    use bloatlab_metrics::interval::Span;
    use bloatlab_metrics::udp_recv::UdpRecvStats;

    /// The AckFIN of `wire/w07_udp_e_triptimes.fin_ackfin.decoded.txt`.
    const W07_ACKFIN: [u32; 32] = [
        0x00000000, 0x00000000, 0x00000000, 0x00000000, 0xc8000000, 0x00000000, 0x00003390,
        0x00000001, 0x00005f22, 0x00000000, 0x00000000, 0x00000042, 0x00000000, 0x00000002,
        0x00000000, 0x00000004, 0x00000000, 0x0000003e, 0x00000000, 0x000009d6, 0x00000000,
        0x00000026, 0x00000d0c, 0x000765f0, 0x00000000, 0x00000002, 0x00000042, 0x00000040,
        0x00000001, 0x00000000, 0x00000000, 0x00000000,
    ];

    fn w07_bytes() -> Vec<u8> {
        W07_ACKFIN.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn iperf_218_ackfin_prints_as_the_real_client_did() {
        let r = parse_ack_fin(&w07_bytes()).unwrap();
        let snap = snapshot_from_server_report(&r);
        // w07_udp_e_triptimes.client.txt, the Server Report line.
        assert_eq!(
            Console::default().udp_recv_line(StreamLabel::Id(1), &snap, true),
            "[  1] 0.0000-1.0244 sec  12.9 KBytes   103 Kbits/sec   0.002 ms 0/66 (0%) \
             0.038/0.004/0.062/0.007 ms 64 pps 64/0(0) pkts 338"
        );
    }

    #[test]
    fn ackfin_round_trips_a_real_snapshot() {
        // 66 datagrams of 200 B, 16 ms apart, transit 20..85 us.
        let mut st = UdpRecvStats::new(Duration::from_secs(1000));
        for i in 0..66u64 {
            let sent = Duration::from_secs(1000) + Duration::from_micros(16_000 * i);
            let transit = Duration::from_micros(20 + i);
            st.on_datagram(i + 1, sent, sent + transit, Bytes(200));
        }
        let total = st.total(Span::from_zero(Duration::from_micros(1_040_085)));
        let bytes = ack_fin_bytes(&total, true);
        assert_eq!(bytes.len(), 128);
        assert_eq!(&bytes[..16], &[0u8; 16]);
        assert_eq!(&bytes[16..20], &[0xc8, 0, 0, 0]);
        // cntIPG = 66 / 1.040085 s = 63.45 -> 63, IPGsum = 1.
        assert_eq!(&bytes[108..116], &[0, 0, 0, 63, 0, 0, 0, 1]);

        let back = snapshot_from_server_report(&parse_ack_fin(&bytes).unwrap());
        assert_eq!(back.bytes, Bytes(13_200));
        assert_eq!((back.datagrams, back.lost, back.out_of_order), (66, 0, 0));
        assert_eq!(back.span.len(), Duration::from_micros(1_040_085));
        let (a, b) = (total.latency.welford_secs(), back.latency.welford_secs());
        assert_eq!(b.count(), 66);
        assert!(
            (a.mean() - b.mean()).abs() < 1e-6,
            "{} {}",
            a.mean(),
            b.mean()
        );
        assert!((a.min() - b.min()).abs() < 1e-6 && (a.max() - b.max()).abs() < 1e-6);
        assert!(
            (a.stdev() - b.stdev()).abs() < 1e-7,
            "{} {}",
            a.stdev(),
            b.stdev()
        );
        assert!((total.jitter.as_secs_f64() - back.jitter.as_secs_f64()).abs() < 1e-6);
    }

    #[test]
    fn plain_server_sends_no_extension() {
        let total = UdpRecvSnapshot {
            span: Span::from_zero(Duration::from_secs(1)),
            bytes: Bytes(1470),
            datagrams: 1,
            ..UdpRecvSnapshot::default()
        };
        let bytes = ack_fin_bytes(&total, false);
        assert_eq!(&bytes[16..20], &[0x88, 0, 0, 0]);
        assert!(bytes[56..116].iter().all(|&b| b == 0));
        let back = snapshot_from_server_report(&parse_ack_fin(&bytes).unwrap());
        assert_eq!(
            Console::default().udp_recv_line(StreamLabel::Id(1), &back, false),
            "[  1] 0.0000-1.0000 sec  1.44 KBytes  11.8 Kbits/sec   0.000 ms 0/1 (0%)"
        );
    }

    #[test]
    fn a_true_report_passes_and_impossible_ones_say_why() {
        let r = parse_ack_fin(&w07_bytes()).unwrap();
        let sent = SentFacts {
            ids: 67,
            bytes: Bytes(67 * 200),
            elapsed: Duration::from_millis(1030),
        };
        assert_eq!(check_server_report(&r, &sent), Ok(()));
        // All 0xff: negative counts (and 16384 PBytes).
        let mut ff = vec![0u8; 16];
        ff.extend([0xffu8; 112]);
        // Refused by the parser, or judged impossible: never printed.
        if let Ok(r) = parse_ack_fin(&ff) {
            assert!(check_server_report(&r, &sent).is_err());
        }
        let mut big = r;
        big.total_bytes = Bytes(u64::MAX >> 1);
        assert!(matches!(
            check_server_report(&big, &sent),
            Err(Impossible::Bytes { .. })
        ));
        let mut many = r;
        many.datagrams = 68;
        assert!(matches!(
            check_server_report(&many, &sent),
            Err(Impossible::Datagrams { .. })
        ));
        let mut lost = r;
        lost.lost = 100;
        assert!(check_server_report(&lost, &sent).is_err());
        let mut long = r;
        long.duration = Duration::from_secs(86_400);
        assert!(matches!(
            check_server_report(&long, &sent),
            Err(Impossible::Duration { .. })
        ));
    }

    #[test]
    fn short_or_garbage_ackfin_is_an_error_not_a_panic() {
        assert!(parse_ack_fin(&[0u8; 10]).is_err());
        // A stale 52-byte client_hdr_ack (type word 2... as defined by wire).
        let _ = parse_ack_fin(&[0xffu8; 52]);
        let _ = parse_ack_fin(&[0xffu8; 300]);
    }
}
