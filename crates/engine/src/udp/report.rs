//! The UDP reporter: turns [`Event`]s into iperf 2.1.8 console lines
//! (METRICS' [`Console`]), `-y C` rows, or one JSON document.
//!
//! The client runs it on its own thread so stdout never stalls a sending
//! loop; the server drives it from its receive loop between batches.

use super::conn::{ConnInfo, connected_line, csv_row};
use super::json;
use super::server_report::snapshot_from_server_report;
use crate::config::OutputFormat;
use crate::console;
use bloatlab_metrics::console::{
    BW_HEADER, Console, HeaderOnce, StreamLabel, UDP_RECV_ENHANCED_HEADER, UDP_RECV_HEADER,
    UDP_SEND_HEADER,
};
use bloatlab_metrics::interval::Span;
use bloatlab_metrics::json::{ServerSideReport, TestInfo};
use bloatlab_metrics::udp_recv::UdpRecvSnapshot;
use bloatlab_metrics::udp_send::UdpSendSnapshot;
use bloatlab_wire::ServerReportRepr;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How a client's end-of-test exchange with the server ended.
#[derive(Debug, Clone)]
pub enum ServerOutcome {
    /// The AckFIN arrived; `frame_json` is the bloatlab report frame's JSON
    /// when the server is bloatlab.
    Report {
        report: ServerReportRepr,
        frame_json: Option<String>,
    },
    /// No AckFIN after this many FIN sends; `refused` when the kernel
    /// reported ICMP port unreachable (no server on that port).
    NoAck { tries: u32, refused: bool },
    /// A server's reverse (`-R`) stream: iperf 2 sends one FIN and expects
    /// no AckFIN (upper flag NOUDPFIN).
    NoAckExpected,
}

/// What stream threads and the server loop tell the reporter.
#[derive(Debug, Clone)]
pub enum Event {
    /// A stream or flow started.
    Connected { stream: u32, info: ConnInfo },
    /// A client interval.
    SendInterval { stream: u32, snap: UdpSendSnapshot },
    /// A client stream ended.
    SendFinal {
        stream: u32,
        /// The last partial interval, when long enough to print.
        partial: Option<UdpSendSnapshot>,
        total: UdpSendSnapshot,
        /// iperf 2's "Sent N datagrams" figure.
        sent: u64,
        server: ServerOutcome,
    },
    /// A server interval of one flow.
    RecvInterval { stream: u32, snap: UdpRecvSnapshot },
    /// A flow ended (FIN or idle timeout).
    RecvFinal {
        stream: u32,
        partial: Option<UdpRecvSnapshot>,
        total: UdpRecvSnapshot,
        /// Datagrams too short or malformed to account, dropped.
        bad_datagrams: u64,
    },
    /// A stream failed; the message names what.
    Failed { stream: u32, error: String },
}

/// Which side is printing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// How the reporter prints.
#[derive(Debug, Clone)]
pub struct ReportSettings {
    pub side: Side,
    pub enhanced: bool,
    pub format: OutputFormat,
    /// Client streams (`[SUM]` lines when more than one).
    pub streams: u32,
    /// A client receiving a reverse (`-R`) test: its lines are labelled
    /// `[ *1]`, as in iperf 2.
    pub reverse: bool,
    /// Test parameters for the `--json` document.
    pub test: TestInfo,
}

/// One client stream's results.
#[derive(Debug, Clone, Default)]
pub struct StreamResult {
    pub info: Option<ConnInfo>,
    pub send_intervals: Vec<UdpSendSnapshot>,
    pub send_total: Option<UdpSendSnapshot>,
    pub sent_datagrams: u64,
    /// The AckFIN report as received.
    pub server_report: Option<ServerReportRepr>,
    /// The same, as the snapshot the Server Report line prints.
    pub server_snapshot: Option<UdpRecvSnapshot>,
    /// The bloatlab server's own report (from its BLXR frame).
    pub server_side: Option<ServerSideReport>,
    /// FIN sends without an AckFIN, if it never came.
    pub no_ack_tries: Option<u32>,
    /// The kernel reported the server port unreachable.
    pub refused: bool,
    pub recv_intervals: Vec<UdpRecvSnapshot>,
    pub recv_total: Option<UdpRecvSnapshot>,
    pub bad_datagrams: u64,
}

/// Everything a test reported (for `--json` and for callers' checks).
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub streams: BTreeMap<u32, StreamResult>,
    pub sum_intervals: Vec<UdpSendSnapshot>,
    pub sum_total: Option<UdpSendSnapshot>,
    pub failures: Vec<(u32, String)>,
}

