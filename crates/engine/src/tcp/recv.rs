//! The receiving data loop (server forward, client reverse, both in full-duplex).
//!
//! Every logical read (up to `-l` bytes, taken in small pieces: see
//! [`super::pieces`]) lands in Reads=Dist. With `--trip-times` the stream is a
//! sequence of bursts, each opening with a 92-byte header (iperf 2.1.8
//! `Server::RunTCP`): read exactly the header, then `burst_size - 92` bytes;
//! when a burst completes, its latency is the wall-clock time now minus the
//! header's write timestamp.

use super::io::{is_disconnect, is_transient};
use super::pieces::{Consumer, CopyAll, PieceReader, READ_PIECE, SkipAll};
use super::stats::Ticker;
use super::{Event, Sink};
use crate::loglimit::SharedLogLimit;
use crate::meter::{Meter, MinProgress};
use crate::stall::{Stall, StallRule, StallWatch};
use crate::tcpinfo;
use bloatlab_metrics::tcp_recv::{TcpRecvSnapshot, TcpRecvStats};
use bloatlab_os::StopToken;
use bloatlab_os::clock::realtime_now as wall_now;
use bloatlab_units::Bytes;
use bloatlab_wire::burst::{BURST_HEADER_LEN, TcpBurstHeader};
use std::io;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest burst we accept from a peer (iperf never sends more than `-l`,
/// and `-l` is capped far below this).
const MAX_BURST: u64 = 1 << 30;
/// How often a receiver whose idle limit follows the path reads its RTT estimate.
const RTT_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// How a receiver runs.
#[derive(Debug, Clone)]
pub struct RecvPlan {
    /// Stream id for reports.
    pub stream: u32,
    /// `-l`: read length; also sets the Reads=Dist bin width.
    pub len: usize,
    /// De-frame 92-byte burst headers and measure burst latency.
    pub trip_times: bool,
    /// Copy every received byte into our buffer (`--rx-copy`). Off (the
    /// default), bytes nobody parses are dropped in the kernel with
    /// `MSG_TRUNC` and only trip-times burst headers are copied
    /// ([`super::pieces`]).
    pub rx_copy: bool,
    /// `-i`.
    pub interval: Option<Duration>,
    /// Give up at this time even without EOF (reverse tests: duration + slop).
    pub deadline: Option<Instant>,
    /// Bytes already read that count in the totals (the test header), with
    /// the reads that carried them.
    pub already_read: Vec<usize>,
    /// Also return the interval snapshots (for the server's BLXR report).
    pub keep_intervals: bool,
    /// Send interval snapshots to the reporter (printed). `false` when the
    /// intervals are only measured for the BLXR report (a client's `-i`
    /// on a server without its own `-i`).
    pub print_intervals: bool,
    /// Give up after this long without a byte (a silent or stalled peer).
    pub idle_timeout: Option<Duration>,
    /// Wait at least 3 x the RTO the receiver's own RTT estimate implies
    /// (`tcpi_rcv_rtt` as SRTT, RTTVAR = SRTT / 2 as RFC 6298 (2.2) sets it
    /// from one measurement) before [`RecvEnd::Idle`], when that is longer
    /// than `idle_timeout` ([`crate::stall`]): behind a bloated path the
    /// sender's TCP waits on its own timer longer than 3 s. A client's
    /// download flows; a server's idle limit is fixed.
    pub idle_follows_rtt: bool,
    /// Give up after this long if no byte at all arrives past
    /// `already_read` (a server's header-to-data deadline: a valid header
    /// followed by silence must not hold a slot for the idle timeout).
    pub first_data_timeout: Option<Duration>,
    /// A server's charges per read: `--max-rate` (one budget per source
    /// and one for all receivers; reads wait for it, and TCP flow control
    /// then holds the sender to it, whatever `-b` its header announced or
    /// did not), the source's busy time, the connection's progress stamp.
    pub meter: Option<Meter>,
    /// End a peer that delivers less than the minimum progress
    /// ([`MinProgress`], a server's receive connections).
    pub min_progress: bool,
    /// Where warnings about what the peer sends go (a server's shared log
    /// budget); `None`: `tracing`.
    pub log: Option<Arc<SharedLogLimit>>,
    /// End early when raised ([`RecvEnd::Stopped`]).
    pub stop: StopToken,
}

/// Why a receive loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvEnd {
    /// The peer closed its side (EOF): the normal end.
    Eof,
    /// The peer reset the connection (RST, broken pipe).
    Reset,
    /// [`RecvPlan::deadline`] passed before EOF.
    Deadline,
    /// No byte for [`RecvPlan::idle_timeout`] (or longer: [`RecvPlan::idle_follows_rtt`]).
    Idle(Stall),
    /// No byte at all for [`RecvPlan::first_data_timeout`].
    NoData,
    /// A stop was requested (SIGINT/SIGTERM).
    Stopped,
    /// The source's busy time (`--max-source-time`) ran out.
    OutOfTime,
    /// Below the minimum progress ([`RecvPlan::min_progress`]).
    TooSlow,
}

