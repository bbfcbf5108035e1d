//! The TCP client: one thread per `-P` stream.

use super::duplex;
use super::handshake::{self, client_header, find_report, read_ack, read_hello};
use super::io::is_transient;
use super::recv::{self, RecvEnd, RecvPlan};
use super::report::{self, Collected, ReportSettings};
use super::send::{self, SendEnd, SendPlan};
use super::{ConnInfo, Event, Role, Sink};
use crate::config::{Amount, ClientConfig, Direction};
use crate::sock::{self, SockError};
use crate::stall::StallRule;
use crate::tcpinfo;
use bloatlab_metrics::interval::Span;
use bloatlab_metrics::json::TestInfo;
use bloatlab_os::clock::realtime_now as wall_now;
use bloatlab_units::{Bytes, CongestionControl};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Extra time a receiver waits past the test duration (iperf 2's SLOPSECS).
const SLOP: Duration = Duration::from_secs(2);
/// How long a client waits for the server to close after its shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// A transfer that moves no byte for this long has stalled: the run did
/// not happen as asked (exit 1). iperf 2 prints zero-rate intervals then;
/// so do we, until this much has passed. A sender waits longer on a path
/// whose RTO is longer (at least 3 x RFC 6298's RTO, [`crate::stall`]).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a client run failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Sock(#[from] SockError),
    #[error("all {n} stream(s) failed; first: {first}")]
    AllFailed { n: u32, first: String },
    #[error("cannot start a thread: {0}")]
    Spawn(std::io::Error),
}

/// Runs a TCP client test; prints per `cfg.format`; returns what was reported.
pub fn run(cfg: &ClientConfig) -> Result<Collected, ClientError> {
    let addr = sock::resolve(&cfg.host, cfg.port, cfg.socket.ipv6)?;
    if cfg.format == crate::config::OutputFormat::Console {
        print_banner(cfg);
    }
    let (sink, reporter) = report::spawn(ReportSettings {
        role: Role::Client,
        enhanced: cfg.enhanced,
        format: cfg.format,
        streams: cfg.parallel.max(1),
        full_duplex: cfg.direction == Direction::FullDuplex,
        test: test_info(cfg, addr),
        out: cfg.out.clone(),
        err: cfg.err.clone(),
    })
    .map_err(ClientError::Spawn)?;
    let mut handles = Vec::new();
    for id in 1..=cfg.parallel.max(1) {
        let cfg = cfg.clone();
        let tsink = sink.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tcp-client-{id}"))
            .spawn(move || {
                if let Err(e) = stream(&cfg, addr, id, &tsink) {
                    let _ = tsink.send(Event::Failed {
                        stream: id,
                        error: e.to_string(),
                    });
                }
            });
        match spawned {
            Ok(h) => handles.push(h),
            // The stream did not run: say so, the others go on.
            Err(e) => {
                let _ = sink.send(Event::Failed {
                    stream: id,
                    error: format!("cannot start the stream's thread: {e}"),
                });
            }
        }
    }
    drop(sink);
    for h in handles {
        let _ = h.join();
    }
    let collected = reporter.join().unwrap_or_default();
    if collected.connections.is_empty()
        && let Some((_, first)) = collected.failures.first()
    {
        return Err(ClientError::AllFailed {
            n: cfg.parallel.max(1),
            first: first.clone(),
        });
    }
    Ok(collected)
}

fn print_banner(cfg: &ClientConfig) {
    cfg.out
        .line("------------------------------------------------------------");
    cfg.out.line(&format!(
        "Client connecting to {}, TCP port {}",
        cfg.host, cfg.port
    ));
    if cfg.enhanced {
        cfg.out.line(&format!(
            "Write buffer size: {} Byte",
            cfg.effective_len().0
        ));
    }
    if let Some(w) = cfg.near_congestion {
        cfg.out
            .line(&format!("TCP near-congestion delay weight set to {w:.4}"));
    }
    if let Some(cc) = &cfg.socket.congestion {
        cfg.out.line(&format!("TCP congestion control set to {cc}"));
    }
    cfg.out
        .line("------------------------------------------------------------");
}

