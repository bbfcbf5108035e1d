//! Plain descriptor and socket calls that std does not offer: `socket(2)` with any
//! family (netlink, ICMP echo), `read`/`write`/`recv`/`sendto` on a descriptor the
//! caller holds as an integer (the lab's TUNs), a `socketpair`, and `getrandom`.
//!
//! The functions that take `&impl AsRawFd` accept a bare `RawFd` as well: the lab's
//! forwarding threads keep their TUN descriptors as integers. They are memory-safe for any
//! integer (the kernel answers EBADF for one that is not open); keeping the descriptor
//! open for the call is the caller's part, as with every `AsRawFd` API.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `socket(domain, ty | SOCK_CLOEXEC, protocol)`, owned.
pub fn socket(domain: libc::c_int, ty: libc::c_int, protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socket() just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A connected pair of `AF_UNIX` sockets of type `ty` (e.g. `SOCK_SEQPACKET |
/// SOCK_NONBLOCK`), owned.
pub fn socketpair(ty: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a live array of two ints for the kernel to fill.
    let rc =
        unsafe { libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair() just returned both descriptors; nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `read(2)` into `buf`: the number of bytes read (0 at end of file).
pub fn read(fd: &impl AsRawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is live and writable for `buf.len()` bytes for the whole call.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `write(2)` of `buf`: the number of bytes written.
pub fn write(fd: &impl AsRawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is live and readable for `buf.len()` bytes for the whole call.
    let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `recv(2)` into `buf` with `flags` (e.g. `MSG_DONTWAIT`, `MSG_TRUNC`). Returns what the
/// kernel returned: with `MSG_TRUNC` on a datagram socket that is the datagram's real
/// length, which may exceed `buf.len()` (only `buf.len()` bytes were written).
pub fn recv(sock: &impl AsRawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is live and writable for `buf.len()` bytes for the whole call; the
    // kernel writes at most that many, whatever it returns.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `recv(2)` of up to `len` bytes of a **TCP** stream with `MSG_TRUNC`: the kernel
/// drops them from the socket's queue without copying them anywhere (Linux >= 4.9 for
/// TCP; iperf 3.16's `--skip-rx-copy`). Returns how many bytes were dropped (0 at end
/// of stream). `flags` are added (e.g. `MSG_DONTWAIT`).
///
/// On a socket that is not TCP, `MSG_TRUNC` means something else (a datagram's real
/// length, after copying into the buffer): there the null buffer makes the kernel answer
/// `EFAULT` (or drop a datagram unread), never write into our memory. Callers pass a TCP
/// stream; the engine only calls this on one.
pub fn recv_discard(sock: &impl AsRawFd, len: usize, flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: the buffer pointer is null, which no Rust object occupies: the kernel
    // either copies nothing (TCP with MSG_TRUNC) or fails its user-copy with EFAULT.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            flags | libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A memory-backed file (`memfd_create(2)`, close-on-exec) holding `bytes`: a source for
/// [`sendfile`] that lets a sender hand the kernel the same pages on every write instead of
/// copying its buffer each time (iperf 3's `-Z` uses `sendfile` the same way).
pub fn memfd_with(name: &str, bytes: &[u8]) -> io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).map_err(|_| io::Error::other("NUL in memfd name"))?;
    // SAFETY: `cname` is a live NUL-terminated string for the whole call.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create() just returned this descriptor; nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut done = 0;
    while done < bytes.len() {
        match write(&fd, &bytes[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(fd)
}

/// `sendfile(2)` of `count` bytes of `from`, starting at byte `offset` of it, to the socket
/// `to` (the file's own position is not used or moved). Returns the bytes sent, which may
/// be fewer (a send timeout or signal after some went).
pub fn sendfile(
    to: &impl AsRawFd,
    from: &impl AsRawFd,
    offset: u64,
    count: usize,
) -> io::Result<usize> {
    let mut off =
        libc::off_t::try_from(offset).map_err(|_| io::Error::other("offset too large"))?;
    // SAFETY: `off` is a live off_t for the kernel to read and update; no other pointers.
    let n = unsafe { libc::sendfile(to.as_raw_fd(), from.as_raw_fd(), &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `sendto(2)` of `buf` to `to`: the number of bytes sent.
pub fn send_to(sock: &impl AsRawFd, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
    let (addr, len) = crate::sockmsg::std_to_sockaddr(to);
    // SAFETY: `buf` is readable for `buf.len()` bytes and `addr` holds `len` bytes of a
    // socket address, both live for the whole call.
    let n = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            0,
            (&addr as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Fills `buf` from the kernel's random source (`getrandom(2)`, flags 0). Returns how
/// many bytes were filled, which can be fewer than asked for.
pub fn getrandom(buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is live and writable for `buf.len()` bytes for the whole call.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn recv_discard_drops_tcp_bytes_without_copying_and_keeps_the_rest() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        tx.write_all(b"0123456789abcdef").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        // Wait until all 16 bytes are queued, then drop 10 of them.
        let mut peek = [0u8; 16];
        while recv(&rx, &mut peek, libc::MSG_PEEK).unwrap() < 16 {}
        assert_eq!(recv_discard(&rx, 10, 0).unwrap(), 10);
        let mut buf = [0u8; 16];
        assert_eq!(recv(&rx, &mut buf, 0).unwrap(), 6);
        assert_eq!(
            &buf[..6],
            b"abcdef",
            "the bytes after the dropped ones are intact"
        );
        // Nothing queued: MSG_DONTWAIT says so instead of blocking.
        let e = recv_discard(&rx, 10, libc::MSG_DONTWAIT).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop(tx);
        assert_eq!(recv_discard(&rx, 10, 0).unwrap(), 0, "end of stream");
    }

    #[test]
    fn sendfile_from_a_memfd_sends_the_asked_range_every_time() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let m = memfd_with("bloatlab-test", b"0123456789").unwrap();
        // The same pages twice, from different offsets; the file position is not used.
        assert_eq!(sendfile(&tx, &m, 2, 5).unwrap(), 5);
        assert_eq!(sendfile(&tx, &m, 0, 3).unwrap(), 3);
        // Past the end: nothing to send.
        assert_eq!(sendfile(&tx, &m, 10, 4).unwrap(), 0);
        drop(tx);
        let mut got = Vec::new();
        rx.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"23456012");
        assert!(memfd_with("bad\0name", b"x").is_err());
    }

    #[test]
    fn recv_discard_on_a_datagram_socket_fails_or_drops_never_writes() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"hello", rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        // Either EFAULT or the datagram's length: both are memory-safe outcomes.
        match recv_discard(&rx, 5, 0) {
            Ok(n) => assert_eq!(n, 5),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EFAULT)),
        }
    }

    #[test]
    fn a_raw_udp_socket_talks_to_a_std_one() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = socket(libc::AF_INET, libc::SOCK_DGRAM, 0).unwrap();
        assert_eq!(
            send_to(&tx, b"hello!", rx.local_addr().unwrap()).unwrap(),
            6
        );
        let mut buf = [0u8; 4];
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        // MSG_TRUNC: the real length, though only 4 bytes fit.
        let n = recv(&rx, &mut buf, libc::MSG_TRUNC).unwrap();
        assert_eq!((n, &buf), (6, b"hell"));
        let e = recv(&rx, &mut buf, libc::MSG_DONTWAIT).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn seqpacket_pair_keeps_packet_boundaries() {
        let (a, b) = socketpair(libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK).unwrap();
        assert_eq!(write(&a, b"one").unwrap(), 3);
        assert_eq!(write(&a.as_raw_fd(), b"three").unwrap(), 5);
        let mut buf = [0u8; 16];
        assert_eq!(read(&b, &mut buf).unwrap(), 3);
        assert_eq!(read(&b.as_raw_fd(), &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"three");
        let e = read(&b, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        // A descriptor number that is not open is an error, not undefined behaviour.
        assert_eq!(
            read(&-1, &mut buf).unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
    }

    #[test]
    fn getrandom_fills_the_buffer() {
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        assert_eq!(getrandom(&mut a).unwrap(), 32);
        assert_eq!(getrandom(&mut b).unwrap(), 32);
        assert_ne!(a, b);
    }
}
