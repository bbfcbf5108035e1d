//! The UDP server: one unconnected socket, one thread, a flow table.
//!
//! **Flow model.** iperf 2.1.8 `connect()`s its listening socket to the
//! first sender and opens a new listener for the next (a 5-tuple demux by
//! the kernel, one thread per flow). We keep one socket and demultiplex by
//! source address in [`FlowTable`] instead: one `recvmmsg` drains every
//! flow's datagrams in a batch, there is no window in which a second client's
//! first datagram reaches the wrong socket, and the AckFIN goes out with
//! `sendto` from the same local port, which is all a connected iperf 2
//! client accepts. The per-flow semantics are iperf 2's (see `flows`).
//!
//! **Sans-IO core.** [`ServerCore`] takes received datagrams and the time,
//! and returns datagrams to send plus report [`Event`]s; `server_loop::run_server` is
//! the thin driver around a socket (its own file). Time is CLOCK_REALTIME since the epoch,
//! the clock of the kernel receive timestamps (`SO_TIMESTAMPNS`) that
//! latency, jitter, PPS and the report intervals use.
//!
//! **Bad input.** Datagrams shorter than the 16-byte prefix are counted per
//! flow (or per unknown source) and logged once; nothing here panics on
//! network input. A flow silent for its idle timeout without a FIN is
//! finalized and reported (no AckFIN: nobody is waiting for one).
//!
//! **Bounds** (issue 19). A receive flow ends at its deadline (its `-t`, or
//! `--max-duration` for `-n`, plus [`DEADLINE_GRACE`]) whatever its client
//! does; its AckFINs and report frame are paid from the bytes it sent (no
//! reply outweighs its flow); every log line goes through one [`LogLimit`].

use super::conn::ConnInfo;
use super::cookie::{CookieJar, ECHO_MIN_LEN};
use super::datagram::{HeaderInfo, parse_first, parse_incoming};
use super::flows::{Expired, FlowTable, Verdict};
use super::rate_watch::RateWatch;
use super::recv_flow::RecvFlow;
use super::report::Event;
use super::server_report::ack_fin_bytes;
use crate::config::{Amount, ServerConfig};
use crate::limits::{Ask, Refusal, ServerLimits};
use crate::loglimit::{Gate, LogLimit};
use crate::rate_budget::RateBudget;
use crate::sum::{JOIN_WINDOW, JoinTable};
use crate::time_budget::{SOURCE_TIME_WINDOW, SharedTimeBudget};
use bloatlab_metrics::json::{IntervalRecord, ServerSideReport};
use bloatlab_units::Bytes;
use bloatlab_wire::Rate;
use bloatlab_wire::bloatlab::{ReportFrame, ReportFrameRepr};
use bloatlab_wire::client_hdr::field as core_field;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Largest datagram we send (AckFIN plus report frame).
const MAX_SEND: usize = 65_507;
/// Unknown sources whose bad datagrams we remember (to log each once)
/// before we stop remembering: bounded memory under a flood.
const MAX_LOGGED_SOURCES: usize = 1024;
/// Concurrent flows kept; beyond this new sources are ignored (spoofed
/// source addresses must not exhaust memory before the idle timeout).
pub const MAX_FLOWS: usize = 4096;
/// Concurrent flows from one source (IPv4 address or IPv6 /64): one source
/// cannot fill the table (a `-P 128` client needs 128).
pub const MAX_FLOWS_PER_SOURCE: usize = 256;
/// Longest idle timeout a flow gets, whatever rate its header claims
/// (a claimed 1 bit/s must not pin a table entry for days).
pub const MAX_FLOW_IDLE: Duration = Duration::from_secs(30);
/// How long past its deadline (its own `-t`, or `--max-duration` for
/// `-n` and for a `-t` above it) a receiving flow is still taken: a client
/// that started a little late, or whose datagrams queue in a slow link,
/// is not cut short (issue 19).
pub const DEADLINE_GRACE: Duration = Duration::from_secs(2);
/// Gap between cookie replies to a full-duplex flow still unverified.
const COOKIE_RESEND: Duration = Duration::from_millis(200);
/// Longest the driver blocks without checking the stop flag.
pub(super) const MAX_WAIT: Duration = Duration::from_millis(100);

/// One datagram as the core sees it.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// Sender.
    pub from: SocketAddr,
    /// Local address it was sent to (IP_PKTINFO), if known.
    pub to: Option<IpAddr>,
    /// Bytes received (possibly truncated to the receive buffer).
    pub data: &'a [u8],
    /// Real datagram length.
    pub wire_len: usize,
    /// Receive time (kernel timestamp or clock fallback), CLOCK_REALTIME.
    pub rx: Duration,
}

/// Accounts datagram `d` (id `seqno`, sender time `sent`) to a flow's receive side. A FIN
/// counts too: iperf 2 takes its |id| as the Total and its bytes into the Transfer.
fn account(
    recv: &mut RecvFlow,
    d: &Datagram<'_>,
    seqno: i64,
    sent: Duration,
    events: &mut Vec<Event>,
) {
    recv.account(seqno.unsigned_abs(), sent, d.rx, d.wire_len, events);
}

