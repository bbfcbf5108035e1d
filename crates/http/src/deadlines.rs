//! The two deadlines a connection must meet before it is worth a slot: the
//! TLS handshake (`--handshake-timeout`) and a request head
//! (`--http-header-timeout`). Sans-IO: the driver ([`crate::conn`]) reports
//! what happened with the time it happened, asks [`Deadlines::next`] when to
//! look again, and [`Deadlines::check`] whether, and why, to cut.
//!
//! Why these are not the iperf service's `--header-timeout` (4 s): that one
//! waits for 24 bytes that fit one segment. Through a bloated link (a 1-2 s
//! loaded RTT, losses backing off the retransmission timer) a TLS handshake
//! takes several round trips and can need well over 4 s, and the RPM test
//! opens its load connections exactly when the link is loaded. A deadline
//! that cut them would break the measurement this service exists for; an
//! attacker holding connections half-open is still cut within seconds.
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

use std::time::{Duration, Instant};

/// The two deadlines, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From accept to a finished TLS handshake.
    pub handshake: Duration,
    /// From the start of a wait for a request head (above) to the head.
    pub request_head: Duration,
}

impl Default for Limits {
    /// The defaults of `bloatlab server` (docs/http.md).
    fn default() -> Limits {
        Limits {
            handshake: Duration::from_secs(15),
            request_head: Duration::from_secs(10),
        }
    }
}

/// Which deadline cut a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Cut {
    #[error("TLS handshake not done within --handshake-timeout")]
    Handshake,
    #[error("request head not received within --http-header-timeout")]
    RequestHead,
}

/// The protocol a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Http1,
    Http2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Handshake {
        since: Instant,
    },
    AwaitingHead {
        since: Instant,
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
        let phase = if tls {
            Phase::Handshake { since: now }
        } else {
            Phase::AwaitingHead { since: now }
        };
        Deadlines {
            limits,
            phase,
            in_flight: 0,
            multiplexed: false,
        }
    }

    /// The TLS handshake finished at `now`: the wait for the first head
    /// starts. Ignored outside the handshake.
    pub fn handshake_done(&mut self, now: Instant) {
        if let Phase::Handshake { .. } = self.phase {
            self.phase = Phase::AwaitingHead { since: now };
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
            self.phase = Phase::AwaitingHead { since: now };
        }
    }

    /// The deadline running now and what it guards, if any. `None` also when
    /// the deadline is too far to be represented (no panic on a huge limit).
    pub fn next(&self) -> Option<(Instant, Cut)> {
        match self.phase {
            Phase::Handshake { since } => since
                .checked_add(self.limits.handshake)
                .map(|t| (t, Cut::Handshake)),
            Phase::AwaitingHead { since } => since
                .checked_add(self.limits.request_head)
                .map(|t| (t, Cut::RequestHead)),
            Phase::Serving => None,
        }
    }

    /// Whether the connection must be cut at `now`, and why. A deadline is
    /// met only strictly before it: at the deadline itself, the cut.
    pub fn check(&self, now: Instant) -> Option<Cut> {
        self.next().and_then(|(at, cut)| (now >= at).then_some(cut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    fn limits() -> Limits {
        Limits {
            handshake: 15 * S,
            request_head: 10 * S,
        }
    }

    #[test]
    fn a_silent_tls_client_is_cut_at_the_handshake_deadline_not_before() {
        let t0 = Instant::now();
        let d = Deadlines::new(t0, limits(), true);
        assert_eq!(d.next(), Some((t0 + 15 * S, Cut::Handshake)));
        assert_eq!(d.check(t0), None);
        assert_eq!(d.check(t0 + 15 * S - MS), None);
        assert_eq!(d.check(t0 + 15 * S), Some(Cut::Handshake));
        assert_eq!(d.check(t0 + 100 * S), Some(Cut::Handshake));
    }

    #[test]
    fn a_slow_handshake_within_its_deadline_then_waits_for_a_head_from_its_end() {
        // 12 s of handshake through a loaded queue: over the iperf header
        // timeout (4 s) and the head deadline (10 s), within its own.
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), true);
        d.handshake_done(t0 + 12 * S);
        assert_eq!(d.check(t0 + 16 * S), None, "the head clock starts at 12 s");
        assert_eq!(d.next(), Some((t0 + 22 * S, Cut::RequestHead)));
        assert_eq!(d.check(t0 + 22 * S), Some(Cut::RequestHead));
        // A late second report changes nothing.
        d.handshake_done(t0 + 21 * S);
        assert_eq!(d.next(), Some((t0 + 22 * S, Cut::RequestHead)));
    }

    #[test]
    fn plain_connections_have_no_handshake_deadline() {
        let t0 = Instant::now();
        let d = Deadlines::new(t0, limits(), false);
        assert_eq!(d.next(), Some((t0 + 10 * S, Cut::RequestHead)));
        assert_eq!(d.check(t0 + 10 * S), Some(Cut::RequestHead));
    }

    #[test]
    fn http1_waits_for_each_head_after_the_previous_response() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0, limits(), false);
        d.request_started(t0 + S, Proto::Http1);
        // A download that lasts a minute is not a late head.
        assert_eq!(d.next(), None);
        assert_eq!(d.check(t0 + 60 * S), None);
        d.request_finished(t0 + 61 * S);
        assert_eq!(d.next(), Some((t0 + 71 * S, Cut::RequestHead)));
        assert_eq!(d.check(t0 + 70 * S), None);
        assert_eq!(d.check(t0 + 71 * S), Some(Cut::RequestHead));
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
        assert_eq!(d.next(), Some((t0 + 12 * S, Cut::RequestHead)));
        // A stray extra report neither underflows nor moves the deadline.
        d.request_finished(t0 + 3 * S);
        assert_eq!(d.next(), Some((t0 + 12 * S, Cut::RequestHead)));
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
            handshake: Duration::MAX,
            request_head: Duration::MAX,
        };
        let mut d = Deadlines::new(t0, huge, true);
        assert_eq!((d.next(), d.check(t0 + 1000 * S)), (None, None));
        d.handshake_done(t0);
        assert_eq!((d.next(), d.check(t0 + 1000 * S)), (None, None));
    }

    #[test]
    fn defaults_outlast_a_loaded_handshake_and_are_apart_from_the_iperf_header_timeout() {
        let l = Limits::default();
        assert_eq!(l.handshake, 15 * S);
        assert_eq!(l.request_head, 10 * S);
    }
}
