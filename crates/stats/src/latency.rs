//! Latency probe series and their per-phase summaries.
//!
//! A series is what one probe stream measured: for every probe, when it was sent
//! (offset from the run start) and either its delay or "lost". The delay is a round-trip
//! time or a one-way delay; [`DelayKind`] says which. Summaries follow the community
//! table (min / p10 / median / avg / p90 / max / count, seed report 4) plus p99 and loss,
//! computed per [`Phase`] with the quantile definition of [`crate::quantile`](mod@crate::quantile).

use std::time::Duration;

use crate::phase::Phase;
use crate::quantile::{mean, quantile_sorted};

/// What a probe's delay measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DelayKind {
    /// Round-trip time.
    RoundTrip,
    /// One-way delay, client to server.
    OneWayUp,
    /// One-way delay, server to client.
    OneWayDown,
}

/// The fate of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// It arrived; this is its delay (RTT or one-way, per the series' [`DelayKind`]).
    /// A one-way delay derived from an *estimated* clock offset can come out negative;
    /// a `Duration` cannot, so the producer must decide (e.g. re-estimate the offset)
    /// rather than let a wrap or a silent clamp reach these statistics.
    Delay(Duration),
    /// It never arrived (within the probe's timeout).
    Lost,
    /// No reply had come when the run ended, and its timeout had not passed: neither
    /// arrived nor lost. Behind a queue of several seconds, the probes of a run's last
    /// seconds are still queued when the prober stops; counting them lost would report
    /// loss that no packet suffered. They are counted apart and left out of the loss
    /// fraction.
    Unfinished,
}

/// One probe. For a one-way *down* series, a probe lost on the way *up* never had a
/// down leg: producers leave it out of the down series rather than marking it lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSample {
    /// When the probe was sent, as an offset from the start of the run.
    pub sent: Duration,
    /// Its delay, or lost.
    pub outcome: ProbeOutcome,
    /// How many extra copies arrived (0 normally).
    pub duplicates: u32,
    /// Whether it arrived after a probe sent later (out of order, irtt's "late").
    pub late: bool,
}

impl ProbeSample {
    /// A received probe with no duplicates, in order.
    pub fn received(sent: Duration, delay: Duration) -> ProbeSample {
        ProbeSample {
            sent,
            outcome: ProbeOutcome::Delay(delay),
            duplicates: 0,
            late: false,
        }
    }

    /// A lost probe.
    pub fn lost(sent: Duration) -> ProbeSample {
        ProbeSample {
            sent,
            outcome: ProbeOutcome::Lost,
            duplicates: 0,
            late: false,
        }
    }

    /// The delay, if the probe arrived.
    pub fn delay(&self) -> Option<Duration> {
        match self.outcome {
            ProbeOutcome::Delay(d) => Some(d),
            ProbeOutcome::Lost | ProbeOutcome::Unfinished => None,
        }
    }
}

/// All probes of one stream (e.g. "UDP EF" RTTs), in any order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencySeries {
    /// A label such as `udp_ef`, `icmp`, `udp_be_up`.
    pub name: String,
    /// What the delays measure.
    pub kind: DelayKind,
    /// The probes.
    pub samples: Vec<ProbeSample>,
}

/// Distribution of the delays of the received probes in one phase. All fields are
/// delays; quantiles use the type-7 definition of [`crate::quantile`](mod@crate::quantile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayStats {
    /// Number of received probes summarised (the table's "count"/"pings").
    pub count: u64,
    /// Smallest delay.
    pub min: Duration,
    /// 10th percentile.
    pub p10: Duration,
    /// Median (50th percentile).
    pub median: Duration,
    /// Arithmetic mean.
    pub mean: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl DelayStats {
    /// Summarises delays given in any order. `None` if there are none.
    pub fn from_delays(delays: &[Duration]) -> Option<DelayStats> {
        let mut sorted = delays.to_vec();
        sorted.sort_unstable();
        Self::from_sorted(&sorted)
    }

    /// Summarises already sorted delays. `None` if there are none.
    pub fn from_sorted(sorted: &[Duration]) -> Option<DelayStats> {
        let q = |p| quantile_sorted(sorted, p).ok();
        Some(DelayStats {
            count: sorted.len() as u64,
            min: *sorted.first()?,
            p10: q(0.10)?,
            median: q(0.50)?,
            mean: mean(sorted)?,
            p90: q(0.90)?,
            p99: q(0.99)?,
            max: *sorted.last()?,
        })
    }
}

