//! Receive-side `[SUM]` of several UDP streams (sans-IO): the server's
//! flows of one `-P N` client, or a client's `-R -P N` streams.
//!
//! A sum is complete once every member reported the same interval (keyed
//! by its start, [`crate::sum::sum_key`]) or its total. iperf 2.1.8's UDP
//! receive `[SUM]` line shows Transfer, Bandwidth, Lost/Total and (with
//! `-e`) PPS; it has no jitter or latency column.

use crate::sum::{gather, sum_key, sum_span};
use bloatlab_metrics::udp_recv::UdpRecvSnapshot;
use std::collections::BTreeMap;
use std::time::Duration;

/// The receive `[SUM]` of one group of streams.
#[derive(Debug, Clone, Default)]
pub struct RecvSum {
    /// Members whose reports make a sum complete.
    size: u32,
    /// Member snapshots waiting for the others, by [`sum_key`].
    pending: BTreeMap<Duration, Vec<UdpRecvSnapshot>>,
    /// Interval sums produced so far.
    pub intervals: Vec<UdpRecvSnapshot>,
    /// The whole-test sum, once every member ended.
    pub total: Option<UdpRecvSnapshot>,
}

impl RecvSum {
    /// A sum over `size` streams.
    pub fn new(size: u32) -> RecvSum {
        RecvSum {
            size,
            ..RecvSum::default()
        }
    }

    /// Streams summed.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Adds one member's interval (or, with `total`, its whole-test)
    /// snapshot; returns the `[SUM]` it completed, if any.
    pub fn add(&mut self, snap: &UdpRecvSnapshot, total: bool) -> Option<UdpRecvSnapshot> {
        let key = sum_key(snap.span, total);
        let parts = gather(&mut self.pending, key, snap.clone(), self.size)?;
        Some(self.complete(key, &parts))
    }

    /// The group turned out smaller (members announced but never came):
    /// returns the sums that are complete now, intervals first.
    pub fn resize(&mut self, size: u32) -> Vec<UdpRecvSnapshot> {
        self.size = size.max(1);
        let done: Vec<Duration> = self
            .pending
            .iter()
            .filter(|(_, v)| v.len() as u32 >= self.size)
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::new();
        for key in done {
            if let Some(parts) = self.pending.remove(&key) {
                out.push(self.complete(key, &parts));
            }
        }
        out
    }

    fn complete(&mut self, key: Duration, parts: &[UdpRecvSnapshot]) -> UdpRecvSnapshot {
        let sum = UdpRecvSnapshot::sum(sum_span(parts.iter().map(|p| p.span)), parts);
        if key == Duration::MAX {
            // Every member ended: an interval still waiting (a partial
            // interval only some members had) can never complete.
            self.pending.clear();
            self.total = Some(sum.clone());
        } else {
            self.intervals.push(sum.clone());
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_metrics::console::{Console, StreamLabel};
    use bloatlab_metrics::interval::Span;
    use bloatlab_units::Bytes;

    fn snap(start_ms: u64, end_ms: u64, bytes: u64, total: u64, lost: u64) -> UdpRecvSnapshot {
        UdpRecvSnapshot {
            span: Span::new(
                Duration::from_millis(start_ms),
                Duration::from_millis(end_ms),
            ),
            bytes: Bytes(bytes),
            datagrams: total,
            lost,
            ipg_count: total - lost,
            ipg_sum: Duration::from_millis(end_ms - start_ms),
            ..UdpRecvSnapshot::default()
        }
    }

    #[test]
    fn sums_print_like_iperf_2_once_every_member_reported() {
        let mut s = RecvSum::new(3);
        // 2.1.8 server, 3 flows at 5 Mbit/s, first interval (README capture
        // taken for this change): 613 KBytes and 427/428 datagrams each.
        assert!(s.add(&snap(0, 1000, 627_900, 428, 1), false).is_none());
        assert!(s.add(&snap(0, 1000, 627_900, 427, 0), false).is_none());
        let sum = s.add(&snap(0, 1000, 627_900, 427, 0), false).unwrap();
        assert_eq!(sum.bytes, Bytes(3 * 627_900));
        assert_eq!((sum.lost, sum.datagrams), (1, 1282));
        let c = Console::default();
        assert_eq!(
            c.udp_recv_line(StreamLabel::Sum, &sum, false),
            "[SUM] 0.0000-1.0000 sec  1.80 MBytes  15.1 Mbits/sec   1/1282 (0.078%)"
        );
        assert_eq!(
            c.udp_recv_line(StreamLabel::Sum, &sum, true),
            "[SUM] 0.0000-1.0000 sec  1.80 MBytes  15.1 Mbits/sec  1/1282     1281 pps"
        );
        assert_eq!(s.intervals.len(), 1);
    }

    #[test]
    fn totals_span_the_longest_member_and_drop_unmatched_partials() {
        let mut s = RecvSum::new(2);
        // Only one member had a partial last interval.
        assert!(s.add(&snap(2000, 2600, 100, 1, 0), false).is_none());
        assert!(s.add(&snap(0, 2600, 5000, 50, 2), true).is_none());
        let t = s.add(&snap(0, 2004, 4000, 40, 0), true).unwrap();
        assert_eq!(t.span.end, Duration::from_millis(2600));
        assert_eq!((t.bytes, t.datagrams, t.lost), (Bytes(9000), 90, 2));
        assert_eq!(t.ipg_count, 88);
        assert_eq!(t.ipg_sum, Duration::from_millis(2600));
        assert!(s.pending.is_empty());
        assert_eq!(s.total, Some(t));
    }

    #[test]
    fn a_group_that_shrinks_completes_what_its_members_reported() {
        let mut s = RecvSum::new(3);
        assert!(s.add(&snap(0, 1000, 10, 1, 0), false).is_none());
        assert!(s.add(&snap(0, 1000, 20, 2, 0), false).is_none());
        assert!(s.add(&snap(1000, 2000, 30, 3, 0), false).is_none());
        assert!(s.add(&snap(0, 1500, 40, 4, 0), true).is_none());
        let done = s.resize(2);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].bytes, Bytes(30));
        assert_eq!(s.size(), 2);
        let t = s.add(&snap(0, 1400, 50, 5, 0), true).unwrap();
        assert_eq!(t.bytes, Bytes(90));
    }

    #[test]
    fn latency_merges_and_jitter_is_the_worst_members() {
        use bloatlab_metrics::transit::Transit;
        let mut a = snap(0, 1000, 1, 1, 0);
        let mut b = snap(0, 1000, 1, 1, 0);
        a.latency.record(Transit::from_nanos(10_000));
        b.latency.record(Transit::from_nanos(30_000));
        a.jitter = Duration::from_micros(3);
        b.jitter = Duration::from_micros(7);
        let s = UdpRecvSnapshot::sum(Span::default(), [&a, &b]);
        assert_eq!(s.latency.count(), 2);
        assert!((s.latency.mean_secs() - 20e-6).abs() < 1e-12);
        assert_eq!(s.jitter, Duration::from_micros(7));
    }
}
