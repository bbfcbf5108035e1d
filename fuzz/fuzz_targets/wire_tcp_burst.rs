//! `TCP_burst_payload`: parse never panics; parse -> emit -> parse is stable.
#![no_main]

use bloatlab_wire::{TcpBurstHeader, TcpBurstRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let v = TcpBurstHeader::new_unchecked(data);
    let _ = (v.burst_period_us_raw(), v.seqno(), v.write_time());
    if let Ok(r) = TcpBurstRepr::parse(&v) {
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut TcpBurstHeader::new_unchecked(&mut out[..]));
        assert_eq!(
            TcpBurstRepr::parse(&TcpBurstHeader::new_unchecked(&out[..])),
            Ok(r)
        );
    }
});
