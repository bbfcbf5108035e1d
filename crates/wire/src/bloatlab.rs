//! bloatlab's own extension, negotiated inside iperf 2's test header so iperf 2
//! peers are unaffected.
//!
//! * A bloatlab client writes [`BLOATLAB_EXT_MAGIC`] ("BLAB") into
//!   `client_hdrext.type` and [`BLOATLAB_EXT_VERSION`] into
//!   `client_hdrext.length` (both 0 and unused in 2.1.8; a real `iperf -s`
//!   2.1.8 was verified to run TCP and UDP tests with these values exactly as
//!   with zeros, see `docs/wire.md`).
//! * A bloatlab server that sees the magic sends, at the end of the test, one
//!   report frame: `"BLXR" | version u32 | payload_len u32 | payload`, the
//!   payload being UTF-8 JSON of at most [`MAX_REPORT_PAYLOAD`] bytes. This
//!   module only frames bytes; the JSON is defined by `bloatlab-metrics`.

use crate::WireError;
use crate::error::need;
use crate::field::{Field, get_u32, set_u32};
use crate::view::view_struct;

/// `client_hdrext.type` of a bloatlab client: ASCII "BLAB".
pub const BLOATLAB_EXT_MAGIC: u32 = u32::from_be_bytes(*b"BLAB");
/// The extension version a bloatlab client announces in `client_hdrext.length`.
pub const BLOATLAB_EXT_VERSION: u32 = 1;

/// Bits of `client_hdrext.length` that carry the extension version; the
/// bits above carry [`BlabExt::report_interval`].
pub const BLOATLAB_EXT_VERSION_MASK: u32 = 0xff;
/// Largest [`BlabExt::report_interval`] in milliseconds (24 bits, about 4.7 h).
pub const MAX_REPORT_INTERVAL_MS: u32 = 0x00ff_ffff;

/// What a bloatlab client puts into `client_hdrext.length` (all bits
/// unused by iperf 2.1.8): `version | interval_ms << 8`.
///
/// `report_interval` asks a bloatlab server to measure its server-side
/// intervals (the ones it sends back in the report frame) at this period,
/// even when the server itself runs without `-i`. 0 = no request (what an
/// older bloatlab client sends, so the field stays compatible).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlabExt {
    /// Extension version (low 8 bits).
    pub version: u8,
    /// Requested server-side report interval; millisecond resolution.
    pub report_interval: Option<core::time::Duration>,
}

impl BlabExt {
    /// Decodes `client_hdrext.length` of a header marked "BLAB".
    pub fn from_length(length: u32) -> BlabExt {
        let ms = length >> 8;
        BlabExt {
            version: (length & BLOATLAB_EXT_VERSION_MASK) as u8,
            report_interval: (ms > 0).then(|| core::time::Duration::from_millis(u64::from(ms))),
        }
    }

    /// Encodes into `client_hdrext.length`. The interval is rounded to the
    /// nearest millisecond, at least 1 ms and at most
    /// [`MAX_REPORT_INTERVAL_MS`].
    pub fn to_length(&self) -> u32 {
        let ms = self.report_interval.map_or(0, |d| {
            let ms = (d.as_micros() + 500) / 1000;
            u32::try_from(ms)
                .unwrap_or(u32::MAX)
                .clamp(1, MAX_REPORT_INTERVAL_MS)
        });
        u32::from(self.version) | (ms << 8)
    }
}

/// Report frame magic: ASCII "BLXR".
pub const REPORT_MAGIC: u32 = u32::from_be_bytes(*b"BLXR");
/// Report frame version written by this crate.
pub const REPORT_FRAME_VERSION: u32 = 1;
/// Largest payload accepted (1 MiB).
pub const MAX_REPORT_PAYLOAD: usize = 1 << 20;
/// Frame header length.
pub const REPORT_HEADER_LEN: usize = 12;

/// Field map.
pub mod field {
    use super::Field;
    /// "BLXR".
    pub const MAGIC: Field = 0..4;
    /// Frame version.
    pub const VERSION: Field = 4..8;
    /// Payload length in bytes.
    pub const PAYLOAD_LEN: Field = 8..12;
    /// Start of the payload.
    pub const PAYLOAD: usize = 12;
}

view_struct!(
    /// A view of a report frame.
    ReportFrame
);

