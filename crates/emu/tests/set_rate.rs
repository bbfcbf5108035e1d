//! `Link::set_rate` and `Chain::set_rate`: `bloatlab tune` moves a shaper stage's rate while
//! the lab runs. A packet that started serializing keeps its schedule; packets that start
//! later are serialized at the new rate; nothing is lost or reordered.

use bloatlab_emu::{Chain, Link, parse_stage};
use bloatlab_units::BitRate;
use std::time::Duration;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A 1250-byte UDP packet (10 ms at 1 Mbit/s), tagged in its last byte and by source port.
fn udp(tag: u8) -> Vec<u8> {
    let mut p = vec![0u8; 1250];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&1250u16.to_be_bytes());
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&u16::from(tag).to_be_bytes());
    p[1249] = tag;
    p
}

fn link(words: &str) -> Link {
    let st = parse_stage(words, 1).unwrap();
    Link::new(&st.link, 1).unwrap()
}

/// Every packet with its delivery time, in order.
fn drain(mut next: impl FnMut() -> Option<(Duration, Vec<u8>)>) -> Vec<(Duration, u8)> {
    std::iter::from_fn(|| next().map(|(t, p)| (t, p[1249]))).collect()
}

#[test]
fn a_new_rate_applies_to_packets_that_start_after_it() {
    let mut l = link("rate=1mbit qdisc=fifo limit=100p");
    for tag in 1..=3 {
        l.enqueue(Duration::ZERO, udp(tag));
    }
    // Packet 1 is on the wire from 0 to 10 ms at 1 Mbit/s when the rate doubles at 5 ms.
    l.set_rate(MS(5), Some(BitRate(2_000_000)));
    assert_eq!(l.rate(), Some(BitRate(2_000_000)));
    let got = drain(|| l.dequeue_timed(MS(100)));
    assert_eq!(got, [(MS(10), 1), (MS(15), 2), (MS(20), 3)]);
    // Unlimited: packet 4 keeps its 5 ms on the wire; packet 5, queued behind it, then
    // takes no time at all.
    l.enqueue(MS(100), udp(4));
    l.enqueue(MS(100), udp(5));
    l.set_rate(MS(101), None);
    let got = drain(|| l.dequeue_timed(MS(200)));
    assert_eq!(got, [(MS(105), 4), (MS(105), 5)]);
    assert_eq!(l.counters().conservation_gap(), (0, 0));
}

#[test]
fn a_chain_changes_the_named_or_numbered_stage_only() {
    let stages = [
        parse_stage("name=router rate=1mbit qdisc=fifo limit=100p", 1).unwrap(),
        parse_stage("rate=4mbit qdisc=fifo limit=100p", 2).unwrap(),
    ];
    let mut c = Chain::new(&stages, 1).unwrap();
    assert_eq!(
        c.set_rate(Duration::ZERO, "router", Some(BitRate(2_000_000)))
            .unwrap(),
        "router"
    );
    // Stage 2 is named by its position.
    assert_eq!(
        c.set_rate(Duration::ZERO, "2", Some(BitRate(8_000_000)))
            .unwrap(),
        "2"
    );
    let rates: Vec<_> = c.stages().map(|(_, l)| l.rate()).collect();
    assert_eq!(rates, [Some(BitRate(2_000_000)), Some(BitRate(8_000_000))]);
    for tag in 1..=2 {
        c.enqueue(Duration::ZERO, udp(tag));
    }
    // 5 ms per packet in the router, then 1.25 ms in stage 2.
    let got = drain(|| c.dequeue_timed(MS(100)));
    assert_eq!(
        got,
        [
            (MS(5) + Duration::from_micros(1250), 1),
            (MS(10) + Duration::from_micros(1250), 2)
        ]
    );
    for bad in ["modem", "0", "3"] {
        let e = c.set_rate(MS(100), bad, None).unwrap_err().to_string();
        assert!(e.contains(bad) && e.contains("router, 2"), "{e}");
    }
}

/// CAKE without `bandwidth` shapes at the link's rate, so it must follow the change; with its
/// own `bandwidth` it keeps that.
#[test]
fn cake_follows_the_links_rate_unless_it_has_its_own_bandwidth() {
    let last_delivery = |words: &str| {
        let mut l = link(words);
        l.set_rate(Duration::ZERO, Some(BitRate(2_000_000)));
        for tag in 1..=10 {
            l.enqueue(Duration::ZERO, udp(tag));
        }
        let got = drain(|| l.dequeue_timed(MS(1000)));
        assert_eq!(got.len(), 10, "{words}");
        got.last().unwrap().0
    };
    // 10 packets of 10 ms at 1 Mbit/s: 50 ms at 2 Mbit/s.
    assert_eq!(last_delivery("rate=1mbit qdisc=cake"), MS(50));
    // cake's own 1 Mbit/s shaper still paces them at 10 ms each.
    let own = last_delivery("rate=1mbit qdisc=cake bandwidth=1mbit");
    assert!(own >= MS(90), "{own:?}");
}
