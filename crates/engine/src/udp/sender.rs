//! The paced UDP send loop, shared by the client's forward streams and the
//! server's reverse (`-R`) flows.
//!
//! The loop sends `-l`-byte datagrams with ids 1, 2, 3, ... and
//! CLOCK_REALTIME send times, paced by the sans-IO [`Pacer`] (absolute
//! deadline sleeps) or unpaced in `sendmmsg` batches for `-b 0`, until the
//! amount (`-t` or `-n`) is reached or a stop is requested. It emits
//! interval events and returns the final partial interval and total; the
//! end-of-test exchange (the client's FIN/AckFIN, the server's single FIN)
//! is the caller's. A forward client's loop also looks (non-blocking, at
//! most every [`WATCH_EVERY`]) for a server report that a bloatlab server
//! sends when it ends the flow at its deadline, and stops on it (issue 19).

use super::clock::Mono;
use super::datagram::stamp;
use super::mmsg::{SendBatch, recv_now};
use super::report::Event;
use super::server_report::parse_ack_fin;
use crate::config::Amount;
use crate::meter::Meter;
use crate::pacer::{Pace, Pacer};
use bloatlab_metrics::interval::{IntervalClock, Span};
use bloatlab_metrics::udp_send::{UdpSendSnapshot, UdpSendStats};
use bloatlab_os::clock::realtime_now;
use bloatlab_units::{BitRate, Bytes};
use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// What one sending stream does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendPlan {
    /// `-t` or `-n`.
    pub amount: Amount,
    /// `-i` report interval.
    pub interval: Option<Duration>,
    /// `-b` (0 = unpaced).
    pub rate: BitRate,
    /// `-l`, the datagram length.
    pub len: Bytes,
    /// Stop this long after the start whatever the amount says (a
    /// server's `--max-duration`, which also ends `-n` tests).
    pub deadline: Option<Duration>,
    /// Watch the socket for a server report sent before our FIN (a
    /// bloatlab server's AckFIN at its deadline). Only where nothing else
    /// reads the socket: a forward client's stream.
    pub watch_server: bool,
}

/// Longest one pacing sleep lasts before the loop looks at the clock and
/// the cancel flag again (a `-b 1` gap is hours).
const SLEEP_SLICE: Duration = Duration::from_millis(200);

/// Shortest gap between two looks for an early server report: one
/// non-blocking recv per 5 ms at most, whatever the datagram rate.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(5);

/// When the send loop next looks at its socket (sans-IO).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WatchClock {
    next: Duration,
}

impl WatchClock {
    /// True (and the next look [`WATCH_EVERY`] later) if a look is due at `now`.
    pub fn due(&mut self, now: Duration) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + WATCH_EVERY;
        true
    }
}

impl SendPlan {
    /// `sendmmsg` slots: every datagram of a batch carries the batch's send
    /// time, and loopback spends ~3 us per datagram inside sendmmsg: 32
    /// keeps that skew under ~100 us while the syscall cost stays a few %
    /// of the kernel's. Paced, the pacer rarely has more than a few due.
    pub fn batch_slots(&self) -> usize {
        if Pacer::new(self.rate, self.len, Duration::ZERO).is_paced() {
            8
        } else {
            32
        }
    }
}

/// The per-stream send state between the loop and the end-of-test exchange.
pub(crate) struct StreamTx {
    pub sock: UdpSocket,
    pub batch: SendBatch,
    pub stats: UdpSendStats,
    /// Next sequence number to use.
    pub seq: i64,
    /// When the last datagram went out (test clock).
    pub last_sent: Option<Duration>,
    pub len: Bytes,
    /// A server's charges per batch sent (`--max-reverse-rate` per source
    /// and in all, `--max-source-time`); `None` on a client.
    pub meter: Option<Meter>,
}

