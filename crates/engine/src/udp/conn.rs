//! A UDP stream's identity as reports print it: the `connected with` line
//! and the shared fields of iperf 2.1.8's `-y C` rows (README 2.11).

use bloatlab_metrics::csv::{CsvRow, CsvTimestamp};
use std::net::SocketAddr;

/// One stream (client) or flow (server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnInfo {
    /// This end.
    pub local: SocketAddr,
    /// The other end.
    pub peer: SocketAddr,
    /// `(trip-times)`, `(peer 2.1.8)` ... in print order.
    pub tags: Vec<String>,
}

/// `[  1] local 127.0.0.1 port 5001 connected with 127.0.0.1 port 41234 (trip-times)`.
/// `(peer ...)` tags print only with `-e`, as in iperf 2.
pub fn connected_line(stream: u32, c: &ConnInfo, enhanced: bool) -> String {
    crate::console::connected_line(stream, c.local, c.peer, &c.tags, enhanced)
}

/// The shared fields of this stream's `-y C` rows (METRICS formats them).
/// iperf 2 prints the client's address first on both sides.
pub fn csv_row(c: &ConnInfo, id: u32, local_is_client: bool, enhanced: bool) -> CsvRow {
    let (client, server) = if local_is_client {
        (c.local, c.peer)
    } else {
        (c.peer, c.local)
    };
    let now = bloatlab_os::clock::realtime_now();
    CsvRow {
        timestamp: CsvTimestamp::from_unix(now, bloatlab_os::clock::utc_offset_secs(now)),
        enhanced,
        client,
        server,
        transfer_id: id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_metrics::interval::Span;
    use std::time::Duration;

    fn info() -> ConnInfo {
        ConnInfo {
            local: "127.0.0.1:33069".parse().unwrap(),
            peer: "127.0.0.1:5131".parse().unwrap(),
            tags: vec!["(trip-times)".into(), "(peer 2.1.8)".into()],
        }
    }

    #[test]
    fn connected_line_hides_peer_version_without_e() {
        assert_eq!(
            connected_line(1, &info(), false),
            "[  1] local 127.0.0.1 port 33069 connected with 127.0.0.1 port 5131 (trip-times)"
        );
        assert!(connected_line(1, &info(), true).ends_with("(trip-times) (peer 2.1.8)"));
    }

    #[test]
    fn csv_rows_put_the_client_first_on_both_sides() {
        // 11c_csv_udp.txt: ...,127.0.0.1,33069,127.0.0.1,5131,1,0.0-1.0,1252440,10019520,...
        let snap = bloatlab_metrics::udp_send::UdpSendSnapshot {
            span: Span::new(Duration::ZERO, Duration::from_secs(1)),
            bytes: bloatlab_units::Bytes(1_252_440),
            writes: 852,
            ..Default::default()
        };
        let row = csv_row(&info(), 1, true, false).udp_send(&snap);
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields.len(), 14);
        assert_eq!(fields[0].len(), 14);
        assert_eq!(
            &fields[1..],
            [
                "127.0.0.1",
                "33069",
                "127.0.0.1",
                "5131",
                "1",
                "0.0-1.0",
                "1252440",
                "10019520",
                "0.000",
                "0",
                "852",
                "0.000",
                "0"
            ]
        );
        let server_side = ConnInfo {
            local: info().peer,
            peer: info().local,
            tags: vec![],
        };
        let r = csv_row(&server_side, 1, false, true);
        assert_eq!((r.client, r.server), (info().local, info().peer));
    }
}
