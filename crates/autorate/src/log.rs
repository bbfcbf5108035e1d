//! The record of an autorate run and its JSON form (`bloatlab autorate -o FILE`).
//!
//! Schema `bloatlab-autorate/1` (one object):
//!
//! | field | meaning |
//! |---|---|
//! | `schema` | `"bloatlab-autorate/1"` |
//! | `started_unix_s` | wall-clock start, seconds since the Unix epoch |
//! | `target` | where rates went (`lab NAME stage S`, or the command template) |
//! | `reflectors` | the probed reflectors, in the order their index is used |
//! | `delay` | `one_way` or `rtt`: what the delay samples were |
//! | `bounds` | `{direction: {min_bit_s, base_bit_s, max_bit_s}}` |
//! | `params` | the thresholds and factors (docs/autorate.md) |
//! | `changes` | every rate applied: `t_s` (since start), `direction`, `from_bit_s`, `to_bit_s`, `reason` (`start`, `bloat`, `load`, `decay`), `load_bit_s`, `delta_ms` (mean delay above baseline), `delayed` (k of the window) |
//! | `ticks` | periodic state: `t_s`, `direction`, `rate_bit_s`, `load_bit_s`, `delta_ms` |
//! | `end` | `reason` (`duration`, `interrupted`, `set_rate_failed`, `probes_failed`, `load_failed`), `message`, `seconds`, `rates` (`{direction: bit_s}`, the last rate applied) |
//! | `summary` | per direction: `min_bit_s` (5th percentile of the applied rate over time), `median_bit_s`, `max_bit_s`, `changes` by reason |
//!
//! The summary is what `--emit` turns into a configuration (min/base/max).

use crate::controller::{Change, Direction};
use crate::params::{Bounds, Params};
use bloatlab_units::BitRate;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The schema name.
pub const SCHEMA: &str = "bloatlab-autorate/1";

/// One applied rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeRecord {
    /// Seconds since the start.
    pub t_s: f64,
    /// The direction.
    pub direction: Direction,
    /// Bits per second before.
    pub from_bit_s: u64,
    /// Bits per second after.
    pub to_bit_s: u64,
    /// `start`, `bloat`, `load` or `decay`.
    pub reason: String,
    /// Achieved rate then, bits per second.
    pub load_bit_s: u64,
    /// Mean delay above baseline over the window, milliseconds.
    pub delta_ms: f64,
    /// Delayed samples in the window.
    pub delayed: usize,
}

impl ChangeRecord {
    /// The record of a controller change.
    pub fn of(c: &Change) -> ChangeRecord {
        ChangeRecord {
            t_s: c.at.as_secs_f64(),
            direction: c.direction,
            from_bit_s: c.from.0,
            to_bit_s: c.to.0,
            reason: c.reason.name().to_string(),
            load_bit_s: c.load.0,
            delta_ms: c.delta_s * 1e3,
            delayed: c.delayed,
        }
    }
}

/// Periodic state of a direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tick {
    /// Seconds since the start.
    pub t_s: f64,
    /// The direction.
    pub direction: Direction,
    /// Shaper rate, bits per second.
    pub rate_bit_s: u64,
    /// Achieved rate, bits per second.
    pub load_bit_s: u64,
    /// Mean delay above baseline over the window, milliseconds.
    pub delta_ms: f64,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct End {
    /// `duration`, `interrupted`, `set_rate_failed`, `probes_failed`, `load_failed`.
    pub reason: String,
    /// The error, if it failed.
    pub message: Option<String>,
    /// Seconds run.
    pub seconds: f64,
    /// The last rate applied per direction, bits per second.
    pub rates: BTreeMap<String, u64>,
}

/// What a direction's rate was over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirSummary {
    /// 5th percentile of the applied rate over time (ticks), bits per second.
    pub min_bit_s: u64,
    /// Median.
    pub median_bit_s: u64,
    /// Highest.
    pub max_bit_s: u64,
    /// Changes by reason.
    pub changes: BTreeMap<String, usize>,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunLog {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Where rates went.
    pub target: String,
    /// Reflectors, by index.
    pub reflectors: Vec<String>,
    /// `one_way` or `rtt`.
    pub delay: String,
    /// Per direction.
    pub bounds: BTreeMap<String, BoundsRecord>,
    /// Thresholds and factors.
    pub params: ParamsRecord,
    /// Every rate applied.
    pub changes: Vec<ChangeRecord>,
    /// Periodic state.
    pub ticks: Vec<Tick>,
    /// The end (absent while running).
    pub end: Option<End>,
    /// Per direction (filled at the end).
    pub summary: BTreeMap<String, DirSummary>,
}

/// [`Bounds`] in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BoundsRecord {
    /// Bits per second.
    pub min_bit_s: u64,
    /// Bits per second.
    pub base_bit_s: u64,
    /// Bits per second.
    pub max_bit_s: u64,
}

