//! Report intervals: which interval a moment belongs to, and its bounds.
//!
//! All times are offsets from the test start (the caller subtracts its own
//! start `Instant`/timestamp), so this module never reads a clock.
//! iperf 2 prints interval bounds with 4 decimals (`0.0000-1.0000 sec`,
//! "fast sampling" builds such as Debian's 2.1.8); see [`Span`]'s `Display`.

use std::fmt;
use std::time::Duration;

/// iperf 2 prints a final partial interval only when it is longer than this
/// fraction of `-i` (`PARTIALPERCENT`, `include/Reporter.h:73`).
pub const PARTIAL_FRACTION: f64 = 0.25;

/// A reporting span `[start, end]`, as offsets from the test start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// Start offset from the test start.
    pub start: Duration,
    /// End offset from the test start.
    pub end: Duration,
}

impl Span {
    /// A span from `start` to `end` (swapped if given in the wrong order).
    pub fn new(start: Duration, end: Duration) -> Span {
        if end < start {
            Span {
                start: end,
                end: start,
            }
        } else {
            Span { start, end }
        }
    }

    /// `[0, end]`, the span of a summary line.
    pub fn from_zero(end: Duration) -> Span {
        Span {
            start: Duration::ZERO,
            end,
        }
    }

    /// `end - start`.
    pub fn len(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }

    /// True for a zero-length span.
    pub fn is_empty(&self) -> bool {
        self.len().is_zero()
    }

    /// Length in seconds.
    pub fn secs(&self) -> f64 {
        self.len().as_secs_f64()
    }
}

impl fmt::Display for Span {
    /// iperf 2's `%4.4f-%4.4f` (without the trailing ` sec`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:4.4}-{:4.4}",
            self.start.as_secs_f64(),
            self.end.as_secs_f64()
        )
    }
}

/// Fixed-length report intervals (`-i`), starting at the test start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalClock {
    every: Duration,
}

impl IntervalClock {
    /// Intervals of `every` (must be non-zero; zero is raised to 1 ns).
    pub fn new(every: Duration) -> IntervalClock {
        IntervalClock {
            every: every.max(Duration::from_nanos(1)),
        }
    }

    /// The interval length.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Index (0-based) of the interval containing offset `at`. A moment exactly
    /// on a boundary belongs to the interval that starts there.
    pub fn index_of(&self, at: Duration) -> u64 {
        u64::try_from(at.as_nanos() / self.every.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The span of interval `index`.
    pub fn span_of(&self, index: u64) -> Span {
        let start = mul(self.every, index);
        Span {
            start,
            end: start.saturating_add(self.every),
        }
    }

    /// The first boundary strictly after `at` (when the caller should emit the next report).
    pub fn next_boundary(&self, at: Duration) -> Duration {
        self.span_of(self.index_of(at)).end
    }

    /// Whether a final partial interval `span` is long enough to print
    /// (longer than a quarter of the interval, as iperf 2 decides).
    pub fn is_significant_partial(&self, span: Span) -> bool {
        span.secs() > self.every.as_secs_f64() * PARTIAL_FRACTION
    }
}

fn mul(d: Duration, n: u64) -> Duration {
    let ns = d.as_nanos().saturating_mul(u128::from(n));
    let secs = u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (ns % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn span_prints_like_fast_sampling_iperf2() {
        assert_eq!(Span::new(ms(0), ms(1000)).to_string(), "0.0000-1.0000");
        assert_eq!(
            Span::new(ms(2000), Duration::from_micros(2_996_400)).to_string(),
            "2.0000-2.9964"
        );
        assert_eq!(
            Span::new(ms(9000), ms(10_000)).to_string(),
            "9.0000-10.0000"
        );
        assert_eq!(Span::new(ms(5), ms(1)).start, ms(1));
    }

    #[test]
    fn index_and_bounds() {
        let c = IntervalClock::new(ms(1000));
        assert_eq!(c.index_of(ms(0)), 0);
        assert_eq!(c.index_of(ms(999)), 0);
        assert_eq!(c.index_of(ms(1000)), 1);
        assert_eq!(c.index_of(ms(2500)), 2);
        assert_eq!(c.span_of(2), Span::new(ms(2000), ms(3000)));
        assert_eq!(c.next_boundary(ms(2500)), ms(3000));
        assert_eq!(c.next_boundary(ms(3000)), ms(4000));
        let c = IntervalClock::new(ms(250));
        assert_eq!(c.span_of(3), Span::new(ms(750), ms(1000)));
    }

    #[test]
    fn partial_threshold_is_a_quarter_interval() {
        let c = IntervalClock::new(ms(1000));
        assert!(!c.is_significant_partial(Span::new(ms(3000), ms(3021))));
        assert!(c.is_significant_partial(Span::new(ms(2000), Duration::from_micros(2_996_400))));
        assert!(!c.is_significant_partial(Span::new(ms(2000), ms(2250))));
    }

    #[test]
    fn zero_interval_does_not_divide_by_zero() {
        let c = IntervalClock::new(Duration::ZERO);
        assert_eq!(c.every(), Duration::from_nanos(1));
        assert_eq!(c.index_of(ms(1)), 1_000_000);
    }
}
