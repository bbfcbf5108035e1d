//! Throughput per flow, per direction and in total, and Jain's fairness index.
//!
//! A flow is a list of [`TransferSample`]s: "`bytes` moved during `[start, end)`"
//! (offsets from the run start), as interim reports or receiver counters give them. When a
//! sample straddles a phase boundary its bytes are split in proportion to the overlap
//! (we assume a constant rate within one sample; shorter samples make this matter less).
//!
//! The mean rate of a flow over a phase is the bytes inside the phase divided by the
//! time inside the phase that samples **cover**. Time with no sample is missing data, not
//! zero throughput, so it is left out of both numerator and denominator;
//! [`FlowThroughput::coverage`] says how much of the phase was covered so a report can
//! flag holes. A flow that reports zero bytes for an interval covered that interval.

use std::time::Duration;

use bloatlab_units::{BitRate, Bytes};

use crate::phase::Phase;

/// The direction of a flow, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server (upload).
    Up,
    /// Server to client (download).
    Down,
}

/// Bytes moved during `[start, end)` (offsets from the run start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferSample {
    /// Interval start.
    pub start: Duration,
    /// Interval end. An `end` before `start` is treated as an empty interval.
    pub end: Duration,
    /// Payload bytes delivered in the interval.
    pub bytes: Bytes,
}

/// All samples of one flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSeries {
    /// A label such as `tcp_up_cs5`.
    pub name: String,
    /// Up or down.
    pub direction: Direction,
    /// Non-overlapping intervals, in any order.
    pub samples: Vec<TransferSample>,
}

/// The part of `bytes` that falls into `[a, b)` if it was spread evenly over
/// `[start, end)`. A zero-length sample counts wholly if its instant lies in `[a, b)`.
pub(crate) fn prorated(s: &TransferSample, a: Duration, b: Duration) -> (Bytes, Duration) {
    let len = s.end.saturating_sub(s.start);
    if len.is_zero() {
        let inside = a <= s.start && s.start < b;
        return (if inside { s.bytes } else { Bytes(0) }, Duration::ZERO);
    }
    let overlap = s.end.min(b).saturating_sub(s.start.max(a));
    if overlap.is_zero() {
        return (Bytes(0), Duration::ZERO);
    }
    // Integer arithmetic: bytes * overlap / len, exact to the byte.
    let part = u128::from(s.bytes.0) * overlap.as_nanos() / len.as_nanos();
    (Bytes(u64::try_from(part).unwrap_or(u64::MAX)), overlap)
}

/// One flow's figures over one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowThroughput {
    /// The flow's name.
    pub name: String,
    /// Up or down.
    pub direction: Direction,
    /// Bytes moved within the phase.
    pub bytes: Bytes,
    /// Time within the phase covered by samples.
    pub covered: Duration,
    /// `bytes / (covered + the phase time before the flow's first sample and after its
    /// last)`: the flow was not running then, which is zero, not missing. Zero if nothing
    /// was covered.
    pub mean: BitRate,
    /// `covered / phase length`, in `[0, 1]`.
    pub coverage: f64,
}

impl FlowSeries {
    /// Bytes the flow moved over the whole run (every sample, whatever its phase): the
    /// "MB transferred each" of competing-flow tests.
    pub fn transferred(&self) -> Bytes {
        self.samples
            .iter()
            .fold(Bytes(0), |a, s| a.saturating_add(s.bytes))
    }

    /// This flow's figures over `phase`.
    pub fn throughput(&self, phase: &Phase) -> FlowThroughput {
        let (mut bytes, mut covered) = (Bytes(0), Duration::ZERO);
        for s in &self.samples {
            let (b, c) = prorated(s, phase.start, phase.end);
            bytes = bytes.saturating_add(b);
            covered = covered.saturating_add(c);
        }
        // Overlapping samples (a producer bug) must not claim more than the phase.
        let covered = covered.min(phase.duration());
        // Before the flow's first sample and after its last one the flow was not running
        // (not started yet, or ended): that time carries zero bytes and is known, not
        // missing, so it counts in the mean (not in `coverage`). Only holes between samples
        // are missing data. Without this, the recovery phase after a load would report the
        // rate of the last sample's sliver.
        let valid = || self.samples.iter().filter(|s| s.end > s.start);
        let first = valid().map(|s| s.start).min();
        let last = valid().map(|s| s.end).max();
        let mut known = covered;
        if let (Some(first), Some(last)) = (first, last) {
            let overlap =
                |a: Duration, b: Duration| b.min(phase.end).saturating_sub(a.max(phase.start));
            known = known
                .saturating_add(overlap(phase.start, first))
                .saturating_add(overlap(last, phase.end))
                .min(phase.duration());
        }
        let coverage = if phase.duration().is_zero() {
            0.0
        } else {
            covered.as_secs_f64() / phase.duration().as_secs_f64()
        };
        FlowThroughput {
            name: self.name.clone(),
            direction: self.direction,
            bytes,
            covered,
            mean: BitRate::from_transfer(bytes, known),
            coverage,
        }
    }
}

