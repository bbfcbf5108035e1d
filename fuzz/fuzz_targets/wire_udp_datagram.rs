//! UDP datagram header: parse never panics; parse -> emit -> parse is stable.
#![no_main]

use bloatlab_wire::{UdpDatagram, UdpDatagramRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let v = UdpDatagram::new_unchecked(data);
    let _ = (
        v.seqno(),
        v.is_fin(),
        v.advertised_len(),
        v.isoch(),
        v.start_fq(),
        v.isoch_settings(),
    );
    if let Ok(r) = UdpDatagramRepr::parse(&v) {
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut UdpDatagram::new_unchecked(&mut out[..]));
        let back = UdpDatagramRepr::parse(&UdpDatagram::new_unchecked(&out[..])).expect("re-parse");
        // Emit writes exactly the blocks the Repr holds, so the re-parse is identical.
        assert_eq!(back, r);
    }
});
