//! The responder's session table: bounded, O(1) per datagram, fair per source.
//!
//! * At most [`MAX_SESSIONS`] sessions in all. When full, a new session
//!   replaces one chosen by the CLOCK ("second chance") algorithm: sessions
//!   sit in a ring in creation order with a *referenced* bit that every
//!   request sets; the sweep clears set bits and evicts the first clear one.
//!   A client probing every few ms keeps its bit set, so a flood of new
//!   sessions evicts the flood's own one-packet sessions first. Amortised
//!   O(1): every ring slot is passed over at most once per set bit.
//! * At most [`MAX_PER_SOURCE`] sessions per source (IPv4 address, IPv6 /64).
//!   A source at its cap replaces its own least recently active session (a
//!   scan of at most `MAX_PER_SOURCE` entries), so one source, spoofing
//!   session ids at any rate, cannot push other sources' sessions out.
//!
//! Sans-IO: `now` is an argument. Replaces a linear scan over all sessions
//! per new session (issue 11: 37 % probe loss under a flood).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Most client sessions tracked at once.
pub const MAX_SESSIONS: usize = 4096;
/// Most sessions one source (IPv4 address or IPv6 /64) may hold.
pub const MAX_PER_SOURCE: usize = 64;

/// A session: the client's address and its random session id.
pub type Key = (SocketAddr, u64);

/// What the responder remembers about one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientState {
    /// Requests received.
    pub rx_count: u64,
    /// Highest sequence number received.
    pub highest: u64,
    /// Bit `j`: request `highest - j` was received.
    pub window: u128,
    /// Last request time.
    pub last_active: Duration,
}

#[derive(Debug)]
struct Entry {
    state: ClientState,
    referenced: bool,
    /// Creation number: tells a ring slot from a newer session with the same key.
    id: u64,
}

/// The table. See the module docs for the policy.
#[derive(Debug, Default)]
pub struct SessionTable {
    entries: HashMap<Key, Entry>,
    /// CLOCK ring in creation order; slots of removed sessions are skipped lazily.
    ring: VecDeque<(Key, u64)>,
    per_source: HashMap<IpAddr, Vec<Key>>,
    next_id: u64,
    evicted: u64,
}

/// The fairness unit: an IPv4 address, or the /64 of an IPv6 address.
fn source_of(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
    }
}

impl SessionTable {
    /// An empty table.
    pub fn new() -> SessionTable {
        SessionTable::default()
    }

    /// Sessions tracked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no session is tracked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sessions removed to make room so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Sessions held by `addr`'s source.
    pub fn source_sessions(&self, addr: SocketAddr) -> usize {
        self.per_source.get(&source_of(addr)).map_or(0, Vec::len)
    }

    /// True if `key` is tracked.
    pub fn contains(&self, key: &Key) -> bool {
        self.entries.contains_key(key)
    }

    /// The session for `key`, created (with `init`) if new, and marked as
    /// recently used. Makes room first if the source or the table is full.
    pub fn touch(&mut self, key: Key, now: Duration, init: ClientState) -> &mut ClientState {
        let known = self.entries.contains_key(&key);
        if !known {
            self.make_room(key.0);
            let id = self.next_id;
            self.next_id += 1;
            self.entries.insert(
                key,
                Entry {
                    state: init,
                    referenced: false,
                    id,
                },
            );
            self.ring.push_back((key, id));
            self.per_source
                .entry(source_of(key.0))
                .or_default()
                .push(key);
            self.compact_ring();
        }
        // Cannot fail: present or just inserted.
        let e = self.entries.get_mut(&key).expect("session present");
        // A new session earns its second chance with its second request, so
        // one-datagram sessions (a spoofing flood) are the first to go.
        e.referenced |= known;
        e.state.last_active = now;
        &mut e.state
    }

