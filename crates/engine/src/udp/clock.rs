//! Clocks and precise sleeping for the UDP drivers (the only place that
//! reads a clock or sleeps).
//!
//! * [`Mono`] is CLOCK_MONOTONIC as a `Duration` since an origin: the time
//!   base of the pacer and of every local interval.
//! * `bloatlab_os::clock::realtime_now` is CLOCK_REALTIME since the Unix epoch: what goes on
//!   the wire (iperf 2 sends `tv_sec, tv_usec` of CLOCK_REALTIME) and what
//!   kernel receive timestamps (`SO_TIMESTAMPNS`) are measured in, so
//!   one-way latency = rx(REALTIME) − tx(REALTIME) on one host or on hosts
//!   synced by NTP/PTP.
//! * [`Mono::sleep_until`] sleeps with `clock_nanosleep(TIMER_ABSTIME)` to a little
//!   before the deadline and spins the rest (`bloatlab_os::sleep::sleep_until_spinning`):
//!   relative sleeps accumulate
//!   wake-up error, absolute ones do not, and the default 50 µs timer slack
//!   is lowered to 1 ns per thread (`bloatlab_os::thread::minimise_timer_slack`).

use std::time::Duration;

/// Time before a deadline at which the sleeper stops sleeping and spins.
/// On the reference VM `clock_nanosleep` with 1 ns slack wakes p50 ~35 µs,
/// p99 ~90 µs late for short sleeps; 60 µs of spin covers most wake-ups
/// without burning a core.
pub const SPIN_WINDOW: Duration = Duration::from_micros(60);

/// CLOCK_MONOTONIC measured from an origin taken at construction.
#[derive(Debug, Clone, Copy)]
pub struct Mono {
    origin: Duration,
}

impl Mono {
    /// A clock whose zero is now.
    pub fn start() -> Mono {
        Mono {
            origin: bloatlab_os::clock::monotonic_now(),
        }
    }

    /// Time since the origin.
    pub fn now(&self) -> Duration {
        bloatlab_os::clock::monotonic_now().saturating_sub(self.origin)
    }

    /// Sleeps until `deadline` (relative to the origin): an absolute
    /// `clock_nanosleep` to `deadline − SPIN_WINDOW`, then a spin.
    pub fn sleep_until(&self, deadline: Duration) {
        bloatlab_os::sleep::sleep_until_spinning(
            bloatlab_os::clock::ClockId::Monotonic,
            self.origin + deadline,
            SPIN_WINDOW,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_is_after_2020() {
        assert!(bloatlab_os::clock::realtime_now() > Duration::from_secs(1_577_836_800));
    }

    #[test]
    fn sleep_until_never_wakes_early_and_is_close() {
        bloatlab_os::thread::minimise_timer_slack();
        let m = Mono::start();
        for i in 1..=20u64 {
            let deadline = Duration::from_micros(500 * i);
            m.sleep_until(deadline);
            let woke = m.now();
            assert!(woke >= deadline, "woke early: {woke:?} < {deadline:?}");
        }
        // 20 sleeps of 500 us: on a loaded 2-core box allow generous slop.
        assert!(m.now() < Duration::from_millis(200), "{:?}", m.now());
    }
}
