//! The UDP server's socket loop: the thin driver around [`super::server::ServerCore`]
//! (receive batches, hand each datagram to the core, send what it answers, start the
//! reverse senders it asks for, print what the reporter finished).

use super::mmsg::{self, RecvBatch};
use super::report::{ReportSettings, Reporter, Side};
use super::reverse_server::ReverseSenders;
use super::server::{Datagram, MAX_WAIT, Outgoing, ServerCore};
use super::{UdpError, json, sock};
use crate::config::{OutputFormat, ServerConfig};
use bloatlab_metrics::json::TestInfo;
use bloatlab_os::clock::realtime_now;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs the UDP server until the process ends (or after one test with `-1`).
pub fn run_server(cfg: &ServerConfig) -> Result<(), UdpError> {
    run_server_until(cfg, &AtomicBool::new(false))
}

/// Runs the UDP server until `stop` is set (checked at least every 100 ms),
/// or after one finished test when `cfg.one_off`.
pub fn run_server_until(cfg: &ServerConfig, stop: &AtomicBool) -> Result<(), UdpError> {
    let sock = sock::server_socket(cfg.port, &cfg.socket)?;
    let local = sock.local_addr().map_err(|e| UdpError::Io {
        op: "getsockname",
        source: e,
    })?;
    let _ = mmsg::enable_pktinfo(&sock, local.is_ipv6());
    if cfg.format == OutputFormat::Console {
        print_banner(cfg, local);
    }
    let mut reporter = Reporter::new(ReportSettings {
        side: Side::Server,
        enhanced: cfg.enhanced,
        format: cfg.format,
        streams: 1,
        reverse: false,
        test: TestInfo {
            clock: Some("realtime".into()),
            interval_s: cfg.interval.map(|d| d.as_secs_f64()),
            ..TestInfo::default()
        },
        out: cfg.out.clone(),
        err: cfg.err.clone(),
    });
    let mut core = ServerCore::new(
        cfg,
        local.port(),
        cfg.header_timeout.max(Duration::from_secs(1)),
    );
    // Headers live in the first 160 bytes; MSG_TRUNC still reports the real
    // length, so small buffers keep a 64-datagram batch in cache.
    let mut rb = RecvBatch::new(64, 512);
    let mut senders = ReverseSenders::new(cfg.interval, &cfg.limits, core.time_budget());
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        loop {
            match rb.recv(&sock) {
                Ok(n) => {
                    for i in 0..n {
                        let Some(r) = rb.get(i) else { continue };
                        let Some(from) = r.from else { continue };
                        let d = Datagram {
                            from,
                            to: r.local,
                            data: r.data,
                            wire_len: r.wire_len,
                            rx: r.kernel_rx.unwrap_or_else(realtime_now),
                        };
                        if let Some(out) = core.on_datagram(&d) {
                            send(&sock, &out, &mut core);
                        }
                    }
                    senders.start(&sock, &mut core);
                    flush(&mut core, &mut reporter, cfg.format);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Unconnected UDP sockets only see transient errors here
                    // (ICMP errors a peer can provoke: within the log budget).
                    core.warn(realtime_now(), || format!("UDP receive failed: {e}"));
                    break;
                }
            }
        }
        let now = realtime_now();
        core.on_timer(now);
        for out in core.take_outgoing() {
            send(&sock, &out, &mut core);
        }
        flush(&mut core, &mut reporter, cfg.format);
        senders.report(&mut reporter, cfg.format);
        if cfg.one_off
            && core.finished_flows() > 0
            && core.active_flows() == 0
            && senders.all_done()
        {
            break;
        }
        let wait = core
            .next_deadline()
            .map_or(MAX_WAIT, |d| d.saturating_sub(now))
            .min(MAX_WAIT);
        if !wait.is_zero() {
            mmsg::wait_readable(sock.as_raw_fd(), wait).map_err(|e| UdpError::Io {
                op: "poll",
                source: e,
            })?;
        }
    }
    senders.stop(&mut reporter, cfg.format);
    reporter.end_open_groups();
    print_finished(&mut reporter, cfg.format);
    Ok(())
}

fn send(sock: &std::net::UdpSocket, out: &Outgoing, core: &mut ServerCore) {
    if let Err(e) = sock.send_to(&out.bytes, out.to) {
        core.warn(realtime_now(), || {
            format!("sending a reply to {} failed: {e}", out.to)
        });
    }
}

/// Forwards the core's events to the reporter; prints a test's JSON
/// document when it finishes (a flow, or every flow of a `-P N` client).
fn flush(core: &mut ServerCore, reporter: &mut Reporter, format: OutputFormat) {
    for ev in core.take_events() {
        reporter.handle(ev);
        print_finished(reporter, format);
    }
}

/// Prints the `--json` documents of the tests that ended.
fn print_finished(reporter: &mut Reporter, format: OutputFormat) {
    for t in reporter.take_finished() {
        if format == OutputFormat::Json
            && let Some(doc) = json::server_test_document(&t, &reporter.settings().test)
        {
            reporter.settings().out.line(&doc.to_json_pretty());
        }
    }
}

fn print_banner(cfg: &ServerConfig, local: SocketAddr) {
    cfg.out
        .line("------------------------------------------------------------");
    if cfg.enhanced {
        cfg.out.line(&format!(
            "Server listening on UDP port {} with pid {}",
            local.port(),
            std::process::id()
        ));
    } else {
        cfg.out
            .line(&format!("Server listening on UDP port {}", local.port()));
    }
    cfg.out
        .line("------------------------------------------------------------");
}
