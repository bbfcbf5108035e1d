//! The sending data loop (client forward, server reverse, both in full-duplex).
//!
//! Each `-l` write is one "burst". With `--trip-times` the burst starts with
//! the 92-byte header carrying the wall-clock time taken just before
//! `write()` (iperf 2.1.8 `Client::WriteTcpTxHdr`). TCP_INFO is sampled:
//! * with `--near-congestion`, after every burst (the pause needs the RTT);
//! * with `-e`, after a burst when at least [`TCPINFO_MIN_GAP`] has passed
//!   since the last sample, and at every interval end. iperf 2 samples on
//!   every write; the printed columns use only the last sample of each
//!   interval, so this prints the same numbers at a bounded cost (see
//!   docs/engine.md for the measurement).

use super::io::{is_disconnect, is_transient};
use super::stats::Ticker;
use super::{Event, Sink};
use crate::config::Amount;
use crate::meter::Meter;
use crate::pacer::{Pace, Pacer, TCP_MAX_LAG};
use crate::stall::{Stall, StallRule, StallWatch};
use crate::tcpinfo;
use bloatlab_metrics::tcp_send::TcpSendStats;
use bloatlab_os::StopToken;
use bloatlab_os::clock::realtime_now as wall_now;
use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::WallTime;
use bloatlab_wire::burst::{BURST_HEADER_LEN, TcpBurstHeader, TcpBurstRepr};
use std::io::{self, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Minimum gap between TCP_INFO samples taken for `-e` reports.
pub const TCPINFO_MIN_GAP: Duration = Duration::from_millis(1);

/// Longest a write may block before the loop looks at the clock again.
const WRITE_TIMEOUT: Duration = Duration::from_millis(250);
/// Shortest write timeout, whatever the interval (each expiry costs a wakeup).
const MIN_WRITE_TIMEOUT: Duration = Duration::from_millis(10);

/// How a sender runs.
#[derive(Debug, Clone)]
pub struct SendPlan {
    /// Stream id for reports.
    pub stream: u32,
    /// `-l`: bytes per write (per burst).
    pub len: usize,
    /// `-t` or `-n`.
    pub amount: Amount,
    /// Frame bursts with the 92-byte trip-times header.
    pub trip_times: bool,
    /// `--zerocopy`: write with `sendfile` from a memory file holding the
    /// buffer (no copy of it per write). Ignored with `trip_times`: each
    /// write then carries a fresh header, and pages the kernel may still be
    /// sending must not change under it.
    pub zerocopy: bool,
    /// The start time written into burst headers (wall clock).
    pub start_wall: Duration,
    /// `--near-congestion` weight.
    pub near_congestion: Option<f64>,
    /// `-b` on TCP: cap the average write rate (iperf 2's token bucket).
    pub rate: Option<BitRate>,
    /// Sample TCP_INFO for `-e` reports.
    pub tcpinfo: bool,
    /// `-i`.
    pub interval: Option<Duration>,
    /// Bytes already sent on the connection that count in the totals (the test header).
    pub already_sent: Bytes,
    /// Stop here whatever the amount says (a server's cap on every test).
    pub deadline: Option<Instant>,
    /// End as [`SendEnd::Stalled`] after this long without a byte written
    /// or acked (a peer that stopped reading, a dead path): a fixed time, or
    /// one scaled to the flow's RTO ([`crate::stall`]).
    pub stall: Option<StallRule>,
    /// End pacing sleeps as soon as the peer closes or resets (a reverse
    /// sender, whose peer never sends after its header).
    pub watch_peer_close: bool,
    /// End early when raised ([`SendEnd::Stopped`]).
    pub stop: StopToken,
    /// A server's charges per write: `--max-reverse-rate` (one budget per
    /// source and one for all senders), the source's busy time, the
    /// connection's progress stamp.
    pub meter: Option<Meter>,
}

/// Largest buffer a sender allocates: longer `-l` writes are issued from
/// it in pieces, so memory follows what is sent, not what a header claims.
pub const MAX_WRITE_BUF: usize = 256 * 1024;
/// Longest a pacing sleep lasts before the loop looks at the clock, the
/// peer and the stop flag again.
const PACE_SLICE: Duration = Duration::from_millis(200);

/// Why a send loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendEnd {
    /// The amount (`-t` or `-n`) was sent.
    Done,
    /// The peer reset or closed the connection.
    Disconnected,
    /// For [`SendPlan::stall`]'s limit no byte could be written and none
    /// of the queued ones was acked (a peer that reads nothing, a dead path).
    Stalled(Stall),
    /// [`SendPlan::deadline`] passed first.
    Deadline,
    /// A stop was requested (SIGINT/SIGTERM).
    Stopped,
    /// The source's busy time (`--max-source-time`) ran out.
    OutOfTime,
}

