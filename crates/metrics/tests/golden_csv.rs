//! `-y C` rows compared with iperf 2.1.8's (`captures/11*.txt`).

use bloatlab_metrics::csv::{CsvRow, CsvTimestamp};
use bloatlab_metrics::{LatencyHistogram, LatencyStats, Span, UdpRecvSnapshot, UdpSendSnapshot};
use bloatlab_units::Bytes;
use std::time::Duration;

fn span(a: f64, b: f64) -> Span {
    Span::new(Duration::from_secs_f64(a), Duration::from_secs_f64(b))
}

fn row(unix: u64, millis: u64, enhanced: bool, client_port: u16, server_port: u16) -> CsvRow {
    CsvRow {
        timestamp: CsvTimestamp::from_unix(
            Duration::from_secs(unix) + Duration::from_millis(millis),
            0,
        ),
        enhanced,
        client: format!("127.0.0.1:{client_port}").parse().unwrap(),
        server: format!("127.0.0.1:{server_port}").parse().unwrap(),
        transfer_id: 1,
    }
}

// 2026-12-02 09:53:47 UTC.
const T11A: u64 = 1_796_205_227;

#[test]
fn tcp_rows_capture_11a() {
    let r = row(T11A, 0, false, 52906, 5111);
    assert_eq!(
        r.tcp(span(0.0, 1.0), Bytes(1_716_518_972)),
        "20261202095347,127.0.0.1,52906,127.0.0.1,5111,1,0.0-1.0,1716518972,13732151776"
    );
    // Final row: 6150815804 bytes in 3.012961 s ("0.0-3.0").
    let r = row(T11A + 2, 0, false, 52906, 5111);
    assert_eq!(
        r.tcp(span(0.0, 3.012_961), Bytes(6_150_815_804)),
        "20261202095349,127.0.0.1,52906,127.0.0.1,5111,1,0.0-3.0,6150815804,16331617446"
    );
}

#[test]
fn tcp_rows_enhanced_capture_11b() {
    // 2026-12-02 09:53:52.813 UTC.
    let r = row(T11A + 5, 813, true, 50628, 5121);
    assert_eq!(
        r.tcp(span(0.0, 1.0), Bytes(1_325_006_928)),
        "20261202095352.813,127.0.0.1,50628,127.0.0.1,5121,1,0.0-1.0,1325006928,10600055424"
    );
}

#[test]
fn udp_rows_capture_11c() {
    // 2026-12-02 09:53:58 UTC.
    let r = row(T11A + 11, 0, false, 33069, 5131);
    let server = UdpRecvSnapshot {
        span: span(0.0, 1.0),
        bytes: Bytes(1_252_440),
        datagrams: 852,
        lost: 0,
        out_of_order: 0,
        duplicates: 0,
        jitter: Duration::from_micros(2),
        latency: LatencyStats::new(),
        histogram: LatencyHistogram::new(),
        ipg_count: 852,
        ipg_sum: Duration::from_secs(1),
    };
    assert_eq!(
        r.udp_recv(&server),
        "20261202095358,127.0.0.1,33069,127.0.0.1,5131,1,0.0-1.0,1252440,10019520,0.002,0,852,0.000,0"
    );
    let client = UdpSendSnapshot {
        span: span(0.0, 1.0),
        bytes: Bytes(1_252_440),
        writes: 852,
        write_errors: 0,
        ipg_sum: Duration::from_secs(1),
    };
    assert_eq!(
        r.udp_send(&client),
        "20261202095358,127.0.0.1,33069,127.0.0.1,5131,1,0.0-1.0,1252440,10019520,0.000,0,852,0.000,0"
    );
    // A lossy row: 14 fields, loss with 3 decimals.
    let lossy = UdpRecvSnapshot {
        lost: 60_892,
        datagrams: 126_837,
        out_of_order: 3,
        ..server
    };
    let line = r.udp_recv(&lossy);
    assert_eq!(line.split(',').count(), 14);
    assert!(line.ends_with(",0.002,60892,126837,48.008,3"), "{line}");
}

#[test]
fn ipv6_addresses_have_no_brackets() {
    let r = CsvRow {
        timestamp: CsvTimestamp::from_unix(Duration::from_secs(T11A), 0),
        enhanced: false,
        client: "[::1]:48560".parse().unwrap(),
        server: "[::1]:5162".parse().unwrap(),
        transfer_id: 1,
    };
    assert_eq!(
        r.tcp(span(0.0, 2.0), Bytes(0)),
        "20261202095347,::1,48560,::1,5162,1,0.0-2.0,0,0"
    );
}
