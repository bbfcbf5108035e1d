//! A CAKE-like shaper: "Piece of CAKE: A Comprehensive Queue Management Solution for Home
//! Gateways" (Høiland-Jørgensen, Täht, Morton, LANMAN 2018), tc-cake(8), net/sched/sch_cake.c.
//!
//! What is modelled:
//! * **Deficit-mode shaper** at `bandwidth` (default: the link's rate), in virtual time, with
//!   overhead compensation (`overhead`, `mpu`, `atm`/`ptm`, presets `ethernet`, `docsis`,
//!   `conservative`, `raw`). The next packet may leave at `time_next_packet`, advanced by each
//!   packet's wire time; after idle it restarts from now, so there is no token-bucket burst.
//! * **Flow queueing** with 1024 queues and 8-way set-associative hashing (a flow reuses its
//!   tagged way, else an empty way of its set, else collides), DRR with new/old lists as
//!   FQ-CoDel, quantum = clamp(rate/4096 B/s, 300, 1514).
//! * **Host isolation** (`flowblind`, `srchost`, `dsthost`, `hosts`, `flows`, `dual-srchost`,
//!   `dual-dsthost`, `triple-isolate` = default): a flow's DRR quantum is divided by the number of
//!   active flows of its host (the larger of source and destination counts in triple-isolate), so
//!   hosts share first and flows share within a host.
//! * **COBALT** per flow (CoDel + BLUE): CoDel marks ECT packets (drops the others) with a drop
//!   count that decays while the flow is not over target instead of resetting; BLUE raises the
//!   flow's drop probability by 1/256 on each overflow drop and lowers it by 1/4096 when the flow
//!   empties, each at most once per `target`. The last packet of a flow is never dropped by COBALT.
//! * `target = max(rtt/20, 1.5 × MTU wire time)`, `interval = max(rtt + target − rtt/20, 2·target)`.
//! * Overflow drops one packet from the head of the fattest flow at a time (and feeds BLUE).
//!   Buffer: `memlimit`, else max(4 MiB, 4 × rate × interval); also at most 10240 packets.
//!
//! Not modelled: diffserv tins (everything is best effort), the ACK filter, NAT lookup,
//! ingress mode, GSO splitting (the lab splits GSO before the emulator), set-associative *host*
//! tables (hosts map directly to 1024 slots).

use super::drr::{self, DrrFlows, FlowLists};
use super::{Backlog, DropReason, QueueDiscipline, QueuedPacket, Sink};
use crate::config::{Framing, Overhead};
use crate::packet::set_ce;
use crate::spec::{
    Limit, Problem, SpecError, parse_limit, parse_positive_time, parse_rate, parse_signed,
};
use bloatlab_units::{BitRate, Bytes};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::collections::VecDeque;
use std::time::Duration;

/// How CAKE identifies flows and which hosts it isolates (tc-cake(8) "FLOW ISOLATION").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowMode {
    /// One queue for everything.
    Flowblind,
    /// One queue per source host.
    Srchost,
    /// One queue per destination host.
    Dsthost,
    /// One queue per source-destination host pair.
    Hosts,
    /// One queue per 5-tuple, no host fairness.
    Flows,
    /// Per-flow queues, fairness between source hosts first.
    DualSrchost,
    /// Per-flow queues, fairness between destination hosts first.
    DualDsthost,
    /// Per-flow queues, fairness between source and between destination hosts (the default).
    #[default]
    TripleIsolate,
}

impl FlowMode {
    fn from_word(w: &str) -> Option<FlowMode> {
        Some(match w {
            "flowblind" => FlowMode::Flowblind,
            "srchost" => FlowMode::Srchost,
            "dsthost" => FlowMode::Dsthost,
            "hosts" => FlowMode::Hosts,
            "flows" => FlowMode::Flows,
            "dual-srchost" => FlowMode::DualSrchost,
            "dual-dsthost" => FlowMode::DualDsthost,
            "triple-isolate" => FlowMode::TripleIsolate,
            _ => return None,
        })
    }
}

