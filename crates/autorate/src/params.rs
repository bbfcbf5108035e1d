//! The controller's settings.
//!
//! Names and defaults follow cake-autorate's `defaults.sh` where it has the same knob
//! (its name in brackets below), so a user can carry values across; field names are the
//! `bloatlab autorate` flags with `_` for `-`, and [`ParamError::field`] names the field.

use bloatlab_units::BitRate;
use std::time::Duration;

/// Shaper rate bounds of one direction: the controller never sets a rate outside
/// `min..=max`, and drifts back to `base` when the link is not loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Lowest rate (cake-autorate `min_dl_shaper_rate_kbps`).
    pub min: BitRate,
    /// The steady-state rate, also the starting rate (`base_dl_shaper_rate_kbps`).
    pub base: BitRate,
    /// Highest rate (`max_dl_shaper_rate_kbps`).
    pub max: BitRate,
}

impl Bounds {
    /// Checks `0 < min <= base <= max`; `dir` (`down`/`up`) goes into the error.
    pub fn validate(&self, dir: &str) -> Result<(), ParamError> {
        let bad = |field: &'static str, v: BitRate, why: String| ParamError {
            field,
            value: format!("{dir} {v}"),
            why,
        };
        if self.min.0 == 0 {
            return Err(bad("min", self.min, "must be greater than zero".into()));
        }
        if self.base < self.min {
            return Err(bad(
                "base",
                self.base,
                format!("is below --min ({})", self.min),
            ));
        }
        if self.max < self.base {
            return Err(bad(
                "max",
                self.max,
                format!("is below --base ({})", self.base),
            ));
        }
        Ok(())
    }

    /// `bps` clamped into `min..=max`.
    pub fn clamp(&self, bps: f64) -> BitRate {
        // NaN (never produced by the controller, but cheap to rule out) means "as low as allowed".
        let bps = if bps.is_nan() { 0.0 } else { bps };
        let v = bps.clamp(self.min.0 as f64, self.max.0 as f64);
        BitRate(v.round() as u64)
    }
}

/// Thresholds and factors (defaults: cake-autorate's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// A delay sample more than this above its reflector's baseline is "delayed"
    /// (`dl_owd_delta_delay_thr_ms`, 30 ms).
    pub delay_thr: Duration,
    /// Bloat when at least `bloat_count` of the last `bloat_window` samples of a direction
    /// are delayed (`bufferbloat_detection_thr` of `bufferbloat_detection_window`, 3 of 6).
    pub bloat_count: usize,
    /// See `bloat_count`.
    pub bloat_window: usize,
    /// On bloat, the rate is multiplied by a factor from `cut_min` (mean delay delta of the
    /// window's delayed samples at `delay_thr`) down to `cut_max` (at `cut_full_delay` and above), linearly:
    /// the cut is proportional to the delay (`shaper_rate_min/max_adjust_down_bufferbloat`,
    /// 0.99 and 0.75).
    pub cut_min: f64,
    /// See `cut_min`.
    pub cut_max: f64,
    /// See `cut_min` (`dl_avg_owd_delta_max_adjust_down_thr_ms`, 60 ms).
    pub cut_full_delay: Duration,
    /// Where a cut starts: the lower of the shaper rate and `cut_achieved` x the achieved
    /// rate (what the link delivered lately), then multiplied by the cut factor; `None`: the
    /// shaper rate only. A shaper set above a line that just slowed passes only what the line
    /// carries, so one cut from the achieved rate reaches the line's new rate where cuts from
    /// the shaper rate take several, refractory periods apart, while the line's queue fills.
    /// An achieved rate whose share is below `min` (idle, or no reading yet) is not used: it
    /// says nothing about the line. (cake-autorate 1.x-2.0 cut to the lower of
    /// `achieved_rate_adjust_down_bufferbloat` x achieved and the cut shaper rate; 3.x cuts
    /// the shaper rate only. Default 1.0.)
    pub cut_achieved: Option<f64>,
    /// When loaded (achieved rate at least `high_load` of the shaper rate) and not bloated,
    /// the rate is multiplied by `raise_max` while the mean delay delta is at most
    /// `raise_full_delay`, falling linearly to `raise_min` at `delay_thr`
    /// (`shaper_rate_max/min_adjust_up_load_high`, 1.04 and 1.0;
    /// `dl_avg_owd_delta_max_adjust_up_thr_ms`, 10 ms).
    pub raise_max: f64,
    /// See `raise_max`.
    pub raise_min: f64,
    /// See `raise_max`.
    pub raise_full_delay: Duration,
    /// Loaded means achieved rate >= `high_load` x the shaper rate (`high_load_thr`, 0.75).
    pub high_load: f64,
    /// Not loaded and not bloated: the rate moves toward base by this fraction per
    /// `decay_refractory` (`shaper_rate_adjust_down/up_load_low`, 0.99 and 1.01 -> 0.01).
    pub decay_step: f64,
    /// No rate increase within this time of a cut, and no second cut either
    /// (`bufferbloat_refractory_period_ms`, 300 ms): a cut shows in the delay only once the
    /// queue it left has drained, so cutting again sooner cuts for the same queue twice.
    pub bloat_refractory: Duration,
    /// Time between two decay steps (`decay_refractory_period_ms`, 1 s).
    pub decay_refractory: Duration,
    /// How fast a reflector's baseline follows a delay above it (`alpha_baseline_increase`,
    /// 0.001: path changes are followed, bloat is not).
    pub alpha_baseline_increase: f64,
    /// How fast it follows a delay below it (`alpha_baseline_decrease`, 0.9).
    pub alpha_baseline_decrease: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            delay_thr: Duration::from_millis(30),
            bloat_count: 3,
            bloat_window: 6,
            cut_min: 0.99,
            cut_max: 0.75,
            cut_full_delay: Duration::from_millis(60),
            cut_achieved: Some(1.0),
            raise_max: 1.04,
            raise_min: 1.0,
            raise_full_delay: Duration::from_millis(10),
            high_load: 0.75,
            decay_step: 0.01,
            bloat_refractory: Duration::from_millis(300),
            decay_refractory: Duration::from_secs(1),
            alpha_baseline_increase: 0.001,
            alpha_baseline_decrease: 0.9,
        }
    }
}

