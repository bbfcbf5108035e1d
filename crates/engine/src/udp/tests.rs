//! Server core tests with synthetic datagrams and virtual time (no sockets),
//! plus one in-process loopback run of client and server.

use super::datagram::{Template, header_repr, stamp};
use super::json;
use super::report::{Event, ReportSettings, Reporter, Side};
use super::server::{Datagram, ServerCore};
use super::server_report::{parse_ack_fin, snapshot_from_server_report};
use crate::config::{Amount, ClientConfig, OutputFormat, Protocol, ServerConfig};
use bloatlab_metrics::json::{ServerSideReport, TestInfo};
use bloatlab_metrics::udp_recv::UdpRecvSnapshot;
use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::bloatlab::{ReportFrame, ReportFrameRepr};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const T0: Duration = Duration::from_secs(1_800_000_000);

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn client_cfg(trip_times: bool) -> ClientConfig {
    let mut c = ClientConfig::new("127.0.0.1");
    c.protocol = Protocol::Udp;
    c.amount = Amount::Time(Duration::from_secs(1));
    c.buffer_len = Some(Bytes(200));
    c.trip_times = trip_times;
    c
}

fn server_cfg(interval: Option<Duration>) -> ServerConfig {
    ServerConfig {
        protocol: Protocol::Udp,
        interval,
        enhanced: true,
        ..ServerConfig::default()
    }
}

/// A peer that builds real client datagrams.
struct Peer {
    addr: SocketAddr,
    tmpl: Vec<u8>,
}

impl Peer {
    fn new(port: u16, cfg: &ClientConfig) -> Peer {
        let h = header_repr(cfg, T0, BitRate(1_000_000));
        Peer {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            tmpl: Template::new(h, Bytes(200)).unwrap().bytes,
        }
    }

    fn datagram(&self, seq: i64, sent: Duration) -> Vec<u8> {
        let mut d = self.tmpl.clone();
        stamp(&mut d, seq, sent);
        d
    }
}

fn feed(core: &mut ServerCore, peer: &Peer, bytes: &[u8], rx: Duration) -> Option<Vec<u8>> {
    let d = Datagram {
        from: peer.addr,
        to: None,
        data: bytes,
        wire_len: bytes.len(),
        rx,
    };
    core.on_datagram(&d).map(|o| {
        assert_eq!(o.to, peer.addr);
        o.bytes
    })
}

#[test]
fn server_core_full_flow_with_loss_reorder_fin_and_ack_resends() {
    let mut core = ServerCore::new(
        &server_cfg(Some(Duration::from_secs(1))),
        5001,
        Duration::from_secs(4),
    );
    let p = Peer::new(40000, &client_cfg(true));
    // ids 1..=100 every 10 ms, 20 us transit; 50 is lost, 60 and 61 swapped.
    let mut order: Vec<i64> = (1..=100).filter(|&i| i != 50).collect();
    let i60 = order.iter().position(|&i| i == 60).unwrap();
    order.swap(i60, i60 + 1);
    for (k, id) in order.iter().enumerate() {
        let sent = T0 + us(10_000 * k as u64);
        let ack = feed(&mut core, &p, &p.datagram(*id, sent), sent + us(20));
        assert!(ack.is_none());
    }
    // FIN -101 at 1.0 s.
    let fin_at = T0 + us(1_000_000);
    let ack = feed(&mut core, &p, &p.datagram(-101, fin_at), fin_at + us(20)).expect("AckFIN");
    let events = core.take_events();
    assert!(matches!(events[0], Event::Connected { stream: 1, .. }));
    // Interval 0-1 s was emitted when the FIN (at 1.00002 s) crossed it.
    let ivl: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::RecvInterval { snap, .. } => Some(snap.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ivl.len(), 1);
    assert_eq!(ivl[0].span.end, Duration::from_secs(1));
    let Some(Event::RecvFinal {
        total,
        bad_datagrams,
        ..
    }) = events.last()
    else {
        panic!("no final event: {events:?}");
    };
    assert_eq!(*bad_datagrams, 0);
    // Total 101 (the FIN counts), lost = gaps(50, and 60 jumping to 61) - ooo.
    assert_eq!(total.datagrams, 101);
    assert_eq!(total.lost, 1);
    assert_eq!(total.out_of_order, 1);
    assert_eq!(total.bytes, Bytes(200 * 100));
    let w = total.latency.welford_secs();
    assert!((w.mean() - 20e-6).abs() < 1e-9 && (w.min() - 20e-6).abs() < 1e-9);

    // The AckFIN carries exactly the final numbers, plus the BLXR frame.
    let r = parse_ack_fin(&ack).unwrap();
    let back = snapshot_from_server_report(&r);
    assert_eq!((back.datagrams, back.lost, back.out_of_order), (101, 1, 1));
    assert_eq!(back.bytes, total.bytes);
    assert!(r.ext.is_some(), "trip-times client: extended report");
    let frame = ReportFrame::new_checked(&ack[128..]).unwrap();
    let side =
        ServerSideReport::from_json(ReportFrameRepr::parse(&frame).unwrap().payload.as_bytes())
            .unwrap();
    let recv = side.summary.udp_recv.as_ref().unwrap();
    assert_eq!((recv.datagrams_total, recv.lost), (101, 1));
    assert_eq!(side.intervals.len(), 1, "the 0-1 s interval");
    let lat = recv.latency.as_ref().unwrap();
    assert!(lat.histogram.is_some(), "the distribution travels too");

    // The client repeats its FIN: the same bytes come back, up to 10 sends in all.
    let mut resends = 0;
    for k in 0..20u64 {
        let t = fin_at + us(10_000 * (k + 1));
        if let Some(b) = feed(&mut core, &p, &p.datagram(-102 - k as i64, t), t) {
            assert_eq!(b, ack);
            resends += 1;
        }
    }
    assert_eq!(resends, 9);
    assert!(core.take_events().is_empty(), "no second final report");
    // After 250 ms of silence the flow is gone.
    core.on_timer(fin_at + us(200_000 + 250_000));
    assert_eq!(core.active_flows(), 0);
    assert_eq!(core.finished_flows(), 1);
}

