//! The qdisc stats parser (`RTM_NEWQDISC` payloads from the kernel) on
//! arbitrary bytes, alone and inside netlink message framing.
#![no_main]

use bloatlab_lab::netlink::msg::Messages;
use bloatlab_lab::netlink::qdisc_stats::QdiscStats;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = QdiscStats::parse(data);
    for m in Messages::new(data) {
        let _ = QdiscStats::parse(m.payload);
    }
});
