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
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;

// Checksum and IPv4 and IPv6 TCP segmentation offload (offload/split.rs
// cuts both); no UDP segmentation.
use bloatlab_os::tun::TUN_F_CSUM_TSO;

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
        // std opens with O_CLOEXEC.
        let fd: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/net/tun")
            .map_err(|e| LabError::io("open /dev/net/tun", e))?
            .into();
        bloatlab_os::tun::set_iff(&fd, name, offload == Offload::Tso)
            .map_err(|e| LabError::io(format!("TUNSETIFF {name}"), e))?;
        if offload == Offload::Tso {
            bloatlab_os::tun::set_offload(&fd, TUN_F_CSUM_TSO)
                .map_err(|e| LabError::io(format!("TUNSETOFFLOAD {name}"), e))?;
        }
        Ok(Tun { fd })
    }

    /// The file descriptor (non-blocking).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

/// Reads one packet; `Ok(None)` when none is waiting.
pub fn read_packet(fd: libc::c_int, buf: &mut [u8]) -> io::Result<Option<usize>> {
    match bloatlab_os::fdio::read(&fd, buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) => match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        },
    }
}

/// Writes one packet into the device (the receiving namespace's stack
/// processes it inside this call).
pub fn write_packet(fd: libc::c_int, pkt: &[u8]) -> io::Result<()> {
    bloatlab_os::fdio::write(&fd, pkt)?;
    Ok(())
}