/// Starts the reporter. Drop every sender, then join to get the results.
pub fn spawn(settings: ReportSettings) -> (mpsc::Sender<Event>, JoinHandle<Collected>) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::Builder::new()
        .name("udp-reporter".into())
        .spawn(move || {
            let mut r = Reporter::new(settings);
            for ev in rx {
                r.handle(ev);
            }
            r.finish()
        })
        .expect("spawning the UDP reporter thread");
    (tx, h)
}

/// The reporter state; also usable synchronously (the server drives it
/// directly from its loop).
#[derive(Debug)]
pub struct Reporter {
    s: ReportSettings,
    console: Console,
    headers: HeaderOnce,
    out: Collected,
    pending: BTreeMap<Duration, Vec<UdpSendSnapshot>>,
    finals: Vec<UdpSendSnapshot>,
    /// Server streams whose send lines are the reversed role (`[ *1]`):
    /// the server's half of a full-duplex test.
    reversed_send: std::collections::BTreeSet<u32>,
}

impl Reporter {
    pub fn new(s: ReportSettings) -> Reporter {
        Reporter {
            s,
            console: Console::default(),
            headers: HeaderOnce::new(),
            out: Collected::default(),
            pending: BTreeMap::new(),
            finals: Vec::new(),
            reversed_send: Default::default(),
        }
    }

    /// Ends the report: prints the client's JSON document and returns the results.
    pub fn finish(self) -> Collected {
        if self.s.format == OutputFormat::Json && self.s.side == Side::Client {
            println!(
                "{}",
                json::client_document(&self.out, &self.s.test).to_json_pretty()
            );
        }
        self.out
    }

    fn print(&self, line: &str) {
        console::print_line(self.s.format, line);
    }

    fn header(&mut self, h: &'static str) {
        console::print_header(self.s.format, &mut self.headers, h);
    }

    fn send_line(&mut self, label: StreamLabel, snap: &UdpSendSnapshot) {
        match self.s.format {
            OutputFormat::Csv => {
                if let Some(row) = self.csv(label) {
                    println!("{}", row.udp_send(snap));
                }
            }
            OutputFormat::Console if self.s.enhanced => {
                self.header(UDP_SEND_HEADER);
                let l = self.console.udp_send_line(label, snap);
                self.print(&l);
            }
            OutputFormat::Console => {
                self.header(BW_HEADER);
                let l = self.console.bw_line(label, snap.span, snap.bytes);
                self.print(&l);
            }
            OutputFormat::Json => {}
        }
    }

    fn recv_line(&mut self, label: StreamLabel, snap: &UdpRecvSnapshot, enhanced: bool) {
        match self.s.format {
            OutputFormat::Csv => {
                if let Some(row) = self.csv(label) {
                    println!("{}", row.udp_recv(snap));
                }
            }
            OutputFormat::Console => {
                self.header(if enhanced {
                    UDP_RECV_ENHANCED_HEADER
                } else {
                    UDP_RECV_HEADER
                });
                let l = self.console.udp_recv_line(label, snap, enhanced);
                self.print(&l);
                if let Some(l) = self.console.udp_out_of_order_line(label, snap) {
                    self.print(&l);
                }
            }
            OutputFormat::Json => {}
        }
    }

    /// The CSV row fields of a stream; `None` for `[SUM]` (iperf 2.1.8
    /// prints no SUM rows) or an unknown stream.
    fn csv(&self, label: StreamLabel) -> Option<bloatlab_metrics::csv::CsvRow> {
        let (StreamLabel::Id(id) | StreamLabel::Reverse(id)) = label else {
            return None;
        };
        let info = self.out.streams.get(&id)?.info.as_ref()?;
        Some(csv_row(
            info,
            id,
            self.s.side == Side::Client,
            self.s.enhanced,
        ))
    }

    /// Handles one event (prints, collects).
    pub fn handle(&mut self, ev: Event) {
        match ev {
            Event::Connected { stream, info } => {
                if self.s.side == Side::Server && info.tags.iter().any(|t| t == "(full-duplex)") {
                    self.reversed_send.insert(stream);
                }
                let l = connected_line(stream, &info, self.s.enhanced);
                self.print(&l);
                self.out.streams.entry(stream).or_default().info = Some(info);
            }
            Event::SendInterval { stream, snap } => {
                self.send_line(self.send_label(stream), &snap);
                self.out
                    .streams
                    .entry(stream)
                    .or_default()
                    .send_intervals
                    .push(snap);
                self.sum_interval(snap);
            }
            Event::SendFinal {
                stream,
                partial,
                total,
                sent,
                server,
            } => self.send_final(stream, partial, total, sent, server),
            Event::RecvInterval { stream, snap } => {
                self.recv_line(self.recv_label(stream), &snap, self.s.enhanced);
                self.out
                    .streams
                    .entry(stream)
                    .or_default()
                    .recv_intervals
                    .push(snap);
            }
            Event::RecvFinal {
                stream,
                partial,
                total,
                bad_datagrams,
            } => {
                let label = self.recv_label(stream);
                if let Some(p) = &partial {
                    self.recv_line(label, p, self.s.enhanced);
                }
                self.recv_line(label, &total, self.s.enhanced);
                let r = self.out.streams.entry(stream).or_default();
                r.recv_intervals.extend(partial);
                r.recv_total = Some(total);
                r.bad_datagrams = bad_datagrams;
            }
            Event::Failed { stream, error } => {
                eprintln!("[{stream:3}] {error}");
                self.out.failures.push((stream, error));
            }
        }
    }

