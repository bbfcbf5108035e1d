//! Induced latency and the A+..F bufferbloat grade.
//!
//! **Induced latency** of a probe series = loaded median − idle median. Medians, not
//! means, so one stray spike does not move it; the idle median is the baseline the
//! path has without our load.
//!
//! **Grade thresholds** are DSLReports' (speed test FAQ 17930, the values also used by
//! Waveform, 8x8 and the LibreQoS test page), applied to the
//! latency increase:
//!
//! | grade | increase        |
//! |-------|-----------------|
//! | A+    | < 5 ms          |
//! | A     | 5 ms to < 30 ms |
//! | B     | 30 to < 60 ms   |
//! | C     | 60 to < 200 ms  |
//! | D     | 200 to < 400 ms |
//! | F     | ≥ 400 ms        |
//!
//! There is no E. DSLReports averages the *mean* increase during download and during
//! upload ([`dslreports_bloat`]); bloatlab grades the *median* increase of the loaded
//! phase (for RRUL, both directions at once), which the same table applies to.
//!
//! **The headline grade of a run** (one letter: `bloatlab test`'s summary, `derived.
//! run_grade` in the results file, `bloatlab report`'s tables and HTML, the browser test)
//! is the grade of the run's **worst loaded phase**: the loaded phase of the reference
//! series whose median rose most over the idle median
//! ([`crate::analysis::run_grade`]). Never a mean over phases: scores are per phase
//! (`crate::analysis`), and a mean lets a calm phase hide a bloated one (rises of 1 ms
//! and 55 ms average to 28 ms, an A, while the 55 ms phase is a B). Recovery phases are
//! not loaded and never count.

use std::fmt;
use std::time::Duration;

use crate::latency::LatencySummary;
use crate::quantile::duration_from_nanos;

/// A letter grade, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grade {
    /// A+.
    APlus,
    /// A.
    A,
    /// B.
    B,
    /// C.
    C,
    /// D.
    D,
    /// F.
    F,
}

impl Grade {
    /// `"A+"`, `"A"`, …, `"F"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Grade::APlus => "A+",
            Grade::A => "A",
            Grade::B => "B",
            Grade::C => "C",
            Grade::D => "D",
            Grade::F => "F",
        }
    }
}

impl fmt::Display for Grade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bufferbloat grade table: a grade applies when the increase is **strictly
/// below** its bound; an increase at or above the last bound is an F.
pub const BLOAT_GRADES: [(Grade, Duration); 5] = [
    (Grade::APlus, Duration::from_millis(5)),
    (Grade::A, Duration::from_millis(30)),
    (Grade::B, Duration::from_millis(60)),
    (Grade::C, Duration::from_millis(200)),
    (Grade::D, Duration::from_millis(400)),
];

/// The grade for a latency increase (see [`BLOAT_GRADES`]).
pub fn bloat_grade(increase: Duration) -> Grade {
    BLOAT_GRADES
        .iter()
        .find(|(_, below)| increase < *below)
        .map_or(Grade::F, |(g, _)| *g)
}

/// DSLReports' "bloat" figure: the average of the increase during the download and
/// during the upload phase.
pub fn dslreports_bloat(download_increase: Duration, upload_increase: Duration) -> Duration {
    // In u128 nanoseconds, so the sum cannot overflow.
    duration_from_nanos((download_increase.as_nanos() + upload_increase.as_nanos()) / 2)
}

/// DSLReports' "quality" grade table on retransmit/loss fraction: a grade applies when
/// the fraction is **at most** its bound; above the last bound is an F.
pub const LOSS_GRADES: [(Grade, f64); 5] = [
    (Grade::APlus, 0.01),
    (Grade::A, 0.025),
    (Grade::B, 0.03),
    (Grade::C, 0.05),
    (Grade::D, 0.12),
];

/// The quality grade for a loss (or retransmit) fraction in `[0, 1]`. NaN grades F.
pub fn loss_grade(fraction: f64) -> Grade {
    LOSS_GRADES
        .iter()
        .find(|(_, bound)| fraction <= *bound)
        .map_or(Grade::F, |(g, _)| *g)
}

