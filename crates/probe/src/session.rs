//! The probe session core (sans-IO): schedule, reply matching, loss, duplicates, late.
//!
//! # Calling contract
//!
//! The driver owns the clock and the socket; every method that depends on time takes
//! `now`, a time on the client's stamping clock (a [`Duration`] since its epoch; for the
//! UDP and ICMP drivers CLOCK_REALTIME, the clock of kernel receive timestamps).
//!
//! 1. [`Session::poll_transmit`]`(now)`: `Some(t)` means "send request `t.seq` now, stamped
//!    `t.send_time`". Call it whenever [`Session::poll_timeout`] passes.
//! 2. [`Session::on_reply`]`(now, reply)` for every reply, with `now` the receive time
//!    (a kernel timestamp where available).
//! 3. [`Session::handle_timeout`]`(now)` at least when [`Session::poll_timeout`] passes:
//!    declares unanswered probes lost.
//! 4. Stop when [`Session::is_done`]; [`Session::finish`] gives the [`Report`].
//!
//! # Schedule
//!
//! Isochronous: probe `k` is due at `start + k · interval`. If the driver wakes up late and
//! one or more whole slots have already passed, it sends one probe for the latest slot and
//! counts the skipped slots in [`Report::skipped_slots`]; it never sends a catch-up burst,
//! which would put a queue of our own making in front of the measurement. Skipped slots
//! take no sequence number and do not count toward a probe count limit.
//!
//! # Loss, late, duplicates
//!
//! A probe with no reply after the timeout (the larger of the configured timeout, 3 s by
//! default, and three times the largest RTT seen so far) is lost. A reply that arrives
//! after that is *late*: it is counted, its RTT kept in the report with `late = true`, but
//! the probe stays lost in the loss figures and out of the RTT statistics. Any further
//! reply for an answered probe is a duplicate.
//!
//! Each reply carries the responder's receive bitmap of the 64 previous requests, so a
//! lost probe is attributed to the upstream (the responder never saw it) or the
//! downstream (it did, the reply was lost) direction. Probes not covered by any later
//! reply (a tail loss, or an outage longer than 64 probes) stay [`LossDirection::Unknown`].
//!
//! # Round-trip time
//!
//! The RTT of a probe is the network's, as in NTP's delay (RFC 5905, `δ = (t4 − t1) −
//! (t3 − t2)`): client receive minus client send, less the responder's turnaround
//! (`server_tx − server_rx`, both on the responder's clock, so no clock offset enters).
//! The responder stamps `server_rx` in the kernel (SO_TIMESTAMPNS) and `server_tx` right
//! before its `send`, so its own wake-up and processing (0.02-0.075 ms on the test VM)
//! are not counted, as an ICMP echo answered by the kernel has none. Every bloatlab
//! responder, version 1 on, fills both fields this way; a reply without them (ICMP), or
//! with a turnaround that is negative or not shorter than the whole round trip (a
//! responder clock stepped in between), gives the raw `t4 − t1`. See [`network_rtt`].

use std::time::Duration;

use crate::clock::{self, ClockEstimate, ClockSample};
use crate::report::{LossDirection, ProbeResult, Report};
use crate::time::SignedDuration;

/// The round trip of a probe sent at `sent` and answered at `received` (client clock),
/// less the responder's turnaround `server_tx − server_rx` (responder clock) when both
/// are known and the turnaround is shorter than the round trip (see the module docs).
pub fn network_rtt(
    sent: Duration,
    received: Duration,
    server_rx: Option<Duration>,
    server_tx: Option<Duration>,
) -> Duration {
    let raw = received.saturating_sub(sent);
    let turnaround = server_rx
        .zip(server_tx)
        .and_then(|(rx, tx)| tx.checked_sub(rx));
    match turnaround {
        Some(t) if t < raw => raw - t,
        _ => raw,
    }
}

/// What bounds the session length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Send this many probes.
    Count(u64),
    /// Send probes for slots due within this time from the start.
    Duration(Duration),
}

