//! How a stream's data loops end, shared by the client and the server so
//! both report and tear down a stream the same way: the final partial
//! interval and total as one event, and the full-duplex orchestration
//! (a reader thread for the receiving half, this thread sends).

use super::recv::{self, RecvEnd, RecvPlan};
use super::send::{self, SendEnd, SendPlan};
use super::stats::Ticker;
use super::{Event, Sink};
use bloatlab_metrics::interval::Span;
use bloatlab_metrics::tcp_recv::TcpRecvStats;
use bloatlab_metrics::tcp_send::TcpSendStats;
use bloatlab_units::Bytes;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// Reports a sender's last partial interval and total, both ending at
/// `end` (offset from the stream's start).
pub fn send_final(
    sink: &Sink,
    stream: u32,
    ticker: &mut Ticker,
    acc: &mut TcpSendStats,
    end: Duration,
) {
    let partial = ticker.partial(end, acc);
    let total = acc.total(Span::from_zero(end));
    let _ = sink.send(Event::SendFinal {
        stream,
        partial,
        total,
    });
}

/// Reports a receiver's last partial interval (only if `plan` prints
/// intervals) and total, both ending at `end`.
pub fn recv_final(
    sink: &Sink,
    plan: &RecvPlan,
    ticker: &mut Ticker,
    acc: &mut TcpRecvStats,
    end: Duration,
) {
    let partial = ticker.partial(end, acc);
    let total = acc.total(Span::from_zero(end));
    let _ = sink.send(Event::RecvFinal {
        stream: plan.stream,
        partial: partial.filter(|_| plan.print_intervals),
        total,
    });
}

/// Samples the receiving socket's TCP_INFO at the end of a stream (out-of-order
/// segments, CE marks received, receiver RTT) for its receive record.
pub fn send_recv_tcp_info(sink: &Sink, stream: u32, s: &TcpStream) {
    if let Ok(info) = crate::tcpinfo::sample_receiver(s) {
        let _ = sink.send(Event::RecvTcpInfo { stream, info });
    }
}

/// Runs one full-duplex stream on `s`. A reader thread gets its plan from
/// `recv_plan` (on its own clone of the socket, so it may read a header
/// first), receives and reports; meanwhile this thread gets its plan from
/// `send_plan` (which may write a header first), sends, half-closes and
/// reports, then waits for the reader. Returns how each half ended.
pub fn full_duplex(
    s: &mut TcpStream,
    t0: Instant,
    sink: &Sink,
    recv_plan: impl FnOnce(&mut TcpStream) -> io::Result<RecvPlan> + Send + 'static,
    send_plan: impl FnOnce(&mut TcpStream) -> io::Result<SendPlan>,
) -> Result<(SendEnd, RecvEnd), super::stream_error::StreamError> {
    full_duplex_counted(s, t0, sink, recv_plan, send_plan).map(|(sent, r)| (sent, r.end))
}

/// How the receiving half of a full-duplex stream ended, and what it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub end: RecvEnd,
    /// Payload bytes read (a client that got none was refused).
    pub bytes: Bytes,
}

/// [`full_duplex`], also saying how many bytes the receiving half read.
pub fn full_duplex_counted(
    s: &mut TcpStream,
    t0: Instant,
    sink: &Sink,
    recv_plan: impl FnOnce(&mut TcpStream) -> io::Result<RecvPlan> + Send + 'static,
    send_plan: impl FnOnce(&mut TcpStream) -> io::Result<SendPlan>,
) -> Result<(SendEnd, Received), super::stream_error::StreamError> {
    let mut rs = s.try_clone()?;
    let rsink = sink.clone();
    // A thread that cannot start fails this stream, never the process.
    let reader = std::thread::Builder::new()
        .name("tcp-fd-recv".into())
        .spawn(move || -> io::Result<Received> {
            let plan = recv_plan(&mut rs)?;
            let (mut acc, mut ticker, _, why) = recv::run_with_end(&rs, &plan, t0, &rsink)?;
            send_recv_tcp_info(&rsink, plan.stream, &rs);
            let bytes = acc.total_bytes();
            recv_final(&rsink, &plan, &mut ticker, &mut acc, t0.elapsed());
            Ok(Received { end: why, bytes })
        })?;
    let plan = send_plan(s)?;
    let (mut acc, mut ticker, sent) = send::run_with_end(s, &plan, t0, sink)?;
    let _ = s.shutdown(Shutdown::Write);
    send_final(sink, plan.stream, &mut ticker, &mut acc, t0.elapsed());
    let received = match reader.join() {
        Ok(r) => r?,
        Err(_) => {
            return Err(super::stream_error::StreamError::Thread(
                "receiver thread panicked",
            ));
        }
    };
    Ok((sent, received))
}
