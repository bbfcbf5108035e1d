//! A zero-copy view of the IPv4/IPv6 header fields the emulator needs: addresses, the
//! transport protocol and ports (for 5-tuple flow hashing), and the ECN field.
//!
//! * IPv4: RFC 791 (header layout), RFC 3168 §5 (the ECN field in the old TOS byte),
//!   RFC 1624 (incremental checksum update, used when a packet is marked CE).
//! * IPv6: RFC 8200 (header and extension header chain), RFC 3168 (ECN in the traffic class).
//!
//! Every accessor checks lengths first; a packet that is too short or of an unknown version gives
//! an error, never a panic, and the emulator then puts it in a default flow.
//!
//! The fixed headers are read and written through `bloatlab_wire::inet`'s views (one field map
//! for the emulator and the lab's offloads); this module adds what flow identity needs on top:
//! the IPv6 extension header walk, fragments, and the ECN codepoint as a type.

use bloatlab_wire::WireError;
use bloatlab_wire::checksum;
use bloatlab_wire::inet::{self, ECN_CE, Ipv4Packet, Ipv6Packet, ipv4, ipv6};
use std::fmt;

/// The two-bit ECN field (RFC 3168 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ecn {
    /// 00: not ECN-capable.
    NotEct,
    /// 10: ECT(0).
    Ect0,
    /// 01: ECT(1).
    Ect1,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// Decodes the low two bits of a TOS / traffic-class byte.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b10 => Ecn::Ect0,
            0b01 => Ecn::Ect1,
            _ => Ecn::Ce,
        }
    }
}

/// Why a byte slice is not a usable IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Fewer bytes than the fixed header (or than the IPv4 IHL claims).
    #[error("packet of {len} bytes is shorter than its {need}-byte IP header")]
    Truncated {
        /// Bytes available.
        len: usize,
        /// Bytes the header needs.
        need: usize,
    },
    /// The version nibble is neither 4 nor 6.
    #[error("IP version {0} is neither 4 nor 6")]
    Version(u8),
    /// IPv4 IHL below 5 words.
    #[error("IPv4 header length {0} words is below the minimum of 5")]
    BadIhl(u8),
}

const IPV6_FIXED: usize = ipv6::HEADER_LEN;

impl From<WireError> for HeaderError {
    /// The wire views' length errors, in this module's terms.
    fn from(e: WireError) -> HeaderError {
        match e {
            WireError::Truncated { needed, got } => HeaderError::Truncated {
                len: got,
                need: needed,
            },
            WireError::BadLength { value, .. } => HeaderError::BadIhl(value as u8),
            // The IP views report nothing else; keep a truthful fallback all the same.
            _ => HeaderError::Truncated { len: 0, need: 1 },
        }
    }
}

/// A read-only view over an IP packet (no link-layer header).
#[derive(Clone, Copy)]
pub struct IpView<'a> {
    bytes: &'a [u8],
    version: u8,
    /// Offset of the transport header, if known (not for non-first fragments or unknown chains).
    l4: Option<(u8, usize)>,
}

impl fmt::Debug for IpView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IpView")
            .field("version", &self.version)
            .field("len", &self.bytes.len())
            .field("l4", &self.l4)
            .finish()
    }
}

impl<'a> IpView<'a> {
    /// Checks the version and header length; never panics.
    pub fn parse(bytes: &'a [u8]) -> Result<IpView<'a>, HeaderError> {
        let first = *bytes
            .first()
            .ok_or(HeaderError::Truncated { len: 0, need: 1 })?;
        match first >> 4 {
            4 => {
                let ip = Ipv4Packet::new_checked(bytes)?;
                // Only the first fragment (offset 0) carries the ports.
                let l4 = (ip.frag_offset() == 0).then_some((ip.protocol(), ip.header_len()));
                Ok(IpView {
                    bytes,
                    version: 4,
                    l4,
                })
            }
            6 => {
                Ipv6Packet::new_checked(bytes)?;
                Ok(IpView {
                    bytes,
                    version: 6,
                    l4: ipv6_transport(bytes),
                })
            }
            v => Err(HeaderError::Version(v)),
        }
    }

    /// 4 or 6.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The ECN field.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(tos_byte(self.bytes, self.version))
    }