/// Fills `buf` with iperf's `0123456789` pattern.
pub fn fill_pattern(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = b'0' + (i % 10) as u8;
    }
}

/// Sends per `plan` until the amount is reached or the peer goes away.
/// `t0` is the stream's time origin. Returns the tally for the caller to
/// finish once it knows the end time (after shutdown and drain).
pub fn run(
    stream: &TcpStream,
    plan: &SendPlan,
    t0: Instant,
    sink: &Sink,
) -> io::Result<(TcpSendStats, Ticker)> {
    run_with_end(stream, plan, t0, sink).map(|(a, t, _)| (a, t))
}

/// Emits every interval due at `now` (TCP_INFO sampled first with `-e`).
fn emit_due(
    stream: &TcpStream,
    plan: &SendPlan,
    t0: Instant,
    now: Instant,
    ticker: &mut Ticker,
    acc: &mut TcpSendStats,
    sink: &Sink,
) -> bool {
    if !ticker.due(now - t0) {
        return false;
    }
    if plan.tcpinfo {
        sample_into(stream, acc);
    }
    for snap in ticker.close(now - t0, acc) {
        let _ = sink.send(Event::SendInterval {
            stream: plan.stream,
            snap,
        });
    }
    true
}

/// True when the peer has closed its side or the connection failed
/// (POLLRDHUP / POLLHUP / POLLERR), without reading anything.
fn peer_closed(stream: &TcpStream) -> bool {
    bloatlab_os::poll::peer_closed(stream)
}

/// Bytes in the socket's send queue, sent or not but not yet acked
/// (SIOCOUTQ); `None` if the kernel will not say.
fn unacked(stream: &TcpStream) -> Option<i64> {
    bloatlab_os::sockopt::send_queue_bytes(stream).ok()
}

