//! Fuzz the emulator's IPv4/IPv6 header view, flow hashing and CE marking: never panic, and a
//! CE mark keeps a valid IPv4 header checksum valid.
#![no_main]

use bloatlab_emu::packet::{Ecn, FlowMeta, IpView, set_ce};
use bloatlab_wire::checksum;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = FlowMeta::of(data, 0x1234);
    let Ok(v) = IpView::parse(data) else {
        let mut copy = data.to_vec();
        assert!(!set_ce(&mut copy), "unparseable packets are never marked");
        assert_eq!(copy, data);
        return;
    };
    let _ = (v.src(), v.dst(), v.protocol(), v.ports(), v.ecn());
    let checksum_ok = v.version() == 4 && u16::from_be_bytes([data[10], data[11]]) == checksum::ipv4_header(&data[..usize::from(data[0] & 0x0f) * 4]);
    let mut copy = data.to_vec();
    let marked = set_ce(&mut copy);
    let after = IpView::parse(&copy).expect("marking keeps the header parseable");
    assert_eq!(marked, v.ecn() != Ecn::NotEct);
    if marked {
        assert_eq!(after.ecn(), Ecn::Ce);
    }
    if checksum_ok {
        let hlen = usize::from(copy[0] & 0x0f) * 4;
        assert_eq!(u16::from_be_bytes([copy[10], copy[11]]), checksum::ipv4_header(&copy[..hlen]));
    }
});
