//! poll(2), once: the lab's forwarding threads wait on several TUNs with a nanosecond
//! timeout, the UDP engine waits for one readable socket, and the TCP sender asks whether
//! its peer has hung up. All three call [`poll`].

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// `ppoll(2)` on `fds` for at most `timeout` (`None`: no limit), at nanosecond
/// resolution. Returns how many entries have a non-zero `revents`. An fd that is not open
/// reports `POLLNVAL` in its `revents`; it is not an error of the call.
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a live, writable slice of `fds.len()` pollfds for the whole call
    // (the kernel writes only their `revents`); `tsp` is null or points at `ts`, which
    // outlives the call; a null signal mask leaves the mask unchanged.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A `pollfd` asking for `events` on `fd`.
pub fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Waits until `fd` is readable or `timeout` passes. Returns whether it is readable.
/// EINTR counts as "not yet". The timeout is rounded up to whole milliseconds, as the
/// UDP engine's loops were tuned with (a 300 µs wait sleeps 1 ms rather than spinning).
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as u64;
    let mut p = [pollfd(fd, libc::POLLIN)];
    match poll(&mut p, Some(Duration::from_millis(ms))) {
        Ok(n) => Ok(n > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// True when the peer of the stream socket `sock` has closed its side or the connection
/// failed (POLLRDHUP / POLLHUP / POLLERR), without reading anything and without waiting.
pub fn peer_closed(sock: &impl AsRawFd) -> bool {
    let mut p = [pollfd(sock.as_raw_fd(), libc::POLLRDHUP)];
    matches!(poll(&mut p, Some(Duration::ZERO)), Ok(n) if n > 0)
        && p[0].revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::time::Instant;

    #[test]
    fn readable_after_a_datagram_and_not_before() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let t0 = Instant::now();
        assert!(!wait_readable(rx.as_raw_fd(), Duration::from_millis(20)).unwrap());
        assert!(t0.elapsed() >= Duration::from_millis(20));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        assert!(wait_readable(rx.as_raw_fd(), Duration::from_secs(2)).unwrap());
    }

    #[test]
    fn several_fds_report_only_the_ready_one() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        let mut fds = [
            pollfd(a.as_raw_fd(), libc::POLLIN),
            pollfd(b.as_raw_fd(), libc::POLLIN),
        ];
        assert_eq!(poll(&mut fds, Some(Duration::from_secs(2))).unwrap(), 1);
        assert_eq!(fds[0].revents, 0);
        assert_ne!(fds[1].revents & libc::POLLIN, 0);
        // A sub-millisecond timeout is honoured, not rounded to zero or to 1 ms.
        let mut none = [pollfd(a.as_raw_fd(), libc::POLLIN)];
        assert_eq!(
            poll(&mut none, Some(Duration::from_micros(200))).unwrap(),
            0
        );
        // A negative descriptor is ignored (poll(2)), not an error.
        let mut bad = [pollfd(-5, libc::POLLIN)];
        assert_eq!(poll(&mut bad, Some(Duration::ZERO)).unwrap(), 0);
    }

    #[test]
    fn peer_closed_sees_a_hang_up() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert!(!peer_closed(&s));
        c.write_all(b"data").unwrap();
        assert!(!peer_closed(&s), "data is not a hang-up");
        drop(c);
        let t0 = Instant::now();
        while !peer_closed(&s) {
            assert!(t0.elapsed() < Duration::from_secs(2), "no POLLRDHUP");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
