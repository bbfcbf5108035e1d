//! "Working conditions" checks: did the load actually build a queue, and was the host
//! (rather than the network) the bottleneck?
//!
//! Why: on one bloated path, a 1-flow flent test saw a loaded p50 of 8.6 ms where
//! crusader's 8+8 flows saw 287 ms, because window-limited flows never filled the queue,
//! and nothing warned the user. The opposite trap: on a 2-core host, 7–12 ms of "bloat"
//! that crusader showed on loopback was CPU contention.
//!
//! These are pure functions over numbers the drivers collect; each returns typed
//! [`Finding`]s whose `Display` is the message shown to the user.

use std::fmt;
use std::time::Duration;

use bloatlab_units::BitRate;

use crate::grade::InducedLatency;
use crate::latency::LatencySummary;
use crate::quantile::{quantile, quantile_f64};

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Everything as it should be.
    Ok,
    /// Results are usable but should be read with this in mind.
    Warning,
}

/// Signals of congestion other than the probes' delay, gathered during the loaded phase
/// from the load flows (TCP_INFO) and, in a lab, from the emulator itself. `None` means
/// "not measured", which is different from zero.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CongestionSignals {
    /// TCP retransmits summed over the load flows (`tcpi_total_retrans` deltas).
    pub retransmits: Option<u64>,
    /// ECN CE marks seen (`tcpi_delivered_ce` deltas, or echoed marks on probes).
    pub ecn_marks: Option<u64>,
    /// How much the load flows' own smoothed RTT (`tcpi_rtt`, median over the loaded
    /// phase) exceeds the idle round trip. Under an AQM the probes (a sparse flow that FQ
    /// serves first) see no queue, but the bulk flows sit in theirs.
    pub flow_rtt_rise: Option<Duration>,
    /// Packets the bottleneck (the lab's emulator) dropped because its queue was full or
    /// its AQM said so (random loss excluded).
    pub bottleneck_drops: Option<u64>,
    /// Packets the bottleneck marked CE.
    pub bottleneck_marks: Option<u64>,
    /// Delivered bits over the bottleneck's capacity (0..=1), when the capacity is known.
    pub utilisation: Option<f64>,
}

/// Thresholds for [`check_queue`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueCheckConfig {
    /// Minimum median increase counted as a queue. Default 5 ms, the A+ bound: an
    /// increase below it grades A+ whether or not a queue formed, so it is not evidence.
    pub min_increase: Duration,
    /// Minimum rise in probe loss fraction (loaded minus idle) counted as queue
    /// overflow. Default 0.005 (half a percent).
    pub min_loss_rise: f64,
    /// Minimum rise of the load flows' own RTT counted as a standing queue. Default 2 ms:
    /// CoDel's 5 ms target keeps a bulk flow's queue delay near 5 ms, while a
    /// window-limited flow on a fast link adds well under a millisecond.
    pub min_flow_rtt_rise: Duration,
    /// Utilisation of a known capacity at or above which the bottleneck counts as
    /// saturated. Default 0.9 (TCP/IP headers take ~4 % of a 1500-byte packet).
    pub min_utilisation: f64,
}

impl Default for QueueCheckConfig {
    fn default() -> Self {
        QueueCheckConfig {
            min_increase: Duration::from_millis(5),
            min_loss_rise: 0.005,
            min_flow_rtt_rise: Duration::from_millis(2),
            min_utilisation: 0.9,
        }
    }
}

/// One piece of evidence that the bottleneck queue filled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueEvidence {
    /// The loaded median rose by this much over idle.
    DelayIncrease(Duration),
    /// Probe loss rose from `idle` to `loaded` (fractions).
    ProbeLoss {
        /// Idle loss fraction.
        idle: f64,
        /// Loaded loss fraction.
        loaded: f64,
    },
    /// The load flows retransmitted this many segments.
    Retransmits(u64),
    /// This many ECN CE marks were seen.
    EcnMarks(u64),
    /// The load flows' own RTT rose this much.
    FlowRttRise(Duration),
    /// The bottleneck dropped this many packets (queue full or AQM).
    BottleneckDrops(u64),
    /// The bottleneck marked this many packets CE.
    BottleneckMarks(u64),
    /// The load used this fraction of the bottleneck's capacity.
    Saturated(f64),
}

