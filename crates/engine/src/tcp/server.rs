//! The TCP server: an accept loop and one thread per connection.
//!
//! Bounded for a server strangers can reach (docs/security.md):
//! * connections are admitted by [`Admission`] (`--max-connections`,
//!   `--max-per-source`); one over a cap, or one whose thread cannot be
//!   started, is closed at once and the server goes on; when every slot is
//!   taken, a source holding fewer slots takes the oldest slot of the source
//!   holding most (its socket is shut down), so a few addresses cannot hold
//!   the table (issue 19, attack 3);
//! * tests run by one source are counted per connection (`--max-streams`),
//!   whatever `-P` each header claims;
//! * a connection that does not deliver a valid test header within
//!   `header_timeout` (silent, short, oversized, garbage) is closed, and one
//!   that sends a valid header and then no data within
//!   `first_data_timeout` too (not the much longer idle timeout);
//! * a header asking for more than [`ServerLimits`] allow is refused the way
//!   iperf 2 refuses (the connection is closed, no ack, no data);
//! * every phase ends after `idle_timeout` without a byte moving, and every
//!   test, `-n` included, at its `-t` (or `--max-duration`) plus slop;
//! * each of these gets one stderr line, rate-limited ([`SharedLogLimit`]).

use super::duplex;
use super::flow_query::{self, FlowGuard, SharedFlowTable};
use super::group::Groups;
use super::handshake::{self, TestRequest, read_first, read_header_rest, request_of, send_ack};
use super::io::is_transient;
use super::recv::{self, RecvEnd, RecvPlan};
use super::report::{self, ReportSettings};
use super::send::{self, SendEnd, SendPlan};
use super::{ConnInfo, Event, Role, Sink};
use crate::config::{Amount, DEFAULT_TCP_LEN, Direction, ServerConfig};
use crate::flow_table::{FlowTable, FlowTableLimits};
use crate::limits::{Admission, Ask, Progress, Refusal, ServerLimits, Slot};
use crate::loglimit::SharedLogLimit;
use crate::meter::Meter;
use crate::rate_budget::SharedBudget;
use crate::sock::{self, SockError};
use crate::stall::StallRule;
use crate::tcpinfo;
use crate::time_budget::{SOURCE_TIME_WINDOW, SharedTimeBudget};
use bloatlab_metrics::interval::Span;
use bloatlab_metrics::json::{CpuRecord, IntervalRecord, SenderHello, ServerSideReport, TestInfo};
use bloatlab_metrics::tcp_recv::TcpRecvSnapshot;
use bloatlab_os::StopToken;
use bloatlab_os::clock::realtime_now as wall_now;
use bloatlab_os::process::{CpuScope, CpuTime, cpu_time};
use bloatlab_units::Bytes;
use bloatlab_wire::BlabBlockFlags;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Extra time past the requested duration before a receiver gives up.
const SLOP: Duration = Duration::from_secs(10);

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Sock(#[from] SockError),
    #[error("accept: {0}")]
    Accept(std::io::Error),
}

/// Binds the listener (so callers can learn the port before serving).
pub fn bind(cfg: &ServerConfig) -> Result<TcpListener, ServerError> {
    Ok(sock::listen_tcp(cfg.port, &cfg.socket)?)
}

/// Listens and serves until killed (or after one test with `one_off`).
pub fn run(cfg: &ServerConfig) -> Result<(), ServerError> {
    let listener = bind(cfg)?;
    serve(cfg, listener)
}

/// Shared bookkeeping for `--one-off`.
#[derive(Debug, Default)]
struct OneOff {
    expected: AtomicU32,
    finished: AtomicU32,
    done: AtomicBool,
}