/// [`run`], also saying why the loop ended.
pub fn run_with_end(
    mut stream: &TcpStream,
    plan: &SendPlan,
    t0: Instant,
    sink: &Sink,
) -> io::Result<(TcpSendStats, Ticker, SendEnd)> {
    let mut acc = TcpSendStats::new();
    let mut ticker = Ticker::new(plan.interval);
    if plan.already_sent.0 > 0 {
        acc.on_write(plan.already_sent);
    }
    // A stalled receiver must not keep a timed test running forever. A blocked
    // write also holds up the interval ends (and their TCP_INFO samples): at most a
    // quarter interval, so each interval's sample is taken near its end rather than
    // in a later one (issue 18: `bloatlab test` reads an upload's arrived bytes from
    // those samples).
    let write_timeout = plan.interval.map_or(WRITE_TIMEOUT, |i| {
        (i / 4).clamp(MIN_WRITE_TIMEOUT, WRITE_TIMEOUT)
    });
    stream.set_write_timeout(Some(write_timeout))?;
    // A deadline (`--abort-at-end`) ends the test mid-write: the last write may
    // block only until then, not a whole timeout past it.
    let mut at_deadline = false;
    if plan.near_congestion.is_some() || plan.rate.is_some() {
        bloatlab_os::thread::minimise_timer_slack();
    }
    // Rate (-b) and near-congestion pacing: the shared sans-IO pacer, on
    // time since t0.
    let min_len = if plan.trip_times { BURST_HEADER_LEN } else { 1 };
    let len = paced_write_len(plan.len, plan.rate, min_len);
    let mut pacer = match plan.rate {
        Some(r) => Pacer::new(r, Bytes(len as u64), Duration::ZERO),
        None => Pacer::unpaced(),
    }
    .with_max_lag(TCP_MAX_LAG)
    .with_near_congestion(plan.near_congestion);
    let end = match plan.amount {
        Amount::Time(d) => Some(t0 + d),
        Amount::Bytes(_) => None,
    };
    let mut left = match plan.amount {
        Amount::Bytes(b) => Some(b.0.saturating_sub(plan.already_sent.0)),
        Amount::Time(_) => None,
    };
    // Allocate for what will be sent: one write of at most MAX_WRITE_BUF
    // (longer writes reuse it), never more than a -n test's whole amount.
    let buf_len = len
        .min(MAX_WRITE_BUF)
        .min(left.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)))
        .max(min_len);
    let mut buf = vec![0u8; buf_len];
    fill_pattern(&mut buf);
    // Body pieces after the first come from past the burst header.
    let body_from = if plan.trip_times { BURST_HEADER_LEN } else { 0 };
    let mut stall = plan.stall.map(|r| StallWatch::new(r, Instant::now()));
    // --zerocopy: the pattern lives in a memory file the kernel sends from;
    // if one cannot be made, copy as usual (said once).
    let zc = (plan.zerocopy && !plan.trip_times)
        .then(|| bloatlab_os::fdio::memfd_with("bloatlab-send", &buf))
        .and_then(|r| {
            r.map_err(|e| tracing::warn!("--zerocopy: no memory file ({e}); copying instead"))
                .ok()
        });
    let mut budget_until: Option<Instant> = None;
    let mut out_of_time = false;
    let mut last_queued: Option<i64> = None;
    let mut last_sample: Option<Instant> = None;
    let mut burst = TcpBurstRepr {
        start_time: WallTime::from_since_epoch(plan.start_wall),
        ..TcpBurstRepr::default()
    };
    let why = 'test: loop {
        let now = Instant::now();
        if emit_due(stream, plan, t0, now, &mut ticker, &mut acc, sink) && plan.tcpinfo {
            last_sample = Some(now);
        }
        if plan.stop.is_stopped() {
            break SendEnd::Stopped;
        }
        if out_of_time {
            break SendEnd::OutOfTime;
        }
        let since = now.saturating_duration_since(t0);
        let mut pace = pacer.poll(since);
        // The shared budget may hold a write back further than -b does.
        if let Some(until) = budget_until.filter(|u| *u > now) {
            let owed = until.saturating_duration_since(t0);
            pace = match pace {
                Pace::WaitUntil(d) => Pace::WaitUntil(d.max(owed)),
                _ => Pace::WaitUntil(owed),
            };
        }
        // A paced -n test ends when its last bytes are due, not when they
        // were written, so the reported rate is the paced one.
        if end.is_some_and(|e| now >= e)
            || (left == Some(0) && pacer.next_due().is_none_or(|d| d <= since))
        {
            break SendEnd::Done;
        }
        if plan.deadline.is_some_and(|d| now >= d) {
            break SendEnd::Deadline;
        }
        if let Pace::WaitUntil(due) = pace {
            let due = t0
                .checked_add(due)
                .unwrap_or(now + Duration::from_secs(86_400 * 365));
            // Paced: sleep in slices bounded by the test's end, the
            // deadline and the next interval, and stop if the peer left.
            let mut wake = due.min(now + PACE_SLICE);
            if let Some(e) = end {
                wake = wake.min(e);
            }
            if let Some(d) = plan.deadline {
                wake = wake.min(d);
            }
            bloatlab_os::sleep::sleep_for(wake.saturating_duration_since(now));
            // How late the host ran us again: near-congestion's ~1 ms pauses lose that
            // time's throughput, which a check of it must not blame on the pacing.
            acc.on_paced_wait(Instant::now().saturating_duration_since(wake.max(now)));
            if plan.watch_peer_close && peer_closed(stream) {
                break SendEnd::Disconnected;
            }
            continue;
        }
        let this = match left {
            Some(l) => usize::try_from(l)
                .unwrap_or(len)
                .min(len)
                .max(if plan.trip_times { BURST_HEADER_LEN } else { 1 }),
            None => len,
        };
        if plan.trip_times {
            burst.burst_id = burst.burst_id.wrapping_add(1);
            burst.burst_size = Bytes(this as u64);
            burst.write_time = WallTime::from_since_epoch(wall_now());
            burst.emit(&mut TcpBurstHeader::new_unchecked(
                &mut buf[..BURST_HEADER_LEN],
            ));
            burst.seqno = burst.seqno.wrapping_add(this as u64);
        }
        let mut off = 0;
        while off < this {
            // The first buf_len bytes of a burst come from buf as they are
            // (header first); the rest from its body, piece by piece.
            let (from, to) = if off < buf.len() {
                (off, this.min(buf.len()))
            } else {
                let from = body_from.min(buf.len() - 1);
                (from, from + (this - off).min(buf.len() - from))
            };
            if let Some(d) = plan.deadline.filter(|_| !at_deadline) {
                let left = d.saturating_duration_since(Instant::now());
                if left < write_timeout {
                    stream.set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
                    at_deadline = true;
                }
            }
            let wrote = match &zc {
                Some(fd) => bloatlab_os::fdio::sendfile(stream, fd, from as u64, to - from),
                None => stream.write(&buf[from..to]),
            };
            match wrote {
                Ok(n) => {
                    off += n;
                    acc.on_write(Bytes(n as u64));
                    let now = Instant::now();
                    if let Some(w) = stall.as_mut() {
                        w.on_progress(now);
                    }
                    last_queued = None;
                    // A write cut short by the timeout: the interval ends (and
                    // the deadline) still come on time.
                    if off < this {
                        if emit_due(stream, plan, t0, now, &mut ticker, &mut acc, sink)
                            && plan.tcpinfo
                        {
                            last_sample = Some(now);
                        }
                        if plan.deadline.is_some_and(|d| now >= d) {
                            break 'test SendEnd::Deadline;
                        }
                    }
                }
                Err(e) if is_transient(&e) => {
                    acc.on_write_error();
                    let now = Instant::now();
                    // Interval lines keep coming while the peer reads nothing.
                    emit_due(stream, plan, t0, now, &mut ticker, &mut acc, sink);
                    if plan.stop.is_stopped() {
                        break 'test SendEnd::Stopped;
                    }
                    // A full send buffer draining over a slow, bloated link
                    // frees space in large steps (a third of the buffer at
                    // a time): acks arriving are progress too. A peer that
                    // reads nothing (zero window) or a dead path acks nothing.
                    let queued = unacked(stream);
                    if let Some(w) = stall.as_mut() {
                        if queued.is_some_and(|q| last_queued.is_none_or(|l| q < l)) {
                            w.on_progress(now);
                        }
                        // The flow's RTT decides how long its TCP may be waiting on its
                        // own timer: one TCP_INFO call per blocked write (at most one per
                        // write timeout, >= 10 ms), so the watch sees the queue at its
                        // deepest (crate::stall).
                        if plan.stall.is_some_and(|r| r.follow_rto)
                            && let Ok(t) = tcpinfo::sample(stream)
                        {
                            w.on_rtt(t.rtt, t.rttvar);
                        }
                        if w.past_floor(now)
                            && let Some(st) = w.stalled(now)
                        {
                            break 'test SendEnd::Stalled(st);
                        }
                    }
                    last_queued = queued;
                    // The test is over: give up on the last write, as before.
                    if end.is_some_and(|e| now >= e + Duration::from_secs(2)) {
                        break 'test SendEnd::Done;
                    }
                    if plan.deadline.is_some_and(|d| now >= d) {
                        break 'test SendEnd::Deadline;
                    }
                }
                Err(e) if is_disconnect(&e) => break 'test SendEnd::Disconnected,
                Err(e) => return Err(e),
            }
        }
        if let Some(l) = left.as_mut() {
            *l = l.saturating_sub(this as u64);
        }
        pacer.on_sent_bytes(Bytes(this as u64));
        if let Some(m) = &plan.meter {
            let now = Instant::now();
            let moved = m.moved(now, this as u64);
            budget_until = Some(now + moved.wait);
            out_of_time = moved.out_of_time;
        }
        if plan.near_congestion.is_some() {
            // iperf 2 RunNearCongestionTCP: pause ceil(w x srtt) after each burst.
            let rtt = sample_into(stream, &mut acc);
            pacer.on_rtt_sample(Instant::now().saturating_duration_since(t0), rtt);
        } else if plan.tcpinfo {
            let now = Instant::now();
            if last_sample.is_none_or(|t| now - t >= TCPINFO_MIN_GAP) {
                sample_into(stream, &mut acc);
                last_sample = Some(now);
            }
        }
    };
    if plan.tcpinfo || plan.near_congestion.is_some() {
        sample_into(stream, &mut acc);
    }
    Ok((acc, ticker, why))
}

