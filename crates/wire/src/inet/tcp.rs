//! The TCP header (RFC 9293 §3.1), options included in its length.

use crate::WireError;
use crate::checksum;
use crate::error::need_header;
use crate::field::{Field, get_u8, get_u16, get_u32, set_u8, set_u16, set_u32};
use crate::view::view_struct;

/// Field map.
pub mod field {
    use super::Field;
    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Sequence number.
    pub const SEQ_NUM: Field = 4..8;
    /// Acknowledgment number.
    pub const ACK_NUM: Field = 8..12;
    /// Data offset (high nibble, in 32-bit words) and the reserved bits
    /// (low nibble; its lowest bit was ECN-nonce NS, RFC 3540, now AccECN AE).
    pub const DATA_OFF: usize = 12;
    /// Control bits: CWR, ECE, URG, ACK, PSH, RST, SYN, FIN.
    pub const FLAGS: usize = 13;
    /// Receive window.
    pub const WINDOW: Field = 14..16;
    /// Checksum.
    pub const CHECKSUM: Field = 16..18;
    /// Urgent pointer.
    pub const URGENT: Field = 18..20;
}

/// The header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// Control bit FIN.
pub const FIN: u8 = 0x01;
/// Control bit SYN.
pub const SYN: u8 = 0x02;
/// Control bit RST.
pub const RST: u8 = 0x04;
/// Control bit PSH.
pub const PSH: u8 = 0x08;
/// Control bit ACK.
pub const ACK: u8 = 0x10;
/// Control bit URG.
pub const URG: u8 = 0x20;
/// Control bit ECE (RFC 3168 §6.1).
pub const ECE: u8 = 0x40;
/// Control bit CWR (RFC 3168 §6.1).
pub const CWR: u8 = 0x80;

view_struct!(
    /// A view of a TCP segment (header, then data).
    TcpPacket
);

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Needs the fixed header, a data offset of at least 5 words, and the
    /// whole header it announces.
    pub fn check_len(&self) -> Result<(), WireError> {
        need_header(
            self.buffer.as_ref(),
            MIN_HEADER_LEN,
            self.header_len(),
            "tcp.data_offset",
        )
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }
    /// Sequence number (wraps: compare with `wrapping_sub`).
    pub fn seq_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }
    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ACK_NUM)
    }
    /// Header length in bytes (data offset x 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(get_u8(self.buffer.as_ref(), field::DATA_OFF) >> 4) * 4
    }
    /// The four bits after the data offset (reserved, and AccECN's AE).
    pub fn reserved(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::DATA_OFF) & 0x0f
    }
    /// The control bits ([`FIN`] ... [`CWR`]).
    pub fn flags(&self) -> u8 {
        get_u8(self.buffer.as_ref(), field::FLAGS)
    }
    /// Receive window (unscaled).
    pub fn window(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WINDOW)
    }
    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Urgent pointer.
    pub fn urgent_ptr(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT)
    }
    /// The options (and padding) between the fixed header and the data
    /// (clamped to the buffer).
    pub fn options(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = self.header_len().min(b.len());
        b.get(MIN_HEADER_LEN..end).unwrap_or_default()
    }
    /// The data after the header.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(self.header_len()..).unwrap_or_default()
    }
    /// True when the checksum verifies against `pseudo`, the IP layer's
    /// pseudo-header sum for this segment's whole length.
    pub fn verify_checksum(&self, pseudo: u64) -> bool {
        checksum::fold(checksum::add(pseudo, self.buffer.as_ref())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::SEQ_NUM, v);
    }
    /// Sets the control bits.
    pub fn set_flags(&mut self, v: u8) {
        set_u8(self.buffer.as_mut(), field::FLAGS, v);
    }
    /// Sets the checksum field (e.g. to a partial sum for checksum offload).
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    /// Computes the checksum over the whole buffer (header and data) and
    /// `pseudo`, the IP layer's pseudo-header sum, and writes it.
    pub fn fill_checksum(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let sum = checksum::add(pseudo, self.buffer.as_ref());
        self.set_checksum(!checksum::fold(sum));
    }
}
