//! The search for the highest shaper rate whose induced latency stays within a budget: a
//! sans-IO state machine. It never measures anything itself: [`Search::next`] says which rate
//! to measure (and which repetition), the caller measures and hands the result to
//! [`Search::record`], until `next` returns [`Step::Done`].
//!
//! **Order.** The top of the range first: if it is within budget, the link needs no tighter
//! shaper than that and the search ends ([`Verdict::AlwaysWithin`]). Then the bottom: if even
//! that is over budget, no rate in the range helps ([`Verdict::NeverWithin`]). Otherwise
//! bisection between the highest rate within budget (`lo`) and the lowest over it (`hi`),
//! midpoints rounded to whole kbit/s, until `hi - lo <= resolution`; the recommendation is
//! `lo`. Bisection assumes latency grows with the rate; it only ever probes between a rate
//! that passed and a higher one that failed, so one noisy probe moves the answer by at most
//! the interval it decided, never outside `[min, max]`.
//!
//! **Noise.** Each rate is measured up to `repeats` times and judged on the induced p90 of
//! each repeat ([`Rule`]): `Median` passes a rate when more than half of its repeats are
//! within budget (its upper median is), `All` when every repeat is. Both stop repeating as
//! soon as the verdict cannot change.

use std::time::Duration;

/// How the repeats of one rate are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Within budget when more than half of the repeats are (the upper median of their
    /// induced p90 is within budget).
    Median,
    /// Within budget only when every repeat is.
    All,
}

impl std::str::FromStr for Rule {
    type Err = String;
    fn from_str(s: &str) -> Result<Rule, String> {
        match s {
            "median" => Ok(Rule::Median),
            "all" => Ok(Rule::All),
            _ => Err(format!("{s:?} is not a rule (median, all)")),
        }
    }
}

/// What the search is told. Rates in bits per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchConfig {
    /// Lowest rate to try, bit/s.
    pub min_bps: u64,
    /// Highest rate to try, bit/s.
    pub max_bps: u64,
    /// Stop when the highest passing and lowest failing rates are this close, bit/s.
    pub resolution_bps: u64,
    /// Measurements per rate (at most).
    pub repeats: u32,
    /// Induced p90 allowed.
    pub budget: Duration,
    /// How repeats combine.
    pub rule: Rule,
}

/// Why a configuration cannot be searched; each names the option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `--budget` is zero.
    #[error("--budget must be greater than zero")]
    Budget,
    /// `--min` is not below `--max`, or zero.
    #[error("--min ({min} kbit/s) must be greater than zero and below --max ({max} kbit/s)")]
    Range {
        /// kbit/s.
        min: u64,
        /// kbit/s.
        max: u64,
    },
    /// `--resolution` is below 1 kbit/s.
    #[error("--resolution must be at least 1kbit")]
    Resolution,
    /// `--repeats` is zero.
    #[error("--repeats must be at least 1")]
    Repeats,
}

impl SearchConfig {
    /// Checks the configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.budget.is_zero() {
            return Err(ConfigError::Budget);
        }
        // Rates are probed in whole kbit/s: the range must hold at least two of them.
        if self.min_bps == 0 || self.min_bps.div_ceil(1000) >= self.max_bps / 1000 {
            return Err(ConfigError::Range {
                min: self.min_bps / 1000,
                max: self.max_bps / 1000,
            });
        }
        if self.resolution_bps < 1000 {
            return Err(ConfigError::Resolution);
        }
        if self.repeats == 0 {
            return Err(ConfigError::Repeats);
        }
        Ok(())
    }
}

/// One measurement at one rate. Induced latencies are signed milliseconds (loaded minus idle:
/// slightly negative on an uncongested link is noise, not an error).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Measurement {
    /// Loaded p50 minus idle median, ms.
    pub induced_p50_ms: f64,
    /// Loaded p90 minus idle median, ms.
    pub induced_p90_ms: f64,
    /// Idle median RTT, ms.
    pub idle_median_ms: f64,
    /// Goodput of the load in the tuned direction, Mbit/s.
    pub throughput_mbit: f64,
}

