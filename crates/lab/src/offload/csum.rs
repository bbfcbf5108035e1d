//! The Internet checksum (RFC 1071): one's complement sum of 16-bit
//! big-endian words. Summing 32-bit words and folding gives the same
//! result (RFC 1071 section 2, "parallel summation") with half the adds.

/// Adds `data` to the running sum `acc` (unfolded).
pub fn add(acc: u64, data: &[u8]) -> u64 {
    let mut sum = acc;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum + u64::from(u32::from_be_bytes(tail))
}

/// Folds a running sum to 16 bits (not complemented).
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The IPv4 pseudo-header of RFC 793 / RFC 768: addresses, protocol and
/// transport length, as a running sum.
pub fn pseudo_v4(ip: &[u8], proto: u8, l4_len: usize) -> u64 {
    add(0, &ip[12..20]) + u64::from(proto) + l4_len as u64
}

/// The IPv6 pseudo-header of RFC 8200 §8.1: addresses, upper-layer
/// length and next header, as a running sum.
pub fn pseudo_v6(ip: &[u8], proto: u8, l4_len: usize) -> u64 {
    add(0, &ip[8..40]) + u64::from(proto) + l4_len as u64
}

/// Recomputes the IPv4 header checksum in place (the emulator's own
/// header checksum, which skips the checksum field).
pub fn fix_ipv4_header(ip: &mut [u8], ihl: usize) {
    let c = bloatlab_emu::packet::ipv4_header_checksum(&ip[..ihl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(add(0, &d)), 0xddf2);
        // Odd lengths pad with a zero byte; splitting at an even offset
        // does not change the sum.
        assert_eq!(
            fold(add(0, &d[..7])),
            fold(add(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0x00]))
        );
        assert_eq!(fold(add(add(0, &d[..2]), &d[2..])), 0xddf2);
    }

    #[test]
    fn ipv4_header_checksum_matches_the_textbook_header() {
        // 172.16.10.99 -> 172.16.10.12, checksum 0xb1e6.
        let mut h = [
            0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0xac, 0x10,
            0x0a, 0x63, 0xac, 0x10, 0x0a, 0x0c,
        ];
        fix_ipv4_header(&mut h, 20);
        assert_eq!(&h[10..12], &[0xb1, 0xe6]);
    }
}
