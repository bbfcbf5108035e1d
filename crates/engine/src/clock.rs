//! The two clocks the engine reads, and its one precise sleep.
//!
//! * **Wall clock** (`CLOCK_REALTIME`, via [`SystemTime`]) for every timestamp
//!   that goes on the wire (trip-times write timestamps, start times, acks), as
//!   iperf 2 does. One-way latencies are differences of two hosts' wall clocks,
//!   so across hosts they are only as good as NTP/PTP sync; on one host both
//!   ends read the same clock and the latency is exact (and never negative).
//! * **Monotonic clock** ([`std::time::Instant`]) for local intervals and test
//!   durations, immune to wall-clock steps.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `CLOCK_REALTIME` as time since the UNIX epoch (zero if the clock is before 1970).
pub fn wall_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// Sets this thread's timer slack to 1 ns so short sleeps end on time (the
/// default slack is 50 us, which would swamp a 30 us near-congestion pause).
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and touches only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Sleeps `d` with `clock_nanosleep(CLOCK_MONOTONIC)`, resuming after signals.
pub fn sleep_precise(d: Duration) {
    if d.is_zero() {
        return;
    }
    let mut req = libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    };
    loop {
        let mut rem = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: both pointers refer to live timespecs on this stack frame.
        let rc = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &req, &mut rem) };
        if rc != libc::EINTR {
            return;
        }
        req = rem;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn wall_clock_is_after_2020() {
        assert!(wall_now() > Duration::from_secs(1_577_836_800));
    }

    #[test]
    fn precise_sleep_sleeps_at_least_the_request() {
        tighten_timer_slack();
        let t0 = Instant::now();
        sleep_precise(Duration::from_micros(300));
        let e = t0.elapsed();
        assert!(e >= Duration::from_micros(300), "{e:?}");
        assert!(e < Duration::from_millis(200), "{e:?}");
    }
}
