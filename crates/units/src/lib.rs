//! Units as types, shared by every bloatlab crate.
//!
//! Durations are [`std::time::Duration`]; sizes are [`Bytes`]; rates are
//! [`BitRate`] (bits per second). Parsing of user-facing spellings lives with
//! the tool whose conventions it follows (iperf 2's `-b 10m`, tc's `20mbit`),
//! but both produce these types, so no crate passes a bare `u64` whose unit
//! lives only in a comment. Names validated once live here too, for the same
//! reason: [`CongestionControl`] and [`tos::Tos`] have one rule for every crate.

#![forbid(unsafe_code)]

mod congestion;
pub mod tos;

pub use congestion::{BadCongestionControl, CongestionControl};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A number of bytes (octets).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// The number of bits, saturating.
    pub const fn bits(self) -> u64 {
        self.0.saturating_mul(8)
    }

    /// Saturating addition.
    pub const fn saturating_add(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(other.0))
    }

    /// Saturating subtraction.
    pub const fn saturating_sub(self, other: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(other.0))
    }
}

impl std::ops::Add for Bytes {
    type Output = Bytes;
    fn add(self, rhs: Bytes) -> Bytes {
        Bytes(self.0 + rhs.0)
    }
}

impl std::ops::AddAssign for Bytes {
    fn add_assign(&mut self, rhs: Bytes) {
        self.0 += rhs.0;
    }
}

impl std::ops::Sub for Bytes {
    type Output = Bytes;
    fn sub(self, rhs: Bytes) -> Bytes {
        Bytes(self.0 - rhs.0)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} B", self.0)
    }
}

/// A rate in bits per second.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct BitRate(pub u64);

impl BitRate {
    /// Bits per second as a float, for reporting.
    pub fn bits_per_sec_f64(self) -> f64 {
        self.0 as f64
    }

    /// The rate at which `bytes` were moved in `elapsed`. Zero elapsed gives zero.
    pub fn from_transfer(bytes: Bytes, elapsed: Duration) -> BitRate {
        let ns = elapsed.as_nanos();
        if ns == 0 {
            return BitRate(0);
        }
        let bits = u128::from(bytes.0) * 8 * 1_000_000_000;
        BitRate(u64::try_from(bits / ns).unwrap_or(u64::MAX))
    }

    /// How long `bytes` take to serialise at this rate, in nanoseconds, rounded
    /// up so a link never runs faster than configured. `None` for a zero rate.
    pub fn transmit_time(self, bytes: Bytes) -> Option<Duration> {
        if self.0 == 0 {
            return None;
        }
        let bits = u128::from(bytes.0) * 8 * 1_000_000_000;
        let ns = bits.div_ceil(u128::from(self.0));
        Some(Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)))
    }
}

impl fmt::Display for BitRate {
    /// SI prefixes, as network people write rates: `20 Mbit/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0 as f64;
        let (scaled, unit) = if v >= 1e9 {
            (v / 1e9, "Gbit/s")
        } else if v >= 1e6 {
            (v / 1e6, "Mbit/s")
        } else if v >= 1e3 {
            (v / 1e3, "kbit/s")
        } else {
            (v, "bit/s")
        };
        if scaled.fract() == 0.0 {
            write!(f, "{scaled:.0} {unit}")
        } else {
            write!(f, "{scaled:.3} {unit}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_rate_matches_hand_computation() {
        // 117.1e6 B/s is 937 Mbit/s, the seed report's GigE figure.
        let r = BitRate::from_transfer(Bytes(117_125_000), Duration::from_secs(1));
        assert_eq!(r, BitRate(937_000_000));
        assert_eq!(BitRate::from_transfer(Bytes(5), Duration::ZERO), BitRate(0));
    }

    #[test]
    fn transmit_time_rounds_up() {
        // 1500 B at 20 Mbit/s = 600 us exactly; 1 B at 3 bit/s = 2.67 s -> rounded up.
        let t = BitRate(20_000_000).transmit_time(Bytes(1500)).unwrap();
        assert_eq!(t, Duration::from_micros(600));
        let t = BitRate(3).transmit_time(Bytes(1)).unwrap();
        assert_eq!(t, Duration::from_nanos(2_666_666_667));
        assert_eq!(BitRate(0).transmit_time(Bytes(1)), None);
    }

    #[test]
    fn display_uses_si_prefixes() {
        assert_eq!(BitRate(20_000_000).to_string(), "20 Mbit/s");
        assert_eq!(BitRate(1_500_000_000).to_string(), "1.500 Gbit/s");
        assert_eq!(BitRate(512).to_string(), "512 bit/s");
    }
}
