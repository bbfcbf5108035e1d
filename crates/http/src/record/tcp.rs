//! The server's own view of a browser test's load connections: TCP_INFO
//! of each connection that carried the test's downloads (the server sends)
//! or uploads (the server receives), sampled while the body moves.
//!
//! The aggregate ([`TcpAgg`]) is sans-IO: it takes samples with their time.
//! The driver ([`Tracker`]) reads TCP_INFO from the connection's socket at
//! most every [`SAMPLE_EVERY`], only while the request's body is being
//! moved, so the socket is the connection's own and still open.

use bloatlab_engine::tcpinfo::{self, TcpInfoSample};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often one connection's TCP_INFO is read (a syscall of about a µs).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The most connections one test's record keeps; more are not counted (a
/// page opens at most 6 load streams at once, a few dozen over a test).
pub const MAX_CONNECTIONS: usize = 64;

/// Which way the test's bytes went on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// The large object: the server sends.
    Down,
    /// The upload sink: the server receives.
    Up,
}

/// A connection (the client's address and port) and its direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnKey {
    pub peer: SocketAddr,
    pub dir: Dir,
}

/// What the samples of one connection said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnTcp {
    /// First and last sample, since the test started (server clock).
    pub first: Duration,
    pub last: Duration,
    pub samples: u32,
    /// Smoothed RTT (`tcpi_rtt`): smallest, largest, sum (for the mean).
    pub min_rtt: Duration,
    pub max_rtt: Duration,
    pub sum_rtt: Duration,
    /// Segments retransmitted between the first and the last sample
    /// (`tcpi_total_retrans` is per connection, and HTTP/1.1 may carry an
    /// upload and later a download on one connection: each counts its own).
    pub retransmits: u32,
    /// `tcpi_total_retrans` at the first sample.
    base_retransmits: u32,
}

impl ConnTcp {
    pub fn mean_rtt(&self) -> Duration {
        self.sum_rtt / self.samples.max(1)
    }
}

/// One test's connections, in the order first seen.
#[derive(Debug, Default)]
pub struct TcpAgg {
    conns: Vec<(ConnKey, ConnTcp)>,
}

impl TcpAgg {
    /// One sample of `conn` at `at` since the test started. A zero RTT
    /// (the kernel has no estimate yet) is not an RTT.
    pub fn add(&mut self, conn: ConnKey, at: Duration, s: &TcpInfoSample) {
        let i = match self.conns.iter().position(|(k, _)| *k == conn) {
            Some(i) => i,
            None if self.conns.len() < MAX_CONNECTIONS => {
                self.conns.push((
                    conn,
                    ConnTcp {
                        first: at,
                        last: at,
                        samples: 0,
                        min_rtt: Duration::MAX,
                        max_rtt: Duration::ZERO,
                        sum_rtt: Duration::ZERO,
                        retransmits: 0,
                        base_retransmits: s.total_retrans,
                    },
                ));
                self.conns.len() - 1
            }
            None => return,
        };
        let c = &mut self.conns[i].1;
        c.last = c.last.max(at);
        c.retransmits = c
            .retransmits
            .max(s.total_retrans.saturating_sub(c.base_retransmits));
        if !s.rtt.is_zero() {
            c.samples += 1;
            c.min_rtt = c.min_rtt.min(s.rtt);
            c.max_rtt = c.max_rtt.max(s.rtt);
            c.sum_rtt += s.rtt;
        }
    }

    pub fn connections(&self) -> &[(ConnKey, ConnTcp)] {
        &self.conns
    }

