//! One load flow's `bloatlab client --json` document, read through the engine's own
//! types (`bloatlab_metrics::json::Document`, the producer's schema, validated on load)
//! rather than a private mirror, so producer and consumer cannot drift apart.
//!
//! Times in the document are seconds since the client's own test start; [`crate::collect`]
//! moves them onto the run's axis.

use std::time::Duration;

use bloatlab_metrics::json::{Direction as JsonDirection, Document, IntervalRecord, SchemaError};
use bloatlab_stats::TransferSample;
use bloatlab_units::Bytes;

/// A client document that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("unreadable client output: {0}")]
pub struct ClientDocError(#[from] pub SchemaError);

/// What the sender of a flow reported through `TCP_INFO` (sampled with the client's
/// `-e`). Every field is `None` when not measured, never 0 for "unknown".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SenderTcpInfo {
    /// Retransmitted segments over the whole flow.
    pub retransmits: Option<u64>,
    /// Segments delivered with an ECN CE mark (`tcpi_delivered_ce`), whole flow.
    pub delivered_ce: Option<u64>,
    /// Smallest smoothed RTT of the interval samples.
    pub rtt_min: Option<Duration>,
    /// Mean of the interval samples' smoothed RTTs.
    pub rtt_mean: Option<Duration>,
    /// Largest smoothed RTT of the interval samples.
    pub rtt_max: Option<Duration>,
}

/// What the receiving client's socket reported at the end of a download (`TCP_INFO`,
/// cumulative). `None` = not reported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReceiverTcpInfo {
    /// Data segments that arrived out of order (loss seen at the receiver).
    pub out_of_order_packets: Option<u64>,
    /// Segments received with an ECN CE mark.
    pub received_ce: Option<u64>,
    /// The receiver's RTT estimate.
    pub rcv_rtt: Option<Duration>,
}

/// What one `bloatlab client --json` run measured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientRun {
    /// Transfer intervals, times since the client's test start.
    pub samples: Vec<TransferSample>,
    /// Bytes of the whole test (the summary).
    pub total: Bytes,
    /// Retransmits summed over the sending streams (`None`: this end did not send, or
    /// did not sample `TCP_INFO`).
    pub retransmits: Option<u64>,
    /// `TCP_INFO` of this end's sending streams (uploads); all `None` on downloads,
    /// whose sender is the server.
    pub sender_tcp: SenderTcpInfo,
    /// `TCP_INFO` of this end's receiving streams (downloads), summed.
    pub receiver_tcp: ReceiverTcpInfo,
    /// A download's sender: the bloatlab server's sending sockets' final `TCP_INFO`,
    /// fetched by the client's flow query (docs/wire.md), summed over streams. All
    /// `None` on uploads and when the server is not bloatlab (not measured). Its RTT
    /// fields: `rtt_min` is the kernel's `tcpi_min_rtt`, `rtt_max` the smoothed RTT
    /// when the sender stopped (no interval samples exist), `rtt_mean` is `None`.
    pub peer_sender_tcp: SenderTcpInfo,
    /// ECN negotiated on the flow's connections (`TCP_INFO` options on the client):
    /// `Some(true)` only if every stream negotiated it.
    pub ecn_negotiated: Option<bool>,
    /// Congestion control of this end's socket.
    pub congestion_control: Option<String>,
    /// Congestion control of the flow's sender, read back from its socket: this end's
    /// for uploads, the bloatlab server's (its hello) for downloads. `None` when the
    /// sender could not tell (an iperf 2 server).
    pub sender_congestion_control: Option<String>,
    /// The server's version if it announced one.
    pub peer_version: Option<String>,
    /// The server program and version when it is bloatlab (`bloatlab 0.1.0`).
    pub peer_software: Option<String>,
    /// Wall-clock start, µs since the UNIX epoch.
    pub start_unix_us: Option<u64>,
}

fn secs(v: f64) -> Duration {
    // Negative, NaN or absurd values from a peer must not panic.
    Duration::try_from_secs_f64(v).unwrap_or_default()
}

