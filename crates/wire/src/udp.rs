//! UDP datagrams (README 5.9): a 16-byte sequence/timestamp prefix followed by
//! the test header, repeated in every datagram so the server is stateless.
//!
//! ```text
//!  0  id       low 32 bits of the signed 64-bit sequence number (negative = FIN)
//!  4  tv_sec   sender CLOCK_REALTIME just before send
//!  8  tv_usec
//! 12  id2      high 32 bits (interpreted with HEADER_SEQNO64B)
//! 16  core     client_hdr_v1 + client_hdrext (60 B)       LEN = 76
//! 76  isoch    isoch_payload (32 B), with HEADER_UDPTESTS   LEN = 108
//! 108 start    starttime_fq (20 B), not counted by LEN
//! 128 isoch settings (32 B)                                 LEN = 140
//! ```
//! Datagrams shorter than a block simply lack it (iperf 2 truncates the
//! header when `-l` is small), so every block after the prefix is optional.

use crate::WireError;
use crate::client_hdr::{CORE_LEN, ClientHeader, ClientHeaderRepr, IsochSettingsRepr, StartFqRepr};
use crate::error::need;
use crate::field::{Field, at, get_u32, set_u32};
use crate::flags::{HeaderFlags, UpperFlags};
use crate::time::WallTime;
use crate::view::view_struct;
use bloatlab_units::Bytes;
use std::time::Duration;

/// Field map (absolute offsets in the datagram).
pub mod field {
    use super::Field;
    /// `id`: sequence number, low word.
    pub const ID: Field = 0..4;
    /// `tv_sec`.
    pub const TV_SEC: Field = 4..8;
    /// `tv_usec`.
    pub const TV_USEC: Field = 8..12;
    /// `id2`: sequence number, high word.
    pub const ID2: Field = 12..16;
    /// The 60-byte test header core.
    pub const CORE: Field = 16..76;
    /// `isoch_payload`.
    pub const ISOCH: Field = 76..108;
    /// `client_hdrext_starttime_fq`.
    pub const START_FQ: Field = 108..128;
    /// `client_hdrext_isoch_settings`.
    pub const ISOCH_SETTINGS: Field = 128..160;
}

/// Size of the sequence/timestamp prefix (`UDP_datagram`).
pub const PREFIX_LEN: usize = 16;
/// LEN of a plain header (prefix + core).
pub const LEN_PLAIN: usize = PREFIX_LEN + CORE_LEN;
/// LEN with `HEADER_UDPTESTS` (+ isoch payload).
pub const LEN_UDPTESTS: usize = LEN_PLAIN + ISOCH_PAYLOAD_LEN;
/// LEN with isoch settings (the start-time block is not counted).
pub const LEN_ISOCH_SETTINGS: usize = LEN_UDPTESTS + 32;

/// `isoch_payload` field map (relative to its start).
pub mod isoch_field {
    use super::Field;
    /// Burst period in µs.
    pub const BURST_PERIOD_US: Field = 0..4;
    /// First frame start time, seconds.
    pub const START_SEC: Field = 4..8;
    /// .. microseconds.
    pub const START_USEC: Field = 8..12;
    /// Previous frame id.
    pub const PREV_FRAME_ID: Field = 12..16;
    /// Frame id (1-based).
    pub const FRAME_ID: Field = 16..20;
    /// Bytes in this frame.
    pub const BURST_SIZE: Field = 20..24;
    /// Bytes left in this frame including this datagram.
    pub const REMAINING: Field = 24..28;
    /// Reserved.
    pub const RESERVED: Field = 28..32;
}
/// Size of `isoch_payload`.
pub const ISOCH_PAYLOAD_LEN: usize = 32;

