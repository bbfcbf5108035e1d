//! The UDP server's budgets on a virtual clock (issue 19 audit): a sender
//! announcing no rate under `--max-rate`, one source's flows sharing the
//! receive budget, `--max-streams` counting flows, `--max-source-time`, and
//! flows of one datagram that never become a test.

use super::datagram::{Template, header_repr, stamp};
use super::report::Event;
use super::server::{Datagram, ServerCore};
use crate::config::{Amount, ClientConfig, Protocol, ServerConfig};
use crate::limits::ServerLimits;
use bloatlab_units::{BitRate, Bytes};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

const T0: Duration = Duration::from_secs(1_800_000_000);

fn core(limits: ServerLimits) -> ServerCore {
    let cfg = ServerConfig {
        protocol: Protocol::Udp,
        limits,
        ..ServerConfig::default()
    };
    ServerCore::new(&cfg, 5001, Duration::from_secs(4))
}

/// A client's datagram of `len` bytes announcing `rate` for `-t secs`.
fn template(rate: u64, len: u64, secs: u64) -> Vec<u8> {
    let mut c = ClientConfig::new("127.0.0.1");
    c.protocol = Protocol::Udp;
    c.amount = Amount::Time(Duration::from_secs(secs));
    c.buffer_len = Some(Bytes(len));
    let h = header_repr(&c, T0, BitRate(rate));
    Template::new(h, Bytes(len)).unwrap().bytes
}