fn sample(i: &IntervalRecord) -> TransferSample {
    TransferSample {
        start: secs(i.start_s),
        end: secs(i.end_s),
        bytes: Bytes(i.bytes),
    }
}

/// Parses (and validates) a client `--json` document.
pub fn parse_client(json: &[u8]) -> Result<ClientRun, ClientDocError> {
    let text = std::str::from_utf8(json).map_err(|e| SchemaError::Invalid {
        field: "document".into(),
        reason: format!("not UTF-8: {e}"),
    })?;
    let doc = Document::from_json(text)?;
    let mut run = ClientRun {
        congestion_control: doc.test.congestion_control.clone(),
        peer_version: doc.test.peer_version.clone(),
        peer_software: doc.test.peer_software.clone(),
        start_unix_us: doc.test.start_unix_us,
        ..ClientRun::default()
    };
    let mut rtts = Vec::new();
    for s in &doc.streams {
        // Prefer what the receiver counted when the server reported it: a sender's
        // intervals include bytes still in its socket buffer (bounded by the load
        // flows' TCP_NOTSENT_LOWAT). The server measures at the client's `-i` period
        // when asked (docs/wire.md, BlabExt).
        let received = s.server_side.as_ref().map(|r| &r.intervals);
        let acked = (s.direction == JsonDirection::Send)
            .then(|| acked_samples(&s.intervals))
            .flatten();
        match (received, acked) {
            (Some(r), _) if !r.is_empty() => {
                run.samples.extend(r.iter().map(sample));
                let got = s.server_side.as_ref().map_or(0, |r| r.summary.bytes);
                run.total = run.total.saturating_add(Bytes(got));
            }
            // No relayed intervals (an RST ended the flow, or the server is not
            // bloatlab): what the receiver acknowledged, never what was written
            // (issue 18: written bytes overstate a short upload by the data still
            // queued in the socket and the bottleneck).
            (_, Some((samples, total))) => {
                run.samples.extend(samples);
                run.total = run.total.saturating_add(total);
            }
            _ if s.intervals.is_empty() => {
                run.samples.push(sample(&s.summary));
                run.total = run.total.saturating_add(Bytes(s.summary.bytes));
            }
            _ => {
                run.samples.extend(s.intervals.iter().map(sample));
                run.total = run.total.saturating_add(Bytes(s.summary.bytes));
            }
        }
        if run.sender_congestion_control.is_none() {
            run.sender_congestion_control = s.sender_congestion_control.clone();
        }
        if let Some(e) = s.ecn_negotiated {
            run.ecn_negotiated = Some(run.ecn_negotiated.unwrap_or(true) && e);
        }
        if s.direction != JsonDirection::Send {
            if let Some(p) = &s.peer_sender_tcp_info {
                add_peer_sender(&mut run.peer_sender_tcp, p);
            }
            let info = s
                .summary
                .tcp_recv
                .as_ref()
                .and_then(|r| r.tcp_info.as_ref());
            if let Some(i) = info {
                let rx = &mut run.receiver_tcp;
                let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
                    (Some(a), Some(b)) => Some(a + b),
                    (a, b) => a.or(b),
                };
                rx.out_of_order_packets = add(rx.out_of_order_packets, i.out_of_order_packets);
                rx.received_ce = add(rx.received_ce, i.received_ce);
                rx.rcv_rtt = rx.rcv_rtt.or(i.rcv_rtt_us.map(Duration::from_micros));
            }
            continue;
        }
        if let Some(t) = &s.summary.tcp_send {
            if let Some(r) = t.retransmits {
                run.retransmits = Some(run.retransmits.unwrap_or(0) + r);
            }
            if let Some(ce) = t.tcp_info.as_ref().and_then(|i| i.delivered_ce) {
                run.sender_tcp.delivered_ce = Some(run.sender_tcp.delivered_ce.unwrap_or(0) + ce);
            }
        }
        rtts.extend(
            s.intervals
                .iter()
                .filter_map(|i| i.tcp_send.as_ref()?.tcp_info.as_ref())
                .filter(|i| i.rtt_us > 0)
                .map(|i| Duration::from_micros(i.rtt_us)),
        );
    }
    run.sender_tcp.retransmits = run.retransmits;
    if !rtts.is_empty() {
        run.sender_tcp.rtt_min = rtts.iter().min().copied();
        run.sender_tcp.rtt_max = rtts.iter().max().copied();
        run.sender_tcp.rtt_mean = Some(rtts.iter().sum::<Duration>() / rtts.len() as u32);
    }
    Ok(run)
}

