//! The reporter: turns [`Event`]s into console lines (METRICS' iperf 2
//! formatting), `-y C` rows, or one JSON document at the end.
//!
//! Runs on its own thread so formatting and stdout never stall a data loop.

use super::{ConnInfo, Event, Role};
use crate::config::OutputFormat;
use crate::console;
use crate::sum::{gather, pair, sum_key, sum_span};
use crate::tcp::json;
use bloatlab_metrics::console::{
    BW_HEADER, Console, HeaderOnce, StreamLabel, TCP_RECV_HEADER, TCP_RECV_TRIP_HEADER,
    TCP_SEND_HEADER,
};
use bloatlab_metrics::interval::Span;
use bloatlab_metrics::json::CpuRecord;
use bloatlab_metrics::tcp_recv::TcpRecvSnapshot;
use bloatlab_metrics::tcp_send::TcpSendSnapshot;
use bloatlab_os::process::{CpuScope, CpuTime, cpu_time};
use bloatlab_units::Bytes;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How the reporter prints.
#[derive(Debug, Clone)]
pub struct ReportSettings {
    pub role: Role,
    pub enhanced: bool,
    pub format: OutputFormat,
    /// Streams in this test (`[SUM]` lines when more than one).
    pub streams: u32,
    /// Test description for `--json`.
    pub test: bloatlab_metrics::json::TestInfo,
    /// Full-duplex: print `[FD n]` lines summing both directions of a stream.
    pub full_duplex: bool,
    /// Where the lines go.
    pub out: crate::console::Out,
    /// Where a stream's failure is said.
    pub err: crate::console::Out,
}

/// Everything a test reported, for `--json` and for the caller's checks.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub connections: BTreeMap<u32, ConnInfo>,
    pub send_intervals: Vec<(u32, TcpSendSnapshot)>,
    pub recv_intervals: Vec<(u32, TcpRecvSnapshot)>,
    pub send_totals: BTreeMap<u32, TcpSendSnapshot>,
    pub recv_totals: BTreeMap<u32, TcpRecvSnapshot>,
    pub send_sums: Vec<TcpSendSnapshot>,
    pub recv_sums: Vec<TcpRecvSnapshot>,
    pub peer_reports: BTreeMap<u32, String>,
    /// The receiving socket's TCP_INFO at the end, per stream.
    pub recv_tcp_info: BTreeMap<u32, bloatlab_metrics::json::RecvTcpInfoRecord>,
    /// What a bloatlab server's sender uses, per stream (its hello).
    pub peer_senders: BTreeMap<u32, bloatlab_metrics::json::SenderHello>,
    /// A bloatlab server's sender's final TCP_INFO, per stream (flow query).
    pub peer_sender_info: BTreeMap<u32, bloatlab_wire::SenderSummary>,
    pub failures: Vec<(u32, String)>,
    /// This process's CPU time over the test and per GB moved (issue 24).
    pub cpu: Option<bloatlab_metrics::json::CpuRecord>,
    /// A bloatlab server's CPU time for this test, from its reports, over
    /// this end's bytes (issue 24; [`peer_cpu`]).
    pub peer_cpu: Option<bloatlab_metrics::json::CpuRecord>,
}

/// Starts the reporter; drop every [`super::Sink`] clone, then join to get
/// what was collected. Fails (never panics) when no thread can be started.
pub fn spawn(settings: ReportSettings) -> std::io::Result<(super::Sink, JoinHandle<Collected>)> {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::Builder::new()
        .name("reporter".into())
        .spawn(move || Reporter::new(settings).run(rx))?;
    Ok((tx, h))
}

/// The bloatlab server's CPU time for a test from its streams' reports
/// (BLXR JSON). Each stream's record is the whole server process from that
/// stream's start, so the streams of one test overlap: the largest covers
/// the test (summing would count it once per stream). Given over `bytes`,
/// this end's count for the test. `None` when no report carries one (an
/// iperf 2 or older bloatlab server, or a reverse test).
pub fn peer_cpu<'a>(reports: impl Iterator<Item = &'a String>, bytes: u64) -> Option<CpuRecord> {
    reports
        .filter_map(|t| bloatlab_metrics::json::ServerSideReport::from_json(t.as_bytes()).ok())
        .filter_map(|r| r.cpu)
        .max_by(|a, b| a.total_s().total_cmp(&b.total_s()))
        .map(|c| CpuRecord::from_seconds(c.user_s, c.system_s, bytes))
}

