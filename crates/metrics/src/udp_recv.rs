//! UDP receiver accumulator: jitter, Lost/Total, out-of-order, latency,
//! PPS, inP in packets, NetPwr.
//!
//! Calling contract: [`UdpRecvStats::on_datagram`] for every data datagram
//! (positive id), with the sender's timestamp from the payload and the local
//! receive time (ideally the kernel's `SO_TIMESTAMP`), both offsets from the
//! same epoch as the `start` given to [`UdpRecvStats::new`];
//! [`UdpRecvStats::take_interval`] at each boundary; [`UdpRecvStats::total`]
//! at the end.
//!
//! * **Jitter** (RFC 3550 §6.4.1, RFC 1889): with transit `T = rx − tx`
//!   (any constant clock offset cancels), `D = T_i − T_{i−1}`,
//!   `J += (|D| − J)/16`. iperf 2 takes `T_0 = 0` for the first datagram
//!   and then resets `J` to 0 if only one datagram arrived; we follow the RFC
//!   and start at the second datagram, which gives the same result for one
//!   datagram and no `T_1/16` offset (it matters across hosts with a clock offset).
//! * **Lost/Total**: see [`crate::seq`]. Total = highest id − highest id at
//!   the previous report; Lost = gaps − out-of-order, floored at 0.
//! * **PPS** = datagrams / Σ inter-arrival gaps (first gap from `start`).
//! * **Rx/inP** = `rx/round(λ·mean)(round(λ·stdev)) pkts`, λ = round(PPS).

use crate::formulas::{self, UdpInProgress};
use crate::histogram::LatencyHistogram;
use crate::interval::Span;
use crate::seq::{SeqEvent, SeqTracker};
use crate::tcp_send::per_sec;
use crate::transit::Transit;
use crate::welford::LatencyStats;
use bloatlab_units::Bytes;
use std::time::Duration;

/// iperf 2 suppresses the latency columns when the minimum transit is
/// above this many *seconds* (`UNREALISTIC_LATENCYMINMAX 60*1e6`; the
/// constant looks like microseconds but is compared with seconds).
pub const UNREALISTIC_MIN_LATENCY_MAX_SECS: f64 = 60e6;
/// ... or below this many seconds (`UNREALISTIC_LATENCYMINMIN -0.01*1e6`).
pub const UNREALISTIC_MIN_LATENCY_MIN_SECS: f64 = -0.01 * 1e6;

/// What one report line of a UDP receiver shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UdpRecvSnapshot {
    /// The reported span.
    pub span: Span,
    /// Payload bytes received.
    pub bytes: Bytes,
    /// The "Total" of Lost/Total: highest id − highest id at the previous report.
    pub datagrams: u64,
    /// The "Lost" of Lost/Total: gaps − out-of-order, floored at 0 (iperf 2's rule).
    pub lost: u64,
    /// Datagrams at or below the highest id seen (late + duplicates).
    pub out_of_order: u64,
    /// Of those, exact duplicates (not an iperf 2 column).
    pub duplicates: u64,
    /// Jitter (RFC 3550) at the end of the span.
    pub jitter: Duration,
    /// One-way latency statistics of the span.
    pub latency: LatencyStats,
    /// Their distribution.
    pub histogram: LatencyHistogram,
    /// Datagrams counted for PPS (iperf 2's `cntIPG`; the "Rx" of Rx/inP).
    pub ipg_count: u64,
    /// Σ of inter-arrival gaps (iperf 2's `IPGsum`).
    pub ipg_sum: Duration,
}