/// Why Jain's index is undefined for a set of rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FairnessError {
    /// There were no flows.
    #[error("no flows to compare")]
    NoFlows,
    /// Every flow moved nothing: `0 / 0`, not "perfectly fair".
    #[error("no flow moved any data")]
    AllZero,
}

/// Jain's fairness index (Jain, Chiu & Hawe, DEC-TR-301, 1984):
/// `J = (Σ x)² / (n · Σ x²)`, in `[1/n, 1]`; 1 when all rates are equal, `1/n` when one
/// flow takes everything. One flow with a non-zero rate gives 1. No flows and all-zero
/// rates are errors, not a number.
pub fn jain_fairness(rates: &[BitRate]) -> Result<f64, FairnessError> {
    if rates.is_empty() {
        return Err(FairnessError::NoFlows);
    }
    let sum: f64 = rates.iter().map(|r| r.bits_per_sec_f64()).sum();
    if sum == 0.0 {
        return Err(FairnessError::AllZero);
    }
    let sum_sq: f64 = rates.iter().map(|r| r.bits_per_sec_f64().powi(2)).sum();
    let j = sum * sum / (rates.len() as f64 * sum_sq);
    // Rounding can land a hair outside the proven bounds; clamp to them.
    Ok(j.clamp(1.0 / rates.len() as f64, 1.0))
}

/// Throughput of a set of flows over one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputSummary {
    /// Per flow, in input order.
    pub flows: Vec<FlowThroughput>,
    /// Sum of the upload flows' mean rates.
    pub up: BitRate,
    /// Sum of the download flows' mean rates.
    pub down: BitRate,
    /// `up + down`.
    pub total: BitRate,
    /// Jain's index over the upload flows.
    pub fairness_up: Result<f64, FairnessError>,
    /// Jain's index over the download flows.
    pub fairness_down: Result<f64, FairnessError>,
    /// Jain's index over all flows.
    pub fairness_all: Result<f64, FairnessError>,
}

