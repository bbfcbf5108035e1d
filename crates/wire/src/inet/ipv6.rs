//! The IPv6 fixed header (RFC 8200 §3). Extension headers are not followed
//! here: the payload is whatever the next header field names.

use crate::WireError;
use crate::checksum;
use crate::error::need;
use crate::field::{Field, get_u8, get_u16, get_u32, set_u16, set_u32};
use crate::view::view_struct;
use std::net::Ipv6Addr;

/// Field map.
pub mod field {
    use super::Field;
    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_TC_FLOW: Field = 0..4;
    /// Payload length in bytes (extension headers included, fixed header not).
    pub const PAYLOAD_LEN: Field = 4..6;
    /// Next header (the protocol of the payload without extension headers).
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC_ADDR: Field = 8..24;
    /// Destination address.
    pub const DST_ADDR: Field = 24..40;
}

/// The fixed header.
pub const HEADER_LEN: usize = 40;

view_struct!(
    /// A view of an IPv6 packet (fixed header, then payload).
    Ipv6Packet
);

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Needs the 40-byte fixed header.
    pub fn check_len(&self) -> Result<(), WireError> {
        need(self.buffer.as_ref(), HEADER_LEN)
    }

    fn word0(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }
    /// The version nibble (6 for a packet this view fits).
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }
    /// Traffic class (DSCP and ECN, RFC 8200 §7 and RFC 3168 §5).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// The two ECN bits; [`super::ECN_CE`] is a CE mark.
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0b11
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }
    /// Payload length in bytes.
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::NEXT_HEADER)
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::HOP_LIMIT)
    }
    /// Source address (unspecified when the buffer is short).
    pub fn src_addr(&self) -> Ipv6Addr {
        addr(self.buffer.as_ref(), field::SRC_ADDR)
    }
    /// Destination address (unspecified when the buffer is short).
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(self.buffer.as_ref(), field::DST_ADDR)
    }
    /// Everything after the fixed header.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or_default()
    }
    /// The pseudo-header of RFC 8200 §8.1 (addresses, the upper-layer
    /// length `l4_len` in bytes and `next_header`) as a running sum for
    /// [`checksum::add`].
    pub fn pseudo_header_sum(&self, next_header: u8, l4_len: usize) -> u64 {
        let b = self.buffer.as_ref();
        let addrs = b
            .get(field::SRC_ADDR.start..field::DST_ADDR.end)
            .unwrap_or_default();
        checksum::add(0, addrs) + u64::from(next_header) + l4_len as u64
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the traffic class (DSCP and ECN), keeping the version and flow label.
    pub fn set_traffic_class(&mut self, v: u8) {
        let w = (self.word0() & !0x0ff0_0000) | (u32::from(v) << 20);
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }
    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, v);
    }
    /// Everything after the fixed header, to edit.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or_default()
    }
}

fn addr(b: &[u8], f: Field) -> Ipv6Addr {
    b.get(f)
        .and_then(|s| <[u8; 16]>::try_from(s).ok())
        .map_or(Ipv6Addr::UNSPECIFIED, Ipv6Addr::from)
}
