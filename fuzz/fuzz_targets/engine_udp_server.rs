//! The UDP server core fed arbitrary datagrams from a handful of sources at
//! arbitrary times: it must never panic, never grow past its flow limit,
//! and everything it sends must be what it claims: an AckFIN our parser
//! reads, or a return-routability cookie reply (udp/cookie.rs) to the
//! datagram's own source.
#![no_main]

use bloatlab_engine::config::{Protocol, ServerConfig};
use bloatlab_engine::udp::server::{Datagram, ServerCore};
use bloatlab_engine::udp::cookie;
use bloatlab_engine::udp::server_report::parse_ack_fin;
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let cfg = ServerConfig {
        protocol: Protocol::Udp,
        interval: Some(Duration::from_millis(100)),
        enhanced: true,
        ..ServerConfig::default()
    };
    let mut core = ServerCore::new(&cfg, 5001, Duration::from_secs(1));
    let mut now = Duration::from_secs(1_800_000_000);
    // Records: [source, time step (ms), len] then `len` bytes.
    let mut rest = data;
    while let [src, step, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (payload, next) = tail.split_at(n);
        now += Duration::from_millis(u64::from(*step));
        let d = Datagram {
            from: SocketAddr::from(([127, 0, 0, 1], 40_000 + u16::from(src % 8))),
            to: None,
            data: payload,
            wire_len: payload.len(),
            rx: now,
        };
        if let Some(out) = core.on_datagram(&d) {
            assert_eq!(out.to, d.from);
            let is_cookie = cookie::from_reply(&out.bytes).is_some();
            assert!(is_cookie || parse_ack_fin(&out.bytes).is_ok());
        }
        core.on_timer(now);
        // AckFINs of flows ended at their deadline (issue 19): to a flow's
        // own source, and nothing else.
        for out in core.take_outgoing() {
            assert!((40_000..40_008).contains(&out.to.port()));
            assert!(parse_ack_fin(&out.bytes).is_ok());
        }
        let _ = core.take_events();
        assert!(core.active_flows() <= 8);
        rest = next;
    }
});