/// Serves on an already bound listener.
pub fn serve(cfg: &ServerConfig, listener: TcpListener) -> Result<(), ServerError> {
    if cfg.format == crate::config::OutputFormat::Console {
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(cfg.port);
        cfg.out
            .line("------------------------------------------------------------");
        cfg.out
            .line(&format!("Server listening on TCP port {port}"));
        let len = cfg.effective_len().0;
        if cfg.enhanced {
            cfg.out.line(&format!(
                "Read buffer size: {} (Dist bin width={})",
                bloatlab_metrics::cfmt::byte_snprintf(
                    len as f64,
                    bloatlab_metrics::cfmt::ByteFormat::AdaptiveBytes
                ),
                bloatlab_metrics::cfmt::byte_snprintf(
                    (len / 8) as f64,
                    bloatlab_metrics::cfmt::ByteFormat::AdaptiveBytes
                )
            ));
        }
        cfg.out
            .line("------------------------------------------------------------");
    } else {
        // stdout carries only CSV/JSON; say we are ready on stderr.
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(cfg.port);
        cfg.err
            .line(&format!("Server listening on TCP port {port}"));
    }
    listener
        .set_nonblocking(true)
        .map_err(ServerError::Accept)?;
    let one = Arc::new(OneOff::default());
    let groups = Arc::new(Groups::default());
    let log = Arc::new(SharedLogLimit::new(cfg.err.clone()));
    let admission = Admission::new(
        cfg.max_connections,
        cfg.max_per_source,
        cfg.limits.max_streams as usize,
    );
    // Finished flows' sender TCP_INFO, for bloatlab clients' flow queries.
    let flows: SharedFlowTable = Arc::new(Mutex::new(FlowTable::new(FlowTableLimits::default())));
    let next_id = AtomicU32::new(1);
    // --max-rate / --max-reverse-rate: one budget per source and one for
    // all receivers / senders; --max-source-time: busy time per source.
    let budget = Budgets {
        receive: cfg
            .limits
            .receive_budget()
            .map(|(p, t)| SharedBudget::new(p, t)),
        send: cfg
            .limits
            .send_budget()
            .map(|(p, t)| SharedBudget::new(p, t)),
        time: SharedTimeBudget::new(cfg.limits.max_source_time),
    };
    let mut workers = Vec::new();
    loop {
        if cfg.one_off && one.done.load(Ordering::SeqCst) {
            break;
        }
        match listener.accept() {
            Ok((s, peer)) => {
                workers.retain(|h: &std::thread::JoinHandle<()>| !h.is_finished());
                // Over a cap: close at once (the peer sees its connection
                // end without an ack, as with any iperf 2 refusal).
                // An evicted connection's socket is shut down: its thread's
                // next read or write fails and it ends (and frees nothing
                // twice: its place was given back at the eviction).
                let closer = s.try_clone().ok();
                let evict = move || {
                    if let Some(c) = closer {
                        let _ = c.shutdown(Shutdown::Both);
                    }
                };
                let slot = match admission.admit(Instant::now(), peer.ip(), evict) {
                    Ok(slot) => slot,
                    Err(r) => {
                        log.eprint(|| format!("bloatlab server: refusing {peer}: {r}"));
                        continue;
                    }
                };
                let id = next_id.fetch_add(1, Ordering::SeqCst);
                let cfg = cfg.clone();
                let one = Arc::clone(&one);
                let groups = Arc::clone(&groups);
                let clog = Arc::clone(&log);
                let flows = Arc::clone(&flows);
                let budget = budget.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("tcp-conn-{id}"))
                    .spawn(move || {
                        let mut slot = slot;
                        let shared = Shared {
                            groups: &groups,
                            flows: &flows,
                            budget: &budget,
                        };
                        connection(&cfg, &shared, s, peer, id, &one, &clog, &mut slot);
                    });
                match spawned {
                    Ok(h) => workers.push(h),
                    // Out of threads (a task limit): this connection is
                    // refused (the closure, socket and slot are dropped).
                    Err(e) => log.eprint(|| {
                        format!("bloatlab server: refusing {peer}: cannot start a thread: {e}")
                    }),
                }
            }
            Err(e) if is_transient(&e) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                // EMFILE and friends: log and keep going, like iperf -s.
                tracing::warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    for h in workers {
        let _ = h.join();
    }
    Ok(())
}

/// What every connection thread shares.
struct Shared<'a> {
    groups: &'a Groups,
    flows: &'a SharedFlowTable,
    /// `--max-rate`, `--max-reverse-rate` as budgets.
    budget: &'a Budgets,
}

