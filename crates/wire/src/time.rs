//! Timestamps and the "integer part, fraction x 1e6" double encoding.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A `CLOCK_REALTIME` timestamp as iperf 2 puts it on the wire: `u32 tv_sec,
/// u32 tv_usec` (seconds and microseconds since the Unix epoch).
///
/// Trip-time latencies are differences of two `WallTime`s taken on different
/// hosts, so they are only as good as the hosts' clock sync (NTP/PTP), exactly
/// as in iperf 2. `tv_sec` wraps in 2106; conversions truncate to 32 bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WallTime {
    /// Seconds since the Unix epoch (low 32 bits).
    pub sec: u32,
    /// Microseconds within the second (0..1_000_000 when well formed; a peer
    /// may send more, which conversions carry into seconds).
    pub usec: u32,
}

impl WallTime {
    /// The time `since_epoch` after the Unix epoch (sub-microsecond part truncated).
    pub fn from_since_epoch(since_epoch: Duration) -> WallTime {
        WallTime {
            sec: since_epoch.as_secs() as u32,
            usec: since_epoch.subsec_micros(),
        }
    }

    /// Time since the Unix epoch. Never panics: an out-of-range `usec` carries over.
    pub fn since_epoch(self) -> Duration {
        Duration::from_secs(u64::from(self.sec)) + Duration::from_micros(u64::from(self.usec))
    }

    /// Microseconds since the Unix epoch.
    pub fn as_micros(self) -> i64 {
        i64::from(self.sec) * 1_000_000 + i64::from(self.usec)
    }

    /// Signed `self - earlier` in microseconds (negative when `self` is earlier,
    /// which happens across hosts whose clocks disagree).
    pub fn micros_since(self, earlier: WallTime) -> i64 {
        self.as_micros() - earlier.as_micros()
    }

    /// `self - earlier`, or `None` if `earlier` is later than `self`.
    pub fn checked_duration_since(self, earlier: WallTime) -> Option<Duration> {
        u64::try_from(self.micros_since(earlier))
            .ok()
            .map(Duration::from_micros)
    }
}

impl From<SystemTime> for WallTime {
    /// Times before the epoch map to the epoch.
    fn from(t: SystemTime) -> WallTime {
        WallTime::from_since_epoch(t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO))
    }
}

impl From<WallTime> for SystemTime {
    fn from(t: WallTime) -> SystemTime {
        UNIX_EPOCH + t.since_epoch()
    }
}

/// A double sent as two `int32`s: `x1 = trunc(v)`, `x2 = trunc((v - x1) * 1e6)`.
///
/// iperf 2 uses this for jitter, transit statistics (in seconds) and the
/// isochronous settings. Both words carry the sign (`-0.5 s` is `x1 = 0,
/// x2 = -500000`). The struct keeps the two words so a round trip is exact;
/// use the conversions to get a typed value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SplitDouble {
    /// Integer part.
    pub int: i32,
    /// Fraction times 1e6 (same sign as the value).
    pub frac_e6: i32,
}

impl SplitDouble {
    /// Encodes `v` the way iperf 2 does (truncating toward zero). NaN encodes as
    /// 0; values beyond the `i32` range saturate.
    pub fn from_f64(v: f64) -> SplitDouble {
        if !v.is_finite() {
            return if v.is_nan() {
                SplitDouble::default()
            } else if v > 0.0 {
                SplitDouble {
                    int: i32::MAX,
                    frac_e6: 999_999,
                }
            } else {
                SplitDouble {
                    int: i32::MIN,
                    frac_e6: -999_999,
                }
            };
        }
        let int = v.trunc();
        // `as` saturates for floats, so neither cast can panic or wrap.
        SplitDouble {
            int: int as i32,
            frac_e6: ((v - int) * 1e6).trunc() as i32,
        }
    }

    /// The encoded value.
    pub fn to_f64(self) -> f64 {
        f64::from(self.int) + f64::from(self.frac_e6) / 1e6
    }

    /// Encodes a duration in seconds, exact to the microsecond (saturating).
    pub fn from_duration(d: Duration) -> SplitDouble {
        SplitDouble {
            int: i32::try_from(d.as_secs()).unwrap_or(i32::MAX),
            frac_e6: d.subsec_micros() as i32,
        }
    }

    /// The value as a duration in seconds; `None` if it is negative.
    pub fn to_duration(self) -> Option<Duration> {
        u64::try_from(self.to_micros())
            .ok()
            .map(Duration::from_micros)
    }

    /// The value as signed microseconds (seconds-valued fields).
    pub fn to_micros(self) -> i64 {
        i64::from(self.int) * 1_000_000 + i64::from(self.frac_e6)
    }
}
