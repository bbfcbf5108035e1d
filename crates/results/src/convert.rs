//! Conversions between the file records and `bloatlab-stats` types.
//!
//! The file keeps its own record types so that the on-disk schema changes only when the
//! version number does, never because an in-memory type was refactored.

use std::time::Duration;

use bloatlab_stats::{
    DelayKind, Direction, FlowSeries, Grade, LatencySeries, Phase, PhaseKind, ProbeOutcome,
    ProbeSample, Timeline, TimelineError, TransferSample,
};
use bloatlab_units::Bytes;

use crate::schema::derived::GradeRecord;
use crate::schema::{
    DelayKindRecord, DirectionRecord, FlowRecord, LatencyRecord, PhaseKindRecord, PhaseRecord,
    ProbeRecord, Raw, TransferRecord,
};

/// Raw data that parses but does not make sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RawError {
    /// The phases are not a valid timeline.
    #[error("raw.phases: {0}")]
    Timeline(#[from] TimelineError),
}

/// Nanoseconds of a Duration, saturating at `u64::MAX` (584 years).
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn ns(v: u64) -> Duration {
    Duration::from_nanos(v)
}

impl From<PhaseKind> for PhaseKindRecord {
    fn from(k: PhaseKind) -> Self {
        match k {
            PhaseKind::Idle => PhaseKindRecord::Idle,
            PhaseKind::Loaded => PhaseKindRecord::Loaded,
            PhaseKind::Recovery => PhaseKindRecord::Recovery,
        }
    }
}

impl From<PhaseKindRecord> for PhaseKind {
    fn from(k: PhaseKindRecord) -> Self {
        match k {
            PhaseKindRecord::Idle => PhaseKind::Idle,
            PhaseKindRecord::Loaded => PhaseKind::Loaded,
            PhaseKindRecord::Recovery => PhaseKind::Recovery,
        }
    }
}

impl From<Grade> for GradeRecord {
    fn from(g: Grade) -> GradeRecord {
        match g {
            Grade::APlus => GradeRecord::APlus,
            Grade::A => GradeRecord::A,
            Grade::B => GradeRecord::B,
            Grade::C => GradeRecord::C,
            Grade::D => GradeRecord::D,
            Grade::F => GradeRecord::F,
        }
    }
}

impl From<DelayKind> for DelayKindRecord {
    fn from(k: DelayKind) -> Self {
        match k {
            DelayKind::RoundTrip => DelayKindRecord::Rtt,
            DelayKind::OneWayUp => DelayKindRecord::OwdUp,
            DelayKind::OneWayDown => DelayKindRecord::OwdDown,
        }
    }
}

impl From<DelayKindRecord> for DelayKind {
    fn from(k: DelayKindRecord) -> Self {
        match k {
            DelayKindRecord::Rtt => DelayKind::RoundTrip,
            DelayKindRecord::OwdUp => DelayKind::OneWayUp,
            DelayKindRecord::OwdDown => DelayKind::OneWayDown,
        }
    }
}

impl From<Direction> for DirectionRecord {
    fn from(d: Direction) -> Self {
        match d {
            Direction::Up => DirectionRecord::Up,
            Direction::Down => DirectionRecord::Down,
        }
    }
}

impl From<DirectionRecord> for Direction {
    fn from(d: DirectionRecord) -> Self {
        match d {
            DirectionRecord::Up => Direction::Up,
            DirectionRecord::Down => Direction::Down,
        }
    }
}

impl From<&Phase> for PhaseRecord {
    fn from(p: &Phase) -> Self {
        PhaseRecord {
            kind: p.kind.into(),
            name: p.name.clone(),
            start_ns: nanos(p.start),
            end_ns: nanos(p.end),
        }
    }
}

impl From<&PhaseRecord> for Phase {
    fn from(p: &PhaseRecord) -> Self {
        Phase {
            kind: p.kind.into(),
            name: p.name.clone(),
            start: ns(p.start_ns),
            end: ns(p.end_ns),
        }
    }
}