/// Session settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Time between probe slots (10 ms = 100 Hz by default).
    pub interval: Duration,
    /// When to stop sending.
    pub limit: Limit,
    /// Minimum time to wait for a reply before declaring a probe lost.
    pub timeout: Duration,
    /// Session id carried in every request (random, chosen by the driver).
    pub session_id: u64,
    /// The client's clock domain id (see [`crate::sys::clock_domain`]); 0 if unknown.
    pub local_clock_domain: u64,
}

impl Config {
    /// 100 Hz, `limit`, 3 s timeout.
    pub fn new(limit: Limit, session_id: u64) -> Config {
        Config {
            interval: Duration::from_millis(10),
            limit,
            timeout: Duration::from_secs(3),
            session_id,
            local_clock_domain: 0,
        }
    }
}

/// A request the driver must send now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Sequence number.
    pub seq: u64,
    /// The send timestamp to put in the request (the `now` given to `poll_transmit`).
    pub send_time: Duration,
}

/// A reply as the driver parsed it. ICMP echo replies carry only `seq` and `client_send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Session id, if the format carries one.
    pub session: Option<u64>,
    /// Sequence number.
    pub seq: u64,
    /// The echoed client send time (guards against stale or forged replies).
    pub client_send: Duration,
    /// Responder receive time (responder clock).
    pub server_rx: Option<Duration>,
    /// Responder send time (responder clock).
    pub server_tx: Option<Duration>,
    /// Requests the responder had received, this one included.
    pub rx_count: Option<u64>,
    /// Receive bitmap of the 64 previous requests (bit `i`: `seq - 1 - i`).
    pub seen: Option<u64>,
    /// The responder's clock domain id (0 unknown).
    pub clock_domain: u64,
}

/// What a reply turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyEvent {
    /// First reply for a pending probe.
    Answered {
        /// Sequence number.
        seq: u64,
        /// Round-trip time.
        rtt: Duration,
    },
    /// A reply after the probe was declared lost.
    Late {
        /// Sequence number.
        seq: u64,
        /// Round-trip time.
        rtt: Duration,
    },
    /// Another copy of an already received reply.
    Duplicate {
        /// Sequence number.
        seq: u64,
    },
    /// Not ours: wrong session, unknown sequence number or wrong echoed timestamp.
    Ignored,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Pending,
    Answered,
    Lost,
    Late,
}

#[derive(Debug, Clone)]
struct Probe {
    sent: Duration,
    status: Status,
    received: Option<Duration>,
    server_rx: Option<Duration>,
    server_tx: Option<Duration>,
    duplicates: u32,
    /// What the responder's bitmaps said about this request.
    server_seen: Option<bool>,
}

/// One probe session (see the module docs for the contract).
#[derive(Debug)]
pub struct Session {
    config: Config,
    start: Duration,
    next_slot: u64,
    sending_done: bool,
    skipped_slots: u64,
    probes: Vec<Probe>,
    first_pending: usize,
    max_rtt: Duration,
    answered: u64,
    max_rx_count: u64,
    clock_domain: Option<u64>,
    foreign_clock_domain: bool,
}