#[test]
fn iperf_client_gets_a_plain_128_byte_ackfin() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(4));
    let mut cfg = client_cfg(false);
    cfg.trip_times = false;
    let mut p = Peer::new(40001, &cfg);
    // Erase the BLAB marker: this is what iperf 2.1.8 sends.
    p.tmpl[40..48].fill(0);
    feed(&mut core, &p, &p.datagram(1, T0), T0 + us(5));
    let ack = feed(&mut core, &p, &p.datagram(-2, T0 + us(1000)), T0 + us(1005)).unwrap();
    assert_eq!(ack.len(), 128);
    // Server -e: extended even without trip-times (iperf 2.1.8 does the same).
    assert!(parse_ack_fin(&ack).unwrap().ext.is_some());
}

#[test]
fn garbage_is_counted_and_a_silent_flow_is_finalized_after_the_idle_timeout() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(4));
    let p = Peer::new(40002, &client_cfg(false));
    // Short garbage from a stranger: counted, no flow.
    assert!(feed(&mut core, &p, &[1, 2, 3], T0).is_none());
    assert_eq!(core.stray_bad_datagrams(), 1);
    assert_eq!(core.active_flows(), 0);
    // A flow, then garbage inside it, then silence.
    for i in 1..=10 {
        feed(
            &mut core,
            &p,
            &p.datagram(i, T0 + us(1000 * i as u64)),
            T0 + us(1000 * i as u64 + 30),
        );
    }
    for _ in 0..5 {
        feed(&mut core, &p, &[0xff; 7], T0 + us(20_000));
    }
    assert_eq!(core.stray_bad_datagrams(), 1);
    core.take_events();
    // The client announced 1 Mbit/s with 200-byte datagrams: 1.6 ms gaps,
    // so the server's 4 s idle timeout applies.
    core.on_timer(T0 + Duration::from_secs(3));
    assert_eq!(core.active_flows(), 1);
    assert!(core.next_deadline().unwrap() <= T0 + Duration::from_secs(5));
    core.on_timer(T0 + Duration::from_secs(5));
    assert_eq!(core.active_flows(), 0);
    let events = core.take_events();
    let Some(Event::RecvFinal {
        total,
        bad_datagrams,
        ..
    }) = events.last()
    else {
        panic!("{events:?}");
    };
    assert_eq!(*bad_datagrams, 5);
    assert_eq!(total.datagrams, 10);
    // The final span ends at the last datagram, not at the timeout.
    assert!(
        total.span.end < Duration::from_millis(20),
        "{:?}",
        total.span
    );
}

#[test]
fn stale_fin_from_unknown_source_starts_nothing() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(4));
    let p = Peer::new(40003, &client_cfg(false));
    assert!(feed(&mut core, &p, &p.datagram(-77, T0), T0).is_none());
    assert_eq!(core.active_flows(), 0);
    assert!(core.take_events().is_empty());
}

