//! One rate budget shared by every sender of a source and by all of them:
//! `--max-reverse-rate` as a budget, not a per-connection cap (issue 19:
//! `-R -b 10m -P 8` got 81 Mbit/s and 12 separate clients 121 from a
//! `--max-reverse-rate 10m` server).
//!
//! Sans-IO: token buckets in bytes on the caller's `now`. A sender charges
//! each write after it is made ([`RateBudget::charge`]) and waits until the
//! returned instant before the next one, so the buckets may go into debt by
//! one write; the long-run rate of a source, and of the whole server, is the
//! cap. A bucket holds at most [`BURST`] of credit, so an idle source cannot
//! save up a burst.

use crate::limits::source_key;
use bloatlab_units::BitRate;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Credit a bucket may hold: 100 ms at the cap.
pub const BURST: Duration = Duration::from_millis(100);
/// Sources tracked before idle, full buckets are forgotten.
const PRUNE_AT: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Bytes of credit (negative: debt).
    level: f64,
    last: Instant,
}

impl Bucket {
    fn new(now: Instant, cap: f64) -> Bucket {
        Bucket {
            level: cap,
            last: now,
        }
    }

    /// Refills to `now` and takes `bytes`; returns how long until the
    /// debt, if any, is paid at `rate` bytes/s.
    fn charge(&mut self, now: Instant, bytes: u64, rate: f64, cap: f64) -> Duration {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.level = (self.level + dt * rate).min(cap) - bytes as f64;
        if self.level >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.level / rate)
        }
    }

    fn full_at(&self, now: Instant, rate: f64, cap: f64) -> bool {
        self.level + now.saturating_duration_since(self.last).as_secs_f64() * rate >= cap
    }
}

/// The per-source and global buckets of one cap (see the module docs).
#[derive(Debug)]
pub struct RateBudget {
    /// Bytes per second.
    rate: f64,
    /// Bytes of credit at most.
    cap: f64,
    global: Option<Bucket>,
    sources: HashMap<IpAddr, Bucket>,
}

impl RateBudget {
    /// A budget of `rate` per source (IPv4 address or IPv6 /64) and in all.
    pub fn new(rate: BitRate) -> RateBudget {
        let bytes = (rate.0 as f64 / 8.0).max(1.0);
        RateBudget {
            rate: bytes,
            cap: (bytes * BURST.as_secs_f64()).max(1500.0),
            global: None,
            sources: HashMap::new(),
        }
    }

    /// `bytes` were sent to `peer` at `now`: the time to wait before the
    /// next write to anybody from this source, the later of what its
    /// source's and the global bucket owe.
    pub fn charge(&mut self, now: Instant, peer: IpAddr, bytes: u64) -> Duration {
        let (rate, cap) = (self.rate, self.cap);
        if self.sources.len() >= PRUNE_AT {
            self.sources.retain(|_, b| !b.full_at(now, rate, cap));
        }
        let src = self
            .sources
            .entry(source_key(peer))
            .or_insert_with(|| Bucket::new(now, cap))
            .charge(now, bytes, rate, cap);
        let global = self
            .global
            .get_or_insert_with(|| Bucket::new(now, cap))
            .charge(now, bytes, rate, cap);
        src.max(global)
    }
}

/// A [`RateBudget`] shared by the server's sender threads.
#[derive(Debug, Clone)]
pub struct SharedBudget(Arc<Mutex<RateBudget>>);

impl SharedBudget {
    pub fn new(rate: BitRate) -> SharedBudget {
        SharedBudget(Arc::new(Mutex::new(RateBudget::new(rate))))
    }

    /// [`RateBudget::charge`] under the lock.
    pub fn charge(&self, now: Instant, peer: IpAddr, bytes: u64) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .charge(now, peer, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `senders` (peer, bytes per write) greedily for `secs` of
    /// virtual time, each writing as soon as the budget lets it; returns
    /// the bytes each sent.
    fn run(b: &mut RateBudget, senders: &[IpAddr], write: u64, secs: u64) -> Vec<u64> {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(secs);
        let mut next = vec![t0; senders.len()];
        let mut sent = vec![0u64; senders.len()];
        loop {
            let (i, &at) = next.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
            if at >= end {
                return sent;
            }
            sent[i] += write;
            next[i] = at
                + b.charge(at, senders[i], write)
                    .max(Duration::from_micros(1));
        }
    }

    fn mbit(bytes: u64, secs: u64) -> f64 {
        bytes as f64 * 8.0 / secs as f64 / 1e6
    }

    #[test]
    fn eight_streams_of_one_source_share_one_budget() {
        // Issue 19: -R -b 10m -P 8 got 81 Mbit/s from --max-reverse-rate 10m.
        let mut b = RateBudget::new(BitRate(10_000_000));
        let ip: IpAddr = [10, 0, 0, 1].into();
        let sent = run(&mut b, &[ip; 8], 131_072, 20);
        let total = mbit(sent.iter().sum(), 20);
        assert!((9.5..=10.8).contains(&total), "{total} Mbit/s");
    }

    #[test]
    fn twelve_sources_share_the_global_budget() {
        // Issue 19: 12 separate clients got 121 Mbit/s.
        let mut b = RateBudget::new(BitRate(10_000_000));
        let ips: Vec<IpAddr> = (1..=12u8).map(|i| IpAddr::from([10, 0, 0, i])).collect();
        let sent = run(&mut b, &ips, 16_384, 20);
        let total = mbit(sent.iter().sum(), 20);
        assert!((9.5..=10.8).contains(&total), "{total} Mbit/s");
        // Each got a share, none starved.
        assert!(sent.iter().all(|&s| mbit(s, 20) > 0.3), "{sent:?}");
    }

    #[test]
    fn an_idle_source_saves_no_more_than_the_burst() {
        let mut b = RateBudget::new(BitRate(8_000_000)); // 1 MB/s, 100 kB burst
        let ip: IpAddr = [10, 0, 0, 1].into();
        let t0 = Instant::now();
        assert_eq!(b.charge(t0, ip, 100_000), Duration::ZERO);
        // An hour later only the burst is there: 200 kB owes 100 ms.
        let later = t0 + Duration::from_secs(3600);
        let wait = b.charge(later, ip, 200_000);
        assert!(
            (Duration::from_millis(99)..=Duration::from_millis(101)).contains(&wait),
            "{wait:?}"
        );
    }
}