impl fmt::Display for QueueEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueEvidence::DelayIncrease(d) => write!(f, "median latency rose {}", Ms(*d)),
            QueueEvidence::ProbeLoss { idle, loaded } => write!(
                f,
                "probe loss rose from {:.2} % to {:.2} %",
                idle * 100.0,
                loaded * 100.0
            ),
            QueueEvidence::Retransmits(n) => write!(f, "{n} TCP retransmits"),
            QueueEvidence::EcnMarks(n) => {
                write!(f, "{n} CE-echoed segments (TCP_INFO delivered_ce)")
            }
            QueueEvidence::FlowRttRise(d) => write!(f, "the load flows' own RTT rose {}", Ms(*d)),
            QueueEvidence::BottleneckDrops(n) => {
                write!(
                    f,
                    "the bottleneck dropped {n} packets during the load (queue full or AQM)"
                )
            }
            QueueEvidence::BottleneckMarks(n) => {
                write!(f, "the bottleneck marked {n} packets CE during the load")
            }
            QueueEvidence::Saturated(u) => {
                write!(f, "the load used {:.0} % of the link's capacity", u * 100.0)
            }
        }
    }
}

/// A duration printed in milliseconds with 1 decimal.
struct Ms(Duration);

impl fmt::Display for Ms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} ms", self.0.as_secs_f64() * 1e3)
    }
}

/// A verdict about the measurement itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The load reached working conditions; here is why we think so.
    QueueBuilt {
        /// Every signal that crossed its threshold.
        evidence: Vec<QueueEvidence>,
    },
    /// No signal crossed its threshold: the load probably never filled the bottleneck
    /// queue (too few flows, window- or application-limited senders, a faster link
    /// than the load can fill), so the latency shown is not latency under load.
    NoQueueBuilt {
        /// The median increase seen (zero if latency fell), if there was a baseline.
        increase: Option<Duration>,
        /// The other signals that were measured and stayed below their thresholds, as
        /// they read in the message ("retransmits", ...); unmeasured ones are not named.
        checked: Vec<&'static str>,
    },
    /// A phase had no received probes, so there is nothing to compare.
    MissingBaseline {
        /// `"idle"` or `"loaded"`.
        phase: &'static str,
    },
    /// Probe send timers fired late: the host could not keep its own schedule.
    HostTimersLate {
        /// 99th percentile of lateness.
        p99: Duration,
        /// Fraction of probes later than the threshold.
        late_fraction: f64,
        /// The threshold used.
        threshold: Duration,
    },
    /// The CPU was saturated during the load.
    HostCpuSaturated {
        /// Median utilisation of the samples given, 0..=1.
        median: f64,
        /// The threshold used.
        threshold: f64,
    },
    /// Neither timers nor CPU suggest the host was the bottleneck.
    HostOk,
    /// The lab's emulator released packets late during the run (its own timing error,
    /// `lab status` lateness): the latency figures include up to this much of it.
    EmulatorLate {
        /// `up` or `down`.
        direction: String,
        /// 99th percentile of release lateness during the run.
        p99: Duration,
        /// Largest lateness during the run.
        max: Duration,
        /// The threshold used.
        threshold: Duration,
    },
    /// The lab's emulator fell behind in one phase: more than `bound` of the packets it
    /// released there in `direction` left more than 1 ms after their due time. The run's
    /// latency figures for that phase include host delay (the same rule makes an
    /// experiment's point incomplete, docs/experiments.md "A busy host").
    EmulatorBehind {
        /// `up` or `down`.
        direction: String,
        /// The phase.
        phase: String,
        /// Fraction of its packets released more than 1 ms late.
        late_fraction: f64,
        /// 99th percentile of their release lateness, if measured.
        p99: Option<Duration>,
        /// The bound, a fraction.
        bound: f64,
    },
    /// The latency probes take a noticeable share of a known link rate, so they are part
    /// of the load they measure.
    ProbeLoad {
        /// `up` or `down`.
        direction: String,
        /// The probes' rate on the wire (IP packets).
        probes: BitRate,
        /// The link's rate.
        link: BitRate,
        /// The threshold used, a fraction of `link`.
        max_fraction: f64,
    },
}

