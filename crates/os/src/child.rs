//! Children this program starts and owns: killed by PID and reaped when their guard drops,
//! or run to completion with their output captured and stopped gracefully on request.
//!
//! Graceful stop: a raised stop flag sends the child SIGINT (a `bloatlab` command then
//! saves what it measured, marked interrupted), and SIGKILL once `grace` has passed.

use std::io::{self, Read};
use std::process::{Child, Command, Output, Stdio};
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
    let mut interrupted_at: Option<Instant> = None;
    let status = loop {
        if let Some(st) = guard.0.try_wait()? {
            break st;
        }
        if stop.load(Ordering::Relaxed) {
            match interrupted_at {
                None => {
                    let _ = crate::process::signal(guard.0.id(), libc::SIGINT);
                    interrupted_at = Some(Instant::now());
                }
                Some(t) if t.elapsed() > grace => {
                    let _ = guard.0.kill();
                }
                Some(_) => {}
            }
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
    fn last_line_skips_trailing_blank_lines() {
        assert_eq!(last_line(b"a\nerror: x \n\n  \n"), "error: x");
        assert_eq!(last_line(b""), "(no message)");
    }
}
