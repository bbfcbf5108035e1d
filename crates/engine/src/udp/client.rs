//! The UDP client: one thread per `-P` stream, each with its own connected
//! socket, pacer and statistics; one reporter thread prints.
//!
//! A stream's life (README 5.9):
//! 1. send `-l`-byte datagrams with ids 1, 2, 3, ... and CLOCK_REALTIME send
//!    times, paced by the sans-IO [`Pacer`] (absolute-deadline sleeps, short
//!    spin) or unpaced with `sendmmsg` batches for `-b 0`;
//! 2. at the end (`-t` elapsed or `-n` bytes sent) send the FIN, a datagram
//!    with id `-(next id)`, every 10 ms with an ever more negative id, up to
//!    200 times, until the server's AckFIN arrives;
//! 3. report the final line, `Sent N datagrams` and the `Server Report:`
//!    decoded from the AckFIN (plus the bloatlab report frame, if any).
//!
//! A bloatlab server that ends the flow at its deadline (`--max-duration`)
//! sends its AckFIN before our FIN: step 1 notices it, sends one FIN, uses
//! that report and fails the stream saying so (iperf 2 servers never do).
//!
//! `-R` streams ask and receive instead ([`super::reverse_client`]);
//! `--full-duplex` streams do steps 1 and 3 (one FIN, no AckFIN) while a
//! second thread receives on the same socket.

use super::clock::Mono;
use super::conn::ConnInfo;
use super::datagram::{Template, header_repr, stamp};
use super::mmsg::SendBatch;
use super::report::{self, Collected, Event, ReportSettings, ServerOutcome, Side};
use super::reverse_client::{prepare_receive, receive_stream, reverse_stream};
use super::sender::{SendOutcome, SendPlan, StreamTx, send_stream};
use super::server_report::{SentFacts, check_server_report, parse_ack_fin};
use super::{UdpError, sock};
use crate::config::{Amount, ClientConfig, DEFAULT_UDP_RATE, Direction, OutputFormat};
use crate::pacer::Pacer;
use bloatlab_metrics::json::TestInfo;
use bloatlab_metrics::udp_send::UdpSendStats;
use bloatlab_os::clock::realtime_now;
use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::ack_fin::ACK_FIN_LEN;
use bloatlab_wire::bloatlab::{ReportFrame, ReportFrameRepr};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Gap between FIN sends (iperf 2.1.8 `AwaitServerFinPacket`: select 10 ms).
pub const FIN_RETRY: Duration = Duration::from_millis(10);
/// FIN sends before giving up (2 s in all).
pub const FIN_TRIES: u32 = 200;
/// Start offset between consecutive `-P` streams (see `stream`).
pub const STREAM_STAGGER: Duration = Duration::from_millis(5);

/// Runs a UDP client test; prints per `cfg.format`; returns what was reported.
/// Fails only if no stream could even start (every stream's error is in
/// the result otherwise).
pub fn run_client(cfg: &ClientConfig) -> Result<Collected, UdpError> {
    // The client receives (and labels its receive lines `[ *1]`) in both.
    let reverse = cfg.direction != Direction::Forward;
    let addr = sock::resolve(&cfg.host, cfg.port, cfg.socket.ipv6)?;
    let rate = cfg.rate.unwrap_or(DEFAULT_UDP_RATE);
    let len = cfg.effective_len();
    // Validate the length once, before any thread starts.
    Template::new(header_repr(cfg, Duration::ZERO, rate), len)?;
    if cfg.format == OutputFormat::Console {
        print_banner(cfg, addr, len, rate);
    }
    let streams = cfg.parallel.max(1);
    let start_wall = realtime_now();
    let (sink, reporter) = report::spawn(ReportSettings {
        side: Side::Client,
        enhanced: cfg.enhanced,
        format: cfg.format,
        streams,
        reverse,
        test: test_info(cfg, rate, len, start_wall),
        out: cfg.out.clone(),
        err: cfg.err.clone(),
    })
    .map_err(|e| UdpError::Io {
        op: "thread spawn",
        source: e,
    })?;
    // Sockets first, so the shared time origin (and every stream's first
    // datagram) comes right before sending starts, not before set-up.
    let mut socks = Vec::new();
    for id in 1..=streams {
        match open_stream(cfg, addr, id, &sink) {
            Ok(sock) => socks.push((id, sock)),
            Err(e) => {
                let _ = sink.send(Event::Failed {
                    stream: id,
                    error: e.to_string(),
                });
            }
        }
    }
    // One origin for every stream so their intervals line up for [SUM],
    // set once every thread exists: thread start-up is not test time.
    let origin = Arc::new(StartGate::default());
    let tmpl = Template::new(header_repr(cfg, start_wall, rate), len)?;
    let mut handles = Vec::new();
    let mut spawn_error = None;
    for (id, sock) in socks {
        let cfg = cfg.clone();
        let sink = sink.clone();
        let origin = origin.clone();
        let tmpl = tmpl.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("udp-client-{id}"))
            .spawn(move || {
                let r = match cfg.direction {
                    Direction::Reverse => reverse_stream(&cfg, &sock, id, &tmpl, &sink),
                    Direction::FullDuplex => {
                        full_duplex_stream(&cfg, sock, id, tmpl, &origin, &sink)
                    }
                    Direction::Forward => stream(&cfg, sock, id, tmpl, &origin, &sink),
                };
                if let Err(e) = r {
                    let _ = sink.send(Event::Failed {
                        stream: id,
                        error: e.to_string(),
                    });
                }
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                spawn_error = Some(e);
                break;
            }
        }
    }
    origin.open(Mono::start());
    if let Some(e) = spawn_error {
        return Err(UdpError::Io {
            op: "thread spawn",
            source: e,
        });
    }
    drop(sink);
    for h in handles {
        let _ = h.join();
    }
    let collected = reporter.join().map_err(|_| UdpError::ThreadPanicked)?;
    // Nobody listening anywhere (ICMP port unreachable on every stream):
    // the lines and WARNINGs are printed, but the run failed.
    let refused = collected.streams.values().all(|s| s.refused) && !collected.streams.is_empty();
    if refused {
        return Err(UdpError::Refused { addr });
    }
    if collected.streams.is_empty()
        && let Some((_, first)) = collected.failures.first()
    {
        return Err(UdpError::Config(format!(
            "all {streams} stream(s) failed; first: {first}"
        )));
    }
    Ok(collected)
}