/// Framing state for `--trip-times`: a state machine over the bytes read,
/// so one logical read of up to `-l` bytes can carry a header and its body (the
/// common case is exactly one read per burst, like iperf 2's recvn of the
/// header plus the following read, but with one syscall instead of two).
#[derive(Debug)]
struct Framing {
    hdr: [u8; BURST_HEADER_LEN],
    hdr_got: usize,
    /// Bytes of the current burst's body still to come (0 = a header is next).
    body_left: u64,
    write_time: Duration,
    /// Size of the previous burst: the next one is read up to this size so a
    /// read never spans two bursts while the sender's `-l` stays the same.
    last_size: u64,
    /// Set when a peer sent a nonsense burst size: stop de-framing.
    broken: bool,
}

/// What one chunk of received bytes did to the framing.
#[derive(Debug, Default, PartialEq)]
struct Consumed {
    /// Write timestamps of the bursts this chunk completed.
    completed: Vec<Duration>,
    /// A header with an impossible burst size (the framing is now broken).
    bad_size: Option<u64>,
}

impl Framing {
    fn new() -> Framing {
        Framing {
            hdr: [0; BURST_HEADER_LEN],
            hdr_got: 0,
            body_left: 0,
            write_time: Duration::ZERO,
            last_size: u64::MAX,
            broken: false,
        }
    }

    /// How many bytes the next read may take without crossing a burst end
    /// (at a header: up to the previous burst's size, normally the whole burst;
    /// before the first burst, only its header, as iperf 2 reads it, so the
    /// first read never spans two bursts).
    fn next_read(&self, len: usize) -> usize {
        let left = if self.broken {
            u64::MAX
        } else if self.body_left == 0 && self.last_size == u64::MAX {
            (BURST_HEADER_LEN - self.hdr_got) as u64
        } else if self.body_left == 0 {
            self.last_size.saturating_sub(self.hdr_got as u64).max(1)
        } else {
            self.body_left
        };
        usize::try_from(left).unwrap_or(len).min(len)
    }

    /// `n` bytes of the current body went by unseen (never more than is left).
    fn skip_body(&mut self, n: usize, out: &mut Consumed) {
        if self.broken || self.body_left == 0 {
            return;
        }
        self.body_left = self.body_left.saturating_sub(n as u64);
        if self.body_left == 0 {
            out.completed.push(self.write_time);
        }
    }

    fn consume(&mut self, mut p: &[u8], out: &mut Consumed) {
        while !p.is_empty() && !self.broken {
            if self.body_left == 0 {
                let take = (BURST_HEADER_LEN - self.hdr_got).min(p.len());
                self.hdr[self.hdr_got..self.hdr_got + take].copy_from_slice(&p[..take]);
                self.hdr_got += take;
                p = &p[take..];
                if self.hdr_got < BURST_HEADER_LEN {
                    return;
                }
                self.hdr_got = 0;
                let h = TcpBurstHeader::new_unchecked(&self.hdr[..]);
                let size = h.burst_size().0;
                if !(BURST_HEADER_LEN as u64..=MAX_BURST).contains(&size) {
                    self.broken = true;
                    out.bad_size = Some(size);
                    return;
                }
                self.write_time = h.write_time().since_epoch();
                self.last_size = size;
                self.body_left = size - BURST_HEADER_LEN as u64;
            } else {
                let take = usize::try_from(self.body_left)
                    .unwrap_or(usize::MAX)
                    .min(p.len());
                self.body_left -= take as u64;
                p = &p[take..];
            }
            if self.body_left == 0 {
                out.completed.push(self.write_time);
            }
        }
    }
}

/// The framing as a [`Consumer`]: copy a burst's header, skip its body.
struct Deframe<'a> {
    f: &'a mut Framing,
    out: &'a mut Consumed,
}

impl Consumer for Deframe<'_> {
    fn must_copy(&self) -> usize {
        if self.f.broken || self.f.body_left > 0 {
            0
        } else {
            BURST_HEADER_LEN - self.f.hdr_got
        }
    }

    fn may_skip(&self) -> usize {
        if self.f.broken {
            usize::MAX
        } else {
            usize::try_from(self.f.body_left).unwrap_or(usize::MAX)
        }
    }

    fn bytes(&mut self, piece: &[u8]) {
        self.f.consume(piece, self.out);
    }

    fn skipped(&mut self, n: usize) {
        self.f.skip_body(n, self.out);
    }
}