/// Everything measured about one series in one phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    /// Probes sent during the phase.
    pub sent: u64,
    /// Of those, how many arrived.
    pub received: u64,
    /// Of those, how many were lost.
    pub lost: u64,
    /// Of those, how many were still unanswered, but not yet timed out, when the run
    /// ended ([`ProbeOutcome::Unfinished`]): neither received nor lost.
    pub unfinished: u64,
    /// Total extra copies received.
    pub duplicates: u64,
    /// Probes that arrived out of order.
    pub late: u64,
    /// Delay distribution of the received probes; `None` if none arrived.
    pub delay: Option<DelayStats>,
}

impl LatencySummary {
    /// `lost / (sent - unfinished)`: the share of the probes whose fate is known that were
    /// lost; `None` when no probe's fate is known (0/0 is not 0 % loss).
    pub fn loss_fraction(&self) -> Option<f64> {
        let decided = self.sent - self.unfinished;
        (decided > 0).then(|| self.lost as f64 / decided as f64)
    }
}

impl LatencySeries {
    /// Probes sent within `phase` (by send time, see [`crate::phase`]).
    pub fn in_phase<'a>(&'a self, phase: &'a Phase) -> impl Iterator<Item = &'a ProbeSample> + 'a {
        self.samples.iter().filter(|s| phase.contains(s.sent))
    }

    /// The summary of the probes sent within `phase`.
    pub fn summarize(&self, phase: &Phase) -> LatencySummary {
        let mut delays = Vec::new();
        let (mut sent, mut lost, mut unfinished) = (0u64, 0u64, 0u64);
        let (mut duplicates, mut late) = (0u64, 0u64);
        for s in self.in_phase(phase) {
            sent += 1;
            duplicates += u64::from(s.duplicates);
            late += u64::from(s.late);
            match s.outcome {
                ProbeOutcome::Delay(d) => delays.push(d),
                ProbeOutcome::Lost => lost += 1,
                ProbeOutcome::Unfinished => unfinished += 1,
            }
        }
        LatencySummary {
            sent,
            received: sent - lost - unfinished,
            lost,
            unfinished,
            duplicates,
            late,
            delay: DelayStats::from_delays(&delays),
        }
    }

    /// The received delays of probes sent within `phase`, in send order.
    pub fn delays_in(&self, phase: &Phase) -> Vec<Duration> {
        let mut v: Vec<&ProbeSample> = self.in_phase(phase).collect();
        v.sort_by_key(|s| s.sent);
        v.iter().filter_map(|s| s.delay()).collect()
    }
}

