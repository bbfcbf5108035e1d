//! The `Link` contract: rate in virtual time, delay, jitter, loss, counters, trace.

use bloatlab_emu::{
    Counters, DropReason, JitterDistribution, Limit, Link, LinkConfig, LossModel, Probability,
    QdiscConfig, Verdict, parse_rate, parse_time,
};
use bloatlab_units::{BitRate, Bytes};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn udp(sport: u16, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(28)];
    p[0] = 0x45;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&5001u16.to_be_bytes());
    p
}

fn fifo(limit: Limit) -> QdiscConfig {
    let mut q = QdiscConfig::default();
    q.set_limit(limit);
    q
}

fn assert_conserved(c: &Counters) {
    assert_eq!(c.conservation_gap(), (0, 0), "{c:#?}");
}

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Drains everything, waking exactly at `next_event`; returns delivery times.
fn drain_exact(link: &mut Link) -> Vec<Duration> {
    let mut out = vec![];
    while let Some(t) = link.next_event() {
        while let Some(_p) = link.dequeue(t) {
            out.push(t);
        }
    }
    out
}

#[test]
fn serialization_and_delay_are_exact_in_virtual_time() {
    // 1500 B at 12 Mbit/s = 1 ms per packet; 10 ms propagation.
    let cfg = LinkConfig {
        rate: Some(parse_rate("12mbit").unwrap()),
        delay: parse_time("10ms").unwrap(),
        qdisc: fifo(Limit::Packets(2000)),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 1).unwrap();
    for _ in 0..1000 {
        link.enqueue(Duration::ZERO, udp(1, 1500));
    }
    let times = drain_exact(&mut link);
    assert_eq!(times.len(), 1000);
    for (i, t) in times.iter().enumerate() {
        assert_eq!(*t, MS(i as u64 + 1) + MS(10), "packet {i}");
    }
    let c = link.counters();
    assert_eq!(c.dequeued.packets, 1000);
    assert_eq!(c.dequeued.bytes, Bytes(1_500_000));
    // Sojourn of packet i is i ms: p50 ~ 499 ms, max 999 ms.
    assert_eq!(c.sojourn.max(), Some(MS(999)));
    let p50 = c.sojourn.quantile(0.5).unwrap().as_secs_f64();
    assert!((p50 - 0.499).abs() < 0.499 / 64.0, "p50 {p50}");
    assert_conserved(c);
}

#[test]
fn late_wakeups_never_become_rate_error() {
    // A sender keeps the link busy; the "driver" polls at irregular, late times. The number of
    // packets delivered by each poll must equal what an exact clock would have delivered.
    let rate = BitRate(100_000_000); // 1500 B = 120 µs
    let cfg = LinkConfig {
        rate: Some(rate),
        delay: MS(5),
        qdisc: fifo(Limit::Packets(100_000)),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 1).unwrap();
    let mut now = Duration::ZERO;
    let mut delivered = 0u64;
    let mut step = 0u64;
    while now < Duration::from_secs(2) {
        while link.dequeue(now).is_some() {
            delivered += 1;
        }
        // Refill to 50 queued packets (6 ms of work, more than any gap between polls).
        while link.counters().backlog.packets < 50 {
            link.enqueue(now, udp(1, 1500));
        }
        // Expected: packets whose delivery time (k+1)*120 µs + 5 ms <= now.
        let expect = (now.saturating_sub(MS(5)).as_nanos() / 120_000) as u64;
        assert_eq!(delivered, expect, "at {now:?}");
        // Wake-ups 0.3-3.3 ms apart (deterministic pseudo-random).
        step = step
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        now += Duration::from_micros(300 + (step >> 33) % 3000);
    }
    // 2 s at 100 Mbit/s minus the 5 ms delay: within one packet of 16625.
    assert!((16_600..=16_667).contains(&delivered), "{delivered}");
    assert_conserved(link.counters());
}

