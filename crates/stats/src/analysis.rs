//! One probe series over a whole timeline: the per-phase table plus the derived scores,
//! as a report prints them.
//!
//! The baseline is the **first idle phase**. Every non-idle phase gets its induced
//! latency against that baseline. The headline scores come from round-trip series only:
//! the grade (of a non-idle phase's induced latency) and the RPM (of a loaded phase). A
//! one-way series keeps its induced latency (how much of the rise was on that way) but
//! gets no grade, so a small one-way rise can never pass for the grade of a run whose
//! round trip rose a lot. Scores are never computed across phases.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::ProbeSample;
    use std::time::Duration;

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
}
