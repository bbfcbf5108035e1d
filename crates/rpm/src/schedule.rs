//! When to send probes, draft-ietf-ippm-responsiveness-09 section 5.3: foreign and self
//! probes in equal numbers, interleaved and spread evenly, at most MPS probes per second
//! (both kinds together, see [`crate::params`]) and at most PTC of the measured capacity.
//!
//! The probe budget in bytes per second is `PTC × capacity`; a pair costs
//! [`FOREIGN_PROBE_BYTES`] + [`SELF_PROBE_BYTES`] (the draft's estimates), so pairs per
//! second = `min(MPS / 2, PTC × capacity / 6000)`. The two kinds alternate, one every
//! `1 / (2 × pairs per second)`. Until any capacity has been measured no probe is sent
//! (there is no budget to spend), and the schedule looks again after [`NO_BUDGET_RETRY`].
//!
//! A late caller gets one probe, never a burst to catch up: the next slot is counted from
//! now when slots were missed.

use std::time::Duration;

use crate::params::{FOREIGN_PROBE_BYTES, Params, SELF_PROBE_BYTES};

/// How soon to look again when no capacity has been measured yet.
pub const NO_BUDGET_RETRY: Duration = Duration::from_millis(100);

/// Which probe a slot is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// A new connection: TCP and TLS handshakes, 1-byte GET.
    Foreign,
    /// A 1-byte GET on a load-generating connection.
    SelfProbe,
}

/// The probe clock. The spacing follows the capacity measured at each call, so a slow
/// start (little measured yet, few probes allowed) does not hold back the probes once
/// the load is up: the next slot is always the last one plus the spacing allowed now.
#[derive(Debug, Clone)]
pub struct Schedule {
    start: Duration,
    last: Option<Duration>,
    next_hint: Duration,
    kind: Slot,
    max_pairs_per_s: f64,
    capacity_share: f64,
}

impl Schedule {
    /// A schedule whose first slot (a foreign probe) is at `start`.
    pub fn new(start: Duration, params: &Params) -> Schedule {
        Schedule {
            start,
            last: None,
            next_hint: start,
            kind: Slot::Foreign,
            max_pairs_per_s: f64::from(params.max_probes_per_second) / 2.0,
            capacity_share: params.probe_capacity,
        }
    }

    /// When the next slot is, with the capacity known at the last call.
    pub fn next_at(&self) -> Duration {
        self.next_hint
    }

    /// Probe pairs per second allowed with `capacity` bytes per second measured.
    pub fn pairs_per_second(&self, capacity: f64) -> f64 {
        let budget = self.capacity_share * capacity.max(0.0);
        (budget / (FOREIGN_PROBE_BYTES + SELF_PROBE_BYTES) as f64).min(self.max_pairs_per_s)
    }

