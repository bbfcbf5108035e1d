//! `TCP_burst_payload` (92 B): with `--trip-times` every burst of a TCP stream
//! starts with it (README 5.5). A 2.1.8 client writes only some fields per
//! burst and leaves stale test-header bytes in the others, so parsing reads
//! only the live fields and never validates the rest.

use crate::WireError;
use crate::error::need;
use crate::field::{Field, get_u32, set_u32, zero};
use crate::time::WallTime;
use crate::view::view_struct;
use bloatlab_units::Bytes;

/// Field map. "stale" fields are not written per burst by 2.1.8.
pub mod field {
    use super::Field;
    /// `flags` (stale).
    pub const FLAGS: Field = 0..4;
    /// `typelen` (stale).
    pub const TYPELEN: Field = 4..12;
    /// Report start time, seconds.
    pub const START_SEC: Field = 12..16;
    /// .. microseconds.
    pub const START_USEC: Field = 16..20;
    /// Time taken right before the `write()` of this burst (latency reference).
    pub const WRITE_SEC: Field = 20..24;
    /// .. microseconds.
    pub const WRITE_USEC: Field = 24..28;
    /// `send_tt.read_tv_*` (stale).
    pub const READ_TV: Field = 28..36;
    /// `reserved0` (stale).
    pub const RESERVED0: Field = 36..40;
    /// Burst period in µs (isochronous/periodic bursts only; stale otherwise).
    pub const BURST_PERIOD_US: Field = 40..44;
    /// Burst counter, 1, 2, 3, ...
    pub const BURST_ID: Field = 44..48;
    /// Bytes in this burst including this header.
    pub const BURST_SIZE: Field = 48..52;
    /// Running sequence number, low word.
    pub const SEQNO_LOWER: Field = 52..56;
    /// .. high word.
    pub const SEQNO_UPPER: Field = 56..60;
    /// `writeacktt` (unused).
    pub const WRITEACKTT: Field = 60..76;
    /// `reserved1..4` (unused).
    pub const RESERVED: Field = 76..92;
}

/// Size of `TCP_burst_payload`.
pub const BURST_HEADER_LEN: usize = 92;

view_struct!(
    /// A view of a burst header.
    TcpBurstHeader
);

impl<T: AsRef<[u8]>> TcpBurstHeader<T> {
    /// Needs 92 bytes.
    pub fn check_len(&self) -> Result<(), WireError> {
        need(self.buffer.as_ref(), BURST_HEADER_LEN)
    }
    fn time(&self, s: Field, u: Field) -> WallTime {
        let b = self.buffer.as_ref();
        WallTime {
            sec: get_u32(b, s),
            usec: get_u32(b, u),
        }
    }
    /// Report start time.
    pub fn start_time(&self) -> WallTime {
        self.time(field::START_SEC, field::START_USEC)
    }
    /// Write timestamp.
    pub fn write_time(&self) -> WallTime {
        self.time(field::WRITE_SEC, field::WRITE_USEC)
    }
    /// Burst id.
    pub fn burst_id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::BURST_ID)
    }
    /// Burst size (bytes, including the header).
    pub fn burst_size(&self) -> Bytes {
        Bytes(u64::from(get_u32(self.buffer.as_ref(), field::BURST_SIZE)))
    }
    /// Burst period in µs. Only meaningful for isochronous/periodic bursts:
    /// otherwise 2.1.8 leaves stale bytes here.
    pub fn burst_period_us_raw(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::BURST_PERIOD_US)
    }
    /// Sequence number.
    pub fn seqno(&self) -> u64 {
        let b = self.buffer.as_ref();
        u64::from(get_u32(b, field::SEQNO_LOWER))
            | (u64::from(get_u32(b, field::SEQNO_UPPER)) << 32)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpBurstHeader<T> {
    /// Sets only the write timestamp (for senders that re-stamp a prepared header
    /// right before `write()`).
    pub fn set_write_time(&mut self, t: WallTime) {
        let b = self.buffer.as_mut();
        set_u32(b, field::WRITE_SEC, t.sec);
        set_u32(b, field::WRITE_USEC, t.usec);
    }
}

/// The live fields of a burst header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TcpBurstRepr {
    /// Report start time.
    pub start_time: WallTime,
    /// Timestamp taken right before the burst's `write()`.
    pub write_time: WallTime,
    /// Burst counter.
    pub burst_id: u32,
    /// Bytes in the burst including the 92-byte header (`-l` normally).
    pub burst_size: Bytes,
    /// Running sequence number.
    pub seqno: u64,
}

impl TcpBurstRepr {
    /// Parses the live fields; stale fields are ignored whatever they hold.
    pub fn parse<T: AsRef<[u8]>>(v: &TcpBurstHeader<T>) -> Result<TcpBurstRepr, WireError> {
        v.check_len()?;
        Ok(TcpBurstRepr {
            start_time: v.start_time(),
            write_time: v.write_time(),
            burst_id: v.burst_id(),
            burst_size: v.burst_size(),
            seqno: v.seqno(),
        })
    }

    /// 92.
    pub fn buffer_len(&self) -> usize {
        BURST_HEADER_LEN
    }

    /// Writes the live fields and zeroes the others (bloatlab sends no stale bytes).
    /// `burst_size` saturates at `u32::MAX`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut TcpBurstHeader<T>) {
        let b = v.buffer.as_mut();
        zero(b, 0..BURST_HEADER_LEN);
        set_u32(b, field::START_SEC, self.start_time.sec);
        set_u32(b, field::START_USEC, self.start_time.usec);
        set_u32(b, field::WRITE_SEC, self.write_time.sec);
        set_u32(b, field::WRITE_USEC, self.write_time.usec);
        set_u32(b, field::BURST_ID, self.burst_id);
        set_u32(
            b,
            field::BURST_SIZE,
            u32::try_from(self.burst_size.0).unwrap_or(u32::MAX),
        );
        set_u32(b, field::SEQNO_LOWER, self.seqno as u32);
        set_u32(b, field::SEQNO_UPPER, (self.seqno >> 32) as u32);
    }
}
