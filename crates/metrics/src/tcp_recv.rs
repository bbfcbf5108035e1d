//! TCP receiver (server `-e`, client `-R`) accumulator: bytes, `Reads=Dist`,
//! and with `--trip-times` the burst latency, inP and NetPwr.
//!
//! Calling contract (sans-IO: every time is an argument):
//! * [`TcpRecvStats::on_read`] for every `read()` that returned data;
//! * [`TcpRecvStats::on_burst_complete`] when a read completes a
//!   trip-times burst, with the client's write timestamp from the burst
//!   header and the local time of that read, both as offsets from the same
//!   epoch (UNIX epoch of `CLOCK_REALTIME` for cross-host tests);
//! * [`TcpRecvStats::take_interval`] at each report boundary, and
//!   [`TcpRecvStats::total`] at the end.
//!
//! Burst latency = read-complete time − write timestamp. It may be negative
//! when the hosts' clocks disagree: such bursts are kept in the statistics
//! exactly as iperf 2 keeps them, counted in
//! [`LatencyStats::negative_count`], and never cause a panic.

use crate::formulas;
use crate::histogram::LatencyHistogram;
use crate::interval::Span;
use crate::reads::ReadsDist;
use crate::tcp_send::per_sec;
use crate::transit::Transit;
use crate::welford::LatencyStats;
use bloatlab_units::Bytes;
use std::time::Duration;

/// Burst (write→read) latency over a span.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BurstLatency {
    /// Mean/min/max/stdev of the bursts completed in the span.
    pub latency: LatencyStats,
    /// Their distribution.
    pub histogram: LatencyHistogram,
    /// Σ of the gaps between consecutive bursts' client write timestamps
    /// (iperf 2's `IPGsum`); on the total: the whole test duration, as
    /// iperf 2 does. Signed because sender timestamps can step backwards.
    pub write_gap_sum: Transit,
}

/// What one report line of a TCP receiver shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpRecvSnapshot {
    /// The reported span.
    pub span: Span,
    /// Bytes read in the span.
    pub bytes: Bytes,
    /// `Reads=Dist`.
    pub reads: ReadsDist,
    /// Burst latency, present when trip-times are on.
    pub burst: Option<BurstLatency>,
}

impl TcpRecvSnapshot {
    /// Bytes per second over the span.
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.span)
    }

    /// Mean burst latency in seconds (0 without bursts): Little's W and NetPwr's delay.
    pub fn mean_burst_secs(&self) -> f64 {
        self.burst.as_ref().map_or(0.0, |b| b.latency.mean_secs())
    }

    /// inP in bytes: `(bytes / write_gap_sum) × mean burst latency`.
    pub fn in_progress_bytes(&self) -> f64 {
        match &self.burst {
            None => 0.0,
            Some(b) => {
                let gap = b.write_gap_sum.to_duration().unwrap_or(Duration::ZERO);
                formulas::in_progress_bytes(self.bytes, gap, b.latency.mean_secs())
            }
        }
    }

    /// NetPwr with the mean burst latency as delay (`None` = `NAN`).
    pub fn net_power(&self) -> Option<f64> {
        formulas::net_power(self.bytes, self.span.len(), self.mean_burst_secs())
    }

    /// Bursts completed in the span.
    pub fn burst_count(&self) -> u64 {
        self.burst.as_ref().map_or(0, |b| b.latency.count())
    }

    /// The `size` of `(cnt/size)`: bytes / bursts, truncated (0 without bursts).
    pub fn burst_size(&self) -> Bytes {
        match self.burst_count() {
            0 => Bytes(0),
            n => Bytes(self.bytes.0 / n),
        }
    }

    /// Sum several streams into a `[SUM]` snapshot over `span`: bytes and
    /// reads add up; burst latencies merge (their write gap sums add).
    pub fn sum<'a>(
        span: Span,
        read_buffer_len: Bytes,
        parts: impl IntoIterator<Item = &'a TcpRecvSnapshot>,
    ) -> TcpRecvSnapshot {
        let mut s = TcpRecvSnapshot {
            span,
            bytes: Bytes(0),
            reads: ReadsDist::new(read_buffer_len),
            burst: None,
        };
        for p in parts {
            s.bytes = s.bytes.saturating_add(p.bytes);
            s.reads.merge(&p.reads);
            if let Some(b) = &p.burst {
                let acc = s.burst.get_or_insert_with(BurstLatency::default);
                acc.latency.merge(&b.latency);
                acc.histogram.merge(&b.histogram);
                acc.write_gap_sum = Transit::from_nanos(
                    acc.write_gap_sum
                        .as_nanos()
                        .saturating_add(b.write_gap_sum.as_nanos()),
                );
            }
        }
        s
    }
}

#[derive(Debug, Clone)]
struct Part {
    bytes: Bytes,
    reads: ReadsDist,
    latency: LatencyStats,
    histogram: LatencyHistogram,
    gap_ns: i64,
}

impl Part {
    fn new(read_buffer_len: Bytes) -> Part {
        Part {
            bytes: Bytes(0),
            reads: ReadsDist::new(read_buffer_len),
            latency: LatencyStats::new(),
            histogram: LatencyHistogram::new(),
            gap_ns: 0,
        }
    }
}

/// Accumulates a TCP receiver's interval and total statistics.
#[derive(Debug, Clone)]
pub struct TcpRecvStats {
    read_buffer_len: Bytes,
    trip_times: bool,
    current: Part,
    total: Part,
    prev_write_ts: Option<Duration>,
}

