//! The client's half of a reverse (`-R`) UDP test: ask, then receive.
//!
//! iperf 2.1.8 (README 5.10, wire/w12): the client sends its test header
//! (id 1, `VERSION2`, upper `REVERSE`) and repeats it with random 0-20 ms
//! gaps, up to 100 times, until a datagram comes back. The server then
//! streams `-l`-byte datagrams at the client's `-b` for its `-t`/`-n` and
//! ends with one FIN (negative id) without an AckFIN exchange. The client
//! computes iperf 2's receive statistics itself (`RecvFlow`) and ends on
//! the FIN, or `-t` plus 2 s (iperf's `SLOPSECS`) after its header, or
//! (for `-n`) after a silence.

use super::UdpError;
use super::cookie;
use super::datagram::{Template, parse_incoming, stamp};
use super::mmsg::{self, RecvBatch, SendBatch};
use super::recv_flow::{RecvFlow, plausible_id};
use super::report::Event;
use crate::config::{Amount, ClientConfig, DEFAULT_UDP_RATE};
use bloatlab_os::clock::realtime_now;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::mpsc::Sender;
use std::time::Duration;

/// Header sends before giving up (iperf 2.1.8).
pub const HEADER_TRIES: u32 = 100;
/// Longest random gap between header sends (iperf 2.1.8: 0-20 ms).
pub const HEADER_MAX_GAP: Duration = Duration::from_millis(20);
/// Extra time after `-t` before the receiver gives up on the FIN (iperf's
/// `SLOPSECS`).
pub const SLOP: Duration = Duration::from_secs(2);
/// Shortest silence that ends a `-n` reverse test without FIN.
pub const MIN_IDLE: Duration = Duration::from_secs(2);
/// Longest the receive loop blocks (interval lines, SIGINT).
const MAX_WAIT: Duration = Duration::from_millis(100);

/// The header retry schedule (sans-IO): up to [`HEADER_TRIES`] sends with
/// pseudo-random gaps in `0..=HEADER_MAX_GAP` from a seeded xorshift, so
/// many clients started together do not stay in step.
#[derive(Debug, Clone)]
pub struct HeaderRetry {
    state: u64,
    sent: u32,
}

impl HeaderRetry {
    /// A schedule seeded with `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> HeaderRetry {
        HeaderRetry {
            state: seed | 1,
            sent: 0,
        }
    }

    /// Call before each send: how long to wait for a reply after it, or
    /// `None` when all tries are used.
    pub fn next_gap(&mut self) -> Option<Duration> {
        if self.sent >= HEADER_TRIES {
            return None;
        }
        self.sent += 1;
        // xorshift64 (Marsaglia 2003).
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let max = HEADER_MAX_GAP.as_micros() as u64;
        Some(Duration::from_micros(self.state % (max + 1)))
    }

    /// Headers sent so far.
    pub fn sent(&self) -> u32 {
        self.sent
    }
}

/// When the receiver stops waiting, given its header time, the last receive
/// time and the test's amount (sans-IO).
pub fn receive_deadline(
    amount: Amount,
    idle: Duration,
    header_sent: Duration,
    last_rx: Duration,
) -> Duration {
    match amount {
        Amount::Time(d) => header_sent + d + SLOP,
        Amount::Bytes(_) => last_rx + idle,
    }
}

/// Runs one reverse stream on its connected socket.
pub(crate) fn reverse_stream(
    cfg: &ClientConfig,
    sock: &UdpSocket,
    id: u32,
    tmpl: &Template,
    sink: &Sender<Event>,
) -> Result<(), UdpError> {
    prepare_receive(cfg, sock)?;
    let header_sent = realtime_now();
    request(sock, tmpl, id)?;
    receive_stream(cfg, sock, id, sink, header_sent, None)
}

/// Kernel receive timestamps and a larger receive queue on a stream's socket.
pub(crate) fn prepare_receive(cfg: &ClientConfig, sock: &UdpSocket) -> Result<(), UdpError> {
    mmsg::enable_rx_timestamps(sock).map_err(|e| UdpError::SocketOption {
        option: "SO_TIMESTAMPNS",
        source: e,
    })?;
    if cfg.socket.window.is_none() {
        // As on the server: a larger queue absorbs scheduling gaps at high
        // packet rates (the kernel caps it at rmem_max).
        let _ = socket2::SockRef::from(sock).set_recv_buffer_size(4 << 20);
    }
    Ok(())
}

