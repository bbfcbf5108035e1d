//! Timing attributes of the calling thread.

/// Sets this thread's timer slack to 1 ns (`PR_SET_TIMERSLACK`): the default 50 us slack is
/// added to every timed wake-up, which would swamp a 30 us near-congestion pause, a probe
/// deadline or a packet release. Best effort: failure only costs precision.
pub fn minimise_timer_slack() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes one integer and changes only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// This thread's timer slack in nanoseconds.
pub fn timer_slack_ns() -> u64 {
    // SAFETY: prctl(PR_GET_TIMERSLACK) takes no pointer and returns the slack.
    let v = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    u64::try_from(v).unwrap_or(0)
}

/// Switches this thread to SCHED_FIFO at `priority`. Returns false when refused (no
/// CAP_SYS_NICE, or RT throttling forbids it).
pub fn set_realtime(priority: i32) -> bool {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: valid sched_param; pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
}

/// Switches this thread back to normal scheduling (SCHED_OTHER). Returns false when refused.
pub fn set_normal_priority() -> bool {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: valid sched_param; pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_slack_is_one_nanosecond_after_minimising_and_per_thread() {
        std::thread::spawn(|| {
            minimise_timer_slack();
            assert_eq!(timer_slack_ns(), 1);
        })
        .join()
        .unwrap();
        let other = std::thread::spawn(timer_slack_ns).join().unwrap();
        assert!(
            other > 1,
            "a fresh thread keeps the default slack ({other} ns)"
        );
    }

    #[test]
    fn normal_priority_is_always_allowed() {
        std::thread::spawn(|| assert!(set_normal_priority()))
            .join()
            .unwrap();
    }
}
