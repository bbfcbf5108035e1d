//! Time types shared by the wire format, the session core and the drivers.
//!
//! * A point in time on some clock is a [`Duration`] since that clock's epoch
//!   (for [`crate::packet::ClockId::Realtime`], the Unix epoch), in nanoseconds on the wire.
//! * A difference that can be negative (a clock offset, a one-way delay computed with an
//!   estimated offset, an IPDV) is a [`SignedDuration`].

use std::fmt;
use std::time::Duration;

/// A signed span of time with nanosecond resolution (about ±292 years).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SignedDuration {
    nanos: i64,
}

impl SignedDuration {
    /// Zero.
    pub const ZERO: SignedDuration = SignedDuration { nanos: 0 };

    /// From signed nanoseconds.
    pub const fn from_nanos(nanos: i64) -> SignedDuration {
        SignedDuration { nanos }
    }

    /// Signed nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.nanos
    }

    /// Seconds as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.nanos as f64 / 1e9
    }

    /// Milliseconds as a float (for display).
    pub fn as_millis_f64(self) -> f64 {
        self.nanos as f64 / 1e6
    }

    /// `a - b`, saturating at the `i64` range.
    pub fn between(a: Duration, b: Duration) -> SignedDuration {
        let d = a.as_nanos() as i128 - b.as_nanos() as i128;
        SignedDuration::from_i128(d)
    }

    /// From a positive duration (saturating).
    pub fn from_duration(d: Duration) -> SignedDuration {
        SignedDuration::from_i128(d.as_nanos() as i128)
    }

    pub(crate) fn from_i128(n: i128) -> SignedDuration {
        SignedDuration {
            nanos: n.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        }
    }

    /// The magnitude as a [`Duration`].
    pub fn abs(self) -> Duration {
        Duration::from_nanos(self.nanos.unsigned_abs())
    }

    /// `Some(duration)` if non-negative.
    pub fn to_duration(self) -> Option<Duration> {
        u64::try_from(self.nanos).ok().map(Duration::from_nanos)
    }

    /// Saturating sum.
    pub fn saturating_add(self, other: SignedDuration) -> SignedDuration {
        SignedDuration {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    /// Saturating difference.
    pub fn saturating_sub(self, other: SignedDuration) -> SignedDuration {
        SignedDuration {
            nanos: self.nanos.saturating_sub(other.nanos),
        }
    }
}

impl fmt::Display for SignedDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} ms", self.as_millis_f64())
    }
}

/// `t + d` for a possibly negative `d`, `None` if the result would be before the epoch.
pub fn offset_time(t: Duration, d: SignedDuration) -> Option<Duration> {
    let n = t.as_nanos() as i128 + d.as_nanos() as i128;
    u64::try_from(n).ok().map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn between_is_signed() {
        let a = Duration::from_millis(5);
        let b = Duration::from_millis(7);
        assert_eq!(SignedDuration::between(a, b).as_nanos(), -2_000_000);
        assert_eq!(SignedDuration::between(b, a).as_nanos(), 2_000_000);
        assert_eq!(
            SignedDuration::between(a, b).abs(),
            Duration::from_millis(2)
        );
        assert_eq!(SignedDuration::between(a, b).to_duration(), None);
    }

    #[test]
    fn offset_time_saturates_at_epoch() {
        let t = Duration::from_nanos(10);
        assert_eq!(offset_time(t, SignedDuration::from_nanos(-11)), None);
        assert_eq!(
            offset_time(t, SignedDuration::from_nanos(-10)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            offset_time(t, SignedDuration::from_nanos(5)),
            Some(Duration::from_nanos(15))
        );
    }
}
