//! Property tests: invariants every definition in bloatlab-stats must keep.

use std::time::Duration;

use bloatlab_stats::emodel::{G711, mos_from_r, r_factor};
use bloatlab_stats::quantile::quantile_f64;
use bloatlab_stats::timeseries::{Segment, bucketize_latency, time_weighted_mean};
use bloatlab_stats::{
    DelayKind, LatencySeries, Phase, PhaseKind, ProbeSample, jain_fairness, quantile,
};
use bloatlab_units::BitRate;
use proptest::prelude::*;

fn durations() -> impl Strategy<Value = Vec<Duration>> {
    prop::collection::vec(
        (0u64..10_000_000_000).prop_map(Duration::from_nanos),
        1..200,
    )
}

proptest! {
    #[test]
    fn quantile_is_monotonic_and_bounded(x in durations(), a in 0.0f64..=1.0, b in 0.0f64..=1.0) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let qa = quantile(&x, lo).unwrap();
        let qb = quantile(&x, hi).unwrap();
        prop_assert!(qa <= qb, "Q({lo})={qa:?} > Q({hi})={qb:?}");
        let min = *x.iter().min().unwrap();
        let max = *x.iter().max().unwrap();
        prop_assert!(min <= qa && qb <= max);
        prop_assert_eq!(quantile(&x, 0.0).unwrap(), min);
        prop_assert_eq!(quantile(&x, 1.0).unwrap(), max);
    }

    #[test]
    fn quantile_ignores_order(mut x in durations(), q in 0.0f64..=1.0) {
        let a = quantile(&x, q).unwrap();
        x.reverse();
        prop_assert_eq!(a, quantile(&x, q).unwrap());
    }

    #[test]
    fn f64_quantile_bounded_with_nans(
        x in prop::collection::vec(prop_oneof![Just(f64::NAN), -1e6f64..1e6], 0..100),
        q in 0.0f64..=1.0,
    ) {
        let finite: Vec<f64> = x.iter().copied().filter(|v| !v.is_nan()).collect();
        match quantile_f64(&x, q) {
            Ok(v) => {
                let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
                let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                prop_assert!(min <= v && v <= max);
            }
            Err(_) => prop_assert!(finite.is_empty()),
        }
    }

    #[test]
    fn jain_is_between_one_over_n_and_one(x in prop::collection::vec(0u64..100_000_000_000, 1..64)) {
        let rates: Vec<BitRate> = x.iter().map(|&v| BitRate(v)).collect();
        match jain_fairness(&rates) {
            Ok(j) => {
                let n = rates.len() as f64;
                prop_assert!((1.0 / n..=1.0).contains(&j), "J={j} n={n}");
            }
            Err(_) => prop_assert!(x.iter().all(|&v| v == 0)),
        }
    }

    #[test]
    fn time_weighted_mean_is_within_values(
        segs in prop::collection::vec((0u64..1_000, 1u64..1_000, -1e3f64..1e3), 1..50)
    ) {
        let segments: Vec<Segment> = segs.iter().map(|&(s, len, v)| Segment {
            start: Duration::from_millis(s),
            end: Duration::from_millis(s + len),
            value: v,
        }).collect();
        let m = time_weighted_mean(&segments).unwrap();
        let min = segs.iter().map(|s| s.2).fold(f64::INFINITY, f64::min);
        let max = segs.iter().map(|s| s.2).fold(f64::NEG_INFINITY, f64::max);
        prop_assert!(min - 1e-9 <= m && m <= max + 1e-9);
    }

    /// Adding any samples outside the loaded phase never changes the loaded summary.
    #[test]
    fn loaded_summary_ignores_samples_outside_the_phase(
        inside in prop::collection::vec((5_000u64..15_000, prop::option::of(0u64..500)), 0..100),
        outside in prop::collection::vec((prop_oneof![0u64..5_000, 15_000u64..20_000], prop::option::of(0u64..5_000)), 0..100),
    ) {
        let mk = |v: &[(u64, Option<u64>)]| -> Vec<ProbeSample> {
            v.iter().map(|&(t, d)| match d {
                Some(d) => ProbeSample::received(Duration::from_millis(t), Duration::from_millis(d)),
                None => ProbeSample::lost(Duration::from_millis(t)),
            }).collect()
        };
        let loaded = Phase::new(PhaseKind::Loaded, Duration::from_secs(5), Duration::from_secs(15));
        let only = LatencySeries { name: "a".into(), kind: DelayKind::RoundTrip, samples: mk(&inside) };
        let mut all = only.clone();
        all.samples.extend(mk(&outside));
        let s = only.summarize(&loaded);
        prop_assert_eq!(s, all.summarize(&loaded));
        prop_assert_eq!(s.sent, s.received + s.lost);
        if let Some(d) = s.delay {
            prop_assert!(d.min <= d.p10 && d.p10 <= d.median && d.median <= d.p90);
            prop_assert!(d.p90 <= d.p99 && d.p99 <= d.max);
            prop_assert!(d.min <= d.mean && d.mean <= d.max);
            prop_assert_eq!(d.count, s.received);
        }
    }

    #[test]
    fn buckets_account_for_every_probe(
        samples in prop::collection::vec((0u64..10_000, prop::bool::ANY), 0..300),
        width in 1u64..2_000,
    ) {
        let series = LatencySeries {
            name: "a".into(),
            kind: DelayKind::RoundTrip,
            samples: samples.iter().map(|&(t, lost)| {
                let at = Duration::from_millis(t);
                if lost { ProbeSample::lost(at) } else { ProbeSample::received(at, Duration::from_millis(1)) }
            }).collect(),
        };
        let b = bucketize_latency(&series, Duration::ZERO, Duration::from_secs(10), Duration::from_millis(width)).unwrap();
        let sent: u32 = b.iter().map(|x| x.sent).sum();
        let lost: u32 = b.iter().map(|x| x.lost).sum();
        prop_assert_eq!(sent as usize, samples.len());
        prop_assert_eq!(lost as usize, samples.iter().filter(|s| s.1).count());
        for x in &b {
            // A bucket has a value exactly when some probe in it arrived.
            prop_assert_eq!(x.mean.is_some(), x.sent > x.lost);
        }
    }

    #[test]
    fn mos_is_bounded_and_falls_with_delay_and_loss(
        d1 in 0u64..1_000, d2 in 0u64..1_000, l1 in 0.0f64..=1.0, l2 in 0.0f64..=1.0,
    ) {
        let (dl, dh) = (d1.min(d2), d1.max(d2));
        let (ll, lh) = (l1.min(l2), l1.max(l2));
        let good = mos_from_r(r_factor(Duration::from_millis(dl), ll, &G711));
        let bad = mos_from_r(r_factor(Duration::from_millis(dh), lh, &G711));
        prop_assert!((1.0..=4.5).contains(&good) && (1.0..=4.5).contains(&bad));
        prop_assert!(bad <= good + 1e-12);
    }
}
