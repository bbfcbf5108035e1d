//! The Internet checksum (RFC 1071), the one implementation every crate
//! uses: ICMP echo (probes), IPv4 headers and TCP/UDP checksums (the lab's
//! offloads and the emulator's CE marking).
//!
//! The sum is of 16-bit big-endian words in one's complement arithmetic.
//! Summing 32-bit words into a 64-bit accumulator and folding at the end
//! gives the same result with half the adds (RFC 1071 §2, "parallel
//! summation"; 2^16 = 1 modulo 0xffff, so the two halves of a 32-bit word
//! count alike). A running sum may be continued with [`add`] as long as
//! every piece but the last has an even length.

/// Adds `data` to the running sum `acc` (unfolded). An odd trailing byte is
/// padded with a zero byte (RFC 1071 §4.1).
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

/// The checksum of `data`: the complement of its folded sum. A buffer that
/// carries its own correct checksum gives 0.
pub fn of(data: &[u8]) -> u16 {
    !fold(add(0, data))
}

/// The IPv4 header checksum (RFC 791) of `header`, skipping its checksum
/// field (bytes 10-11) so it can be computed over a header in place.
pub fn ipv4_header(header: &[u8]) -> u16 {
    let field = 10.min(header.len())..12.min(header.len());
    !fold(add(add(0, &header[..field.start]), &header[field.end..]))
}

/// Writes the checksum of the IPv4 header `header` (exactly the header,
/// options included) into its checksum field; a slice too short to hold
/// the field is left alone.
pub fn fix_ipv4_header(header: &mut [u8]) {
    let c = ipv4_header(header);
    if let Some(field) = header.get_mut(10..12) {
        field.copy_from_slice(&c.to_be_bytes());
    }
}

/// Updates a checksum after one 16-bit word changed from `old_word` to
/// `new_word`, without summing the rest again: RFC 1624 eqn. 3,
/// HC' = ~(~HC + ~m + m').
pub fn update(old_sum: u16, old_word: u16, new_word: u16) -> u16 {
    let sum = u64::from(!old_sum) + u64::from(!old_word) + u64::from(new_word);
    !fold(sum)
}

/// The IPv4 pseudo-header of RFC 793 / RFC 768 (addresses, protocol and
/// transport length) of the IPv4 packet `ip`, as a running sum. `ip` must
/// hold at least the 20-byte fixed header.
pub fn pseudo_v4(ip: &[u8], proto: u8, l4_len: usize) -> u64 {
    add(0, &ip[12..20]) + u64::from(proto) + l4_len as u64
}

/// The IPv6 pseudo-header of RFC 8200 §8.1 (addresses, upper-layer length
/// and next header) of the IPv6 packet `ip`, as a running sum. `ip` must
/// hold at least the 40-byte fixed header.
pub fn pseudo_v6(ip: &[u8], proto: u8, l4_len: usize) -> u64 {
    add(0, &ip[8..40]) + u64::from(proto) + l4_len as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sum as RFC 1071 defines it: 16-bit words, one at a time.
    fn textbook(data: &[u8]) -> u16 {
        let mut sum: u32 = data
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(add(0, &d)), 0xddf2);
        assert_eq!(of(&d), !0xddf2);
        // An odd length pads with a zero byte; a sum continued at an even
        // offset is the same sum.
        assert_eq!(of(&[0xff]), !0xff00);
        assert_eq!(
            fold(add(0, &d[..7])),
            fold(add(0, &[0, 1, 0xf2, 3, 0xf4, 0xf5, 0xf6, 0]))
        );
        assert_eq!(fold(add(add(0, &d[..2]), &d[2..])), 0xddf2);
    }

    #[test]
    fn parallel_summation_matches_the_textbook_for_every_length() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 151 + 7) as u8).collect();
        for n in 0..data.len() {
            assert_eq!(of(&data[..n]), textbook(&data[..n]), "length {n}");
        }
        // Carries: all ones, many words.
        assert_eq!(of(&[0xff; 1001]), textbook(&[0xff; 1001]));
    }

    #[test]
    fn ipv4_header_skips_its_own_field_and_verifies_to_zero() {
        // A textbook header (45 00 00 73 ... c0 a8 00 01 c0 a8 00 c7) whose
        // checksum is b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xde, 0xad, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_header(&h), 0xb861, "whatever the field holds");
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(of(&h), 0);
        // A short header does not panic.
        assert_eq!(ipv4_header(&h[..11]), !fold(add(0, &h[..10])));
        assert_eq!(ipv4_header(&[]), 0xffff);
    }

    #[test]
    fn incremental_update_matches_a_full_recompute() {
        let mut h: Vec<u8> = (0..20u8).map(|i| i.wrapping_mul(37)).collect();
        for new in [0u16, 1, 0x00ff, 0x7fff, 0xfffe, 0xffff] {
            let old_word = u16::from_be_bytes([h[0], h[1]]);
            let old_sum = ipv4_header(&h);
            h[..2].copy_from_slice(&new.to_be_bytes());
            let upd = update(old_sum, old_word, new);
            // One's complement has two zeros: the update may give 0xffff
            // where a recompute gives 0x0000 (RFC 1624 §3); both verify.
            let full = ipv4_header(&h);
            assert!(upd == full || (upd, full) == (0xffff, 0) || (upd, full) == (0, 0xffff));
        }
    }

    #[test]
    fn pseudo_headers_sum_addresses_protocol_and_length() {
        let mut v4 = [0u8; 20];
        v4[12..20].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        assert_eq!(
            fold(pseudo_v4(&v4, 6, 40)),
            0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 + 40
        );
        let mut v6 = [0u8; 40];
        v6[23] = 1;
        v6[39] = 2;
        assert_eq!(fold(pseudo_v6(&v6, 17, 8)), 1 + 2 + 17 + 8);
    }
}