/// Client and server in one process over loopback: the Server Report the
/// client decodes equals the server's own final numbers.
#[test]
fn loopback_client_and_server_agree() {
    let port = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let scfg = ServerConfig {
        port,
        format: OutputFormat::Json,
        ..server_cfg(None)
    };
    let st = stop.clone();
    let server = std::thread::spawn(move || super::run_server_until(&scfg, &st));
    std::thread::sleep(Duration::from_millis(100));
    let mut c = client_cfg(true);
    c.port = port;
    c.format = OutputFormat::Json;
    c.rate = Some(BitRate(2_000_000));
    c.amount = Amount::Time(Duration::from_millis(500));
    let out = super::run_client(&c).unwrap();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap().unwrap();
    let s = &out.streams[&1];
    let total = s.send_total.unwrap();
    // 2 Mbit/s of 200-byte datagrams for 0.5 s: slots 0..=624, never more;
    // a starved machine may lose stalls beyond the 10 ms catch-up bound.
    assert!((590..=625).contains(&total.writes), "{}", total.writes);
    let rep = s.server_snapshot.as_ref().expect("server report");
    assert_eq!(rep.datagrams, total.writes + 1, "the FIN counts");
    assert_eq!(rep.lost, 0);
    let side = s.server_side.as_ref().expect("bloatlab server report");
    let recv = side.summary.udp_recv.as_ref().unwrap();
    assert_eq!(recv.datagrams_total, rep.datagrams);
    let min = recv.latency.as_ref().unwrap().latency_ms_min;
    assert!((0.0..50.0).contains(&min), "{min}");
}

#[test]
fn reverse_header_starts_a_sender_once_and_receives_nothing() {
    let mut core = ServerCore::new(
        &server_cfg(Some(Duration::from_secs(1))),
        5001,
        Duration::from_secs(1),
    );
    let mut cfg = client_cfg(true);
    cfg.direction = crate::config::Direction::Reverse;
    let mut p = Peer::new(40010, &cfg);
    // Without the cookie: a reply with one, and nothing starts.
    let reply = feed(&mut core, &p, &p.datagram(1, T0), T0).expect("cookie reply");
    assert_eq!(reply.len(), super::cookie::REPLY_LEN);
    assert!(core.take_reverse_starts().is_empty());
    assert_eq!(core.active_flows(), 0);
    let c = super::cookie::from_reply(&reply).unwrap();
    assert!(super::cookie::embed(&mut p.tmpl, &c));
    // The client repeats its header (id 1), now with the cookie, until
    // data comes back.
    for i in 0..5u64 {
        assert!(feed(&mut core, &p, &p.datagram(1, T0), T0 + us(7_000 * i)).is_none());
    }
    let starts = core.take_reverse_starts();
    assert_eq!(starts.len(), 1, "{starts:?}");
    let s = starts[0];
    assert_eq!((s.id, s.peer, s.len), (1, p.addr, Bytes(200)));
    assert!(s.header.reverse && s.header.trip_times);
    assert_eq!(
        s.header.amount,
        bloatlab_wire::Amount::Time(Duration::from_secs(1))
    );
    assert_eq!(s.header.rate, bloatlab_wire::Rate::Bits(BitRate(1_000_000)));
    let events = core.take_events();
    let [Event::Connected { stream: 1, info }] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(
        &info.tags[..3],
        ["(reverse)", "(no-udp-fin)", "(trip-times)"]
    );
    // A stray negative id from the client neither acks nor reports.
    assert!(feed(&mut core, &p, &p.datagram(-9, T0), T0 + us(40_000)).is_none());
    // No receive intervals for the reverse flow; it leaves the table after
    // the silence, without a receive report.
    core.on_timer(T0 + Duration::from_secs(3));
    assert_eq!(core.active_flows(), 0);
    assert_eq!(core.finished_flows(), 1);
    assert!(core.take_events().is_empty());
    assert!(core.take_reverse_starts().is_empty());
}

