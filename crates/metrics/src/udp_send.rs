//! UDP sender accumulator: datagrams, write errors, PPS.
//!
//! [`UdpSendStats::on_datagram`] takes the local send time (offset from any
//! fixed epoch, the same as the `start` given to [`UdpSendStats::new`]).
//! PPS is iperf 2's `packets / Σ gaps`, where the first gap is measured from
//! the test start.

use crate::formulas;
use crate::interval::Span;
use crate::tcp_send::per_sec;
use bloatlab_units::Bytes;
use std::time::Duration;

/// What one report line of a UDP sender shows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UdpSendSnapshot {
    /// The reported span.
    pub span: Span,
    /// Payload bytes sent.
    pub bytes: Bytes,
    /// Datagrams sent (`write()` calls that succeeded).
    pub writes: u64,
    /// Non-fatal write errors (e.g. ENOBUFS, EAGAIN).
    pub write_errors: u64,
    /// Σ of gaps between consecutive send times (seconds; on the total: last send − start).
    pub ipg_sum: Duration,
}

impl UdpSendSnapshot {
    /// Packets per second (`writes / ipg_sum`).
    pub fn pps(&self) -> f64 {
        formulas::pps(self.writes, self.ipg_sum.as_secs_f64())
    }

    /// Bytes per second over the span.
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.span)
    }

    /// Sum several streams into a `[SUM]` snapshot over `span`. As iperf 2
    /// does, the sum's gap total is the largest stream's, so its PPS is the
    /// aggregate rate.
    pub fn sum<'a>(
        span: Span,
        parts: impl IntoIterator<Item = &'a UdpSendSnapshot>,
    ) -> UdpSendSnapshot {
        let mut s = UdpSendSnapshot {
            span,
            ..UdpSendSnapshot::default()
        };
        for p in parts {
            s.bytes = s.bytes.saturating_add(p.bytes);
            s.writes += p.writes;
            s.write_errors += p.write_errors;
            s.ipg_sum = s.ipg_sum.max(p.ipg_sum);
        }
        s
    }
}

/// Accumulates a UDP sender's interval and total counters.
#[derive(Debug, Clone)]
pub struct UdpSendStats {
    start: Duration,
    prev_send: Duration,
    last_send: Option<Duration>,
    cur: UdpSendSnapshot,
    tot: UdpSendSnapshot,
}

impl UdpSendStats {
    /// `start`: the test start on the same clock as the send times.
    pub fn new(start: Duration) -> UdpSendStats {
        UdpSendStats {
            start,
            prev_send: start,
            last_send: None,
            cur: UdpSendSnapshot::default(),
            tot: UdpSendSnapshot::default(),
        }
    }

    /// A datagram of `len` payload bytes was sent at `at`.
    pub fn on_datagram(&mut self, len: Bytes, at: Duration) {
        let gap = at.saturating_sub(self.prev_send);
        self.prev_send = at;
        self.last_send = Some(at);
        for s in [&mut self.cur, &mut self.tot] {
            s.bytes = s.bytes.saturating_add(len);
            s.writes += 1;
            s.ipg_sum = s.ipg_sum.saturating_add(gap);
        }
    }

    /// A non-fatal write error.
    pub fn on_write_error(&mut self) {
        self.cur.write_errors += 1;
        self.tot.write_errors += 1;
    }

    /// Close the current interval and start the next.
    pub fn take_interval(&mut self, span: Span) -> UdpSendSnapshot {
        let snap = UdpSendSnapshot { span, ..self.cur };
        self.cur = UdpSendSnapshot::default();
        snap
    }

    /// Whole-test snapshot over `span`; its gap total is last send − start.
    pub fn total(&self, span: Span) -> UdpSendSnapshot {
        UdpSendSnapshot {
            span,
            ipg_sum: self
                .last_send
                .map_or(Duration::ZERO, |l| l.saturating_sub(self.start)),
            ..self.tot
        }
    }

    /// Datagrams sent since the start (for `Sent N datagrams`).
    pub fn datagrams(&self) -> u64 {
        self.tot.writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pps_is_packets_over_gap_sum() {
        let t0 = Duration::from_secs(50);
        let mut s = UdpSendStats::new(t0);
        // 851 datagrams every 1176 us after a 100 us start delay.
        for i in 0..851u64 {
            s.on_datagram(Bytes(1470), t0 + Duration::from_micros(100 + 1176 * i));
        }
        s.on_write_error();
        let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
        assert_eq!((snap.writes, snap.write_errors), (851, 1));
        assert_eq!(snap.bytes, Bytes(851 * 1470));
        let want = 851.0 / (100e-6 + 850.0 * 1176e-6);
        assert!((snap.pps() - want).abs() < 1e-6);
        assert_eq!(s.datagrams(), 851);
        let tot = s.total(Span::from_zero(Duration::from_secs(1)));
        assert_eq!(tot.ipg_sum, Duration::from_micros(100 + 1176 * 850));
        assert_eq!(UdpSendSnapshot::default().pps(), 0.0);
    }
}
