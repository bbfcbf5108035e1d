//! Test phases: idle before the load, the load itself, and recovery after it.
//!
//! Times are offsets from the start of the run (a `Duration`, never a wall clock), and
//! every phase is the half-open range `[start, end)`. A sample belongs to the phase
//! containing its **send** time, so a probe sent in the last millisecond of the load
//! counts as loaded even if its reply arrives during recovery. Because summaries are
//! taken per [`Phase`], a loaded summary cannot include the idle lead-in or tail: the
//! mistake of flent's default summary is impossible by construction.

use std::fmt;
use std::time::Duration;

/// What the network was doing during a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PhaseKind {
    /// No load: the baseline.
    Idle,
    /// Load generators running.
    Loaded,
    /// After the load stopped, while queues drain.
    Recovery,
}

impl PhaseKind {
    /// Lower-case name used in reports and files: `idle`, `loaded`, `recovery`.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseKind::Idle => "idle",
            PhaseKind::Loaded => "loaded",
            PhaseKind::Recovery => "recovery",
        }
    }
}

impl fmt::Display for PhaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One phase: a kind, a name (e.g. `download` for one loaded phase of a speed test) and
/// the half-open time range `[start, end)` from the start of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    /// Idle, loaded or recovery.
    pub kind: PhaseKind,
    /// A short label, unique within a timeline.
    pub name: String,
    /// Offset from the start of the run (inclusive).
    pub start: Duration,
    /// Offset from the start of the run (exclusive).
    pub end: Duration,
}

impl Phase {
    /// A phase named after its kind.
    pub fn new(kind: PhaseKind, start: Duration, end: Duration) -> Phase {
        Phase {
            kind,
            name: kind.as_str().to_owned(),
            start,
            end,
        }
    }

    /// Whether `t` (offset from the run start) lies in `[start, end)`.
    pub fn contains(&self, t: Duration) -> bool {
        self.start <= t && t < self.end
    }

    /// The phase's length (`end - start`).
    pub fn duration(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }

    /// How much of `[a, b)` lies inside this phase.
    pub fn overlap(&self, a: Duration, b: Duration) -> Duration {
        let lo = self.start.max(a);
        let hi = self.end.min(b);
        hi.saturating_sub(lo)
    }
}

/// Why a set of phases is not a valid timeline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimelineError {
    /// A phase ends before or where it starts.
    #[error("phase {name:?} is empty or reversed: start {start:?}, end {end:?}")]
    EmptyPhase {
        /// The phase's name.
        name: String,
        /// Its start offset.
        start: Duration,
        /// Its end offset.
        end: Duration,
    },
    /// Phases are out of order or overlap.
    #[error("phase {later:?} starts at {start:?}, before phase {earlier:?} ends at {end:?}")]
    Overlap {
        /// The earlier phase.
        earlier: String,
        /// Where the earlier phase ends.
        end: Duration,
        /// The phase that starts too early.
        later: String,
        /// Where it starts.
        start: Duration,
    },
    /// Two phases share a name.
    #[error("two phases are named {name:?}")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
}

/// Non-empty, ordered, non-overlapping phases (gaps between them are allowed and
/// belong to no phase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    phases: Vec<Phase>,
}

impl Timeline {
    /// Validates and wraps `phases`.
    pub fn new(phases: Vec<Phase>) -> Result<Timeline, TimelineError> {
        for (i, p) in phases.iter().enumerate() {
            if p.end <= p.start {
                return Err(TimelineError::EmptyPhase {
                    name: p.name.clone(),
                    start: p.start,
                    end: p.end,
                });
            }
            if phases[..i].iter().any(|q| q.name == p.name) {
                return Err(TimelineError::DuplicateName {
                    name: p.name.clone(),
                });
            }
            if let Some(prev) = i.checked_sub(1).map(|j| &phases[j])
                && p.start < prev.end
            {
                return Err(TimelineError::Overlap {
                    earlier: prev.name.clone(),
                    end: prev.end,
                    later: p.name.clone(),
                    start: p.start,
                });
            }
        }
        Ok(Timeline { phases })
    }

