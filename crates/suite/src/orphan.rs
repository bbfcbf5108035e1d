//! Children die with their parent: `bloatlab test` and `demo` start runners
//! (`bloatlab client`, `ping`, `lab exec ... server`) that must not outlive a
//! SIGKILLed parent and keep sending traffic (issue 11).
//!
//! Linux's `PR_SET_PDEATHSIG` (prctl(2)) asks the kernel to send a signal (SIGKILL; for
//! the runners of a journaled test SIGTERM, which they answer by stopping at once and
//! reporting) to the child when the *thread* that forked it exits. Every runner here is spawned
//! from a thread that outlives it: the main thread (the driver, demo) or a
//! scoped thread that waits for the child (preflight).

use std::process::Command;

/// Makes the child that `cmd` starts receive SIGKILL when this thread dies.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    bloatlab_os::process::on_parent_death(cmd, libc::SIGKILL)
}

/// Makes the child that `cmd` starts receive SIGTERM when this thread dies: a runner
/// whose output goes to a file (a journaled run) then stops as on Ctrl-C, writing its
/// report of the time until then where `--recover` finds it, and exits.
pub fn stop_with_parent(cmd: &mut Command) -> &mut Command {
    bloatlab_os::process::on_parent_death(cmd, libc::SIGTERM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn alive(pid: i32) -> bool {
        // A zombie still answers kill(0); read its state instead.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    }

    #[test]
    fn child_is_killed_when_its_parent_dies() {
        // The kernel sends the signal when the spawning thread exits, which
        // stands in for the parent process being killed.
        let mut child = std::thread::spawn(|| {
            die_with_parent(Command::new("sleep").arg("30"))
                .spawn()
                .unwrap()
            // The spawning thread ends here: PDEATHSIG fires.
        })
        .join()
        .unwrap();
        let pid = child.id() as i32;
        let t0 = Instant::now();
        while alive(pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let gone = !alive(pid);
        // Reap it (it is our child) so no zombie is left; kill it if it survived.
        if !gone {
            let _ = child.kill();
        }
        let _ = child.wait();
        assert!(gone, "the child outlived the thread that started it");
    }
}
