//! Property tests: accumulator invariants on arbitrary event streams, and
//! our printf emulation against the C library's `snprintf`.

use bloatlab_metrics::cfmt::{self, ByteFormat};
use bloatlab_metrics::{LatencyHistogram, Span, TcpRecvStats, Transit, UdpRecvStats, Welford};
use bloatlab_units::Bytes;
use proptest::prelude::*;
use std::ffi::CString;
use std::time::Duration;

fn c_printf(fmt: &str, v: f64) -> String {
    let f = CString::new(fmt).unwrap();
    let mut buf = vec![0u8; 512];
    // SAFETY: the buffer is writable for its length; the format takes one double.
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), f.as_ptr(), v) };
    buf.truncate(usize::try_from(n).unwrap().min(511));
    String::from_utf8(buf).unwrap()
}

proptest! {
    #[test]
    fn percent_g_matches_libc(v in prop_oneof![
        -1e6f64..1e6,
        0.0f64..200.0,
        0.0f64..1e-3,
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
    ]) {
        prop_assert_eq!(cfmt::c_g(v, 2), c_printf("%.2g", v));
        prop_assert_eq!(cfmt::c_g(v, 6), c_printf("%g", v));
    }

    #[test]
    fn fixed_formats_match_libc(v in -1e7f64..1e7) {
        prop_assert_eq!(format!("{v:4.3}"), c_printf("%4.3f", v));
        prop_assert_eq!(format!("{v:4.2}"), c_printf("%4.2f", v));
        prop_assert_eq!(format!("{v:4.1}"), c_printf("%4.1f", v));
        prop_assert_eq!(format!("{v:4.0}"), c_printf("%4.0f", v));
        prop_assert_eq!(format!("{v:6.3}"), c_printf("%6.3f", v));
        prop_assert_eq!(format!("{v:8.0}"), c_printf("%8.0f", v));
    }

    #[test]
    fn byte_formatter_never_panics_and_fits(v in any::<f64>()) {
        let s = cfmt::byte_snprintf(v, ByteFormat::AdaptiveBytes);
        prop_assert!(!s.is_empty());
        if v.is_finite() && v.abs() < 1e18 {
            // Four places + space + label.
            let num = s.split(' ').find(|p| !p.is_empty()).unwrap();
            prop_assert!(num.trim_start_matches('-').len() <= 5, "{}", s);
        }
        let _ = cfmt::byte_snprintf(v, ByteFormat::AdaptiveBits);
        let _ = cfmt::net_power(Some(v));
    }

    #[test]
    fn welford_merge_matches_sequential(xs in prop::collection::vec(-1e3f64..1e3, 0..60), k in 0usize..60) {
        let k = k.min(xs.len());
        let mut all = Welford::new();
        xs.iter().for_each(|&x| all.record(x));
        let mut a = Welford::new();
        let mut b = Welford::new();
        xs[..k].iter().for_each(|&x| a.record(x));
        xs[k..].iter().for_each(|&x| b.record(x));
        a.merge(&b);
        prop_assert_eq!(a.count(), all.count());
        prop_assert!((a.mean() - all.mean()).abs() < 1e-9);
        prop_assert!((a.m2() - all.m2()).abs() < 1e-6 * (1.0 + all.m2()));
    }

    #[test]
    fn histogram_percentiles_are_ordered_and_bounded(
        xs in prop::collection::vec(-1_000i64..10_000_000_000, 1..200),
        p in 0.0f64..100.0,
    ) {
        let mut h = LatencyHistogram::new();
        xs.iter().for_each(|&x| h.record(Transit::from_nanos(x)));
        let lo = h.percentile(p).unwrap();
        let hi = h.percentile((p + 10.0).min(100.0)).unwrap();
        prop_assert!(lo <= hi);
        let max = *xs.iter().max().unwrap();
        let min = (*xs.iter().min().unwrap()).max(0);
        prop_assert!(hi.as_nanos() <= max.max(0));
        prop_assert!(lo.as_nanos() >= min.min(max.max(0)));
        // Against the exact nearest-rank answer: within one bucket (3.2 %).
        let mut sorted: Vec<i64> = xs.iter().map(|&x| x.max(0)).collect();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
        let exact = sorted[rank - 1] as f64;
        let got = lo.as_nanos() as f64;
        prop_assert!((got - exact).abs() <= exact / 32.0 + 1.0, "p{} exact {} got {}", p, exact, got);
        let back = LatencyHistogram::from_record(&h.to_record()).unwrap();
        prop_assert_eq!(back, h);
    }

    #[test]
    fn udp_intervals_add_up_to_the_total(
        events in prop::collection::vec((0u64..300, 0u64..5_000, 1u64..2000), 1..300),
        cut_every in 1usize..50,
    ) {
        let mut s = UdpRecvStats::new(Duration::ZERO);
        let mut rx = Duration::ZERO;
        let (mut bytes, mut count, mut datagrams) = (0u64, 0u64, 0u64);
        for (i, (id, delay_us, len)) in events.iter().enumerate() {
            rx += Duration::from_micros(100);
            let sent = rx.saturating_sub(Duration::from_micros(*delay_us));
            s.on_datagram(*id, sent, rx, Bytes(*len));
            if i % cut_every == 0 {
                let snap = s.take_interval(Span::new(Duration::ZERO, rx));
                bytes += snap.bytes.0;
                count += snap.ipg_count;
                datagrams += snap.datagrams;
                prop_assert!(snap.lost <= snap.datagrams);
                prop_assert!(snap.duplicates <= snap.out_of_order);
            }
        }
        let snap = s.take_interval(Span::new(Duration::ZERO, rx));
        bytes += snap.bytes.0;
        count += snap.ipg_count;
        datagrams += snap.datagrams;
        let t = s.total(Span::from_zero(rx));
        prop_assert_eq!(t.bytes.0, bytes);
        prop_assert_eq!(t.ipg_count, count);
        prop_assert_eq!(t.datagrams, datagrams);
        prop_assert_eq!(t.datagrams, s.seq().highest());
        prop_assert!(t.lost <= t.datagrams);
        prop_assert_eq!(t.latency.count(), t.ipg_count);
    }

    #[test]
    fn tcp_recv_intervals_add_up_to_the_total(
        events in prop::collection::vec((0u64..200_000, any::<bool>(), -5_000i64..50_000), 1..300),
        cut_every in 1usize..40,
    ) {
        let mut s = TcpRecvStats::new(Bytes(131_072), true);
        let base = Duration::from_secs(1_800_000_000);
        let (mut bytes, mut reads, mut bursts, mut negatives) = (0u64, 0u64, 0u64, 0u64);
        for (i, (n, burst, lat_us)) in events.iter().enumerate() {
            s.on_read(Bytes(*n));
            if *burst {
                let w = base + Duration::from_millis(i as u64);
                let done = if *lat_us >= 0 {
                    w + Duration::from_micros(*lat_us as u64)
                } else {
                    w - Duration::from_micros(lat_us.unsigned_abs())
                };
                let t = s.on_burst_complete(w, done);
                prop_assert_eq!(t.is_negative(), *lat_us < 0);
            }
            if i % cut_every == 0 {
                let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
                bytes += snap.bytes.0;
                reads += snap.reads.reads;
                prop_assert!(snap.reads.bins.iter().sum::<u64>() <= snap.reads.reads);
                let b = snap.burst.as_ref().unwrap();
                bursts += b.latency.count();
                negatives += b.latency.negative_count();
                let _ = (snap.in_progress_bytes(), snap.net_power(), snap.burst_size());
            }
        }
        let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
        bytes += snap.bytes.0;
        reads += snap.reads.reads;
        bursts += snap.burst.as_ref().unwrap().latency.count();
        negatives += snap.burst.as_ref().unwrap().latency.negative_count();
        let t = s.total(Span::from_zero(Duration::from_secs(3)));
        prop_assert_eq!(t.bytes.0, bytes);
        prop_assert_eq!(t.reads.reads, reads);
        let tb = t.burst.as_ref().unwrap();
        prop_assert_eq!(tb.latency.count(), bursts);
        prop_assert_eq!(tb.latency.negative_count(), negatives);
        prop_assert_eq!(tb.histogram.count(), bursts);
    }
}

