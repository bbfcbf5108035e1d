//! Calibrated delay (issue 13): the emulator takes its own overhead out of
//! the configured delay, so an idle round trip measured by ping or irtt
//! equals the configured one instead of sitting 0.2-0.4 ms above it.
//!
//! Two parts of the overhead are measured:
//!
//! * **Host path** (at `lab up`, [`crate::driver::path_probe`], then tracked
//!   by idle probes while the lab runs, [`crate::driver::host_track`]): the time
//!   from writing a packet into a host's TUN until its answer is read back:
//!   the host's receive and send paths plus the forwarding thread's wake-up
//!   on input. A ping's round trip crosses each side's host path once, so
//!   each direction is trimmed by half of (client side + server side).
//! * **Forwarding** (continuously, from the thread's own timestamps): the
//!   median release lateness of the last [`WINDOW`] packets, i.e. how much
//!   later than scheduled the thread writes packets out. Lateness does not
//!   depend on the schedule, so releasing earlier by it does not feed back.
//!
//! What cannot be removed is reported: overhead larger than the configured
//! delay (a delay cannot go below zero), forwarding lateness above
//! [`MAX_FORWARDING_TRIM`] (that is overload, not overhead), and the spread
//! (a median is taken out, not each packet's own error).
//!
//! Sans-IO: [`DelayTrim`] takes `now`; [`Calibrated`] wraps a link model and
//! calls it on every release. Unit-tested with a virtual clock below.

use crate::driver::host_track::SharedShare;
use crate::model::LinkModel;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Release-lateness samples the forwarding estimate is the median of.
pub const WINDOW: usize = 64;
/// How often the applied delay is recomputed.
pub const UPDATE_EVERY: Duration = Duration::from_millis(100);
/// Largest forwarding lateness taken out: beyond it the thread is overloaded
/// and the user should see the lateness, not have it hidden.
pub const MAX_FORWARDING_TRIM: Duration = Duration::from_millis(1);
/// Changes of the estimate smaller than this leave the applied delay alone.
const HYSTERESIS: Duration = Duration::from_nanos(500);

/// What a direction's calibration did, for `lab status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimReport {
    /// The delay the user configured for this direction.
    pub configured_ns: u64,
    /// This direction's share of the hosts' path overhead (from `lab up`).
    pub host_path_ns: u64,
    /// The forwarding thread's median release lateness (recent packets).
    pub forwarding_ns: u64,
    /// The delay the link model applies now.
    pub applied_ns: u64,
    /// Overhead that could not be taken out: more than the configured delay,
    /// or lateness above the 1 ms cap.
    pub unremoved_ns: u64,
    /// Lateness samples in the current window.
    pub samples: u32,
}

/// The delay of one direction, trimmed by the measured overhead.
#[derive(Debug, Clone)]
pub struct DelayTrim {
    configured: Duration,
    host_share: Duration,
    window: [Duration; WINDOW],
    filled: usize,
    next: usize,
    forwarding: Duration,
    next_update: Duration,
    applied: Duration,
}

impl DelayTrim {
    /// A direction configured with `configured` delay whose share of the
    /// hosts' path overhead is `host_share`.
    pub fn new(configured: Duration, host_share: Duration) -> DelayTrim {
        let mut t = DelayTrim {
            configured,
            host_share,
            window: [Duration::ZERO; WINDOW],
            filled: 0,
            next: 0,
            forwarding: Duration::ZERO,
            next_update: Duration::ZERO,
            applied: configured,
        };
        t.applied = t.target();
        t
    }

    /// The delay the model should apply now.
    pub fn applied(&self) -> Duration {
        self.applied
    }

    /// The hosts' share changed (tracked while the lab runs); applied at
    /// the next update.
    pub fn set_host_share(&mut self, share: Duration) {
        self.host_share = share;
    }

    /// A packet was released `lateness` after the model's time for it.
    pub fn released(&mut self, lateness: Duration) {
        self.window[self.next] = lateness;
        self.next = (self.next + 1) % WINDOW;
        self.filled = (self.filled + 1).min(WINDOW);
    }

