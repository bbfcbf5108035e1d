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
//!
//! The forwarding threads together can starve the hosts too: at 1 Gbit/s
//! with offloads on a 2-core VM the two threads took ~150 % of a core at
//! SCHED_FIFO, each below 85 %, and every wake-up preempted the sending
//! iperf3, which then left the bottleneck queue empty: 937-988 Mbit/s,
//! against 999.0-999.7 at normal priority. So the threads also share a
//! [`BusyBoard`]: while all of them together are busier than
//! [`MACHINE_DEMOTE_PCT`] of the machine's CPUs, the busiest goes normal,
//! and returns only under [`MACHINE_PROMOTE_PCT`]. (Demoting all of them
//! also left the ACK direction's thread waiting >20 ms at times, and the
//! server's TUN ring overflowed.) This rule is for threads with headroom,
//! i.e. with offloads: without them the `up` thread at 1 Gbit/s is itself
//! the bottleneck, and demoting it made its TUN ring overflow (836-906
//! Mbit/s against 916-982 without the rule), so the driver turns the rule
//! on only with offloads.
//!
//! A demoted thread does not go to plain SCHED_OTHER at nice 0: there it
//! waited its turn behind every runnable process, and at 1 Gbit/s with
//! offloads (always demoted on 2 CPUs) release lateness p99 was 0.36-2.5 ms
//! on a quiet machine against 46-73 us for a thread that kept SCHED_FIFO.
//! It goes to nice [`DEMOTED_NICE`] with the EEVDF slice [`DEMOTED_SLICE`]
//! (Linux 6.12+), and the daemon's autogroup to the same nice value
//! (timing.rs: with autogroups a thread's nice value weighs only inside its
//! session). The fair class keeps what the demotion is for: no RT
//! throttling, and the others still get their share. Measured on the shared
//! 2-core VM at load 4-10 (docs/benchmarks.md, 7 December 04:49-05:14): the
//! rate within 1 % in 16 of 18 runs where nice 0 was in 1 of 18 (down to
//! -14 %), and p99 1.0-3.8 ms instead of 3.8-10.9 ms, but not under 100 us:
//! every competing process still runs its own (default, ~1.4 ms) slice when
//! its share comes due.
//! Where the kernel has no custom slices or refuses the nice value, the
//! thread goes to plain SCHED_OTHER as before ([`NormalMode`] says which).

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Nice value of a demoted thread (see [`DEMOTED_SLICE`]).
pub const DEMOTED_NICE: i32 = -20;
/// EEVDF slice of a demoted thread (Linux 6.12+, the shortest the kernel
/// allows): with it a waking thread gets an early virtual deadline and
/// preempts the running one promptly, like SCHED_FIFO did, but in the fair
/// class, so neither RT throttling nor an unbounded run applies.
pub const DEMOTED_SLICE: Duration = Duration::from_micros(100);

/// How a thread that is not SCHED_FIFO is scheduled (`lab status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormalMode {
    /// Plain SCHED_OTHER, nice 0: never demoted, or real time not asked for.
    #[default]
    Plain,
    /// SCHED_OTHER at [`DEMOTED_NICE`] with [`DEMOTED_SLICE`].
    Prompt,
    /// The kernel has no custom slices (before 6.12): plain SCHED_OTHER.
    NoCustomSlice,
    /// The kernel refused the nice value or the call: plain SCHED_OTHER.
    Refused,
}

/// Length of one busy-share measurement.
pub const WINDOW: Duration = Duration::from_millis(100);
/// Busier than this (percent of wall time), a real-time thread goes normal.
pub const DEMOTE_BUSY_PCT: u128 = 85;
/// Less busy than this, a demoted thread returns to real time.
pub const PROMOTE_BUSY_PCT: u128 = 60;
/// All forwarding threads together busier than this share of all CPUs:
/// real time goes.
pub const MACHINE_DEMOTE_PCT: u128 = 50;
/// ... and comes back below this share.
pub const MACHINE_PROMOTE_PCT: u128 = 35;

/// The last window's busy percentage of every forwarding thread, shared.
#[derive(Debug)]
pub struct BusyBoard {
    slots: Vec<AtomicU32>,
}

impl BusyBoard {
    /// A board for `threads` threads, all idle.
    pub fn new(threads: usize) -> BusyBoard {
        BusyBoard {
            slots: (0..threads).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Thread `i` was `pct` busy in its last window.
    pub fn set(&self, i: usize, pct: u128) {
        if let Some(s) = self.slots.get(i) {
            s.store(pct.min(100) as u32, Ordering::Relaxed);
        }
    }

    /// The sum over every thread but `i`.
    pub fn others(&self, i: usize) -> u128 {
        self.slots
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, s)| u128::from(s.load(Ordering::Relaxed)))
            .sum()
    }
}

/// The governor of one thread.
#[derive(Debug, Clone)]
pub struct PriorityGovernor {
    wanted: bool,
    realtime: bool,
    window_start: Duration,
    idle: Duration,
    demotions: u64,
    /// CPUs of the machine when the machine-share rule applies.
    share_of: Option<u128>,
    last_busy_pct: u128,
}

impl PriorityGovernor {
    /// `wanted`: the user asked for real time; `realtime`: the thread has
    /// it now (false if the kernel refused); `share_of`: the machine's CPU
    /// count, to apply the machine-share rule, or `None`.
    pub fn new(
        wanted: bool,
        realtime: bool,
        now: Duration,
        share_of: Option<usize>,
    ) -> PriorityGovernor {
        PriorityGovernor {
            wanted,
            realtime,
            window_start: now,
            idle: Duration::ZERO,
            demotions: 0,
            share_of: share_of.map(|c| c.max(1) as u128),
            last_busy_pct: 0,
        }
    }