impl Session {
    /// A session whose first slot is due at `now`.
    pub fn new(config: Config, now: Duration) -> Session {
        let sending_done = matches!(config.limit, Limit::Count(0));
        Session {
            config,
            start: now,
            next_slot: 0,
            sending_done,
            skipped_slots: 0,
            probes: Vec::new(),
            first_pending: 0,
            max_rtt: Duration::ZERO,
            answered: 0,
            max_rx_count: 0,
            clock_domain: None,
            foreign_clock_domain: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// When the session started.
    pub fn start(&self) -> Duration {
        self.start
    }

    fn slot_time(&self, slot: u64) -> Duration {
        let offset = self
            .config
            .interval
            .checked_mul(u32::try_from(slot).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX);
        self.start.saturating_add(offset)
    }

    fn slot_allowed(&self, slot: u64) -> bool {
        match self.config.limit {
            Limit::Count(n) => (self.probes.len() as u64) < n,
            Limit::Duration(d) => self.slot_time(slot) < self.start.saturating_add(d),
        }
    }

    /// The current reply timeout: the configured one, or 3 × the largest RTT seen.
    pub fn timeout(&self) -> Duration {
        self.config.timeout.max(self.max_rtt.saturating_mul(3))
    }

    /// `Some(t)`: send request `t.seq` now. `None`: nothing due (or sending is over).
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Transmit> {
        if self.sending_done || now < self.slot_time(self.next_slot) {
            return None;
        }
        // The latest slot that is due; earlier due slots are skipped, not burst out.
        let behind = if self.config.interval.is_zero() {
            0
        } else {
            let late = now - self.slot_time(self.next_slot);
            (late.as_nanos() / self.config.interval.as_nanos()) as u64
        };
        let slot = self.next_slot + behind;
        if !self.slot_allowed(slot) {
            self.sending_done = true;
            return None;
        }
        self.skipped_slots += behind;
        self.next_slot = slot + 1;
        let seq = self.probes.len() as u64;
        self.probes.push(Probe {
            sent: now,
            status: Status::Pending,
            received: None,
            server_rx: None,
            server_tx: None,
            duplicates: 0,
            server_seen: None,
        });
        if !self.slot_allowed(self.next_slot) {
            self.sending_done = true;
        }
        Some(Transmit {
            seq,
            send_time: now,
        })
    }

    /// Stops sending (Ctrl-C, an error); outstanding probes still get their timeout.
    pub fn stop_sending(&mut self) {
        self.sending_done = true;
    }

    /// When the next probe is due; `None` once sending is over.
    pub fn next_send(&self) -> Option<Duration> {
        (!self.sending_done).then(|| self.slot_time(self.next_slot))
    }

    /// The next time the session needs the driver: a send slot or a reply timeout.
    /// `None` when done.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let send = (!self.sending_done).then(|| self.slot_time(self.next_slot));
        let expiry = self
            .probes
            .get(self.first_pending)
            .map(|p| p.sent.saturating_add(self.timeout()));
        match (send, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Declares probes lost whose timeout has passed at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        let timeout = self.timeout();
        while let Some(p) = self.probes.get_mut(self.first_pending) {
            match p.status {
                Status::Pending if p.sent.saturating_add(timeout) <= now => {
                    p.status = Status::Lost;
                }
                Status::Pending => break,
                _ => {}
            }
            self.first_pending += 1;
        }
    }

    fn advance_first_pending(&mut self) {
        while self
            .probes
            .get(self.first_pending)
            .is_some_and(|p| p.status != Status::Pending)
        {
            self.first_pending += 1;
        }
    }

    /// Matches a reply received at `now`.
    pub fn on_reply(&mut self, now: Duration, reply: &Reply) -> ReplyEvent {
        if reply.session.is_some_and(|s| s != self.config.session_id) {
            return ReplyEvent::Ignored;
        }
        let Ok(index) = usize::try_from(reply.seq) else {
            return ReplyEvent::Ignored;
        };
        let Some(probe) = self.probes.get(index) else {
            return ReplyEvent::Ignored;
        };
        if probe.sent != reply.client_send {
            return ReplyEvent::Ignored;
        }
        self.learn_from_responder(reply);
        let probe = &mut self.probes[index];
        // Timeouts follow when replies arrive, turnaround included; the RTT reported
        // is the network's.
        let arrived_after = now.saturating_sub(probe.sent);
        let rtt = network_rtt(probe.sent, now, reply.server_rx, reply.server_tx);
        let event = match probe.status {
            Status::Pending | Status::Lost => {
                probe.received = Some(now);
                probe.server_rx = reply.server_rx;
                probe.server_tx = reply.server_tx;
                if probe.status == Status::Pending {
                    probe.status = Status::Answered;
                    self.answered += 1;
                    self.max_rtt = self.max_rtt.max(arrived_after);
                    ReplyEvent::Answered {
                        seq: reply.seq,
                        rtt,
                    }
                } else {
                    probe.status = Status::Late;
                    ReplyEvent::Late {
                        seq: reply.seq,
                        rtt,
                    }
                }
            }
            Status::Answered | Status::Late => {
                probe.duplicates = probe.duplicates.saturating_add(1);
                ReplyEvent::Duplicate { seq: reply.seq }
            }
        };
        self.advance_first_pending();
        event
    }

    fn learn_from_responder(&mut self, reply: &Reply) {
        if reply.server_rx.is_some()
            && let Some(p) = usize::try_from(reply.seq)
                .ok()
                .and_then(|i| self.probes.get_mut(i))
        {
            p.server_seen = Some(true);
        }
        if let Some(seen) = reply.seen {
            for bit in 0..64u64 {
                let Some(s) = reply.seq.checked_sub(1 + bit) else {
                    break;
                };
                let Some(p) = usize::try_from(s).ok().and_then(|i| self.probes.get_mut(i)) else {
                    continue;
                };
                // Once seen, always seen: an older bitmap may predate a reordered arrival.
                let now_seen = seen & (1 << bit) != 0;
                p.server_seen = Some(p.server_seen == Some(true) || now_seen);
            }
        }
        if let Some(c) = reply.rx_count {
            self.max_rx_count = self.max_rx_count.max(c);
        }
        if reply.clock_domain != 0 {
            match self.clock_domain {
                None => self.clock_domain = Some(reply.clock_domain),
                Some(d) if d != reply.clock_domain => self.foreign_clock_domain = true,
                Some(_) => {}
            }
        }
    }

    /// Probes sent so far.
    pub fn sent(&self) -> u64 {
        self.probes.len() as u64
    }

    /// Probes answered in time so far.
    pub fn answered(&self) -> u64 {
        self.answered
    }

    /// True once sending is over and every probe is answered or timed out.
    pub fn is_done(&self) -> bool {
        self.sending_done && self.first_pending >= self.probes.len()
    }

    /// True if every reply so far reported the client's own clock domain.
    pub fn clocks_shared(&self) -> bool {
        self.config.local_clock_domain != 0
            && self.clock_domain == Some(self.config.local_clock_domain)
            && !self.foreign_clock_domain
    }

    /// The results. Probes still pending count as lost.
    pub fn finish(self) -> Report {
        let shared = self.clocks_shared();
        let samples: Vec<ClockSample> = self
            .probes
            .iter()
            .filter(|p| p.status == Status::Answered)
            .filter_map(|p| {
                Some(ClockSample {
                    t1: p.sent,
                    t2: p.server_rx?,
                    t3: p.server_tx?,
                    t4: p.received?,
                })
            })
            .collect();
        let clock = if shared {
            ClockEstimate::shared()
        } else {
            clock::estimate(&samples).unwrap_or_else(ClockEstimate::unknown)
        };
        let has_owd = clock.method != clock::ClockMethod::Unknown;
        let probes: Vec<ProbeResult> = self
            .probes
            .iter()
            .enumerate()
            .map(|(seq, p)| {
                let rtt = p
                    .received
                    .map(|r| network_rtt(p.sent, r, p.server_rx, p.server_tx));
                let (up, down) = match (p.server_rx, p.server_tx, p.received) {
                    (Some(rx), Some(tx), Some(back)) if has_owd => {
                        let off_up = clock.offset_at(p.sent);
                        let off_down = clock.offset_at(back);
                        (
                            Some(SignedDuration::between(rx, p.sent).saturating_sub(off_up)),
                            Some(SignedDuration::between(back, tx).saturating_add(off_down)),
                        )
                    }
                    _ => (None, None),
                };
                // Still pending at the end: the timeout has not passed (handle_timeout
                // would have declared it lost), so its fate is unknown.
                let unfinished = p.status == Status::Pending;
                let lost = match p.status {
                    Status::Answered | Status::Pending => None,
                    _ => Some(match p.server_seen {
                        Some(true) => LossDirection::Down,
                        Some(false) => LossDirection::Up,
                        None => LossDirection::Unknown,
                    }),
                };
                ProbeResult {
                    seq: seq as u64,
                    sent: p.sent.saturating_sub(self.start),
                    rtt,
                    up,
                    down,
                    lost,
                    late: p.status == Status::Late,
                    unfinished,
                    duplicates: p.duplicates,
                }
            })
            .collect();
        Report::new(
            self.config.interval,
            self.skipped_slots,
            self.max_rx_count,
            clock,
            probes,
        )
    }
}

#[cfg(test)]
mod tests;
