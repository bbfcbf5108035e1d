//! The JSON document and the server-side report: round trips, the committed
//! version-1 sample, and rejection of newer versions and bad input.

use bloatlab_metrics::json::{
    Direction, Document, IntervalRecord, MAX_JSON_LEN, Protocol, Role, SCHEMA_VERSION, SchemaError,
    ServerSideReport, StreamRecord, SumRecord, TestInfo,
};
use bloatlab_metrics::{
    Span, TcpInfoSample, TcpRecvStats, TcpSendSnapshot, TcpSendStats, UdpRecvStats,
};
use bloatlab_units::Bytes;
use std::time::Duration;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A TCP trip-times test as both ends would record it.
fn sample_document() -> Document {
    let epoch = Duration::from_secs(1_796_205_073);
    let mut client = TcpSendStats::new();
    let mut server = TcpRecvStats::new(Bytes(131_072), true);
    let mut client_intervals = Vec::new();
    let mut server_intervals = Vec::new();
    for i in 0..3u64 {
        for b in 0..10u64 {
            client.on_write(Bytes(131_072));
            server.on_read(Bytes(92));
            server.on_read(Bytes(130_980));
            let w = epoch + ms(1000 * i + 100 * b);
            server.on_burst_complete(w, w + Duration::from_micros(800 + 100 * b));
        }
        client.on_tcp_info(TcpInfoSample {
            snd_cwnd: 100,
            snd_mss: 32_741,
            rtt: Duration::from_micros(300 + i),
            rttvar: Duration::from_micros(50),
            total_retrans: i as u32,
            delivered_ce: None,
            bytes_acked: None,
        });
        let span = Span::new(ms(1000 * i), ms(1000 * (i + 1)));
        client_intervals.push(IntervalRecord::from_tcp_send(&client.take_interval(span)));
        server_intervals.push(IntervalRecord::from_tcp_recv(
            &server.take_interval(span),
            false,
        ));
    }
    let end = Span::from_zero(ms(3000));
    let server_side = ServerSideReport::new(
        1,
        server_intervals,
        IntervalRecord::from_tcp_recv(&server.total(end), true),
    );
    let total = client.total(end);
    let mut doc = Document::new(
        Role::Client,
        Protocol::Tcp,
        TestInfo {
            start_unix_us: Some(1_796_205_073_000_000),
            clock: Some("realtime".into()),
            interval_s: Some(1.0),
            duration_s: Some(3.0),
            parallel: 2,
            trip_times: true,
            congestion_control: Some("cubic".into()),
            local: Some("127.0.0.1:35582".into()),
            remote: Some("127.0.0.1:5103".into()),
            ..TestInfo::default()
        },
    );
    doc.streams.push(StreamRecord {
        id: 1,
        direction: Direction::Send,
        local: None,
        remote: None,
        intervals: client_intervals,
        summary: IntervalRecord::from_tcp_send(&total),
        server_side: Some(server_side),
        sender_congestion_control: None,
        peer_sender_tcp_info: None,
        ecn_negotiated: None,
    });
    doc.sum = Some(SumRecord {
        direction: Direction::Send,
        streams: 1,
        intervals: vec![],
        summary: IntervalRecord::from_tcp_send(&TcpSendSnapshot::sum(end, [&total])),
    });
    doc
}

#[test]
fn document_round_trips() {
    let doc = sample_document();
    let text = doc.to_json_pretty();
    let back = Document::from_json(&text).unwrap();
    assert_eq!(back, doc);
    // Units are in the field names.
    for key in [
        "\"schema_version\": 1",
        "\"bits_per_second\"",
        "\"rtt_us\": 302",
        "\"cwnd_bytes\": 3274100",
        "\"latency_ms_p99\"",
        "\"reads_bin_width_bytes\": 16384",
        "\"lower_ns\"",
    ] {
        assert!(text.contains(key), "missing {key}");
    }
}