/// [`Params`] in the log (durations in milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParamsRecord {
    pub delay_thr_ms: f64,
    pub bloat_count: usize,
    pub bloat_window: usize,
    pub cut_min: f64,
    pub cut_max: f64,
    pub cut_full_delay_ms: f64,
    /// `null` when cuts start from the shaper rate only.
    pub cut_achieved: Option<f64>,
    pub raise_min: f64,
    pub raise_max: f64,
    pub raise_full_delay_ms: f64,
    pub high_load: f64,
    pub decay_step: f64,
    pub bloat_refractory_ms: f64,
    pub decay_refractory_ms: f64,
    pub alpha_baseline_increase: f64,
    pub alpha_baseline_decrease: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl ParamsRecord {
    /// The record of `p`.
    pub fn of(p: &Params) -> ParamsRecord {
        ParamsRecord {
            delay_thr_ms: ms(p.delay_thr),
            bloat_count: p.bloat_count,
            bloat_window: p.bloat_window,
            cut_min: p.cut_min,
            cut_max: p.cut_max,
            cut_full_delay_ms: ms(p.cut_full_delay),
            cut_achieved: p.cut_achieved,
            raise_min: p.raise_min,
            raise_max: p.raise_max,
            raise_full_delay_ms: ms(p.raise_full_delay),
            high_load: p.high_load,
            decay_step: p.decay_step,
            bloat_refractory_ms: ms(p.bloat_refractory),
            decay_refractory_ms: ms(p.decay_refractory),
            alpha_baseline_increase: p.alpha_baseline_increase,
            alpha_baseline_decrease: p.alpha_baseline_decrease,
        }
    }
}

impl RunLog {
    /// An empty log of a run with these settings.
    pub fn new(
        started_unix_s: f64,
        target: String,
        reflectors: Vec<String>,
        one_way: bool,
        params: &Params,
        bounds: &[(Direction, Bounds)],
    ) -> RunLog {
        RunLog {
            schema: SCHEMA,
            started_unix_s,
            target,
            reflectors,
            delay: if one_way { "one_way" } else { "rtt" }.into(),
            bounds: bounds
                .iter()
                .map(|(d, b)| {
                    (
                        d.name().to_string(),
                        BoundsRecord {
                            min_bit_s: b.min.0,
                            base_bit_s: b.base.0,
                            max_bit_s: b.max.0,
                        },
                    )
                })
                .collect(),
            params: ParamsRecord::of(params),
            changes: Vec::new(),
            ticks: Vec::new(),
            end: None,
            summary: BTreeMap::new(),
        }
    }

    /// Fills `summary` from the ticks and changes of each direction with bounds.
    pub fn summarise(&mut self) {
        self.summary = self
            .bounds
            .keys()
            .map(|d| (d.clone(), summarise(d, &self.ticks, &self.changes)))
            .collect();
    }

    /// The summary of `dir` as deployable bounds: min = 5th percentile, base = median,
    /// max = highest rate applied (`None` before [`RunLog::summarise`] or without ticks).
    pub fn measured(&self, dir: Direction) -> Option<Bounds> {
        let s = self.summary.get(dir.name())?;
        (s.max_bit_s > 0).then_some(Bounds {
            min: BitRate(s.min_bit_s),
            base: BitRate(s.median_bit_s),
            max: BitRate(s.max_bit_s),
        })
    }
}

/// Rate percentiles over the direction's ticks (nearest rank on the sorted rates; ticks are
/// evenly spaced, so this is over time) and change counts.
fn summarise(dir: &str, ticks: &[Tick], changes: &[ChangeRecord]) -> DirSummary {
    let mut rates: Vec<u64> = ticks
        .iter()
        .filter(|t| t.direction.name() == dir)
        .map(|t| t.rate_bit_s)
        .collect();
    rates.sort_unstable();
    let rank = |q: f64| -> u64 {
        if rates.is_empty() {
            return 0;
        }
        let i = ((q * rates.len() as f64).ceil() as usize).clamp(1, rates.len()) - 1;
        rates[i]
    };
    let mut by = BTreeMap::new();
    for c in changes.iter().filter(|c| c.direction.name() == dir) {
        *by.entry(c.reason.clone()).or_insert(0) += 1;
    }
    DirSummary {
        min_bit_s: rank(0.05),
        median_bit_s: rank(0.5),
        max_bit_s: rates.last().copied().unwrap_or(0),
        changes: by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_percentiles_of_the_applied_rate_over_time() {
        let b = Bounds {
            min: BitRate(1),
            base: BitRate(50),
            max: BitRate(1000),
        };
        let mut log = RunLog::new(
            0.0,
            "t".into(),
            vec!["r".into()],
            true,
            &Params::default(),
            &[(Direction::Down, b)],
        );
        // 100 ticks at rates 1..=100 (shuffled order) and one up tick that must not count.
        for i in 0..100u64 {
            log.ticks.push(Tick {
                t_s: i as f64,
                direction: Direction::Down,
                rate_bit_s: (i * 37) % 100 + 1,
                load_bit_s: 0,
                delta_ms: 0.0,
            });
        }
        log.ticks.push(Tick {
            t_s: 0.0,
            direction: Direction::Up,
            rate_bit_s: 5000,
            load_bit_s: 0,
            delta_ms: 0.0,
        });
        for r in ["bloat", "bloat", "decay"] {
            log.changes.push(ChangeRecord {
                t_s: 0.0,
                direction: Direction::Down,
                from_bit_s: 1,
                to_bit_s: 2,
                reason: r.into(),
                load_bit_s: 0,
                delta_ms: 0.0,
                delayed: 0,
            });
        }
        log.summarise();
        let s = &log.summary["down"];
        assert_eq!((s.min_bit_s, s.median_bit_s, s.max_bit_s), (5, 50, 100));
        assert_eq!(s.changes["bloat"], 2);
        assert!(!log.summary.contains_key("up"), "no bounds, no summary");
        let m = log.measured(Direction::Down).unwrap();
        assert_eq!(
            (m.min, m.base, m.max),
            (BitRate(5), BitRate(50), BitRate(100))
        );
        let v = serde_json::to_value(&log).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["bounds"]["down"]["base_bit_s"], 50);
        assert_eq!(v["ticks"][0]["direction"], "down");
        assert_eq!(v["params"]["delay_thr_ms"], 30.0);
    }
}