/// Loaded median versus idle median of one probe series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InducedLatency {
    /// Median delay while idle.
    pub idle_median: Duration,
    /// Median delay under load.
    pub loaded_median: Duration,
}

impl InducedLatency {
    /// From the idle and loaded summaries of the same series; `None` if either phase
    /// received no probes.
    pub fn from_summaries(idle: &LatencySummary, loaded: &LatencySummary) -> Option<Self> {
        Some(InducedLatency {
            idle_median: idle.delay?.median,
            loaded_median: loaded.delay?.median,
        })
    }

    /// `loaded_median - idle_median`, or zero if latency went *down* under load.
    pub fn increase(&self) -> Duration {
        self.loaded_median.saturating_sub(self.idle_median)
    }

    /// The signed difference in milliseconds (negative if latency fell under load).
    pub fn signed_ms(&self) -> f64 {
        (self.loaded_median.as_secs_f64() - self.idle_median.as_secs_f64()) * 1e3
    }

    /// The bufferbloat grade of [`Self::increase`].
    pub fn grade(&self) -> Grade {
        bloat_grade(self.increase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn grade_boundaries_are_strict_upper_bounds() {
        assert_eq!(bloat_grade(Duration::ZERO), Grade::APlus);
        assert_eq!(bloat_grade(ms(5) - Duration::from_nanos(1)), Grade::APlus);
        assert_eq!(bloat_grade(ms(5)), Grade::A);
        assert_eq!(bloat_grade(ms(29)), Grade::A);
        assert_eq!(bloat_grade(ms(30)), Grade::B);
        assert_eq!(bloat_grade(ms(60)), Grade::C);
        assert_eq!(bloat_grade(ms(199)), Grade::C);
        assert_eq!(bloat_grade(ms(200)), Grade::D);
        assert_eq!(bloat_grade(ms(400)), Grade::F);
        assert_eq!(bloat_grade(Duration::MAX), Grade::F);
    }

    #[test]
    fn anchors_runs_grade_as_published() {
        // Measured on one testbed: reno bloat (148.3 + 181.6) / 2 = 165 ms -> C; shallow 7.3 -> A.
        let bloat = dslreports_bloat(
            Duration::from_micros(148_300),
            Duration::from_micros(181_600),
        );
        assert_eq!(bloat, Duration::from_micros(164_950));
        assert_eq!(bloat_grade(bloat), Grade::C);
        assert_eq!(bloat_grade(Duration::from_micros(7_300)), Grade::A);
        // Seed report 4, SQM off: median 2051.3 ms loaded vs ~29 ms base -> F.
        assert_eq!(bloat_grade(ms(2022)), Grade::F);
        assert_eq!(
            dslreports_bloat(Duration::MAX, Duration::MAX),
            Duration::MAX
        );
        assert_eq!(
            dslreports_bloat(Duration::from_nanos(1), Duration::from_nanos(1)),
            Duration::from_nanos(1)
        );
    }

    #[test]
    fn loss_grade_table() {
        assert_eq!(loss_grade(0.0), Grade::APlus);
        assert_eq!(loss_grade(0.01), Grade::APlus);
        assert_eq!(loss_grade(0.017), Grade::A);
        assert_eq!(loss_grade(0.03), Grade::B);
        assert_eq!(loss_grade(0.05), Grade::C);
        assert_eq!(loss_grade(0.12), Grade::D);
        assert_eq!(loss_grade(0.13), Grade::F);
        assert_eq!(loss_grade(f64::NAN), Grade::F);
    }

    #[test]
    fn induced_latency_is_median_difference() {
        let i = InducedLatency {
            idle_median: ms(20),
            loaded_median: ms(68),
        };
        assert_eq!(i.increase(), ms(48));
        assert_eq!(i.grade(), Grade::B);
        let down = InducedLatency {
            idle_median: ms(20),
            loaded_median: ms(18),
        };
        assert_eq!(down.increase(), Duration::ZERO);
        assert!((down.signed_ms() + 2.0).abs() < 1e-9);
    }
}
