//! The one streaming histogram: where a distribution is too large or too hot to keep every
//! sample (the server's burst latency, the emulator's sojourn and release lateness), it is
//! counted here, and every percentile of such a distribution means the same thing.
//!
//! # Bucketing (scheme [`SCHEME`], `log2-32-ns`)
//! Values are nanoseconds (`u64`). Values below 64 ns each get their own bucket (exact).
//! Above, every power-of-two octave `[2^e, 2^(e+1))` is split into 32 equal sub-buckets, so a
//! bucket is at most 1/32 (3.1 %) of its lower bound wide. The whole `u64` range fits in
//! [`MAX_BUCKETS`] (1,920) buckets; storage grows only up to the highest bucket used.
//!
//! # Percentiles (docs/statistics.md §1b)
//! Nearest rank: the `q`-quantile is the sample of rank `max(1, ceil(q·n))`. Rank 1 is the exact
//! minimum and rank `n` the exact maximum (both are kept); any other rank is reported as the
//! midpoint of its bucket, clamped to the exact minimum and maximum, so within half a bucket
//! (1.6 %) of the true sample. Raw sample sets use [`crate::quantile`] (type 7) instead; the
//! two agree within that bucket error for the sample counts bloatlab records.

use std::fmt;

/// Identifier of the bucketing, stored with every serialized histogram.
pub const SCHEME: &str = "log2-32-ns";
const EXACT: u64 = 64;
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Number of buckets needed for the whole `u64` range.
pub const MAX_BUCKETS: usize = EXACT as usize + (63 - 6 + 1) * SUB as usize;

/// Bucket index of a value in nanoseconds.
pub fn bucket_index(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 6
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    (EXACT + u64::from(e - 6) * SUB + sub) as usize
}

/// Inclusive `(lower, upper)` bounds in nanoseconds of bucket `i`; `None` past the last.
pub fn bucket_bounds(i: usize) -> Option<(u64, u64)> {
    if i >= MAX_BUCKETS {
        return None;
    }
    let i = i as u64;
    if i < EXACT {
        return Some((i, i));
    }
    let k = i - EXACT;
    let shift = (k / SUB) as u32 + 6 - SUB_BITS;
    let low = (SUB + k % SUB) << shift;
    Some((low, low + ((1u64 << shift) - 1)))
}

/// A non-empty bucket: inclusive bounds (ns) and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Position in the scheme (stable across versions of the same [`SCHEME`]).
    pub index: usize,
    /// Smallest value in the bucket.
    pub lower_ns: u64,
    /// Largest value in the bucket.
    pub upper_ns: u64,
    /// Samples in the bucket.
    pub count: u64,
}

/// Why a histogram could not be rebuilt from its parts (they may come from a file or a peer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistogramError {
    /// A bucket index past [`MAX_BUCKETS`].
    BucketOutOfRange(u64),
    /// Bucket counts add up past `u64`.
    CountOverflow,
    /// The exact minimum/maximum are missing or do not bracket the buckets.
    BadMinMax,
}

impl fmt::Display for HistogramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistogramError::BucketOutOfRange(i) => {
                write!(f, "histogram bucket {i} is out of range (scheme {SCHEME})")
            }
            HistogramError::CountOverflow => f.write_str("histogram bucket counts overflow"),
            HistogramError::BadMinMax => {
                f.write_str("histogram minimum/maximum do not bracket its buckets")
            }
        }
    }
}

impl std::error::Error for HistogramError {}

/// A log-linear histogram of nanosecond values; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

/// Equal when they hold the same samples, however much bucket storage each has allocated.
impl PartialEq for LogHistogram {
    fn eq(&self, o: &LogHistogram) -> bool {
        let used = |c: &[u64]| c.len() - c.iter().rev().take_while(|n| **n == 0).count();
        let (a, b) = (
            &self.counts[..used(&self.counts)],
            &o.counts[..used(&o.counts)],
        );
        a == b
            && self.total == o.total
            && self.min == o.min
            && self.max == o.max
            && self.sum == o.sum
    }
}

impl Eq for LogHistogram {}

impl LogHistogram {
    /// An empty histogram.
    pub fn new() -> LogHistogram {
        LogHistogram::default()
    }

