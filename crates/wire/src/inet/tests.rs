//! Golden bytes for the Internet header views. The packets and their
//! checksums were computed outside this crate (a few lines of Python's
//! `struct`, RFC 1071 summing 16-bit words), not with `crate::checksum`.

use super::*;
use crate::WireError;
use crate::checksum;
use std::net::{Ipv4Addr, Ipv6Addr};

/// IPv4/TCP 192.0.2.1:443 -> 198.51.100.7:51000: TOS 0x02 (ECT(0)),
/// ID 0x1c46, DF, TTL 64, header checksum 0x323b; seq 0x01020304,
/// ack 0xa0b0c0d0, ACK|PSH, window 502, checksum 0x1621, the 12-byte
/// timestamps option Linux sends, then "hello".
const IPV4_TCP: [u8; 57] = [
    0x45, 0x02, 0x00, 0x39, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x32, 0x3b, 0xc0, 0x00, 0x02, 0x01,
    0xc6, 0x33, 0x64, 0x07, 0x01, 0xbb, 0xc7, 0x38, 0x01, 0x02, 0x03, 0x04, 0xa0, 0xb0, 0xc0, 0xd0,
    0x80, 0x18, 0x01, 0xf6, 0x16, 0x21, 0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x07,
    0x00, 0x00, 0x00, 0x09, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

/// IPv6/UDP [2001:db8::1]:5353 -> [2001:db8::2]:53: traffic class 0xb9
/// (DSCP EF, ECT(1)), flow label 0x12345, hop limit 255; UDP checksum
/// 0xca7c over "abcd".
const IPV6_UDP: [u8; 52] = [
    0x6b, 0x91, 0x23, 0x45, 0x00, 0x0c, 0x11, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x14, 0xe9, 0x00, 0x35, 0x00, 0x0c, 0xca, 0x7c,
    0x61, 0x62, 0x63, 0x64,
];

#[test]
fn golden_ipv4_tcp_parses() {
    let ip = Ipv4Packet::new_checked(&IPV4_TCP[..]).unwrap();
    assert_eq!(ip.version(), 4);
    assert_eq!(ip.header_len(), 20);
    assert_eq!(ip.dscp_ecn(), 0x02);
    assert_eq!(ip.ecn(), 0b10);
    assert_eq!(ip.total_len(), 57);
    assert_eq!(ip.ident(), 0x1c46);
    assert_eq!(ip.flags(), 0b010);
    assert!(ip.dont_frag() && !ip.more_frags());
    assert_eq!(ip.frag_offset(), 0);
    assert_eq!(ip.ttl(), 64);
    assert_eq!(ip.protocol(), PROTO_TCP);
    assert_eq!(ip.checksum(), 0x323b);
    assert!(ip.verify_checksum());
    assert_eq!(ip.src_addr(), Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!(ip.dst_addr(), Ipv4Addr::new(198, 51, 100, 7));
    assert_eq!(ip.header(), &IPV4_TCP[..20]);

    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!((tcp.src_port(), tcp.dst_port()), (443, 51000));
    assert_eq!(ports(ip.payload()), Some((443, 51000)));
    assert_eq!(tcp.seq_number(), 0x0102_0304);
    assert_eq!(tcp.ack_number(), 0xa0b0_c0d0);
    assert_eq!(tcp.header_len(), 32);
    assert_eq!(tcp.reserved(), 0);
    assert_eq!(tcp.flags(), tcp::ACK | tcp::PSH);
    assert_eq!(tcp.window(), 502);
    assert_eq!(tcp.checksum(), 0x1621);
    assert_eq!(tcp.urgent_ptr(), 0);
    assert_eq!(tcp.options(), &[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]);
    assert_eq!(tcp.payload(), b"hello");
    assert!(tcp.verify_checksum(ip.pseudo_header_sum(PROTO_TCP, 37)));
    // The crate's own pseudo-header helper agrees.
    assert_eq!(
        ip.pseudo_header_sum(PROTO_TCP, 37),
        checksum::pseudo_v4(&IPV4_TCP, 6, 37)
    );
}

#[test]
fn golden_ipv4_tcp_is_rebuilt_by_the_setters() {
    // Scramble every field the setters own, then set them back.
    let mut p = IPV4_TCP;
    p[2..6].fill(0xee);
    p[10..12].fill(0xee);
    p[24..28].fill(0xee);
    p[33] = 0xee;
    p[36..38].fill(0xee);
    let mut ip = Ipv4Packet::new_checked(&mut p[..]).unwrap();
    ip.set_total_len(57);
    ip.set_ident(0x1c46);
    ip.fill_checksum();
    let pseudo = ip.pseudo_header_sum(PROTO_TCP, 37);
    let mut tcp = TcpPacket::new_checked(ip.payload_mut()).unwrap();
    tcp.set_seq_number(0x0102_0304);
    tcp.set_flags(tcp::ACK | tcp::PSH);
    tcp.fill_checksum(pseudo);
    assert_eq!(p, IPV4_TCP);
    // set_checksum writes the field as given (a partial sum for offload).
    let mut tcp = TcpPacket::new_unchecked(&mut p[20..]);
    tcp.set_checksum(0xbeef);
    assert_eq!(&p[36..38], &[0xbe, 0xef]);
    let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
    ip.set_dscp_ecn(0x03);
    ip.set_checksum(0x0102);
    assert_eq!((p[1], &p[10..12]), (0x03, &[0x01, 0x02][..]));
}

#[test]
fn golden_ipv6_udp_parses() {
    let ip = Ipv6Packet::new_checked(&IPV6_UDP[..]).unwrap();
    assert_eq!(ip.version(), 6);
    assert_eq!(ip.traffic_class(), 0xb9);
    assert_eq!(ip.ecn(), 0b01);
    assert_eq!(ip.flow_label(), 0x12345);
    assert_eq!(ip.payload_len(), 12);
    assert_eq!(ip.next_header(), PROTO_UDP);
    assert_eq!(ip.hop_limit(), 255);
    assert_eq!(ip.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
    assert_eq!(ip.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!((udp.src_port(), udp.dst_port()), (5353, 53));
    assert_eq!(udp.len(), 12);
    assert!(!udp.is_empty());
    assert_eq!(udp.checksum(), 0xca7c);
    assert_eq!(udp.payload(), b"abcd");
    let pseudo = ip.pseudo_header_sum(PROTO_UDP, 12);
    assert_eq!(pseudo, checksum::pseudo_v6(&IPV6_UDP, 17, 12));
    assert_eq!(checksum::fold(checksum::add(pseudo, ip.payload())), 0xffff);

    let mut p = IPV6_UDP;
    let mut ip = Ipv6Packet::new_unchecked(&mut p[..]);
    ip.set_traffic_class(0xbb);
    assert_eq!(
        (ip.traffic_class(), ip.ecn(), ip.flow_label()),
        (0xbb, ECN_CE, 0x12345)
    );
    assert_eq!(&p[..4], &[0x6b, 0xb1, 0x23, 0x45]);
    let mut p = IPV6_UDP;
    p[4..6].fill(0);
    p[46..48].fill(0);
    let mut ip = Ipv6Packet::new_checked(&mut p[..]).unwrap();
    ip.set_payload_len(12);
    UdpPacket::new_unchecked(ip.payload_mut()).set_checksum(0xca7c);
    assert_eq!(p, IPV6_UDP);
}

#[test]
fn short_and_garbage_input_is_an_error_never_a_panic() {
    let trunc = |needed, got| WireError::Truncated { needed, got };
    assert_eq!(
        Ipv4Packet::new_checked(&IPV4_TCP[..19]).unwrap_err(),
        trunc(20, 19)
    );
    let mut ihl3 = IPV4_TCP;
    ihl3[0] = 0x43;
    assert!(matches!(
        Ipv4Packet::new_checked(&ihl3[..]).unwrap_err(),
        WireError::BadLength {
            field: "ipv4.ihl",
            value: 3
        }
    ));
    let mut ihl15 = IPV4_TCP;
    ihl15[0] = 0x4f;
    assert_eq!(
        Ipv4Packet::new_checked(&ihl15[..40]).unwrap_err(),
        trunc(60, 40)
    );
    assert_eq!(
        Ipv6Packet::new_checked(&IPV6_UDP[..39]).unwrap_err(),
        trunc(40, 39)
    );
    let tcp = &IPV4_TCP[20..];
    assert_eq!(
        TcpPacket::new_checked(&tcp[..31]).unwrap_err(),
        trunc(32, 31)
    );
    assert_eq!(
        TcpPacket::new_checked(&tcp[..19]).unwrap_err(),
        trunc(20, 19)
    );
    let mut doff4 = tcp.to_vec();
    doff4[12] = 4 << 4;
    assert!(matches!(
        TcpPacket::new_checked(&doff4[..]).unwrap_err(),
        WireError::BadLength {
            field: "tcp.data_offset",
            ..
        }
    ));
    assert_eq!(
        UdpPacket::new_checked(&IPV6_UDP[40..47]).unwrap_err(),
        trunc(8, 7)
    );
    assert_eq!(ports(&[1, 2, 3]), None);

    // Unchecked views over every short prefix read zeros, drop writes and
    // never panic.
    for n in 0..IPV4_TCP.len() {
        let mut b = IPV4_TCP[..n].to_vec();
        let ip = Ipv4Packet::new_unchecked(&b[..]);
        let _ = (ip.src_addr(), ip.dst_addr(), ip.total_len(), ip.flags());
        let _ = (ip.header(), ip.payload(), ip.verify_checksum());
        let _ = ip.pseudo_header_sum(6, 0);
        let t = TcpPacket::new_unchecked(&b[..]);
        let _ = (t.seq_number(), t.options(), t.payload(), t.window());
        let v6 = Ipv6Packet::new_unchecked(&b[..]);
        let _ = (v6.src_addr(), v6.flow_label(), v6.payload());
        let _ = v6.pseudo_header_sum(6, 0);
        let mut ip = Ipv4Packet::new_unchecked(&mut b[..]);
        ip.set_total_len(1);
        ip.set_ident(1);
        ip.fill_checksum();
        let _ = ip.payload_mut();
        let mut t = TcpPacket::new_unchecked(&mut b[..]);
        t.set_seq_number(1);
        t.set_flags(1);
        t.fill_checksum(0);
        Ipv6Packet::new_unchecked(&mut b[..]).set_payload_len(1);
        UdpPacket::new_unchecked(&mut b[..]).set_checksum(1);
    }
    let empty = Ipv6Packet::new_unchecked(&[][..]);
    assert_eq!(empty.src_addr(), Ipv6Addr::UNSPECIFIED);
    assert_eq!(Ipv4Packet::new_unchecked(&[][..]).ttl(), 0);
}
