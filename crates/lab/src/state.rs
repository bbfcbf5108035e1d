//! State files under `/run/bloatlab`: `NAME.json` describes a lab (spec,
//! emulator PID, objects), `NAME.status.json` holds the emulator's latest
//! counters, `NAME.log` its log. Files are replaced atomically (write a
//! temporary file, then rename) so readers never see half a file.
//!
//! `NAME.json` schema (version 1): `{version, name, spec, pid, pid_start,
//! phase: "starting"|"running", namespaces: [..], hosts: [{name, netns,
//! side, addr, ifname}], log}`.

use crate::error::{LabError, Result};
use crate::spec::{Host, LabSpec};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Default directory of state files.
pub(crate) const STATE_DIR: &str = "/run/bloatlab";

/// Current schema version of the state file.
pub const VERSION: u32 = 1;

/// Where state lives (a parameter so tests can use a temporary directory).
#[derive(Debug, Clone)]
pub struct StateDir(pub PathBuf);

impl Default for StateDir {
    fn default() -> Self {
        StateDir(PathBuf::from(STATE_DIR))
    }
}

/// Lifecycle of a lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The name is claimed; objects are being created.
    Starting,
    /// The emulator runs.
    Running,
}

/// Contents of `NAME.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    pub version: u32,
    pub name: String,
    pub spec: LabSpec,
    /// PID of the emulator process (0 before it started).
    pub pid: u32,
    /// Start time of that process (field 22 of `/proc/PID/stat`), so a
    /// recycled PID is not mistaken for our emulator.
    pub pid_start: u64,
    pub phase: Phase,
    pub namespaces: Vec<String>,
    pub hosts: Vec<Host>,
    /// The emulator's log file.
    pub log: PathBuf,
}

impl LabState {
    /// The state of a lab about to be created.
    pub fn new(spec: &LabSpec, dir: &StateDir) -> LabState {
        LabState {
            version: VERSION,
            name: spec.name.clone(),
            spec: spec.clone(),
            pid: 0,
            pid_start: 0,
            phase: Phase::Starting,
            namespaces: spec.namespaces(),
            hosts: spec.hosts(),
            log: dir.log(&spec.name),
        }
    }

    /// True when the recorded emulator process is alive (same PID and
    /// start time).
    pub fn emulator_alive(&self) -> bool {
        self.pid != 0 && process_start(self.pid) == Some(self.pid_start) && !is_zombie(self.pid)
    }

    /// [`LabError::EmulatorDead`] unless [`emulator_alive`](Self::emulator_alive).
    pub fn check_emulator(&self) -> Result<()> {
        if self.emulator_alive() {
            Ok(())
        } else {
            Err(LabError::EmulatorDead {
                lab: self.name.clone(),
                pid: self.pid,
            })
        }
    }
}

/// Watches one lab's emulator for a command run inside the lab (`lab exec`): taken when
/// the command starts, asked again when it ends. The emulator is the same process
/// throughout (PID and start time), so a lab torn down and brought up again under the
/// same name during the run counts as dead too.
#[derive(Debug, Clone)]
pub struct EmulatorWatch {
    lab: String,
    pid: u32,
    pid_start: u64,
}

impl EmulatorWatch {
    /// Fails with [`LabError::EmulatorDead`] (or `NoSuchLab`) when the lab's emulator is
    /// not running now.
    pub fn start(dir: &StateDir, name: &str) -> Result<EmulatorWatch> {
        let st = dir
            .read(name)?
            .ok_or_else(|| LabError::NoSuchLab(name.to_string()))?;
        st.check_emulator()?;
        Ok(EmulatorWatch {
            lab: st.name,
            pid: st.pid,
            pid_start: st.pid_start,
        })
    }

    /// Fails with [`LabError::EmulatorDead`] when the emulator seen at
    /// [`start`](Self::start) is no longer running.
    pub fn check(&self) -> Result<()> {
        if process_start(self.pid) == Some(self.pid_start) && !is_zombie(self.pid) {
            Ok(())
        } else {
            Err(LabError::EmulatorDead {
                lab: self.lab.clone(),
                pid: self.pid,
            })
        }
    }
}