    /// An empty histogram whose buckets up to `ns` are allocated now, so recording values up
    /// to there never allocates (for per-packet paths).
    pub fn preallocated(ns: u64) -> LogHistogram {
        LogHistogram {
            counts: vec![0; bucket_index(ns) + 1],
            ..LogHistogram::default()
        }
    }

    /// Records one value.
    pub fn record(&mut self, ns: u64) {
        let i = bucket_index(ns);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        if self.total == 0 {
            self.min = ns;
            self.max = ns;
        } else {
            self.min = self.min.min(ns);
            self.max = self.max.max(ns);
        }
        self.total += 1;
        self.sum += u128::from(ns);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Exact smallest value.
    pub fn min(&self) -> Option<u64> {
        (self.total > 0).then_some(self.min)
    }

    /// Exact largest value.
    pub fn max(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max)
    }

    /// Exact sum of the values.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Exact mean, rounded down.
    pub fn mean(&self) -> Option<u64> {
        (self.total > 0).then(|| u64::try_from(self.sum / u128::from(self.total)).unwrap_or(0))
    }

    /// The nearest-rank `q`-quantile, `q` in 0..=1 (see the module docs). `None` when empty or
    /// `q` is not a number.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 || q.is_nan() {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).clamp(1, self.total);
        if rank == 1 {
            return Some(self.min);
        }
        if rank == self.total {
            return Some(self.max);
        }
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_bounds(i)?;
                return Some((lo + (hi - lo) / 2).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LogHistogram) {
        if other.total == 0 {
            return;
        }
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        if self.total == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.total += other.total;
        self.sum += other.sum;
    }

    /// The values recorded after `earlier`, a snapshot of this histogram: bucket counts and
    /// sums subtracted. The exact extremes of those values are not known; they are taken as
    /// the edges of the lowest and highest non-empty buckets, within this histogram's exact
    /// minimum and maximum (so within one bucket, and exact when the extreme is the newest).
    pub fn since(&self, earlier: &LogHistogram) -> LogHistogram {
        let mut out = LogHistogram::new();
        for (i, &a) in self.counts.iter().enumerate() {
            let n = a.saturating_sub(earlier.counts.get(i).copied().unwrap_or(0));
            let Some((lo, hi)) = bucket_bounds(i).filter(|_| n > 0) else {
                continue;
            };
            if out.counts.len() <= i {
                out.counts.resize(i + 1, 0);
            }
            out.counts[i] = n;
            let (lo, hi) = (lo.max(self.min), hi.min(self.max));
            if out.total == 0 {
                out.min = lo;
            }
            out.max = hi;
            out.total += n;
        }
        out.sum = self.sum.saturating_sub(earlier.sum);
        out
    }

