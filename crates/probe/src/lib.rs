//! Latency probes: isochronous UDP probes to a bloatlab responder (round-trip time,
//! one-way delay up and down, loss per direction, IPDV, duplicates, late replies) and
//! ICMP echo.
//!
//! * [`packet`]: the probe datagram (our format), zero-copy view and `Repr`.
//! * [`session`]: the sans-IO core (schedule, matching, loss); [`clock`]: offset and drift
//!   estimation; [`report`]: per-probe results and the summary. None of these reads a
//!   clock or touches a socket.
//! * [`responder`]: the UDP responder thread and its sans-IO core; [`client`]: the client
//!   driver (UDP or ICMP); [`icmp`]: the ICMP echo format; [`sys`]: clocks, absolute
//!   sleeps, kernel receive timestamps.
//!
//! All timestamps are CLOCK_REALTIME (the clock of SO_TIMESTAMPNS). On one kernel that
//! clock is shared by every network namespace, so a lab client and responder report the
//! same clock domain and one-way delays are exact; across hosts the offset and drift are
//! estimated (see [`clock`]).

#![forbid(unsafe_code)]

pub mod auth;
pub mod client;
pub mod clock;
mod error;
pub mod icmp;
pub mod packet;
pub mod report;
pub mod responder;
mod responder_table;
pub mod results_file;
pub mod session;
pub mod sys;
pub mod time;

pub use error::ProbeError;
pub use report::{Report, Summary};
pub use time::SignedDuration;
