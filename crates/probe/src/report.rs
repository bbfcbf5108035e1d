//! What a probe session measured: one [`ProbeResult`] per request plus counters, and a
//! [`Summary`] computed from them (pure).
//!
//! Percentiles use `bloatlab_stats::quantile` (type 7, as numpy and flent), so a bloatlab
//! ping p90 equals the p90 of the same samples anywhere else in bloatlab.

use std::time::Duration;

use crate::clock::{ClockEstimate, ClockMethod};
use crate::time::SignedDuration;
use bloatlab_stats::quantile::quantile_sorted;

/// Which direction a lost probe was lost in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossDirection {
    /// The responder never received the request.
    Up,
    /// The responder received the request; its reply was lost.
    Down,
    /// No later reply told us (tail loss, long outage, ICMP).
    Unknown,
}

/// One probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeResult {
    /// Sequence number.
    pub seq: u64,
    /// Send time since the session start.
    pub sent: Duration,
    /// Round-trip time, if a reply came (also for late replies).
    pub rtt: Option<Duration>,
    /// One-way delay client to responder (responder clock corrected by the clock estimate;
    /// may be slightly negative when the estimate is off).
    pub up: Option<SignedDuration>,
    /// One-way delay responder to client.
    pub down: Option<SignedDuration>,
    /// `Some` if the probe counts as lost (no reply within the timeout).
    pub lost: Option<LossDirection>,
    /// A reply came after the timeout.
    pub late: bool,
    /// No reply had come when the session was stopped, and the timeout had not passed:
    /// neither received nor lost (`lost` is `None`, `rtt` is `None`). A queue of several
    /// seconds still holds the last probes when a stopped prober gives up waiting
    /// ([`crate::client::STOP_LINGER`]).
    pub unfinished: bool,
    /// Extra copies of the reply.
    pub duplicates: u32,
}

impl ProbeResult {
    /// The RTT if the probe was answered in time.
    pub fn rtt_in_time(&self) -> Option<Duration> {
        if self.answered_in_time() {
            self.rtt
        } else {
            None
        }
    }

    /// Answered within the timeout: neither lost nor unfinished.
    pub fn answered_in_time(&self) -> bool {
        self.lost.is_none() && !self.unfinished
    }
}

/// Everything a session measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Probe interval.
    pub interval: Duration,
    /// Slots skipped because the sender woke up late (host overloaded).
    pub skipped_slots: u64,
    /// Requests the responder said it had received (largest count seen in a reply).
    pub server_rx_count: u64,
    /// Clock offset and drift, or `shared`.
    pub clock: ClockEstimate,
    /// Per-probe results in sequence order.
    pub probes: Vec<ProbeResult>,
}

impl Report {
    /// Builds a report.
    pub fn new(
        interval: Duration,
        skipped_slots: u64,
        server_rx_count: u64,
        clock: ClockEstimate,
        probes: Vec<ProbeResult>,
    ) -> Report {
        Report {
            interval,
            skipped_slots,
            server_rx_count,
            clock,
            probes,
        }
    }

    /// True if the responder runs on the client's clock (one-way delays are exact).
    pub fn clocks_shared(&self) -> bool {
        self.clock.method == ClockMethod::Shared
    }

    /// Summary statistics.
    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }
}

/// min / p10 / median / mean / p90 / p99 / max of a set of delays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelayStats {
    /// Number of samples.
    pub count: usize,
    /// Minimum.
    pub min: SignedDuration,
    /// 10th percentile.
    pub p10: SignedDuration,
    /// Median.
    pub median: SignedDuration,
    /// Arithmetic mean.
    pub mean: SignedDuration,
    /// 90th percentile.
    pub p90: SignedDuration,
    /// 99th percentile.
    pub p99: SignedDuration,
    /// Maximum.
    pub max: SignedDuration,
}

impl DelayStats {
    /// Statistics of signed delays; `None` if empty.
    pub fn of(values: &[SignedDuration]) -> Option<DelayStats> {
        // Shift into the non-negative range so bloatlab-stats' Duration quantiles apply.
        let min = values.iter().min()?;
        let shift = min.as_nanos();
        let mut shifted: Vec<Duration> = values
            .iter()
            .map(|v| Duration::from_nanos((v.as_nanos() as i128 - shift as i128) as u64))
            .collect();
        shifted.sort_unstable();
        let q = |p: f64| {
            let d = quantile_sorted(&shifted, p).unwrap_or_default();
            SignedDuration::from_i128(d.as_nanos() as i128 + shift as i128)
        };
        let sum: i128 = values.iter().map(|v| v.as_nanos() as i128).sum();
        Some(DelayStats {
            count: values.len(),
            min: q(0.0),
            p10: q(0.1),
            median: q(0.5),
            mean: SignedDuration::from_i128(sum / values.len() as i128),
            p90: q(0.9),
            p99: q(0.99),
            max: q(1.0),
        })
    }
}

/// IP packet delay variation (RFC 3393) of one delay series: differences between
/// consecutive probes (by sequence number) that were both answered in time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ipdv {
    /// Pairs used.
    pub pairs: usize,
    /// Mean of |D(i+1) - D(i)|.
    pub mean_abs: Duration,
    /// Median of |D(i+1) - D(i)|.
    pub median_abs: Duration,
    /// Largest |D(i+1) - D(i)|.
    pub max_abs: Duration,
}