/// A measured rate: its repeats and verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CurvePoint {
    /// kbit/s.
    pub rate_kbit: u64,
    /// Every repeat, in order.
    pub runs: Vec<Measurement>,
    /// Within budget by the rule (`None` while undecided).
    pub within: Option<bool>,
}

impl CurvePoint {
    /// Median over the repeats of a field.
    fn median(&self, f: impl Fn(&Measurement) -> f64) -> f64 {
        let mut v: Vec<f64> = self.runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if !n.is_multiple_of(2) => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }
    /// Median induced p50 of the repeats, ms.
    pub fn induced_p50_ms(&self) -> f64 {
        self.median(|m| m.induced_p50_ms)
    }
    /// Median induced p90 of the repeats, ms.
    pub fn induced_p90_ms(&self) -> f64 {
        self.median(|m| m.induced_p90_ms)
    }
    /// Mean throughput of the repeats, Mbit/s.
    pub fn throughput_mbit(&self) -> f64 {
        if self.runs.is_empty() {
            return f64::NAN;
        }
        self.runs.iter().map(|m| m.throughput_mbit).sum::<f64>() / self.runs.len() as f64
    }
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Bisection converged: the recommendation is the highest rate measured within budget.
    Found,
    /// The top of the range is within budget: recommend it (the bottleneck may be elsewhere).
    AlwaysWithin,
    /// Even the bottom of the range is over budget: no recommendation.
    NeverWithin,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Measure at this rate (kbit/s); `rep` is 1-based.
    Measure {
        /// kbit/s.
        rate_kbit: u64,
        /// 1-based repetition.
        rep: u32,
    },
    /// The search is over.
    Done {
        /// How.
        verdict: Verdict,
        /// The recommended rate, kbit/s (`None` for [`Verdict::NeverWithin`]).
        recommended_kbit: Option<u64>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Top,
    Bottom,
    Bisect,
    Over(Verdict),
}

/// The search state.
#[derive(Debug, Clone)]
pub struct Search {
    cfg: SearchConfig,
    phase: Phase,
    /// Highest rate within budget so far, kbit/s.
    lo: Option<u64>,
    /// Lowest rate over budget so far, kbit/s.
    hi: Option<u64>,
    curve: Vec<CurvePoint>,
}

impl Search {
    /// A new search; the configuration is checked.
    pub fn new(cfg: SearchConfig) -> Result<Search, ConfigError> {
        cfg.validate()?;
        Ok(Search {
            cfg,
            phase: Phase::Top,
            lo: None,
            hi: None,
            curve: Vec::new(),
        })
    }

    fn min_kbit(&self) -> u64 {
        self.cfg.min_bps.div_ceil(1000)
    }
    fn max_kbit(&self) -> u64 {
        self.cfg.max_bps / 1000
    }

    /// The rate the current phase measures, kbit/s.
    fn target(&self) -> Option<u64> {
        match self.phase {
            Phase::Top => Some(self.max_kbit()),
            Phase::Bottom => Some(self.min_kbit()),
            Phase::Bisect => {
                let (lo, hi) = (self.lo?, self.hi?);
                Some(lo + (hi - lo) / 2)
            }
            Phase::Over(_) => None,
        }
    }

    /// What to do next.
    pub fn next(&self) -> Step {
        if let Phase::Over(verdict) = self.phase {
            return Step::Done {
                verdict,
                recommended_kbit: match verdict {
                    Verdict::NeverWithin => None,
                    _ => self.lo,
                },
            };
        }
        let rate = self.target().unwrap_or(self.max_kbit());
        let rep = self
            .curve
            .last()
            .filter(|p| p.rate_kbit == rate && p.within.is_none())
            .map_or(1, |p| p.runs.len() as u32 + 1);
        Step::Measure {
            rate_kbit: rate,
            rep,
        }
    }

