//! One probe series over a whole timeline: the per-phase table plus the derived scores,
//! as a report prints them.
//!
//! The baseline is the **first idle phase**. Every non-idle phase gets its induced
//! latency against that baseline. The headline scores come from round-trip series only:
//! the grade (of a non-idle phase's induced latency) and the RPM (of a loaded phase). A
//! one-way series keeps its induced latency (how much of the rise was on that way) but
//! gets no grade, so a small one-way rise can never pass for the grade of a run whose
//! round trip rose a lot. Scores are never computed across phases.
//!
//! The **headline grade** of a run ([`run_grade`]) follows from that: it is not a mean
//! over phases but the grade of one phase, the **worst loaded phase** (the one whose
//! median rose most over the idle median) of the run's reference series
//! ([`reference_series`]). A mean would let a calm phase hide a bloated one: a download
//! that rose 1 ms and an upload that rose 55 ms average to 28 ms, an A, although every
//! upload on that line waits a B's worth. The rule is stated with the grade table in
//! [`crate::grade`].

use std::time::Duration;

use crate::grade::{Grade, InducedLatency};
use crate::latency::{DelayKind, LatencySeries, LatencySummary};
use crate::phase::{Phase, PhaseKind, Timeline};
use crate::rpm::Rpm;

/// One phase of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseAnalysis {
    /// The phase.
    pub phase: Phase,
    /// The min/p10/median/mean/p90/p99/max/count/loss table row.
    pub summary: LatencySummary,
    /// Median versus the idle baseline's median (non-idle phases with data on both sides).
    pub induced: Option<InducedLatency>,
    /// Grade of the induced latency (round-trip series only).
    pub grade: Option<Grade>,
    /// Responsiveness (loaded phases of round-trip series).
    pub rpm: Option<Rpm>,
}

/// Analyses `series` over every phase of `timeline`.
pub fn analyze_series(series: &LatencySeries, timeline: &Timeline) -> Vec<PhaseAnalysis> {
    let baseline = timeline.first(PhaseKind::Idle).map(|p| series.summarize(p));
    timeline
        .phases()
        .iter()
        .map(|phase| {
            let summary = series.summarize(phase);
            let induced = match (phase.kind, &baseline) {
                (PhaseKind::Idle, _) | (_, None) => None,
                (_, Some(idle)) => InducedLatency::from_summaries(idle, &summary),
            };
            let round_trip = series.kind == DelayKind::RoundTrip;
            let rpm = (phase.kind == PhaseKind::Loaded && round_trip)
                .then(|| Rpm::from_loaded_rtts(&series.delays_in(phase)))
                .flatten();
            PhaseAnalysis {
                phase: phase.clone(),
                summary,
                grade: induced.filter(|_| round_trip).map(|i| i.grade()),
                induced,
                rpm,
            }
        })
        .collect()
}

/// The series a run is graded on: the unmarked UDP probe `udp_be` (what ordinary traffic
/// sees), else `udp_be1`, `voip`, `udp_be_v4`, else the first UDP round-trip series with
/// a reply, else the first round-trip series with a reply (ICMP). One-way series are never
/// graded.
pub fn reference_series(series: &[LatencySeries]) -> Option<&LatencySeries> {
    let rtt = |s: &&LatencySeries| {
        s.kind == DelayKind::RoundTrip && s.samples.iter().any(|p| p.delay().is_some())
    };
    let names: Vec<&str> = series.iter().filter(rtt).map(|s| s.name.as_str()).collect();
    let name = reference_name(&names)?;
    series.iter().filter(rtt).find(|s| s.name == name)
}

/// [`reference_series`]'s choice among names alone: `rtt_names` are the run's round-trip
/// series that have a reply, in the run's order. For callers that hold only names (the
/// experiment crate's summary rows, flattened to columns).
pub fn reference_name<'a>(rtt_names: &[&'a str]) -> Option<&'a str> {
    const PREFERRED: [&str; 4] = ["udp_be", "udp_be1", "voip", "udp_be_v4"];
    PREFERRED
        .iter()
        .find_map(|p| rtt_names.iter().find(|n| *n == p))
        .or_else(|| rtt_names.iter().find(|n| n.starts_with("udp")))
        .or_else(|| rtt_names.first())
        .copied()
}