    /// The slot due at `now` (if any) given the capacity measured so far in bytes per
    /// second; moves the clock on.
    pub fn due(&mut self, now: Duration, capacity: f64) -> Option<Slot> {
        let pairs = self.pairs_per_second(capacity);
        if !(pairs.is_finite() && pairs > 0.0) {
            self.next_hint = now.max(self.start) + NO_BUDGET_RETRY;
            return None;
        }
        let spacing = Duration::from_secs_f64(1.0 / (2.0 * pairs));
        let next = self.last.map_or(self.start, |l| l + spacing);
        if now < next {
            self.next_hint = next;
            return None;
        }
        // Missed by more than a slot: this one counts from now (no burst to catch up).
        let at = if now - next >= spacing { now } else { next };
        self.last = Some(at);
        self.next_hint = at + spacing;
        let slot = self.kind;
        self.kind = match slot {
            Slot::Foreign => Slot::SelfProbe,
            Slot::SelfProbe => Slot::Foreign,
        };
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probes of each kind sent over `secs` seconds, polled every millisecond.
    fn count(capacity: f64, secs: u64, params: &Params) -> (usize, usize) {
        let mut s = Schedule::new(Duration::ZERO, params);
        let (mut f, mut l) = (0, 0);
        for ms in 0..secs * 1000 {
            match s.due(Duration::from_millis(ms), capacity) {
                Some(Slot::Foreign) => f += 1,
                Some(Slot::SelfProbe) => l += 1,
                None => {}
            }
        }
        (f, l)
    }

    #[test]
    fn a_fast_link_is_capped_at_mps_probes_per_second() {
        // 1 Gbit/s = 125 MB/s: PTC allows 5 % / 6000 B = 1041 pairs/s; MPS caps at 50.
        let (f, l) = count(125e6, 10, &Params::default());
        assert_eq!((f, l), (500, 500));
    }

    #[test]
    fn a_slow_link_is_capped_at_ptc_of_capacity() {
        // 20 Mbit/s = 2.5 MB/s: 5 % is 125 kB/s, 20.83 pairs/s, 41.67 probes/s.
        let p = Params::default();
        let s = Schedule::new(Duration::ZERO, &p);
        assert!((s.pairs_per_second(2.5e6) - 125_000.0 / 6000.0).abs() < 1e-9);
        let (f, l) = count(2.5e6, 12, &p);
        // 12 s at 1/41.67 s: 500 slots (+1 at t = 0), alternating.
        assert!((f + l).abs_diff(501) <= 1, "{f} {l}");
        assert!(f.abs_diff(l) <= 1, "equal numbers: {f} {l}");
        // Bytes: 250 foreign x 5000 + 250 self x 1000 = 1.5 MB in 12 s = 125 kB/s.
        let bytes = f as f64 * 5000.0 + l as f64 * 1000.0;
        assert!(bytes / 12.0 <= 125_000.0 * 1.01, "{}", bytes / 12.0);
        // A lower PTC and MPS are honoured.
        let q = Params {
            probe_capacity: 0.01,
            ..p
        };
        assert!(
            (Schedule::new(Duration::ZERO, &q).pairs_per_second(2.5e6) - 25_000.0 / 6000.0).abs()
                < 1e-9
        );
        let q = Params {
            max_probes_per_second: 10,
            ..p
        };
        assert_eq!(count(125e6, 10, &q), (50, 50));
    }

    #[test]
    fn kinds_alternate_starting_with_foreign() {
        let mut s = Schedule::new(Duration::from_secs(1), &Params::default());
        assert_eq!(s.due(Duration::ZERO, 1e9), None, "not yet");
        let got: Vec<Slot> = (0..4)
            .filter_map(|i| s.due(Duration::from_secs(1) + Duration::from_millis(10 * i), 1e9))
            .collect();
        assert_eq!(
            got,
            [
                Slot::Foreign,
                Slot::SelfProbe,
                Slot::Foreign,
                Slot::SelfProbe
            ]
        );
    }

    #[test]
    fn the_spacing_follows_the_capacity_measured_now() {
        // A tiny early estimate (1 kB/s: one pair per 120 s) must not hold the next
        // probe back once the capacity is known.
        let mut s = Schedule::new(Duration::ZERO, &Params::default());
        assert_eq!(s.due(Duration::ZERO, 1e3), Some(Slot::Foreign));
        assert_eq!(s.due(Duration::from_millis(100), 1e3), None);
        assert_eq!(s.next_at(), Duration::from_secs(60));
        // 125 MB/s: 100 probes/s, one every 10 ms after the last.
        assert_eq!(
            s.due(Duration::from_millis(100), 125e6),
            Some(Slot::SelfProbe)
        );
        assert_eq!(s.next_at(), Duration::from_millis(110));
    }

    #[test]
    fn no_capacity_no_probe_and_a_late_caller_gets_no_burst() {
        let mut s = Schedule::new(Duration::ZERO, &Params::default());
        assert_eq!(s.due(Duration::ZERO, 0.0), None);
        assert_eq!(s.next_at(), NO_BUDGET_RETRY);
        // 100 probes/s: one every 10 ms. A caller 1 s late gets one probe, and the next
        // slot is 10 ms after it, not 99 slots at once.
        assert!(s.due(Duration::from_millis(100), 1e9).is_some());
        assert!(s.due(Duration::from_millis(1100), 1e9).is_some());
        assert_eq!(s.next_at(), Duration::from_millis(1110));
        assert_eq!(s.due(Duration::from_millis(1100), 1e9), None);
    }
}