/// Longest a paced write's bytes take at the `-b` rate. iperf 2 writes whole `-l` units
/// and goes into debt (RunRateLimitedTCP), so `-b 1 -t 1` sends one 128 KB write and
/// reports 1.04 Mbit/s (issue 19); we cut the writes of a slow rate instead, so what a
/// test sends is never more than the rate allows plus this much.
pub const MAX_PACED_WRITE_TIME: Duration = Duration::from_millis(100);

/// The write size of a sender with `-l len` at `rate`: `len`, cut to what the rate sends
/// in [`MAX_PACED_WRITE_TIME`] (at least `min_len`: 1 byte, or a trip-times burst header).
/// At 128 KB writes, rates from 10.5 Mbit/s up are not cut at all.
pub fn paced_write_len(len: usize, rate: Option<BitRate>, min_len: usize) -> usize {
    let len = len.max(min_len);
    match rate.filter(|r| r.0 > 0) {
        Some(r) => {
            let allowed = u128::from(r.0) * MAX_PACED_WRITE_TIME.as_millis() / 8_000;
            len.min(usize::try_from(allowed).unwrap_or(usize::MAX).max(min_len))
        }
        None => len,
    }
}

/// Samples TCP_INFO into `stats`; returns the RTT (zero if unavailable).
fn sample_into(stream: &TcpStream, acc: &mut TcpSendStats) -> Duration {
    match tcpinfo::sample(stream) {
        Ok(s) => {
            acc.on_tcp_info(s);
            s.rtt
        }
        Err(_) => Duration::ZERO,
    }
}

#[cfg(test)]
mod paced_len_tests {
    use super::*;

    #[test]
    fn a_slow_rate_never_starts_with_a_write_larger_than_it_allows() {
        let k128 = 128 * 1024;
        // Issue 19: -b 1 sent one 128 KB write; now a byte (1 bit/s for 100 ms is less).
        assert_eq!(paced_write_len(k128, Some(BitRate(1)), 1), 1);
        // 1 Mbit/s: 100 ms of it is 12,500 bytes.
        assert_eq!(paced_write_len(k128, Some(BitRate(1_000_000)), 1), 12_500);
        // A trip-times write keeps room for its burst header.
        assert_eq!(
            paced_write_len(k128, Some(BitRate(1)), BURST_HEADER_LEN),
            BURST_HEADER_LEN
        );
        // Fast or unpaced: whole -l writes, as iperf 2 writes them.
        assert_eq!(paced_write_len(k128, Some(BitRate(50_000_000)), 1), k128);
        assert_eq!(paced_write_len(k128, None, 1), k128);
        assert_eq!(paced_write_len(k128, Some(BitRate(0)), 1), k128);
        assert_eq!(paced_write_len(0, None, 1), 1);
    }
}