struct Reporter {
    s: ReportSettings,
    console: Console,
    headers: HeaderOnce,
    out: Collected,
    /// Interval snapshots waiting for the other streams, keyed by span start.
    pending_send: BTreeMap<Duration, Vec<TcpSendSnapshot>>,
    pending_recv: BTreeMap<Duration, Vec<TcpRecvSnapshot>>,
    /// Full-duplex halves waiting for the other direction: (stream, span start) -> (span, bytes).
    pending_fd: BTreeMap<(u32, Duration), (Span, Bytes)>,
    /// The process's CPU time when the reporter started (before any connection).
    cpu0: Option<CpuTime>,
}

impl Reporter {
    fn new(s: ReportSettings) -> Reporter {
        Reporter {
            s,
            console: Console::default(),
            headers: HeaderOnce::new(),
            out: Collected::default(),
            pending_send: BTreeMap::new(),
            pending_recv: BTreeMap::new(),
            pending_fd: BTreeMap::new(),
            cpu0: cpu_time(CpuScope::Process).ok(),
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Event>) -> Collected {
        for ev in rx {
            self.handle(ev);
        }
        // CPU per GB (issue 24): every stream has ended, so this is the test's cost.
        // Printed before iperf 2's closing connect-time line, which stays last.
        if let (Some(c0), Ok(c1)) = (self.cpu0, cpu_time(CpuScope::Process)) {
            let used = c1.since(c0);
            let bytes: u64 = self
                .out
                .send_totals
                .values()
                .map(|t| t.bytes.0)
                .sum::<u64>()
                + self
                    .out
                    .recv_totals
                    .values()
                    .map(|t| t.bytes.0)
                    .sum::<u64>();
            let rec = CpuRecord::new(used.user, used.system, bytes);
            let peer = peer_cpu(self.out.peer_reports.values(), bytes);
            if self.s.enhanced && self.s.format == OutputFormat::Console {
                self.print(&rec.console_line());
                if let Some(p) = &peer {
                    self.print(&p.peer_console_line(&rec));
                }
            }
            self.out.cpu = Some(rec);
            self.out.peer_cpu = peer;
        }
        if self.s.role == Role::Client && self.s.enhanced && self.s.streams > 1 {
            let times: Vec<Duration> = self
                .out
                .connections
                .values()
                .filter_map(|c| c.connect_time)
                .collect();
            let err = (self.s.streams as usize).saturating_sub(times.len());
            if let Some(l) = connect_times_line(&times, err) {
                self.print(&l);
            }
        }
        // A test where no stream connected has no document; the error goes to stderr.
        if self.s.format == OutputFormat::Json && !self.out.connections.is_empty() {
            let doc = json::document(&self.out, self.s.role, self.s.test.clone());
            self.s.out.line(&doc.to_json_pretty());
        }
        self.out
    }

    fn print(&self, line: &str) {
        console::print_line(&self.s.out, self.s.format, line);
    }

    fn header(&mut self, h: &'static str) {
        console::print_header(&self.s.out, self.s.format, &mut self.headers, h);
    }

    fn label(&self, stream: u32, sending: bool) -> StreamLabel {
        // The reversed role is the server's sender or the client's receiver.
        let reversed = match self.s.role {
            Role::Client => !sending,
            Role::Server => sending,
        };
        if reversed {
            StreamLabel::Reverse(stream)
        } else {
            StreamLabel::Id(stream)
        }
    }

    fn send_line(&mut self, label: StreamLabel, snap: &TcpSendSnapshot) {
        if self.s.format == OutputFormat::Csv {
            self.csv(label, snap.span, snap.bytes.0);
        } else if self.s.enhanced {
            self.header(TCP_SEND_HEADER);
            let l = self.console.tcp_send_line(label, snap);
            self.print(&l);
        } else {
            self.header(BW_HEADER);
            let l = self.console.bw_line(label, snap.span, snap.bytes);
            self.print(&l);
        }
    }

    fn recv_line(&mut self, label: StreamLabel, snap: &TcpRecvSnapshot) {
        if self.s.format == OutputFormat::Csv {
            self.csv(label, snap.span, snap.bytes.0);
        } else if self.s.enhanced {
            self.header(if snap.burst.is_some() {
                TCP_RECV_TRIP_HEADER
            } else {
                TCP_RECV_HEADER
            });
            let l = self.console.tcp_recv_line(label, snap);
            self.print(&l);
        } else {
            self.header(BW_HEADER);
            let l = self.console.bw_line(label, snap.span, snap.bytes);
            self.print(&l);
        }
    }

    fn csv(&self, label: StreamLabel, span: Span, bytes: u64) {
        let id = match label {
            StreamLabel::Id(n) | StreamLabel::Reverse(n) => n,
            _ => return, // iperf 2.1.8 prints no SUM rows
        };
        let Some(c) = self.out.connections.get(&id) else {
            return;
        };
        let row = super::csv::row(c, self.s.role, self.s.enhanced, id, span, Bytes(bytes));
        self.s.out.line(&row.to_string());
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Connected { stream, info } => {
                let l = connected_line(stream, &info, self.s.enhanced);
                self.print(&l);
                self.out.connections.insert(stream, info);
            }
            Event::SendInterval { stream, snap } => {
                let label = self.label(stream, true);
                self.send_line(label, &snap);
                self.full_duplex(stream, snap.span, snap.bytes, false);
                self.out.send_intervals.push((stream, snap));
                self.sum_send(snap, false);
            }
            Event::RecvInterval { stream, snap } => {
                let label = self.label(stream, false);
                self.recv_line(label, &snap);
                self.full_duplex(stream, snap.span, snap.bytes, false);
                self.sum_recv(snap.clone(), false);
                self.out.recv_intervals.push((stream, snap));
            }
            Event::SendFinal {
                stream,
                partial,
                total,
            } => {
                let label = self.label(stream, true);
                if let Some(p) = partial {
                    self.send_line(label, &p);
                    self.full_duplex(stream, p.span, p.bytes, false);
                    self.out.send_intervals.push((stream, p));
                    self.sum_send(p, false);
                }
                self.send_line(label, &total);
                self.full_duplex(stream, total.span, total.bytes, true);
                self.out.send_totals.insert(stream, total);
                self.sum_send(total, true);
            }
            Event::RecvFinal {
                stream,
                partial,
                total,
            } => {
                let label = self.label(stream, false);
                if let Some(p) = partial {
                    self.recv_line(label, &p);
                    self.full_duplex(stream, p.span, p.bytes, false);
                    self.sum_recv(p.clone(), false);
                    self.out.recv_intervals.push((stream, p));
                }
                self.recv_line(label, &total);
                self.full_duplex(stream, total.span, total.bytes, true);
                self.sum_recv(total.clone(), true);
                self.out.recv_totals.insert(stream, total);
            }
            Event::PeerReport { stream, json } => {
                self.out.peer_reports.insert(stream, json);
            }
            Event::RecvTcpInfo { stream, info } => {
                self.out.recv_tcp_info.insert(stream, info);
            }
            Event::PeerSender { stream, hello } => {
                if self.s.format == OutputFormat::Console
                    && let Some(cc) = &hello.congestion_control
                {
                    self.print(&format!("[{stream:3}] server sends with cc={cc}"));
                }
                self.out.peer_senders.insert(stream, hello);
            }
            Event::PeerSenderInfo { stream, summary } => {
                if self.s.format == OutputFormat::Console && self.s.enhanced {
                    self.print(&format!(
                        "[{stream:3}] server sender: {} retransmits, RTT {} us, CE {}",
                        summary.retransmits,
                        summary.rtt.as_micros(),
                        summary
                            .delivered_ce
                            .map_or("not measured".to_owned(), |c| c.to_string())
                    ));
                }
                self.out.peer_sender_info.insert(stream, summary);
            }
            Event::Failed { stream, error } => {
                self.s.err.line(&format!("[{stream:3}] {error}"));
                self.out.failures.push((stream, error));
            }
        }
    }