/// One stream, start to finish.
fn stream(
    cfg: &ClientConfig,
    addr: SocketAddr,
    id: u32,
    sink: &Sink,
) -> Result<(), super::stream_error::StreamError> {
    let c = sock::connect_tcp(addr, &cfg.socket, cfg.connect_timeout)?;
    let mut s = c.stream;
    let initial = tcpinfo::sample(&s).ok();
    let start_wall = wall_now();
    // A flow the server sends on gets an id: a bloatlab server keeps its
    // sender's final TCP_INFO under it for our flow query (docs/wire.md).
    let flow_id = (cfg.direction != Direction::Forward).then(super::flow_query::new_flow_id);
    let hdr = client_header(cfg, start_wall, flow_id)?;
    // Bounded unsent data on our sending socket (docs/engine.md, clean ends).
    if let Some(n) = cfg
        .notsent_lowat
        .filter(|_| cfg.direction != Direction::Reverse)
    {
        sock::set_notsent_lowat(&s, u32::try_from(n.0).unwrap_or(u32::MAX))?;
    }
    // iperf 2 sends the header on its own before any data (Client.cpp:1659).
    s.write_all(&hdr)?;
    let t0 = Instant::now();
    let mut tags = Vec::new();
    if cfg.trip_times {
        tags.push("(trip-times)".to_owned());
    }
    match cfg.direction {
        Direction::Reverse => tags.push("(reverse)".to_owned()),
        Direction::FullDuplex => tags.push("(full-duplex)".to_owned()),
        Direction::Forward => {}
    }
    if cfg.peer_detect {
        let ack = read_ack(&mut s, Instant::now() + Duration::from_secs(10))?;
        tags.push(format!("(peer {})", ack.version));
    }
    // The server sends on -R / --full-duplex: a bloatlab server first says
    // what its socket uses (extension block, HELLO); an iperf 2 server
    // cannot be asked, and its data is left in place.
    let hello = if cfg.direction == Direction::Forward {
        None
    } else {
        read_hello(&mut s, Instant::now() + Duration::from_secs(10))
    };
    if id == 1 {
        warn_unconfirmed_congestion(cfg, hello.as_ref());
    }
    // Only a server that said it keeps the flow's record is asked; an
    // iperf 2 or older bloatlab server is never sent a query.
    let query = flow_id
        .filter(|_| hello.as_ref().is_some_and(|h| h.flow_recorded))
        .map(|fid| (fid, s.local_addr().map(|a| a.ip())));
    let _ = sink.send(Event::Connected {
        stream: id,
        info: ConnInfo {
            local: s.local_addr()?,
            peer: s.peer_addr()?,
            tags,
            congestion: c.congestion,
            initial,
            connect_time: Some(c.connect_time),
            ecn: tcpinfo::ecn_negotiated(&s).ok(),
        },
    });
    if let Some(hello) = hello {
        let _ = sink.send(Event::PeerSender { stream: id, hello });
    }
    let len = cfg.effective_len().0 as usize;
    let send_plan = SendPlan {
        stream: id,
        len,
        amount: cfg.amount,
        trip_times: cfg.trip_times,
        zerocopy: cfg.socket.zerocopy,
        start_wall,
        near_congestion: cfg.near_congestion,
        rate: cfg.rate,
        tcpinfo: cfg.enhanced,
        interval: cfg.interval,
        already_sent: Bytes(hdr.len() as u64),
        // --abort-at-end: the test ends at -t even mid-write (a blocked write
        // would otherwise go on sending for up to its timeout, and its bytes
        // would count in the test).
        deadline: match cfg.amount {
            Amount::Time(d) if cfg.abort_at_end && cfg.direction == Direction::Forward => {
                Some(t0 + d)
            }
            _ => None,
        },
        // Behind a deep FIFO TCP waits on its own retransmission timer for
        // longer than 3 s: the limit follows the flow's RTO (crate::stall).
        stall: Some(StallRule::path_scaled(STALL_TIMEOUT)),
        // A server never closes or resets during a forward test unless it
        // ends it (a refusal, a cap): a paced sender that only looked at
        // its next write would notice a -b 1m refusal a second late and
        // call it a reset (issue 19). On full duplex the server's FIN is
        // its normal end of sending, so only the reader watches there.
        watch_peer_close: cfg.direction == Direction::Forward,
        meter: None,
        stop: cfg.stop.clone(),
    };
    // With --abort-at-end the receiving side stops at -t too.
    let slop = if cfg.abort_at_end {
        Duration::ZERO
    } else {
        SLOP
    };
    let recv_deadline = match cfg.amount {
        Amount::Time(d) => Some(t0 + d + slop),
        Amount::Bytes(_) => None,
    };
    // A slow -b reverse test sends one write per len*8/rate: silence that
    // long is its pace, not a stall.
    let recv_idle = cfg
        .rate
        .and_then(|r| r.transmit_time(Bytes(len as u64)))
        .map_or(STALL_TIMEOUT, |gap| {
            STALL_TIMEOUT.max(gap.saturating_mul(2))
        });
    let (trip, interval, stop) = (cfg.trip_times, cfg.interval, cfg.stop.clone());
    let rx_copy = cfg.socket.rx_copy;
    let recv_plan = move |already_read: Vec<usize>| RecvPlan {
        stream: id,
        len,
        trip_times: trip,
        rx_copy,
        interval,
        deadline: recv_deadline,
        already_read,
        keep_intervals: false,
        print_intervals: true,
        idle_timeout: Some(recv_idle),
        // Behind a bloated path the server's TCP waits on its own timer longer
        // than 3 s, as our sender's does (crate::stall).
        idle_follows_rtt: true,
        first_data_timeout: None,
        meter: None,
        min_progress: false,
        log: None,
        stop: stop.clone(),
    };
    match cfg.direction {
        Direction::Forward if cfg.abort_at_end => {
            // Clean end: an RST right at -t, no drain and no server report.
            let (mut acc, mut ticker, sent) = send::run_with_end(&s, &send_plan, t0, sink)?;
            let end = t0.elapsed();
            sock::abort(s);
            duplex::send_final(sink, id, &mut ticker, &mut acc, end);
            send_verdict(sent, end)?;
        }
        Direction::Forward => {
            let (mut acc, mut ticker, sent) = send::run_with_end(&s, &send_plan, t0, sink)?;
            // The test ends when the last write went out: the drain below
            // (waiting for the server's close and report) is not test time.
            let end = t0.elapsed();
            let _ = s.shutdown(Shutdown::Write);
            // After a stall or a reset there is nothing to wait for.
            let (drained, closed) = match sent {
                SendEnd::Stalled(_) | SendEnd::Disconnected => (Vec::new(), Drained::TimedOut),
                _ => drain(&mut s),
            };
            let sent_bytes = acc.total(Span::from_zero(end)).bytes;
            let mut impossible = None;
            if let Some(json) = find_report(&drained) {
                // The server's own numbers go into our --json only if
                // they can be true.
                match check_peer_report(&json, sent_bytes, end) {
                    Ok(()) => {
                        let _ = sink.send(Event::PeerReport { stream: id, json });
                    }
                    Err(why) => impossible = Some(why),
                }
            }
            duplex::send_final(sink, id, &mut ticker, &mut acc, end);
            if let Some(why) = impossible {
                return Err(super::stream_error::StreamError::ImpossibleReport(why));
            }
            send_verdict(sent, end)?;
            if closed == Drained::Reset {
                return Err(
                    "the server reset the connection instead of closing it after \
                     the test (it did not read everything that was sent)"
                        .into(),
                );
            }
        }
        Direction::Reverse => {
            let already = read_server_header(&mut s, cfg.trip_times)?;
            let plan = recv_plan(already);
            let (mut acc, mut ticker, _, received) = recv::run_with_end(&s, &plan, t0, sink)?;
            let end = t0.elapsed();
            duplex::send_recv_tcp_info(sink, id, &s);
            // Nothing at all, and not because the user stopped us first.
            if acc.total_bytes().0 == 0 && !cfg.stop.is_stopped() {
                return Err(REFUSED_REVERSE.into());
            }
            if cfg.abort_at_end {
                // An RST stops the server's sender; what it still had in
                // flight is discarded by our kernel, not counted.
                sock::abort(s);
            } else {
                let _ = s.shutdown(Shutdown::Write);
            }
            duplex::recv_final(sink, &plan, &mut ticker, &mut acc, end);
            query_peer_sender(cfg, addr, query, id, sink);
            recv_verdict(received, end, plan.idle_timeout)?;
        }
        Direction::FullDuplex => {
            let idle = Some(recv_idle);
            let (sent, received) = duplex::full_duplex_counted(
                &mut s,
                t0,
                sink,
                move |rs| {
                    let already = read_server_header(rs, trip).map_err(std::io::Error::other)?;
                    Ok(recv_plan(already))
                },
                |_| Ok(send_plan),
            )?;
            let end = t0.elapsed();
            if cfg.abort_at_end {
                sock::abort(s);
            }
            // Nothing at all from the server, and not because the user
            // stopped us: it refused the test, even if our own half had
            // time to write its one paced burst and end "done" (issue 19:
            // `--full-duplex -b 1m -t 1` against a refusal exited 0).
            if received.bytes.0 == 0 && !cfg.stop.is_stopped() {
                return Err(REFUSED_REVERSE.into());
            }
            query_peer_sender(cfg, addr, query, id, sink);
            send_verdict(sent, end)?;
            recv_verdict(received.end, end, idle)?;
        }
    }
    Ok(())
}

