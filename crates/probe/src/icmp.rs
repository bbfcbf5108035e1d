//! ICMP echo (RFC 792) for the ICMP probe mode: emit requests, recognise our replies.
//!
//! ```text
//! off len  field
//!   0   1  type         8 echo request, 0 echo reply
//!   1   1  code         0
//!   2   2  checksum     RFC 1071 over the whole ICMP message
//!   4   2  identifier   ours, to tell our replies from other processes' (raw sockets see all)
//!   6   2  sequence     low 16 bits of our sequence number
//!   8   4  "blpi"       our payload marker
//!  12   4  reserved     0
//!  16   8  seq          full 64-bit sequence number
//!  24   8  client_send  ns since the epoch (CLOCK_REALTIME)
//!  32      padding      zeros
//! ```
//!
//! A raw IPv4 socket delivers the IP header too; [`parse_ipv4_echo_reply`] skips it.

use bloatlab_wire::checksum;
use std::time::Duration;

/// Our payload marker ("blpi").
pub const PAYLOAD_MAGIC: u32 = 0x626c_7069;
/// Smallest ICMP message we send.
pub const MIN_LEN: usize = 32;
/// ICMP echo request type.
pub const ECHO_REQUEST: u8 = 8;
/// ICMP echo reply type.
pub const ECHO_REPLY: u8 = 0;
/// ICMPv6 echo request and reply types (RFC 4443 §4.1, §4.2).
pub const ECHO6_REQUEST: u8 = 128;
pub const ECHO6_REPLY: u8 = 129;

/// Writes an echo request filling all of `buf` (at least [`MIN_LEN`] bytes). Returns
/// `false` if `buf` is too short.
pub fn emit_echo_request(buf: &mut [u8], ident: u16, seq: u64, client_send: Duration) -> bool {
    if buf.len() < MIN_LEN {
        return false;
    }
    buf.fill(0);
    buf[0] = ECHO_REQUEST;
    buf[4..6].copy_from_slice(&ident.to_be_bytes());
    buf[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
    buf[8..12].copy_from_slice(&PAYLOAD_MAGIC.to_be_bytes());
    buf[16..24].copy_from_slice(&seq.to_be_bytes());
    let ns = u64::try_from(client_send.as_nanos()).unwrap_or(u64::MAX);
    buf[24..32].copy_from_slice(&ns.to_be_bytes());
    let c = checksum::of(buf);
    buf[2..4].copy_from_slice(&c.to_be_bytes());
    true
}

/// As [`emit_echo_request`] for ICMPv6 (RFC 4443 §4.1): type 128, and the checksum left
/// zero, because the kernel computes it for raw ICMPv6 sockets (it covers the IPv6
/// pseudo-header, RFC 4443 §2.3, which only the kernel knows for sure; RFC 3542 §3.1).
pub fn emit_echo6_request(buf: &mut [u8], ident: u16, seq: u64, client_send: Duration) -> bool {
    if !emit_echo_request(buf, ident, seq, client_send) {
        return false;
    }
    buf[0] = ECHO6_REQUEST;
    buf[2..4].fill(0);
    true
}

/// An echo reply that answers one of our requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    /// Full sequence number from our payload.
    pub seq: u64,
    /// Our send timestamp from the payload.
    pub client_send: Duration,
}

/// Parses an ICMP message (no IP header): `Some` only for an echo reply with our
/// identifier, our payload marker and a sequence field consistent with the payload.
pub fn parse_echo_reply(icmp: &[u8], ident: u16) -> Option<EchoReply> {
    parse_reply_of_type(icmp, ident, ECHO_REPLY)
}

/// As [`parse_echo_reply`] for an ICMPv6 message (type 129), as a raw ICMPv6 socket
/// returns it (no IPv6 header).
pub fn parse_echo6_reply(icmp: &[u8], ident: u16) -> Option<EchoReply> {
    parse_reply_of_type(icmp, ident, ECHO6_REPLY)
}

fn parse_reply_of_type(icmp: &[u8], ident: u16, reply: u8) -> Option<EchoReply> {
    if icmp.len() < MIN_LEN || icmp[0] != reply || icmp[1] != 0 {
        return None;
    }
    let be16 = |o: usize| u16::from_be_bytes([icmp[o], icmp[o + 1]]);
    let be64 = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&icmp[o..o + 8]);
        u64::from_be_bytes(a)
    };
    if be16(4) != ident || u32::from(be16(8)) << 16 | u32::from(be16(10)) != PAYLOAD_MAGIC {
        return None;
    }
    let seq = be64(16);
    if be16(6) != seq as u16 {
        return None;
    }
    Some(EchoReply {
        seq,
        client_send: Duration::from_nanos(be64(24)),
    })
}

