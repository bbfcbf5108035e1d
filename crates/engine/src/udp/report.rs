//! The UDP reporter: turns [`Event`]s into iperf 2.1.8 console lines
//! (METRICS' [`Console`]), `-y C` rows, or one JSON document.
//!
//! The client runs it on its own thread so stdout never stalls a sending
//! loop; the server drives it from its receive loop between batches.

use super::conn::{ConnInfo, connected_line, csv_row};
use super::json;
use super::recv_sum::RecvSum;
use super::server_report::snapshot_from_server_report;
use crate::config::OutputFormat;
use crate::console;
use crate::sum::{gather, pair, sum_key, sum_span};
use bloatlab_metrics::console::{
    BW_HEADER, Console, HeaderOnce, StreamLabel, UDP_RECV_ENHANCED_HEADER, UDP_RECV_HEADER,
    UDP_SEND_HEADER,
};
use bloatlab_metrics::interval::Span;
use bloatlab_metrics::json::{CpuRecord, ServerSideReport, TestInfo};
use bloatlab_metrics::udp_recv::UdpRecvSnapshot;
use bloatlab_metrics::udp_send::UdpSendSnapshot;
use bloatlab_os::process::{CpuScope, CpuTime, cpu_time};
use bloatlab_units::Bytes;
use bloatlab_wire::ServerReportRepr;
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Header of iperf 2.1.8's UDP `[FD n]` lines (`-e`).
pub const UDP_FD_HEADER: &str = "[ ID] Interval       Transfer     Bandwidth    Datagrams   PPS";

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
    /// An AckFIN arrived but its values cannot be true (`why`): reported
    /// as such, never printed as a measurement.
    Impossible { why: String },
}

/// What stream threads and the server loop tell the reporter.
// A few events per stream per interval cross the channel: boxing the receive snapshots (with
// their latency histograms) would buy nothing measurable.
#[allow(clippy::large_enum_variant)]
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
    /// Server: flow `stream` belongs to `-P` group `group` of a client
    /// that announced `expected` flows.
    Joined {
        stream: u32,
        group: u32,
        expected: u32,
    },
    /// Server: the join window of `group` ended with only `members` flows.
    GroupClosed { group: u32, members: u32 },
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
    /// Where the lines go.
    pub out: crate::console::Out,
    /// Where a stream's failure is said.
    pub err: crate::console::Out,
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

/// A server test whose every flow ended: one flow, or the flows of one
/// `-P N` client with their receive `[SUM]`.
#[derive(Debug, Clone, Default)]
pub struct FinishedTest {
    pub streams: Vec<(u32, StreamResult)>,
    pub sum: Option<RecvSum>,
}

/// A server's `-P N` group being reported.
#[derive(Debug)]
struct Group {
    sum: RecvSum,
    members: Vec<u32>,
}

/// Everything a test reported (for `--json` and for callers' checks).
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub streams: BTreeMap<u32, StreamResult>,
    pub sum_intervals: Vec<UdpSendSnapshot>,
    pub sum_total: Option<UdpSendSnapshot>,
    /// A client's receive `[SUM]` (`-R` / `--full-duplex` with `-P > 1`).
    pub recv_sum: Option<RecvSum>,
    pub failures: Vec<(u32, String)>,
}

/// Starts the reporter. Drop every sender, then join to get the results.
pub fn spawn(
    settings: ReportSettings,
) -> std::io::Result<(mpsc::Sender<Event>, JoinHandle<Collected>)> {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::Builder::new()
        .name("udp-reporter".into())
        .spawn(move || {
            let mut r = Reporter::new(settings);
            for ev in rx {
                r.handle(ev);
            }
            r.finish()
        })?;
    Ok((tx, h))
}

/// The reporter state; also usable synchronously (the server drives it
/// directly from its loop).
#[derive(Debug)]
pub struct Reporter {
    s: ReportSettings,
    console: Console,
    headers: HeaderOnce,
    out: Collected,
    /// Client send snapshots waiting for the other streams' (`[SUM]`).
    pending: BTreeMap<Duration, Vec<UdpSendSnapshot>>,
    /// Client: the streams' "Sent N" figures so far (for `[SUM-N] Sent`).
    sent_sum: u64,
    /// `[FD n]`: one direction's (span, bytes, datagrams) waiting for the other's.
    pending_fd: BTreeMap<(u32, Duration), (Span, Bytes, u64)>,
    /// Server: `-P N` groups by id, and each grouped flow's group.
    groups: BTreeMap<u32, Group>,
    group_of: HashMap<u32, u32>,
    /// Server tests that ended since the last [`Reporter::take_finished`].
    finished: Vec<FinishedTest>,
    /// Server streams whose send lines are the reversed role (`[ *1]`):
    /// the server's half of a full-duplex test.
    reversed_send: std::collections::BTreeSet<u32>,
    /// The process's CPU time when the reporter started (a client's CPU per GB).
    cpu0: Option<CpuTime>,
}

