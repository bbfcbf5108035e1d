//! The sans-IO autorate core.
//!
//! Calling contract: the driver owns the clock, the probes, the load counters and the shaper.
//! It calls [`Controller::on_load`] with each direction's achieved rate when it measures it,
//! and [`Controller::on_delay`] with every delay sample as it arrives (`now` is time since
//! any fixed origin, never going back). `on_delay` returns the rate change it decided, if
//! any; the driver applies it. The controller never reads a clock, so a test drives it on
//! a virtual one.
//!
//! The algorithm, per direction (cake-autorate's, see docs/autorate.md):
//!
//! 1. **Baseline.** Each reflector has its own baseline delay: it follows samples below it
//!    quickly (`alpha_baseline_decrease`) and samples above it very slowly
//!    (`alpha_baseline_increase`), so it tracks the path's unloaded delay, not the queue.
//!    A sample's *delta* is its delay minus its reflector's baseline; one-way delays of
//!    unsynchronised clocks work because the offset is in the baseline too.
//! 2. **Bloat**: at least `bloat_count` of the direction's last `bloat_window` deltas are
//!    above `delay_thr`. Then the rate is cut by a factor between `cut_min` and `cut_max`
//!    in proportion to the delayed samples' mean delta (no more than once per
//!    `bloat_refractory`), starting from the lower of the shaper rate and `cut_achieved` x
//!    the achieved rate (the last `on_load`), so that one cut gets under a line that just
//!    slowed.
//! 3. **Loaded** (achieved rate >= `high_load` x the shaper rate) and not bloated: the rate
//!    rises by up to `raise_max`, less as the mean delta nears `delay_thr`, not within
//!    `bloat_refractory` of a cut. Never raised while the link is not loaded: a shaper rate
//!    nobody uses says nothing about the link.
//! 4. Otherwise (idle or lightly loaded): one `decay_step` toward `base` per
//!    `decay_refractory`.
//!
//! Every rate is clamped into the direction's `min..=max`.

use crate::params::{Bounds, ParamError, Params};
use bloatlab_units::BitRate;
use std::collections::VecDeque;
use std::time::Duration;

/// A link direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Toward the user (ingress; cake-autorate `dl`).
    Down,
    /// Away from the user (egress; `ul`).
    Up,
}

impl Direction {
    /// Both, download first.
    pub const BOTH: [Direction; 2] = [Direction::Down, Direction::Up];

    /// `down` / `up`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Down => "down",
            Direction::Up => "up",
        }
    }

    fn index(self) -> usize {
        match self {
            Direction::Down => 0,
            Direction::Up => 1,
        }
    }
}

/// Why the rate changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Bloat detected: cut in proportion to the delay.
    Bloat,
    /// Loaded with low delay: raised.
    Load,
    /// Not loaded: a step toward base.
    Decay,
}

impl Reason {
    /// `bloat` / `load` / `decay`.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Bloat => "bloat",
            Reason::Load => "load",
            Reason::Decay => "decay",
        }
    }
}

/// A rate decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// The direction.
    pub direction: Direction,
    /// When (the `now` of the sample that caused it).
    pub at: Duration,
    /// The rate before.
    pub from: BitRate,
    /// The new rate (within the direction's bounds).
    pub to: BitRate,
    /// Why.
    pub reason: Reason,
    /// The direction's last achieved rate.
    pub load: BitRate,
    /// Mean delay delta over the detection window, seconds (may be slightly negative).
    pub delta_s: f64,
    /// Delayed samples in the detection window.
    pub delayed: usize,
}

/// What the controller knows about a direction now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    /// The shaper rate.
    pub rate: BitRate,
    /// The last achieved rate.
    pub load: BitRate,
    /// Mean delay delta over the detection window, seconds (0 before any sample).
    pub delta_s: f64,
    /// Delayed samples in the window.
    pub delayed: usize,
    /// Samples in the window.
    pub samples: usize,
}

#[derive(Debug, Clone)]
struct DirState {
    bounds: Bounds,
    rate: BitRate,
    load: BitRate,
    /// Per reflector, seconds (`None` before its first sample).
    baselines: Vec<Option<f64>>,
    /// The last `bloat_window` deltas, seconds.
    window: VecDeque<f64>,
    last_cut: Option<Duration>,
    last_decay: Option<Duration>,
}

/// The controller of one or both directions (see the module docs).
#[derive(Debug, Clone)]
pub struct Controller {
    params: Params,
    dirs: [Option<DirState>; 2],
}

/// `x` mapped from `[x0, x1]` onto `[y0, y1]`, clamped at both ends.
fn lerp(x: f64, x0: f64, x1: f64, y0: f64, y1: f64) -> f64 {
    let t = ((x - x0) / (x1 - x0)).clamp(0.0, 1.0);
    y0 + t * (y1 - y0)
}

impl Controller {
    /// A controller for the directions given bounds; each starts at its base rate (the
    /// driver applies it first). Fails on invalid settings, naming the field.
    pub fn new(
        params: Params,
        down: Option<Bounds>,
        up: Option<Bounds>,
    ) -> Result<Controller, ParamError> {
        params.validate()?;
        let mut dirs = [None, None];
        for (d, b) in [(Direction::Down, down), (Direction::Up, up)] {
            let Some(b) = b else { continue };
            b.validate(d.name())?;
            dirs[d.index()] = Some(DirState {
                bounds: b,
                rate: b.base,
                load: BitRate(0),
                baselines: Vec::new(),
                window: VecDeque::with_capacity(params.bloat_window),
                last_cut: None,
                last_decay: None,
            });
        }
        if dirs.iter().all(Option::is_none) {
            return Err(ParamError {
                field: "direction",
                value: "none".into(),
                why: "control at least one direction".into(),
            });
        }
        Ok(Controller { params, dirs })
    }