    /// Source address bytes (4 or 16).
    pub fn src(&self) -> &'a [u8] {
        match self.version {
            4 => &self.bytes[ipv4::field::SRC_ADDR],
            _ => &self.bytes[ipv6::field::SRC_ADDR],
        }
    }

    /// Destination address bytes (4 or 16).
    pub fn dst(&self) -> &'a [u8] {
        match self.version {
            4 => &self.bytes[ipv4::field::DST_ADDR],
            _ => &self.bytes[ipv6::field::DST_ADDR],
        }
    }

    /// The transport protocol number, when the header chain could be followed.
    pub fn protocol(&self) -> Option<u8> {
        self.l4.map(|(p, _)| p)
    }

    /// Source and destination ports for TCP (6), UDP (17), UDP-Lite (136), SCTP (132) and
    /// DCCP (33), when the transport header is present.
    pub fn ports(&self) -> Option<(u16, u16)> {
        let (proto, off) = self.l4?;
        if !matches!(proto, 6 | 17 | 33 | 132 | 136) {
            return None;
        }
        inet::ports(self.bytes.get(off..)?)
    }
}

fn tos_byte(bytes: &[u8], version: u8) -> u8 {
    match version {
        4 => Ipv4Packet::new_unchecked(bytes).dscp_ecn(),
        // The traffic class straddles bytes 0 and 1 (the view shifts it out).
        _ => Ipv6Packet::new_unchecked(bytes).traffic_class(),
    }
}

/// Follows the IPv6 extension header chain (RFC 8200 §4) to the transport header.
/// Gives up (None) on a non-first fragment, an unknown header or a truncated chain.
fn ipv6_transport(bytes: &[u8]) -> Option<(u8, usize)> {
    let mut next = Ipv6Packet::new_unchecked(bytes).next_header();
    let mut off = IPV6_FIXED;
    // A bounded walk: a crafted packet cannot make us loop.
    for _ in 0..8 {
        match next {
            // Hop-by-hop, routing, destination options: length in 8-octet units, not counting the first 8.
            0 | 43 | 60 => {
                let h = bytes.get(off..off + 2)?;
                next = h[0];
                off += (usize::from(h[1]) + 1) * 8;
            }
            // Fragment header: fixed 8 bytes; only the first fragment has ports.
            44 => {
                let h = bytes.get(off..off + 8)?;
                let frag_off = u16::from_be_bytes([h[2], h[3]]) >> 3;
                if frag_off != 0 {
                    return None;
                }
                next = h[0];
                off += 8;
            }
            // Authentication header: length in 4-octet units, minus 2.
            51 => {
                let h = bytes.get(off..off + 2)?;
                next = h[0];
                off += (usize::from(h[1]) + 2) * 4;
            }
            // No next header.
            59 => return None,
            proto => return Some((proto, off)),
        }
    }
    None
}

/// True when the packet is ECN-capable and not yet marked (ECT(0) or ECT(1)).
pub fn is_ect(packet: &[u8]) -> bool {
    IpView::parse(packet).is_ok_and(|v| matches!(v.ecn(), Ecn::Ect0 | Ecn::Ect1))
}

/// Marks an ECN-capable packet CE in place (RFC 3168 §6.1.1.1: only ECT(0)/ECT(1) packets may be
/// marked). Fixes the IPv4 header checksum incrementally (RFC 1624 eqn. 3). Returns `true` when
/// the packet now carries CE (also when it already did), `false` when it is not ECN-capable or
/// not a parseable IP packet, in which case the caller must drop instead.
pub fn set_ce(packet: &mut [u8]) -> bool {
    let Ok(view) = IpView::parse(packet) else {
        return false;
    };
    match view.ecn() {
        Ecn::NotEct => false,
        Ecn::Ce => true,
        Ecn::Ect0 | Ecn::Ect1 => {
            if view.version() == 4 {
                // The TOS byte is the low half of the header's first 16-bit word.
                let mut ip = Ipv4Packet::new_unchecked(packet);
                let (version_ihl, tos) = (ip.as_bytes()[0], ip.dscp_ecn());
                let old_word = u16::from_be_bytes([version_ihl, tos]);
                let new_word = u16::from_be_bytes([version_ihl, tos | ECN_CE]);
                ip.set_dscp_ecn(tos | ECN_CE);
                ip.set_checksum(checksum::update(ip.checksum(), old_word, new_word));
            } else {
                // No header checksum in IPv6.
                let mut ip = Ipv6Packet::new_unchecked(packet);
                ip.set_traffic_class(ip.traffic_class() | ECN_CE);
            }
            true
        }
    }
}

