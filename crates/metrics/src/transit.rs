//! A signed one-way delay.
//!
//! One-way delays (`--trip-times` burst latency, UDP packet latency) are the
//! difference of two clocks on two hosts. With imperfect clock sync the
//! difference can be negative, which `std::time::Duration` cannot hold. A
//! negative transit is data, not an error: the accumulators count and flag
//! it, and never panic on it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A signed duration with nanosecond resolution (range ±292 years).
///
/// Constructed from two timestamps taken on (possibly) different clocks that
/// share an epoch, e.g. `CLOCK_REALTIME` on both hosts as iperf 2 does.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Transit {
    nanos: i64,
}

impl Transit {
    /// Zero delay.
    pub const ZERO: Transit = Transit { nanos: 0 };

    /// `received - sent`, both measured from the same epoch (for trip-times:
    /// the UNIX epoch of `CLOCK_REALTIME`). Saturates at the i64 range.
    pub fn between(sent: Duration, received: Duration) -> Transit {
        let s = i128::try_from(sent.as_nanos()).unwrap_or(i128::MAX);
        let r = i128::try_from(received.as_nanos()).unwrap_or(i128::MAX);
        let d = r - s;
        let nanos = i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX });
        Transit { nanos }
    }

    /// A transit of exactly `nanos` nanoseconds (may be negative).
    pub const fn from_nanos(nanos: i64) -> Transit {
        Transit { nanos }
    }

    /// A non-negative transit from a `Duration` (saturating).
    pub fn from_duration(d: Duration) -> Transit {
        Transit {
            nanos: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        }
    }

    /// Nanoseconds, signed.
    pub const fn as_nanos(self) -> i64 {
        self.nanos
    }

    /// Seconds as a float (signed), the unit iperf 2's statistics use internally.
    pub fn as_secs_f64(self) -> f64 {
        self.nanos as f64 * 1e-9
    }

    /// Milliseconds as a float (signed), the unit iperf 2 prints.
    pub fn as_millis_f64(self) -> f64 {
        self.nanos as f64 * 1e-6
    }

    /// True when the receiver's clock read earlier than the sender's (clock skew).
    pub const fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// The magnitude as a `Duration`.
    pub fn abs(self) -> Duration {
        Duration::from_nanos(self.nanos.unsigned_abs())
    }

    /// `Some(duration)` when non-negative.
    pub fn to_duration(self) -> Option<Duration> {
        u64::try_from(self.nanos).ok().map(Duration::from_nanos)
    }

    /// From float seconds (rounded to the nearest nanosecond, saturating; NaN gives zero).
    pub fn from_secs_f64(secs: f64) -> Transit {
        let ns = (secs * 1e9).round();
        // `as` saturates for out-of-range floats and maps NaN to 0: exactly what we want.
        Transit { nanos: ns as i64 }
    }
}

impl fmt::Display for Transit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} ms", self.as_millis_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn between_is_signed() {
        let t = Transit::between(
            Duration::from_micros(1_000_010),
            Duration::from_micros(1_000_000),
        );
        assert_eq!(t.as_nanos(), -10_000);
        assert!(t.is_negative());
        assert_eq!(t.abs(), Duration::from_micros(10));
        assert_eq!(t.to_duration(), None);
        let t = Transit::between(Duration::from_secs(5), Duration::from_millis(5_003));
        assert_eq!(t.to_duration(), Some(Duration::from_millis(3)));
        assert!((t.as_millis_f64() - 3.0).abs() < 1e-12);
    }

    #[test]
    fn extreme_inputs_saturate() {
        let t = Transit::between(Duration::ZERO, Duration::MAX);
        assert_eq!(t.as_nanos(), i64::MAX);
        let t = Transit::between(Duration::MAX, Duration::ZERO);
        assert_eq!(t.as_nanos(), i64::MIN);
        assert_eq!(Transit::from_secs_f64(f64::NAN), Transit::ZERO);
        assert_eq!(Transit::from_secs_f64(1e300).as_nanos(), i64::MAX);
    }
}
