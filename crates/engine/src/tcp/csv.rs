//! `-y C` rows through METRICS' [`CsvRow`] (iperf 2.1.8's 9 TCP fields; the
//! client endpoint first on both ends; no `[SUM]` rows, like 2.1.8).

use super::{ConnInfo, Role};
use bloatlab_metrics::csv::{CsvRow, CsvTimestamp};
use bloatlab_metrics::interval::Span;
use bloatlab_os::clock::realtime_now as wall_now;
use bloatlab_units::Bytes;

/// One CSV row (no newline) for stream `id` of connection `c`.
pub fn row(c: &ConnInfo, role: Role, enhanced: bool, id: u32, span: Span, bytes: Bytes) -> String {
    let (client, server) = match role {
        Role::Client => (c.local, c.peer),
        Role::Server => (c.peer, c.local),
    };
    let now = wall_now();
    CsvRow {
        timestamp: CsvTimestamp::from_unix(now, bloatlab_os::clock::utc_offset_secs(now)),
        enhanced,
        client,
        server,
        transfer_id: id,
    }
    .tcp(span, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn row_has_nine_fields_client_first_on_both_ends() {
        let c = ConnInfo {
            local: "127.0.0.1:5111".parse().unwrap(),
            peer: "127.0.0.1:52906".parse().unwrap(),
            tags: vec![],
            congestion: None,
            initial: None,
            connect_time: None,
            ecn: None,
        };
        let span = Span::new(Duration::ZERO, Duration::from_secs(1));
        let r = row(&c, Role::Server, false, 1, span, Bytes(1_716_518_972));
        let f: Vec<&str> = r.split(',').collect();
        assert_eq!(f.len(), 9, "{r}");
        assert_eq!(f[0].len(), 14);
        assert_eq!(
            &f[1..],
            [
                "127.0.0.1",
                "52906",
                "127.0.0.1",
                "5111",
                "1",
                "0.0-1.0",
                "1716518972",
                "13732151776"
            ]
        );
    }
}