#[test]
fn full_duplex_header_receives_and_sends_and_the_fin_gets_no_ackfin() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(1));
    let mut cfg = client_cfg(false);
    cfg.direction = crate::config::Direction::FullDuplex;
    let p = Peer::new(40011, &cfg);
    // The first datagram starts the receive half and gets a cookie; the
    // sender waits for a datagram carrying it (the client's id-0 echo).
    let reply = feed(&mut core, &p, &p.datagram(1, T0 + us(1000)), T0 + us(1020)).unwrap();
    for i in 2..=20i64 {
        let t = T0 + us(1000 * i as u64);
        assert!(feed(&mut core, &p, &p.datagram(i, t), t + us(20)).is_none());
        assert!(core.take_reverse_starts().is_empty());
    }
    let mut echo = p.datagram(0, T0 + us(20_500));
    super::cookie::embed(&mut echo, &super::cookie::from_reply(&reply).unwrap());
    assert!(feed(&mut core, &p, &echo, T0 + us(20_520)).is_none());
    let starts = core.take_reverse_starts();
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert!(starts[0].header.full_duplex && !starts[0].header.reverse);
    // NOUDPFIN: the FIN finalizes the receive half but is not acked, and
    // neither are the client's retransmissions.
    let fin = T0 + us(30_000);
    assert!(feed(&mut core, &p, &p.datagram(-21, fin), fin).is_none());
    assert!(feed(&mut core, &p, &p.datagram(-22, fin), fin + us(10)).is_none());
    let events = core.take_events();
    let Some(Event::Connected { info, .. }) = events.first() else {
        panic!("{events:?}");
    };
    assert_eq!(&info.tags[..2], ["(full-duplex)", "(no-udp-fin)"]);
    let Some(Event::RecvFinal { total, .. }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!((total.datagrams, total.lost), (21, 0));
    core.on_timer(fin + Duration::from_secs(1));
    assert_eq!(core.active_flows(), 0);
    assert!(core.take_reverse_starts().is_empty());
}

#[test]
fn full_duplex_client_header_carries_fullduplex_and_noudpfin() {
    use bloatlab_wire::{ClientHeaderRepr, HeaderFlags, UdpDatagram, UpperFlags};
    let mut cfg = client_cfg(false);
    cfg.direction = crate::config::Direction::FullDuplex;
    let t = Template::new(header_repr(&cfg, T0, BitRate(1)), Bytes(200)).unwrap();
    let v = UdpDatagram::new_unchecked(&t.bytes[..]);
    let c = ClientHeaderRepr::parse(&v.core().unwrap()).unwrap();
    // As a 2.1.8 client (upper 0x0808, VERSION2, UDPTESTS so that a 2.1.8
    // server reads NOUDPFIN).
    assert!(c.upper_flags.contains(UpperFlags::FULLDUPLEX));
    assert!(c.upper_flags.contains(UpperFlags::NOUDPFIN));
    assert!(c.flags.contains(HeaderFlags::VERSION2));
    assert!(c.flags.contains(HeaderFlags::UDPTESTS));
}

/// Feeds flow `p` ids `1..=n` every 10 ms from `start` (20 us transit),
/// skipping `lose`, then its FIN.
fn run_flow(core: &mut ServerCore, p: &Peer, start: Duration, n: i64, lose: Option<i64>) {
    for id in (1..=n).filter(|i| Some(*i) != lose) {
        let sent = start + us(10_000 * (id as u64 - 1));
        feed(core, p, &p.datagram(id, sent), sent + us(20));
    }
    let fin = start + us(10_000 * n as u64);
    feed(core, p, &p.datagram(-(n + 1), fin), fin + us(20));
}

fn quiet_server_reporter() -> Reporter {
    Reporter::new(ReportSettings {
        side: Side::Server,
        enhanced: true,
        format: OutputFormat::Json,
        streams: 1,
        reverse: false,
        test: TestInfo::default(),
        out: crate::console::Out::capture().0,
        err: crate::console::Out::capture().0,
    })
}

fn parallel_peer(port: u16, parallel: u32) -> Peer {
    let mut cfg = client_cfg(false);
    cfg.parallel = parallel;
    Peer::new(port, &cfg)
}

