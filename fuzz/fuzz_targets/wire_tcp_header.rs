//! TCP test header: the length rule, the streaming helper, the view and the
//! parser never panic, and whatever parses re-emits to an equal `Repr`.
#![no_main]

use bloatlab_wire::{TcpTestHeader, TcpTestHeaderRepr, header_len_from_flags, tcp_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 4 {
        let _ = header_len_from_flags(u32::from_be_bytes([data[0], data[1], data[2], data[3]]));
    }
    let needed = tcp_header::bytes_needed(data);
    let v = TcpTestHeader::new_unchecked(data);
    let _ = (
        v.header_len(),
        v.permit_key(),
        v.start_fq(),
        v.isoch_settings(),
    );
    if let Ok(r) = TcpTestHeaderRepr::parse(&v) {
        assert_eq!(needed, Ok(0), "a parsed header must be complete");
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut TcpTestHeader::new_unchecked(&mut out[..]));
        let back = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&out[..]));
        assert_eq!(back, Ok(r));
    }
});
