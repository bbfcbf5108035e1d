//! Quantiles (percentiles) with exactly one definition, used everywhere in bloatlab.
//!
//! # Definition
//!
//! Linear interpolation between closest ranks: Hyndman & Fan (1996) *type 7*, which is
//! also numpy's default (`method="linear"`), R's default `quantile(type = 7)` and
//! Excel's `PERCENTILE.INC`. For sorted samples `x[0] <= … <= x[n-1]` and `q` in
//! `[0, 1]`:
//!
//! ```text
//! h = (n - 1) * q
//! Q(q) = x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])
//! ```
//!
//! so `Q(0)` is the minimum, `Q(1)` the maximum, `Q(0.5)` the usual median (the mean
//! of the two middle samples for even `n`), and the result always lies in
//! `[min, max]` and never decreases as `q` grows.
//!
//! Durations are interpolated in whole nanoseconds (rounded to nearest).
//!
//! # Why this one
//!
//! It is what flent's reducers get from numpy (`np.percentile(data, 99)` in
//! `flent/combiners.py`), so a bloatlab p99 and a flent p99 over the same samples agree
//! (flent's input can differ: resampled grid values, and idle time unless
//! `--data-cutoff` is given). The popular
//! `summarize_pings.sh` ping summary instead prints the 2nd-smallest sample as "10pct",
//! the lower middle sample as the median, and `arr[int(N*0.9)]` as "90pct"; the tests
//! below pin that we do not reproduce those mistakes.

use std::time::Duration;

/// Why a quantile could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum QuantileError {
    /// There were no samples (or only NaNs, which are ignored).
    #[error("no samples to take a quantile of")]
    Empty,
    /// `q` was NaN or outside `[0, 1]`.
    #[error("quantile {q} is not in [0, 1]")]
    InvalidQuantile {
        /// The rejected value.
        q: f64,
    },
}

fn check_q(q: f64) -> Result<(), QuantileError> {
    if (0.0..=1.0).contains(&q) {
        Ok(())
    } else {
        Err(QuantileError::InvalidQuantile { q })
    }
}

/// Rank position `h = (n - 1) * q` split into its integer part and fraction.
fn rank(n: usize, q: f64) -> (usize, f64) {
    let h = (n - 1) as f64 * q;
    let lo = h.floor();
    // `h <= n - 1` because `q <= 1`, so the cast cannot exceed the last index.
    (lo as usize, h - lo)
}

/// The `q`-quantile of already **sorted** durations (ascending). See the module docs
/// for the definition. Unsorted input gives a meaningless (but panic-free) answer.
pub fn quantile_sorted(sorted: &[Duration], q: f64) -> Result<Duration, QuantileError> {
    check_q(q)?;
    if sorted.is_empty() {
        return Err(QuantileError::Empty);
    }
    let (lo, frac) = rank(sorted.len(), q);
    let base = sorted[lo];
    let Some(&next) = sorted.get(lo + 1) else {
        return Ok(base);
    };
    let gap = next.saturating_sub(base).as_nanos();
    // Float rounding could push the step a hair past the gap; clamp so the result
    // stays within [base, next].
    let step = ((frac * gap as f64).round() as u128).min(gap);
    Ok(base.saturating_add(duration_from_nanos(step)))
}

/// The `q`-quantile of durations in any order (copies and sorts).
pub fn quantile(samples: &[Duration], q: f64) -> Result<Duration, QuantileError> {
    check_q(q)?;
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    quantile_sorted(&sorted, q)
}

/// The `q`-quantile of floating-point values in any order. NaNs are ignored (they have
/// no rank); infinities are ordinary values. `Err(Empty)` if nothing but NaN remains.
pub fn quantile_f64(values: &[f64], q: f64) -> Result<f64, QuantileError> {
    check_q(q)?;
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return Err(QuantileError::Empty);
    }
    sorted.sort_unstable_by(f64::total_cmp);
    let (lo, frac) = rank(sorted.len(), q);
    let base = sorted[lo];
    match sorted.get(lo + 1) {
        // frac == 0 avoids `inf - inf = NaN` when the neighbours are infinite.
        Some(&next) if frac > 0.0 => Ok(base + frac * (next - base)),
        _ => Ok(base),
    }
}

/// The arithmetic mean of durations, rounded to the nearest nanosecond. `None` if empty.
pub fn mean(samples: &[Duration]) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let total: u128 = samples.iter().map(Duration::as_nanos).sum();
    let n = samples.len() as u128;
    Some(duration_from_nanos((total + n / 2) / n))
}

