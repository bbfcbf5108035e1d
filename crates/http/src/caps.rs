//! Admission of connections against the server's caps: `--max-connections`
//! in all and `--max-per-source` per source (an IPv4 address or an IPv6 /64),
//! with the iperf-compatible service's table ([`bloatlab_engine::limits::Admission`])
//! and so its fairness: when the table is full, a newcomer from a source
//! holding fewer connections than the source holding most (by two or more)
//! takes the place of that source's oldest connection, and when no source
//! holds more than its share, of the slowest connection (below the engine's
//! minimum progress after its first 10 s). So one source, or a few, cannot
//! keep everyone else out by filling the table. Sans-IO apart from the
//! eviction signal: the accept loop asks, the connection counts its bytes
//! in the slot's [`Progress`] and ends when [`Slot::evicted`] fires, and the
//! slot gives its place back when dropped.

use bloatlab_engine::limits::{Admission, Progress, Refusal};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// The open-connection table.
#[derive(Debug, Clone)]
pub struct Table(Admission);

impl Table {
    pub fn new(max_total: usize, max_per_source: usize) -> Table {
        // No tests here to count apart: the third cap is the per-source one.
        Table(Admission::new(max_total, max_per_source, max_per_source))
    }

    /// Takes a slot for a connection from `peer` at `now`, maybe evicting
    /// another connection (see the module docs), or says which cap is full.
    pub fn take(&self, now: Instant, peer: IpAddr) -> Result<Slot, Refusal> {
        let evicted = Arc::new(Notify::new());
        let signal = Arc::clone(&evicted);
        // notify_one keeps a permit: an eviction before the connection
        // waits for it is not lost.
        let inner = self.0.admit(now, peer, move || signal.notify_one())?;
        Ok(Slot { inner, evicted })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.0.open()
    }
}

/// A slot held while a connection is open; released on drop, on every path.
#[derive(Debug)]
pub struct Slot {
    inner: bloatlab_engine::limits::Slot,
    evicted: Arc<Notify>,
}

impl Slot {
    /// Where the connection counts the bytes it moves (what keeps it from
    /// being evicted as idle).
    pub fn progress(&self) -> Progress {
        self.inner.progress()
    }

    /// Resolves when the table gave this connection's place to another.
    pub async fn evicted(&self) {
        self.evicted.notified().await
    }

    /// The signal [`Slot::evicted`] waits for, to wait on without the slot.
    pub fn eviction(&self) -> Eviction {
        Eviction(Some(Arc::clone(&self.evicted)))
    }
}

/// A slot's eviction signal, or none (a refused connection holds no slot).
#[derive(Debug, Clone, Default)]
pub struct Eviction(Option<Arc<Notify>>);

impl Eviction {
    /// Resolves when the slot was given to another; never without a slot.
    pub async fn wait(&self) {
        match &self.0 {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn per_source_cap_counts_an_ipv6_64_as_one_source() {
        let t = Table::new(10, 2);
        let now = Instant::now();
        let _a = t.take(now, ip("2001:db8::1")).unwrap();
        let b = t.take(now, ip("2001:db8::2")).unwrap();
        assert!(matches!(
            t.take(now, ip("2001:db8::3")),
            Err(Refusal::PerSource { cap: 2, .. })
        ));
        // Another /64 is another source.
        let _c = t.take(now, ip("2001:db8:0:1::1")).unwrap();
        drop(b);
        let _d = t.take(now, ip("2001:db8::3")).unwrap();
        assert_eq!(t.open(), 3);
    }

    #[tokio::test]
    async fn a_source_that_fills_the_table_loses_its_oldest_place_to_a_newcomer() {
        let t = Table::new(3, 3);
        let now = Instant::now();
        let held: Vec<Slot> = (0..3)
            .map(|_| t.take(now, ip("192.0.2.1")).unwrap())
            .collect();
        // A newcomer: the oldest of 192.0.2.1 is evicted, its place given.
        let _b = t.take(now, ip("192.0.2.2")).unwrap();
        assert_eq!(t.open(), 3);
        tokio::time::timeout(Duration::from_secs(1), held[0].evicted())
            .await
            .expect("the oldest was told");
        // The others were not.
        let others = tokio::time::timeout(Duration::from_millis(50), held[1].evicted()).await;
        assert!(others.is_err());
        // The source alone (2 left, the newcomer 1): equal enough, refused.
        assert!(matches!(
            t.take(now, ip("192.0.2.2")),
            Err(Refusal::Connections { cap: 3, .. })
        ));
        // The evicted slot's own drop does not free a second place.
        drop(held);
        assert_eq!(t.open(), 1);
    }
}
