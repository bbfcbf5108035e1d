//! `--json` for TCP: METRICS' versioned [`Document`] (schema in
//! `bloatlab_metrics::json` and docs/metrics.md), filled from what the
//! reporter collected.
//!
//! * one [`StreamRecord`] per stream and direction (a full-duplex stream has
//!   a `send` and a `receive` record with the same id);
//! * `sum` with `-P > 1` (the sending side, or the receiving side for `-R`);
//! * on a client whose server is bloatlab, `server_side` of each sending
//!   stream holds the server's own measurements of that stream (burst
//!   latency and its histogram, Reads=Dist), relayed in the BLXR frame.

use super::Role;
use super::report::Collected;
use bloatlab_metrics::json::{
    Direction, Document, IntervalRecord, PeerSenderTcpInfoRecord, Protocol, Role as JsonRole,
    ServerSideReport, StreamRecord, SumRecord, TestInfo,
};

/// A bloatlab server's sender summary (flow query) as its JSON record.
pub fn peer_sender_record(s: &bloatlab_wire::SenderSummary) -> PeerSenderTcpInfoRecord {
    PeerSenderTcpInfoRecord {
        retransmits: u64::from(s.retransmits),
        rtt_us: s.rtt.as_micros() as u64,
        rttvar_us: s.rttvar.as_micros() as u64,
        min_rtt_us: s.min_rtt.map(|d| d.as_micros() as u64),
        cwnd_bytes: u64::from(s.cwnd_segments).saturating_mul(s.mss.0),
        bytes_acked: s.bytes_acked.0,
        delivered_ce: s.delivered_ce.map(u64::from),
        ecn_negotiated: s.ecn_negotiated,
        ecn_seen: s.ecn_seen,
    }
}

/// Builds the document.
pub fn document(c: &Collected, role: Role, test: TestInfo) -> Document {
    let role = match role {
        Role::Client => JsonRole::Client,
        Role::Server => JsonRole::Server,
    };
    let mut doc = Document::new(role, Protocol::Tcp, test);
    doc.cpu = c.cpu.clone();
    doc.peer_cpu = c.peer_cpu.clone();
    // Report the congestion control in effect (the kernel default when -Z is absent).
    if let Some(cc) = c.connections.values().find_map(|i| i.congestion.clone()) {
        doc.test.congestion_control = Some(cc);
    }
    // The peer's version, from `-X` on a client or the header on a server.
    if let Some(v) = c.connections.values().flat_map(|i| &i.tags).find_map(|t| {
        t.strip_prefix("(peer ")
            .and_then(|v| v.strip_suffix(')'))
            .map(str::to_owned)
    }) {
        doc.test.peer_version = Some(v);
    }
    // A bloatlab server names itself in its hello (downloads) or its report (uploads).
    doc.test.peer_software = c
        .peer_senders
        .values()
        .map(|h| h.server_version.clone())
        .chain(c.peer_reports.values().filter_map(|text| {
            ServerSideReport::from_json(text.as_bytes())
                .ok()
                .map(|r| r.server_version)
        }))
        .find(|v| !v.is_empty());
    for (&id, info) in &c.connections {
        let local = Some(info.local.to_string());
        let remote = Some(info.peer.to_string());
        if let Some(total) = c.send_totals.get(&id) {
            let server_side = c.peer_reports.get(&id).and_then(|text| {
                ServerSideReport::from_json(text.as_bytes())
                    .map_err(|e| tracing::warn!("stream {id}: server report ignored: {e}"))
                    .ok()
            });
            doc.streams.push(StreamRecord {
                id,
                direction: Direction::Send,
                local: local.clone(),
                remote: remote.clone(),
                intervals: c
                    .send_intervals
                    .iter()
                    .filter(|(s, _)| *s == id)
                    .map(|(_, x)| IntervalRecord::from_tcp_send(x))
                    .collect(),
                summary: IntervalRecord::from_tcp_send(total),
                server_side,
                sender_congestion_control: info.congestion.clone(),
                peer_sender_tcp_info: None,
                ecn_negotiated: info.ecn,
            });
        }
        if let Some(total) = c.recv_totals.get(&id) {
            let mut summary = IntervalRecord::from_tcp_recv(total, true);
            if let Some(r) = summary.tcp_recv.as_mut() {
                r.tcp_info = c.recv_tcp_info.get(&id).cloned();
            }
            doc.streams.push(StreamRecord {
                id,
                direction: Direction::Receive,
                local,
                remote,
                intervals: c
                    .recv_intervals
                    .iter()
                    .filter(|(s, _)| *s == id)
                    .map(|(_, x)| IntervalRecord::from_tcp_recv(x, false))
                    .collect(),
                summary,
                server_side: None,
                // A client's receive record: the server's sender, from its hello.
                sender_congestion_control: match role {
                    JsonRole::Client => c
                        .peer_senders
                        .get(&id)
                        .and_then(|h| h.congestion_control.clone()),
                    JsonRole::Server => None,
                },
                peer_sender_tcp_info: c.peer_sender_info.get(&id).map(peer_sender_record),
                ecn_negotiated: info.ecn,
            });
        }
    }
    let streams = c.connections.len() as u32;
    if streams > 1 {
        let send: Vec<IntervalRecord> = c
            .send_sums
            .iter()
            .map(IntervalRecord::from_tcp_send)
            .collect();
        let recv: Vec<IntervalRecord> = c
            .recv_sums
            .iter()
            .map(|s| IntervalRecord::from_tcp_recv(s, false))
            .collect();
        let (direction, mut records) = if send.is_empty() {
            (Direction::Receive, recv)
        } else {
            (Direction::Send, send)
        };
        // The whole-test sum is the last one the reporter produced.
        if let Some(summary) = records.pop() {
            doc.sum = Some(SumRecord {
                direction,
                streams,
                intervals: records,
                summary,
            });
        }
    }
    doc
}
