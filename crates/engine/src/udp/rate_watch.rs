//! Is a UDP sender above the rate its header announced? (issue 19: a client
//! that announced 1 Mbit/s and sent 50 was accepted.)
//!
//! Sans-IO on the receive timestamps: bytes are counted in fixed windows of
//! [`WINDOW`]; a window that carries more than [`FACTOR`] times the
//! announced rate, plus [`SLACK`] (a sender catching up after a stall sends
//! a short burst), makes the flow over. Our client's and iperf 2's pacing stay
//! far inside that; a sender at 50x its announcement is cut within one window.

use bloatlab_units::BitRate;
use std::cell::Cell;
use std::time::Duration;

/// Measurement window.
pub const WINDOW: Duration = Duration::from_secs(1);
/// How far above its announced rate a sender may go within a window.
pub const FACTOR: f64 = 2.0;
/// Bytes always allowed per window on top (64 datagrams of 1470 bytes).
pub const SLACK: u64 = 64 * 1470;

/// The watch of one flow (cells: the server checks it in a match guard).
#[derive(Debug, Clone)]
pub struct RateWatch {
    /// Bytes allowed per window.
    allowed: u64,
    window_start: Cell<Duration>,
    bytes: Cell<u64>,
}

impl RateWatch {
    /// Watches a flow that announced `rate`, from `now`.
    pub fn new(rate: BitRate, now: Duration) -> RateWatch {
        let per_window = rate.0 as f64 / 8.0 * WINDOW.as_secs_f64() * FACTOR;
        RateWatch {
            allowed: (per_window as u64).saturating_add(SLACK),
            window_start: Cell::new(now),
            bytes: Cell::new(0),
        }
    }

    /// A datagram of `len` bytes arrived at `now`: true when the flow is
    /// now above its announced rate (the caller cuts it).
    pub fn over(&self, now: Duration, len: usize) -> bool {
        if now.saturating_sub(self.window_start.get()) >= WINDOW {
            self.window_start.set(now);
            self.bytes.set(0);
        }
        let bytes = self.bytes.get().saturating_add(len as u64);
        self.bytes.set(bytes);
        bytes > self.allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `secs` of datagrams of `len` bytes at `bits` per second;
    /// returns when the watch said over, if it did.
    fn feed(w: &RateWatch, bits: u64, len: usize, secs: u64) -> Option<Duration> {
        let gap = Duration::from_secs_f64(len as f64 * 8.0 / bits as f64);
        let mut t = Duration::ZERO;
        while t < Duration::from_secs(secs) {
            if w.over(t, len) {
                return Some(t);
            }
            t += gap;
        }
        None
    }

    #[test]
    fn a_sender_at_its_announced_rate_is_never_over() {
        for bits in [1_000, 1_000_000, 100_000_000] {
            let w = RateWatch::new(BitRate(bits), Duration::ZERO);
            assert_eq!(feed(&w, bits, 1470, 5), None, "{bits}");
        }
    }

    #[test]
    fn a_sender_at_50_times_its_announcement_is_cut_within_a_window() {
        // Issue 19: announced 1 Mbit/s, sent 50.
        let w = RateWatch::new(BitRate(1_000_000), Duration::ZERO);
        let at = feed(&w, 50_000_000, 1470, 5).expect("cut");
        assert!(at < WINDOW, "{at:?}");
        // Three times the announcement is over too, a bit later.
        let w = RateWatch::new(BitRate(1_000_000), Duration::ZERO);
        assert!(feed(&w, 3_000_000, 1470, 5).is_some());
    }
}
