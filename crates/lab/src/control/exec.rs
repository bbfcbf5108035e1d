//! `lab exec NAME HOST -- CMD`: replace this process with CMD inside HOST's
//! namespace, with a /sys of that namespace (as `ip netns exec` does) and
//! the lab's addresses in the environment.

use crate::error::LabError;
use crate::exec_env::{HostAddrs, LabEnv};
use crate::lab::check_privilege;
use crate::state::StateDir;
use crate::{names, netns};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Why `lab exec` did not become the command.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// No such lab or host, a missing privilege, a namespace that cannot be entered.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// The lab's emulator is not running (`source` is [`LabError::EmulatorDead`]).
    #[error("{source}: nothing would reach the other hosts; `bloatlab lab down {lab}` removes it")]
    EmulatorDead { lab: String, source: LabError },
    /// `execvp` failed: the command does not exist, or cannot be run.
    #[error("cannot run {program:?}: {source}")]
    Run {
        program: String,
        source: std::io::Error,
    },
}

impl ExecError {
    /// True when the command was not found (shells exit 127 then, 126 when
    /// it exists but cannot be run).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ExecError::Run { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Runs `argv` in `host`'s namespace of lab `name`, replacing this process
/// (which keeps its PID, recorded so `lab down` can end the command).
/// Returns only when that failed.
pub fn exec(dir: &StateDir, name: &str, host: &str, argv: &[String]) -> ExecError {
    match try_exec(dir, name, host, argv) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn try_exec(
    dir: &StateDir,
    name: &str,
    host: &str,
    argv: &[String],
) -> Result<std::convert::Infallible, ExecError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(ExecError::Run {
            program: String::new(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command given"),
        });
    };
    names::validate(name)?;
    let st = dir
        .read(name)?
        .ok_or_else(|| LabError::NoSuchLab(name.into()))?;
    let Some(h) = st.hosts.iter().find(|h| h.name == host) else {
        let known = st
            .hosts
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(LabError::NoSuchHost {
            lab: name.into(),
            host: host.into(),
            known,
        }
        .into());
    };
    check_privilege("bloatlab lab exec")?;
    // A dead lab forwards nothing: running a command there would only measure that.
    st.check_emulator()
        .map_err(|source| ExecError::EmulatorDead {
            lab: name.into(),
            source,
        })?;
    // exec() keeps our PID: record it so `lab down` can end the command.
    if let Err(e) = dir.register_exec(name, std::process::id()) {
        tracing::warn!("{e}; `lab down` will not be able to stop this command");
    }
    let fd = netns::open(&h.netns)?;
    netns::enter(&fd)?;
    // Tools reading /sys/class/net then see the lab's interfaces. Best effort.
    bloatlab_os::process::private_sysfs();
    let hosts = st
        .hosts
        .iter()
        .map(|h| HostAddrs {
            name: h.name.clone(),
            v4: h.addr,
            // Labs recorded before IPv6 have no IPv6 address.
            v6: (!h.addr6.is_unspecified()).then_some(h.addr6),
        })
        .collect();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(LabEnv::new(name, &h.name, hosts).vars());
    Err(ExecError::Run {
        program: program.clone(),
        source: cmd.exec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::LabSpec;
    use crate::state::LabState;

    #[test]
    fn refusals_before_entering_a_namespace_name_what_is_wrong() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir(tmp.path().to_path_buf());
        let argv = ["true".to_string()];
        let e = exec(&dir, "h14nolab", "client", &argv);
        assert!(matches!(e, ExecError::Lab(LabError::NoSuchLab(_))), "{e}");
        dir.claim(&LabState::new(&LabSpec::new("h14ex"), &dir))
            .unwrap();
        let e = exec(&dir, "h14ex", "router", &argv);
        assert_eq!(
            e.to_string(),
            "lab \"h14ex\" has no host \"router\" (hosts: client, server)"
        );
        let e = exec(&dir, "h14ex", "client", &[]);
        assert!(
            matches!(e, ExecError::Run { .. }) && !e.is_not_found(),
            "{e}"
        );
    }
}