/// CAKE parameters.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CakeConfig {
    /// Shaper rate. `None` = the link's rate (unlimited if the link has none). tc: `bandwidth`, `unlimited`.
    pub bandwidth: Option<BitRate>,
    /// Expected round-trip time; sets target (rtt/20) and interval. Default 100 ms (`internet`).
    #[serde(serialize_with = "crate::spec::ser_time")]
    pub rtt: Duration,
    /// Overhead compensation for the shaper.
    pub overhead: Overhead,
    /// Flow isolation mode. Default triple-isolate.
    pub flow_mode: FlowMode,
    /// Mark ECT packets instead of dropping (CAKE always does; `noecn` is ours). Default on.
    pub ecn: bool,
    /// Buffer limit (tc `memlimit`, or `--limit`). `None` = max(4 MiB, 4 × rate × interval).
    pub limit: Option<Limit>,
}

impl Default for CakeConfig {
    fn default() -> Self {
        CakeConfig {
            bandwidth: None,
            rtt: Duration::from_millis(100),
            overhead: Overhead::default(),
            flow_mode: FlowMode::TripleIsolate,
            ecn: true,
            limit: None,
        }
    }
}

impl CakeConfig {
    pub(crate) const PARAM_NAMES: &'static str = "bandwidth, unlimited, rtt, datacentre, lan, metro, regional, \
        internet, oceanic, satellite, interplanetary, flowblind, srchost, dsthost, hosts, flows, dual-srchost, \
        dual-dsthost, triple-isolate, overhead, mpu, atm, ptm, noatm, raw, conservative, ethernet, docsis, \
        memlimit, besteffort, ecn, noecn";

