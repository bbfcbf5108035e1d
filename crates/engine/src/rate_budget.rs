//! One rate budget shared by every sender (or receiver) of a source and by
//! all of them: `--max-reverse-rate` and `--max-rate` as budgets, not
//! per-connection caps (issue 19: `-R -b 10m -P 8` got 81 Mbit/s and 12
//! separate clients 121 from a `--max-reverse-rate 10m` server).
//!
//! Sans-IO: token buckets in bytes on the caller's `now` (a [`Duration`]
//! since any origin the caller keeps to). Two ways to spend:
//!
//! * **shaping** ([`RateBudget::charge`], TCP): a sender charges each write
//!   after it is made and waits until the returned time before the next one,
//!   so the buckets may go into debt by one write; the long-run rate of a
//!   source, and of the whole server, is the cap;
//! * **policing** ([`RateBudget::admit`], UDP receive): a datagram is taken
//!   only while its source's and the global bucket have credit; one that is
//!   not taken costs nothing, so a flooding source gets its own share and
//!   no more, and cannot starve the others out of the global bucket.
//!
//! A bucket holds at most [`BURST`] of credit, so an idle source cannot save
//! up a burst.
//!
//! **Per source and in all.** The global bucket has its own rate
//! (`--max-total-rate`, `--max-total-reverse-rate`), by default
//! [`DEFAULT_TOTAL_FACTOR`] times the per-source one: a global cap equal to
//! the per-source cap would let one source take all of it, and a policed
//! flood would then starve every other source.

use crate::limits::source_key;
use bloatlab_units::BitRate;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Credit a bucket may hold: 100 ms at the cap.
pub const BURST: Duration = Duration::from_millis(100);
/// The global budget, when not set, is this many times the per-source one.
pub const DEFAULT_TOTAL_FACTOR: u64 = 4;
/// Sources tracked before idle, full buckets are forgotten.
const PRUNE_AT: usize = 1024;

/// One bucket's rate, in bytes.
#[derive(Debug, Clone, Copy)]
struct Rate {
    /// Bytes per second.
    per_sec: f64,
    /// Bytes of credit at most.
    cap: f64,
}

impl Rate {
    fn of(rate: BitRate) -> Rate {
        let per_sec = (rate.0 as f64 / 8.0).max(1.0);
        Rate {
            per_sec,
            cap: (per_sec * BURST.as_secs_f64()).max(1500.0),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Bytes of credit (negative: debt).
    level: f64,
    last: Duration,
}

impl Bucket {
    fn new(now: Duration, r: Rate) -> Bucket {
        Bucket {
            level: r.cap,
            last: now,
        }
    }

    /// Refills to `now` (time going back adds nothing).
    fn refill(&mut self, now: Duration, r: Rate) {
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.level = (self.level + dt * r.per_sec).min(r.cap);
    }

    /// How long until the debt, if any, is paid.
    fn owed(&self, r: Rate) -> Duration {
        if self.level >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.level / r.per_sec)
        }
    }

    fn full_at(&self, now: Duration, r: Rate) -> bool {
        self.level + now.saturating_sub(self.last).as_secs_f64() * r.per_sec >= r.cap
    }
}

/// The per-source and global buckets of one cap (see the module docs).
#[derive(Debug)]
pub struct RateBudget {
    source_rate: Rate,
    total_rate: Rate,
    global: Option<Bucket>,
    sources: HashMap<IpAddr, Bucket>,
}

impl RateBudget {
    /// A budget of `per_source` for each source (IPv4 address or IPv6 /64)
    /// and `total` for all of them together.
    pub fn new(per_source: BitRate, total: BitRate) -> RateBudget {
        RateBudget {
            source_rate: Rate::of(per_source),
            total_rate: Rate::of(total),
            global: None,
            sources: HashMap::new(),
        }
    }

    /// Both buckets of `peer`'s source, refilled to `now`.
    fn buckets(&mut self, now: Duration, peer: IpAddr) -> (&mut Bucket, &mut Bucket) {
        let (sr, tr) = (self.source_rate, self.total_rate);
        if self.sources.len() >= PRUNE_AT {
            self.sources.retain(|_, b| !b.full_at(now, sr));
        }
        let src = self
            .sources
            .entry(source_key(peer))
            .or_insert_with(|| Bucket::new(now, sr));
        src.refill(now, sr);
        let global = self.global.get_or_insert_with(|| Bucket::new(now, tr));
        global.refill(now, tr);
        (src, global)
    }

    /// Shaping: `bytes` were sent to (or read from) `peer` at `now`; the
    /// time to wait before the next write to anybody from this source, the
    /// later of what its source's and the global bucket owe.
    pub fn charge(&mut self, now: Duration, peer: IpAddr, bytes: u64) -> Duration {
        let (sr, tr) = (self.source_rate, self.total_rate);
        let (src, global) = self.buckets(now, peer);
        src.level -= bytes as f64;
        global.level -= bytes as f64;
        src.owed(sr).max(global.owed(tr))
    }

    /// Policing: may `bytes` from `peer` be taken at `now`? Taken only
    /// while both buckets have credit (so each may go into debt by one
    /// datagram); one that is not taken is not charged.
    pub fn admit(&mut self, now: Duration, peer: IpAddr, bytes: u64) -> bool {
        let (src, global) = self.buckets(now, peer);
        if src.level <= 0.0 || global.level <= 0.0 {
            return false;
        }
        src.level -= bytes as f64;
        global.level -= bytes as f64;
        true
    }
}

/// A [`RateBudget`] shared by the server's threads, on the monotonic clock.
#[derive(Debug, Clone)]
pub struct SharedBudget {
    origin: Instant,
    inner: Arc<Mutex<RateBudget>>,
}