/// True when `pid` has exited but its parent has not reaped it yet (state
/// `Z`): it no longer runs, whatever signal it gets.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s.get(s.rfind(')')? + 1..)?.trim_start().to_string();
            Some(rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Start time of process `pid` in clock ticks since boot, if it exists.
pub(crate) fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and ')', so split after
    // the last ')'. Field 22 (starttime) is then the 20th field.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    // `fields` starts at field 3 (state); starttime is field 22.
    fields.nth(19)?.parse().ok()
}

impl StateDir {
    fn ensure(&self) -> Result<()> {
        std::fs::create_dir_all(&self.0)
            .map_err(|e| LabError::io(format!("mkdir {}", self.0.display()), e))
    }

    /// Path of `NAME.json`.
    pub fn state(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.json"))
    }

    /// Path of `NAME.status.json`.
    pub fn status(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.status.json"))
    }

    /// Path of `NAME.log`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.log"))
    }

    /// Claims `name` by creating its state file exclusively. Fails with
    /// `NameInUse` when another lab holds it.
    pub fn claim(&self, st: &LabState) -> Result<()> {
        self.ensure()?;
        let p = self.state(&st.name);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p);
        match f {
            Ok(mut f) => {
                let bytes = serde_json::to_vec_pretty(st).map_err(|e| LabError::State {
                    path: p.display().to_string(),
                    why: e.to_string(),
                })?;
                f.write_all(&bytes)
                    .map_err(|e| LabError::io(format!("write {}", p.display()), e))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(LabError::NameInUse {
                name: st.name.clone(),
                what: format!("{} exists", p.display()),
            }),
            Err(e) => Err(LabError::io(format!("create {}", p.display()), e)),
        }
    }

    /// Replaces `NAME.json`.
    pub fn write(&self, st: &LabState) -> Result<()> {
        self.ensure()?;
        let v = serde_json::to_vec_pretty(st).map_err(|e| LabError::State {
            path: self.state(&st.name).display().to_string(),
            why: e.to_string(),
        })?;
        write_atomic(&self.state(&st.name), &v)
    }

    /// Reads `NAME.json`; `Ok(None)` when there is none.
    pub fn read(&self, name: &str) -> Result<Option<LabState>> {
        let p = self.state(name);
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LabError::io(format!("read {}", p.display()), e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| LabError::State {
                path: p.display().to_string(),
                why: e.to_string(),
            })
    }

    /// Names of all labs with a state file.
    pub fn list(&self) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(&self.0) else {
            return Vec::new();
        };
        let mut v: Vec<String> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| {
                n.strip_suffix(".json")
                    .filter(|s| !s.ends_with(".status") && !s.starts_with('.'))
                    .map(str::to_string)
            })
            .collect();
        v.sort();
        v
    }

    /// Directory `NAME.exec/` with one file per `lab exec` process.
    pub fn exec_dir(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.exec"))
    }

    /// Records that process `pid` (about to become a `lab exec` command)
    /// runs inside lab `name`: file `NAME.exec/PID` holding its start time,
    /// so `lab down` can later tell it from a reused PID.
    pub(crate) fn register_exec(&self, name: &str, pid: u32) -> Result<()> {
        let d = self.exec_dir(name);
        std::fs::create_dir_all(&d)
            .map_err(|e| LabError::io(format!("mkdir {}", d.display()), e))?;
        let start = process_start(pid).ok_or_else(|| LabError::State {
            path: format!("/proc/{pid}/stat"),
            why: "cannot read the process start time".into(),
        })?;
        write_atomic(&d.join(pid.to_string()), start.to_string().as_bytes())
    }

    /// `lab exec` processes of lab `name` that still run: recorded PIDs whose
    /// start time still matches (a PID reused by another process is not).
    pub(crate) fn exec_processes(&self, name: &str) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir(self.exec_dir(name)) else {
            return Vec::new();
        };
        let mut v: Vec<u32> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let pid: u32 = e.file_name().to_str()?.parse().ok()?;
                let start: u64 = std::fs::read_to_string(e.path())
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                (process_start(pid) == Some(start) && !is_zombie(pid)).then_some(pid)
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// Directory `NAME.ctl/` of rate-change requests and replies
    /// (`lab set --stage-rate`, see [`crate::ratectl`]).
    pub(crate) fn ctl_dir(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.ctl"))
    }

    /// Removes the lab's state, status and log files, its exec records and
    /// its control requests.
    pub fn remove(&self, name: &str) {
        let _ = std::fs::remove_dir_all(self.ctl_dir(name));
        let _ = std::fs::remove_file(self.status(name));
        let _ = std::fs::remove_file(self.log(name));
        let _ = std::fs::remove_dir_all(self.exec_dir(name));
        let _ = std::fs::remove_file(self.state(name));
    }
}

