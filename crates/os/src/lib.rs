//! bloatlab's OS glue, in one place: the clocks, the one precise sleep, thread timing
//! attributes (timer slack, SCHED_FIFO) and a stop token raised by signals.
//!
//! Every crate that needs one of these calls it here rather than owning a copy; this crate
//! holds their `unsafe` (each block says why it is sound), so the callers need none.
//! Linux only, like the rest of bloatlab.

pub mod clock;
pub mod process;
pub mod sleep;
pub mod stop;
pub mod thread;

pub use stop::StopToken;
