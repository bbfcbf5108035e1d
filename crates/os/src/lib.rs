//! bloatlab's OS glue, in one place: the clocks, the one precise sleep, thread timing
//! attributes (timer slack, SCHED_FIFO), a stop token raised by signals, owned children
//! ([`child`]: killed on drop, or run to completion and stopped with a grace period),
//! kernel receive timestamps of datagrams ([`sockmsg`]), batched datagram I/O ([`mmsg`]),
//! the one poll(2) ([`poll`]), socket options and `TCP_INFO` ([`sockopt`]), plain
//! descriptor calls ([`fdio`]), and the lab's TUN, ethtool, netlink and namespace calls
//! ([`tun`], [`netdev`], [`netns`]).
//!
//! Every crate that needs one of these calls it here rather than owning a copy; this crate
//! holds all of bloatlab's `unsafe` (each block says why it is sound), so the callers need
//! none: every other crate is `#![forbid(unsafe_code)]`. Each wrapper has a unit test.
//! Linux only, like the rest of bloatlab.

pub mod child;
pub mod clock;
pub mod fdio;
pub mod mmsg;
pub mod netdev;
pub mod netns;
pub mod poll;
pub mod process;
pub mod sleep;
pub mod sockmsg;
pub mod sockopt;
pub mod stop;
pub mod thread;
pub mod tun;

pub use stop::StopToken;
