//! Interoperability with the real iperf 2.1.8 binary (Debian package `iperf`),
//! in both roles, over loopback: our client against `iperf -s`, and `iperf -c`
//! against our server. Each test runs 1 s of traffic on its own free port and
//! checks that the numbers both sides print agree.
//!
//! Our side is read from `--json`; iperf's from its console output with
//! `-f B` (exact byte counts) through `stdbuf -oL` (line-buffered pipes).
//! Every process a test starts is killed by PID when its guard drops.

mod util {
    use serde_json::Value;
    use std::process::Command;
    use std::time::Duration;

    /// Generous: the machine has 2 cores shared with parallel builds.
    pub const TIMEOUT: Duration = Duration::from_secs(30);

    pub fn bloatlab() -> &'static str {
        crate::harness::BIN
    }

    /// Fails loudly (the test command installs iperf; a silent skip would hide a gap).
    pub fn require_iperf2() {
        let out = Command::new("iperf").arg("-v").output();
        let text = out
            .map(|o| {
                String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr)
            })
            .unwrap_or_default();
        assert!(
            text.contains("iperf version 2.1"),
            "these tests need iperf 2.1.x on PATH (apt-get install iperf); `iperf -v` said: {text:?}"
        );
    }

    pub use crate::harness::{Listen, Proc, free_port};

    /// What the iperf tests read from a [`Proc`] beyond the harness's checks.
    pub trait ProcExt {
        /// Waits until the JSON documents on stdout hold at least `n` stream
        /// records, and returns them merged into one document. (Our server
        /// prints one document per connection, so `-P 4` gives four.)
        fn wait_json_streams(&self, n: usize) -> Value;
    }

    impl ProcExt for Proc {
        fn wait_json_streams(&self, n: usize) -> Value {
            let count = |s: &str| -> usize {
                json_docs(s)
                    .iter()
                    .map(|d| d["streams"].as_array().map_or(0, Vec::len))
                    .sum()
            };
            let out = self.wait_out(&format!("JSON with {n} stream record(s)"), TIMEOUT, |s| {
                count(s) >= n
            });
            let docs = json_docs(&out);
            let mut merged = docs[0].clone();
            merged["streams"] = Value::Array(
                docs.iter()
                    .flat_map(|d| d["streams"].as_array().cloned().unwrap_or_default())
                    .collect(),
            );
            merged
        }
    }

    /// Complete JSON documents in a stream of concatenated documents.
    pub fn json_docs(s: &str) -> Vec<Value> {
        serde_json::Deserializer::from_str(s)
            .into_iter::<Value>()
            .map_while(Result::ok)
            .collect()
    }

    fn wait_bound(p: &Proc, udp: bool, port: u16) {
        p.wait_listening(port, if udp { Listen::Udp } else { Listen::Tcp });
    }

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    /// `iperf -s -p PORT -f B ARGS`, ready to accept.
    pub fn iperf_server(port: u16, udp: bool, args: &[&str]) -> Proc {
        let mut a = strings(&[
            "-oL",
            "-eL",
            "iperf",
            "-s",
            "-p",
            &port.to_string(),
            "-f",
            "B",
        ]);
        if udp {
            a.push("-u".into());
        }
        a.extend(strings(args));
        let p = Proc::spawn_labelled("iperf server", "stdbuf", &a);
        wait_bound(&p, udp, port);
        p
    }

    /// `iperf -c 127.0.0.1 -p PORT -f B ARGS`, run to completion.
    pub fn iperf_client(port: u16, args: &[&str]) -> Proc {
        let mut a = strings(&[
            "-oL",
            "-eL",
            "iperf",
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-f",
            "B",
        ]);
        a.extend(strings(args));
        let mut p = Proc::spawn_labelled("iperf client", "stdbuf", &a);
        let st = p.wait_exit(TIMEOUT);
        assert!(
            st.success(),
            "iperf client failed: {st}\n{}",
            p.transcript()
        );
        p
    }

    /// `bloatlab server -p PORT --json ARGS`, ready to accept.
    pub fn our_server(port: u16, udp: bool, args: &[&str]) -> Proc {
        let mut a = strings(&["server", "-p", &port.to_string(), "--json"]);
        if udp {
            a.push("-u".into());
        }
        a.extend(strings(args));
        let p = Proc::spawn_labelled("bloatlab server", bloatlab(), &a);
        wait_bound(&p, udp, port);
        p
    }

    /// `bloatlab client 127.0.0.1 -p PORT --json ARGS`, run to completion; its JSON.
    pub fn our_client(port: u16, args: &[&str]) -> (Proc, Value) {
        let mut a = strings(&["client", "127.0.0.1", "-p", &port.to_string(), "--json"]);
        a.extend(strings(args));
        let mut p = Proc::spawn_labelled("bloatlab client", bloatlab(), &a);
        let st = p.wait_exit(TIMEOUT);
        assert!(
            st.success(),
            "bloatlab client failed: {st}\n{}",
            p.transcript()
        );
        let docs = json_docs(&p.out());
        assert_eq!(
            docs.len(),
            1,
            "expected one JSON document\n{}",
            p.transcript()
        );
        let doc = docs.into_iter().next().unwrap();
        (p, doc)
    }

    /// One report line of iperf 2 console output (with `-f B`).
    #[derive(Debug, Clone)]
    pub struct Line {
        /// `1`, `*1`, `SUM`, `FD1`, ...
        pub id: String,
        pub start: f64,
        pub end: f64,
        pub bytes: u64,
        /// Tokens after `Bytes/sec`.
        pub rest: Vec<String>,
        /// The `[ ID] Interval ...` header above it.
        pub header: String,
        /// True if it follows a `Server Report:` line.
        pub server_report: bool,
    }

    /// What a header says the lines below it measure.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        Send,
        TcpRecv,
        UdpRecv,
        Plain,
    }

    impl Line {
        pub fn kind(&self) -> Kind {
            if self.header.contains("Jitter") {
                Kind::UdpRecv
            } else if self.header.contains("Write/Err") {
                Kind::Send
            } else if self.header.contains("Reads=Dist") || self.header.contains("Burst Latency") {
                Kind::TcpRecv
            } else {
                Kind::Plain
            }
        }

        /// UDP receive columns: (jitter ms, lost, total).
        pub fn udp(&self) -> (f64, u64, u64) {
            assert_eq!(self.kind(), Kind::UdpRecv, "{self:?}");
            let jitter: f64 = self.rest[0].parse().unwrap();
            let (lost, total) = self.rest[2].split_once('/').unwrap();
            (jitter, lost.parse().unwrap(), total.parse().unwrap())
        }

        /// `avg/min/max/stdev ms` latency columns (UDP -e or TCP trip-times receive).
        pub fn latency_ms(&self) -> [f64; 4] {
            let i = self
                .rest
                .iter()
                .position(|t| t.matches('/').count() == 3)
                .unwrap_or_else(|| panic!("no latency column in {self:?}"));
            let v: Vec<f64> = self.rest[i]
                .split('/')
                .map(|x| x.parse().unwrap())
                .collect();
            [v[0], v[1], v[2], v[3]]
        }

        /// TCP trip-times `(cnt/size)`.
        pub fn burst_cnt_size(&self) -> (u64, u64) {
            let t = self
                .rest
                .iter()
                .find(|t| t.starts_with('(') && t.contains('/'))
                .unwrap_or_else(|| panic!("no (cnt/size) in {self:?}"));
            let (c, s) = t
                .trim_matches(|c| c == '(' || c == ')')
                .split_once('/')
                .unwrap();
            (c.parse().unwrap(), s.parse().unwrap())
        }
    }

    pub fn lines(text: &str) -> Vec<Line> {
        let mut header = String::new();
        let mut server_report = false;
        let mut v = Vec::new();
        for l in text.lines() {
            let Some(close) = l.find(']') else { continue };
            if !l.starts_with('[') {
                continue;
            }
            let id = l[1..close].trim().to_string();
            let body = &l[close + 1..];
            if id == "ID" {
                header = body.to_string();
                continue;
            }
            if body.contains("Server Report:") {
                server_report = true;
                continue;
            }
            let t: Vec<&str> = body.split_whitespace().collect();
            if t.len() < 6 || t[1] != "sec" || t[3] != "Bytes" || t[5] != "Bytes/sec" {
                continue;
            }
            let Some((a, b)) = t[0].split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end), Ok(bytes)) = (a.parse(), b.parse(), t[2].parse()) else {
                continue;
            };
            v.push(Line {
                id,
                start,
                end,
                bytes,
                rest: t[6..].iter().map(|s| s.to_string()).collect(),
                header: header.clone(),
                server_report,
            });
        }
        v
    }

    /// The whole-test lines of `kind` (starting at 0; the tests use no `-i`),
    /// excluding sums and relayed server reports.
    pub fn stream_lines(text: &str, kind: Kind) -> Vec<Line> {
        lines(text)
            .into_iter()
            .filter(|l| {
                l.kind() == kind && !l.server_report && l.id != "SUM" && !l.id.starts_with("FD")
            })
            .filter(|l| l.start == 0.0 && l.end > l.start)
            .collect()
    }

    /// Waits for `n` final report lines of `kind` on an iperf server.
    pub fn wait_lines(p: &Proc, kind: Kind, n: usize) -> Vec<Line> {
        let out = p.wait_out(
            &format!("{n} iperf report line(s) of kind {kind:?}"),
            TIMEOUT,
            |s| stream_lines(s, kind).len() >= n,
        );
        stream_lines(&out, kind)
    }

    /// Our JSON, normalised. `bloatlab --json` writes METRICS' `Document`
    /// (`schema_version`); the engine's earlier `bloatlab.tcp/1` /
    /// `bloatlab.udp/1` documents are read too so the checks below do not
    /// depend on which one a build prints.
    #[derive(Debug, Default)]
    pub struct Ours {
        /// Whole-test records of every stream.
        pub streams: Vec<Rec>,
        /// The server's report of each stream as relayed to the client
        /// (`server_side`, built from the AckFIN for an iperf 2 server).
        pub relayed: Vec<Rec>,
    }

    #[derive(Debug, Default, Clone)]
    pub struct Rec {
        pub send: bool,
        pub bytes: u64,
        /// TCP trip-times: (count, negative count, min, mean, max ms).
        pub burst: Option<(u64, u64, f64, f64, f64)>,
        /// UDP receive: (datagrams total, lost, jitter ms).
        pub udp: Option<(u64, u64, f64)>,
        /// UDP latency (min, mean, max ms, negative count).
        pub latency: Option<(f64, f64, f64, u64)>,
    }

    fn num(v: &Value) -> Option<f64> {
        v.as_f64()
    }

    fn rec_new(send: bool, r: &Value) -> Rec {
        let lat = |l: &Value| {
            Some((
                num(&l["latency_ms_min"])?,
                num(&l["latency_ms_mean"])?,
                num(&l["latency_ms_max"])?,
                l["negative_count"].as_u64()?,
            ))
        };
        Rec {
            send,
            bytes: u(&r["bytes"]),
            burst: lat(&r["tcp_recv"]["burst_latency"]).map(|(mn, me, mx, neg)| {
                (
                    r["tcp_recv"]["burst_latency"]["count"]
                        .as_u64()
                        .unwrap_or(0),
                    neg,
                    mn,
                    me,
                    mx,
                )
            }),
            udp: r["udp_recv"].is_object().then(|| {
                (
                    u(&r["udp_recv"]["datagrams_total"]),
                    u(&r["udp_recv"]["lost"]),
                    f(&r["udp_recv"]["jitter_ms"]),
                )
            }),
            latency: lat(&r["udp_recv"]["latency"]),
        }
    }

    fn rec_old(send: bool, t: &Value) -> Rec {
        let b = &t["burst"];
        Rec {
            send,
            bytes: u(&t["bytes"]),
            burst: b.is_object().then(|| {
                (
                    b["count"].as_u64().unwrap_or(0),
                    b["negative_count"].as_u64().unwrap_or(0),
                    f(&b["latency_min_ms"]),
                    f(&b["latency_mean_ms"]),
                    f(&b["latency_max_ms"]),
                )
            }),
            udp: t["jitter_ms"]
                .is_number()
                .then(|| (u(&t["datagrams"]), u(&t["lost"]), f(&t["jitter_ms"]))),
            latency: t["latency_mean_ms"].as_f64().map(|me| {
                (
                    f(&t["latency_min_ms"]),
                    me,
                    f(&t["latency_max_ms"]),
                    t["latency_negative_count"].as_u64().unwrap_or(0),
                )
            }),
        }
    }

    pub fn ours(doc: &Value) -> Ours {
        let mut o = Ours::default();
        let streams = doc["streams"]
            .as_array()
            .unwrap_or_else(|| panic!("no streams in {doc}"));
        for s in streams {
            if doc["schema_version"].is_number() {
                o.streams
                    .push(rec_new(s["direction"] == "send", &s["summary"]));
                if s["server_side"]["summary"].is_object() {
                    o.relayed.push(rec_new(false, &s["server_side"]["summary"]));
                }
            } else {
                for (dir, send) in [("send", true), ("recv", false)] {
                    if s[dir]["total"].is_object() {
                        o.streams.push(rec_old(send, &s[dir]["total"]));
                    }
                }
                if s["server_report"].is_object() {
                    o.relayed.push(rec_old(false, &s["server_report"]));
                }
            }
        }
        o
    }

    impl Ours {
        /// Sorted per-stream bytes in one direction.
        pub fn bytes(&self, send: bool) -> Vec<u64> {
            let mut v: Vec<u64> = self
                .streams
                .iter()
                .filter(|r| r.send == send)
                .map(|r| r.bytes)
                .collect();
            v.sort_unstable();
            v
        }

        pub fn first(&self, send: bool) -> &Rec {
            self.streams
                .iter()
                .find(|r| r.send == send)
                .expect("a stream in that direction")
        }
    }

    /// Sorted byte counts of iperf lines.
    pub fn sorted_bytes(lines: &[Line]) -> Vec<u64> {
        let mut v: Vec<u64> = lines.iter().map(|l| l.bytes).collect();
        v.sort_unstable();
        v
    }

    pub fn f(v: &Value) -> f64 {
        v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
    }

    pub fn u(v: &Value) -> u64 {
        v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
    }

    /// iperf prints ms with 3 decimals (truncated µs), our JSON has ns.
    pub fn close_ms(a: f64, b: f64) -> bool {
        (a - b).abs() <= 0.0021
    }
}

