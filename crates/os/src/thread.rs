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

/// What [`set_prompt_normal`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptNormal {
    /// SCHED_OTHER at the asked nice value with the asked EEVDF slice.
    Applied,
    /// The kernel took the policy but kept its own slice (before Linux 6.12,
    /// `sched_runtime` of a normal thread is ignored): the thread was put back
    /// to plain SCHED_OTHER at nice 0, as [`set_normal_priority`] leaves it.
    NoCustomSlice,
    /// `sched_setattr` failed (no CAP_SYS_NICE for a negative nice value, or a
    /// kernel without the call); the thread was put back to plain SCHED_OTHER.
    Refused,
}

/// The calling thread's normal-scheduling attributes as the kernel reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairAttributes {
    /// The nice value (-20..=19).
    pub nice: i32,
    /// The EEVDF request size (`se.slice`; Linux 6.12+ reports it as
    /// `sched_runtime`, older kernels report zero).
    pub slice: std::time::Duration,
}

/// `struct sched_attr` as of Linux 3.14 (SCHED_ATTR_SIZE_VER0, 48 bytes): the
/// fields this crate sets. The kernel accepts any size it knows.
fn sched_attr(policy: i32, nice: i32, runtime_ns: u64) -> libc::sched_attr {
    libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: policy as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: runtime_ns,
        sched_deadline: 0,
        sched_period: 0,
    }
}

fn setattr(attr: &libc::sched_attr) -> bool {
    // SAFETY: `attr` is a valid, initialised sched_attr whose `size` field
    // matches its type; pid 0 is the calling thread; flags 0.
    unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            attr as *const libc::sched_attr,
            0,
        ) == 0
    }
}

/// The calling thread's nice value and EEVDF slice (`sched_getattr`), or
/// `None` if the call failed.
pub fn fair_attributes() -> Option<FairAttributes> {
    let mut attr = sched_attr(0, 0, 0);
    let size = attr.size;
    // SAFETY: the kernel writes at most `size` bytes into `attr`, which is
    // that large; pid 0 is the calling thread; flags 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut libc::sched_attr,
            size,
            0,
        )
    };
    (r == 0).then(|| FairAttributes {
        nice: attr.sched_nice,
        slice: std::time::Duration::from_nanos(attr.sched_runtime),
    })
}

/// Switches this thread to SCHED_OTHER at `nice` with an EEVDF request size
/// (slice) of `slice`. Since Linux 6.12 (commit 857b158dc5e8, "sched/eevdf:
/// Use sched_attr::sched_runtime to set request/slice suggestion") the slice
/// of a normal thread is `sched_runtime`, clamped to 0.1-100 ms; a shorter
/// slice gives an earlier virtual deadline, and a waking thread with an
/// earlier deadline preempts the running one (Documentation/scheduler/
/// sched-eevdf.rst). Older kernels ignore the field: that is detected by
/// reading it back, and the thread is then left at plain SCHED_OTHER, nice 0.
pub fn set_prompt_normal(nice: i32, slice: std::time::Duration) -> PromptNormal {
    let ns = u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX);
    if !setattr(&sched_attr(libc::SCHED_OTHER, nice, ns)) {
        set_plain_normal();
        return PromptNormal::Refused;
    }
    if taken(nice, slice, fair_attributes()) {
        PromptNormal::Applied
    } else {
        set_plain_normal();
        PromptNormal::NoCustomSlice
    }
}

/// Whether the attributes read back are the ones asked for: a kernel before
/// 6.12 accepts `sched_runtime` for SCHED_OTHER without using it, and
/// reports zero.
fn taken(nice: i32, slice: std::time::Duration, read: Option<FairAttributes>) -> bool {
    read == Some(FairAttributes { nice, slice })
}

/// Sets the nice value of the calling process's autogroup (sched(7), "The
/// autogroup feature": with `kernel.sched_autogroup_enabled` every session
/// of a process in the root cgroup is one scheduling group, and a thread's
/// own nice value weighs only against the threads of its group, not
/// against other sessions' processes). A negative value needs
/// CAP_SYS_NICE. Harmless where autogroups are off or the process is in a
/// cgroup: the kernel then keeps the value unused.
pub fn set_autogroup_nice(nice: i32) -> std::io::Result<()> {
    std::fs::write("/proc/self/autogroup", nice.to_string())
}

/// Whether the calling process leads its own session (`setsid`, as the lab daemon does):
/// then its autogroup holds only it, and [`set_autogroup_nice`] changes nothing else. A
/// process in its caller's session (`lab up --foreground` in a terminal) would renice the
/// whole terminal session, for as long as that lives. Read from `/proc/self/stat` (field 6,
/// the session ID); `false` if it cannot be read.
pub fn leads_own_session() -> bool {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| session_of(&s))
        .is_some_and(|sid| sid == std::process::id())
}

