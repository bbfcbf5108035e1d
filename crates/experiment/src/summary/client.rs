//! The measurement columns of a `[client]` run, from the client's `--json` document
//! (`bloatlab_metrics::json`, docs/metrics.md). The whole run is the `loaded` phase.
//!
//! A flow is named as test runs name theirs: `tcp_up_1` for stream 1 sent by the client,
//! `tcp_down_1` for stream 1 sent by the server (`-R`, `--full-duplex`); `udp_...` for UDP.
//!
//! * `tput.loaded.{up,down}_mbit`: the streams' throughput per direction, summed;
//!   `tput.loaded.FLOW.bytes`. Both are what the **receiver** counted (issue 18: what arrived,
//!   not what was written): for a stream the client sent, the server's summary relayed to the
//!   client (a bloatlab server sends it when the stream ends normally); only when there is
//!   none (a server that relays no report, e.g. iperf 2 without `-e`/trip-times) the
//!   client's written bytes, and the row says so in `tput.loaded.FLOW.counted_by`.
//! * `lat.FLOW.owd_{up,down}.loaded.{min,mean,median,p90,p99,max,stdev}_ms` and `.count`:
//!   write-to-read (burst) latency with `--trip-times`, as the receiver measured it (the
//!   server's report relayed to the client for `tcp_up_*`); median / p90 / p99 when the
//!   receiver kept a histogram.
//! * `w2r.FLOW.inp_bytes`, `w2r.FLOW.netpwr`: the receiver's inP (bytes in progress, Little's
//!   law) and NetPwr with `--trip-times`.
//! * `tcp.FLOW.retransmits`, `tcp.FLOW.rtt_ms` (smoothed RTT at the end), `tcp.FLOW.netpwr`
//!   (`-e`): the sender's TCP_INFO as the client saw it (its own, or the server's for
//!   `tcp_down_*` when the server is bloatlab).
//! * `pace.FLOW.waits`, `pace.FLOW.late_ms`, `pace.FLOW.late_share`: a paced sender's sleeps
//!   (`-b`, `--near-congestion`), the time past their planned wake-ups in all, and that over
//!   the stream's duration: how long a busy host kept the sender from sending.

use bloatlab_metrics::json::{
    Direction, Document, IntervalRecord, LatencyRecord, Protocol, StreamRecord, TcpSendRecord,
};
use serde_json::Value;

/// Rounded to the microsecond, as the test columns are.
fn ms(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// The flow name of a stream record (`tcp_up_1`).
fn flow(doc: &Document, s: &StreamRecord) -> (String, &'static str) {
    let proto = match doc.protocol {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
    };
    let dir = match s.direction {
        Direction::Send => "up",
        Direction::Receive => "down",
    };
    (format!("{proto}_{dir}_{}", s.id), dir)
}

/// The receiver's summary of a stream: the server's (relayed) for what the client sent, the
/// client's own for what it received.
fn receiver(s: &StreamRecord) -> Option<&IntervalRecord> {
    match s.direction {
        Direction::Send => s.server_side.as_ref().map(|r| &r.summary),
        Direction::Receive => Some(&s.summary),
    }
}

fn latency_cells(out: &mut Vec<(String, Value)>, base: &str, l: &LatencyRecord) {
    let mut push = |k: &str, v: f64| out.push((format!("{base}.{k}_ms"), ms(v).into()));
    push("min", l.latency_ms_min);
    push("mean", l.latency_ms_mean);
    for (k, v) in [
        ("median", l.latency_ms_p50),
        ("p90", l.latency_ms_p90),
        ("p99", l.latency_ms_p99),
    ] {
        if let Some(v) = v {
            push(k, v);
        }
    }
    push("max", l.latency_ms_max);
    push("stdev", l.latency_ms_stdev);
    out.push((format!("{base}.count"), l.count.into()));
}

/// The columns of one client document, in stream order.
pub fn cells(doc: &Document) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut bps = [None::<f64>, None];
    for s in &doc.streams {
        let i = usize::from(s.direction == Direction::Receive);
        let counted = receiver(s).unwrap_or(&s.summary);
        bps[i] = Some(bps[i].unwrap_or(0.0) + counted.bits_per_second);
    }
    for (dir, b) in ["up", "down"].iter().zip(bps) {
        if let Some(b) = b {
            out.push((format!("tput.loaded.{dir}_mbit"), ms(b / 1e6).into()));
        }
    }
    for s in &doc.streams {
        let (name, dir) = flow(doc, s);
        let recv = receiver(s);
        let counted = recv.unwrap_or(&s.summary);
        out.push((format!("tput.loaded.{name}.bytes"), counted.bytes.into()));
        if recv.is_none() {
            out.push((
                format!("tput.loaded.{name}.counted_by"),
                "sender (no receiver report)".into(),
            ));
        }
        let tcp_recv = recv.and_then(|r| r.tcp_recv.as_ref());
        let lat = tcp_recv
            .and_then(|r| r.burst_latency.as_ref())
            .or_else(|| recv.and_then(|r| r.udp_recv.as_ref()?.latency.as_ref()));
        if let Some(l) = lat {
            latency_cells(&mut out, &format!("lat.{name}.owd_{dir}.loaded"), l);
        }
        if let Some(r) = tcp_recv {
            if let Some(b) = r.in_progress_bytes {
                out.push((format!("w2r.{name}.inp_bytes"), b.round().into()));
            }
            if let Some(p) = r.netpwr {
                out.push((format!("w2r.{name}.netpwr"), p.round().into()));
            }
        }
        // The sender's TCP_INFO: ours when we sent, the server's (flow query) when it did.
        let (retransmits, rtt_us, netpwr) = match (s.direction, &s.summary.tcp_send) {
            (Direction::Send, Some(t)) => (
                t.retransmits,
                t.tcp_info.as_ref().map(|i| i.rtt_us),
                t.netpwr,
            ),
            (Direction::Receive, _) => match &s.peer_sender_tcp_info {
                Some(p) => (Some(p.retransmits), Some(p.rtt_us), None),
                None => (None, None, None),
            },
            _ => (None, None, None),
        };
        if let Some(n) = retransmits {
            out.push((format!("tcp.{name}.retransmits"), n.into()));
        }
        if let Some(us) = rtt_us {
            out.push((format!("tcp.{name}.rtt_ms"), ms(us as f64 / 1e3).into()));
        }
        if let Some(p) = netpwr {
            out.push((format!("tcp.{name}.netpwr"), p.round().into()));
        }
        if let (Direction::Send, Some(t)) = (s.direction, &s.summary.tcp_send) {
            pace_cells(&mut out, &name, t, s.summary.end_s - s.summary.start_s);
        }
    }
    out
}

