//! Formula tests against the figures of field reports 1-2 (quoted in each test;
//! `docs/experiments.md` lists the reports) and iperf 2's own capture checks.
//!
//! Where a report gives every input exactly (2018 NetPwr intervals: whole
//! 128 KiB writes over exactly 1 s), the printed value is asserted exactly.
//! Where inputs are only known to the printed precision (a `3.668 ms` mean,
//! a `10.00 sec` span), the test computes the formula at both ends of the
//! allowed input range and asserts that the printed value lies inside.

use bloatlab_metrics::cfmt;
use bloatlab_metrics::formulas::{in_progress_bytes, net_power, udp_in_progress};
use bloatlab_metrics::{Span, TcpInfoSample, TcpSendStats};
use bloatlab_units::Bytes;
use std::time::Duration;

const WRITE: u64 = 131_072;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Report 2 (2018, cubic and BBR over GigE): each interval line is whole
/// 128 KiB writes in exactly 1.00 s, so NetPwr is exact to the last digit
/// (2.0.x printed it with `%.2f`).
#[test]
fn report2_interval_netpwr_exact() {
    let lines: [(u64, u64, &str); 19] = [
        (903, 2231, "53051.55"),
        (894, 2107, "55613.84"),
        (894, 2205, "53142.12"),
        (895, 2194, "53468.30"),
        (889, 2181, "53426.41"),
        (896, 2221, "52877.31"),
        (896, 2198, "53430.62"),
        (890, 2203, "52952.37"),
        (891, 2169, "53842.85"),
        (897, 2187, "53759.30"),
        (912, 1644, "72711.47"),
        (890, 1619, "72053.17"),
        (894, 1720, "68126.96"),
        (895, 1599, "73364.25"),
        (895, 1603, "73181.19"),
        (887, 1609, "72256.60"),
        (896, 1579, "74376.51"),
        (894, 1615, "72556.27"),
        (892, 1646, "71030.51"),
    ];
    for (writes, rtt_us, printed) in lines {
        let v = net_power(
            Bytes(writes * WRITE),
            Duration::from_secs(1),
            rtt_us as f64 * 1e-6,
        )
        .unwrap();
        assert_eq!(
            format!("{v:.2}"),
            printed,
            "{writes} writes, rtt {rtt_us} us"
        );
    }
}

/// Report 2 final line `0.00-10.01 sec 1.09 GBytes 937 Mbits/sec 8945/0 0
/// 373K/2189 us 53532.01`, computed from its bytes and interval through the
/// accumulator; 2.1.8 prints the same value as `53532`.
#[test]
fn report2_final_netpwr_53532() {
    let mut s = TcpSendStats::new();
    for _ in 0..8945 {
        s.on_write(Bytes(WRITE));
    }
    s.on_tcp_info(TcpInfoSample {
        snd_cwnd: 258,
        snd_mss: 1448,
        rtt: Duration::from_micros(2189),
        rttvar: Duration::ZERO,
        total_retrans: 0,
        delivered_ce: None,
        bytes_acked: None,
    });
    // "10.01" is 10.005..10.015; the NetPwr pins the span to 10.00532 s.
    let snap = s.total(Span::from_zero(secs(10.005_319_4)));
    let v = snap.net_power().unwrap();
    assert!((v - 53_532.01).abs() < 0.01, "{v}");
    assert_eq!(cfmt::net_power(Some(v)), "53532");
    assert_eq!(
        cfmt::transfer(snap.bytes.0 as f64, cfmt::ByteFormat::AdaptiveBits),
        "1.09 GBytes"
    );
    assert_eq!(
        cfmt::bandwidth(snap.bytes_per_sec(), cfmt::ByteFormat::AdaptiveBits),
        " 937 Mbits/sec"
    );
    assert_eq!(snap.tcp_info.unwrap().cwnd_kbytes(), 364);
    // Anywhere in the printed span range the result stays within 0.1 % of 53532.
    for end in [10.005, 10.0149] {
        let v = net_power(snap.bytes, secs(end), 2189e-6).unwrap();
        assert!((v / 53_532.0 - 1.0).abs() < 1e-3, "{end}: {v}");
    }
    // The seed report's back-of-envelope check: 937 Mbit/s over 2189 us is 53.5e3.
    let v = net_power(Bytes(117_125_000), Duration::from_secs(1), 2189e-6).unwrap();
    assert!((v - 53_506.2).abs() < 0.1, "{v}");
}

