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
use crate::clock::{self, wall_now};
use crate::config::Amount;
use crate::tcpinfo;
use bloatlab_metrics::tcp_send::TcpSendStats;
use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::WallTime;
use bloatlab_wire::burst::{BURST_HEADER_LEN, TcpBurstHeader, TcpBurstRepr};
use std::io::{self, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Minimum gap between TCP_INFO samples taken for `-e` reports.
pub const TCPINFO_MIN_GAP: Duration = Duration::from_millis(1);

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
    mut stream: &TcpStream,
    plan: &SendPlan,
    t0: Instant,
    sink: &Sink,
) -> io::Result<(TcpSendStats, Ticker)> {
    let mut acc = TcpSendStats::new();
    let mut ticker = Ticker::new(plan.interval);
    if plan.already_sent.0 > 0 {
        acc.on_write(plan.already_sent);
    }
    // A stalled receiver must not keep a timed test running forever.
    stream.set_write_timeout(Some(Duration::from_millis(250)))?;
    if plan.near_congestion.is_some() || plan.rate.is_some() {
        clock::tighten_timer_slack();
    }
    let mut paced_bytes = Bytes(0);
    let mut pace_origin = t0;
    let len = plan
        .len
        .max(if plan.trip_times { BURST_HEADER_LEN } else { 1 });
    let mut buf = vec![0u8; len];
    fill_pattern(&mut buf);
    let end = match plan.amount {
        Amount::Time(d) => Some(t0 + d),
        Amount::Bytes(_) => None,
    };
    let mut left = match plan.amount {
        Amount::Bytes(b) => Some(b.0.saturating_sub(plan.already_sent.0)),
        Amount::Time(_) => None,
    };
    let mut last_sample: Option<Instant> = None;
    let mut burst = TcpBurstRepr {
        start_time: WallTime::from_since_epoch(plan.start_wall),
        ..TcpBurstRepr::default()
    };
    'test: loop {
        let now = Instant::now();
        if ticker.due(now - t0) {
            if plan.tcpinfo {
                sample_into(stream, &mut acc);
                last_sample = Some(now);
            }
            for snap in ticker.close(now - t0, &mut acc) {
                let _ = sink.send(Event::SendInterval {
                    stream: plan.stream,
                    snap,
                });
            }
        }
        if end.is_some_and(|e| now >= e) || left == Some(0) || crate::stop::requested() {
            break;
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
            match stream.write(&buf[off..this]) {
                Ok(n) => {
                    off += n;
                    acc.on_write(Bytes(n as u64));
                }
                Err(e) if is_transient(&e) => {
                    acc.on_write_error();
                    if crate::stop::requested()
                        || end.is_some_and(|e| Instant::now() >= e + Duration::from_secs(2))
                    {
                        break 'test;
                    }
                }
                Err(e) if is_disconnect(&e) => break 'test,
                Err(e) => return Err(e),
            }
        }
        if let Some(l) = left.as_mut() {
            *l = l.saturating_sub(this as u64);
        }
        if let Some(r) = plan.rate {
            // Sleep until the bytes sent so far are due at the rate; a late
            // start is not caught up with a burst beyond one write.
            paced_bytes += Bytes(this as u64);
            if let Some(due) = r.transmit_time(paced_bytes) {
                let due = pace_origin + due;
                let now = Instant::now();
                if due > now {
                    clock::sleep_precise(due - now);
                } else if now - due > Duration::from_millis(100) {
                    paced_bytes = Bytes(0);
                    pace_origin = now;
                }
            }
        }
        if let Some(w) = plan.near_congestion {
            // iperf 2 RunNearCongestionTCP: pause ceil(w x srtt) us after each burst.
            let rtt = sample_into(stream, &mut acc);
            let pause_us = (w * rtt.as_micros() as f64).ceil();
            if pause_us > 0.0 {
                clock::sleep_precise(Duration::from_micros(pause_us as u64));
            }
        } else if plan.tcpinfo {
            let now = Instant::now();
            if last_sample.is_none_or(|t| now - t >= TCPINFO_MIN_GAP) {
                sample_into(stream, &mut acc);
                last_sample = Some(now);
            }
        }
    }
    if plan.tcpinfo || plan.near_congestion.is_some() {
        sample_into(stream, &mut acc);
    }
    Ok((acc, ticker))
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
