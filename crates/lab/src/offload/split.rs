//! From one TUN read to wire packets: a TSO super-packet is cut into
//! MSS-sized segments the way Linux's software GSO would cut it
//! (net/ipv4/tcp_offload.c `tcp_gso_segment`, `inet_gso_segment`,
//! net/ipv6/ip6_offload.c `ipv6_gso_segment`): headers copied, sequence
//! numbers advanced by the MSS, IPv4 IDs incremented (IPv6 has none; its
//! payload length is set per segment), CWR kept on the first segment only,
//! FIN and PSH on the last only, and every checksum complete, so the
//! emulated link only ever holds wire-valid packets. IPv6 super-packets
//! with extension headers are refused (Linux TCP sends none).

use super::csum;
use super::{
    F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6, OffloadError, VNET_HDR_LEN, VnetHeader,
};
use bloatlab_wire::inet::{self, Ipv4Packet, Ipv6Packet, PROTO_TCP, TcpPacket, ipv4, ipv6, tcp};

/// Turns `frame` (a `virtio_net_hdr` and the packet after it) into wire
/// packets, handed to `emit` in order. Returns how many were emitted.
pub fn split(frame: &[u8], emit: &mut impl FnMut(Vec<u8>)) -> Result<usize, OffloadError> {
    let h = VnetHeader::parse(frame)?;
    let pkt = &frame[VNET_HDR_LEN..];
    match h.gso_type & !GSO_ECN {
        GSO_NONE => {
            let mut p = pkt.to_vec();
            if h.flags & F_NEEDS_CSUM != 0 {
                complete_checksum(&mut p, h)?;
            }
            emit(p);
            Ok(1)
        }
        GSO_TCPV4 => segment_tcp(pkt, Ip::V4, h.gso_size, emit),
        GSO_TCPV6 => segment_tcp(pkt, Ip::V6, h.gso_size, emit),
        other => Err(OffloadError::UnsupportedGso(other)),
    }
}

/// Offset of the checksum in a UDP header (RFC 768).
const UDP_CSUM_OFFSET: u16 = inet::udp::field::CHECKSUM.start as u16;