use bloatlab_testkit::tier;
use util::*;

// ---------------------------------------------------------------- TCP: our client -> iperf -s

/// Runs our TCP client with `client_args` against `iperf -s server_args` and
/// checks the byte counts of every stream in each direction agree exactly.
fn our_tcp_client_vs_iperf(
    server_args: &[&str],
    client_args: &[&str],
    streams: usize,
) -> (Proc, serde_json::Value) {
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, false, server_args);
    let (client, doc) = our_client(port, client_args);
    let ctx = || format!("{}\n{}", client.transcript(), server.transcript());
    let reverse = client_args.contains(&"-R");
    let duplex = client_args.contains(&"--full-duplex");
    let enhanced = server_args.contains(&"-e");
    // What iperf received from us.
    if !reverse {
        let kind = if enhanced { Kind::TcpRecv } else { Kind::Plain };
        let theirs = wait_lines(&server, kind, streams);
        assert_eq!(
            sorted_bytes(&theirs),
            ours(&doc).bytes(true),
            "bytes we sent vs iperf received\n{}",
            ctx()
        );
    }
    // What iperf sent to us.
    if reverse || duplex {
        let theirs = wait_lines(&server, Kind::Send, streams);
        assert_eq!(
            sorted_bytes(&theirs),
            ours(&doc).bytes(false),
            "bytes iperf sent vs we received\n{}",
            ctx()
        );
    }
    (server, doc)
}