/// `--max-rate` and `--max-reverse-rate` as budgets (per source and global),
/// and `--max-source-time`.
#[derive(Debug, Clone)]
struct Budgets {
    receive: Option<SharedBudget>,
    send: Option<SharedBudget>,
    time: Option<SharedTimeBudget>,
}

impl Budgets {
    /// The charges of one connection from `peer`, for one direction.
    fn meter(&self, rate: Option<&SharedBudget>, peer: IpAddr, progress: &Progress) -> Meter {
        Meter {
            peer,
            rate: rate.cloned(),
            time: self.time.clone(),
            progress: Some(progress.clone()),
        }
    }
}

/// What a TCP test header asks for, in the caps' terms (the handshake
/// proved the peer receives at its address).
fn ask_of(req: &TestRequest, announced_streams: u32) -> Ask {
    Ask {
        amount: req.amount,
        streams: announced_streams,
        rate: req.rate,
        server_sends: req.direction != Direction::Forward,
        client_sends: req.direction != Direction::Reverse,
        verified: true,
    }
}

// One argument per thing a connection needs; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn connection(
    cfg: &ServerConfig,
    shared: &Shared<'_>,
    mut s: TcpStream,
    peer: SocketAddr,
    id: u32,
    one: &OneOff,
    log: &Arc<SharedLogLimit>,
    slot: &mut Slot,
) {
    let flows = shared.flows;
    let accepted_wall = wall_now();
    if let Err(e) = s.set_nonblocking(false) {
        tracing::warn!("{peer}: {e}");
        return;
    }
    let deadline = Instant::now() + cfg.header_timeout;
    let first = match read_first(&mut s, deadline) {
        Ok(x) => x,
        Err(e) => {
            log.eprint(|| format!("bloatlab server: dropping connection from {peer}: {e}"));
            return;
        }
    };
    // A bloatlab client's flow query (docs/wire.md): answer it and close.
    if first[..] == bloatlab_wire::flow_query::QUERY_MAGIC.to_be_bytes() {
        let key = cfg.permit_key.as_deref();
        match flow_query::answer(&mut s, first, peer.ip(), flows, key, deadline) {
            Ok(bloatlab_wire::FlowStatus::Refused) => log.eprint(|| {
                format!("bloatlab server: [drop] flow query from {peer} (permit key fail)")
            }),
            Ok(_) => {}
            Err(e) => log.eprint(|| format!("bloatlab server: flow query from {peer}: {e}")),
        }
        return;
    }
    let (raw, hdr) = match read_header_rest(&mut s, first, deadline) {
        Ok(x) => x,
        Err(e) => {
            log.eprint(|| format!("bloatlab server: dropping connection from {peer}: {e}"));
            return;
        }
    };
    // iperf 2's refusal: one line, then close without an ack (Listener.cpp).
    if let Err(why) = handshake::check_permit_key(&raw, cfg.permit_key.as_deref()) {
        log.eprint(|| format!("bloatlab server: [drop] connection from {peer} ({why})"));
        return;
    }
    let req = request_of(raw.len(), &hdr, Some(&raw));
    if cfg.no_reverse && req.direction != Direction::Forward {
        log.eprint(|| {
            format!(
                "bloatlab server: refusing a {} test from {peer} (--no-reverse)",
                if req.direction == Direction::Reverse {
                    "reverse (-R)"
                } else {
                    "full-duplex"
                }
            )
        });
        return;
    }
    if let Err(r) = cfg.limits.check(&ask_of(&req, hdr.core.num_threads)) {
        log.eprint(|| format!("bloatlab server: refusing a test from {peer}: it {r}"));
        return;
    }
    // --max-streams counts connections per source, not the -P a header claims.
    if let Err(r) = slot.start_test() {
        log.eprint(|| format!("bloatlab server: refusing a test from {peer}: {r}"));
        return;
    }
    // --max-source-time: a source whose busy time is spent starts nothing.
    if let Some(t) = &shared.budget.time
        && !t.has_time(wall_now(), peer.ip())
    {
        let r = Refusal::SourceTime {
            cap: cfg.limits.max_source_time,
            window: SOURCE_TIME_WINDOW,
        };
        log.eprint(|| format!("bloatlab server: refusing a test from {peer}: {r}"));
        return;
    }
    let progress = slot.progress();
    if cfg.one_off {
        let _ = one
            .expected
            .compare_exchange(0, req.parallel, Ordering::SeqCst, Ordering::SeqCst);
    }
    // A bloatlab client names a flow the server sends on: keep its sender's
    // final TCP_INFO for the client's query (every exit path; FlowGuard).
    let mut flow = req
        .sender
        .flow_id
        .filter(|_| req.bloatlab && req.direction != Direction::Forward)
        .and_then(|fid| FlowGuard::start(flows, fid, peer.ip(), &s));
    if let Err(e) = test(
        cfg,
        shared,
        &mut s,
        (peer, &progress),
        id,
        &req,
        accepted_wall,
        log,
        &mut flow,
    ) {
        log.eprint(|| format!("bloatlab server: connection from {peer}: {e}"));
    }
    if cfg.one_off {
        let n = one.finished.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= one.expected.load(Ordering::SeqCst) {
            one.done.store(true, Ordering::SeqCst);
        }
    }
}