proptest! {
    /// Timestamps from a peer can be anything (wrong clock, garbage): the
    /// accumulators and every formatter must cope without panicking.
    #[test]
    fn extreme_timestamps_never_panic(
        ev in prop::collection::vec((any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>()), 1..40),
    ) {
        let mut u = UdpRecvStats::new(Duration::from_secs(ev[0].0 >> 1));
        let mut t = TcpRecvStats::new(Bytes(131_072), true);
        for (a, b, na, nb) in &ev {
            let sent = Duration::new(*a >> 1, na % 1_000_000_000);
            let rx = Duration::new(*b >> 1, nb % 1_000_000_000);
            u.on_datagram(*a, sent, rx, Bytes(u64::from(*na)));
            t.on_read(Bytes(u64::from(*nb)));
            t.on_burst_complete(sent, rx);
        }
        let span = Span::new(Duration::ZERO, Duration::from_secs(1));
        let c = bloatlab_metrics::Console::default();
        let us = u.take_interval(span);
        let ts = t.take_interval(span);
        for enhanced in [false, true] {
            let _ = c.udp_recv_line(bloatlab_metrics::StreamLabel::Id(1), &us, enhanced);
        }
        let _ = c.tcp_recv_line(bloatlab_metrics::StreamLabel::Id(1), &ts);
        let _ = bloatlab_metrics::json::IntervalRecord::from_udp_recv(&u.total(span), true);
        let _ = bloatlab_metrics::json::IntervalRecord::from_tcp_recv(&t.total(span), true);
        let _ = (us.latency.stdev(), ts.burst.as_ref().map(|b| b.latency.stdev()));
    }
}
