//! Admission of connections against the server's caps: `--max-connections`
//! in all and `--max-per-source` per source (an IPv4 address or an IPv6 /64,
//! as the iperf-compatible service counts them). Sans-IO: the accept loop
//! asks, the guard gives the slot back when the connection ends.

use bloatlab_engine::limits::source_key;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Which cap a refused connection hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CapHit {
    #[error("--max-connections ({0}) reached")]
    Global(usize),
    #[error("--max-per-source ({0}) reached for this source")]
    PerSource(usize),
}

/// The open-connection counts.
#[derive(Debug)]
pub struct Admission {
    max_total: usize,
    max_per_source: usize,
    total: usize,
    per_source: HashMap<IpAddr, usize>,
}

impl Admission {
    pub fn new(max_total: usize, max_per_source: usize) -> Admission {
        Admission {
            max_total,
            max_per_source,
            total: 0,
            per_source: HashMap::new(),
        }
    }

    /// Takes a slot for a connection from `peer`, or says which cap is full.
    pub fn admit(&mut self, peer: IpAddr) -> Result<(), CapHit> {
        if self.total >= self.max_total {
            return Err(CapHit::Global(self.max_total));
        }
        let n = self.per_source.entry(source_key(peer)).or_insert(0);
        if *n >= self.max_per_source {
            return Err(CapHit::PerSource(self.max_per_source));
        }
        *n += 1;
        self.total += 1;
        Ok(())
    }

    /// Gives back the slot of a connection from `peer` that ended.
    pub fn release(&mut self, peer: IpAddr) {
        let key = source_key(peer);
        if let Some(n) = self.per_source.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&key);
            }
            self.total -= 1;
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.total
    }
}

/// A slot held while a connection is open; released on drop, on every path.
#[derive(Debug)]
pub struct Slot {
    table: Arc<Mutex<Admission>>,
    peer: IpAddr,
}

impl Slot {
    /// Admits `peer` into the shared table.
    pub fn take(table: &Arc<Mutex<Admission>>, peer: IpAddr) -> Result<Slot, CapHit> {
        lock(table).admit(peer)?;
        Ok(Slot {
            table: Arc::clone(table),
            peer,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.table).release(self.peer);
    }
}

/// The table stays usable even if a task panicked while holding the lock:
/// its counts are updated in single steps.
pub(crate) fn lock(table: &Mutex<Admission>) -> std::sync::MutexGuard<'_, Admission> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn per_source_cap_counts_an_ipv6_64_as_one_source() {
        let mut a = Admission::new(10, 2);
        a.admit(ip("2001:db8::1")).unwrap();
        a.admit(ip("2001:db8::2")).unwrap();
        assert_eq!(a.admit(ip("2001:db8::3")), Err(CapHit::PerSource(2)));
        // Another /64 is another source.
        a.admit(ip("2001:db8:0:1::1")).unwrap();
        a.release(ip("2001:db8::1"));
        a.admit(ip("2001:db8::3")).unwrap();
        assert_eq!(a.open(), 3);
    }

    #[test]
    fn global_cap_is_checked_before_the_source_cap() {
        let mut a = Admission::new(2, 5);
        a.admit(ip("192.0.2.1")).unwrap();
        a.admit(ip("192.0.2.2")).unwrap();
        assert_eq!(a.admit(ip("192.0.2.3")), Err(CapHit::Global(2)));
    }

    #[test]
    fn slots_are_given_back_on_drop_and_a_stray_release_is_harmless() {
        let t = Arc::new(Mutex::new(Admission::new(1, 1)));
        let s = Slot::take(&t, ip("127.0.0.1")).unwrap();
        assert!(Slot::take(&t, ip("127.0.0.2")).is_err());
        drop(s);
        let _s = Slot::take(&t, ip("127.0.0.2")).unwrap();
        lock(&t).release(ip("198.51.100.1"));
        assert_eq!(lock(&t).open(), 1);
    }
}