/// Summarises `flows` over `phase`. A direction's total is the sum of its flows' mean
/// rates (each over its own covered time).
pub fn summarize_throughput(flows: &[FlowSeries], phase: &Phase) -> ThroughputSummary {
    let per_flow: Vec<FlowThroughput> = flows.iter().map(|f| f.throughput(phase)).collect();
    let rates = |dir: Option<Direction>| -> Vec<BitRate> {
        per_flow
            .iter()
            .filter(|f| dir.is_none_or(|d| f.direction == d))
            .map(|f| f.mean)
            .collect()
    };
    let sum = |v: &[BitRate]| BitRate(v.iter().fold(0u64, |a, r| a.saturating_add(r.0)));
    let (up, down, all) = (
        rates(Some(Direction::Up)),
        rates(Some(Direction::Down)),
        rates(None),
    );
    ThroughputSummary {
        up: sum(&up),
        down: sum(&down),
        total: sum(&all),
        fairness_up: jain_fairness(&up),
        fairness_down: jain_fairness(&down),
        fairness_all: jain_fairness(&all),
        flows: per_flow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::PhaseKind;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    fn flow(name: &str, dir: Direction, per_second: &[(u64, u64)]) -> FlowSeries {
        FlowSeries {
            name: name.into(),
            direction: dir,
            samples: per_second
                .iter()
                .map(|&(t, b)| TransferSample {
                    start: s(t),
                    end: s(t + 1),
                    bytes: Bytes(b),
                })
                .collect(),
        }
    }

    #[test]
    fn transferred_counts_every_sample_once() {
        // Two 60 s uploads as in a one-vs-one test: 63.2 MB and 63.5 MB.
        let f = |mb: u64| FlowSeries {
            name: "f".into(),
            direction: Direction::Up,
            samples: (0..60)
                .map(|i| TransferSample {
                    start: s(i),
                    end: s(i + 1),
                    bytes: Bytes(mb * 1_000_000 / 60),
                })
                .collect(),
        };
        assert_eq!(f(63).transferred(), Bytes(63_000_000));
        let empty = FlowSeries {
            samples: vec![],
            ..f(1)
        };
        assert_eq!(empty.transferred(), Bytes(0));
        // Jain over two nearly equal flows is nearly 1; per direction, as the tables show.
        let j = jain_fairness(&[BitRate(63_200_000), BitRate(63_500_000)]).unwrap();
        assert!((j - 0.999_994_4).abs() < 1e-6, "{j}");
    }

    #[test]
    fn jain_known_values() {
        let r = |v: &[u64]| v.iter().map(|&x| BitRate(x)).collect::<Vec<_>>();
        assert_eq!(jain_fairness(&r(&[5, 5, 5, 5])), Ok(1.0));
        // One of four takes all: 1/4.
        assert_eq!(jain_fairness(&r(&[8, 0, 0, 0])), Ok(0.25));
        // (1+2+3)^2 / (3 * 14) = 36/42.
        assert!((jain_fairness(&r(&[1, 2, 3])).unwrap() - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(jain_fairness(&r(&[7])), Ok(1.0));
        assert_eq!(jain_fairness(&[]), Err(FairnessError::NoFlows));
        assert_eq!(jain_fairness(&r(&[0, 0])), Err(FairnessError::AllZero));
    }

    #[test]
    fn mean_over_loaded_phase_excludes_idle_and_prorates_boundaries() {
        // 1 MB/s during 5..15 s, 10 MB/s outside (which must not leak in).
        let mut per_sec = Vec::new();
        for t in 0..20 {
            per_sec.push((
                t,
                if (5..15).contains(&t) {
                    1_000_000
                } else {
                    10_000_000
                },
            ));
        }
        let f = flow("up0", Direction::Up, &per_sec);
        let loaded = Phase::new(PhaseKind::Loaded, s(5), s(15));
        let t = f.throughput(&loaded);
        assert_eq!(t.bytes, Bytes(10_000_000));
        assert_eq!(t.mean, BitRate(8_000_000));
        assert_eq!(t.coverage, 1.0);
        // Half a second into a 10 MB/s sample: 5 MB of it counts.
        let half = Phase::new(PhaseKind::Loaded, Duration::from_millis(4_500), s(5));
        assert_eq!(f.throughput(&half).bytes, Bytes(5_000_000));
    }

    #[test]
    fn gaps_are_missing_not_zero() {
        // Samples for seconds 0 and 2 only: mean over covered 2 s, coverage 2/3.
        let f = flow("d", Direction::Down, &[(0, 1_000), (2, 3_000)]);
        let t = f.throughput(&Phase::new(PhaseKind::Loaded, s(0), s(3)));
        assert_eq!(t.bytes, Bytes(4_000));
        assert_eq!(t.covered, s(2));
        assert_eq!(t.mean, BitRate(16_000));
        assert!((t.coverage - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn per_direction_and_total() {
        let flows = [
            flow("u1", Direction::Up, &[(0, 1_000)]),
            flow("u2", Direction::Up, &[(0, 3_000)]),
            flow("d1", Direction::Down, &[(0, 10_000)]),
        ];
        let sum = summarize_throughput(&flows, &Phase::new(PhaseKind::Loaded, s(0), s(1)));
        assert_eq!(sum.up, BitRate(32_000));
        assert_eq!(sum.down, BitRate(80_000));
        assert_eq!(sum.total, BitRate(112_000));
        // (1+3)^2 / (2*(1+9)) = 0.8
        assert!((sum.fairness_up.unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(sum.fairness_down, Ok(1.0));
    }

    #[test]
    fn before_its_first_and_after_its_last_sample_a_flow_carries_nothing() {
        // A flow running seconds 2..4 at 1 MB/s, phases idle 0..2, loaded 2..4, recovery 4..10.
        let f = flow("f", Direction::Up, &[(2, 1_000_000), (3, 1_000_000)]);
        let idle = f.throughput(&Phase::new(PhaseKind::Idle, s(0), s(2)));
        assert_eq!(
            (idle.bytes, idle.mean, idle.coverage),
            (Bytes(0), BitRate(0), 0.0)
        );
        let loaded = f.throughput(&Phase::new(PhaseKind::Loaded, s(2), s(4)));
        assert_eq!(loaded.mean, BitRate(8_000_000));
        // The recovery phase starts half a second before the last sample ends: 0.5 MB
        // over 6 s, not the last sample's rate over its sliver.
        let rec = f.throughput(&Phase::new(
            PhaseKind::Recovery,
            Duration::from_millis(3500),
            s(10),
        ));
        assert_eq!(rec.bytes, Bytes(500_000));
        assert_eq!(rec.covered, Duration::from_millis(500));
        assert!((rec.coverage - 0.5 / 6.5).abs() < 1e-12);
        assert!(
            (rec.mean.0 as f64 - 4e6 / 6.5).abs() < 1.0,
            "{:?}",
            rec.mean
        );
    }

    #[test]
    fn reversed_and_zero_length_samples_do_not_panic() {
        let f = FlowSeries {
            name: "x".into(),
            direction: Direction::Up,
            samples: vec![
                TransferSample {
                    start: s(3),
                    end: s(1),
                    bytes: Bytes(5),
                },
                TransferSample {
                    start: s(2),
                    end: s(2),
                    bytes: Bytes(7),
                },
            ],
        };
        let t = f.throughput(&Phase::new(PhaseKind::Loaded, s(0), s(10)));
        assert_eq!(t.bytes, Bytes(12));
        assert_eq!(t.mean, BitRate(0)); // nothing covered any time
    }
}
