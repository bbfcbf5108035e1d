//! How long one source may keep a server busy: `--max-source-time` (issue
//! 19: rate, stream and duration caps are budgets per source, and cannot be
//! walked around by splitting a test into sequential or parallel ones).
//!
//! **What is counted.** A source's *busy time*: the wall time during which
//! any of its tests moved data (TCP reads and writes, UDP datagrams in and
//! out), counted once however many tests or streams it runs at once (the
//! union, not the sum: `-P 8` for 60 s costs 60 s); a gap between two
//! movements counts at most [`ACTIVITY_GAP`] (a test that moves nothing
//! costs nothing here; the idle timeouts and the table eviction deal with
//! those).
//! Parallel use is bounded by `--max-streams` and the rate budgets, so busy
//! time times those bounds the bytes a source can move.
//!
//! **The budget.** A token bucket of `cap` seconds per source, refilled at
//! `cap` per [`SOURCE_TIME_WINDOW`]: a source starts with `cap` and, once
//! that is spent, gets `cap` per day again. The default (2 h,
//! `limits::DEFAULT_MAX_SOURCE_TIME`) lets a source run the longest default
//! test (`--max-duration` 3600 s) twice a day; a long-lived lab server that
//! serves hours of tests from one address needs `--max-source-time 0` (no
//! budget). A test is refused when its source has no time left, and a
//! running test ends when the time runs out mid-test.
//!
//! **There is no global time budget**: a server busy all day with many
//! sources is doing its job; the global rate budgets and the connection
//! and flow caps bound what all sources together use.
//!
//! Sans-IO: every call takes `now` (a [`Duration`] on one clock the caller
//! keeps to: the servers use CLOCK_REALTIME, as the UDP receive timestamps
//! do). UDP source addresses are not verified, so a spoofed flood can spend
//! a victim's UDP busy time (as it can spend its rate budget); TCP sources
//! are proven by the handshake.

use crate::limits::source_key;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The budget refills `cap` per this window.
pub const SOURCE_TIME_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// Longest gap between two movements of a source that still counts as busy.
pub const ACTIVITY_GAP: Duration = Duration::from_secs(1);
/// Sources tracked before those with a full budget are forgotten.
const PRUNE_AT: usize = 16_384;

#[derive(Debug, Clone, Copy)]
struct Source {
    /// Seconds left.
    level: f64,
    /// Last refill.
    refilled: Duration,
    /// When it last moved data.
    active: Duration,
}

/// The busy-time budgets of every source (see the module docs).
#[derive(Debug)]
pub struct TimeBudget {
    /// Seconds at most.
    cap: f64,
    /// Seconds of refill per second.
    refill: f64,
    sources: HashMap<IpAddr, Source>,
}

impl TimeBudget {
    /// A budget of `cap` busy time per source, refilled at `cap` per
    /// [`SOURCE_TIME_WINDOW`].
    pub fn new(cap: Duration) -> TimeBudget {
        let secs = cap.as_secs_f64().max(1.0);
        TimeBudget {
            cap: secs,
            refill: secs / SOURCE_TIME_WINDOW.as_secs_f64(),
            sources: HashMap::new(),
        }
    }

    fn refilled(&self, s: &Source, now: Duration) -> f64 {
        let dt = now.saturating_sub(s.refilled).as_secs_f64();
        (s.level + dt * self.refill).min(self.cap)
    }

    /// May a test from `peer` start at `now`?
    pub fn has_time(&self, now: Duration, peer: IpAddr) -> bool {
        self.sources
            .get(&source_key(peer))
            .is_none_or(|s| self.refilled(s, now) > 0.0)
    }

    /// `peer`'s test moved data at `now`: charges its source the time since
    /// it last did (at most [`ACTIVITY_GAP`]). False when the source has no
    /// time left: the caller ends the test.
    pub fn charge(&mut self, now: Duration, peer: IpAddr) -> bool {
        let key = source_key(peer);
        if !self.sources.contains_key(&key) {
            self.prune(now);
            self.sources.insert(
                key,
                Source {
                    level: self.cap,
                    refilled: now,
                    active: now,
                },
            );
            return true;
        }
        let (cap, refill) = (self.cap, self.refill);
        let Some(s) = self.sources.get_mut(&key) else {
            return true;
        };
        let dt = now.saturating_sub(s.refilled).as_secs_f64();
        let busy = now.saturating_sub(s.active).min(ACTIVITY_GAP);
        s.level = (s.level + dt * refill).min(cap) - busy.as_secs_f64();
        s.refilled = s.refilled.max(now);
        s.active = s.active.max(now);
        s.level > 0.0
    }

    /// Bounded memory: forgets sources whose budget is full again; past
    /// twice the bound (a flood of spoofed UDP sources), also those that
    /// used less than half of it.
    fn prune(&mut self, now: Duration) {
        if self.sources.len() < PRUNE_AT {
            return;
        }
        let (cap, refill) = (self.cap, self.refill);
        let level =
            |s: &Source| (s.level + now.saturating_sub(s.refilled).as_secs_f64() * refill).min(cap);
        self.sources.retain(|_, s| level(s) < cap);
        if self.sources.len() >= PRUNE_AT {
            self.sources.retain(|_, s| level(s) < cap / 2.0);
        }
    }
}

