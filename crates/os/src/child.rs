//! Children this program starts and owns: killed by PID and reaped when their guard drops,
//! or run to completion with their output captured and stopped gracefully on request.
//!
//! Graceful stop: a raised stop flag sends the child SIGINT (a `bloatlab` command then
//! saves what it measured, marked interrupted), and SIGKILL once `grace` has passed. The
//! rule is one sans-IO [`Escalation`], used for one child ([`run_stoppable`]), for many at
//! once ([`stop_all`]: the suites' runners) and for the lab's processes (SIGTERM first).

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a running child and the stop flag are checked.
const POLL: Duration = Duration::from_millis(50);

/// A background process we started; killed by PID and reaped when dropped.
#[derive(Debug)]
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // Child::kill signals this child's own PID, which is ours until reaped below.
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// When to signal a process asked to stop: `first` at once (SIGINT for a bloatlab command,
/// which then saves what it measured; SIGTERM for a daemon), SIGKILL once `grace` has passed
/// since, then nothing more. Sans-IO: the caller passes `now` and sends what it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Escalation {
    first: i32,
    grace: Duration,
    asked: Option<Instant>,
    killed: bool,
}

impl Escalation {
    /// An escalation that starts with `first` and kills `grace` after it.
    pub fn new(first: i32, grace: Duration) -> Escalation {
        Escalation {
            first,
            grace,
            asked: None,
            killed: false,
        }
    }

    /// The signal to send at `now`, if any.
    pub fn next(&mut self, now: Instant) -> Option<i32> {
        match self.asked {
            None => {
                self.asked = Some(now);
                Some(self.first)
            }
            Some(t) if !self.killed && now.saturating_duration_since(t) > self.grace => {
                self.killed = true;
                Some(libc::SIGKILL)
            }
            Some(_) => None,
        }
    }
}

/// How a child ended under [`stop_all`].
#[derive(Debug)]
pub struct Stopped {
    /// Its exit status (`None` if waiting for it failed).
    pub status: Option<ExitStatus>,
    /// When it was seen to have exited.
    pub at: Instant,
}

