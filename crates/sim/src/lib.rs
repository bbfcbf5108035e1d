//! A deterministic network simulation around a forward [`Chain`] of one or more stages (data
//! direction) and a [`Link`] (ACK direction) on
//! a virtual clock: Reno-like TCP senders, constant-rate UDP sources, a sparse latency probe, and
//! a receiver, all exchanging real IPv4 packets so the emulator hashes, marks and drops them as it
//! would in the lab.
//!
//! The TCP model is deliberately small: segment-numbered, one ACK per segment carrying up to
//! three SACK blocks (RFC 2018), slow start, congestion avoidance (+1/cwnd per ACK), SACK-based
//! loss recovery (RFC 6675: a segment is lost once three SACKed segments lie above it; `pipe`
//! limits sending; the window halves once per recovery), a retransmission timeout with RFC 6298 estimation (200 ms floor as Linux) and
//! exponential backoff, and RFC 3168 ECN (the receiver echoes CE as ECE on that ACK; the sender
//! halves its window at most once per window of data). It is a load generator whose reaction
//! to drops and marks is realistic enough to build a standing queue, not a TCP implementation.
//!
//! Same [`SimConfig`] and seed, same [`SimResult`], on every machine: there is no wall clock, no
//! thread and no floating-point function beyond IEEE basic operations and `sqrt` on the paths the
//! results depend on.
//!
//! It lives in its own crate, a dev-dependency only, so the emulator's public API carries no
//! test fixtures; it uses nothing of the emulator that is not public.

#![forbid(unsafe_code)]

use bloatlab_emu::chain::{Chain, StageConfig, StageError};
use bloatlab_emu::counters::SojournHistogram;
use bloatlab_emu::packet::{Ecn, IpView};
use bloatlab_emu::qdisc::DropReason;
use bloatlab_emu::trace::Verdict;
use bloatlab_emu::{Link, LinkConfig, SpecError};
use bloatlab_units::BitRate;
use bloatlab_wire::checksum;
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// IP length of a full data segment.
pub const DATA_LEN: usize = 1500;
/// IP length of an ACK: 40 bytes of headers + three 8-byte SACK blocks.
pub const ACK_LEN: usize = 64;
const HEADERS: usize = 40;
const SERVER: [u8; 4] = [10, 0, 2, 1];
const SERVER_PORT: u16 = 5001;
const PROBE_PORT: u16 = 7;

/// One traffic source.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowSpec {
    /// A bulk Reno-like TCP flow from its own host, starting at `start`.
    Reno {
        /// Send ECT(0) and react to ECE.
        ecn: bool,
        /// When it starts sending.
        start: Duration,
    },
    /// An unresponsive constant-rate UDP source.
    Cbr {
        /// Offered rate, counting IP bytes.
        rate: BitRate,
        /// IP packet length.
        size: usize,
        /// When it starts sending.
        start: Duration,
    },
}

/// A whole simulated experiment.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The bottleneck direction (senders to receiver).
    pub forward: LinkConfig,
    /// The ACK direction.
    pub reverse: LinkConfig,
    /// Seeds both links.
    pub seed: u64,
    /// Virtual time simulated.
    pub duration: Duration,
    /// Results only count what happens after this (slow start excluded).
    pub warmup: Duration,
    /// The traffic.
    pub flows: Vec<FlowSpec>,
    /// A sparse 100-byte UDP probe every this often through the forward link (a ping under load).
    pub probe_interval: Option<Duration>,
}

/// What one flow achieved after warm-up.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlowResult {
    /// `reno`, `reno+ecn` or `cbr`.
    pub kind: &'static str,
    /// In-order payload delivered to the receiver, Mbit/s (TCP) or IP bytes received (UDP).
    pub goodput_mbit_s: f64,
    /// Segments sent again (TCP only).
    pub retransmits: u64,
    /// Retransmission timeouts (TCP only).
    pub timeouts: u64,
    /// Window reductions caused by ECE (TCP only).
    pub ecn_reductions: u64,
}