#[test]
fn flows_of_one_parallel_client_are_summed_once_every_flow_reported() {
    let mut core = ServerCore::new(
        &server_cfg(Some(Duration::from_secs(1))),
        5001,
        Duration::from_secs(4),
    );
    let peers: Vec<Peer> = (0..3).map(|k| parallel_peer(41_000 + k, 3)).collect();
    let single = parallel_peer(41_010, 1);
    // Staggered by 5 ms like our client; flow 1 loses id 50.
    for (k, p) in peers.iter().enumerate() {
        let lose = (k == 0).then_some(50);
        run_flow(&mut core, p, T0 + us(5_000 * k as u64), 150, lose);
    }
    run_flow(&mut core, &single, T0, 20, None);
    let events = core.take_events();
    let joined: Vec<(u32, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Joined {
                stream,
                group,
                expected: 3,
            } => Some((*stream, *group)),
            _ => None,
        })
        .collect();
    assert_eq!(joined, vec![(1, 1), (2, 1), (3, 1)], "{events:?}");

    let mut r = quiet_server_reporter();
    let mut finished = Vec::new();
    for ev in events {
        r.handle(ev);
        finished.extend(r.take_finished());
    }
    // The lone flow's test ends on its own (after the group's, which
    // finished first); the group's as one test with its sum.
    assert_eq!(finished.len(), 2);
    let group = &finished[0];
    assert_eq!(finished[1].streams.len(), 1);
    assert!(finished[1].sum.is_none());
    let ids: Vec<u32> = group.streams.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    let sum = group.sum.as_ref().expect("a [SUM]");
    let total = sum.total.as_ref().expect("the total [SUM]");
    let totals: Vec<&UdpRecvSnapshot> = group
        .streams
        .iter()
        .map(|(_, s)| s.recv_total.as_ref().unwrap())
        .collect();
    let bytes: u64 = totals.iter().map(|t| t.bytes.0).sum();
    assert_eq!(total.bytes, Bytes(bytes));
    assert_eq!(
        total.bytes,
        Bytes(200 * (3 * 150 + 3 - 1)),
        "FINs count, one lost"
    );
    assert_eq!((total.lost, total.datagrams), (1, 3 * 151));
    assert_eq!(
        total.span.end,
        totals.iter().map(|t| t.span.end).max().unwrap()
    );
    // One full interval (0-1 s) summed; 1-1.5 s partials summed too.
    assert_eq!(sum.intervals.len(), 2);
    let first: u64 = group
        .streams
        .iter()
        .map(|(_, s)| s.recv_intervals[0].bytes.0)
        .sum();
    assert_eq!(sum.intervals[0].bytes, Bytes(first));
    assert_eq!(sum.intervals[0].span.end, Duration::from_secs(1));

    // --json: one document for the group, with a receive sum.
    let doc = json::server_test_document(group, &TestInfo::default()).unwrap();
    assert_eq!(doc.streams.len(), 3);
    let s = doc.sum.as_ref().unwrap();
    assert_eq!((s.streams, s.intervals.len()), (3, 2));
    assert_eq!(s.summary.udp_recv.as_ref().unwrap().datagrams_total, 453);
}

#[test]
fn a_group_short_of_members_completes_when_its_join_window_ends() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(4));
    // The client announced 3 flows; only 2 arrive.
    let a = parallel_peer(41_100, 3);
    let b = parallel_peer(41_101, 3);
    run_flow(&mut core, &a, T0, 10, None);
    run_flow(&mut core, &b, T0, 10, None);
    let mut r = quiet_server_reporter();
    let mut at_shutdown = quiet_server_reporter();
    for ev in core.take_events() {
        r.handle(ev.clone());
        at_shutdown.handle(ev);
    }
    assert!(r.take_finished().is_empty(), "waits for the third flow");
    // A server stopping now completes the group with the flows it has.
    at_shutdown.end_open_groups();
    let done = at_shutdown.take_finished();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].streams.len(), 2);
    let close = T0 + crate::sum::JOIN_WINDOW + us(100);
    assert!(core.next_deadline().unwrap() <= close);
    core.on_timer(close);
    let events = core.take_events();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::GroupClosed {
                group: 1,
                members: 2
            }
        )),
        "{events:?}"
    );
    for ev in events {
        r.handle(ev);
    }
    let done = r.take_finished();
    assert_eq!(done.len(), 1);
    let total = done[0].sum.as_ref().unwrap().total.as_ref().unwrap();
    assert_eq!(total.datagrams, 2 * 11);
    assert_eq!(total.bytes, Bytes(2 * 11 * 200));
    // A later test of the same client opens a new group.
    let c = parallel_peer(41_102, 3);
    feed(&mut core, &c, &c.datagram(1, close), close);
    // Its lines wait for its second datagram (one alone is no test).
    assert!(core.take_events().is_empty());
    feed(&mut core, &c, &c.datagram(2, close), close + us(10));
    assert!(core.take_events().iter().any(|e| matches!(
        e,
        Event::Joined {
            stream: 3,
            group: 2,
            ..
        }
    )));
}

#[test]
fn reverse_client_sums_its_receive_streams() {
    let mut r = Reporter::new(ReportSettings {
        side: Side::Client,
        enhanced: false,
        format: OutputFormat::Json,
        streams: 2,
        reverse: true,
        test: TestInfo::default(),
        out: crate::console::Out::capture().0,
        err: crate::console::Out::capture().0,
    });
    let snap = |end_ms: u64, bytes: u64| UdpRecvSnapshot {
        span: bloatlab_metrics::interval::Span::new(Duration::ZERO, Duration::from_millis(end_ms)),
        bytes: Bytes(bytes),
        datagrams: bytes / 100,
        ..UdpRecvSnapshot::default()
    };
    for (stream, bytes) in [(1, 1000), (2, 3000)] {
        r.handle(Event::RecvInterval {
            stream,
            snap: snap(1000, bytes),
        });
    }
    for (stream, end) in [(1, 2000), (2, 2010)] {
        r.handle(Event::RecvFinal {
            stream,
            partial: None,
            total: snap(end, 10_000),
            bad_datagrams: 0,
        });
    }
    let c = r.finish();
    let sum = c.recv_sum.expect("a receive sum");
    assert_eq!(sum.intervals.len(), 1);
    assert_eq!(sum.intervals[0].bytes, Bytes(4000));
    let total = sum.total.unwrap();
    assert_eq!((total.bytes, total.datagrams), (Bytes(20_000), 200));
    assert_eq!(total.span.end, Duration::from_millis(2010));
}

