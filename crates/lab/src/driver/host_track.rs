//! The hosts' path overhead, tracked after `lab up` (issue 13: "at lab up,
//! and continuously").
//!
//! `lab up` measures the hosts' share once (driver/path_probe.rs). A host
//! that gets busier later (or quieter) moves the idle RTT away from the
//! configured one. While the lab runs, the daemon sends an ICMP echo from
//! the first client to the server now and then, **only when the link is
//! idle** (driver/idle_probe.rs), so the probe sees no queue and disturbs no
//! test. Its round trip minus what the link models applied (their current
//! delays and release lateness, from their own reports) is the hosts'
//! overhead now; each direction's share is half of it.
//!
//! The adjustment is bounded and conservative, so a noisy or unlucky probe
//! cannot make the lab faster than configured:
//!
//! * the estimate is the median of the last [`TRACK_WINDOW`] probes, and
//!   nothing changes before [`MIN_SAMPLES`] of them;
//! * the share never exceeds half the measured median (never remove more
//!   than measured) nor [`MAX_HOST_SHARE`] (beyond that the host is
//!   overloaded, which is reported, not hidden);
//! * changes under [`TRACK_HYSTERESIS`] are ignored;
//! * a smaller estimate is applied at once (removing less is always safe),
//!   a larger one at most [`MAX_STEP`] per update (a transient load spike
//!   cannot swing the delay).
//!
//! Sans-IO: [`HostTracker`] takes `now` and measured overheads; the daemon
//! publishes its share through a [`SharedShare`] that the calibrated link
//! models read (driver/calibrate.rs).

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Probes the estimate is the median of.
pub const TRACK_WINDOW: usize = 15;
/// Probes needed before the share may move.
pub const MIN_SAMPLES: usize = 5;
/// Largest share taken out of each direction.
pub const MAX_HOST_SHARE: Duration = Duration::from_millis(1);
/// Estimate changes smaller than this leave the share alone.
pub const TRACK_HYSTERESIS: Duration = Duration::from_micros(10);
/// Largest increase of the share per update.
pub const MAX_STEP: Duration = Duration::from_micros(25);

/// Each direction's share of the hosts' path overhead, in ns, shared
/// between the daemon (writer) and the calibrated link models (readers).
#[derive(Debug, Clone, Default)]
pub struct SharedShare(Arc<AtomicU64>);

impl SharedShare {
    /// A share starting at `d`.
    pub fn new(d: Duration) -> SharedShare {
        let s = SharedShare::default();
        s.set(d);
        s
    }
    /// The current share.
    pub fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
    /// Publishes a new share.
    pub fn set(&self, d: Duration) {
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.0.store(ns, Ordering::Relaxed);
    }
}

/// What the tracking did, for `lab status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTrackReport {
    /// Idle probes answered since lab up (all of them, not just the window).
    pub probes: u64,
    /// Probes discarded because other traffic crossed the link meanwhile.
    pub discarded: u64,
    /// Median overhead (round trip minus the links' delay and lateness)
    /// of the probes in the window, ns; 0 before the first.
    pub measured_ns: u64,
    /// The share taken out of each direction now, ns.
    pub share_ns: u64,
    /// The share `lab up` measured, ns.
    pub initial_ns: u64,
    /// Overhead measured but not taken out (above [`MAX_HOST_SHARE`], or
    /// still being approached [`MAX_STEP`] at a time), per direction, ns.
    pub unremoved_ns: u64,
    /// Times the share changed.
    pub updates: u64,
}

/// The tracker of one lab (both directions share one value, as at lab up).
#[derive(Debug, Clone)]
pub struct HostTracker {
    window: Vec<Duration>,
    next: usize,
    share: Duration,
    report: HostTrackReport,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}

impl HostTracker {
    /// Starts from the share `lab up` measured.
    pub fn new(initial: Duration) -> HostTracker {
        HostTracker {
            window: Vec::with_capacity(TRACK_WINDOW),
            next: 0,
            share: initial,
            report: HostTrackReport {
                share_ns: ns(initial),
                initial_ns: ns(initial),
                ..HostTrackReport::default()
            },
        }
    }

