//! Socket options and socket queries that std and socket2 do not cover: integer options
//! such as `TCP_NOTSENT_LOWAT`, a receive timeout on a bare descriptor, the kernel's
//! `TCP_INFO` and the send queue's fill (`SIOCOUTQ`).

use std::io;
use std::mem::size_of;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// `setsockopt(level, name)` with an `int` value.
pub fn set_int(
    sock: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, which outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt(level, name)` of an option whose value is an `unsigned int`.
pub fn get_uint(sock: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> io::Result<u32> {
    let mut v: libc::c_uint = 0;
    let mut len = size_of::<libc::c_uint>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `v`, which outlives the call; the kernel
    // writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_uint).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `SO_RCVTIMEO`: a blocking receive on `sock` gives up after `timeout` (`WouldBlock`).
/// Zero means wait forever, as in socket(7).
pub fn set_recv_timeout(sock: &impl AsRawFd, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: the pointer and length describe `tv`, which outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt(TCP_INFO)`: the struct and how many of its bytes the kernel wrote (an older
/// kernel writes a prefix; the rest stays zero, so check a field's offset against the
/// length before trusting it).
pub fn tcp_info(sock: &impl AsRawFd) -> io::Result<(libc::tcp_info, usize)> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `info`, which outlives the call; the kernel
    // writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((info, len as usize))
}

/// Bytes in a TCP socket's send queue, sent or not but not yet acknowledged
/// (`SIOCOUTQ`, alias `TIOCOUTQ`, tcp(7)).
pub fn send_queue_bytes(sock: &impl AsRawFd) -> io::Result<i64> {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int into `n`, which outlives the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(i64::from(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::time::Instant;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    #[test]
    fn int_options_round_trip() {
        let (c, _s) = pair();
        set_int(&c, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, 65536).unwrap();
        let v = get_uint(&c, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT).unwrap();
        assert_eq!(v, 65536);
        let e = set_int(&c, libc::IPPROTO_TCP, -1, 1).unwrap_err();
        assert!(e.raw_os_error().is_some());
    }

    #[test]
    fn tcp_info_of_a_loopback_connection() {
        let (mut c, mut s) = pair();
        c.write_all(&[7u8; 10_000]).unwrap();
        let mut buf = vec![0u8; 10_000];
        s.read_exact(&mut buf).unwrap();
        let (info, len) = tcp_info(&c).unwrap();
        assert!(len >= 104, "a TCP_INFO prefix of {len} bytes");
        assert_eq!(info.tcpi_state, 1, "TCP_ESTABLISHED");
        assert!(info.tcpi_bytes_acked >= 10_000 || info.tcpi_segs_out > 0);
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(&u).is_err(), "TCP_INFO on a UDP socket");
    }

    #[test]
    fn send_queue_drains_once_acknowledged() {
        let (mut c, mut s) = pair();
        assert_eq!(send_queue_bytes(&c).unwrap(), 0);
        c.write_all(b"0123456789").unwrap();
        let mut buf = [0u8; 10];
        s.read_exact(&mut buf).unwrap();
        let t0 = Instant::now();
        while send_queue_bytes(&c).unwrap() != 0 {
            assert!(t0.elapsed() < Duration::from_secs(2), "never acknowledged");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_receive_timeout_ends_a_blocking_recv() {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_recv_timeout(&u, Duration::from_millis(30)).unwrap();
        let t0 = Instant::now();
        let e = u.recv(&mut [0u8; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(t0.elapsed() >= Duration::from_millis(25));
        // The kernel keeps it in jiffies: read back rounded up to a tick.
        let back = u.read_timeout().unwrap().unwrap();
        assert!(back >= Duration::from_millis(30) && back <= Duration::from_millis(40));
    }
}
