//! The UDP reverse client's receive path (parse + per-flow accounting + the
//! final report) on arbitrary datagrams. Input: datagrams separated by the
//! byte pair 0xfe 0xfe (so a seed is a capture of a server's stream).
#![no_main]

use bloatlab_engine::udp::fuzzing::reverse_client_receive;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        if data[i] == 0xfe && data[i + 1] == 0xfe {
            parts.push(&data[start..i]);
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    parts.push(&data[start..]);
    let (accounted, bad) = reverse_client_receive(&parts);
    assert!(accounted + bad <= parts.len() as u64);
});