/// The measured outcome. Times in milliseconds, rounded to 0.01 ms; rates to 0.01 Mbit/s.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SimResult {
    /// Per flow, in [`SimConfig::flows`] order.
    pub flows: Vec<FlowResult>,
    /// Sum of all flows' goodput.
    pub total_goodput_mbit_s: f64,
    /// Qdisc sojourn after warm-up: median.
    pub sojourn_p50_ms: f64,
    /// Qdisc sojourn after warm-up: 99th percentile.
    pub sojourn_p99_ms: f64,
    /// Qdisc sojourn after warm-up: maximum.
    pub sojourn_max_ms: f64,
    /// Probe one-way delay after warm-up: median (includes the link's delay).
    pub probe_p50_ms: Option<f64>,
    /// Probe one-way delay after warm-up: 99th percentile.
    pub probe_p99_ms: Option<f64>,
    /// Forward-link packets dropped on overflow after warm-up.
    pub overflow_drops: u64,
    /// Forward-link packets dropped by the AQM after warm-up.
    pub aqm_drops: u64,
    /// Forward-link packets marked CE after warm-up.
    pub ce_marks: u64,
    /// Forward-link packets lost by the loss model after warm-up.
    pub loss_drops: u64,
    /// Per stage, when the forward direction is a chain of more than one stage
    /// ([`run_chain`]); the fields above then sum the stages' drops and marks, and their
    /// `sojourn_*` are per packet that crossed the chain: its sojourns in every stage's queue
    /// summed ([`Chain::counters`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageResult>,
}

/// What one stage of a forward chain did after warm-up.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StageResult {
    /// The stage's name.
    pub name: String,
    /// Queue sojourn in this stage: median.
    pub sojourn_p50_ms: f64,
    /// Queue sojourn in this stage: 99th percentile.
    pub sojourn_p99_ms: f64,
    /// Queue sojourn in this stage: maximum.
    pub sojourn_max_ms: f64,
    /// Packets dropped on overflow.
    pub overflow_drops: u64,
    /// Packets dropped by the AQM.
    pub aqm_drops: u64,
    /// Packets marked CE.
    pub ce_marks: u64,
    /// Packets lost by the loss model.
    pub loss_drops: u64,
}