/// Mean absolute IP packet delay variation (RFC 3393, RFC 5481 §1.2) over probes in
/// send order: the mean of `|D(i+1) - D(i)|` over **consecutive** probes that both
/// arrived (a loss breaks the pair, as in RFC 3393 §2.5). `None` with fewer than one
/// pair.
pub fn mean_abs_ipdv(samples_in_send_order: &[ProbeSample]) -> Option<Duration> {
    let diffs: Vec<Duration> = samples_in_send_order
        .windows(2)
        .filter_map(|w| Some(w[0].delay()?.abs_diff(w[1].delay()?)))
        .collect();
    mean(&diffs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::{PhaseKind, Timeline};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// 10 s idle at 20 ms, 10 s loaded at 120 ms with 1 in 10 lost, 10 s recovery at
    /// 20 ms; one probe per 100 ms.
    fn rrul_like() -> (LatencySeries, Timeline) {
        let mut samples = Vec::new();
        for i in 0..300u64 {
            let sent = ms(i * 100);
            let s = if (100..200).contains(&i) {
                if i % 10 == 9 {
                    ProbeSample::lost(sent)
                } else {
                    ProbeSample::received(sent, ms(120))
                }
            } else {
                ProbeSample::received(sent, ms(20))
            };
            samples.push(s);
        }
        let series = LatencySeries {
            name: "udp_ef".into(),
            kind: DelayKind::RoundTrip,
            samples,
        };
        let t = Timeline::idle_loaded_recovery(ms(10_000), ms(10_000), ms(10_000));
        (series, t)
    }

    #[test]
    fn loaded_summary_excludes_idle_by_construction() {
        let (series, t) = rrul_like();
        let loaded = series.summarize(t.first(PhaseKind::Loaded).unwrap());
        assert_eq!(loaded.sent, 100);
        assert_eq!(loaded.lost, 10);
        assert_eq!(loaded.received, 90);
        assert_eq!(loaded.loss_fraction(), Some(0.1));
        let d = loaded.delay.unwrap();
        // Every loaded sample is 120 ms; any idle leakage would pull min below it.
        assert_eq!(
            (d.min, d.median, d.max, d.count),
            (ms(120), ms(120), ms(120), 90)
        );
        let idle = series.summarize(t.first(PhaseKind::Idle).unwrap());
        assert_eq!(idle.delay.unwrap().max, ms(20));
        assert_eq!(idle.loss_fraction(), Some(0.0));
    }

    #[test]
    fn summary_matches_hand_computation() {
        // Delays 1..=10 ms plus one loss, one duplicate and one late probe.
        let mut samples: Vec<ProbeSample> = (1..=10)
            .map(|i| ProbeSample::received(ms(i), ms(i)))
            .collect();
        samples[3].duplicates = 2;
        samples[4].late = true;
        samples.push(ProbeSample::lost(ms(11)));
        let series = LatencySeries {
            name: "x".into(),
            kind: DelayKind::RoundTrip,
            samples,
        };
        let all = Phase::new(PhaseKind::Loaded, Duration::ZERO, ms(100));
        let s = series.summarize(&all);
        assert_eq!(
            (s.sent, s.received, s.lost, s.duplicates, s.late),
            (11, 10, 1, 2, 1)
        );
        let d = s.delay.unwrap();
        // h = 9q: p10 -> 1.9 ms, median 5.5, p90 9.1, p99 9.91; mean 5.5.
        assert_eq!(d.min, ms(1));
        assert_eq!(d.p10, Duration::from_micros(1_900));
        assert_eq!(d.median, Duration::from_micros(5_500));
        assert_eq!(d.mean, Duration::from_micros(5_500));
        assert_eq!(d.p90, Duration::from_micros(9_100));
        assert_eq!(d.p99, Duration::from_micros(9_910));
        assert_eq!(d.max, ms(10));
    }

    #[test]
    fn empty_phase_has_no_delay_and_no_loss_fraction() {
        let series = LatencySeries {
            name: "x".into(),
            kind: DelayKind::OneWayUp,
            samples: vec![],
        };
        let s = series.summarize(&Phase::new(PhaseKind::Idle, Duration::ZERO, ms(5)));
        assert_eq!(s.sent, 0);
        assert_eq!(s.delay, None);
        assert_eq!(s.loss_fraction(), None);
        // All lost: 100 % loss, no delay stats.
        let lost = LatencySeries {
            name: "x".into(),
            kind: DelayKind::RoundTrip,
            samples: vec![ProbeSample::lost(ms(1))],
        };
        let s = lost.summarize(&Phase::new(PhaseKind::Idle, Duration::ZERO, ms(5)));
        assert_eq!(s.loss_fraction(), Some(1.0));
        assert_eq!(s.delay, None);
    }

    #[test]
    fn probes_unanswered_at_the_end_are_neither_received_nor_lost() {
        let unfinished = |sent| ProbeSample {
            outcome: ProbeOutcome::Unfinished,
            ..ProbeSample::lost(sent)
        };
        let series = LatencySeries {
            name: "x".into(),
            kind: DelayKind::RoundTrip,
            samples: vec![
                ProbeSample::received(ms(0), ms(10)),
                ProbeSample::lost(ms(1)),
                ProbeSample::received(ms(2), ms(12)),
                ProbeSample::received(ms(3), ms(14)),
                unfinished(ms(4)),
                unfinished(ms(5)),
            ],
        };
        let s = series.summarize(&Phase::new(PhaseKind::Idle, Duration::ZERO, ms(10)));
        assert_eq!((s.sent, s.received, s.lost, s.unfinished), (6, 3, 1, 2));
        // One of the four probes whose fate is known: not one of six.
        assert_eq!(s.loss_fraction(), Some(0.25));
        assert_eq!(s.delay.map(|d| d.count), Some(3));
        // Only unfinished probes: no fate known, so no loss fraction (not 0 %, not 100 %).
        let only = LatencySeries {
            samples: vec![unfinished(ms(1))],
            ..series
        };
        let s = only.summarize(&Phase::new(PhaseKind::Idle, Duration::ZERO, ms(10)));
        assert_eq!(s.loss_fraction(), None);
    }

    #[test]
    fn ipdv_skips_pairs_broken_by_loss() {
        let v = [
            ProbeSample::received(ms(0), ms(10)),
            ProbeSample::received(ms(20), ms(14)), // |14-10| = 4
            ProbeSample::lost(ms(40)),
            ProbeSample::received(ms(60), ms(30)), // pair with a loss: skipped
            ProbeSample::received(ms(80), ms(28)), // |28-30| = 2
        ];
        assert_eq!(mean_abs_ipdv(&v), Some(ms(3)));
        assert_eq!(mean_abs_ipdv(&v[..1]), None);
    }
}