    fn make_room(&mut self, from: SocketAddr) {
        let src = source_of(from);
        if let Some(keys) = self.per_source.get(&src)
            && keys.len() >= MAX_PER_SOURCE
        {
            // The source's own least recently active session (bounded scan).
            let oldest = keys
                .iter()
                .min_by_key(|k| self.entries.get(k).map(|e| e.state.last_active))
                .copied();
            if let Some(k) = oldest {
                self.remove(&k);
            }
            return;
        }
        while self.entries.len() >= MAX_SESSIONS {
            let Some((key, id)) = self.ring.pop_front() else {
                return;
            };
            let Some(e) = self.entries.get_mut(&key).filter(|e| e.id == id) else {
                continue; // a slot of a session already removed
            };
            if e.referenced {
                e.referenced = false;
                self.ring.push_back((key, id));
            } else {
                self.remove(&key);
            }
        }
    }

    fn remove(&mut self, key: &Key) {
        if self.entries.remove(key).is_none() {
            return;
        }
        self.evicted += 1;
        let src = source_of(key.0);
        if let Some(keys) = self.per_source.get_mut(&src) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.per_source.remove(&src);
            }
        }
    }

    /// Drops ring slots of removed sessions once they outnumber live ones, so
    /// the ring stays within 2 x MAX_SESSIONS (O(n) every n insertions).
    fn compact_ring(&mut self) {
        if self.ring.len() > 2 * MAX_SESSIONS {
            let entries = &self.entries;
            self.ring
                .retain(|(k, id)| entries.get(k).is_some_and(|e| e.id == *id));
        }
    }

    /// Ring slots (live and stale), for tests of the bound.
    pub fn ring_len(&self) -> usize {
        self.ring.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st() -> ClientState {
        ClientState {
            rx_count: 0,
            highest: 0,
            window: 0,
            last_active: Duration::ZERO,
        }
    }

    fn a(ip: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((ip, port))
    }

    #[test]
    fn a_flooding_source_only_replaces_its_own_sessions() {
        let mut t = SessionTable::new();
        let real = (a([10, 0, 0, 1], 1000), 7);
        t.touch(real, Duration::ZERO, st());
        for s in 0..100_000u64 {
            t.touch((a([10, 0, 0, 2], 2000), s), Duration::from_micros(s), st());
        }
        assert!(t.contains(&real));
        assert_eq!(t.source_sessions(a([10, 0, 0, 2], 1)), MAX_PER_SOURCE);
        assert_eq!(t.len(), MAX_PER_SOURCE + 1);
        assert!(t.ring_len() <= 2 * MAX_SESSIONS + 1, "{}", t.ring_len());
    }

    #[test]
    fn spoofed_sources_fill_the_table_but_an_active_client_stays() {
        let mut t = SessionTable::new();
        let real = (a([10, 0, 0, 1], 1000), 7);
        for i in 0..200_000u32 {
            let now = Duration::from_micros(u64::from(i));
            if i % 1000 == 0 {
                // The real client probes every 1000 flood datagrams.
                t.touch(real, now, st()).rx_count += 1;
            }
            let ip = (0x0b00_0000u32 + i).to_be_bytes();
            t.touch((a(ip, 1), 1), now, st());
            assert!(t.len() <= MAX_SESSIONS);
        }
        assert!(t.contains(&real));
        assert_eq!(t.touch(real, Duration::MAX, st()).rx_count, 200);
        assert!(t.evicted() > 190_000);
    }

    #[test]
    fn ipv6_sources_are_grouped_by_64() {
        let mut t = SessionTable::new();
        for i in 0..200u16 {
            let addr = SocketAddr::new(
                std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 1, i, i, i, i).into(),
                5000,
            );
            t.touch((addr, 1), Duration::ZERO, st());
        }
        assert_eq!(t.len(), MAX_PER_SOURCE);
    }

    #[test]
    fn unproven_sessions_go_before_active_ones_when_full() {
        let mut t = SessionTable::new();
        let key = |i: u32| (a((0x0c00_0000 + i).to_be_bytes(), 1), 1);
        // One session per source so the per-source cap never applies.
        for i in 0..MAX_SESSIONS as u32 {
            t.touch(key(i), Duration::ZERO, st());
        }
        // Session 100 asks again (its second request): it earns a second chance.
        t.touch(key(100), Duration::from_secs(1), st());
        for i in 0..200u32 {
            t.touch(
                (a((0x0d00_0000 + i).to_be_bytes(), 1), 1),
                Duration::from_secs(2),
                st(),
            );
        }
        assert!(t.contains(&key(100)));
        assert!(!t.contains(&key(99)) && !t.contains(&key(101)));
        assert_eq!(t.len(), MAX_SESSIONS);
    }
}