impl<T: AsRef<[u8]>> ReportFrame<T> {
    /// Checks magic, the payload length limit, and that the whole frame is present.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        let total = frame_len(b)?;
        need(b, total)
    }
    /// Frame version.
    pub fn version(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VERSION)
    }
    /// Announced payload length.
    pub fn payload_len(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }
    /// The payload bytes (clamped to the buffer).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = field::PAYLOAD
            .saturating_add(self.payload_len() as usize)
            .min(b.len());
        b.get(field::PAYLOAD..end).unwrap_or(&[])
    }
}

/// Total frame length from its header (validating magic and length); needs 12 bytes.
fn frame_len(b: &[u8]) -> Result<usize, WireError> {
    if b.len() >= 4 {
        let magic = get_u32(b, field::MAGIC);
        if magic != REPORT_MAGIC {
            return Err(WireError::BadMagic {
                expected: REPORT_MAGIC,
                got: magic,
            });
        }
    }
    need(b, REPORT_HEADER_LEN)?;
    let len = get_u32(b, field::PAYLOAD_LEN) as usize;
    if len > MAX_REPORT_PAYLOAD {
        return Err(WireError::BadLength {
            field: "report.payload_len",
            value: len as u64,
        });
    }
    Ok(REPORT_HEADER_LEN + len)
}

/// Streaming helper: how many more bytes to append to `buf` (the bytes of the
/// frame received so far) before it holds a complete frame. `Ok(0)` = complete.
/// Reading exactly this many bytes in a loop never over-reads past the frame.
/// Fails as soon as the magic or the length is wrong.
pub fn report_frame_bytes_needed(buf: &[u8]) -> Result<usize, WireError> {
    if buf.len() < REPORT_HEADER_LEN {
        // Validate a partial magic early so garbage is rejected before 12 bytes arrive.
        let have = buf.len().min(4);
        if buf[..have] != REPORT_MAGIC.to_be_bytes()[..have] {
            let mut m = [0u8; 4];
            m[..have].copy_from_slice(&buf[..have]);
            return Err(WireError::BadMagic {
                expected: REPORT_MAGIC,
                got: u32::from_be_bytes(m),
            });
        }
        return Ok(REPORT_HEADER_LEN - buf.len());
    }
    Ok(frame_len(buf)?.saturating_sub(buf.len()))
}

/// A parsed report frame (borrows the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReportFrameRepr<'a> {
    /// Frame version.
    pub version: u32,
    /// UTF-8 JSON (not interpreted here).
    pub payload: &'a str,
}

impl<'a> ReportFrameRepr<'a> {
    /// A version-1 frame around `payload`; fails if it exceeds 1 MiB.
    pub fn new(payload: &'a str) -> Result<ReportFrameRepr<'a>, WireError> {
        if payload.len() > MAX_REPORT_PAYLOAD {
            return Err(WireError::BadLength {
                field: "report.payload_len",
                value: payload.len() as u64,
            });
        }
        Ok(ReportFrameRepr {
            version: REPORT_FRAME_VERSION,
            payload,
        })
    }

    /// Parses a complete frame; the payload must be UTF-8.
    pub fn parse(v: &ReportFrame<&'a [u8]>) -> Result<ReportFrameRepr<'a>, WireError> {
        v.check_len()?;
        let b: &'a [u8] = v.buffer;
        let end = field::PAYLOAD
            .saturating_add(v.payload_len() as usize)
            .min(b.len());
        let payload =
            std::str::from_utf8(b.get(field::PAYLOAD..end).unwrap_or(&[])).map_err(|e| {
                WireError::NotUtf8 {
                    valid_up_to: e.valid_up_to(),
                }
            })?;
        Ok(ReportFrameRepr {
            version: v.version(),
            payload,
        })
    }

    /// 12 + payload length.
    pub fn buffer_len(&self) -> usize {
        REPORT_HEADER_LEN + self.payload.len()
    }

    /// Writes the frame into the first `buffer_len()` bytes (a shorter buffer
    /// gets a truncated frame, never a panic).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut ReportFrame<T>) {
        let b = v.buffer.as_mut();
        set_u32(b, field::MAGIC, REPORT_MAGIC);
        set_u32(b, field::VERSION, self.version);
        set_u32(
            b,
            field::PAYLOAD_LEN,
            u32::try_from(self.payload.len()).unwrap_or(u32::MAX),
        );
        let end = self.buffer_len().min(b.len());
        if field::PAYLOAD < end {
            b[field::PAYLOAD..end]
                .copy_from_slice(&self.payload.as_bytes()[..end - field::PAYLOAD]);
        }
    }

    /// The frame as a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.buffer_len()];
        self.emit(&mut ReportFrame::new_unchecked(&mut out[..]));
        out
    }
}
