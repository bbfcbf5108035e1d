//! bloatlab TCP client against bloatlab TCP server over loopback.
//!
//! Every test uses its own free port, runs 1-2 s of traffic, and kills the
//! server it started by PID (Drop guard).

mod helpers {
    use std::process::{Command, Output};
    use std::time::Duration;

    use crate::harness::wait_until;
    pub use crate::harness::{BIN, Listen, Proc, free_port};

    pub fn bin() -> &'static str {
        BIN
    }

    /// A running `bloatlab server`, killed (by PID) on drop.
    pub struct Server {
        proc: Proc,
        pub port: u16,
    }

    impl Server {
        pub fn start(extra: &[&str]) -> Server {
            let port = free_port();
            let p = port.to_string();
            let proc = Proc::bloatlab(&[&["server", "-p", &p][..], extra].concat());
            assert!(
                wait_until(Duration::from_secs(10), || {
                    proc.out().contains("Server listening")
                        || proc.err().contains("Server listening")
                }),
                "server did not start\n{}",
                proc.transcript()
            );
            Server { proc, port }
        }

        pub fn stdout(&self) -> String {
            self.proc.out()
        }

        /// Waits (up to 10 s) until stdout contains `needle` (the server prints its
        /// final line a moment after the client exits).
        pub fn wait_for(&self, needle: &str) -> String {
            self.proc
                .poll_out(Duration::from_secs(10), |s| s.contains(needle))
                .unwrap_or_else(|s| s)
        }

        /// Waits (up to 10 s) until stderr contains `needle`.
        pub fn wait_for_stderr(&self, needle: &str) -> String {
            self.proc
                .poll_err(Duration::from_secs(10), |s| s.contains(needle))
                .unwrap_or_else(|s| s)
        }

        /// Waits (up to 10 s) until stderr satisfies `done`.
        pub fn wait_err_until(&self, done: impl Fn(&str) -> bool) -> String {
            self.proc
                .poll_err(Duration::from_secs(10), done)
                .unwrap_or_else(|s| s)
        }
    }

    /// Runs `bloatlab client 127.0.0.1 -p PORT ARGS`.
    pub fn client(port: u16, args: &[&str]) -> Output {
        Command::new(bin())
            .args(["client", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .output()
            .expect("run client")
    }

    pub fn text(o: &Output) -> (String, String) {
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    pub fn ok(o: &Output) -> String {
        let (out, err) = text(o);
        assert!(
            o.status.success(),
            "client failed: {:?}\n{out}\n{err}",
            o.status
        );
        out
    }

    pub fn json(o: &Output) -> serde_json::Value {
        let out = ok(o);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
    }

    /// Final lines (`0.0000-...`) that end at least at `min_end` seconds.
    pub fn final_lines(out: &str) -> Vec<&str> {
        out.lines()
            .filter(|l| l.contains("] 0.0000-") && l.contains("sec"))
            .collect()
    }
}

use bloatlab_testkit::tier;
use helpers::*;
use std::time::{Duration, Instant};

#[test]
fn plain_forward_test_reports_on_both_ends() {
    let srv = Server::start(&[]);
    let out = ok(&client(srv.port, &["-t", "1", "-i", "0.5"]));
    assert!(out.contains("Client connecting to 127.0.0.1"), "{out}");
    assert!(out.contains("0.0000-0.5000 sec"), "{out}");
    let last = *final_lines(&out).last().expect("final line");
    assert!(last.contains("bits/sec"), "{last}");
    let s = srv.wait_for("0.0000-1.");
    assert!(
        final_lines(&s).iter().any(|l| l.contains("bits/sec")),
        "{s}"
    );
}

#[test]
fn enhanced_shows_tcp_info_columns_and_peer_version() {
    let srv = Server::start(&["-e"]);
    let out = ok(&client(srv.port, &["-t", "1", "-e"]));
    assert!(
        out.contains("Write/Err  Rtry     Cwnd/RTT(var)        NetPwr"),
        "{out}"
    );
    let last = *final_lines(&out).last().unwrap();
    assert!(last.contains("K/") && last.contains(" us "), "{last}");
    // Issue 24: -e shows what the test cost this process.
    let cpu = out
        .lines()
        .find(|l| l.starts_with("[CPU] "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(cpu.contains(" CPU-s/GB (process)"), "{cpu}");
    // ... and, from the bloatlab server's report, what it cost the server.
    let both = out
        .lines()
        .find(|l| l.starts_with("[CPU] server "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(both.contains(" CPU-s/GB; client+server "), "{both}");
    let s = srv.wait_for("Reads=Dist");
    assert!(s.contains("(peer 2.1.8)"), "{s}");
    assert!(s.contains("Reads=Dist"), "{s}");
}

/// The stream record of `id` in `direction` ("send" / "receive").
fn stream<'a>(v: &'a serde_json::Value, id: u64, direction: &str) -> &'a serde_json::Value {
    v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id && s["direction"] == direction)
        .unwrap_or_else(|| panic!("no {direction} stream {id}: {v}"))
}

#[test]
fn trip_times_latency_at_low_load_is_small_positive_and_relayed_in_json() {
    let srv = Server::start(&["-e"]);
    // 16 KiB writes, Nagle off, 10 Mbit/s: far from loading loopback.
    let v = json(&client(
        srv.port,
        &[
            "-t",
            "1.5",
            "-l",
            "16K",
            "-N",
            "-b",
            "10m",
            "--trip-times",
            "--json",
        ],
    ));
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["test"]["clock"], "realtime");
    let server = &stream(&v, 1, "send")["server_side"];
    let burst = &server["summary"]["tcp_recv"]["burst_latency"];
    let mean = burst["latency_ms_mean"].as_f64().expect("mean latency");
    let min = burst["latency_ms_min"].as_f64().unwrap();
    assert!(burst["count"].as_u64().unwrap() > 50, "{burst}");
    assert!(min >= 0.0 && mean > 0.0, "{burst}");
    assert!(
        mean < 5.0,
        "mean {mean} ms at low load on loopback: {burst}"
    );
    assert_eq!(burst["negative_count"], 0);
    // The relayed server bytes match what the client sent (header included).
    let sent = stream(&v, 1, "send")["summary"]["bytes"].as_u64().unwrap();
    assert_eq!(server["summary"]["bytes"].as_u64().unwrap(), sent);
    let s = srv.wait_for("Burst Latency");
    assert!(s.contains("Burst Latency avg/min/max/stdev"), "{s}");
}

#[test]
fn parallel_sum_equals_sum_of_streams() {
    let srv = Server::start(&[]);
    let v = json(&client(srv.port, &["-t", "1", "-P", "4", "--json"]));
    let streams = v["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4);
    let sum: u64 = streams
        .iter()
        .map(|s| s["summary"]["bytes"].as_u64().unwrap())
        .sum();
    assert!(sum > 0);
    assert_eq!(v["sum"]["summary"]["bytes"].as_u64().unwrap(), sum);
    assert_eq!(v["sum"]["streams"], 4);
    // And the console shows [SUM] lines, on both ends.
    let out = ok(&client(srv.port, &["-t", "1", "-P", "2"]));
    assert!(out.lines().any(|l| l.starts_with("[SUM] 0.0000-")), "{out}");
    assert!(!out.contains("[ CT]"), "connect times only with -e: {out}");
    let s = srv.wait_for("[SUM] 0.0000-");
    assert!(s.lines().any(|l| l.starts_with("[SUM] 0.0000-")), "{s}");
    // With -e, iperf 2's closing connect-time line, after the last [SUM].
    let out = ok(&client(srv.port, &["-t", "1", "-P", "3", "-e"]));
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("[ CT] final connect times (min/avg/max/stdev) = ")
            && last.ends_with(" ms (tot/err) = 3/0"),
        "{out}"
    );
}

#[test]
fn server_json_sum_agrees_with_the_client() {
    let srv = Server::start(&["--json"]);
    let v = json(&client(srv.port, &["-t", "1", "-P", "3", "--json"]));
    let sent = v["sum"]["summary"]["bytes"].as_u64().unwrap();
    let t0 = Instant::now();
    let doc = loop {
        if let Ok(d) = serde_json::from_str::<serde_json::Value>(&srv.stdout()) {
            break d;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{}", srv.stdout());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(doc["role"], "server");
    assert_eq!(doc["sum"]["streams"], 3, "{doc}");
    assert_eq!(doc["sum"]["summary"]["bytes"].as_u64().unwrap(), sent);
    // Issue 24: both ends say what the test cost them per GB.
    for d in [&v, &doc] {
        let cpu = &d["cpu"];
        assert_eq!(cpu["scope"], "process", "{d}");
        let (user, sys) = (
            cpu["user_s"].as_f64().unwrap(),
            cpu["system_s"].as_f64().unwrap(),
        );
        let bytes = cpu["bytes"].as_u64().unwrap();
        assert!(bytes >= sent, "{cpu}");
        let per = cpu["cpu_s_per_gb"].as_f64().unwrap();
        assert!(
            (per - (user + sys) / (bytes as f64 / 1e9)).abs() < 1e-9,
            "{cpu}"
        );
    }
    // The client learns the server's CPU from its reports, over the
    // client's bytes. The server's own document measures the same process
    // over nearly the same span (from its reporter's start, before the
    // streams, to the last stream's end, which is close to the reports), so
    // the two agree to a few percent (measured: 0.4221 against 0.4217 s).
    let peer = &v["peer_cpu"];
    assert_eq!(peer["bytes"], v["cpu"]["bytes"], "{v}");
    let total =
        |c: &serde_json::Value| c["user_s"].as_f64().unwrap() + c["system_s"].as_f64().unwrap();
    assert!(total(peer) > 0.0, "{peer}");
    let server = total(&doc["cpu"]);
    assert!(
        (total(peer) - server).abs() <= 0.1 * server + 0.02,
        "{peer} vs {doc}"
    );
    assert!(
        doc.get("peer_cpu").is_none(),
        "a server has no peer report: {doc}"
    );
}

#[test]
fn reverse_sends_from_server_on_the_same_connection() {
    let srv = Server::start(&["-e"]);
    let out = ok(&client(srv.port, &["-t", "1", "-R", "-e"]));
    assert!(out.contains("(reverse)"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("[ *1] 0.0000-")), "{out}");
    let v = json(&client(
        srv.port,
        &["-t", "1", "-R", "--trip-times", "--json"],
    ));
    assert_eq!(v["streams"].as_array().unwrap().len(), 1, "{v}");
    let recv = &stream(&v, 1, "receive")["summary"];
    assert!(recv["bytes"].as_u64().unwrap() > 1_000_000, "{recv}");
    let burst = &recv["tcp_recv"]["burst_latency"];
    assert!(burst["count"].as_u64().unwrap() > 0, "{recv}");
    assert_eq!(burst["negative_count"], 0);
}

#[test]
fn reverse_rate_paces_the_server_sender() {
    let srv = Server::start(&[]);
    let v = json(&client(srv.port, &["-t", "2", "-R", "-b", "50m", "--json"]));
    let recv = &stream(&v, 1, "receive")["summary"];
    let bps = recv["bits_per_second"].as_f64().unwrap();
    assert!(
        (45e6..=55e6).contains(&bps),
        "{bps} bit/s, want 50M +-10%: {recv}"
    );
}

#[test]
fn client_interval_gives_server_side_intervals_without_server_i() {
    let srv = Server::start(&[]);
    let v = json(&client(srv.port, &["-i", "0.5", "-t", "2", "--json"]));
    let ss = &stream(&v, 1, "send")["server_side"];
    let ivs = ss["intervals"].as_array().unwrap();
    assert!(ivs.len() >= 3, "{ss}");
    let sum: u64 = ivs.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
    assert!(ivs.iter().all(|i| i["bytes"].as_u64().unwrap() > 0), "{ss}");
    // The intervals account for the summary, except a final partial interval
    // shorter than a quarter of -i, which iperf 2 (and so the server) does not
    // print: its bytes are in the summary only.
    let total = ss["summary"]["bytes"].as_u64().unwrap();
    let last_end = ivs.last().unwrap()["end_s"].as_f64().unwrap();
    let end = ss["summary"]["end_s"].as_f64().unwrap();
    let tail_s = end - last_end;
    assert!(
        (0.0..0.125).contains(&tail_s),
        "unprinted tail {tail_s} s, want under a quarter of 0.5 s: {ss}"
    );
    let biggest = ivs.iter().map(|i| i["bytes"].as_u64().unwrap()).max();
    assert!(sum <= total, "intervals {sum} > summary {total}: {ss}");
    assert!(
        total - sum <= biggest.unwrap(),
        "summary {total} exceeds the intervals {sum} by more than one interval's bytes: {ss}"
    );
    if tail_s < 1e-9 {
        assert_eq!(sum, total, "{ss}");
    }
    // The server (no -i) still prints only its final line.
    let out = srv.wait_for("0.0000-");
    assert_eq!(final_lines(&out).len(), 1, "{out}");
    assert!(!out.contains("0.5000-1.0000"), "{out}");
}

#[test]
fn full_duplex_moves_data_both_ways() {
    let srv = Server::start(&[]);
    let v = json(&client(srv.port, &["-t", "1", "--full-duplex", "--json"]));
    let sent = stream(&v, 1, "send")["summary"]["bytes"].as_u64().unwrap();
    let got = stream(&v, 1, "receive")["summary"]["bytes"]
        .as_u64()
        .unwrap();
    assert!(sent > 1_000_000 && got > 1_000_000, "{v}");
}

#[test]
fn near_congestion_lowers_throughput() {
    let srv = Server::start(&[]);
    let bps = |args: &[&str]| {
        let v = json(&client(srv.port, args));
        stream(&v, 1, "send")["summary"]["bits_per_second"]
            .as_f64()
            .unwrap()
    };
    let plain = bps(&["-t", "1", "--json"]);
    let paced = bps(&["-t", "1", "--near-congestion=4", "--json"]);
    assert!(
        paced < 0.8 * plain,
        "paced {paced:.3e} vs plain {plain:.3e}"
    );
}

#[test]
fn congestion_control_is_applied_and_reported() {
    if !tier::root("congestion_control_is_applied_and_reported") {
        return;
    }
    let srv = Server::start(&[]);
    for cc in ["reno", "cubic", "bbr"] {
        let v = json(&client(srv.port, &["-t", "1", "-Z", cc, "--json"]));
        assert_eq!(v["test"]["congestion_control"], cc, "{v}");
    }
    let out = ok(&client(srv.port, &["-t", "1", "-Z", "bbr"]));
    assert!(out.contains("(cc=bbr)"), "{out}");
}

#[test]
fn csv_rows_have_iperf_field_count() {
    let srv = Server::start(&[]);
    let out = ok(&client(srv.port, &["-t", "1", "-i", "0.5", "-y", "C"]));
    let rows: Vec<&str> = out.lines().collect();
    assert!(rows.len() >= 2, "{out}");
    for r in rows {
        assert_eq!(r.split(',').count(), 9, "{r}");
    }
}

#[test]
fn peer_detect_prints_the_server_version() {
    let srv = Server::start(&[]);
    let out = ok(&client(srv.port, &["-t", "1", "-X", "-e"]));
    assert!(out.contains("(peer 2.1.8)"), "{out}");
    let v = json(&client(srv.port, &["-t", "1", "-X", "--json"]));
    assert_eq!(v["test"]["peer_version"], "2.1.8", "{v}");
}

#[test]
fn bad_option_value_exits_2_naming_the_option() {
    let o = client(5001, &["-l", "abc"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--len"), "{}", text(&o).1);
    let o = client(5001, &["--near-congestion=-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--near-congestion"), "{}", text(&o).1);
}

#[test]
fn refused_port_fails_quickly_with_a_clear_error() {
    let port = free_port();
    let t0 = Instant::now();
    let o = client(port, &["-t", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(t0.elapsed() < Duration::from_secs(5));
    let err = text(&o).1;
    assert!(
        err.contains("refused") && err.contains(&port.to_string()),
        "{err}"
    );
}

#[test]
fn bad_clients_are_dropped_and_the_server_keeps_serving() {
    use std::io::Write;
    use std::net::TcpStream;
    let srv = Server::start(&["--header-timeout", "1"]);
    let addr = ("127.0.0.1", srv.port);
    let _silent = TcpStream::connect(addr).unwrap();
    let mut garbage = TcpStream::connect(addr).unwrap();
    garbage
        .write_all(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8])
        .unwrap();
    let mut short = TcpStream::connect(addr).unwrap();
    // A valid-looking 60-byte header's flags (EXTEND|LEN_BIT|len=60) and only 10 bytes.
    short
        .write_all(&[0x40, 0x01, 0x00, 0x78, 0, 0, 0, 1, 0, 0])
        .unwrap();
    let mut oversized = TcpStream::connect(addr).unwrap();
    // LEN field 255 (above what any header has), then nothing more.
    oversized.write_all(&[0x40, 0x01, 0x01, 0xfe]).unwrap();
    let mut bounce = TcpStream::connect(addr).unwrap();
    bounce.write_all(&[0x00, 0x80, 0x00, 0x00]).unwrap();
    // A real client is served while the bad ones are still open.
    let out = ok(&client(srv.port, &["-t", "1"]));
    assert!(
        final_lines(&out).iter().any(|l| l.contains("bits/sec")),
        "{out}"
    );
    // The 1 s header timeout drops the bad ones.
    let err = srv.wait_err_until(|e| e.matches("dropping connection").count() >= 5);
    let drops = err.matches("dropping connection").count();
    assert!(drops >= 5, "expected 5 dropped connections:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    // And still serves after dropping them.
    ok(&client(srv.port, &["-t", "1"]));
}

#[test]
fn one_off_server_exits_after_one_test() {
    let port = free_port();
    let mut srv = Proc::bloatlab(&["server", "-1", "-p", &port.to_string()]);
    srv.wait_listening(port, Listen::Tcp);
    ok(&client(port, &["-t", "1", "-P", "2"]));
    assert!(srv.wait_exit(Duration::from_secs(5)).success());
}

#[test]
fn byte_count_mode_sends_exactly_n_bytes_including_the_header() {
    let srv = Server::start(&[]);
    let v = json(&client(srv.port, &["-n", "10M", "--json"]));
    let s = stream(&v, 1, "send");
    assert_eq!(s["summary"]["bytes"].as_u64().unwrap(), 10 * 1024 * 1024);
    let server = &s["server_side"]["summary"];
    assert_eq!(server["bytes"].as_u64().unwrap(), 10 * 1024 * 1024);
}

#[test]
fn iperf_role_flags_work() {
    let port = free_port();
    let srv = Proc::bloatlab(&["-s", "-1", "-p", &port.to_string()]);
    srv.wait_listening(port, Listen::Tcp);
    let out = std::process::Command::new(bin())
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .output()
        .unwrap();
    let text = ok(&out);
    drop(srv);
    assert!(
        final_lines(&text).iter().any(|l| l.contains("bits/sec")),
        "{text}"
    );
}

/// Starts `bloatlab client ... ARGS`, sends `SIGINT` after `after`, and
/// returns the output and how long the client took to exit after the signal.
fn interrupted_client(
    port: u16,
    args: &[&str],
    after: Duration,
) -> (std::process::Output, Duration) {
    let child = std::process::Command::new(bin())
        .args(["client", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start client");
    std::thread::sleep(after);
    bloatlab_os::process::signal(child.id(), libc::SIGINT).expect("SIGINT our client");
    let t = Instant::now();
    // wait_with_output reads both pipes to the end, so a hung client would hang
    // here: the assertion below on the elapsed time catches a slow one, and
    // the -t 30 test would otherwise take 30 s (the suite timeout catches it).
    let out = child.wait_with_output().expect("client output");
    (out, t.elapsed())
}

#[test]
fn sigint_stops_the_client_with_a_json_report_and_status_130() {
    let srv = Server::start(&[]);
    let (o, took) = interrupted_client(
        srv.port,
        &["-t", "30", "-i", "0.5", "--json"],
        Duration::from_secs(1),
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(took < Duration::from_secs(8), "took {took:?} after SIGINT");
    assert!(err.contains("SIGINT"), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"));
    let sum = &stream(&v, 1, "send")["summary"];
    assert!(sum["bytes"].as_u64().unwrap() > 0, "{v}");
    // The report covers the time until the signal, not the asked 30 s.
    let end = sum["end_s"].as_f64().unwrap();
    assert!(end > 0.5 && end < 8.0, "{sum}");
    // The connection was shut down cleanly: the server's report came back.
    assert!(
        stream(&v, 1, "send")["server_side"]["summary"]["bytes"]
            .as_u64()
            .is_some_and(|b| b > 0),
        "{v}"
    );
}

#[test]
fn sigint_stops_reverse_and_udp_clients_with_a_final_report() {
    let srv = Server::start(&[]);
    let (o, took) = interrupted_client(srv.port, &["-t", "30", "-R"], Duration::from_secs(1));
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(took < Duration::from_secs(8), "took {took:?} after SIGINT");
    assert_eq!(final_lines(&out).len(), 1, "{out}");

    let usrv = Server::start(&["-u"]);
    let (o, took) = interrupted_client(
        usrv.port,
        &["-u", "-b", "10m", "-t", "30", "--json"],
        Duration::from_secs(1),
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}\n{err}");
    assert!(took < Duration::from_secs(8), "took {took:?} after SIGINT");
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"));
    let sum = &stream(&v, 1, "send")["summary"];
    assert!(sum["bytes"].as_u64().unwrap() > 0, "{v}");
    let end = sum["end_s"].as_f64().unwrap();
    assert!(end > 0.5 && end < 8.0, "{sum}");
}

#[test]
fn no_reverse_server_refuses_tests_that_make_it_send() {
    let srv = Server::start(&["--no-reverse"]);
    for (extra, what) in [("-R", "reverse (-R)"), ("--full-duplex", "full-duplex")] {
        let o = client(srv.port, &["-t", "1", extra]);
        let (_, err) = text(&o);
        if extra == "-R" {
            assert_eq!(o.status.code(), Some(1), "{err}");
            assert!(err.contains("without sending anything"), "{err}");
        }
        let log = srv.wait_for_stderr(&format!("refusing a {what} test"));
        assert!(log.contains("(--no-reverse)"), "{log}");
    }
    // Forward tests are served as usual.
    let out = ok(&client(srv.port, &["-t", "1"]));
    assert!(
        out.contains("Gbits/sec") || out.contains("Mbits/sec"),
        "{out}"
    );
}

/// A congestion control this host does not use by default (the test must be
/// able to tell "asked for" from "the default").
fn non_default_cc() -> &'static str {
    let default =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap_or_default();
    if default.trim() == "cubic" {
        "reno"
    } else {
        "cubic"
    }
}

#[test]
fn reverse_congestion_control_reaches_the_server_sender() {
    if !tier::root("reverse_congestion_control_reaches_the_server_sender") {
        return;
    }
    let cc = non_default_cc();
    let srv = Server::start(&["--json"]);
    for mode in ["-R", "--full-duplex"] {
        let o = client(srv.port, &["-t", "1", mode, "-Z", cc, "--json"]);
        let v = json(&o);
        // Read back from the server's sending socket, relayed in its hello.
        let recv = stream(&v, 1, "receive");
        assert_eq!(recv["sender_congestion_control"], cc, "{mode}: {v}");
        assert!(!text(&o).1.contains("warning"), "{mode}: {}", text(&o).1);
    }
    // The server's own document says the same about its sender.
    let t0 = Instant::now();
    let docs = loop {
        let out = srv.stdout();
        let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&out)
            .into_iter()
            .map_while(Result::ok)
            .collect();
        if docs.len() >= 2 || t0.elapsed() > Duration::from_secs(10) {
            break docs;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(docs.len(), 2, "{docs:?}");
    for d in &docs {
        assert_eq!(d["test"]["congestion_control"], cc, "{d}");
        // Server stream ids count connections.
        let send = d["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["direction"] == "send")
            .unwrap();
        assert_eq!(send["sender_congestion_control"], cc, "{d}");
    }
    // Console: the client says what the server sends with.
    let out = ok(&client(srv.port, &["-t", "1", "-R", "-Z", cc]));
    assert!(out.contains(&format!("server sends with cc={cc}")), "{out}");
}

#[test]
fn reverse_flow_gets_the_server_senders_tcp_info_by_flow_query() {
    let srv = Server::start(&[]);
    let keyed = Server::start(&["--permit-key=abcd1234"]);
    let cases: [(&Server, &[&str]); 4] = [
        (&srv, &["-R"]),
        // The clean-phase end: an RST at -t leaves no room in band.
        (&srv, &["-R", "--abort-at-end"]),
        (&srv, &["--full-duplex"]),
        (&keyed, &["-R", "--permit-key=abcd1234"]),
    ];
    // What our kernel may hold acked but unread: the receive buffer, which
    // autotunes up to tcp_rmem's maximum (32 MiB on this kernel).
    let rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(6 << 20);
    for (server, mode) in cases {
        let mut args = vec!["-t", "1", "-P", "2", "--json"];
        args.extend_from_slice(mode);
        let o = client(server.port, &args);
        let v = json(&o);
        let err = text(&o).1;
        assert!(!err.contains("not measured"), "{mode:?}: {err}");
        for id in [1, 2] {
            let recv = stream(&v, id, "receive");
            let p = &recv["peer_sender_tcp_info"];
            // Measured: present, with the server's RTT and retransmit count.
            assert!(p["retransmits"].is_u64(), "{mode:?}: {recv}");
            assert!(p["rtt_us"].as_u64().unwrap() > 0, "{mode:?}: {p}");
            assert!(p["cwnd_bytes"].as_u64().unwrap() > 0, "{mode:?}: {p}");
            let received = recv["summary"]["bytes"].as_u64().unwrap();
            let acked = p["bytes_acked"].as_u64().unwrap();
            // Sampled when the server's sender stopped: at most what was in
            // flight then is missing, and at most our receive buffer more was
            // acked (data our kernel took but we did not read before the RST).
            assert!(
                acked <= received + rmem_max && acked >= received / 2,
                "{mode:?}: acked {acked}, received {received}"
            );
            // Loopback never negotiates ECN here (tcp_ecn defaults to 2: only on request).
            assert_eq!(recv["ecn_negotiated"], p["ecn_negotiated"], "{mode:?}");
        }
    }
}

/// A server that is not bloatlab (like iperf 2.1.8): reads the test header
/// per its LEN field, then sends the iperf pattern for a while and closes.
fn plain_reverse_server() -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut flags = [0u8; 4];
        s.read_exact(&mut flags).unwrap();
        let len = ((u32::from_be_bytes(flags) & 0x1fe) >> 1) as usize;
        let mut rest = vec![0u8; len - 4];
        s.read_exact(&mut rest).unwrap();
        let data: Vec<u8> = (0..65536).map(|i| b'0' + (i % 10) as u8).collect();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            if s.write_all(&data).is_err() {
                break;
            }
        }
    });
    (port, h)
}

#[test]
fn reverse_congestion_control_warns_when_the_server_cannot_be_asked() {
    if !tier::root("reverse_congestion_control_warns_when_the_server_cannot_be_asked") {
        return;
    }
    let (port, h) = plain_reverse_server();
    let o = client(port, &["-t", "1", "-R", "-Z", "cubic", "--json"]);
    h.join().unwrap();
    let v = json(&o);
    let err = text(&o).1;
    assert!(
        err.contains("warning: -Z cubic applies to this end only"),
        "{err}"
    );
    // The pattern data was not mistaken for a hello, and nothing was invented.
    let recv = stream(&v, 1, "receive");
    assert!(recv["summary"]["bytes"].as_u64().unwrap() > 100_000, "{v}");
    assert!(recv.get("sender_congestion_control").is_none(), "{v}");
    // Not bloatlab: never queried, the server's TCP_INFO stays not measured.
    assert!(recv.get("peer_sender_tcp_info").is_none(), "{v}");
    assert!(!err.contains("TCP_INFO"), "{err}");
}

#[test]
fn abort_at_end_stops_at_t_in_both_directions() {
    let srv = Server::start(&[]);
    for mode in [None, Some("-R")] {
        let mut args = vec![
            "-t",
            "1",
            "--abort-at-end",
            "--notsent-lowat",
            "16K",
            "-e",
            "--json",
        ];
        args.extend(mode);
        let t0 = Instant::now();
        let v = json(&client(srv.port, &args));
        // No drain, no waiting for a report: done right after -t.
        assert!(
            t0.elapsed() < Duration::from_millis(2500),
            "{mode:?}: {:?}",
            t0.elapsed()
        );
        let dir = if mode.is_some() { "receive" } else { "send" };
        let sum = &stream(&v, 1, dir)["summary"];
        let end = sum["end_s"].as_f64().unwrap();
        assert!((0.95..1.2).contains(&end), "{mode:?}: ends at {end}: {sum}");
        assert!(sum["bytes"].as_u64().unwrap() > 1_000_000, "{sum}");
    }
    // TCP_INFO sampled (-e): retransmits are measured, CE deliveries reported.
    let v = json(&client(srv.port, &["-t", "1", "-e", "--json"]));
    let s = &stream(&v, 1, "send")["summary"]["tcp_send"];
    assert!(s["retransmits"].is_u64(), "{s}");
    assert_eq!(s["tcp_info"]["delivered_ce"], 0, "{s}");
    // Without TCP_INFO samples, retransmits are not measured: absent, not 0.
    let v = json(&client(srv.port, &["-t", "1", "--json"]));
    let s = &stream(&v, 1, "send")["summary"]["tcp_send"];
    assert!(s.get("retransmits").is_none(), "{s}");
}

#[test]
fn near_congestion_zero_runs_like_iperf_2_1_8() {
    let srv = Server::start(&[]);
    let out = ok(&client(srv.port, &["-t", "1", "--near-congestion=0"]));
    assert!(
        out.contains("TCP near-congestion delay weight set to 0.0000"),
        "{out}"
    );
    assert!(!final_lines(&out).is_empty(), "{out}");
}