    /// The flent/RRUL shape: `idle` for `[0, idle)`, `loaded` for the next `loaded`,
    /// `recovery` for the next `recovery`. Zero-length parts are left out.
    pub fn idle_loaded_recovery(idle: Duration, loaded: Duration, recovery: Duration) -> Timeline {
        let mut phases = Vec::new();
        let mut t = Duration::ZERO;
        for (kind, len) in [
            (PhaseKind::Idle, idle),
            (PhaseKind::Loaded, loaded),
            (PhaseKind::Recovery, recovery),
        ] {
            if !len.is_zero() {
                let end = t.saturating_add(len);
                phases.push(Phase::new(kind, t, end));
                t = end;
            }
        }
        // Built ordered, non-empty and uniquely named, so always valid.
        Timeline { phases }
    }

    /// All phases in time order.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// The first phase of `kind`, if any.
    pub fn first(&self, kind: PhaseKind) -> Option<&Phase> {
        self.phases.iter().find(|p| p.kind == kind)
    }

    /// The phase named `name`, if any.
    pub fn by_name(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// The phase containing `t`, if any.
    pub fn phase_at(&self, t: Duration) -> Option<&Phase> {
        self.phases.iter().find(|p| p.contains(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[test]
    fn rrul_shape() {
        let t = Timeline::idle_loaded_recovery(s(5), s(60), s(5));
        let names: Vec<&str> = t.phases().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["idle", "loaded", "recovery"]);
        let loaded = t.first(PhaseKind::Loaded).unwrap();
        assert_eq!((loaded.start, loaded.end), (s(5), s(65)));
        // Boundaries are half-open: 5 s is loaded, 65 s is recovery.
        assert_eq!(t.phase_at(s(5)).unwrap().kind, PhaseKind::Loaded);
        assert_eq!(t.phase_at(s(65)).unwrap().kind, PhaseKind::Recovery);
        assert_eq!(
            t.phase_at(s(5) - Duration::from_nanos(1)).unwrap().kind,
            PhaseKind::Idle
        );
        assert!(t.phase_at(s(70)).is_none());
    }

    #[test]
    fn rejects_bad_timelines() {
        let p = |k, name: &str, a, b| Phase {
            kind: k,
            name: name.into(),
            start: s(a),
            end: s(b),
        };
        assert!(matches!(
            Timeline::new(vec![p(PhaseKind::Idle, "idle", 3, 3)]),
            Err(TimelineError::EmptyPhase { .. })
        ));
        assert!(matches!(
            Timeline::new(vec![
                p(PhaseKind::Idle, "idle", 0, 5),
                p(PhaseKind::Loaded, "loaded", 4, 9)
            ]),
            Err(TimelineError::Overlap { .. })
        ));
        assert!(matches!(
            Timeline::new(vec![
                p(PhaseKind::Loaded, "x", 0, 5),
                p(PhaseKind::Loaded, "x", 6, 9)
            ]),
            Err(TimelineError::DuplicateName { .. })
        ));
        // A speed test: two loaded phases with an idle gap between them.
        let ok = Timeline::new(vec![
            p(PhaseKind::Idle, "idle", 0, 2),
            p(PhaseKind::Loaded, "download", 2, 12),
            p(PhaseKind::Loaded, "upload", 14, 24),
        ])
        .unwrap();
        assert_eq!(ok.by_name("upload").unwrap().start, s(14));
        assert!(ok.phase_at(s(13)).is_none());
    }

    #[test]
    fn overlap_is_clipped() {
        let p = Phase::new(PhaseKind::Loaded, s(5), s(10));
        assert_eq!(p.overlap(s(0), s(6)), s(1));
        assert_eq!(p.overlap(s(9), s(20)), s(1));
        assert_eq!(p.overlap(s(11), s(20)), Duration::ZERO);
        assert_eq!(p.overlap(s(6), s(4)), Duration::ZERO);
    }
}
