//! Sans-IO pacer, the one both senders use: when may the next datagram
//! (UDP) or write (TCP) leave?
//!
//! The pacer never reads a clock. The driver passes `now` (time since the
//! test started, on any monotonic clock) and gets back either "send `n`
//! units now" or "wait until `t`". Deadlines come from an exact schedule,
//! `deadline = anchor + bits sent · 1e9 / rate`, computed in integer
//! nanoseconds from what was sent, so rounding never accumulates into rate
//! drift (1470 B at 10 Mbit/s is exactly 1176 µs apart, 1470 B at 3 Mbit/s
//! is 3920 µs apart, and 100 B at 3 bit/s still averages right). A unit is
//! a datagram (UDP, [`Pacer::on_sent`]); a TCP sender reports the bytes
//! each write took ([`Pacer::on_sent_bytes`]), which may be fewer than a
//! unit at the end of a `-n` test.
//!
//! **Bounded catch-up.** If the driver falls behind (scheduler latency, a
//! full socket buffer) by more than `max_lag`, the schedule is re-anchored at
//! `now − max_lag`: at most `max_lag` worth of data goes out back to back,
//! and the time lost beyond that is not made up later. iperf 2's "kalman
//! adjust" loop catches up without a bound, which turns one stall into a
//! line-rate burst; we trade a slightly lower average after a long stall for
//! a sending pattern that never exceeds `-b` by more than `max_lag` of data.
//! The UDP sender keeps [`DEFAULT_MAX_LAG`]; the TCP sender uses
//! [`TCP_MAX_LAG`], since one TCP write may block for a whole RTT on a full
//! send buffer without the link having been idle.
//!
//! **Near-congestion** (iperf 2's `--near-congestion=w`, TCP only): after
//! each write the driver reports the TCP RTT it sampled
//! ([`Pacer::on_rtt_sample`]) and nothing more is due for `ceil(w · srtt)`
//! microseconds (iperf 2's `RunNearCongestionTCP`), so the bottleneck queue
//! can drain.
//!
//! An unpaced pacer (`-b 0` or a rate too high to schedule) always answers
//! "send now" (a near-congestion hold aside), letting the driver batch with
//! `sendmmsg`.

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

/// The TCP sender's catch-up bound: a write blocked on a full send buffer
/// for up to 100 ms is made up, a longer stall is forgotten.
pub const TCP_MAX_LAG: Duration = Duration::from_millis(100);

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
    /// Bits per unit (datagram or write).
    unit_bits: u128,
    /// Time of the schedule's start, in ns since the test's start.
    anchor_ns: u128,
    /// Bits sent since the anchor.
    sent_bits: u128,
    /// Lag beyond which the schedule is re-anchored, in ns.
    max_lag_ns: u128,
    /// Upper bound on one `SendNow` batch.
    max_batch: u32,
    /// Near-congestion weight (pause `weight · srtt` after each write).
    near_congestion: Option<f64>,
    /// Nothing is due before this (a near-congestion pause), ns.
    hold_until_ns: u128,
}

impl Pacer {
    /// A pacer for `unit`-sized datagrams (or writes) at `rate`. A zero
    /// rate, or a rate whose gap is under [`MIN_SCHEDULABLE_GAP`], gives an
    /// unpaced pacer. `start` is the time of the first unit.
    pub fn new(rate: BitRate, unit: Bytes, start: Duration) -> Pacer {
        let unit_bits = u128::from(unit.0.max(1)) * 8;
        let bits = unit_bits * 1_000_000_000;
        let rate_bps = u128::from(rate.0);
        let paced = rate_bps != 0 && bits / rate_bps >= MIN_SCHEDULABLE_GAP.as_nanos();
        Pacer {
            bit_ns_per_datagram: paced.then_some(bits),
            rate_bps,
            unit_bits,
            anchor_ns: start.as_nanos(),
            sent_bits: 0,
            max_lag_ns: DEFAULT_MAX_LAG.as_nanos(),
            max_batch: 64,
            near_congestion: None,
            hold_until_ns: 0,
        }
    }

