//! When a TCP sender has stalled: the rule, sans-IO (`now` and the RTT passed in).
//!
//! A sender **makes progress** when it writes a byte or when the peer acknowledges some of
//! its queued bytes (the driver watches SIOCOUTQ shrink). A sender without progress for the
//! **stall limit** has stalled: the peer reads nothing, or the path is dead, and the run did
//! not happen as asked.
//!
//! A fixed limit (3 s, [`crate::tcp::client::STALL_TIMEOUT`]) is wrong on a bloated path:
//! TCP itself is silent longer there. A segment lost at the tail of a FIFO holding seconds
//! of queue is found by the retransmission timer, whose timeout follows the path's RTT
//! (RFC 6298 (2.3): RTO = SRTT + max(G, 4 RTTVAR), at least 1 s (2.4), doubled at each
//! expiry (5.5)). Until the retransmission is acknowledged no queued byte is: behind report
//! 4's 450-packet modem FIFO (up to 4.6 s of delay) all four upload flows were called
//! stalled at 3 s while their TCPs were waiting on their own timers (docs/experiments.md).
//!
//! So a **path-scaled** rule ([`StallRule::path_scaled`]) calls a sender stalled only after
//! `max(floor, RTO_FACTOR x RTO)`, the RTO computed as RFC 6298 does from the flow's own
//! SRTT and RTTVAR (TCP_INFO), from the sample that gave the **largest** RTO so far: a
//! retransmission may meet the queue at its deepest, not at its average. (The latest sample
//! alone was not enough: behind report 4's SQM-off FIFO a flow with an SRTT of 1.5 s at that
//! moment, RTO 1.8 s, limit 5.3 s, was called stalled while the FIFO's delay swung up to 4.5
//! s: its retransmission's round trip alone took longer than the limit left.)
//! [`RTO_FACTOR`] = 3 is one timeout plus one doubled timeout: the silence of a flow that
//! lost a segment, found it by its timer, and lost the first retransmission as well. Since
//! RTO >= SRTT it also covers one timeout and the retransmission's round trip back through
//! the queue at its deepest (RTO + SRTT), with room.
//! What it does not explain (a second lost retransmission in a row, a peer that stops
//! reading, a dead path) is still a stall. On a path with an RTT well under a second the RTO
//! is RFC 6298's 1 s minimum and the limit stays at the 3 s floor. Before the flow has an
//! RTT sample the floor applies.
//!
//! The RTO here is RFC 6298's, not the kernel's: Linux's minimum is 200 ms (so its timer
//! fires sooner) and its live `tcpi_rto` includes the backoff of the very timeouts a stall
//! is made of, which would let a dead path extend its own limit without end.

use std::time::{Duration, Instant};

/// RFC 6298 (2.4): the RTO is rounded up to at least 1 s.
pub const RTO_MIN: Duration = Duration::from_secs(1);
/// RFC 6298 (2.5): a maximum may be placed on the RTO provided it is at least 60 s.
pub const RTO_MAX: Duration = Duration::from_secs(60);
/// The stall limit of a path-scaled rule is at least this many RTOs (module docs).
pub const RTO_FACTOR: u32 = 3;
/// RFC 6298's clock granularity G; TCP_INFO reports microseconds.
const CLOCK_GRANULARITY: Duration = Duration::from_micros(1);

/// RFC 6298 (2.3), (2.4), (2.5): the retransmission timeout a sender with this smoothed
/// RTT and RTT variation arms, before any backoff.
pub fn rto(srtt: Duration, rttvar: Duration) -> Duration {
    let var = rttvar.saturating_mul(4).max(CLOCK_GRANULARITY);
    srtt.saturating_add(var).clamp(RTO_MIN, RTO_MAX)
}

/// How a sender decides it has stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallRule {
    /// The limit without an RTT (and its lower bound).
    pub floor: Duration,
    /// Scale the limit to the path: at least [`RTO_FACTOR`] x the RFC 6298 RTO of the
    /// flow's RTT. A server's idle limit (a bound on how long a peer may hold a slot,
    /// docs/security.md) is fixed.
    pub follow_rto: bool,
}

impl StallRule {
    /// Stalled after `floor`, whatever the path.
    pub fn fixed(floor: Duration) -> StallRule {
        StallRule {
            floor,
            follow_rto: false,
        }
    }

    /// Stalled after `max(floor, RTO_FACTOR x RTO)` (module docs).
    pub fn path_scaled(floor: Duration) -> StallRule {
        StallRule {
            floor,
            follow_rto: true,
        }
    }
}

