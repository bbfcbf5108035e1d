//! `--json` for UDP: METRICS' versioned [`Document`] filled from what the
//! reporter collected.
//!
//! * Client: one `send` stream record per `-P` stream (intervals and
//!   summary with datagrams, write errors, PPS), a `[SUM]` record with
//!   `-P > 1`, and per stream a `server_side` report: the bloatlab server's
//!   own [`ServerSideReport`] (from the BLXR frame: loss, jitter, latency
//!   with percentiles and the full histogram, per interval and total), or,
//!   from an iperf 2 server, the AckFIN's numbers as a summary-only report
//!   whose `server_version` is [`ACKFIN_SOURCE`].
//!   With `-R -P N` (the client receives), `sum` is the receive `[SUM]`;
//!   `--full-duplex -P N` keeps the send sum there.
//! * Server: one document per finished test, as the TCP server: a flow's
//!   `receive` stream record, or for a `-P N` client one document with a
//!   `receive` record per flow and their `sum`.

use super::recv_sum::RecvSum;
use super::report::{Collected, FinishedTest, StreamResult};
use bloatlab_metrics::json::{
    Direction, Document, IntervalRecord, Protocol, Role, SCHEMA_VERSION, ServerSideReport,
    StreamRecord, SumRecord, TestInfo,
};
use bloatlab_metrics::udp_recv::UdpRecvSnapshot;
use bloatlab_metrics::udp_send::UdpSendSnapshot;

/// `server_version` of a server-side report rebuilt from an iperf 2 AckFIN.
pub const ACKFIN_SOURCE: &str = "iperf 2 AckFIN server_hdr";

/// The `receive` record of stream `id` (a server flow, or a client's `-R`
/// / full-duplex half).
fn recv_record(id: u32, r: &StreamResult, total: &UdpRecvSnapshot) -> StreamRecord {
    StreamRecord {
        id,
        direction: Direction::Receive,
        local: None,
        remote: None,
        intervals: r
            .recv_intervals
            .iter()
            .map(|s| IntervalRecord::from_udp_recv(s, false))
            .collect(),
        summary: IntervalRecord::from_udp_recv(total, true),
        server_side: None,
        sender_congestion_control: None,
        peer_sender_tcp_info: None,
        ecn_negotiated: None,
    }
}

/// The `send` record of stream `id` (a client's stream, or a server's
/// `-R` sender).
fn send_record(id: u32, r: &StreamResult, total: &UdpSendSnapshot) -> StreamRecord {
    StreamRecord {
        id,
        direction: Direction::Send,
        local: None,
        remote: None,
        intervals: r
            .send_intervals
            .iter()
            .map(IntervalRecord::from_udp_send)
            .collect(),
        summary: IntervalRecord::from_udp_send(total),
        server_side: None,
        sender_congestion_control: None,
        peer_sender_tcp_info: None,
        ecn_negotiated: None,
    }
}

/// `local`/`remote` of a client's stream record.
fn with_addresses(mut rec: StreamRecord, r: &StreamResult) -> StreamRecord {
    rec.local = r.info.as_ref().map(|i| i.local.to_string());
    rec.remote = r.info.as_ref().map(|i| i.peer.to_string());
    rec
}

fn server_side(id: u32, r: &StreamResult) -> Option<ServerSideReport> {
    if let Some(s) = &r.server_side {
        return Some(s.clone());
    }
    r.server_snapshot.as_ref().map(|snap| ServerSideReport {
        schema_version: SCHEMA_VERSION,
        server_version: ACKFIN_SOURCE.to_owned(),
        stream_id: id,
        intervals: Vec::new(),
        summary: IntervalRecord::from_udp_recv(snap, false),
        // The AckFIN has no CPU field; a UDP server reports none yet.
        cpu: None,
    })
}

/// The client's document.
pub fn client_document(c: &Collected, test: &TestInfo) -> Document {
    let mut doc = Document::new(Role::Client, Protocol::Udp, test.clone());
    for (id, r) in &c.streams {
        if let Some(total) = &r.recv_total {
            // A reverse (-R) or full-duplex stream: this client received.
            doc.streams
                .push(with_addresses(recv_record(*id, r, total), r));
        }
        let Some(total) = &r.send_total else {
            continue;
        };
        let mut rec = with_addresses(send_record(*id, r, total), r);
        rec.server_side = server_side(*id, r);
        doc.streams.push(rec);
    }
    if let Some(sum) = &c.sum_total {
        doc.sum = Some(SumRecord {
            direction: Direction::Send,
            streams: u32::try_from(c.streams.len()).unwrap_or(u32::MAX),
            intervals: c
                .sum_intervals
                .iter()
                .map(IntervalRecord::from_udp_send)
                .collect(),
            summary: IntervalRecord::from_udp_send(sum),
        });
    } else if let Some(sum) = &c.recv_sum {
        doc.sum = recv_sum_record(sum);
    }
    doc
}

/// The `sum` record of a receive `[SUM]`, once its total exists.
fn recv_sum_record(sum: &RecvSum) -> Option<SumRecord> {
    let total = sum.total.as_ref()?;
    Some(SumRecord {
        direction: Direction::Receive,
        streams: sum.size(),
        intervals: sum
            .intervals
            .iter()
            .map(|s| IntervalRecord::from_udp_recv(s, false))
            .collect(),
        summary: IntervalRecord::from_udp_recv(total, true),
    })
}

/// The server's document for a finished test: one flow, or every flow of
/// a `-P N` client with their `sum`.
pub fn server_test_document(t: &FinishedTest, test: &TestInfo) -> Option<Document> {
    let Some(sum) = &t.sum else {
        let (id, r) = t.streams.first()?;
        return server_document(*id, r, test);
    };
    let mut test = test.clone();
    if let Some(i) = t.streams.iter().find_map(|(_, r)| r.info.as_ref()) {
        test.local = Some(i.local.to_string());
        test.remote = Some(i.peer.ip().to_string());
    }
    test.parallel = sum.size();
    let mut doc = Document::new(Role::Server, Protocol::Udp, test);
    for (id, r) in &t.streams {
        if let Some(total) = &r.recv_total {
            doc.streams
                .push(with_addresses(recv_record(*id, r, total), r));
        }
    }
    doc.sum = recv_sum_record(sum);
    Some(doc)
}

/// The server's document for one finished flow.
pub fn server_document(id: u32, r: &StreamResult, test: &TestInfo) -> Option<Document> {
    let Some(total) = r.recv_total.as_ref() else {
        return server_send_document(id, r, test);
    };
    let mut test = test.clone();
    if let Some(i) = &r.info {
        test.local = Some(i.local.to_string());
        test.remote = Some(i.peer.to_string());
    }
    let mut doc = Document::new(Role::Server, Protocol::Udp, test);
    doc.streams.push(recv_record(id, r, total));
    Some(doc)
}

/// The server's document for a reverse (`-R`) test it sent.
fn server_send_document(id: u32, r: &StreamResult, test: &TestInfo) -> Option<Document> {
    let total = r.send_total.as_ref()?;
    let mut test = test.clone();
    if let Some(i) = &r.info {
        test.local = Some(i.local.to_string());
        test.remote = Some(i.peer.to_string());
    }
    test.reverse = true;
    let mut doc = Document::new(Role::Server, Protocol::Udp, test);
    doc.streams.push(send_record(id, r, total));
    Some(doc)
}