// One argument per thing a test needs; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn test(
    cfg: &ServerConfig,
    shared: &Shared<'_>,
    s: &mut TcpStream,
    (peer, progress): (SocketAddr, &Progress),
    id: u32,
    req: &TestRequest,
    accepted_wall: Duration,
    log: &Arc<SharedLogLimit>,
    flow: &mut Option<FlowGuard>,
) -> Result<(), super::stream_error::StreamError> {
    // No phase may block longer than the idle timeout (a peer with a
    // zero window cannot hold the ack write forever).
    s.set_write_timeout(Some(cfg.idle_timeout.max(Duration::from_millis(1))))?;
    if req.wants_ack {
        send_ack(s, req, accepted_wall)?;
    }
    if req.tos != 0 && cfg.socket.tos.is_none() {
        let sref = socket2::SockRef::from(&*s);
        let _ = if peer.is_ipv6() {
            sref.set_tclass_v6(u32::from(req.tos))
        } else {
            sref.set_tos_v4(u32::from(req.tos))
        };
    }
    if req.direction != Direction::Forward {
        prepare_sender(s, peer, req, flow.is_some(), log)?;
    }
    let test = test_info(req, peer, s.local_addr().ok());
    let member = shared
        .groups
        .join(peer.ip(), req.parallel, Instant::now(), |streams| {
            report::spawn(ReportSettings {
                role: Role::Server,
                enhanced: cfg.enhanced,
                format: cfg.format,
                streams,
                full_duplex: req.direction == Direction::FullDuplex,
                test,
                out: cfg.out.clone(),
                err: cfg.err.clone(),
            })
        })?;
    let sink = member.sink.clone();
    let mut tags = Vec::new();
    if req.trip_times {
        tags.push("(trip-times)".to_owned());
    }
    match req.direction {
        Direction::Reverse => tags.push("(reverse)".to_owned()),
        Direction::FullDuplex => tags.push("(full-duplex)".to_owned()),
        Direction::Forward => {}
    }
    tags.push(format!("(peer {})", req.peer_version));
    let _ = sink.send(Event::Connected {
        stream: id,
        info: ConnInfo {
            local: s.local_addr()?,
            peer,
            tags,
            congestion: sock::congestion_in_effect(&socket2::SockRef::from(&*s)),
            initial: tcpinfo::sample(&*s).ok(),
            connect_time: None,
            ecn: tcpinfo::ecn_negotiated(&*s).ok(),
        },
    });
    let t0 = Instant::now();
    let conn = Conn {
        progress,
        budgets: shared.budget,
        log,
    };
    let result = run_directions(cfg, s, id, req, t0, &sink, flow, &conn);
    drop(sink);
    member.finish();
    let (sent, received) = result?;
    if received == Some(RecvEnd::NoData) {
        log.eprint(|| {
            format!(
                "bloatlab server: {peer} sent a test header and then no data for {:?} (--first-data-timeout); test ended",
                cfg.first_data_timeout
            )
        });
    }
    if matches!(sent, Some(SendEnd::Stalled(_))) || matches!(received, Some(RecvEnd::Idle(_))) {
        log.eprint(|| {
            format!(
                "bloatlab server: {peer} moved no byte for {:?} (--idle-timeout); test ended",
                cfg.idle_timeout
            )
        });
    }
    if received == Some(RecvEnd::TooSlow) {
        log.eprint(|| {
            format!(
                "bloatlab server: {peer} delivered less than {} B/s on average after its first \
                 byte (minimum progress); test ended",
                crate::meter::MIN_PROGRESS_RATE
            )
        });
    }
    if sent == Some(SendEnd::OutOfTime) || received == Some(RecvEnd::OutOfTime) {
        log.eprint(|| {
            format!(
                "bloatlab server: {peer}'s source used its test time (--max-source-time {:?} per {:?}); test ended",
                cfg.limits.max_source_time, SOURCE_TIME_WINDOW
            )
        });
    }
    if sent == Some(SendEnd::Deadline) || received == Some(RecvEnd::Deadline) {
        log.eprint(|| {
            format!("bloatlab server: {peer}'s test reached its deadline (-t or --max-duration, plus slop); ended")
        });
    }
    Ok(())
}