#[test]
fn fifo_byte_limit_drops_tail_and_counts_it() {
    let cfg = LinkConfig {
        rate: Some(BitRate(8_000_000)),
        qdisc: fifo(Limit::Bytes(Bytes(15_000))),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 1).unwrap();
    for _ in 0..20 {
        link.enqueue(Duration::ZERO, udp(1, 1500));
    }
    let c = link.counters();
    // The first packet went straight to the serializer; 10 fit the 15 000-byte queue.
    assert_eq!(c.in_transit.packets, 1);
    assert_eq!(c.backlog.packets, 10);
    assert_eq!(c.backlog.bytes, Bytes(15_000));
    assert_eq!(c.dropped.overflow.packets, 9);
    assert_eq!(c.dropped.overflow.bytes, Bytes(13_500));
    assert_conserved(c);
    assert_eq!(drain_exact(&mut link).len(), 11);
    assert_conserved(link.counters());
}

#[test]
fn unlimited_rate_is_pure_delay() {
    let cfg = LinkConfig {
        delay: MS(20),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 1).unwrap();
    link.enqueue(MS(3), udp(1, 100));
    assert_eq!(link.next_event(), Some(MS(23)));
    assert!(link.dequeue(MS(22)).is_none());
    assert_eq!(link.dequeue(MS(23)).unwrap().len(), 100);
    assert_eq!(link.next_event(), None);
}

#[test]
fn jitter_keeps_order_unless_reordering_is_allowed() {
    for (reorder, dist) in [
        (false, JitterDistribution::Uniform),
        (false, JitterDistribution::Normal),
        (true, JitterDistribution::Uniform),
    ] {
        let cfg = LinkConfig {
            delay: MS(20),
            jitter: MS(5),
            jitter_distribution: dist,
            allow_reorder: reorder,
            ..LinkConfig::default()
        };
        let mut link = Link::new(&cfg, 7).unwrap();
        let mut ports = vec![];
        let mut times = vec![];
        let mut collect = |link: &mut Link, until: Option<Duration>| {
            while let Some(t) = link.next_event().filter(|t| until.is_none_or(|u| *t <= u)) {
                while let Some(p) = link.dequeue(t) {
                    ports.push(u16::from_be_bytes([p[20], p[21]]));
                    times.push(t);
                }
            }
        };
        for i in 0..2000u16 {
            let now = Duration::from_micros(u64::from(i) * 100);
            collect(&mut link, Some(now));
            link.enqueue(now, udp(i, 100));
        }
        collect(&mut link, None);
        assert_eq!(ports.len(), 2000);
        let inversions = ports.windows(2).filter(|w| w[1] < w[0]).count();
        if reorder {
            assert!(
                inversions > 100,
                "{inversions} inversions with reordering allowed"
            );
        } else {
            assert_eq!(inversions, 0, "{dist:?}");
        }
        // Delays stay within delay ± jitter (uniform) or ± 4 sigma (normal), plus the
        // in-order hold-back.
        let (lo, hi) = match dist {
            JitterDistribution::Uniform => (MS(15), MS(25)),
            JitterDistribution::Normal => (Duration::ZERO, MS(40)),
        };
        for (i, t) in times.iter().enumerate() {
            let sent = Duration::from_micros(u64::from(ports[i]) * 100);
            let d = *t - sent;
            assert!(d >= lo && d <= hi, "{dist:?} delay {d:?}");
        }
    }
}

#[test]
fn random_loss_is_counted_and_seeded() {
    let cfg = LinkConfig {
        loss: LossModel::Random {
            p: Probability::new(0.1).unwrap(),
        },
        ..LinkConfig::default()
    };
    let run = |seed| {
        let mut link = Link::new(&cfg, seed).unwrap();
        for i in 0..10_000u64 {
            link.enqueue(Duration::from_micros(i), udp(1, 200));
        }
        while link.dequeue(Duration::from_secs(1)).is_some() {}
        assert_conserved(link.counters());
        link.counters().dropped.loss.packets
    };
    let a = run(1);
    assert!((900..=1100).contains(&a), "{a}");
    assert_eq!(run(1), a, "same seed, same losses");
    assert_ne!(run(2), a, "another seed, other losses");
}