/// Stops every child at once: SIGINT to all, then each one still running `grace` after that
/// gets SIGKILL. Returns when all have exited, in the order given. Stopping them together
/// bounds the whole stop by one grace period, however many there are.
pub fn stop_all(children: &mut [&mut Child], grace: Duration) -> Vec<Stopped> {
    let mut esc = vec![Escalation::new(libc::SIGINT, grace); children.len()];
    let mut done: Vec<Option<Stopped>> = children.iter().map(|_| None).collect();
    loop {
        let now = Instant::now();
        for ((child, e), d) in children.iter_mut().zip(&mut esc).zip(&mut done) {
            if d.is_some() {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) => {
                    *d = Some(Stopped {
                        status: Some(status),
                        at: now,
                    })
                }
                Ok(None) => {
                    if let Some(sig) = e.next(now) {
                        // Our own, unreaped child: its PID is still ours.
                        let _ = crate::process::signal(child.id(), sig);
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    *d = Some(Stopped {
                        status: child.wait().ok(),
                        at: now,
                    })
                }
            }
        }
        if done.iter().all(Option::is_some) {
            return done.into_iter().flatten().collect();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops processes that are not this process's children (a lab daemon, the recorded PIDs
/// of `lab exec` commands) by the same rule: `first` to each, SIGKILL to those still
/// `alive` after `grace`. Returns once none is alive, or `grace` after the SIGKILLs, with
/// the PIDs that had to be killed. `alive` must identify the process, not just the PID
/// (a start time check), so a recycled PID is never signalled.
pub fn stop_pids(
    pids: &[u32],
    first: i32,
    grace: Duration,
    mut alive: impl FnMut(u32) -> bool,
) -> Vec<u32> {
    let mut esc = vec![Escalation::new(first, grace); pids.len()];
    let mut killed = Vec::new();
    let mut give_up: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let mut any = false;
        for (&pid, e) in pids.iter().zip(&mut esc) {
            if !alive(pid) {
                continue;
            }
            any = true;
            if let Some(sig) = e.next(now) {
                let _ = crate::process::signal(pid, sig);
                if sig == libc::SIGKILL {
                    killed.push(pid);
                    give_up.get_or_insert(now + grace);
                }
            }
        }
        if !any || give_up.is_some_and(|t| now > t) {
            return killed;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` to completion with stdout and stderr captured (stdin from /dev/null). Once
/// `stop` is raised the child gets SIGINT, and SIGKILL `grace` later if still running.
pub fn run_stoppable(cmd: &mut Command, stop: &AtomicBool, grace: Duration) -> io::Result<Output> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut guard = ChildGuard(child);
    // Drained on threads: a child that fills a pipe while we wait would block forever.
    let out = drain(guard.0.stdout.take());
    let err = drain(guard.0.stderr.take());
    let mut escalation = Escalation::new(libc::SIGINT, grace);
    let status = loop {
        if let Some(st) = guard.0.try_wait()? {
            break st;
        }
        if stop.load(Ordering::Relaxed)
            && let Some(sig) = escalation.next(Instant::now())
        {
            let _ = crate::process::signal(guard.0.id(), sig);
        }
        std::thread::sleep(POLL);
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        buf
    })
}

/// The last non-empty line of a process's output (its error message), trimmed.
pub fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no message)")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_captured_and_the_child_reaped() {
        let stop = AtomicBool::new(false);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let o = run_stoppable(&mut cmd, &stop, Duration::from_secs(1)).unwrap();
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
    }

    /// A stop flag raised once the child has created its `ready` file (it has set up its
    /// signal handling by then: a SIGINT before that would end a shell outright).
    fn raised_when_ready(
        tag: &str,
    ) -> (
        std::path::PathBuf,
        std::sync::Arc<AtomicBool>,
        JoinHandle<()>,
    ) {
        let ready = std::env::temp_dir().join(format!("bloatlab-os-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let raiser = {
            let (stop, ready) = (stop.clone(), ready.clone());
            std::thread::spawn(move || {
                let t = Instant::now();
                while !ready.exists() && t.elapsed() < Duration::from_secs(20) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.store(true, Ordering::Relaxed);
            })
        };
        (ready, stop, raiser)
    }

    #[test]
    fn a_stop_sends_sigint_that_the_child_may_handle() {
        // The child traps SIGINT, says so and exits 0: what a bloatlab command that saves
        // its partial results does. The sleep's pipes go to /dev/null and the trap ends
        // it: a grandchild holding our pipes would keep the drains waiting.
        let (ready, stop, raiser) = raised_when_ready("handled");
        let script = format!(
            "trap 'kill $!; echo saved; exit 0' INT; sleep 20 >/dev/null 2>&1 & touch {}; wait",
            ready.display()
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]);
        let t = Instant::now();
        let o = run_stoppable(&mut cmd, &stop, Duration::from_secs(10)).unwrap();
        raiser.join().unwrap();
        let _ = std::fs::remove_file(&ready);
        assert!(o.status.success(), "{o:?}");
        assert_eq!(o.stdout, b"saved\n");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    #[test]
    fn a_child_that_ignores_sigint_is_killed_after_the_grace() {
        let (ready, stop, raiser) = raised_when_ready("ignored");
        let script = format!("trap '' INT; touch {}; exec sleep 20", ready.display());
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]);
        let t = Instant::now();
        let o = run_stoppable(&mut cmd, &stop, Duration::from_millis(300)).unwrap();
        raiser.join().unwrap();
        let _ = std::fs::remove_file(&ready);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), Some(libc::SIGKILL), "{o:?}");
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    }

    #[test]
    fn a_guard_kills_its_child_on_drop() {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        drop(ChildGuard(child));
        // Reaped: the PID no longer names our child.
        assert!(crate::process::signal(pid, 0).is_err());
    }

    #[test]
    fn escalation_asks_first_then_kills_once_after_the_grace() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut e = Escalation::new(libc::SIGTERM, Duration::from_millis(500));
        assert_eq!(e.next(at(0)), Some(libc::SIGTERM));
        assert_eq!(e.next(at(100)), None);
        assert_eq!(e.next(at(500)), None, "not before the grace has passed");
        assert_eq!(e.next(at(501)), Some(libc::SIGKILL));
        assert_eq!(e.next(at(5000)), None, "killed once");
    }

    #[test]
    fn stop_all_interrupts_together_and_kills_only_the_deaf() {
        // One child exits on SIGINT, one ignores it; both are stopped within one grace
        // period, and only the deaf one is killed.
        let (ready, stop, raiser) = raised_when_ready("all");
        let polite = format!("touch {}; exec sleep 20", ready.display());
        let mut a = Command::new("sh").args(["-c", &polite]).spawn().unwrap();
        // The deaf one says it is ready once its trap is set (a SIGINT before would end it).
        let deaf_ready = ready.with_extension("deaf");
        let deaf = format!("trap '' INT; touch {}; exec sleep 20", deaf_ready.display());
        let mut b = Command::new("sh").args(["-c", &deaf]).spawn().unwrap();
        raiser.join().unwrap();
        let t = Instant::now();
        while !deaf_ready.exists() && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&ready);
        let _ = std::fs::remove_file(&deaf_ready);
        assert!(stop.load(Ordering::Relaxed));
        let t = Instant::now();
        let out = stop_all(&mut [&mut a, &mut b], Duration::from_millis(300));
        let took = t.elapsed();
        use std::os::unix::process::ExitStatusExt;
        let sig = |s: &Stopped| s.status.and_then(|s| s.signal());
        assert_eq!(sig(&out[0]), Some(libc::SIGINT), "{out:?}");
        assert_eq!(sig(&out[1]), Some(libc::SIGKILL), "{out:?}");
        assert!(out[0].at <= out[1].at, "{out:?}");
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn stop_pids_asks_then_kills_only_who_ignores_it() {
        // Two processes known by PID only (as a lab's daemon and exec commands are): one
        // ends on SIGTERM, one ignores it and is killed after the grace.
        let mut polite = Command::new("sleep").arg("20").spawn().unwrap();
        let deaf_ready =
            std::env::temp_dir().join(format!("bloatlab-os-pids-{}", std::process::id()));
        let deaf_script = format!(
            "trap '' TERM; touch {}; exec sleep 20",
            deaf_ready.display()
        );
        let mut deaf = Command::new("sh")
            .args(["-c", &deaf_script])
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !deaf_ready.exists() && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&deaf_ready);
        let (p, d) = (polite.id(), deaf.id());
        // Our children stay zombies until reaped: "alive" reaps them as it looks.
        let mut gone = std::collections::BTreeSet::new();
        let t = Instant::now();
        let killed = stop_pids(&[p, d], libc::SIGTERM, Duration::from_millis(300), |pid| {
            let c = if pid == p { &mut polite } else { &mut deaf };
            if !gone.contains(&pid) && matches!(c.try_wait(), Ok(Some(_))) {
                gone.insert(pid);
            }
            !gone.contains(&pid)
        });
        let took = t.elapsed();
        assert_eq!(killed, vec![d]);
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(polite.wait().unwrap().signal(), Some(libc::SIGTERM));
        assert_eq!(deaf.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn last_line_skips_trailing_blank_lines() {
        assert_eq!(last_line(b"a\nerror: x \n\n  \n"), "error: x");
        assert_eq!(last_line(b""), "(no message)");
    }
}
