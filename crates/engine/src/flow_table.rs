//! The server's table of finished flows' sender summaries, for the flow
//! query (docs/wire.md, "flow query"; `bloatlab_wire::flow_query`).
//!
//! Sans-IO: every call takes `now`. A bloatlab client names each reverse or
//! full-duplex flow with a random 64-bit id; while the flow runs the id is
//! *running*, and when the server's sender ends, its final `TCP_INFO` is kept
//! here until the client asks for it (once: a query takes the record), or
//! until it expires.
//!
//! Bounds (a server strangers can reach, docs/security.md):
//! * at most `capacity` finished records (default 256); a new one evicts the
//!   oldest;
//! * at most `per_source` of them per source (IPv4 address or IPv6 /64,
//!   default 32); a full source evicts its own oldest, so one client cannot
//!   push out everybody else's records;
//! * each record lives `ttl` (default 60 s);
//! * at most `max_running` running ids (default 1024; running flows also hold
//!   a connection slot, so the connection caps bound them first).
//!
//! Every operation is O(1) amortized: one TTL for all records makes the
//! insertion order the expiry order, so expiry and eviction pop the front of
//! a queue. Queue items whose record is gone (taken, replaced) are skipped
//! lazily and compacted away when a queue grows past twice its bound.

use crate::limits::source_key;
use bloatlab_wire::SenderSummary;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The table's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowTableLimits {
    /// Finished records kept at most.
    pub capacity: usize,
    /// Finished records kept per source at most.
    pub per_source: usize,
    /// How long a finished record is kept.
    pub ttl: Duration,
    /// Running flows tracked at most.
    pub max_running: usize,
}

impl Default for FlowTableLimits {
    fn default() -> Self {
        FlowTableLimits {
            capacity: 256,
            per_source: 32,
            ttl: Duration::from_secs(60),
            max_running: 1024,
        }
    }
}

/// What the table knows of a flow, for one querier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The sender's summary (now removed from the table).
    Found(SenderSummary),
    /// The flow has not ended yet.
    Running,
    /// Never seen, expired, evicted, already taken, or another source's.
    Unknown,
}

/// Why a flow id was not registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("flow id 0 or already in use")]
    Duplicate,
    #[error("too many running flows")]
    Full,
}

#[derive(Debug)]
struct Record {
    source: IpAddr,
    seq: u64,
    at: Instant,
    summary: SenderSummary,
}

#[derive(Debug, Default)]
struct Source {
    live: usize,
    /// (flow id, seq) in insertion order; may hold stale items.
    order: VecDeque<(u64, u64)>,
}

/// The table. See the module docs for its bounds.
#[derive(Debug, Default)]
pub struct FlowTable {
    limits: FlowTableLimits,
    running: HashMap<u64, IpAddr>,
    done: HashMap<u64, Record>,
    /// (flow id, seq) in insertion order = expiry order; may hold stale items.
    order: VecDeque<(u64, u64)>,
    sources: HashMap<IpAddr, Source>,
    next_seq: u64,
}

impl FlowTable {
    /// An empty table with these bounds (each at least 1).
    pub fn new(limits: FlowTableLimits) -> FlowTable {
        FlowTable {
            limits: FlowTableLimits {
                capacity: limits.capacity.max(1),
                per_source: limits.per_source.max(1),
                max_running: limits.max_running.max(1),
                ttl: limits.ttl,
            },
            ..FlowTable::default()
        }
    }

    /// Finished records held now (expired ones included until the next call with `now`).
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// No finished record held.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Running flows tracked now.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// A flow from `peer` starts: its id is running until [`Self::finish`].
    pub fn start(&mut self, now: Instant, id: u64, peer: IpAddr) -> Result<(), Refused> {
        self.expire(now);
        if id == 0 || self.running.contains_key(&id) || self.done.contains_key(&id) {
            return Err(Refused::Duplicate);
        }
        if self.running.len() >= self.limits.max_running {
            return Err(Refused::Full);
        }
        self.running.insert(id, source_key(peer));
        Ok(())
    }

