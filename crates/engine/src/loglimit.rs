//! Rate-limited log lines: a flood of bad connections or datagrams must
//! not become a flood on stderr (or fill a disk through a journal).
//!
//! [`LogLimit`] is a token bucket (sans-IO, `now` passed in): up to
//! `burst` lines at once, then `per_sec` lines a second; lines beyond that
//! are counted, and the next line that gets through says how many were
//! suppressed. [`SharedLogLimit`] wraps one for threads that share a budget.

use crate::console::Out;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines a server may log at once before the limit applies.
pub const DEFAULT_BURST: u32 = 20;
/// Lines per second after a burst.
pub const DEFAULT_PER_SEC: u32 = 2;

/// A token bucket for log lines (see the module docs).
#[derive(Debug, Clone)]
pub struct LogLimit {
    burst: f64,
    per_sec: f64,
    tokens: f64,
    last: Option<Duration>,
    suppressed: u64,
}

/// What to do with one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Print it; `suppressed` lines were dropped since the last printed one.
    Print { suppressed: u64 },
    /// Drop it (counted).
    Drop,
}

impl LogLimit {
    /// Up to `burst` lines at once, `per_sec` after that.
    pub fn new(burst: u32, per_sec: u32) -> LogLimit {
        LogLimit {
            burst: f64::from(burst.max(1)),
            per_sec: f64::from(per_sec),
            tokens: f64::from(burst.max(1)),
            last: None,
            suppressed: 0,
        }
    }

    /// Decides about one line at `now` (any monotonic clock).
    pub fn gate(&mut self, now: Duration) -> Gate {
        if let Some(last) = self.last {
            let dt = now.saturating_sub(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        }
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Gate::Print {
                suppressed: std::mem::take(&mut self.suppressed),
            }
        } else {
            self.suppressed += 1;
            Gate::Drop
        }
    }
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit::new(DEFAULT_BURST, DEFAULT_PER_SEC)
    }
}

/// A [`LogLimit`] shared by threads, on the process's monotonic clock,
/// writing to the run's error writer.
#[derive(Debug)]
pub struct SharedLogLimit {
    origin: Instant,
    limit: Mutex<LogLimit>,
    err: Out,
}

impl Default for SharedLogLimit {
    fn default() -> Self {
        SharedLogLimit::new(Out::stderr())
    }
}

impl SharedLogLimit {
    /// A limit with the default budget, writing to `err`.
    pub fn new(err: Out) -> SharedLogLimit {
        SharedLogLimit {
            origin: Instant::now(),
            limit: Mutex::new(LogLimit::default()),
            err,
        }
    }

    /// Prints `line` to the error writer unless the budget is used up; a printed line
    /// first says how many were suppressed before it.
    pub fn eprint(&self, line: impl FnOnce() -> String) {
        let now = self.origin.elapsed();
        let gate = match self.limit.lock() {
            Ok(mut l) => l.gate(now),
            Err(p) => p.into_inner().gate(now),
        };
        if let Gate::Print { suppressed } = gate {
            if suppressed > 0 {
                self.err.line(&format!(
                    "bloatlab server: ({suppressed} similar lines suppressed)"
                ));
            }
            self.err.line(&line());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_a_steady_trickle_and_the_count_of_what_was_dropped() {
        let mut l = LogLimit::new(3, 2);
        let t = Duration::from_secs(100);
        for _ in 0..3 {
            assert_eq!(l.gate(t), Gate::Print { suppressed: 0 });
        }
        for _ in 0..1000 {
            assert_eq!(l.gate(t), Gate::Drop);
        }
        // Half a second later one token is back.
        let t2 = t + Duration::from_millis(500);
        assert_eq!(l.gate(t2), Gate::Print { suppressed: 1000 });
        assert_eq!(l.gate(t2), Gate::Drop);
        // A long quiet spell refills only up to the burst.
        let t3 = t2 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(matches!(l.gate(t3), Gate::Print { .. }));
        }
        assert_eq!(l.gate(t3), Gate::Drop);
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let mut l = LogLimit::new(1, 1);
        assert!(matches!(
            l.gate(Duration::from_secs(10)),
            Gate::Print { .. }
        ));
        assert_eq!(l.gate(Duration::from_secs(5)), Gate::Drop);
        assert_eq!(l.gate(Duration::from_secs(10)), Gate::Drop);
    }
}