#[test]
fn trace_reports_every_verdict() {
    let cfg = LinkConfig {
        rate: Some(BitRate(1_200_000)),
        qdisc: fifo(Limit::Packets(2)),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 1).unwrap();
    let events = Arc::new(Mutex::new(vec![]));
    let sink = events.clone();
    link.set_trace(Some(Box::new(move |e| sink.lock().unwrap().push(*e))));
    for _ in 0..5 {
        link.enqueue(Duration::ZERO, udp(1, 1500));
    }
    drain_exact(&mut link);
    let ev = events.lock().unwrap();
    let sent: Vec<_> = ev
        .iter()
        .filter(|e| e.verdict == Verdict::Sent)
        .map(|e| (e.time, e.sojourn))
        .collect();
    // 1500 B at 1.2 Mbit/s = 10 ms each; the second and third packets waited 10 and 20 ms.
    assert_eq!(
        sent,
        vec![
            (MS(0), Some(MS(0))),
            (MS(10), Some(MS(10))),
            (MS(20), Some(MS(20)))
        ]
    );
    let drops = ev
        .iter()
        .filter(|e| e.verdict == Verdict::Dropped(DropReason::Overflow))
        .count();
    assert_eq!(drops, 2);
}

#[test]
fn invalid_configs_are_refused_with_the_field_named() {
    let cfg = LinkConfig {
        rate: Some(BitRate(0)),
        ..LinkConfig::default()
    };
    let e = Link::new(&cfg, 1).unwrap_err();
    assert_eq!(e.to_string(), r#"rate: "0" must be greater than zero"#);
}

#[test]
fn malformed_packets_are_forwarded_in_the_default_flow() {
    let cfg = LinkConfig {
        qdisc: QdiscConfig::defaults(bloatlab_emu::Qdisc::FqCodel),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 1).unwrap();
    link.enqueue(Duration::ZERO, vec![0xff; 7]);
    link.enqueue(Duration::ZERO, vec![]);
    assert_eq!(link.counters().unparsed, 2);
    assert_eq!(link.dequeue(Duration::ZERO).unwrap(), vec![0xff; 7]);
    assert_eq!(link.dequeue(Duration::ZERO).unwrap(), Vec::<u8>::new());
    assert_conserved(link.counters());
}

#[test]
fn link_can_move_to_a_driver_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Link>();
    let cfg = LinkConfig::default();
    let link = Link::new(&cfg, 1).unwrap();
    let handle = std::thread::spawn(move || {
        let mut link = link;
        link.enqueue(Duration::ZERO, udp(1, 100));
        link.dequeue(Duration::ZERO).map(|p| p.len())
    });
    assert_eq!(handle.join().unwrap(), Some(100));
}

#[test]
fn counters_serialize_with_units() {
    let cfg = LinkConfig {
        rate: Some(BitRate(12_000_000)),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 1).unwrap();
    link.enqueue(Duration::ZERO, udp(1, 1500));
    link.enqueue(Duration::ZERO, udp(1, 1500));
    while link.dequeue(MS(10)).is_some() {}
    let j = serde_json::to_value(link.counters()).unwrap();
    assert_eq!(j["enqueued"]["packets"], 2);
    assert_eq!(j["enqueued"]["bytes"], 3000);
    assert_eq!(j["dequeued"]["packets"], 2);
    assert_eq!(j["dropped"]["overflow"]["packets"], 0);
    assert_eq!(j["sojourn"]["count"], 2);
    assert_eq!(j["sojourn"]["max_ns"], 1_000_000);
    let cfg_json = serde_json::to_value(&cfg).unwrap();
    assert_eq!(cfg_json["delay"], "0s");
    assert_eq!(cfg_json["qdisc"]["kind"], "fifo");
}

