//! Responsiveness in round trips per minute (RPM), after
//! draft-ietf-ippm-responsiveness-09.
//!
//! The draft aggregates each probe type with a single-sided **95 % trimmed mean**: the
//! largest 5 % of samples are dropped and the rest averaged. We drop
//! `floor(0.05 · n)` samples (so fewer than 20 samples are not trimmed at all). Then
//!
//! ```text
//! RPM(x) = 60000 / TM(x in ms)          (= 60 s / TM(x))
//! ```
//!
//! The draft combines "foreign" probes (new connections: TCP, TLS, HTTP handshakes) and
//! "self" probes (on the loaded connections) as `(Foreign + Loaded) / 2`. bloatlab's
//! probes are UDP/ICMP round trips sent alongside the load, which is neither exactly; the
//! `responsiveness` figure bloatlab reports is `RPM(loaded-phase RTTs)`, and
//! [`Rpm::combined`] is there for callers that do have both kinds.
//!
//! Classification (draft-09 section 1.2): Poor < 300 RPM <= Fair < 1000 <= Good < 6000 <=
//! Excellent (the draft's table draws the lines at 300, 1000 and 6000 RPM; a value on a
//! line belongs to the better class).

use std::fmt;
use std::time::Duration;

use crate::quantile::mean;

/// The fraction of the largest samples the draft's trimmed mean drops.
pub const TRIM_FRACTION: f64 = 0.05;

/// The single-sided trimmed mean: drop the largest `floor(trim · n)` samples, average
/// the rest. `None` if there are no samples or `trim` is not in `[0, 1)`.
pub fn trimmed_mean(samples: &[Duration], trim: f64) -> Option<Duration> {
    if !(0.0..1.0).contains(&trim) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    // trim < 1 so drop < n: at least one sample stays.
    let drop = (trim * sorted.len() as f64).floor() as usize;
    mean(&sorted[..sorted.len() - drop])
}

/// Round trips per minute for a round-trip time: `60 s / rtt`. `None` for a zero RTT.
pub fn rpm_from_rtt(rtt: Duration) -> Option<f64> {
    // In nanoseconds, so round figures (100 ms -> 600) come out exact.
    (!rtt.is_zero()).then(|| 60e9 / rtt.as_nanos() as f64)
}

/// The draft's responsiveness classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RpmClass {
    /// < 300 RPM (RTT > 200 ms).
    Poor,
    /// 300 to < 1000 RPM.
    Fair,
    /// 1000 to < 6000 RPM.
    Good,
    /// 6000 RPM or more (RTT <= 10 ms).
    Excellent,
}

impl RpmClass {
    /// The class of an RPM value. NaN is Poor.
    pub fn of(rpm: f64) -> RpmClass {
        if rpm >= 6000.0 {
            RpmClass::Excellent
        } else if rpm >= 1000.0 {
            RpmClass::Good
        } else if rpm >= 300.0 {
            RpmClass::Fair
        } else {
            RpmClass::Poor
        }
    }
}

impl fmt::Display for RpmClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RpmClass::Poor => "Poor",
            RpmClass::Fair => "Fair",
            RpmClass::Good => "Good",
            RpmClass::Excellent => "Excellent",
        })
    }
}

/// A responsiveness figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rpm {
    /// Round trips per minute.
    pub rpm: f64,
    /// The trimmed-mean RTT it came from (for [`Rpm::combined`], the loaded one).
    pub trimmed_mean_rtt: Duration,
    /// How many samples went in.
    pub samples: usize,
}

impl Rpm {
    /// `RPM = 60000 / TM(loaded RTTs in ms)`. `None` without samples or if the trimmed
    /// mean is zero.
    pub fn from_loaded_rtts(rtts: &[Duration]) -> Option<Rpm> {
        let tm = trimmed_mean(rtts, TRIM_FRACTION)?;
        Some(Rpm {
            rpm: rpm_from_rtt(tm)?,
            trimmed_mean_rtt: tm,
            samples: rtts.len(),
        })
    }

    /// The draft's `(Foreign + Loaded) / 2`, each side from its own trimmed mean.
    pub fn combined(foreign: &[Duration], loaded: &[Duration]) -> Option<Rpm> {
        let f = Rpm::from_loaded_rtts(foreign)?;
        let l = Rpm::from_loaded_rtts(loaded)?;
        Some(Rpm {
            rpm: (f.rpm + l.rpm) / 2.0,
            trimmed_mean_rtt: l.trimmed_mean_rtt,
            samples: f.samples + l.samples,
        })
    }

    /// The draft-09 class.
    pub fn class(&self) -> RpmClass {
        RpmClass::of(self.rpm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn trimmed_mean_drops_largest_five_percent() {
        // 1..=20 ms plus nothing else: floor(0.05*20) = 1 dropped (the 20), mean of 1..=19 = 10.
        let x: Vec<Duration> = (1..=20).map(ms).collect();
        assert_eq!(trimmed_mean(&x, TRIM_FRACTION), Some(ms(10)));
        // 19 samples: nothing dropped, mean of 1..=19 = 10.
        assert_eq!(trimmed_mean(&x[..19], TRIM_FRACTION), Some(ms(10)));
        // 40 samples, two huge outliers: both dropped.
        let mut y = vec![ms(50); 38];
        y.extend([ms(5000), ms(9000)]);
        assert_eq!(trimmed_mean(&y, TRIM_FRACTION), Some(ms(50)));
        assert_eq!(trimmed_mean(&[], TRIM_FRACTION), None);
        assert_eq!(trimmed_mean(&y, 1.0), None);
        assert_eq!(trimmed_mean(&y, f64::NAN), None);
    }

    #[test]
    fn rpm_is_sixty_thousand_over_ms() {
        assert_eq!(rpm_from_rtt(ms(100)), Some(600.0));
        assert_eq!(rpm_from_rtt(ms(60)), Some(1000.0));
        assert_eq!(rpm_from_rtt(Duration::ZERO), None);
        let r = Rpm::from_loaded_rtts(&[ms(200); 10]).unwrap();
        assert_eq!(r.rpm, 300.0);
        assert_eq!(r.class(), RpmClass::Fair);
    }

    #[test]
    fn classes_match_draft_table() {
        assert_eq!(RpmClass::of(299.9), RpmClass::Poor);
        assert_eq!(RpmClass::of(300.0), RpmClass::Fair);
        assert_eq!(RpmClass::of(999.0), RpmClass::Fair);
        assert_eq!(RpmClass::of(1000.0), RpmClass::Good);
        assert_eq!(RpmClass::of(5999.9), RpmClass::Good);
        assert_eq!(RpmClass::of(6000.0), RpmClass::Excellent);
        assert_eq!(RpmClass::of(f64::NAN), RpmClass::Poor);
        // A 287 ms bidirectional RRUL RTT (anchors §2.3) is Poor; 24 ms is Good.
        assert_eq!(
            Rpm::from_loaded_rtts(&[ms(287)]).unwrap().class(),
            RpmClass::Poor
        );
        assert_eq!(
            Rpm::from_loaded_rtts(&[ms(24)]).unwrap().class(),
            RpmClass::Good
        );
    }

    #[test]
    fn combined_averages_rpms_not_rtts() {
        // Foreign 20 ms -> 3000 RPM, loaded 200 ms -> 300 RPM: (3000 + 300) / 2 = 1650.
        let r = Rpm::combined(&[ms(20)], &[ms(200)]).unwrap();
        assert!((r.rpm - 1650.0).abs() < 1e-9);
    }
}
