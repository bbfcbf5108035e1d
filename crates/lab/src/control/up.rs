//! `lab up` before the emulator starts: claiming the name, and the summary
//! printed once the lab works.

use crate::error::{LabError, Result};
use crate::lab::check_privilege;
use crate::names;
use crate::netns;
use crate::spec::{Backend, LabSpec};
use crate::state::{LabState, StateDir};
use std::io::Write;

/// Checks the privilege, refuses a name whose state file or namespaces
/// exist, and claims the name (creates `NAME.json`, phase `starting`).
/// Returns the state the emulator ([`super::daemon`]) starts from.
pub fn claim(dir: &StateDir, spec: &LabSpec) -> Result<LabState> {
    check_privilege("bloatlab lab up")?;
    check_free(dir, &spec.name)?;
    let st = LabState::new(spec, dir);
    dir.claim(&st)?;
    Ok(st)
}

/// Refuses a name whose state file or namespaces exist.
fn check_free(dir: &StateDir, name: &str) -> Result<()> {
    if dir.state(name).exists() {
        return Err(LabError::NameInUse {
            name: name.into(),
            what: format!("{} exists", dir.state(name).display()),
        });
    }
    if let Some(ns) = netns::list()
        .into_iter()
        .find(|ns| names::is_lab_netns(name, ns))
    {
        return Err(LabError::NameInUse {
            name: name.into(),
            what: format!("namespace {ns} exists"),
        });
    }
    Ok(())
}

/// From this rate on, the default (no offload) emulator can run out of CPU
/// on a small machine: 1 Gbit/s gave 807-995 Mbit/s on a 2-vCPU VM
/// (docs/benchmarks.md).
const OFFLOAD_HINT_BPS: f64 = 500e6;

/// A note for `lab up` when a direction is fast enough to want `--offload`.
pub fn offload_hint(spec: &LabSpec) -> Option<String> {
    if spec.driver.offload || spec.backend != Backend::Userspace {
        return None;
    }
    let fast = [&spec.up, &spec.down]
        .into_iter()
        .filter_map(|l| l.rate.as_ref().map(|r| r.get().nominal))
        .any(|r| r.bits_per_sec_f64() >= OFFLOAD_HINT_BPS);
    fast.then(|| {
        "note: at 500 Mbit/s and above the emulator may run short of CPU without offloads \
         (rate errors, TUN ring drops in `lab status`); `--offload` keeps emulated packets \
         wire-sized and cuts that cost (docs/lab.md, Offloads)"
            .to_string()
    })
}

/// Renders what `lab up` prints once the lab works: the hosts and how to
/// use and remove the lab to `out`, the [`offload_hint`] to `notes` (in
/// between, as a terminal shows them). Write errors are ignored: a closed
/// stdout must not take a running lab down with it.
pub fn write_summary(spec: &LabSpec, out: &mut dyn Write, notes: &mut dyn Write) {
    let _ = writeln!(out, "lab {} is up ({:?} backend)", spec.name, spec.backend);
    let _ = out.flush();
    if let Some(note) = offload_hint(spec) {
        let _ = writeln!(notes, "{note}");
    }
    for h in spec.hosts() {
        let _ = writeln!(
            out,
            "  {:<9} {:<12} {:<12} netns {}",
            h.name, h.addr, h.addr6, h.netns
        );
    }
    let _ = writeln!(
        out,
        "run commands with: bloatlab lab exec {} HOST -- CMD; remove with: bloatlab lab down {}",
        spec.name, spec.name
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_every_host_and_the_commands() {
        let mut spec = LabSpec::new("h14sum");
        spec.peer = true;
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        write_summary(&spec, &mut out, &mut notes);
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "lab h14sum is up (Userspace backend)");
        assert_eq!(lines.len(), 2 + spec.hosts().len(), "{out}");
        for (line, h) in lines[1..].iter().zip(spec.hosts()) {
            assert!(line.starts_with(&format!("  {:<9} {:<12}", h.name, h.addr)));
            assert!(line.ends_with(&format!("netns {}", h.netns)), "{line}");
        }
        assert_eq!(
            lines.last().unwrap(),
            &"run commands with: bloatlab lab exec h14sum HOST -- CMD; \
              remove with: bloatlab lab down h14sum"
        );
        assert!(notes.is_empty(), "an unshaped link needs no offload note");
    }

    #[test]
    fn a_taken_name_is_refused_naming_its_state_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir(tmp.path().to_path_buf());
        let spec = LabSpec::new("h14free");
        assert!(check_free(&dir, "h14free").is_ok());
        dir.claim(&LabState::new(&spec, &dir)).unwrap();
        let e = check_free(&dir, "h14free").unwrap_err();
        assert!(matches!(e, LabError::NameInUse { .. }), "{e}");
        assert!(e.to_string().contains("h14free.json exists"), "{e}");
    }
}