/// The client's `-b`, `-l`, `-t`/`-n` and `-i` as a send plan.
fn send_plan(cfg: &ClientConfig) -> SendPlan {
    SendPlan {
        amount: cfg.amount,
        interval: cfg.interval,
        rate: cfg.rate.unwrap_or(DEFAULT_UDP_RATE),
        len: cfg.effective_len(),
        deadline: None,
        // -R and --full-duplex receive on the socket elsewhere.
        watch_server: cfg.direction == Direction::Forward,
    }
}

/// The `--json` test description: the shared one with the rate and datagram length in
/// effect.
fn test_info(cfg: &ClientConfig, rate: BitRate, len: Bytes, start_wall: Duration) -> TestInfo {
    TestInfo {
        buffer_bytes: Some(len.0),
        target_bits_per_second: Some(rate.0),
        parallel: cfg.parallel.max(1),
        ..cfg.test_info(start_wall, format!("{}:{}", cfg.host, cfg.port))
    }
}

fn print_banner(cfg: &ClientConfig, addr: SocketAddr, len: Bytes, rate: BitRate) {
    cfg.out
        .line("------------------------------------------------------------");
    if cfg.enhanced {
        cfg.out.line(&format!(
            "Client connecting to {}, UDP port {} with pid {} ({} flows)",
            cfg.host,
            addr.port(),
            std::process::id(),
            cfg.parallel.max(1)
        ));
        if let Some(tos) = cfg.socket.tos {
            cfg.out.line(&format!("TOS set to {tos:#x}"));
        }
    } else {
        cfg.out.line(&format!(
            "Client connecting to {}, UDP port {}",
            cfg.host,
            addr.port()
        ));
    }
    let pacer = Pacer::new(rate, len, Duration::ZERO);
    match pacer.gap() {
        Some(g) => cfg.out.line(&format!(
            "Sending {} byte datagrams, IPG target: {:.2} us (exact schedule, bounded catch-up)",
            len.0,
            g.as_secs_f64() * 1e6
        )),
        None => cfg.out.line(&format!(
            "Sending {} byte datagrams, unpaced (as fast as possible)",
            len.0
        )),
    }
    cfg.out
        .line("------------------------------------------------------------");
}

/// Opens and connects one stream's socket and announces it.
fn open_stream(
    cfg: &ClientConfig,
    addr: SocketAddr,
    id: u32,
    sink: &Sender<Event>,
) -> Result<UdpSocket, UdpError> {
    let sock = sock::client_socket(addr, &cfg.socket)?;
    let local = sock.local_addr().map_err(|e| UdpError::Io {
        op: "getsockname",
        source: e,
    })?;
    let mut tags = Vec::new();
    match cfg.direction {
        Direction::Forward => {}
        Direction::Reverse => tags.push("(reverse)".to_owned()),
        Direction::FullDuplex => {
            tags.push("(full-duplex)".to_owned());
            tags.push("(no-udp-fin)".to_owned());
        }
    }
    if cfg.trip_times {
        tags.push("(trip-times)".to_owned());
    }
    let _ = sink.send(Event::Connected {
        stream: id,
        info: ConnInfo {
            local,
            peer: addr,
            tags,
        },
    });
    Ok(sock)
}