/// Receives the server's datagrams until its FIN or the end rules (module
/// docs); `header_sent` is when the test started (CLOCK_REALTIME). With
/// `echo` (a full-duplex stream's datagram template), a cookie reply from
/// the server is answered with that datagram carrying the cookie (id 0,
/// which receivers ignore), which starts the server's sender.
pub(crate) fn receive_stream(
    cfg: &ClientConfig,
    sock: &UdpSocket,
    id: u32,
    sink: &Sender<Event>,
    header_sent: Duration,
    echo: Option<&Template>,
) -> Result<(), UdpError> {
    let fd = sock.as_raw_fd();
    let len = cfg.effective_len();
    let rate = cfg.rate.unwrap_or(DEFAULT_UDP_RATE);
    let idle = rate
        .transmit_time(len)
        .map_or(MIN_IDLE, |g| MIN_IDLE.max(g.saturating_mul(8)));
    let mut rb = RecvBatch::new(64, 512);
    let mut flow: Option<RecvFlow> = None;
    let mut events = Vec::new();
    loop {
        let now = realtime_now();
        if let Some(f) = &mut flow
            && !f.finished
        {
            f.intervals_until(f.offset(now), &mut events);
        }
        for ev in events.drain(..) {
            let _ = sink.send(ev);
        }
        if flow.as_ref().is_some_and(|f| f.finished) {
            return Ok(());
        }
        let last_rx = flow.as_ref().map_or(now, |f| f.last_rx);
        let deadline = receive_deadline(cfg.amount, idle, header_sent, last_rx);
        if now >= deadline || cfg.stop.is_stopped() {
            match &mut flow {
                Some(f) => {
                    tracing::warn!(
                        stream = id,
                        "no FIN from the server; ending the reverse test"
                    );
                    let end = if cfg.stop.is_stopped() {
                        now
                    } else {
                        f.last_rx
                    };
                    f.finalize(end, &mut events);
                    continue;
                }
                None => return Err(UdpError::NoData { addr: peer(sock)? }),
            }
        }
        let mut wait = deadline.saturating_sub(now).min(MAX_WAIT);
        if let Some(f) = &flow
            && let Some(b) = f.next_report
        {
            wait = wait.min((f.start + b).saturating_sub(now));
        }
        if !wait.is_zero() {
            mmsg::wait_readable(fd, wait).map_err(|e| UdpError::Io {
                op: "poll",
                source: e,
            })?;
        }
        let refused = receive(
            sock,
            &mut rb,
            &mut flow,
            cfg.interval,
            id,
            &mut events,
            echo,
        );
        if refused && flow.is_none() {
            // ICMP port unreachable before any data: nobody listens.
            return Err(UdpError::Refused { addr: peer(sock)? });
        }
    }
}

fn peer(sock: &UdpSocket) -> Result<std::net::SocketAddr, UdpError> {
    sock.peer_addr().map_err(|e| UdpError::Io {
        op: "getpeername",
        source: e,
    })
}

/// Sends the header until anything arrives (left queued for the receive
/// loop).
fn request(sock: &UdpSocket, tmpl: &Template, id: u32) -> Result<(), UdpError> {
    let mut batch = SendBatch::new(1, &tmpl.bytes);
    let seed = realtime_now().as_nanos() as u64 ^ u64::from(std::process::id()) ^ u64::from(id);
    let mut retry = HeaderRetry::new(seed);
    let mut refused = false;
    let addr = peer(sock)?;
    while let Some(gap) = retry.next_gap() {
        stamp(batch.datagram_mut(0), 1, realtime_now());
        if let Err(e) = batch.send(sock, 1) {
            refused |= e.kind() == io::ErrorKind::ConnectionRefused;
        }
        // At least 1 ms so a zero gap still lets the server answer.
        let ready = mmsg::wait_readable(sock.as_raw_fd(), gap.max(Duration::from_millis(1)))
            .map_err(|e| UdpError::Io {
                op: "poll",
                source: e,
            })?;
        if ready {
            // An ICMP error also makes the socket readable: consume it.
            let mut b = [0u8; cookie::REPLY_LEN + 1];
            match sock.peek(&mut b) {
                Ok(n) => match cookie::from_reply(&b[..n]) {
                    // The server asks us to prove we receive here: send
                    // the header again with its cookie (next round).
                    Some(c) => {
                        let _ = sock.recv(&mut b);
                        if !cookie::embed(batch.datagram_mut(0), &c) {
                            tracing::debug!(stream = id, "datagram too short for the cookie");
                        }
                    }
                    None => return Ok(()),
                },
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => refused = true,
                Err(_) => {}
            }
        }
    }
    if refused {
        return Err(UdpError::Refused { addr });
    }
    Err(UdpError::NoReverseData {
        addr,
        tries: retry.sent(),
    })
}