/// The send phase's results.
pub(crate) struct SendOutcome {
    /// The last partial interval, when long enough to print.
    pub partial: Option<UdpSendSnapshot>,
    pub total: UdpSendSnapshot,
    /// The server report that ended the sending early (the datagram as
    /// received), when [`SendPlan::watch_server`] saw one.
    pub server_ended: Option<Vec<u8>>,
}

/// Sends per `plan` starting at `t0` on the `mono` clock, then computes the
/// final partial interval and total.
pub(crate) fn send_stream(
    plan: &SendPlan,
    tx: &mut StreamTx,
    mono: Mono,
    t0: Duration,
    id: u32,
    sink: &Sender<Event>,
    cancel: &AtomicBool,
) -> SendOutcome {
    let pacer = Pacer::new(plan.rate, plan.len, t0);
    let ivl = plan.interval.map(IntervalClock::new);
    let pacer_gap = pacer.gap();
    let slots = tx.batch.slots() as u32;
    let (last_boundary, server_ended) = send_loop(
        plan,
        tx,
        pacer.with_max_batch(slots),
        Clocks { mono, t0, ivl },
        id,
        sink,
        cancel,
    );
    // The test ends when the last datagram's slot ends (its send time plus
    // one gap), not when a possibly descheduled loop noticed the deadline.
    let gap = pacer_gap.unwrap_or(Duration::ZERO);
    let end = match tx.last_sent {
        Some(t) => mono.now().min(t + gap).max(last_boundary),
        None => mono.now(),
    };
    let partial = ivl.and_then(|c| {
        let span = Span::new(last_boundary, end);
        let snap = tx.stats.take_interval(span);
        // A partial interval starting at 0 is the whole test: the total says it.
        (c.is_significant_partial(span) && snap.writes > 0 && !span.start.is_zero()).then_some(snap)
    });
    // Intervals use the shared origin (for [SUM]); the final line covers
    // this stream's own sending time, first datagram to the end of the
    // last one's slot, like iperf 2's per-stream start.
    let total = tx.stats.total(Span::from_zero(end.saturating_sub(t0)));
    SendOutcome {
        partial,
        total,
        server_ended,
    }
}

#[derive(Debug, Clone, Copy)]
struct Clocks {
    mono: Mono,
    t0: Duration,
    ivl: Option<IntervalClock>,
}