/// Parsed `isoch_payload` (zeros unless the sender runs `--isochronous`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IsochPayloadRepr {
    /// Frame period.
    pub burst_period: Duration,
    /// Start of the first frame.
    pub start: WallTime,
    /// Previous frame id.
    pub prev_frame_id: u32,
    /// Frame id.
    pub frame_id: u32,
    /// Bytes in this frame.
    pub burst_size: Bytes,
    /// Bytes left in this frame including this datagram.
    pub remaining: Bytes,
}

impl IsochPayloadRepr {
    fn parse(b: &[u8]) -> IsochPayloadRepr {
        IsochPayloadRepr {
            burst_period: Duration::from_micros(u64::from(get_u32(
                b,
                isoch_field::BURST_PERIOD_US,
            ))),
            start: WallTime {
                sec: get_u32(b, isoch_field::START_SEC),
                usec: get_u32(b, isoch_field::START_USEC),
            },
            prev_frame_id: get_u32(b, isoch_field::PREV_FRAME_ID),
            frame_id: get_u32(b, isoch_field::FRAME_ID),
            burst_size: Bytes(u64::from(get_u32(b, isoch_field::BURST_SIZE))),
            remaining: Bytes(u64::from(get_u32(b, isoch_field::REMAINING))),
        }
    }

    fn emit(&self, b: &mut [u8]) {
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        set_u32(
            b,
            isoch_field::BURST_PERIOD_US,
            sat(self.burst_period.as_micros() as u64),
        );
        set_u32(b, isoch_field::START_SEC, self.start.sec);
        set_u32(b, isoch_field::START_USEC, self.start.usec);
        set_u32(b, isoch_field::PREV_FRAME_ID, self.prev_frame_id);
        set_u32(b, isoch_field::FRAME_ID, self.frame_id);
        set_u32(b, isoch_field::BURST_SIZE, sat(self.burst_size.0));
        set_u32(b, isoch_field::REMAINING, sat(self.remaining.0));
        set_u32(b, isoch_field::RESERVED, 0);
    }
}

view_struct!(
    /// A view of a UDP test datagram (client to server, or server to client in reverse mode).
    UdpDatagram
);