    /// All connections of one direction as one: retransmits summed, the
    /// RTT's extremes, and the mean over every sample. `None` when no
    /// connection of that direction had an RTT sample.
    pub fn direction(&self, dir: Dir) -> Option<ConnTcp> {
        let mut out: Option<ConnTcp> = None;
        for (_, c) in self.conns.iter().filter(|(k, _)| k.dir == dir) {
            if c.samples == 0 {
                continue;
            }
            out = Some(match out {
                None => *c,
                Some(o) => ConnTcp {
                    first: o.first.min(c.first),
                    last: o.last.max(c.last),
                    samples: o.samples + c.samples,
                    min_rtt: o.min_rtt.min(c.min_rtt),
                    max_rtt: o.max_rtt.max(c.max_rtt),
                    sum_rtt: o.sum_rtt + c.sum_rtt,
                    retransmits: o.retransmits + c.retransmits,
                    base_retransmits: 0,
                },
            });
        }
        out
    }
}

/// A connection's socket, by its descriptor, for `getsockopt` only.
#[derive(Debug, Clone, Copy)]
pub struct SockFd(pub RawFd);

impl AsRawFd for SockFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Samples one request's connection into its test's record while the
/// request's body moves. Made by [`super::Records::track`].
#[derive(Debug)]
pub struct Tracker {
    pub(super) records: Arc<super::Records>,
    pub(super) id: super::ledger::TestId,
    pub(super) key: ConnKey,
    pub(super) fd: SockFd,
    pub(super) last: Option<Instant>,
}

impl Tracker {
    /// Called as bytes move: reads TCP_INFO when [`SAMPLE_EVERY`] has
    /// passed since the last read.
    pub fn poll(&mut self, now: Instant) {
        if self
            .last
            .is_some_and(|l| now.saturating_duration_since(l) < SAMPLE_EVERY)
        {
            return;
        }
        self.last = Some(now);
        match tcpinfo::sample(&self.fd) {
            Ok(s) => self.records.sample(now, self.id, self.key, &s),
            Err(e) => tracing::debug!(peer = %self.key.peer, "TCP_INFO: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rtt_ms: u64, retrans: u32) -> TcpInfoSample {
        TcpInfoSample {
            snd_cwnd: 10,
            snd_mss: 1448,
            rtt: Duration::from_millis(rtt_ms),
            rttvar: Duration::ZERO,
            total_retrans: retrans,
            delivered_ce: None,
            bytes_acked: None,
        }
    }

    fn key(port: u16, dir: Dir) -> ConnKey {
        ConnKey {
            peer: SocketAddr::from(([192, 0, 2, 1], port)),
            dir,
        }
    }

    #[test]
    fn a_direction_sums_retransmits_and_spans_the_rtts_of_its_connections() {
        let mut a = TcpAgg::default();
        let s = Duration::from_secs;
        a.add(key(1, Dir::Down), s(1), &sample(0, 0));
        a.add(key(1, Dir::Down), s(2), &sample(40, 2));
        a.add(key(1, Dir::Down), s(3), &sample(200, 5));
        // Connection 2 retransmitted 4 segments before this test's bytes.
        a.add(key(2, Dir::Down), s(2), &sample(60, 4));
        a.add(key(2, Dir::Down), s(2), &sample(60, 5));
        a.add(key(3, Dir::Up), s(2), &sample(30, 0));
        let d = a.direction(Dir::Down).unwrap();
        assert_eq!(d.samples, 4, "the zero RTT is no sample");
        assert_eq!(d.min_rtt, Duration::from_millis(40));
        assert_eq!(d.max_rtt, Duration::from_millis(200));
        assert_eq!(d.mean_rtt(), Duration::from_millis(90));
        assert_eq!(d.retransmits, 6);
        assert_eq!((d.first, d.last), (s(1), s(3)));
        assert_eq!(a.direction(Dir::Up).unwrap().samples, 1);
        assert_eq!(a.connections().len(), 3);
    }

    #[test]
    fn connections_beyond_the_cap_are_not_kept() {
        let mut a = TcpAgg::default();
        for p in 0..(MAX_CONNECTIONS as u16 + 10) {
            a.add(key(p, Dir::Up), Duration::ZERO, &sample(10, 0));
        }
        assert_eq!(a.connections().len(), MAX_CONNECTIONS);
        assert!(a.direction(Dir::Down).is_none());
    }
}