#[test]
fn document_numbers_are_the_snapshot_numbers() {
    let doc = sample_document();
    let s = &doc.streams[0];
    assert_eq!(s.intervals.len(), 3);
    let t = s.summary.tcp_send.as_ref().unwrap();
    assert_eq!((t.writes, t.retransmits), (30, Some(2)));
    assert_eq!(s.summary.bytes, 30 * 131_072);
    let ss = s.server_side.as_ref().unwrap();
    let r = ss.summary.tcp_recv.as_ref().unwrap();
    assert_eq!(r.reads, 60);
    assert_eq!(r.reads_histogram, [30, 0, 0, 0, 0, 0, 0, 30]);
    let b = r.burst_latency.as_ref().unwrap();
    assert_eq!(b.count, 30);
    // Latencies 0.8..=1.7 ms, ten of each per interval: mean 1.25 ms, p50 1.2 ms, p90 1.6 ms.
    assert!((b.latency_ms_mean - 1.25).abs() < 1e-9);
    assert!((b.latency_ms_min - 0.8).abs() < 1e-9);
    assert!((b.latency_ms_max - 1.7).abs() < 1e-9);
    let p50 = b.latency_ms_p50.unwrap();
    let p90 = b.latency_ms_p90.unwrap();
    assert!((p50 - 1.2).abs() <= 1.2 / 64.0, "{p50}");
    assert!((p90 - 1.6).abs() <= 1.6 / 64.0, "{p90}");
    assert_eq!(b.histogram.as_ref().unwrap().count, 30);
    // Intervals carry statistics but not the full distribution.
    let i0 = ss.intervals[0].tcp_recv.as_ref().unwrap();
    assert!(i0.burst_latency.as_ref().unwrap().histogram.is_none());
    assert!(i0.netpwr.unwrap() > 0.0);
}

#[test]
fn server_side_report_round_trips_through_bytes() {
    let doc = sample_document();
    let ss = doc.streams[0].server_side.clone().unwrap();
    let bytes = ss.to_json();
    assert!(bytes.len() < MAX_JSON_LEN);
    assert_eq!(ServerSideReport::from_json(&bytes).unwrap(), ss);
}

#[test]
fn udp_server_side_report_round_trips() {
    let mut s = UdpRecvStats::new(Duration::ZERO);
    for id in [1u64, 2, 4, 3, 3, 5] {
        let sent = ms(id);
        s.on_datagram(id, sent, sent + Duration::from_micros(8 + id), Bytes(1470));
    }
    let tot = s.total(Span::from_zero(ms(10)));
    let rep = ServerSideReport::new(1, vec![], IntervalRecord::from_udp_recv(&tot, true));
    let back = ServerSideReport::from_json(&rep.to_json()).unwrap();
    assert_eq!(back, rep);
    let u = back.summary.udp_recv.unwrap();
    assert_eq!(
        (u.datagrams_total, u.lost, u.out_of_order, u.duplicates),
        (5, 0, 2, 1)
    );
    assert_eq!(u.latency.unwrap().count, 6);
}

/// Issue 24: a bloatlab server's CPU time travels in its report; an older
/// report without it still loads, and a peer's impossible value is refused.
#[test]
fn server_side_report_carries_the_servers_cpu() {
    let ss = sample_document().streams[0].server_side.clone().unwrap();
    assert_eq!(ss.cpu, None);
    let text = String::from_utf8(ss.to_json()).unwrap();
    assert!(!text.contains("\"cpu\""), "absent, not null: {text}");
    let with = ss
        .clone()
        .with_cpu(Some(bloatlab_metrics::json::CpuRecord::from_seconds(
            0.2,
            0.6,
            2_000_000_000,
        )));
    let back = ServerSideReport::from_json(&with.to_json()).unwrap();
    assert_eq!(back, with);
    assert_eq!(back.cpu.unwrap().cpu_s_per_gb, Some(0.4));
    let mut v: serde_json::Value = serde_json::from_slice(&with.to_json()).unwrap();
    v["cpu"]["user_s"] = serde_json::json!(-3.0);
    let err = ServerSideReport::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(err.to_string().contains("cpu.user_s"), "{err}");
}