/// bloatlab extension: after a flow the server sent, ask it for its
/// sender's final TCP_INFO (flow query, docs/wire.md) and report it. A
/// failure leaves it "not measured" and says why on stderr.
fn query_peer_sender(
    cfg: &ClientConfig,
    addr: SocketAddr,
    query: Option<(u64, std::io::Result<std::net::IpAddr>)>,
    id: u32,
    sink: &Sink,
) {
    let Some((fid, Ok(local))) = query else {
        return;
    };
    match super::flow_query::query(addr, local, fid, cfg.permit_key.as_deref()) {
        Ok(summary) => {
            let _ = sink.send(Event::PeerSenderInfo {
                stream: id,
                summary,
            });
        }
        Err(e) => cfg.err.line(&format!(
            "bloatlab client: [{id:3}] the server's sender TCP_INFO is not measured: {e}"
        )),
    }
}

/// `-Z` on a test where the server sends: say so when the server did not
/// confirm it (an iperf 2 server cannot be asked; a bloatlab server's kernel
/// may lack the algorithm). Goes to `cfg.err`, so `--json` stays clean.
fn warn_unconfirmed_congestion(
    cfg: &ClientConfig,
    hello: Option<&bloatlab_metrics::json::SenderHello>,
) {
    let Some(want) = cfg
        .socket
        .congestion
        .as_ref()
        .map(CongestionControl::as_str)
    else {
        return;
    };
    if cfg.direction == Direction::Forward {
        return;
    }
    match hello.map(|h| h.congestion_control.as_deref()) {
        Some(Some(got)) if got == want => {}
        Some(got) => cfg.err.line(&format!(
            "bloatlab client: warning: -Z {want} was asked of the server, but its sender uses {}",
            got.unwrap_or("an unknown congestion control")
        )),
        None => cfg.err.line(&format!(
            "bloatlab client: warning: -Z {want} applies to this end only: the server sends on \
             this test and is not bloatlab (an iperf 2 server cannot be asked), so it uses its own \
             default congestion control"
        )),
    }
}

