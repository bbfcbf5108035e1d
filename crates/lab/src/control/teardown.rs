//! `lab down`: end the lab's `lab exec` commands, stop the emulator, remove
//! every namespace of the lab by exact name (also after a crash, with or
//! without a state file).

use crate::error::{LabError, Result};
use crate::lab::{check_privilege, remove_by_name};
use crate::state::StateDir;
use crate::{names, netns};
use bloatlab_os::child::stop_pids;
use std::io::Write;
use std::time::Duration;

/// How long the emulator gets to tear its lab down after SIGTERM.
const EMULATOR_GRACE: Duration = Duration::from_secs(10);

/// How long `lab exec` commands get after SIGTERM.
const EXEC_GRACE: Duration = Duration::from_secs(2);

/// What [`down`] did. Its `Display` is the line `lab down` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub name: String,
    /// A running emulator was stopped.
    pub emulator_stopped: bool,
    /// `lab exec` commands that were still running and were ended.
    pub exec_ended: usize,
    /// Namespaces removed by name (the emulator removes its own first, so
    /// these are leftovers).
    pub leftover_namespaces: Vec<String>,
}

impl std::fmt::Display for Removed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "lab {} removed", self.name)?;
        if self.emulator_stopped {
            f.write_str(", emulator stopped")?;
        }
        if self.exec_ended > 0 {
            write!(f, ", {} `lab exec` process(es) ended", self.exec_ended)?;
        }
        if !self.leftover_namespaces.is_empty() {
            write!(
                f,
                " (leftover namespaces removed: {})",
                self.leftover_namespaces.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Stops lab `name`'s emulator (SIGTERM, then SIGKILL after 10 s) and
/// removes everything left by name. Processes found inside the lab's
/// namespaces that are not ours to end are named on `warnings` (one line
/// each, before the emulator goes). Fails with [`LabError::NoSuchLab`]
/// when there was nothing to remove.
pub fn down(dir: &StateDir, name: &str, warnings: &mut dyn Write) -> Result<Removed> {
    names::validate(name)?;
    check_privilege("bloatlab lab down")?;
    let st = dir.read(name).unwrap_or_else(|e| {
        tracing::warn!("{e}; removing by name");
        None
    });
    let exec_ended = stop_exec_processes(dir, name);
    let listed = st
        .as_ref()
        .map(|s| s.namespaces.clone())
        .unwrap_or_default();
    // Before the emulator goes: its teardown removes the namespace names.
    warn_about_stragglers(&listed, warnings);
    let mut emulator_stopped = false;
    if let Some(st) = &st
        && st.emulator_alive()
    {
        // A PID verified by its start time (emulator_alive).
        let killed = stop_pids(&[st.pid], libc::SIGTERM, EMULATOR_GRACE, |_| {
            st.emulator_alive()
        });
        if !killed.is_empty() {
            tracing::warn!("emulator pid {} ignored SIGTERM; killed it", st.pid);
        }
        emulator_stopped = true;
    }
    let removed = remove_by_name(name, &listed)?;
    dir.remove(name);
    if st.is_none() && removed.is_empty() {
        return Err(LabError::NoSuchLab(name.into()));
    }
    Ok(Removed {
        name: name.into(),
        emulator_stopped,
        exec_ended,
        leftover_namespaces: removed,
    })
}

/// Names processes still inside the lab's namespaces (started with plain
/// `ip netns exec`, or children of `lab exec` commands): they are not ours
/// to end, but they keep a namespace alive after its name is removed.
fn warn_about_stragglers(namespaces: &[String], warnings: &mut dyn Write) {
    for ns in namespaces {
        let procs = netns::processes_in(ns);
        if procs.is_empty() {
            continue;
        }
        let list = procs
            .iter()
            .map(|(pid, comm)| format!("{pid} ({comm})"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            warnings,
            "bloatlab: warning: still running in {ns}: {list}; they keep the namespace alive after it is removed, end them yourself"
        );
    }
}

/// Ends the commands `lab exec` started in lab `name` (SIGTERM, SIGKILL
/// after 2 s), by their recorded PIDs only: not their children, which may
/// have left for other process groups. Returns how many there were.
pub(crate) fn stop_exec_processes(dir: &StateDir, name: &str) -> usize {
    // PIDs verified by their start times (exec_processes lists only live ones).
    let pids = dir.exec_processes(name);
    let killed = stop_pids(&pids, libc::SIGTERM, EXEC_GRACE, |pid| {
        dir.exec_processes(name).contains(&pid)
    });
    for pid in killed {
        tracing::warn!("lab exec process {pid} ignored SIGTERM; killed it");
    }
    pids.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_removed_line_says_what_was_done() {
        let mut r = Removed {
            name: "h14rm".into(),
            emulator_stopped: false,
            exec_ended: 0,
            leftover_namespaces: vec![],
        };
        assert_eq!(r.to_string(), "lab h14rm removed");
        r.emulator_stopped = true;
        r.exec_ended = 2;
        r.leftover_namespaces = vec!["bl-h14rm-client".into(), "bl-h14rm-server".into()];
        assert_eq!(
            r.to_string(),
            "lab h14rm removed, emulator stopped, 2 `lab exec` process(es) ended \
             (leftover namespaces removed: bl-h14rm-client, bl-h14rm-server)"
        );
    }

    #[test]
    fn exec_commands_are_ended_by_their_recorded_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir(tmp.path().to_path_buf());
        // Stands in for a `lab exec` command: a child of ours, ended through its record
        // (and by its guard if the test fails first).
        let mut cmd = bloatlab_os::child::ChildGuard(
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap(),
        );
        dir.register_exec("h14ex", cmd.0.id()).unwrap();
        assert_eq!(stop_exec_processes(&dir, "h14ex"), 1);
        let status = cmd.0.wait().unwrap();
        assert!(!status.success(), "ended by a signal: {status:?}");
        assert_eq!(stop_exec_processes(&dir, "h14ex"), 0);
    }
}