impl UdpRecvSnapshot {
    /// Sums `parts` over `span`. Bytes, Total, Lost, out-of-order, duplicates
    /// and received datagrams add up; latency statistics and histograms merge;
    /// the jitter is the largest member's; as for the send `[SUM]`, the gap
    /// total is the largest member's, so the PPS is the aggregate rate.
    ///
    /// Lost is the sum of the members' Lost. iperf 2.1.8 subtracts all streams'
    /// out-of-order from all streams' gaps instead, so one stream's late or
    /// duplicate datagrams can hide another's losses; the two agree whenever no
    /// stream has more out-of-order datagrams than gaps.
    pub fn sum<'a>(
        span: Span,
        parts: impl IntoIterator<Item = &'a UdpRecvSnapshot>,
    ) -> UdpRecvSnapshot {
        let mut s = UdpRecvSnapshot {
            span,
            ..UdpRecvSnapshot::default()
        };
        for p in parts {
            s.bytes = s.bytes.saturating_add(p.bytes);
            s.datagrams += p.datagrams;
            s.lost += p.lost;
            s.out_of_order += p.out_of_order;
            s.duplicates += p.duplicates;
            s.jitter = s.jitter.max(p.jitter);
            s.latency.merge(&p.latency);
            s.histogram.merge(&p.histogram);
            s.ipg_count += p.ipg_count;
            s.ipg_sum = s.ipg_sum.max(p.ipg_sum);
        }
        s
    }

    /// Packets per second: `ipg_count / ipg_sum`.
    pub fn pps(&self) -> f64 {
        formulas::pps(self.ipg_count, self.ipg_sum.as_secs_f64())
    }

    /// Loss percentage `100 × lost / datagrams` (0 when no datagrams).
    pub fn loss_percent(&self) -> f64 {
        if self.datagrams == 0 {
            0.0
        } else {
            100.0 * self.lost as f64 / self.datagrams as f64
        }
    }

    /// Rx/inP in packets.
    pub fn in_progress(&self) -> UdpInProgress {
        formulas::udp_in_progress(
            self.ipg_count,
            self.ipg_sum.as_secs_f64(),
            self.latency.mean_secs(),
            self.latency.welford_secs().stdev(),
        )
    }

    /// NetPwr with the mean latency as delay (`None` = `NAN`).
    pub fn net_power(&self) -> Option<f64> {
        formulas::net_power(self.bytes, self.span.len(), self.latency.mean_secs())
    }

    /// Bytes per second over the span.
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.span)
    }

    /// False when iperf 2 would print `-/-/-/- ms` because the minimum
    /// latency is outside its plausibility thresholds (clocks unsynced).
    pub fn latency_plausible(&self) -> bool {
        let min = if self.latency.count() == 0 {
            0.0
        } else {
            self.latency.welford_secs().min()
        };
        (UNREALISTIC_MIN_LATENCY_MIN_SECS..=UNREALISTIC_MIN_LATENCY_MAX_SECS).contains(&min)
    }
}

#[derive(Debug, Clone, Default)]
struct Part {
    bytes: Bytes,
    latency: LatencyStats,
    histogram: LatencyHistogram,
    ipg_count: u64,
    ipg_sum: Duration,
}

#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    highest: u64,
    gaps: u64,
    out_of_order: u64,
    duplicates: u64,
}

/// Accumulates a UDP receiver's interval and total statistics.
#[derive(Debug, Clone)]
pub struct UdpRecvStats {
    start: Duration,
    prev_rx: Duration,
    last_rx: Option<Duration>,
    prev_transit: Option<f64>,
    jitter_secs: f64,
    seq: SeqTracker,
    at_interval_start: Marks,
    cur: Part,
    tot: Part,
}

impl UdpRecvStats {
    /// `start`: the test start on the receive clock.
    pub fn new(start: Duration) -> UdpRecvStats {
        UdpRecvStats {
            start,
            prev_rx: start,
            last_rx: None,
            prev_transit: None,
            jitter_secs: 0.0,
            seq: SeqTracker::new(),
            at_interval_start: Marks::default(),
            cur: Part::default(),
            tot: Part::default(),
        }
    }

    /// One data datagram: id `seq` (> 0), sent at `sent` (sender clock),
    /// received at `received` (local clock), `len` payload bytes. Returns the
    /// id's classification. Id 0 is ignored entirely, as iperf 2 does.
    pub fn on_datagram(
        &mut self,
        seq: u64,
        sent: Duration,
        received: Duration,
        len: Bytes,
    ) -> SeqEvent {
        let ev = self.seq.on_id(seq);
        if ev == SeqEvent::Ignored {
            return ev;
        }
        let transit = Transit::between(sent, received);
        let t = transit.as_secs_f64();
        if let Some(prev) = self.prev_transit {
            self.jitter_secs += ((t - prev).abs() - self.jitter_secs) / 16.0;
        }
        self.prev_transit = Some(t);
        let gap = received.saturating_sub(self.prev_rx);
        self.prev_rx = received;
        self.last_rx = Some(received);
        for p in [&mut self.cur, &mut self.tot] {
            p.bytes = p.bytes.saturating_add(len);
            p.latency.record(transit);
            p.histogram.record(transit);
            p.ipg_count += 1;
            p.ipg_sum = p.ipg_sum.saturating_add(gap);
        }
        ev
    }

    fn marks(&self) -> Marks {
        Marks {
            highest: self.seq.highest(),
            gaps: self.seq.gaps(),
            out_of_order: self.seq.out_of_order(),
            duplicates: self.seq.duplicates(),
        }
    }

