//! The waits a connection must get through before it is worth a slot: the
//! TLS handshake and a request head. Sans-IO: the driver ([`crate::conn`])
//! reports what happened with the time it happened, asks
//! [`Deadlines::next`] when to look again, and [`Deadlines::check`]
//! whether, and why, to cut.
//!
//! Why not fixed deadlines like the iperf service's `--header-timeout`
//! (4 s, for 24 bytes that fit one segment): through a bloated link (a 1-2 s
//! loaded RTT, losses backing the retransmission timer off for 4, 8, 16 s) a
//! TLS handshake and the first request take several round trips, and the RPM
//! test opens its load connections exactly when the link is loaded. Through
//! the lab's 20 Mbit/s, 80 ms, 1000-packet FIFO, handshakes took up to 11.5 s
//! and some first requests came more than 10 s after the handshake: a fixed
//! 15 s (handshake) and 10 s (head) cut load connections and ended the
//! measurement this service exists for.
//!
//! So each wait is cut when it *stalls*: when the client has owed us bytes
//! for the stall limit (`--handshake-timeout` in the handshake,
//! `--http-header-timeout` for a head) without sending any. The stall clock
//! starts again at each sign that the wait is the network's, not the
//! client's:
//! * a byte from the client;
//! * an ACK from the client (its last one, from TCP_INFO);
//! * our own bytes still unacknowledged (our flight is crossing a queue or
//!   being retransmitted: the client cannot answer what it has not got).
//!
//! And every wait is cut `--http-wait-max` after it started, however it
//! progresses: the bound on a client that trickles a byte every few seconds
//! or never acknowledges our flight (docs/security.md).
//!
//! What counts as waiting for a head:
//! * from accept (plain) or the end of the handshake (TLS) until the first
//!   request head is parsed, whatever the protocol: this covers a client
//!   that sends nothing, a partial HTTP/2 preface and a partial HTTP/1.1
//!   head alike;
//! * on HTTP/1.1, again each time the connection has no request in flight
//!   (the previous response is done), since requests come one after another;
//! * not on HTTP/2 once a request came: streams come and go on a live
//!   connection, and an idle one is left to `--idle-timeout`.

use bloatlab_engine::tcpinfo::AckWait;
use std::time::{Duration, Instant};

/// The limits, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest a TLS handshake may stall (above).
    pub handshake_stall: Duration,
    /// The longest a wait for a request head may stall.
    pub head_stall: Duration,
    /// The longest any one wait (a handshake, a head) may take in all.
    pub wait_max: Duration,
}

impl Default for Limits {
    /// The defaults of `bloatlab server` (docs/http.md).
    fn default() -> Limits {
        Limits {
            handshake_stall: Duration::from_secs(15),
            head_stall: Duration::from_secs(10),
            wait_max: Duration::from_secs(60),
        }
    }
}

/// Which deadline cut a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Cut {
    #[error("TLS handshake stalled: the client sent nothing for --handshake-timeout")]
    HandshakeStalled,
    #[error("TLS handshake not done within --http-wait-max")]
    HandshakeTooLong,
    #[error("request head stalled: the client sent nothing for --http-header-timeout")]
    HeadStalled,
    #[error("request head not received within --http-wait-max")]
    HeadTooLong,
}

impl Cut {
    /// In the handshake (else: waiting for a request head).
    pub fn in_handshake(self) -> bool {
        matches!(self, Cut::HandshakeStalled | Cut::HandshakeTooLong)
    }
}

/// The protocol a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Http1,
    Http2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A wait: in the TLS handshake or for a request head.
    Waiting {
        handshake: bool,
        since: Instant,
        /// The last sign of progress (`since` until one comes).
        heard: Instant,
    },
    /// A request is in flight, or HTTP/2 has shown it is alive: no deadline
    /// of ours (the lifetime and idle timeout still hold).
    Serving,
}

/// One connection's deadlines.
#[derive(Debug, Clone)]
pub struct Deadlines {
    limits: Limits,
    phase: Phase,
    /// HTTP/1.1 requests whose response is not done yet.
    in_flight: u32,
    /// A request came on HTTP/2: no more head deadlines.
    multiplexed: bool,
}

impl Deadlines {
    /// A connection accepted at `now`; `tls`: its handshake comes first.
    pub fn new(now: Instant, limits: Limits, tls: bool) -> Deadlines {
        Deadlines {
            limits,
            phase: wait(tls, now),
            in_flight: 0,
            multiplexed: false,
        }
    }

