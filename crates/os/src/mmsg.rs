//! Batched datagram I/O: `recvmmsg` with kernel receive timestamps and
//! `sendmmsg` from preallocated buffers.
//!
//! The UDP engine's hot path: buffers, iovecs, address and control storage are allocated once; every call re-points the
//! `mmsghdr`s at them (a few stores per datagram) so no pointer outlives a
//! borrow. No allocation happens per datagram, which is what lets the 64-byte
//! full-speed benchmark run at kernel speed.
//!
//! Receive timestamps: with `SO_TIMESTAMPNS` enabled the kernel attaches an
//! `SCM_TIMESTAMPNS` control message (CLOCK_REALTIME, ns) to every datagram;
//! when it is missing the caller falls back to `clock_gettime`. The control
//! messages and addresses are decoded by [`crate::sockmsg`], shared with the
//! probes.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Control buffer per datagram: room for one `timespec` cmsg and slack for
/// anything else the kernel adds (it truncates and sets MSG_CTRUNC beyond).
const CTRL_WORDS: usize = 16; // 128 bytes, u64-aligned as cmsghdr requires

/// One received datagram.
#[derive(Debug)]
pub struct Received<'a> {
    /// The bytes that fit in the buffer (at most the buffer capacity).
    pub data: &'a [u8],
    /// The datagram's real length on the wire (UDP payload bytes), which can
    /// exceed `data.len()` when it was truncated.
    pub wire_len: usize,
    /// Sender address, if the kernel reported one we understand.
    pub from: Option<SocketAddr>,
    /// Kernel receive time (CLOCK_REALTIME since the epoch) from
    /// `SCM_TIMESTAMPNS`, if present.
    pub kernel_rx: Option<Duration>,
    /// The datagram's destination address (`IP_PKTINFO` / `IPV6_PKTINFO`),
    /// if enabled with [`crate::sockmsg::enable_pktinfo`]: which local address a wildcard
    /// socket was reached on.
    pub local: Option<IpAddr>,
}

/// Preallocated state for `recvmmsg`.
pub struct RecvBatch {
    cap: usize,
    bufs: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    ctrl: Vec<u64>,
    hdrs: Vec<libc::mmsghdr>,
    filled: usize,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("cap", &self.cap)
            .field("slots", &self.hdrs.len())
            .field("filled", &self.filled)
            .finish()
    }
}

impl RecvBatch {
    /// Room for `slots` datagrams of up to `cap` bytes each (longer ones are
    /// truncated to `cap` but their real length is still reported).
    pub fn new(slots: usize, cap: usize) -> RecvBatch {
        let slots = slots.max(1);
        let cap = cap.max(1);
        RecvBatch {
            cap,
            bufs: vec![0; slots * cap],
            // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs
            // for which all-zero bytes is a valid value.
            addrs: vec![unsafe { zeroed() }; slots],
            iovs: vec![unsafe { zeroed() }; slots],
            ctrl: vec![0; slots * CTRL_WORDS],
            hdrs: vec![unsafe { zeroed() }; slots],
            filled: 0,
        }
    }

