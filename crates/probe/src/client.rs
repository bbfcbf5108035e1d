//! The probe client driver: one sender thread sleeping to absolute deadlines, and the
//! calling thread receiving replies with kernel timestamps, both feeding one
//! [`Session`] core. UDP probes go to a bloatlab responder; ICMP mode sends raw echo
//! requests (IPv4, root or CAP_NET_RAW) and measures RTT only.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::ProbeError;
use crate::icmp;
use crate::packet::{self, Kind, Repr};
use crate::report::Report;
use crate::session::{Config, Limit, Reply, ReplyEvent, Session, Transmit};
use crate::sys;
use crate::time::SignedDuration;

/// UDP probes or ICMP echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// bloatlab probe datagrams to a responder (RTT, one-way delays, loss per direction).
    Udp,
    /// ICMP echo on a raw socket (RTT only).
    Icmp,
}

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// The responder (UDP) or host (ICMP; the port is ignored).
    pub target: SocketAddr,
    /// UDP or ICMP.
    pub mode: Mode,
    /// Probe interval.
    pub interval: Duration,
    /// Count or duration.
    pub limit: Limit,
    /// Datagram size: UDP payload (at least [`packet::HEADER_LEN`]) or ICMP message
    /// (at least [`icmp::MIN_LEN`]).
    pub size: usize,
    /// Minimum reply timeout.
    pub timeout: Duration,
    /// IP TOS / traffic class byte for the probes.
    pub tos: Option<u8>,
    /// Give up if nothing answered within this time.
    pub no_answer_after: Duration,
}

impl ClientConfig {
    /// UDP, 100 Hz, 80-byte probes, 3 s timeout, give up after 3 s of silence.
    pub fn new(target: SocketAddr, limit: Limit) -> ClientConfig {
        ClientConfig {
            target,
            mode: Mode::Udp,
            interval: Duration::from_millis(10),
            limit,
            size: packet::HEADER_LEN,
            timeout: Duration::from_secs(3),
            tos: None,
            no_answer_after: Duration::from_secs(3),
        }
    }
}

/// One reply event as it happens, for per-probe output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeLine {
    /// What the reply was.
    pub event: ReplyEvent,
    /// One-way delays (up, down), only when both ends share a clock (exact values).
    pub one_way: Option<(SignedDuration, SignedDuration)>,
}

/// UDP probes or ICMP echo on one socket. Receiving is one path for both ([`recv`]);
/// a transport only says which datagrams are its replies ([`Transport::accept`], pure).
trait Transport: Sync {
    fn send(&self, t: &Transmit, buf: &mut [u8]) -> io::Result<()>;
    /// The socket replies arrive on.
    fn socket(&self) -> BorrowedFd<'_>;
    /// `datagram`, received from `from`, as one of our replies; `None` for anything else
    /// (another host's traffic, a request, a reply without our tag or of another session).
    fn accept(&self, datagram: &[u8], from: Option<SocketAddr>) -> Option<Reply>;
}

