//! The probe responder: answers probe requests on a UDP socket.
//!
//! [`ResponderCore`] is sans-IO: given a received datagram, its receive time and a send
//! time, it rewrites the datagram in place into the reply (same length, so the responder
//! never amplifies). It keeps per-client state (receive count and a 128-request receive
//! window per `(address, session)`) in a [`SessionTable`]: at most [`MAX_SESSIONS`]
//! sessions, at most [`MAX_PER_SOURCE`] per source, O(1) per datagram. A server that
//! shares one UDP port with other traffic can call [`crate::packet::is_probe_request`]
//! and hand probe datagrams to a core of its own.
//!
//! [`spawn`] runs the core on its own thread with kernel receive timestamps.
//! Anything that is not a probe request is ignored, with logging bounded to the first few
//! datagrams and then every 10 000th.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::ProbeError;
use crate::packet::{FLAG_SERVER_RX_KERNEL, Kind, ParseError, Repr};
use crate::sys;

use crate::responder_table::ClientState;
pub use crate::responder_table::{
    MAX_PER_SOURCE, MAX_SESSIONS, SOURCE_BURST, SOURCE_RATE, SessionTable, SourceBudget,
};

/// Why a datagram got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Ignored {
    /// Not a probe datagram.
    #[error(transparent)]
    NotProbe(#[from] ParseError),
    /// A probe reply, not a request.
    #[error("a probe reply, not a request")]
    NotRequest,
    /// This responder has a key and the request's tag is missing or wrong.
    #[error("request not authenticated with this responder's key")]
    Unauthenticated,
    /// The source is over its request budget ([`SOURCE_RATE`], [`SOURCE_BURST`]).
    #[error("source over its budget of {SOURCE_RATE} requests/s")]
    OverBudget,
}

/// Sans-IO responder state.
#[derive(Debug)]
pub struct ResponderCore {
    clock_domain: u64,
    clients: SessionTable,
    budget: SourceBudget,
    key: Option<Vec<u8>>,
}

impl ResponderCore {
    /// A core that reports `clock_domain` (see [`sys::clock_domain`]) in its replies.
    pub fn new(clock_domain: u64) -> ResponderCore {
        ResponderCore {
            clock_domain,
            clients: SessionTable::new(),
            budget: SourceBudget::new(),
            key: None,
        }
    }

    /// Answers only requests tagged with `key` ([`crate::auth`]) and tags its
    /// replies; requests without a valid tag get [`Ignored::Unauthenticated`].
    pub fn with_key(mut self, key: Option<Vec<u8>>) -> ResponderCore {
        self.key = key;
        self
    }

    /// Number of client sessions tracked.
    pub fn sessions(&self) -> usize {
        self.clients.len()
    }

    /// Turns the request in `datagram` (all of it) into the reply, in place. `rx` is the
    /// receive time (`rx_kernel`: from a kernel timestamp), `tx` the send time to stamp.
    pub fn respond(
        &mut self,
        from: SocketAddr,
        datagram: &mut [u8],
        rx: Duration,
        rx_kernel: bool,
        tx: Duration,
    ) -> Result<(), Ignored> {
        let req = Repr::parse_bytes(datagram)?;
        if req.kind != Kind::Request {
            return Err(Ignored::NotRequest);
        }
        // The tag first, then the budget: verification is one HMAC over a
        // fixed-size header (bounded cost), and charging the source first
        // let an unkeyed flood from a keyed client's own address spend its
        // budget (issue 19: 4,000 unkeyed requests/s -> 12.7 % probe loss).
        if let Some(key) = &self.key
            && !crate::auth::verify(datagram, key)
        {
            return Err(Ignored::Unauthenticated);
        }
        if !self.budget.admit(from, rx) {
            return Err(Ignored::OverBudget);
        }
        let st = self.clients.touch(
            (from, req.session),
            rx,
            ClientState {
                rx_count: 0,
                highest: req.seq,
                window: 0,
                last_active: rx,
            },
        );
        st.rx_count = st.rx_count.saturating_add(1);
        if req.seq > st.highest {
            let shift = req.seq - st.highest;
            st.window = if shift >= 128 { 0 } else { st.window << shift };
            st.highest = req.seq;
        }
        let back = st.highest - req.seq;
        if back < 128 {
            st.window |= 1 << back;
        }
        // Bits for seq-1, seq-2, ... start one position above this request's bit.
        let first = back + 1;
        let seen = if first < 128 {
            (st.window >> first) as u64
        } else {
            0
        };
        let reply = Repr {
            kind: Kind::Reply,
            flags: if rx_kernel { FLAG_SERVER_RX_KERNEL } else { 0 },
            server_rx: Some(rx),
            server_tx: Some(tx),
            rx_count: st.rx_count,
            seen,
            clock_domain: self.clock_domain,
            ..req
        };
        // Cannot fail: parse_bytes accepted the length (at least the header).
        reply.emit(datagram).map_err(|_| {
            Ignored::NotProbe(ParseError::Truncated {
                len: datagram.len(),
            })
        })?;
        if let Some(key) = &self.key {
            // Cannot fail: verify() accepted the length.
            crate::auth::sign(datagram, key);
        }
        Ok(())
    }
}

