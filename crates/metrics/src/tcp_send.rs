//! TCP sender (client `-e`) accumulator: Write/Err, Rtry, Cwnd/RTT(var), NetPwr.
//!
//! The engine calls [`TcpSendStats::on_write`] per successful `write()`,
//! [`TcpSendStats::on_write_error`] per non-fatal error (EAGAIN, EINTR,
//! `SO_SNDTIMEO` expiry) and [`TcpSendStats::on_tcp_info`] whenever it samples
//! `TCP_INFO`. At each interval boundary it calls
//! [`TcpSendStats::take_interval`]; at the end [`TcpSendStats::total`].

use crate::formulas;
use crate::interval::Span;
use bloatlab_units::Bytes;
use std::time::Duration;

/// One `TCP_INFO` sample, in the units the kernel reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpInfoSample {
    /// `tcpi_snd_cwnd`, in segments.
    pub snd_cwnd: u32,
    /// `tcpi_snd_mss`, bytes per segment.
    pub snd_mss: u32,
    /// `tcpi_rtt`: smoothed RTT (the kernel reports whole microseconds).
    pub rtt: Duration,
    /// `tcpi_rttvar`: RTT variation.
    pub rttvar: Duration,
    /// `tcpi_total_retrans`: retransmitted segments since the connection began (cumulative).
    pub total_retrans: u32,
    /// `tcpi_delivered_ce`: segments delivered with a CE mark echoed by the
    /// receiver, since the connection began (cumulative; `None` when the
    /// kernel's `tcp_info` is too short to hold it, before Linux 4.19).
    pub delivered_ce: Option<u32>,
    /// `tcpi_bytes_acked`: payload bytes the receiver has acknowledged since the
    /// connection began (cumulative; Linux 4.1+, `None` on an older kernel). What
    /// arrived, as opposed to what was written: `bloatlab test` takes an upload's
    /// throughput from it when the server's own intervals are not relayed
    /// (docs/metrics.md).
    pub bytes_acked: Option<u64>,
}

impl TcpInfoSample {
    /// Congestion window in bytes (`snd_cwnd × snd_mss`).
    pub fn cwnd(&self) -> Bytes {
        Bytes(u64::from(self.snd_cwnd) * u64::from(self.snd_mss))
    }

    /// The Cwnd column value: `snd_cwnd × snd_mss / 1024`, truncated (KBytes).
    pub fn cwnd_kbytes(&self) -> u64 {
        self.cwnd().0 / 1024
    }
}

/// What one report line of a TCP sender shows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TcpSendSnapshot {
    /// The reported span.
    pub span: Span,
    /// Bytes written in the span.
    pub bytes: Bytes,
    /// Successful `write()` calls.
    pub writes: u64,
    /// Non-fatal write errors.
    pub write_errors: u64,
    /// Retransmitted segments in the span (delta of `tcpi_total_retrans`);
    /// on the total: the cumulative count.
    pub retransmits: u64,
    /// The last `TCP_INFO` sample taken in the span (`None` if none was taken).
    pub tcp_info: Option<TcpInfoSample>,
    /// Whether `TCP_INFO` was sampled at all (by the end of the span; on a sum, on any
    /// part), i.e. whether `retransmits` was measured rather than left at 0.
    pub tcp_info_sampled: bool,
    /// A paced sender's sleeps in the span (`-b`, `--near-congestion`); `None` when it
    /// never slept (unpaced: not measured, never 0).
    pub paced: Option<PacedWaits>,
}

/// How late a paced sender (`-b`, `--near-congestion`) woke from its sleeps: their number
/// and the time past each planned wake-up, summed. A busy host runs a woken thread late;
/// near-congestion pauses ~1 ms after every write, so that lateness is throughput the host,
/// not the pacing, took, and a check of a paced sender's throughput can tell the two apart
/// (issue 18: report 1's weight 0.4 at 0.80 of weight 0's rate on a busy host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacedWaits {
    /// Sleeps taken.
    pub waits: u64,
    /// Time past their planned wake-ups, summed.
    pub late: Duration,
}

impl PacedWaits {
    fn add(self, other: PacedWaits) -> PacedWaits {
        PacedWaits {
            waits: self.waits + other.waits,
            late: self.late.saturating_add(other.late),
        }
    }

    /// `Some` when there was at least one sleep.
    fn measured(self) -> Option<PacedWaits> {
        (self.waits > 0).then_some(self)
    }
}

