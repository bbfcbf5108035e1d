//! `client_hdr_ack`: parse never panics; parse -> emit -> parse is stable.
#![no_main]

use bloatlab_wire::{ClientHdrAck, ClientHdrAckRepr, ack};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ack::bytes_needed(data);
    if let Ok(r) = ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(data)) {
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut ClientHdrAck::new_unchecked(&mut out[..]));
        assert_eq!(
            ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(&out[..])),
            Ok(r)
        );
    }
});
