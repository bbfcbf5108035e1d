//! The one precise sleep: `clock_nanosleep` to an absolute deadline (`TIMER_ABSTIME`), so the
//! wake-up error of one sleep never adds to the next (a paced sender or an isochronous prober
//! that sleeps "interval" after each wake-up drifts by the sum of its lateness), resumed after
//! signals. Pair it with [`crate::thread::minimise_timer_slack`]: the default 50 us timer slack
//! is added to every wake-up.

use crate::clock::{ClockId, to_timespec};
use std::time::Duration;

/// Sleeps until `clock` reads `deadline`. Returns at once when the deadline has passed.
pub fn sleep_until(clock: ClockId, deadline: Duration) {
    let ts = to_timespec(deadline);
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remainder pointer may be null.
        let rc = unsafe {
            libc::clock_nanosleep(clock.raw(), libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Sleeps until `spin` before `deadline`, then busy-waits the rest: for deadlines that must
/// not be missed by a timer's wake-up latency (tens of microseconds on a VM) at the cost of up
/// to `spin` of CPU per sleep.
pub fn sleep_until_spinning(clock: ClockId, deadline: Duration, spin: Duration) {
    if let Some(coarse) = deadline.checked_sub(spin) {
        sleep_until(clock, coarse);
    }
    while clock.now() < deadline {
        std::hint::spin_loop();
    }
}

/// Sleeps `d` on `CLOCK_MONOTONIC` (an absolute sleep to now + `d`, so signals do not
/// lengthen it).
pub fn sleep_for(d: Duration) {
    if d.is_zero() {
        return;
    }
    sleep_until(ClockId::Monotonic, crate::clock::monotonic_now() + d);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn never_wakes_early_on_either_clock() {
        crate::thread::minimise_timer_slack();
        for clock in [ClockId::Monotonic, ClockId::Realtime] {
            for _ in 0..20 {
                let deadline = clock.now() + Duration::from_micros(300);
                sleep_until(clock, deadline);
                assert!(
                    clock.now() >= deadline,
                    "{clock:?} woke before its deadline"
                );
            }
        }
        let t = Instant::now();
        sleep_for(Duration::from_millis(3));
        assert!(t.elapsed() >= Duration::from_millis(3));
        sleep_for(Duration::ZERO);
    }

    #[test]
    fn a_spinning_sleep_ends_at_its_deadline_not_before() {
        crate::thread::minimise_timer_slack();
        let clock = ClockId::Monotonic;
        let mut late = Vec::new();
        for _ in 0..20 {
            let deadline = clock.now() + Duration::from_micros(500);
            sleep_until_spinning(clock, deadline, Duration::from_micros(100));
            let now = clock.now();
            assert!(now >= deadline, "woke before its deadline");
            late.push(now - deadline);
        }
        // The spin ends it within microseconds of the deadline, unless the thread was
        // descheduled: the median shows the mechanism, not the host's worst moment.
        late.sort();
        assert!(late[10] < Duration::from_micros(50), "{late:?}");
    }

    #[test]
    fn a_past_deadline_returns_at_once() {
        let t = Instant::now();
        sleep_until(ClockId::Monotonic, Duration::from_secs(1));
        assert!(t.elapsed() < Duration::from_millis(50));
    }
}