    /// Records a measurement of the rate [`Search::next`] asked for.
    pub fn record(&mut self, m: Measurement) {
        let Some(rate) = self.target() else { return };
        match self.curve.last_mut() {
            Some(p) if p.rate_kbit == rate && p.within.is_none() => p.runs.push(m),
            _ => self.curve.push(CurvePoint {
                rate_kbit: rate,
                runs: vec![m],
                within: None,
            }),
        }
        let Some(p) = self.curve.last_mut() else {
            return;
        };
        let budget = self.cfg.budget.as_secs_f64() * 1e3;
        let pass = p.runs.iter().filter(|m| m.induced_p90_ms <= budget).count() as u32;
        let fail = p.runs.len() as u32 - pass;
        let n = self.cfg.repeats;
        let decided = match self.cfg.rule {
            Rule::All if fail > 0 => Some(false),
            Rule::All if pass == n => Some(true),
            Rule::Median if pass * 2 > n => Some(true),
            // Ties fail: with an even count, the upper median is then over budget.
            Rule::Median if fail * 2 >= n => Some(false),
            _ => None,
        };
        let Some(within) = decided else { return };
        p.within = Some(within);
        if within {
            self.lo = Some(rate);
        } else {
            self.hi = Some(rate);
        }
        self.phase = match (self.phase, within) {
            (Phase::Top, true) => Phase::Over(Verdict::AlwaysWithin),
            (Phase::Top, false) => Phase::Bottom,
            (Phase::Bottom, false) => Phase::Over(Verdict::NeverWithin),
            _ => match (self.lo, self.hi) {
                (Some(lo), Some(hi)) if hi - lo > self.cfg.resolution_bps / 1000 && hi - lo > 1 => {
                    Phase::Bisect
                }
                _ => Phase::Over(Verdict::Found),
            },
        };
    }

    /// Every rate measured so far, in measurement order.
    pub fn curve(&self) -> &[CurvePoint] {
        &self.curve
    }

