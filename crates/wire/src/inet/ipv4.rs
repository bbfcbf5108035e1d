//! The IPv4 header (RFC 791 §3.1), options included in its length.

use crate::WireError;
use crate::checksum;
use crate::error::need_header;
use crate::field::{Field, get_u8, get_u16, get_u32, set_u8, set_u16};
use crate::view::view_struct;
use std::net::Ipv4Addr;

/// Field map.
pub mod field {
    use super::Field;
    /// Version (high nibble) and IHL, the header length in 32-bit words.
    pub const VER_IHL: usize = 0;
    /// DSCP (high six bits) and ECN (low two bits; RFC 3168 §5), the old TOS.
    pub const DSCP_ECN: usize = 1;
    /// Total length of the packet in bytes, header included.
    pub const TOTAL_LEN: Field = 2..4;
    /// Identification.
    pub const IDENT: Field = 4..6;
    /// Flags (reserved, DF, MF; the top three bits) and fragment offset.
    pub const FLG_OFF: Field = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol of the payload.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Field = 10..12;
    /// Source address.
    pub const SRC_ADDR: Field = 12..16;
    /// Destination address.
    pub const DST_ADDR: Field = 16..20;
}

/// The header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// `FLG_OFF` bit: don't fragment.
const DF: u16 = 0x4000;
/// `FLG_OFF` bit: more fragments.
const MF: u16 = 0x2000;

view_struct!(
    /// A view of an IPv4 packet (header, then payload).
    Ipv4Packet
);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Needs the fixed header, an IHL of at least 5 words, and the whole
    /// header it announces. The total length field is not checked against
    /// the buffer (a caller that cares compares [`Self::total_len`]).
    pub fn check_len(&self) -> Result<(), WireError> {
        need_header(
            self.buffer.as_ref(),
            MIN_HEADER_LEN,
            self.header_len(),
            "ipv4.ihl",
        )
    }

    /// The version nibble (4 for a packet this view fits).
    pub fn version(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::VER_IHL) >> 4
    }
    /// Header length in bytes (IHL x 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(get_u8(self.buffer.as_ref(), field::VER_IHL) & 0x0f) * 4
    }
    /// The DSCP and ECN byte (the old TOS).
    pub fn dscp_ecn(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::DSCP_ECN)
    }
    /// The two ECN bits (RFC 3168 §5); [`super::ECN_CE`] is a CE mark.
    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & 0b11
    }
    /// Total length in bytes.
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::TOTAL_LEN)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }
    /// The three flag bits (reserved, DF, MF) as the top bits of a byte's
    /// low three: `0b0000_0RDM`.
    pub fn flags(&self) -> u8 {
        (get_u16(self.buffer.as_ref(), field::FLG_OFF) >> 13) as u8
    }
    /// Don't fragment.
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & DF != 0
    }
    /// More fragments follow.
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & MF != 0
    }
    /// Fragment offset in 8-byte units (0 for an unfragmented packet or a
    /// first fragment).
    pub fn frag_offset(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::TTL)
    }
    /// Protocol of the payload ([`super::PROTO_TCP`], [`super::PROTO_UDP`], ...).
    pub fn protocol(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::PROTOCOL)
    }
    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(get_u32(self.buffer.as_ref(), field::SRC_ADDR))
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(get_u32(self.buffer.as_ref(), field::DST_ADDR))
    }
    /// The header, options included (clamped to the buffer).
    pub fn header(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[..self.header_len().min(b.len())]
    }
    /// Everything after the header: the transport header and its data
    /// (empty when the buffer ends inside the header).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(self.header_len()..).unwrap_or_default()
    }
    /// True when the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::of(self.header()) == 0
    }
    /// The pseudo-header of RFC 9293 §3.1 / RFC 768 (addresses, `protocol`
    /// and the transport length `l4_len` in bytes) as a running sum for
    /// [`checksum::add`].
    pub fn pseudo_header_sum(&self, protocol: u8, l4_len: usize) -> u64 {
        let b = self.buffer.as_ref();
        let addrs = b
            .get(field::SRC_ADDR.start..field::DST_ADDR.end)
            .unwrap_or_default();
        checksum::add(0, addrs) + u64::from(protocol) + l4_len as u64
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the DSCP and ECN byte (the header checksum is not updated).
    pub fn set_dscp_ecn(&mut self, v: u8) {
        set_u8(self.buffer.as_mut(), field::DSCP_ECN, v);
    }
    /// Sets the total length (the header checksum is not updated).
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::TOTAL_LEN, v);
    }
    /// Sets the identification (the header checksum is not updated).
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, v);
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    /// Computes the header checksum and writes it.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        let b = self.buffer.as_mut();
        let hl = hl.min(b.len());
        checksum::fix_ipv4_header(&mut b[..hl]);
    }
    /// Everything after the header, to edit.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        self.buffer.as_mut().get_mut(hl..).unwrap_or_default()
    }
}