    /// Recomputes the estimate every [`UPDATE_EVERY`]; returns the new delay
    /// when it changed.
    pub fn tick(&mut self, now: Duration) -> Option<Duration> {
        if now < self.next_update {
            return None;
        }
        self.next_update = now + UPDATE_EVERY;
        if self.filled == 0 {
            return None;
        }
        let mut w = self.window;
        let w = &mut w[..self.filled];
        w.sort_unstable();
        self.forwarding = w[w.len() / 2];
        let target = self.target();
        let moved = target.abs_diff(self.applied) >= HYSTERESIS;
        moved.then(|| {
            self.applied = target;
            target
        })
    }

    fn overhead(&self) -> Duration {
        self.host_share + self.forwarding.min(MAX_FORWARDING_TRIM)
    }

    fn target(&self) -> Duration {
        self.configured.saturating_sub(self.overhead())
    }

    /// The current state, for `lab status`.
    pub fn report(&self) -> TrimReport {
        let ns = |d: Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
        let capped = self.forwarding.saturating_sub(MAX_FORWARDING_TRIM);
        TrimReport {
            configured_ns: ns(self.configured),
            host_path_ns: ns(self.host_share),
            forwarding_ns: ns(self.forwarding),
            applied_ns: ns(self.applied),
            unremoved_ns: ns(self.overhead().saturating_sub(self.configured) + capped),
            samples: self.filled as u32,
        }
    }
}

/// A link model whose delay is trimmed by the measured overhead. The
/// lateness of each release is measured here exactly as the driver measures
/// it (time of `dequeue` minus the model's `next_event`).
pub struct Calibrated {
    inner: Box<dyn LinkModel>,
    trim: DelayTrim,
    /// The hosts' share as the daemon tracks it (driver/host_track.rs).
    share: SharedShare,
}

impl std::fmt::Debug for Calibrated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calibrated")
            .field("trim", &self.trim)
            .finish_non_exhaustive()
    }
}

impl Calibrated {
    /// Wraps `inner` (whose current delay is the configured one) and applies
    /// the trimmed delay at once. A model without a settable delay is
    /// returned unwrapped.
    pub fn wrap(inner: Box<dyn LinkModel>, host_share: Duration) -> Box<dyn LinkModel> {
        Calibrated::wrap_tracked(inner, SharedShare::new(host_share))
    }

    /// As [`Calibrated::wrap`], with the hosts' share read from `share`
    /// at every update, so the daemon's tracking reaches the model.
    pub fn wrap_tracked(mut inner: Box<dyn LinkModel>, share: SharedShare) -> Box<dyn LinkModel> {
        let Some(configured) = inner.delay() else {
            return inner;
        };
        let trim = DelayTrim::new(configured, share.get());
        inner.set_delay(trim.applied());
        Box::new(Calibrated { inner, trim, share })
    }
}