    /// Receives up to `slots` datagrams without blocking. Returns how many
    /// arrived; `ErrorKind::WouldBlock` when none were waiting.
    pub fn recv(&mut self, sock: &impl AsRawFd) -> io::Result<usize> {
        self.filled = 0;
        let slots = self.hdrs.len();
        let bufs = self.bufs.as_mut_ptr();
        let ctrl = self.ctrl.as_mut_ptr();
        for i in 0..slots {
            // SAFETY: i < slots, so the offsets stay inside `bufs` / `ctrl`.
            self.iovs[i] = libc::iovec {
                iov_base: unsafe { bufs.add(i * self.cap) }.cast(),
                iov_len: self.cap,
            };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = unsafe { ctrl.add(i * CTRL_WORDS) }.cast();
            h.msg_controllen = CTRL_WORDS * size_of::<u64>();
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        // MSG_TRUNC makes msg_len the datagram's real length even when it
        // did not fit, so byte counts stay right with small buffers.
        // SAFETY: every header points at live, correctly sized storage owned
        // by `self`, which is mutably borrowed for the duration of the call.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                slots as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.filled = n as usize;
        Ok(self.filled)
    }

    /// Datagram `i` of the last [`recv`](Self::recv) (`i < returned count`).
    // Called per datagram from the engine: inline across the crate boundary.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Received<'_>> {
        if i >= self.filled {
            return None;
        }
        let h = &self.hdrs[i];
        let wire_len = h.msg_len as usize;
        let start = i * self.cap;
        let data = &self.bufs[start..start + wire_len.min(self.cap)];
        // SAFETY: recvmmsg just filled this header's control buffer (`self.ctrl`, live
        // and cmsghdr-aligned), which the header points at.
        let anc = unsafe { crate::sockmsg::ancillary(&h.msg_hdr) };
        let (kernel_rx, local) = (anc.kernel_rx, anc.local);
        Some(Received {
            data,
            wire_len,
            from: crate::sockmsg::sockaddr_to_std(&self.addrs[i], h.msg_hdr.msg_namelen),
            kernel_rx,
            local,
        })
    }
}

/// Preallocated copies of one datagram for `sendmmsg` on a connected socket.
/// The caller rewrites the per-datagram fields (id, send time) in place.
pub struct SendBatch {
    len: usize,
    /// Destination for an unconnected socket (`sendto` semantics) and its
    /// length; `None` for a connected one.
    dest: Option<(libc::sockaddr_storage, libc::socklen_t)>,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBatch")
            .field("len", &self.len)
            .field("slots", &self.hdrs.len())
            .finish()
    }
}

impl SendBatch {
    /// `slots` copies of `template`.
    pub fn new(slots: usize, template: &[u8]) -> SendBatch {
        let slots = slots.max(1);
        let len = template.len();
        let mut bufs = Vec::with_capacity(slots * len);
        for _ in 0..slots {
            bufs.extend_from_slice(template);
        }
        SendBatch {
            len,
            dest: None,
            bufs,
            // SAFETY: all-zero iovec / mmsghdr are valid values.
            iovs: vec![unsafe { zeroed() }; slots],
            hdrs: vec![unsafe { zeroed() }; slots],
        }
    }

    /// Sends every datagram to `dest` (the server's reverse sender shares
    /// its unconnected listening socket).
    pub fn with_dest(mut self, dest: std::net::SocketAddr) -> SendBatch {
        self.dest = Some(crate::sockmsg::std_to_sockaddr(dest));
        self
    }

    /// Number of preallocated datagrams.
    #[inline]
    pub fn slots(&self) -> usize {
        self.hdrs.len()
    }

    /// Datagram `i`'s bytes, to rewrite before [`send`](Self::send).
    #[inline]
    pub fn datagram_mut(&mut self, i: usize) -> &mut [u8] {
        let start = i * self.len;
        &mut self.bufs[start..start + self.len]
    }