/// How the directions of a test ended (`None`: that direction did not run).
type Ends = (Option<SendEnd>, Option<RecvEnd>);

/// What the data loops of one connection charge and log to.
struct Conn<'a> {
    progress: &'a Progress,
    budgets: &'a Budgets,
    log: &'a Arc<SharedLogLimit>,
}

// One argument per thing the directions need; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn run_directions(
    cfg: &ServerConfig,
    s: &mut TcpStream,
    id: u32,
    req: &TestRequest,
    t0: Instant,
    sink: &Sink,
    flow: &mut Option<FlowGuard>,
    conn: &Conn<'_>,
) -> Result<Ends, super::stream_error::StreamError> {
    let budgets = conn.budgets;
    let peer = s.peer_addr().ok().map(|p| p.ip());
    let read_len = cfg.effective_len().0 as usize;
    let write_len = req.buffer_len.unwrap_or(DEFAULT_TCP_LEN).0 as usize;
    // Every test ends: -t plus slop, and -n tests at --max-duration.
    let limits: &ServerLimits = &cfg.limits;
    let test_end = t0 + limits.deadline(req.amount);
    let deadline = Some(test_end + SLOP);
    let recv_plan = RecvPlan {
        stream: id,
        len: read_len,
        trip_times: req.trip_times,
        rx_copy: cfg.socket.rx_copy,
        // Our own -i wins; else a bloatlab client's -i (BLAB extension),
        // measured for the BLXR report only, not printed.
        interval: cfg
            .interval
            .or(req.report_interval.filter(|_| req.bloatlab)),
        deadline,
        already_read: if req.direction != Direction::Reverse {
            vec![req.header_len]
        } else {
            Vec::new()
        },
        keep_intervals: req.bloatlab,
        print_intervals: cfg.interval.is_some(),
        idle_timeout: Some(cfg.idle_timeout),
        // The idle limit bounds how long a peer holds a slot: fixed.
        idle_follows_rtt: false,
        // A valid header then silence (issue 19, attack 3) holds a slot
        // only this long, not the idle timeout.
        first_data_timeout: Some(cfg.first_data_timeout),
        meter: peer.map(|p| budgets.meter(budgets.receive.as_ref(), p, conn.progress)),
        // A trickle after the first byte must not hold a slot (issue 19).
        min_progress: true,
        log: Some(Arc::clone(conn.log)),
        // A server's tests end by their peer and its limits, not by a stop request.
        stop: StopToken::new(),
    };
    let start_wall = wall_now();
    let send_plan = |already: usize| SendPlan {
        stream: id,
        len: write_len,
        amount: req.amount,
        trip_times: req.trip_times,
        zerocopy: cfg.socket.zerocopy,
        start_wall,
        near_congestion: None,
        rate: req.rate,
        tcpinfo: cfg.enhanced,
        interval: cfg.interval,
        already_sent: Bytes(already as u64),
        deadline: Some(test_end),
        // The idle limit bounds how long a peer holds a slot: fixed.
        stall: Some(StallRule::fixed(cfg.idle_timeout)),
        // A reverse client sends nothing after its header: a close is its exit.
        watch_peer_close: req.direction == Direction::Reverse,
        meter: peer.map(|p| budgets.meter(budgets.send.as_ref(), p, conn.progress)),
        stop: StopToken::new(),
    };
    // Reverse senders with trip-times announce themselves with their own header.
    let own_header = |s: &mut TcpStream| -> std::io::Result<usize> {
        if !req.trip_times {
            return Ok(0);
        }
        let h = handshake::server_reverse_header(req.amount, start_wall);
        s.write_all(&h)?;
        Ok(h.len())
    };
    match req.direction {
        Direction::Forward => {
            // The process's CPU time from here to the report (issue 24).
            let cpu0 = cpu_time(CpuScope::Process).ok();
            let (mut acc, mut ticker, mut kept, why) = recv::run_with_end(s, &recv_plan, t0, sink)?;
            let end = t0.elapsed();
            let partial = ticker.partial(end, &mut acc);
            let total = acc.total(Span::from_zero(end));
            if req.bloatlab {
                kept.extend(partial.clone());
                send_report(s, id, &kept, &total, cpu0);
            }
            let _ = sink.send(Event::RecvFinal {
                stream: id,
                partial: partial.filter(|_| recv_plan.print_intervals),
                total,
            });
            Ok((None, Some(why)))
        }
        Direction::Reverse => {
            let sent = own_header(s)?;
            let (mut acc, mut ticker, why) = send::run_with_end(s, &send_plan(sent), t0, sink)?;
            // The sender is done: its TCP_INFO now, before the drain.
            if let Some(f) = flow.as_mut() {
                f.finish();
            }
            let _ = s.shutdown(Shutdown::Write);
            let end = t0.elapsed();
            drain(s);
            duplex::send_final(sink, id, &mut ticker, &mut acc, end);
            Ok((Some(why), None))
        }
        Direction::FullDuplex => {
            let (sent, received) = duplex::full_duplex(
                s,
                t0,
                sink,
                move |_| Ok(recv_plan),
                |s| {
                    let sent = own_header(s)?;
                    Ok(send_plan(sent))
                },
            )?;
            Ok((Some(sent), Some(received)))
        }
    }
}

