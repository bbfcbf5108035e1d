//! UDP sequence-number tracking: loss, out-of-order, duplicates.
//!
//! iperf 2 (`src/Reporter.c:972-1010`): a datagram whose id is not
//! `highest + 1` is either a gap (`lost += id - highest - 1`) or, if it is
//! not above `highest`, out-of-order (`ooo += 1`); `highest` never decreases.
//! Reports show `lost - ooo` (floored at 0) because iperf 2 cannot tell a
//! late datagram (which filled a gap already counted as lost) from a
//! duplicate (which did not). We keep those iperf 2 counters for
//! compatibility and additionally tell the two apart with a bitmap of the
//! last [`WINDOW`] ids, so the JSON can report exact duplicates.

/// How many recent ids the duplicate detector remembers.
pub const WINDOW: u64 = 4096;

/// What one datagram's id meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqEvent {
    /// The next expected id.
    InOrder,
    /// Above the next expected id; `missing` ids were skipped.
    Gap {
        /// Number of ids skipped.
        missing: u64,
    },
    /// Below the highest id and not seen before (or too old to know).
    Late,
    /// Seen before (within the window).
    Duplicate,
    /// Id 0, which iperf 2 never sends for data; ignored.
    Ignored,
}

/// Sequence tracker. Counters are cumulative; the receiver accumulator
/// takes differences per interval.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    highest: u64,
    gaps: u64,
    out_of_order: u64,
    late: u64,
    duplicates: u64,
    seen: Box<[u64; (WINDOW / 64) as usize]>,
}

impl Default for SeqTracker {
    fn default() -> SeqTracker {
        SeqTracker::new()
    }
}

impl SeqTracker {
    /// Nothing received yet (ids start at 1).
    pub fn new() -> SeqTracker {
        SeqTracker {
            highest: 0,
            gaps: 0,
            out_of_order: 0,
            late: 0,
            duplicates: 0,
            seen: Box::new([0; (WINDOW / 64) as usize]),
        }
    }

    fn bit(&self, id: u64) -> bool {
        let i = (id % WINDOW) as usize;
        self.seen[i / 64] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, id: u64) {
        let i = (id % WINDOW) as usize;
        self.seen[i / 64] |= 1 << (i % 64);
    }

    fn clear_range(&mut self, from: u64, to_inclusive: u64) {
        if to_inclusive - from + 1 >= WINDOW {
            self.seen.fill(0);
            return;
        }
        for id in from..=to_inclusive {
            let i = (id % WINDOW) as usize;
            self.seen[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Account one datagram id.
    pub fn on_id(&mut self, id: u64) -> SeqEvent {
        if id == 0 {
            return SeqEvent::Ignored;
        }
        if id > self.highest {
            self.clear_range(self.highest + 1, id);
            let missing = id - self.highest - 1;
            self.gaps += missing;
            self.highest = id;
            self.set(id);
            return if missing == 0 {
                SeqEvent::InOrder
            } else {
                SeqEvent::Gap { missing }
            };
        }
        self.out_of_order += 1;
        if self.highest - id < WINDOW && self.bit(id) {
            self.duplicates += 1;
            SeqEvent::Duplicate
        } else {
            if self.highest - id < WINDOW {
                self.set(id);
            }
            self.late += 1;
            SeqEvent::Late
        }
    }

    /// Highest id seen (iperf 2's `PacketID`).
    pub fn highest(&self) -> u64 {
        self.highest
    }
    /// Ids skipped over (iperf 2's cumulative `Lost`, before subtracting out-of-order).
    pub fn gaps(&self) -> u64 {
        self.gaps
    }
    /// Datagrams at or below the highest id: late ones plus duplicates (iperf 2's `OutofOrder`).
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }
    /// Late (reordered) datagrams that filled a gap.
    pub fn late(&self) -> u64 {
        self.late
    }
    /// Exact duplicates.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf2_counters_and_exact_split() {
        let mut t = SeqTracker::new();
        let evs: Vec<SeqEvent> = [1, 2, 5, 3, 3, 6, 4, 0]
            .iter()
            .map(|&i| t.on_id(i))
            .collect();
        assert_eq!(
            evs,
            [
                SeqEvent::InOrder,
                SeqEvent::InOrder,
                SeqEvent::Gap { missing: 2 },
                SeqEvent::Late,
                SeqEvent::Duplicate,
                SeqEvent::InOrder,
                SeqEvent::Late,
                SeqEvent::Ignored,
            ]
        );
        assert_eq!(t.highest(), 6);
        assert_eq!(t.gaps(), 2);
        assert_eq!(t.out_of_order(), 3);
        assert_eq!((t.late(), t.duplicates()), (2, 1));
    }

    #[test]
    fn very_old_ids_are_late_not_duplicates() {
        let mut t = SeqTracker::new();
        t.on_id(1);
        t.on_id(10_000);
        assert_eq!(t.on_id(1), SeqEvent::Late);
        assert_eq!(t.on_id(9_999), SeqEvent::Late);
        assert_eq!(t.on_id(9_999), SeqEvent::Duplicate);
        // The window slid: id 10_000 + WINDOW reuses 10_000's slot, which was cleared.
        t.on_id(10_000 + WINDOW);
        assert_eq!(t.on_id(10_000 + WINDOW - 1), SeqEvent::Late);
    }

    #[test]
    fn huge_jumps_do_not_loop_forever() {
        let mut t = SeqTracker::new();
        t.on_id(u64::MAX);
        assert_eq!(t.gaps(), u64::MAX - 1);
        assert_eq!(t.on_id(u64::MAX), SeqEvent::Duplicate);
    }
}