/// Sends until the amount is reached (or a watched socket brings a server
/// report); emits interval events. Returns the start of the interval in
/// progress (for the final partial line) and that server report.
fn send_loop(
    plan: &SendPlan,
    tx: &mut StreamTx,
    mut pacer: Pacer,
    clocks: Clocks,
    id: u32,
    sink: &Sender<Event>,
    cancel: &AtomicBool,
) -> (Duration, Option<Vec<u8>>) {
    let Clocks { mono, t0, ivl } = clocks;
    let end = match plan.amount {
        Amount::Time(d) => Some(t0 + d),
        Amount::Bytes(_) => None,
    };
    let end = match (end, plan.deadline) {
        (Some(e), Some(d)) => Some(e.min(t0 + d)),
        (e, d) => e.or(d.map(|d| t0 + d)),
    };
    // -n: datagrams to send, rounded up (iperf 2 sends whole datagrams).
    let mut budget = match plan.amount {
        Amount::Bytes(b) => Some(b.0.div_ceil(tx.len.0.max(1))),
        Amount::Time(_) => None,
    };
    let mut interval_start = Duration::ZERO;
    let mut next_report = ivl.map(|c| c.next_boundary(t0));
    let len = tx.len;
    // Held back by the server's send budget until then (mono clock).
    let mut hold = Duration::ZERO;
    let mut watch = WatchClock::default();
    loop {
        let now = mono.now();
        while let (Some(c), Some(b)) = (ivl, next_report) {
            if now < b {
                break;
            }
            let snap = tx.stats.take_interval(Span::new(interval_start, b));
            let _ = sink.send(Event::SendInterval { stream: id, snap });
            interval_start = b;
            next_report = Some(b + c.every());
        }
        // A stop (the client's ClientConfig::stop, a server's cancel): end
        // as if the amount were reached, so the FIN exchange still collects
        // the server's report.
        if end.is_some_and(|e| now >= e) || budget == Some(0) || cancel.load(Ordering::Relaxed) {
            return (interval_start, None);
        }
        if plan.watch_server
            && watch.due(now)
            && let Some(report) = early_server_report(&tx.sock)
        {
            tracing::debug!(stream = id, "the server's report arrived before our FIN");
            return (interval_start, Some(report));
        }
        let pace = match pacer.poll(now) {
            // The shared budget may hold a batch back further than -b does.
            Pace::SendNow(_) if hold > now => Pace::WaitUntil(hold),
            Pace::WaitUntil(t) => Pace::WaitUntil(t.max(hold)),
            p => p,
        };
        match pace {
            Pace::WaitUntil(t) => {
                let mut wake = t;
                if let Some(b) = next_report {
                    wake = wake.min(b);
                }
                if let Some(e) = end {
                    wake = wake.min(e);
                }
                mono.sleep_until(wake.min(now + SLEEP_SLICE));
            }
            Pace::SendNow(n) => {
                let mut n = n as usize;
                if let Some(b) = budget {
                    n = n.min(usize::try_from(b).unwrap_or(usize::MAX));
                }
                let wall = realtime_now();
                for i in 0..n {
                    stamp(tx.batch.datagram_mut(i), tx.seq + i as i64, wall);
                }
                let used = match tx.batch.send(&tx.sock, n) {
                    Ok(k) => {
                        for _ in 0..k {
                            tx.stats.on_datagram(len, now);
                        }
                        if k > 0 {
                            tx.last_sent = Some(now);
                        }
                        if let Some(m) = &tx.meter {
                            let moved = m.moved(std::time::Instant::now(), (k as u64) * len.0);
                            hold = mono.now() + moved.wait;
                            if moved.out_of_time {
                                tracing::debug!(stream = id, "the source's busy time is spent");
                                return (interval_start, None);
                            }
                        }
                        k.max(1).min(n)
                    }
                    Err(e) => {
                        // ENOBUFS, ECONNREFUSED (ICMP port unreachable from
                        // an earlier datagram), EAGAIN: iperf 2 counts these
                        // as Write/Err and keeps going; the id is consumed so
                        // the server counts it as lost.
                        tracing::debug!(stream = id, error = %e, "UDP send failed");
                        tx.stats.on_write_error();
                        if e.kind() == io::ErrorKind::WouldBlock {
                            mono.sleep_until(mono.now() + Duration::from_micros(50));
                        }
                        1
                    }
                };
                tx.seq += used as i64;
                pacer.on_sent(used as u32);
                if let Some(b) = &mut budget {
                    *b = b.saturating_sub(used as u64);
                }
            }
        }
    }
}

/// A server report waiting on the socket, if any (never blocks). Other
/// datagrams (a stale client_hdr_ack, strays) and errors (ICMP port
/// unreachable, which the sends and the FIN exchange see again) are dropped.
fn early_server_report(sock: &UdpSocket) -> Option<Vec<u8>> {
    let mut buf = [0u8; 2048];
    while let Ok(n) = recv_now(sock, &mut buf) {
        let got = &buf[..n.min(buf.len())];
        if parse_ack_fin(got).is_ok() {
            return Some(got.to_vec());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_looked_at_once_per_watch_gap_whatever_the_rate() {
        let mut w = WatchClock::default();
        // A datagram every 10 us for 20 ms: 2000 loop turns, 4 looks.
        let looks = (0..2000u64)
            .filter(|i| w.due(Duration::from_micros(i * 10)))
            .count();
        assert_eq!(looks, 4);
        // A slow loop (one turn per 200 ms sleep slice) looks every turn.
        let mut w = WatchClock::default();
        assert!((0..5u64).all(|i| w.due(Duration::from_millis(i * 200))));
    }
}
