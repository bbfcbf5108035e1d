//! The rate caps of the HTTP service as budgets, the same as the
//! iperf-compatible service's (issue 19, [`bloatlab_engine::rate_budget`]):
//! `--max-reverse-rate` is one budget for the large-object bytes of every
//! connection from a source (an IPv4 address or an IPv6 /64) and one for all
//! sources together; `--max-rate` the same for upload bytes. So 100 clients
//! with 16 connections each get the cap in all, not 1 600 times it.
//!
//! The token buckets are sans-IO (they take `now`); this module only pairs a
//! server-wide budget with the peer a body's bytes are charged to.

use bloatlab_engine::rate_budget::SharedBudget;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Where a body charges its bytes: a server-wide budget, and the peer's
/// address (its source bucket).
#[derive(Debug, Clone)]
pub struct Charge {
    pub budget: SharedBudget,
    pub peer: IpAddr,
}

impl Charge {
    /// `bytes` moved at `now`: how long to wait before moving more, or
    /// `None` when the budgets are not in debt.
    pub fn after(&self, now: Instant, bytes: u64) -> Option<Duration> {
        let wait = self.budget.charge(now, self.peer, bytes);
        (!wait.is_zero()).then_some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_units::BitRate;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Bytes `peers` (one entry per connection) move in `secs` of virtual
    /// time, each as the large object's body does: its first chunk waits
    /// while the budget is in debt, then it writes `chunk`s as soon as its
    /// charges allow.
    fn greedy(peers: &[IpAddr], rate: BitRate, chunk: u64, secs: u64) -> u64 {
        let budget = SharedBudget::new(rate, rate);
        let charges: Vec<Charge> = peers
            .iter()
            .map(|&peer| Charge {
                budget: budget.clone(),
                peer,
            })
            .collect();
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(secs);
        // Writers by their next turn, earliest first.
        let mut turns: BinaryHeap<Reverse<(Instant, usize)>> =
            (0..peers.len()).map(|i| Reverse((t0, i))).collect();
        let mut started = vec![false; peers.len()];
        let mut moved = 0;
        let tick = Duration::from_micros(1);
        while let Some(Reverse((at, i))) = turns.pop() {
            if at >= end {
                break;
            }
            if !started[i] {
                if let Some(wait) = charges[i].after(at, 0) {
                    turns.push(Reverse((at + wait.max(tick), i)));
                    continue;
                }
                started[i] = true;
            }
            moved += chunk;
            let wait = charges[i].after(at, chunk).unwrap_or_default();
            turns.push(Reverse((at + wait.max(tick), i)));
        }
        moved
    }

    #[test]
    fn a_hundred_clients_with_sixteen_connections_each_share_one_cap() {
        // The RPM shape: 16 connections per client, 100 clients, arriving
        // at once.
        let peers: Vec<IpAddr> = (0..100u8)
            .flat_map(|i| std::iter::repeat_n(IpAddr::from([10, 0, 1, i]), 16))
            .collect();
        let chunk = crate::body::CHUNK as u64;
        let secs = 60;
        let bytes = greedy(&peers, BitRate(50_000_000), chunk, secs);
        let mbit = bytes as f64 * 8.0 / secs as f64 / 1e6;
        // The long-run rate is the cap. Each connection runs at most one
        // chunk ahead of it (1 600 x 64 KiB once, 14 Mbit/s over 60 s at
        // worst); per connection it would have been 80 000 Mbit/s.
        assert!((49.0..=64.0).contains(&mbit), "{mbit} Mbit/s");
    }

    #[test]
    fn one_source_with_sixteen_connections_gets_the_cap_not_sixteen_times_it() {
        let peers = [IpAddr::from([192, 0, 2, 7]); 16];
        let bytes = greedy(&peers, BitRate(10_000_000), 16_384, 20);
        let mbit = bytes as f64 * 8.0 / 20.0 / 1e6;
        assert!((9.5..=10.8).contains(&mbit), "{mbit} Mbit/s");
    }
}
