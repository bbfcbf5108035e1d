//! A `bloatlab` command run beside a test (`[during]`, docs/experiments.md), such as
//! `bloatlab autorate` in variable-link's autorate arm.

use bloatlab_os::child::{ChildGuard, last_line};
use bloatlab_suite::session::STOP_GRACE;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
#[cfg(test)]
use std::time::Duration;

/// A `bloatlab` command run beside a test (`[during]`, docs/experiments.md): started in its
/// own process group with its stderr in a log file, stopped by PID with SIGINT (a bloatlab
/// command then writes what it measured) and SIGKILL [`STOP_GRACE`] later; killed by PID
/// when dropped without [`Sidecar::stop`] (an error or Ctrl-C in between).
#[derive(Debug)]
pub struct Sidecar {
    child: ChildGuard,
    what: String,
    log: PathBuf,
}

impl Sidecar {
    /// Starts `exe ARGS`, stderr to `log`.
    pub fn start(exe: &Path, args: &[String], log: &Path) -> Result<Sidecar, String> {
        let what = format!("bloatlab {}", args.join(" "));
        let f = std::fs::File::create(log)
            .map_err(|e| format!("during: cannot create {}: {e}", log.display()))?;
        Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(f)
            .process_group(0)
            .spawn()
            .map(|c| Sidecar {
                child: ChildGuard(c),
                what: what.clone(),
                log: log.to_path_buf(),
            })
            .map_err(|e| format!("during: cannot run {what}: {e}"))
    }

    fn failed(&self, status: std::process::ExitStatus) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        format!(
            "during: {} exited with {status} before the test ended: {}",
            self.what,
            last_line(&text)
        )
    }

    /// `Err` if it has already exited (a sidecar runs until it is stopped).
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.child.0.try_wait() {
            Ok(Some(status)) => Err(self.failed(status)),
            _ => Ok(()),
        }
    }

    /// Stops it (SIGINT, SIGKILL after [`STOP_GRACE`]). `Err` if it had exited before it
    /// was asked to, or ended with a failure other than the signal's.
    pub fn stop(mut self) -> Result<(), String> {
        self.check_running()?;
        let ended = bloatlab_os::child::stop_all(&mut [&mut self.child.0], STOP_GRACE);
        // Ended by the SIGINT we sent (a command without a handler for it) is a normal end.
        let by_our_signal = |s: std::process::ExitStatus| {
            std::os::unix::process::ExitStatusExt::signal(&s) == Some(libc::SIGINT)
        };
        match ended.first().and_then(|s| s.status) {
            Some(s) if s.success() || by_our_signal(s) => Ok(()),
            Some(s) => Err(self.failed(s)),
            None => Err(format!(
                "during: {}: its end could not be awaited",
                self.what
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, log: &Path) -> Result<Sidecar, String> {
        Sidecar::start(Path::new("/bin/sh"), &["-c".into(), script.into()], log)
    }

    #[test]
    fn a_sidecar_that_exits_early_fails_with_its_last_line() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("s.log");
        let mut s = sh("echo starting >&2; echo 'bad flag' >&2; exit 3", &log).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let e = s.check_running().unwrap_err();
        assert!(e.contains("bad flag") && e.contains('3'), "{e}");
        assert!(s.stop().is_err());
    }

    #[test]
    fn a_running_sidecar_stops_on_sigint_by_pid() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("s.log");
        // A handler that exits 0 (as bloatlab commands do), and none (killed by the signal).
        for script in [
            "trap 'exit 0' INT; while :; do sleep 0.05; done",
            "exec sleep 30",
        ] {
            let mut s = sh(script, &log).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            s.check_running().unwrap();
            let t0 = std::time::Instant::now();
            s.stop().unwrap();
            assert!(t0.elapsed() < STOP_GRACE, "{script}: needed SIGKILL");
        }
        // One that exits non-zero when asked to stop fails.
        let mut s = sh("trap 'exit 4' INT; while :; do sleep 0.05; done", &log).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        s.check_running().unwrap();
        assert!(s.stop().is_err());
    }
}