    /// Sends datagrams `0..count` with one `sendmmsg`. Returns how many the
    /// kernel took (it stops at the first error, which is returned only if
    /// nothing was sent).
    pub fn send(&mut self, sock: &impl AsRawFd, count: usize) -> io::Result<usize> {
        let count = count.min(self.hdrs.len());
        if count == 0 {
            return Ok(0);
        }
        let bufs = self.bufs.as_mut_ptr();
        for i in 0..count {
            // SAFETY: i < slots, so the offset stays inside `bufs`.
            self.iovs[i] = libc::iovec {
                iov_base: unsafe { bufs.add(i * self.len) }.cast(),
                iov_len: self.len,
            };
            let h = &mut self.hdrs[i].msg_hdr;
            match &mut self.dest {
                Some((addr, len)) => {
                    // The kernel only reads the address.
                    h.msg_name = (addr as *mut libc::sockaddr_storage).cast();
                    h.msg_namelen = *len;
                }
                None => {
                    h.msg_name = std::ptr::null_mut();
                    h.msg_namelen = 0;
                }
            }
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
        }
        // SAFETY: headers point at live storage owned by `self`.
        let n = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                count as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poll::wait_readable;
    use crate::sockmsg::{enable_pktinfo, enable_rx_timestamps};
    use std::net::UdpSocket;

    #[test]
    fn batch_round_trip_with_kernel_timestamps() {
        let rx = UdpSocket::bind("0.0.0.0:0").unwrap();
        enable_rx_timestamps(&rx).unwrap();
        enable_pktinfo(&rx, false).unwrap();
        let port = rx.local_addr().unwrap().port();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(("127.0.0.1", port)).unwrap();

        let mut sb = SendBatch::new(8, &[0xAB; 100]);
        for i in 0..5 {
            sb.datagram_mut(i)[0] = i as u8;
        }
        assert_eq!(sb.send(&tx, 5).unwrap(), 5);

        let mut rb = RecvBatch::new(16, 64); // smaller than the datagrams
        assert!(wait_readable(rx.as_raw_fd(), Duration::from_secs(2)).unwrap());
        let mut got = Vec::new();
        while got.len() < 5 {
            match rb.recv(&rx) {
                Ok(n) => {
                    for i in 0..n {
                        let r = rb.get(i).unwrap();
                        assert_eq!(r.wire_len, 100);
                        assert_eq!(r.data.len(), 64);
                        assert_eq!(r.from, Some(tx.local_addr().unwrap()));
                        assert_eq!(r.local, Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)));
                        let ts = r.kernel_rx.expect("SO_TIMESTAMPNS cmsg");
                        let now = crate::clock::realtime_now();
                        assert!(ts <= now && now - ts < Duration::from_secs(5));
                        got.push(r.data[0]);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_readable(rx.as_raw_fd(), Duration::from_secs(2)).unwrap();
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert!(rb.get(99).is_none());
    }

    #[test]
    fn unconnected_batch_goes_to_its_destination() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut sb = SendBatch::new(4, b"abc").with_dest(rx.local_addr().unwrap());
        assert_eq!(sb.slots(), 4);
        sb.datagram_mut(1).copy_from_slice(b"xyz");
        assert_eq!(sb.send(&tx, 2).unwrap(), 2);
        assert_eq!(sb.send(&tx, 0).unwrap(), 0);
        let mut rb = RecvBatch::new(4, 16);
        let mut got = Vec::new();
        while got.len() < 2 {
            assert!(wait_readable(rx.as_raw_fd(), Duration::from_secs(2)).unwrap());
            let n = rb.recv(&rx).unwrap();
            for i in 0..n {
                got.push(rb.get(i).unwrap().data.to_vec());
            }
        }
        assert_eq!(got, [b"abc".to_vec(), b"xyz".to_vec()]);
    }

    #[test]
    fn empty_socket_would_block() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut rb = RecvBatch::new(4, 64);
        let e = rb.recv(&rx).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(!wait_readable(rx.as_raw_fd(), Duration::from_millis(5)).unwrap());
    }

    #[test]
    fn ipv6_source_address_decodes() {
        let Ok(rx) = UdpSocket::bind("[::1]:0") else {
            return; // no IPv6 loopback on this host
        };
        let tx = UdpSocket::bind("[::1]:0").unwrap();
        tx.send_to(b"hi", rx.local_addr().unwrap()).unwrap();
        let mut rb = RecvBatch::new(2, 64);
        wait_readable(rx.as_raw_fd(), Duration::from_secs(2)).unwrap();
        assert_eq!(rb.recv(&rx).unwrap(), 1);
        let r = rb.get(0).unwrap();
        assert_eq!(r.from, Some(tx.local_addr().unwrap()));
        assert_eq!(r.data, b"hi");
        assert_eq!(r.kernel_rx, None); // timestamps not enabled here
    }
}
