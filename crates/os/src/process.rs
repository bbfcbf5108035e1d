//! Processes: privilege, signals by PID, detaching a daemon, and a namespace's own /sys.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Sends `sig` to `pid`. Only for PIDs this program started and still identifies (callers
/// check the process's start time first, so a recycled PID is never signalled).
pub fn signal(pid: u32, sig: i32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    if pid <= 0 {
        // kill(0 or negative) would signal a whole process group.
        return Err(io::Error::other("not a single process"));
    }
    // SAFETY: kill takes plain integers; pid > 0 names one process.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// CPU time a process or thread has used, user and system apart (`getrusage(2)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time running our own code.
    pub user: std::time::Duration,
    /// Time in the kernel on our behalf (system calls: copies, TCP).
    pub system: std::time::Duration,
}

impl CpuTime {
    /// User plus system.
    pub fn total(&self) -> std::time::Duration {
        self.user + self.system
    }

    /// What was used from `earlier` to `self` (zero, not negative, if out of order).
    pub fn since(&self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// Which CPU time [`cpu_time`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuScope {
    /// All threads of this process (`RUSAGE_SELF`).
    Process,
    /// The calling thread only (`RUSAGE_THREAD`).
    Thread,
}

/// The CPU time used so far by this process or the calling thread.
pub fn cpu_time(scope: CpuScope) -> io::Result<CpuTime> {
    let who = match scope {
        CpuScope::Process => libc::RUSAGE_SELF,
        CpuScope::Thread => libc::RUSAGE_THREAD,
    };
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live rusage for the kernel to fill.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec.max(0) as u64)
            + std::time::Duration::from_micros(t.tv_usec.clamp(0, 999_999) as u64)
    };
    Ok(CpuTime {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
    })
}

/// `uname(2)`: sysname, release, version, machine and nodename, or `None` if it failed.
pub fn uname() -> Option<[String; 5]> {
    // SAFETY: uname fills a zeroed struct of NUL-terminated arrays.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Some([
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine),
        field(&u.nodename),
    ])
}

/// Makes the child that `cmd` starts receive `sig` when the *thread* that spawns it exits
/// (Linux's `PR_SET_PDEATHSIG`, prctl(2)), so a runner cannot outlive a SIGKILLed parent
/// and keep sending traffic. Spawn from a thread that outlives the child.
pub fn on_parent_death(cmd: &mut Command, sig: i32) -> &mut Command {
    // SAFETY: getpid has no preconditions and is called before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect: then we were
            // already reparented and no signal will come.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        })
    }
}

