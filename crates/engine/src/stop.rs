//! Process-wide stop request (SIGINT/SIGTERM on a client).
//!
//! The binary installs a signal handler that only calls [`request`] (an
//! atomic store, async-signal-safe). Data loops poll [`requested`] between
//! writes/reads; every blocking socket call in them has a timeout of at most
//! 250 ms, so a stop is noticed within that time. A stopped client then ends
//! the test as if the amount were reached: it shuts the connection down,
//! collects the peer's report and prints its final report.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Asks every running test in this process to stop; `signal` is the signal
/// number that caused it (0 if none). Async-signal-safe.
pub fn request(signal: i32) {
    SIGNAL.store(signal, Ordering::Relaxed);
    STOP.store(true, Ordering::Release);
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    STOP.load(Ordering::Acquire)
}

/// The signal number passed to [`request`], if a stop was requested.
pub fn signal() -> Option<i32> {
    requested().then(|| SIGNAL.load(Ordering::Relaxed))
}
