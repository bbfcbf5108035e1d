//! Named network namespaces compatible with `ip netns` (`/run/netns/NAME`).
//!
//! A namespace is created the way iproute2 does it, but without `fork`: a
//! short-lived thread calls `unshare(CLONE_NEWNET)` and bind-mounts its
//! `/proc/thread-self/ns/net` onto `/run/netns/NAME`. Work inside a namespace
//! runs on a scoped thread that `setns`es first, because a socket belongs to
//! the namespace of the thread that created it, and the thread then exits
//! instead of switching back.

use crate::error::{LabError, Result};
use bloatlab_os::netns as sys;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Directory of named namespaces, shared with `ip netns`.
pub(crate) const NETNS_DIR: &str = "/run/netns";

/// Path of a named namespace.
pub fn path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// Makes `/run/netns` a shared mount point, as `ip netns add` does, so the
/// namespaces we mount there are visible to other mount namespaces.
fn ensure_dir() -> Result<()> {
    match std::fs::create_dir(NETNS_DIR) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(LabError::io(format!("mkdir {NETNS_DIR}"), e)),
    }
    let dir = Path::new(NETNS_DIR);
    for _ in 0..2 {
        let err = match sys::mount(Path::new("none"), dir, libc::MS_SHARED | libc::MS_REC) {
            Ok(()) => return Ok(()),
            Err(err) => err,
        };
        if err.raw_os_error() != Some(libc::EINVAL) {
            return Err(LabError::io(format!("make {NETNS_DIR} shared"), err));
        }
        // Not a mount point yet: bind it onto itself, then retry.
        sys::mount(dir, dir, libc::MS_BIND | libc::MS_REC)
            .map_err(|e| LabError::io(format!("bind-mount {NETNS_DIR}"), e))?;
    }
    Ok(())
}

/// Creates the named namespace `name`. Refuses (`NameInUse`) when the name
/// exists already; never touches an existing namespace.
pub fn create(name: &str) -> Result<()> {
    ensure_dir()?;
    let p = path(name);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
    {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(LabError::NameInUse {
                name: name.to_string(),
                what: format!("namespace {} exists", p.display()),
            });
        }
        Err(e) => return Err(LabError::io(format!("create {}", p.display()), e)),
    }
    let target = p.clone();
    let result = std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            sys::unshare_net().map_err(|e| LabError::io("unshare(CLONE_NEWNET)", e))?;
            let src = Path::new("/proc/thread-self/ns/net");
            sys::mount(src, &target, libc::MS_BIND)
                .map_err(|e| LabError::io(format!("bind-mount netns {name}"), e))?;
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| {
            Err(LabError::Sys {
                op: "netns thread".into(),
                source: io::Error::other("panicked"),
            })
        })
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&p);
    }
    result
}

/// Removes the named namespace `name` (unmount, then unlink). Missing
/// namespaces are not an error, so teardown can be repeated.
pub(crate) fn delete(name: &str) -> Result<()> {
    let p = path(name);
    if let Err(err) = sys::umount_detach(&p) {
        // EINVAL: not mounted (half-created); ENOENT: already gone.
        if !matches!(err.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOENT)) {
            return Err(LabError::io(format!("umount {}", p.display()), err));
        }
    }
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LabError::io(format!("remove {}", p.display()), e)),
    }
}

/// True when `/run/netns/name` exists.
pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Names under `/run/netns` (empty when the directory does not exist).
pub fn list() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut v: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

/// Processes (PID, command name) whose network namespace is `name`: read
/// from `/proc/*/ns/net`, which names a namespace by inode. Read-only; used
/// to tell the user what keeps a removed namespace alive.
pub(crate) fn processes_in(name: &str) -> Vec<(u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path(name)) else {
        return Vec::new();
    };
    let want = format!("net:[{}]", meta.ino());
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut v: Vec<(u32, String)> = proc_dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|l| l.as_os_str() == want.as_str())
        })
        .map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            (pid, comm.trim().to_string())
        })
        .collect();
    v.sort();
    v
}

/// Opens the namespace file, for `setns`.
pub fn open(name: &str) -> Result<OwnedFd> {
    let p = path(name);
    File::open(&p)
        .map(OwnedFd::from)
        .map_err(|e| LabError::io(format!("open {}", p.display()), e))
}

/// Moves the calling thread into the namespace behind `fd`.
pub fn enter(fd: &OwnedFd) -> Result<()> {
    sys::setns_net(fd).map_err(|e| LabError::io("setns(CLONE_NEWNET)", e))
}

/// Runs `f` on a thread inside namespace `name` and returns its result.
/// Sockets and devices `f` creates belong to that namespace.
pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let fd = open(name)?;
    std::thread::scope(|s| {
        s.spawn(move || {
            enter(&fd)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(LabError::Sys {
                op: format!("thread in netns {name}"),
                source: io::Error::other("panicked"),
            })
        })
    })
}

/// A namespace removed when dropped (every exit path of `lab up`).
#[derive(Debug)]
pub struct NetnsGuard {
    name: String,
}

impl NetnsGuard {
    /// Creates the namespace and guards it.
    pub fn create(name: &str) -> Result<NetnsGuard> {
        create(name)?;
        Ok(NetnsGuard {
            name: name.to_string(),
        })
    }

    /// The namespace name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = delete(&self.name) {
            tracing::warn!("removing namespace {}: {e}", self.name);
        }
    }
}