/// A setting out of range: which one, its value, why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{} {value}: {why}", .field.replace('_', "-"))]
pub struct ParamError {
    /// The field (= the flag without `--`, `_` for `-`).
    pub field: &'static str,
    /// The value as given.
    pub value: String,
    /// What is wrong.
    pub why: String,
}

impl Params {
    /// Checks every field and the fields against each other.
    pub fn validate(&self) -> Result<(), ParamError> {
        let bad = |field: &'static str, value: String, why: &str| ParamError {
            field,
            value,
            why: why.to_string(),
        };
        let ms = |d: Duration| format!("{:?}", d);
        if self.delay_thr.is_zero() {
            return Err(bad("delay_thr", ms(self.delay_thr), "must be above zero"));
        }
        // Zero would cut at every delayed sample, before the last cut could show in the delay.
        if self.bloat_refractory.is_zero() || self.bloat_refractory > Duration::from_secs(60) {
            return Err(bad(
                "bloat_refractory",
                ms(self.bloat_refractory),
                "must be above zero and at most 60s",
            ));
        }
        if self.cut_full_delay <= self.delay_thr {
            return Err(bad(
                "cut_full_delay",
                ms(self.cut_full_delay),
                "must be above --delay-thr",
            ));
        }
        if self.raise_full_delay >= self.delay_thr {
            return Err(bad(
                "raise_full_delay",
                ms(self.raise_full_delay),
                "must be below --delay-thr",
            ));
        }
        if self.bloat_window == 0 || self.bloat_window > 1000 {
            return Err(bad(
                "bloat_window",
                self.bloat_window.to_string(),
                "must be 1 to 1000 samples",
            ));
        }
        if self.bloat_count == 0 || self.bloat_count > self.bloat_window {
            return Err(bad(
                "bloat_count",
                self.bloat_count.to_string(),
                "must be 1 to --bloat-window",
            ));
        }
        let in_open = |v: f64, lo: f64, hi: f64| v.is_finite() && v > lo && v < hi;
        if !in_open(self.cut_max, 0.0, 1.0) {
            return Err(bad(
                "cut_max",
                self.cut_max.to_string(),
                "must be above 0 and below 1",
            ));
        }
        if !(self.cut_min.is_finite() && self.cut_min >= self.cut_max && self.cut_min <= 1.0) {
            return Err(bad(
                "cut_min",
                self.cut_min.to_string(),
                "must be from --cut-max to 1",
            ));
        }
        if let Some(g) = self.cut_achieved
            && !(g.is_finite() && g > 0.0 && g <= 1.0)
        {
            return Err(bad(
                "cut_achieved",
                g.to_string(),
                "must be above 0 and at most 1 (or off)",
            ));
        }
        if !(self.raise_min.is_finite() && self.raise_min >= 1.0 && self.raise_min <= 2.0) {
            return Err(bad(
                "raise_min",
                self.raise_min.to_string(),
                "must be from 1 to 2",
            ));
        }
        if !(self.raise_max.is_finite()
            && self.raise_max >= self.raise_min
            && self.raise_max <= 2.0)
        {
            return Err(bad(
                "raise_max",
                self.raise_max.to_string(),
                "must be from --raise-min to 2",
            ));
        }
        if !in_open(self.high_load, 0.0, 1.0 + f64::EPSILON) {
            return Err(bad(
                "high_load",
                self.high_load.to_string(),
                "must be above 0 and at most 1",
            ));
        }
        if !in_open(self.decay_step, 0.0, 0.5) {
            return Err(bad(
                "decay_step",
                self.decay_step.to_string(),
                "must be above 0 and below 0.5",
            ));
        }
        for (field, a) in [
            ("alpha_baseline_increase", self.alpha_baseline_increase),
            ("alpha_baseline_decrease", self.alpha_baseline_decrease),
        ] {
            if !(a.is_finite() && a > 0.0 && a <= 1.0) {
                return Err(bad(field, a.to_string(), "must be above 0 and at most 1"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(min: u64, base: u64, max: u64) -> Bounds {
        Bounds {
            min: BitRate(min),
            base: BitRate(base),
            max: BitRate(max),
        }
    }

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_flag() {
        Params::default().validate().unwrap();
        b(1, 1, 1).validate("down").unwrap();
        let e = b(0, 1, 2).validate("down").unwrap_err();
        assert!(e.to_string().starts_with("--min down"), "{e}");
        let e = b(5, 4, 6).validate("up").unwrap_err();
        assert!(e.to_string().starts_with("--base up"), "{e}");
        let e = b(1, 4, 3).validate("up").unwrap_err();
        assert!(e.to_string().starts_with("--max up"), "{e}");
        for (p, flag) in [
            (
                Params {
                    delay_thr: Duration::ZERO,
                    ..Params::default()
                },
                "--delay-thr",
            ),
            (
                Params {
                    bloat_count: 7,
                    ..Params::default()
                },
                "--bloat-count",
            ),
            (
                Params {
                    bloat_window: 0,
                    ..Params::default()
                },
                "--bloat-window",
            ),
            (
                Params {
                    cut_full_delay: Duration::from_millis(20),
                    ..Params::default()
                },
                "--cut-full-delay",
            ),
            (
                Params {
                    high_load: 1.5,
                    ..Params::default()
                },
                "--high-load",
            ),
            (
                Params {
                    cut_max: 1.0,
                    ..Params::default()
                },
                "--cut-max",
            ),
            (
                Params {
                    cut_achieved: Some(1.2),
                    ..Params::default()
                },
                "--cut-achieved",
            ),
            (
                Params {
                    cut_achieved: Some(0.0),
                    ..Params::default()
                },
                "--cut-achieved",
            ),
            (
                Params {
                    bloat_refractory: Duration::ZERO,
                    ..Params::default()
                },
                "--bloat-refractory",
            ),
        ] {
            let e = p.validate().unwrap_err().to_string();
            assert!(e.starts_with(flag), "{flag}: {e}");
        }
    }

    #[test]
    fn clamp_keeps_rates_within_bounds() {
        let x = b(1000, 2000, 3000);
        assert_eq!(x.clamp(10.0), BitRate(1000));
        assert_eq!(x.clamp(1e12), BitRate(3000));
        assert_eq!(x.clamp(2500.4), BitRate(2500));
        assert_eq!(x.clamp(f64::NAN.max(0.0)), BitRate(1000));
    }
}