#[test]
fn gilbert_elliott_loss_is_bursty_through_the_link() {
    let cfg = LinkConfig {
        loss: "gemodel 1% 25%".parse().unwrap(),
        ..LinkConfig::default()
    };
    let mut link = Link::new(&cfg, 3).unwrap();
    let mut lost = vec![];
    for i in 0..100_000u64 {
        let t = Duration::from_micros(i);
        link.enqueue(t, udp(1, 100));
        lost.push(link.dequeue(t).is_none());
    }
    let c = link.counters();
    // Bad-state share p/(p+r) = 1/26 with 100 % loss there; mean burst 1/r = 4 packets.
    let rate = c.dropped.loss.packets as f64 / 100_000.0;
    assert!((rate - 1.0 / 26.0).abs() < 0.006, "loss rate {rate}");
    let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count() as f64;
    let mean = c.dropped.loss.packets as f64 / bursts;
    assert!((3.4..=4.6).contains(&mean), "mean burst {mean}");
    assert_conserved(c);
}

/// IPv6 packets of two flows through FQ-CoDel at 10 Mbit/s, offered at 20 Mbit/s: ECT ones are
/// marked (traffic class CE), the not-ECT flow is dropped instead.
#[test]
fn fq_codel_marks_ipv6_ect_and_drops_not_ect() {
    let v6 = |flow: u8, ect: bool| {
        let mut p = vec![0u8; 1500];
        p[0] = 0x60;
        p[1] = if ect { 0x20 } else { 0 }; // ECT(0) in the traffic class's low bits
        p[4..6].copy_from_slice(&1460u16.to_be_bytes());
        p[6] = 17;
        p[7] = 64;
        p[8] = 0xfd;
        p[23] = flow;
        p[24] = 0xfd;
        p[39] = 9;
        p[40..42].copy_from_slice(&(1000 + u16::from(flow)).to_be_bytes());
        p
    };
    let mut cfg = LinkConfig::default();
    cfg.set("rate", Some("10mbit")).unwrap();
    cfg.set("qdisc", Some("fq_codel")).unwrap();
    let mut link = Link::new(&cfg, 1).unwrap();
    let (mut ce, mut delivered) = ([0u64; 2], [0u64; 2]);
    for i in 0..20_000u64 {
        let t = Duration::from_micros(i * 600);
        link.enqueue(t, v6(1, true));
        link.enqueue(t, v6(2, false));
        while let Some(p) = link.dequeue(t) {
            let f = usize::from(p[23] - 1);
            delivered[f] += 1;
            ce[f] += u64::from(p[1] & 0x30 == 0x30);
        }
    }
    let c = link.counters();
    assert!(ce[0] > 100, "ECT flow marks {ce:?}");
    assert_eq!(ce[1], 0);
    // Every delivered CE packet was counted (marked ones may still be in flight).
    assert!(
        c.ce_marked.packets >= ce[0]
            && c.ce_marked.packets - ce[0] <= c.in_transit.packets + c.backlog.packets
    );
    assert!(c.dropped.aqm.packets > 100, "{c:?}");
    // Fair shares: each flow gets about half of the link.
    let ratio = delivered[0] as f64 / delivered[1] as f64;
    assert!((0.9..=1.1).contains(&ratio), "delivered {delivered:?}");
    assert_conserved(c);
}

#[test]
fn atm_framing_and_overhead_slow_the_serializer() {
    // Report 4's "ATM + 44" at 8 Mbit/s: a 1500-byte packet takes 33 cells = 1749 bytes = 1.749 ms,
    // a 40-byte packet 2 cells = 106 bytes = 106 µs.
    let mut cfg = LinkConfig::default();
    for (k, v) in [
        ("rate", "8mbit"),
        ("overhead", "44"),
        ("framing", "atm"),
        ("limit", "100p"),
    ] {
        cfg.set(k, Some(v)).unwrap();
    }
    let mut link = Link::new(&cfg, 1).unwrap();
    link.enqueue(Duration::ZERO, udp(1, 1500));
    link.enqueue(Duration::ZERO, udp(1, 40));
    link.enqueue(Duration::ZERO, udp(1, 1500));
    let times = drain_exact(&mut link);
    assert_eq!(
        times,
        vec![
            Duration::from_micros(1749),
            Duration::from_micros(1855),
            Duration::from_micros(3604)
        ]
    );
}