/// `lo..hi` of `f` over the corners of the input box (f is monotonic in each input).
fn range(corners: impl IntoIterator<Item = f64>) -> (f64, f64) {
    corners
        .into_iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// Report 1 server lines (`--trip-times`, GigE to a Raspberry Pi): the
/// printed NetPwr lies in the range the printed bytes (cnt/size), span and
/// mean latency allow; inP is consistent with λ = bytes / Σ write gaps where
/// Σ gaps is about the 1 s interval.
#[test]
fn report1_server_interval_netpwr_and_inp() {
    // (cnt, size, mean_ms, inP_kbyte, netpwr)
    let lines: [(u64, u64, f64, f64, f64); 10] = [
        (896, 131_130, 3.668, 423.0, 32032.0),
        (896, 131_013, 3.172, 364.0, 37009.0),
        (889, 131_103, 3.447, 391.0, 33815.0),
        (889, 131_040, 4.485, 512.0, 25972.0),
        (871, 131_072, 3.866, 431.0, 29529.0),
        (892, 131_192, 3.295, 376.0, 35514.0),
        (895, 131_019, 3.537, 405.0, 33153.0),
        (893, 131_004, 3.467, 396.0, 33742.0),
        (888, 131_132, 3.510, 399.0, 33173.0),
        (894, 131_012, 3.308, 379.0, 35406.0),
    ];
    for (cnt, size, mean_ms, inp_k, netpwr) in lines {
        let bytes_lo = cnt * size;
        let bytes_hi = cnt * (size + 1) - 1;
        let (lo, hi) = range(
            [bytes_lo, bytes_hi]
                .into_iter()
                .flat_map(|b| [mean_ms - 0.0005, mean_ms + 0.0005].map(move |m| (b, m)))
                .map(|(b, m)| net_power(Bytes(b), Duration::from_secs(1), m * 1e-3).unwrap()),
        );
        assert!(
            lo - 0.5 <= netpwr && netpwr <= hi + 0.5,
            "NetPwr {netpwr} outside [{lo}, {hi}] for {cnt}/{size} {mean_ms} ms"
        );
        // inP: the implied write-gap sum must be close to the 1 s interval.
        let implied_gap = bytes_lo as f64 * mean_ms * 1e-3 / (inp_k * 1024.0);
        assert!(
            (0.97..=1.03).contains(&implied_gap),
            "implied gap sum {implied_gap} s for {cnt}/{size}"
        );
        // And with that gap sum the formula prints the reported inP.
        let l = in_progress_bytes(Bytes(bytes_lo), secs(implied_gap), mean_ms * 1e-3);
        assert_eq!(cfmt::in_progress(l), format!("{inp_k:4.0} KByte"));
    }
}

/// The example named in the brief: `3.668 ms ... 423 KByte 32032` from
/// 112 MBytes in 1.00 s, through the formatting helpers.
#[test]
fn report1_first_server_line() {
    let bytes = Bytes(896 * 131_130);
    assert_eq!(
        cfmt::transfer(bytes.0 as f64, cfmt::ByteFormat::AdaptiveBits),
        " 112 MBytes"
    );
    assert_eq!(
        cfmt::bandwidth(bytes.0 as f64, cfmt::ByteFormat::AdaptiveBits),
        " 940 Mbits/sec"
    );
    let p = net_power(bytes, Duration::from_secs(1), 3.668e-3);
    assert_eq!(cfmt::net_power(p), "32032");
    // 896 bursts written 1/896 s apart after the previous interval's last one: Σ gaps = 0.995 s.
    let l = in_progress_bytes(bytes, secs(0.995), 3.668e-3);
    assert_eq!(cfmt::in_progress(l), " 423 KByte");
}

/// Report 1 final server lines use the whole duration as the gap sum
/// (iperf 2's `IPGsum = iEnd` on the total): NetPwr and inP both follow
/// from bytes, the printed span and the mean.
#[test]
fn report1_server_final_lines_use_duration_as_gap_sum() {
    // (cnt, end_printed, mean_ms, inP printed, netpwr)
    let cases = [
        (8909u64, 10.00, 3.576, " 408 KByte", 32644.0),
        (9002u64, 10.03, 30.005, "3.37 MByte", 3922.0),
    ];
    for (cnt, end, mean_ms, inp, netpwr) in cases {
        let bytes = Bytes(cnt * WRITE);
        let corners: Vec<(f64, f64)> = [end - 0.005, end + 0.004_999]
            .into_iter()
            .flat_map(|e| [mean_ms - 0.0005, mean_ms + 0.000_499].map(move |m| (e, m)))
            .collect();
        let (lo, hi) = range(
            corners
                .iter()
                .map(|&(e, m)| net_power(bytes, secs(e), m * 1e-3).unwrap()),
        );
        assert!(
            lo - 0.5 <= netpwr && netpwr <= hi + 0.5,
            "{netpwr} not in [{lo}, {hi}]"
        );
        let printed: Vec<String> = corners
            .iter()
            .map(|&(e, m)| cfmt::in_progress(in_progress_bytes(bytes, secs(e), m * 1e-3)))
            .collect();
        assert!(printed.iter().any(|p| p == inp), "{inp} not in {printed:?}");
    }
}

/// Report 1 weight-0 run: the first server line's NetPwr from its bytes.
#[test]
fn report1_bufferbloat_line_netpwr() {
    // 28.251 ms mean, 896/131160, 1.00 s -> 4160.
    let p = net_power(Bytes(896 * 131_160), Duration::from_secs(1), 28.251e-3);
    assert_eq!(cfmt::net_power(p), "4160");
    // Its inP 3.27 MByte implies a gap sum near 1 s.
    let implied = (896.0 * 131_160.0) * 28.251e-3 / (3.27 * 1_048_576.0);
    assert!((0.96..=1.01).contains(&implied), "{implied}");
}

/// Report 1 client lines: NetPwr uses the sampled RTT; the printed values
/// lie in the range allowed by the printed bandwidth (bytes unknown exactly).
#[test]
fn report1_client_netpwr_from_bandwidth_and_rtt() {
    // (Mbit/s, rtt us, netpwr)
    let lines = [
        (943.0, 2566.0, 45921.0),
        (941.0, 1653.0, 71126.0),
        (931.0, 2418.0, 48136.0),
        (934.0, 3403.0, 34322.0), // final line, 0.00-10.00
        (970.0, 13054.0, 9288.0),
        (944.0, 13863.0, 8512.0), // weight 0 final
    ];
    for (mbit, rtt, netpwr) in lines {
        let (lo, hi) = range([mbit - 0.5, mbit + 0.5].map(|m| {
            net_power(
                Bytes((m * 1e6 / 8.0) as u64),
                Duration::from_secs(1),
                rtt * 1e-6,
            )
            .unwrap()
        }));
        assert!(lo <= netpwr && netpwr <= hi, "{netpwr} not in [{lo}, {hi}]");
    }
}

/// README 2.2's check: 1.37 GiB in 1 s over 251 us is 5.87e6.
#[test]
fn capture_2_2_check() {
    let v = net_power(Bytes(11_240 * WRITE), Duration::from_secs(1), 251e-6).unwrap();
    assert_eq!(cfmt::net_power(Some(v)), "5869519");
    assert!((v - 5.86e6).abs() / 5.86e6 < 0.01);
}

/// UDP inP in packets, `850/0(0) pkts` (captures/08b Server Report: the
/// AckFIN carries cntIPG = 850 pps and IPGsum = 1 s).
#[test]
fn udp_inp_850_0_0() {
    let r = udp_in_progress(850, 1.0, 0.0078e-3, 0.004e-3);
    assert_eq!((r.mean_packets, r.stdev_packets), (0, 0));
    // At 1 s of latency the same rate holds 850 packets in flight.
    let r = udp_in_progress(850, 1.0, 1.0, 0.5);
    assert_eq!((r.mean_packets, r.stdev_packets), (850, 425));
}