#[test]
fn no_reverse_refuses_reverse_and_full_duplex_headers_but_serves_forward_tests() {
    let scfg = ServerConfig {
        no_reverse: true,
        ..server_cfg(Some(Duration::from_secs(1)))
    };
    let mut core = ServerCore::new(&scfg, 5001, Duration::from_secs(1));
    for (port, direction) in [
        (40020, crate::config::Direction::Reverse),
        (40021, crate::config::Direction::FullDuplex),
    ] {
        let mut cfg = client_cfg(true);
        cfg.direction = direction;
        let p = Peer::new(port, &cfg);
        for i in 0..5u64 {
            assert!(feed(&mut core, &p, &p.datagram(1, T0), T0 + us(7_000 * i)).is_none());
        }
    }
    assert!(core.take_reverse_starts().is_empty());
    assert_eq!(core.active_flows(), 0, "refused tests hold no flow");
    assert!(core.take_events().is_empty());
    // A forward test from another client is served as usual.
    let p = Peer::new(40022, &client_cfg(true));
    feed(&mut core, &p, &p.datagram(1, T0), T0 + us(50_000));
    assert_eq!(core.active_flows(), 1);
}

#[test]
fn a_spoofed_reverse_header_costs_one_small_reply_and_no_state() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(1));
    let mut cfg = client_cfg(false);
    cfg.direction = crate::config::Direction::Reverse;
    cfg.buffer_len = Some(Bytes(1470));
    let mut p = Peer::new(40030, &cfg);
    p.tmpl = Template::new(header_repr(&cfg, T0, BitRate(1_000_000)), Bytes(1470))
        .unwrap()
        .bytes;
    for i in 0..100u64 {
        let r = feed(&mut core, &p, &p.datagram(1, T0), T0 + us(i)).unwrap();
        assert!(r.len() < 1470 / 10, "amplification");
    }
    assert_eq!(core.active_flows(), 0);
    assert!(core.take_reverse_starts().is_empty());
    // A cookie made for another address does not work here.
    let other = Peer {
        addr: SocketAddr::from(([127, 0, 0, 1], 40031)),
        tmpl: p.tmpl.clone(),
    };
    let r = feed(&mut core, &other, &other.datagram(1, T0), T0).unwrap();
    super::cookie::embed(&mut p.tmpl, &super::cookie::from_reply(&r).unwrap());
    assert!(feed(&mut core, &p, &p.datagram(1, T0), T0).is_some());
    assert!(core.take_reverse_starts().is_empty());
}

#[test]
fn random_datagrams_create_no_flows_and_garbage_never_ends_a_flow() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(4));
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut candidates = 0;
    for k in 0..2000u16 {
        let mut b = vec![0u8; 76 + usize::from(k % 200)];
        for c in b.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_be_bytes()[..c.len()]);
        }
        let peer = Peer {
            addr: SocketAddr::from(([10, 1, (k >> 8) as u8, k as u8], 5000 + k)),
            tmpl: b,
        };
        // Negative ids are stale FINs, dropped before any header check.
        candidates += u64::from(super::datagram::parse_incoming(&peer.tmpl).unwrap().seqno >= 0);
        assert!(feed(&mut core, &peer, &peer.tmpl.clone(), T0).is_none());
    }
    assert_eq!(core.active_flows(), 0);
    assert!(candidates > 900);
    assert_eq!(core.not_headers(), candidates);
    assert!(core.take_reverse_starts().is_empty());
    // A real flow: a forged FIN and a huge id from its address are bad
    // datagrams, not its end or 10^17 lost.
    let p = Peer::new(40040, &client_cfg(false));
    for id in 1..=10 {
        feed(&mut core, &p, &p.datagram(id, T0), T0 + us(20));
    }
    assert!(feed(&mut core, &p, &p.datagram(-(1 << 50), T0), T0 + us(30)).is_none());
    feed(&mut core, &p, &p.datagram(1 << 59, T0), T0 + us(40));
    let ack = feed(&mut core, &p, &p.datagram(-11, T0), T0 + us(50)).expect("AckFIN");
    let r = super::server_report::parse_ack_fin(&ack).unwrap();
    assert_eq!((r.datagrams, r.lost), (11, 0));
}

