//! SIGINT/SIGTERM/SIGHUP as a flag the emulator's main loop polls, so every
//! exit path runs the teardown guards (handlers through `bloatlab-os`).

use bloatlab_os::StopToken;
use std::sync::LazyLock;

static STOP: LazyLock<StopToken> = LazyLock::new(StopToken::new);

/// Installs the handlers (idempotent in effect: a second call registers a second handler
/// that raises the same flag).
pub fn install() {
    if let Err(e) = STOP.watch_signals(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]) {
        tracing::warn!("cannot install the stop signal handlers: {e}");
    }
}

/// True once a termination signal arrived.
pub fn stop_requested() -> bool {
    STOP.is_stopped()
}