    /// The configuration.
    pub fn config(&self) -> &SearchConfig {
        &self.cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(repeats: u32, rule: Rule) -> SearchConfig {
        SearchConfig {
            min_bps: 1_000_000,
            max_bps: 20_000_000,
            resolution_bps: 250_000,
            repeats,
            budget: Duration::from_millis(15),
            rule,
        }
    }

    fn m(p90: f64, tput: f64) -> Measurement {
        Measurement {
            induced_p50_ms: p90 / 2.0,
            induced_p90_ms: p90,
            idle_median_ms: 20.0,
            throughput_mbit: tput,
        }
    }

    /// Runs the search against `link(rate_kbit, call)`, returning the end and the curve.
    fn run(
        c: SearchConfig,
        mut link: impl FnMut(u64, usize) -> Measurement,
    ) -> (Verdict, Option<u64>, Vec<CurvePoint>) {
        let mut s = Search::new(c).unwrap();
        for call in 0..1000 {
            match s.next() {
                Step::Measure { rate_kbit, .. } => s.record(link(rate_kbit, call)),
                Step::Done {
                    verdict,
                    recommended_kbit,
                } => return (verdict, recommended_kbit, s.curve().to_vec()),
            }
        }
        panic!("the search did not end");
    }

    /// A shaper in front of a 10 Mbit/s bloated line: a few ms below the line rate, a queue
    /// that grows with the excess above it.
    fn line(rate_kbit: u64) -> Measurement {
        let r = rate_kbit as f64;
        let p90 = if r <= 10_000.0 {
            3.0
        } else {
            3.0 + (r - 10_000.0) * 0.5
        };
        m(p90, r.min(10_000.0) / 1000.0)
    }

    #[test]
    fn a_monotone_curve_converges_just_below_the_knee() {
        let (v, rec, curve) = run(cfg(1, Rule::Median), |r, _| line(r));
        assert_eq!(v, Verdict::Found);
        let rec = rec.unwrap();
        assert!((9_750..=10_024).contains(&rec), "{rec}");
        // Top, bottom, then bisection: log2(19000 / 250) ~ 6.2 -> 7 midpoints.
        assert_eq!(curve[0].rate_kbit, 20_000);
        assert_eq!(curve[1].rate_kbit, 1_000);
        assert_eq!(curve.len(), 2 + 7);
        assert!(curve.iter().all(|p| p.runs.len() == 1));
        // Every rate above the recommendation was over budget, every one below within.
        for p in &curve {
            assert_eq!(p.within, Some(p.rate_kbit <= rec), "{p:?}");
        }
    }

    #[test]
    fn the_top_within_budget_ends_at_once() {
        let (v, rec, curve) = run(cfg(3, Rule::Median), |_, _| m(2.0, 5.0));
        assert_eq!((v, rec), (Verdict::AlwaysWithin, Some(20_000)));
        // Two of three within budget decide it: the third repeat is skipped.
        assert_eq!(curve.len(), 1);
        assert_eq!(curve[0].runs.len(), 2);
    }

    #[test]
    fn never_within_budget_recommends_nothing() {
        let (v, rec, curve) = run(cfg(2, Rule::All), |_, _| m(80.0, 5.0));
        assert_eq!((v, rec), (Verdict::NeverWithin, None));
        let rates: Vec<u64> = curve.iter().map(|p| p.rate_kbit).collect();
        assert_eq!(rates, [20_000, 1_000]);
        // `All` stops at the first repeat over budget.
        assert!(curve.iter().all(|p| p.runs.len() == 1));
    }

    /// Every third measurement is an outlier (+40 ms): with one repeat the search is misled;
    /// with three and the median rule it still lands at the knee.
    #[test]
    fn repeats_with_the_median_rule_ride_out_outliers() {
        let noisy = |r: u64, call: usize| {
            let mut x = line(r);
            if call % 3 == 2 {
                x.induced_p90_ms += 40.0;
            }
            x
        };
        let (_, rec, _) = run(cfg(3, Rule::Median), noisy);
        let rec = rec.unwrap();
        assert!((9_750..=10_024).contains(&rec), "{rec}");
        let (_, rec1, _) = run(cfg(1, Rule::Median), noisy);
        assert!(
            rec1.unwrap() < 9_750,
            "one repeat should have been misled: {rec1:?}"
        );
        // `All` is stricter: an outlier at a good rate fails it (here even the bottom).
        let (_, rec_all, curve) = run(cfg(3, Rule::All), noisy);
        assert!(rec_all.is_none_or(|r| r <= rec), "{rec_all:?}");
        assert!(
            curve
                .iter()
                .any(|p| p.within == Some(false) && p.rate_kbit <= 10_000)
        );
    }

    #[test]
    fn median_ties_fail_and_aggregates_are_medians_and_means() {
        let mut s = Search::new(cfg(2, Rule::Median)).unwrap();
        assert_eq!(
            s.next(),
            Step::Measure {
                rate_kbit: 20_000,
                rep: 1
            }
        );
        s.record(m(10.0, 8.0));
        assert_eq!(
            s.next(),
            Step::Measure {
                rate_kbit: 20_000,
                rep: 2
            }
        );
        s.record(m(30.0, 10.0));
        // One of two within budget: not more than half, so over budget; on to the bottom.
        let p = &s.curve()[0];
        assert_eq!(p.within, Some(false));
        assert_eq!(p.induced_p90_ms(), 20.0);
        assert_eq!(p.induced_p50_ms(), 10.0);
        assert_eq!(p.throughput_mbit(), 9.0);
        assert_eq!(
            s.next(),
            Step::Measure {
                rate_kbit: 1_000,
                rep: 1
            }
        );
    }

    #[test]
    fn bad_configurations_name_the_option() {
        let mut c = cfg(1, Rule::Median);
        c.budget = Duration::ZERO;
        assert_eq!(Search::new(c).unwrap_err(), ConfigError::Budget);
        let mut c = cfg(1, Rule::Median);
        c.min_bps = c.max_bps;
        assert!(Search::new(c).unwrap_err().to_string().contains("--min"));
        let mut c = cfg(1, Rule::Median);
        (c.min_bps, c.max_bps) = (1_000_500, 1_001_900);
        assert!(Search::new(c).unwrap_err().to_string().contains("--min"));
        let mut c = cfg(1, Rule::Median);
        c.resolution_bps = 10;
        assert!(
            Search::new(c)
                .unwrap_err()
                .to_string()
                .contains("--resolution")
        );
        let mut c = cfg(1, Rule::Median);
        c.repeats = 0;
        assert!(
            Search::new(c)
                .unwrap_err()
                .to_string()
                .contains("--repeats")
        );
        assert_eq!("all".parse::<Rule>(), Ok(Rule::All));
        assert!("most".parse::<Rule>().is_err());
    }
}
