//! A stop request that signals raise and loops poll: cloneable, cheap to check, and the only
//! place bloatlab installs signal handlers (through `signal-hook`, whose handlers only store
//! to atomics, so they are async-signal-safe).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// SIGINT and SIGTERM: what a user's Ctrl-C and a supervisor's stop send.
pub const INTERRUPT: [i32; 2] = [libc::SIGINT, libc::SIGTERM];

/// A stop request shared by clones. Raised by [`StopToken::stop`] or by a watched signal.
#[derive(Debug, Clone, Default)]
pub struct StopToken {
    stopped: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
}

/// Tokens are equal when they are the same request (clones of one token).
impl PartialEq for StopToken {
    fn eq(&self, other: &StopToken) -> bool {
        Arc::ptr_eq(&self.stopped, &other.stopped)
    }
}

impl StopToken {
    /// A token nothing has raised.
    pub fn new() -> StopToken {
        StopToken::default()
    }

    /// A new token raised by any of `signals` (which then no longer end the process).
    pub fn on_signals(signals: &[i32]) -> io::Result<StopToken> {
        let t = StopToken::new();
        t.watch_signals(signals)?;
        Ok(t)
    }

    /// Makes `signals` raise this token (in addition to anything else they raise).
    pub fn watch_signals(&self, signals: &[i32]) -> io::Result<()> {
        for &sig in signals {
            let n = usize::try_from(sig).map_err(|_| io::Error::other("negative signal"))?;
            // The number first, then the flag: a reader that sees the flag sees the number.
            signal_hook::flag::register_usize(sig, Arc::clone(&self.signal), n)?;
            signal_hook::flag::register(sig, Arc::clone(&self.stopped))?;
        }
        Ok(())
    }

    /// Raises the token.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Whether the token was raised.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// The flag itself, for loops and library APIs that take `&AtomicBool`.
    pub fn flag(&self) -> &AtomicBool {
        &self.stopped
    }

    /// The signal that raised the token, if a signal did.
    pub fn signal(&self) -> Option<i32> {
        let n = self.signal.load(Ordering::SeqCst);
        (self.is_stopped() && n != 0).then(|| i32::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_request() {
        let a = StopToken::new();
        let b = a.clone();
        assert!(!b.is_stopped());
        a.stop();
        assert!(b.is_stopped());
        assert_eq!(b.signal(), None);
    }

    #[test]
    fn a_watched_signal_raises_the_token_and_names_itself() {
        // SIGUSR2: nothing else in the test binary uses it.
        let t = StopToken::on_signals(&[libc::SIGUSR2]).unwrap();
        assert!(!t.is_stopped());
        // SAFETY: raise() sends a signal to this thread; the handler only stores atomics.
        unsafe { libc::raise(libc::SIGUSR2) };
        assert!(t.is_stopped());
        assert_eq!(t.signal(), Some(libc::SIGUSR2));
    }
}