/// Counters of a running responder.
#[derive(Debug, Default)]
pub struct ResponderStats {
    /// Requests answered.
    pub answered: AtomicU64,
    /// Datagrams ignored (not probe requests, or the reply could not be sent).
    pub ignored: AtomicU64,
}

/// A running responder thread; stopped (and joined) on [`ResponderHandle::stop`] or drop.
#[derive(Debug)]
pub struct ResponderHandle {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<ResponderStats>,
    thread: Option<JoinHandle<()>>,
}

impl ResponderHandle {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Live counters.
    pub fn stats(&self) -> &ResponderStats {
        &self.stats
    }

    /// True while the thread runs.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread and waits for it (at most one receive timeout, 100 ms).
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Blocks until the thread ends (it only ends when stopped).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ResponderHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Receive buffer asked for (bytes; the kernel caps it at `net.core.rmem_max`).
const RECV_BUFFER: usize = 8 << 20;

/// How often the thread checks its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// Binds a UDP socket to `bind` and answers probe requests on it from a new thread.
pub fn spawn(bind: SocketAddr) -> Result<ResponderHandle, ProbeError> {
    spawn_keyed(bind, None)
}

/// [`spawn`], answering only requests tagged with `key` when one is given
/// ([`crate::auth`]; `bloatlab server --permit-key` passes its key).
pub fn spawn_keyed(bind: SocketAddr, key: Option<Vec<u8>>) -> Result<ResponderHandle, ProbeError> {
    let socket = UdpSocket::bind(bind).map_err(ProbeError::io("bind UDP responder", bind))?;
    let local_addr = socket
        .local_addr()
        .map_err(ProbeError::io("read responder address", bind))?;
    socket
        .set_read_timeout(Some(POLL))
        .map_err(ProbeError::io("set receive timeout", local_addr))?;
    // A deep receive queue rides out scheduling gaps: at 100 000 datagrams/s
    // the default (~270 small datagrams) lasts under 3 ms. The kernel caps
    // this at net.core.rmem_max; a smaller buffer only means more loss.
    if let Err(e) = socket2::SockRef::from(&socket).set_recv_buffer_size(RECV_BUFFER) {
        tracing::debug!(%local_addr, error = %e, "could not grow the receive buffer");
    }
    let kernel_stamps = match sys::enable_rx_timestamps(&socket) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(%local_addr, error = %e, "no kernel receive timestamps; using userspace time");
            false
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ResponderStats::default());
    let thread = std::thread::Builder::new()
        .name(format!("probe-responder-{}", local_addr.port()))
        .spawn({
            let stop = stop.clone();
            let stats = stats.clone();
            move || serve(&socket, &stop, &stats, kernel_stamps, key)
        })
        .map_err(ProbeError::io("spawn responder thread", local_addr))?;
    tracing::info!(%local_addr, "probe responder listening");
    Ok(ResponderHandle {
        local_addr,
        stop,
        stats,
        thread: Some(thread),
    })
}

/// Logs the first few occurrences, then every 10 000th.
fn should_log(count: u64) -> bool {
    count <= 5 || count.is_multiple_of(10_000)
}

