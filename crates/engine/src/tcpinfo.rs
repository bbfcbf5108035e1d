//! `getsockopt(TCP_INFO)`: the sender-side numbers behind iperf 2's
//! `Rtry`, `Cwnd/RTT(var)` and `NetPwr` columns.
//!
//! The struct is zero-initialised and only fields that lie entirely within
//! the length the kernel wrote back are trusted (`libc::tcp_info` grows with
//! libc releases; an older kernel copies fewer bytes).

use std::mem::offset_of;
use std::os::fd::AsRawFd;
use std::time::Duration;

pub use bloatlab_metrics::tcp_send::TcpInfoSample;

/// Reads TCP_INFO from a connected TCP socket. Costs one syscall (about a
/// microsecond); see docs/engine.md for how often the drivers call it.
pub fn sample(sock: &impl AsRawFd) -> std::io::Result<TcpInfoSample> {
    let (info, len) = raw(sock)?;
    let has = |end: usize| end <= len;
    let us = |v: u32| Duration::from_micros(u64::from(v));
    Ok(TcpInfoSample {
        rtt: if has(offset_of!(libc::tcp_info, tcpi_rtt) + 4) {
            us(info.tcpi_rtt)
        } else {
            Duration::ZERO
        },
        rttvar: if has(offset_of!(libc::tcp_info, tcpi_rttvar) + 4) {
            us(info.tcpi_rttvar)
        } else {
            Duration::ZERO
        },
        snd_cwnd: if has(offset_of!(libc::tcp_info, tcpi_snd_cwnd) + 4) {
            info.tcpi_snd_cwnd
        } else {
            0
        },
        snd_mss: if has(offset_of!(libc::tcp_info, tcpi_snd_mss) + 4) {
            info.tcpi_snd_mss
        } else {
            0
        },
        total_retrans: if has(offset_of!(libc::tcp_info, tcpi_total_retrans) + 4) {
            info.tcpi_total_retrans
        } else {
            0
        },
        // Linux 4.19+; an older kernel copies fewer bytes: not measured.
        delivered_ce: has(offset_of!(libc::tcp_info, tcpi_delivered_ce) + 4)
            .then_some(info.tcpi_delivered_ce),
        // Linux 4.1+.
        bytes_acked: has(offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8)
            .then_some(info.tcpi_bytes_acked),
    })
}

/// Bytes this socket received in order (`tcpi_bytes_received`, Linux 4.1+): what
/// crossed the path, whether the application has read it yet or not. `None` when the
/// kernel does not report it.
pub fn bytes_received(sock: &impl AsRawFd) -> std::io::Result<Option<u64>> {
    let (info, len) = raw(sock)?;
    Ok((offset_of!(libc::tcp_info, tcpi_bytes_received) + 8 <= len)
        .then_some(info.tcpi_bytes_received))
}

/// What a sender is waiting for: segments sent and not yet acknowledged
/// (`tcpi_unacked`) and how long ago the peer's last ACK came
/// (`tcpi_last_ack_recv`). Both are in every kernel's TCP_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckWait {
    pub unacked: u32,
    pub since_last_ack: Duration,
}

/// Reads [`AckWait`] from a connected TCP socket.
pub fn ack_wait(sock: &impl AsRawFd) -> std::io::Result<AckWait> {
    let (info, len) = raw(sock)?;
    let end = offset_of!(libc::tcp_info, tcpi_last_ack_recv) + 4;
    if len < end.max(offset_of!(libc::tcp_info, tcpi_unacked) + 4) {
        return Err(std::io::Error::other("TCP_INFO too short"));
    }
    Ok(AckWait {
        unacked: info.tcpi_unacked,
        since_last_ack: Duration::from_millis(u64::from(info.tcpi_last_ack_recv)),
    })
}

/// `tcpi_options` bits (linux/tcp.h).
const TCPI_OPT_ECN: u8 = 8;
const TCPI_OPT_ECN_SEEN: u8 = 16;

/// Whether ECN was negotiated on this connection (`TCPI_OPT_ECN`; RFC 3168
/// section 6.1.1: both SYNs agreed). Read on either end.
pub fn ecn_negotiated(sock: &impl AsRawFd) -> std::io::Result<bool> {
    let (info, _) = raw(sock)?;
    Ok(info.tcpi_options & TCPI_OPT_ECN != 0)
}

