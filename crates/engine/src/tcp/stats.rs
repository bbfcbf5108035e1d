//! The interval ticker that drives METRICS' accumulators from a data loop
//! (sans-IO: times are offsets from the stream's start, passed in).

use bloatlab_metrics::interval::{IntervalClock, Span};
use bloatlab_metrics::tcp_recv::{TcpRecvSnapshot, TcpRecvStats};
use bloatlab_metrics::tcp_send::{TcpSendSnapshot, TcpSendStats};
use std::time::Duration;

/// Something that can close an interval and report a total.
pub trait Accumulator {
    type Snap;
    fn take_interval(&mut self, span: Span) -> Self::Snap;
    fn total(&self, span: Span) -> Self::Snap;
}

impl Accumulator for TcpSendStats {
    type Snap = TcpSendSnapshot;
    fn take_interval(&mut self, span: Span) -> TcpSendSnapshot {
        TcpSendStats::take_interval(self, span)
    }
    fn total(&self, span: Span) -> TcpSendSnapshot {
        TcpSendStats::total(self, span)
    }
}

impl Accumulator for TcpRecvStats {
    type Snap = TcpRecvSnapshot;
    fn take_interval(&mut self, span: Span) -> TcpRecvSnapshot {
        TcpRecvStats::take_interval(self, span)
    }
    fn total(&self, span: Span) -> TcpRecvSnapshot {
        TcpRecvStats::total(self, span)
    }
}

/// Knows when the current `-i` interval ends.
#[derive(Debug, Clone)]
pub struct Ticker {
    clock: Option<IntervalClock>,
    next: Option<Duration>,
    last: Duration,
}

impl Ticker {
    /// `None` = final report only.
    pub fn new(interval: Option<Duration>) -> Ticker {
        let clock = interval.map(IntervalClock::new);
        Ticker {
            next: clock.map(|c| c.every()),
            clock,
            last: Duration::ZERO,
        }
    }

    /// True when `at` has reached the current interval's end.
    pub fn due(&self, at: Duration) -> bool {
        self.next.is_some_and(|n| at >= n)
    }

    /// Closes every interval that ended by `at`, at its nominal bounds
    /// (iperf prints `1.0000-2.0000` even when the boundary is noticed late);
    /// intervals skipped during a stall come back as empty snapshots.
    pub fn close<A: Accumulator>(&mut self, at: Duration, acc: &mut A) -> Vec<A::Snap> {
        let mut out = Vec::new();
        while let (Some(n), Some(clock)) = (self.next, self.clock) {
            if at < n {
                break;
            }
            out.push(acc.take_interval(Span::new(self.last, n)));
            self.last = n;
            self.next = Some(n + clock.every());
        }
        out
    }

    /// The last partial interval ending at `end`, if it is long enough to be
    /// worth a line (more than a quarter interval, as iperf 2 prints).
    pub fn partial<A: Accumulator>(&mut self, end: Duration, acc: &mut A) -> Option<A::Snap> {
        let clock = self.clock?;
        let span = Span::new(self.last, end);
        (end > self.last && clock.is_significant_partial(span)).then(|| acc.take_interval(span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_units::Bytes;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn intervals_close_at_nominal_bounds_and_total_adds_up() {
        let mut acc = TcpSendStats::new();
        let mut t = Ticker::new(Some(ms(1000)));
        acc.on_write(Bytes(10));
        assert!(!t.due(ms(999)));
        assert!(t.due(ms(1003)));
        let s = t.close(ms(1003), &mut acc);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].span, Span::new(ms(0), ms(1000)));
        assert_eq!(s[0].bytes, Bytes(10));
        acc.on_write(Bytes(5));
        // A stall skips an interval: it is reported empty.
        let s = t.close(ms(3100), &mut acc);
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].span, Span::new(ms(2000), ms(3000)));
        assert_eq!(s[1].bytes, Bytes(0));
        acc.on_write(Bytes(1));
        let p = t.partial(ms(3500), &mut acc).unwrap();
        assert_eq!(p.span, Span::new(ms(3000), ms(3500)));
        assert_eq!(acc.total(Span::from_zero(ms(3500))).bytes, Bytes(16));
        // A sliver at the end gets no line of its own.
        let mut t2 = Ticker::new(Some(ms(1000)));
        t2.close(ms(1000), &mut acc);
        assert!(t2.partial(ms(1010), &mut acc).is_none());
    }

    #[test]
    fn no_interval_means_nothing_closes() {
        let mut acc = TcpRecvStats::new(Bytes(131_072), false);
        let mut t = Ticker::new(None);
        assert!(!t.due(ms(100_000)));
        assert!(t.close(ms(100_000), &mut acc).is_empty());
        assert!(t.partial(ms(100_000), &mut acc).is_none());
    }
}