impl<T: AsRef<[u8]>> UdpDatagram<T> {
    /// Needs the 16-byte prefix; everything after it is optional.
    pub fn check_len(&self) -> Result<(), WireError> {
        need(self.buffer.as_ref(), PREFIX_LEN)
    }
    /// `id` (low word, as a signed 32-bit value for legacy peers).
    pub fn id(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ID)
    }
    /// `id2` (high word).
    pub fn id2(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ID2)
    }
    /// The 64-bit sequence number `id2:id` (use when `HEADER_SEQNO64B`).
    pub fn seqno64(&self) -> i64 {
        ((u64::from(self.id2()) << 32) | u64::from(self.id())) as i64
    }
    /// The sequence number: 64-bit if the datagram carries a header with
    /// `HEADER_SEQNO64B` or no header at all, otherwise `id` sign-extended.
    pub fn seqno(&self) -> i64 {
        match self.core() {
            Some(c) if !c.flags().contains(HeaderFlags::SEQNO64B) => i64::from(self.id() as i32),
            _ => self.seqno64(),
        }
    }
    /// True for the end-of-test datagram (negative sequence number).
    pub fn is_fin(&self) -> bool {
        self.seqno() < 0
    }
    /// Sender timestamp.
    pub fn timestamp(&self) -> WallTime {
        let b = self.buffer.as_ref();
        WallTime {
            sec: get_u32(b, field::TV_SEC),
            usec: get_u32(b, field::TV_USEC),
        }
    }
    /// The repeated test header core, if the datagram is long enough.
    pub fn core(&self) -> Option<ClientHeader<&[u8]>> {
        self.buffer
            .as_ref()
            .get(field::CORE)
            .map(ClientHeader::new_unchecked)
    }
    /// The LEN field of the repeated header (76, 108 or 140), if present.
    pub fn advertised_len(&self) -> Option<usize> {
        self.core().and_then(|c| c.flags().len_field())
    }
    fn has_udptests(&self) -> bool {
        self.core().is_some_and(|c| {
            c.flags().contains(HeaderFlags::UDPTESTS)
                || c.flags().len_field().is_some_and(|l| l >= LEN_UDPTESTS)
        })
    }
    /// The isoch payload block, if present (`HEADER_UDPTESTS` and long enough).
    pub fn isoch(&self) -> Option<&[u8]> {
        if self.has_udptests() {
            self.buffer.as_ref().get(field::ISOCH)
        } else {
            None
        }
    }
    /// The start-time block, if present.
    pub fn start_fq(&self) -> Option<&[u8]> {
        if self.has_udptests() {
            self.buffer.as_ref().get(field::START_FQ)
        } else {
            None
        }
    }
    /// The isoch settings block, if LEN announces it and the datagram holds it.
    pub fn isoch_settings(&self) -> Option<&[u8]> {
        if self
            .advertised_len()
            .is_some_and(|l| l >= LEN_ISOCH_SETTINGS)
        {
            self.buffer.as_ref().get(field::ISOCH_SETTINGS)
        } else {
            None
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpDatagram<T> {
    /// Sets the 64-bit sequence number (`id`, `id2`). Per-packet hot path.
    pub fn set_seqno(&mut self, seqno: i64) {
        let b = self.buffer.as_mut();
        set_u32(b, field::ID, seqno as u32);
        set_u32(b, field::ID2, ((seqno as u64) >> 32) as u32);
    }
    /// Sets the sender timestamp. Per-packet hot path.
    pub fn set_timestamp(&mut self, t: WallTime) {
        let b = self.buffer.as_mut();
        set_u32(b, field::TV_SEC, t.sec);
        set_u32(b, field::TV_USEC, t.usec);
    }
    /// Writes the isoch payload block (for isochronous senders updating frames).
    pub fn set_isoch(&mut self, isoch: &IsochPayloadRepr) {
        if let Some(dst) = self.buffer.as_mut().get_mut(field::ISOCH) {
            isoch.emit(dst);
        }
    }
}

/// The blocks `HEADER_UDPTESTS` adds after the core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct UdpTestsRepr {
    /// The isoch payload (zeros unless isochronous).
    pub isoch: IsochPayloadRepr,
    /// The start time (trip-times reference) and fq rate; `None` if the
    /// datagram was too short to carry it.
    pub start_fq: Option<StartFqRepr>,
    /// Isoch settings (LEN 140). When set, `start_fq` is written too (zeros if `None`).
    pub isoch_settings: Option<IsochSettingsRepr>,
}

/// The repeated header of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpHeaderRepr {
    /// The core; `flags` here excludes the layout bits, `UDPTESTS` is set on
    /// emit when `tests` is present.
    pub core: ClientHeaderRepr,
    /// Present with `HEADER_UDPTESTS` (trip-times, isochronous, fq-rate, ...).
    pub tests: Option<UdpTestsRepr>,
}

/// A parsed UDP datagram header (the payload after it is opaque).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpDatagramRepr {
    /// Sequence number (1, 2, ...; negative for the FIN).
    pub seqno: i64,
    /// Sender timestamp.
    pub timestamp: WallTime,
    /// The repeated test header, if the datagram is long enough to carry it.
    pub header: Option<UdpHeaderRepr>,
}

impl UdpDatagramRepr {
    /// Parses the prefix and whatever header blocks the datagram holds.
    pub fn parse<T: AsRef<[u8]>>(v: &UdpDatagram<T>) -> Result<UdpDatagramRepr, WireError> {
        v.check_len()?;
        let header = match v.core() {
            None => None,
            Some(core) => {
                let core = ClientHeaderRepr::parse(&core)?;
                let tests = v.isoch().map(|iso| UdpTestsRepr {
                    isoch: IsochPayloadRepr::parse(iso),
                    start_fq: v.start_fq().and_then(|b| StartFqRepr::parse(b).ok()),
                    isoch_settings: v
                        .isoch_settings()
                        .and_then(|b| IsochSettingsRepr::parse(b).ok()),
                });
                Some(UdpHeaderRepr {
                    core: UdpHeaderRepr::strip(core),
                    tests,
                })
            }
        };
        Ok(UdpDatagramRepr {
            seqno: v.seqno(),
            timestamp: v.timestamp(),
            header,
        })
    }