/// A stall, as the sender saw it: how long it was silent and the limit it crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// Time since the last progress.
    pub silent: Duration,
    /// The limit in force.
    pub limit: Duration,
    /// The flow's RTT when the limit followed it: `(srtt, rttvar, rto)`; `None` when the
    /// floor applied (no RTT sample, a fixed rule, or an RTO below a third of the floor).
    pub rtt: Option<(Duration, Duration, Duration)>,
}

impl std::fmt::Display for Stall {
    /// `"3.0 s"`, or `"17.1 s (3 x the largest RTO its RTT implied, 5.7 s: SRTT 4.700 s,
    /// RTTVAR 0.250 s)"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1} s", self.silent.as_secs_f64())?;
        if let Some((srtt, var, rto)) = self.rtt {
            write!(
                f,
                " ({RTO_FACTOR} x the largest RTO its RTT implied, {:.1} s: SRTT {:.3} s, RTTVAR {:.3} s)",
                rto.as_secs_f64(),
                srtt.as_secs_f64(),
                var.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

/// One sender's stall watch: its last progress and latest RTT.
#[derive(Debug, Clone)]
pub struct StallWatch {
    rule: StallRule,
    last_progress: Instant,
    rtt: Option<(Duration, Duration)>,
}

impl StallWatch {
    /// A watch whose sender last made progress at `now` (its start).
    pub fn new(rule: StallRule, now: Instant) -> StallWatch {
        StallWatch {
            rule,
            last_progress: now,
            rtt: None,
        }
    }

    /// The sender wrote a byte, or some queued bytes were acknowledged, at `now`.
    pub fn on_progress(&mut self, now: Instant) {
        self.last_progress = self.last_progress.max(now);
    }

    /// A sample of the flow's smoothed RTT and RTT variation (TCP_INFO): the watch keeps
    /// the one with the largest RTO. A zero SRTT is no sample (the kernel has none yet) and
    /// is ignored.
    pub fn on_rtt(&mut self, srtt: Duration, rttvar: Duration) {
        if srtt.is_zero() {
            return;
        }
        if self.rtt.is_none_or(|(s, v)| rto(srtt, rttvar) > rto(s, v)) {
            self.rtt = Some((srtt, rttvar));
        }
    }

    /// Time since the last progress.
    pub fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_progress)
    }

    /// Whether the silence has reached the floor: the driver then reads the flow's RTT
    /// once more (one TCP_INFO call) before [`Self::stalled`] decides.
    pub fn past_floor(&self, now: Instant) -> bool {
        self.silent_for(now) >= self.rule.floor
    }

    /// The limit in force, and the RTT it follows when it follows one.
    fn limit(&self) -> (Duration, Option<(Duration, Duration, Duration)>) {
        let floor = self.rule.floor;
        match self.rtt.filter(|_| self.rule.follow_rto) {
            Some((srtt, var)) => {
                let r = rto(srtt, var);
                let scaled = r.saturating_mul(RTO_FACTOR);
                if scaled > floor {
                    (scaled, Some((srtt, var, r)))
                } else {
                    (floor, None)
                }
            }
            None => (floor, None),
        }
    }

    /// The stall at `now`, if the sender has been silent for the limit.
    pub fn stalled(&self, now: Instant) -> Option<Stall> {
        let silent = self.silent_for(now);
        let (limit, rtt) = self.limit();
        (silent >= limit).then_some(Stall { silent, limit, rtt })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_rto_is_rfc_6298s() {
        // SRTT + 4 RTTVAR, at least 1 s, at most 60 s.
        assert_eq!(rto(4700 * MS, 250 * MS), 5700 * MS);
        assert_eq!(rto(30 * MS, 10 * MS), S);
        assert_eq!(rto(50 * S, 5 * S), 60 * S);
        // G: a zero variation still adds the clock granularity.
        assert_eq!(rto(2 * S, Duration::ZERO), 2 * S + Duration::from_micros(1));
    }

    #[test]
    fn a_short_path_keeps_the_3_s_floor_and_a_real_stall_is_flagged() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(StallRule::path_scaled(3 * S), t0);
        // A lab path of 30 ms: the RTO is 1 s, three of them are the floor.
        w.on_rtt(30 * MS, 10 * MS);
        w.on_progress(t0 + S);
        assert_eq!(w.stalled(t0 + S + 2999 * MS), None);
        assert!(!w.past_floor(t0 + S + 2999 * MS));
        let st = w
            .stalled(t0 + 4 * S)
            .expect("3 s silent on a 30 ms path is a stall");
        assert_eq!((st.silent, st.limit, st.rtt), (3 * S, 3 * S, None));
        assert_eq!(st.to_string(), "3.0 s");
    }

    #[test]
    fn a_silence_tcps_own_backoff_explains_is_not_a_stall() {
        // Report 4's SQM-off uplink: SRTT 4.7 s behind the modem's FIFO, RTTVAR 0.25 s:
        // RTO 5.7 s, limit 17.1 s. A flow silent for 10 s (one timeout and the
        // retransmission's round trip) is waiting on its own timer, not stalled.
        let t0 = Instant::now();
        let mut w = StallWatch::new(StallRule::path_scaled(3 * S), t0);
        w.on_rtt(4700 * MS, 250 * MS);
        assert!(
            w.past_floor(t0 + 3 * S),
            "the driver looks at the RTT from here on"
        );
        assert_eq!(w.stalled(t0 + 10 * S), None);
        assert_eq!(w.stalled(t0 + 17 * S), None);
        // Progress restarts the clock.
        w.on_progress(t0 + 17 * S);
        assert_eq!(w.stalled(t0 + 30 * S), None);
        // Silent past 3 RTOs: a stall even on this path, and the message says why so long.
        let st = w.stalled(t0 + 17 * S + 17100 * MS).expect("past 3 x RTO");
        assert_eq!(st.limit, 17100 * MS);
        assert_eq!(st.rtt, Some((4700 * MS, 250 * MS, 5700 * MS)));
        assert_eq!(
            st.to_string(),
            "17.1 s (3 x the largest RTO its RTT implied, 5.7 s: SRTT 4.700 s, RTTVAR 0.250 s)"
        );
    }

    #[test]
    fn the_largest_rto_the_flow_has_shown_sets_the_limit() {
        // The SQM-off FIFO swings: SRTT 3.2 s at its deepest, 1.5 s later. A retransmission
        // can meet the deep queue again, so the limit keeps 3 x RTO(3.2 s, 0.3 s) = 13.2 s.
        let t0 = Instant::now();
        let mut w = StallWatch::new(StallRule::path_scaled(3 * S), t0);
        w.on_rtt(800 * MS, 200 * MS);
        w.on_rtt(3200 * MS, 300 * MS);
        w.on_rtt(1517 * MS, 61 * MS);
        assert_eq!(
            w.stalled(t0 + 6300 * MS),
            None,
            "RTO 1.8 s + 4.5 s of queue"
        );
        let st = w
            .stalled(t0 + 13200 * MS)
            .expect("past 3 x the largest RTO");
        assert_eq!(st.rtt, Some((3200 * MS, 300 * MS, 4400 * MS)));
        assert_eq!(st.limit, 13200 * MS);
    }

    #[test]
    fn a_fixed_rule_or_a_flow_without_an_rtt_keeps_the_floor() {
        let t0 = Instant::now();
        let mut fixed = StallWatch::new(StallRule::fixed(3 * S), t0);
        fixed.on_rtt(4700 * MS, 250 * MS);
        assert!(
            fixed.stalled(t0 + 3 * S).is_some(),
            "a fixed rule ignores the RTT"
        );
        let mut scaled = StallWatch::new(StallRule::path_scaled(3 * S), t0);
        // No sample yet (the kernel reports 0): the floor.
        scaled.on_rtt(Duration::ZERO, Duration::ZERO);
        assert!(scaled.stalled(t0 + 3 * S).is_some());
        // A server's 120 s idle limit is above any RTO the RTT of a lab implies.
        let mut server = StallWatch::new(StallRule::fixed(120 * S), t0);
        server.on_rtt(4700 * MS, 250 * MS);
        assert!(server.stalled(t0 + 119 * S).is_none());
        assert!(server.stalled(t0 + 120 * S).is_some());
    }

    #[test]
    fn a_dead_path_cannot_stretch_the_limit_past_the_rto_cap() {
        // Even an absurd RTT sample gives at most 3 x 60 s.
        let t0 = Instant::now();
        let mut w = StallWatch::new(StallRule::path_scaled(3 * S), t0);
        w.on_rtt(1000 * S, 1000 * S);
        assert_eq!(w.stalled(t0 + 179 * S), None);
        assert_eq!(w.stalled(t0 + 180 * S).map(|s| s.limit), Some(180 * S));
    }
}
