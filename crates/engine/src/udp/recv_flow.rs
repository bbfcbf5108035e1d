//! One receiving UDP stream's accounting, shared by the server's forward
//! flows and the client's reverse (`-R`) streams: iperf 2 receive
//! statistics ([`UdpRecvStats`]: jitter, loss, reordering, latency),
//! interval boundaries and the final report events. Sans-IO: receive times
//! (CLOCK_REALTIME, the kernel timestamp clock) are passed in.

use super::report::Event;
use bloatlab_metrics::interval::{IntervalClock, Span};
use bloatlab_metrics::json::IntervalRecord;
use bloatlab_metrics::udp_recv::{UdpRecvSnapshot, UdpRecvStats};
use bloatlab_units::Bytes;
use std::time::Duration;

/// Largest step past the highest id seen that a datagram may take: a jump
/// beyond it is not loss but a forged or corrupt datagram (counted as bad,
/// never as ~10^17 lost datagrams). 2^20 datagrams is over a second of
/// total loss at 10 Gbit/s.
pub const MAX_ID_JUMP: u64 = 1 << 20;

/// Whether id `seq` (negative: a FIN) may follow `max_seen`.
pub fn plausible_id(max_seen: u64, seq: i64) -> bool {
    seq.unsigned_abs() <= max_seen.saturating_add(MAX_ID_JUMP)
}

/// A receiving stream (see the module docs).
#[derive(Debug)]
pub(crate) struct RecvFlow {
    /// Report id (`[  1]`).
    pub id: u32,
    stats: UdpRecvStats,
    /// Receive time of the first datagram: the stream's time zero.
    pub start: Duration,
    ivl: Option<IntervalClock>,
    interval_start: Duration,
    /// Next interval boundary, as an offset from `start`.
    pub next_report: Option<Duration>,
    /// Receive time of the latest datagram.
    pub last_rx: Duration,
    /// Interval records (for the bloatlab report frame).
    pub records: Vec<IntervalRecord>,
    /// Datagrams too short to account.
    pub bad: u64,
    /// Set by [`finalize`](Self::finalize).
    pub finished: bool,
    /// Highest id accounted.
    pub max_id: u64,
}

impl RecvFlow {
    /// A stream whose first datagram arrived at `first_rx`.
    pub fn new(id: u32, first_rx: Duration, interval: Option<Duration>) -> RecvFlow {
        let ivl = interval.map(IntervalClock::new);
        RecvFlow {
            id,
            stats: UdpRecvStats::new(first_rx),
            start: first_rx,
            ivl,
            interval_start: Duration::ZERO,
            next_report: ivl.map(|c| c.every()),
            last_rx: first_rx,
            records: Vec::new(),
            bad: 0,
            finished: false,
            max_id: 0,
        }
    }

    /// Whether id `seq` is one this stream can take (see [`MAX_ID_JUMP`]).
    pub fn plausible(&self, seq: i64) -> bool {
        plausible_id(self.max_id, seq)
    }

    /// `rx` as an offset from the stream's first datagram.
    pub fn offset(&self, rx: Duration) -> Duration {
        rx.saturating_sub(self.start)
    }

    /// Emits every interval whose end is at or before `offset`.
    pub fn intervals_until(&mut self, offset: Duration, events: &mut Vec<Event>) {
        while let (Some(c), Some(b)) = (self.ivl, self.next_report) {
            if offset < b {
                break;
            }
            let snap = self.stats.take_interval(Span::new(self.interval_start, b));
            self.records
                .push(IntervalRecord::from_udp_recv(&snap, false));
            events.push(Event::RecvInterval {
                stream: self.id,
                snap,
            });
            self.interval_start = b;
            self.next_report = Some(b + c.every());
        }
    }

    /// Accounts one datagram: id `seq` (absolute value; a FIN counts as the
    /// last datagram, like iperf 2), sender time `sent`, receive time `rx`,
    /// `wire_len` bytes.
    pub fn account(
        &mut self,
        seq: u64,
        sent: Duration,
        rx: Duration,
        wire_len: usize,
        events: &mut Vec<Event>,
    ) {
        self.intervals_until(self.offset(rx), events);
        self.last_rx = self.last_rx.max(rx);
        self.max_id = self.max_id.max(seq);
        self.stats
            .on_datagram(seq, sent, rx, Bytes(wire_len as u64));
    }

    /// Final partial interval and total, ending at `end` (CLOCK_REALTIME).
    pub fn finalize(&mut self, end: Duration, events: &mut Vec<Event>) -> UdpRecvSnapshot {
        let end = self.offset(end);
        self.intervals_until(end, events);
        let partial = self.ivl.and_then(|c| {
            let span = Span::new(self.interval_start, end);
            let snap = self.stats.take_interval(span);
            // A partial interval starting at 0 is the whole test: the total says it.
            (c.is_significant_partial(span) && snap.ipg_count > 0 && !span.start.is_zero())
                .then_some(snap)
        });
        if let Some(p) = &partial {
            self.records.push(IntervalRecord::from_udp_recv(p, false));
        }
        let total = self.stats.total(Span::from_zero(end));
        self.finished = true;
        events.push(Event::RecvFinal {
            stream: self.id,
            partial,
            total: total.clone(),
            bad_datagrams: self.bad,
        });
        total
    }
}
