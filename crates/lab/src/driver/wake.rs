//! How a forwarding thread waits for its next release: a timer sleep, a
//! timer sleep that ends early, or a busy-wait. Sans-IO: times are passed in.
//!
//! A timer sleep on this VM wakes ~20-150 us late (emulation.md 4.4), which
//! would add that much to every emulated one-way delay. Busy-waiting the
//! last stretch removes it, but a fixed spin before every release is
//! harmful under load: at 1 Gbit/s (a packet every 12 us) both SCHED_FIFO
//! threads spin all the time, starve the hosts' TCP stacks and trip the
//! kernel's RT throttling (950 ms per second), which then stalls the
//! emulator for 50 ms at a time (measured: p99 lateness 33 ms, -30 % rate).
//!
//! So the planner
//! * learns how late timer wake-ups are (`lead`: a running mean plus mean
//!   deviation of the oversleep, capped by `--spin`) and aims timer sleeps
//!   at `deadline - lead`;
//! * busy-waits only the remaining gap, and only from a budget refilled at
//!   [`SPIN_SHARE`] of wall time (at most [`BUDGET_DEPTH`] saved up). An idle
//!   or lightly loaded link (pings, the RTT a user checks first) always has
//!   budget and gets sub-microsecond timing; a saturated one runs out and
//!   falls back to plain timer sleeps, i.e. the timer's lateness, never
//!   starvation.

use std::time::Duration;

/// Fraction of wall time a thread may spend busy-waiting, on average.
pub const SPIN_SHARE: u32 = 4; // 1/4 = 25 %
/// Most spin time that can be saved up while idle.
pub const BUDGET_DEPTH: Duration = Duration::from_millis(2);
/// Weight of a new oversleep sample in the running estimates (1/8).
const EWMA_SHIFT: u32 = 3;

/// What to do until `deadline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The deadline has passed: release now.
    Due,
    /// Sleep on a timer until this time (absolute, the thread's clock).
    Sleep(Duration),
    /// Busy-wait until this time.
    Spin(Duration),
}

/// The planner of one thread.
#[derive(Debug, Clone)]
pub struct WakePlanner {
    max_lead: Duration,
    mean_ns: u64,
    dev_ns: u64,
    budget: Duration,
    refilled_at: Duration,
}

impl WakePlanner {
    /// A planner that spins at most `max_lead` before a deadline (zero:
    /// never spin; every wait is a timer sleep to the deadline).
    pub fn new(max_lead: Duration) -> WakePlanner {
        WakePlanner {
            max_lead,
            // Until measured, assume the timer is as late as the cap allows.
            mean_ns: u64::try_from(max_lead.as_nanos() / 2).unwrap_or(u64::MAX),
            dev_ns: 0,
            budget: BUDGET_DEPTH,
            refilled_at: Duration::ZERO,
        }
    }

    /// How early timer sleeps end: the learned oversleep, capped.
    pub fn lead(&self) -> Duration {
        Duration::from_nanos(self.mean_ns.saturating_add(self.dev_ns)).min(self.max_lead)
    }

    fn refill(&mut self, now: Duration) {
        if now > self.refilled_at {
            let earned = (now - self.refilled_at) / SPIN_SHARE;
            self.budget = (self.budget + earned).min(BUDGET_DEPTH);
            self.refilled_at = now;
        }
    }

    /// Plans the wait from `now` to `deadline`. A `Spin` is charged to the
    /// budget when planned.
    pub fn plan(&mut self, now: Duration, deadline: Duration) -> Wait {
        self.refill(now);
        if deadline <= now {
            return Wait::Due;
        }
        let gap = deadline - now;
        let lead = self.lead();
        if lead.is_zero() || self.budget < gap.min(lead) {
            return Wait::Sleep(deadline);
        }
        if gap <= lead {
            self.budget -= gap;
            Wait::Spin(deadline)
        } else {
            Wait::Sleep(deadline - lead)
        }
    }

    /// A timer sleep aimed at `target` ended at `woke` (not woken by
    /// input): learn the timer's lateness.
    pub fn timer_woke(&mut self, target: Duration, woke: Duration) {
        let over = u64::try_from(woke.saturating_sub(target).as_nanos()).unwrap_or(u64::MAX);
        let diff = over.abs_diff(self.mean_ns);
        self.mean_ns = ewma(self.mean_ns, over);
        self.dev_ns = ewma(self.dev_ns, diff);
    }
}