/// A sending socket's final `TCP_INFO`, for the flow query
/// (`bloatlab_wire::flow_query`). Fields the kernel did not write are
/// "not measured" (`None`), never 0.
pub fn sender_summary(sock: &impl AsRawFd) -> std::io::Result<bloatlab_wire::SenderSummary> {
    let base = sample(sock)?;
    let (info, len) = raw(sock)?;
    let has = |end: usize| end <= len;
    Ok(bloatlab_wire::SenderSummary {
        bytes_acked: bloatlab_units::Bytes(
            if has(offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8) {
                info.tcpi_bytes_acked
            } else {
                0
            },
        ),
        retransmits: base.total_retrans,
        rtt: base.rtt,
        rttvar: base.rttvar,
        // The kernel reports ~0U until it has an RTT sample.
        min_rtt: (has(offset_of!(libc::tcp_info, tcpi_min_rtt) + 4)
            && info.tcpi_min_rtt != u32::MAX
            && info.tcpi_min_rtt > 0)
            .then(|| Duration::from_micros(u64::from(info.tcpi_min_rtt))),
        cwnd_segments: base.snd_cwnd,
        mss: bloatlab_units::Bytes(u64::from(base.snd_mss)),
        delivered_ce: base.delivered_ce,
        ecn_negotiated: info.tcpi_options & TCPI_OPT_ECN != 0,
        ecn_seen: info.tcpi_options & TCPI_OPT_ECN_SEEN != 0,
    })
}

/// The receiving side's `TCP_INFO` (cumulative counters), for a receive record.
pub fn sample_receiver(
    sock: &impl AsRawFd,
) -> std::io::Result<bloatlab_metrics::json::RecvTcpInfoRecord> {
    let (info, len) = raw(sock)?;
    let has = |end: usize| end <= len;
    Ok(bloatlab_metrics::json::RecvTcpInfoRecord {
        rcv_rtt_us: (has(offset_of!(libc::tcp_info, tcpi_rcv_rtt) + 4) && info.tcpi_rcv_rtt > 0)
            .then_some(u64::from(info.tcpi_rcv_rtt)),
        out_of_order_packets: has(offset_of!(libc::tcp_info, tcpi_rcv_ooopack) + 4)
            .then_some(u64::from(info.tcpi_rcv_ooopack)),
        received_ce: has(offset_of!(libc::tcp_info, tcpi_received_ce) + 4)
            .then_some(u64::from(info.tcpi_received_ce)),
    })
}

/// `getsockopt(TCP_INFO)`: the struct and the number of bytes the kernel wrote.
fn raw(sock: &impl AsRawFd) -> std::io::Result<(libc::tcp_info, usize)> {
    bloatlab_os::sockopt::tcp_info(sock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn ack_wait_sees_nothing_unacknowledged_once_loopback_acked() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let w = ack_wait(&c).unwrap();
        assert_eq!(w.unacked, 0, "{w:?}");
        // The ACK of "hello" came within the 50 ms (and the clock reads ms).
        assert!(w.since_last_ack < Duration::from_secs(5), "{w:?}");
    }

    #[test]
    fn loopback_sample_has_plausible_values() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let buf = vec![7u8; 256 * 1024];
        let reader = std::thread::spawn(move || {
            let mut sink = vec![0u8; 64 * 1024];
            let mut total = 0;
            while total < 256 * 1024 {
                total += s.read(&mut sink).unwrap();
            }
        });
        c.write_all(&buf).unwrap();
        reader.join().unwrap();
        let t = sample(&c).unwrap();
        assert!(t.snd_mss > 1000, "{t:?}");
        assert!(t.snd_cwnd >= 1, "{t:?}");
        assert!(
            t.rtt > Duration::ZERO && t.rtt < Duration::from_secs(1),
            "{t:?}"
        );
        assert_eq!(t.cwnd().0, u64::from(t.snd_cwnd) * u64::from(t.snd_mss));
        // Kernel 6.x reports CE deliveries; loopback without ECN marks none.
        assert_eq!(t.delivered_ce, Some(0), "{t:?}");
        let r = sample_receiver(&c).unwrap();
        assert_eq!(
            (r.out_of_order_packets, r.received_ce),
            (Some(0), Some(0)),
            "{r:?}"
        );
    }

    #[test]
    fn bytes_received_counts_what_arrived_before_it_is_read() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(&[1u8; 100_000]).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while bytes_received(&s).unwrap() != Some(100_000) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Nothing was read from `s`: the kernel counted it all the same.
        assert_eq!(bytes_received(&s).unwrap(), Some(100_000));
        assert_eq!(bytes_received(&c).unwrap(), Some(0));
    }

    #[test]
    fn not_a_tcp_socket_is_an_error() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(sample(&u).is_err());
    }
}
