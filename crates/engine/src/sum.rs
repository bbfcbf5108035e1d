//! `[SUM]` bookkeeping shared by the TCP and UDP reporters (sans-IO).
//!
//! * [`gather`] / [`sum_key`] / [`sum_span`]: a `[SUM]` line is printed once
//!   every stream of a test reported the same interval (or its total).
//! * [`JoinTable`]: a server groups the streams of one `-P N` client (same
//!   client address, header `numThreads = N > 1`) that arrive within
//!   [`JOIN_WINDOW`]. A group closes to new members once N have joined or
//!   the window has passed (a client that announced N but connected fewer
//!   never blocks later tests). Time is whatever clock the caller uses
//!   (`Instant` for TCP, the receive-timestamp clock for the UDP server).

use bloatlab_metrics::interval::Span;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::ops::Add;
use std::time::Duration;

/// How long a `-P N` group accepts members after its first stream.
pub const JOIN_WINDOW: Duration = Duration::from_secs(5);

/// Which `[SUM]` a stream's snapshot belongs to: its interval (keyed by the
/// span start), or the totals.
pub fn sum_key(span: Span, total: bool) -> Duration {
    if total { Duration::MAX } else { span.start }
}

/// Adds one stream's snapshot to the `[SUM]` under `key`; returns all of them
/// once `streams` have reported.
pub fn gather<T>(
    pending: &mut BTreeMap<Duration, Vec<T>>,
    key: Duration,
    snap: T,
    streams: u32,
) -> Option<Vec<T>> {
    let v = pending.entry(key).or_default();
    v.push(snap);
    if v.len() as u32 >= streams {
        pending.remove(&key)
    } else {
        None
    }
}

/// Full duplex (`[FD n]`): keeps one direction's report of stream
/// `stream` under `key` until the other direction's arrives, then returns
/// both (the other one first).
pub fn pair<T>(
    pending: &mut BTreeMap<(u32, Duration), T>,
    stream: u32,
    key: Duration,
    half: T,
) -> Option<(T, T)> {
    match pending.remove(&(stream, key)) {
        Some(other) => Some((other, half)),
        None => {
            pending.insert((stream, key), half);
            None
        }
    }
}

/// The span a `[SUM]` covers: earliest start to latest end.
pub fn sum_span(spans: impl Iterator<Item = Span>) -> Span {
    let mut it = spans.peekable();
    let first = it.peek().copied().unwrap_or_default();
    let (start, end) = it.fold((first.start, first.end), |(s, e), x| {
        (s.min(x.start), e.max(x.end))
    });
    Span::new(start, end)
}

/// A group that still accepts members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenGroup<T, V> {
    /// The caller's handle on the group (a reporter, an id).
    pub value: V,
    /// Members so far.
    pub joined: u32,
    /// Members the client announced (`numThreads`).
    pub expected: u32,
    /// When the join window ends.
    pub closes_at: T,
}

/// Open `-P N` groups keyed by client address and N (see the module docs).
#[derive(Debug)]
pub struct JoinTable<T, V> {
    open: HashMap<(IpAddr, u32), OpenGroup<T, V>>,
    window: Duration,
}

impl<T, V> Default for JoinTable<T, V> {
    fn default() -> Self {
        JoinTable::new(JOIN_WINDOW)
    }
}

impl<T, V> JoinTable<T, V> {
    /// A table whose groups accept members for `window` after their first.
    pub fn new(window: Duration) -> JoinTable<T, V> {
        JoinTable {
            open: HashMap::new(),
            window,
        }
    }

