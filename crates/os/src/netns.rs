//! Network namespaces and the mounts that name them (`ip netns` style, `/run/netns/NAME`):
//! `unshare(CLONE_NEWNET)` and `setns` for the calling thread, and the bind mounts, shared
//! propagation and lazy unmounts around them. The policy (names, guards, which thread)
//! stays with the lab; these are the bare calls.

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Moves the calling thread (only it) into a new, empty network namespace.
pub fn unshare_net() -> io::Result<()> {
    // SAFETY: unshare(2) takes no pointers and changes only this thread's namespace.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) })
}

/// Moves the calling thread into the network namespace behind `ns` (an open
/// `/run/netns/NAME` or `/proc/PID/ns/net`).
pub fn setns_net(ns: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: setns(2) takes no pointers; a descriptor that is no namespace is EINVAL.
    check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })
}

/// `mount(src, target, "none", flags)` with no data: a bind mount (`MS_BIND`, with
/// `MS_REC` for a recursive one) or a propagation change (`MS_SHARED | MS_REC`, where
/// `src` is ignored).
pub fn mount(src: &Path, target: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let (src, target) = (cstr(src)?, cstr(target)?);
    // SAFETY: every pointer is a live NUL-terminated string or null for the whole call.
    check(unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            c"none".as_ptr(),
            flags,
            std::ptr::null(),
        )
    })
}

/// Detaches the mount at `target` lazily (`umount2(MNT_DETACH)`).
pub fn umount_detach(target: &Path) -> io::Result<()> {
    let target = cstr(target)?;
    // SAFETY: `target` is a live NUL-terminated string for the whole call.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_paths_and_descriptors_are_errors() {
        let e = umount_detach(Path::new("a\0b")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = mount(Path::new("/nonexistent-src-x"), Path::new("a\0b"), 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // A UDP socket is no namespace: refused (EINVAL), the thread stays where it is.
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(setns_net(&u).is_err());
    }

    /// unshare gives the thread an empty namespace; setns with the original namespace's
    /// file brings it back; a bind mount of a namespace file is visible and unmounts.
    /// Nothing outside a temporary directory and this test's threads is touched.
    #[test]
    fn a_thread_leaves_and_reenters_its_namespace() {
        if !bloatlab_testkit::tier::root("os::netns::a_thread_leaves_and_reenters_its_namespace") {
            return;
        }
        let ns_id = || std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let dir = std::env::temp_dir().join(format!("blt-osns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mark = dir.join("ns");
        std::fs::File::create(&mark).unwrap();
        let result = std::thread::spawn({
            let mark = mark.clone();
            move || {
                let home = std::fs::File::open("/proc/thread-self/ns/net").unwrap();
                let before = ns_id();
                unshare_net().unwrap();
                let inside = ns_id();
                assert_ne!(before, inside);
                mount(Path::new("/proc/thread-self/ns/net"), &mark, libc::MS_BIND).unwrap();
                let named = std::fs::File::open(&mark).unwrap();
                setns_net(&home).unwrap();
                assert_eq!(ns_id(), before);
                setns_net(&named).unwrap();
                assert_eq!(ns_id(), inside, "the bind mount names the new namespace");
                drop(named);
                umount_detach(&mark).unwrap();
                assert!(umount_detach(&mark).is_err(), "unmounted twice");
            }
        })
        .join();
        let _ = umount_detach(&mark);
        let _ = std::fs::remove_dir_all(&dir);
        result.unwrap();
    }
}
