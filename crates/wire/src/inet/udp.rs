//! The UDP header (RFC 768). Not to be confused with [`crate::udp`], the
//! iperf 2 payload a UDP test carries.

use crate::WireError;
use crate::error::need;
use crate::field::{Field, get_u16, set_u16};
use crate::view::view_struct;

/// Field map.
pub mod field {
    use super::Field;
    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Length in bytes, header included.
    pub const LENGTH: Field = 4..6;
    /// Checksum (0: none, IPv4 only; a computed 0 is sent as 0xffff).
    pub const CHECKSUM: Field = 6..8;
}

/// The header.
pub const HEADER_LEN: usize = 8;

view_struct!(
    /// A view of a UDP datagram (header, then data).
    UdpPacket
);

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Needs the 8-byte header.
    pub fn check_len(&self) -> Result<(), WireError> {
        need(self.buffer.as_ref(), HEADER_LEN)
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }
    /// Length field.
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }
    /// True when the length field is 0 (never valid: the header alone is 8).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// The data after the header.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or_default()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
}