/// Checks a bloatlab server's BLXR report of a forward test against what
/// we sent: it cannot have received more, nor for longer than the test
/// plus the server's slop, nor non-finite numbers.
fn check_peer_report(json: &str, sent: Bytes, end: Duration) -> Result<(), String> {
    let r = bloatlab_metrics::json::ServerSideReport::from_json(json.as_bytes())
        .map_err(|e| format!("unreadable: {e}"))?;
    let s = &r.summary;
    if !(s.start_s.is_finite() && s.end_s.is_finite() && s.bits_per_second.is_finite()) {
        return Err("a time or rate that is not a number".into());
    }
    if s.bytes > sent.0 {
        return Err(format!("{} bytes received of {} sent", s.bytes, sent.0));
    }
    if s.end_s - s.start_s > (end + Duration::from_secs(15)).as_secs_f64() || s.start_s < 0.0 {
        return Err(format!("a span of {}..{} s", s.start_s, s.end_s));
    }
    Ok(())
}

/// Did the sending half run as asked? `end` is its offset from the start.
fn send_verdict(sent: SendEnd, end: Duration) -> Result<(), String> {
    match sent {
        // OutOfTime is a server's (its source's busy time).
        SendEnd::Done | SendEnd::Stopped | SendEnd::Deadline | SendEnd::OutOfTime => Ok(()),
        SendEnd::Disconnected => Err(reset_message(end)),
        SendEnd::Stalled(st) => Err(format!(
            "stalled: the server read nothing for {st} (at {:.3} s); the run did not happen as asked",
            end.as_secs_f64()
        )),
    }
}

