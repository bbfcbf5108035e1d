//! Sans-IO datagram pacer: when may the next datagram leave?
//!
//! The pacer never reads a clock. The driver passes `now` (time since the
//! test started, on any monotonic clock) and gets back either "send `n`
//! datagrams now" or "wait until `t`". Deadlines come from an exact schedule,
//! `deadline(k) = anchor + k · len·8 / rate`, computed in integer nanoseconds
//! from the datagram index, so rounding never accumulates into rate drift
//! (1470 B at 10 Mbit/s is exactly 1176 µs apart, 1470 B at 3 Mbit/s is
//! 3920 µs apart, and 100 B at 3 bit/s still averages right).
//!
//! **Bounded catch-up.** If the driver falls behind (scheduler latency, a
//! full socket buffer) by more than `max_lag`, the schedule is re-anchored at
//! `now − max_lag`: at most `max_lag` worth of datagrams go out back to back,
//! and the time lost beyond that is not made up later. iperf 2's "kalman
//! adjust" loop catches up without a bound, which turns one stall into a
//! line-rate burst; we trade a slightly lower average after a long stall for
//! a sending pattern that never exceeds `-b` by more than `max_lag` of data.
//!
//! An unpaced pacer (`-b 0` or a rate too high to schedule) always answers
//! "send now", letting the driver batch with `sendmmsg`.

use bloatlab_units::{BitRate, Bytes};
use std::time::Duration;

/// What the driver should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Send up to this many datagrams now (at least 1).
    SendNow(u32),
    /// Nothing is due; sleep until this time (same clock as `now`).
    WaitUntil(Duration),
}

/// Default catch-up bound: a stall of up to 10 ms is made up (at most 10 ms
/// worth of datagrams back to back), anything longer is forgotten. Measured
/// on the loaded 2-core CI VM (load average 12): `clock_nanosleep` woke
/// p90 0.7 ms, p99 3.9 ms, max 7 ms late, so a 1 ms bound lost 15 % of the
/// rate there, while 10 ms keeps `-b` within a percent.
pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(10);

/// Rates whose inter-datagram gap is below this are sent unpaced: no timer
/// can schedule 200 ns gaps, and the caller asked for "as fast as possible"
/// in all but name.
pub const MIN_SCHEDULABLE_GAP: Duration = Duration::from_nanos(200);

/// An exact-schedule datagram pacer (see the module docs).
#[derive(Debug, Clone)]
pub struct Pacer {
    /// `len · 8 · 1e9`: numerator of the gap in ns; `None` when unpaced.
    bit_ns_per_datagram: Option<u128>,
    /// Bits per second (non-zero when paced).
    rate_bps: u128,
    /// Time of schedule slot 0, in ns since the start.
    anchor_ns: u128,
    /// Datagrams sent since the anchor.
    slot: u128,
    /// Lag beyond which the schedule is re-anchored, in ns.
    max_lag_ns: u128,
    /// Upper bound on one `SendNow` batch.
    max_batch: u32,
}

impl Pacer {
    /// A pacer for `datagram`-sized datagrams at `rate`. A zero rate, or a
    /// rate whose gap is under [`MIN_SCHEDULABLE_GAP`], gives an unpaced
    /// pacer. `start` is the time of the first datagram.
    pub fn new(rate: BitRate, datagram: Bytes, start: Duration) -> Pacer {
        let bits = u128::from(datagram.0.max(1)) * 8 * 1_000_000_000;
        let rate_bps = u128::from(rate.0);
        let paced = rate_bps != 0 && bits / rate_bps >= MIN_SCHEDULABLE_GAP.as_nanos();
        Pacer {
            bit_ns_per_datagram: paced.then_some(bits),
            rate_bps,
            anchor_ns: start.as_nanos(),
            slot: 0,
            max_lag_ns: DEFAULT_MAX_LAG.as_nanos(),
            max_batch: 64,
        }
    }

    /// A pacer that always says "send now" (`-b 0`).
    pub fn unpaced() -> Pacer {
        Pacer::new(BitRate(0), Bytes(1), Duration::ZERO)
    }

    /// Changes the catch-up bound (see the module docs).
    pub fn with_max_lag(mut self, max_lag: Duration) -> Pacer {
        self.max_lag_ns = max_lag.as_nanos();
        self
    }