impl Reporter {
    pub fn new(s: ReportSettings) -> Reporter {
        let mut out = Collected::default();
        if s.side == Side::Client && s.streams > 1 {
            // Used only if the streams receive (-R, --full-duplex).
            out.recv_sum = Some(RecvSum::new(s.streams));
        }
        Reporter {
            s,
            console: Console::default(),
            headers: HeaderOnce::new(),
            out,
            pending: BTreeMap::new(),
            sent_sum: 0,
            pending_fd: BTreeMap::new(),
            groups: BTreeMap::new(),
            group_of: HashMap::new(),
            finished: Vec::new(),
            reversed_send: Default::default(),
            cpu0: cpu_time(CpuScope::Process).ok(),
        }
    }

    /// Ends the report: prints the client's JSON document and returns the results.
    pub fn finish(self) -> Collected {
        // A client's CPU per GB (issue 24): this process, over the test,
        // per byte it sent plus received (payload).
        let cpu = (self.s.side == Side::Client)
            .then_some(self.cpu0)
            .flatten()
            .zip(cpu_time(CpuScope::Process).ok())
            .map(|(c0, c1)| {
                let used = c1.since(c0);
                let bytes: u64 = self
                    .out
                    .streams
                    .values()
                    .map(|r| {
                        r.send_total.as_ref().map_or(0, |t| t.bytes.0)
                            + r.recv_total.as_ref().map_or(0, |t| t.bytes.0)
                    })
                    .sum();
                CpuRecord::new(used.user, used.system, bytes)
            });
        if let Some(rec) = cpu.as_ref().filter(|_| self.s.enhanced)
            && self.s.format == OutputFormat::Console
        {
            self.print(&rec.console_line());
        }
        if self.s.format == OutputFormat::Json && self.s.side == Side::Client {
            let mut doc = json::client_document(&self.out, &self.s.test);
            doc.cpu = cpu;
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

    fn send_line(&mut self, label: StreamLabel, snap: &UdpSendSnapshot) {
        match self.s.format {
            OutputFormat::Csv => {
                if let Some(row) = self.csv(label) {
                    self.s.out.line(&row.udp_send(snap));
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
                    self.s.out.line(&row.udp_recv(snap));
                }
            }
            OutputFormat::Console => {
                // iperf 2.1.8 heads a receive [SUM] with the send columns.
                self.header(match (label, enhanced) {
                    (StreamLabel::Sum, true) => UDP_SEND_HEADER,
                    (StreamLabel::Sum, false) => BW_HEADER,
                    (_, true) => UDP_RECV_ENHANCED_HEADER,
                    (_, false) => UDP_RECV_HEADER,
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
                self.sum_send(snap, false);
                self.full_duplex(stream, snap.span, snap.bytes, snap.writes, false);
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
                self.sum_recv(stream, &snap, false);
                self.full_duplex(stream, snap.span, snap.bytes, snap.datagrams, false);
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
                    self.sum_recv(stream, p, false);
                    self.full_duplex(stream, p.span, p.bytes, p.datagrams, false);
                }
                self.recv_line(label, &total, self.s.enhanced);
                self.full_duplex(stream, total.span, total.bytes, total.datagrams, true);
                let grouped = self.group_of.contains_key(&stream);
                let r = self.out.streams.entry(stream).or_default();
                r.recv_intervals.extend(partial);
                r.recv_total = Some(total.clone());
                r.bad_datagrams = bad_datagrams;
                self.sum_recv(stream, &total, true);
                if self.s.side == Side::Server && !grouped {
                    let streams = self.take_stream(stream).map(|r| (stream, r));
                    self.finished.push(FinishedTest {
                        streams: streams.into_iter().collect(),
                        sum: None,
                    });
                }
            }
            Event::Failed { stream, error } => {
                self.s.err.line(&format!("[{stream:3}] {error}"));
                self.out.failures.push((stream, error));
            }
            Event::Joined {
                stream,
                group,
                expected,
            } => {
                self.group_of.insert(stream, group);
                self.groups
                    .entry(group)
                    .or_insert_with(|| Group {
                        sum: RecvSum::new(expected),
                        members: Vec::new(),
                    })
                    .members
                    .push(stream);
            }
            Event::GroupClosed { group, members } => {
                let done = match self.groups.get_mut(&group) {
                    Some(g) => g.sum.resize(members),
                    None => Vec::new(),
                };
                for sum in &done {
                    self.recv_line(StreamLabel::Sum, sum, self.s.enhanced);
                }
                self.end_group_if_done(group);
            }
        }
    }

    /// `[FD n]` with `-e`, as iperf 2.1.8 prints it on both ends: once both
    /// directions of full-duplex stream `n` reported a span, their bytes
    /// and datagrams (writes, or "Sent N" on the total, plus the
    /// receiver's Total) and the PPS over the span.
    fn full_duplex(&mut self, stream: u32, span: Span, bytes: Bytes, datagrams: u64, total: bool) {
        let fd = match self.s.side {
            Side::Client => self.s.test.full_duplex,
            Side::Server => self.reversed_send.contains(&stream),
        };
        if !fd || !self.s.enhanced || self.s.format != OutputFormat::Console {
            return;
        }
        let half = (span, bytes, datagrams);
        let Some(((s0, b0, d0), _)) =
            pair(&mut self.pending_fd, stream, sum_key(span, total), half)
        else {
            return;
        };
        if total {
            // A partial interval only one direction had never pairs.
            self.pending_fd.retain(|(s, _), _| *s != stream);
        }
        let span = sum_span([s0, span].into_iter());
        let n = d0 + datagrams;
        let secs = span.secs();
        let pps = if secs > 0.0 { n as f64 / secs } else { 0.0 };
        self.header(UDP_FD_HEADER);
        let mut l = self.console.bw_line(
            StreamLabel::FullDuplex(stream),
            span,
            b0.saturating_add(bytes),
        );
        l.push_str(&format!(" {n}{pps:8.0} pps"));
        self.print(&l);
    }

    /// Adds a receive snapshot to its `[SUM]` (the server's group of the
    /// flow, the client's streams) and prints the sum if it completed.
    fn sum_recv(&mut self, stream: u32, snap: &UdpRecvSnapshot, total: bool) {
        let sum = match self.s.side {
            Side::Client => self.out.recv_sum.as_mut(),
            Side::Server => {
                let g = self.group_of.get(&stream).copied();
                g.and_then(|g| self.groups.get_mut(&g)).map(|g| &mut g.sum)
            }
        };
        let Some(sum) = sum.and_then(|s| s.add(snap, total)) else {
            return;
        };
        self.recv_line(StreamLabel::Sum, &sum, self.s.enhanced);
        if let Some(&g) = self.group_of.get(&stream) {
            self.end_group_if_done(g);
        }
    }

    /// A server group whose total `[SUM]` is out is a finished test.
    fn end_group_if_done(&mut self, group: u32) {
        if self
            .groups
            .get(&group)
            .is_none_or(|g| g.sum.total.is_none())
        {
            return;
        }
        let Some(g) = self.groups.remove(&group) else {
            return;
        };
        let mut streams = Vec::new();
        for id in g.members {
            self.group_of.remove(&id);
            if let Some(r) = self.take_stream(id) {
                streams.push((id, r));
            }
        }
        self.finished.push(FinishedTest {
            streams,
            sum: Some(g.sum),
        });
    }

    /// Server shutdown: every group completes with the flows it has (a
    /// `--one-off` server need not wait out a short group's join window).
    pub fn end_open_groups(&mut self) {
        let open: Vec<(u32, u32)> = self
            .groups
            .iter()
            .map(|(id, g)| (*id, g.members.len() as u32))
            .collect();
        for (group, members) in open {
            self.handle(Event::GroupClosed { group, members });
        }
    }

    /// Server tests (a flow, or a `-P N` group) that ended since the last call.
    pub fn take_finished(&mut self) -> Vec<FinishedTest> {
        std::mem::take(&mut self.finished)
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
            self.sum_send(p, false);
            self.full_duplex(stream, p.span, p.bytes, p.writes, false);
        }
        self.send_line(label, &total);
        self.print(&self.console.udp_sent_datagrams(stream, sent));
        // iperf 2.1.8 counts the sender's "Sent N" (the FIN included) here.
        self.full_duplex(stream, total.span, total.bytes, sent, true);
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
                // Without the AckFIN nobody knows what arrived: the run
                // did not happen as asked.
                self.out.failures.push((
                    stream,
                    format!(
                        "no AckFIN from the server after {tries} FINs: what it received is \
                         unknown; {}",
                        super::error::UDP_REFUSAL_HINT
                    ),
                ));
            }
            ServerOutcome::NoAckExpected => {}
            ServerOutcome::Impossible { why } => {
                self.print(&format!(
                    "[{stream:3}] WARNING: the server's report has impossible values ({why}); not shown"
                ));
                self.out
                    .failures
                    .push((stream, format!("the server's report is impossible: {why}")));
            }
        }
        self.sent_sum += sent;
        if self.sum_send(total, true) && self.s.format == OutputFormat::Console {
            let label = StreamLabel::SumCount(self.s.streams);
            self.print(&self.console.udp_sent_datagrams_sum(label, self.sent_sum));
        }
    }

    /// Queues a client send snapshot for `[SUM]`; prints once every stream
    /// reported it (then returns true).
    fn sum_send(&mut self, snap: UdpSendSnapshot, total: bool) -> bool {
        if self.s.streams < 2 {
            return false;
        }
        let key = sum_key(snap.span, total);
        let Some(parts) = gather(&mut self.pending, key, snap, self.s.streams) else {
            return false;
        };
        let sum = UdpSendSnapshot::sum(sum_span(parts.iter().map(|p| p.span)), parts.iter());
        self.send_line(StreamLabel::Sum, &sum);
        if total {
            self.out.sum_total = Some(sum);
        } else {
            self.out.sum_intervals.push(sum);
        }
        true
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
