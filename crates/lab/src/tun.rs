//! TUN devices (Documentation/networking/tuntap.rst): `IFF_TUN | IFF_NO_PI`,
//! so each `read` returns one IP packet with no header. By default there is
//! no `IFF_VNET_HDR`: the kernel segments and checksums before the packet
//! reaches us, which is what "offloads off" means for a TUN. With
//! [`Offload::Tso`] every read and write starts with a `virtio_net_hdr` and
//! the device offers checksum and TCPv4 segmentation offload, so a host
//! hands over 64 KB super-packets ([`crate::offload`] cuts them into wire
//! packets before emulation: emulation.md 4.3, GSO super-packets break
//! packet limits). The device is not persistent: it vanishes when the last
//! fd closes, so a crashed emulator leaves no interface behind.

use crate::error::{LabError, Result};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6` (include/uapi/linux/if_tun.h):
/// partial checksums and IPv4 and IPv6 TCP segmentation (offload/split.rs
/// cuts both). No TSO_ECN (the kernel segments CWR-carrying packets
/// itself), no UDP segmentation.
const TUN_F_CSUM_TSO: libc::c_uint = 0x01 | 0x02 | 0x04;

/// Whether a TUN exchanges offloaded packets with its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// Plain wire-sized packets, checksums complete.
    Off,
    /// `virtio_net_hdr` framing with checksum and TCPv4 segmentation offload.
    Tso,
}

/// An open TUN device.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Creates TUN `name` in the calling thread's namespace. The fd is
    /// non-blocking; it keeps working from any thread in any namespace.
    pub fn create(name: &str, offload: Offload) -> Result<Tun> {
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
        let mut flags = IFF_TUN | IFF_NO_PI;
        if offload == Offload::Tso {
            flags |= IFF_VNET_HDR;
        }
        ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: ifr is a valid, large enough ifreq buffer.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, ifr.as_mut_ptr()) };
        if rc < 0 {
            return Err(LabError::last_os(format!("TUNSETIFF {name}")));
        }
        if offload == Offload::Tso {
            // The argument is the flag word itself, not a pointer.
            // SAFETY: plain integer ioctl on our fd.
            let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, TUN_F_CSUM_TSO) };
            if rc < 0 {
                return Err(LabError::last_os(format!("TUNSETOFFLOAD {name}")));
            }
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