/// Flow identity computed once per packet at enqueue, used by the fair-queueing qdiscs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowMeta {
    /// Hash of (src, dst, protocol, ports), perturbed by the link's seed. 0 for malformed packets.
    pub flow: u32,
    /// Hash of the source address (CAKE host isolation). 0 for malformed packets.
    pub src_host: u32,
    /// Hash of the destination address. 0 for malformed packets.
    pub dst_host: u32,
    /// False when the header could not be parsed (the packet goes to the default flow).
    pub parsed: bool,
}

impl FlowMeta {
    /// Hashes `packet`'s 5-tuple with `perturbation` (like Linux's per-qdisc random hash key, but
    /// seeded so runs are reproducible). Malformed packets get the all-zero default flow.
    pub fn of(packet: &[u8], perturbation: u64) -> FlowMeta {
        let Ok(v) = IpView::parse(packet) else {
            return FlowMeta::default();
        };
        let src_host = hash_bytes(perturbation ^ 0x5352_4348, v.src(), 0);
        let dst_host = hash_bytes(perturbation ^ 0x4453_5448, v.dst(), 0);
        let (sp, dp) = v.ports().unwrap_or((0, 0));
        let tail =
            (u64::from(v.protocol().unwrap_or(255)) << 32) | (u64::from(sp) << 16) | u64::from(dp);
        let h = hash_bytes(perturbation, v.src(), 0)
            ^ hash_bytes(perturbation.rotate_left(17), v.dst(), tail);
        FlowMeta {
            flow: fold(mix(h)),
            src_host: fold(src_host),
            dst_host: fold(dst_host),
            parsed: true,
        }
    }
}

