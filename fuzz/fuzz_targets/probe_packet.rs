//! Probe datagram parser, ICMP echo parser and the responder core on arbitrary bytes:
//! none may panic, and anything the responder answers must parse back as a reply.
#![no_main]

use std::time::Duration;

use bloatlab_probe::icmp;
use bloatlab_probe::packet::{Kind, Repr, is_probe_request};
use bloatlab_probe::responder::ResponderCore;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = Repr::parse_bytes(data);
    if let Ok(r) = parsed {
        let mut buf = vec![0u8; data.len()];
        r.emit(&mut buf).expect("a parsed datagram re-emits at its own length");
        assert_eq!(Repr::parse_bytes(&buf), Ok(r));
    }
    if matches!(parsed, Ok(Repr { kind: Kind::Request, .. })) {
        assert!(is_probe_request(data), "the cheap check accepts every valid request");
    }
    let _ = icmp::parse_echo_reply(data, 0x1234);
    let _ = icmp::parse_ipv4_echo_reply(data, 0x1234);
    let mut core = ResponderCore::new(1);
    let mut dgram = data.to_vec();
    let from = "127.0.0.1:9".parse().unwrap();
    if core
        .respond(from, &mut dgram, Duration::from_secs(1), false, Duration::from_secs(2))
        .is_ok()
    {
        assert_eq!(dgram.len(), data.len(), "replies never grow");
        let reply = Repr::parse_bytes(&dgram).expect("our reply parses");
        assert_eq!(reply.kind, Kind::Reply);
    }
});