/// Finishes a partial checksum: the field holds the pseudo-header sum, and
/// the one's complement of the sum over `[csum_start, end)` completes it.
/// The offsets come from the kernel, whatever the protocol, so this one
/// works on them rather than on a header view.
fn complete_checksum(p: &mut [u8], h: VnetHeader) -> Result<(), OffloadError> {
    let start = usize::from(h.csum_start);
    let at = start + usize::from(h.csum_offset);
    if start > p.len() || at + 2 > p.len() {
        return Err(OffloadError::ChecksumOutside { at, len: p.len() });
    }
    let mut c = !csum::fold(csum::add(0, &p[start..]));
    // RFC 768 (and RFC 8200 §8.1 for IPv6, where zero is not allowed): a
    // computed UDP checksum of zero is sent as all ones. The UDP checksum
    // sits 6 bytes into its header (TCP's 16), whatever the IP version and
    // extension headers before it.
    if c == 0 && h.csum_offset == UDP_CSUM_OFFSET {
        c = 0xffff;
    }
    p[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// The IP version of a super-packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ip {
    V4,
    V6,
}

impl Ip {
    /// The IP header length, after checking the packet is TCP directly
    /// over this version.
    fn header_len(self, pkt: &[u8]) -> Result<usize, OffloadError> {
        match self {
            Ip::V4 => {
                let ip = Ipv4Packet::new_unchecked(pkt);
                if pkt.len() < ipv4::MIN_HEADER_LEN
                    || ip.version() != 4
                    || ip.protocol() != PROTO_TCP
                {
                    return Err(OffloadError::NotTcpV4);
                }
                // A bad IHL, or a header longer than the packet.
                ip.check_len().map_err(|_| truncated(pkt))?;
                Ok(ip.header_len())
            }
            Ip::V6 => {
                // Next header TCP: no extension headers (RFC 8200 §4).
                let ip = Ipv6Packet::new_unchecked(pkt);
                if ip.check_len().is_err() || ip.version() != 6 || ip.next_header() != PROTO_TCP {
                    return Err(OffloadError::NotTcpV6);
                }
                Ok(ipv6::HEADER_LEN)
            }
        }
    }

    /// Sets the length fields (and IPv4's ID and header checksum) of
    /// segment `i` of a super-packet whose first ID was `id0`; `ip` is the
    /// IP header alone, `len` the segment's whole length.
    fn fix_header(self, ip: &mut [u8], len: usize, i: usize, id0: u16) {
        match self {
            Ip::V4 => {
                let mut ip = Ipv4Packet::new_unchecked(ip);
                ip.set_total_len(len as u16);
                ip.set_ident(id0.wrapping_add(i as u16));
                ip.fill_checksum();
            }
            Ip::V6 => {
                Ipv6Packet::new_unchecked(ip).set_payload_len((len - ipv6::HEADER_LEN) as u16);
            }
        }
    }

    /// The TCP pseudo-header sum of a segment whose IP header is `ip`.
    fn pseudo(self, ip: &[u8], l4_len: usize) -> u64 {
        match self {
            Ip::V4 => Ipv4Packet::new_unchecked(ip).pseudo_header_sum(PROTO_TCP, l4_len),
            Ip::V6 => Ipv6Packet::new_unchecked(ip).pseudo_header_sum(PROTO_TCP, l4_len),
        }
    }
}

fn truncated(pkt: &[u8]) -> OffloadError {
    OffloadError::Truncated {
        what: "TSO super-packet",
        len: pkt.len(),
    }
}

fn segment_tcp(
    pkt: &[u8],
    ip: Ip,
    mss: u16,
    emit: &mut impl FnMut(Vec<u8>),
) -> Result<usize, OffloadError> {
    let mss = usize::from(mss);
    if mss == 0 {
        return Err(OffloadError::ZeroSegmentSize);
    }
    let ihl = ip.header_len(pkt)?;
    let tcp = TcpPacket::new_checked(&pkt[ihl..]).map_err(|_| truncated(pkt))?;
    let hl = ihl + tcp.header_len();
    let (headers, data) = pkt.split_at(hl);
    let seq0 = tcp.seq_number();
    let flags = tcp.flags();
    // IPv4's identification (unused for IPv6).
    let id0 = Ipv4Packet::new_unchecked(pkt).ident();
    let chunks = data.len().div_ceil(mss).max(1);
    for (i, chunk) in data
        .chunks(mss)
        .chain(data.is_empty().then_some(&[][..]))
        .enumerate()
    {
        let mut s = Vec::with_capacity(hl + chunk.len());
        s.extend_from_slice(headers);
        s.extend_from_slice(chunk);
        let len = s.len();
        let (iph, seg) = s.split_at_mut(ihl);
        ip.fix_header(iph, len, i, id0);
        let mut f = flags;
        if i > 0 {
            f &= !tcp::CWR;
        }
        if i + 1 < chunks {
            f &= !(tcp::FIN | tcp::PSH);
        }
        let mut t = TcpPacket::new_unchecked(seg);
        t.set_seq_number(seq0.wrapping_add((i * mss) as u32));
        t.set_flags(f);
        t.fill_checksum(ip.pseudo(iph, len - ihl));
        emit(s);
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::super::testpkt::{self, ACK, CWR, FIN, PSH};
    use super::*;

    fn frame(h: VnetHeader, pkt: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; VNET_HDR_LEN];
        h.write(&mut f);
        f.extend_from_slice(pkt);
        f
    }

    fn split_all(f: &[u8]) -> Result<Vec<Vec<u8>>, OffloadError> {
        let mut out = Vec::new();
        let n = split(f, &mut |p| out.push(p))?;
        assert_eq!(n, out.len());
        Ok(out)
    }

    /// The super-packet as the kernel hands it over: one header, the
    /// payload of all segments, TCP checksum holding only the pseudo-header
    /// sum (CHECKSUM_PARTIAL).
    fn tso(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = testpkt::tcp(seq, flags, 100, payload);
        let partial = csum::fold(csum::pseudo_v4(&p, 6, p.len() - 20));
        p[36..38].copy_from_slice(&partial.to_be_bytes());
        p
    }

    #[test]
    fn a_tso_packet_becomes_the_segments_linux_would_send() {
        let data = testpkt::payload(1448 * 2 + 100, 0);
        let h = VnetHeader {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let segs = split_all(&frame(h, &tso(1000, ACK | PSH | FIN | CWR, &data))).unwrap();
        let expect = [
            testpkt::tcp(1000, ACK | CWR, 100, &data[..1448]),
            testpkt::tcp(2448, ACK, 101, &data[1448..2896]),
            testpkt::tcp(3896, ACK | PSH | FIN, 102, &data[2896..]),
        ];
        assert_eq!(segs, expect);
        assert!(segs.iter().all(|s| testpkt::checksums_ok(s)));
    }

    #[test]
    fn sequence_numbers_and_ids_wrap() {
        let data = testpkt::payload(3000, 5);
        let mut p = tso(u32::MAX - 10, ACK, &data);
        p[4..6].copy_from_slice(&u16::MAX.to_be_bytes());
        let h = VnetHeader {
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..VnetHeader::default()
        };
        let segs = split_all(&frame(h, &p)).unwrap();
        assert_eq!(segs.len(), 3);
        assert_eq!(&segs[1][24..28], &(1437u32).to_be_bytes());
        assert_eq!(&segs[1][4..6], &[0, 0]);
        assert!(segs.iter().all(|s| testpkt::checksums_ok(s)));
        assert_eq!(segs.iter().map(|s| s.len() - 52).sum::<usize>(), 3000);
    }

    #[test]
    fn a_plain_packet_gets_its_partial_checksum_completed() {
        let data = testpkt::payload(333, 9);
        let good = testpkt::tcp(5, ACK, 100, &data);
        let h = VnetHeader {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..VnetHeader::default()
        };
        assert_eq!(
            split_all(&frame(h, &tso(5, ACK, &data))).unwrap(),
            vec![good.clone()]
        );
        // Without NEEDS_CSUM the packet passes unchanged.
        assert_eq!(
            split_all(&frame(VnetHeader::default(), &good)).unwrap(),
            vec![good]
        );
    }

    #[test]
    fn a_udp_checksum_of_zero_is_sent_as_all_ones() {
        // 10.0.0.1 -> 10.0.0.2 UDP, payload chosen so the sum is 0xffff.
        let mut p = vec![0u8; 30];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&30u16.to_be_bytes());
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[24..26].copy_from_slice(&10u16.to_be_bytes());
        let partial = csum::fold(csum::pseudo_v4(&p, 17, 10));
        // Make the sum over the UDP part complement to zero.
        let rest = csum::fold(csum::add(u64::from(partial), &p[20..]));
        p[28..30].copy_from_slice(&(!rest).to_be_bytes());
        p[26..28].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHeader {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 6,
            ..VnetHeader::default()
        };
        let out = split_all(&frame(h, &p)).unwrap();
        assert_eq!(&out[0][26..28], &[0xff, 0xff]);
    }

    /// An IPv6 TSO super-packet (the TUNs offer TSO6) becomes the segments
    /// Linux's GSO would send: payload length per segment, sequence numbers
    /// by the MSS, CWR first, PSH/FIN last, TCP checksums over the IPv6
    /// pseudo-header (RFC 8200 §8.1), flow label and hop limit kept.
    #[test]
    fn an_ipv6_tso_packet_becomes_the_segments_linux_would_send() {
        let data = testpkt::payload(1428 * 2 + 7, 1);
        let mut p = testpkt::tcp6(9000, ACK | PSH | FIN | CWR, &data);
        let partial = csum::fold(csum::pseudo_v6(&p, 6, p.len() - 40));
        p[56..58].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHeader {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6,
            hdr_len: 72,
            gso_size: 1428,
            csum_start: 40,
            csum_offset: 16,
        };
        let segs = split_all(&frame(h, &p)).unwrap();
        let expect = [
            testpkt::tcp6(9000, ACK | CWR, &data[..1428]),
            testpkt::tcp6(10428, ACK, &data[1428..2856]),
            testpkt::tcp6(11856, ACK | PSH | FIN, &data[2856..]),
        ];
        assert_eq!(segs, expect);
        assert!(segs.iter().all(|s| testpkt::checksums_ok6(s)));
        assert_eq!(&segs[2][4..6], &(32u16 + 7).to_be_bytes(), "payload length");
        // Extension headers (next header 0, hop-by-hop) are refused, as is
        // an IPv4 packet labelled TCPV6.
        let mut ext = p.clone();
        ext[6] = 0;
        assert_eq!(split_all(&frame(h, &ext)), Err(OffloadError::NotTcpV6));
        let v4 = tso(1, ACK, &data);
        assert_eq!(split_all(&frame(h, &v4)), Err(OffloadError::NotTcpV6));
        for cut in [0, 39, 40, 59, 71] {
            assert!(split_all(&frame(h, &p[..cut])).is_err(), "cut {cut}");
        }
    }

    /// Checksum offload applies to IPv6 packets that are not segmented: a
    /// partial checksum is completed, and a UDP checksum of zero becomes
    /// all ones (RFC 8200 §8.1).
    #[test]
    fn ipv6_packets_get_their_partial_checksums_completed() {
        let v6 = |proto: u8, l4: &[u8]| {
            let mut p = vec![0u8; 40];
            p[0] = 0x60;
            p[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
            p[6] = proto;
            p[7] = 64;
            p[8] = 0xfd;
            p[23] = 1;
            p[24] = 0xfd;
            p[39] = 2;
            p.extend_from_slice(l4);
            p
        };
        // RFC 8200 §8.1 pseudo-header: addresses, upper-layer length, next header.
        let pseudo = |p: &[u8], proto: u8| {
            csum::add(0, &p[8..40]) + (p.len() as u64 - 40) + u64::from(proto)
        };
        let mut tcp = vec![0u8; 20 + 100];
        tcp[12] = 5 << 4;
        tcp[20..].copy_from_slice(&testpkt::payload(100, 3));
        let mut p = v6(6, &tcp);
        let full = !csum::fold(pseudo(&p, 6) + csum::add(0, &p[40..]));
        let partial = csum::fold(pseudo(&p, 6));
        p[56..58].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHeader {
            flags: F_NEEDS_CSUM,
            csum_start: 40,
            csum_offset: 16,
            ..VnetHeader::default()
        };
        let out = split_all(&frame(h, &p)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0][56..58], &full.to_be_bytes());
        assert_eq!(&out[0][..56], &p[..56], "nothing else changed");
        // UDP whose checksum computes to zero.
        let mut udp = vec![0u8; 10];
        udp[4..6].copy_from_slice(&10u16.to_be_bytes());
        let mut p = v6(17, &udp);
        let partial = csum::fold(pseudo(&p, 17));
        let rest = csum::fold(csum::add(u64::from(partial), &p[40..]));
        p[48..50].copy_from_slice(&(!rest).to_be_bytes());
        p[46..48].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHeader {
            csum_offset: 6,
            ..h
        };
        let out = split_all(&frame(h, &p)).unwrap();
        assert_eq!(&out[0][46..48], &[0xff, 0xff]);
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        let gso = VnetHeader {
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..VnetHeader::default()
        };
        let pkt = tso(1, ACK, &testpkt::payload(4000, 0));
        assert_eq!(
            split_all(&pkt[..5]),
            Err(OffloadError::Truncated {
                what: "virtio_net_hdr",
                len: 5
            })
        );
        for cut in [0, 19, 20, 33, 51] {
            assert!(split_all(&frame(gso, &pkt[..cut])).is_err(), "cut {cut}");
        }
        let zero = VnetHeader { gso_size: 0, ..gso };
        assert_eq!(
            split_all(&frame(zero, &pkt)),
            Err(OffloadError::ZeroSegmentSize)
        );
        let udp4 = VnetHeader { gso_type: 5, ..gso };
        assert_eq!(
            split_all(&frame(udp4, &pkt)),
            Err(OffloadError::UnsupportedGso(5))
        );
        let outside = VnetHeader {
            flags: F_NEEDS_CSUM,
            csum_start: 60,
            csum_offset: 16,
            ..VnetHeader::default()
        };
        assert!(matches!(
            split_all(&frame(outside, &pkt[..70])),
            Err(OffloadError::ChecksumOutside { .. })
        ));
        // Bytes of every length and value never panic.
        for len in 0..80 {
            for seed in 0..8u8 {
                let f: Vec<u8> = (0..len)
                    .map(|i| (i as u8).wrapping_mul(37) ^ seed)
                    .collect();
                let _ = split_all(&f);
            }
        }
    }
}
