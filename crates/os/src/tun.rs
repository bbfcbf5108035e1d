//! TUN device ioctls (Documentation/networking/tuntap.rst): attach an opened
//! `/dev/net/tun` descriptor to a new `IFF_TUN | IFF_NO_PI` device, optionally with
//! `IFF_VNET_HDR` framing, and offer checksum and TCP segmentation offload on it.

use std::io;
use std::os::fd::AsRawFd;

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6` (include/uapi/linux/if_tun.h): partial
/// checksums and IPv4 and IPv6 TCP segmentation. No TSO_ECN (the kernel segments
/// CWR-carrying packets itself), no UDP segmentation.
pub const TUN_F_CSUM_TSO: libc::c_uint = 0x01 | 0x02 | 0x04;

/// `TUNSETIFF`: makes `fd` (an open `/dev/net/tun`) the TUN device `name`, one IP packet
/// per read and write with no packet-information header; with `vnet_hdr` every packet
/// starts with a `virtio_net_hdr`. The device lives in the calling thread's network
/// namespace until the last descriptor closes. A name that is empty or longer than
/// `IFNAMSIZ - 1` bytes is `InvalidInput`.
pub fn set_iff(fd: &impl AsRawFd, name: &str, vnet_hdr: bool) -> io::Result<()> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // struct ifreq: 16-byte name, then a union whose first member is `short ifr_flags`;
    // 40 bytes in total.
    let mut ifr = [0u8; 40];
    ifr[..name.len()].copy_from_slice(name.as_bytes());
    let mut flags = IFF_TUN | IFF_NO_PI;
    if vnet_hdr {
        flags |= IFF_VNET_HDR;
    }
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: `ifr` is a live, writable buffer the size of struct ifreq, which is what
    // TUNSETIFF reads (and writes the final name back into).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, ifr.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `TUNSETOFFLOAD`: the offloads (`TUN_F_*` bits, e.g. [`TUN_F_CSUM_TSO`]) the device
/// accepts from the host; only a device made with `vnet_hdr` can carry offloaded packets.
pub fn set_offload(fd: &impl AsRawFd, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes the flag word itself as its argument, no pointer.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn bad_names_are_refused_before_the_ioctl() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for name in ["", "sixteen-chars-xx", "a\0b"] {
            let e = set_iff(&u, name, false).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{name:?}");
        }
        // Not a TUN descriptor: the kernel refuses the ioctl.
        assert!(set_iff(&u, "blt-x", false).is_err());
        assert!(set_offload(&u, TUN_F_CSUM_TSO).is_err());
    }

    /// TUNs made in a fresh network namespace (so no host interface is touched): a name
    /// in use is refused, and a vnet-header device takes the offload flags.
    #[test]
    fn tun_devices_in_a_private_namespace() {
        if !bloatlab_testkit::tier::root("os::tun::tun_devices_in_a_private_namespace") {
            return;
        }
        std::thread::spawn(|| {
            crate::netns::unshare_net().unwrap();
            let open = || {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open("/dev/net/tun")
                    .unwrap()
            };
            let plain = open();
            set_iff(&plain, "blt-ostun0", false).unwrap();
            let vnet = open();
            set_iff(&vnet, "blt-ostun1", true).unwrap();
            set_offload(&vnet, TUN_F_CSUM_TSO).unwrap();
            // A name in use by another open device is refused.
            assert!(set_iff(&open(), "blt-ostun0", false).is_err());
            // Nothing waits on a fresh device: a read would block.
            let e = crate::fdio::read(&plain, &mut [0u8; 64]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        })
        .join()
        .unwrap();
    }
}