    /// Whether a wait runs (the handshake, or for a head): only then does
    /// progress count.
    pub fn waiting(&self) -> bool {
        matches!(self.phase, Phase::Waiting { .. })
    }

    /// The client's bytes were last received at `at` (the driver may report
    /// the same moment again, or late: only a later one counts). Progress
    /// for a wait; ignored while serving.
    pub fn received(&mut self, at: Instant) {
        if let Phase::Waiting { heard, .. } = &mut self.phase {
            *heard = (*heard).max(at);
        }
    }

    /// What the kernel said about our side of the connection at `now`: sent
    /// bytes still unacknowledged mean we wait on the network, not on the
    /// client, so the stall clock starts again at `now`; otherwise the
    /// client's last ACK is progress like a byte. Ignored while serving.
    pub fn observed(&mut self, now: Instant, wire: AckWait) {
        if wire.unacked > 0 {
            self.received(now);
        } else if let Some(at) = now.checked_sub(wire.since_last_ack) {
            self.received(at);
        }
    }

    /// The TLS handshake finished at `now`: the wait for the first head
    /// starts. Ignored outside the handshake.
    pub fn handshake_done(&mut self, now: Instant) {
        if let Phase::Waiting {
            handshake: true, ..
        } = self.phase
        {
            self.phase = wait(false, now);
        }
    }

    /// A request head was parsed at `now`.
    pub fn request_started(&mut self, _now: Instant, proto: Proto) {
        match proto {
            Proto::Http1 => self.in_flight = self.in_flight.saturating_add(1),
            Proto::Http2 => self.multiplexed = true,
        }
        self.phase = Phase::Serving;
    }

    /// The response to a request is done (sent, or dropped) at `now`. On
    /// HTTP/1.1 with nothing else in flight, the wait for the next head
    /// starts.
    pub fn request_finished(&mut self, now: Instant) {
        if self.multiplexed {
            return;
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 && self.phase == Phase::Serving {
            self.phase = wait(false, now);
        }
    }

    /// The deadline running now and what it guards, if any: the earlier of
    /// the stall and the total deadline. `None` also when the deadline is
    /// too far to be represented (no panic on a huge limit).
    pub fn next(&self) -> Option<(Instant, Cut)> {
        let Phase::Waiting {
            handshake,
            since,
            heard,
        } = self.phase
        else {
            return None;
        };
        let (stall, cuts) = if handshake {
            (
                self.limits.handshake_stall,
                (Cut::HandshakeStalled, Cut::HandshakeTooLong),
            )
        } else {
            (self.limits.head_stall, (Cut::HeadStalled, Cut::HeadTooLong))
        };
        let stall = heard.checked_add(stall).map(|t| (t, cuts.0));
        let total = since.checked_add(self.limits.wait_max).map(|t| (t, cuts.1));
        // On a tie, the total: the wait had its full time.
        match (stall, total) {
            (Some(s), Some(t)) => Some(if s.0 < t.0 { s } else { t }),
            (s, t) => s.or(t),
        }
    }

    /// Whether the connection must be cut at `now`, and why. A deadline is
    /// met only strictly before it: at the deadline itself, the cut.
    pub fn check(&self, now: Instant) -> Option<Cut> {
        self.next().and_then(|(at, cut)| (now >= at).then_some(cut))
    }
}

/// A wait (for the handshake, or a head) starting at `now`.
fn wait(handshake: bool, now: Instant) -> Phase {
    Phase::Waiting {
        handshake,
        since: now,
        heard: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    fn limits() -> Limits {
        Limits {
            handshake_stall: 15 * S,
            head_stall: 10 * S,
            wait_max: 60 * S,
        }
    }

    /// The kernel's view: our flight unacknowledged.
    fn in_flight() -> AckWait {
        AckWait {
            unacked: 1,
            since_last_ack: Duration::ZERO,
        }
    }

    /// The kernel's view: all acknowledged, the last ACK `ago`.
    fn acked(ago: Duration) -> AckWait {
        AckWait {
            unacked: 0,
            since_last_ack: ago,
        }
    }

    #[test]
    fn a_silent_tls_client_is_cut_at_the_stall_limit_not_before() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        assert_eq!(d.next(), Some((t0 + 15 * S, Cut::HandshakeStalled)));
        // The driver looks at the deadline: nothing sent, nothing of ours in
        // flight (the SYN-ACK was acknowledged at accept).
        d.received(t0);
        d.observed(t0 + 15 * S, acked(15 * S));
        assert_eq!(d.check(t0 + 15 * S - MS), None);
        assert_eq!(d.check(t0 + 15 * S), Some(Cut::HandshakeStalled));
        assert_eq!(d.check(t0 + 100 * S), Some(Cut::HandshakeStalled));
    }

    #[test]
    fn a_handshake_waiting_on_its_flight_through_a_lossy_queue_survives_past_the_stall_limit() {
        // What the lab's loaded FIFO does: the ClientHello at 0.2 s, then our
        // flight is retransmitted (unacknowledged) for 40 s, then the
        // client's ACK and Finished come together.
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        d.received(t0 + 200 * MS);
        let mut t = t0 + 200 * MS;
        while t < t0 + 40 * S {
            let (at, _) = d.next().unwrap();
            t = at.min(t0 + 40 * S);
            d.observed(t, in_flight());
            assert_eq!(d.check(t), None, "cut at {:?}", t - t0);
        }
        d.received(t0 + 40 * S);
        d.handshake_done(t0 + 40 * S);
        assert_eq!(d.next(), Some((t0 + 50 * S, Cut::HeadStalled)));
    }

    #[test]
    fn the_same_handshake_without_the_kernel_s_view_is_cut_as_stalled() {
        // The other way round: only the ClientHello counts, 15 s later the cut.
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        d.received(t0 + 200 * MS);
        assert_eq!(d.check(t0 + 15 * S + 200 * MS), Some(Cut::HandshakeStalled));
    }

    #[test]
    fn a_client_that_acknowledged_our_flight_owes_its_finished_from_that_ack() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        d.received(t0);
        // At the first look (15 s) the client had acknowledged 12 s in.
        d.observed(t0 + 15 * S, acked(3 * S));
        assert_eq!(d.next(), Some((t0 + 27 * S, Cut::HandshakeStalled)));
        d.observed(t0 + 27 * S, acked(15 * S));
        assert_eq!(d.check(t0 + 27 * S), Some(Cut::HandshakeStalled));
    }