/// bloatlab extension (docs/wire.md, extension block): before this end sends
/// on a reverse or full-duplex test, apply the congestion control and
/// TCP_NOTSENT_LOWAT a bloatlab client asked for to our sending socket, and,
/// when asked, tell it in a hello frame what the socket really uses (read
/// back with `getsockopt`). A name this kernel refuses is logged and the
/// socket keeps its congestion control; the hello shows which.
fn prepare_sender(
    s: &mut TcpStream,
    peer: SocketAddr,
    req: &TestRequest,
    flow_recorded: bool,
    log: &SharedLogLimit,
) -> Result<(), handshake::HandshakeError> {
    let want = &req.sender;
    // The peer chooses these: their lines go through the log budget.
    if let Some(cc) = &want.congestion
        && let Err(e) = sock::set_congestion(s, cc)
    {
        log.eprint(|| format!("bloatlab server: {peer} asked for congestion control {cc}: {e}"));
    }
    if let Some(n) = want.notsent_lowat
        && let Err(e) = sock::set_notsent_lowat(&*s, n)
    {
        log.eprint(|| format!("bloatlab server: {peer}: {e}"));
    }
    if want.flags.contains(BlabBlockFlags::HELLO) {
        let mut hello = SenderHello::new(
            sock::congestion_in_effect(&socket2::SockRef::from(&*s)),
            sock::notsent_lowat(&*s).map(u64::from),
        );
        hello.flow_recorded = flow_recorded;
        handshake::send_hello(s, &hello)?;
    }
    Ok(())
}