/// Something the driver must send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub to: SocketAddr,
    pub bytes: Vec<u8>,
}

/// A flow in the table: a forward test the server receives, or a reverse
/// (`-R`) test whose datagrams a sender thread sends.
#[derive(Debug)]
struct Flow {
    recv: RecvFlow,
    header: Option<HeaderInfo>,
    logged_bad: bool,
    /// A reverse test: the client's datagrams are only its header retries.
    reverse: bool,
    /// A full-duplex test: received like a forward flow, sent like a
    /// reverse one, and no AckFIN (NOUDPFIN).
    full_duplex: bool,
    /// A full-duplex flow's sender, held until a datagram from the flow
    /// carries the cookie we sent (return routability, see `cookie`).
    awaiting_cookie: Option<ReverseStart>,
    /// When we last sent that flow its cookie.
    cookie_sent: Duration,
    /// Bytes this flow may still be sent (AckFINs and report frames): what
    /// it sent us, less what we answered, so no reply amplifies (set at
    /// its end; each repeated FIN adds its own length).
    reply_budget: u64,
    /// When the server ends the flow if its FIN has not come
    /// (CLOCK_REALTIME; `None` for a reverse flow: its sender has its own).
    deadline: Option<Duration>,
    /// Is the sender above its announced rate? `None`: nothing announced.
    watch: Option<RateWatch>,
    /// Cut for sending above its announced rate (or for its source's
    /// spent busy time): its datagrams are dropped until it goes quiet
    /// (the entry stays, so they cannot start a flow).
    cut: bool,
    /// Report events held until the flow's second datagram (its
    /// `Connected` and `Joined`): a flow of one datagram (a forged header)
    /// never becomes a test and prints nothing (issue 19 audit).
    pending: Vec<Event>,
}

impl Flow {
    /// Has the flow become a test (its report lines print)?
    fn announced(&self) -> bool {
        self.pending.is_empty()
    }

    /// Finalizes the statistics at `at`: the final report goes to `events`
    /// if the flow became a test, nowhere if not. True when it had.
    fn finalize_into(&mut self, at: Duration, events: &mut Vec<Event>) -> bool {
        if self.announced() {
            self.recv.finalize(at, events);
            true
        } else {
            self.recv.finalize(at, &mut Vec::new());
            false
        }
    }
}

/// The server's sans-IO core (see the module docs).
#[derive(Debug)]
pub struct ServerCore {
    enhanced: bool,
    interval: Option<Duration>,
    idle_timeout: Duration,
    local_port: u16,
    table: FlowTable<Flow>,
    next_id: u32,
    stray_bad: u64,
    logged_sources: HashSet<SocketAddr>,
    /// `--no-reverse`: -R / --full-duplex headers are refused.
    no_reverse: bool,
    refused_reverse: u64,
    /// Flows evicted from a full table for another source.
    evicted: u64,
    cut_flows: u64,
    finished_flows: u64,
    /// Reverse tests to start (the driver spawns their senders).
    reverse_starts: Vec<ReverseStart>,
    /// Open `-P N` groups (client address + numThreads) -> group id.
    groups: JoinTable<Duration, u32>,
    next_group: u32,
    /// Report events produced since the last [`take_events`](Self::take_events).
    events: Vec<Event>,
    /// Caps on what a test may ask for.
    limits: ServerLimits,
    /// Return-routability cookies for reverse and full-duplex tests.
    cookies: CookieJar,
    /// Budget for warnings about what peers send.
    log: LogLimit,
    /// Datagrams from unknown sources that were not consistent headers.
    not_headers: u64,
    /// Test requests refused (caps, table full).
    refused: u64,
    /// Sources refused lately, and when (one log line per request).
    recently_refused: std::collections::HashMap<SocketAddr, Duration>,
    /// Datagrams [`on_timer`](Self::on_timer) wants sent (AckFINs of flows
    /// ended at their deadline).
    outgoing: Vec<Outgoing>,
    /// Flows ended at their deadline.
    cut_at_deadline: u64,
    /// `--max-rate`: what forward flows deliver, policed per source and in
    /// all (a UDP sender cannot be slowed: datagrams over the budget are
    /// dropped uncounted, so the flow's report shows them lost).
    recv_budget: Option<RateBudget>,
    /// Datagrams dropped by `recv_budget`.
    policed: u64,
    /// `--max-source-time`, shared with the reverse senders.
    time: Option<SharedTimeBudget>,
    /// `--max-streams`: flows one source may hold.
    max_streams: usize,
    /// Flows that ended after one datagram, never reported.
    unreported: u64,
}