    #[test]
    fn a_trickling_handshake_is_cut_at_the_wait_max_however_it_progresses() {
        // One byte every 5 s (a slowloris under the stall limit), or a flight
        // it never acknowledges: both end at 60 s, not before.
        for trickle in [true, false] {
            let t0 = Instant::now();
            let mut d = Deadlines::new(t0, limits(), true);
            let mut t = t0;
            while t < t0 + 60 * S - 5 * S {
                t += 5 * S;
                if trickle {
                    d.received(t);
                } else {
                    d.observed(t, in_flight());
                }
                assert_eq!(d.check(t), None, "cut at {:?}", t - t0);
            }
            d.received(t0 + 60 * S - MS);
            assert_eq!(d.next(), Some((t0 + 60 * S, Cut::HandshakeTooLong)));
            assert_eq!(d.check(t0 + 60 * S - MS), None);
            assert_eq!(d.check(t0 + 60 * S), Some(Cut::HandshakeTooLong));
        }
    }

    #[test]
    fn progress_reported_late_or_twice_never_moves_a_deadline_back() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        d.received(t0 + 5 * S);
        d.received(t0 + 2 * S);
        d.observed(t0 + 6 * S, acked(6 * S));
        assert_eq!(d.next(), Some((t0 + 20 * S, Cut::HandshakeStalled)));
    }

    #[test]
    fn a_slow_handshake_then_waits_for_a_head_from_its_end() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        d.received(t0 + 12 * S);
        d.handshake_done(t0 + 12 * S);
        assert_eq!(d.check(t0 + 16 * S), None, "the head clock starts at 12 s");
        assert_eq!(d.next(), Some((t0 + 22 * S, Cut::HeadStalled)));
        assert_eq!(d.check(t0 + 22 * S), Some(Cut::HeadStalled));
        // A late second report changes nothing.
        d.handshake_done(t0 + 21 * S);
        assert_eq!(d.next(), Some((t0 + 22 * S, Cut::HeadStalled)));
    }

    #[test]
    fn a_first_request_delayed_by_the_network_survives_a_partial_head_does_not() {
        // After the handshake our session tickets and SETTINGS cross the
        // queue: unacknowledged, the head clock waits; acknowledged at 14 s,
        // the client owes its request from then.
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), false);
        d.observed(t0 + 10 * S, in_flight());
        assert_eq!(d.check(t0 + 10 * S), None);
        d.observed(t0 + 20 * S, acked(6 * S));
        assert_eq!(d.next(), Some((t0 + 24 * S, Cut::HeadStalled)));
        assert_eq!(d.check(t0 + 24 * S), Some(Cut::HeadStalled));
        // A head that stops half-way is cut 10 s after its last byte.
        let mut d = Deadlines::new(t0, limits(), false);
        d.received(t0 + S);
        d.observed(t0 + 11 * S, acked(10 * S));
        assert_eq!(d.check(t0 + 11 * S), Some(Cut::HeadStalled));
        // One trickled a byte at a time: at the wait max.
        let mut d = Deadlines::new(t0, limits(), false);
        for i in 1..=59 {
            d.received(t0 + i * S);
        }
        assert_eq!(d.next(), Some((t0 + 60 * S, Cut::HeadTooLong)));
    }

    #[test]
    fn plain_connections_have_no_handshake_deadline() {
        let t0 = Instant::now();
        let d = Deadlines::new(t0, limits(), false);
        assert_eq!(d.next(), Some((t0 + 10 * S, Cut::HeadStalled)));
        assert_eq!(d.check(t0 + 10 * S), Some(Cut::HeadStalled));
        assert!(!Cut::HeadStalled.in_handshake() && Cut::HandshakeTooLong.in_handshake());
    }

    #[test]
    fn http1_waits_for_each_head_after_the_previous_response() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), false);
        d.request_started(t0 + S, Proto::Http1);
        // A download that lasts a minute is not a late head, and progress
        // while serving changes nothing.
        d.received(t0 + 30 * S);
        assert_eq!(d.next(), None);
        assert_eq!(d.check(t0 + 60 * S), None);
        d.request_finished(t0 + 61 * S);
        assert_eq!(d.next(), Some((t0 + 71 * S, Cut::HeadStalled)));
        assert_eq!(d.check(t0 + 70 * S), None);
        assert_eq!(d.check(t0 + 71 * S), Some(Cut::HeadStalled));
        // The next head in time: served again, no deadline.
        d.request_started(t0 + 70 * S, Proto::Http1);
        assert_eq!(d.check(t0 + 200 * S), None);
    }

    #[test]
    fn http1_pipelined_requests_wait_until_the_last_response_is_done() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), false);
        d.request_started(t0, Proto::Http1);
        d.request_started(t0, Proto::Http1);
        d.request_finished(t0 + S);
        assert_eq!(d.next(), None, "one still in flight");
        d.request_finished(t0 + 2 * S);
        assert_eq!(d.next(), Some((t0 + 12 * S, Cut::HeadStalled)));
        // A stray extra report neither underflows nor moves the deadline.
        d.request_finished(t0 + 3 * S);
        assert_eq!(d.next(), Some((t0 + 12 * S, Cut::HeadStalled)));
    }

    #[test]
    fn http2_is_done_with_head_deadlines_after_its_first_request() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        d.handshake_done(t0 + S);
        d.request_started(t0 + 2 * S, Proto::Http2);
        d.request_finished(t0 + 3 * S);
        assert_eq!(d.next(), None);
        assert_eq!(d.check(t0 + 1000 * S), None);
    }

    #[test]
    fn a_huge_limit_means_no_deadline_instead_of_an_overflow() {
        let t0 = Instant::now();
        let huge = Limits {
            handshake_stall: Duration::MAX,
            head_stall: Duration::MAX,
            wait_max: Duration::MAX,
        };
        let mut d = Deadlines::new(t0, huge, true);
        assert_eq!((d.next(), d.check(t0 + 1000 * S)), (None, None));
        d.handshake_done(t0);
        assert_eq!((d.next(), d.check(t0 + 1000 * S)), (None, None));
        // One huge limit: the other one holds.
        let mut d = Deadlines::new(
            t0,
            Limits {
                wait_max: Duration::MAX,
                ..limits()
            },
            true,
        );
        assert_eq!(d.next(), Some((t0 + 15 * S, Cut::HandshakeStalled)));
        d.observed(t0 + S, acked(Duration::MAX));
        assert_eq!(d.next(), Some((t0 + 15 * S, Cut::HandshakeStalled)));
    }

    #[test]
    fn defaults_outlast_a_loaded_handshake_and_bound_a_trickling_one() {
        let l = Limits::default();
        assert_eq!(l.handshake_stall, 15 * S);
        assert_eq!(l.head_stall, 10 * S);
        assert_eq!(l.wait_max, 60 * S);
    }
}