    /// `[FD n]`: once both directions of stream `n` reported a span, print their sum.
    fn full_duplex(&mut self, stream: u32, span: Span, bytes: Bytes, total: bool) {
        if !self.s.full_duplex || self.s.format != OutputFormat::Console {
            return;
        }
        let key = sum_key(span, total);
        if let Some(((other, b), _)) = pair(&mut self.pending_fd, stream, key, (span, bytes)) {
            let span = sum_span([span, other].into_iter());
            self.header(BW_HEADER);
            let l = self
                .console
                .bw_line(StreamLabel::FullDuplex(stream), span, bytes + b);
            self.print(&l);
        }
    }

    /// Queues a snapshot for `[SUM]`; prints the sum once every stream reported it.
    fn sum_send(&mut self, snap: TcpSendSnapshot, total: bool) {
        if self.s.streams < 2 {
            return;
        }
        let key = sum_key(snap.span, total);
        if let Some(parts) = gather(&mut self.pending_send, key, snap, self.s.streams) {
            let span = sum_span(parts.iter().map(|p| p.span));
            let sum = TcpSendSnapshot::sum(span, parts.iter());
            self.send_line(StreamLabel::Sum, &sum);
            self.out.send_sums.push(sum);
        }
    }

    fn sum_recv(&mut self, snap: TcpRecvSnapshot, total: bool) {
        if self.s.streams < 2 {
            return;
        }
        let key = sum_key(snap.span, total);
        if let Some(parts) = gather(&mut self.pending_recv, key, snap, self.s.streams) {
            let span = sum_span(parts.iter().map(|p| p.span));
            let width = parts
                .first()
                .map_or(Bytes(131_072), |p| Bytes(p.reads.bin_width.0 * 8));
            let sum = TcpRecvSnapshot::sum(span, width, parts.iter());
            self.recv_line(StreamLabel::Sum, &sum);
            self.out.recv_sums.push(sum);
        }
    }
}