/// Requests per second one source may have answered, sustained.
pub const SOURCE_RATE: u32 = 2000;
/// Requests one source may have answered in a burst above [`SOURCE_RATE`].
pub const SOURCE_BURST: u32 = 2000;
/// Sources with a budget at once; the oldest budget is dropped first.
const MAX_BUDGETS: usize = MAX_SESSIONS;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens in thousandths of a request.
    milli: u64,
    last: Duration,
}

/// A token bucket per source ([`SOURCE_RATE`] with [`SOURCE_BURST`]), so one
/// source flooding the responder costs it a receive per datagram but no reply
/// and no session churn beyond its budget. O(1) per datagram; at most
/// `MAX_SESSIONS` budgets, replaced oldest first (a replaced source starts
/// again with a full burst).
#[derive(Debug, Default)]
pub struct SourceBudget {
    buckets: HashMap<IpAddr, Bucket>,
    order: VecDeque<IpAddr>,
}

impl SourceBudget {
    /// An empty budget table.
    pub fn new() -> SourceBudget {
        SourceBudget::default()
    }

    /// True (and one request spent) if `from`'s source may be answered at `now`.
    pub fn admit(&mut self, from: SocketAddr, now: Duration) -> bool {
        let src = source_of(from);
        let full = u64::from(SOURCE_BURST) * 1000;
        if !self.buckets.contains_key(&src) {
            while self.buckets.len() >= MAX_BUDGETS {
                match self.order.pop_front() {
                    Some(old) => {
                        self.buckets.remove(&old);
                    }
                    None => break,
                }
            }
            self.buckets.insert(
                src,
                Bucket {
                    milli: full,
                    last: now,
                },
            );
            self.order.push_back(src);
        }
        // Cannot fail: present or just inserted.
        let b = self.buckets.get_mut(&src).expect("bucket present");
        let elapsed = now.saturating_sub(b.last);
        b.last = now.max(b.last);
        let refill = elapsed.as_micros() * u128::from(SOURCE_RATE) / 1000;
        b.milli = (u128::from(b.milli) + refill).min(u128::from(full)) as u64;
        if b.milli >= 1000 {
            b.milli -= 1000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn a_source_gets_its_burst_then_its_rate() {
        let mut b = SourceBudget::new();
        let from = SocketAddr::from(([10, 0, 0, 1], 1));
        let other = SocketAddr::from(([10, 0, 0, 2], 1));
        let admitted = (0..10_000)
            .filter(|_| b.admit(from, Duration::ZERO))
            .count();
        assert_eq!(admitted, SOURCE_BURST as usize);
        assert!(
            b.admit(other, Duration::ZERO),
            "other sources are unaffected"
        );
        // One second later: SOURCE_RATE more.
        let admitted = (0..10_000)
            .filter(|_| b.admit(from, Duration::from_secs(1)))
            .count();
        assert_eq!(admitted, SOURCE_RATE as usize);
        // A 100 Hz client is never limited.
        let client = SocketAddr::from(([10, 0, 0, 3], 1));
        assert!((0..100_000u64).all(|i| b.admit(client, Duration::from_millis(10 * i))));
    }

    #[test]
    fn budgets_are_bounded() {
        let mut b = SourceBudget::new();
        for i in 0..20_000u32 {
            b.admit(SocketAddr::from((i.to_be_bytes(), 1)), Duration::ZERO);
        }
        assert!(b.buckets.len() <= MAX_BUDGETS && b.order.len() <= MAX_BUDGETS);
    }
}