impl TcpSendSnapshot {
    /// NetPwr with the sampled RTT as the delay (`None` without a sample or with RTT 0).
    pub fn net_power(&self) -> Option<f64> {
        let rtt = self.tcp_info?.rtt.as_secs_f64();
        formulas::net_power(self.bytes, self.span.len(), rtt)
    }

    /// Bytes per second over the span (0 for an empty span).
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.span)
    }

    /// Sum several streams' snapshots into a `[SUM]` snapshot over `span`
    /// (TCP_INFO is per-socket, so the sum carries none).
    pub fn sum<'a>(
        span: Span,
        parts: impl IntoIterator<Item = &'a TcpSendSnapshot>,
    ) -> TcpSendSnapshot {
        let mut s = TcpSendSnapshot {
            span,
            ..TcpSendSnapshot::default()
        };
        for p in parts {
            s.bytes = s.bytes.saturating_add(p.bytes);
            s.writes += p.writes;
            s.write_errors += p.write_errors;
            s.retransmits += p.retransmits;
            s.tcp_info_sampled |= p.tcp_info_sampled;
            if let Some(w) = p.paced {
                s.paced = Some(s.paced.unwrap_or_default().add(w));
            }
        }
        s
    }
}

pub(crate) fn per_sec(bytes: Bytes, span: Span) -> f64 {
    let secs = span.secs();
    if secs > 0.0 {
        bytes.0 as f64 / secs
    } else {
        0.0
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    bytes: Bytes,
    writes: u64,
    write_errors: u64,
    paced: PacedWaits,
}

/// Accumulates a TCP sender's interval and total counters.
#[derive(Debug, Clone, Default)]
pub struct TcpSendStats {
    current: Counters,
    total: Counters,
    last_info: Option<TcpInfoSample>,
    info_in_interval: bool,
    retrans_at_interval_start: u32,
    last_total_retrans: u32,
}

impl TcpSendStats {
    /// A fresh accumulator (connection just established, no retransmits yet).
    pub fn new() -> TcpSendStats {
        TcpSendStats::default()
    }

    /// A successful `write()` of `n` bytes.
    pub fn on_write(&mut self, n: Bytes) {
        for c in [&mut self.current, &mut self.total] {
            c.bytes = c.bytes.saturating_add(n);
            c.writes += 1;
        }
    }

    /// A non-fatal write error.
    pub fn on_write_error(&mut self) {
        self.current.write_errors += 1;
        self.total.write_errors += 1;
    }

    /// A paced sleep that was to end at some planned time and ended `late` after it (the
    /// driver measures; zero when it woke on time).
    pub fn on_paced_wait(&mut self, late: Duration) {
        let w = PacedWaits { waits: 1, late };
        for c in [&mut self.current, &mut self.total] {
            c.paced = c.paced.add(w);
        }
    }

    /// A `TCP_INFO` sample. The last sample of an interval is what the
    /// interval line shows; retransmits are the growth of `total_retrans`.
    pub fn on_tcp_info(&mut self, sample: TcpInfoSample) {
        self.last_total_retrans = sample.total_retrans;
        self.last_info = Some(sample);
        self.info_in_interval = true;
    }

    /// Close the current interval: returns its snapshot and starts the next.
    /// If no sample was taken in the interval, the previous sample is shown
    /// again (iperf 2 keeps the last value too).
    pub fn take_interval(&mut self, span: Span) -> TcpSendSnapshot {
        let snap = TcpSendSnapshot {
            span,
            bytes: self.current.bytes,
            writes: self.current.writes,
            write_errors: self.current.write_errors,
            retransmits: u64::from(
                self.last_total_retrans
                    .saturating_sub(self.retrans_at_interval_start),
            ),
            tcp_info: self.last_info,
            tcp_info_sampled: self.last_info.is_some(),
            paced: self.current.paced.measured(),
        };
        self.current = Counters::default();
        self.retrans_at_interval_start = self.last_total_retrans;
        self.info_in_interval = false;
        snap
    }

    /// The whole-test snapshot over `span` (normally `0..end`). Its TCP_INFO
    /// sample is the last one taken; iperf 2 takes that one after `shutdown()`,
    /// which is why its final RTT looks inflated.
    pub fn total(&self, span: Span) -> TcpSendSnapshot {
        TcpSendSnapshot {
            span,
            bytes: self.total.bytes,
            writes: self.total.writes,
            write_errors: self.total.write_errors,
            retransmits: u64::from(self.last_total_retrans),
            tcp_info: self.last_info,
            tcp_info_sampled: self.last_info.is_some(),
            paced: self.total.paced.measured(),
        }
    }

    /// Whether a `TCP_INFO` sample was recorded since the last interval closed.
    pub fn has_sample_in_interval(&self) -> bool {
        self.info_in_interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(total_retrans: u32, rtt_us: u64) -> TcpInfoSample {
        TcpInfoSample {
            snd_cwnd: 148,
            snd_mss: 32_741,
            rtt: Duration::from_micros(rtt_us),
            rttvar: Duration::from_micros(272),
            total_retrans,
            delivered_ce: None,
            bytes_acked: None,
        }
    }

    #[test]
    fn retransmits_are_deltas_and_total_is_cumulative() {
        // captures/02 client: Rtry 29, 0, 1 per interval, 30 in total.
        let mut s = TcpSendStats::new();
        let ms = Duration::from_millis;
        s.on_tcp_info(sample(10, 100));
        s.on_tcp_info(sample(29, 251));
        let a = s.take_interval(Span::new(ms(0), ms(1000)));
        s.on_tcp_info(sample(29, 317));
        let b = s.take_interval(Span::new(ms(1000), ms(2000)));
        s.on_tcp_info(sample(30, 476));
        let c = s.take_interval(Span::new(ms(2000), ms(3000)));
        assert_eq!((a.retransmits, b.retransmits, c.retransmits), (29, 0, 1));
        assert_eq!(s.total(Span::from_zero(ms(3014))).retransmits, 30);
        assert_eq!(a.tcp_info.unwrap().rtt, Duration::from_micros(251));
    }

    #[test]
    fn writes_bytes_errors_reset_per_interval() {
        let mut s = TcpSendStats::new();
        let ms = Duration::from_millis;
        for _ in 0..3 {
            s.on_write(Bytes(131_072));
        }
        s.on_write_error();
        let a = s.take_interval(Span::new(ms(0), ms(1000)));
        assert_eq!((a.writes, a.write_errors, a.bytes), (3, 1, Bytes(393_216)));
        s.on_write(Bytes(10));
        let b = s.take_interval(Span::new(ms(1000), ms(2000)));
        assert_eq!((b.writes, b.write_errors, b.bytes), (1, 0, Bytes(10)));
        let t = s.total(Span::from_zero(ms(2000)));
        assert_eq!((t.writes, t.write_errors, t.bytes), (4, 1, Bytes(393_226)));
        assert_eq!(t.net_power(), None);
    }

    #[test]
    fn cwnd_column_is_kbytes_truncated() {
        // 148 x 32741 / 1024 = 4732.1 -> "4732K" (captures/02).
        assert_eq!(sample(0, 1).cwnd_kbytes(), 4732);
    }

    #[test]
    fn sum_adds_counters_and_drops_tcp_info() {
        let ms = Duration::from_millis;
        let a = TcpSendSnapshot {
            span: Span::new(ms(0), ms(1000)),
            bytes: Bytes(5),
            writes: 2,
            write_errors: 1,
            retransmits: 26,
            tcp_info: Some(sample(0, 1)),
            tcp_info_sampled: true,
            paced: Some(PacedWaits {
                waits: 3,
                late: Duration::from_micros(70),
            }),
        };
        let s = TcpSendSnapshot::sum(Span::new(ms(0), ms(1000)), [&a, &a]);
        assert_eq!(
            (s.bytes, s.writes, s.write_errors, s.retransmits),
            (Bytes(10), 4, 2, 52)
        );
        assert_eq!(s.tcp_info, None);
        assert!(s.tcp_info_sampled, "the parts' retransmits were measured");
        assert_eq!(
            s.paced,
            Some(PacedWaits {
                waits: 6,
                late: Duration::from_micros(140)
            })
        );
    }

    #[test]
    fn paced_waits_add_up_per_interval_and_in_total_and_are_absent_unpaced() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        let mut s = TcpSendStats::new();
        s.on_paced_wait(us(40));
        s.on_paced_wait(us(900));
        let a = s.take_interval(Span::new(ms(0), ms(1000)));
        assert_eq!(
            a.paced,
            Some(PacedWaits {
                waits: 2,
                late: us(940)
            })
        );
        // An interval without a sleep has none (not measured, rather than 0 waits).
        s.on_write(Bytes(10));
        let b = s.take_interval(Span::new(ms(1000), ms(2000)));
        assert_eq!(b.paced, None);
        s.on_paced_wait(Duration::ZERO);
        let t = s.total(Span::from_zero(ms(3000)));
        assert_eq!(
            t.paced,
            Some(PacedWaits {
                waits: 3,
                late: us(940)
            })
        );
        assert_eq!(
            TcpSendStats::new().total(Span::from_zero(ms(1))).paced,
            None
        );
    }
}