/// The headline grade of a run: the grade of its worst loaded phase.
#[derive(Debug, Clone, PartialEq)]
pub struct RunGrade {
    /// The series graded ([`reference_series`]).
    pub series: String,
    /// The loaded phase whose median rose most (the first of equals).
    pub phase: String,
    /// That phase's median against the first idle phase's.
    pub induced: InducedLatency,
    /// `induced.grade()`: the worst grade of any loaded phase.
    pub grade: Grade,
}

impl RunGrade {
    /// The increase graded (loaded median − idle median, zero if it fell).
    pub fn increase(&self) -> Duration {
        self.induced.increase()
    }
}

/// Of one series' per-phase analysis, the loaded phase with the largest induced latency
/// (the first of equals); `None` when no loaded phase has one (no idle baseline, or no
/// reply in any loaded phase). Recovery phases are not loaded and never count.
pub fn worst_loaded_phase(phases: &[PhaseAnalysis]) -> Option<(&Phase, InducedLatency)> {
    phases
        .iter()
        .filter(|a| a.phase.kind == PhaseKind::Loaded)
        .filter_map(|a| Some((&a.phase, a.induced?)))
        // `max_by_key` keeps the last of equals; reversing keeps the first.
        .rev()
        .max_by_key(|(_, i)| i.increase())
}