/// Drains the socket into the stream's statistics. Returns true if the
/// kernel reported ICMP port unreachable.
fn receive(
    sock: &UdpSocket,
    rb: &mut RecvBatch,
    flow: &mut Option<RecvFlow>,
    interval: Option<Duration>,
    id: u32,
    events: &mut Vec<Event>,
    echo: Option<&Template>,
) -> bool {
    loop {
        let n = match rb.recv(sock) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if e.kind() != io::ErrorKind::WouldBlock {
                    tracing::debug!(stream = id, error = %e, "UDP receive failed");
                }
                return e.kind() == io::ErrorKind::ConnectionRefused;
            }
        };
        for i in 0..n {
            let Some(r) = rb.get(i) else { continue };
            let rx = r.kernel_rx.unwrap_or_else(realtime_now);
            if let Some(c) = cookie::from_reply(r.data) {
                // Not data: the server's return-routability check.
                if let Some(t) = echo {
                    answer_cookie(sock, t, &c, id);
                }
                continue;
            }
            // A first datagram with an id no sender starts with is not
            // the server's (one forged datagram must not become the flow).
            let inc = parse_incoming(r.data).ok();
            if flow.is_none() && inc.is_none_or(|i| !plausible_id(0, i.seqno)) {
                tracing::debug!(stream = id, "ignoring an implausible first datagram");
                continue;
            }
            let f = flow.get_or_insert_with(|| RecvFlow::new(id, rx, interval));
            if f.finished {
                return false;
            }
            match inc.filter(|i| f.plausible(i.seqno)).ok_or(()) {
                Ok(inc) => {
                    f.account(inc.seqno.unsigned_abs(), inc.sent, rx, r.wire_len, events);
                    if inc.seqno < 0 {
                        // The server's one FIN: the last datagram counts.
                        f.finalize(rx, events);
                        return false;
                    }
                }
                Err(_) => f.bad += 1,
            }
        }
    }
}

/// Sends the full-duplex echo: our datagram with id 0 and the cookie.
fn answer_cookie(sock: &UdpSocket, tmpl: &Template, c: &cookie::Cookie, id: u32) {
    let mut d = tmpl.bytes.clone();
    stamp(&mut d, 0, realtime_now());
    if !cookie::embed(&mut d, c) {
        tracing::debug!(stream = id, "datagram too short for the cookie");
        return;
    }
    if let Err(e) = sock.send(&d) {
        tracing::debug!(stream = id, error = %e, "sending the cookie echo failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_retries_are_bounded_and_within_20_ms() {
        let mut r = HeaderRetry::new(42);
        let gaps: Vec<Duration> = std::iter::from_fn(|| r.next_gap()).collect();
        assert_eq!(gaps.len(), HEADER_TRIES as usize);
        assert_eq!(r.sent(), HEADER_TRIES);
        assert!(gaps.iter().all(|g| *g <= HEADER_MAX_GAP));
        // Not a constant schedule, and the seed decides it.
        assert!(gaps.iter().any(|g| *g != gaps[0]));
        let mut again = HeaderRetry::new(42);
        assert_eq!(again.next_gap(), Some(gaps[0]));
        let total: Duration = gaps.iter().sum();
        assert!(
            total > Duration::from_millis(500) && total < Duration::from_millis(1500),
            "{total:?}"
        );
    }

    #[test]
    fn deadline_is_amount_plus_slop_or_silence() {
        let s = Duration::from_secs(100);
        let t = receive_deadline(Amount::Time(Duration::from_secs(3)), MIN_IDLE, s, s);
        assert_eq!(t, Duration::from_secs(105));
        let last = Duration::from_secs(107);
        let b = receive_deadline(Amount::Bytes(bloatlab_units::Bytes(1)), MIN_IDLE, s, last);
        assert_eq!(b, Duration::from_secs(109));
    }
}