    /// Busy percentage of the last finished window (for the [`BusyBoard`]).
    pub fn last_busy_pct(&self) -> u128 {
        self.last_busy_pct
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

    /// Call once per loop with the other threads' busy percentages summed
    /// ([`BusyBoard::others`]). At the end of a window, returns the new
    /// policy (`Some(true)` = switch to SCHED_FIFO) when it changes. The
    /// caller applies it and reports back with [`PriorityGovernor::applied`].
    pub fn tick(&mut self, now: Duration, others_busy_pct: u128) -> Option<bool> {
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed < WINDOW {
            return None;
        }
        let busy = elapsed.saturating_sub(self.idle);
        let busy_pct = busy.as_nanos() * 100 / elapsed.as_nanos();
        self.window_start = now;
        self.idle = Duration::ZERO;
        self.last_busy_pct = busy_pct;
        // Percent of all CPUs the forwarding threads keep busy.
        let machine_pct = self
            .share_of
            .map_or(0, |cpus| (busy_pct + others_busy_pct) / cpus);
        // Over the machine share, the busiest thread goes: the others (the
        // ACK direction, typically) keep prompt wake-ups and keep their
        // TUN rings from overflowing while the busy one waits its turn.
        let busiest = busy_pct >= others_busy_pct;
        if self.realtime
            && (busy_pct > DEMOTE_BUSY_PCT || (machine_pct > MACHINE_DEMOTE_PCT && busiest))
        {
            Some(false)
        } else if self.wanted
            && !self.realtime
            && busy_pct < PROMOTE_BUSY_PCT
            && machine_pct < MACHINE_PROMOTE_PCT
        {
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
        window_beside(g, start, idle_ms, 0)
    }

    /// The same while the other threads are `others` percent busy.
    fn window_beside(
        g: &mut PriorityGovernor,
        start: Duration,
        idle_ms: u64,
        others: u128,
    ) -> Option<bool> {
        for i in 1..=10u32 {
            g.idle(Duration::from_millis(idle_ms) / 10);
            let d = g.tick(start + i * 10 * MS, others);
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
        let mut g = PriorityGovernor::new(true, true, Duration::ZERO, Some(2));
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
        let mut g = PriorityGovernor::new(false, false, Duration::ZERO, Some(2));
        assert_eq!(window(&mut g, Duration::ZERO, 100), None);
        assert_eq!(window(&mut g, 100 * MS, 0), None);
    }

    #[test]
    fn a_refused_promotion_is_retried_next_window() {
        let mut g = PriorityGovernor::new(true, false, Duration::ZERO, Some(2));
        assert_eq!(window(&mut g, Duration::ZERO, 90), Some(true));
        g.applied(false); // the kernel said no
        assert_eq!(g.demotions(), 0);
        assert_eq!(window(&mut g, 100 * MS, 90), Some(true));
    }

    #[test]
    fn idle_longer_than_the_window_counts_as_idle() {
        let mut g = PriorityGovernor::new(true, true, Duration::ZERO, Some(2));
        g.idle(150 * MS); // one long sleep that spanned the window end
        assert_eq!(g.tick(120 * MS, 0), None);
    }

    #[test]
    fn threads_that_together_take_half_the_machine_drop_to_normal() {
        let board = BusyBoard::new(2);
        let mut g = PriorityGovernor::new(true, true, Duration::ZERO, Some(2));
        // 70 % + 25 % of 2 CPUs = 47 %: stays.
        board.set(1, 25);
        assert_eq!(
            window_beside(&mut g, Duration::ZERO, 30, board.others(0)),
            None
        );
        board.set(0, g.last_busy_pct());
        assert_eq!(g.last_busy_pct(), 70);
        // 70 % + 40 % = 55 % of the machine: the busier thread drops,
        // though neither is near 85 %; the other one stays.
        let mut other = PriorityGovernor::new(true, true, Duration::ZERO, Some(2));
        assert_eq!(window_beside(&mut other, Duration::ZERO, 60, 70), None);
        board.set(1, 40);
        assert_eq!(
            window_beside(&mut g, 100 * MS, 30, board.others(0)),
            Some(false)
        );
        g.applied(false);
        // 50 % + 40 % = 45 %: above the 35 % needed to come back.
        assert_eq!(window_beside(&mut g, 200 * MS, 50, board.others(0)), None);
        // 40 % + 20 % = 30 %: returns.
        board.set(1, 20);
        assert_eq!(
            window_beside(&mut g, 300 * MS, 60, board.others(0)),
            Some(true)
        );
        // On 4 CPUs the same 110 % is only 27 % of the machine.
        let mut g4 = PriorityGovernor::new(true, true, Duration::ZERO, Some(4));
        assert_eq!(window_beside(&mut g4, Duration::ZERO, 30, 40), None);
        // Without the rule only the thread's own share counts.
        let mut own = PriorityGovernor::new(true, true, Duration::ZERO, None);
        assert_eq!(window_beside(&mut own, Duration::ZERO, 30, 100), None);
        assert_eq!(window_beside(&mut own, 100 * MS, 10, 100), Some(false));
    }

    #[test]
    fn the_board_sums_the_other_threads() {
        let b = BusyBoard::new(3);
        b.set(0, 10);
        b.set(1, 20);
        b.set(2, 250); // clamped
        assert_eq!(b.others(0), 120);
        assert_eq!(b.others(2), 30);
        b.set(7, 50); // out of range: ignored
        assert_eq!(b.others(9), 130);
    }
}
