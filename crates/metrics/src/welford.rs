//! Running mean / min / max / sample standard deviation (Welford's method).
//!
//! This is exactly iperf 2's `reporter_update_mmm` (`src/Reporter.c:384`):
//! `vd = x - mean; mean += vd / n; m2 += vd * (x - mean)`, and the printed
//! stdev is the *sample* stdev `sqrt(m2 / (n - 1))`, shown as 0 below two
//! samples. [`LatencyStats`] is the typed wrapper used for one-way delays.

use crate::transit::Transit;
use std::time::Duration;

/// Welford accumulator over plain `f64` samples. The unit is whatever the
/// caller records; typed users go through [`LatencyStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    count: u64,
    sum: f64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Welford {
    /// An empty accumulator.
    pub const fn new() -> Welford {
        Welford {
            count: 0,
            sum: 0.0,
            mean: 0.0,
            m2: 0.0,
            min: 0.0,
            max: 0.0,
        }
    }

    /// Rebuild from the moments a peer sent (e.g. iperf 2's UDP AckFIN
    /// `server_hdr`, which carries count, sum, mean, M2, min and max).
    pub fn from_parts(count: u64, sum: f64, mean: f64, m2: f64, min: f64, max: f64) -> Welford {
        Welford {
            count,
            sum,
            mean,
            m2,
            min,
            max,
        }
    }

    /// Add one sample. Non-finite samples are ignored so that one bad value
    /// cannot poison the moments.
    pub fn record(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        self.count += 1;
        self.sum += x;
        if self.count == 1 {
            self.mean = x;
            self.m2 = 0.0;
            self.min = x;
            self.max = x;
            return;
        }
        let vd = x - self.mean;
        self.mean += vd / self.count as f64;
        self.m2 += vd * (x - self.mean);
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    /// Combine two accumulators (Chan et al. parallel variance), as if every
    /// sample of `other` had been recorded into `self`.
    pub fn merge(&mut self, other: &Welford) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let n_a = self.count as f64;
        let n_b = other.count as f64;
        let n = n_a + n_b;
        let delta = other.mean - self.mean;
        self.mean += delta * n_b / n;
        self.m2 += other.m2 + delta * delta * n_a * n_b / n;
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of samples.
    pub const fn count(&self) -> u64 {
        self.count
    }
    /// Sum of samples.
    pub const fn sum(&self) -> f64 {
        self.sum
    }
    /// Running mean (0 when empty).
    pub const fn mean(&self) -> f64 {
        self.mean
    }
    /// Sum of squared deviations from the mean (Welford's M2).
    pub const fn m2(&self) -> f64 {
        self.m2
    }
    /// Smallest sample (0 when empty).
    pub const fn min(&self) -> f64 {
        self.min
    }
    /// Largest sample (0 when empty).
    pub const fn max(&self) -> f64 {
        self.max
    }
    /// Sample standard deviation `sqrt(M2/(n-1))`; 0 below two samples, as iperf 2 prints.
    pub fn stdev(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2 / (self.count - 1) as f64).max(0.0).sqrt()
        }
    }
}

/// Typed one-way-delay statistics: mean/min/max/stdev of [`Transit`]s plus a
/// count of negative samples (clock skew), which are still included in the
/// moments exactly as iperf 2 does, but flagged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyStats {
    w: Welford,
    negative: u64,
}

impl LatencyStats {
    /// Empty statistics.
    pub const fn new() -> LatencyStats {
        LatencyStats {
            w: Welford::new(),
            negative: 0,
        }
    }

    /// Record one delay.
    pub fn record(&mut self, t: Transit) {
        if t.is_negative() {
            self.negative += 1;
        }
        self.w.record(t.as_secs_f64());
    }

    /// Combine with another set of statistics.
    pub fn merge(&mut self, other: &LatencyStats) {
        self.w.merge(&other.w);
        self.negative += other.negative;
    }

    /// Rebuild from raw moments in seconds (peer reports).
    pub fn from_welford_secs(w: Welford, negative: u64) -> LatencyStats {
        LatencyStats { w, negative }
    }