/// The session ID in a `/proc/PID/stat` line: the 4th field after the command's closing
/// parenthesis (the command may itself hold spaces and parentheses).
fn session_of(stat: &str) -> Option<u32> {
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// The calling process's autogroup nice value, or `None` without
/// `/proc/self/autogroup` (a kernel without CONFIG_SCHED_AUTOGROUP).
pub fn autogroup_nice() -> Option<i32> {
    parse_autogroup(&std::fs::read_to_string("/proc/self/autogroup").ok()?)
}

/// The nice value in `/proc/PID/autogroup`'s "/autogroup-1271 nice 0".
fn parse_autogroup(text: &str) -> Option<i32> {
    text.split_once(" nice ")?.1.trim().parse().ok()
}

/// SCHED_OTHER, nice 0, the kernel's default slice (`sched_runtime` 0).
/// `sched_setscheduler` would keep a nice value set earlier.
fn set_plain_normal() -> bool {
    setattr(&sched_attr(libc::SCHED_OTHER, 0, 0)) || set_normal_priority()
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

    #[test]
    fn the_session_is_read_from_the_stat_line() {
        let line = "4242 (a b) c)) S 1 4242 4240 0 -1 4194560 93 0 0 0";
        assert_eq!(session_of(line), Some(4240));
        assert_eq!(session_of("4242 (x) S 1"), None);
        assert_eq!(session_of("garbage"), None);
        // A test runs in its runner's session, which it does not lead.
        assert!(!leads_own_session());
    }

    #[test]
    fn the_autogroup_nice_value_is_read_and_written() {
        assert_eq!(parse_autogroup("/autogroup-1271 nice 0\n"), Some(0));
        assert_eq!(parse_autogroup("/autogroup-9 nice -20\n"), Some(-20));
        assert_eq!(parse_autogroup("/autogroup-9 nice\n"), None);
        assert_eq!(parse_autogroup(""), None);
        // Writing the value it has changes nothing for the other tests (the
        // group is this whole session's).
        if let Some(n) = autogroup_nice() {
            set_autogroup_nice(n).unwrap();
            assert_eq!(autogroup_nice(), Some(n));
        }
    }

    /// The kernel's release, e.g. (6, 18), from /proc/sys/kernel/osrelease.
    fn kernel_version() -> (u32, u32) {
        let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut it = rel
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    }

    #[test]
    fn a_prompt_normal_thread_has_its_nice_value_and_slice_and_nothing_leaks() {
        // A positive nice value needs no privilege, so this runs as any user.
        let slice = std::time::Duration::from_micros(300);
        let (got, attrs) = std::thread::spawn(move || {
            let got = set_prompt_normal(5, slice);
            (got, fair_attributes().unwrap())
        })
        .join()
        .unwrap();
        if kernel_version() >= (6, 12) {
            assert_eq!(got, PromptNormal::Applied);
            assert_eq!(attrs, FairAttributes { nice: 5, slice });
        } else {
            assert_eq!(got, PromptNormal::NoCustomSlice);
            assert_eq!(attrs.nice, 0, "fallen back to plain SCHED_OTHER");
        }
        // Per thread: a fresh thread keeps nice 0 and the default slice.
        let other = std::thread::spawn(|| fair_attributes().unwrap())
            .join()
            .unwrap();
        assert_eq!(other.nice, 0);
        assert_ne!(other.slice, slice);
    }

    #[test]
    fn a_slice_read_back_as_zero_means_the_kernel_has_no_custom_slices() {
        let us = std::time::Duration::from_micros;
        let read = |nice, slice| Some(FairAttributes { nice, slice });
        assert!(taken(-20, us(100), read(-20, us(100))));
        // Linux < 6.12: the nice value is taken, the slice reads as zero.
        assert!(!taken(-20, us(100), read(-20, us(0))));
        // A clamped or altered value, or a failed read, is not what was asked.
        assert!(!taken(-20, us(50), read(-20, us(100))));
        assert!(!taken(-20, us(100), read(0, us(100))));
        assert!(!taken(-20, us(100), None));
    }

    #[test]
    fn plain_normal_priority_undoes_the_nice_value_and_the_slice() {
        std::thread::spawn(|| {
            set_prompt_normal(7, std::time::Duration::from_millis(1));
            assert!(set_plain_normal());
            let a = fair_attributes().unwrap();
            assert_eq!(a.nice, 0);
            assert_ne!(a.slice, std::time::Duration::from_millis(1));
        })
        .join()
        .unwrap();
    }
}
