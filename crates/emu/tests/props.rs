//! Property tests over random traffic, for every qdisc:
//! * conservation: bytes (and packets) in = out + dropped + queued + in transit, after every call;
//! * the configured limit is never exceeded;
//! * per-flow order is kept (jitter without reordering, FQ scheduling, AQM drops);
//! * nothing is delivered before its arrival time + the configured delay;
//! * CE-marked IPv4 packets still carry a valid header checksum;
//! * malformed packets are forwarded or dropped, never a panic.

use bloatlab_emu::packet::IpView;
use bloatlab_emu::{Limit, Link, LinkConfig, LossModel, Probability, Qdisc, QdiscConfig};
use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::checksum;
use proptest::prelude::*;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone)]
enum Op {
    /// Advance the clock by `gap_us`, then offer a packet.
    Packet {
        gap_us: u32,
        flow: u8,
        len: u16,
        ect: bool,
        garbage: bool,
    },
    /// Advance the clock, then drain what is due.
    Poll { gap_us: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..800, 0u8..6, 28u16..1500, any::<bool>(), prop::bool::weighted(0.03))
            .prop_map(|(gap_us, flow, len, ect, garbage)| Op::Packet { gap_us, flow, len, ect, garbage }),
        1 => (0u32..20_000).prop_map(|gap_us| Op::Poll { gap_us }),
    ]
}

fn qdisc_kind() -> impl Strategy<Value = Qdisc> {
    prop_oneof![
        Just(Qdisc::Fifo),
        Just(Qdisc::Codel),
        Just(Qdisc::FqCodel),
        Just(Qdisc::Pie),
        Just(Qdisc::Cake)
    ]
}

fn limit() -> impl Strategy<Value = Limit> {
    prop_oneof![
        (1u32..60).prop_map(Limit::Packets),
        (1u64..60_000).prop_map(|b| Limit::Bytes(Bytes(b)))
    ]
}

/// An IPv4/UDP packet of flow `flow` carrying its per-flow sequence number and send time.
fn packet(flow: u8, seq: u32, sent: Duration, len: u16, ect: bool) -> Vec<u8> {
    let mut p = vec![0u8; usize::from(len).max(40)];
    let total = p.len() as u16;
    p[0] = 0x45;
    p[1] = if ect { 0b10 } else { 0 };
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, flow, 1]);
    p[16..20].copy_from_slice(&[10, 0, 9, 9]);
    let c = checksum::ipv4_header(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&(1000 + u16::from(flow)).to_be_bytes());
    p[22..24].copy_from_slice(&5001u16.to_be_bytes());
    p[24..28].copy_from_slice(&seq.to_be_bytes());
    p[28..36].copy_from_slice(&(sent.as_nanos() as u64).to_be_bytes());
    p
}

struct Checker {
    delay: Duration,
    last_seq: HashMap<u8, u32>,
}

impl Checker {
    fn delivered(&mut self, now: Duration, p: &[u8]) -> Result<(), TestCaseError> {
        let Ok(v) = IpView::parse(p) else {
            return Ok(());
        };
        if p.len() < 40 || v.src()[0] != 10 {
            return Ok(());
        }
        let flow = v.src()[2];
        let seq = u32::from_be_bytes([p[24], p[25], p[26], p[27]]);
        let sent = Duration::from_nanos(u64::from_be_bytes(p[28..36].try_into().unwrap()));
        prop_assert!(
            now >= sent + self.delay,
            "delivered at {now:?}, sent {sent:?}"
        );
        if let Some(&last) = self.last_seq.get(&flow) {
            prop_assert!(seq > last, "flow {flow}: {seq} after {last}");
        }
        self.last_seq.insert(flow, seq);
        prop_assert_eq!(
            u16::from_be_bytes([p[10], p[11]]),
            checksum::ipv4_header(&p[..20])
        );
        Ok(())
    }
}