/// Holds the stream threads until the shared time origin exists.
#[derive(Debug, Default)]
struct StartGate {
    origin: Mutex<Option<Mono>>,
    opened: Condvar,
}

impl StartGate {
    fn open(&self, mono: Mono) {
        if let Ok(mut o) = self.origin.lock() {
            *o = Some(mono);
        }
        self.opened.notify_all();
    }

    fn wait(&self) -> Mono {
        let Ok(mut o) = self.origin.lock() else {
            return Mono::start();
        };
        loop {
            if let Some(m) = *o {
                return m;
            }
            o = match self.opened.wait(o) {
                Ok(o) => o,
                Err(_) => return Mono::start(),
            };
        }
    }
}

fn stream(
    cfg: &ClientConfig,
    sock: UdpSocket,
    id: u32,
    tmpl: Template,
    gate: &StartGate,
    sink: &Sender<Event>,
) -> Result<(), UdpError> {
    let (
        mut tx,
        SendOutcome {
            partial,
            total,
            server_ended,
        },
    ) = send_phase(cfg, sock, id, tmpl, gate, sink);
    let fin_start = std::time::Instant::now();
    let early = server_ended.as_deref().and_then(decode_ack);
    let ended_by_server = early.is_some();
    let (mut server, last_fin) = match early {
        // The server ended the flow at its deadline and already sent its
        // report: one FIN says we stopped (its repeated AckFIN goes unread).
        Some(outcome) => (outcome, send_one_fin(&mut tx, id)),
        None => fin_exchange(&mut tx),
    };
    if let ServerOutcome::Report { report, .. } = &server {
        // Every id we used (data and FINs) was a -l byte datagram.
        let ids = last_fin.unsigned_abs();
        let facts = SentFacts {
            ids,
            bytes: Bytes(ids.saturating_mul(tx.len.0)),
            elapsed: total.span.len() + fin_start.elapsed(),
        };
        if let Err(why) = check_server_report(report, &facts) {
            server = ServerOutcome::Impossible {
                why: why.to_string(),
            };
        }
    }
    let _ = sink.send(Event::SendFinal {
        stream: id,
        partial,
        total,
        // iperf 2.1.8 prints the id after the last FIN: 2553 data datagrams
        // and one FIN (-2554) print "Sent 2555 datagrams" (captures/08b).
        sent: last_fin.unsigned_abs() + 1,
        server,
    });
    if ended_by_server {
        // Our own -t/-n was not reached: the run did not happen as asked.
        let _ = sink.send(Event::Failed {
            stream: id,
            error: ended_by_server_message(cfg.amount, total.span.len()),
        });
    }
    Ok(())
}

/// Why a stream whose server ended it early failed.
fn ended_by_server_message(amount: Amount, sent_for: Duration) -> String {
    let asked = match amount {
        Amount::Time(d) => format!("-t {} s", d.as_secs_f64()),
        Amount::Bytes(b) => format!("-n {} bytes", b.0),
    };
    format!(
        "the server ended the test at its deadline (its --max-duration, or the test's -t, \
         plus grace) after {:.1} s of sending, before this stream's {asked}: the Server \
         Report covers only that part",
        sent_for.as_secs_f64()
    )
}

/// Sends one FIN (the next id, negated) without waiting for an answer;
/// returns its id.
fn send_one_fin(tx: &mut StreamTx, id: u32) -> i64 {
    let fin = -tx.seq;
    stamp(tx.batch.datagram_mut(0), fin, realtime_now());
    if let Err(e) = tx.batch.send(&tx.sock, 1) {
        tracing::debug!(stream = id, error = %e, "sending the FIN failed");
    }
    fin
}

