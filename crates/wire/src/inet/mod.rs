//! Internet headers as zero-copy views: IPv4 (RFC 791), IPv6 (RFC 8200 §3),
//! TCP (RFC 9293 §3.1) and UDP (RFC 768).
//!
//! These are for code that reads and edits packets in place (the lab's TSO
//! splitting and GRO-like coalescing): accessors for the fields it needs,
//! setters when the buffer is mutable, checksum helpers, and the crate's
//! usual contract (`new_unchecked`, `new_checked`, `check_len`, byte ranges
//! in `field`; accessors past the end of a short buffer read 0 and drop
//! writes; nothing panics). There is no `Repr`: nobody builds these headers
//! from parsed values, they are cut, copied and patched.
//!
//! `check_len` checks lengths only, not the version nibble or the protocol:
//! callers dispatch on those themselves and say why a packet is not theirs.
//!
//! The emulator's flow hashing and ECN marking use `bloatlab_emu::packet`'s
//! `IpView`, built on these views, which also follows IPv6 extension headers.

pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use tcp::TcpPacket;
pub use udp::UdpPacket;

/// IANA protocol number of TCP (the IPv4 protocol / IPv6 next header field).
pub const PROTO_TCP: u8 = 6;
/// IANA protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// The ECN codepoint "congestion experienced" (RFC 3168 §5), the low two
/// bits of the IPv4 TOS byte or IPv6 traffic class.
pub const ECN_CE: u8 = 0b11;

/// Source and destination ports at the start of a transport header: the
/// first four bytes of TCP, UDP, UDP-Lite, SCTP and DCCP alike. `None` when
/// fewer than four bytes are there.
pub fn ports(l4: &[u8]) -> Option<(u16, u16)> {
    match l4.get(..4)? {
        &[a, b, c, d] => Some((u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]))),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