impl Finding {
    /// Whether this is good news or a warning.
    pub fn severity(&self) -> Severity {
        match self {
            Finding::QueueBuilt { .. } | Finding::HostOk => Severity::Ok,
            _ => Severity::Warning,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::QueueBuilt { evidence } => {
                f.write_str("the load reached working conditions: ")?;
                for (i, e) in evidence.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            Finding::NoQueueBuilt { increase, checked } => {
                f.write_str("the load did not build a queue")?;
                if let Some(d) = increase {
                    write!(f, " (median latency rose only {})", Ms(*d))?;
                }
                f.write_str(" and caused no probe loss")?;
                for (i, c) in checked.iter().enumerate() {
                    f.write_str(if i + 1 == checked.len() { " or " } else { ", " })?;
                    f.write_str(c)?;
                }
                f.write_str(
                    "; the bottleneck was probably not saturated, so these numbers are not \
                     latency under load (try more flows or a longer test)",
                )
            }
            Finding::MissingBaseline { phase } => {
                write!(
                    f,
                    "no probe replies in the {phase} phase; cannot tell whether the load built a queue"
                )
            }
            Finding::HostTimersLate {
                p99,
                late_fraction,
                threshold,
            } => write!(
                f,
                "this host could not keep its probe schedule ({:.1} % of probes left more \
                 than {} late, p99 {}); latency figures include host delay",
                late_fraction * 100.0,
                Ms(*threshold),
                Ms(*p99)
            ),
            Finding::HostCpuSaturated { median, threshold } => write!(
                f,
                "the CPU was saturated (median utilisation {:.0} %, threshold {:.0} %); \
                 the host, not the network, may have been the bottleneck",
                median * 100.0,
                threshold * 100.0
            ),
            Finding::HostOk => {
                f.write_str("the host kept up (probe timers on time, CPU not saturated)")
            }
            Finding::EmulatorBehind {
                direction,
                phase,
                late_fraction,
                p99,
                bound,
            } => {
                write!(
                    f,
                    "the lab's emulator released {:.1} % of the {direction} packets more than \
                     1 ms late in phase {phase} (bound {:.1} %",
                    late_fraction * 100.0,
                    bound * 100.0
                )?;
                if let Some(p) = p99 {
                    write!(f, ", p99 {}", Ms(*p))?;
                }
                f.write_str("): the host was too busy, latency figures include host delay")
            }
            Finding::EmulatorLate {
                direction,
                p99,
                max,
                threshold,
            } => write!(
                f,
                "the lab's emulator released {direction} packets late during the run (p99 {}, \
                 max {}, above {}): latency figures include up to that much emulator error \
                 (a busy host; see `lab status`)",
                Ms(*p99),
                Ms(*max),
                Ms(*threshold)
            ),
            Finding::ProbeLoad {
                direction,
                probes,
                link,
                max_fraction,
            } => write!(
                f,
                "the latency probes alone take {:.0} % of the {direction} link ({:.0} kbit/s of \
                 {:.0} kbit/s, more than {:.0} %): they are part of the load they measure \
                 (use a longer --probe-interval)",
                probes.0 as f64 / link.0 as f64 * 100.0,
                probes.0 as f64 / 1e3,
                link.0 as f64 / 1e3,
                max_fraction * 100.0
            ),
        }
    }
}

/// Did the load build a queue? Evidence is any of: the median rose by at least
/// `min_increase`; probe loss rose by at least `min_loss_rise`; the load flows saw
/// retransmits; ECN CE marks were seen. An AQM (FQ-CoDel, CAKE) keeps the delay
/// increase small *by dropping or marking*, so drops and marks count as evidence too.
pub fn check_queue(
    idle: &LatencySummary,
    loaded: &LatencySummary,
    signals: CongestionSignals,
    cfg: &QueueCheckConfig,
) -> Finding {
    if idle.delay.is_none() {
        return Finding::MissingBaseline { phase: "idle" };
    }
    if loaded.delay.is_none() && loaded.lost == 0 {
        return Finding::MissingBaseline { phase: "loaded" };
    }
    let mut evidence = Vec::new();
    let increase = InducedLatency::from_summaries(idle, loaded).map(|i| i.increase());
    if let Some(inc) = increase
        && inc >= cfg.min_increase
    {
        evidence.push(QueueEvidence::DelayIncrease(inc));
    }
    if let (Some(i), Some(l)) = (idle.loss_fraction(), loaded.loss_fraction())
        && l - i >= cfg.min_loss_rise
    {
        evidence.push(QueueEvidence::ProbeLoss { idle: i, loaded: l });
    }
    if let Some(n) = signals.retransmits.filter(|&n| n > 0) {
        evidence.push(QueueEvidence::Retransmits(n));
    }
    if let Some(n) = signals.ecn_marks.filter(|&n| n > 0) {
        evidence.push(QueueEvidence::EcnMarks(n));
    }
    // The flows' own RTT is a proxy for a queue we cannot see. It also rises for reasons
    // that are not a bottleneck queue (delayed ACKs of a window-limited receiver, the
    // hosts' own stacks: 3.3 ms through an idle 200 Mbit/s lab), so where the bottleneck is
    // observed directly (a lab: its utilisation, drops and marks are known) those decide.
    let bottleneck_observed = signals.utilisation.is_some();
    if let Some(d) = signals
        .flow_rtt_rise
        .filter(|&d| d >= cfg.min_flow_rtt_rise && !bottleneck_observed)
    {
        evidence.push(QueueEvidence::FlowRttRise(d));
    }
    if let Some(n) = signals.bottleneck_drops.filter(|&n| n > 0) {
        evidence.push(QueueEvidence::BottleneckDrops(n));
    }
    if let Some(n) = signals.bottleneck_marks.filter(|&n| n > 0) {
        evidence.push(QueueEvidence::BottleneckMarks(n));
    }
    if let Some(u) = signals.utilisation.filter(|&u| u >= cfg.min_utilisation) {
        evidence.push(QueueEvidence::Saturated(u));
    }
    if evidence.is_empty() {
        let checked = [
            (signals.retransmits.is_some(), "retransmits"),
            (signals.ecn_marks.is_some(), "ECN marks"),
            (
                signals.flow_rtt_rise.is_some(),
                "rise of the flows' own RTT",
            ),
            (
                signals.bottleneck_drops.is_some(),
                "drops at the bottleneck",
            ),
            (
                signals.bottleneck_marks.is_some(),
                "CE marks at the bottleneck",
            ),
            (
                signals.utilisation.is_some(),
                "use of most of the link's capacity",
            ),
        ]
        .into_iter()
        .filter_map(|(measured, name)| measured.then_some(name))
        .collect();
        Finding::NoQueueBuilt { increase, checked }
    } else {
        Finding::QueueBuilt { evidence }
    }
}

/// Thresholds for [`check_host`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostCheckConfig {
    /// A probe that left later than this after its scheduled time counts as late.
    /// Default 1 ms: at 100 Hz that is a tenth of the interval, and well above the
    /// ~0.2 ms sleep jitter measured on a loaded 2-core VM.
    pub late_threshold: Duration,
    /// More than this fraction of late probes flags the host. Default 0.01 (irtt
    /// showed 1.8 % timer misses on an idle 2-vCPU VM, anchors §3.2, which we flag).
    pub max_late_fraction: f64,
    /// A median CPU utilisation at or above this flags the host. Default 0.95.
    pub cpu_saturated: f64,
}