#[test]
fn our_tcp_client_to_iperf_server_plain() {
    our_tcp_client_vs_iperf(&[], &["-t", "1"], 1);
}

#[test]
fn our_tcp_client_to_iperf_server_enhanced() {
    let (server, doc) = our_tcp_client_vs_iperf(&["-e"], &["-t", "1", "-e"], 1);
    assert!(server.out().contains("(peer "), "{}", server.transcript());
    // Issue 24: iperf 2's protocol carries no CPU time, so the client
    // reports only its own.
    assert!(doc["cpu"]["cpu_s_per_gb"].is_f64(), "{doc}");
    assert!(doc.get("peer_cpu").is_none(), "{doc}");
}

#[test]
fn our_tcp_client_to_iperf_server_trip_times() {
    let (server, doc) = our_tcp_client_vs_iperf(&["-e"], &["-t", "1", "-e", "--trip-times"], 1);
    let out = server.out();
    assert!(out.contains("(trip-times)"), "{}", server.transcript());
    let line = &stream_lines(&out, Kind::TcpRecv)[0];
    let [avg, min, max, stdev] = line.latency_ms();
    assert!(
        min >= 0.0 && min <= avg && avg <= max && stdev >= 0.0,
        "{line:?}"
    );
    // The stream after the 80-byte test header is framed into bursts of -l
    // (default 128 KiB), each starting with our 92-byte header. Count them from
    // the bytes: write() calls may be partial under load, so `writes` is not it.
    let (cnt, size) = line.burst_cnt_size();
    let sent = ours(&doc).first(true).bytes;
    let bursts = (sent - 80) / 131_072;
    assert_eq!(size, 131_072, "{line:?}");
    assert!(
        cnt.abs_diff(bursts) <= 1,
        "iperf counted {cnt} bursts in {sent} bytes ({bursts} whole bursts)\n{}",
        server.transcript()
    );
}

#[test]
fn our_tcp_client_to_iperf_server_reverse() {
    our_tcp_client_vs_iperf(&["-e"], &["-t", "1", "-R"], 1);
}

