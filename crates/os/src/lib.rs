//! bloatlab's OS glue, in one place: the clocks, the one precise sleep, thread timing
//! attributes (timer slack, SCHED_FIFO), a stop token raised by signals, owned children
//! ([`child`]: killed on drop, or run to completion and stopped with a grace period), and
//! kernel receive timestamps of datagrams ([`sockmsg`]).
//!
//! Every crate that needs one of these calls it here rather than owning a copy; this crate
//! holds their `unsafe` (each block says why it is sound), so the callers need none.
//! Linux only, like the rest of bloatlab.

pub mod child;
pub mod clock;
pub mod process;
pub mod sleep;
pub mod sockmsg;
pub mod stop;
pub mod thread;

pub use stop::StopToken;
