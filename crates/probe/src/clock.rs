//! Clock offset and drift between client and responder, estimated from probe timestamps
//! (sans-IO).
//!
//! Each answered probe gives the four NTP timestamps (RFC 5905 §8): `t1` client send,
//! `t2` responder receive, `t3` responder send (responder clock), `t4` client receive.
//! With `θ` the responder clock minus the client clock:
//!
//! ```text
//! offset sample  θ̂ = ((t2 - t1) + (t3 - t4)) / 2
//! delay          δ = (t4 - t1) - (t3 - t2)
//! ```
//!
//! θ̂ equals θ when the path is symmetric; queueing in one direction biases it by half the
//! extra delay. So, as NTP's clock filter does, only the minimum-delay sample of each
//! window is kept (the one least disturbed by queueing), and a least-squares line through
//! those samples gives the offset at any time and its slope, the drift. The remaining
//! error is `(d_up - d_down) / 2` of the *base* delays, which no two-party method can see
//! (crusader's TROUBLESHOOTING notes the same limit).
//!
//! When both ends run on one kernel (a lab of network namespaces), the responder reports
//! the same clock domain as the client and no estimate is needed: θ is exactly zero.

use std::time::Duration;

use crate::time::SignedDuration;

/// The four timestamps of one answered probe; `t1`, `t4` on the client clock, `t2`, `t3`
/// on the responder clock, all since the clock's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Client send.
    pub t1: Duration,
    /// Responder receive.
    pub t2: Duration,
    /// Responder send.
    pub t3: Duration,
    /// Client receive.
    pub t4: Duration,
}

impl ClockSample {
    /// Round-trip delay without the responder's processing time.
    pub fn delay(&self) -> SignedDuration {
        SignedDuration::between(self.t4, self.t1)
            .saturating_sub(SignedDuration::between(self.t3, self.t2))
    }

    /// NTP offset sample (responder minus client).
    pub fn offset(&self) -> SignedDuration {
        let a = self.t2.as_nanos() as i128 - self.t1.as_nanos() as i128;
        let b = self.t3.as_nanos() as i128 - self.t4.as_nanos() as i128;
        SignedDuration::from_i128((a + b) / 2)
    }
}

/// How the offset was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockMethod {
    /// Both ends share one clock: offset 0 and drift 0 by construction.
    Shared,
    /// Minimum-delay filtered NTP samples with a linear fit.
    Estimated,
    /// No answered probe carried responder timestamps.
    Unknown,
}

/// Responder clock minus client clock as a line `offset + drift · (t - reference)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockEstimate {
    /// How it was obtained.
    pub method: ClockMethod,
    /// Client-clock time the offset refers to, ns since the epoch.
    pub reference: Duration,
    /// Offset at `reference` (responder minus client).
    pub offset: SignedDuration,
    /// Drift, responder seconds gained per client second, in parts per million.
    pub drift_ppm: f64,
    /// Filtered samples the fit used.
    pub samples_used: usize,
}

impl ClockEstimate {
    /// The estimate for two ends on one clock.
    pub fn shared() -> ClockEstimate {
        ClockEstimate {
            method: ClockMethod::Shared,
            reference: Duration::ZERO,
            offset: SignedDuration::ZERO,
            drift_ppm: 0.0,
            samples_used: 0,
        }
    }

    /// Nothing known (treated as zero offset where an offset is needed).
    pub fn unknown() -> ClockEstimate {
        ClockEstimate {
            method: ClockMethod::Unknown,
            ..ClockEstimate::shared()
        }
    }

    /// The offset at client-clock time `t`.
    pub fn offset_at(&self, t: Duration) -> SignedDuration {
        let dt = SignedDuration::between(t, self.reference).as_secs_f64();
        let extra = dt * self.drift_ppm * 1e-6 * 1e9;
        SignedDuration::from_i128(self.offset.as_nanos() as i128 + extra.round() as i128)
    }
}

/// Number of filter windows for `n` samples: about 20 samples each, between 1 and 32.
fn window_count(n: usize) -> usize {
    (n / 20).clamp(1, 32)
}

