//! `client_hdr_ack`: the server's reply to a test header (README 5.4), 28 bytes,
//! or 52 with trip-times (the client start time echoed, the server's accept
//! time and its send time).
//!
//! A 2.1.8 server sends it when `(EXTEND && !VERSION2) || V2PEERDETECT`; a
//! 2.1.8 client only reads it with `-X`.

use crate::WireError;
use crate::error::need;
use crate::field::{Field, get_u32, set_u32};
use crate::time::WallTime;
use crate::version::PeerVersion;
use crate::view::view_struct;

/// Field map.
pub mod field {
    use super::Field;
    /// `typelen.type` = [`super::CLIENT_HDR_ACK_TYPE`].
    pub const TYPE: Field = 0..4;
    /// `typelen.length`: 28 or 52.
    pub const LENGTH: Field = 4..8;
    /// `flags` (0).
    pub const FLAGS: Field = 8..12;
    /// Server `version_u`.
    pub const VERSION_U: Field = 12..16;
    /// Server `version_l`.
    pub const VERSION_L: Field = 16..20;
    /// `reserved1`.
    pub const RESERVED1: Field = 20..24;
    /// `reserved2`.
    pub const RESERVED2: Field = 24..28;
    /// Client start time echoed from the test header.
    pub const SENT_SEC: Field = 28..32;
    /// .. microseconds.
    pub const SENT_USEC: Field = 32..36;
    /// Server `accept()` time.
    pub const SENTRX_SEC: Field = 36..40;
    /// .. microseconds.
    pub const SENTRX_USEC: Field = 40..44;
    /// Server time when the ack is sent.
    pub const ACK_SEC: Field = 44..48;
    /// .. microseconds.
    pub const ACK_USEC: Field = 48..52;
}

/// `CLIENTHDRACK` message type.
pub const CLIENT_HDR_ACK_TYPE: u32 = 2;
/// Length without timestamps.
pub const ACK_LEN: usize = 28;
/// Length with trip-times timestamps.
pub const ACK_LEN_WITH_TIMES: usize = 52;

view_struct!(
    /// A view of a `client_hdr_ack`.
    ClientHdrAck
);

/// Streaming helper: bytes still to read before `buf` holds a whole ack
/// (8 bytes first, then the length they announce). `Ok(0)` = complete.
pub fn bytes_needed(buf: &[u8]) -> Result<usize, WireError> {
    if buf.len() < 8 {
        return Ok(8 - buf.len());
    }
    match ClientHdrAck::new_unchecked(buf).check_len() {
        Ok(()) => Ok(0),
        Err(WireError::Truncated { needed, got }) => Ok(needed - got),
        Err(e) => Err(e),
    }
}

impl<T: AsRef<[u8]>> ClientHdrAck<T> {
    /// Needs 8 bytes, a length field of 28 or 52, and that many bytes.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        need(b, 8)?;
        let len = self.length();
        if len != ACK_LEN as u32 && len != ACK_LEN_WITH_TIMES as u32 {
            return Err(WireError::BadLength {
                field: "client_hdr_ack.length",
                value: u64::from(len),
            });
        }
        need(b, len as usize)
    }

    /// Message type.
    pub fn msg_type(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::TYPE)
    }
    /// Length field.
    pub fn length(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::LENGTH)
    }
    /// Flags.
    pub fn flags(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::FLAGS)
    }
    /// Server version.
    pub fn version(&self) -> PeerVersion {
        let b = self.buffer.as_ref();
        PeerVersion::from_words(get_u32(b, field::VERSION_U), get_u32(b, field::VERSION_L))
    }
    fn time(&self, sec: Field, usec: Field) -> WallTime {
        let b = self.buffer.as_ref();
        WallTime {
            sec: get_u32(b, sec),
            usec: get_u32(b, usec),
        }
    }
}

/// The trip-times part of the ack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AckTimes {
    /// The client's start time, echoed.
    pub sent: WallTime,
    /// When the server accepted the connection (before the client's start
    /// timestamp, so RTTs computed from it can be negative; see README 5.4).
    pub sent_rx: WallTime,
    /// When the server sent the ack.
    pub ack: WallTime,
}

/// A parsed `client_hdr_ack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientHdrAckRepr {
    /// Flags (0 in 2.1.8).
    pub flags: u32,
    /// The server's version.
    pub version: PeerVersion,
    /// Present in the 52-byte form.
    pub times: Option<AckTimes>,
}

impl ClientHdrAckRepr {
    /// Parses; the type must be `CLIENTHDRACK`.
    pub fn parse<T: AsRef<[u8]>>(v: &ClientHdrAck<T>) -> Result<ClientHdrAckRepr, WireError> {
        v.check_len()?;
        if v.msg_type() != CLIENT_HDR_ACK_TYPE {
            return Err(WireError::BadValue {
                field: "client_hdr_ack.type",
                value: u64::from(v.msg_type()),
            });
        }
        let times = (v.length() as usize == ACK_LEN_WITH_TIMES).then(|| AckTimes {
            sent: v.time(field::SENT_SEC, field::SENT_USEC),
            sent_rx: v.time(field::SENTRX_SEC, field::SENTRX_USEC),
            ack: v.time(field::ACK_SEC, field::ACK_USEC),
        });
        Ok(ClientHdrAckRepr {
            flags: v.flags(),
            version: v.version(),
            times,
        })
    }

    /// 28, or 52 with times.
    pub fn buffer_len(&self) -> usize {
        if self.times.is_some() {
            ACK_LEN_WITH_TIMES
        } else {
            ACK_LEN
        }
    }

    /// Writes the ack into the first `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut ClientHdrAck<T>) {
        let (vu, vl) = self.version.to_words();
        let b = v.buffer.as_mut();
        set_u32(b, field::TYPE, CLIENT_HDR_ACK_TYPE);
        set_u32(b, field::LENGTH, self.buffer_len() as u32);
        set_u32(b, field::FLAGS, self.flags);
        set_u32(b, field::VERSION_U, vu);
        set_u32(b, field::VERSION_L, vl);
        set_u32(b, field::RESERVED1, 0);
        set_u32(b, field::RESERVED2, 0);
        if let Some(t) = self.times {
            for (w, (s, u)) in [
                (t.sent, (field::SENT_SEC, field::SENT_USEC)),
                (t.sent_rx, (field::SENTRX_SEC, field::SENTRX_USEC)),
                (t.ack, (field::ACK_SEC, field::ACK_USEC)),
            ] {
                set_u32(b, s, w.sec);
                set_u32(b, u, w.usec);
            }
        }
    }
}
