//! The two kernel clocks bloatlab reads, as `Duration`s since their epochs.
//!
//! * `CLOCK_REALTIME` (since the Unix epoch): every timestamp that crosses the wire (probe and
//!   trip-times stamps), so two hosts' stamps compare as far as their clocks are synchronised.
//! * `CLOCK_MONOTONIC` (since boot, what `Instant` reads): local intervals and deadlines,
//!   immune to clock steps.

use std::time::Duration;

/// A kernel clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockId {
    /// `CLOCK_REALTIME`.
    Realtime,
    /// `CLOCK_MONOTONIC`.
    Monotonic,
}

impl ClockId {
    pub(crate) fn raw(self) -> libc::clockid_t {
        match self {
            ClockId::Realtime => libc::CLOCK_REALTIME,
            ClockId::Monotonic => libc::CLOCK_MONOTONIC,
        }
    }

    /// The clock now (zero if the kernel refuses, which it does not for these clocks).
    pub fn now(self) -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into the pointer, which is valid.
        unsafe { libc::clock_gettime(self.raw(), &mut ts) };
        from_timespec(ts)
    }
}

/// `CLOCK_REALTIME` now, since the Unix epoch.
pub fn realtime_now() -> Duration {
    ClockId::Realtime.now()
}

/// `CLOCK_MONOTONIC` now.
pub fn monotonic_now() -> Duration {
    ClockId::Monotonic.now()
}

/// The local time zone's offset from UTC, in seconds, at `unix` since the epoch
/// (`tm_gmtoff` of localtime_r(3)); 0 when it is unknown. iperf 2's CSV timestamps are
/// local time.
pub fn utc_offset_secs(unix: Duration) -> i32 {
    let t = libc::time_t::try_from(unix.as_secs()).unwrap_or(0);
    // SAFETY: tm is plain data for which all-zero is valid.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers refer to live locals; localtime_r writes only into tm and is
    // thread-safe.
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if ok {
        i32::try_from(tm.tm_gmtoff).unwrap_or(0)
    } else {
        0
    }
}

pub(crate) fn from_timespec(ts: libc::timespec) -> Duration {
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0).min(999_999_999),
    )
}

pub(crate) fn to_timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_offset_is_within_a_day() {
        let o = utc_offset_secs(realtime_now());
        assert!(o.abs() <= 14 * 3600, "{o}");
    }

    #[test]
    fn realtime_is_after_2020_and_monotonic_agrees_with_instant() {
        assert!(realtime_now() > Duration::from_secs(1_577_836_800));
        let a = monotonic_now();
        let i = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        let (b, e) = (monotonic_now(), i.elapsed());
        assert!(b - a >= Duration::from_millis(5));
        // Both read CLOCK_MONOTONIC: the intervals agree to well under a millisecond
        // unless the thread was descheduled between the reads.
        assert!(
            (b - a).abs_diff(e) < Duration::from_millis(50),
            "{:?} vs {e:?}",
            b - a
        );
    }

    #[test]
    fn timespec_round_trips() {
        let d = Duration::new(12, 345_678_901);
        assert_eq!(from_timespec(to_timespec(d)), d);
    }
}
