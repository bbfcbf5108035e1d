//! iperf 2's derived metrics: NetPwr, inP (Little's law) and PPS.
//!
//! Reference: iperf 2.1.8 `src/ReportOutputs.c:156-200`; written out in
//! `docs/metrics.md`.

use bloatlab_units::Bytes;
use std::time::Duration;

/// NetPwr scale factor (`NETPOWERCONSTANT`, `include/Reporter.h:70`).
pub const NET_POWER_CONSTANT: f64 = 1e-6;

/// Network power: `1e-6 × (bytes / interval_s) / delay_s`.
///
/// * TCP client: delay = the last `tcpi_rtt` sample of the interval.
/// * TCP server with trip-times: delay = mean burst (write→read) latency.
/// * UDP server: delay = mean packet latency.
///
/// `delay_secs` is signed because one-way delays can be negative under clock
/// skew. Returns `None` (printed `NAN`) when the delay is exactly zero or the
/// interval is empty.
pub fn net_power(bytes: Bytes, interval: Duration, delay_secs: f64) -> Option<f64> {
    let secs = interval.as_secs_f64();
    if delay_secs == 0.0 || !delay_secs.is_finite() || secs <= 0.0 {
        return None;
    }
    Some(NET_POWER_CONSTANT * (bytes.0 as f64 / secs) / delay_secs)
}

/// TCP inP, in bytes: Little's law `L = λ·W` with λ = `bytes / ipg_sum`
/// (the offered rate derived from the sender's write timestamps; iperf 2
/// uses the whole duration on the final line) and W = mean burst latency in
/// seconds. λ is 0 when `ipg_sum` is zero.
pub fn in_progress_bytes(bytes: Bytes, ipg_sum: Duration, mean_delay_secs: f64) -> f64 {
    let ipg = ipg_sum.as_secs_f64();
    let lambda = if ipg > 0.0 { bytes.0 as f64 / ipg } else { 0.0 };
    lambda * mean_delay_secs
}

/// UDP inP, in packets (`set_llawbuf_udp`, `ReportOutputs.c:166`):
/// λ = `round(packets / ipg_sum)` as an integer rate,
/// `L = round(λ·mean)`, `Lvar = round(λ·stdev)` (0 when stdev is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpInProgress {
    /// Packets in progress, `round(λ·mean)`.
    pub mean_packets: i64,
    /// `round(λ·stdev)`.
    pub stdev_packets: i64,
}

/// Compute [`UdpInProgress`].
pub fn udp_in_progress(
    packets: u64,
    ipg_sum_secs: f64,
    mean_delay_secs: f64,
    stdev_secs: f64,
) -> UdpInProgress {
    let lambda = if ipg_sum_secs > 0.0 {
        (packets as f64 / ipg_sum_secs).round()
    } else {
        0.0
    };
    let stdev_packets = if stdev_secs > 0.0 {
        (lambda * stdev_secs).round() as i64
    } else {
        0
    };
    UdpInProgress {
        mean_packets: (lambda * mean_delay_secs).round() as i64,
        stdev_packets,
    }
}

/// Packets per second as iperf 2 defines it: `packets / Σ gaps` (a
/// derivative, not packets per wall-clock interval). 0 when there were no
/// packets or no elapsed gap time.
pub fn pps(packets: u64, ipg_sum_secs: f64) -> f64 {
    if packets == 0 || ipg_sum_secs <= 0.0 {
        0.0
    } else {
        packets as f64 / ipg_sum_secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_power_capture_02_first_client_line() {
        // captures/02: 11240 writes x 128 KiB in exactly 1 s, tcpi_rtt 251 us -> 5869519.
        let p = net_power(Bytes(11_240 * 131_072), Duration::from_secs(1), 251e-6).unwrap();
        assert_eq!(format!("{p:.0}"), "5869519");
    }

    #[test]
    fn net_power_zero_delay_is_nan() {
        assert_eq!(net_power(Bytes(1), Duration::from_secs(1), 0.0), None);
        assert_eq!(net_power(Bytes(1), Duration::ZERO, 1.0), None);
    }

    #[test]
    fn udp_in_progress_rounds_like_iperf2() {
        // captures/08e server first line: 65945 pkts, 66151 pps, 0.002 ms mean,
        // 0.011 ms stdev -> "65945/0(1) pkts".
        let r = udp_in_progress(65_945, 65_945.0 / 66_151.0, 2.0e-6, 11.0e-6);
        assert_eq!(
            r,
            UdpInProgress {
                mean_packets: 0,
                stdev_packets: 1
            }
        );
        assert_eq!(udp_in_progress(5, 0.0, 1.0, 1.0).mean_packets, 0);
    }

    #[test]
    fn little_law_bytes() {
        // 2.62 GiB/s for 1.032 ms is about 2.9e6 bytes (README 4(b) check).
        let l = in_progress_bytes(Bytes(2_813_203_578), Duration::from_secs(1), 1.032e-3);
        assert!((l - 2.903e6).abs() < 1e3, "{l}");
        assert_eq!(in_progress_bytes(Bytes(9), Duration::ZERO, 1.0), 0.0);
    }
}