/// Waits (at most the socket's receive timeout) for one datagram on `t`'s socket and
/// returns it as a reply with its kernel receive time (or the time read now, when the
/// kernel gave none). `Ok(None)`: the timeout passed, or the datagram is not ours.
fn recv(t: &dyn Transport, buf: &mut [u8]) -> io::Result<Option<(Reply, Duration)>> {
    let got = match sys::recv_with_timestamp(&t.socket(), buf) {
        Ok(g) => g,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let rx = got.kernel_time.unwrap_or_else(sys::now);
    Ok(t.accept(&buf[..got.len], got.from).map(|r| (r, rx)))
}

/// After a stop, how long replies still in flight are waited for. A test driver stops its
/// probers at the end of the plan plus a grace and kills them 3 s later (suite
/// `STOP_GRACE`); a probe timeout of 3 x a multi-second RTT would outlast that and lose the
/// whole series.
pub const STOP_LINGER: Duration = Duration::from_secs(1);

/// How long one receive call blocks, so timeouts and stop requests are seen promptly.
const RECV_POLL: Duration = Duration::from_millis(20);

struct UdpTransport {
    socket: UdpSocket,
    session: u64,
    /// Tag requests and accept only tagged replies ([`crate::auth`]).
    key: Option<Vec<u8>>,
}

impl Transport for UdpTransport {
    fn send(&self, t: &Transmit, buf: &mut [u8]) -> io::Result<()> {
        Repr::request(self.session, t.seq, t.send_time)
            .emit(buf)
            .map_err(io::Error::other)?;
        if let Some(key) = &self.key {
            // run_keyed() made the datagram long enough for the tag.
            crate::auth::sign(buf, key);
        }
        self.socket.send(buf).map(|_| ())
    }

    fn socket(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    fn accept(&self, datagram: &[u8], _from: Option<SocketAddr>) -> Option<Reply> {
        // The socket is connected: only the responder's datagrams arrive.
        if let Some(key) = &self.key
            && !crate::auth::verify(datagram, key)
        {
            // Not from a responder holding our key: as if it never came.
            return None;
        }
        let r = Repr::parse_bytes(datagram).ok()?;
        // The session core drops replies of another session (Session::on_reply).
        (r.kind == Kind::Reply).then_some(Reply {
            session: Some(r.session),
            seq: r.seq,
            client_send: r.client_send,
            server_rx: r.server_rx,
            server_tx: r.server_tx,
            rx_count: Some(r.rx_count),
            seen: Some(r.seen),
            clock_domain: r.clock_domain,
        })
    }
}

struct IcmpTransport {
    socket: Socket,
    target: SocketAddr,
    ident: u16,
}

impl Transport for IcmpTransport {
    fn send(&self, t: &Transmit, buf: &mut [u8]) -> io::Result<()> {
        let mut to = self.target;
        if to.is_ipv4() {
            icmp::emit_echo_request(buf, self.ident, t.seq, t.send_time);
        } else {
            icmp::emit_echo6_request(buf, self.ident, t.seq, t.send_time);
            // A raw IPv6 socket takes the port field as the protocol: 0 or EINVAL.
            to.set_port(0);
        }
        self.socket.send_to(buf, &to.into()).map(|_| ())
    }

    fn socket(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    fn accept(&self, datagram: &[u8], from: Option<SocketAddr>) -> Option<Reply> {
        // Raw sockets see every ICMP message on the host: check source, ident and payload.
        if from.map(|a| a.ip()) != Some(self.target.ip()) {
            return None;
        }
        // Raw IPv4 sockets deliver the IP header, raw ICMPv6 sockets do not.
        let r = if self.target.is_ipv4() {
            icmp::parse_ipv4_echo_reply(datagram, self.ident)
        } else {
            icmp::parse_echo6_reply(datagram, self.ident)
        }?;
        Some(Reply {
            session: None,
            seq: r.seq,
            client_send: r.client_send,
            server_rx: None,
            server_tx: None,
            rx_count: None,
            seen: None,
            clock_domain: 0,
        })
    }
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS; good enough for a session id.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(sys::now().as_nanos() as u64);
    h.write_u32(std::process::id());
    h.finish()
}

fn udp_transport(
    cfg: &ClientConfig,
    session: u64,
    key: Option<Vec<u8>>,
) -> Result<UdpTransport, ProbeError> {
    let target = cfg.target;
    let domain = Domain::for_address(target);
    let sock = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .map_err(ProbeError::io("create UDP socket", target))?;
    if let Some(tos) = cfg.tos {
        set_tos(&sock, target, tos)?;
    }
    let any: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    sock.bind(&any.into())
        .map_err(ProbeError::io("bind UDP socket", any))?;
    sock.connect(&target.into())
        .map_err(ProbeError::io("connect UDP socket", target))?;
    let socket: UdpSocket = sock.into();
    socket
        .set_read_timeout(Some(RECV_POLL))
        .map_err(ProbeError::io("set receive timeout", target))?;
    if let Err(e) = sys::enable_rx_timestamps(&socket) {
        tracing::warn!(error = %e, "no kernel receive timestamps; using userspace time");
    }
    Ok(UdpTransport {
        socket,
        session,
        key,
    })
}

fn set_tos(sock: &Socket, target: SocketAddr, tos: u8) -> Result<(), ProbeError> {
    let r = if target.is_ipv4() {
        sock.set_tos_v4(u32::from(tos))
    } else {
        sock.set_tclass_v6(u32::from(tos))
    };
    r.map_err(ProbeError::io("set TOS", target))
}

fn icmp_transport(cfg: &ClientConfig, session: u64) -> Result<IcmpTransport, ProbeError> {
    let target = cfg.target;
    // Raw, not DGRAM "ping" sockets: those fail with EACCES even for root unless
    // net.ipv4.ping_group_range covers our group, which it does not by default.
    let (domain, proto) = if target.is_ipv4() {
        (Domain::IPV4, Protocol::ICMPV4)
    } else {
        (Domain::IPV6, Protocol::ICMPV6)
    };
    let socket = Socket::new(domain, Type::RAW, Some(proto)).map_err(|e| {
        if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
            ProbeError::Privilege { source: e }
        } else {
            ProbeError::Io {
                what: "create raw ICMP socket",
                addr: target,
                source: e,
            }
        }
    })?;
    if let Some(tos) = cfg.tos {
        set_tos(&socket, target, tos)?;
    }
    socket
        .set_read_timeout(Some(RECV_POLL))
        .map_err(ProbeError::io("set receive timeout", target))?;
    if let Err(e) = sys::enable_rx_timestamps(&socket) {
        tracing::warn!(error = %e, "no kernel receive timestamps; using userspace time");
    }
    Ok(IcmpTransport {
        socket,
        target,
        ident: (session ^ (session >> 16) ^ (session >> 32)) as u16,
    })
}

fn check_size(cfg: &ClientConfig) -> Result<(), ProbeError> {
    let min = match cfg.mode {
        Mode::Udp => packet::HEADER_LEN,
        Mode::Icmp => icmp::MIN_LEN,
    };
    if (min..=packet::MAX_LEN).contains(&cfg.size) {
        Ok(())
    } else {
        Err(ProbeError::BadSize {
            size: cfg.size,
            min,
            max: packet::MAX_LEN,
        })
    }
}

/// Runs a probe session to the end (count or duration reached and every probe answered
/// or timed out), or until `stop` is set: then sending stops and the replies still in
/// flight get at most [`STOP_LINGER`] (or their own timeout, if sooner) before they count
/// as lost, so a stopped prober reports promptly even behind a queue of several seconds.
/// `on_line` sees every reply as it arrives.
///
/// Fails with [`ProbeError::NoAnswer`] if nothing answered within
/// `cfg.no_answer_after` (or the port was unreachable before any answer).
pub fn run(
    cfg: &ClientConfig,
    stop: &AtomicBool,
    on_line: impl FnMut(&ProbeLine),
) -> Result<Report, ProbeError> {
    run_keyed(cfg, None, stop, on_line)
}

/// [`run`] with a probe key ([`crate::auth`]): requests carry an HMAC tag and
/// replies without a valid tag are ignored (they count as lost). UDP probes
/// grow to at least [`crate::auth::MIN_LEN`] bytes to hold the tag.
pub fn run_keyed(
    cfg: &ClientConfig,
    key: Option<&[u8]>,
    stop: &AtomicBool,
    mut on_line: impl FnMut(&ProbeLine),
) -> Result<Report, ProbeError> {
    let mut cfg = *cfg;
    if key.is_some() && cfg.mode == Mode::Udp {
        cfg.size = cfg.size.max(crate::auth::MIN_LEN);
    }
    let cfg = &cfg;
    check_size(cfg)?;
    let session_id = random_u64();
    let local_domain = sys::clock_domain();
    let transport: Box<dyn Transport> = match cfg.mode {
        Mode::Udp => Box::new(udp_transport(cfg, session_id, key.map(<[u8]>::to_vec))?),
        Mode::Icmp => Box::new(icmp_transport(cfg, session_id)?),
    };
    let config = Config {
        interval: cfg.interval,
        limit: cfg.limit,
        timeout: cfg.timeout,
        session_id,
        local_clock_domain: local_domain,
    };
    let session = Mutex::new(Session::new(config, sys::now()));
    let lock = || session.lock().unwrap_or_else(PoisonError::into_inner);
    let sender_done = AtomicBool::new(false);
    let give_up = AtomicBool::new(false);
    let refused = AtomicBool::new(false);

    let outcome = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            bloatlab_os::thread::minimise_timer_slack();
            let mut buf = vec![0u8; cfg.size];
            let mut errors = 0u64;
            loop {
                if stop.load(Ordering::Relaxed) || give_up.load(Ordering::Relaxed) {
                    lock().stop_sending();
                    break;
                }
                // Stamp and send right after taking the lock so the stamp is not early.
                let (due, next) = {
                    let mut s = lock();
                    let due = s.poll_transmit(sys::now());
                    (due, s.next_send())
                };
                if let Some(t) = due
                    && let Err(e) = transport.send(&t, &mut buf)
                {
                    if e.raw_os_error() == Some(libc::ECONNREFUSED) {
                        refused.store(true, Ordering::Relaxed);
                    }
                    errors += 1;
                    if errors <= 5 {
                        tracing::warn!(seq = t.seq, error = %e, "probe not sent");
                    }
                }
                match next {
                    Some(deadline) => bloatlab_os::sleep::sleep_until(
                        bloatlab_os::clock::ClockId::Realtime,
                        deadline,
                    ),
                    None => break,
                }
            }
            sender_done.store(true, Ordering::Relaxed);
        });

        let result = receive_loop(
            cfg,
            &*transport,
            &lock,
            (&refused, &sender_done, stop),
            &mut on_line,
        );
        if result.is_err() {
            give_up.store(true, Ordering::Relaxed);
        }
        let _ = sender.join();
        result
    });
    outcome?;
    Ok(session
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .finish())
}