    pub(crate) fn is_flag(key: &str) -> bool {
        FlowMode::from_word(key).is_some()
            || rtt_preset(key).is_some()
            || matches!(
                key,
                "unlimited"
                    | "atm"
                    | "ptm"
                    | "noatm"
                    | "raw"
                    | "conservative"
                    | "ethernet"
                    | "docsis"
                    | "besteffort"
                    | "ecn"
                    | "noecn"
            )
    }

    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<bool, SpecError> {
        if let Some(m) = FlowMode::from_word(key) {
            self.flow_mode = m;
            return Ok(true);
        }
        if let Some(rtt) = rtt_preset(key) {
            self.rtt = rtt;
            return Ok(true);
        }
        let o = &mut self.overhead;
        match key {
            "bandwidth" => self.bandwidth = Some(parse_rate(value)?),
            "unlimited" => self.bandwidth = None,
            "rtt" => self.rtt = parse_positive_time(value)?,
            "overhead" => o.bytes = parse_signed(key, value, -64..=256)? as i32,
            "mpu" => o.mpu = parse_signed(key, value, 0..=256)? as u32,
            "atm" => o.framing = Framing::Atm,
            "ptm" => o.framing = Framing::Ptm,
            "noatm" => o.framing = Framing::None,
            "raw" => *o = Overhead::default(),
            "conservative" => {
                *o = Overhead {
                    bytes: 48,
                    mpu: 0,
                    framing: Framing::Atm,
                }
            }
            "ethernet" => {
                *o = Overhead {
                    bytes: 38,
                    mpu: 84,
                    framing: Framing::None,
                }
            }
            "docsis" => {
                *o = Overhead {
                    bytes: 18,
                    mpu: 64,
                    framing: Framing::None,
                }
            }
            "memlimit" | "limit" => self.limit = Some(parse_limit(value)?),
            "besteffort" => {}
            "ecn" => self.ecn = true,
            "noecn" => self.ecn = false,
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub(crate) fn validate(&self) -> Result<(), SpecError> {
        if self.bandwidth == Some(BitRate(0)) {
            return Err(SpecError::new("bandwidth", "0", Problem::NotPositive));
        }
        Ok(())
    }
}

/// tc-cake(8) round-trip-time presets.
fn rtt_preset(key: &str) -> Option<Duration> {
    Some(match key {
        "datacentre" => Duration::from_micros(100),
        "lan" => Duration::from_millis(1),
        "metro" => Duration::from_millis(10),
        "regional" => Duration::from_millis(30),
        "internet" => Duration::from_millis(100),
        "oceanic" => Duration::from_millis(300),
        "satellite" => Duration::from_millis(1000),
        "interplanetary" => Duration::from_secs(1000),
        _ => return None,
    })
}

const QUEUES: usize = 1024;
const WAYS: usize = 8;
const HOSTS: usize = 1024;
const PACKET_LIMIT: u32 = 10240;
const P_INC: f64 = 1.0 / 256.0;
const P_DEC: f64 = 1.0 / 4096.0;

/// COBALT state of one flow.
#[derive(Debug, Clone, Default)]
struct Cobalt {
    count: u32,
    drop_next: Duration,
    blue_timer: Duration,
    p_drop: f64,
    dropping: bool,
}

#[derive(Debug, Clone, Copy)]
struct CobaltParams {
    target: Duration,
    interval: Duration,
    mtu_time: Duration,
    ecn: bool,
}

fn control(t: Duration, interval: Duration, count: u32) -> Duration {
    let step = interval.as_secs_f64() / f64::from(count.max(1)).sqrt();
    t + Duration::from_nanos((step * 1e9).round() as u64)
}

enum Decision {
    Keep,
    Marked,
    Drop,
}

impl Cobalt {
    /// sch_cake.c `cobalt_should_drop`, with `bulk_flows` = 0 (egress mode).
    fn should_drop(
        &mut self,
        p: &CobaltParams,
        now: Duration,
        pkt: &mut QueuedPacket,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Decision {
        let sojourn = now.saturating_sub(pkt.enqueued_at);
        let over_target = sojourn > p.target && sojourn > p.mtu_time * 4;
        let mut next_due = self.count > 0 && now >= self.drop_next;
        if over_target {
            if !self.dropping {
                self.dropping = true;
                self.drop_next = control(now, p.interval, self.count);
            }
            if self.count == 0 {
                self.count = 1;
            }
        } else if self.dropping {
            self.dropping = false;
        }
        let mut decision = Decision::Keep;
        if next_due && self.dropping {
            decision = if p.ecn && set_ce(&mut pkt.data) {
                Decision::Marked
            } else {
                Decision::Drop
            };
            self.count = self.count.saturating_add(1);
            self.drop_next = control(self.drop_next, p.interval, self.count);
        } else {
            // Not dropping: the count decays, one step per elapsed control-law interval.
            while next_due {
                self.count -= 1;
                self.drop_next = control(self.drop_next, p.interval, self.count);
                next_due = self.count > 0 && now >= self.drop_next;
            }
        }
        // BLUE, deliberately without ECN: it is aimed at flows that do not respond to marks.
        if self.p_drop > 0.0
            && !matches!(decision, Decision::Drop)
            && rng.random::<f64>() < self.p_drop
        {
            decision = Decision::Drop;
        }
        // drop_next doubles as an activity timeout.
        if self.count == 0 {
            self.drop_next = now + p.interval;
        } else if now > self.drop_next && !matches!(decision, Decision::Drop) {
            self.drop_next = now;
        }
        decision
    }

    /// `cobalt_queue_full`: the flow overflowed the buffer.
    fn queue_full(&mut self, p: &CobaltParams, now: Duration) {
        if now.saturating_sub(self.blue_timer) > p.target {
            self.p_drop = (self.p_drop + P_INC).min(1.0);
            self.blue_timer = now;
        }
        self.dropping = true;
        self.drop_next = now;
        if self.count == 0 {
            self.count = 1;
        }
    }

    /// `cobalt_queue_empty`: the flow ran empty.
    fn queue_empty(&mut self, p: &CobaltParams, now: Duration) {
        if self.p_drop > 0.0 && now.saturating_sub(self.blue_timer) > p.target {
            self.p_drop = (self.p_drop - P_DEC).max(0.0);
            self.blue_timer = now;
        }
        self.dropping = false;
        if self.count > 0 && now >= self.drop_next {
            self.count -= 1;
            self.drop_next = control(self.drop_next, p.interval, self.count);
        }
    }
}

#[derive(Debug, Default)]
struct Flow {
    queue: VecDeque<QueuedPacket>,
    bytes: u64,
    deficit: i64,
    tag: Option<u32>,
    active: bool,
    src_host: usize,
    dst_host: usize,
    cobalt: Cobalt,
}

/// The CAKE-like qdisc.
#[derive(Debug)]
pub struct Cake {
    cfg: CakeConfig,
    rate: Option<BitRate>,
    params: CobaltParams,
    quantum: u64,
    byte_limit: Option<u64>,
    packet_limit: u32,
    flows: Vec<Flow>,
    src_load: Vec<u32>,
    dst_load: Vec<u32>,
    lists: FlowLists,
    backlog: Backlog,
    time_next_packet: Duration,
    rng: Xoshiro256PlusPlus,
}

impl Cake {
    /// An empty CAKE; `link_rate` is used when `cfg.bandwidth` is `None`.
    pub fn new(cfg: CakeConfig, seed: u64, link_rate: Option<BitRate>) -> Cake {
        let rate = cfg.bandwidth.or(link_rate);
        let (params, quantum, byte_limit, packet_limit) = Cake::derived(&cfg, rate);
        Cake {
            params,
            cfg,
            rate,
            quantum,
            byte_limit,
            packet_limit,
            flows: (0..QUEUES).map(|_| Flow::default()).collect(),
            src_load: vec![0; HOSTS],
            dst_load: vec![0; HOSTS],
            lists: FlowLists::default(),
            backlog: Backlog::default(),
            time_next_packet: Duration::ZERO,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The derived COBALT target and interval (for tests and docs).
    pub fn target_interval(&self) -> (Duration, Duration) {
        (self.params.target, self.params.interval)
    }

    /// The derived DRR quantum in bytes.
    pub fn quantum(&self) -> u64 {
        self.quantum
    }

    fn flow_key(&self, pkt: &QueuedPacket) -> u32 {
        let m = &pkt.meta;
        match self.cfg.flow_mode {
            FlowMode::Flowblind => 0,
            FlowMode::Srchost => m.src_host,
            FlowMode::Dsthost => m.dst_host,
            FlowMode::Hosts => m.src_host ^ m.dst_host.rotate_left(16),
            _ => m.flow,
        }
    }

    /// 8-way set-associative lookup: the flow's tagged way, else an empty way, else a collision.
    fn slot(&mut self, key: u32) -> usize {
        let home = ((u64::from(key) * QUEUES as u64) >> 32) as usize;
        let set = home & !(WAYS - 1);
        for i in 0..WAYS {
            let k = set + (home + i) % WAYS;
            if self.flows[k].tag == Some(key) {
                return k;
            }
        }
        for i in 0..WAYS {
            let k = set + (home + i) % WAYS;
            if !self.flows[k].active && self.flows[k].queue.is_empty() {
                self.flows[k].tag = Some(key);
                return k;
            }
        }
        home
    }

    /// How many flows share this flow's host(s); its quantum is divided by this.
    fn host_load(&self, f: &Flow) -> u32 {
        let src = self.src_load[f.src_host];
        let dst = self.dst_load[f.dst_host];
        let load = match self.cfg.flow_mode {
            FlowMode::DualSrchost => src,
            FlowMode::DualDsthost => dst,
            FlowMode::TripleIsolate => src.max(dst),
            _ => 1,
        };
        load.max(1)
    }

    fn flow_quantum(&self, idx: usize) -> i64 {
        (self.quantum as f64 / f64::from(self.host_load(&self.flows[idx]))).ceil() as i64
    }

    fn activate(&mut self, idx: usize) {
        let (s, d) = (self.flows[idx].src_host, self.flows[idx].dst_host);
        self.src_load[s] += 1;
        self.dst_load[d] += 1;
        self.flows[idx].active = true;
        self.flows[idx].deficit = self.flow_quantum(idx);
        self.lists.push_new(idx);
    }

    fn deactivate(&mut self, idx: usize) {
        let f = &mut self.flows[idx];
        f.active = false;
        self.src_load[f.src_host] -= 1;
        self.dst_load[f.dst_host] -= 1;
    }

    fn over_limit(&self) -> bool {
        self.backlog.packets > u64::from(self.packet_limit)
            || self.byte_limit.is_some_and(|b| self.backlog.bytes.0 > b)
    }

    /// `cake_drop`: one packet from the head of the fattest flow, which also feeds its BLUE.
    fn drop_one(&mut self, now: Duration, sink: &mut dyn Sink) {
        let Some((idx, _)) = self
            .flows
            .iter()
            .enumerate()
            .max_by_key(|(i, f)| (f.bytes, std::cmp::Reverse(*i)))
        else {
            return;
        };
        let p = self.params;
        let f = &mut self.flows[idx];
        let Some(pkt) = f.queue.pop_front() else {
            return;
        };
        f.bytes -= pkt.len();
        f.cobalt.queue_full(&p, now);
        self.backlog.sub(pkt.len());
        sink.dropped(now, pkt, DropReason::Overflow);
    }
}

impl Cake {
    /// What the shaper rate decides: COBALT's parameters (the target is at least 1.5 MTU times),
    /// the DRR quantum and the buffer limits.
    fn derived(cfg: &CakeConfig, rate: Option<BitRate>) -> (CobaltParams, u64, Option<u64>, u32) {
        let mtu_time = rate
            .and_then(|r| r.transmit_time(Bytes(cfg.overhead.wire_bytes(1500))))
            .unwrap_or(Duration::ZERO);
        let base_target = (cfg.rtt / 20).max(Duration::from_nanos(1));
        let target = base_target.max(mtu_time * 3 / 2);
        let interval = (cfg.rtt + target - base_target).max(target * 2);
        let rate_bytes = rate.map(|r| r.0 / 8);
        let quantum = rate_bytes.map_or(1514, |b| (b >> 12).clamp(300, 1514));
        let (byte_limit, packet_limit) = match cfg.limit {
            Some(Limit::Bytes(b)) => (Some(b.0), PACKET_LIMIT),
            Some(Limit::Packets(n)) => (None, n),
            None => (
                rate_bytes.map(|b| ((b as f64 * interval.as_secs_f64() * 4.0) as u64).max(4 << 20)),
                PACKET_LIMIT,
            ),
        };
        let params = CobaltParams {
            target,
            interval,
            mtu_time,
            ecn: cfg.ecn,
        };
        (params, quantum, byte_limit, packet_limit)
    }
}

/// The DRR scheduler's view: a quantum shared among a host's flows, COBALT on each flow's head.
impl DrrFlows for Cake {
    fn lists(&mut self) -> &mut FlowLists {
        &mut self.lists
    }
    fn deficit(&mut self, idx: usize) -> &mut i64 {
        &mut self.flows[idx].deficit
    }
    fn quantum(&self, idx: usize) -> i64 {
        self.flow_quantum(idx)
    }
    /// COBALT: drop from the head until a packet may go; the last one always goes.
    fn serve(&mut self, idx: usize, now: Duration, sink: &mut dyn Sink) -> Option<QueuedPacket> {
        let p = self.params;
        loop {
            let f = &mut self.flows[idx];
            let Some(mut pkt) = f.queue.pop_front() else {
                f.cobalt.queue_empty(&p, now);
                return None;
            };
            f.bytes -= pkt.len();
            self.backlog.sub(pkt.len());
            match f.cobalt.should_drop(&p, now, &mut pkt, &mut self.rng) {
                Decision::Drop if !f.queue.is_empty() => sink.dropped(now, pkt, DropReason::Aqm),
                Decision::Marked => {
                    sink.marked(now, &pkt);
                    return Some(pkt);
                }
                _ => return Some(pkt),
            }
        }
    }
    fn retire(&mut self, idx: usize) {
        self.deactivate(idx);
    }
}

impl QueueDiscipline for Cake {
    fn enqueue(&mut self, now: Duration, pkt: QueuedPacket, sink: &mut dyn Sink) {
        if self.backlog.packets == 0 && self.time_next_packet < now {
            // Idle: the shaper restarts from now (no accumulated burst credit).
            self.time_next_packet = now;
        }
        let key = self.flow_key(&pkt);
        let idx = self.slot(key);
        let len = pkt.len();
        let (src, dst) = (
            (pkt.meta.src_host as usize) % HOSTS,
            (pkt.meta.dst_host as usize) % HOSTS,
        );
        let f = &mut self.flows[idx];
        if !f.active {
            f.src_host = src;
            f.dst_host = dst;
        }
        f.queue.push_back(pkt);
        f.bytes += len;
        self.backlog.add(len);
        if !self.flows[idx].active {
            self.activate(idx);
        }
        while self.over_limit() && self.backlog.packets > 0 {
            self.drop_one(now, sink);
        }
    }

    fn dequeue(&mut self, now: Duration, sink: &mut dyn Sink) -> Option<QueuedPacket> {
        let pkt = drr::dequeue(self, now, sink)?;
        if let Some(rate) = self.rate {
            let wire = self.cfg.overhead.wire_bytes(pkt.len());
            let start = self.time_next_packet.max(now);
            self.time_next_packet = start + rate.transmit_time(Bytes(wire)).unwrap_or_default();
        }
        Some(pkt)
    }

    fn backlog(&self) -> Backlog {
        self.backlog
    }

    /// Without its own `bandwidth`, CAKE shapes at the link's rate: it follows a change, with
    /// the parameters that rate decides (flows already queued keep their state).
    fn set_link_rate(&mut self, rate: Option<BitRate>) {
        if self.cfg.bandwidth.is_some() {
            return;
        }
        let (params, quantum, byte_limit, packet_limit) = Cake::derived(&self.cfg, rate);
        self.rate = rate;
        self.params = params;
        self.quantum = quantum;
        self.byte_limit = byte_limit;
        self.packet_limit = packet_limit;
    }

    fn ready_at(&self) -> Duration {
        if self.rate.is_some() {
            self.time_next_packet
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::tests_support::{Recorder, udp, udp_hosts};

    #[test]
    fn derived_parameters_follow_rate() {
        // 20 Mbit/s: quantum = 2.5e6/4096 = 610 B; MTU time 600 µs -> target stays 5 ms.
        let c = Cake::new(CakeConfig::default(), 1, Some(BitRate(20_000_000)));
        assert_eq!(c.quantum(), 610);
        assert_eq!(
            c.target_interval(),
            (Duration::from_millis(5), Duration::from_millis(100))
        );
        // 1 Mbit/s: MTU time 12 ms -> target 18 ms, interval 113 ms; quantum clamps to 300.
        let c = Cake::new(CakeConfig::default(), 1, Some(BitRate(1_000_000)));
        assert_eq!(c.quantum(), 300);
        assert_eq!(
            c.target_interval(),
            (Duration::from_millis(18), Duration::from_millis(113))
        );
        // Unlimited: quantum 1514.
        assert_eq!(Cake::new(CakeConfig::default(), 1, None).quantum(), 1514);
    }

    #[test]
    fn shaper_spaces_packets_by_wire_time_with_overhead() {
        let cfg = CakeConfig {
            bandwidth: Some(BitRate(8_000_000)),
            overhead: Overhead {
                bytes: 44,
                mpu: 0,
                framing: Framing::Atm,
            },
            ..Default::default()
        };
        let mut c = Cake::new(cfg, 1, None);
        let mut rec = Recorder::default();
        let t0 = Duration::from_millis(1);
        c.enqueue(t0, udp(1, 1500, t0), &mut rec);
        c.enqueue(t0, udp(1, 1500, t0), &mut rec);
        assert_eq!(c.ready_at(), t0);
        c.dequeue(t0, &mut rec).unwrap();
        // 1500 + 44 -> 33 ATM cells = 1749 B = 1749 µs at 1 byte/µs.
        assert_eq!(c.ready_at(), t0 + Duration::from_micros(1749));
    }

    /// Host A runs 4 flows, host B one. `a_dst(port)` picks each A flow's destination.
    fn host_share(mode: FlowMode, a_dst: impl Fn(u16) -> u8) -> (u32, u32) {
        let mut c = Cake::new(
            CakeConfig {
                flow_mode: mode,
                ..Default::default()
            },
            1,
            None,
        );
        let mut rec = Recorder::default();
        let t = Duration::ZERO;
        for _ in 0..200 {
            for port in 1..=4 {
                c.enqueue(
                    t,
                    udp_hosts([10, 0, 0, 1], a_dst(port), port, 1000, t),
                    &mut rec,
                );
            }
            c.enqueue(t, udp_hosts([10, 0, 0, 2], 100, 9, 1000, t), &mut rec);
        }
        let (mut a, mut b) = (0, 0);
        for _ in 0..400 {
            let p = c.dequeue(t, &mut rec).unwrap();
            if p.data[15] == 1 { a += 1 } else { b += 1 }
        }
        (a, b)
    }

    #[test]
    fn host_isolation_shares_between_hosts_first() {
        // dual-srchost: hosts A and B share equally, whatever the destinations.
        let (a, b) = host_share(FlowMode::DualSrchost, |_| 100);
        assert!((180..=220).contains(&b), "host A {a} packets, host B {b}");
        // triple-isolate with A's flows to 4 different servers: A's source load is 4, B's 1.
        let (a, b) = host_share(FlowMode::TripleIsolate, |p| 100 + p as u8);
        assert!((180..=220).contains(&b), "host A {a} packets, host B {b}");
        // triple-isolate with everything to one server: that server's load (5) rules, so it is
        // per-flow fairness, as in sch_cake.c (max of source and destination loads).
        let (a, b) = host_share(FlowMode::TripleIsolate, |_| 100);
        assert!((60..=100).contains(&b), "host A {a} packets, host B {b}");
        // flows: per-flow fairness: B gets 1/5.
        let (a, b) = host_share(FlowMode::Flows, |p| 100 + p as u8);
        assert!((60..=100).contains(&b), "host A {a} packets, host B {b}");
    }
}