/// A Duration from a u128 nanosecond count, saturating at `Duration::MAX`.
pub(crate) fn duration_from_nanos(ns: u128) -> Duration {
    const NS_PER_S: u128 = 1_000_000_000;
    match u64::try_from(ns / NS_PER_S) {
        // The remainder is < 1e9, so it fits a u32.
        Ok(secs) => Duration::new(secs, (ns % NS_PER_S) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn ms_vec(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| ms(x)).collect()
    }

    #[test]
    fn hand_computed_small_vector() {
        // x = 10, 20, 30, 40 ms. h = 3q.
        let x = ms_vec(&[40, 10, 30, 20]);
        assert_eq!(quantile(&x, 0.0).unwrap(), ms(10));
        assert_eq!(quantile(&x, 1.0).unwrap(), ms(40));
        // q=0.5: h=1.5 -> 20 + 0.5*10 = 25 ms (mean of the middle two).
        assert_eq!(quantile(&x, 0.5).unwrap(), ms(25));
        // q=0.1: h=0.3 -> 10 + 0.3*10 = 13 ms.
        assert_eq!(quantile(&x, 0.1).unwrap(), ms(13));
        // q=0.9: h=2.7 -> 30 + 0.7*10 = 37 ms.
        assert_eq!(quantile(&x, 0.9).unwrap(), ms(37));
        // q=0.99: h=2.97 -> 39.7 ms.
        assert_eq!(quantile(&x, 0.99).unwrap(), Duration::from_micros(39_700));
    }

    #[test]
    fn one_to_hundred_is_not_the_second_smallest() {
        // summarize_pings.sh prints 2.000 as "10pct" of 1..100 ms. numpy gives 10.9,
        // 50.5 and 90.1 (h = 99q: 9.9 -> 10 + 0.9, 49.5 -> 50.5, 89.1 -> 90.1).
        let x: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(quantile(&x, 0.10).unwrap(), Duration::from_micros(10_900));
        assert_eq!(quantile(&x, 0.50).unwrap(), Duration::from_micros(50_500));
        assert_eq!(quantile(&x, 0.90).unwrap(), Duration::from_micros(90_100));
        assert_eq!(quantile(&x, 0.99).unwrap(), Duration::from_micros(99_010));
        assert_ne!(quantile(&x, 0.10).unwrap(), ms(2));
    }

    #[test]
    fn single_and_pair() {
        assert_eq!(quantile(&[ms(7)], 0.0).unwrap(), ms(7));
        assert_eq!(quantile(&[ms(7)], 0.37).unwrap(), ms(7));
        assert_eq!(quantile(&[ms(7)], 1.0).unwrap(), ms(7));
        let pair = ms_vec(&[10, 20]);
        assert_eq!(quantile(&pair, 0.5).unwrap(), ms(15));
        assert_eq!(quantile(&pair, 0.1).unwrap(), ms(11));
        assert_eq!(quantile(&pair, 0.9).unwrap(), ms(19));
    }

    #[test]
    fn duplicates() {
        let x = ms_vec(&[5, 5, 5, 5, 9]);
        // h = 4q: q=0.5 -> x[2] = 5; q=0.9 -> h=3.6 -> 5 + 0.6*4 = 7.4.
        assert_eq!(quantile(&x, 0.5).unwrap(), ms(5));
        assert_eq!(quantile(&x, 0.9).unwrap(), Duration::from_micros(7_400));
        assert_eq!(quantile(&ms_vec(&[3, 3, 3]), 0.77).unwrap(), ms(3));
    }

    #[test]
    fn odd_count_median_is_middle_sample() {
        assert_eq!(quantile(&ms_vec(&[1, 100, 3]), 0.5).unwrap(), ms(3));
    }

    #[test]
    fn empty_and_invalid_q_are_errors() {
        assert_eq!(quantile(&[], 0.5), Err(QuantileError::Empty));
        assert!(matches!(
            quantile(&[ms(1)], 1.5),
            Err(QuantileError::InvalidQuantile { .. })
        ));
        assert!(matches!(
            quantile(&[ms(1)], -0.1),
            Err(QuantileError::InvalidQuantile { .. })
        ));
        assert!(matches!(
            quantile(&[ms(1)], f64::NAN),
            Err(QuantileError::InvalidQuantile { .. })
        ));
        assert_eq!(
            quantile_f64(&[f64::NAN, f64::NAN], 0.5),
            Err(QuantileError::Empty)
        );
    }

    #[test]
    fn f64_ignores_nan_and_matches_numpy() {
        let v = [3.0, f64::NAN, 1.0, 2.0, 4.0];
        // Without the NaN: 1,2,3,4 -> q=0.25: h=0.75 -> 1.75 (numpy: 1.75).
        assert!((quantile_f64(&v, 0.25).unwrap() - 1.75).abs() < 1e-12);
        assert!((quantile_f64(&v, 0.5).unwrap() - 2.5).abs() < 1e-12);
        let inf = [1.0, f64::INFINITY];
        assert_eq!(quantile_f64(&inf, 1.0).unwrap(), f64::INFINITY);
        assert_eq!(quantile_f64(&inf, 0.0).unwrap(), 1.0);
    }

    #[test]
    fn mean_rounds_to_nearest_ns() {
        let x = [Duration::from_nanos(1), Duration::from_nanos(2)];
        assert_eq!(mean(&x), Some(Duration::from_nanos(2))); // 1.5 rounds up
        assert_eq!(mean(&[]), None);
        assert_eq!(
            mean(&ms_vec(&[10, 20, 40])),
            Some(Duration::from_nanos(23_333_333))
        );
    }

    #[test]
    fn huge_durations_do_not_overflow() {
        let x = [Duration::MAX, Duration::MAX];
        assert_eq!(quantile(&x, 0.5).unwrap(), Duration::MAX);
        assert_eq!(mean(&x), Some(Duration::MAX));
        let y = [Duration::ZERO, Duration::MAX];
        assert!(quantile(&y, 0.999_999).unwrap() <= Duration::MAX);
    }
}