#[test]
fn iperf_server_serves_a_reverse_test_with_the_sender_block() {
    if !tier::root("iperf_server_serves_a_reverse_test_with_the_sender_block") {
        return;
    }
    // -R/--full-duplex headers carry bloatlab's 24-byte sender block and an 8-byte
    // flow id (112 bytes in all, docs/wire.md): iperf 2.1.8 must run the test exactly
    // as before, and since it cannot be asked for -Z, our client says so and records
    // no sender cc. It sent no hello, so it never gets a flow query, and the server's
    // sender TCP_INFO stays not measured.
    for mode in ["-R", "--full-duplex"] {
        let (server, doc) = our_tcp_client_vs_iperf(
            &["-e"],
            &["-t", "1", mode, "-Z", "cubic", "--notsent-lowat", "32K"],
            1,
        );
        assert!(!server.out().contains("WARN"), "{}", server.transcript());
        let recv = doc["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["direction"] == "receive")
            .unwrap();
        assert!(recv.get("sender_congestion_control").is_none(), "{doc}");
        assert!(recv.get("peer_sender_tcp_info").is_none(), "{doc}");
    }
    require_iperf2();
    let port = free_port();
    let _server = iperf_server(port, false, &[]);
    let (client, _) = our_client(port, &["-t", "1", "-R", "-Z", "cubic"]);
    assert!(
        client
            .err()
            .contains("warning: -Z cubic applies to this end only"),
        "{}",
        client.transcript()
    );
    assert!(
        !client.err().contains("TCP_INFO"),
        "{}",
        client.transcript()
    );
}

#[test]
fn our_tcp_client_to_iperf_server_full_duplex() {
    our_tcp_client_vs_iperf(&["-e"], &["-t", "1", "--full-duplex"], 1);
}

#[test]
fn our_tcp_client_to_iperf_server_parallel_4() {
    let (server, doc) = our_tcp_client_vs_iperf(&["-e"], &["-t", "1", "-P", "4"], 4);
    let sum = lines(&server.wait_out("[SUM] line", TIMEOUT, |s| s.contains("[SUM]")))
        .into_iter()
        .find(|l| l.id == "SUM")
        .unwrap();
    assert_eq!(
        sum.bytes,
        ours(&doc).bytes(true).iter().sum::<u64>(),
        "{}",
        server.transcript()
    );
}

#[test]
fn our_tcp_client_peer_detect_reads_the_iperf_ack() {
    let (_, doc) = our_tcp_client_vs_iperf(&["-e"], &["-t", "1", "-X"], 1);
    // With -X we wait for the server's ack and learn its version.
    assert!(
        doc.to_string().contains("2.1.8"),
        "peer version missing from {doc}"
    );
}

// ---------------------------------------------------------------- TCP: iperf -c -> our server

/// Runs `iperf -c client_args` against our TCP server and compares bytes per
/// stream in each direction; returns our server's JSON document.
fn iperf_tcp_client_vs_ours(client_args: &[&str], streams: usize) -> (Proc, serde_json::Value) {
    require_iperf2();
    let port = free_port();
    let server = our_server(port, false, &["-e"]);
    let client = iperf_client(port, client_args);
    let reverse = client_args.contains(&"-R");
    let duplex = client_args.contains(&"--full-duplex");
    let doc = server.wait_json_streams(streams * if duplex { 2 } else { 1 });
    let ctx = || format!("{}\n{}\n{doc}", client.transcript(), server.transcript());
    let out = client.out();
    let enhanced = client_args.contains(&"-e");
    if !reverse {
        let kind = if enhanced { Kind::Send } else { Kind::Plain };
        let sent = stream_lines(&out, kind);
        assert_eq!(sent.len(), streams, "{}", ctx());
        assert_eq!(
            sorted_bytes(&sent),
            ours(&doc).bytes(false),
            "iperf sent vs we received\n{}",
            ctx()
        );
    }
    if reverse || duplex {
        let got = stream_lines(&out, if enhanced { Kind::TcpRecv } else { Kind::Plain })
            .into_iter()
            .filter(|l| l.id.starts_with('*') || duplex)
            .collect::<Vec<_>>();
        assert_eq!(got.len(), streams, "{}", ctx());
        assert_eq!(
            sorted_bytes(&got),
            ours(&doc).bytes(true),
            "we sent vs iperf received\n{}",
            ctx()
        );
    }
    (client, doc)
}

#[test]
fn iperf_tcp_client_to_our_server_plain() {
    iperf_tcp_client_vs_ours(&["-t", "1"], 1);
}

#[test]
fn iperf_tcp_client_to_our_server_enhanced() {
    iperf_tcp_client_vs_ours(&["-t", "1", "-e"], 1);
}

#[test]
fn iperf_tcp_client_to_our_server_trip_times() {
    let (client, doc) = iperf_tcp_client_vs_ours(&["-t", "1", "-e", "--trip-times"], 1);
    let (cnt, negative, min, mean, max) = ours(&doc)
        .first(false)
        .burst
        .expect("burst latency in our JSON");
    // Bursts of 128 KiB after iperf's 80-byte test header.
    let sent = stream_lines(&client.out(), Kind::Send)[0].bytes;
    let bursts = (sent - 80) / 131_072;
    assert!(
        cnt.abs_diff(bursts) <= 1,
        "we de-framed {cnt} bursts from {sent} bytes ({bursts} whole bursts): {doc}"
    );
    assert!(0.0 <= min && min <= mean && mean <= max, "{doc}");
    assert_eq!(negative, 0, "same host, same clock: {doc}");
}

#[test]
fn iperf_tcp_client_to_our_server_reverse() {
    iperf_tcp_client_vs_ours(&["-t", "1", "-e", "-R"], 1);
}

#[test]
fn iperf_tcp_client_to_our_server_full_duplex() {
    iperf_tcp_client_vs_ours(&["-t", "1", "-e", "--full-duplex"], 1);
}

#[test]
fn iperf_tcp_client_to_our_server_parallel_4() {
    let (client, doc) = iperf_tcp_client_vs_ours(&["-t", "1", "-e", "-P", "4"], 4);
    let sum = lines(&client.out())
        .into_iter()
        .find(|l| l.id == "SUM")
        .expect("[SUM] line");
    assert_eq!(
        sum.bytes,
        ours(&doc).bytes(false).iter().sum::<u64>(),
        "{}",
        client.transcript()
    );
}

#[test]
fn iperf_tcp_client_peer_detect_gets_our_ack() {
    // iperf -X blocks until our ack arrives; trip-times adds the clock check.
    let (client, _) = iperf_tcp_client_vs_ours(&["-t", "1", "-e", "-X", "--trip-times"], 1);
    // iperf prints the clock check (computed from our 52-byte ack) on stderr.
    assert!(
        client.err().contains("Clock sync check"),
        "{}",
        client.transcript()
    );
}

// ---------------------------------------------------------------- UDP

/// Our UDP client against `iperf -s -u`: the server report we relay equals the
/// server's own line.
fn our_udp_client_vs_iperf(
    server_args: &[&str],
    client_args: &[&str],
) -> (Proc, Proc, serde_json::Value) {
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, true, server_args);
    let mut args = vec!["-u", "-t", "1", "-b", "10m"];
    args.extend_from_slice(client_args);
    let (client, doc) = our_client(port, &args);
    let theirs = wait_lines(&server, Kind::UdpRecv, 1).remove(0);
    let ctx = format!("{}\n{}\n{doc}", client.transcript(), server.transcript());
    let (jitter, lost, total) = theirs.udp();
    let o = ours(&doc);
    let relayed = o
        .relayed
        .first()
        .unwrap_or_else(|| panic!("no AckFIN relayed\n{ctx}"));
    let (r_total, r_lost, r_jitter) = relayed.udp.expect("udp receive numbers");
    assert_eq!(relayed.bytes, theirs.bytes, "{ctx}");
    assert_eq!(r_lost, lost, "{ctx}");
    assert_eq!(r_total, total, "{ctx}");
    assert!(close_ms(r_jitter, jitter), "{ctx}");
    assert!(lost <= total && total > 0, "{ctx}");
    // What we sent vs what iperf counted (iperf counts the FIN datagram too).
    let sent = o.first(true).bytes;
    let dgram = theirs.bytes / total.max(1);
    assert!(
        sent.abs_diff(theirs.bytes + lost * dgram) <= 2 * dgram,
        "sent {sent}\n{ctx}"
    );
    (client, server, doc)
}