    /// Pauses `ceil(weight · srtt)` after each write (see the module docs).
    pub fn with_near_congestion(mut self, weight: Option<f64>) -> Pacer {
        self.near_congestion = weight;
        self
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
        let now_ns = now.as_nanos();
        if now_ns < self.hold_until_ns {
            let due = self.next_due().map_or(self.hold_until_ns, |d| d.as_nanos());
            return Pace::WaitUntil(ns_to_duration(due.max(self.hold_until_ns)));
        }
        let Some(bits) = self.bit_ns_per_datagram else {
            return Pace::SendNow(self.max_batch);
        };
        let due = self.deadline_ns();
        if now_ns < due {
            return Pace::WaitUntil(ns_to_duration(due));
        }
        let mut lag = now_ns - due;
        if lag > self.max_lag_ns {
            // Forget the time lost beyond the bound: the new schedule's
            // start sits exactly `max_lag` in the past.
            self.anchor_ns = now_ns - self.max_lag_ns;
            self.sent_bits = 0;
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
        self.sent_bits += u128::from(n) * self.unit_bits;
    }

    /// Records that a write handed `bytes` to the kernel (TCP).
    pub fn on_sent_bytes(&mut self, bytes: Bytes) {
        self.sent_bits += u128::from(bytes.0) * 8;
    }

    /// Records the TCP RTT sampled after a write at `now`: with
    /// near-congestion on, nothing is due for `ceil(weight · rtt)` (in whole
    /// microseconds, as iperf 2 rounds).
    pub fn on_rtt_sample(&mut self, now: Duration, rtt: Duration) {
        let Some(w) = self.near_congestion else {
            return;
        };
        let pause_us = (w * rtt.as_micros() as f64).ceil();
        if pause_us > 0.0 && pause_us.is_finite() {
            let pause = Duration::from_micros(pause_us.min(u64::MAX as f64) as u64);
            self.hold_until_ns = now.as_nanos() + pause.as_nanos();
        }
    }

    /// When the rate schedule next allows a unit (`None` when unpaced). A
    /// paced `-n` test ends when its last bytes are due.
    pub fn next_due(&self) -> Option<Duration> {
        self.bit_ns_per_datagram?;
        Some(ns_to_duration(self.deadline_ns()))
    }

    fn deadline_ns(&self) -> u128 {
        self.anchor_ns + self.sent_bits * 1_000_000_000 / self.rate_bps
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

    #[test]
    fn tcp_writes_of_any_size_follow_the_byte_schedule() {
        // 8 Mbit/s = one byte per us; 1000-byte writes, then a short last one.
        let mut p = Pacer::new(BitRate(8_000_000), Bytes(1000), Duration::ZERO);
        assert_eq!(p.poll(Duration::ZERO), Pace::SendNow(1));
        p.on_sent_bytes(Bytes(1000));
        assert_eq!(p.poll(us(10)), Pace::WaitUntil(us(1000)));
        p.on_sent_bytes(Bytes(500));
        assert_eq!(p.next_due(), Some(us(1500)));
        // A -n test's end: its last bytes are due at 1.5 ms.
        assert_eq!(p.poll(us(1500)), Pace::SendNow(1));
    }

    #[test]
    fn a_tcp_write_blocked_longer_than_its_bound_is_not_made_up() {
        let mut p =
            Pacer::new(BitRate(8_000_000), Bytes(1000), Duration::ZERO).with_max_lag(TCP_MAX_LAG);
        p.on_sent_bytes(Bytes(1000));
        // Due at 1 ms, written at 501 ms: 100 ms of data may follow at once,
        // the other 400 ms are forgotten.
        assert_eq!(p.poll(501 * MS), Pace::SendNow(64));
        p.on_sent_bytes(Bytes(100_000));
        // Those 100 ms are spent: the schedule is back on time, no further burst.
        assert_eq!(p.poll(501 * MS), Pace::SendNow(1));
        p.on_sent_bytes(Bytes(1000));
        assert_eq!(p.poll(501 * MS), Pace::WaitUntil(502 * MS));
    }

    #[test]
    fn near_congestion_pauses_weight_times_rtt_after_each_write() {
        // iperf 2 --near-congestion=0.4 with srtt 2.5 ms: 1 ms after each write.
        let mut p = Pacer::unpaced().with_near_congestion(Some(0.4));
        assert_eq!(p.poll(Duration::ZERO), Pace::SendNow(64));
        p.on_sent_bytes(Bytes(131_072));
        p.on_rtt_sample(MS, us(2500));
        assert_eq!(p.poll(MS), Pace::WaitUntil(2 * MS));
        assert_eq!(p.poll(MS + us(999)), Pace::WaitUntil(2 * MS));
        assert_eq!(p.poll(2 * MS), Pace::SendNow(64));
        // Rounded up to whole microseconds, as iperf 2 does: 0.4 x 1001 us.
        p.on_rtt_sample(10 * MS, us(1001));
        assert_eq!(p.poll(10 * MS), Pace::WaitUntil(10 * MS + us(401)));
        // Weight 0 (and no near-congestion at all) never holds.
        let mut zero = Pacer::unpaced().with_near_congestion(Some(0.0));
        zero.on_rtt_sample(MS, us(2500));
        assert_eq!(zero.poll(MS), Pace::SendNow(64));
        let mut off = Pacer::unpaced();
        off.on_rtt_sample(MS, us(2500));
        assert_eq!(off.poll(MS), Pace::SendNow(64));
    }

    #[test]
    fn a_near_congestion_hold_and_a_rate_wait_for_the_later_of_the_two() {
        let mut p = Pacer::new(BitRate(8_000_000), Bytes(1000), Duration::ZERO)
            .with_near_congestion(Some(1.0));
        p.on_sent_bytes(Bytes(1000));
        // Rate: due at 1 ms; hold: until 0.1 + 2 = 2.1 ms.
        p.on_rtt_sample(us(100), 2 * MS);
        assert_eq!(p.poll(us(100)), Pace::WaitUntil(us(2100)));
        // A short RTT: the rate's 1 ms wins.
        p.on_rtt_sample(us(100), us(10));
        assert_eq!(p.poll(us(100)), Pace::WaitUntil(MS));
    }
}