impl ServerCore {
    /// A core for a server on `local_port`. `idle_timeout` is the minimum
    /// silence after which a flow without FIN is finalized.
    pub fn new(cfg: &ServerConfig, local_port: u16, idle_timeout: Duration) -> ServerCore {
        ServerCore {
            enhanced: cfg.enhanced,
            interval: cfg.interval,
            idle_timeout,
            local_port,
            table: FlowTable::new(idle_timeout),
            next_id: 1,
            stray_bad: 0,
            logged_sources: HashSet::new(),
            no_reverse: cfg.no_reverse,
            refused_reverse: 0,
            evicted: 0,
            cut_flows: 0,
            finished_flows: 0,
            reverse_starts: Vec::new(),
            groups: JoinTable::new(JOIN_WINDOW),
            next_group: 1,
            events: Vec::new(),
            limits: cfg.limits.clone(),
            cookies: CookieJar::default(),
            log: LogLimit::default(),
            not_headers: 0,
            refused: 0,
            recently_refused: std::collections::HashMap::new(),
            outgoing: Vec::new(),
            cut_at_deadline: 0,
            recv_budget: cfg
                .limits
                .receive_budget()
                .map(|(p, t)| RateBudget::new(p, t)),
            policed: 0,
            time: SharedTimeBudget::new(cfg.limits.max_source_time),
            max_streams: cfg.limits.max_streams as usize,
            unreported: 0,
        }
    }

    /// The busy-time budget, for the reverse senders to share.
    pub fn time_budget(&self) -> Option<SharedTimeBudget> {
        self.time.clone()
    }

    /// Datagrams dropped by the `--max-rate` receive budget.
    pub fn policed(&self) -> u64 {
        self.policed
    }

    /// Flows that ended after one datagram and were never reported.
    pub fn unreported(&self) -> u64 {
        self.unreported
    }

    /// A flow left the table: counts it, and if it never became a test,
    /// says so within the log budget (its lines were never printed).
    fn flow_gone(&mut self, now: Duration, peer: SocketAddr, reported: bool) {
        self.finished_flows += 1;
        if !reported {
            self.unreported += 1;
            let n = self.unreported;
            self.warn(now, || {
                format!(
                    "UDP flow from {peer} ended after a single datagram; not reported \
                     ({n} such flows so far)"
                )
            });
        }
    }

    /// Logs one refused request (a client repeats a refused header, a -R
    /// client 100 times: one line per request, not per datagram).
    fn refuse(&mut self, d: &Datagram<'_>, r: &Refusal) {
        self.refused += 1;
        if self.recently_refused.len() >= MAX_LOGGED_SOURCES {
            self.recently_refused.clear();
        }
        let last = self.recently_refused.insert(d.from, d.rx);
        if last.is_none_or(|t| d.rx.saturating_sub(t) > Duration::from_secs(10)) {
            self.warn(d.rx, || {
                format!("refusing a UDP test from {}: it {r}", d.from)
            });
        }
    }

    /// Flows the server ended at their deadline (`-t` or `--max-duration`
    /// plus [`DEADLINE_GRACE`]) before their FIN.
    pub fn cut_at_deadline(&self) -> u64 {
        self.cut_at_deadline
    }