#[test]
fn our_udp_client_to_iperf_server_rate() {
    our_udp_client_vs_iperf(&[], &[]);
}

/// 64-byte datagrams: the header is cut after 48 bytes, in our datagrams as in iperf's.
#[test]
fn our_udp_client_with_64_byte_datagrams_to_iperf_server() {
    our_udp_client_vs_iperf(&[], &["-l", "64"]);
}

#[test]
fn our_udp_client_to_iperf_server_enhanced_trip_times() {
    let (_, server, doc) = our_udp_client_vs_iperf(&["-e"], &["-e", "--trip-times"]);
    let theirs = &stream_lines(&server.out(), Kind::UdpRecv)[0];
    let [avg, min, max, _] = theirs.latency_ms();
    let (rmin, rmean, rmax, _) = ours(&doc).relayed[0].latency.expect("relayed latency");
    assert!(close_ms(rmean, avg), "{doc}\n{theirs:?}");
    assert!(close_ms(rmin, min), "{doc}\n{theirs:?}");
    assert!(close_ms(rmax, max), "{doc}\n{theirs:?}");
    assert!(
        server.out().contains("(trip-times)"),
        "{}",
        server.transcript()
    );
}

/// `iperf -c -u` against our UDP server: iperf's relayed "Server Report" (our
/// AckFIN) equals our server's own numbers.
fn iperf_udp_client_vs_ours(client_args: &[&str]) -> (Proc, serde_json::Value) {
    require_iperf2();
    let port = free_port();
    let server = our_server(port, true, &["-e"]);
    let mut args = vec!["-u", "-t", "1", "-b", "10m"];
    args.extend_from_slice(client_args);
    let client = iperf_client(port, &args);
    let doc = server.wait_json_streams(1);
    let out = client.out();
    let ctx = format!("{}\n{}\n{doc}", client.transcript(), server.transcript());
    assert!(
        !out.contains("did not receive ack"),
        "iperf got no AckFIN\n{ctx}"
    );
    let report = lines(&out)
        .into_iter()
        .find(|l| l.server_report)
        .unwrap_or_else(|| panic!("no Server Report line\n{ctx}"));
    let rec = ours(&doc).first(false).clone();
    let (o_total, o_lost, o_jitter) = rec.udp.expect("udp receive numbers");
    let (jitter, lost, total) = report.udp();
    assert_eq!(report.bytes, rec.bytes, "{ctx}");
    assert_eq!(lost, o_lost, "{ctx}");
    assert_eq!(total, o_total, "{ctx}");
    assert!(close_ms(jitter, o_jitter), "{ctx}");
    (client, doc)
}

#[test]
fn iperf_udp_client_to_our_server_rate() {
    iperf_udp_client_vs_ours(&[]);
}

/// iperf 2.1.8 with `-l 64` sends its first datagram whole (76 bytes) and the rest with
/// the header cut short; our server takes the test from either (it refused both once).
#[test]
fn iperf_udp_client_with_64_byte_datagrams_to_our_server() {
    iperf_udp_client_vs_ours(&["-l", "64"]);
}

#[test]
fn iperf_udp_client_to_our_server_enhanced_trip_times() {
    let (client, doc) = iperf_udp_client_vs_ours(&["-e", "--trip-times"]);
    let report = lines(&client.out())
        .into_iter()
        .find(|l| l.server_report)
        .unwrap();
    let [avg, min, max, _] = report.latency_ms();
    let (omin, omean, omax, negative) = ours(&doc)
        .first(false)
        .latency
        .expect("latency in our JSON");
    assert!(close_ms(avg, omean), "{report:?} {doc}");
    assert!(close_ms(min, omin), "{report:?} {doc}");
    assert!(close_ms(max, omax), "{report:?} {doc}");
    assert_eq!(negative, 0, "{doc}");
}

// ---------------------------------------------------------------- UDP -R (reverse)

/// `[  1] Sent N datagrams` of a UDP sender (iperf 2: the FIN's id + 1).
fn sent_datagrams(out: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| l.split("Sent ").nth(1)?.strip_suffix(" datagrams"))
        .and_then(|n| n.trim().parse().ok())
}

