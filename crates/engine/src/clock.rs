//! The two clocks the engine reads (read, slept on and tuned through `bloatlab-os`).
//!
//! * **Wall clock** (`CLOCK_REALTIME`) for every timestamp that goes on the wire (trip-times
//!   write timestamps, start times, acks), as iperf 2 does. One-way latencies are differences
//!   of two hosts' wall clocks, so across hosts they are only as good as NTP/PTP sync; on one
//!   host both ends read the same clock and the latency is exact (and never negative).
//! * **Monotonic clock** ([`std::time::Instant`]) for local intervals and test durations,
//!   immune to wall-clock steps.

/// `CLOCK_REALTIME` as time since the UNIX epoch.
pub use bloatlab_os::clock::realtime_now as wall_now;