/// A sending stream's intervals as the receiver saw them: the growth of
/// `tcpi_bytes_acked` (cumulative, sampled at each interval's end with `-e`) per
/// interval, and the bytes acknowledged in all. `None` when no interval carries it
/// (no `-e`, or a kernel before 4.1). An interval without a sample adds nothing;
/// the next sample carries its bytes. Acks reach the sender one return-path delay
/// after the data reached the receiver, so the samples lag by that much.
fn acked_samples(intervals: &[IntervalRecord]) -> Option<(Vec<TransferSample>, Bytes)> {
    let acked = |i: &IntervalRecord| i.tcp_send.as_ref()?.tcp_info.as_ref()?.bytes_acked;
    intervals.iter().find_map(acked)?;
    let mut last = 0u64;
    let samples = intervals
        .iter()
        .map(|i| {
            let now = acked(i).unwrap_or(last).max(last);
            let bytes = now - last;
            last = now;
            TransferSample {
                start: secs(i.start_s),
                end: secs(i.end_s),
                bytes: Bytes(bytes),
            }
        })
        .collect();
    Some((samples, Bytes(last)))
}

/// Adds one stream's server-side sender record (flow query) to a download's sum.
fn add_peer_sender(t: &mut SenderTcpInfo, p: &bloatlab_metrics::json::PeerSenderTcpInfoRecord) {
    t.retransmits = Some(t.retransmits.unwrap_or(0) + p.retransmits);
    if let Some(ce) = p.delivered_ce {
        t.delivered_ce = Some(t.delivered_ce.unwrap_or(0) + ce);
    }
    if let Some(m) = p.min_rtt_us.map(Duration::from_micros) {
        t.rtt_min = Some(t.rtt_min.map_or(m, |x| x.min(m)));
    }
    if p.rtt_us > 0 {
        let r = Duration::from_micros(p.rtt_us);
        t.rtt_max = Some(t.rtt_max.map_or(r, |x| x.max(r)));
    }
}

