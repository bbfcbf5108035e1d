//! Packet builders and checkers shared by the offload tests.

use super::csum;

pub const SRC: [u8; 4] = [10, 77, 0, 1];
pub const DST: [u8; 4] = [10, 77, 0, 2];
pub const ACK: u8 = 0x10;
pub const PSH: u8 = 0x08;
pub const FIN: u8 = 0x01;
pub const CWR: u8 = 0x80;

/// TCP timestamps option padded to 12 bytes (what Linux sends).
const TS_OPTION: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];

/// An IPv4/TCP packet 10.77.0.1:40000 -> 10.77.0.2:5001 with timestamps,
/// DF, ECT(0), valid checksums.
pub fn tcp(seq: u32, flags: u8, id: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 52 + payload.len()];
    p[0] = 0x45;
    p[1] = 0x02;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&SRC);
    p[16..20].copy_from_slice(&DST);
    csum::fix_ipv4_header(&mut p[..20]);
    p[20..22].copy_from_slice(&40000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5001u16.to_be_bytes());
    p[24..28].copy_from_slice(&seq.to_be_bytes());
    p[28..32].copy_from_slice(&777u32.to_be_bytes());
    p[32] = 8 << 4;
    p[33] = flags;
    p[34..36].copy_from_slice(&502u16.to_be_bytes());
    p[40..52].copy_from_slice(&TS_OPTION);
    p[52..].copy_from_slice(payload);
    let c = !csum::fold(csum::add(csum::pseudo_v4(&p, 6, p.len() - 20), &p[20..]));
    p[36..38].copy_from_slice(&c.to_be_bytes());
    p
}

/// An IPv6/TCP packet fd00:77::1:40000 -> fd00:77::2:5001 with
/// timestamps, flow label 0x12345, ECT(0), a valid checksum.
pub fn tcp6(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 72 + payload.len()];
    // Version 6, traffic class 0x02 (ECT(0)), flow label 0x12345.
    p[..4].copy_from_slice(&[0x60, 0x21, 0x23, 0x45]);
    let len = (p.len() - 40) as u16;
    p[4..6].copy_from_slice(&len.to_be_bytes());
    p[6] = 6;
    p[7] = 64;
    p[8..10].copy_from_slice(&[0xfd, 0x00]);
    p[10..12].copy_from_slice(&[0x00, 0x77]);
    p[23] = 1;
    p[24..26].copy_from_slice(&[0xfd, 0x00]);
    p[26..28].copy_from_slice(&[0x00, 0x77]);
    p[39] = 2;
    p[40..42].copy_from_slice(&40000u16.to_be_bytes());
    p[42..44].copy_from_slice(&5001u16.to_be_bytes());
    p[44..48].copy_from_slice(&seq.to_be_bytes());
    p[48..52].copy_from_slice(&777u32.to_be_bytes());
    p[52] = 8 << 4;
    p[53] = flags;
    p[54..56].copy_from_slice(&502u16.to_be_bytes());
    p[60..72].copy_from_slice(&TS_OPTION);
    p[72..].copy_from_slice(payload);
    let c = !csum::fold(csum::add(csum::pseudo_v6(&p, 6, p.len() - 40), &p[40..]));
    p[56..58].copy_from_slice(&c.to_be_bytes());
    p
}

/// True when the TCP checksum of an IPv6 packet verifies.
pub fn checksums_ok6(p: &[u8]) -> bool {
    csum::fold(csum::add(csum::pseudo_v6(p, p[6], p.len() - 40), &p[40..])) == 0xffff
}

/// Payload bytes that differ at every offset.
pub fn payload(len: usize, from: usize) -> Vec<u8> {
    (from..from + len)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect()
}

/// True when both the IPv4 header checksum and the transport checksum
/// verify.
pub fn checksums_ok(p: &[u8]) -> bool {
    let ihl = usize::from(p[0] & 0x0f) * 4;
    csum::fold(csum::add(0, &p[..ihl])) == 0xffff
        && csum::fold(csum::add(
            csum::pseudo_v4(p, p[9], p.len() - ihl),
            &p[ihl..],
        )) == 0xffff
}