    /// The share each direction takes out now (the daemon reads it through
    /// the `SharedShare`).
    #[cfg(test)]
    pub fn share(&self) -> Duration {
        self.share
    }

    /// A probe that crossed other traffic and was not used.
    pub fn discarded(&mut self) {
        self.report.discarded += 1;
    }

    /// One idle probe's overhead: its round trip minus both links' applied
    /// delays and release lateness. Returns the new share when it changed.
    pub fn sample(&mut self, overhead: Duration) -> Option<Duration> {
        if self.window.len() < TRACK_WINDOW {
            self.window.push(overhead);
        } else {
            self.window[self.next] = overhead;
        }
        self.next = (self.next + 1) % TRACK_WINDOW;
        self.report.probes += 1;
        let mut w = self.window.clone();
        w.sort_unstable();
        let measured = w[w.len() / 2];
        self.report.measured_ns = ns(measured);
        let before = self.share;
        if self.window.len() >= MIN_SAMPLES {
            // Never more than measured, never more than the cap.
            let target = (measured / 2).min(MAX_HOST_SHARE);
            if target.abs_diff(self.share) >= TRACK_HYSTERESIS {
                self.share = if target < self.share {
                    target
                } else {
                    target.min(self.share + MAX_STEP)
                };
            }
        }
        self.report.share_ns = ns(self.share);
        self.report.unremoved_ns = ns((measured / 2).saturating_sub(self.share));
        (self.share != before).then(|| {
            self.report.updates += 1;
            self.share
        })
    }

    /// The current state, for `lab status`.
    pub fn report(&self) -> HostTrackReport {
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: fn(u64) -> Duration = Duration::from_micros;

    #[test]
    fn nothing_moves_before_enough_probes() {
        let mut t = HostTracker::new(US(50));
        for _ in 0..MIN_SAMPLES - 1 {
            assert_eq!(t.sample(US(300)), None);
        }
        assert_eq!(t.share(), US(50));
        assert_eq!(t.sample(US(300)), Some(US(75)), "one bounded step");
    }

    #[test]
    fn increases_are_bounded_decreases_immediate() {
        let mut t = HostTracker::new(US(50));
        let mut shares = Vec::new();
        for _ in 0..10 {
            t.sample(US(300));
            shares.push(t.share());
        }
        // 50 -> 150 us in 25 us steps from the 5th probe on, then steady.
        assert_eq!(shares[4..9], [US(75), US(100), US(125), US(150), US(150)]);
        assert_eq!(t.report().updates, 4);
        // The host got quieter: the share follows the median down at once,
        // as soon as the median moves (it never stays above half of it).
        let mut steps = 0;
        while t.share() > US(20) {
            t.sample(US(40));
            steps += 1;
            assert!(t.share() <= Duration::from_nanos(t.report().measured_ns) / 2);
        }
        assert_eq!(t.share(), US(20));
        assert_eq!(
            steps,
            TRACK_WINDOW / 2 + 1,
            "the median of the window moved"
        );
    }

    #[test]
    fn small_changes_and_outliers_are_ignored() {
        let mut t = HostTracker::new(US(100));
        for i in 0..TRACK_WINDOW as u64 {
            // 205-214 us, and every 4th probe an outlier of 5 ms.
            let o = if i % 4 == 0 {
                US(5000)
            } else {
                US(205 + i % 10)
            };
            assert_eq!(t.sample(o), None, "probe {i}");
        }
        assert_eq!(t.share(), US(100));
    }

    #[test]
    fn overhead_above_the_cap_is_reported_not_removed() {
        let mut t = HostTracker::new(MAX_HOST_SHARE);
        for _ in 0..TRACK_WINDOW {
            t.sample(MAX_HOST_SHARE * 6);
        }
        assert_eq!(t.share(), MAX_HOST_SHARE);
        assert_eq!(t.report().unremoved_ns, ns(MAX_HOST_SHARE * 2));
    }

    #[test]
    fn shared_share_round_trips() {
        let s = SharedShare::new(US(42));
        let r = s.clone();
        s.set(US(7));
        assert_eq!(r.get(), US(7));
    }
}
