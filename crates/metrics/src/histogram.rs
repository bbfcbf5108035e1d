//! A log-linear latency histogram (the *distribution* behind the
//! avg/min/max/stdev columns), for JSON output and percentiles.
//!
//! # Bucketing
//! Values are nanoseconds. Values below 64 ns each get their own bucket
//! (exact). Above that, every power-of-two octave `[2^e, 2^(e+1))` is split
//! into 32 equal sub-buckets, so a bucket is at most 1/32 (3.1 %) of its
//! lower bound wide. The whole `u64` range fits in 1920 buckets; storage
//! grows only up to the largest bucket used (about 930 buckets = 7.4 KiB for
//! delays up to 10 s).
//!
//! Negative delays (clock skew between hosts) are counted in
//! [`LatencyHistogram::negative_count`] and placed in the 0 ns bucket, so they
//! rank lowest.
//!
//! # Percentiles
//! [`LatencyHistogram::percentile`] uses the nearest-rank definition
//! (rank = ceil(p/100 · N), at least 1) and returns the midpoint of the
//! bucket holding that rank, clamped to the exact observed min/max. Exact
//! below 64 ns; within half a bucket (≤ 1.6 %) above.

use crate::transit::Transit;
use serde::{Deserialize, Serialize};

const EXACT: u64 = 64;
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Number of buckets needed for the whole u64 range.
pub const MAX_BUCKETS: usize = 64 + (63 - 6 + 1) * 32;

/// Bucket index of a value in nanoseconds.
fn index_of(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 6
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    (EXACT + u64::from(e - 6) * SUB + sub) as usize
}

/// Inclusive `(lower, upper)` bounds in nanoseconds of a bucket index.
fn bounds_of(i: usize) -> Option<(u64, u64)> {
    if i >= MAX_BUCKETS {
        return None;
    }
    let i = i as u64;
    if i < EXACT {
        return Some((i, i));
    }
    let k = i - EXACT;
    let e = (k / SUB) as u32 + 6;
    let sub = k % SUB;
    let shift = e - SUB_BITS;
    let low = (SUB + sub) << shift;
    let width = 1u64 << shift;
    Some((low, low + (width - 1)))
}

/// A latency distribution. See the module docs for the bucketing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    negative: u64,
    min_ns: i64,
    max_ns: i64,
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        LatencyHistogram::default()
    }

    /// Record one delay.
    pub fn record(&mut self, t: Transit) {
        let ns = t.as_nanos();
        if self.total == 0 {
            self.min_ns = ns;
            self.max_ns = ns;
        } else {
            self.min_ns = self.min_ns.min(ns);
            self.max_ns = self.max_ns.max(ns);
        }
        if ns < 0 {
            self.negative += 1;
        }
        let idx = index_of(u64::try_from(ns).unwrap_or(0));
        if self.counts.len() <= idx {
            self.counts.resize(idx + 1, 0);
        }
        self.counts[idx] += 1;
        self.total += 1;
    }

    /// Add every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.total == 0 {
            return;
        }
        if self.total == 0 {
            self.min_ns = other.min_ns;
            self.max_ns = other.max_ns;
        } else {
            self.min_ns = self.min_ns.min(other.min_ns);
            self.max_ns = self.max_ns.max(other.max_ns);
        }
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += *b;
        }
        self.total += other.total;
        self.negative += other.negative;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Number of negative samples (clamped to 0 ns in the buckets).
    pub fn negative_count(&self) -> u64 {
        self.negative
    }

    /// Exact smallest sample.
    pub fn min(&self) -> Option<Transit> {
        (self.total > 0).then_some(Transit::from_nanos(self.min_ns))
    }

    /// Exact largest sample.
    pub fn max(&self) -> Option<Transit> {
        (self.total > 0).then_some(Transit::from_nanos(self.max_ns))
    }

    /// The nearest-rank percentile `p` (0..=100). `None` when empty or `p` is not finite.
    pub fn percentile(&self, p: f64) -> Option<Transit> {
        if self.total == 0 || !p.is_finite() {
            return None;
        }
        let p = p.clamp(0.0, 100.0);
        let rank = ((p / 100.0) * self.total as f64).ceil() as u64;
        let rank = rank.clamp(1, self.total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds_of(i)?;
                let mid = lo + (hi - lo) / 2;
                let mid = i64::try_from(mid).unwrap_or(i64::MAX);
                let lower_clamp = self.min_ns.max(0);
                return Some(Transit::from_nanos(
                    mid.clamp(lower_clamp.min(self.max_ns), self.max_ns.max(lower_clamp)),
                ));
            }
        }
        None
    }

    /// Non-empty buckets as `(lower_ns, upper_ns, count)`, inclusive bounds, ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .filter_map(|(i, &c)| bounds_of(i).map(|(lo, hi)| (lo, hi, c)))
    }

    /// The serializable form (see [`HistogramRecord`]).
    pub fn to_record(&self) -> HistogramRecord {
        HistogramRecord {
            scheme: HISTOGRAM_SCHEME.to_string(),
            count: self.total,
            negative_count: self.negative,
            min_ns: self.min().map(|t| t.as_nanos()),
            max_ns: self.max().map(|t| t.as_nanos()),
            buckets: self
                .buckets()
                .map(|(lower_ns, upper_ns, count)| BucketRecord {
                    lower_ns,
                    upper_ns,
                    count,
                })
                .collect(),
        }
    }

    /// Rebuild from a record, validating it (it may come from a peer).
    pub fn from_record(r: &HistogramRecord) -> Result<LatencyHistogram, HistogramError> {
        if r.scheme != HISTOGRAM_SCHEME {
            return Err(HistogramError::UnknownScheme(r.scheme.clone()));
        }
        let mut h = LatencyHistogram::new();
        let mut last: Option<usize> = None;
        for (pos, b) in r.buckets.iter().enumerate() {
            let idx = index_of(b.lower_ns);
            if bounds_of(idx) != Some((b.lower_ns, b.upper_ns)) {
                return Err(HistogramError::BadBucket {
                    position: pos,
                    lower_ns: b.lower_ns,
                    upper_ns: b.upper_ns,
                });
            }
            if last.is_some_and(|l| l >= idx) {
                return Err(HistogramError::Unordered { position: pos });
            }
            last = Some(idx);
            if h.counts.len() <= idx {
                h.counts.resize(idx + 1, 0);
            }
            h.counts[idx] = b.count;
            h.total = h
                .total
                .checked_add(b.count)
                .ok_or(HistogramError::CountOverflow)?;
        }
        if h.total != r.count {
            return Err(HistogramError::CountMismatch {
                declared: r.count,
                buckets: h.total,
            });
        }
        if r.negative_count > h.total {
            return Err(HistogramError::CountMismatch {
                declared: r.negative_count,
                buckets: h.total,
            });
        }
        h.negative = r.negative_count;
        match (h.total, r.min_ns, r.max_ns) {
            (0, _, _) => {}
            (_, Some(min), Some(max)) if min <= max => {
                h.min_ns = min;
                h.max_ns = max;
            }
            _ => return Err(HistogramError::BadMinMax),
        }
        Ok(h)
    }
}