/// The headline grade of a run ([`RunGrade`]): its reference series' worst loaded phase.
/// `None` without a round-trip series, an idle baseline or a reply in a loaded phase.
pub fn run_grade(series: &[LatencySeries], timeline: &Timeline) -> Option<RunGrade> {
    let s = reference_series(series)?;
    let analysis = analyze_series(s, timeline);
    let (phase, induced) = worst_loaded_phase(&analysis)?;
    Some(RunGrade {
        series: s.name.clone(),
        phase: phase.name.clone(),
        induced,
        grade: induced.grade(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::ProbeSample;

    /// 70 one-second samples of `kind`: `idle` for the first and last 5 s, `loaded` in
    /// between, analysed over the 5 s idle / 60 s loaded / 5 s recovery timeline.
    fn analyse_step(kind: DelayKind, idle: Duration, loaded: Duration) -> Vec<PhaseAnalysis> {
        let samples = (0..70u64)
            .map(|i| {
                let d = if (5..65).contains(&i) { loaded } else { idle };
                ProbeSample::received(Duration::from_secs(i), d)
            })
            .collect();
        let series = LatencySeries {
            name: "probe".into(),
            kind,
            samples,
        };
        let t = Timeline::idle_loaded_recovery(
            Duration::from_secs(5),
            Duration::from_secs(60),
            Duration::from_secs(5),
        );
        analyze_series(&series, &t)
    }

    #[test]
    fn rrul_like_series_gets_baseline_scores() {
        let ms = Duration::from_millis;
        let a = analyse_step(DelayKind::RoundTrip, ms(20), ms(120));
        assert_eq!(a.len(), 3);
        assert_eq!((a[0].induced, a[0].grade, a[0].rpm), (None, None, None));
        assert_eq!(a[1].induced.unwrap().increase(), ms(100));
        assert_eq!(a[1].grade, Some(Grade::C));
        assert_eq!(a[1].rpm.unwrap().rpm, 500.0);
        assert_eq!(a[2].induced.unwrap().increase(), Duration::ZERO);
        assert_eq!(a[2].rpm, None);
    }

    #[test]
    fn one_way_series_get_induced_latency_but_no_headline_scores() {
        let ms = Duration::from_millis;
        let a = analyse_step(DelayKind::OneWayDown, ms(10), ms(13));
        assert_eq!(a[1].induced.unwrap().increase(), ms(3));
        assert_eq!((a[1].grade, a[1].rpm), (None, None));
    }

    /// A speed test's timeline: idle, then loaded phases `download`, `upload`, `both`
    /// of 10 s each, then recovery; one probe a second, `delays[i]` in loaded phase i.
    fn speedtest(
        name: &str,
        idle: Duration,
        loaded: [Duration; 3],
        recovery: Duration,
    ) -> (LatencySeries, Timeline) {
        let s = Duration::from_secs;
        let mut phases = vec![Phase::new(PhaseKind::Idle, s(0), s(10))];
        for (i, n) in ["download", "upload", "both"].iter().enumerate() {
            let a = s(10 + 10 * i as u64);
            phases.push(Phase {
                kind: PhaseKind::Loaded,
                name: (*n).into(),
                start: a,
                end: a + s(10),
            });
        }
        phases.push(Phase::new(PhaseKind::Recovery, s(40), s(50)));
        let samples = (0..50u64)
            .map(|i| {
                let d = match i {
                    0..10 => idle,
                    10..40 => loaded[(i as usize - 10) / 10],
                    _ => recovery,
                };
                ProbeSample::received(s(i), d)
            })
            .collect();
        let series = LatencySeries {
            name: name.into(),
            kind: DelayKind::RoundTrip,
            samples,
        };
        (series, Timeline::new(phases).unwrap())
    }

    /// The rule and a mean differ: 1 ms and 59 ms and 2 ms rises average to 20.7 ms, an A;
    /// the upload's 59 ms is a B, and the run grades B, naming the upload.
    #[test]
    fn the_headline_grade_is_the_worst_loaded_phase_not_a_mean() {
        let ms = Duration::from_millis;
        let (s, t) = speedtest("udp_be", ms(10), [ms(11), ms(69), ms(12)], ms(10));
        let g = run_grade(std::slice::from_ref(&s), &t).unwrap();
        assert_eq!(g.series, "udp_be");
        assert_eq!(g.phase, "upload");
        assert_eq!(g.increase(), ms(59));
        assert_eq!(g.grade, Grade::B);
        let mean = (ms(1) + ms(59) + ms(2)) / 3;
        assert_eq!(
            crate::bloat_grade(mean),
            Grade::A,
            "a mean would have said A"
        );
    }

    /// Recovery is not loaded: a slow drain after the load never sets the grade; equal
    /// rises name the first phase; no idle phase, no grade.
    #[test]
    fn recovery_never_counts_and_equal_rises_name_the_first_phase() {
        let ms = Duration::from_millis;
        let (s, t) = speedtest("udp_be", ms(10), [ms(40), ms(40), ms(15)], ms(900));
        let g = run_grade(std::slice::from_ref(&s), &t).unwrap();
        assert_eq!((g.phase.as_str(), g.grade), ("download", Grade::B));
        let no_idle = Timeline::new(t.phases()[1..].to_vec()).unwrap();
        assert_eq!(run_grade(std::slice::from_ref(&s), &no_idle), None);
    }

    #[test]
    fn the_reference_is_the_unmarked_udp_probe_else_icmp() {
        let ms = Duration::from_millis;
        let mk = |name: &str, kind, ok: bool| LatencySeries {
            name: name.into(),
            kind,
            samples: vec![if ok {
                ProbeSample::received(Duration::ZERO, ms(1))
            } else {
                ProbeSample::lost(Duration::ZERO)
            }],
        };
        let v = vec![
            mk("udp_ef", DelayKind::RoundTrip, true),
            mk("udp_be", DelayKind::OneWayUp, true),
            mk("udp_be", DelayKind::RoundTrip, true),
            mk("icmp", DelayKind::RoundTrip, true),
        ];
        let r = reference_series(&v).unwrap();
        assert_eq!((r.name.as_str(), r.kind), ("udp_be", DelayKind::RoundTrip));
        let v = vec![
            mk("udp_be", DelayKind::RoundTrip, false),
            mk("icmp", DelayKind::RoundTrip, true),
        ];
        assert_eq!(reference_series(&v).map(|s| s.name.as_str()), Some("icmp"));
        assert!(reference_series(&[]).is_none());
        // The rule by name: the preferred list first, then any UDP probe, then the first.
        assert_eq!(
            reference_name(&["icmp", "udp_ef", "voip", "udp_be1"]),
            Some("udp_be1")
        );
        assert_eq!(reference_name(&["icmp", "udp_ef"]), Some("udp_ef"));
        assert_eq!(reference_name(&["icmp", "tcp"]), Some("icmp"));
        assert_eq!(reference_name(&[]), None);
    }
}