/// The client's wall-clock start as a timestamp.
pub fn client_start(run: &ClientRun) -> Option<jiff::Timestamp> {
    let us = i64::try_from(run.start_unix_us?).ok()?;
    jiff::Timestamp::from_microsecond(us).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    //! Fixtures are built by the producer's own code (the engine's `Document` and record
    //! builders from accumulator snapshots), never written by hand.
    use super::*;
    use bloatlab_metrics::interval::Span;
    use bloatlab_metrics::json::{
        PeerSenderTcpInfoRecord, Protocol, RecvTcpInfoRecord, Role, ServerSideReport, StreamRecord,
        TestInfo,
    };
    use bloatlab_metrics::tcp_recv::TcpRecvStats;
    use bloatlab_metrics::tcp_send::{TcpInfoSample, TcpSendStats};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// An upload's document as `bloatlab client -e --json` builds it.
    pub(crate) fn upload(sampled: bool) -> Document {
        let mut s = TcpSendStats::new();
        let mut intervals = Vec::new();
        for (i, (bytes, retrans, rtt)) in [(1000u64, 2u32, 40u64), (3000, 3, 120)]
            .into_iter()
            .enumerate()
        {
            s.on_write(Bytes(bytes));
            if sampled {
                s.on_tcp_info(TcpInfoSample {
                    snd_cwnd: 10,
                    snd_mss: 1448,
                    rtt: ms(rtt),
                    rttvar: ms(1),
                    total_retrans: retrans,
                    delivered_ce: Some(5 * (i as u32 + 1)),
                    bytes_acked: None,
                });
            }
            let span = Span::new(ms(200 * i as u64), ms(200 * (i as u64 + 1)));
            intervals.push(IntervalRecord::from_tcp_send(&s.take_interval(span)));
        }
        let test = TestInfo {
            start_unix_us: Some(1_796_212_800_500_000),
            congestion_control: Some("cubic".into()),
            parallel: 1,
            ..TestInfo::default()
        };
        let mut doc = Document::new(Role::Client, Protocol::Tcp, test);
        doc.streams.push(StreamRecord {
            id: 1,
            direction: JsonDirection::Send,
            local: None,
            remote: None,
            intervals,
            summary: IntervalRecord::from_tcp_send(&s.total(Span::from_zero(ms(400)))),
            server_side: None,
            sender_congestion_control: Some("cubic".into()),
            peer_sender_tcp_info: None,
            ecn_negotiated: None,
        });
        doc
    }

    fn parse(doc: &Document) -> ClientRun {
        parse_client(doc.to_json_pretty().as_bytes()).unwrap()
    }

    #[test]
    fn upload_with_tcp_info() {
        let r = parse(&upload(true));
        assert_eq!(r.samples.len(), 2);
        assert_eq!(r.samples[1].start, ms(200));
        assert_eq!(r.samples[1].bytes, Bytes(3000));
        assert_eq!(r.total, Bytes(4000));
        assert_eq!(r.retransmits, Some(3));
        assert_eq!(r.sender_tcp.delivered_ce, Some(10));
        assert_eq!(r.sender_tcp.rtt_min, Some(ms(40)));
        assert_eq!(r.sender_tcp.rtt_mean, Some(ms(80)));
        assert_eq!(r.sender_tcp.rtt_max, Some(ms(120)));
        assert_eq!(r.congestion_control.as_deref(), Some("cubic"));
        assert_eq!(r.sender_congestion_control.as_deref(), Some("cubic"));
        assert_eq!(
            client_start(&r).unwrap().as_microsecond(),
            1_796_212_800_500_000
        );
    }

    #[test]
    fn not_sampled_is_not_measured_rather_than_zero() {
        let r = parse(&upload(false));
        assert_eq!(r.retransmits, None);
        assert_eq!(r.sender_tcp, SenderTcpInfo::default());
    }

    #[test]
    fn upload_samples_come_from_the_receiving_server_when_it_reports() {
        let mut doc = upload(true);
        let rec = |a: u64, b: u64, bytes: u64| {
            let mut r =
                IntervalRecord::from_tcp_send(&TcpSendStats::new().total(Span::new(ms(a), ms(b))));
            r.bytes = bytes;
            r.tcp_send = None;
            r
        };
        doc.streams[0].server_side = Some(ServerSideReport::new(
            1,
            vec![rec(0, 100, 1000), rec(100, 200, 1500)],
            rec(0, 200, 2500),
        ));
        let r = parse(&doc);
        let bytes: Vec<u64> = r.samples.iter().map(|s| s.bytes.0).collect();
        assert_eq!(
            bytes,
            [1000, 1500],
            "the receiver's intervals, not the sender's"
        );
    }

    /// issue 18: an upload ended by an RST (`--abort-at-end`) has no relayed server
    /// intervals; its samples are what the receiver acknowledged, not what was
    /// written (here 1000 + 3000 written, 600 + 2400 acked).
    #[test]
    fn upload_samples_without_a_server_report_are_the_acked_bytes() {
        let mut doc = upload(true);
        for (i, acked) in doc.streams[0].intervals.iter_mut().zip([600, 3000]) {
            let info = i.tcp_send.as_mut().unwrap().tcp_info.as_mut().unwrap();
            info.bytes_acked = Some(acked);
        }
        let r = parse(&doc);
        let bytes: Vec<u64> = r.samples.iter().map(|s| s.bytes.0).collect();
        assert_eq!(bytes, [600, 2400], "acked, not written");
        assert_eq!(r.total, Bytes(3000));
        // An interval without a sample adds nothing; the next one catches up.
        doc.streams[0].intervals[0]
            .tcp_send
            .as_mut()
            .unwrap()
            .tcp_info = None;
        let r = parse(&doc);
        let bytes: Vec<u64> = r.samples.iter().map(|s| s.bytes.0).collect();
        assert_eq!(bytes, [0, 3000]);
    }

    #[test]
    fn download_sender_is_the_server_and_garbage_is_an_error() {
        let mut doc = upload(true);
        let s = &mut doc.streams[0];
        s.direction = JsonDirection::Receive;
        s.intervals.clear();
        s.sender_congestion_control = Some("bbr".into());
        let mut summary = IntervalRecord::from_tcp_recv(
            &TcpRecvStats::new(Bytes(131_072), false).total(Span::from_zero(ms(400))),
            true,
        );
        summary.tcp_recv.as_mut().unwrap().tcp_info = Some(RecvTcpInfoRecord {
            rcv_rtt_us: Some(21_000),
            out_of_order_packets: Some(337),
            received_ce: Some(6),
        });
        s.summary = summary;
        let r = parse(&doc);
        assert_eq!(r.receiver_tcp.out_of_order_packets, Some(337));
        assert_eq!(r.receiver_tcp.received_ce, Some(6));
        assert_eq!(r.receiver_tcp.rcv_rtt, Some(ms(21)));
        assert_eq!(r.retransmits, None, "the client did not send");
        assert_eq!(r.sender_congestion_control.as_deref(), Some("bbr"));
        assert_eq!(
            r.samples.len(),
            1,
            "the summary stands in for missing intervals"
        );
        // No flow query answer: the server's side stays not measured.
        assert_eq!(r.peer_sender_tcp, SenderTcpInfo::default());
        assert!(parse_client(b"not json").is_err());
        let newer =
            doc.to_json_pretty()
                .replacen("\"schema_version\": 1", "\"schema_version\": 2", 1);
        let e = parse_client(newer.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("schema_version 2"), "{e}");
    }

    #[test]
    fn download_sender_tcp_info_comes_from_the_servers_record_summed_over_streams() {
        let mut doc = upload(true);
        doc.streams[0].direction = JsonDirection::Receive;
        doc.streams[0].ecn_negotiated = Some(true);
        let rec = |retransmits, rtt_us, min_rtt_us| PeerSenderTcpInfoRecord {
            retransmits,
            rtt_us,
            rttvar_us: 500,
            min_rtt_us: Some(min_rtt_us),
            cwnd_bytes: 14480,
            bytes_acked: 1000,
            delivered_ce: Some(4),
            ecn_negotiated: true,
            ecn_seen: true,
        };
        doc.streams[0].peer_sender_tcp_info = Some(rec(7, 90_000, 41_000));
        let mut second = doc.streams[0].clone();
        second.id = 2;
        second.peer_sender_tcp_info = Some(rec(5, 120_000, 40_000));
        second.ecn_negotiated = Some(false);
        doc.streams.push(second);
        let r = parse(&doc);
        assert_eq!(r.peer_sender_tcp.retransmits, Some(12));
        assert_eq!(r.peer_sender_tcp.delivered_ce, Some(8));
        assert_eq!(r.peer_sender_tcp.rtt_min, Some(ms(40)));
        assert_eq!(r.peer_sender_tcp.rtt_max, Some(ms(120)));
        assert_eq!(r.peer_sender_tcp.rtt_mean, None);
        assert_eq!(r.retransmits, None, "the client did not send");
        assert_eq!(r.ecn_negotiated, Some(false), "one stream without ECN");
    }
}
