//! The path overhead, measured at `lab up` (driver/calibrate.rs uses it).
//!
//! Before the lab's own link models start, the forwarding threads run for a
//! moment with a known delay ([`PROBE_DELAY`] each way, so they sleep and
//! wake on timers as they will later) and a socket in the first client's
//! namespace sends ICMP echo requests (RFC 792) to the server, the way
//! `ping` does (an unprivileged ICMP datagram socket). Each round trip is
//! timed in user space, from before `send` to after `recv` returns, as irtt
//! times it: the client's send and receive paths, both TUN wake-ups of the
//! forwarding threads, their release lateness, the server's stack turning
//! the request around, and the client's wake-up on the reply. The median
//! minus twice [`PROBE_DELAY`] is the overhead; each direction's delay is
//! trimmed by half of it. (ping's receive time is a kernel timestamp, which
//! excludes the client's wake-up, so ping sees RTTs a few microseconds
//! below irtt's.)

use crate::error::{LabError, Result};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// One-way delay of the forwarding threads while probing.
pub const PROBE_DELAY: Duration = Duration::from_millis(1);
/// Echo requests sent (the median is used).
pub const PROBES: u16 = 48;
/// Longest wait for one reply.
const REPLY_TIMEOUT: Duration = Duration::from_millis(200);
/// Pause between probes: the path is idle when the next one leaves, as it
/// is between a ping's requests.
const GAP: Duration = Duration::from_millis(3);

/// What the probes measured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathCalibration {
    /// Echo requests sent and answered.
    pub probes: u16,
    pub answered: u16,
    /// Round trips through the forwarding threads, [`PROBE_DELAY`] each way.
    pub rtt_p50_ns: u64,
    pub rtt_p90_ns: u64,
    /// `rtt_p50 - 2 * PROBE_DELAY`: everything the round trip adds.
    pub overhead_ns: u64,
    /// Release lateness (p50, up + down) while probing: the part of the
    /// overhead the forwarding threads track continuously themselves.
    pub lateness_ns: u64,
    /// Taken out of each direction's delay at lab up:
    /// `(overhead - lateness) / 2`.
    pub share_ns: u64,
}

/// Nearest-rank quantile of sorted samples.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Derives the calibration from the round trips and the forwarding
/// threads' lateness p50 (sum of both directions) during the probes.
pub fn derive(mut rtts: Vec<Duration>, lateness: Duration) -> PathCalibration {
    rtts.sort_unstable();
    let ns = |d: Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
    let p50 = quantile(&rtts, 0.5);
    let overhead = if rtts.is_empty() {
        Duration::ZERO
    } else {
        p50.saturating_sub(2 * PROBE_DELAY)
    };
    PathCalibration {
        probes: PROBES,
        answered: rtts.len() as u16,
        rtt_p50_ns: ns(p50),
        rtt_p90_ns: ns(quantile(&rtts, 0.9)),
        overhead_ns: ns(overhead),
        lateness_ns: ns(lateness),
        share_ns: ns(overhead.saturating_sub(lateness) / 2),
    }
}

/// An echo request for an ICMP datagram socket: type 8, code 0; the kernel
/// fills in the identifier and the checksum. 56 bytes of payload, as ping.
pub fn echo_request(seq: u16) -> [u8; 64] {
    let mut p = [0u8; 64];
    p[0] = 8;
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in p[8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    p
}

/// True when `msg` (as an ICMP datagram socket returns it: no IP header)
/// is the echo reply with this sequence number.
pub fn is_reply(msg: &[u8], seq: u16) -> bool {
    msg.len() >= 8 && msg[0] == 0 && msg[6..8] == seq.to_be_bytes()
}

/// An unprivileged ICMP echo socket (`ping_group_range` allows it in lab
/// hosts), in the namespace of the calling thread.
pub fn icmp_socket() -> Result<OwnedFd> {
    // SAFETY: plain socket call.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMP,
        )
    };
    if fd < 0 {
        return Err(LabError::io(
            "ICMP socket for calibration",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a new, valid descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: REPLY_TIMEOUT.as_micros() as libc::suseconds_t,
    };
    // SAFETY: valid fd and option buffer of the right size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    Ok(fd)
}

/// Sends [`PROBES`] echo requests to `dst` one at a time and returns the
/// round trips of those answered.
pub fn echo_rtts(fd: &OwnedFd, dst: Ipv4Addr) -> Vec<Duration> {
    let mut out = Vec::new();
    for seq in 0..PROBES {
        out.extend(echo_rtt(fd, dst, seq, REPLY_TIMEOUT));
        std::thread::sleep(GAP);
    }
    out
}

/// One echo request to `dst`, timed from before `send` to after `recv`;
/// `None` when no reply came within `timeout`.
pub fn echo_rtt(fd: &OwnedFd, dst: Ipv4Addr, seq: u16, timeout: Duration) -> Option<Duration> {
    let to = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(dst).to_be(),
        },
        sin_zero: [0; 8],
    };
    let mut buf = [0u8; 1500];
    let req = echo_request(seq);
    let t0 = Instant::now();
    // SAFETY: valid fd, buffer and address.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&to as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return None;
    }
    // Each recv times out after REPLY_TIMEOUT (SO_RCVTIMEO); a stale reply
    // to an earlier request is skipped.
    while t0.elapsed() < timeout {
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) {
                continue;
            }
            return None;
        }
        if is_reply(&buf[..n as usize], seq) {
            return Some(t0.elapsed());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: fn(u64) -> Duration = Duration::from_micros;

    #[test]
    fn echo_request_layout() {
        let p = echo_request(0x0102);
        assert_eq!(&p[..10], &[8, 0, 0, 0, 0, 0, 1, 2, 0, 1]);
        assert_eq!(p[63], 55);
        let mut r = p;
        r[0] = 0;
        assert!(is_reply(&r, 0x0102));
        assert!(!is_reply(&r, 0x0103), "other sequence number");
        assert!(!is_reply(&p, 0x0102), "a request is no reply");
        assert!(!is_reply(&r[..7], 0x0102));
    }

    #[test]
    fn overhead_is_the_median_above_the_probe_delay_minus_lateness() {
        // 2 ms of delay + 200..=209 us; one lost probe.
        let rtts = (0..10).map(|i| 2 * PROBE_DELAY + US(200 + i)).collect();
        let c = derive(rtts, US(4));
        assert_eq!((c.probes, c.answered), (PROBES, 10));
        assert_eq!(c.rtt_p50_ns, 2_204_000);
        assert_eq!(c.rtt_p90_ns, 2_208_000);
        assert_eq!(c.overhead_ns, 204_000);
        assert_eq!(c.share_ns, 100_000);
    }

    #[test]
    fn no_answer_means_nothing_is_taken_out() {
        let c = derive(Vec::new(), US(3));
        assert_eq!((c.answered, c.overhead_ns, c.share_ns), (0, 0, 0));
    }
}