impl From<&ProbeSample> for ProbeRecord {
    fn from(s: &ProbeSample) -> Self {
        ProbeRecord {
            sent_ns: nanos(s.sent),
            delay_ns: s.delay().map(nanos),
            duplicates: s.duplicates,
            late: s.late,
            unfinished: s.outcome == ProbeOutcome::Unfinished,
        }
    }
}

impl From<&ProbeRecord> for ProbeSample {
    fn from(r: &ProbeRecord) -> Self {
        ProbeSample {
            sent: ns(r.sent_ns),
            outcome: match (r.delay_ns, r.unfinished) {
                (Some(d), _) => ProbeOutcome::Delay(ns(d)),
                (None, true) => ProbeOutcome::Unfinished,
                (None, false) => ProbeOutcome::Lost,
            },
            duplicates: r.duplicates,
            late: r.late,
        }
    }
}

impl From<&LatencySeries> for LatencyRecord {
    fn from(s: &LatencySeries) -> Self {
        LatencyRecord {
            name: s.name.clone(),
            kind: s.kind.into(),
            samples: s.samples.iter().map(ProbeRecord::from).collect(),
        }
    }
}

impl From<&LatencyRecord> for LatencySeries {
    fn from(r: &LatencyRecord) -> Self {
        LatencySeries {
            name: r.name.clone(),
            kind: r.kind.into(),
            samples: r.samples.iter().map(ProbeSample::from).collect(),
        }
    }
}

impl From<&FlowSeries> for FlowRecord {
    fn from(f: &FlowSeries) -> Self {
        FlowRecord {
            name: f.name.clone(),
            ecn: None,
            direction: f.direction.into(),
            samples: f
                .samples
                .iter()
                .map(|s| TransferRecord {
                    start_ns: nanos(s.start),
                    end_ns: nanos(s.end),
                    bytes: s.bytes.0,
                })
                .collect(),
            tcp: crate::schema::FlowTcpRecord::default(),
        }
    }
}

impl From<&FlowRecord> for FlowSeries {
    fn from(r: &FlowRecord) -> Self {
        FlowSeries {
            name: r.name.clone(),
            direction: r.direction.into(),
            samples: r
                .samples
                .iter()
                .map(|s| TransferSample {
                    start: ns(s.start_ns),
                    end: ns(s.end_ns),
                    bytes: Bytes(s.bytes),
                })
                .collect(),
        }
    }
}

impl Raw {
    /// Packs measurements for writing.
    pub fn from_measurements(
        timeline: &Timeline,
        latency: &[LatencySeries],
        flows: &[FlowSeries],
    ) -> Raw {
        Raw {
            phases: timeline.phases().iter().map(PhaseRecord::from).collect(),
            latency: latency.iter().map(LatencyRecord::from).collect(),
            throughput: flows.iter().map(FlowRecord::from).collect(),
        }
    }

    /// The phases as a validated timeline.
    pub fn timeline(&self) -> Result<Timeline, RawError> {
        Ok(Timeline::new(
            self.phases.iter().map(Phase::from).collect(),
        )?)
    }

    /// The latency series.
    pub fn latency_series(&self) -> Vec<LatencySeries> {
        self.latency.iter().map(LatencySeries::from).collect()
    }

    /// The load flows.
    pub fn flows(&self) -> Vec<FlowSeries> {
        self.throughput.iter().map(FlowSeries::from).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grade_is_written_as_the_grade_table_spells_it() {
        use Grade::*;
        for g in [APlus, A, B, C, D, F] {
            let r = GradeRecord::from(g);
            assert_eq!(r.as_str(), g.as_str());
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{g}\""));
            assert_eq!(serde_json::from_str::<GradeRecord>(&json).unwrap(), r);
        }
        // Best first, as the table.
        assert!(GradeRecord::APlus < GradeRecord::F);
        // A grade the table does not have does not read.
        assert!(serde_json::from_str::<GradeRecord>("\"E\"").is_err());
    }
}