/// Did the receiving half run as asked?
fn recv_verdict(received: RecvEnd, end: Duration, idle: Option<Duration>) -> Result<(), String> {
    match received {
        RecvEnd::Eof | RecvEnd::Stopped | RecvEnd::Deadline => Ok(()),
        RecvEnd::Reset => Err(reset_message(end)),
        RecvEnd::Idle(st) => Err(format!(
            "stalled: no data from the server for {st} (at {:.3} s); the run did not happen as asked",
            end.as_secs_f64()
        )),
        // Not set on the client (only a server waits for first data,
        // charges busy time and asks for a minimum progress).
        RecvEnd::NoData | RecvEnd::OutOfTime | RecvEnd::TooSlow => Err(format!(
            "stalled: no data from the server for {:.1} s (at {:.3} s); the run did not happen as asked",
            idle.unwrap_or(STALL_TIMEOUT).as_secs_f64(),
            end.as_secs_f64()
        )),
    }
}

/// Within this much of the start, a reset is most likely a refusal: iperf 2 and bloatlab
/// servers refuse a test by closing it unanswered right after its header (and the
/// kernel turns that close into a reset once more data arrives).
const EARLY_RESET: Duration = Duration::from_secs(1);

/// The error of a test the server reset `end` into it.
fn reset_message(end: Duration) -> String {
    if end < EARLY_RESET {
        // Said first, so that a reader (and `bloatlab test`) sees a
        // refusal, not a network fault (issue 19).
        return format!(
            "the server refused the test: it ended the connection {:.3} s in, {REFUSAL_REASONS}",
            end.as_secs_f64()
        );
    }
    format!(
        "the server reset the connection {:.3} s into the test",
        end.as_secs_f64()
    )
}

/// What can make a server refuse a test; the client cannot see which
/// (iperf 2's protocol has no refusal message), the server's log says.
const REFUSAL_REASONS: &str = "before the test's data moved (a server with --permit-key refuses a \
missing or wrong key; a bloatlab server refuses -R and --full-duplex with --no-reverse, and any \
request above its caps: --max-duration, --max-bytes, --max-streams, --max-rate, \
--max-reverse-rate, its connection limits; its log says which)";

