//! TUN offloads for `lab up --offload`: the hosts hand the emulator TCP
//! super-packets (TSO) and receive coalesced ones (like a NIC's GRO), while
//! the emulated link still queues, shapes, marks and drops wire-sized
//! segments.
//!
//! Why: without offloads every 1500-byte packet costs one `read` and one
//! `write`, and each `write` runs the receiving host's TCP stack in the
//! emulator's thread; on a 2-vCPU machine that caps the lab below 1 Gbit/s
//! (emulation.md 4.3). With `IFF_VNET_HDR` one read brings up to 64 KB and
//! one write delivers every back-to-back segment that is due at once.
//!
//! Sans-IO: [`split`] turns one TUN read (a `virtio_net_hdr` followed by a
//! packet) into wire packets with valid checksums; [`Coalescer`] turns a run
//! of released wire packets into TUN writes. The frame format is
//! `struct virtio_net_hdr` of the virtio 1.x spec, section 5.1.6 "Device
//! Operation" (legacy layout, 10 bytes, native byte order, which is what a
//! TUN uses unless TUNSETVNETLE/BE say otherwise).

mod coalesce;
use bloatlab_wire::checksum as csum;
mod split;

pub use coalesce::{Coalescer, Frame};
pub use split::split;

/// Size of the legacy `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;
/// Largest frame a TUN read can return with offloads: a 64 KB IPv4
/// super-packet (an IPv6 one: 64 KB of payload after its 40-byte header)
/// plus the header.
pub const MAX_FRAME: usize = VNET_HDR_LEN + 40 + 65_535;

/// `flags`: the checksum at `csum_start + csum_offset` still has to be
/// completed over `[csum_start, end)`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `gso_type` values.
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_TCPV6: u8 = 4;
/// Flag bit of `gso_type`: the super-packet carries CWR (TSO_ECN).
pub const GSO_ECN: u8 = 0x80;

/// The fields of `struct virtio_net_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHeader {
    pub flags: u8,
    pub gso_type: u8,
    /// Length of the headers to copy into each segment (a hint only).
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS).
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHeader {
    /// Reads the header at the start of `frame`.
    pub fn parse(frame: &[u8]) -> Result<VnetHeader, OffloadError> {
        let b = frame.get(..VNET_HDR_LEN).ok_or(OffloadError::Truncated {
            what: "virtio_net_hdr",
            len: frame.len(),
        })?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Ok(VnetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Writes the header into the first [`VNET_HDR_LEN`] bytes of `out`.
    pub fn write(&self, out: &mut [u8]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        for (i, v) in [
            self.hdr_len,
            self.gso_size,
            self.csum_start,
            self.csum_offset,
        ]
        .into_iter()
        .enumerate()
        {
            out[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_ne_bytes());
        }
    }
}

/// Why a frame read from a TUN could not be turned into wire packets. The
/// driver counts these as receive errors and drops the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OffloadError {
    #[error("{what} truncated: {len} bytes")]
    Truncated { what: &'static str, len: usize },
    #[error("checksum offset {at} is outside the {len}-byte packet")]
    ChecksumOutside { at: usize, len: usize },
    #[error("GSO type {0:#x} was not offered to the kernel")]
    UnsupportedGso(u8),
    #[error("GSO super-packet with a segment size of 0")]
    ZeroSegmentSize,
    #[error("GSO super-packet is not IPv4/TCP")]
    NotTcpV4,
    #[error("GSO super-packet is not IPv6/TCP without extension headers")]
    NotTcpV6,
}

#[cfg(test)]
pub(crate) mod testpkt;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_endian = "little")]
    fn header_golden_bytes() {
        // What a TUN hands over for a 3-segment TSO packet from a host
        // with TUN_F_CSUM|TUN_F_TSO4: NEEDS_CSUM, TCPV4, hdr_len 66
        // (20 + 32 + 14 rounded by the kernel, only a hint), MSS 1448,
        // checksum at 20 + 16.
        let golden = [0x01, 0x01, 0x42, 0x00, 0xa8, 0x05, 0x14, 0x00, 0x10, 0x00];
        let h = VnetHeader::parse(&golden).unwrap();
        assert_eq!(
            h,
            VnetHeader {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                hdr_len: 66,
                gso_size: 1448,
                csum_start: 20,
                csum_offset: 16,
            }
        );
        let mut out = [0xffu8; VNET_HDR_LEN];
        h.write(&mut out);
        assert_eq!(out, golden);
    }

    #[test]
    fn short_header_is_an_error() {
        assert_eq!(
            VnetHeader::parse(&[0; 9]),
            Err(OffloadError::Truncated {
                what: "virtio_net_hdr",
                len: 9
            })
        );
    }
}