    fn snapshot(&self, p: &Part, from: Marks, span: Span, ipg_sum: Duration) -> UdpRecvSnapshot {
        let now = self.marks();
        let gaps = now.gaps - from.gaps;
        let ooo = now.out_of_order - from.out_of_order;
        UdpRecvSnapshot {
            span,
            bytes: p.bytes,
            datagrams: now.highest - from.highest,
            lost: gaps.saturating_sub(ooo),
            out_of_order: ooo,
            duplicates: now.duplicates - from.duplicates,
            jitter: Duration::try_from_secs_f64(self.jitter_secs).unwrap_or(Duration::ZERO),
            latency: p.latency,
            histogram: p.histogram.clone(),
            ipg_count: p.ipg_count,
            ipg_sum,
        }
    }

    /// Close the current interval and start the next.
    pub fn take_interval(&mut self, span: Span) -> UdpRecvSnapshot {
        let snap = self.snapshot(&self.cur, self.at_interval_start, span, self.cur.ipg_sum);
        self.at_interval_start = self.marks();
        self.cur = Part::default();
        snap
    }

    /// Whole-test snapshot over `span`; PPS uses last arrival − start.
    pub fn total(&self, span: Span) -> UdpRecvSnapshot {
        let ipg = self
            .last_rx
            .map_or(Duration::ZERO, |l| l.saturating_sub(self.start));
        self.snapshot(&self.tot, Marks::default(), span, ipg)
    }

    /// The sequence tracker (cumulative counters).
    pub fn seq(&self) -> &SeqTracker {
        &self.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn jitter_follows_rfc3550() {
        // Transits 10, 20, 10, 10 us: D = 10, 10, 0.
        let mut s = UdpRecvStats::new(Duration::ZERO);
        let mut want = 0.0f64;
        for (i, tr) in [10u64, 20, 10, 10].into_iter().enumerate() {
            let sent = us(1000 * (i as u64 + 1));
            s.on_datagram(i as u64 + 1, sent, sent + us(tr), Bytes(1470));
        }
        for d in [10e-6, 10e-6, 0.0] {
            want += (d - want) / 16.0;
        }
        let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
        assert!((snap.jitter.as_secs_f64() - want).abs() < 1e-9);
        assert!(snap.jitter > us(1));
    }

    #[test]
    fn one_datagram_has_zero_jitter_even_with_clock_offset() {
        let mut s = UdpRecvStats::new(Duration::ZERO);
        s.on_datagram(1, Duration::from_secs(100), us(5), Bytes(10));
        let snap = s.total(Span::from_zero(Duration::from_secs(1)));
        assert_eq!(snap.jitter, Duration::ZERO);
        assert_eq!(snap.latency.negative_count(), 1);
    }

    #[test]
    fn loss_total_and_ooo_per_interval() {
        let mut s = UdpRecvStats::new(Duration::ZERO);
        let mut rx = 0;
        let mut feed = |s: &mut UdpRecvStats, id: u64| {
            rx += 1000;
            s.on_datagram(id, us(rx), us(rx + 8), Bytes(1470));
        };
        for id in [1, 2, 3, 6, 4, 7] {
            feed(&mut s, id);
        }
        let a = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
        // Total = 7, gaps = 2 (4, 5), ooo = 1 (4) -> Lost 1.
        assert_eq!(
            (a.datagrams, a.lost, a.out_of_order, a.duplicates),
            (7, 1, 1, 0)
        );
        assert_eq!(a.ipg_count, 6);
        for id in [7, 8, 10] {
            feed(&mut s, id);
        }
        let b = s.take_interval(Span::new(Duration::from_secs(1), Duration::from_secs(2)));
        // Total = 3 (8..10), gaps = 1 (9), ooo = 1 (duplicate 7) -> Lost 0.
        assert_eq!(
            (b.datagrams, b.lost, b.out_of_order, b.duplicates),
            (3, 0, 1, 1)
        );
        let t = s.total(Span::from_zero(Duration::from_secs(2)));
        assert_eq!((t.datagrams, t.lost, t.out_of_order), (10, 1, 2));
        assert_eq!(t.ipg_count, 9);
        assert_eq!(t.ipg_sum, us(9008));
        assert!((t.pps() - 9.0 / 0.009008).abs() < 1e-9);
        assert!((t.loss_percent() - 10.0).abs() < 1e-12);
    }

    #[test]
    fn id_zero_is_ignored() {
        let mut s = UdpRecvStats::new(Duration::ZERO);
        assert_eq!(s.on_datagram(0, us(1), us(2), Bytes(5)), SeqEvent::Ignored);
        let t = s.total(Span::from_zero(Duration::from_secs(1)));
        assert_eq!((t.bytes, t.ipg_count), (Bytes(0), 0));
    }
}
