//! Entry points for the fuzz targets (`fuzz/fuzz_targets/engine_*`): the
//! private receive paths, driven on arbitrary input without sockets. Not API.

use super::datagram::parse_incoming;
use super::recv_flow::RecvFlow;
use std::time::Duration;

/// The UDP reverse client's receive path (`reverse_client::receive`) over
/// `datagrams` received 1 ms apart: every datagram is parsed and accounted,
/// a negative sequence number finalizes the flow. Returns the datagrams
/// accounted and the ones that did not parse.
pub fn reverse_client_receive(datagrams: &[&[u8]]) -> (u64, u64) {
    let mut events = Vec::new();
    let mut flow = RecvFlow::new(
        1,
        Duration::from_secs(1_800_000_000),
        Some(Duration::from_millis(5)),
    );
    let mut accounted = 0;
    for (i, d) in datagrams.iter().enumerate() {
        let rx = Duration::from_secs(1_800_000_000) + Duration::from_millis(i as u64);
        match parse_incoming(d) {
            Ok(inc) => {
                flow.account(inc.seqno.unsigned_abs(), inc.sent, rx, d.len(), &mut events);
                accounted += 1;
                if inc.seqno < 0 {
                    break;
                }
            }
            Err(_) => flow.bad += 1,
        }
    }
    let end = Duration::from_secs(1_800_000_000) + Duration::from_millis(datagrams.len() as u64);
    let _ = flow.finalize(end, &mut events);
    (accounted, flow.bad)
}