impl Default for HostCheckConfig {
    fn default() -> Self {
        HostCheckConfig {
            late_threshold: Duration::from_millis(1),
            max_late_fraction: 0.01,
            cpu_saturated: 0.95,
        }
    }
}

/// Was the host the bottleneck? `lateness` is, per probe, how long after its scheduled
/// time it was actually sent; `cpu_utilisation` is utilisation samples (0..=1, of the
/// busiest CPU or of the whole machine: the caller decides and says so) taken during
/// the load. NaN utilisation samples are ignored. Returns [`Finding::HostOk`] or one or
/// two warnings.
pub fn check_host(
    lateness: &[Duration],
    cpu_utilisation: &[f64],
    cfg: &HostCheckConfig,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Ok(p99) = quantile(lateness, 0.99) {
        let late = lateness.iter().filter(|&&d| d > cfg.late_threshold).count();
        let late_fraction = late as f64 / lateness.len() as f64;
        if late_fraction > cfg.max_late_fraction {
            out.push(Finding::HostTimersLate {
                p99,
                late_fraction,
                threshold: cfg.late_threshold,
            });
        }
    }
    if let Ok(median) = quantile_f64(cpu_utilisation, 0.5)
        && median >= cfg.cpu_saturated
    {
        out.push(Finding::HostCpuSaturated {
            median,
            threshold: cfg.cpu_saturated,
        });
    }
    if out.is_empty() {
        out.push(Finding::HostOk);
    }
    out
}

