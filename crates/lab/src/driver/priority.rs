//! When a forwarding thread runs with SCHED_FIFO. Sans-IO: times passed in.
//!
//! SCHED_FIFO keeps wake-ups prompt while other processes compete for the
//! CPU (emulation.md 4.3: p99 lateness ~0.1-0.2 ms instead of ms). But a
//! real-time thread that keeps a core nearly busy (1 Gbit/s on a 2-core VM:
//! every TUN write runs the receiving host's TCP stack in our context)
//! starves the normal processes on that core, and the kernel then takes
//! the core away from all real-time threads for tens of ms at a time (RT
//! throttling / the fair server's reserved time): measured as 28-33 ms p99
//! lateness and -3 to -5 % rate at 1 Gbit/s. A thread that is that busy
//! gains nothing from priority anyway.
//!
//! So each thread measures its busy share over [`WINDOW`]: above
//! [`DEMOTE_BUSY_PCT`] it drops to normal scheduling, below
//! [`PROMOTE_BUSY_PCT`] it returns to SCHED_FIFO (if it was asked for).

use std::time::Duration;

/// Length of one busy-share measurement.
pub const WINDOW: Duration = Duration::from_millis(100);
/// Busier than this (percent of wall time), a real-time thread goes normal.
pub const DEMOTE_BUSY_PCT: u128 = 85;
/// Less busy than this, a demoted thread returns to real time.
pub const PROMOTE_BUSY_PCT: u128 = 60;

/// The governor of one thread.
#[derive(Debug, Clone)]
pub struct PriorityGovernor {
    wanted: bool,
    realtime: bool,
    window_start: Duration,
    idle: Duration,
    demotions: u64,
}

impl PriorityGovernor {
    /// `wanted`: the user asked for real time; `realtime`: the thread has
    /// it now (false if the kernel refused).
    pub fn new(wanted: bool, realtime: bool, now: Duration) -> PriorityGovernor {
        PriorityGovernor {
            wanted,
            realtime,
            window_start: now,
            idle: Duration::ZERO,
            demotions: 0,
        }
    }

    /// The thread spent `d` blocked (sleeping, not spinning).
    pub fn idle(&mut self, d: Duration) {
        self.idle += d;
    }

    /// Whether the thread runs real-time now.
    pub fn realtime(&self) -> bool {
        self.realtime
    }

    /// How often the thread has dropped to normal scheduling.
    pub fn demotions(&self) -> u64 {
        self.demotions
    }

    /// Call once per loop. At the end of a window, returns the new policy
    /// (`Some(true)` = switch to SCHED_FIFO) when it changes. The caller
    /// applies it and reports back with [`PriorityGovernor::applied`].
    pub fn tick(&mut self, now: Duration) -> Option<bool> {
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed < WINDOW {
            return None;
        }
        let busy = elapsed.saturating_sub(self.idle);
        let busy_pct = busy.as_nanos() * 100 / elapsed.as_nanos();
        self.window_start = now;
        self.idle = Duration::ZERO;
        if self.realtime && busy_pct > DEMOTE_BUSY_PCT {
            Some(false)
        } else if self.wanted && !self.realtime && busy_pct < PROMOTE_BUSY_PCT {
            Some(true)
        } else {
            None
        }
    }

    /// The switch to `realtime` was made (or, for a refused promotion,
    /// not: pass the policy actually in effect).
    pub fn applied(&mut self, realtime: bool) {
        if self.realtime && !realtime {
            self.demotions += 1;
        }
        self.realtime = realtime;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Runs windows where the thread is idle for `idle_ms` of every 100 ms.
    fn window(g: &mut PriorityGovernor, start: Duration, idle_ms: u64) -> Option<bool> {
        for i in 1..=10u32 {
            g.idle(Duration::from_millis(idle_ms) / 10);
            let d = g.tick(start + i * 10 * MS);
            if i < 10 {
                assert_eq!(d, None, "decisions only at window ends");
            } else {
                return d;
            }
        }
        unreachable!()
    }

    #[test]
    fn a_saturated_realtime_thread_drops_to_normal_and_comes_back_when_idle() {
        let mut g = PriorityGovernor::new(true, true, Duration::ZERO);
        assert_eq!(window(&mut g, Duration::ZERO, 40), None, "60 % busy stays");
        assert_eq!(window(&mut g, 100 * MS, 5), Some(false), "95 % busy drops");
        g.applied(false);
        assert_eq!(g.demotions(), 1);
        assert_eq!(window(&mut g, 200 * MS, 20), None, "80 % busy: stay normal");
        assert_eq!(
            window(&mut g, 300 * MS, 50),
            Some(true),
            "50 % busy returns"
        );
        g.applied(true);
        assert!(g.realtime());
        assert_eq!(g.demotions(), 1);
    }

    #[test]
    fn a_thread_that_never_wanted_realtime_is_never_promoted() {
        let mut g = PriorityGovernor::new(false, false, Duration::ZERO);
        assert_eq!(window(&mut g, Duration::ZERO, 100), None);
        assert_eq!(window(&mut g, 100 * MS, 0), None);
    }

    #[test]
    fn a_refused_promotion_is_retried_next_window() {
        let mut g = PriorityGovernor::new(true, false, Duration::ZERO);
        assert_eq!(window(&mut g, Duration::ZERO, 90), Some(true));
        g.applied(false); // the kernel said no
        assert_eq!(g.demotions(), 0);
        assert_eq!(window(&mut g, 100 * MS, 90), Some(true));
    }

    #[test]
    fn idle_longer_than_the_window_counts_as_idle() {
        let mut g = PriorityGovernor::new(true, true, Duration::ZERO);
        g.idle(150 * MS); // one long sleep that spanned the window end
        assert_eq!(g.tick(120 * MS), None);
    }
}