fn serve(
    socket: &UdpSocket,
    stop: &AtomicBool,
    stats: &ResponderStats,
    kernel_stamps: bool,
    key: Option<Vec<u8>>,
) {
    let span = tracing::info_span!("responder", local = ?socket.local_addr().ok());
    let _g = span.enter();
    let mut core = ResponderCore::new(sys::clock_domain()).with_key(key);
    let mut buf = vec![0u8; 65_536];
    let mut errors = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let got = match sys::recv_with_timestamp(socket, &mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => {
                // e.g. ECONNREFUSED left behind by an ICMP error for an earlier reply.
                errors += 1;
                if should_log(errors) {
                    tracing::debug!(error = %e, errors, "receive error");
                }
                continue;
            }
        };
        let Some(from) = got.from else { continue };
        let rx_kernel = kernel_stamps && got.kernel_time.is_some();
        let rx = got.kernel_time.unwrap_or_else(sys::now);
        let datagram = &mut buf[..got.len];
        match core.respond(from, datagram, rx, rx_kernel, sys::now()) {
            Ok(()) => match socket.send_to(datagram, from) {
                Ok(_) => {
                    stats.answered.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    let n = stats.ignored.fetch_add(1, Ordering::Relaxed) + 1;
                    if should_log(n) {
                        tracing::debug!(%from, error = %e, "reply not sent");
                    }
                }
            },
            Err(why) => {
                let n = stats.ignored.fetch_add(1, Ordering::Relaxed) + 1;
                if should_log(n) {
                    tracing::debug!(%from, len = got.len, %why, ignored = n, "datagram ignored");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn request(session: u64, seq: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        Repr::request(
            session,
            seq,
            Duration::from_secs(10) + Duration::from_millis(seq),
        )
        .emit(&mut b)
        .unwrap();
        b
    }

    fn answer(core: &mut ResponderCore, from: SocketAddr, session: u64, seq: u64) -> Repr {
        let mut b = request(session, seq, 100);
        core.respond(
            from,
            &mut b,
            Duration::from_secs(20),
            true,
            Duration::from_secs(21),
        )
        .unwrap();
        assert_eq!(b.len(), 100);
        Repr::parse_bytes(&b).unwrap()
    }

    #[test]
    fn reply_echoes_request_and_stamps_times() {
        let mut core = ResponderCore::new(77);
        let r = answer(&mut core, addr(1), 5, 0);
        assert_eq!(r.kind, Kind::Reply);
        assert_eq!((r.session, r.seq), (5, 0));
        assert_eq!(r.client_send, Duration::from_secs(10));
        assert_eq!(r.server_rx, Some(Duration::from_secs(20)));
        assert_eq!(r.server_tx, Some(Duration::from_secs(21)));
        assert_eq!(r.flags, FLAG_SERVER_RX_KERNEL);
        assert_eq!((r.rx_count, r.seen, r.clock_domain), (1, 0, 77));
    }

    #[test]
    fn seen_bitmap_reports_gaps_and_reordering() {
        let mut core = ResponderCore::new(1);
        for seq in [0, 1, 3] {
            answer(&mut core, addr(1), 5, seq);
        }
        // request 4: saw 3 (bit 0), not 2 (bit 1), saw 1 and 0 (bits 2, 3)
        let r = answer(&mut core, addr(1), 5, 4);
        assert_eq!(r.seen, 0b1101);
        assert_eq!(r.rx_count, 4);
        // request 2 arrives late: its own bitmap covers 1 and 0
        let r = answer(&mut core, addr(1), 5, 2);
        assert_eq!(r.seen, 0b11);
        // and the next reply now shows 2 as seen
        let r = answer(&mut core, addr(1), 5, 5);
        assert_eq!(r.seen & 0b11111, 0b11111);
        // a jump beyond the window clears it
        let r = answer(&mut core, addr(1), 5, 500);
        assert_eq!(r.seen, 0);
    }

    #[test]
    fn sessions_are_separate_and_bounded() {
        let mut core = ResponderCore::new(1);
        answer(&mut core, addr(1), 5, 0);
        let r = answer(&mut core, addr(2), 5, 0);
        assert_eq!(r.rx_count, 1);
        // Every addr() is 127.0.0.1: one source, held to its share of the table.
        for s in 0..(MAX_PER_SOURCE as u64 + 100) {
            answer(&mut core, addr(3), s, 0);
        }
        assert_eq!(core.sessions(), MAX_PER_SOURCE);
        // Past its burst budget (at one instant) the source gets no replies.
        let over = (0..u64::from(SOURCE_BURST))
            .filter(|&s| {
                let mut b = request(1_000_000 + s, 0, 100);
                let (rx, tx) = (Duration::from_secs(20), Duration::from_secs(21));
                core.respond(addr(4), &mut b, rx, true, tx) == Err(Ignored::OverBudget)
            })
            .count();
        assert!(over > 0);
        // Many sources fill the table up to its bound, never past it.
        for i in 0..(MAX_SESSIONS as u32 + 10) {
            let from = SocketAddr::from(((0x0a00_0000 + i).to_be_bytes(), 9));
            answer(&mut core, from, 1, 0);
        }
        assert_eq!(core.sessions(), MAX_SESSIONS);
    }

    #[test]
    fn a_keyed_responder_ignores_unkeyed_probes_and_tags_its_replies() {
        let key = b"abcd1234".to_vec();
        let mut core = ResponderCore::new(1).with_key(Some(key.clone()));
        let t = (Duration::from_secs(20), Duration::from_secs(21));
        let mut plain = request(5, 0, 96);
        assert_eq!(
            core.respond(addr(1), &mut plain, t.0, true, t.1),
            Err(Ignored::Unauthenticated)
        );
        let mut wrong = request(5, 0, 96);
        crate::auth::sign(&mut wrong, b"other-key");
        assert_eq!(
            core.respond(addr(1), &mut wrong, t.0, true, t.1),
            Err(Ignored::Unauthenticated)
        );
        assert_eq!(core.sessions(), 0, "no state for unauthenticated requests");
        let mut good = request(5, 0, 96);
        crate::auth::sign(&mut good, &key);
        core.respond(addr(1), &mut good, t.0, true, t.1).unwrap();
        assert!(crate::auth::verify(&good, &key), "the reply is tagged");
        let r = Repr::parse_bytes(&good).unwrap();
        assert_eq!((r.kind, r.rx_count), (Kind::Reply, 1));
        assert_eq!(r.flags & FLAG_SERVER_RX_KERNEL, FLAG_SERVER_RX_KERNEL);
    }

    #[test]
    fn non_requests_are_ignored_without_touching_state() {
        let mut core = ResponderCore::new(1);
        let mut junk = vec![0xffu8; 200];
        assert!(matches!(
            core.respond(addr(1), &mut junk, Duration::ZERO, false, Duration::ZERO),
            Err(Ignored::NotProbe(ParseError::BadMagic { .. }))
        ));
        let mut short = vec![0u8; 10];
        assert!(
            core.respond(addr(1), &mut short, Duration::ZERO, false, Duration::ZERO)
                .is_err()
        );
        let mut reply = request(1, 1, 80);
        reply[0..4].copy_from_slice(&crate::packet::REPLY_MAGIC.to_be_bytes());
        reply[8..12].copy_from_slice(&(!crate::packet::REPLY_MAGIC).to_be_bytes());
        assert_eq!(
            core.respond(addr(1), &mut reply, Duration::ZERO, false, Duration::ZERO),
            Err(Ignored::NotRequest)
        );
        assert_eq!(core.sessions(), 0);
    }

    #[test]
    fn unkeyed_requests_from_a_keyed_clients_address_do_not_spend_its_budget() {
        let key = b"abcd1234".to_vec();
        let mut core = ResponderCore::new(1).with_key(Some(key.clone()));
        let (rx, tx) = (Duration::from_secs(20), Duration::from_secs(21));
        // Far more unkeyed requests than the source's burst, at one instant,
        // from the keyed client's own address (addr() is 127.0.0.1).
        for s in 0..u64::from(SOURCE_BURST) * 4 {
            let mut b = request(9_000_000 + s, 0, 96);
            assert_eq!(
                core.respond(addr(7), &mut b, rx, true, tx),
                Err(Ignored::Unauthenticated)
            );
        }
        // The keyed client's probes at that same instant are still answered.
        for seq in 0..100 {
            let mut good = request(5, seq, 96);
            crate::auth::sign(&mut good, &key);
            assert_eq!(core.respond(addr(1), &mut good, rx, true, tx), Ok(()));
        }
    }
}
