//! A log-linear histogram of durations (32 sub-buckets per power of two,
//! so a reported percentile is within about 3 % of the true sample), cheap
//! enough to record every packet's release lateness.

use serde::{Deserialize, Serialize};
use std::time::Duration;

const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize) * SUB + SUB;

/// Histogram of nanosecond values.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0,
            sum: 0,
        }
    }
}

fn index(v: u64) -> usize {
    if v < 2 * SUB as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS + 1
    let shift = e - SUB_BITS;
    let m = (v >> shift) as usize; // in [SUB, 2*SUB)
    (shift as usize + 1) * SUB + (m - SUB)
}

/// Highest value that falls into bucket `i`.
fn upper(i: usize) -> u64 {
    if i < 2 * SUB {
        return i as u64;
    }
    let shift = (i / SUB - 1) as u32;
    let m = (i % SUB + SUB) as u128;
    u64::try_from(((m + 1) << shift) - 1).unwrap_or(u64::MAX)
}

impl Histogram {
    /// Records one value.
    pub fn record(&mut self, d: Duration) {
        let v = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[index(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value at quantile `q` (0..=1): the upper bound of the bucket that
    /// holds the `ceil(q * n)`-th smallest sample (never above the maximum).
    pub fn quantile(&self, q: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(upper(i).min(self.max));
            }
        }
        Duration::from_nanos(self.max)
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.total += o.total;
        self.max = self.max.max(o.max);
        self.sum += o.sum;
    }

    /// The values recorded after the snapshot `earlier` of this histogram
    /// (bucket counts subtracted). Their maximum is the upper edge of the
    /// highest non-empty bucket, within the whole histogram's exact maximum.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let mut out = Histogram::default();
        for (i, (a, b)) in self.counts.iter().zip(&earlier.counts).enumerate() {
            let n = a.saturating_sub(*b);
            if n > 0 {
                out.counts[i] = n;
                out.total += n;
                out.max = out.max.max(upper(i).min(self.max));
            }
        }
        out.sum = self.sum.saturating_sub(earlier.sum);
        out
    }

    /// Summary for reports, in microseconds.
    pub fn summary(&self) -> Summary {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Summary {
            count: self.total,
            mean_us: if self.total == 0 {
                0.0
            } else {
                self.sum as f64 / self.total as f64 / 1e3
            },
            p50_us: us(self.quantile(0.5)),
            p90_us: us(self.quantile(0.9)),
            p99_us: us(self.quantile(0.99)),
            p999_us: us(self.quantile(0.999)),
            max_us: self.max as f64 / 1e3,
        }
    }
}

/// The serialized form of a [`Histogram`]: its non-empty buckets as
/// `[index, count]` pairs, the exact maximum and sum (ns), so that a reader
/// can rebuild it and subtract two snapshots.
#[derive(Serialize, Deserialize)]
struct HistogramWire {
    buckets: Vec<(u32, u64)>,
    max_ns: u64,
    sum_ns: u128,
}

impl Serialize for Histogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        HistogramWire {
            buckets: self
                .counts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| (i as u32, *n))
                .collect(),
            max_ns: self.max,
            sum_ns: self.sum,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = HistogramWire::deserialize(d)?;
        let mut h = Histogram::default();
        for (i, n) in w.buckets {
            let slot = h.counts.get_mut(i as usize).ok_or_else(|| {
                serde::de::Error::custom(format!("histogram bucket {i} out of range"))
            })?;
            *slot += n;
            h.total += n;
        }
        h.max = w.max_ns;
        h.sum = w.sum_ns;
        Ok(h)
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
    fn buckets_are_contiguous_and_monotonic() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 3, u64::MAX]) {
            let i = index(v);
            assert!(i >= last || v > 100_000, "v={v}");
            assert!(upper(i) >= v, "v={v} i={i} upper={}", upper(i));
            if i > 0 {
                assert!(upper(i - 1) < v, "v={v}");
            }
            last = i;
        }
        assert!(index(u64::MAX) < BUCKETS);
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
                g >= want_us && g <= want_us * 1.035,
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
        assert!(d.p99_us >= 99.0 && d.p99_us <= 99.0 * 1.035, "{d:?}");
        assert!(d.max_us >= 100.0 && d.max_us <= 103.5, "{d:?}");
        assert!((d.mean_us - 50.5).abs() < 1e-9, "{d:?}");
        let bad = serde_json::json!({"buckets": [[100_000, 1]], "max_ns": 1, "sum_ns": 1});
        assert!(serde_json::from_value::<Histogram>(bad).is_err());
    }
}