    /// Caps how many datagrams one [`Pace::SendNow`] may ask for (min 1).
    pub fn with_max_batch(mut self, max_batch: u32) -> Pacer {
        self.max_batch = max_batch.max(1);
        self
    }

    /// Whether this pacer schedules at all.
    pub fn is_paced(&self) -> bool {
        self.bit_ns_per_datagram.is_some()
    }

    /// The ideal gap between datagrams, if paced (rounded down to 1 ns).
    pub fn gap(&self) -> Option<Duration> {
        let bits = self.bit_ns_per_datagram?;
        Some(ns_to_duration(bits / self.rate_bps))
    }

    /// Decides what to do at `now`. May re-anchor the schedule when the
    /// caller is more than `max_lag` late.
    pub fn poll(&mut self, now: Duration) -> Pace {
        let Some(bits) = self.bit_ns_per_datagram else {
            return Pace::SendNow(self.max_batch);
        };
        let now_ns = now.as_nanos();
        let due = self.deadline_ns(self.slot, bits);
        if now_ns < due {
            return Pace::WaitUntil(ns_to_duration(due));
        }
        let mut lag = now_ns - due;
        if lag > self.max_lag_ns {
            // Forget the time lost beyond the bound: slot 0 of the new
            // schedule sits exactly `max_lag` in the past.
            self.anchor_ns = now_ns - self.max_lag_ns;
            self.slot = 0;
            lag = self.max_lag_ns;
        }
        // Slots whose deadline is <= now: this one plus floor(lag / gap).
        let extra = lag * self.rate_bps / bits;
        let ready = (1 + extra).min(u128::from(self.max_batch));
        Pace::SendNow(u32::try_from(ready).unwrap_or(self.max_batch))
    }

    /// Records that `n` datagrams were handed to the kernel (successfully or
    /// not: a failed send still used its slot, as in iperf 2's Write/Err).
    pub fn on_sent(&mut self, n: u32) {
        self.slot += u128::from(n);
    }

    fn deadline_ns(&self, slot: u128, bits: u128) -> u128 {
        self.anchor_ns + slot * bits / self.rate_bps
    }
}

