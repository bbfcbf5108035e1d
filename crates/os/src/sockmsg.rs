//! Socket messages: kernel receive timestamps (`SO_TIMESTAMPNS`), the destination address
//! of a datagram (`IP_PKTINFO` / `IPV6_PKTINFO`), the control messages that carry them,
//! and socket addresses as the kernel writes them. The probes and the UDP engine both
//! stamp received datagrams with the kernel's time; this is the one copy of that code.
//!
//! Timestamps are CLOCK_REALTIME (the clock `SO_TIMESTAMPNS` stamps with, socket(7)), ns
//! since the Unix epoch.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Sets an integer socket option to 1.
fn set_on(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads size_of::<c_int>() bytes from a pointer to a live c_int.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel for `SO_TIMESTAMPNS` receive timestamps on `sock`.
pub fn enable_rx_timestamps(sock: &impl AsRawFd) -> io::Result<()> {
    set_on(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)
}

/// Asks for each datagram's destination address (`IP_PKTINFO`, and `IPV6_RECVPKTINFO` on
/// an IPv6 socket): which local address a wildcard socket was reached on.
pub fn enable_pktinfo(sock: &impl AsRawFd, v6: bool) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    if v6 {
        set_on(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO)?;
        // Dual-stack sockets also see IPv4 (v4-mapped) traffic; best effort.
        let _ = set_on(fd, libc::IPPROTO_IP, libc::IP_PKTINFO);
        Ok(())
    } else {
        set_on(fd, libc::IPPROTO_IP, libc::IP_PKTINFO)
    }
}

/// What the control messages of one received datagram said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ancillary {
    /// Kernel receive time (`SCM_TIMESTAMPNS`), if present and non-zero.
    pub kernel_rx: Option<Duration>,
    /// The datagram's destination address (packet info), v4-mapped addresses as IPv4.
    pub local: Option<IpAddr>,
}

/// Walks the control messages of `hdr` for the receive timestamp and the packet-info
/// destination address.
///
/// # Safety
/// `hdr.msg_control` and `hdr.msg_controllen` must describe a live control buffer, aligned
/// for `cmsghdr`, that the kernel filled in the `recvmsg`/`recvmmsg` call that returned
/// `hdr` (or null / zero).
pub unsafe fn ancillary(hdr: &libc::msghdr) -> Ancillary {
    let mut out = Ancillary::default();
    if hdr.msg_control.is_null() || hdr.msg_controllen == 0 {
        return out;
    }
    let fits = |c: &libc::cmsghdr, n: usize| {
        // SAFETY: CMSG_LEN is arithmetic on its argument.
        c.cmsg_len >= unsafe { libc::CMSG_LEN(n as u32) } as usize
    };
    // SAFETY: by the caller's contract the kernel filled the control buffer up to
    // msg_controllen; the CMSG_* helpers stay within it, and each payload is read
    // unaligned, only when its length fits the type its (level, type) pair defines.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS)
                    if fits(&*c, size_of::<libc::timespec>()) =>
                {
                    let t: libc::timespec = std::ptr::read_unaligned(data.cast());
                    if let (Ok(s), Ok(n)) = (u64::try_from(t.tv_sec), u32::try_from(t.tv_nsec))
                        && (s, n) != (0, 0)
                        && n < 1_000_000_000
                    {
                        out.kernel_rx = Some(Duration::new(s, n));
                    }
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO)
                    if fits(&*c, size_of::<libc::in_pktinfo>()) =>
                {
                    let p: libc::in_pktinfo = std::ptr::read_unaligned(data.cast());
                    let a = Ipv4Addr::from(u32::from_be(p.ipi_addr.s_addr));
                    out.local = Some(IpAddr::V4(a));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO)
                    if fits(&*c, size_of::<libc::in6_pktinfo>()) =>
                {
                    let p: libc::in6_pktinfo = std::ptr::read_unaligned(data.cast());
                    let a = Ipv6Addr::from(p.ipi6_addr.s6_addr);
                    out.local = Some(match a.to_ipv4_mapped() {
                        Some(v4) => IpAddr::V4(v4),
                        None => IpAddr::V6(a),
                    });
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    out
}

/// A socket address the kernel wrote into `sa` (`len` bytes of it); `None` for a family
/// other than IPv4/IPv6 or a length too short for it.
pub fn sockaddr_to_std(sa: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(sa.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: family and length say this storage holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(sa as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: family and length say this storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(sa as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `addr` as the kernel takes it: a `sockaddr_storage` holding a `sockaddr_in` or
/// `sockaddr_in6`, and its length. The inverse of [`sockaddr_to_std`].
pub fn std_to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for every sockaddr_*.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// One datagram received by [`recv_with_timestamp`].
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes written to the buffer (truncated datagrams are cut to the buffer length).
    pub len: usize,
    /// Sender address, if the family is IPv4 or IPv6.
    pub from: Option<SocketAddr>,
    /// Kernel receive timestamp (CLOCK_REALTIME), if the socket delivered one.
    pub kernel_time: Option<Duration>,
}

/// recvmsg(2) into `buf`, returning the sender and the `SO_TIMESTAMPNS` stamp if present.
/// Honours the socket's receive timeout (`WouldBlock`/`TimedOut` when it expires).
pub fn recv_with_timestamp(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut from: libc::sockaddr_storage = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a few control messages; u64 elements keep the buffer cmsghdr-aligned.
    let mut control = [0u64; 16];
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 16]>() as _;
    // SAFETY: msg points to live buffers of the sizes given above for the whole call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: recvmsg just filled `control`, which msg describes and which is live.
    let anc = unsafe { ancillary(&msg) };
    Ok(Received {
        len: usize::try_from(n).unwrap_or(0).min(buf.len()),
        from: sockaddr_to_std(&from, msg.msg_namelen),
        kernel_time: anc.kernel_rx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn kernel_timestamp_and_destination_on_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(&rx).unwrap();
        enable_pktinfo(&rx, false).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = crate::clock::realtime_now();
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let r = recv_with_timestamp(&rx, &mut buf).unwrap();
        let after = crate::clock::realtime_now();
        assert_eq!(&buf[..r.len], b"hello");
        assert_eq!(r.from, Some(tx.local_addr().unwrap()));
        let k = r.kernel_time.expect("SO_TIMESTAMPNS stamp");
        assert!(
            k >= before && k <= after,
            "{before:?} <= {k:?} <= {after:?}"
        );
    }

    #[test]
    fn without_timestamps_there_is_no_stamp() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        let r = recv_with_timestamp(&rx, &mut buf).unwrap();
        assert_eq!((r.len, r.kernel_time), (1, None));
    }

    #[test]
    fn socket_addresses_round_trip_through_the_kernel_form() {
        for a in [
            "127.0.0.1:5001",
            "10.77.0.2:0",
            "[::1]:443",
            "[fe80::1%3]:9",
        ] {
            let a: SocketAddr = a.parse().unwrap();
            let (ss, len) = std_to_sockaddr(a);
            assert_eq!(sockaddr_to_std(&ss, len), Some(a));
        }
    }

    #[test]
    fn short_or_foreign_addresses_are_none() {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        ss.ss_family = libc::AF_INET as libc::sa_family_t;
        assert!(
            sockaddr_to_std(&ss, 4).is_none(),
            "too short for a sockaddr_in"
        );
        let full = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert!(sockaddr_to_std(&ss, full).is_some());
        ss.ss_family = libc::AF_UNIX as libc::sa_family_t;
        assert!(sockaddr_to_std(&ss, full).is_none());
    }
}