    /// True for the end-of-test datagram.
    pub fn is_fin(&self) -> bool {
        self.seqno < 0
    }

    /// The LEN value `emit` writes: 76, 108 or 140 (0 without a header).
    pub fn advertised_len(&self) -> usize {
        match &self.header {
            None => 0,
            Some(UdpHeaderRepr { tests: None, .. }) => LEN_PLAIN,
            Some(UdpHeaderRepr { tests: Some(t), .. }) => {
                if t.isoch_settings.is_some() {
                    LEN_ISOCH_SETTINGS
                } else {
                    LEN_UDPTESTS
                }
            }
        }
    }

    /// Bytes `emit` writes (the datagram may be longer; the rest is payload).
    pub fn buffer_len(&self) -> usize {
        match &self.header {
            None => PREFIX_LEN,
            Some(UdpHeaderRepr { tests: None, .. }) => LEN_PLAIN,
            Some(UdpHeaderRepr { tests: Some(t), .. }) => {
                if t.isoch_settings.is_some() {
                    field::ISOCH_SETTINGS.end
                } else if t.start_fq.is_some() {
                    field::START_FQ.end
                } else {
                    field::ISOCH.end
                }
            }
        }
    }

    /// Writes the prefix and header blocks into the first `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut UdpDatagram<T>) {
        v.set_seqno(self.seqno);
        v.set_timestamp(self.timestamp);
        let len = self.advertised_len();
        let Some(h) = &self.header else { return };
        let b = v.buffer.as_mut();
        let mut core = h.core;
        core.flags = if h.tests.is_some() {
            core.flags.with(HeaderFlags::UDPTESTS)
        } else {
            core.flags.without(HeaderFlags::UDPTESTS)
        };
        if let Some(dst) = b.get_mut(field::CORE) {
            core.emit_with_layout(&mut ClientHeader::new_unchecked(dst), len, false);
        }
        let Some(t) = &h.tests else { return };
        if let Some(dst) = b.get_mut(field::ISOCH) {
            t.isoch.emit(dst);
        }
        if (t.start_fq.is_some() || t.isoch_settings.is_some())
            && let Some(dst) = b.get_mut(field::START_FQ)
        {
            t.start_fq.unwrap_or_default().emit(dst);
        }
        if let (Some(s), Some(dst)) = (t.isoch_settings, b.get_mut(field::ISOCH_SETTINGS)) {
            s.emit(dst);
        }
    }
}

impl UdpHeaderRepr {
    /// `UDPTESTS` is layout here (it says the blocks follow), so the Repr keeps
    /// it in `tests` only.
    fn strip(mut core: ClientHeaderRepr) -> ClientHeaderRepr {
        core.flags = core.flags.without(HeaderFlags::UDPTESTS);
        core
    }

    /// A plain 2.1.8-style UDP header: `EXTEND | SEQNO64B`, with `rate`.
    pub fn new(core: ClientHeaderRepr) -> UdpHeaderRepr {
        let mut core = core;
        core.flags = core.flags.with(HeaderFlags::EXTEND | HeaderFlags::SEQNO64B);
        UdpHeaderRepr { core, tests: None }
    }

    /// True if the sender asked for trip-times.
    pub fn trip_times(&self) -> bool {
        self.core.upper_flags.contains(UpperFlags::TRIPTIME)
    }
}

/// Offset helper for tests and other crates: a core field at its UDP position.
pub const fn core_field(f: Field) -> Field {
    at(PREFIX_LEN, f)
}