fn ewma(old: u64, new: u64) -> u64 {
    let keep = old - (old >> EWMA_SHIFT);
    keep.saturating_add(new >> EWMA_SHIFT)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// Feeds `n` timer wake-ups that are `late` late.
    fn learn(p: &mut WakePlanner, late: Duration, n: usize) {
        for i in 0..n {
            let t = Duration::from_millis(i as u64);
            p.timer_woke(t, t + late);
        }
    }

    #[test]
    fn without_spin_every_wait_is_a_sleep_to_the_deadline() {
        let mut p = WakePlanner::new(Duration::ZERO);
        learn(&mut p, 100 * US, 50);
        assert_eq!(p.lead(), Duration::ZERO);
        assert_eq!(p.plan(Duration::ZERO, 5 * US), Wait::Sleep(5 * US));
        assert_eq!(p.plan(Duration::ZERO, 5000 * US), Wait::Sleep(5000 * US));
        assert_eq!(p.plan(10 * US, 5 * US), Wait::Due);
    }

    #[test]
    fn the_lead_follows_the_measured_timer_lateness_up_to_the_cap() {
        let mut p = WakePlanner::new(200 * US);
        learn(&mut p, 40 * US, 100);
        let lead = p.lead();
        assert!(lead >= 39 * US && lead <= 45 * US, "{lead:?}");
        learn(&mut p, 1000 * US, 100);
        assert_eq!(p.lead(), 200 * US, "capped by --spin");
        learn(&mut p, Duration::ZERO, 200);
        assert!(p.lead() < 2 * US, "{:?}", p.lead());
    }

    #[test]
    fn long_waits_sleep_to_deadline_minus_lead_then_spin_the_rest() {
        let mut p = WakePlanner::new(200 * US);
        learn(&mut p, 50 * US, 100);
        let lead = p.lead();
        let t = Duration::from_secs(1);
        let deadline = t + 10_000 * US;
        assert_eq!(p.plan(t, deadline), Wait::Sleep(deadline - lead));
        // The timer woke a little before the deadline: spin the rest.
        let woke = deadline - 10 * US;
        assert_eq!(p.plan(woke, deadline), Wait::Spin(deadline));
        assert_eq!(p.plan(deadline, deadline), Wait::Due);
    }

    #[test]
    fn spinning_is_limited_to_a_share_of_wall_time() {
        // Saturated 1 Gbit/s link: a release every 12 us, each gap inside
        // the lead. Over a simulated second, spin at most SPIN_SHARE of it.
        let mut p = WakePlanner::new(200 * US);
        learn(&mut p, 50 * US, 100);
        let (mut now, mut spun, mut slept) = (Duration::from_secs(1), Duration::ZERO, 0);
        let end = now + Duration::from_secs(1);
        while now < end {
            let deadline = now + 12 * US;
            match p.plan(now, deadline) {
                Wait::Spin(t) => spun += t - now,
                Wait::Sleep(_) => slept += 1,
                Wait::Due => unreachable!(),
            }
            now = deadline;
        }
        let cap = Duration::from_secs(1) / SPIN_SHARE + BUDGET_DEPTH;
        assert!(spun <= cap, "spun {spun:?}");
        assert!(spun >= cap - Duration::from_millis(5), "spun {spun:?}");
        assert!(slept > 0);
    }

    #[test]
    fn an_idle_link_always_has_budget_for_its_releases() {
        // A ping every 10 ms through a 20 ms link: every release spins.
        let mut p = WakePlanner::new(200 * US);
        learn(&mut p, 80 * US, 100);
        let lead = p.lead();
        for i in 1..=100u64 {
            let deadline = Duration::from_millis(10 * i);
            let woke = deadline - lead + 30 * US; // timer 30 us late
            assert_eq!(p.plan(woke, deadline), Wait::Spin(deadline), "release {i}");
        }
    }

    #[test]
    fn without_budget_a_short_gap_is_slept_not_spun() {
        let mut p = WakePlanner::new(200 * US);
        learn(&mut p, 50 * US, 100);
        p.budget = Duration::ZERO;
        p.refilled_at = Duration::from_secs(1);
        assert_eq!(
            p.plan(Duration::from_secs(1), Duration::from_secs(1) + 10 * US),
            Wait::Sleep(Duration::from_secs(1) + 10 * US)
        );
    }
}
