//! Generates capacity traces in mahimahi's format ([`crate::capacity`]) from a rate that is
//! constant over segments: a step trace, an LTE-like random walk, a Starlink-like trace. Pure
//! and seeded: the same arguments give the same file. `bloatlab lab trace-gen` writes them;
//! the traces shipped in `traces/` were made with it (each file's header says how).
//!
//! **Rendering.** Over each millisecond `m` the rate in force adds `rate x 1 ms` bits; line `m`
//! is written once per 1500-byte packet the running total crosses, so over any window the
//! trace's capacity is the rate's integral to within one packet. A trace loops with the period
//! of its last line, so when the last millisecond has no opportunity one is added there (one
//! extra packet per loop), which keeps the loop as long as asked.

use crate::capacity::OPPORTUNITY_BYTES;
use bloatlab_units::BitRate;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::fmt::Write as _;
use std::time::Duration;

/// A rate constant over `len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// How long the rate holds.
    pub len: Duration,
    /// The rate.
    pub rate: BitRate,
}

/// `high` for `every`, then `low` for `every`: one loop of an alternating step trace.
pub fn step(high: BitRate, low: BitRate, every: Duration) -> Vec<Segment> {
    vec![
        Segment {
            len: every,
            rate: high,
        },
        Segment {
            len: every,
            rate: low,
        },
    ]
}

/// An LTE-like random walk: every `every` the rate is multiplied by `exp(sigma x z)` (z a
/// standard normal draw), kept within `min..=max`, from `start`, for `length`. The walk in the
/// logarithm of the rate gives the slow fades and recoveries of a cellular link.
pub fn random_walk(
    start: BitRate,
    min: BitRate,
    max: BitRate,
    every: Duration,
    sigma: f64,
    length: Duration,
    seed: u64,
) -> Vec<Segment> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (lo, hi) = (min.0 as f64, max.0 as f64);
    let mut r = (start.0 as f64).clamp(lo, hi);
    segments(every, length, |_| {
        let here = r;
        // Box-Muller; u1 in (0, 1] so ln is finite.
        let u1 = 1.0 - rng.random::<f64>();
        let u2 = rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        r = (r * (sigma * z).exp()).clamp(lo, hi);
        BitRate(here.round() as u64)
    })
}

/// A Starlink-like trace: the satellite scheduler gives the terminal a new allocation every
/// 15 s (`every`), drawn log-uniformly in `min..=max`, for `length`.
pub fn reallocations(
    min: BitRate,
    max: BitRate,
    every: Duration,
    length: Duration,
    seed: u64,
) -> Vec<Segment> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (lo, hi) = ((min.0 as f64).ln(), (max.0 as f64).ln());
    segments(every, length, |_| {
        BitRate((lo + (hi - lo) * rng.random::<f64>()).exp().round() as u64)
    })
}

/// Segments of `every` (the last one cut at `length`), each rate from `rate(i)`.
fn segments(
    every: Duration,
    length: Duration,
    mut rate: impl FnMut(usize) -> BitRate,
) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    while t < length && !every.is_zero() {
        let len = every.min(length - t);
        out.push(Segment {
            len,
            rate: rate(out.len()),
        });
        t += len;
    }
    out
}

/// The trace's lines (see the module docs), after `header` lines written as `# ` comments.
/// Segments are cut to whole milliseconds.
pub fn render(segments: &[Segment], header: &[String]) -> String {
    let mut out = String::new();
    for h in header {
        let _ = writeln!(out, "# {h}");
    }
    let packet_millibits = u128::from(OPPORTUNITY_BYTES) * 8 * 1000;
    let mut acc: u128 = 0; // millibits sent so far
    let mut sent: u128 = 0; // opportunities written
    let mut ms: u64 = 0;
    let mut last = 0;
    for s in segments {
        for _ in 0..s.len.as_millis() {
            ms += 1;
            // rate bit/s x 1 ms = rate millibits.
            acc += u128::from(s.rate.0);
            while (sent + 1) * packet_millibits <= acc {
                sent += 1;
                let _ = writeln!(out, "{ms}");
                last = ms;
            }
        }
    }
    if ms > 0 && last != ms {
        let _ = writeln!(out, "{ms}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::CapacityTrace;

    #[test]
    fn a_step_trace_gives_its_rates_per_second_and_loops_at_its_length() {
        let text = render(
            &step(
                BitRate(20_000_000),
                BitRate(5_000_000),
                Duration::from_secs(5),
            ),
            &["step".into()],
        );
        assert!(text.starts_with("# step\n"));
        let t = CapacityTrace::parse("step", &text).unwrap();
        assert_eq!(t.period(), Duration::from_secs(10));
        let w = t.rate_per_window(Duration::ZERO, Duration::from_secs(1), 20);
        for (i, r) in w.iter().enumerate() {
            let want = if (i / 5).is_multiple_of(2) { 20e6 } else { 5e6 };
            // Within one packet per second (12 kbit/s) plus the loop's one extra packet.
            assert!((r - want).abs() <= 24_000.0, "window {i}: {r} vs {want}");
        }
    }

    #[test]
    fn generators_are_seeded_and_stay_within_bounds() {
        let (min, max) = (BitRate(1_000_000), BitRate(30_000_000));
        let a = random_walk(
            BitRate(10_000_000),
            min,
            max,
            Duration::from_millis(200),
            0.2,
            Duration::from_secs(60),
            7,
        );
        let b = random_walk(
            BitRate(10_000_000),
            min,
            max,
            Duration::from_millis(200),
            0.2,
            Duration::from_secs(60),
            7,
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 300);
        assert!(a.iter().all(|s| s.rate >= min && s.rate <= max));
        // It walks: not a constant.
        assert!(a.iter().any(|s| s.rate != a[0].rate));
        let s = reallocations(
            BitRate(5_000_000),
            BitRate(25_000_000),
            Duration::from_secs(15),
            Duration::from_secs(60),
            3,
        );
        assert_eq!(s.len(), 4);
        assert!(
            s.iter()
                .all(|x| x.len == Duration::from_secs(15) && x.rate.0 >= 5_000_000)
        );
        let t = CapacityTrace::parse("s", &render(&s, &[])).unwrap();
        assert_eq!(t.period(), Duration::from_secs(60));
    }
}