    /// Open groups.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// True when no group is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

impl<T, V> JoinTable<T, V>
where
    T: Copy + Ord + Add<Duration, Output = T>,
    V: Clone,
{
    /// Closes every group whose window ended by `now` and returns them
    /// (`joined < expected`: the missing members never came).
    pub fn expire(&mut self, now: T) -> Vec<OpenGroup<T, V>> {
        let due: Vec<(IpAddr, u32)> = self
            .open
            .iter()
            .filter(|(_, g)| g.closes_at <= now)
            .map(|(k, _)| *k)
            .collect();
        due.iter().filter_map(|k| self.open.remove(k)).collect()
    }

    /// Joins the open group of `peer` announcing `expected` streams, or
    /// opens one with `open()`; returns the group's value. The member that
    /// completes a group closes it. Call [`expire`](Self::expire) first so
    /// a stale group is not joined. `expected <= 1` is a group of one that
    /// is never kept open.
    pub fn join(&mut self, peer: IpAddr, expected: u32, now: T, open: impl FnOnce() -> V) -> V {
        if expected <= 1 {
            return open();
        }
        let key = (peer, expected);
        let window = self.window;
        let g = self.open.entry(key).or_insert_with(|| OpenGroup {
            value: open(),
            joined: 0,
            expected,
            closes_at: now + window,
        });
        g.joined += 1;
        let value = g.value.clone();
        if g.joined >= g.expected {
            self.open.remove(&key);
        }
        value
    }

    /// Forgets the open group of `peer` announcing `expected` streams (its
    /// first member could not start it).
    pub fn remove(&mut self, peer: IpAddr, expected: u32) {
        self.open.remove(&(peer, expected));
    }

    /// When the next open group's window ends.
    pub fn next_deadline(&self) -> Option<T> {
        self.open.values().map(|g| g.closes_at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(a: u64, b: u64) -> Span {
        Span::new(Duration::from_millis(a), Duration::from_millis(b))
    }

    #[test]
    fn gather_returns_all_parts_once_every_stream_reported() {
        let mut pending = BTreeMap::new();
        assert_eq!(gather(&mut pending, sum_key(s(0, 1000), false), 1, 3), None);
        assert_eq!(gather(&mut pending, sum_key(s(0, 1000), true), 9, 3), None);
        assert_eq!(gather(&mut pending, sum_key(s(0, 1000), false), 2, 3), None);
        assert_eq!(
            gather(&mut pending, Duration::ZERO, 3, 3),
            Some(vec![1, 2, 3])
        );
        // The totals' key is separate from the interval that starts at 0.
        assert_eq!(pending.len(), 1);
        assert!(pending.contains_key(&Duration::MAX));
    }

    #[test]
    fn pair_matches_the_two_directions_of_one_stream_and_span() {
        let mut pending = BTreeMap::new();
        assert_eq!(pair(&mut pending, 1, Duration::ZERO, 'a'), None);
        assert_eq!(pair(&mut pending, 2, Duration::ZERO, 'b'), None);
        assert_eq!(pair(&mut pending, 1, Duration::MAX, 'c'), None);
        assert_eq!(pair(&mut pending, 1, Duration::ZERO, 'd'), Some(('a', 'd')));
        assert_eq!(pending.len(), 2);
    }

    #[test]
    fn sum_span_is_earliest_start_to_latest_end() {
        let spans = [s(1000, 2000), s(1000, 2004), s(990, 1990)];
        assert_eq!(sum_span(spans.into_iter()), s(990, 2004));
        assert_eq!(sum_span(std::iter::empty()), Span::default());
    }

    #[test]
    fn join_table_groups_one_client_until_full_or_window_end() {
        let mut t: JoinTable<Duration, u32> = JoinTable::new(Duration::from_secs(5));
        let ip: IpAddr = [127, 0, 0, 1].into();
        let other: IpAddr = [127, 0, 0, 2].into();
        let mut next = 0;
        let mut open = || {
            next += 1;
            next
        };
        let t0 = Duration::from_secs(100);
        assert_eq!(t.join(ip, 2, t0, &mut open), 1);
        // Another client, or another N, is another group.
        assert_eq!(t.join(other, 2, t0, &mut open), 2);
        assert_eq!(t.join(ip, 3, t0, &mut open), 3);
        // The second member completes group 1, which closes.
        assert_eq!(t.join(ip, 2, t0, &mut open), 1);
        assert_eq!(t.join(ip, 2, t0, &mut open), 4);
        // Single streams are never grouped.
        assert_eq!(t.join(ip, 1, t0, &mut open), 5);
        assert_eq!(t.len(), 3);
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(5)));
        assert!(t.expire(t0 + Duration::from_millis(4999)).is_empty());
        let mut closed = t.expire(t0 + Duration::from_secs(5));
        closed.sort_by_key(|g| g.value);
        let got: Vec<(u32, u32, u32)> = closed
            .iter()
            .map(|g| (g.value, g.joined, g.expected))
            .collect();
        assert_eq!(got, vec![(2, 1, 2), (3, 1, 3), (4, 1, 2)]);
        assert!(t.is_empty());
    }
}
