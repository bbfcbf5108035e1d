//! bloatlab-emu: a sans-IO, deterministic emulator for one direction of a network link.
//!
//! ```text
//! enqueue(now, ip_packet) -> loss -> qdisc (FIFO | CoDel | FQ-CoDel | PIE | CAKE) -> serializer (rate,
//!                            overhead, ATM/PTM framing) -> delay line (delay, jitter) -> dequeue(now)
//! ```
//!
//! The contract (see [`Link`]): time is a [`std::time::Duration`] since an origin the caller
//! picks; nothing here reads a clock, sleeps or touches a socket, and randomness comes from the
//! seed given to [`Link::new`]. The same config, seed and inputs always give the same outputs.
//! Every packet is accounted for in [`Counters`]: delivered, queued, in transit, or dropped with
//! the name of who dropped it.
//!
//! ```
//! use bloatlab_emu::{Link, LinkConfig};
//! use std::time::Duration;
//!
//! let cfg = LinkConfig::from_pairs([
//!     ("rate", Some("12mbit")),
//!     ("delay", Some("10ms")),
//!     ("qdisc", Some("fq_codel")),
//! ])?;
//! let mut link = Link::new(&cfg, 42)?;
//! let mut packet = vec![0u8; 1500];
//! packet[0] = 0x45; // IPv4
//! link.enqueue(Duration::ZERO, packet);
//! // 1500 bytes at 12 Mbit/s take 1 ms to serialize, then 10 ms to propagate.
//! assert_eq!(link.next_event(), Some(Duration::from_millis(11)));
//! assert!(link.dequeue(Duration::from_millis(11)).is_some());
//! assert_eq!(link.counters().dequeued.packets, 1);
//! # Ok::<(), bloatlab_emu::SpecError>(())
//! ```
//!
//! Several links in series (a shaper in front of a bloated modem) form a [`Chain`] (see [`chain`]).
//!
//! User-facing spellings follow tc(8) (`20mbit`, `40ms`, `0.5%`, `64kb`, `1000p`); see [`spec`].
//! The driver that moves real packets through a `Link` lives in `bloatlab-lab`.

#![forbid(unsafe_code)]

pub mod capacity;
pub mod chain;
pub mod config;
pub mod counters;
mod link;
mod loss;
pub mod packet;
pub mod qdisc;
pub mod spec;
pub mod spelled;
pub mod trace;
pub mod tracegen;

pub use capacity::{Capacity, CapacityTrace, LinkRate, Schedule, TraceError};
pub use chain::{
    Chain, StageConfig, StageError, StageSetting, StageSpec, parse_stage, parse_stage_words,
};
pub use config::{Framing, JitterDistribution, LinkConfig, LossModel, Overhead};
pub use counters::{Counters, Drops, PacketBytes, SojournHistogram, SojournSummary};
pub use link::Link;
pub use qdisc::{DropReason, Qdisc, QdiscConfig};
pub use spec::{
    Limit, Probability, Problem, SpecError, parse_limit, parse_percent, parse_rate, parse_size,
    parse_time,
};
pub use spelled::{QdiscParam, Spelled, TcValue};
pub use trace::{TraceEvent, TraceFn, Verdict};