/// `--full-duplex`: send as a forward stream while a second thread receives
/// the server's datagrams on the same socket, as for `-R`. Both ends send
/// one FIN and no AckFIN (NOUDPFIN), like iperf 2.1.8.
fn full_duplex_stream(
    cfg: &ClientConfig,
    sock: UdpSocket,
    id: u32,
    tmpl: Template,
    gate: &StartGate,
    sink: &Sender<Event>,
) -> Result<(), UdpError> {
    prepare_receive(cfg, &sock)?;
    let rx_sock = sock.try_clone().map_err(|e| UdpError::Io {
        op: "dup (full-duplex receiver)",
        source: e,
    })?;
    let started = realtime_now();
    let rx_cfg = cfg.clone();
    let rx_sink = sink.clone();
    let echo = tmpl.clone();
    let receiver = std::thread::Builder::new()
        .name(format!("udp-fd-recv-{id}"))
        .spawn(move || receive_stream(&rx_cfg, &rx_sock, id, &rx_sink, started, Some(&echo)))
        .map_err(|e| UdpError::Io {
            op: "thread spawn",
            source: e,
        })?;
    let (mut tx, SendOutcome { partial, total, .. }) = send_phase(cfg, sock, id, tmpl, gate, sink);
    let fin = send_one_fin(&mut tx, id);
    let _ = sink.send(Event::SendFinal {
        stream: id,
        partial,
        total,
        sent: fin.unsigned_abs() + 1,
        server: ServerOutcome::NoAckExpected,
    });
    receiver.join().map_err(|_| UdpError::ThreadPanicked)?
}

/// Paces a stream's datagrams to the end of its amount (no FIN yet).
fn send_phase(
    cfg: &ClientConfig,
    sock: UdpSocket,
    id: u32,
    tmpl: Template,
    gate: &StartGate,
    sink: &Sender<Event>,
) -> (StreamTx, SendOutcome) {
    bloatlab_os::thread::minimise_timer_slack();
    let plan = send_plan(cfg);
    // Stagger -P streams by a few ms: a 2.1.8 server hands its listening
    // socket to the first flow with connect() and opens a new one, and a
    // second flow's first datagram landing in that window is counted in
    // the wrong flow (seen here as 1 out-of-order + 1 lost).
    let stagger = STREAM_STAGGER.saturating_mul(id.saturating_sub(1).min(20));
    let batch = SendBatch::new(plan.batch_slots(), &tmpl.bytes);
    let mono = gate.wait();
    // A thread that gets the CPU late (tens of ms on a loaded machine)
    // starts its schedule when it runs, rather than bursting to catch up.
    let t0 = mono.now().max(stagger);
    let mut tx = StreamTx {
        batch,
        sock,
        stats: UdpSendStats::new(t0),
        seq: 1,
        last_sent: None,
        len: plan.len,
        meter: None,
    };
    let out = send_stream(&plan, &mut tx, mono, t0, id, sink, cfg.stop.flag());
    (tx, out)
}

/// Sends the FIN until the AckFIN arrives. Returns the outcome and the last
/// FIN id sent (negative).
fn fin_exchange(tx: &mut StreamTx) -> (ServerOutcome, i64) {
    let mut buf = vec![0u8; 65_536];
    let mut fin = -tx.seq;
    let mut refused = false;
    let _ = tx.sock.set_read_timeout(Some(FIN_RETRY));
    for tries in 1..=FIN_TRIES {
        let d = tx.batch.datagram_mut(0);
        stamp(d, fin, realtime_now());
        let _ = tx.batch.send(&tx.sock, 1);
        let deadline = std::time::Instant::now() + FIN_RETRY;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let _ = tx.sock.set_read_timeout(Some(left));
            match tx.sock.recv(&mut buf) {
                Ok(n) => {
                    if let Some(outcome) = decode_ack(&buf[..n]) {
                        return (outcome, fin);
                    }
                    // A stale client_hdr_ack or stray datagram: keep waiting.
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break;
                }
                Err(e) => {
                    // ECONNREFUSED: nobody listens. Wait out the retry gap so
                    // 200 tries still take 2 s, as in iperf 2.
                    refused |= e.kind() == io::ErrorKind::ConnectionRefused;
                    tracing::debug!(error = %e, tries, "waiting for the AckFIN");
                    std::thread::sleep(left);
                    break;
                }
            }
        }
        if tries < FIN_TRIES {
            fin -= 1;
        }
    }
    (
        ServerOutcome::NoAck {
            tries: FIN_TRIES,
            refused,
        },
        fin,
    )
}

/// An AckFIN, optionally followed by a bloatlab report frame in the same
/// datagram (see `docs/engine.md`, UDP section).
fn decode_ack(bytes: &[u8]) -> Option<ServerOutcome> {
    let report = parse_ack_fin(bytes).ok()?;
    let frame_json = bytes.get(ACK_FIN_LEN..).and_then(|rest| {
        if rest.is_empty() {
            return None;
        }
        let v = ReportFrame::new_checked(rest).ok()?;
        match ReportFrameRepr::parse(&v) {
            Ok(f) => Some(f.payload.to_owned()),
            Err(e) => {
                tracing::warn!(error = %e, "ignoring a malformed bloatlab report frame");
                None
            }
        }
    });
    Some(ServerOutcome::Report { report, frame_json })
}
