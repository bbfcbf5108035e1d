//! A TUN read with offloads (`virtio_net_hdr` + packet): any bytes give an
//! error or wire packets; those packets, coalesced for the output TUN and
//! cut again, come back byte for byte (per flow, in order); never a panic.
//! Inputs starting with 0 build a well-formed IPv4/TCP TSO frame from the
//! rest (segment size, flags, TOS, payload), so the fuzzer reaches the
//! segmentation and coalescing paths without a seed corpus.
#![no_main]

use bloatlab_lab::offload::{Coalescer, split};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

/// Packets grouped by addresses + first 4 bytes after the IPv4 header.
fn per_flow(pkts: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Vec<Vec<u8>>> {
    let mut m: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    for p in pkts {
        let key = if p.len() >= 20 && p[0] >> 4 == 4 && p[9] == 6 {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let mut k = p[12..20].to_vec();
            k.extend_from_slice(p.get(ihl..ihl + 4).unwrap_or(&[]));
            k
        } else {
            Vec::new()
        };
        m.entry(key).or_default().push(p.clone());
    }
    m
}

/// `[mss_hi, mss_lo, tcp_flags, tos, gso_type, payload...]` as a frame.
fn built_frame(d: &[u8]) -> Vec<u8> {
    let field = |i: usize| d.get(i).copied().unwrap_or(0);
    let payload = d.get(5..).unwrap_or(&[]);
    let mut f = vec![0u8; 10 + 52];
    f[0] = 1; // NEEDS_CSUM
    f[1] = field(4) & 0x81; // NONE or TCPV4, maybe the ECN bit
    f[2..4].copy_from_slice(&52u16.to_ne_bytes());
    f[4..6].copy_from_slice(&u16::from_be_bytes([field(0), field(1)]).to_ne_bytes());
    f[6..8].copy_from_slice(&20u16.to_ne_bytes());
    f[8..10].copy_from_slice(&16u16.to_ne_bytes());
    let ip = &mut f[10..];
    ip[0] = 0x45;
    ip[1] = field(3);
    ip[2..4].copy_from_slice(&((52 + payload.len()).min(65_535) as u16).to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 6;
    ip[12..20].copy_from_slice(&[10, 77, 0, 1, 10, 77, 0, 2]);
    ip[20..24].copy_from_slice(&[0x9c, 0x40, 0x13, 0x89]);
    ip[32] = 8 << 4;
    ip[33] = field(2);
    ip[40..44].copy_from_slice(&[1, 1, 8, 10]);
    f.extend_from_slice(payload);
    f
}

fuzz_target!(|data: &[u8]| {
    let frame = match data.split_first() {
        Some((0, rest)) => built_frame(rest),
        _ => data.to_vec(),
    };
    let mut wire = Vec::new();
    if split(&frame, &mut |p| wire.push(p)).is_err() {
        return;
    }
    let mut frames = Vec::new();
    let mut c = Coalescer::new();
    let mut emit = |f: bloatlab_lab::offload::Frame<'_>| frames.push((f.bytes.to_vec(), f.packets));
    for p in &wire {
        c.push(p, &mut emit);
    }
    c.flush(&mut emit);
    let mut again = Vec::new();
    for (f, n) in &frames {
        let got = split(f, &mut |p| again.push(p)).expect("our own frame splits");
        assert_eq!(got, *n);
    }
    assert_eq!(per_flow(&again), per_flow(&wire));
});