/// Our `client -u -R` against `iperf -s -u`: iperf sends at our `-b`, and
/// what we received plus what we lost is what it sent.
fn our_udp_reverse_client_vs_iperf(server_args: &[&str], client_args: &[&str]) {
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, true, server_args);
    let mut args = vec!["-u", "-R", "-t", "1", "-b", "2m", "-l", "500"];
    args.extend_from_slice(client_args);
    let (client, doc) = our_client(port, &args);
    // "Sent N" follows the final line (Write/Err columns with -e, plain without).
    let out = server.wait_out("Sent N datagrams", TIMEOUT, |s| sent_datagrams(s).is_some());
    let ctx = format!("{}\n{}\n{doc}", client.transcript(), server.transcript());
    let theirs = lines(&out)
        .into_iter()
        .find(|l| l.id == "1" && l.start == 0.0 && l.end > 0.0)
        .unwrap_or_else(|| panic!("no final send line\n{ctx}"));
    assert!(out.contains("(reverse)"), "{ctx}");
    assert_eq!(doc["streams"][0]["direction"], "receive", "{ctx}");
    let rec = ours(&doc).first(false).clone();
    let (total, lost, _jitter) = rec.udp.expect("udp receive numbers");
    // iperf's FIN has id -(Sent - 1); we count it as the last datagram, as
    // iperf's own receiver does.
    assert_eq!(Some(total + 1), sent_datagrams(&out), "{ctx}");
    assert!(lost <= total / 20, "{ctx}");
    // Both count the FIN's bytes: received + lost = sent.
    assert_eq!(rec.bytes + lost * 500, theirs.bytes, "{ctx}");
    // 2 Mbit/s of 500-byte datagrams for 1 s.
    assert!((400..=600).contains(&total), "{ctx}");
}

#[test]
fn our_udp_reverse_client_to_iperf_server() {
    our_udp_reverse_client_vs_iperf(&[], &[]);
}

#[test]
fn our_udp_reverse_client_to_iperf_server_enhanced_trip_times() {
    our_udp_reverse_client_vs_iperf(&["-e"], &["-e", "--trip-times"]);
}

/// `iperf -c -u -R` against our server: we send at iperf's `-b`, and iperf's
/// receive line accounts for every datagram we sent.
fn iperf_udp_reverse_client_vs_ours(client_args: &[&str]) -> (Proc, serde_json::Value) {
    require_iperf2();
    let port = free_port();
    // iperf 2 cannot do the cookie exchange: the operator opts in.
    let server = our_server(port, true, &["-e", "--unverified-reverse-rate", "2m"]);
    let mut args = vec!["-u", "-R", "-t", "1", "-b", "2m", "-l", "500"];
    args.extend_from_slice(client_args);
    let client = iperf_client(port, &args);
    let doc = server.wait_json_streams(1);
    let ctx = format!("{}\n{}\n{doc}", client.transcript(), server.transcript());
    assert_eq!(doc["streams"][0]["direction"], "send", "{ctx}");
    assert_eq!(doc["test"]["reverse"], true, "{ctx}");
    let sum = &doc["streams"][0]["summary"];
    let sent_bytes = u(&sum["bytes"]);
    let sent = u(&sum["udp_send"]["datagrams"]);
    let theirs = stream_lines(&client.out(), Kind::UdpRecv)
        .into_iter()
        .find(|l| l.id == "*1")
        .unwrap_or_else(|| panic!("no [ *1] receive line\n{ctx}"));
    let (_jitter, lost, total) = theirs.udp();
    // Our data datagrams plus the FIN are iperf's Total.
    assert_eq!(total, sent + 1, "{ctx}");
    // iperf --trip-times consumes the first datagram as the server's
    // header and counts it lost (2.1.8 does the same with its own server).
    assert!(lost <= 1 + total / 20, "{ctx}");
    // iperf counts the FIN's bytes; we do not count it as a data write.
    assert_eq!(theirs.bytes + lost * 500, sent_bytes + 500, "{ctx}");
    assert!((400..=600).contains(&sent), "{ctx}");
    (client, doc)
}

#[test]
fn iperf_udp_reverse_client_to_our_server() {
    let (client, _) = iperf_udp_reverse_client_vs_ours(&[]);
    assert!(
        client.out().contains("(reverse)"),
        "{}",
        client.transcript()
    );
}

/// iperf 2.1.8 `-u -R` cannot do the return-routability cookie exchange:
/// a default server (no `--unverified-reverse-rate`) refuses it with one
/// clear log line and sends it nothing (issue 19: it was a reflector).
#[test]
fn iperf_udp_reverse_client_is_refused_by_a_default_server_with_a_log_line() {
    require_iperf2();
    let port = free_port();
    let server = our_server(port, true, &[]);
    let port_s = port.to_string();
    let client = Proc::spawn_labelled(
        "iperf client",
        "iperf",
        &[
            "-c",
            "127.0.0.1",
            "-p",
            &port_s,
            "-u",
            "-R",
            "-t",
            "1",
            "-b",
            "2m",
        ],
    );
    let log = server.wait_err("the refusal", TIMEOUT, |e| {
        e.contains("refusing a UDP test from")
    });
    assert!(
        log.contains("off unless the operator opts in with --unverified-reverse-rate RATE"),
        "{log}"
    );
    // Let the client retry its header a while: still nothing sent to it.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        !server.out().contains("\"direction\": \"send\""),
        "{}\n{}",
        server.transcript(),
        client.transcript()
    );
    drop(client);
}

#[test]
fn iperf_udp_reverse_client_to_our_server_enhanced_trip_times() {
    let (client, _) = iperf_udp_reverse_client_vs_ours(&["-e", "--trip-times"]);
    let line = stream_lines(&client.out(), Kind::UdpRecv)
        .into_iter()
        .find(|l| l.id == "*1")
        .unwrap();
    let [avg, min, _, _] = line.latency_ms();
    // One host, one clock: small and never negative.
    assert!(min >= 0.0 && avg < 50.0, "{}", client.transcript());
}

// ---------------------------------------------------------------- UDP --full-duplex

