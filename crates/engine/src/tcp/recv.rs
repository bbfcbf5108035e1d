//! The receiving data loop (server forward, client reverse, both in full-duplex).
//!
//! Every `read()` lands in Reads=Dist. With `--trip-times` the stream is a
//! sequence of bursts, each opening with a 92-byte header (iperf 2.1.8
//! `Server::RunTCP`): read exactly the header, then `burst_size - 92` bytes;
//! when a burst completes, its latency is the wall-clock time now minus the
//! header's write timestamp.

use super::io::{is_disconnect, is_transient};
use super::stats::Ticker;
use super::{Event, Sink};
use crate::clock::wall_now;
use bloatlab_metrics::tcp_recv::{TcpRecvSnapshot, TcpRecvStats};
use bloatlab_units::Bytes;
use bloatlab_wire::burst::{BURST_HEADER_LEN, TcpBurstHeader};
use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Largest burst we accept from a peer (iperf never sends more than `-l`,
/// and `-l` is capped far below this).
const MAX_BURST: u64 = 1 << 30;

/// How a receiver runs.
#[derive(Debug, Clone)]
pub struct RecvPlan {
    /// Stream id for reports.
    pub stream: u32,
    /// `-l`: read length; also sets the Reads=Dist bin width.
    pub len: usize,
    /// De-frame 92-byte burst headers and measure burst latency.
    pub trip_times: bool,
    /// `-i`.
    pub interval: Option<Duration>,
    /// Give up at this time even without EOF (reverse tests: duration + slop).
    pub deadline: Option<Instant>,
    /// Bytes already read that count in the totals (the test header), with
    /// the reads that carried them.
    pub already_read: Vec<usize>,
    /// Also return the interval snapshots (for the server's BLXR report).
    pub keep_intervals: bool,
}

/// Framing state for `--trip-times`.
#[derive(Debug)]
struct Framing {
    hdr: [u8; BURST_HEADER_LEN],
    hdr_got: usize,
    /// Header bytes read but not yet reported as part of a read.
    carry: usize,
    /// Bytes of the current burst's body still to come.
    body_left: u64,
    write_time: Duration,
    /// Set when a peer sent a nonsense burst size: stop de-framing.
    broken: bool,
}

/// Receives until EOF, a disconnect, or the deadline. Returns the
/// accumulator and ticker for the caller to finish at its end time, and
/// the interval snapshots if `keep_intervals`.
pub fn run(
    mut stream: &TcpStream,
    plan: &RecvPlan,
    t0: Instant,
    sink: &Sink,
) -> io::Result<(TcpRecvStats, Ticker, Vec<TcpRecvSnapshot>)> {
    let mut kept = Vec::new();
    let len = plan.len.max(1);
    let mut acc = TcpRecvStats::new(Bytes(len as u64), plan.trip_times);
    let mut ticker = Ticker::new(plan.interval);
    for &n in &plan.already_read {
        acc.on_read(Bytes(n as u64));
    }
    // Wake up regularly so interval reports come out on time while idle.
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = vec![0u8; len];
    let mut fr = plan.trip_times.then_some(Framing {
        hdr: [0; BURST_HEADER_LEN],
        hdr_got: 0,
        carry: 0,
        body_left: 0,
        write_time: Duration::ZERO,
        broken: false,
    });
    loop {
        let now = Instant::now();
        if ticker.due(now - t0) {
            for snap in ticker.close(now - t0, &mut acc) {
                if plan.keep_intervals {
                    kept.push(snap.clone());
                }
                let _ = sink.send(Event::RecvInterval {
                    stream: plan.stream,
                    snap,
                });
            }
        }
        if plan.deadline.is_some_and(|d| now >= d) {
            break;
        }
        let res = match fr.as_mut().filter(|f| !f.broken) {
            Some(f) if f.body_left == 0 => stream.read(&mut f.hdr[f.hdr_got..]),
            Some(f) => {
                let want = usize::try_from(f.body_left).unwrap_or(len).min(len);
                stream.read(&mut buf[..want])
            }
            None => stream.read(&mut buf),
        };
        let n = match res {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if is_transient(&e) => continue,
            Err(e) if is_disconnect(&e) => break,
            Err(e) => return Err(e),
        };
        let Some(f) = fr.as_mut().filter(|f| !f.broken) else {
            acc.on_read(Bytes(n as u64));
            continue;
        };
        if f.body_left == 0 {
            // iperf 2 reads the burst header with recvn() and reports it
            // together with the next body read as one read (capture 03:
            // 21495 bursts of 131072 B land in bin 7, not bin 0).
            f.carry += n;
            f.hdr_got += n;
            if f.hdr_got < BURST_HEADER_LEN {
                continue;
            }
            f.hdr_got = 0;
            let h = TcpBurstHeader::new_unchecked(&f.hdr[..]);
            let size = h.burst_size().0;
            if !(BURST_HEADER_LEN as u64..=MAX_BURST).contains(&size) {
                acc.on_read(Bytes(std::mem::take(&mut f.carry) as u64));
                tracing::warn!(
                    stream = plan.stream,
                    burst_size = size,
                    "trip-times burst header has an impossible burst_size; latency measurement stops"
                );
                f.broken = true;
                continue;
            }
            f.write_time = h.write_time().since_epoch();
            f.body_left = size - BURST_HEADER_LEN as u64;
            if f.body_left == 0 {
                acc.on_read(Bytes(std::mem::take(&mut f.carry) as u64));
            }
        } else {
            f.body_left -= n as u64;
            acc.on_read(Bytes((n + std::mem::take(&mut f.carry)) as u64));
        }
        if f.body_left == 0 {
            acc.on_burst_complete(f.write_time, wall_now());
        }
    }
    if let Some(f) = fr.filter(|f| f.carry > 0) {
        acc.on_read(Bytes(f.carry as u64));
    }
    Ok((acc, ticker, kept))
}