fn ns_to_duration(ns: u128) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// A driver that sleeps exactly to each deadline (plus `oversleep`) on a
    /// virtual clock and sends what the pacer allows; returns send times.
    fn drive(p: &mut Pacer, until: Duration, oversleep: Duration) -> Vec<Duration> {
        let mut now = Duration::ZERO;
        let mut sent = Vec::new();
        while now < until {
            match p.poll(now) {
                Pace::SendNow(n) => {
                    sent.extend(std::iter::repeat_n(now, n as usize));
                    p.on_sent(n);
                }
                Pace::WaitUntil(t) => {
                    assert!(t > now, "wait target {t:?} not after now {now:?}");
                    now = t + oversleep;
                }
            }
        }
        sent
    }

    #[test]
    fn gap_is_exact_for_iperf_default_10m() {
        // iperf 2 prints "IPG target: 1176.00 us" for 1470 B at 10 Mbit/s.
        let p = Pacer::new(BitRate(10_000_000), Bytes(1470), Duration::ZERO);
        assert_eq!(p.gap(), Some(us(1176)));
    }

    #[test]
    fn one_second_at_10m_sends_851_datagrams_on_schedule() {
        // Slots 0..=850 have deadlines <= 1 s - 1 ns (850 * 1176 us = 0.9996 s).
        let mut p = Pacer::new(BitRate(10_000_000), Bytes(1470), Duration::ZERO);
        let sent = drive(&mut p, Duration::from_secs(1), Duration::ZERO);
        assert_eq!(sent.len(), 851);
        assert_eq!(sent[1], us(1176));
        assert_eq!(sent[850], us(850 * 1176));
    }

    #[test]
    fn fractional_gap_does_not_drift() {
        // 1000 B at 3 Mbit/s: 2666.666.. us gap; 3000 datagrams = exactly 8 s.
        let mut p = Pacer::new(BitRate(3_000_000), Bytes(1000), Duration::ZERO);
        let sent = drive(
            &mut p,
            Duration::from_secs(8) + Duration::from_nanos(1),
            Duration::ZERO,
        );
        assert_eq!(sent.len(), 3001);
        assert_eq!(sent[3000], Duration::from_secs(8));
        assert_eq!(sent[1], Duration::from_nanos(2_666_666));
        assert_eq!(sent[2], Duration::from_nanos(5_333_333));
    }

    #[test]
    fn constant_oversleep_keeps_the_average_rate() {
        // Every wake-up is 150 us late (below the 1 ms bound): the schedule
        // is absolute, so the count over 2 s stays within one datagram.
        let mut p = Pacer::new(BitRate(10_000_000), Bytes(1470), Duration::ZERO);
        let sent = drive(&mut p, Duration::from_secs(2), us(150));
        assert!((1700..=1702).contains(&sent.len()), "{}", sent.len());
    }

    #[test]
    fn a_long_stall_is_not_caught_up_beyond_the_bound() {
        // 100 Mbit/s, 1250 B -> 100 us gap. Stall 50 ms after slot 0.
        let mut p = Pacer::new(BitRate(100_000_000), Bytes(1250), Duration::ZERO).with_max_lag(MS);
        assert_eq!(p.poll(Duration::ZERO), Pace::SendNow(1));
        p.on_sent(1);
        // 50 ms late: 500 slots missed, but only 1 ms (10 gaps) + this one.
        assert_eq!(p.poll(50 * MS), Pace::SendNow(11));
        p.on_sent(11);
        // The schedule now continues from the re-anchor: no further burst.
        assert_eq!(p.poll(50 * MS), Pace::WaitUntil(50 * MS + us(100)));
    }

    #[test]
    fn default_bound_makes_up_a_5ms_stall_but_not_a_50ms_one() {
        // 10 Mbit/s, 1250 B -> 1 ms gap.
        let mut p = Pacer::new(BitRate(10_000_000), Bytes(1250), Duration::ZERO);
        assert_eq!(p.poll(5 * MS), Pace::SendNow(6));
        p.on_sent(6);
        assert_eq!(p.poll(5 * MS), Pace::WaitUntil(6 * MS));
        // 44 ms later (50 ms): 10 ms worth (10 gaps) + this slot, no more.
        assert_eq!(p.poll(50 * MS), Pace::SendNow(11));
    }

    #[test]
    fn small_lag_is_caught_up_exactly() {
        // 300 us late at a 100 us gap: slots 0..=3 are due.
        let mut p = Pacer::new(BitRate(100_000_000), Bytes(1250), Duration::ZERO);
        assert_eq!(p.poll(us(300)), Pace::SendNow(4));
        p.on_sent(4);
        assert_eq!(p.poll(us(300)), Pace::WaitUntil(us(400)));
    }

    #[test]
    fn batch_is_capped() {
        let mut p = Pacer::new(BitRate(100_000_000), Bytes(1250), Duration::ZERO).with_max_batch(3);
        assert_eq!(p.poll(us(900)), Pace::SendNow(3));
    }

    #[test]
    fn partial_send_leaves_remaining_slots_due() {
        let mut p = Pacer::new(BitRate(100_000_000), Bytes(1250), Duration::ZERO);
        assert_eq!(p.poll(us(500)), Pace::SendNow(6));
        p.on_sent(2);
        assert_eq!(p.poll(us(500)), Pace::SendNow(4));
    }

    #[test]
    fn zero_or_unschedulable_rate_is_unpaced() {
        let mut p = Pacer::new(BitRate(0), Bytes(1470), Duration::ZERO);
        assert!(!p.is_paced());
        assert_eq!(p.poll(Duration::ZERO), Pace::SendNow(64));
        // 64 B at 10 Tbit/s: 51 ps gap.
        let p = Pacer::new(BitRate(10_000_000_000_000), Bytes(64), Duration::ZERO);
        assert!(!p.is_paced());
        assert_eq!(p.gap(), None);
        // 64 B at 1 Gbit/s: 512 ns gap is still paced.
        assert!(Pacer::new(BitRate(1_000_000_000), Bytes(64), Duration::ZERO).is_paced());
    }

    #[test]
    fn start_offset_delays_first_datagram() {
        let mut p = Pacer::new(BitRate(10_000_000), Bytes(1470), 5 * MS);
        assert_eq!(p.poll(Duration::ZERO), Pace::WaitUntil(5 * MS));
        assert_eq!(p.poll(5 * MS), Pace::SendNow(1));
    }
}