/// Our `client -u --full-duplex` against `iperf -s -u`: both directions
/// flow, neither side sends an AckFIN, and each receiver's Total is the other
/// sender's FIN id.
#[test]
fn our_udp_full_duplex_client_to_iperf_server() {
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, true, &["-e"]);
    let (client, doc) = our_client(
        port,
        &["-u", "--full-duplex", "-t", "1", "-b", "2m", "-l", "500"],
    );
    let out = server.wait_out("Sent N and the FD line", TIMEOUT, |s| {
        sent_datagrams(s).is_some() && s.contains("[FD1]")
    });
    let ctx = format!("{}\n{}\n{doc}", client.transcript(), server.transcript());
    assert!(out.contains("(full-duplex) (no-udp-fin)"), "{ctx}");
    let o = ours(&doc);
    let (total, lost, _) = o.first(false).udp.expect("udp receive numbers");
    assert_eq!(Some(total + 1), sent_datagrams(&out), "{ctx}");
    assert!(lost <= total / 20, "{ctx}");
    let sent_bytes = o.first(true).bytes;
    let theirs = lines(&out)
        .into_iter()
        .find(|l| l.id == "1" && l.kind() == Kind::UdpRecv && l.start == 0.0)
        .unwrap_or_else(|| panic!("no iperf receive line\n{ctx}"));
    let (_, t_lost, t_total) = theirs.udp();
    assert!(t_lost <= t_total / 20, "{ctx}");
    // iperf counts our FIN (bytes and Total); our Transfer does not.
    assert_eq!(theirs.bytes + t_lost * 500, sent_bytes + 500, "{ctx}");
    assert!((400..=600).contains(&total), "{ctx}");
}

/// `iperf -c -u --full-duplex` against our server.
#[test]
fn iperf_udp_full_duplex_client_to_our_server() {
    require_iperf2();
    let port = free_port();
    // iperf 2 cannot do the cookie exchange: the operator opts in.
    let server = our_server(port, true, &["-e", "--unverified-reverse-rate", "2m"]);
    let client = iperf_client(
        port,
        &[
            "-u",
            "-e",
            "--full-duplex",
            "-t",
            "1",
            "-b",
            "2m",
            "-l",
            "500",
        ],
    );
    // One receive and one send document.
    let doc = server.wait_json_streams(2);
    let ctx = format!("{}\n{}\n{doc}", client.transcript(), server.transcript());
    let o = ours(&doc);
    let out = client.out();
    assert!(out.contains("(full-duplex)"), "{ctx}");
    // iperf's receive line ([ *1]) vs what we sent.
    let rx = lines(&out)
        .into_iter()
        .find(|l| l.id == "*1" && l.kind() == Kind::UdpRecv && l.start == 0.0)
        .unwrap_or_else(|| panic!("no iperf [ *1] receive line\n{ctx}"));
    let (_, lost, total) = rx.udp();
    let sent_bytes = o.first(true).bytes;
    assert!(lost <= 1 + total / 20, "{ctx}");
    assert_eq!(rx.bytes + lost * 500, sent_bytes + 500, "{ctx}");
    // iperf's send line ([  1], Sent N) vs what we received.
    let (o_total, o_lost, _) = o.first(false).udp.expect("udp receive numbers");
    assert_eq!(Some(o_total + 1), sent_datagrams(&out), "{ctx}");
    assert!(o_lost <= o_total / 20, "{ctx}");
    assert!((400..=600).contains(&o_total), "{ctx}");
}

// ---------------------------------------------------------------- bloatlab extension marker

/// The BLAB marker in `client_hdrext.type/length` must not change how a real
/// 2.1.8 server treats the test (docs/wire.md): it prints a normal report with
/// exactly the bytes we sent.
#[test]
fn iperf_server_accepts_bloatlab_marked_tcp_header() {
    use bloatlab_wire::*;
    use std::io::{Read, Write};
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, false, &["-e"]);
    let core = ClientHeaderRepr::new(Amount::Time(std::time::Duration::from_secs(1)))
        .with_bloatlab_ext(BLOATLAB_EXT_VERSION);
    let h = TcpTestHeaderRepr {
        core,
        start_fq: None,
        isoch_settings: None,
    };
    let mut buf = vec![0u8; h.buffer_len()];
    h.emit(&mut TcpTestHeader::new_unchecked(&mut buf[..]));
    assert_eq!(&buf[24..28], b"BLAB");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(&buf).unwrap();
    let payload = vec![b'7'; 1 << 20];
    for _ in 0..8 {
        s.write_all(&payload).unwrap();
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    // A plain forward test from an EXTEND client gets the 28-byte ack.
    let ack = ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(&back[..])).unwrap();
    assert_eq!(ack.version, PeerVersion::IPERF_2_1_8);
    let line = wait_lines(&server, Kind::TcpRecv, 1).remove(0);
    assert_eq!(
        line.bytes,
        (buf.len() + 8 * payload.len()) as u64,
        "{}",
        server.transcript()
    );
    assert!(
        server.out().contains("(peer 2.1.8)"),
        "{}",
        server.transcript()
    );
    assert!(!server.out().contains("WARN"), "{}", server.transcript());
}

#[test]
fn iperf_server_accepts_bloatlab_marked_udp_header() {
    use bloatlab_wire::*;
    use std::time::{Duration, SystemTime};
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, true, &["-e"]);
    let mut core = ClientHeaderRepr::new(Amount::Time(Duration::from_secs(1)))
        .with_bloatlab_ext(BLOATLAB_EXT_VERSION);
    core.buf_len = bloatlab_engine::config::Bytes(200);
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(10)))
        .unwrap();
    let mut pkt = [0u8; 200];
    let mut send = |seqno: i64| {
        let r = UdpDatagramRepr {
            seqno,
            timestamp: WallTime::from(SystemTime::now()),
            header: Some(UdpHeaderRepr::new(core)),
        };
        r.emit(&mut UdpDatagram::new_unchecked(&mut pkt[..]));
        assert_eq!(&pkt[40..44], b"BLAB");
        sock.send(&pkt).unwrap();
    };
    for seq in 1..=100 {
        send(seq);
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut ackfin = None;
    let mut buf = [0u8; 2048];
    for i in 0..200 {
        send(-(101 + i));
        if let Ok(n) = sock.recv(&mut buf) {
            ackfin = Some(ServerReportRepr::parse(&AckFin::new_unchecked(&buf[..n])).unwrap());
            break;
        }
    }
    let r = ackfin.unwrap_or_else(|| panic!("no AckFIN\n{}", server.transcript()));
    let line = wait_lines(&server, Kind::UdpRecv, 1).remove(0);
    let (_, lost, total) = line.udp();
    assert_eq!(
        (r.total_bytes.0, r.datagrams as u64, r.lost as u64),
        (line.bytes, total, lost)
    );
    assert!(total >= 100, "{}", server.transcript());
    assert!(
        server.out().contains("(peer 2.1.8)"),
        "{}",
        server.transcript()
    );
}