/// What the forward link's trace saw after warm-up.
#[derive(Debug, Clone, Default)]
struct Steady {
    sojourn: SojournHistogram,
    overflow: u64,
    aqm: u64,
    marks: u64,
    loss: u64,
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn ms(d: Duration) -> f64 {
    round2(d.as_secs_f64() * 1000.0)
}

/// Builds an IPv4 packet with a TCP-like or UDP header. `seq`/`ack` are segment numbers.
#[allow(clippy::too_many_arguments)]
fn build(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    sport: u16,
    dport: u16,
    words: [u32; 2],
    flags: u8,
    ecn: Ecn,
    len: usize,
) -> Vec<u8> {
    let mut p = vec![0u8; len.max(HEADERS)];
    let total = p.len() as u16;
    p[0] = 0x45;
    p[1] = match ecn {
        Ecn::NotEct => 0,
        Ecn::Ect0 => 0b10,
        Ecn::Ect1 => 0b01,
        Ecn::Ce => 0b11,
    };
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = checksum::ipv4_header(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..28].copy_from_slice(&words[0].to_be_bytes());
    p[28..32].copy_from_slice(&words[1].to_be_bytes());
    p[33] = flags;
    p
}

const FLAG_ECE: u8 = 0x40;

fn word(p: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Sender state of one Reno-like flow with a SACK scoreboard.
#[derive(Debug)]
struct Reno {
    host: [u8; 4],
    port: u16,
    ecn: bool,
    start: Duration,
    /// Oldest unacknowledged segment.
    snd_una: u32,
    /// Next new segment.
    high_seq: u32,
    /// Segments above `snd_una` the receiver reported (SACK, RFC 2018).
    sacked: BTreeSet<u32>,
    /// Segments retransmitted in the current recovery and not yet acknowledged.
    retx: BTreeSet<u32>,
    /// Where the search for the next lost segment resumes.
    retx_cursor: u32,
    /// In loss recovery until `snd_una` reaches this (RFC 6675 `RecoveryPoint`).
    recover: Option<u32>,
    /// Recovery after a timeout: every unsacked outstanding segment counts as lost.
    all_lost: bool,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    cwr_until: u32,
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    rto_deadline: Option<Duration>,
    /// Send time per outstanding segment, `None` once retransmitted (Karn's rule).
    sent_at: VecDeque<Option<Duration>>,
    retransmits: u64,
    timeouts: u64,
    ecn_reductions: u64,
}

const MIN_RTO: Duration = Duration::from_millis(200);
/// SACK blocks per ACK (as TCP with timestamps fits 3).
const SACK_BLOCKS: usize = 3;

impl Reno {
    fn new(i: usize, ecn: bool, start: Duration) -> Reno {
        Reno {
            host: [10, 0, 1, (i + 1) as u8],
            port: 10_000 + i as u16,
            ecn,
            start,
            snd_una: 0,
            high_seq: 0,
            sacked: BTreeSet::new(),
            retx: BTreeSet::new(),
            retx_cursor: 0,
            recover: None,
            all_lost: false,
            cwnd: 10.0,
            ssthresh: f64::INFINITY,
            dupacks: 0,
            cwr_until: 0,
            srtt: None,
            rttvar: Duration::ZERO,
            rto: Duration::from_secs(1),
            rto_deadline: None,
            sent_at: VecDeque::new(),
            retransmits: 0,
            timeouts: 0,
            ecn_reductions: 0,
        }
    }

    /// Segments below this that are not SACKed are lost: three SACKed segments lie above them
    /// (RFC 6675 `IsLost` with DupThresh 3), or all of them after a timeout.
    fn lost_below(&self) -> u32 {
        if self.all_lost {
            return self.high_seq;
        }
        self.sacked
            .iter()
            .rev()
            .nth(2)
            .copied()
            .unwrap_or(self.snd_una)
            .max(self.snd_una)
    }

    /// RFC 6675 `pipe`: segments believed to be in the network.
    fn pipe(&self) -> u32 {
        let outstanding = self.high_seq - self.snd_una;
        let x = self.lost_below();
        let sacked_below = self.sacked.range(..x).count() as u32;
        let lost = (x - self.snd_una) - sacked_below;
        outstanding - self.sacked.len() as u32 - lost + self.retx.len() as u32
    }

    fn emit(&mut self, now: Duration, seq: u32) -> Vec<u8> {
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
        }
        let ecn = if self.ecn { Ecn::Ect0 } else { Ecn::NotEct };
        build(
            self.host,
            SERVER,
            6,
            self.port,
            SERVER_PORT,
            [seq, 0],
            0,
            ecn,
            DATA_LEN,
        )
    }

    /// The lowest lost segment not yet retransmitted in this recovery.
    fn next_lost(&mut self) -> Option<u32> {
        let x = self.lost_below();
        let mut s = self.retx_cursor.max(self.snd_una);
        while s < x {
            if !self.sacked.contains(&s) && !self.retx.contains(&s) {
                return Some(s);
            }
            s += 1;
        }
        None
    }

    /// Sends what the window allows: lost segments first, then new data.
    fn fill(&mut self, now: Duration, out: &mut Vec<Vec<u8>>) {
        if now < self.start {
            return;
        }
        let mut pipe = self.pipe();
        while f64::from(pipe) < self.cwnd.floor() {
            let seq = match self.next_lost() {
                Some(s) => {
                    self.retx.insert(s);
                    self.retx_cursor = s + 1;
                    self.retransmits += 1;
                    if let Some(slot) = self.sent_at.get_mut((s - self.snd_una) as usize) {
                        *slot = None;
                    }
                    s
                }
                None => {
                    let s = self.high_seq;
                    self.high_seq += 1;
                    self.sent_at.push_back(Some(now));
                    s
                }
            };
            let p = self.emit(now, seq);
            out.push(p);
            pipe += 1;
        }
    }

    fn enter_recovery(&mut self) {
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = self.ssthresh;
        self.recover = Some(self.high_seq);
        self.retx.clear();
        self.retx_cursor = self.snd_una;
        self.cwr_until = self.high_seq;
    }

    fn on_ack(
        &mut self,
        now: Duration,
        ack: u32,
        sack: &[(u32, u32)],
        ece: bool,
        out: &mut Vec<Vec<u8>>,
    ) {
        for &(lo, hi) in sack {
            for s in lo.max(ack)..hi.min(self.high_seq) {
                self.sacked.insert(s);
                self.retx.remove(&s);
            }
        }
        if ack > self.snd_una && ack <= self.high_seq {
            let acked = ack - self.snd_una;
            if let Some(Some(sent)) = self.sent_at.get((acked - 1) as usize) {
                self.rtt_sample(now.saturating_sub(*sent));
            }
            for _ in 0..acked {
                self.sent_at.pop_front();
            }
            self.snd_una = ack;
            self.sacked = self.sacked.split_off(&ack);
            self.retx = self.retx.split_off(&ack);
            self.dupacks = 0;
            match self.recover {
                Some(r) if ack >= r => {
                    self.recover = None;
                    // After fast recovery the window is ssthresh; after a timeout it keeps
                    // slow-starting from where it got to.
                    if !self.all_lost {
                        self.cwnd = self.ssthresh;
                    }
                    self.all_lost = false;
                }
                // After a timeout the window slow-starts back up to ssthresh.
                Some(_) if self.all_lost && self.cwnd < self.ssthresh => {
                    self.cwnd += f64::from(acked)
                }
                Some(_) => {}
                None if self.cwnd < self.ssthresh => self.cwnd += f64::from(acked),
                None => self.cwnd += f64::from(acked) / self.cwnd,
            }
            self.rto_deadline = (self.high_seq > self.snd_una).then(|| now + self.rto);
        } else if ack == self.snd_una && self.high_seq > self.snd_una {
            self.dupacks += 1;
        }
        if self.recover.is_none()
            && self.high_seq > self.snd_una
            && (self.dupacks >= 3 || self.lost_below() > self.snd_una)
        {
            self.enter_recovery();
        }
        if ece && self.recover.is_none() && ack >= self.cwr_until {
            // RFC 3168 §6.1.2: at most one reduction per window of data.
            self.ssthresh = (self.cwnd / 2.0).max(2.0);
            self.cwnd = self.ssthresh;
            self.cwr_until = self.high_seq;
            self.ecn_reductions += 1;
        }
        self.fill(now, out);
    }

    fn rtt_sample(&mut self, r: Duration) {
        // RFC 6298 §2.
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
        self.rto = (self.srtt.unwrap_or_default()
            + (self.rttvar * 4).max(Duration::from_millis(1)))
        .max(MIN_RTO);
    }

    fn on_timer(&mut self, now: Duration, out: &mut Vec<Vec<u8>>) {
        if self.rto_deadline.is_none_or(|d| now < d) {
            return;
        }
        self.rto_deadline = None;
        if self.high_seq == self.snd_una {
            return;
        }
        // RFC 5681 §3.1 / RFC 6298 §5: collapse the window, back off, resend everything unsacked.
        self.timeouts += 1;
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = 1.0;
        self.recover = Some(self.high_seq);
        self.all_lost = true;
        self.retx.clear();
        self.retx_cursor = self.snd_una;
        self.rto = (self.rto * 2).min(Duration::from_secs(60));
        self.fill(now, out);
    }
}

/// Receiver state of one TCP flow.
#[derive(Debug, Default)]
struct Receiver {
    next_expected: u32,
    out_of_order: BTreeSet<u32>,
    bytes_after_warmup: u64,
}

#[derive(Debug)]
struct Cbr {
    host: [u8; 4],
    port: u16,
    interval: Duration,
    size: usize,
    next: Duration,
    bytes_after_warmup: u64,
}

/// Runs the experiment to completion.
pub fn run(cfg: &SimConfig) -> Result<SimResult, SpecError> {
    run_with(cfg, Chain::single(&cfg.forward, cfg.seed)?)
}

/// Runs the experiment with the forward direction made of `stages` in series (a [`Chain`];
/// `cfg.forward` is not used). The result's [`SimResult::stages`] has each stage's queueing.
pub fn run_chain(cfg: &SimConfig, stages: &[StageConfig]) -> Result<SimResult, StageError> {
    let fwd = Chain::new(stages, cfg.seed)?;
    run_with(cfg, fwd).map_err(|source| StageError { stage: 0, source })
}

fn run_with(cfg: &SimConfig, mut fwd: Chain) -> Result<SimResult, SpecError> {
    let mut rev = Link::new(&cfg.reverse, cfg.seed ^ 0xa5a5)?;
    let warmup = cfg.warmup;
    let per_stage: Vec<Arc<Mutex<Steady>>> = (0..fwd.len())
        .map(|_| Arc::new(Mutex::new(Steady::default())))
        .collect();
    for (i, steady) in per_stage.iter().enumerate() {
        let sink = steady.clone();
        fwd.set_trace(
            i,
            Some(Box::new(move |ev| {
                if ev.time < warmup {
                    return;
                }
                let Ok(mut s) = sink.lock() else { return };
                match ev.verdict {
                    Verdict::Sent => {
                        if let Some(d) = ev.sojourn {
                            s.sojourn.record(d);
                        }
                    }
                    Verdict::Marked => s.marks += 1,
                    Verdict::Dropped(DropReason::Overflow) => s.overflow += 1,
                    Verdict::Dropped(DropReason::Aqm) => s.aqm += 1,
                    Verdict::Dropped(DropReason::Loss) => s.loss += 1,
                }
            })),
        );
    }

    let mut renos: Vec<(usize, Reno, Receiver)> = vec![];
    let mut cbrs: Vec<(usize, Cbr)> = vec![];
    for (i, f) in cfg.flows.iter().enumerate() {
        match *f {
            FlowSpec::Reno { ecn, start } => {
                renos.push((i, Reno::new(i, ecn, start), Receiver::default()))
            }
            FlowSpec::Cbr { rate, size, start } => {
                let interval = rate
                    .transmit_time(bloatlab_units::Bytes(size as u64))
                    .unwrap_or(Duration::from_secs(1));
                cbrs.push((
                    i,
                    Cbr {
                        host: [10, 0, 1, (i + 1) as u8],
                        port: 10_000 + i as u16,
                        interval,
                        size,
                        next: start,
                        bytes_after_warmup: 0,
                    },
                ));
            }
        }
    }
    // The chain's per-packet sojourn (summed over stages) when warm-up ended.
    let mut chain_sojourn_at_warmup: Option<SojournHistogram> = None;
    let mut probe_next = cfg.probe_interval.map(|_| Duration::ZERO);
    let mut probe_delays = SojournHistogram::default();

    let mut now = Duration::ZERO;
    let mut out = Vec::new();
    loop {
        if now >= warmup && chain_sojourn_at_warmup.is_none() {
            chain_sojourn_at_warmup = Some(fwd.counters().sojourn);
        }
        // Deliveries to the receiver side.
        while let Some(p) = fwd.dequeue(now) {
            receive(
                now,
                &p,
                warmup,
                &mut renos,
                &mut cbrs,
                &mut probe_delays,
                &mut rev,
            );
        }
        // ACKs back to the senders.
        while let Some(p) = rev.dequeue(now) {
            let Ok(v) = IpView::parse(&p) else { continue };
            let Some((_, dport)) = v.ports() else {
                continue;
            };
            if let Some((_, s, _)) = renos.iter_mut().find(|(_, s, _)| s.port == dport) {
                let ece = p.get(33).is_some_and(|f| f & FLAG_ECE != 0);
                let mut sack = [(0u32, 0u32); SACK_BLOCKS];
                let mut n = 0;
                for (i, slot) in sack.iter_mut().enumerate() {
                    let at = HEADERS + 8 * i;
                    if p.len() >= at + 8 {
                        *slot = (word(&p, at), word(&p, at + 4));
                        if slot.1 > slot.0 {
                            n = i + 1;
                        }
                    }
                }
                s.on_ack(now, word(&p, 28), &sack[..n], ece, &mut out);
            }
        }
        for (_, s, _) in renos.iter_mut() {
            s.on_timer(now, &mut out);
            s.fill(now, &mut out);
        }
        for (_, c) in cbrs.iter_mut() {
            while c.next <= now {
                let p = build(
                    c.host,
                    SERVER,
                    17,
                    c.port,
                    SERVER_PORT,
                    [0, 0],
                    0,
                    Ecn::NotEct,
                    c.size,
                );
                out.push(p);
                c.next += c.interval;
            }
        }
        if let (Some(next), Some(iv)) = (probe_next.as_mut(), cfg.probe_interval) {
            while *next <= now {
                let t = nanos(*next);
                let p = build(
                    [10, 0, 3, 1],
                    SERVER,
                    17,
                    PROBE_PORT,
                    SERVER_PORT,
                    [(t >> 32) as u32, t as u32],
                    0,
                    Ecn::NotEct,
                    100,
                );
                out.push(p);
                *next += iv;
            }
        }
        for p in out.drain(..) {
            fwd.enqueue(now, p);
        }
        if now >= cfg.duration {
            break;
        }
        // Next event.
        let mut next = cfg.duration;
        let mut consider = |t: Option<Duration>| {
            if let Some(t) = t {
                next = next.min(t.max(now + Duration::from_nanos(1)));
            }
        };
        consider(fwd.next_event());
        consider(rev.next_event());
        for (_, s, _) in &renos {
            consider(s.rto_deadline);
            if now < s.start {
                consider(Some(s.start));
            }
        }
        for (_, c) in &cbrs {
            consider(Some(c.next));
        }
        consider(probe_next);
        now = next;
    }

    let measured = cfg
        .duration
        .saturating_sub(cfg.warmup)
        .as_secs_f64()
        .max(1e-9);
    let mbit = |bytes: u64| round2(bytes as f64 * 8.0 / measured / 1e6);
    let mut flows: Vec<(usize, FlowResult)> = renos
        .iter()
        .map(|(i, s, r)| {
            (
                *i,
                FlowResult {
                    kind: if s.ecn { "reno+ecn" } else { "reno" },
                    goodput_mbit_s: mbit(r.bytes_after_warmup),
                    retransmits: s.retransmits,
                    timeouts: s.timeouts,
                    ecn_reductions: s.ecn_reductions,
                },
            )
        })
        .chain(cbrs.iter().map(|(i, c)| {
            (
                *i,
                FlowResult {
                    kind: "cbr",
                    goodput_mbit_s: mbit(c.bytes_after_warmup),
                    retransmits: 0,
                    timeouts: 0,
                    ecn_reductions: 0,
                },
            )
        }))
        .collect();
    flows.sort_by_key(|(i, _)| *i);
    let flows: Vec<FlowResult> = flows.into_iter().map(|(_, f)| f).collect();
    let total = round2(flows.iter().map(|f| f.goodput_mbit_s).sum());
    let per_stage: Vec<Steady> = per_stage
        .iter()
        .map(|s| s.lock().map(|s| s.clone()).unwrap_or_default())
        .collect();
    let mut st = Steady {
        sojourn: match (per_stage.as_slice(), &chain_sojourn_at_warmup) {
            ([one], _) => one.sojourn.clone(),
            (_, Some(w)) => fwd.counters().sojourn.since(w),
            (_, None) => SojournHistogram::default(),
        },
        ..Steady::default()
    };
    for s in &per_stage {
        st.overflow += s.overflow;
        st.aqm += s.aqm;
        st.marks += s.marks;
        st.loss += s.loss;
    }
    let stages = if per_stage.len() > 1 {
        fwd.stages()
            .zip(&per_stage)
            .map(|((name, _), s)| StageResult {
                name: name.to_string(),
                sojourn_p50_ms: s.sojourn.quantile(0.5).map_or(0.0, ms),
                sojourn_p99_ms: s.sojourn.quantile(0.99).map_or(0.0, ms),
                sojourn_max_ms: s.sojourn.max().map_or(0.0, ms),
                overflow_drops: s.overflow,
                aqm_drops: s.aqm,
                ce_marks: s.marks,
                loss_drops: s.loss,
            })
            .collect()
    } else {
        Vec::new()
    };
    let h = &st.sojourn;
    Ok(SimResult {
        flows,
        total_goodput_mbit_s: total,
        sojourn_p50_ms: h.quantile(0.5).map_or(0.0, ms),
        sojourn_p99_ms: h.quantile(0.99).map_or(0.0, ms),
        sojourn_max_ms: h.max().map_or(0.0, ms),
        probe_p50_ms: probe_delays.quantile(0.5).map(ms),
        probe_p99_ms: probe_delays.quantile(0.99).map(ms),
        overflow_drops: st.overflow,
        aqm_drops: st.aqm,
        ce_marks: st.marks,
        loss_drops: st.loss,
        stages,
    })
}

/// The receiving host: TCP data is acknowledged, UDP is counted, probes are timed.
fn receive(
    now: Duration,
    p: &[u8],
    warmup: Duration,
    renos: &mut [(usize, Reno, Receiver)],
    cbrs: &mut [(usize, Cbr)],
    probe_delays: &mut SojournHistogram,
    rev: &mut Link,
) {
    let Ok(v) = IpView::parse(p) else { return };
    let Some((sport, _)) = v.ports() else { return };
    if sport == PROBE_PORT {
        let sent = (u64::from(word(p, 24)) << 32) | u64::from(word(p, 28));
        if now >= warmup {
            probe_delays.record(now.saturating_sub(Duration::from_nanos(sent)));
        }
        return;
    }
    if let Some((_, c)) = cbrs.iter_mut().find(|(_, c)| c.port == sport) {
        if now >= warmup {
            c.bytes_after_warmup += p.len() as u64;
        }
        return;
    }
    let Some((_, s, r)) = renos.iter_mut().find(|(_, s, _)| s.port == sport) else {
        return;
    };
    let seq = word(p, 24);
    if seq == r.next_expected {
        r.next_expected += 1;
        if now >= warmup {
            r.bytes_after_warmup += (DATA_LEN - HEADERS) as u64;
        }
        while r.out_of_order.remove(&r.next_expected) {
            r.next_expected += 1;
            if now >= warmup {
                r.bytes_after_warmup += (DATA_LEN - HEADERS) as u64;
            }
        }
    } else if seq > r.next_expected {
        r.out_of_order.insert(seq);
    }
    let ece = if v.ecn() == Ecn::Ce { FLAG_ECE } else { 0 };
    let mut ack = build(
        SERVER,
        s.host,
        6,
        SERVER_PORT,
        s.port,
        [0, r.next_expected],
        ece,
        Ecn::NotEct,
        ACK_LEN,
    );
    // SACK blocks: the lowest out-of-order ranges (enough for the model's scoreboard).
    let mut blocks = 0;
    let mut iter = r.out_of_order.iter().copied().peekable();
    while let Some(lo) = iter.next() {
        if blocks == SACK_BLOCKS {
            break;
        }
        let mut hi = lo + 1;
        while iter.peek() == Some(&hi) {
            iter.next();
            hi += 1;
        }
        let at = HEADERS + 8 * blocks;
        ack[at..at + 4].copy_from_slice(&lo.to_be_bytes());
        ack[at + 4..at + 8].copy_from_slice(&hi.to_be_bytes());
        blocks += 1;
    }
    rev.enqueue(now, ack);
}
