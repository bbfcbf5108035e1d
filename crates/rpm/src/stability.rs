//! Stability and confidence, draft-ietf-ippm-responsiveness-09 sections 5.4 and 5.4.1.
//!
//! A series (moving-average goodput, or responsiveness) is **stable** at its newest value
//! when the standard deviation of its last MAD values is less than SDT times the newest
//! value. We use the population standard deviation (divide by MAD): the draft does not say
//! which, and with MAD = 4 the sample form would be 15 % larger, i.e. stricter.
//!
//! **Confidence** of a figure (5.4.1): *Low* when its stage did not run MAD intervals (the
//! window is not full), *Medium* when it ran MAD intervals or more but never became
//! stable, *High* when it became stable.

use serde::{Deserialize, Serialize};

/// The draft's confidence in a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Fewer than MAD intervals of the stage ran.
    Low,
    /// MAD intervals or more ran, never stable.
    Medium,
    /// Stable by the standard-deviation rule.
    High,
}

impl Confidence {
    /// The confidence of a stage that ran `intervals` intervals and did (or did not) reach
    /// stability.
    pub fn of(intervals: usize, mad: usize, stable: bool) -> Confidence {
        if stable {
            Confidence::High
        } else if intervals >= mad {
            Confidence::Medium
        } else {
            Confidence::Low
        }
    }

    /// `Low`, `Medium`, `High`.
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "Low",
            Confidence::Medium => "Medium",
            Confidence::High => "High",
        }
    }
}

impl std::fmt::Display for Confidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Population standard deviation; `None` for no values.
pub fn stdev(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    Some(var.sqrt())
}

/// Whether `values` is stable at its last value: at least `mad` values, and the standard
/// deviation of the last `mad` below `tolerance` times the last one (a zero or non-finite
/// last value is never stable).
pub fn is_stable(values: &[f64], mad: usize, tolerance: f64) -> bool {
    if mad == 0 || values.len() < mad {
        return false;
    }
    let window = &values[values.len() - mad..];
    let current = window[mad - 1];
    if !(current.is_finite() && current > 0.0) {
        return false;
    }
    stdev(window).is_some_and(|sd| sd < tolerance * current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdev_against_known_answers() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population sd 2.
        assert_eq!(stdev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), Some(2.0));
        assert_eq!(stdev(&[3.0]), Some(0.0));
        assert_eq!(stdev(&[]), None);
    }

    #[test]
    fn stable_needs_mad_values_and_a_small_spread() {
        assert!(!is_stable(&[100.0, 100.0, 100.0], 4, 0.05), "only 3 values");
        assert!(is_stable(&[100.0, 100.0, 100.0, 100.0], 4, 0.05));
        // 96, 100, 104, 100: mean 100, sd sqrt(8) = 2.83 < 5: stable.
        assert!(is_stable(&[96.0, 100.0, 104.0, 100.0], 4, 0.05));
        // 90, 100, 110, 100: sd sqrt(50) = 7.07 > 5: not.
        assert!(!is_stable(&[90.0, 100.0, 110.0, 100.0], 4, 0.05));
        // Only the last MAD count: an early ramp does not matter.
        assert!(is_stable(&[1.0, 50.0, 100.0, 100.0, 100.0, 100.0], 4, 0.05));
        // The edge: sd exactly equal to the tolerance is not "less than".
        // 95, 105, 95, 105 -> mean 100, sd 5; current 105 -> 5 < 5.25 stable;
        // 105, 95, 105, 95 -> current 95 -> 5 < 4.75 no.
        assert!(is_stable(&[95.0, 105.0, 95.0, 105.0], 4, 0.05));
        assert!(!is_stable(&[105.0, 95.0, 105.0, 95.0], 4, 0.05));
        assert!(
            !is_stable(&[0.0; 4], 4, 0.05),
            "nothing moved is not stable"
        );
    }

    #[test]
    fn confidence_levels() {
        assert_eq!(Confidence::of(3, 4, false), Confidence::Low);
        assert_eq!(Confidence::of(4, 4, false), Confidence::Medium);
        assert_eq!(Confidence::of(9, 4, false), Confidence::Medium);
        assert_eq!(Confidence::of(4, 4, true), Confidence::High);
        assert_eq!(Confidence::High.to_string(), "High");
        assert!(Confidence::Low < Confidence::High);
    }
}