    fn send_label(&self, stream: u32) -> StreamLabel {
        if self.reversed_send.contains(&stream) {
            StreamLabel::Reverse(stream)
        } else {
            StreamLabel::Id(stream)
        }
    }

    fn recv_label(&self, stream: u32) -> StreamLabel {
        if self.s.reverse {
            StreamLabel::Reverse(stream)
        } else {
            StreamLabel::Id(stream)
        }
    }

    fn send_final(
        &mut self,
        stream: u32,
        partial: Option<UdpSendSnapshot>,
        total: UdpSendSnapshot,
        sent: u64,
        server: ServerOutcome,
    ) {
        let label = self.send_label(stream);
        if let Some(p) = partial {
            self.send_line(label, &p);
            self.sum_interval(p);
        }
        self.send_line(label, &total);
        self.print(&self.console.udp_sent_datagrams(stream, sent));
        let r = self.out.streams.entry(stream).or_default();
        r.send_intervals.extend(partial);
        r.send_total = Some(total);
        r.sent_datagrams = sent;
        match server {
            ServerOutcome::Report { report, frame_json } => {
                let snap = snapshot_from_server_report(&report);
                r.server_report = Some(report);
                r.server_snapshot = Some(snap.clone());
                r.server_side = frame_json.and_then(|j| {
                    ServerSideReport::from_json(j.as_bytes())
                        .map_err(|e| tracing::warn!(stream, error = %e, "ignoring the server's report frame"))
                        .ok()
                });
                // Like a 2.1.8 client: the enhanced line iff the server sent
                // the transit extension; no CSV row for it (2.1.8 prints none).
                if self.s.format == OutputFormat::Console {
                    self.print(&self.console.udp_server_report_banner(stream));
                    self.recv_line(label, &snap, report.ext.is_some());
                }
            }
            ServerOutcome::NoAck { tries, refused } => {
                r.no_ack_tries = Some(tries);
                r.refused = refused;
                self.print(&format!(
                    "[{stream:3}] WARNING: did not receive ack of last datagram after {tries} tries."
                ));
            }
            ServerOutcome::NoAckExpected => {}
        }
        self.finals.push(total);
        if self.s.streams > 1 && self.finals.len() as u32 == self.s.streams {
            let span = sum_span(self.finals.iter().map(|f| f.span));
            let sum = UdpSendSnapshot::sum(span, self.finals.iter());
            self.send_line(StreamLabel::Sum, &sum);
            self.out.sum_total = Some(sum);
        }
    }

    /// Queues a client interval for `[SUM]`; prints once every stream reported it.
    fn sum_interval(&mut self, snap: UdpSendSnapshot) {
        if self.s.streams < 2 {
            return;
        }
        let v = self.pending.entry(snap.span.start).or_default();
        v.push(snap);
        if v.len() as u32 == self.s.streams {
            let parts = self.pending.remove(&snap.span.start).unwrap_or_default();
            let span = sum_span(parts.iter().map(|p| p.span));
            let sum = UdpSendSnapshot::sum(span, parts.iter());
            self.send_line(StreamLabel::Sum, &sum);
            self.out.sum_intervals.push(sum);
        }
    }

    /// Results so far (server side: per flow).
    pub fn collected(&self) -> &Collected {
        &self.out
    }

    /// Removes and returns one flow's results (the server prints one JSON
    /// document per finished flow).
    pub fn take_stream(&mut self, stream: u32) -> Option<StreamResult> {
        self.out.streams.remove(&stream)
    }

    /// The settings in effect.
    pub fn settings(&self) -> &ReportSettings {
        &self.s
    }
}

/// Earliest start to latest end.
fn sum_span(spans: impl Iterator<Item = Span>) -> Span {
    let mut it = spans.peekable();
    let first = it.peek().copied().unwrap_or_default();
    let (start, end) = it.fold((first.start, first.end), |(s, e), x| {
        (s.min(x.start), e.max(x.end))
    });
    Span::new(start, end)
}