/// A [`TimeBudget`] shared by a server's threads.
#[derive(Debug, Clone)]
pub struct SharedTimeBudget(Arc<Mutex<TimeBudget>>);

impl SharedTimeBudget {
    /// See [`TimeBudget::new`]; `None` for a zero `cap` (no budget).
    pub fn new(cap: Duration) -> Option<SharedTimeBudget> {
        (!cap.is_zero()).then(|| SharedTimeBudget(Arc::new(Mutex::new(TimeBudget::new(cap)))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TimeBudget> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`TimeBudget::has_time`] under the lock.
    pub fn has_time(&self, now: Duration, peer: IpAddr) -> bool {
        self.lock().has_time(now, peer)
    }

    /// [`TimeBudget::charge`] under the lock.
    pub fn charge(&self, now: Duration, peer: IpAddr) -> bool {
        self.lock().charge(now, peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Moves data from `peer` every 100 ms from `from` to `to` (seconds);
    /// returns when its budget ran out, if it did.
    fn run(b: &mut TimeBudget, peer: IpAddr, from: f64, to: f64) -> Option<f64> {
        let mut t = from;
        while t < to {
            if !b.charge(secs(t), peer) {
                return Some(t);
            }
            t += 0.1;
        }
        None
    }

    const HOUR: f64 = 3600.0;

    #[test]
    fn sequential_tests_share_one_budget_per_source() {
        // 100 s of budget; tests of 30 s with 10 s pauses: the fourth one
        // ends at about 100 s of busy time, and the next is refused.
        let mut b = TimeBudget::new(Duration::from_secs(100));
        let x: IpAddr = [10, 0, 0, 1].into();
        let mut start = 0.0;
        let mut ended = None;
        for _ in 0..4 {
            assert!(b.has_time(secs(start), x));
            ended = run(&mut b, x, start, start + 30.0);
            start += 40.0;
        }
        let at = ended.expect("the fourth test ran out");
        // 29.9 s, then 30.9 s twice (each restart after a pause costs
        // ACTIVITY_GAP), then 1 s + 7.3 s (plus a tiny refill).
        assert!((127.0..=127.8).contains(&at), "{at}");
        assert!(!b.has_time(secs(140.0), x));
        // Another source has its own budget.
        let y: IpAddr = [10, 0, 0, 2].into();
        assert!(b.has_time(secs(140.0), y));
        assert_eq!(run(&mut b, y, 140.0, 170.0), None);
    }

    #[test]
    fn parallel_streams_cost_the_wall_time_once() {
        // 8 streams moving data at once for 60 s cost 60 s, not 480.
        let mut b = TimeBudget::new(Duration::from_secs(100));
        let x: IpAddr = [10, 0, 0, 1].into();
        let mut t = 0.0;
        while t < 60.0 {
            for k in 0..8 {
                assert!(b.charge(secs(t + f64::from(k) * 0.001), x), "{t}");
            }
            t += 0.1;
        }
        // 40 s left: a 60-s test runs out at about 40 s.
        let at = run(&mut b, x, 60.0, 120.0).expect("ran out");
        assert!((99.9..=100.5).contains(&at), "{at}");
    }

    #[test]
    fn gaps_longer_than_a_second_are_not_busy_and_the_budget_refills() {
        let mut b = TimeBudget::new(Duration::from_secs(2 * 3600));
        let x: IpAddr = [10, 0, 0, 1].into();
        // A datagram every 10 s for a day costs 1 s each: 8,640 s > 7,200,
        // but the refill (7,200 s a day) covers the difference.
        let mut t = 0.0;
        while t < 24.0 * HOUR {
            assert!(b.charge(secs(t), x), "{t}");
            t += 10.0;
        }
        // Busy all the time: 2 h and a bit, then out.
        let at = run(&mut b, x, 24.0 * HOUR, 30.0 * HOUR).expect("out");
        let busy = at - 24.0 * HOUR;
        assert!((6000.0..=8000.0).contains(&busy), "{busy}");
        // A day later the whole budget is back.
        assert!(b.has_time(secs(at + 24.0 * HOUR), x));
        assert_eq!(
            run(&mut b, x, at + 24.0 * HOUR, at + 24.0 * HOUR + 3600.0),
            None
        );
    }

    #[test]
    fn a_flood_of_sources_keeps_memory_bounded() {
        let mut b = TimeBudget::new(Duration::from_secs(10));
        for i in 0..100_000u32 {
            let ip = IpAddr::from(i.to_be_bytes());
            b.charge(secs(f64::from(i) * 1e-3), ip);
            assert!(b.sources.len() <= PRUNE_AT, "{}", b.sources.len());
        }
    }
}