impl Ipdv {
    fn of(series: &[Option<SignedDuration>]) -> Option<Ipdv> {
        let mut diffs: Vec<Duration> = series
            .windows(2)
            .filter_map(|w| Some(w[1]?.saturating_sub(w[0]?).abs()))
            .collect();
        if diffs.is_empty() {
            return None;
        }
        diffs.sort_unstable();
        let sum: Duration = diffs.iter().sum();
        Some(Ipdv {
            pairs: diffs.len(),
            mean_abs: sum / diffs.len() as u32,
            median_abs: quantile_sorted(&diffs, 0.5).unwrap_or_default(),
            max_abs: diffs[diffs.len() - 1],
        })
    }
}

/// The figures `bloatlab ping` prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Requests sent.
    pub sent: u64,
    /// Answered within the timeout.
    pub received: u64,
    /// Lost, responder never saw the request.
    pub lost_up: u64,
    /// Lost, reply lost on the way back.
    pub lost_down: u64,
    /// Lost, direction unknown.
    pub lost_unknown: u64,
    /// Extra reply copies.
    pub duplicates: u64,
    /// Replies that came after the timeout.
    pub late: u64,
    /// Unanswered when the session was stopped, before their timeout: neither received nor
    /// lost ([`ProbeResult::unfinished`]).
    pub unfinished: u64,
    /// Send slots skipped because the sender woke up late.
    pub skipped_slots: u64,
    /// Round-trip time.
    pub rtt: Option<DelayStats>,
    /// One-way delay up.
    pub up: Option<DelayStats>,
    /// One-way delay down.
    pub down: Option<DelayStats>,
    /// IPDV of the RTT.
    pub ipdv_rtt: Option<Ipdv>,
    /// IPDV up.
    pub ipdv_up: Option<Ipdv>,
    /// IPDV down.
    pub ipdv_down: Option<Ipdv>,
    /// Clock offset and drift.
    pub clock: ClockEstimate,
}

impl Summary {
    /// Computes the summary of a report.
    pub fn of(r: &Report) -> Summary {
        let count = |d: LossDirection| r.probes.iter().filter(|p| p.lost == Some(d)).count() as u64;
        let in_time: Vec<&ProbeResult> = r.probes.iter().filter(|p| p.answered_in_time()).collect();
        let rtt: Vec<SignedDuration> = in_time
            .iter()
            .filter_map(|p| p.rtt.map(SignedDuration::from_duration))
            .collect();
        let up: Vec<SignedDuration> = in_time.iter().filter_map(|p| p.up).collect();
        let down: Vec<SignedDuration> = in_time.iter().filter_map(|p| p.down).collect();
        let series =
            |f: fn(&ProbeResult) -> Option<SignedDuration>| -> Vec<Option<SignedDuration>> {
                r.probes
                    .iter()
                    .map(|p| if p.answered_in_time() { f(p) } else { None })
                    .collect()
            };
        Summary {
            sent: r.probes.len() as u64,
            received: in_time.len() as u64,
            lost_up: count(LossDirection::Up),
            lost_down: count(LossDirection::Down),
            lost_unknown: count(LossDirection::Unknown),
            duplicates: r.probes.iter().map(|p| u64::from(p.duplicates)).sum(),
            late: r.probes.iter().filter(|p| p.late).count() as u64,
            unfinished: r.probes.iter().filter(|p| p.unfinished).count() as u64,
            skipped_slots: r.skipped_slots,
            rtt: DelayStats::of(&rtt),
            up: DelayStats::of(&up),
            down: DelayStats::of(&down),
            ipdv_rtt: Ipdv::of(&series(|p| p.rtt.map(SignedDuration::from_duration))),
            ipdv_up: Ipdv::of(&series(|p| p.up)),
            ipdv_down: Ipdv::of(&series(|p| p.down)),
            clock: r.clock,
        }
    }

    /// Lost probes in any direction.
    pub fn lost(&self) -> u64 {
        self.lost_up + self.lost_down + self.lost_unknown
    }

    /// Probes whose fate is known (received or lost): the denominator of the loss
    /// percentage, which leaves the unfinished ones out.
    pub fn decided(&self) -> u64 {
        self.sent - self.unfinished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sd(ms: i64) -> SignedDuration {
        SignedDuration::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn delay_stats_known_answers() {
        // 1..=10 ms: type-7 p10 = 1.9, median 5.5, p90 9.1, p99 9.91.
        let v: Vec<SignedDuration> = (1..=10).map(sd).collect();
        let s = DelayStats::of(&v).unwrap();
        assert_eq!(s.min, sd(1));
        assert_eq!(s.p10.as_nanos(), 1_900_000);
        assert_eq!(s.median.as_nanos(), 5_500_000);
        assert_eq!(s.mean.as_nanos(), 5_500_000);
        assert_eq!(s.p90.as_nanos(), 9_100_000);
        assert_eq!(s.p99.as_nanos(), 9_910_000);
        assert_eq!(s.max, sd(10));
    }

    #[test]
    fn delay_stats_handle_negative_values() {
        let v = [sd(-3), sd(-1), sd(2)];
        let s = DelayStats::of(&v).unwrap();
        assert_eq!(s.min, sd(-3));
        assert_eq!(s.median, sd(-1));
        assert_eq!(s.max, sd(2));
        assert_eq!(s.mean.as_nanos(), -666_666);
        assert!(DelayStats::of(&[]).is_none());
    }

    #[test]
    fn ipdv_skips_pairs_broken_by_loss() {
        // 10, 12, lost, 20, 15 -> pairs (10,12) and (20,15): |2|, |5|
        let v = [Some(sd(10)), Some(sd(12)), None, Some(sd(20)), Some(sd(15))];
        let i = Ipdv::of(&v).unwrap();
        assert_eq!(i.pairs, 2);
        assert_eq!(i.mean_abs, Duration::from_micros(3500));
        assert_eq!(i.max_abs, Duration::from_millis(5));
        assert!(Ipdv::of(&[Some(sd(1)), None]).is_none());
    }
}