#[test]
fn newer_schema_version_is_rejected_with_a_clear_error() {
    let mut v: serde_json::Value =
        serde_json::from_str(&sample_document().to_json_pretty()).unwrap();
    v["schema_version"] = serde_json::json!(2);
    v["something_new"] = serde_json::json!({"x": 1});
    let err = Document::from_json(&v.to_string()).unwrap_err();
    assert!(
        matches!(
            err,
            SchemaError::UnsupportedVersion {
                found: 2,
                supported: 1
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "schema_version 2 is not supported (this bloatlab reads version 1); upgrade bloatlab to read it"
    );
    let ss = br#"{"schema_version":7,"whatever":[1,2,3]}"#;
    assert!(matches!(
        ServerSideReport::from_json(ss),
        Err(SchemaError::UnsupportedVersion { found: 7, .. })
    ));
}

#[test]
fn unknown_fields_of_the_same_version_are_ignored() {
    let mut v: serde_json::Value =
        serde_json::from_str(&sample_document().to_json_pretty()).unwrap();
    v["added_later"] = serde_json::json!(true);
    v["streams"][0]["summary"]["new_metric_ms"] = serde_json::json!(1.5);
    let d = Document::from_json(&v.to_string()).unwrap();
    assert_eq!(d.schema_version, SCHEMA_VERSION);
}

#[test]
fn bad_inputs_are_typed_errors() {
    assert!(matches!(
        ServerSideReport::from_json(b"{\"stream_id\":1}"),
        Err(SchemaError::MissingVersion)
    ));
    assert!(matches!(
        ServerSideReport::from_json(b"\x00\xff not json"),
        Err(SchemaError::Json(_))
    ));
    assert!(matches!(
        ServerSideReport::from_json(br#"{"schema_version":"1"}"#),
        Err(SchemaError::Invalid { .. })
    ));
    assert!(matches!(
        ServerSideReport::from_json(br#"{"schema_version":1}"#),
        Err(SchemaError::Json(_))
    ));
    let big = vec![b' '; MAX_JSON_LEN + 1];
    assert!(matches!(
        ServerSideReport::from_json(&big),
        Err(SchemaError::TooLarge { .. })
    ));
    // A histogram whose counts do not add up.
    let ss = sample_document().streams[0].server_side.clone().unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&ss.to_json()).unwrap();
    v["summary"]["tcp_recv"]["burst_latency"]["histogram"]["count"] = serde_json::json!(999);
    let err = ServerSideReport::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid summary.tcp_recv.burst_latency.histogram:"),
        "{err}"
    );
    // Spans that run backwards.
    let mut v: serde_json::Value = serde_json::from_slice(&ss.to_json()).unwrap();
    v["summary"]["end_s"] = serde_json::json!(-1.0);
    assert!(matches!(
        ServerSideReport::from_json(v.to_string().as_bytes()),
        Err(SchemaError::Invalid { .. })
    ));
}

/// The committed version-1 sample still loads: a reader must keep reading
/// every document it ever wrote.
#[test]
fn committed_v1_sample_loads() {
    let text = include_str!("data/document_v1.json");
    let d = Document::from_json(text).unwrap();
    assert_eq!(d.schema_version, 1);
    assert_eq!(d.role, Role::Client);
    assert_eq!(d.streams[0].summary.bytes, 30 * 131_072);
    let ss = d.streams[0].server_side.as_ref().unwrap();
    assert_eq!(
        ss.summary
            .tcp_recv
            .as_ref()
            .unwrap()
            .burst_latency
            .as_ref()
            .unwrap()
            .count,
        30
    );
}

/// Regenerate the committed sample: `BLOATLAB_WRITE_SAMPLE=1 cargo test -p bloatlab-metrics --test json_schema`.
#[test]
fn sample_matches_builder_output() {
    let text = sample_document().to_json_pretty();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/document_v1.json");
    if std::env::var_os("BLOATLAB_WRITE_SAMPLE").is_some() {
        std::fs::write(&path, format!("{text}\n")).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap();
    let a: Document = Document::from_json(&committed).unwrap();
    let b: Document = Document::from_json(&text).unwrap();
    // Only the tool version may differ between builds.
    assert_eq!(
        Document {
            tool: b.tool.clone(),
            ..a
        },
        b,
        "the v1 sample changed: regenerate it deliberately, or bump SCHEMA_VERSION"
    );
}
