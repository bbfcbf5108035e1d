//! The optional per-packet trace: one event per drop, CE mark and departure from the qdisc.

use crate::qdisc::DropReason;
use bloatlab_units::Bytes;
use std::time::Duration;

/// What happened to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Left the qdisc and started serializing.
    Sent,
    /// Marked CE (it continues; a `Sent` event follows when it leaves the qdisc).
    Marked,
    /// Discarded.
    Dropped(DropReason),
}

/// One trace record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TraceEvent {
    /// Virtual time of the event (the link's schedule, not the driver's wake-up time).
    pub time: Duration,
    /// The packet's flow hash (0 for unparseable packets).
    pub flow: u32,
    /// IP length.
    pub size: Bytes,
    /// Time spent in the qdisc so far; `None` for loss-model drops (never queued).
    pub sojourn: Option<Duration>,
    /// What happened.
    pub verdict: Verdict,
}

/// The trace callback. It runs on the emulator's data path, so keep it cheap (e.g. push into a
/// pre-allocated ring or a channel).
pub type TraceFn = Box<dyn FnMut(&TraceEvent) + Send>;