impl LinkModel for Calibrated {
    fn enqueue(&mut self, now: Duration, packet: Vec<u8>) {
        self.inner.enqueue(now, packet);
    }
    fn dequeue(&mut self, now: Duration) -> Option<Vec<u8>> {
        let due = self.inner.next_event();
        let p = self.inner.dequeue(now)?;
        if let Some(due) = due {
            self.trim.released(now.saturating_sub(due));
        }
        self.trim.set_host_share(self.share.get());
        if let Some(d) = self.trim.tick(now) {
            self.inner.set_delay(d);
        }
        Some(p)
    }
    fn next_event(&self) -> Option<Duration> {
        self.inner.next_event()
    }
    fn counters(&self) -> crate::model::LinkCounters {
        self.inner.counters()
    }
    fn delay(&self) -> Option<Duration> {
        Some(self.trim.configured)
    }
    fn set_delay(&mut self, _delay: Duration) {}
    fn calibration(&self) -> Option<TrimReport> {
        Some(self.trim.report())
    }
    fn set_stage_rate(
        &mut self,
        now: Duration,
        stage: &str,
        rate: Option<bloatlab_units::BitRate>,
    ) -> std::result::Result<String, String> {
        self.inner.set_stage_rate(now, stage, rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: fn(u64) -> Duration = Duration::from_micros;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn host_share_is_taken_out_at_once() {
        let t = DelayTrim::new(MS(20), US(60));
        assert_eq!(t.applied(), MS(20) - US(60));
        let r = t.report();
        assert_eq!((r.host_path_ns, r.unremoved_ns), (60_000, 0));
    }

    #[test]
    fn median_lateness_is_removed_after_the_next_update() {
        let mut t = DelayTrim::new(MS(20), US(50));
        assert_eq!(t.tick(Duration::ZERO), None, "no samples yet");
        // Mostly 10 us late with a few 5 ms outliers: the median ignores them.
        for i in 0..WINDOW {
            t.released(if i % 10 == 0 { MS(5) } else { US(10) });
        }
        assert_eq!(t.tick(MS(50)), None, "not time to update yet");
        assert_eq!(t.tick(MS(100)), Some(MS(20) - US(60)));
        assert_eq!(t.report().forwarding_ns, 10_000);
        // Unchanged estimate: nothing to apply.
        assert_eq!(t.tick(MS(200)), None);
    }

    #[test]
    fn overhead_beyond_the_delay_or_the_cap_is_reported_not_hidden() {
        let t = DelayTrim::new(US(40), US(60));
        assert_eq!(t.applied(), Duration::ZERO);
        assert_eq!(t.report().unremoved_ns, 20_000);
        let mut t = DelayTrim::new(MS(100), Duration::ZERO);
        for _ in 0..WINDOW {
            t.released(MS(3));
        }
        assert_eq!(t.tick(MS(100)), Some(MS(99)));
        assert_eq!(t.report().unremoved_ns, 2_000_000);
    }

    #[test]
    fn the_window_forgets_old_lateness() {
        let mut t = DelayTrim::new(MS(10), Duration::ZERO);
        for _ in 0..WINDOW {
            t.released(US(300));
        }
        assert_eq!(t.tick(MS(100)), Some(MS(10) - US(300)));
        for _ in 0..WINDOW {
            t.released(US(2));
        }
        assert_eq!(t.tick(MS(200)), Some(MS(10) - US(2)));
    }

    /// A model that releases each packet exactly `delay` after arrival,
    /// recording the delay it was given.
    struct Line {
        delay: Duration,
        q: std::collections::VecDeque<(Duration, Vec<u8>)>,
    }
    impl LinkModel for Line {
        fn enqueue(&mut self, now: Duration, p: Vec<u8>) {
            self.q.push_back((now + self.delay, p));
        }
        fn dequeue(&mut self, now: Duration) -> Option<Vec<u8>> {
            if self.q.front()?.0 <= now {
                self.q.pop_front().map(|(_, p)| p)
            } else {
                None
            }
        }
        fn next_event(&self) -> Option<Duration> {
            self.q.front().map(|(t, _)| *t)
        }
        fn counters(&self) -> crate::model::LinkCounters {
            crate::model::LinkCounters::default()
        }
        fn delay(&self) -> Option<Duration> {
            Some(self.delay)
        }
        fn set_delay(&mut self, d: Duration) {
            self.delay = d;
        }
    }

    /// Virtual clock: a driver that always wakes 30 us late. After the first
    /// update the packets leave at the configured time again.
    #[test]
    fn a_late_driver_is_compensated_in_virtual_time() {
        let line = Line {
            delay: MS(5),
            q: Default::default(),
        };
        let mut m = Calibrated::wrap(Box::new(line), US(40));
        let mut exits = Vec::new();
        for i in 0..200u64 {
            let sent = MS(i * 2);
            m.enqueue(sent, vec![0]);
            let due = m.next_event().unwrap();
            let woke = due + US(30);
            assert!(m.dequeue(woke).is_some());
            exits.push(woke - sent);
        }
        assert_eq!(exits[0], MS(5) - US(40) + US(30));
        // From the first update on: 5 ms - 40 us host share, lateness removed.
        assert_eq!(*exits.last().unwrap(), MS(5) - US(40));
        let r = m.calibration().unwrap();
        assert_eq!((r.forwarding_ns, r.configured_ns), (30_000, 5_000_000));
    }
}
