//! Clocks and waits of the forwarding threads (emulation.md 4.4: tokio and
//! millisecond epoll timeouts are ~1 ms late; ns-resolution sleeps with a
//! 1 ns timer slack are ~40 us late on this VM; a final spin gets below 1 us).

use std::time::{Duration, Instant};

/// Time since the lab's origin on CLOCK_MONOTONIC (what `Instant` reads).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
}

impl Clock {
    /// A clock whose zero is `origin`.
    pub fn new(origin: Instant) -> Clock {
        Clock { origin }
    }

    /// Now, as a `Duration` since the origin.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

pub use bloatlab_os::thread::minimise_timer_slack as tight_timer_slack;

/// Switches this thread to SCHED_OTHER at nice [`DEMOTED_NICE`] with the EEVDF
/// slice [`DEMOTED_SLICE`], and the process's autogroup to the same nice
/// value (priority.rs says why), or to plain SCHED_OTHER where the kernel
/// cannot (then the autogroup is left alone: the old behaviour).
///
/// [`DEMOTED_NICE`]: super::priority::DEMOTED_NICE
/// [`DEMOTED_SLICE`]: super::priority::DEMOTED_SLICE
pub fn prompt_normal() -> super::priority::NormalMode {
    use super::priority::{DEMOTED_NICE, DEMOTED_SLICE, NormalMode};
    use bloatlab_os::thread::{PromptNormal, set_prompt_normal};
    match set_prompt_normal(DEMOTED_NICE, DEMOTED_SLICE) {
        PromptNormal::Applied => {
            // The thread's nice value weighs only inside its autogroup (the
            // lab daemon's own session, with autogroups on): the group has
            // to weigh as much against the hosts' and other sessions'
            // groups, or a busy machine still makes the thread wait ms
            // (docs/benchmarks.md, 7 December 04:49). Best effort, and only
            // in the daemon's own session: `lab up --foreground` runs in the
            // caller's, whose shell and commands must keep their priority.
            if !bloatlab_os::thread::leads_own_session() {
                tracing::debug!("not a session leader: the autogroup's nice value is left alone");
            } else if let Err(e) = bloatlab_os::thread::set_autogroup_nice(DEMOTED_NICE) {
                tracing::debug!("autogroup nice {DEMOTED_NICE}: {e}");
            }
            NormalMode::Prompt
        }
        PromptNormal::NoCustomSlice => NormalMode::NoCustomSlice,
        PromptNormal::Refused => NormalMode::Refused,
    }
}

/// Switches this thread to SCHED_FIFO (priority 10). Cuts p99 lateness on
/// a contended host from ms to ~0.2 ms. Returns false when refused.
pub fn realtime() -> bool {
    bloatlab_os::thread::set_realtime(10)
}

/// How a [`sleep`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// Input may be ready (or the idle cap ended the sleep).
    Early,
    /// The timer aimed at `target` fired; the thread ran again at `at`.
    Timer { target: Duration, at: Duration },
}

/// Sleeps until input arrives on `fds` or until `until` (absolute, on
/// `clock`; at most `idle_cap` from now). The timeout is computed from the
/// absolute time just before sleeping, so lateness never accumulates.
pub fn sleep(
    fds: &mut [libc::pollfd],
    clock: &Clock,
    until: Option<Duration>,
    idle_cap: Duration,
) -> Woke {
    let now = clock.now();
    let (timeout, capped) = match until {
        None => (idle_cap, true),
        Some(t) if t <= now => return Woke::Early,
        Some(t) => ((t - now).min(idle_cap), t - now > idle_cap),
    };
    if poll(fds, Some(timeout)) || capped {
        return Woke::Early;
    }
    match until {
        Some(target) => Woke::Timer {
            target,
            at: clock.now(),
        },
        None => Woke::Early,
    }
}

/// Busy-waits until `until`, still noticing input. Returns true when input
/// may be ready.
pub fn spin(fds: &mut [libc::pollfd], clock: &Clock, until: Duration) -> bool {
    while clock.now() < until {
        if poll(fds, Some(Duration::ZERO)) {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

/// `ppoll` with a nanosecond timeout. Returns true when an fd is readable
/// (an interrupted or failed poll counts as "not yet").
fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> bool {
    bloatlab_os::poll::poll(fds, timeout).is_ok_and(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_ends_at_an_absolute_deadline_and_reports_the_timer() {
        tight_timer_slack();
        let clock = Clock::new(Instant::now());
        let deadline = clock.now() + Duration::from_millis(5);
        let mut fds: [libc::pollfd; 0] = [];
        let woke = sleep(&mut fds, &clock, Some(deadline), Duration::from_secs(1));
        let Woke::Timer { target, at } = woke else {
            panic!("{woke:?}");
        };
        assert_eq!(target, deadline);
        assert!(at >= deadline);
        // Generous: the machine is shared; the point is "not a 1 s idle cap".
        assert!(
            at - deadline < Duration::from_millis(50),
            "late {:?}",
            at - deadline
        );
        let capped = sleep(&mut fds, &clock, None, Duration::from_millis(1));
        assert_eq!(capped, Woke::Early);
        let past = sleep(
            &mut fds,
            &clock,
            Some(Duration::ZERO),
            Duration::from_secs(1),
        );
        assert_eq!(past, Woke::Early);
    }

    #[test]
    fn spin_reaches_the_deadline() {
        let clock = Clock::new(Instant::now());
        let deadline = clock.now() + Duration::from_micros(300);
        let mut fds: [libc::pollfd; 0] = [];
        assert!(!spin(&mut fds, &clock, deadline));
        assert!(clock.now() >= deadline);
    }
}