fn within(limit: Limit, packets: u64, bytes: u64) -> bool {
    match limit {
        Limit::Packets(n) => packets <= u64::from(n),
        Limit::Bytes(b) => bytes <= b.0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn link_invariants_hold_for_every_qdisc(
        kind in qdisc_kind(),
        lim in limit(),
        rate in prop::option::of(prop_oneof![100_000u64..2_000_000, 2_000_000u64..50_000_000]),
        delay_us in 0u64..30_000,
        jitter_us in prop_oneof![Just(0u64), 0u64..5_000],
        loss in prop_oneof![Just(0.0), 0.0f64..0.2],
        ecn in any::<bool>(),
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..400),
    ) {
        let mut qdisc = QdiscConfig::defaults(kind);
        qdisc.set_limit(lim);
        if kind != Qdisc::Fifo {
            qdisc.set(if ecn { "ecn" } else { "noecn" }, None).unwrap();
        }
        // Tight AQM settings so the control laws act within a short random run.
        match kind {
            Qdisc::Codel | Qdisc::FqCodel => {
                qdisc.set("target", Some("1ms")).unwrap();
                qdisc.set("interval", Some("5ms")).unwrap();
            }
            Qdisc::Pie => {
                qdisc.set("target", Some("2ms")).unwrap();
                qdisc.set("tupdate", Some("1ms")).unwrap();
                qdisc.set("max_burst", Some("0ms")).unwrap();
            }
            Qdisc::Cake => qdisc.set("rtt", Some("10ms")).unwrap(),
            Qdisc::Fifo => {}
        }
        let cfg = LinkConfig {
            rate: rate.map(BitRate),
            delay: Duration::from_micros(delay_us),
            jitter: Duration::from_micros(jitter_us),
            loss: if loss > 0.0 { LossModel::Random { p: Probability::new(loss).unwrap() } } else { LossModel::None },
            qdisc,
            ..LinkConfig::default()
        };
        let mut link = Link::new(&cfg, seed).unwrap();
        let delay_floor = cfg.delay.saturating_sub(cfg.jitter);
        let mut check = Checker { delay: delay_floor, last_seq: HashMap::new() };
        let mut seqs: HashMap<u8, u32> = HashMap::new();
        let mut now = Duration::ZERO;
        for op in ops {
            match op {
                Op::Packet { gap_us, flow, len, ect, garbage } => {
                    now += Duration::from_micros(u64::from(gap_us));
                    let p = if garbage {
                        vec![0x4f ^ flow; usize::from(len % 64)]
                    } else {
                        let s = seqs.entry(flow).or_insert(0);
                        *s += 1;
                        packet(flow, *s, now, len, ect)
                    };
                    link.enqueue(now, p);
                }
                Op::Poll { gap_us } => {
                    now += Duration::from_micros(u64::from(gap_us));
                    while let Some(p) = link.dequeue(now) {
                        check.delivered(now, &p)?;
                    }
                }
            }
            let c = link.counters();
            prop_assert_eq!(c.conservation_gap(), (0, 0), "{:?}", c);
            prop_assert!(within(lim, c.backlog.packets, c.backlog.bytes.0), "backlog {:?} over {:?}", c.backlog, lim);
            if let Some(t) = link.next_event() {
                prop_assert!(t >= now || c.in_transit.packets + c.backlog.packets > 0);
            }
        }
        // Drain: everything queued is eventually delivered or dropped.
        let mut guard = 0;
        while let Some(t) = link.next_event() {
            now = now.max(t);
            while let Some(p) = link.dequeue(now) {
                check.delivered(now, &p)?;
            }
            guard += 1;
            prop_assert!(guard < 100_000, "drain does not terminate");
        }
        let c = link.counters();
        prop_assert_eq!(c.backlog.packets, 0);
        prop_assert_eq!(c.in_transit.packets, 0);
        prop_assert_eq!(c.enqueued, c.dropped.total().plus(c.dequeued));
    }
}