    /// Non-empty buckets, ascending.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .filter_map(|(index, &count)| {
                let (lower_ns, upper_ns) = bucket_bounds(index)?;
                Some(Bucket {
                    index,
                    lower_ns,
                    upper_ns,
                    count,
                })
            })
    }

    /// Rebuilds a histogram from `(index, count)` pairs (repeated indices add up), its exact
    /// extremes and sum. Without extremes (`None`), the edges of the outermost non-empty
    /// buckets stand in. Extremes that do not fall in those buckets are an error.
    pub fn from_parts(
        buckets: impl IntoIterator<Item = (u64, u64)>,
        min_max: Option<(u64, u64)>,
        sum: u128,
    ) -> Result<LogHistogram, HistogramError> {
        let mut h = LogHistogram::new();
        for (index, count) in buckets {
            let i = usize::try_from(index)
                .ok()
                .filter(|&i| i < MAX_BUCKETS)
                .ok_or(HistogramError::BucketOutOfRange(index))?;
            if h.counts.len() <= i {
                h.counts.resize(i + 1, 0);
            }
            h.counts[i] = h.counts[i]
                .checked_add(count)
                .ok_or(HistogramError::CountOverflow)?;
            h.total = h
                .total
                .checked_add(count)
                .ok_or(HistogramError::CountOverflow)?;
        }
        h.sum = sum;
        let ends = (h.buckets().next(), h.buckets().last());
        let (Some(first), Some(last)) = ends else {
            return Ok(h);
        };
        let (min, max) = min_max.unwrap_or((first.lower_ns, last.upper_ns));
        let inside = |v: u64, b: Bucket| b.lower_ns <= v && v <= b.upper_ns;
        if !inside(min, first) || !inside(max, last) {
            return Err(HistogramError::BadMinMax);
        }
        h.min = min;
        h.max = max;
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_whole_range_and_are_at_most_one_32nd_wide() {
        let mut next = 0u64;
        for i in 0..MAX_BUCKETS {
            let (lo, hi) = bucket_bounds(i).unwrap();
            assert_eq!(
                lo,
                next,
                "bucket {i} starts where {} ended",
                i.saturating_sub(1)
            );
            assert!(hi >= lo);
            assert!(lo < EXACT || (hi - lo + 1) as f64 / lo as f64 <= 1.0 / 32.0 + 1e-12);
            assert_eq!(bucket_index(lo), i);
            assert_eq!(bucket_index(hi), i);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
        assert_eq!(bucket_bounds(MAX_BUCKETS), None);
    }

    #[test]
    fn nearest_rank_with_exact_extremes() {
        let mut h = LogHistogram::new();
        assert_eq!(h.quantile(0.5), None);
        for us in 1..=100u64 {
            h.record(us * 1000);
        }
        // Rank 50 is 50 us, rank 99 is 99 us, within half a bucket; extremes exact.
        let within = |got: u64, want: u64| {
            assert!(
                got.abs_diff(want) as f64 <= want as f64 / 64.0,
                "{got} vs {want}"
            )
        };
        within(h.quantile(0.5).unwrap(), 50_000);
        within(h.quantile(0.99).unwrap(), 99_000);
        assert_eq!(h.quantile(0.0), Some(1000));
        assert_eq!(h.quantile(1.0), Some(100_000));
        assert_eq!(h.quantile(f64::NAN), None);
        assert_eq!(h.mean(), Some(50_500));
        // Small values are exact at every rank.
        let mut s = LogHistogram::new();
        for ns in [3, 1, 2, 5] {
            s.record(ns);
        }
        assert_eq!(s.quantile(0.5), Some(2));
        assert_eq!(s.quantile(0.75), Some(3));
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let (mut a, mut b, mut all) = (
            LogHistogram::new(),
            LogHistogram::new(),
            LogHistogram::new(),
        );
        for v in [5u64, 700, 90_000, 12] {
            a.record(v);
            all.record(v);
        }
        for v in [3_000_000u64, 1, 44] {
            b.record(v);
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a, all);
    }

    #[test]
    fn since_isolates_the_newer_values() {
        let mut h = LogHistogram::preallocated(1 << 30);
        for _ in 0..1000 {
            h.record(30_000_000);
        }
        let before = h.clone();
        for us in 1..=100u64 {
            h.record(us * 1000);
        }
        let d = h.since(&before);
        assert_eq!(d.count(), 100);
        assert_eq!(d.sum(), (1..=100u128).sum::<u128>() * 1000);
        assert_eq!(d.min(), Some(1000));
        let max = d.max().unwrap();
        assert!((100_000..=100_000 + 100_000 / 32).contains(&max), "{max}");
    }

    #[test]
    fn rebuilt_from_parts_equals_the_original_and_bad_parts_are_refused() {
        let mut h = LogHistogram::new();
        for v in [7u64, 1_000, 1_001, 5_000_000] {
            h.record(v);
        }
        let parts: Vec<(u64, u64)> = h.buckets().map(|b| (b.index as u64, b.count)).collect();
        let back = LogHistogram::from_parts(parts.clone(), Some((7, 5_000_000)), h.sum()).unwrap();
        assert_eq!(back, h);
        assert_eq!(
            LogHistogram::from_parts([(MAX_BUCKETS as u64, 1)], None, 0),
            Err(HistogramError::BucketOutOfRange(MAX_BUCKETS as u64))
        );
        assert_eq!(
            LogHistogram::from_parts(parts.clone(), Some((8, 5_000_000)), 0),
            Err(HistogramError::BadMinMax)
        );
        assert_eq!(
            LogHistogram::from_parts([(1, u64::MAX), (2, 1)], None, 0),
            Err(HistogramError::CountOverflow)
        );
        let no_extremes = LogHistogram::from_parts(parts, None, 0).unwrap();
        assert_eq!(no_extremes.min(), Some(7));
    }
}