fn receive_loop<'a>(
    cfg: &ClientConfig,
    transport: &dyn Transport,
    lock: &dyn Fn() -> std::sync::MutexGuard<'a, Session>,
    (refused, sender_done, stop): (&AtomicBool, &AtomicBool, &AtomicBool),
    on_line: &mut dyn FnMut(&ProbeLine),
) -> Result<(), ProbeError> {
    let mut buf = vec![0u8; 65_536];
    let mut stopped_at: Option<Duration> = None;
    let no_answer = || ProbeError::NoAnswer {
        addr: cfg.target,
        refused: refused.load(Ordering::Relaxed),
    };
    loop {
        match recv(transport, &mut buf) {
            Ok(Some((reply, rx))) => {
                let line = {
                    let mut s = lock();
                    let event = s.on_reply(rx, &reply);
                    let one_way = match (s.clocks_shared(), reply.server_rx, reply.server_tx) {
                        (true, Some(srx), Some(stx)) => Some((
                            SignedDuration::between(srx, reply.client_send),
                            SignedDuration::between(rx, stx),
                        )),
                        _ => None,
                    };
                    ProbeLine { event, one_way }
                };
                if line.event != ReplyEvent::Ignored {
                    on_line(&line);
                }
            }
            Ok(None) => {}
            // A signal (Ctrl-C from the user or a test runner) interrupted the
            // wait: not an error; the loop re-checks the stop flag below.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                refused.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                return Err(ProbeError::Io {
                    what: "receive probe reply",
                    addr: cfg.target,
                    source: e,
                });
            }
        }
        let now = sys::now();
        let mut s = lock();
        s.handle_timeout(now);
        if s.answered() == 0 {
            let silent_for = now.saturating_sub(s.start());
            if refused.load(Ordering::Relaxed) || silent_for >= cfg.no_answer_after {
                return Err(no_answer());
            }
        }
        if stop.load(Ordering::Relaxed) {
            stopped_at.get_or_insert(now);
        }
        // Stopped and lingered long enough: what is still in flight counts as lost
        // (Session::finish).
        let lingered = stopped_at.is_some_and(|t| now.saturating_sub(t) >= STOP_LINGER);
        // The sender flag guards against finishing between its last poll and its exit.
        if (s.is_done() || lingered) && sender_done.load(Ordering::Relaxed) {
            if s.answered() == 0 {
                return Err(no_answer());
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests;
