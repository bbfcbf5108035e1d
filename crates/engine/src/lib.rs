//! Traffic engine: iperf 2 compatible TCP and UDP clients and servers.
//!
//! The drivers here move bytes between sockets and the sans-IO accumulators of
//! `bloatlab-metrics`; wire layouts come from `bloatlab-wire`. The CLI turns
//! options into a [`config::ClientConfig`] / [`config::ServerConfig`] and calls
//! the entry points.
//!
//! # Clocks
//!
//! Read, slept on and tuned through `bloatlab-os`:
//! * **wall clock** (`CLOCK_REALTIME`, `bloatlab_os::clock::realtime_now`) for every
//!   timestamp that goes on the wire (trip-times write timestamps, start times, acks), as
//!   iperf 2 does. One-way latencies are differences of two hosts' wall clocks, so across
//!   hosts they are only as good as NTP/PTP sync; on one host both ends read the same clock
//!   and the latency is exact (and never negative);
//! * **monotonic clock** ([`std::time::Instant`], `udp::clock::Mono`) for local intervals,
//!   pacing and test durations, immune to wall-clock steps.

#![forbid(unsafe_code)]

pub mod config;
pub mod console;
pub mod flow_table;
pub mod limits;
pub mod loglimit;
pub mod meter;
pub mod pacer;
pub mod rate_budget;
pub mod sock;
pub mod stall;
pub mod suffix;
pub mod sum;
pub mod tcp;
pub mod tcpinfo;
pub mod time_budget;
pub mod udp;
