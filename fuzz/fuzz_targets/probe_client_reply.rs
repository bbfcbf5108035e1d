//! The probe client's reply handling: arbitrary datagrams parsed as replies
//! (as the UDP transport does) and fed to a session that has sent probes,
//! then timeouts and the report. Nothing may panic and the counts must add up.
#![no_main]

use std::time::Duration;

use bloatlab_probe::packet::{Kind, Repr};
use bloatlab_probe::report::Report;
use bloatlab_probe::session::{Config, Limit, Reply, Session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t0 = Duration::from_secs(1_800_000_000);
    let mut s = Session::new(Config::new(Limit::Count(32), 7), t0);
    let mut now = t0;
    while let Some(t) = s.poll_transmit(now) {
        let _ = t;
        now += Duration::from_millis(10);
    }
    // Datagrams of 80..=160 bytes, sliced from the input.
    for chunk in data.chunks(96) {
        let Ok(r) = Repr::parse_bytes(chunk) else { continue };
        if r.kind != Kind::Reply {
            continue;
        }
        now += Duration::from_micros(100);
        let reply = Reply {
            session: Some(r.session),
            seq: r.seq,
            client_send: r.client_send,
            server_rx: r.server_rx,
            server_tx: r.server_tx,
            rx_count: Some(r.rx_count),
            seen: Some(r.seen),
            clock_domain: r.clock_domain,
        };
        let _ = s.on_reply(now, &reply);
    }
    s.handle_timeout(now + Duration::from_secs(60));
    assert!(s.answered() <= s.sent());
    let report: Report = s.finish();
    let sum = report.summary();
    assert!(sum.received <= sum.sent);
});