    /// Datagrams to send that [`on_timer`](Self::on_timer) produced.
    pub fn take_outgoing(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.outgoing)
    }

    /// Datagrams from unknown sources that did not look like a test header.
    pub fn not_headers(&self) -> u64 {
        self.not_headers
    }

    /// Test requests refused (caps, full table, per-source share).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Logs a warning within the log budget (a flood must not flood
    /// stderr). Every line the UDP server logs goes through here.
    pub(crate) fn warn(&mut self, now: Duration, msg: impl FnOnce() -> String) {
        if let Gate::Print { suppressed } = self.log.gate(now) {
            if suppressed > 0 {
                tracing::warn!(suppressed, "similar warnings suppressed");
            }
            tracing::warn!("{}", msg());
        }
    }

    /// Starts a flow for a datagram from an unknown source, if it is a
    /// consistent test header within the caps; returns what to send (a
    /// cookie reply).
    fn start(&mut self, d: &Datagram<'_>, seqno: i64, sent: Duration) -> Option<Outgoing> {
        let header = match parse_first(d.data, seqno, d.wire_len) {
            Ok(h) => h,
            Err(why) => {
                // No state for what does not look like a test header.
                self.not_headers += 1;
                self.warn(d.rx, || {
                    format!(
                        "ignoring a UDP datagram from {}: not a test header ({why})",
                        d.from
                    )
                });
                return None;
            }
        };
        if let Some(t) = &self.time
            && !t.has_time(d.rx, d.from.ip())
        {
            let r = Refusal::SourceTime {
                cap: self.limits.max_source_time,
                window: SOURCE_TIME_WINDOW,
            };
            self.refuse(d, &r);
            return None;
        }
        let per_source = MAX_FLOWS_PER_SOURCE.min(self.max_streams);
        let held = self.table.from_source(d.from.ip());
        if held >= per_source {
            // --max-streams counts flows, not the -P a header claims.
            let r = Refusal::FlowsOpen {
                open: held,
                cap: per_source,
            };
            self.refuse(d, &r);
            return None;
        }
        let sends = header.reverse || header.full_duplex;
        if self.no_reverse && sends {
            // Not even a flow entry: the client's retries are refused one
            // by one, each within the log budget.
            self.refused_reverse += 1;
            let n = self.refused_reverse;
            self.warn(d.rx, || {
                format!(
                    "refusing a UDP -R / --full-duplex test from {} (--no-reverse; {n} so far)",
                    d.from
                )
            });
            return None;
        }
        // Return routability: a bloatlab client long enough to carry a
        // cookie proves it receives at its address before we send to it.
        let can_prove = sends && header.bloatlab && d.data.len() >= ECHO_MIN_LEN;
        let proven = can_prove && self.cookies.verify(d.from, d.rx, d.data);
        if can_prove && !proven && header.reverse {
            // Stateless: the reply is all this datagram costs us.
            return Some(Outgoing {
                to: d.from,
                bytes: self.cookies.reply(d.from, d.rx),
            });
        }
        let ask = Ask {
            amount: match header.amount {
                bloatlab_wire::Amount::Time(t) => Amount::Time(t),
                bloatlab_wire::Amount::Bytes(b) => Amount::Bytes(b),
            },
            streams: header.parallel,
            rate: announced_rate(&header, d.wire_len),
            server_sends: sends,
            client_sends: !header.reverse,
            // A full-duplex sender waits for the cookie (below).
            verified: proven || can_prove,
        };
        if let Err(r) = self.limits.check(&ask) {
            self.refuse(d, &r);
            return None;
        }
        // Room last: a request refused above must not evict anyone.
        if self.table.len() >= MAX_FLOWS && !self.evict_for(d) {
            self.refused += 1;
            self.warn(d.rx, || {
                format!(
                    "too many concurrent UDP flows ({MAX_FLOWS}); ignoring {} until some end",
                    d.from
                )
            });
            return None;
        }
        if header.reverse {
            let flow = self.start_reverse(d, header);
            // The entry only absorbs the client's header retries and
            // expires after the usual silence.
            self.table.insert(d.rx, d.from, flow);
            return None;
        }
        let mut flow = self.start_flow(d, Some(header));
        let amount = match header.amount {
            bloatlab_wire::Amount::Time(t) => Amount::Time(t),
            bloatlab_wire::Amount::Bytes(b) => Amount::Bytes(b),
        };
        flow.deadline = Some(d.rx + self.limits.deadline(amount) + DEADLINE_GRACE);
        let mut out = None;
        if header.full_duplex {
            // Both ways at once: receive as usual and send as for -R.
            flow.full_duplex = true;
            let start = ReverseStart {
                id: flow.recv.id,
                peer: d.from,
                header,
                len: Bytes(d.wire_len as u64),
            };
            if can_prove && !proven {
                flow.awaiting_cookie = Some(start);
                flow.cookie_sent = d.rx;
                out = Some(Outgoing {
                    to: d.from,
                    bytes: self.cookies.reply(d.from, d.rx),
                });
            } else {
                self.reverse_starts.push(start);
            }
        }
        if header.parallel > 1 {
            let joined = self.join_group(d, flow.recv.id, header.parallel);
            if flow.announced() {
                self.events.push(joined);
            } else {
                flow.pending.push(joined);
            }
        }
        let idle = idle_for(Some(&header), d.wire_len, self.idle_timeout);
        self.table.insert_with_idle(d.rx, d.from, flow, idle);
        self.data(d, seqno, sent);
        out
    }

    /// A full table: make room for `d`'s source by evicting the oldest flow
    /// of the source holding most (`FlowTable::evict_for`); false when its
    /// source already has a fair share. The evicted flow is finalized as an
    /// idle one (its report is what it received), without an AckFIN.
    fn evict_for(&mut self, d: &Datagram<'_>) -> bool {
        let Some((peer, why, mut flow)) = self.table.evict_for(d.from.ip(), d.rx) else {
            return false;
        };
        self.evicted += 1;
        tracing::debug!(peer = %peer, flow = flow.recv.id, for_ = %d.from,
            "UDP flow table full: evicted a flow (fairness or silence)");
        let mut reported = flow.announced();
        if why == Expired::Idle && !flow.reverse && !flow.recv.finished {
            let last = flow.recv.last_rx;
            reported = flow.finalize_into(last, &mut self.events);
        }
        self.flow_gone(d.rx, peer, reported);
        true
    }

    /// Flows cut for sending above their announced rate.
    pub fn cut_flows(&self) -> u64 {
        self.cut_flows
    }

    /// Flows evicted to make room for another source (table full).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Report events produced so far, oldest first.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Reverse (`-R`) tests that started since the last call: the driver
    /// sends their datagrams.
    pub fn take_reverse_starts(&mut self) -> Vec<ReverseStart> {
        std::mem::take(&mut self.reverse_starts)
    }

    /// Flows whose ack phase or idle finalization completed.
    pub fn finished_flows(&self) -> u64 {
        self.finished_flows
    }

    /// Flows in the table.
    pub fn active_flows(&self) -> usize {
        self.table.len()
    }

    /// Bad datagrams from sources without a flow.
    pub fn stray_bad_datagrams(&self) -> u64 {
        self.stray_bad
    }

    /// Handles one datagram; returns what to send (AckFINs).
    pub fn on_datagram(&mut self, d: &Datagram<'_>) -> Option<Outgoing> {
        let inc = match parse_incoming(d.data) {
            Ok(inc) => inc,
            Err(e) => {
                self.bad(d.from, &e, d.rx);
                return None;
            }
        };
        match self.table.classify(d.rx, d.from, inc.seqno) {
            Verdict::Start => self.start(d, inc.seqno, inc.sent),
            // A reverse client repeating its header until data arrives.
            // A reverse client repeating its header until data arrives, or
            // a cut flow's sender still going.
            Verdict::Data(flow) if flow.reverse || flow.cut => None,
            Verdict::Data(_)
                if self
                    .time
                    .as_ref()
                    .is_some_and(|t| !t.charge(d.rx, d.from.ip())) =>
            {
                let cap = self.limits.max_source_time;
                self.cut(d.rx, d.from, format!(
                    "its source used its test time (--max-source-time {cap:?} per {SOURCE_TIME_WINDOW:?})"
                ));
                None
            }
            Verdict::Data(flow) if flow.awaiting_cookie.is_some() => {
                // A full-duplex flow not yet verified: its datagrams count
                // as usual; one carrying our cookie starts our sender.
                let mut out = None;
                if self.cookies.verify(d.from, d.rx, d.data) {
                    self.reverse_starts.extend(flow.awaiting_cookie.take());
                } else if d.rx.saturating_sub(flow.cookie_sent) >= COOKIE_RESEND {
                    flow.cookie_sent = d.rx;
                    out = Some(Outgoing {
                        to: d.from,
                        bytes: self.cookies.reply(d.from, d.rx),
                    });
                }
                if police(&mut self.recv_budget, d) {
                    self.policed += 1;
                } else {
                    account(&mut flow.recv, d, inc.seqno, inc.sent, &mut self.events);
                }
                out
            }
            Verdict::Data(flow)
                if flow
                    .watch
                    .as_ref()
                    .is_some_and(|w| w.over(d.rx, d.wire_len)) =>
            {
                // Above its announced rate (or --max-rate, when it announced
                // none): the flow ends here, with what it received so far.
                let rate = flow
                    .header
                    .and_then(|h| announced_rate(&h, d.wire_len))
                    .or(self.limits.max_rate);
                self.cut(
                    d.rx,
                    d.from,
                    format!(
                        "it sends above the {} its header announced (x{} over {:?})",
                        rate.map_or("rate".into(), |r| r.to_string()),
                        super::rate_watch::FACTOR,
                        super::rate_watch::WINDOW
                    ),
                );
                None
            }
            Verdict::Data(flow) if !flow.recv.plausible(inc.seqno) => {
                // A forged or corrupt datagram: counted, never as loss.
                flow.recv.bad += 1;
                None
            }
            Verdict::Data(_) if police(&mut self.recv_budget, d) => {
                // Over its source's (or the server's) --max-rate budget:
                // not received; the flow's report shows it lost.
                self.policed += 1;
                None
            }
            Verdict::Data(flow) => {
                // Its second datagram: the flow is a test now.
                self.events.append(&mut flow.pending);
                // id 0 is ignored by the accumulator, like iperf 2.
                account(&mut flow.recv, d, inc.seqno, inc.sent, &mut self.events);
                None
            }
            Verdict::Fin => self.fin(d, inc.seqno, inc.sent),
            // A full-duplex flow after its FIN: nothing to resend (NOUDPFIN).
            Verdict::ResendAck([]) => None,
            Verdict::ResendAck(bytes) => {
                let bytes = bytes.to_vec();
                // Each repeated FIN buys at most its own length back.
                let flow = self.table.get_mut(&d.from)?;
                flow.reply_budget = flow.reply_budget.saturating_add(d.wire_len as u64);
                flow.reply_budget = flow.reply_budget.checked_sub(bytes.len() as u64)?;
                tracing::debug!(peer = %d.from, "client repeated its FIN; resending the AckFIN");
                Some(Outgoing { to: d.from, bytes })
            }
            Verdict::Ignore => None,
            Verdict::StaleFin => {
                tracing::debug!(peer = %d.from, id = inc.seqno, "dropping a FIN of an unknown flow");
                None
            }
        }
    }

    /// A new flow's id and its `Connected` event (for the caller to push,
    /// or to hold until the flow becomes a test).
    fn connected(&mut self, d: &Datagram<'_>, tags: Vec<String>) -> (u32, Event) {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let local = SocketAddr::new(d.to.unwrap_or(IpAddr::from([0, 0, 0, 0])), self.local_port);
        let ev = Event::Connected {
            stream: id,
            info: ConnInfo {
                local,
                peer: d.from,
                tags,
            },
        };
        (id, ev)
    }

    /// Ends `peer`'s flow now for `why` (it sends above its rate, its
    /// source's time is spent): its report ends with what it received, and
    /// its later datagrams are dropped until it goes quiet.
    fn cut(&mut self, now: Duration, peer: SocketAddr, why: String) {
        let Some(flow) = self.table.get_mut(&peer) else {
            return;
        };
        flow.cut = true;
        if !flow.recv.finished {
            let last = flow.recv.last_rx;
            flow.finalize_into(last, &mut self.events);
        }
        self.cut_flows += 1;
        self.warn(now, || format!("cutting the UDP test from {peer}: {why}"));
    }

    /// A flow of a `-P N` client joins its client's group (iperf 2.1.8
    /// sums them in `[SUM]` lines), or opens one.
    fn join_group(&mut self, d: &Datagram<'_>, stream: u32, expected: u32) -> Event {
        self.close_groups(d.rx);
        let next = &mut self.next_group;
        let group = self.groups.join(d.from.ip(), expected, d.rx, || {
            let g = *next;
            *next = next.wrapping_add(1).max(1);
            g
        });
        Event::Joined {
            stream,
            group,
            expected,
        }
    }

    /// Groups whose join window ended with fewer flows than announced.
    fn close_groups(&mut self, now: Duration) {
        for g in self.groups.expire(now) {
            if g.joined < g.expected {
                self.events.push(Event::GroupClosed {
                    group: g.value,
                    members: g.joined,
                });
            }
        }
    }

    fn start_flow(&mut self, d: &Datagram<'_>, header: Option<HeaderInfo>) -> Flow {
        let mut tags = Vec::new();
        if header.is_some_and(|h| h.full_duplex) {
            tags.push("(full-duplex)".to_owned());
            tags.push("(no-udp-fin)".to_owned());
        }
        if header.is_some_and(|h| h.trip_times) {
            tags.push("(trip-times)".to_owned());
        }
        // A header cut short by a small -l may stop before the version.
        if let Some(h) = header.filter(|h| h.core_len >= core_field::VERSION_L.end) {
            tags.push(format!("(peer {})", h.version));
        }
        let (id, connected) = self.connected(d, tags);
        // A full-duplex flow is a test at once (our sender may start); a
        // forward one at its second datagram.
        let full_duplex = header.is_some_and(|h| h.full_duplex);
        let mut pending = vec![connected];
        if full_duplex {
            self.events.append(&mut pending);
        }
        let limits = &self.limits;
        Flow {
            recv: RecvFlow::new(id, d.rx, self.interval),
            header,
            logged_bad: false,
            reverse: false,
            full_duplex: false,
            awaiting_cookie: None,
            cookie_sent: Duration::ZERO,
            reply_budget: 0,
            deadline: None,
            // A sender that announced no rate is watched against --max-rate.
            watch: header
                .and_then(|h| announced_rate(&h, d.wire_len))
                .or(limits.max_rate)
                .map(|r| RateWatch::new(r, d.rx)),
            cut: false,
            pending,
        }
    }

    /// A reverse test: announce it (iperf 2.1.8 tags it `(reverse)
    /// (no-udp-fin)`) and queue its sender for the driver.
    fn start_reverse(&mut self, d: &Datagram<'_>, h: HeaderInfo) -> Flow {
        let mut tags = vec!["(reverse)".to_owned(), "(no-udp-fin)".to_owned()];
        if h.trip_times {
            tags.push("(trip-times)".to_owned());
        }
        tags.push(format!("(peer {})", h.version));
        let (id, connected) = self.connected(d, tags);
        self.events.push(connected);
        self.reverse_starts.push(ReverseStart {
            id,
            peer: d.from,
            header: h,
            len: Bytes(d.wire_len as u64),
        });
        let mut recv = RecvFlow::new(id, d.rx, None);
        // Nothing to receive: no intervals, no final report.
        recv.finished = true;
        Flow {
            recv,
            header: Some(h),
            logged_bad: false,
            reverse: true,
            full_duplex: false,
            awaiting_cookie: None,
            cookie_sent: Duration::ZERO,
            reply_budget: 0,
            deadline: None,
            watch: None,
            cut: false,
            pending: Vec::new(),
        }
    }

    fn data(&mut self, d: &Datagram<'_>, seqno: i64, sent: Duration) {
        if let Some(flow) = self.table.get_mut(&d.from) {
            account(&mut flow.recv, d, seqno, sent, &mut self.events);
        }
    }

    fn fin(&mut self, d: &Datagram<'_>, seqno: i64, sent: Duration) -> Option<Outgoing> {
        let flow = self.table.get_mut(&d.from)?;
        if flow.reverse {
            return None;
        }
        if !flow.recv.plausible(seqno) {
            // Not this flow's FIN: the flow goes on (the table's phase is
            // only changed by `ack`).
            flow.recv.bad += 1;
            return None;
        }
        // A flow whose FIN is its second datagram is a test too.
        self.events.append(&mut flow.pending);
        // The FIN is the last datagram of the test: iperf 2 counts it (its
        // |id| is the Total, its bytes are in the Transfer).
        account(&mut flow.recv, d, seqno, sent, &mut self.events);
        let total = flow.recv.finalize(d.rx, &mut self.events);
        if flow.full_duplex {
            // No AckFIN; the (empty) ack phase still absorbs stragglers.
            self.table.ack(d.rx, &d.from, Vec::new());
            return None;
        }
        let bytes = self.ack_bytes(d.rx, &d.from, &total);
        self.table.ack(d.rx, &d.from, bytes.clone());
        (!bytes.is_empty()).then_some(Outgoing { to: d.from, bytes })
    }

    /// The AckFIN (and, for a bloatlab peer, its report frame) that ends
    /// `peer`'s finalized flow; empty for a full-duplex flow (NOUDPFIN).
    fn ack_bytes(
        &mut self,
        now: Duration,
        peer: &SocketAddr,
        total: &bloatlab_metrics::udp_recv::UdpRecvSnapshot,
    ) -> Vec<u8> {
        let enhanced = self.enhanced;
        let Some(flow) = self.table.get_mut(peer) else {
            return Vec::new();
        };
        if flow.full_duplex {
            return Vec::new();
        }
        let header = flow.header;
        let extended = enhanced || header.is_some_and(|h| h.trip_times);
        let mut bytes = ack_fin_bytes(total, extended);
        // Replies never outweigh what the flow sent: the AckFIN and its
        // report frame are paid from the bytes it delivered, so a forged
        // header and FIN (a few hundred bytes) get no AckFIN and no frame.
        let mut budget = total.bytes.0;
        let mut too_large = None;
        if header.is_some_and(|h| h.bloatlab) {
            let report = ServerSideReport::new(
                flow.recv.id,
                std::mem::take(&mut flow.recv.records),
                IntervalRecord::from_udp_recv(total, true),
            );
            let mut framed = bytes.clone();
            too_large = append_report_frame(&mut framed, &report).err();
            if framed.len() as u64 <= budget {
                bytes = framed;
            }
        }
        match budget.checked_sub(bytes.len() as u64) {
            Some(left) => budget = left,
            None => {
                let id = flow.recv.id;
                let peer = *peer;
                self.warn(now, || {
                    format!(
                        "no AckFIN for UDP flow {id} from {peer}: it sent {budget} bytes, \
                         fewer than the reply (no amplification)"
                    )
                });
                return Vec::new();
            }
        }
        flow.reply_budget = budget;
        if let Some(n) = too_large {
            self.warn(now, || {
                format!("server report frame ({n} B) too large for one datagram; sent AckFIN only")
            });
        }
        bytes
    }

    /// Ends every receiving flow past its deadline: final report now, the
    /// AckFIN sent once now and again for the client's FIN, its further
    /// data absorbed (`FlowTable::end`).
    fn end_overdue(&mut self, now: Duration) {
        let overdue: Vec<SocketAddr> = self
            .table
            .iter_mut()
            .filter(|(_, f)| !f.recv.finished && f.deadline.is_some_and(|t| t <= now))
            .map(|(a, _)| *a)
            .collect();
        for peer in overdue {
            let Some(flow) = self.table.get_mut(&peer) else {
                continue;
            };
            let (id, secs) = (flow.recv.id, flow.recv.offset(now).as_secs_f64());
            let last = flow.recv.last_rx;
            if !flow.announced() {
                // Its first datagram only: no report, and no warning of
                // its own (flow_gone says it when it leaves the table).
                flow.finalize_into(last, &mut self.events);
                flow.reply_budget = 0;
                self.table.end(&peer, Vec::new(), 0);
                continue;
            }
            let total = flow.recv.finalize(last, &mut self.events);
            let bytes = self.ack_bytes(now, &peer, &total);
            let sends = u32::from(!bytes.is_empty());
            if !bytes.is_empty() {
                self.outgoing.push(Outgoing {
                    to: peer,
                    bytes: bytes.clone(),
                });
            }
            self.table.end(&peer, bytes, sends);
            self.cut_at_deadline += 1;
            self.warn(now, || {
                format!(
                    "ending UDP flow {id} from {peer} after {secs:.1} s: past its deadline \
                     (its -t, or --max-duration for -n, plus {} s)",
                    DEADLINE_GRACE.as_secs()
                )
            });
        }
    }

    fn bad(&mut self, from: SocketAddr, e: &bloatlab_wire::WireError, now: Duration) {
        if let Some(flow) = self.table.get_mut(&from) {
            flow.recv.bad += 1;
            if !flow.logged_bad {
                flow.logged_bad = true;
                let id = flow.recv.id;
                self.warn(now, || {
                    format!(
                        "ignoring malformed UDP datagrams from {from}, flow {id} (logged once): {e}"
                    )
                });
            }
            return;
        }
        self.stray_bad += 1;
        if self.logged_sources.len() < MAX_LOGGED_SOURCES && self.logged_sources.insert(from) {
            self.warn(now, || {
                format!(
                    "ignoring a malformed UDP datagram from {from} (logged once per source): {e}"
                )
            });
        }
    }

    /// Emits due intervals and expires flows at `now`.
    pub fn on_timer(&mut self, now: Duration) {
        self.close_groups(now);
        self.end_overdue(now);
        for (_, flow) in self.table.iter_mut() {
            if !flow.recv.finished && flow.announced() {
                let off = flow.recv.offset(now);
                flow.recv.intervals_until(off, &mut self.events);
            }
        }
        for (peer, why, mut flow) in self.table.expire(now) {
            match why {
                Expired::Idle if flow.reverse => {
                    tracing::debug!(peer = %peer, flow = flow.recv.id,
                        "reverse test's header retries over");
                }
                Expired::Idle => {
                    // Within the log budget: an attacker's one-datagram
                    // flows each end this way (issue 19: 24,576 lines in 50 s).
                    if flow.announced() && !flow.cut {
                        let id = flow.recv.id;
                        self.warn(now, || {
                            format!(
                                "UDP flow {id} from {peer}: no datagram and no FIN for the \
                                 idle timeout; finalizing the flow"
                            )
                        });
                    }
                    // A cut flow was reported when it was cut.
                    if !flow.recv.finished {
                        let last = flow.recv.last_rx;
                        flow.finalize_into(last, &mut self.events);
                    }
                }
                Expired::Acked { sends } => {
                    tracing::debug!(peer = %peer, sends, "AckFIN phase over");
                }
            }
            self.flow_gone(now, peer, flow.reverse || flow.announced());
        }
    }

    /// When [`on_timer`](Self::on_timer) next has work.
    pub fn next_deadline(&self) -> Option<Duration> {
        let intervals = self
            .table
            .states()
            .filter(|f| !f.recv.finished)
            .filter_map(|f| f.recv.next_report.map(|b| f.recv.start + b))
            .min();
        let deadlines = self
            .table
            .states()
            .filter(|f| !f.recv.finished)
            .filter_map(|f| f.deadline)
            .min();
        [
            intervals,
            deadlines,
            self.table.next_deadline(),
            self.groups.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// A reverse (`-R`) test the driver must send: to `peer`, per the
/// client's `header`, `len`-byte datagrams (the length of its header
/// datagram, i.e. its `-l`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReverseStart {
    /// Report id of the flow.
    pub id: u32,
    pub peer: SocketAddr,
    pub header: HeaderInfo,
    pub len: Bytes,
}

/// The idle timeout of a new flow: the server's, or four datagram gaps at
/// the client's announced rate when that is longer (a client pacing
/// datagrams seconds apart is slow, not dead), but never more than
/// [`MAX_FLOW_IDLE`]: what a header claims cannot pin an entry.
fn idle_for(h: Option<&HeaderInfo>, wire_len: usize, base: Duration) -> Duration {
    let gap = match h.map(|h| h.rate) {
        Some(Rate::Bits(r)) if r.0 > 0 => r.transmit_time(Bytes(wire_len as u64)),
        Some(Rate::PacketsPerSec(p)) if p > 0 => Duration::try_from_secs_f64(1.0 / p as f64).ok(),
        _ => None,
    };
    gap.map_or(base, |g| base.max(g.saturating_mul(4)))
        .min(MAX_FLOW_IDLE.max(base))
}

/// The rate a header asks for, in bits/s (`-b Npps` at its datagram
/// length); `None` for unpaced (`-b 0`).
fn announced_rate(h: &HeaderInfo, wire_len: usize) -> Option<bloatlab_units::BitRate> {
    match h.rate {
        Rate::Bits(r) if r.0 > 0 => Some(r),
        Rate::PacketsPerSec(p) if p > 0 => Some(bloatlab_units::BitRate(
            p.saturating_mul(wire_len as u64).saturating_mul(8),
        )),
        _ => None,
    }
}

/// Should `d` be dropped by the `--max-rate` receive budget (policing)?
fn police(budget: &mut Option<RateBudget>, d: &Datagram<'_>) -> bool {
    budget
        .as_mut()
        .is_some_and(|b| !b.admit(d.rx, d.from.ip(), d.wire_len as u64))
}

/// Appends the bloatlab report frame (`BLXR`, JSON payload) after the
/// 128-byte AckFIN, if the datagram stays within the UDP limit; else
/// returns the frame's length (the caller logs it within its budget).
fn append_report_frame(ack: &mut Vec<u8>, report: &ServerSideReport) -> Result<(), usize> {
    let payload = report.to_json();
    let Ok(payload) = std::str::from_utf8(&payload) else {
        return Ok(());
    };
    let Ok(repr) = ReportFrameRepr::new(payload) else {
        return Ok(());
    };
    if ack.len() + repr.buffer_len() > MAX_SEND {
        return Err(repr.buffer_len());
    }
    let start = ack.len();
    ack.resize(start + repr.buffer_len(), 0);
    repr.emit(&mut ReportFrame::new_unchecked(&mut ack[start..]));
    Ok(())
}