    /// The settings.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The directions controlled, download first.
    pub fn directions(&self) -> Vec<Direction> {
        Direction::BOTH
            .into_iter()
            .filter(|d| self.dirs[d.index()].is_some())
            .collect()
    }

    /// The bounds of `dir`, if controlled.
    pub fn bounds(&self, dir: Direction) -> Option<Bounds> {
        self.dirs[dir.index()].as_ref().map(|s| s.bounds)
    }

    /// The state of `dir`, if controlled.
    pub fn view(&self, dir: Direction) -> Option<View> {
        let s = self.dirs[dir.index()].as_ref()?;
        Some(View {
            rate: s.rate,
            load: s.load,
            delta_s: mean(&s.window),
            delayed: self.delayed(s),
            samples: s.window.len(),
        })
    }

    fn delayed(&self, s: &DirState) -> usize {
        let thr = self.params.delay_thr.as_secs_f64();
        s.window.iter().filter(|&&d| d > thr).count()
    }

    /// The achieved rate of `dir` (what the link carried lately; bits per second).
    pub fn on_load(&mut self, dir: Direction, achieved: BitRate) {
        if let Some(s) = &mut self.dirs[dir.index()] {
            s.load = achieved;
        }
    }

    /// A delay sample of `dir` from reflector number `reflector` (one-way delay, or the RTT
    /// when one-way delays are not known), at `now`. Returns the change decided, if any.
    pub fn on_delay(
        &mut self,
        now: Duration,
        dir: Direction,
        reflector: usize,
        delay: Duration,
    ) -> Option<Change> {
        let p = self.params;
        let s = self.dirs[dir.index()].as_mut()?;
        if s.baselines.len() <= reflector {
            s.baselines.resize(reflector + 1, None);
        }
        let d = delay.as_secs_f64();
        let base = match s.baselines[reflector] {
            None => d,
            Some(b) if d >= b => b + p.alpha_baseline_increase * (d - b),
            Some(b) => b + p.alpha_baseline_decrease * (d - b),
        };
        s.baselines[reflector] = Some(base);
        if s.window.len() == p.bloat_window {
            s.window.pop_front();
        }
        s.window.push_back(d - base);

        let thr = p.delay_thr.as_secs_f64();
        let delta = mean(&s.window);
        let delayed = s.window.iter().filter(|&&x| x > thr).count();
        let after_cut = s
            .last_cut
            .is_none_or(|t| now.saturating_sub(t) >= p.bloat_refractory);
        let rate = s.rate.0 as f64;
        let (target, reason) = if delayed >= p.bloat_count {
            if !after_cut {
                return None;
            }
            // The delayed samples' own mean: the window's would dilute the first
            // detection with the samples taken before the queue built up.
            let bloat: Vec<f64> = s.window.iter().copied().filter(|&x| x > thr).collect();
            let factor = lerp(
                bloat.iter().sum::<f64>() / bloat.len() as f64,
                thr,
                p.cut_full_delay.as_secs_f64(),
                p.cut_min,
                p.cut_max,
            );
            s.last_cut = Some(now);
            // A cut restarts the decay clock: the next step toward base waits a full period.
            s.last_decay = Some(now);
            (
                cut_from(rate, s.load, s.bounds, p.cut_achieved) * factor,
                Reason::Bloat,
            )
        } else if s.load.0 as f64 >= p.high_load * rate {
            if !after_cut {
                return None;
            }
            let factor = lerp(
                delta,
                p.raise_full_delay.as_secs_f64(),
                thr,
                p.raise_max,
                p.raise_min,
            );
            (rate * factor, Reason::Load)
        } else {
            let due = s
                .last_decay
                .is_none_or(|t| now.saturating_sub(t) >= p.decay_refractory);
            if !due {
                return None;
            }
            s.last_decay = Some(now);
            let base = s.bounds.base.0 as f64;
            let step = if rate > base {
                (rate * (1.0 - p.decay_step)).max(base)
            } else {
                (rate * (1.0 + p.decay_step)).min(base)
            };
            (step, Reason::Decay)
        };
        let to = s.bounds.clamp(target);
        if to == s.rate {
            return None;
        }
        let from = s.rate;
        s.rate = to;
        Some(Change {
            direction: dir,
            at: now,
            from,
            to,
            reason,
            load: s.load,
            delta_s: delta,
            delayed,
        })
    }
}

/// Where a cut starts (bit/s): the shaper rate, or what the link delivered (times `share`)
/// when that is lower and tells something about the line (at least `min`; an idle link's
/// or a missing reading does not). With the shaper above a line that just slowed, the
/// achieved rate is about the line's new rate, so one cut gets under it.
fn cut_from(rate: f64, load: BitRate, bounds: Bounds, share: Option<f64>) -> f64 {
    match share {
        Some(g) => {
            let achieved = load.0 as f64 * g;
            if achieved >= bounds.min.0 as f64 {
                rate.min(achieved)
            } else {
                rate
            }
        }
        None => rate,
    }
}

fn mean(w: &VecDeque<f64>) -> f64 {
    if w.is_empty() {
        0.0
    } else {
        w.iter().sum::<f64>() / w.len() as f64
    }
}

#[cfg(test)]
mod tests;
