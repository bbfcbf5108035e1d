//! What the service has done, for the operator and the tests. Counters only
//! grow, except `open`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Shared counters, updated with relaxed atomics (they are statistics, not
/// synchronisation).
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections admitted.
    pub accepted: AtomicU64,
    /// Connections over a cap (answered with 429 or, beyond that, closed).
    pub refused: AtomicU64,
    /// Requests answered, any status.
    pub requests: AtomicU64,
    /// Large-object bytes handed to the connections (sent or queued).
    pub downloaded: AtomicU64,
    /// Upload bytes received and discarded.
    pub uploaded: AtomicU64,
    /// Connections (admitted or refused) whose `TCP_NOTSENT_LOWAT` reads
    /// back as [`crate::conn::NOTSENT_LOWAT`].
    pub lowat_set: AtomicU64,
    /// Most admitted connections open at once (never above
    /// `--max-connections`).
    pub peak_open: AtomicU64,
    /// Connections (admitted or refused) cut because their TLS handshake
    /// missed `--handshake-timeout`.
    pub cut_handshake: AtomicU64,
    /// Connections cut because a request head missed `--http-header-timeout`.
    pub cut_request_head: AtomicU64,
    /// Connections ended to give their place in a full table to another
    /// source (the fairness rule of `crate::caps`).
    pub evicted: AtomicU64,
}

/// A copy of [`Stats`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    pub accepted: u64,
    pub refused: u64,
    pub requests: u64,
    pub downloaded: u64,
    pub uploaded: u64,
    pub lowat_set: u64,
    pub peak_open: u64,
    pub cut_handshake: u64,
    pub cut_request_head: u64,
    pub evicted: u64,
}

impl Stats {
    pub fn snapshot(&self) -> StatsSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            accepted: g(&self.accepted),
            refused: g(&self.refused),
            requests: g(&self.requests),
            downloaded: g(&self.downloaded),
            uploaded: g(&self.uploaded),
            lowat_set: g(&self.lowat_set),
            peak_open: g(&self.peak_open),
            cut_handshake: g(&self.cut_handshake),
            cut_request_head: g(&self.cut_request_head),
            evicted: g(&self.evicted),
        }
    }
}

impl std::fmt::Display for StatsSnapshot {
    /// The line `bloatlab server --no-iperf` prints when it stops. The
    /// integration tests read its numbers in this order
    /// (`harness::stop_http_server`): append, never reorder.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HTTP service: {} connections accepted, {} refused, at most {} open at once, \
             {} requests, {} bytes sent, {} bytes received, \
             {} cut at the handshake deadline, {} cut at the request head deadline, \
             {} evicted for another source",
            self.accepted,
            self.refused,
            self.peak_open,
            self.requests,
            self.downloaded,
            self.uploaded,
            self.cut_handshake,
            self.cut_request_head,
            self.evicted
        )
    }
}
