//! Deficit round robin over new and old flow lists (RFC 8290 §4.2, Linux `fq_codel_dequeue`
//! and `cake_dequeue`), shared by [`super::fq_codel`] and [`super::cake`]. A flow that becomes
//! active joins the new list with a quantum of credit; the scheduler serves the head of the
//! new list before the old one; a flow out of credit gets another quantum and goes to the back
//! of the old list; a flow found empty leaves, except that an empty *new* flow is moved to the
//! old list while other old flows wait (so a flow cannot jump the queue by emptying and
//! refilling). What a flow's AQM does to its head, and what its quantum is, stay with the qdisc.

use super::{QueuedPacket, Sink};
use std::collections::VecDeque;
use std::time::Duration;

/// The two lists of active flow indices.
#[derive(Debug, Default)]
pub(crate) struct FlowLists {
    new: VecDeque<u32>,
    old: VecDeque<u32>,
}

impl FlowLists {
    /// Flow `idx` became active: it joins the back of the new list (its credit is the
    /// caller's to set).
    pub(crate) fn push_new(&mut self, idx: usize) {
        self.new.push_back(idx as u32);
    }

    /// The flow to serve next and whether it is on the new list.
    fn front(&self) -> Option<(bool, usize)> {
        match (self.new.front(), self.old.front()) {
            (Some(&i), _) => Some((true, i as usize)),
            (None, Some(&i)) => Some((false, i as usize)),
            (None, None) => None,
        }
    }

    fn pop(&mut self, from_new: bool) {
        if from_new {
            self.new.pop_front();
        } else {
            self.old.pop_front();
        }
    }
}

/// A qdisc whose flows the DRR scheduler serves.
pub(crate) trait DrrFlows {
    /// The qdisc's flow lists.
    fn lists(&mut self) -> &mut FlowLists;
    /// Flow `idx`'s remaining credit in bytes.
    fn deficit(&mut self, idx: usize) -> &mut i64;
    /// The credit flow `idx` gets per round.
    fn quantum(&self, idx: usize) -> i64;
    /// Flow `idx`'s next packet after its AQM (whose drops go to `sink`), or `None` when
    /// the flow has nothing left to send.
    fn serve(&mut self, idx: usize, now: Duration, sink: &mut dyn Sink) -> Option<QueuedPacket>;
    /// Flow `idx` is empty and leaves the rotation.
    fn retire(&mut self, idx: usize);
}

/// The next packet by deficit round robin over `q`'s flows; `None` when every flow is empty.
pub(crate) fn dequeue(
    q: &mut impl DrrFlows,
    now: Duration,
    sink: &mut dyn Sink,
) -> Option<QueuedPacket> {
    loop {
        let (from_new, idx) = q.lists().front()?;
        if *q.deficit(idx) <= 0 {
            let quantum = q.quantum(idx);
            *q.deficit(idx) += quantum;
            let lists = q.lists();
            lists.pop(from_new);
            lists.old.push_back(idx as u32);
            continue;
        }
        match q.serve(idx, now, sink) {
            Some(p) => {
                *q.deficit(idx) -= p.len() as i64;
                return Some(p);
            }
            None => {
                let lists = q.lists();
                lists.pop(from_new);
                if from_new && !lists.old.is_empty() {
                    lists.old.push_back(idx as u32);
                } else {
                    q.retire(idx);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::tests_support::{Recorder, udp};

    /// Flows as plain packet queues with one fixed quantum.
    struct Toy {
        lists: FlowLists,
        queues: Vec<VecDeque<QueuedPacket>>,
        deficits: Vec<i64>,
        retired: Vec<usize>,
    }

    impl DrrFlows for Toy {
        fn lists(&mut self) -> &mut FlowLists {
            &mut self.lists
        }
        fn deficit(&mut self, idx: usize) -> &mut i64 {
            &mut self.deficits[idx]
        }
        fn quantum(&self, _idx: usize) -> i64 {
            1500
        }
        fn serve(&mut self, idx: usize, _: Duration, _: &mut dyn Sink) -> Option<QueuedPacket> {
            self.queues[idx].pop_front()
        }
        fn retire(&mut self, idx: usize) {
            self.retired.push(idx);
        }
    }

    #[test]
    fn a_sparse_new_flow_goes_before_a_bulk_flow_out_of_credit() {
        let t = Duration::ZERO;
        let mut q = Toy {
            lists: FlowLists::default(),
            queues: vec![
                (1..=3).map(|p| udp(p, 1000, t)).collect(),
                [udp(9, 100, t)].into(),
            ],
            deficits: vec![1500, 1500],
            retired: Vec::new(),
        };
        q.lists.push_new(0);
        q.lists.push_new(1);
        let mut sink = Recorder::default();
        let mut order = Vec::new();
        while let Some(p) = dequeue(&mut q, t, &mut sink) {
            order.push(p.len());
        }
        // Flow 0 spends its quantum (two packets, overdrawn), goes to the old list; the new
        // flow 1 is served; the empty flow 1 moves behind flow 0, which sends its last packet,
        // is out of credit again and goes behind flow 1; flow 1 leaves, then flow 0.
        assert_eq!(order, [1000, 1000, 100, 1000]);
        assert_eq!(q.retired, [1, 0]);
        assert_eq!(q.deficits, [1500, 1400]);
        assert!(q.lists.front().is_none());
    }
}
