//! Subprocesses of the `bloatlab` binary, each owned by a guard: a lab is taken down and a
//! server killed (by its PID) when the guard drops, on success, error and Ctrl-C alike.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Runs `lab down NAME` when dropped.
#[derive(Debug)]
pub struct LabGuard {
    /// The binary.
    pub exe: PathBuf,
    /// The lab.
    pub name: String,
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        match quiet(&self.exe, &["lab", "down", &self.name]) {
            Ok(o) if !o.status.success() => {
                tracing::warn!("lab down {}: {}", self.name, last_line(&o.stderr));
            }
            Err(e) => tracing::warn!("lab down {}: {e}", self.name),
            Ok(_) => {}
        }
    }
}

pub use bloatlab_os::child::{ChildGuard, last_line};

/// How long a stopped run gets to save what it measured before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Runs `exe ARGS` to completion with its output captured.
pub fn quiet(exe: &Path, args: &[&str]) -> Result<Output, String> {
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))
}

/// Starts `exe ARGS` in the background in its own process group (so a terminal's Ctrl-C
/// reaches only us; we stop it by PID), output discarded.
pub fn spawn(exe: &Path, args: &[&str]) -> Result<ChildGuard, String> {
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(ChildGuard)
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))
}

/// Runs `exe ARGS` with output captured; once `stop` is raised the child gets SIGINT (a
/// `bloatlab test` then saves what it measured, marked interrupted) and SIGKILL
/// [`STOP_GRACE`] later.
pub fn stoppable(exe: &Path, args: &[&str], stop: &AtomicBool) -> Result<Output, String> {
    let mut cmd = Command::new(exe);
    cmd.args(args).process_group(0);
    bloatlab_os::child::run_stoppable(&mut cmd, stop, STOP_GRACE)
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))
}