/// Identifier of the bucketing scheme, stored in every serialized histogram.
pub const HISTOGRAM_SCHEME: &str = "log2-32-ns";

/// Serialized latency histogram (JSON).
///
/// ```json
/// {"scheme":"log2-32-ns","count":3,"negative_count":0,"min_ns":900,"max_ns":70000,
///  "buckets":[{"lower_ns":896,"upper_ns":911,"count":2},{"lower_ns":69632,"upper_ns":71679,"count":1}]}
/// ```
/// Buckets are ascending, non-empty, with inclusive bounds in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramRecord {
    /// Always [`HISTOGRAM_SCHEME`].
    pub scheme: String,
    /// Total samples, equal to the sum of bucket counts.
    pub count: u64,
    /// Samples that were negative (clamped into the 0 ns bucket).
    pub negative_count: u64,
    /// Exact smallest sample in nanoseconds (signed); absent when empty.
    pub min_ns: Option<i64>,
    /// Exact largest sample in nanoseconds (signed); absent when empty.
    pub max_ns: Option<i64>,
    /// Non-empty buckets.
    pub buckets: Vec<BucketRecord>,
}

/// One histogram bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    /// Inclusive lower bound, nanoseconds.
    pub lower_ns: u64,
    /// Inclusive upper bound, nanoseconds.
    pub upper_ns: u64,
    /// Samples in the bucket.
    pub count: u64,
}

