//! Engine-side parsers: iperf 2 option values (`-l 128K`, `-b 10m`, `-t`,
//! `-S`), a client's test header as the server interprets it, and the bytes
//! a client drains after its shutdown (optional ack + BLXR report frame).
#![no_main]

use bloatlab_engine::suffix;
use bloatlab_engine::tcp::handshake::{find_report, request_of};
use bloatlab_wire::{TcpTestHeader, TcpTestHeaderRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = suffix::parse_bytes(text);
        let _ = suffix::parse_rate(text);
        let _ = suffix::parse_seconds(text);
        let _ = suffix::parse_tos(text);
    }
    if let Ok(h) = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(data)) {
        let req = request_of(data.len(), &h, Some(data));
        assert!(req.parallel >= 1);
    }
    let _ = find_report(data);
});
