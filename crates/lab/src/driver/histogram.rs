//! The release-lateness histogram: bloatlab's one streaming histogram
//! ([`bloatlab_stats::histogram`]: 32 sub-buckets per power of two, nearest-rank percentiles
//! within 1.6 %, exact maximum and mean), cheap enough to record every packet's lateness.

use bloatlab_stats::histogram::{self, LogHistogram};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Values up to 2^36 ns (about 69 s of lateness) are recorded without allocating.
const PREALLOCATED_NS: u64 = 1 << 36;

/// Histogram of nanosecond values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram(LogHistogram);

impl Default for Histogram {
    fn default() -> Self {
        Histogram(LogHistogram::preallocated(PREALLOCATED_NS))
    }
}

impl Histogram {
    /// Records one value.
    pub fn record(&mut self, d: Duration) {
        self.0
            .record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.0.count()
    }

    /// The nearest-rank value at quantile `q` (0..=1), docs/statistics.md §1b; zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.0.quantile(q).unwrap_or(0))
    }

    /// Values above `ns`, to within a bucket (3 %): a bucket counts when its smallest value
    /// is above `ns`, so values in the bucket holding `ns` do not.
    pub fn count_above(&self, ns: u64) -> u64 {
        self.0
            .buckets()
            .filter(|b| b.lower_ns > ns)
            .map(|b| b.count)
            .sum()
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, o: &Histogram) {
        self.0.merge(&o.0);
    }

    /// The values recorded after the snapshot `earlier` of this histogram (see
    /// [`LogHistogram::since`]).
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        Histogram(self.0.since(&earlier.0))
    }

    /// Summary for reports, in microseconds.
    pub fn summary(&self) -> Summary {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Summary {
            count: self.count(),
            mean_us: self.0.mean().map_or(0.0, |ns| ns as f64 / 1e3),
            p50_us: us(self.quantile(0.5)),
            p90_us: us(self.quantile(0.9)),
            p99_us: us(self.quantile(0.99)),
            p999_us: us(self.quantile(0.999)),
            max_us: self.0.max().map_or(0.0, |ns| ns as f64 / 1e3),
        }
    }
}

/// The serialized form of a [`Histogram`]: its non-empty buckets as `[index, count]` pairs of
/// the named bucketing `scheme`, the exact extremes and sum (ns), so that a reader can rebuild
/// it and subtract two snapshots.
#[derive(Serialize, Deserialize)]
struct HistogramWire {
    /// Absent in state written before the histograms were unified: refused (other indices).
    #[serde(default)]
    scheme: String,
    buckets: Vec<(u32, u64)>,
    #[serde(default)]
    min_ns: Option<u64>,
    max_ns: u64,
    sum_ns: u128,
}

impl Serialize for Histogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        HistogramWire {
            scheme: histogram::SCHEME.to_string(),
            buckets: self
                .0
                .buckets()
                .map(|b| (b.index as u32, b.count))
                .collect(),
            min_ns: self.0.min(),
            max_ns: self.0.max().unwrap_or(0),
            sum_ns: self.0.sum(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let w = HistogramWire::deserialize(d)?;
        if w.scheme != histogram::SCHEME && !w.buckets.is_empty() {
            return Err(D::Error::custom(format!(
                "lateness histogram scheme {:?} is not {:?} (written by another bloatlab \
                 version; restart the lab)",
                w.scheme,
                histogram::SCHEME
            )));
        }
        let extremes = w.min_ns.map(|min| (min, w.max_ns));
        let buckets = w.buckets.into_iter().map(|(i, n)| (u64::from(i), n));
        let h = LogHistogram::from_parts(buckets, extremes, w.sum_ns)
            .map_err(|e| D::Error::custom(format!("lateness histogram: {e}")))?;
        let mut full = Histogram::default();
        full.0.merge(&h);
        Ok(full)
    }
}

/// Percentiles of a [`Histogram`], microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Summary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_state_without_a_scheme_is_refused() {
        let old = serde_json::json!({"buckets": [[40, 1]], "max_ns": 40, "sum_ns": 40});
        let e = serde_json::from_value::<Histogram>(old)
            .unwrap_err()
            .to_string();
        assert!(e.contains("restart the lab"), "{e}");
    }

    #[test]
    fn quantiles_match_known_answers() {
        let mut h = Histogram::default();
        // 1..=100 us: p50 is the 50th value (50 us), p99 the 99th.
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us));
        }
        let within = |got: Duration, want_us: f64| {
            let g = got.as_secs_f64() * 1e6;
            assert!(
                (g - want_us).abs() <= want_us / 64.0,
                "got {g} want {want_us}"
            );
        };
        within(h.quantile(0.5), 50.0);
        within(h.quantile(0.99), 99.0);
        assert_eq!(h.quantile(1.0), Duration::from_micros(100));
        // Small values are exact.
        let mut h = Histogram::default();
        for ns in [3u64, 1, 2] {
            h.record(Duration::from_nanos(ns));
        }
        assert_eq!(h.quantile(0.0), Duration::from_nanos(1));
        assert_eq!(h.quantile(0.5), Duration::from_nanos(2));
        assert_eq!(h.summary().count, 3);
        assert_eq!(Histogram::default().quantile(0.5), Duration::ZERO);
    }

    #[test]
    fn count_above_counts_the_buckets_past_the_threshold() {
        let mut h = Histogram::default();
        for us in [10u64, 500, 990, 1100, 2000, 30_000] {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.count_above(1_000_000), 3);
        assert_eq!(h.count_above(20_000_000), 1);
        assert_eq!(h.count_above(40_000_000), 0);
        assert_eq!(Histogram::default().count_above(0), 0);
    }

    #[test]
    fn since_isolates_a_window_and_survives_json() {
        let mut h = Histogram::default();
        for _ in 0..1000 {
            h.record(Duration::from_millis(30)); // a bad spell before the run
        }
        let before: Histogram = serde_json::from_value(serde_json::to_value(&h).unwrap()).unwrap();
        assert_eq!(before.summary(), h.summary());
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us));
        }
        let d = h.since(&before).summary();
        assert_eq!(d.count, 100);
        assert!((d.p99_us - 99.0).abs() <= 99.0 / 64.0, "{d:?}");
        assert!(d.max_us >= 100.0 && d.max_us <= 103.5, "{d:?}");
        assert!((d.mean_us - 50.5).abs() < 1e-9, "{d:?}");
        let bad = serde_json::json!({"scheme": "log2-32-ns", "buckets": [[100_000, 1]], "max_ns": 1, "sum_ns": 1});
        assert!(serde_json::from_value::<Histogram>(bad).is_err());
    }
}
