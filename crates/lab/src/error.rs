//! Typed errors of the lab. The binary maps them to exit codes:
//! [`LabError::Spec`] and [`LabError::InvalidName`] are usage errors (2),
//! [`LabError::Privilege`] is a missing privilege (3), the rest are failures (1).

use std::io;

/// Which option a [`LabError::Spec`] is about: the flags that set it and,
/// when the error is about a part of its value, which part. Shown as the flags
/// joined by `/` and the part after a space (`--rate/--up-rate`,
/// `--stage/--up-stage 2 key name`), as the messages always read; a program
/// (the experiment file's checker) reads [`SpecField::flags`] instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecField {
    /// The flags, `--` included: one, or a direction's two spellings
    /// (`--rate`, `--up-rate`). Empty for a setting no flag names (a sysctl).
    pub flags: Vec<String>,
    /// The part of the value (`2 key name`, `qdisc parameter`), or the
    /// setting's name when no flag names it.
    pub part: Option<String>,
}

impl SpecField {
    /// One flag (`--mtu`).
    pub fn flag(flag: &str) -> SpecField {
        SpecField {
            flags: vec![flag.to_owned()],
            part: None,
        }
    }

    /// The option `--WHAT` of link direction `dir` (`up`, `down`, or empty
    /// for a link command without a direction): `--rate/--up-rate`.
    pub fn link(dir: &str, what: &str) -> SpecField {
        let mut flags = vec![format!("--{what}")];
        if !dir.is_empty() {
            flags.push(format!("--{dir}-{what}"));
        }
        SpecField { flags, part: None }
    }

    /// A setting no flag names (`sysctl`).
    pub fn setting(name: &str) -> SpecField {
        SpecField {
            flags: Vec::new(),
            part: Some(name.to_owned()),
        }
    }

    /// This field narrowed to a part of its value.
    pub fn part(self, part: impl Into<String>) -> SpecField {
        SpecField {
            part: Some(part.into()),
            ..self
        }
    }
}

impl std::fmt::Display for SpecField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.flags.join("/"))?;
        match &self.part {
            Some(p) if self.flags.is_empty() => f.write_str(p),
            Some(p) => write!(f, " {p}"),
            None => Ok(()),
        }
    }
}

/// Everything that can go wrong while building, running or removing a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A lab name that cannot be turned into namespace names.
    #[error("invalid lab name {name:?}: {why}")]
    InvalidName { name: String, why: &'static str },

    /// A link or host option was rejected (field and value named).
    #[error("invalid {field} {value:?}: {why}")]
    Spec {
        field: SpecField,
        value: String,
        why: String,
    },

    /// The process lacks the privilege to build namespaces.
    #[error(
        "{what} needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces, TUN devices and mounts"
    )]
    Privilege { what: &'static str },

    /// A lab (or one of its namespaces) with this name already exists.
    #[error(
        "lab name {name:?} is already in use ({what}); remove it with `bloatlab lab down {name}`"
    )]
    NameInUse { name: String, what: String },

    /// No lab of that name exists.
    #[error("no lab named {0:?}")]
    NoSuchLab(String),

    /// The lab's emulator process is gone: nothing forwards packets between its hosts.
    #[error("lab {lab}'s emulator (pid {pid}) is not running")]
    EmulatorDead { lab: String, pid: u32 },

    /// The host name does not belong to the lab.
    #[error("lab {lab:?} has no host {host:?} (hosts: {known})")]
    NoSuchHost {
        lab: String,
        host: String,
        known: String,
    },

    /// The kernel lacks a queueing discipline the kernel backend needs.
    #[error("the kernel has no {qdisc:?} qdisc (sch_{qdisc}); use the userspace backend for it")]
    MissingQdisc { qdisc: String },

    /// A netlink request was refused by the kernel.
    #[error("netlink {op} failed: {source}")]
    Netlink {
        op: String,
        #[source]
        source: io::Error,
    },

    /// Any other system call failed.
    #[error("{op}: {source}")]
    Sys {
        op: String,
        #[source]
        source: io::Error,
    },

    /// A state file could not be parsed.
    #[error("state file {path}: {why}")]
    State { path: String, why: String },
}

impl LabError {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(op: impl Into<String>, source: io::Error) -> LabError {
        LabError::Sys {
            op: op.into(),
            source,
        }
    }

    /// True when the error is a permission problem (EPERM/EACCES), so the
    /// binary can report it as a missing privilege.
    pub fn is_permission(&self) -> bool {
        let src = match self {
            LabError::Privilege { .. } => return true,
            LabError::Netlink { source, .. } | LabError::Sys { source, .. } => source,
            _ => return false,
        };
        matches!(src.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
    }
}

/// Result alias of the crate.
pub type Result<T, E = LabError> = std::result::Result<T, E>;