/// A small, fast, seeded hash: 8-byte words folded through a multiply-xorshift mixer
/// (the finaliser of MurmurHash3). Deterministic across platforms and Rust releases, unlike
/// `std`'s `DefaultHasher`, so simulation snapshots stay stable.
fn hash_bytes(seed: u64, bytes: &[u8], tail: u64) -> u64 {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix(h ^ u64::from_le_bytes(w));
    }
    mix(h ^ tail)
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn fold(h: u64) -> u32 {
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 20-byte IPv4 header + 8-byte UDP header with a valid header checksum.
    pub fn ipv4_udp(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        tos: u8,
        total: usize,
    ) -> Vec<u8> {
        let mut p = vec![0u8; total.max(28)];
        let len = p.len() as u16;
        p[0] = 0x45;
        p[1] = tos;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        let c = checksum::ipv4_header(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    /// Golden bytes: the textbook IPv4/TCP header 172.16.10.99 -> 172.16.10.12 (checksum 0xb1e6
    /// with TOS 0), here with TOS 0x02 = ECT(0), so the checksum is 0xb1e4; ports 40000 -> 5001.
    const IPV4_TCP_ECT0: [u8; 24] = [
        0x45, 0x02, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0xb1, 0xe4, 0xac, 0x10, 0x0a,
        0x63, 0xac, 0x10, 0x0a, 0x0c, 0x9c, 0x40, 0x13, 0x89,
    ];

    #[test]
    fn golden_ipv4_tcp_header_parses() {
        let v = IpView::parse(&IPV4_TCP_ECT0).unwrap();
        assert_eq!(v.version(), 4);
        assert_eq!(v.ecn(), Ecn::Ect0);
        assert_eq!(v.src(), &[172, 16, 10, 99]);
        assert_eq!(v.dst(), &[172, 16, 10, 12]);
        assert_eq!(v.protocol(), Some(6));
        assert_eq!(v.ports(), Some((40000, 5001)));
        assert_eq!(checksum::ipv4_header(&IPV4_TCP_ECT0[..20]), 0xb1e4);
    }

    #[test]
    fn ce_marking_fixes_ipv4_checksum_incrementally() {
        let mut p = IPV4_TCP_ECT0;
        assert!(set_ce(&mut p));
        assert_eq!(p[1], 0x03);
        // TOS 0x02 -> 0x03 lowers the one's complement checksum by one.
        assert_eq!(&p[10..12], &[0xb1, 0xe3]);
        assert_eq!(IpView::parse(&p).unwrap().ecn(), Ecn::Ce);
        let stored = u16::from_be_bytes([p[10], p[11]]);
        assert_eq!(stored, checksum::ipv4_header(&p[..20]));
        // Marking again is a no-op that still reports CE.
        let before = p;
        assert!(set_ce(&mut p));
        assert_eq!(p, before);
    }

    #[test]
    fn incremental_checksum_matches_full_recompute_for_many_headers() {
        // A deterministic sweep over TOS bytes, ids and addresses.
        for i in 0u32..20_000 {
            let tos = (i % 256) as u8 & !0b11 | [0b01, 0b10][(i % 2) as usize];
            let mut p = ipv4_udp(
                i.to_be_bytes(),
                (i.wrapping_mul(2_654_435_761)).to_be_bytes(),
                1,
                2,
                tos,
                28,
            );
            p[4..6].copy_from_slice(&((i * 7) as u16).to_be_bytes());
            let c = checksum::ipv4_header(&p[..20]);
            p[10..12].copy_from_slice(&c.to_be_bytes());
            assert!(set_ce(&mut p));
            assert_eq!(
                u16::from_be_bytes([p[10], p[11]]),
                checksum::ipv4_header(&p[..20]),
                "i={i}"
            );
        }
    }

    #[test]
    fn not_ect_is_not_marked() {
        let mut p = ipv4_udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 0x00, 100);
        let before = p.clone();
        assert!(!set_ce(&mut p));
        assert_eq!(p, before);
    }

    /// IPv6/UDP with a hop-by-hop header, traffic class 0x01 (ECT(1) in the low bits).
    fn ipv6_udp_hbh() -> Vec<u8> {
        let mut p = vec![0u8; 40 + 8 + 8];
        p[0] = 0x60; // version 6, TC high nibble 0
        p[1] = 0x10; // TC low nibble 1 -> ECN 01 = ECT(1)
        p[4..6].copy_from_slice(&16u16.to_be_bytes());
        p[6] = 0; // hop-by-hop
        p[7] = 64;
        p[8] = 0x20;
        p[23] = 1;
        p[24] = 0x20;
        p[39] = 2;
        p[40] = 17; // next header UDP
        p[41] = 0; // 8 bytes
        p[48..50].copy_from_slice(&53u16.to_be_bytes());
        p[50..52].copy_from_slice(&9999u16.to_be_bytes());
        p
    }

    #[test]
    fn ipv6_chain_ports_and_ce() {
        let mut p = ipv6_udp_hbh();
        let v = IpView::parse(&p).unwrap();
        assert_eq!(v.ecn(), Ecn::Ect1);
        assert_eq!(v.protocol(), Some(17));
        assert_eq!(v.ports(), Some((53, 9999)));
        assert!(set_ce(&mut p));
        assert_eq!(IpView::parse(&p).unwrap().ecn(), Ecn::Ce);
        assert_eq!(p[0], 0x60);
        assert_eq!(p[1], 0x30);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert_eq!(
            IpView::parse(&[]).unwrap_err(),
            HeaderError::Truncated { len: 0, need: 1 }
        );
        assert_eq!(
            IpView::parse(&[0x45; 10]).unwrap_err(),
            HeaderError::Truncated { len: 10, need: 20 }
        );
        assert_eq!(
            IpView::parse(&[0x43; 20]).unwrap_err(),
            HeaderError::BadIhl(3)
        );
        assert_eq!(
            IpView::parse(&[0x4f; 20]).unwrap_err(),
            HeaderError::Truncated { len: 20, need: 60 }
        );
        assert_eq!(
            IpView::parse(&[0x20; 40]).unwrap_err(),
            HeaderError::Version(2)
        );
        // Truncated transport header: no ports, still parses.
        let p = ipv4_udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0, 28);
        assert_eq!(IpView::parse(&p[..22]).unwrap().ports(), None);
        assert_eq!(FlowMeta::of(&[0xff; 3], 7), FlowMeta::default());
    }

    #[test]
    fn flow_hash_separates_ports_and_depends_on_seed() {
        let a = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 5001, 0, 100);
        let b = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1001, 5001, 0, 100);
        let (ma, mb) = (FlowMeta::of(&a, 1), FlowMeta::of(&b, 1));
        assert_ne!(ma.flow, mb.flow);
        assert_eq!(ma.src_host, mb.src_host);
        assert_eq!(ma.dst_host, mb.dst_host);
        assert!(ma.parsed);
        assert_ne!(FlowMeta::of(&a, 1).flow, FlowMeta::of(&a, 2).flow);
        assert_eq!(FlowMeta::of(&a, 1), FlowMeta::of(&a, 1));
    }
}