/// The emulator's release lateness above which a run's latency figures are flagged:
/// 1 ms at p99 (issue 13: p99 7-8 ms on a contended host).
pub const EMULATOR_LATE_P99: Duration = Duration::from_millis(1);

/// Was the lab's emulator late during the run? `per_direction` is `(direction, p99, max)`
/// of its release lateness over the run. One warning per direction whose p99 exceeds
/// `threshold`.
pub fn check_emulator(
    per_direction: &[(String, Duration, Duration)],
    threshold: Duration,
) -> Vec<Finding> {
    per_direction
        .iter()
        .filter(|(_, p99, _)| *p99 > threshold)
        .map(|(direction, p99, max)| Finding::EmulatorLate {
            direction: direction.clone(),
            p99: *p99,
            max: *max,
            threshold,
        })
        .collect()
}

/// Probe traffic above this share of a known link rate is flagged: 5 %.
pub const MAX_PROBE_SHARE: f64 = 0.05;

/// Do the probes take more than `max_fraction` of a link of rate `link`? `probes` is
/// their rate in that direction (IP packets on the wire).
pub fn check_probe_load(
    direction: &str,
    probes: BitRate,
    link: BitRate,
    max_fraction: f64,
) -> Option<Finding> {
    (link.0 > 0 && probes.0 as f64 > max_fraction * link.0 as f64).then(|| Finding::ProbeLoad {
        direction: direction.to_owned(),
        probes,
        link,
        max_fraction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::DelayStats;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn summary(median_ms: u64, sent: u64, lost: u64) -> LatencySummary {
        let delays = vec![ms(median_ms); (sent - lost) as usize];
        LatencySummary {
            sent,
            received: sent - lost,
            lost,
            unfinished: 0,
            duplicates: 0,
            late: 0,
            delay: DelayStats::from_delays(&delays),
        }
    }

    #[test]
    fn bloated_fifo_built_a_queue() {
        let f = check_queue(
            &summary(20, 100, 0),
            &summary(168, 100, 2),
            CongestionSignals::default(),
            &QueueCheckConfig::default(),
        );
        let Finding::QueueBuilt { evidence } = &f else {
            panic!("{f:?}")
        };
        assert_eq!(evidence[0], QueueEvidence::DelayIncrease(ms(148)));
        assert!(matches!(evidence[1], QueueEvidence::ProbeLoss { .. }));
        assert_eq!(f.severity(), Severity::Ok);
        assert!(
            f.to_string().contains("median latency rose 148.0 ms"),
            "{f}"
        );
    }

    #[test]
    fn aqm_with_small_delay_but_drops_counts() {
        let f = check_queue(
            &summary(20, 100, 0),
            &summary(22, 100, 0),
            CongestionSignals {
                retransmits: Some(37),
                ..CongestionSignals::default()
            },
            &QueueCheckConfig::default(),
        );
        assert_eq!(
            f,
            Finding::QueueBuilt {
                evidence: vec![QueueEvidence::Retransmits(37)]
            }
        );
    }

    #[test]
    fn window_limited_load_is_flagged() {
        // anchors §7.1: netperf flows with 0 retransmits and a tiny delay rise.
        let f = check_queue(
            &summary(20, 100, 0),
            &summary(23, 100, 0),
            CongestionSignals {
                retransmits: Some(0),
                ecn_marks: Some(0),
                ..CongestionSignals::default()
            },
            &QueueCheckConfig::default(),
        );
        assert_eq!(
            f,
            Finding::NoQueueBuilt {
                increase: Some(ms(3)),
                checked: vec!["retransmits", "ECN marks"],
            }
        );
        assert_eq!(f.severity(), Severity::Warning);
        let text = f.to_string();
        assert!(text.contains("did not build a queue"), "{text}");
        assert!(text.contains("3.0 ms"), "{text}");
        assert!(
            text.contains("no probe loss, retransmits or ECN marks;"),
            "{text}"
        );
    }

    #[test]
    fn unmeasured_signals_are_not_claimed_to_be_zero() {
        // issue 9: retransmits were never measured, yet the message said "no retransmits".
        let f = check_queue(
            &summary(20, 100, 0),
            &summary(21, 100, 0),
            CongestionSignals::default(),
            &QueueCheckConfig::default(),
        );
        let text = f.to_string();
        assert!(text.contains("no probe loss;"), "{text}");
        assert!(!text.contains("retransmits"), "{text}");
    }

    /// A saturated FQ-CoDel (or CAKE) lab: the probes, a sparse flow, see no queue, but
    /// the emulator drops and the link is full (the flows' own RTT rise is not needed
    /// where the bottleneck is observed, and counts alone where it is not).
    #[test]
    fn saturated_aqm_counts_from_bottleneck_and_flow_signals() {
        let cfg = QueueCheckConfig::default();
        let (idle, loaded) = (summary(80, 100, 0), summary(81, 100, 0));
        let aqm = CongestionSignals {
            flow_rtt_rise: Some(ms(6)),
            bottleneck_drops: Some(2400),
            bottleneck_marks: Some(0),
            utilisation: Some(0.93),
            ..CongestionSignals::default()
        };
        let f = check_queue(&idle, &loaded, aqm, &cfg);
        assert_eq!(
            f,
            Finding::QueueBuilt {
                evidence: vec![
                    QueueEvidence::BottleneckDrops(2400),
                    QueueEvidence::Saturated(0.93),
                ]
            }
        );
        assert!(f.to_string().contains("93 % of the link"), "{f}");
        // Each signal alone is enough.
        for one in [
            CongestionSignals {
                flow_rtt_rise: Some(ms(2)),
                ..CongestionSignals::default()
            },
            CongestionSignals {
                bottleneck_marks: Some(1),
                ..CongestionSignals::default()
            },
            CongestionSignals {
                utilisation: Some(0.9),
                ..CongestionSignals::default()
            },
        ] {
            assert_eq!(
                check_queue(&idle, &loaded, one, &cfg).severity(),
                Severity::Ok
            );
        }
    }

    /// A window-limited single flow through a deep FIFO on a fast link: nothing dropped,
    /// a sliver of the capacity used: still a warning, even though the flow's own RTT rose
    /// 3.3 ms (delayed ACKs of its small receive window; measured in the real lab test).
    #[test]
    fn window_limited_flow_on_a_fast_fifo_still_warns() {
        let f = check_queue(
            &summary(10, 100, 0),
            &summary(10, 100, 0),
            CongestionSignals {
                retransmits: Some(0),
                flow_rtt_rise: Some(Duration::from_micros(3300)),
                bottleneck_drops: Some(0),
                bottleneck_marks: Some(0),
                utilisation: Some(0.05),
                ..CongestionSignals::default()
            },
            &QueueCheckConfig::default(),
        );
        assert!(matches!(f, Finding::NoQueueBuilt { .. }), "{f:?}");
        assert!(f.to_string().contains("drops at the bottleneck"), "{f}");
    }

    #[test]
    fn late_emulator_is_flagged_per_direction() {
        let v = vec![
            ("up".to_string(), Duration::from_micros(900), ms(3)),
            ("down".to_string(), Duration::from_micros(7500), ms(32)),
        ];
        let f = check_emulator(&v, EMULATOR_LATE_P99);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity(), Severity::Warning);
        let text = f[0].to_string();
        assert!(
            text.contains("down packets late") && text.contains("p99 7.5 ms"),
            "{text}"
        );
        assert!(check_emulator(&v[..1], EMULATOR_LATE_P99).is_empty());
    }

    #[test]
    fn probes_over_five_percent_of_a_known_rate_are_flagged() {
        // issue 9: 3 UDP streams of 108-byte packets and 100-byte ICMP at 100 Hz on a
        // 737 kbit/s uplink.
        let probes = BitRate(3 * 100 * 108 * 8 + 100 * 100 * 8);
        let f = check_probe_load("up", probes, BitRate(737_000), MAX_PROBE_SHARE).unwrap();
        let text = f.to_string();
        assert!(text.contains("take 46 % of the up link"), "{text}");
        assert!(check_probe_load("up", probes, BitRate(20_000_000), MAX_PROBE_SHARE).is_none());
        assert!(check_probe_load("up", BitRate(50_001), BitRate(1_000_000), 0.05).is_some());
        assert!(check_probe_load("up", BitRate(50_000), BitRate(1_000_000), 0.05).is_none());
    }

    #[test]
    fn missing_baseline() {
        let none = summary(0, 0, 0);
        let f = check_queue(
            &none,
            &summary(50, 10, 0),
            CongestionSignals::default(),
            &QueueCheckConfig::default(),
        );
        assert_eq!(f, Finding::MissingBaseline { phase: "idle" });
        // A loaded phase where every probe was lost still counts as evidence.
        let f = check_queue(
            &summary(20, 10, 0),
            &summary(0, 10, 10),
            CongestionSignals::default(),
            &QueueCheckConfig::default(),
        );
        assert!(matches!(f, Finding::QueueBuilt { .. }));
    }

    #[test]
    fn host_checks() {
        let cfg = HostCheckConfig::default();
        let on_time = vec![Duration::from_micros(150); 1000];
        assert_eq!(
            check_host(&on_time, &[0.4, 0.5, 0.6], &cfg),
            vec![Finding::HostOk]
        );
        let mut late = on_time.clone();
        for d in late.iter_mut().take(20) {
            *d = ms(4); // 2 % late
        }
        let f = check_host(&late, &[0.97, 0.99, 0.98], &cfg);
        assert_eq!(f.len(), 2);
        assert!(
            matches!(f[0], Finding::HostTimersLate { late_fraction, .. } if (late_fraction - 0.02).abs() < 1e-12)
        );
        assert!(
            matches!(f[1], Finding::HostCpuSaturated { median, .. } if (median - 0.98).abs() < 1e-12)
        );
        assert!(f[1].to_string().contains("98 %"));
        // Exactly 1 % late is tolerated; no data means nothing to flag.
        let mut edge = on_time.clone();
        for d in edge.iter_mut().take(10) {
            *d = ms(4);
        }
        assert_eq!(check_host(&edge, &[f64::NAN], &cfg), vec![Finding::HostOk]);
        assert_eq!(check_host(&[], &[], &cfg), vec![Finding::HostOk]);
    }
}