    /// The underlying moments, in seconds.
    pub const fn welford_secs(&self) -> &Welford {
        &self.w
    }
    /// Number of delays recorded.
    pub const fn count(&self) -> u64 {
        self.w.count()
    }
    /// Number of negative delays recorded (receiver clock behind sender clock).
    pub const fn negative_count(&self) -> u64 {
        self.negative
    }
    /// Mean delay (`None` when empty).
    pub fn mean(&self) -> Option<Transit> {
        (self.count() > 0).then(|| Transit::from_secs_f64(self.w.mean()))
    }
    /// Smallest delay (`None` when empty).
    pub fn min(&self) -> Option<Transit> {
        (self.count() > 0).then(|| Transit::from_secs_f64(self.w.min()))
    }
    /// Largest delay (`None` when empty).
    pub fn max(&self) -> Option<Transit> {
        (self.count() > 0).then(|| Transit::from_secs_f64(self.w.max()))
    }
    /// Sample standard deviation (zero below two samples; saturates at `Duration::MAX`).
    pub fn stdev(&self) -> Duration {
        let s = self.w.stdev();
        Duration::try_from_secs_f64(s).unwrap_or(if s > 0.0 {
            Duration::MAX
        } else {
            Duration::ZERO
        })
    }
    /// Mean in seconds as f64 (0 when empty): the `W` of Little's law and the
    /// delay of NetPwr.
    pub fn mean_secs(&self) -> f64 {
        if self.count() == 0 {
            0.0
        } else {
            self.w.mean()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_textbook_sample_stdev() {
        // 2,4,4,4,5,5,7,9: mean 5, population var 4, sample var 32/7.
        let mut w = Welford::new();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            w.record(x);
        }
        assert_eq!(w.count(), 8);
        assert!((w.mean() - 5.0).abs() < 1e-12);
        assert!((w.m2() - 32.0).abs() < 1e-12);
        assert!((w.stdev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(w.min(), 2.0);
        assert_eq!(w.max(), 9.0);
        assert_eq!(w.sum(), 40.0);
    }

    #[test]
    fn fewer_than_two_samples_has_zero_stdev() {
        let mut w = Welford::new();
        assert_eq!(w.stdev(), 0.0);
        w.record(3.0);
        assert_eq!(w.stdev(), 0.0);
        assert_eq!((w.min(), w.max(), w.mean()), (3.0, 3.0, 3.0));
    }

    #[test]
    fn merge_equals_sequential() {
        let xs = [0.1, 0.5, 0.25, 3.0, 1.5, 0.001, 2.2];
        let mut all = Welford::new();
        xs.iter().for_each(|&x| all.record(x));
        let mut a = Welford::new();
        let mut b = Welford::new();
        xs[..3].iter().for_each(|&x| a.record(x));
        xs[3..].iter().for_each(|&x| b.record(x));
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert!((a.mean() - all.mean()).abs() < 1e-12);
        assert!((a.m2() - all.m2()).abs() < 1e-12);
        assert_eq!((a.min(), a.max()), (all.min(), all.max()));
    }

    #[test]
    fn non_finite_samples_are_ignored() {
        let mut w = Welford::new();
        w.record(f64::NAN);
        w.record(f64::INFINITY);
        w.record(1.0);
        assert_eq!(w.count(), 1);
        assert_eq!(w.mean(), 1.0);
    }

    #[test]
    fn negative_transits_are_counted_and_kept() {
        let mut s = LatencyStats::new();
        s.record(Transit::from_nanos(-2_000_000));
        s.record(Transit::from_nanos(4_000_000));
        assert_eq!(s.negative_count(), 1);
        assert_eq!(s.count(), 2);
        assert_eq!(s.mean(), Some(Transit::from_nanos(1_000_000)));
        assert_eq!(s.min(), Some(Transit::from_nanos(-2_000_000)));
        assert_eq!(s.max(), Some(Transit::from_nanos(4_000_000)));
    }
}