fn peer(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

/// Datagram `seq` of `tmpl` from `from` at `now`, then the timer if due.
fn feed(core: &mut ServerCore, tmpl: &[u8], from: SocketAddr, seq: i64, now: Duration) {
    let mut d = tmpl.to_vec();
    stamp(&mut d, seq, now);
    let _ = core.on_datagram(&Datagram {
        from,
        to: None,
        data: &d,
        wire_len: d.len(),
        rx: now,
    });
    if core.next_deadline().is_some_and(|t| t <= now) {
        core.on_timer(now);
    }
}

/// Bytes each reported flow received, by its peer (from the events).
fn received_by_peer(events: &[Event]) -> HashMap<SocketAddr, u64> {
    let mut peers = HashMap::new();
    let mut out = HashMap::new();
    for ev in events {
        match ev {
            Event::Connected { stream, info } => {
                peers.insert(*stream, info.peer);
            }
            Event::RecvFinal { stream, total, .. } => {
                if let Some(p) = peers.get(stream) {
                    out.insert(*p, total.bytes.0);
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn a_sender_announcing_no_rate_is_cut_at_max_rate() {
    // Issue 19 audit: -b 0 (or a forged rate 0) passed --max-rate and was
    // never cut.
    let mut c = core(ServerLimits {
        max_rate: Some(BitRate(1_000_000)),
        ..ServerLimits::default()
    });
    let tmpl = template(0, 1470, 10);
    let from = peer([10, 0, 0, 1], 1);
    // 1470 B every millisecond: 11.8 Mbit/s.
    for seq in 1..=500 {
        feed(
            &mut c,
            &tmpl,
            from,
            seq,
            T0 + Duration::from_millis(seq as u64),
        );
    }
    assert_eq!(c.cut_flows(), 1);
    // Without --max-rate there is nothing to hold it to.
    let mut free = core(ServerLimits::default());
    for seq in 1..=500 {
        feed(
            &mut free,
            &tmpl,
            from,
            seq,
            T0 + Duration::from_millis(seq as u64),
        );
    }
    assert_eq!(free.cut_flows(), 0);
}

#[test]
fn one_sources_flows_share_the_receive_budget_and_another_source_keeps_its_own() {
    // Issue 19 audit: UDP -P 4 got 4x --max-rate. Four flows from one
    // source at an announced 1 Mbit/s each, and one from another source,
    // for 10 s under --max-rate 1m (4m in all).
    let mut c = core(ServerLimits {
        max_rate: Some(BitRate(1_000_000)),
        ..ServerLimits::default()
    });
    let tmpl = template(1_000_000, 1470, 10);
    let mut flows: Vec<SocketAddr> = (1..=4).map(|p| peer([10, 0, 0, 1], p)).collect();
    flows.push(peer([10, 0, 0, 2], 1));
    let gap = Duration::from_micros(11_760); // 1470 B at 1 Mbit/s
    let mut events = Vec::new();
    let mut seq = 1;
    let mut now = T0;
    while now < T0 + Duration::from_secs(10) {
        for (k, f) in flows.iter().enumerate() {
            feed(
                &mut c,
                &tmpl,
                *f,
                seq,
                now + Duration::from_micros(k as u64 * 100),
            );
        }
        events.extend(c.take_events());
        seq += 1;
        now += gap;
    }
    for f in &flows {
        feed(&mut c, &tmpl, *f, -seq, now);
    }
    events.extend(c.take_events());
    let got = received_by_peer(&events);
    let one: u64 = flows[..4].iter().map(|f| got[f]).sum();
    // 1 Mbit/s x 10 s = 1.25 MB, plus the 100-ms burst and the headers.
    assert!(
        (1_150_000..=1_450_000).contains(&one),
        "the four flows got {one} B together"
    );
    let other = got[&flows[4]];
    assert!(other >= 1_240_000, "the other source got {other} B");
    assert!(c.policed() > 2000, "{}", c.policed());
}

#[test]
fn max_streams_counts_flows_per_source() {
    // Issue 19 audit: --max-streams counted only the -P a header claims.
    let mut c = core(ServerLimits {
        max_streams: 4,
        ..ServerLimits::default()
    });
    let tmpl = template(1_000_000, 200, 10);
    for p in 1..=10 {
        feed(&mut c, &tmpl, peer([10, 0, 0, 1], p), 1, T0);
    }
    assert_eq!(c.active_flows(), 4);
    assert_eq!(c.refused(), 6);
    feed(&mut c, &tmpl, peer([10, 0, 0, 2], 1), 1, T0);
    assert_eq!(c.active_flows(), 5, "another source has its own count");
}

#[test]
fn a_flow_of_one_datagram_prints_nothing_and_a_second_datagram_makes_it_a_test() {
    // Issue 19 audit: each forged one-datagram flow printed a `connected
    // with` line and a report.
    let mut c = core(ServerLimits::default());
    let tmpl = template(1_000_000, 200, 10);
    feed(&mut c, &tmpl, peer([10, 0, 0, 1], 1), 1, T0);
    feed(&mut c, &tmpl, peer([10, 0, 0, 1], 2), 1, T0);
    feed(
        &mut c,
        &tmpl,
        peer([10, 0, 0, 1], 2),
        2,
        T0 + Duration::from_millis(10),
    );
    let later = T0 + Duration::from_secs(10);
    c.on_timer(later);
    let events = c.take_events();
    let connected: Vec<u16> = events
        .iter()
        .filter_map(|e| match e {
            Event::Connected { info, .. } => Some(info.peer.port()),
            _ => None,
        })
        .collect();
    assert_eq!(connected, vec![2]);
    let finals = events
        .iter()
        .filter(|e| matches!(e, Event::RecvFinal { .. }))
        .count();
    assert_eq!(finals, 1);
    assert_eq!(c.unreported(), 1);
    assert_eq!(c.finished_flows(), 2);
}

#[test]
fn a_sources_busy_time_ends_its_flow_and_refuses_the_next() {
    let mut c = core(ServerLimits {
        max_source_time: Duration::from_secs(3),
        ..ServerLimits::default()
    });
    let tmpl = template(1_000_000, 200, 10);
    let from = peer([10, 0, 0, 1], 1);
    let mut cut_at = None;
    for k in 0..500 {
        let now = T0 + Duration::from_millis(10 * k);
        feed(&mut c, &tmpl, from, k as i64 + 1, now);
        if c.cut_flows() == 1 && cut_at.is_none() {
            cut_at = Some(now - T0);
        }
    }
    let at = cut_at.expect("cut");
    assert!(
        (Duration::from_millis(2990)..=Duration::from_millis(3030)).contains(&at),
        "{at:?}"
    );
    let refused = c.refused();
    feed(
        &mut c,
        &tmpl,
        peer([10, 0, 0, 1], 2),
        1,
        T0 + Duration::from_secs(6),
    );
    assert_eq!(c.refused(), refused + 1);
    // Another source is served.
    feed(
        &mut c,
        &tmpl,
        peer([10, 0, 0, 2], 2),
        1,
        T0 + Duration::from_secs(6),
    );
    assert_eq!(c.refused(), refused + 1);
}
