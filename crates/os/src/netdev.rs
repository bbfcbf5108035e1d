//! Network device calls for the lab: the legacy ethtool ioctl that switches a device's
//! offloads, and sending an rtnetlink request to the kernel. Both act in the network
//! namespace of the socket they are given (that of the thread that opened it).

use std::io;
use std::os::fd::AsRawFd;

/// `SIOCETHTOOL`.
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// `ETHTOOL_STSO`: set TCP segmentation offload.
pub const ETHTOOL_STSO: u32 = 0x1f;
/// `ETHTOOL_SGSO`: set generic segmentation offload.
pub const ETHTOOL_SGSO: u32 = 0x24;
/// `ETHTOOL_SGRO`: set generic receive offload.
pub const ETHTOOL_SGRO: u32 = 0x2c;

/// One `struct ethtool_value` command (`cmd`, `data`) for device `ifname`, through the
/// control socket `sock` (any `AF_INET` datagram socket). A name longer than
/// `IFNAMSIZ - 1` bytes is cut, as `ip` and `ethtool` do.
pub fn ethtool_value(sock: &impl AsRawFd, ifname: &str, cmd: u32, data: u32) -> io::Result<()> {
    // struct ethtool_value { u32 cmd; u32 data; }
    let mut val = [cmd, data];
    // struct ifreq: name[16] + a pointer to the ethtool struct (the union's first word).
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        data: *mut u32,
        _pad: [u8; 16],
    }
    let mut ifr = IfReq {
        name: [0; 16],
        data: val.as_mut_ptr(),
        _pad: [0; 16],
    };
    let n = ifname.len().min(15);
    ifr.name[..n].copy_from_slice(&ifname.as_bytes()[..n]);
    // SAFETY: `ifr` is a struct ifreq whose data pointer points at `val`, a struct
    // ethtool_value; both live across the call, which reads and writes only them.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends one netlink message `msg` to the kernel (netlink port 0) on the netlink socket
/// `sock`. Returns the number of bytes sent.
pub fn netlink_send_to_kernel(sock: &impl AsRawFd, msg: &[u8]) -> io::Result<usize> {
    // SAFETY: all-zero is a valid sockaddr_nl (pid 0: the kernel; no groups).
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `msg` is readable for `msg.len()` bytes and `addr` is a sockaddr_nl of the
    // length given, both live for the whole call.
    let n = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_on_a_missing_device_is_an_error() {
        let s = crate::fdio::socket(libc::AF_INET, libc::SOCK_DGRAM, 0).unwrap();
        let e = ethtool_value(&s, "blt-nodev-xyz", ETHTOOL_STSO, 0).unwrap_err();
        // ENODEV for a name no device has (EPERM first when unprivileged).
        assert!(
            matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::EPERM)),
            "{e}"
        );
    }

    /// An RTM_GETLINK dump request for the loopback device is answered: the kernel read
    /// the request we sent (read-only: nothing is changed).
    #[test]
    fn a_netlink_request_reaches_the_kernel() {
        let s = crate::fdio::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE).unwrap();
        // nlmsghdr (16 bytes) + ifinfomsg (16 bytes), index 1 (lo), no dump flag.
        let mut m = [0u8; 32];
        m[0..4].copy_from_slice(&32u32.to_ne_bytes());
        m[4..6].copy_from_slice(&libc::RTM_GETLINK.to_ne_bytes());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
        m[6..8].copy_from_slice(&flags.to_ne_bytes());
        m[8..12].copy_from_slice(&7u32.to_ne_bytes()); // sequence number
        m[20..24].copy_from_slice(&1i32.to_ne_bytes()); // ifi_index
        assert_eq!(netlink_send_to_kernel(&s, &m).unwrap(), 32);
        crate::sockopt::set_recv_timeout(&s, std::time::Duration::from_secs(2)).unwrap();
        let mut buf = vec![0u8; 16 * 1024];
        let n = crate::fdio::recv(&s, &mut buf, 0).unwrap();
        assert!(n >= 16);
        let seq = u32::from_ne_bytes(buf[8..12].try_into().unwrap());
        assert_eq!(seq, 7, "the answer is to our request");
    }
}