/// bloatlab extension: after the client's shutdown, send the server-side
/// measurements of the test (METRICS' `ServerSideReport`) as one BLXR
/// frame, then close. A client that is gone by then just misses it.
/// `cpu0` is the process's CPU time when the stream started: the report
/// carries what the whole server process used since (issue 24; iperf 2's
/// protocol has no such field, so only a bloatlab client learns it).
fn send_report(
    s: &mut TcpStream,
    id: u32,
    intervals: &[TcpRecvSnapshot],
    total: &TcpRecvSnapshot,
    cpu0: Option<CpuTime>,
) {
    let cpu = cpu0.zip(cpu_time(CpuScope::Process).ok()).map(|(c0, c1)| {
        let used = c1.since(c0);
        CpuRecord::new(used.user, used.system, total.bytes.0)
    });
    let rep = ServerSideReport::new(
        id,
        intervals
            .iter()
            .map(|x| IntervalRecord::from_tcp_recv(x, false))
            .collect(),
        IntervalRecord::from_tcp_recv(total, true),
    )
    .with_cpu(cpu);
    let payload = String::from_utf8(rep.to_json()).unwrap_or_default();
    match handshake::report_frame(&payload) {
        Ok(frame) => {
            let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
            if let Err(e) = s.write_all(&frame) {
                tracing::debug!("report frame not delivered: {e}");
            }
        }
        Err(e) => tracing::warn!("report frame: {e}"),
    }
}

/// Waits (briefly) for the client to close after a reverse test.
fn drain(s: &mut TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let until = Instant::now() + Duration::from_secs(3);
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if is_transient(&e) => {}
            Err(_) => break,
        }
    }
}

/// The `--json` test description on the server side.
fn test_info(req: &TestRequest, peer: SocketAddr, local: Option<SocketAddr>) -> TestInfo {
    TestInfo {
        start_unix_us: req.start.map(|w| w.as_micros() as u64),
        clock: Some("realtime".into()),
        duration_s: match req.amount {
            Amount::Time(d) => Some(d.as_secs_f64()),
            Amount::Bytes(_) => None,
        },
        amount_bytes: match req.amount {
            Amount::Bytes(b) => Some(b.0),
            Amount::Time(_) => None,
        },
        buffer_bytes: req.buffer_len.map(|b| b.0),
        parallel: req.parallel,
        trip_times: req.trip_times,
        reverse: req.direction == Direction::Reverse,
        full_duplex: req.direction == Direction::FullDuplex,
        local: local.map(|a| a.to_string()),
        remote: Some(peer.to_string()),
        peer_version: Some(req.peer_version.to_string()),
        ..TestInfo::default()
    }
}