/// Writes `bytes` to `path` via a temporary file and `rename`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            LabError::io(format!("write {}", path.display()), e)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> StateDir {
        let d = std::env::temp_dir().join(format!("bl-state-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        StateDir(d)
    }

    #[test]
    fn claim_is_exclusive_and_round_trips() {
        let dir = tmpdir("claim");
        let spec = LabSpec::new("s1");
        let st = LabState::new(&spec, &dir);
        dir.claim(&st).unwrap();
        assert!(matches!(dir.claim(&st), Err(LabError::NameInUse { .. })));
        let mut st2 = dir.read("s1").unwrap().unwrap();
        assert_eq!(st2.phase, Phase::Starting);
        assert_eq!(st2.namespaces, ["bl-s1-client", "bl-s1-server"]);
        st2.phase = Phase::Running;
        dir.write(&st2).unwrap();
        write_atomic(&dir.status("s1"), b"{}").unwrap();
        assert_eq!(dir.list(), ["s1"]);
        assert_eq!(dir.read("s1").unwrap().unwrap().phase, Phase::Running);
        dir.remove("s1");
        assert!(dir.read("s1").unwrap().is_none());
        assert!(dir.list().is_empty());
        let _ = std::fs::remove_dir_all(&dir.0);
    }

    #[test]
    fn own_process_start_time_is_found_and_others_are_not() {
        let me = std::process::id();
        assert!(process_start(me).is_some());
        assert_eq!(process_start(u32::MAX - 1), None);
        let spec = LabSpec::new("s2");
        let mut st = LabState::new(&spec, &StateDir::default());
        assert!(!st.emulator_alive());
        st.pid = me;
        st.pid_start = process_start(me).unwrap();
        assert!(st.emulator_alive());
        st.pid_start += 1;
        assert!(!st.emulator_alive());
    }

    #[test]
    fn an_emulator_that_dies_is_reported_by_name_and_pid() {
        let dir = tmpdir("watch");
        // Stands in for the emulator: a child of ours, killed by its PID below.
        let mut emu = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let spec = LabSpec::new("w1");
        let mut st = LabState::new(&spec, &dir);
        st.pid = emu.id();
        st.pid_start = process_start(st.pid).unwrap();
        st.phase = Phase::Running;
        dir.claim(&st).unwrap();
        let watch = EmulatorWatch::start(&dir, "w1").unwrap();
        watch.check().unwrap();
        emu.kill().unwrap();
        // Not reaped yet: a zombie is dead too.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let e = watch.check().unwrap_err().to_string();
        assert_eq!(
            e,
            format!("lab w1's emulator (pid {}) is not running", st.pid)
        );
        emu.wait().unwrap();
        assert!(watch.check().is_err());
        let e = EmulatorWatch::start(&dir, "w1").unwrap_err();
        assert!(matches!(e, LabError::EmulatorDead { .. }), "{e}");
        assert!(matches!(
            EmulatorWatch::start(&dir, "w2").unwrap_err(),
            LabError::NoSuchLab(_)
        ));
        dir.remove("w1");
        let _ = std::fs::remove_dir_all(&dir.0);
    }
}
