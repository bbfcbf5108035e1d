//! `Link::set_delay`: the lab's delay calibration shortens the delay while
//! the link runs. A change applies to packets leaving the serializer from
//! then on; packets already in flight keep their time, and a later packet
//! never overtakes an earlier one.

use bloatlab_emu::{Link, LinkConfig};
use std::time::Duration;

const MS: fn(u64) -> Duration = Duration::from_millis;
const US: fn(u64) -> Duration = Duration::from_micros;

fn udp(tag: u8) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&28u16.to_be_bytes());
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[27] = tag;
    p
}

#[test]
fn a_new_delay_applies_to_later_packets_without_reordering() {
    let mut cfg = LinkConfig::default();
    cfg.set("delay", Some("20ms")).unwrap();
    let mut link = Link::new(&cfg, 1).unwrap();
    assert_eq!(link.delay(), MS(20));
    link.enqueue(Duration::ZERO, udp(1));
    link.set_delay(MS(20) - US(70));
    assert_eq!(link.delay(), MS(20) - US(70));
    link.enqueue(MS(1), udp(2));
    // The first keeps its 20 ms; the second gets 19.93 ms.
    assert_eq!(link.next_event(), Some(MS(20)));
    assert_eq!(link.dequeue(MS(20)).map(|p| p[27]), Some(1));
    assert_eq!(link.next_event(), Some(MS(21) - US(70)));
    assert_eq!(link.dequeue(MS(21) - US(70)).map(|p| p[27]), Some(2));
    // A larger cut than the gap between two packets: the later one waits
    // for the earlier (in order), it does not overtake it.
    link.enqueue(MS(30), udp(3));
    link.set_delay(MS(10));
    link.enqueue(MS(30) + US(1), udp(4));
    let a = link.next_event().unwrap();
    assert_eq!(a, MS(50) - US(70));
    assert_eq!(link.dequeue(a).map(|p| p[27]), Some(3));
    assert_eq!(link.dequeue(a).map(|p| p[27]), Some(4));
    assert_eq!(link.counters().conservation_gap(), (0, 0));
}