    /// The flow ended: keep its summary (`None`: none could be read; the id
    /// is forgotten). An id that is not running is ignored.
    pub fn finish(&mut self, now: Instant, id: u64, summary: Option<SenderSummary>) {
        self.expire(now);
        let Some(source) = self.running.remove(&id) else {
            return;
        };
        let Some(summary) = summary else {
            return;
        };
        // Room in the source, then in the table: evict the oldest.
        let per_source = self.limits.per_source;
        if self
            .sources
            .get(&source)
            .is_some_and(|s| s.live >= per_source)
            && let Some(old) = self.oldest_of(source)
        {
            self.remove(old);
        }
        if self.done.len() >= self.limits.capacity
            && let Some(old) = self.oldest()
        {
            self.remove(old);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.done.insert(
            id,
            Record {
                source,
                seq,
                at: now,
                summary,
            },
        );
        self.order.push_back((id, seq));
        let s = self.sources.entry(source).or_default();
        s.live += 1;
        s.order.push_back((id, seq));
        if s.order.len() > 2 * per_source + 16 {
            let done = &self.done;
            s.order
                .retain(|&(id, seq)| done.get(&id).is_some_and(|r| r.seq == seq));
        }
        if self.order.len() > 2 * self.limits.capacity + 16 {
            let done = &self.done;
            self.order
                .retain(|&(id, seq)| done.get(&id).is_some_and(|r| r.seq == seq));
        }
    }

    /// What `peer` may learn about flow `id`. A found record is removed
    /// (each flow is answered once); only the source that ran the flow
    /// sees it.
    pub fn take(&mut self, now: Instant, id: u64, peer: IpAddr) -> Lookup {
        self.expire(now);
        let source = source_key(peer);
        if self.done.get(&id).is_some_and(|r| r.source == source)
            && let Some(r) = self.remove(id)
        {
            return Lookup::Found(r.summary);
        }
        if self.running.get(&id) == Some(&source) {
            return Lookup::Running;
        }
        Lookup::Unknown
    }

    fn valid(&self, (id, seq): (u64, u64)) -> bool {
        self.done.get(&id).is_some_and(|r| r.seq == seq)
    }

    /// Drops records older than the TTL.
    fn expire(&mut self, now: Instant) {
        while let Some(&front) = self.order.front() {
            if !self.valid(front) {
                self.order.pop_front();
                continue;
            }
            let expired = self
                .done
                .get(&front.0)
                .is_some_and(|r| now.saturating_duration_since(r.at) >= self.limits.ttl);
            if !expired {
                break;
            }
            self.order.pop_front();
            self.remove(front.0);
        }
    }

    fn oldest(&mut self) -> Option<u64> {
        while let Some(&front) = self.order.front() {
            if self.valid(front) {
                return Some(front.0);
            }
            self.order.pop_front();
        }
        None
    }

    fn oldest_of(&mut self, source: IpAddr) -> Option<u64> {
        loop {
            let front = *self.sources.get(&source)?.order.front()?;
            if self.valid(front) {
                return Some(front.0);
            }
            self.sources.get_mut(&source)?.order.pop_front();
        }
    }

    fn remove(&mut self, id: u64) -> Option<Record> {
        let r = self.done.remove(&id)?;
        if let Some(s) = self.sources.get_mut(&r.source) {
            s.live = s.live.saturating_sub(1);
            if s.live == 0 {
                // Drops the source's stale queue items too.
                self.sources.remove(&r.source);
            }
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_units::Bytes;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    fn summary(retransmits: u32) -> SenderSummary {
        SenderSummary {
            retransmits,
            bytes_acked: Bytes(1000),
            ..SenderSummary::default()
        }
    }

    fn limits(capacity: usize, per_source: usize) -> FlowTableLimits {
        FlowTableLimits {
            capacity,
            per_source,
            ttl: Duration::from_secs(60),
            max_running: 8,
        }
    }

    #[test]
    fn a_flow_is_running_then_found_once_and_only_by_its_source() {
        let t0 = Instant::now();
        let mut t = FlowTable::new(FlowTableLimits::default());
        t.start(t0, 7, ip(1)).unwrap();
        assert_eq!(t.take(t0, 7, ip(1)), Lookup::Running);
        assert_eq!(t.take(t0, 7, ip(2)), Lookup::Unknown);
        t.finish(t0, 7, Some(summary(3)));
        assert_eq!(t.running(), 0);
        assert_eq!(t.take(t0, 7, ip(2)), Lookup::Unknown, "another source");
        assert_eq!(t.take(t0, 7, ip(1)), Lookup::Found(summary(3)));
        assert_eq!(t.take(t0, 7, ip(1)), Lookup::Unknown, "answered once");
        assert!(t.is_empty());
        // Id 0 and ids in use are refused.
        assert_eq!(t.start(t0, 0, ip(1)), Err(Refused::Duplicate));
        t.start(t0, 8, ip(1)).unwrap();
        assert_eq!(t.start(t0, 8, ip(2)), Err(Refused::Duplicate));
        // A flow whose summary could not be read is forgotten.
        t.finish(t0, 8, None);
        assert_eq!(t.take(t0, 8, ip(1)), Lookup::Unknown);
        // finish() of an id that never started records nothing.
        t.finish(t0, 9, Some(summary(1)));
        assert!(t.is_empty());
    }

    #[test]
    fn records_expire_after_the_ttl() {
        let t0 = Instant::now();
        let mut t = FlowTable::new(FlowTableLimits::default());
        t.start(t0, 1, ip(1)).unwrap();
        t.finish(t0, 1, Some(summary(1)));
        let t1 = t0 + Duration::from_secs(59);
        t.start(t1, 2, ip(1)).unwrap();
        t.finish(t1, 2, Some(summary(2)));
        let t2 = t0 + Duration::from_secs(60);
        assert_eq!(t.take(t2, 1, ip(1)), Lookup::Unknown);
        assert_eq!(t.len(), 1);
        assert_eq!(t.take(t2, 2, ip(1)), Lookup::Found(summary(2)));
        // A long flow does not expire while it runs.
        t.start(t0, 3, ip(1)).unwrap();
        let late = t0 + Duration::from_secs(3600);
        assert_eq!(t.take(late, 3, ip(1)), Lookup::Running);
        t.finish(late, 3, Some(summary(3)));
        assert_eq!(t.take(late, 3, ip(1)), Lookup::Found(summary(3)));
    }

    #[test]
    fn capacity_evicts_the_oldest_and_a_full_source_evicts_its_own() {
        let t0 = Instant::now();
        let mut t = FlowTable::new(limits(4, 2));
        let add = |t: &mut FlowTable, id: u64, src: u8| {
            t.start(t0, id, ip(src)).unwrap();
            t.finish(t0, id, Some(summary(id as u32)));
        };
        add(&mut t, 1, 1);
        add(&mut t, 2, 2);
        add(&mut t, 3, 1);
        // Source 1 is full (2): its own oldest (1) goes, not source 2's.
        add(&mut t, 4, 1);
        assert_eq!(t.len(), 3);
        assert_eq!(t.take(t0, 1, ip(1)), Lookup::Unknown);
        assert_eq!(t.take(t0, 2, ip(2)), Lookup::Found(summary(2)));
        add(&mut t, 5, 3);
        add(&mut t, 6, 4);
        // Table full (4): the oldest record overall (3) goes.
        add(&mut t, 7, 5);
        assert_eq!(t.len(), 4);
        assert_eq!(t.take(t0, 3, ip(1)), Lookup::Unknown);
        for (id, src) in [(4, 1), (5, 3), (6, 4), (7, 5)] {
            assert_eq!(t.take(t0, id, ip(src)), Lookup::Found(summary(id as u32)));
        }
    }

    #[test]
    fn running_flows_are_bounded() {
        let t0 = Instant::now();
        let mut t = FlowTable::new(limits(4, 2));
        for id in 1..=8 {
            t.start(t0, id, ip(1)).unwrap();
        }
        assert_eq!(t.start(t0, 9, ip(1)), Err(Refused::Full));
        t.finish(t0, 1, None);
        t.start(t0, 9, ip(1)).unwrap();
    }

    #[test]
    fn churn_keeps_every_structure_bounded() {
        // Insert and take many flows, some never taken: the queues stay
        // within twice their bounds (stale items are compacted away).
        let mut now = Instant::now();
        let mut t = FlowTable::new(limits(16, 4));
        for id in 1..=10_000u64 {
            now += Duration::from_millis(1);
            let src = ip((id % 7) as u8);
            t.start(now, id, src).unwrap();
            t.finish(now, id, Some(summary(1)));
            if id % 3 != 0 {
                assert!(matches!(t.take(now, id, src), Lookup::Found(_)));
            }
            assert!(t.len() <= 16);
            assert!(t.order.len() <= 2 * 16 + 16 + 1, "{}", t.order.len());
            for s in t.sources.values() {
                assert!(s.live <= 4 && s.order.len() <= 2 * 4 + 16 + 1);
            }
            assert!(t.sources.len() <= 7);
        }
        assert_eq!(t.running(), 0);
    }
}
