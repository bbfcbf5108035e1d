//! TUN devices (Documentation/networking/tuntap.rst): `IFF_TUN | IFF_NO_PI`,
//! so each `read` returns one IP packet with no header. No `IFF_VNET_HDR`:
//! without it the kernel segments and checksums before the packet reaches
//! us, which is what "offloads off" means for a TUN, and every emulated
//! packet is a wire-sized packet (emulation.md 4.3: GSO super-packets break
//! packet limits). The device is not persistent: it vanishes when the last
//! fd closes, so a crashed emulator leaves no interface behind.

use crate::error::{LabError, Result};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
/// `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// An open TUN device.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Creates TUN `name` in the calling thread's namespace. The fd is
    /// non-blocking; it keeps working from any thread in any namespace.
    pub fn create(name: &str) -> Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(LabError::Sys {
                op: format!("TUN name {name:?}"),
                source: io::Error::from(io::ErrorKind::InvalidInput),
            });
        }
        // SAFETY: valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(LabError::last_os("open /dev/net/tun"));
        }
        // SAFETY: fd was just opened.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // struct ifreq: 16-byte name, then a union whose first member we use
        // as `short ifr_flags`; 40 bytes in total.
        let mut ifr = [0u8; 40];
        ifr[..name.len()].copy_from_slice(name.as_bytes());
        ifr[16..18].copy_from_slice(&(IFF_TUN | IFF_NO_PI).to_ne_bytes());
        // SAFETY: ifr is a valid, large enough ifreq buffer.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, ifr.as_mut_ptr()) };
        if rc < 0 {
            return Err(LabError::last_os(format!("TUNSETIFF {name}")));
        }
        Ok(Tun {
            fd,
            name: name.to_string(),
        })
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file descriptor (non-blocking).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

/// Reads one packet; `Ok(None)` when none is waiting.
pub fn read_packet(fd: libc::c_int, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: buf is valid for its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(n as usize))
}

/// Writes one packet into the device (the receiving namespace's stack
/// processes it inside this call).
pub fn write_packet(fd: libc::c_int, pkt: &[u8]) -> io::Result<()> {
    // SAFETY: pkt is valid for its length.
    let n = unsafe { libc::write(fd, pkt.as_ptr().cast(), pkt.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