#[test]
fn one_source_cannot_fill_the_flow_table_and_claimed_slowness_is_bounded() {
    let mut core = ServerCore::new(&server_cfg(None), 5001, Duration::from_secs(4));
    let cfg = client_cfg(false);
    // 1 bit/s claimed: one datagram every 1600 s.
    let mut p = Peer::new(1, &cfg);
    p.tmpl = Template::new(header_repr(&cfg, T0, BitRate(1)), Bytes(200))
        .unwrap()
        .bytes;
    for port in 1..=1000u16 {
        p.addr = SocketAddr::from(([127, 0, 0, 1], port));
        feed(&mut core, &p, &p.datagram(1, T0), T0);
    }
    // --max-streams (128 by default) counts flows, below the fixed 256.
    let per_source =
        super::server::MAX_FLOWS_PER_SOURCE.min(crate::limits::DEFAULT_MAX_STREAMS as usize);
    assert_eq!(per_source, 128);
    assert_eq!(core.active_flows(), per_source);
    // Another source still gets in.
    let q = Peer::new(2, &cfg);
    let q = Peer {
        addr: SocketAddr::from(([127, 0, 0, 2], 2)),
        ..q
    };
    feed(&mut core, &q, &q.datagram(1, T0), T0);
    assert_eq!(core.active_flows(), per_source + 1);
    // Every entry is gone after the bounded idle time, not days.
    core.on_timer(T0 + super::server::MAX_FLOW_IDLE);
    assert_eq!(core.active_flows(), 0);
}

/// A fake UDP server on loopback: `then` gets its socket.
fn fake_udp_server(then: impl FnOnce(std::net::UdpSocket) + Send + 'static) -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    std::thread::spawn(move || then(s));
    port
}

#[test]
fn an_impossible_ackfin_is_reported_as_such_and_fails_the_run() {
    let port = fake_udp_server(|s| {
        let mut b = [0u8; 2048];
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        while let Ok((n, from)) = s.recv_from(&mut b) {
            let id = super::datagram::parse_incoming(&b[..n]).unwrap().seqno;
            if id < 0 {
                // 16 zero bytes then 0xff everywhere: 16384 PBytes, -1 lost...
                let mut ack = vec![0u8; 16];
                ack.extend([0xffu8; 112]);
                let _ = s.send_to(&ack, from);
            }
        }
    });
    let mut c = client_cfg(false);
    c.port = port;
    c.amount = Amount::Time(Duration::from_millis(300));
    c.format = OutputFormat::Json;
    let out = super::run_client(&c).unwrap();
    assert_eq!(out.failures.len(), 1, "{:?}", out.failures);
    assert!(
        out.failures[0].1.contains("impossible"),
        "{:?}",
        out.failures
    );
    assert!(out.streams[&1].server_snapshot.is_none());
}

#[test]
fn one_garbage_datagram_neither_ends_a_reverse_test_nor_counts_as_loss() {
    let port = fake_udp_server(|s| {
        let mut b = [0u8; 2048];
        let (_, from) = s.recv_from(&mut b).unwrap(); // the client's header
        let mut d = vec![b'0'; 200];
        let send = |d: &mut Vec<u8>, id: i64| {
            super::datagram::stamp(d, id, bloatlab_os::clock::realtime_now());
            let _ = s.send_to(d, from);
        };
        for id in 1..=20 {
            send(&mut d, id);
            std::thread::sleep(Duration::from_millis(5));
            if id == 10 {
                // Forged: a FIN from nowhere and an absurd id (these
                // datagrams carry no SEQNO64B header: 32-bit ids).
                send(&mut d, -(1 << 30));
                send(&mut d, i64::from(i32::MAX));
            }
        }
        send(&mut d, -21);
    });
    let mut c = client_cfg(false);
    c.port = port;
    c.direction = crate::config::Direction::Reverse;
    c.format = OutputFormat::Json;
    let out = super::run_client(&c).unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let r = &out.streams[&1];
    let total = r.recv_total.as_ref().expect("a receive total");
    assert_eq!((total.datagrams, total.lost), (21, 0), "{total:?}");
    assert_eq!(r.bad_datagrams, 2);
}