impl TcpRecvStats {
    /// `read_buffer_len` is the `-l` read size (it sets the `Reads=Dist` bin
    /// width); `trip_times` says whether burst latency is measured.
    pub fn new(read_buffer_len: Bytes, trip_times: bool) -> TcpRecvStats {
        TcpRecvStats {
            read_buffer_len,
            trip_times,
            current: Part::new(read_buffer_len),
            total: Part::new(read_buffer_len),
            prev_write_ts: None,
        }
    }

    /// Whether burst latency is being measured.
    pub fn trip_times(&self) -> bool {
        self.trip_times
    }

    /// Switch trip-times on (e.g. once the peer's header says so).
    pub fn set_trip_times(&mut self, on: bool) {
        self.trip_times = on;
    }

    /// A `read()` that returned `n` bytes (0 = EOF, ignored).
    pub fn on_read(&mut self, n: Bytes) {
        if n.0 == 0 {
            return;
        }
        for p in [&mut self.current, &mut self.total] {
            p.bytes = p.bytes.saturating_add(n);
            p.reads.record(n);
        }
    }

    /// A read completed a burst written at `write_ts` (sender clock) and
    /// finished at `read_done` (receiver clock), same epoch. Returns the
    /// burst's latency (negative under clock skew). Also turns trip-times on.
    pub fn on_burst_complete(&mut self, write_ts: Duration, read_done: Duration) -> Transit {
        self.trip_times = true;
        let transit = Transit::between(write_ts, read_done);
        let gap = self
            .prev_write_ts
            .map(|prev| Transit::between(prev, write_ts).as_nanos());
        self.prev_write_ts = Some(write_ts);
        for p in [&mut self.current, &mut self.total] {
            p.latency.record(transit);
            p.histogram.record(transit);
            if let Some(g) = gap {
                p.gap_ns = p.gap_ns.saturating_add(g);
            }
        }
        transit
    }

    fn snapshot(&self, p: &Part, span: Span, gap: Transit) -> TcpRecvSnapshot {
        TcpRecvSnapshot {
            span,
            bytes: p.bytes,
            reads: p.reads,
            burst: self.trip_times.then(|| BurstLatency {
                latency: p.latency,
                histogram: p.histogram.clone(),
                write_gap_sum: gap,
            }),
        }
    }

    /// Close the current interval and start the next.
    pub fn take_interval(&mut self, span: Span) -> TcpRecvSnapshot {
        let snap = self.snapshot(
            &self.current,
            span,
            Transit::from_nanos(self.current.gap_ns),
        );
        self.current = Part::new(self.read_buffer_len);
        snap
    }

    /// Whole-test snapshot over `span` (normally `0..end`). As in iperf 2,
    /// the final inP uses the whole duration (`span.len()`) as the gap sum.
    pub fn total(&self, span: Span) -> TcpRecvSnapshot {
        self.snapshot(&self.total, span, Transit::from_duration(span.len()))
    }

    /// Bytes read since the start.
    pub fn total_bytes(&self) -> Bytes {
        self.total.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn bursts_latency_gaps_and_reads() {
        let mut s = TcpRecvStats::new(Bytes(131_072), true);
        let t0 = Duration::from_secs(1_700_000_000);
        // Three bursts written 1 ms apart, each read 100/200/300 us later.
        for (i, lat) in [100u64, 200, 300].into_iter().enumerate() {
            let w = t0 + us(1000 * i as u64);
            s.on_read(Bytes(92));
            s.on_read(Bytes(130_980));
            s.on_burst_complete(w, w + us(lat));
        }
        let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
        let b = snap.burst.as_ref().unwrap();
        assert_eq!(b.latency.count(), 3);
        assert_eq!(b.latency.mean(), Some(Transit::from_nanos(200_000)));
        assert_eq!(b.write_gap_sum, Transit::from_nanos(2_000_000));
        assert_eq!(snap.reads.reads, 6);
        assert_eq!(snap.reads.bins[0], 3);
        assert_eq!(snap.reads.bins[7], 3);
        assert_eq!(snap.burst_size(), Bytes(131_072));
        // inP = (393216 B / 2 ms) * 200 us = 39321.6 B.
        assert!((snap.in_progress_bytes() - 39_321.6).abs() < 1e-6);
        // The next interval's first gap spans the boundary.
        s.on_burst_complete(t0 + us(3000), t0 + us(3100));
        let snap2 = s.take_interval(Span::new(Duration::from_secs(1), Duration::from_secs(2)));
        assert_eq!(
            snap2.burst.unwrap().write_gap_sum,
            Transit::from_nanos(1_000_000)
        );
        let tot = s.total(Span::from_zero(Duration::from_secs(2)));
        assert_eq!(tot.burst_count(), 4);
        assert_eq!(
            tot.burst.unwrap().write_gap_sum,
            Transit::from_nanos(2_000_000_000)
        );
    }

    #[test]
    fn negative_latency_is_flagged_not_fatal() {
        let mut s = TcpRecvStats::new(Bytes(131_072), true);
        let t = Duration::from_secs(100);
        let tr = s.on_burst_complete(t + us(50), t);
        assert!(tr.is_negative());
        let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
        let b = snap.burst.as_ref().unwrap();
        assert_eq!(b.latency.negative_count(), 1);
        assert_eq!(b.histogram.negative_count(), 1);
        assert!(snap.net_power().unwrap_or(0.0) <= 0.0);
    }

    #[test]
    fn without_trip_times_there_is_no_burst_block() {
        let mut s = TcpRecvStats::new(Bytes(131_072), false);
        s.on_read(Bytes(10));
        s.on_read(Bytes(0));
        let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
        assert!(snap.burst.is_none());
        assert_eq!(snap.reads.reads, 1);
        assert_eq!(snap.net_power(), None);
        assert_eq!(snap.burst_size(), Bytes(0));
    }
}
