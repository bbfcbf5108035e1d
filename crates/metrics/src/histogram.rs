//! A latency histogram (the *distribution* behind the avg/min/max/stdev columns), for JSON
//! output and percentiles: bloatlab's one streaming histogram
//! ([`bloatlab_stats::histogram`], scheme `log2-32-ns`) plus what signed delays need.
//!
//! # Bucketing
//! Values are nanoseconds. Values below 64 ns each get their own bucket (exact). Above that,
//! every power-of-two octave is split into 32 equal sub-buckets, so a bucket is at most 1/32
//! (3.1 %) of its lower bound wide.
//!
//! Negative delays (clock skew between hosts) are counted in
//! [`LatencyHistogram::negative_count`] and placed in the 0 ns bucket, so they rank lowest;
//! the exact signed minimum and maximum are kept beside the buckets.
//!
//! # Percentiles
//! [`LatencyHistogram::percentile`] is the nearest-rank definition of
//! docs/statistics.md §1b (rank = ceil(p/100 · N), at least 1): the exact extreme at the first
//! and last rank, otherwise the midpoint of the bucket holding the rank, clamped to the
//! observed range. Exact below 64 ns; within half a bucket (≤ 1.6 %) above.

use crate::transit::Transit;
use bloatlab_stats::histogram::{LogHistogram, bucket_bounds, bucket_index};
use serde::{Deserialize, Serialize};

/// Number of buckets needed for the whole u64 range.
pub const MAX_BUCKETS: usize = bloatlab_stats::histogram::MAX_BUCKETS;

/// A latency distribution. See the module docs for the bucketing.
#[derive(Debug, Clone, Default)]
pub struct LatencyHistogram {
    /// The buckets; negative delays are recorded as 0 ns.
    core: LogHistogram,
    negative: u64,
    min_ns: i64,
    max_ns: i64,
}

/// Two histograms are equal when they serialize alike (the exact sum is not serialized).
impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &LatencyHistogram) -> bool {
        self.to_record() == other.to_record()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        LatencyHistogram::default()
    }

    /// Record one delay.
    pub fn record(&mut self, t: Transit) {
        let ns = t.as_nanos();
        if self.core.count() == 0 {
            self.min_ns = ns;
            self.max_ns = ns;
        } else {
            self.min_ns = self.min_ns.min(ns);
            self.max_ns = self.max_ns.max(ns);
        }
        if ns < 0 {
            self.negative += 1;
        }
        self.core.record(u64::try_from(ns).unwrap_or(0));
    }

    /// Add every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.count() == 0 {
            return;
        }
        if self.count() == 0 {
            self.min_ns = other.min_ns;
            self.max_ns = other.max_ns;
        } else {
            self.min_ns = self.min_ns.min(other.min_ns);
            self.max_ns = self.max_ns.max(other.max_ns);
        }
        self.core.merge(&other.core);
        self.negative += other.negative;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.core.count()
    }

    /// Number of negative samples (clamped to 0 ns in the buckets).
    pub fn negative_count(&self) -> u64 {
        self.negative
    }

    /// Exact smallest sample.
    pub fn min(&self) -> Option<Transit> {
        (self.count() > 0).then_some(Transit::from_nanos(self.min_ns))
    }

    /// Exact largest sample.
    pub fn max(&self) -> Option<Transit> {
        (self.count() > 0).then_some(Transit::from_nanos(self.max_ns))
    }

    /// The nearest-rank percentile `p` (0..=100). `None` when empty or `p` is not finite.
    /// A negative extreme reads as its exact signed value; other ranks as bucket midpoints.
    pub fn percentile(&self, p: f64) -> Option<Transit> {
        if !p.is_finite() {
            return None;
        }
        let q = p.clamp(0.0, 100.0) / 100.0;
        let rank = ((q * self.count() as f64).ceil() as u64).clamp(1, self.count().max(1));
        if rank == 1 {
            return self.min().map(|m| Transit::from_nanos(m.as_nanos().max(0)));
        }
        let ns = self.core.quantile(q)?;
        Some(Transit::from_nanos(i64::try_from(ns).unwrap_or(i64::MAX)))
    }

    /// Non-empty buckets as `(lower_ns, upper_ns, count)`, inclusive bounds, ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.core
            .buckets()
            .map(|b| (b.lower_ns, b.upper_ns, b.count))
    }

    /// The serializable form (see [`HistogramRecord`]).
    pub fn to_record(&self) -> HistogramRecord {
        HistogramRecord {
            scheme: HISTOGRAM_SCHEME.to_string(),
            count: self.count(),
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
        let mut last: Option<usize> = None;
        let mut parts = Vec::with_capacity(r.buckets.len());
        for (pos, b) in r.buckets.iter().enumerate() {
            let idx = bucket_index(b.lower_ns);
            if bucket_bounds(idx) != Some((b.lower_ns, b.upper_ns)) {
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
            parts.push((idx as u64, b.count));
        }
        let total = parts
            .iter()
            .try_fold(0u64, |t, (_, c)| t.checked_add(*c))
            .ok_or(HistogramError::CountOverflow)?;
        if total != r.count || r.negative_count > total {
            let declared = if total != r.count {
                r.count
            } else {
                r.negative_count
            };
            return Err(HistogramError::CountMismatch {
                declared,
                buckets: total,
            });
        }
        let (min_ns, max_ns) = match (total, r.min_ns, r.max_ns) {
            (0, _, _) => (0, 0),
            (_, Some(min), Some(max)) if min <= max => (min, max),
            _ => return Err(HistogramError::BadMinMax),
        };
        // The buckets hold negative delays at 0 ns.
        let clamp = |v: i64| u64::try_from(v).unwrap_or(0);
        let core = LogHistogram::from_parts(parts, Some((clamp(min_ns), clamp(max_ns))), 0)
            .map_err(|e| match e {
                bloatlab_stats::histogram::HistogramError::CountOverflow => {
                    HistogramError::CountOverflow
                }
                _ => HistogramError::BadMinMax,
            })?;
        Ok(LatencyHistogram {
            core,
            negative: r.negative_count,
            min_ns,
            max_ns,
        })
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
            let (lo, hi) = bucket_bounds(i).unwrap();
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "gap before bucket {i}");
            }
            assert_eq!(bucket_index(lo), i);
            assert_eq!(bucket_index(hi), i);
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
        assert_eq!(bucket_bounds(MAX_BUCKETS), None);
    }

    #[test]
    fn bucket_width_is_at_most_one_32nd() {
        for i in 64..MAX_BUCKETS {
            let (lo, hi) = bucket_bounds(i).unwrap();
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
