//! The lab's netlink reply parsing: any bytes (a kernel reply we did not
//! expect, or a corrupted buffer) iterate to an end without panicking, every
//! message and attribute lies inside the input, and stats parse or not.
#![no_main]

use bloatlab_lab::netlink::msg::{Attrs, IFLA_STATS64, LinkStats, Messages};
use libfuzzer_sys::fuzz_target;

/// Size of `struct ifinfomsg`, which precedes a link message's attributes.
const IFINFOMSG: usize = 16;

fuzz_target!(|data: &[u8]| {
    let mut seen = 0usize;
    for m in Messages::new(data) {
        seen += m.payload.len() + 16;
        assert!(seen <= data.len(), "messages beyond the input");
        let _ = m.error_code();
        let attrs = m.payload.get(IFINFOMSG..).unwrap_or(&[]);
        for (ty, payload) in Attrs::new(attrs) {
            assert!(payload.len() <= attrs.len());
            if ty == IFLA_STATS64 {
                let _ = LinkStats::parse(payload);
            }
            // Nested attributes (IFLA_LINKINFO, TCA_OPTIONS) use the same layout.
            for (_, inner) in Attrs::new(payload) {
                assert!(inner.len() <= payload.len());
            }
        }
    }
});
