//! The emulator process: builds the lab, records it as running, forwards
//! until a termination signal, tears down.
//!
//! `lab up` starts it in the background with [`spawn`]: the executable runs
//! again (as the binary's hidden `lab __daemon NAME`, which calls [`serve`])
//! in a session of its own, and `lab up` waits for its readiness report.
//! `lab up --foreground` calls [`run`] in its own process instead.
//!
//! Readiness report: one JSON line on the daemon's stdout, a pipe to
//! `lab up`: `{"ok":true}` once the lab works, or
//! `{"code":N,"message":"...","ok":false}` with the exit status `lab up`
//! is to end with and the reason. The daemon's stdout then points to
//! /dev/null; its log (stderr) is `NAME.log` in the state directory.

use super::teardown::stop_exec_processes;
use crate::error::{LabError, Result};
use crate::lab::{Lab, remove_by_name};
use crate::signals;
use crate::state::{LabState, Phase, StateDir, process_start};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// The daemon's one-line readiness report (see the module docs). Field
/// order is the line's key order.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Readiness {
    /// Exit status for `lab up` (failures only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<u8>,
    /// Why the lab could not be built (failures only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    ok: bool,
}

/// Why a background emulator did not come up.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The log file, the process or its pipe could not be set up.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The emulator reported a failure, or exited without a report (then
    /// `code` is `None` and `message` quotes its log).
    #[error("{message}")]
    NotReady { code: Option<u8>, message: String },
}

/// Starts the current executable with `args` (which must make it call
/// [`serve`] for lab `name`) in its own session with its stderr in
/// `NAME.log`, and waits for its readiness report. On failure, a lab the
/// emulator left behind (it died before cleaning up) is removed.
pub fn spawn(dir: &StateDir, name: &str, args: &[&str]) -> std::result::Result<(), SpawnError> {
    let result = start_and_wait(dir, name, args);
    if result.is_err()
        && let Ok(Some(st)) = dir.read(name)
        && !st.emulator_alive()
    {
        // The daemon cleans up after itself; this covers one that died before it could.
        let _ = remove_by_name(name, &st.namespaces);
        dir.remove(name);
    }
    result
}

fn start_and_wait(
    dir: &StateDir,
    name: &str,
    args: &[&str],
) -> std::result::Result<(), SpawnError> {
    let exe = std::env::current_exe()?;
    let log = std::fs::File::create(dir.log(name))?;
    let mut child = Command::new(exe);
    child
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log));
    // Its own session, none of our fds: see bloatlab_os::process::detach_on_exec.
    bloatlab_os::process::detach_on_exec(&mut child);
    let mut child = child.spawn()?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no pipe"))?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    // No line, or not a report: the daemon died during setup.
    let report: Readiness = serde_json::from_str(line.trim()).unwrap_or_default();
    if report.ok {
        // The daemon keeps running; it is not our child to wait for.
        std::mem::forget(child);
        return Ok(());
    }
    let _ = child.wait();
    let message = report.message.unwrap_or_else(|| {
        let tail = std::fs::read_to_string(dir.log(name)).unwrap_or_default();
        format!("the emulator exited during setup: {}", tail.trim())
    });
    Err(SpawnError::NotReady {
        code: report.code,
        message,
    })
}

/// The background emulator of lab `name` (claimed by `lab up`): runs the
/// lab and reports readiness on stdout, a failure with the exit status
/// `code_of` gives its error.
pub fn serve(dir: &StateDir, name: &str, code_of: impl Fn(&LabError) -> u8) -> Result<()> {
    let st = dir
        .read(name)?
        .ok_or_else(|| LabError::NoSuchLab(name.into()))?;
    run(dir, st, |r| {
        let report = match r {
            Ok(()) => Readiness {
                ok: true,
                ..Readiness::default()
            },
            Err(e) => Readiness {
                code: Some(code_of(e)),
                message: Some(e.to_string()),
                ok: false,
            },
        };
        let mut ready = std::io::stdout();
        if let Ok(line) = serde_json::to_string(&report) {
            let _ = writeln!(ready, "{line}");
        }
        let _ = ready.flush();
        // Nobody reads our stdout any more: point it at /dev/null.
        let _ = bloatlab_os::process::stdout_to_dev_null();
    })
}

/// Builds the lab `st` describes, records this process as its emulator,
/// calls `ready` (with the error if the lab could not be built), then runs
/// until SIGINT/SIGTERM/SIGHUP, ends the `lab exec` commands and tears the
/// lab down.
pub fn run(
    dir: &StateDir,
    mut st: LabState,
    ready: impl FnOnce(std::result::Result<(), &LabError>),
) -> Result<()> {
    signals::install();
    let pid = std::process::id();
    st.pid = pid;
    st.pid_start = process_start(pid).unwrap_or(0);
    let name = st.name.clone();
    let result = (|| -> Result<Lab> {
        dir.write(&st)?;
        let lab = Lab::build(&st.spec)?;
        st.phase = Phase::Running;
        dir.write(&st)?;
        Ok(lab)
    })();
    let mut lab = match result {
        Ok(lab) => lab,
        Err(e) => {
            dir.remove(&name);
            ready(Err(&e));
            return Err(e);
        }
    };
    lab.publish_status(dir);
    ready(Ok(()));
    tracing::info!("lab {name} running (pid {pid})");
    let outcome = lab.run(dir, signals::stop_requested);
    stop_exec_processes(dir, &name);
    drop(lab);
    dir.remove(&name);
    tracing::info!("lab {name} removed");
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_lines_round_trip_and_garbage_reads_as_a_failure() {
        let ok = Readiness {
            ok: true,
            ..Readiness::default()
        };
        assert_eq!(serde_json::to_string(&ok).unwrap(), r#"{"ok":true}"#);
        let failed = Readiness {
            code: Some(3),
            message: Some("needs root".into()),
            ok: false,
        };
        let line = serde_json::to_string(&failed).unwrap();
        assert_eq!(line, r#"{"code":3,"message":"needs root","ok":false}"#);
        assert_eq!(serde_json::from_str::<Readiness>(&line).unwrap(), failed);
        for garbage in ["", "thread 'main' panicked", "{}"] {
            let r: Readiness = serde_json::from_str(garbage).unwrap_or_default();
            assert!(
                !r.ok && r.code.is_none() && r.message.is_none(),
                "{garbage}"
            );
        }
    }
}