#[test]
fn udp_requests_above_the_caps_create_nothing() {
    let scfg = ServerConfig {
        limits: crate::limits::ServerLimits {
            max_duration: Duration::from_secs(10),
            max_rate: Some(BitRate(5_000_000)),
            ..crate::limits::ServerLimits::default()
        },
        ..server_cfg(None)
    };
    let mut core = ServerCore::new(&scfg, 5001, Duration::from_secs(1));
    let mut cfg = client_cfg(false);
    cfg.amount = Amount::Time(Duration::from_secs(11));
    let p = Peer::new(40050, &cfg);
    assert!(feed(&mut core, &p, &p.datagram(1, T0), T0).is_none());
    cfg.amount = Amount::Time(Duration::from_secs(5));
    let mut fast = Peer::new(40051, &cfg);
    fast.tmpl = Template::new(header_repr(&cfg, T0, BitRate(6_000_000)), Bytes(200))
        .unwrap()
        .bytes;
    assert!(feed(&mut core, &fast, &fast.datagram(1, T0), T0).is_none());
    assert_eq!((core.active_flows(), core.refused()), (0, 2));
    // An iperf 2 style (unmarked) -R header above the unverified cap.
    let mut rev = client_cfg(false);
    rev.direction = crate::config::Direction::Reverse;
    let h = header_repr(&rev, T0, BitRate(20_000_000));
    let mut b = Template::new(h, Bytes(200)).unwrap().bytes;
    b[40..48].fill(0); // no BLAB marker: cannot do the cookie exchange
    stamp(&mut b, 1, T0);
    let q = Peer {
        addr: SocketAddr::from(([127, 0, 0, 1], 40052)),
        tmpl: b.clone(),
    };
    assert!(feed(&mut core, &q, &b, T0).is_none());
    assert!(core.take_reverse_starts().is_empty());
    assert_eq!(core.refused(), 3);
    // Within the caps the same request is served.
    let mut ok = Peer::new(40053, &cfg);
    ok.tmpl = Template::new(header_repr(&cfg, T0, BitRate(1_000_000)), Bytes(200))
        .unwrap()
        .bytes;
    feed(&mut core, &ok, &ok.datagram(1, T0), T0);
    assert_eq!(core.active_flows(), 1);
}

/// A bloatlab server that ends the flow at its deadline sends its AckFIN
/// while the client still sends: the client stops within a few watch gaps,
/// keeps that report and fails the stream naming the server's deadline.
#[test]
fn an_ackfin_before_our_fin_ends_the_stream_as_ended_by_the_server() {
    use bloatlab_wire::{AckFin, ServerFlags, ServerReportRepr, SplitDouble};
    let port = fake_udp_server(|s| {
        let mut b = [0u8; 2048];
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (mut got, mut first, mut ended) = (0i64, None, false);
        while let Ok((n, from)) = s.recv_from(&mut b) {
            let id = super::datagram::parse_incoming(&b[..n]).unwrap().seqno;
            got += i64::from(id > 0 && !ended);
            let since = *first.get_or_insert_with(std::time::Instant::now);
            // Its "deadline" is 300 ms into the flow: the AckFIN then, and
            // again for the FIN.
            let at_deadline = !ended && since.elapsed() >= Duration::from_millis(300);
            if at_deadline || id < 0 {
                ended = true;
                let report = ServerReportRepr {
                    flags: ServerFlags(0),
                    total_bytes: Bytes(got.unsigned_abs() * 200),
                    duration: Duration::from_millis(300),
                    lost: 0,
                    out_of_order: 0,
                    datagrams: got,
                    jitter: SplitDouble::default(),
                    ext: None,
                };
                let mut ack = vec![0u8; report.buffer_len()];
                report.emit(&mut AckFin::new_unchecked(&mut ack[..]));
                let _ = s.send_to(&ack, from);
            }
        }
    });
    let mut c = client_cfg(false);
    c.port = port;
    // 1 MB at 100 kbit/s would take 80 s.
    c.amount = Amount::Bytes(Bytes(1_000_000));
    c.rate = Some(BitRate(100_000));
    c.format = OutputFormat::Json;
    let started = std::time::Instant::now();
    let out = super::run_client(&c).unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "ran {took:?}");
    assert_eq!(out.failures.len(), 1, "{:?}", out.failures);
    assert!(
        out.failures[0].1.contains("ended the test at its deadline"),
        "{:?}",
        out.failures
    );
    let s = &out.streams[&1];
    assert!(s.server_snapshot.is_some(), "the early report is kept");
    assert!(s.no_ack_tries.is_none());
    // ~19 datagrams in 300 ms at 62.5/s, not 5000.
    assert!(s.sent_datagrams < 200, "sent {}", s.sent_datagrams);
}
