//! A sans-IO pacer for the rate caps (`--max-rate` on uploads,
//! `--max-reverse-rate` on downloads): given the bytes moved so far and
//! `now`, how long to wait so the average rate since the first byte stays at
//! or under the cap. It never reads a clock; the body and sink pass `now`.

use bloatlab_units::BitRate;
use std::time::{Duration, Instant};

/// Paces one transfer at a capped average rate.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: BitRate,
    start: Option<Instant>,
    /// Bytes moved since `start`.
    moved: u64,
}

impl Pacer {
    /// A pacer for `rate`; a zero rate is refused by the caller (it means
    /// "nothing may move"), so here it is treated as 1 bit/s to stay finite.
    pub fn new(rate: BitRate) -> Pacer {
        Pacer {
            rate: BitRate(rate.0.max(1)),
            start: None,
            moved: 0,
        }
    }

    /// Records `bytes` moved at `now`. Returns how long to wait before moving
    /// more, or `None` when the transfer is not ahead of the cap.
    pub fn after(&mut self, now: Instant, bytes: u64) -> Option<Duration> {
        let start = *self.start.get_or_insert(now);
        self.moved = self.moved.saturating_add(bytes);
        // Seconds the bytes moved so far take at the cap.
        let due = Duration::from_secs_f64(self.moved as f64 * 8.0 / self.rate.0 as f64);
        let elapsed = now.saturating_duration_since(start);
        due.checked_sub(elapsed).filter(|w| !w.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_holds_the_average_at_the_cap() {
        // 8 Mbit/s = 1 MB/s: 100 kB at t=0 is due at 100 ms.
        let t0 = Instant::now();
        let mut p = Pacer::new(BitRate(8_000_000));
        assert_eq!(p.after(t0, 100_000), Some(Duration::from_millis(100)));
        // Sending again right at the due time is on schedule: the next wait
        // is the new chunk's own time.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(p.after(t1, 100_000), Some(Duration::from_millis(100)));
        // A transfer that fell behind (slow peer) is not made to wait.
        let late = t0 + Duration::from_secs(5);
        assert_eq!(p.after(late, 100_000), None);
    }

    #[test]
    fn pacer_with_zero_rate_stays_finite() {
        let t0 = Instant::now();
        let mut p = Pacer::new(BitRate(0));
        assert_eq!(p.after(t0, 1), Some(Duration::from_secs(8)));
    }
}