/// Why a serialized histogram was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistogramError {
    /// The `scheme` field names a bucketing we do not know.
    #[error("unknown histogram scheme {0:?} (expected \"{HISTOGRAM_SCHEME}\")")]
    UnknownScheme(String),
    /// A bucket's bounds are not a bucket of the scheme.
    #[error(
        "histogram bucket #{position} [{lower_ns}, {upper_ns}] ns is not a bucket of the scheme"
    )]
    BadBucket {
        /// Position in the `buckets` array.
        position: usize,
        /// Declared lower bound.
        lower_ns: u64,
        /// Declared upper bound.
        upper_ns: u64,
    },
    /// Buckets are not strictly ascending.
    #[error("histogram bucket #{position} is out of order or duplicated")]
    Unordered {
        /// Position in the `buckets` array.
        position: usize,
    },
    /// `count`/`negative_count` disagree with the buckets.
    #[error("histogram count {declared} does not match the bucket total {buckets}")]
    CountMismatch {
        /// The declared count.
        declared: u64,
        /// The sum of the buckets.
        buckets: u64,
    },
    /// Bucket counts overflow u64.
    #[error("histogram bucket counts overflow")]
    CountOverflow,
    /// min/max missing or inconsistent on a non-empty histogram.
    #[error("histogram min_ns/max_ns missing or min > max")]
    BadMinMax,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(v: i64) -> Transit {
        Transit::from_nanos(v)
    }

    #[test]
    fn buckets_tile_the_range() {
        // Consecutive buckets are adjacent and each value maps into its bucket.
        let mut prev_hi: Option<u64> = None;
        for i in 0..MAX_BUCKETS {
            let (lo, hi) = bounds_of(i).unwrap();
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "gap before bucket {i}");
            }
            assert_eq!(index_of(lo), i);
            assert_eq!(index_of(hi), i);
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
        assert_eq!(bounds_of(MAX_BUCKETS), None);
    }

    #[test]
    fn bucket_width_is_at_most_one_32nd() {
        for i in 64..MAX_BUCKETS {
            let (lo, hi) = bounds_of(i).unwrap();
            assert!((hi - lo + 1) as f64 <= lo as f64 / 32.0 + 1e-9);
        }
    }

    #[test]
    fn percentiles_exact_region_known_answers() {
        // 1..=50 ns: nearest-rank p50 = 25, p90 = 45, p99 = 50, p0 = 1.
        let mut h = LatencyHistogram::new();
        for v in 1..=50 {
            h.record(ns(v));
        }
        assert_eq!(h.percentile(50.0), Some(ns(25)));
        assert_eq!(h.percentile(90.0), Some(ns(45)));
        assert_eq!(h.percentile(99.0), Some(ns(50)));
        assert_eq!(h.percentile(100.0), Some(ns(50)));
        assert_eq!(h.percentile(0.0), Some(ns(1)));
    }

    #[test]
    fn percentiles_log_region_within_bucket_error() {
        // 1..=1000 microseconds: p50 = 500 us, p90 = 900 us, p99 = 990 us.
        let mut h = LatencyHistogram::new();
        for v in 1..=1000 {
            h.record(ns(v * 1000));
        }
        for (p, want_us) in [(50.0, 500.0), (90.0, 900.0), (99.0, 990.0)] {
            let got = h.percentile(p).unwrap().as_nanos() as f64 / 1000.0;
            assert!(
                (got - want_us).abs() <= want_us / 64.0 + 1e-9,
                "p{p}: got {got} us, want {want_us} us"
            );
        }
        assert_eq!(h.percentile(100.0), Some(ns(1_000_000)));
    }

    #[test]
    fn single_sample_percentiles_are_exact() {
        let mut h = LatencyHistogram::new();
        h.record(ns(3_668_000));
        assert_eq!(h.percentile(50.0), Some(ns(3_668_000)));
        assert_eq!(h.percentile(99.0), Some(ns(3_668_000)));
    }

    #[test]
    fn empty_histogram_has_no_percentiles() {
        assert_eq!(LatencyHistogram::new().percentile(50.0), None);
    }

    #[test]
    fn negatives_clamp_to_zero_and_are_counted() {
        let mut h = LatencyHistogram::new();
        h.record(ns(-5_000));
        h.record(ns(10));
        assert_eq!(h.negative_count(), 1);
        assert_eq!(h.percentile(50.0), Some(ns(0)));
        assert_eq!(h.min(), Some(ns(-5_000)));
    }

    #[test]
    fn record_round_trip_and_merge() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for v in [900, 905, 70_000] {
            a.record(ns(v));
        }
        b.record(ns(-1));
        let r = a.to_record();
        assert_eq!(r.buckets.len(), 2);
        assert_eq!(LatencyHistogram::from_record(&r).unwrap(), a);
        a.merge(&b);
        assert_eq!(a.count(), 4);
        assert_eq!(a.negative_count(), 1);
        assert_eq!(a.min(), Some(ns(-1)));
        let r = a.to_record();
        assert_eq!(LatencyHistogram::from_record(&r).unwrap(), a);
    }

    #[test]
    fn bad_records_are_rejected() {
        let mut h = LatencyHistogram::new();
        h.record(ns(1000));
        let good = h.to_record();
        let mut r = good.clone();
        r.buckets[0].upper_ns += 1;
        assert!(matches!(
            LatencyHistogram::from_record(&r),
            Err(HistogramError::BadBucket { position: 0, .. })
        ));
        let mut r = good.clone();
        r.count = 7;
        assert!(matches!(
            LatencyHistogram::from_record(&r),
            Err(HistogramError::CountMismatch { .. })
        ));
        let mut r = good.clone();
        r.buckets.push(r.buckets[0]);
        r.count = 2;
        assert!(matches!(
            LatencyHistogram::from_record(&r),
            Err(HistogramError::Unordered { position: 1 })
        ));
        let mut r = good.clone();
        r.scheme = "hdr".into();
        assert!(matches!(
            LatencyHistogram::from_record(&r),
            Err(HistogramError::UnknownScheme(_))
        ));
        let mut r = good;
        r.min_ns = None;
        assert_eq!(
            LatencyHistogram::from_record(&r),
            Err(HistogramError::BadMinMax)
        );
    }
}