/// Makes `fd` appear in `cmd`'s child as each fd number in `targets`, inherited across exec:
/// for a child that talks on fixed fd numbers (Chromium's `--remote-debugging-pipe` reads
/// commands on 3 and writes answers on 4). `fd` must stay open until the child is spawned.
pub fn inherit_fd_as(cmd: &mut Command, fd: std::os::fd::RawFd, targets: &[std::os::fd::RawFd]) {
    let targets = targets.to_vec(); // copied before the fork: the closure must not allocate
    // SAFETY: dup2 and fcntl are async-signal-safe; the closure only reads `targets`. Close-
    // on-exec is cleared on every target, also when `fd` already is one (dup2 then does
    // nothing and would leave the flag set).
    unsafe {
        cmd.pre_exec(move || {
            for &target in &targets {
                if (fd != target && libc::dup2(fd, target) < 0)
                    || libc::fcntl(target, libc::F_SETFD, 0) < 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Makes `cmd`'s child a daemon once it execs: its own session (so a Ctrl-C at the caller's
/// terminal does not reach it) and every inherited fd above stderr closed on exec (a daemon
/// that outlives its caller must not hold the caller's files open: `flock L bloatlab lab up`
/// would hold L until `lab down`; a `$(...)` reading an inherited pipe would never see EOF).
pub fn detach_on_exec(cmd: &mut Command) {
    // SAFETY: setsid and close_range are async-signal-safe syscalls, allowed between fork
    // and exec; the closure touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            if libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Points this process's stdout at /dev/null (a daemon whose reader has gone).
pub fn stdout_to_dev_null() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let null = std::fs::File::options().write(true).open("/dev/null")?;
    // SAFETY: both fds are valid for the duration of the call.
    if unsafe { libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives this (single-threaded) process a /sys of its current network namespace, as
/// `ip netns exec` does, so tools reading /sys/class/net see that namespace's interfaces:
/// a private mount namespace, then sysfs remounted. Best effort: false when refused.
pub fn private_sysfs() -> bool {
    // SAFETY: plain syscalls with valid NUL-terminated strings and null optional pointers.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return false;
        }
        libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        );
        libc::umount2(c"/sys".as_ptr(), libc::MNT_DETACH);
        libc::mount(
            c"sysfs".as_ptr(),
            c"/sys".as_ptr(),
            c"sysfs".as_ptr(),
            0,
            std::ptr::null(),
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work_and_a_thread_sees_only_its_own() {
        let p0 = cpu_time(CpuScope::Process).unwrap();
        let t0 = cpu_time(CpuScope::Thread).unwrap();
        // Burn CPU on this thread until it has used 30 ms (however long a busy
        // machine takes to give them; only a clock that never moves fails).
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let spent = loop {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let spent = cpu_time(CpuScope::Thread).unwrap().since(t0);
            if spent.total() >= std::time::Duration::from_millis(30) {
                break spent;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "{spent:?}"
            );
        };
        let p = cpu_time(CpuScope::Process).unwrap().since(p0);
        assert!(
            p.total() >= spent.total() / 2,
            "process {p:?} thread {spent:?}"
        );
        // A fresh thread starts near zero.
        let other = std::thread::spawn(|| cpu_time(CpuScope::Thread).unwrap())
            .join()
            .unwrap();
        assert!(
            other.total() < std::time::Duration::from_millis(20),
            "{other:?}"
        );
        let z = CpuTime::default().since(p0);
        assert_eq!(z, CpuTime::default(), "out of order is zero, not negative");
    }

    #[test]
    fn signals_reach_only_the_named_child() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        signal(child.id(), 0).unwrap(); // signal 0: exists
        signal(child.id(), libc::SIGTERM).unwrap();
        let st = child.wait().unwrap();
        assert!(!st.success());
        assert!(
            signal(0, libc::SIGTERM).is_err(),
            "0 would be the process group"
        );
    }

    #[test]
    fn an_inherited_fd_answers_on_the_numbers_asked_for() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        use std::os::unix::net::UnixStream;
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo three >&3; echo four >&4"]);
        inherit_fd_as(&mut cmd, theirs.as_raw_fd(), &[3, 4]);
        let st = cmd.status().unwrap();
        drop(theirs);
        assert!(st.success(), "fd 3 or 4 was not open in the child: {st}");
        let mut got = String::new();
        ours.read_to_string(&mut got).unwrap();
        assert_eq!(got, "three\nfour\n");
    }

    #[test]
    fn a_detached_child_has_its_own_session_and_none_of_our_fds() {
        use std::os::fd::AsRawFd;
        let held = std::fs::File::open("/proc/self/status").unwrap();
        // dup() leaves FD_CLOEXEC off, like an fd inherited from a caller's shell.
        // SAFETY: dup of a valid fd; closed below.
        let fd = unsafe { libc::dup(held.as_raw_fd()) };
        assert!(fd > 2);
        let probe = || {
            let mut cmd = Command::new("sh");
            let script =
                format!("ps -o sid= -p $$; test -e /proc/$$/fd/{fd} && echo open || echo closed");
            cmd.args(["-c", &script]);
            cmd
        };
        let plain = probe().output().unwrap();
        let plain = String::from_utf8_lossy(&plain.stdout).to_string();
        assert!(
            plain.contains("open"),
            "control: a plain child inherits it: {plain}"
        );
        let our_sid: u32 = plain.lines().next().unwrap().trim().parse().unwrap();
        let mut cmd = probe();
        detach_on_exec(&mut cmd);
        let out = cmd.output().unwrap();
        // SAFETY: fd is ours and still open.
        unsafe { libc::close(fd) };
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let sid: u32 = lines.next().unwrap().trim().parse().unwrap();
        assert_ne!(sid, our_sid, "a session of its own");
        assert_eq!(lines.next(), Some("closed"), "{text}");
    }
}