/// A reverse or full-duplex test that ended without a byte from the server.
const REFUSED_REVERSE: &str = "the server refused the test: it closed the connection without \
sending anything (a server with --permit-key refuses a missing or wrong key; a bloatlab server \
refuses -R and --full-duplex with --no-reverse, and any request above its caps: --max-duration, \
--max-bytes, --max-streams, --max-rate, --max-reverse-rate, its connection limits; its log says \
which)";

/// On reverse/full-duplex trip-times tests the server's sender starts with
/// its own test header (README 5.6); read it and count it as received.
fn read_server_header(
    s: &mut TcpStream,
    trip_times: bool,
) -> Result<Vec<usize>, handshake::HandshakeError> {
    if !trip_times {
        return Ok(Vec::new());
    }
    let (raw, _) = handshake::read_header(s, Instant::now() + Duration::from_secs(10))?;
    Ok(vec![raw.len()])
}

/// How the drain after our shutdown ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    /// The server closed (EOF), as it does once it read everything.
    Closed,
    /// The server reset the connection.
    Reset,
    /// [`DRAIN_TIMEOUT`] passed (slow links may still be delivering).
    TimedOut,
}

/// Reads until EOF (or [`DRAIN_TIMEOUT`]), keeping up to 1 MiB + change
/// of what arrived: an unread iperf ack and/or bloatlab's report frame.
fn drain(s: &mut TcpStream) -> (Vec<u8>, Drained) {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return (kept, Drained::Closed),
            Ok(n) => {
                if kept.len() < (1 << 20) + 4096 {
                    kept.extend_from_slice(&buf[..n]);
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(e) if super::io::is_disconnect(&e) => return (kept, Drained::Reset),
            Err(_) => return (kept, Drained::Reset),
        }
    }
    (kept, Drained::TimedOut)
}

/// The `--json` test description on the client side.
fn test_info(cfg: &ClientConfig, addr: SocketAddr) -> TestInfo {
    TestInfo {
        near_congestion_weight: cfg.near_congestion,
        congestion_control: cfg.socket.congestion.as_ref().map(ToString::to_string),
        ..cfg.test_info(wall_now(), addr.to_string())
    }
}

#[cfg(test)]
mod peer_report_tests {
    use super::*;

    #[test]
    fn an_early_reset_is_called_a_refusal_and_a_late_one_is_not() {
        let early = send_verdict(SendEnd::Disconnected, Duration::from_millis(30)).unwrap_err();
        assert!(
            early.starts_with("the server refused the test: it ended the connection 0.030 s in"),
            "{early}"
        );
        assert!(early.contains("--permit-key"), "{early}");
        let late = recv_verdict(RecvEnd::Reset, Duration::from_secs(5), None).unwrap_err();
        assert_eq!(
            late,
            "the server reset the connection 5.000 s into the test"
        );
    }
    use bloatlab_metrics::json::{IntervalRecord, ServerSideReport};
    use bloatlab_metrics::tcp_recv::TcpRecvStats;

    fn report(bytes: u64, secs: f64) -> String {
        let mut acc = TcpRecvStats::new(Bytes(131_072), false);
        acc.on_read(Bytes(bytes));
        let total = acc.total(Span::from_zero(Duration::from_secs_f64(secs)));
        let r = ServerSideReport::new(1, vec![], IntervalRecord::from_tcp_recv(&total, true));
        String::from_utf8(r.to_json()).unwrap()
    }

    #[test]
    fn a_server_report_that_cannot_be_true_is_refused() {
        let end = Duration::from_secs(1);
        assert_eq!(
            check_peer_report(&report(1000, 1.0), Bytes(1000), end),
            Ok(())
        );
        let more = check_peer_report(&report(1001, 1.0), Bytes(1000), end);
        assert!(more.unwrap_err().contains("1001 bytes received of 1000"));
        assert!(check_peer_report(&report(10, 3600.0), Bytes(1000), end).is_err());
        assert!(check_peer_report("{not json", Bytes(1000), end).is_err());
    }
}