// ---------------------------------------------------------------- --permit-key (TCP only, as in iperf 2)

const KEY: &str = "--permit-key=abcd1234";

#[test]
fn our_tcp_client_with_permit_key_to_keyed_iperf_server() {
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, false, &["-e", KEY]);
    let (client, doc) = our_client(port, &["-t", "1", KEY]);
    let theirs = wait_lines(&server, Kind::TcpRecv, 1);
    let ctx = format!("{}\n{}", client.transcript(), server.transcript());
    assert_eq!(theirs[0].id, "abcd1234(1)", "{ctx}");
    // iperf 2.1.8 reads the key with a separate recvn() that its byte count
    // leaves out (Listener::test_permit_key), so it counts 8 bytes less than
    // we sent; `iperf -c --permit-key` against `iperf -s` shows the same.
    assert_eq!(
        theirs[0].bytes + 8,
        ours(&doc).bytes(true)[0],
        "bytes we sent vs iperf received\n{ctx}"
    );
    assert!(!server.out().contains("permit key fail"), "{ctx}");
}

/// A real `iperf -s --permit-key` refusing our client (missing or wrong key): the
/// client exits 1 saying the server refused the test, never 0 with a rate.
#[test]
fn keyed_iperf_server_refusing_our_client_makes_it_exit_1() {
    require_iperf2();
    let port = free_port();
    let server = iperf_server(port, false, &["-e", KEY]);
    for key in [None, Some("--permit-key=abcd9999")] {
        let mut args = vec![
            "client".to_owned(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-t".into(),
            "1".into(),
        ];
        args.extend(key.map(str::to_owned));
        let mut client = Proc::spawn_labelled("bloatlab client", bloatlab(), &args);
        let st = client.wait_exit(TIMEOUT);
        let ctx = format!("{key:?}\n{}\n{}", client.transcript(), server.transcript());
        assert_eq!(st.code(), Some(1), "{ctx}");
        assert!(
            client.err().contains("the server refused the test"),
            "{ctx}"
        );
    }
    server.wait_out("iperf's two permit key refusals", TIMEOUT, |s| {
        s.matches("(permit key fail)").count() >= 2
    });
}

/// `iperf -c` sees the same refusal from our keyed server as from a keyed iperf 2.1.8
/// server: the connection reset under its writes ("tcp write failed" on stderr), the
/// same exit status (iperf 2.1.8 exits 0 even so), and no full-length transfer.
#[test]
fn iperf_client_sees_our_keyed_refusal_as_iperfs_own() {
    require_iperf2();
    let theirs_port = free_port();
    let theirs = iperf_server(theirs_port, false, &[KEY]);
    let ours_port = free_port();
    let ours_srv = our_server(ours_port, false, &[KEY]);
    // What an iperf client observes of one refused attempt.
    let observe = |port: u16, args: &[&str]| {
        let mut a = vec!["-t", "2"];
        a.extend_from_slice(args);
        let c = iperf_client(port, &a);
        let lines = stream_lines(&c.out(), Kind::Plain);
        let short = !lines.is_empty() && lines.iter().all(|l| l.end < 1.0);
        let reset = c.err().contains("write failed");
        ((reset, short), c.transcript())
    };
    for args in [&[][..], &["--permit-key=abcd9999"][..]] {
        let (want, t1) = observe(theirs_port, args);
        let (got, t2) = observe(ours_port, args);
        assert_eq!(want, (true, true), "iperf vs iperf {args:?}\n{t1}");
        assert_eq!(got, want, "iperf vs ours {args:?}\n{t2}\n{t1}");
    }
    ours_srv.wait_err("our two refusals", TIMEOUT, |s| {
        s.matches("permit key fail").count() >= 2
    });
    theirs.wait_out("iperf's two refusals", TIMEOUT, |s| {
        s.matches("(permit key fail)").count() >= 2
    });
}

#[test]
fn iperf_client_with_permit_key_to_our_keyed_server() {
    require_iperf2();
    let port = free_port();
    let server = our_server(port, false, &["-e", KEY]);
    let client = iperf_client(port, &["-t", "1", KEY]);
    let doc = server.wait_json_streams(1);
    let sent = stream_lines(&client.out(), Kind::Plain);
    assert_eq!(
        sent.len(),
        1,
        "{}\n{}",
        client.transcript(),
        server.transcript()
    );
    assert_eq!(sent[0].id, "abcd1234(1)");
    assert_eq!(
        sorted_bytes(&sent),
        ours(&doc).bytes(false),
        "iperf sent vs we received\n{}\n{}",
        client.transcript(),
        server.transcript()
    );
}

#[test]
fn our_keyed_server_refuses_iperf_clients_without_the_key() {
    require_iperf2();
    let port = free_port();
    let server = our_server(port, false, &[KEY]);
    // iperf 2.1.8 clients exit 0 even when refused; the server is what tells.
    iperf_client(port, &["-t", "1"]);
    iperf_client(port, &["-t", "1", "--permit-key=abcd9999"]);
    let err = server.wait_err("two refusals", TIMEOUT, |s| {
        s.matches("permit key fail").count() >= 2
    });
    assert!(err.contains("the client sent no key"), "{err}");
    assert!(err.contains("wrong key"), "{err}");
    assert!(
        json_docs(&server.out()).is_empty(),
        "{}",
        server.transcript()
    );
    // Still serving: the right key gets a test.
    iperf_client(port, &["-t", "1", KEY]);
    server.wait_json_streams(1);
}

#[test]
fn our_client_and_iperf_refuse_permit_key_with_udp() {
    require_iperf2();
    let st = std::process::Command::new(bloatlab())
        .args(["client", "127.0.0.1", "-u", KEY])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2), "{st:?}");
    assert!(String::from_utf8_lossy(&st.stderr).contains("--permit-key"));
    let st = std::process::Command::new(bloatlab())
        .args(["server", "-u", KEY])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2), "{st:?}");
    let iperf = std::process::Command::new("iperf")
        .args(["-c", "127.0.0.1", "-u", KEY])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&iperf.stderr).contains("not supported with UDP"),
        "{iperf:?}"
    );
}
