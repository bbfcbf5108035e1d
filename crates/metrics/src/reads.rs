//! `Reads=Dist`: the histogram of `read()` sizes a receiver prints with `-e`.
//!
//! iperf 2 (`src/Reports.c:644`, `src/Reporter.c:957`): 8 bins, each
//! `read_buffer_len / 8` bytes wide (integer division); a read of `n > 0`
//! bytes lands in bin `floor((n - 1) / width)`. Reads beyond the 8th bin
//! (impossible when reads are capped at the buffer length) are counted in the
//! total but in no bin, as iperf 2 does. Zero-byte reads (EOF) are ignored.

use bloatlab_units::Bytes;
use serde::{Deserialize, Serialize};

/// Number of bins.
pub const READ_BINS: usize = 8;

/// Per-interval (or total) read-size distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadsDist {
    /// Width of one bin in bytes (`read_buffer_len / 8`, at least 1).
    pub bin_width: Bytes,
    /// Number of successful reads (`n > 0`).
    pub reads: u64,
    /// Reads per bin.
    pub bins: [u64; READ_BINS],
}

impl ReadsDist {
    /// An empty distribution for a read buffer of `read_buffer_len` bytes
    /// (`-l`, 128 KiB by default, giving 16 KiB bins).
    pub fn new(read_buffer_len: Bytes) -> ReadsDist {
        ReadsDist {
            bin_width: Bytes((read_buffer_len.0 / READ_BINS as u64).max(1)),
            reads: 0,
            bins: [0; READ_BINS],
        }
    }

    /// Record one `read()` that returned `n` bytes.
    pub fn record(&mut self, n: Bytes) {
        if n.0 == 0 {
            return;
        }
        self.reads += 1;
        let bin = (n.0 - 1) / self.bin_width.0;
        if let Some(slot) = usize::try_from(bin).ok().and_then(|b| self.bins.get_mut(b)) {
            *slot += 1;
        }
    }

    /// Add another distribution (for `[SUM]` lines); keeps this bin width.
    pub fn merge(&mut self, other: &ReadsDist) {
        self.reads += other.reads;
        for (a, b) in self.bins.iter_mut().zip(other.bins) {
            *a += b;
        }
    }

    /// Forget the counts, keep the bin width (start of a new interval).
    pub fn clear(&mut self) {
        self.reads = 0;
        self.bins = [0; READ_BINS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_follow_iperf2_boundaries() {
        // 128 KiB buffer -> 16 KiB bins: 1..=16384 -> bin0, 16385..=32768 -> bin1,
        // 114689..=131072 -> bin7 (README section 4(c)).
        let mut d = ReadsDist::new(Bytes(131_072));
        assert_eq!(d.bin_width, Bytes(16_384));
        for n in [1, 92, 16_384, 16_385, 32_768, 114_689, 131_072, 0] {
            d.record(Bytes(n));
        }
        assert_eq!(d.reads, 7);
        assert_eq!(d.bins, [3, 2, 0, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn oversized_reads_count_but_land_in_no_bin() {
        let mut d = ReadsDist::new(Bytes(8));
        d.record(Bytes(9));
        d.record(Bytes(1_000_000));
        assert_eq!(d.reads, 2);
        assert_eq!(d.bins, [0; 8]);
    }

    #[test]
    fn tiny_buffer_does_not_divide_by_zero() {
        let mut d = ReadsDist::new(Bytes(3));
        assert_eq!(d.bin_width, Bytes(1));
        d.record(Bytes(1));
        assert_eq!(d.bins[0], 1);
    }

    #[test]
    fn udp_server_banner_width() {
        // "Read buffer size: 1.44 KByte (Dist bin width= 183 Byte)": 1470 / 8 = 183.
        assert_eq!(ReadsDist::new(Bytes(1470)).bin_width, Bytes(183));
    }
}