/// For the fuzz target `engine_burst_deframe` (not API): feeds `data` to the
/// trip-times burst de-framer in reads of at most `max_read` bytes, each cut
/// where the de-framer allows (as the receive loop reads), and returns the
/// bursts completed and whether the framing broke. Panics on a broken
/// invariant: a read of zero bytes while data is left.
#[doc(hidden)]
pub fn deframe_for_fuzzing(data: &[u8], max_read: usize) -> (usize, bool) {
    let mut f = Framing::new();
    let mut done = 0;
    let mut rest = data;
    while !rest.is_empty() {
        let n = f.next_read(max_read.max(1).min(rest.len()));
        assert!(n > 0, "the de-framer allowed a zero-byte read");
        let mut out = Consumed::default();
        f.consume(&rest[..n], &mut out);
        done += out.completed.len();
        rest = &rest[n..];
        if out.bad_size.is_some() {
            assert!(f.broken);
        }
    }
    (done, f.broken)
}

/// Receives until EOF, a disconnect, or the deadline. Returns the
/// accumulator and ticker for the caller to finish at its end time, and
/// the interval snapshots if `keep_intervals`.
pub fn run(
    stream: &TcpStream,
    plan: &RecvPlan,
    t0: Instant,
    sink: &Sink,
) -> io::Result<(TcpRecvStats, Ticker, Vec<TcpRecvSnapshot>)> {
    run_with_end(stream, plan, t0, sink).map(|(a, t, k, _)| (a, t, k))
}