/// Estimates offset and drift from samples in send order. `None` if there are none.
pub fn estimate(samples: &[ClockSample]) -> Option<ClockEstimate> {
    if samples.is_empty() {
        return None;
    }
    let windows = window_count(samples.len());
    let per = samples.len().div_ceil(windows);
    // (time relative to the first sample in s, offset in ns) of each window's best sample.
    let t0 = samples[0].t1;
    let points: Vec<(f64, f64)> = samples
        .chunks(per)
        .filter_map(|chunk| chunk.iter().min_by_key(|s| s.delay()))
        .map(|s| {
            let mid = s.t1 + s.t4.saturating_sub(s.t1) / 2;
            (
                SignedDuration::between(mid, t0).as_secs_f64(),
                s.offset().as_nanos() as f64,
            )
        })
        .collect();
    let n = points.len() as f64;
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_o = points.iter().map(|p| p.1).sum::<f64>() / n;
    let var_t: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
    // Fewer than two distinct times: no slope to fit.
    let slope_ns_per_s = if points.len() >= 2 && var_t > 1e-12 {
        points
            .iter()
            .map(|p| (p.0 - mean_t) * (p.1 - mean_o))
            .sum::<f64>()
            / var_t
    } else {
        0.0
    };
    let reference = t0 + Duration::from_secs_f64(mean_t.max(0.0));
    Some(ClockEstimate {
        method: ClockMethod::Estimated,
        reference,
        offset: SignedDuration::from_i128(mean_o.round() as i128),
        drift_ppm: slope_ns_per_s / 1e3,
        samples_used: points.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulated probes: responder clock = client + offset + drift·t, base delays up and
    /// down plus a deterministic pseudo-random queueing delay (most probes see some).
    fn simulate(offset_ns: i64, drift_ppm: f64, up_ms: u64, down_ms: u64) -> Vec<ClockSample> {
        let start = Duration::from_secs(1_000_000);
        let mut x: u64 = 12345;
        (0..2000u64)
            .map(|i| {
                // xorshift for jitter, 0..20 ms, zero in about one direction in three
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let jitter = |v: u64| {
                    if v.is_multiple_of(3) {
                        Duration::ZERO
                    } else {
                        Duration::from_micros(v % 20_000)
                    }
                };
                let j_up = jitter(x);
                let j_down = jitter(x >> 20);
                let t1 = start + Duration::from_millis(10 * i);
                let to_server = |t: Duration| {
                    let el = (t - start).as_secs_f64();
                    let off = offset_ns as f64 + drift_ppm * 1e-6 * el * 1e9;
                    Duration::from_nanos((t.as_nanos() as f64 + off) as u64)
                };
                let arrive = t1 + Duration::from_millis(up_ms) + j_up;
                let leave = arrive + Duration::from_micros(20);
                let t4 = leave + Duration::from_millis(down_ms) + j_down;
                ClockSample {
                    t1,
                    t2: to_server(arrive),
                    t3: to_server(leave),
                    t4,
                }
            })
            .collect()
    }

    fn at(est: &ClockEstimate, s: &ClockSample) -> f64 {
        est.offset_at(s.t1).as_millis_f64()
    }

    #[test]
    fn recovers_offset_and_drift_on_symmetric_path() {
        let s = simulate(-2_500_000_000, 50.0, 15, 15);
        let est = estimate(&s).unwrap();
        assert_eq!(est.method, ClockMethod::Estimated);
        assert!(
            (est.drift_ppm - 50.0).abs() < 2.0,
            "drift {}",
            est.drift_ppm
        );
        // 20 s at 50 ppm = 1 ms of drift; both ends must be right within 0.1 ms.
        let first = at(&est, &s[0]);
        let last = at(&est, &s[s.len() - 1]);
        assert!((first - -2500.0).abs() < 0.1, "first {first}");
        assert!((last - -2499.0).abs() < 0.1, "last {last}");
    }

    #[test]
    fn asymmetric_base_delay_biases_by_half_the_difference() {
        // up 30 ms, down 10 ms: estimate is off by (30 - 10) / 2 = 10 ms, as documented.
        let s = simulate(7_000_000, 0.0, 30, 10);
        let est = estimate(&s).unwrap();
        let got = at(&est, &s[1000]);
        assert!((got - 17.0).abs() < 0.1, "offset {got} ms");
        assert!(est.drift_ppm.abs() < 1.0);
    }

    #[test]
    fn single_sample_gives_its_offset_and_no_drift() {
        let s = simulate(1_000_000, 0.0, 5, 5);
        let est = estimate(&s[..1]).unwrap();
        assert_eq!(est.drift_ppm, 0.0);
        assert_eq!(est.samples_used, 1);
        assert_eq!(est.offset, s[0].offset());
        assert!(estimate(&[]).is_none());
    }

    #[test]
    fn sample_offset_and_delay_formulas() {
        let s = ClockSample {
            t1: Duration::from_millis(100),
            t2: Duration::from_millis(1110), // server 1000 ms ahead, 10 ms up
            t3: Duration::from_millis(1111),
            t4: Duration::from_millis(131), // 20 ms down
        };
        assert_eq!(s.delay().as_nanos(), 30_000_000);
        // (1010 + 980) / 2 = 995: biased by (10 - 20) / 2 = -5 ms
        assert_eq!(s.offset().as_nanos(), 995_000_000);
    }

    #[test]
    fn shared_is_exactly_zero() {
        let e = ClockEstimate::shared();
        assert_eq!(e.offset_at(Duration::from_secs(99)), SignedDuration::ZERO);
    }
}
