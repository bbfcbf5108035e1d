//! Subprocesses of the `bloatlab` binary, each owned by a guard: a lab is taken down and a
//! server killed (by its PID) when the guard drops, on success, error and Ctrl-C alike.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

/// A background process we started; killed by PID and reaped when dropped.
#[derive(Debug)]
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

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
/// `bloatlab test` then saves what it measured, marked interrupted) and SIGKILL 5 s later.
pub fn stoppable(exe: &Path, args: &[&str], stop: &AtomicBool) -> Result<Output, String> {
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let reader = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(child.stdout.take().map(|s| Box::new(s) as _));
    let err = reader(child.stderr.take().map(|s| Box::new(s) as _));
    let mut signalled: Option<Instant> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        if stop.load(Ordering::Relaxed) {
            match signalled {
                None => {
                    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                        // SAFETY: signalling our own child, not yet reaped, by PID.
                        unsafe { libc::kill(pid, libc::SIGINT) };
                    }
                    signalled = Some(Instant::now());
                }
                Some(t) if t.elapsed() > Duration::from_secs(5) => {
                    let _ = child.kill();
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// The last non-empty line of a process's output (its error message).
pub fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no message)")
        .trim()
        .to_string()
}