impl SharedBudget {
    /// See [`RateBudget::new`].
    pub fn new(per_source: BitRate, total: BitRate) -> SharedBudget {
        SharedBudget {
            origin: Instant::now(),
            inner: Arc::new(Mutex::new(RateBudget::new(per_source, total))),
        }
    }

    /// [`RateBudget::charge`] under the lock.
    pub fn charge(&self, now: Instant, peer: IpAddr, bytes: u64) -> Duration {
        let at = now.saturating_duration_since(self.origin);
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .charge(at, peer, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `senders` (peer, bytes per write) greedily for `secs` of
    /// virtual time, each writing as soon as the budget lets it; returns
    /// the bytes each sent.
    fn run(b: &mut RateBudget, senders: &[IpAddr], write: u64, secs: u64) -> Vec<u64> {
        let end = Duration::from_secs(secs);
        let mut next = vec![Duration::ZERO; senders.len()];
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

    /// Offers datagrams of `len` bytes from each of `senders` at its rate in
    /// datagrams per second, for `secs` of virtual time, to a policing
    /// budget; returns the bytes taken from each.
    fn offer(b: &mut RateBudget, senders: &[(IpAddr, u64)], len: u64, secs: u64) -> Vec<u64> {
        let mut taken = vec![0u64; senders.len()];
        let gaps: Vec<Duration> = senders
            .iter()
            .map(|(_, pps)| Duration::from_secs_f64(1.0 / *pps as f64))
            .collect();
        let mut next = vec![Duration::ZERO; senders.len()];
        let end = Duration::from_secs(secs);
        loop {
            let (i, &at) = next.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
            if at >= end {
                return taken;
            }
            if b.admit(at, senders[i].0, len) {
                taken[i] += len;
            }
            next[i] = at + gaps[i];
        }
    }

    fn mbit(bytes: u64, secs: u64) -> f64 {
        bytes as f64 * 8.0 / secs as f64 / 1e6
    }

    const TEN_M: BitRate = BitRate(10_000_000);

    #[test]
    fn eight_streams_of_one_source_share_one_budget() {
        // Issue 19: -R -b 10m -P 8 got 81 Mbit/s from --max-reverse-rate 10m.
        let mut b = RateBudget::new(TEN_M, BitRate(40_000_000));
        let ip: IpAddr = [10, 0, 0, 1].into();
        let sent = run(&mut b, &[ip; 8], 131_072, 20);
        let total = mbit(sent.iter().sum(), 20);
        assert!((9.5..=10.8).contains(&total), "{total} Mbit/s");
    }

    #[test]
    fn twelve_sources_share_the_global_budget() {
        // Issue 19: 12 separate clients got 121 Mbit/s. With the default
        // global budget (4x the per-source one) they get 40 in all.
        let mut b = RateBudget::new(TEN_M, BitRate(40_000_000));
        let ips: Vec<IpAddr> = (1..=12u8).map(|i| IpAddr::from([10, 0, 0, i])).collect();
        let sent = run(&mut b, &ips, 16_384, 20);
        let total = mbit(sent.iter().sum(), 20);
        assert!((38.0..=42.0).contains(&total), "{total} Mbit/s");
        // Each got a share, none starved.
        assert!(sent.iter().all(|&s| mbit(s, 20) > 1.5), "{sent:?}");
    }

    #[test]
    fn an_idle_source_saves_no_more_than_the_burst() {
        let mut b = RateBudget::new(BitRate(8_000_000), BitRate(80_000_000)); // 1 MB/s, 100 kB burst
        let ip: IpAddr = [10, 0, 0, 1].into();
        let t0 = Duration::from_secs(5);
        assert_eq!(b.charge(t0, ip, 100_000), Duration::ZERO);
        // An hour later only the burst is there: 200 kB owes 100 ms.
        let later = t0 + Duration::from_secs(3600);
        let wait = b.charge(later, ip, 200_000);
        assert!(
            (Duration::from_millis(99)..=Duration::from_millis(101)).contains(&wait),
            "{wait:?}"
        );
    }

    #[test]
    fn a_policed_flood_gets_its_sources_share_and_others_still_get_theirs() {
        // Issue 19 audit: UDP -b 0 (no announced rate) and -P N each got the
        // whole --max-rate. Policed: a source flooding at 100x its budget
        // gets its budget, and a real 5 Mbit/s sender from another source
        // loses nothing to it.
        let mut b = RateBudget::new(TEN_M, BitRate(40_000_000));
        let flood: IpAddr = [10, 0, 0, 1].into();
        let real: IpAddr = [10, 0, 0, 2].into();
        // 1 Gbit/s of 1470-B datagrams = 85,034/s; 5 Mbit/s = 425/s.
        let taken = offer(&mut b, &[(flood, 85_034), (real, 425)], 1470, 10);
        let (f, r) = (mbit(taken[0], 10), mbit(taken[1], 10));
        assert!((9.5..=10.5).contains(&f), "the flood got {f} Mbit/s");
        assert!(r > 4.95, "the real sender got {r} Mbit/s");
    }

    #[test]
    fn policed_sources_together_get_the_global_budget_and_each_its_share() {
        // 8 sources each flooding: 40 Mbit/s in all, about 5 each.
        let mut b = RateBudget::new(TEN_M, BitRate(40_000_000));
        let senders: Vec<(IpAddr, u64)> = (1..=8u8)
            .map(|i| (IpAddr::from([10, 0, 0, i]), 8_503 + u64::from(i)))
            .collect();
        let taken = offer(&mut b, &senders, 1470, 10);
        let total = mbit(taken.iter().sum(), 10);
        assert!((39.0..=41.0).contains(&total), "{total} Mbit/s");
        assert!(taken.iter().all(|&t| mbit(t, 10) > 4.0), "{taken:?}");
    }
}
