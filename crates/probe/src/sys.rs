//! Syscalls: the stamping clock (from `bloatlab-os`), the clock domain, kernel receive timestamps.
//!
//! Everything here is a thin wrapper; the only state is the kernel's.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::time::Duration;

fn to_duration(ts: libc::timespec) -> Duration {
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0).min(999_999_999),
    )
}

/// CLOCK_REALTIME now, since the Unix epoch: the stamping clock of every probe.
pub use bloatlab_os::clock::realtime_now as now;

/// An id of this kernel's CLOCK_REALTIME: a hash of the boot id, which every network
/// namespace of one boot shares. Two ends with the same id stamp on the same clock.
/// 0 if unknown.
pub fn clock_domain() -> u64 {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| {
            // FNV-1a, 64 bit: a stable hash we do not have to depend on a crate for.
            let h = id.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
            h.max(1)
        })
        .unwrap_or(0)
}

/// Asks the kernel for SO_TIMESTAMPNS receive timestamps on `sock`.
pub fn enable_rx_timestamps(sock: &impl AsRawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads size_of::<c_int>() bytes from a valid pointer.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One received datagram.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes written to the buffer (truncated datagrams are cut to the buffer length).
    pub len: usize,
    /// Sender address, if the family is IPv4 or IPv6.
    pub from: Option<SocketAddr>,
    /// Kernel receive timestamp (CLOCK_REALTIME), if the socket delivered one.
    pub kernel_time: Option<Duration>,
}

fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
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

/// recvmsg(2) into `buf`, returning the sender and the SO_TIMESTAMPNS stamp if present.
/// Honours the socket's receive timeout (`WouldBlock`/`TimedOut` when it expires).
pub fn recv_with_timestamp(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: all-zero is a valid sockaddr_storage and msghdr.
    let mut from: libc::sockaddr_storage = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a few control messages; u64 elements keep the buffer cmsghdr-aligned.
    let mut control = [0u64; 16];
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
    let mut kernel_time = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel just filled, bounded
    // by msg_controllen; each data pointer is read only when its length fits a timespec.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::SOL_SOCKET
                && h.cmsg_type == libc::SCM_TIMESTAMPNS
                && h.cmsg_len as usize
                    >= libc::CMSG_LEN(size_of::<libc::timespec>() as u32) as usize
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                kernel_time = Some(to_duration(ts));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(Received {
        len: usize::try_from(n).unwrap_or(0).min(buf.len()),
        from: sockaddr_to_std(&from),
        kernel_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_domain_is_stable_and_known_here() {
        let a = clock_domain();
        assert_ne!(a, 0, "/proc/sys/kernel/random/boot_id should be readable");
        assert_eq!(a, clock_domain());
    }

    #[test]
    fn kernel_timestamp_on_loopback_is_after_send_and_close_to_now() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(&rx).unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = now();
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let r = recv_with_timestamp(&rx, &mut buf).unwrap();
        let after = now();
        assert_eq!(&buf[..r.len], b"hello");
        assert_eq!(r.from, Some(tx.local_addr().unwrap()));
        let k = r.kernel_time.expect("SO_TIMESTAMPNS stamp");
        assert!(
            k >= before && k <= after,
            "{before:?} <= {k:?} <= {after:?}"
        );
    }
}
