//! Process-wide stop request (SIGINT/SIGTERM on a client).
//!
//! The binary makes SIGINT/SIGTERM raise it ([`on_signals`]; the handler only stores to
//! atomics, through `bloatlab-os`). Data loops poll [`requested`] between
//! writes/reads; every blocking socket call in them has a timeout of at most
//! 250 ms, so a stop is noticed within that time. A stopped client then ends
//! the test as if the amount were reached: it shuts the connection down,
//! collects the peer's report and prints its final report.

use bloatlab_os::StopToken;
use std::sync::LazyLock;

static STOP: LazyLock<StopToken> = LazyLock::new(StopToken::new);

/// Makes `signals` (e.g. [`bloatlab_os::stop::INTERRUPT`]) ask every running test in this
/// process to stop.
pub fn on_signals(signals: &[i32]) -> std::io::Result<()> {
    STOP.watch_signals(signals)
}

/// Asks every running test in this process to stop.
pub fn request() {
    STOP.stop();
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    STOP.is_stopped()
}

/// The signal that asked for the stop, if a signal did.
pub fn signal() -> Option<i32> {
    STOP.signal()
}
