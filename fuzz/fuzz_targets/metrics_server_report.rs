//! Data a peer sends to bloatlab-metrics: the `ServerSideReport` JSON (inside
//! the BLXR frame) and the UDP AckFIN relayed as `Server Report:`.
//! Any bytes give a typed error or a valid report, never a panic; an accepted
//! report re-serialises and re-parses to the same value; every accepted
//! histogram answers percentiles; any AckFIN formats as a console line.
#![no_main]

use bloatlab_metrics::json::ServerSideReport;
use bloatlab_metrics::{Console, LatencyHistogram, StreamLabel, UdpRecvSnapshot};
use bloatlab_wire::{AckFin, ServerReportRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = ServerSideReport::from_json(data) {
        let again = ServerSideReport::from_json(&r.to_json()).expect("an accepted report reloads");
        assert_eq!(again, r);
        for rec in r.intervals.iter().chain(std::iter::once(&r.summary)) {
            let hists = [
                rec.tcp_recv.as_ref().and_then(|t| t.burst_latency.as_ref()),
                rec.udp_recv.as_ref().and_then(|u| u.latency.as_ref()),
            ];
            for h in hists.into_iter().flatten().filter_map(|l| l.histogram.as_ref()) {
                let h = LatencyHistogram::from_record(h).expect("validated on load");
                let _ = (h.percentile(50.0), h.percentile(99.9), h.to_record());
            }
        }
    }
    if let Ok(repr) = ServerReportRepr::parse(&AckFin::new_unchecked(data)) {
        let s = UdpRecvSnapshot::from_server_report(&repr);
        let c = Console::default();
        let _ = c.udp_recv_line(StreamLabel::Id(1), &s, repr.ext.is_some());
        let _ = c.udp_recv_line(StreamLabel::Id(1), &s, false);
    }
});
