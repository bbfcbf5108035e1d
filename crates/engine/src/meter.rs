//! What a server charges for the data one TCP connection moves, and the
//! minimum progress a receiving connection must make.
//!
//! [`Meter`] is the connection's handle on the server's shared budgets: the
//! rate budget (`--max-rate` when it reads, `--max-reverse-rate` when it
//! writes), the source's busy time (`--max-source-time`), and the
//! connection's [`Progress`] count that the admission table reads to evict
//! the slowest connection. The data loops call [`Meter::moved`] after each
//! read or write.
//!
//! [`MinProgress`] (sans-IO, `now` passed in) is the rule that ends a TCP
//! receive connection trickling bytes to hold its slot (issue 19 audit: a
//! byte every < 120 s kept a slot forever): from its first data byte on, a
//! connection must have delivered at least [`MIN_PROGRESS_RATE`] on
//! average since then, checked once [`MIN_PROGRESS_GRACE`] has passed.
//! The average is over the whole time since the first byte, so a slow but
//! real client passes: our client's `-b 1k` sends 125 B/s; iperf 2's
//! `-b 10k` with its default 128 KB writes sends one write every 105 s,
//! and that first write alone covers 1,300 s. A trickle of a byte every
//! 100 s is ended after 60 s; holding a connection for T seconds costs
//! 100 x T bytes.

use crate::limits::Progress;
use crate::rate_budget::SharedBudget;
use crate::time_budget::SharedTimeBudget;
use bloatlab_os::clock::realtime_now;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The average a receiving connection must keep from its first byte on.
pub const MIN_PROGRESS_RATE: u64 = 100;
/// How long after its first byte the rule starts to apply.
pub const MIN_PROGRESS_GRACE: Duration = Duration::from_secs(60);

/// One connection's charges (see the module docs).
#[derive(Debug, Clone)]
pub struct Meter {
    /// The peer the budgets count against.
    pub peer: IpAddr,
    /// Rate budget for this direction.
    pub rate: Option<SharedBudget>,
    /// The source's busy time.
    pub time: Option<SharedTimeBudget>,
    /// The admission slot's progress count.
    pub progress: Option<Progress>,
}

/// What [`Meter::moved`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    /// Wait this long before the next read or write (the rate budget).
    pub wait: Duration,
    /// The source's busy time is spent: end the test.
    pub out_of_time: bool,
}

impl Meter {
    /// `bytes` moved at `now`.
    pub fn moved(&self, now: Instant, bytes: u64) -> Moved {
        if let Some(p) = &self.progress {
            p.add(bytes);
        }
        let wait = self
            .rate
            .as_ref()
            .map_or(Duration::ZERO, |b| b.charge(now, self.peer, bytes));
        let out_of_time = self
            .time
            .as_ref()
            .is_some_and(|t| !t.charge(realtime_now(), self.peer));
        Moved { wait, out_of_time }
    }
}

/// The minimum-progress rule of one receiving connection (module docs).
#[derive(Debug, Clone, Default)]
pub struct MinProgress {
    first: Option<Instant>,
    bytes: u64,
}

impl MinProgress {
    /// `n` bytes arrived at `now`.
    pub fn on_bytes(&mut self, now: Instant, n: u64) {
        if n > 0 && self.first.is_none() {
            self.first = Some(now);
        }
        self.bytes = self.bytes.saturating_add(n);
    }

    /// The server held the reads back (its own rate budget) until `now`:
    /// the time before does not count against the peer.
    pub fn restart(&mut self, now: Instant) {
        if self.first.is_some() {
            self.first = Some(now);
            self.bytes = 0;
        }
    }

    /// Too slow at `now`: the caller ends the connection.
    pub fn too_slow(&self, now: Instant) -> bool {
        let Some(first) = self.first else {
            return false;
        };
        let t = now.saturating_duration_since(first);
        t >= MIN_PROGRESS_GRACE && (self.bytes as f64) < MIN_PROGRESS_RATE as f64 * t.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` every `every` from `t0` for `secs`; returns when the
    /// rule said too slow, if it did.
    fn feed(bytes: u64, every: Duration, secs: u64) -> Option<Duration> {
        let t0 = Instant::now();
        let mut p = MinProgress::default();
        let mut t = Duration::ZERO;
        let mut next = Duration::ZERO;
        while t <= Duration::from_secs(secs) {
            if t >= next {
                p.on_bytes(t0 + t, bytes);
                next += every;
            }
            if p.too_slow(t0 + t) {
                return Some(t);
            }
            t += Duration::from_millis(100);
        }
        None
    }

    #[test]
    fn a_trickle_is_ended_after_the_grace_and_slow_real_clients_are_not() {
        // Issue 19 audit: a byte every < 120 s held a slot forever.
        let at = feed(1, Duration::from_secs(100), 600).expect("ended");
        assert!(
            (MIN_PROGRESS_GRACE..MIN_PROGRESS_GRACE + Duration::from_secs(1)).contains(&at),
            "{at:?}"
        );
        // 50 B/s: ended too (below 100 B/s on average).
        assert!(feed(5, Duration::from_millis(100), 600).is_some());
        // Our client's -b 1k: 12-13 B every 100 ms.
        assert_eq!(feed(13, Duration::from_millis(100), 600), None);
        // iperf 2's -b 10k with 128 KB writes: one write every 105 s.
        assert_eq!(feed(131_072, Duration::from_secs(105), 1200), None);
    }

    #[test]
    fn nothing_counts_before_the_first_byte_or_while_the_server_holds_reads() {
        let t0 = Instant::now();
        let mut p = MinProgress::default();
        assert!(!p.too_slow(t0 + Duration::from_secs(3600)));
        p.on_bytes(t0, 1000);
        // The server's own budget held the reads for 100 s.
        p.restart(t0 + Duration::from_secs(100));
        assert!(!p.too_slow(t0 + Duration::from_secs(159)));
        assert!(p.too_slow(t0 + Duration::from_secs(160)));
    }
}