/// A paced sender's (`-b`, `--near-congestion`) sleeps: how many, how long past their
/// planned wake-ups in all, and that as a share of the stream's time: the throughput a busy
/// host may have taken from it (report 1's weight 0.4, issue 18).
fn pace_cells(out: &mut Vec<(String, Value)>, name: &str, t: &TcpSendRecord, secs: f64) {
    let (Some(waits), Some(late_us)) = (t.paced_waits, t.paced_late_us) else {
        return;
    };
    out.push((format!("pace.{name}.waits"), waits.into()));
    let late_ms = late_us as f64 / 1e3;
    out.push((format!("pace.{name}.late_ms"), ms(late_ms).into()));
    if secs > 0.0 {
        let share = late_ms / 1e3 / secs;
        out.push((
            format!("pace.{name}.late_share"),
            ((share * 1e4).round() / 1e4).into(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real `bloatlab client --trip-times -e --json` document against a bloatlab server
    /// (trimmed: intervals and histogram buckets left out).
    const DOC: &str = include_str!("testdata/client-trip-times.json");

    #[test]
    fn a_trip_times_run_gives_throughput_latency_inp_and_netpwr() {
        let doc = Document::from_json(DOC).unwrap();
        let c = cells(&doc);
        let get = |k: &str| {
            c.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no {k} in {c:?}"))
        };
        // What the server counted (its relayed summary), not the client's written bytes
        // (94.274 Mbit/s over the client's own 10 s).
        assert_eq!(get("tput.loaded.up_mbit"), Value::from(94.481));
        assert!(c.iter().all(|(k, _)| !k.ends_with(".counted_by")), "{c:?}");
        assert!(get("tput.loaded.tcp_up_1.bytes").as_u64().unwrap() > 90_000_000);
        assert_eq!(
            get("lat.tcp_up_1.owd_up.loaded.mean_ms"),
            Value::from(2.882)
        );
        assert_eq!(get("lat.tcp_up_1.owd_up.loaded.min_ms"), Value::from(2.348));
        assert_eq!(
            get("lat.tcp_up_1.owd_up.loaded.max_ms"),
            Value::from(18.559)
        );
        assert_eq!(get("lat.tcp_up_1.owd_up.loaded.count"), Value::from(5755));
        assert_eq!(get("w2r.tcp_up_1.inp_bytes"), Value::from(34041.0));
        assert_eq!(get("w2r.tcp_up_1.netpwr"), Value::from(4097.0));
        assert_eq!(get("tcp.tcp_up_1.retransmits"), Value::from(0));
        assert_eq!(get("tcp.tcp_up_1.rtt_ms"), Value::from(2.774));
        assert_eq!(get("tcp.tcp_up_1.netpwr"), Value::from(4248.0));
        assert!(c.iter().all(|(k, _)| !k.contains("down")), "{c:?}");
    }

    #[test]
    fn a_paced_senders_late_wakes_are_columns_only_when_it_was_paced() {
        let plain = cells(&Document::from_json(DOC).unwrap());
        assert!(
            plain.iter().all(|(k, _)| !k.starts_with("pace.")),
            "{plain:?}"
        );
        // The same run as a near-congestion sender that slept 9000 times and woke 2.0 s
        // late in all, over its 8.001 s.
        let mut v: Value = serde_json::from_str(DOC).unwrap();
        let t = &mut v["streams"][0]["summary"]["tcp_send"];
        t["paced_waits"] = 9000.into();
        t["paced_late_us"] = 2_000_400.into();
        let doc = Document::from_json(&v.to_string()).unwrap();
        let c = cells(&doc);
        let get = |k: &str| c.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("pace.tcp_up_1.waits"), Some(Value::from(9000)));
        assert_eq!(get("pace.tcp_up_1.late_ms"), Some(Value::from(2000.4)));
        assert_eq!(get("pace.tcp_up_1.late_share"), Some(Value::from(0.25)));
    }

    #[test]
    fn a_client_row_is_shown_with_its_write_to_read_latency() {
        use crate::file::Scalar;
        use crate::summary::{client_row, reference_series, table};
        let doc = Document::from_json(DOC).unwrap();
        let lab = serde_json::json!({"directions": [["up", {"link": {"dropped": {"overflow": {"packets": 4}}}}]]});
        let params = [("weight".to_string(), Scalar::Str("0.4".into()))];
        let r = client_row("p001_weight-0.4_r1", "p001", 1, &params, &doc, &[], &lab);
        let cols: Vec<&str> = r.cells.iter().map(|(k, _)| k.as_str()).take(6).collect();
        assert_eq!(
            cols,
            [
                "run",
                "point",
                "rep",
                "weight",
                "interrupted",
                "tput.loaded.up_mbit"
            ]
        );
        assert_eq!(r.get("emu.up.link.drops"), Some(&Value::from(4)));
        let rows = [r];
        // No RTT probe series: the table shows the write-to-read latency.
        assert_eq!(reference_series(&rows).as_deref(), Some("tcp_up_1.owd_up"));
        let t = table(&rows, &["weight".into()]);
        let line = t.lines().nth(2).unwrap();
        assert!(
            line.contains("2.9") && line.contains("5755") && line.contains("94.48"),
            "{t}"
        );
    }

    /// `lab status --json` with the up direction's release-lateness histogram: `late_us`.
    fn status(late_us: &[u64]) -> Value {
        let mut h = bloatlab_lab::driver::histogram::Histogram::default();
        for &us in late_us {
            h.record(std::time::Duration::from_micros(us));
        }
        let report = bloatlab_lab::driver::direction::DirectionReport {
            lateness_histogram: h,
            ..Default::default()
        };
        serde_json::json!({"counters": {
            "name": "x", "backend": "userspace", "uptime_s": 1.0, "unix_time_s": 1.0,
            "directions": [["up", report]], "devices": [], "tun_ring_drops": 0,
        }})
    }

    #[test]
    fn a_client_run_on_a_busy_host_is_incomplete_by_the_emulators_lateness() {
        use crate::completeness::{self, Cause};
        use crate::summary::{client_lateness, client_row};
        let doc = Document::from_json(DOC).unwrap();
        let before = status(&[30; 100]);
        // 1000 packets released during the run, 50 of them 4 ms late: 5 % > 2 %.
        let mut late: Vec<u64> = vec![30; 100 + 950];
        late.extend([4000; 50]);
        let after = status(&late);
        let l = client_lateness(&before, &after);
        assert_eq!(l.len(), 1);
        let r = client_row("p001_r1", "p001", 1, &[], &doc, &l, &Value::Null);
        assert_eq!(r.get("late.up.loaded.packets"), Some(&Value::from(1000)));
        assert_eq!(r.get("late.up.loaded.over_1ms"), Some(&Value::from(0.05)));
        let causes = completeness::assess(&r, completeness::DEFAULT_MAX_PROBE_LOSS);
        assert!(
            matches!(&causes[..], [Cause::EmulatorLate { direction, phase, .. }]
                if direction == "up" && phase == "loaded"),
            "{causes:?}"
        );
        // On time (1 % late): complete.
        let mut ok: Vec<u64> = vec![30; 100 + 990];
        ok.extend([4000; 10]);
        let r = client_row(
            "p001_r1",
            "p001",
            1,
            &[],
            &doc,
            &client_lateness(&before, &status(&ok)),
            &Value::Null,
        );
        assert_eq!(r.get("late.up.loaded.over_1ms"), Some(&Value::from(0.01)));
        assert!(completeness::assess(&r, 0.05).is_empty());
        // Counters that do not read (no lab, an old emulator): no cells, not incomplete.
        assert!(client_lateness(&Value::Null, &after).is_empty());
    }

    #[test]
    fn without_a_receiver_report_the_senders_count_is_used_and_said() {
        let mut doc = Document::from_json(DOC).unwrap();
        doc.streams[0].server_side = None;
        let c = cells(&doc);
        let get = |k: &str| c.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("tput.loaded.up_mbit"), Some(Value::from(94.274)));
        assert_eq!(
            get("tput.loaded.tcp_up_1.counted_by"),
            Some(Value::from("sender (no receiver report)"))
        );
    }
}