/// As [`parse_echo_reply`] for a datagram from a raw IPv4 socket (IP header first).
/// Also returns `None` for anything that is not IPv4 ICMP.
pub fn parse_ipv4_echo_reply(packet: &[u8], ident: u16) -> Option<EchoReply> {
    let first = *packet.first()?;
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || ihl < 20 || packet.len() < ihl || packet.get(9) != Some(&1) {
        return None;
    }
    parse_echo_reply(&packet[ihl..], ident)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icmpv6_echo_request_and_reply() {
        let mut buf = [0u8; 40];
        let send = Duration::from_nanos(0x0102_0304_0506_0708);
        assert!(emit_echo6_request(&mut buf, 0xabcd, 0x1_0002, send));
        // type 128, code 0, checksum left to the kernel, ident, low 16 bits of seq, "blpi".
        assert_eq!(
            &buf[..12],
            &[128, 0, 0, 0, 0xab, 0xcd, 0x00, 0x02, b'b', b'l', b'p', b'i']
        );
        assert!(!emit_echo6_request(&mut buf[..31], 1, 1, send));
        let mut reply = buf;
        reply[0] = ECHO6_REPLY;
        let r = parse_echo6_reply(&reply, 0xabcd).unwrap();
        assert_eq!((r.seq, r.client_send), (0x1_0002, send));
        assert_eq!(parse_echo6_reply(&reply, 0xabce), None, "another ident");
        assert_eq!(
            parse_echo6_reply(&buf, 0xabcd),
            None,
            "a request is no reply"
        );
        // An ICMPv4 reply type is not an ICMPv6 reply, and the reverse.
        reply[0] = ECHO_REPLY;
        assert_eq!(parse_echo6_reply(&reply, 0xabcd), None);
        assert!(parse_echo_reply(&reply, 0xabcd).is_some());
        reply[0] = ECHO6_REPLY;
        assert_eq!(parse_echo_reply(&reply, 0xabcd), None);
    }

    #[test]
    fn golden_echo_request() {
        let mut b = [0u8; 32];
        assert!(emit_echo_request(
            &mut b,
            0x1234,
            0x1_0005,
            Duration::from_nanos(7)
        ));
        let expect: [u8; 32] = [
            8, 0, 0, 0, 0x12, 0x34, 0x00, 0x05, // type, code, checksum (below), id, seq
            0x62, 0x6c, 0x70, 0x69, 0, 0, 0, 0, // "blpi", reserved
            0, 0, 0, 0, 0, 1, 0, 5, // seq
            0, 0, 0, 0, 0, 0, 0, 7, // send time
        ];
        assert_eq!(b[4..], expect[4..]);
        assert_eq!(checksum::of(&b), 0, "a correct checksum sums to zero");
        assert!(!emit_echo_request(&mut [0u8; 31], 1, 1, Duration::ZERO));
    }

    #[test]
    fn reply_must_match_ident_type_and_seq() {
        let mut b = [0u8; 40];
        emit_echo_request(&mut b, 0x1234, 9, Duration::from_secs(3));
        assert_eq!(
            parse_echo_reply(&b, 0x1234),
            None,
            "a request is not a reply"
        );
        b[0] = ECHO_REPLY;
        assert_eq!(
            parse_echo_reply(&b, 0x1234),
            Some(EchoReply {
                seq: 9,
                client_send: Duration::from_secs(3)
            })
        );
        assert_eq!(parse_echo_reply(&b, 0x1235), None);
        let mut wrong_seq = b;
        wrong_seq[7] = 10;
        assert_eq!(parse_echo_reply(&wrong_seq, 0x1234), None);
        for len in 0..MIN_LEN {
            assert_eq!(parse_echo_reply(&b[..len], 0x1234), None);
        }
    }

    #[test]
    fn ipv4_header_is_skipped_and_checked() {
        let mut icmp = [0u8; 32];
        emit_echo_request(&mut icmp, 7, 1, Duration::from_secs(1));
        icmp[0] = ECHO_REPLY;
        let mut pkt = vec![
            0x45, 0, 0, 52, 0, 0, 0, 0, 64, 1, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
        ];
        pkt.extend_from_slice(&icmp);
        assert_eq!(parse_ipv4_echo_reply(&pkt, 7).map(|r| r.seq), Some(1));
        pkt[9] = 17; // UDP
        assert_eq!(parse_ipv4_echo_reply(&pkt, 7), None);
        assert_eq!(parse_ipv4_echo_reply(&[0x4f], 7), None);
        assert_eq!(parse_ipv4_echo_reply(&[], 7), None);
    }
}