/// iperf 2's `-e -P N` closing line: `[ CT] final connect times
/// (min/avg/max/stdev) = 0.021/0.440/1.681/0.828 ms (tot/err) = 4/0`.
/// `tot` counts attempts (connected + `err` failed). The stdev is the sample
/// standard deviation in ms; iperf 2.1.8 prints it 1000x too large (a unit
/// bug, reference README 2.6), which we do not copy. `None` when no stream
/// connected.
pub fn connect_times_line(times: &[Duration], err: usize) -> Option<String> {
    let ms: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let n = ms.len();
    if n == 0 {
        return None;
    }
    let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ms.iter().copied().fold(0.0, f64::max);
    let avg = ms.iter().sum::<f64>() / n as f64;
    let stdev = if n > 1 {
        (ms.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Some(format!(
        "[ CT] final connect times (min/avg/max/stdev) = {min:.3}/{avg:.3}/{max:.3}/{stdev:.3} ms (tot/err) = {}/{err}",
        n + err
    ))
}

/// `[  1] local 127.0.0.1 port 5001 connected with 127.0.0.1 port 41234 (...)`.
pub fn connected_line(stream: u32, c: &ConnInfo, enhanced: bool) -> String {
    let mut l = console::connected_line(stream, c.local, c.peer, &c.tags, enhanced);
    if let Some(cc) = &c.congestion {
        l.push_str(&format!(" (cc={cc})"));
    }
    if let Some(i) = c.initial {
        l.push_str(&format!(
            " (icwnd/mss/irtt={}/{}/{})",
            i.snd_cwnd,
            i.snd_mss,
            i.rtt.as_micros()
        ));
    }
    if enhanced && let Some(ct) = c.connect_time {
        l.push_str(&format!(" (ct={:.2} ms)", ct.as_secs_f64() * 1e3));
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_cpu_takes_the_largest_stream_record_over_our_bytes() {
        use bloatlab_metrics::json::{IntervalRecord, ServerSideReport};
        let total =
            bloatlab_metrics::tcp_recv::TcpRecvStats::new(bloatlab_units::Bytes(8192), false)
                .total(Span::from_zero(Duration::from_secs(1)));
        let report = |user: f64, sys: f64| {
            let r = ServerSideReport::new(1, vec![], IntervalRecord::from_tcp_recv(&total, true));
            String::from_utf8(
                r.with_cpu(Some(CpuRecord::from_seconds(user, sys, 7)))
                    .to_json(),
            )
            .unwrap()
        };
        let old = String::from_utf8(
            ServerSideReport::new(2, vec![], IntervalRecord::from_tcp_recv(&total, true)).to_json(),
        )
        .unwrap();
        let reports = [
            report(0.1, 0.2),
            report(0.2, 0.6),
            old.clone(),
            "junk".into(),
        ];
        let p = peer_cpu(reports.iter(), 2_000_000_000).unwrap();
        assert_eq!((p.user_s, p.system_s, p.bytes), (0.2, 0.6, 2_000_000_000));
        assert!((p.cpu_s_per_gb.unwrap() - 0.4).abs() < 1e-12);
        assert_eq!(
            peer_cpu([old].iter(), 1),
            None,
            "an older server says nothing"
        );
    }

    #[test]
    fn connect_times_line_matches_iperf_2_but_for_the_stdev_unit() {
        // Capture 06b's four connect times (ct=0.02/0.03/0.03/1.68 ms; the
        // line's min/avg/max come from unrounded values 0.021..1.681).
        let us = |v: u64| Duration::from_micros(v);
        let l = connect_times_line(&[us(21), us(30), us(28), us(1681)], 0).unwrap();
        assert_eq!(
            l,
            "[ CT] final connect times (min/avg/max/stdev) = 0.021/0.440/1.681/0.827 ms (tot/err) = 4/0"
        );
        let one = connect_times_line(&[us(500)], 2).unwrap();
        assert!(
            one.ends_with("= 0.500/0.500/0.500/0.000 ms (tot/err) = 3/2"),
            "{one}"
        );
        assert_eq!(connect_times_line(&[], 4), None);
    }
}