/// [`run`], also saying why the loop ended.
pub fn run_with_end(
    mut stream: &TcpStream,
    plan: &RecvPlan,
    t0: Instant,
    sink: &Sink,
) -> io::Result<(TcpRecvStats, Ticker, Vec<TcpRecvSnapshot>, RecvEnd)> {
    let mut kept = Vec::new();
    let len = plan.len.max(1);
    let mut acc = TcpRecvStats::new(Bytes(len as u64), plan.trip_times);
    let mut ticker = Ticker::new(plan.interval);
    for &n in &plan.already_read {
        acc.on_read(Bytes(n as u64));
    }
    // Wake up regularly so interval reports come out on time while idle.
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut reader = PieceReader::new(READ_PIECE);
    let mut fr = plan.trip_times.then(Framing::new);
    let mut done = Consumed::default();
    let mut last_data = Instant::now();
    let mut idle = plan.idle_timeout.map(|t| {
        let rule = if plan.idle_follows_rtt {
            StallRule::path_scaled(t)
        } else {
            StallRule::fixed(t)
        };
        StallWatch::new(rule, last_data)
    });
    let mut last_rtt_sample: Option<Instant> = None;
    let mut got_data = false;
    let mut budget_until: Option<Instant> = None;
    let mut out_of_time = false;
    let mut progress = MinProgress::default();
    let why = loop {
        let now = Instant::now();
        if ticker.due(now - t0) {
            for snap in ticker.close(now - t0, &mut acc) {
                if plan.keep_intervals {
                    kept.push(snap.clone());
                }
                if plan.print_intervals {
                    let _ = sink.send(Event::RecvInterval {
                        stream: plan.stream,
                        snap,
                    });
                }
            }
        }
        if plan.stop.is_stopped() {
            break RecvEnd::Stopped;
        }
        if plan.deadline.is_some_and(|d| now >= d) {
            break RecvEnd::Deadline;
        }
        if !got_data
            && plan
                .first_data_timeout
                .is_some_and(|f| now - last_data >= f)
        {
            break RecvEnd::NoData;
        }
        if let Some(w) = idle.as_mut() {
            w.on_progress(last_data);
            // The receiver's RTT estimate, at most every 100 ms (the read timeout).
            if plan.idle_follows_rtt && last_rtt_sample.is_none_or(|t| now - t >= RTT_SAMPLE_EVERY)
            {
                last_rtt_sample = Some(now);
                if let Ok(Some(us)) = tcpinfo::sample_receiver(stream).map(|r| r.rcv_rtt_us) {
                    let r = Duration::from_micros(us);
                    w.on_rtt(r, r / 2);
                }
            }
            if let Some(st) = w.stalled(now) {
                break RecvEnd::Idle(st);
            }
        }
        if out_of_time {
            break RecvEnd::OutOfTime;
        }
        if plan.min_progress && progress.too_slow(now) {
            break RecvEnd::TooSlow;
        }
        // Over the receive budget: read nothing until it is paid (the
        // wait is ours, not the peer's silence or slowness).
        if let Some(until) = budget_until.filter(|u| *u > now) {
            std::thread::sleep((until - now).min(Duration::from_millis(100)));
            last_data = Instant::now();
            progress.restart(last_data);
            continue;
        }
        let want = fr.as_ref().map_or(len, |f| f.next_read(len));
        let res = match (fr.as_mut(), plan.rx_copy) {
            (Some(f), false) => {
                reader.read_into(&mut stream, want, &mut Deframe { f, out: &mut done })
            }
            (Some(f), true) => {
                let mut c = CopyAll(Deframe { f, out: &mut done });
                reader.read_into(&mut stream, want, &mut c)
            }
            (None, false) => reader.read_into(&mut stream, want, &mut SkipAll),
            (None, true) => reader.read_into(&mut stream, want, &mut CopyAll(SkipAll)),
        };
        let n = match res {
            Ok(0) => break RecvEnd::Eof,
            Ok(n) => n,
            Err(e) if is_transient(&e) => continue,
            Err(e) if is_disconnect(&e) => break RecvEnd::Reset,
            Err(e) => return Err(e),
        };
        last_data = Instant::now();
        got_data = true;
        progress.on_bytes(last_data, n as u64);
        if let Some(m) = &plan.meter {
            let moved = m.moved(last_data, n as u64);
            budget_until = Some(last_data + moved.wait);
            out_of_time = moved.out_of_time;
        }
        acc.on_read(Bytes(n as u64));
        if !done.completed.is_empty() {
            let read_done = wall_now();
            for w in done.completed.drain(..) {
                acc.on_burst_complete(w, read_done);
            }
        }
        if let Some(size) = done.bad_size.take() {
            let msg = || {
                format!(
                    "stream {}: trip-times burst header has an impossible burst_size {size}; \
                     latency measurement stops",
                    plan.stream
                )
            };
            match &plan.log {
                // A peer chooses this: one line per connection would be
                // outside any budget.
                Some(log) => log.eprint(|| format!("bloatlab server: {}", msg())),
                None => tracing::warn!("{}", msg()),
            }
        }
    };
    Ok((acc, ticker, kept, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_wire::{TcpBurstRepr, WallTime};

    fn burst(id: u32, size: usize, write_sec: u32) -> Vec<u8> {
        let mut b = vec![0u8; size];
        TcpBurstRepr {
            start_time: WallTime::default(),
            write_time: WallTime {
                sec: write_sec,
                usec: 0,
            },
            burst_id: id,
            burst_size: Bytes(size as u64),
            seqno: 0,
        }
        .emit(&mut TcpBurstHeader::new_unchecked(
            &mut b[..BURST_HEADER_LEN],
        ));
        b
    }

    #[test]
    fn bursts_split_anywhere_are_reassembled() {
        let mut stream = burst(1, 200, 10);
        stream.extend(burst(2, 92, 11));
        stream.extend(burst(3, 1000, 12));
        for chunk in [1, 7, 91, 92, 93, 150, 4096] {
            let mut f = Framing::new();
            let mut out = Consumed::default();
            for c in stream.chunks(chunk) {
                f.consume(c, &mut out);
            }
            let secs: Vec<u64> = out.completed.iter().map(|d| d.as_secs()).collect();
            assert_eq!(secs, [10, 11, 12], "chunk {chunk}");
            assert_eq!(out.bad_size, None);
            assert_eq!((f.body_left, f.hdr_got), (0, 0));
        }
    }

    #[test]
    fn reads_stop_at_the_end_of_a_burst_body() {
        let mut f = Framing::new();
        let mut out = Consumed::default();
        // The first burst's size is not known yet: its header alone.
        assert_eq!(f.next_read(131_072), BURST_HEADER_LEN);
        f.consume(&burst(1, 131_072, 1)[..50], &mut out);
        assert_eq!(f.next_read(131_072), BURST_HEADER_LEN - 50);
        f.consume(&burst(1, 131_072, 1)[50..1000], &mut out);
        assert_eq!(f.next_read(131_072), 130_072);
        assert_eq!(f.next_read(4096), 4096);
        // A sender with a smaller -l: the next burst is read up to its size.
        let mut f = Framing::new();
        f.consume(&burst(1, 16_384, 1), &mut out);
        assert_eq!(f.next_read(131_072), 16_384);
        f.consume(&burst(2, 16_384, 1)[..50], &mut out);
        assert_eq!(f.next_read(131_072), 16_334);
    }

    #[test]
    fn impossible_sizes_break_the_framing() {
        for size in [0usize, 91, (MAX_BURST + 1) as usize] {
            let mut b = vec![0u8; BURST_HEADER_LEN];
            b[48..52].copy_from_slice(&(size as u32).to_be_bytes());
            let mut f = Framing::new();
            let mut out = Consumed::default();
            f.consume(&b, &mut out);
            assert!(f.broken);
            assert_eq!(out.bad_size, Some(size as u64));
        }
    }
}
