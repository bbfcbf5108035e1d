//! The session core on a virtual clock: a simulated path with asymmetric delays, a
//! responder clock offset and drift, and scripted losses and duplicates.

use super::*;
use crate::clock::ClockMethod;
use crate::report::LossDirection;

const MS: Duration = Duration::from_millis(1);
const DOMAIN: u64 = 0xfeed;

/// The simulated world: responder clock = client clock + offset + drift·t.
struct Path {
    up: Duration,
    down: Duration,
    offset_ns: i64,
    drift_ppm: f64,
    drop_up: fn(u64) -> bool,
    drop_down: fn(u64) -> bool,
    dup_down: fn(u64) -> bool,
    /// Extra down delay (to make replies late).
    extra_down: fn(u64) -> Duration,
    server_domain: u64,
}

impl Path {
    fn new(up_ms: u64, down_ms: u64) -> Path {
        Path {
            up: Duration::from_millis(up_ms),
            down: Duration::from_millis(down_ms),
            offset_ns: 0,
            drift_ppm: 0.0,
            drop_up: |_| false,
            drop_down: |_| false,
            dup_down: |_| false,
            extra_down: |_| Duration::ZERO,
            server_domain: 0,
        }
    }
}

const START: Duration = Duration::from_secs(1_700_000_000);

/// Runs a session to completion on a virtual clock; returns the session before `finish`.
fn run(config: Config, path: &Path) -> Session {
    let mut s = Session::new(config, START);
    // (arrival time at client, reply) in flight, plus responder state.
    let mut in_flight: Vec<(Duration, Reply)> = Vec::new();
    let mut rx_count = 0u64;
    let mut seen_set: Vec<u64> = Vec::new();
    let to_server = |t: Duration| {
        // integer arithmetic: f64 cannot hold ns since 1970 exactly
        let el = (t - START).as_secs_f64();
        let drift = (path.drift_ppm * 1e-6 * el * 1e9).round() as i128;
        Duration::from_nanos((t.as_nanos() as i128 + path.offset_ns as i128 + drift) as u64)
    };
    let mut now = START;
    for _ in 0..1_000_000 {
        while let Some(t) = s.poll_transmit(now) {
            if (path.drop_up)(t.seq) {
                continue;
            }
            let arrive = t.send_time + path.up;
            rx_count += 1;
            seen_set.push(t.seq);
            let seen = (0..64u64).fold(0u64, |acc, bit| match t.seq.checked_sub(1 + bit) {
                Some(q) if seen_set.contains(&q) => acc | (1 << bit),
                _ => acc,
            });
            let leave = arrive + Duration::from_micros(10);
            let reply = Reply {
                session: Some(config.session_id),
                seq: t.seq,
                client_send: t.send_time,
                server_rx: Some(to_server(arrive)),
                server_tx: Some(to_server(leave)),
                rx_count: Some(rx_count),
                seen: Some(seen),
                clock_domain: path.server_domain,
            };
            if (path.drop_down)(t.seq) {
                continue;
            }
            let back = leave + path.down + (path.extra_down)(t.seq);
            in_flight.push((back, reply));
            if (path.dup_down)(t.seq) {
                in_flight.push((back + Duration::from_micros(100), reply));
            }
        }
        in_flight.sort_by_key(|(t, _)| *t);
        let next_arrival = in_flight.first().map(|(t, _)| *t);
        let next = match (s.poll_timeout(), next_arrival) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => break,
            },
        };
        now = now.max(next);
        while in_flight.first().is_some_and(|(t, _)| *t <= now) {
            let (t, r) = in_flight.remove(0);
            s.on_reply(t, &r);
        }
        s.handle_timeout(now);
        if s.is_done() && in_flight.is_empty() {
            break;
        }
    }
    s
}

fn config(limit: Limit) -> Config {
    Config {
        local_clock_domain: DOMAIN,
        ..Config::new(limit, 99)
    }
}

#[test]
fn isochronous_count_run_with_shared_clock_gives_exact_one_way_delays() {
    let mut path = Path::new(30, 10);
    path.server_domain = DOMAIN;
    let s = run(config(Limit::Count(100)), &path);
    let r = s.finish();
    assert!(r.clocks_shared());
    assert_eq!(r.probes.len(), 100);
    for (i, p) in r.probes.iter().enumerate() {
        assert_eq!(p.sent, i as u32 * 10 * MS, "isochronous slot {i}");
        // The responder's 10 us turnaround is not the network's.
        assert_eq!(p.rtt, Some(40 * MS));
        assert_eq!(p.up.unwrap().as_nanos(), 30_000_000);
        assert_eq!(p.down.unwrap().as_nanos(), 10_000_000);
    }
    let sum = r.summary();
    assert_eq!((sum.sent, sum.received, sum.lost()), (100, 100, 0));
    assert_eq!(sum.up.unwrap().median.as_nanos(), 30_000_000);
    assert_eq!(sum.ipdv_rtt.unwrap().max_abs, Duration::ZERO);
}

#[test]
fn duration_limit_counts_slots() {
    let s = run(
        config(Limit::Duration(Duration::from_secs(1))),
        &Path::new(1, 1),
    );
    assert_eq!(s.sent(), 100);
}

#[test]
fn offset_and_drift_are_recovered_on_a_symmetric_path() {
    let mut path = Path::new(20, 20);
    path.offset_ns = 123_456_789_000;
    path.drift_ppm = -30.0;
    let r = run(config(Limit::Count(2000)), &path).finish();
    assert_eq!(r.clock.method, ClockMethod::Estimated);
    assert!(
        (r.clock.drift_ppm + 30.0).abs() < 0.5,
        "{}",
        r.clock.drift_ppm
    );
    let sum = r.summary();
    // True one-way delays are 20 ms each way; the estimate must give them within 10 us.
    for stats in [sum.up.unwrap(), sum.down.unwrap()] {
        assert!(
            (stats.min.as_nanos() - 20_000_000).abs() < 10_000,
            "{stats:?}"
        );
        assert!(
            (stats.max.as_nanos() - 20_000_000).abs() < 10_000,
            "{stats:?}"
        );
    }
}

#[test]
fn asymmetric_path_without_shared_clock_splits_rtt_evenly() {
    // The documented limit: 30/10 ms looks like 20/20 ms without an outside clock.
    let r = run(config(Limit::Count(200)), &Path::new(30, 10)).finish();
    let sum = r.summary();
    assert_eq!(r.clock.method, ClockMethod::Estimated);
    assert!((sum.up.unwrap().median.as_millis_f64() - 20.0).abs() < 0.01);
    assert!((sum.down.unwrap().median.as_millis_f64() - 20.0).abs() < 0.01);
}

#[test]
fn loss_is_attributed_up_and_down() {
    let mut path = Path::new(5, 5);
    path.drop_up = |seq| seq % 10 == 3; // 10 up losses in 100
    path.drop_down = |seq| seq % 25 == 7; // 4 down losses (7, 32, 57, 82)
    let r = run(config(Limit::Count(100)), &path).finish();
    let sum = r.summary();
    assert_eq!(sum.lost_up, 10);
    assert_eq!(sum.lost_down, 4);
    assert_eq!(sum.lost_unknown, 0);
    assert_eq!(sum.received, 86);
    assert_eq!(r.probes[3].lost, Some(LossDirection::Up));
    assert_eq!(r.probes[7].lost, Some(LossDirection::Down));
    assert_eq!(r.server_rx_count, 90);
}

#[test]
fn tail_loss_has_unknown_direction() {
    let mut path = Path::new(5, 5);
    path.drop_up = |seq| seq == 99;
    let r = run(config(Limit::Count(100)), &path).finish();
    assert_eq!(r.probes[99].lost, Some(LossDirection::Unknown));
    assert_eq!(r.summary().lost(), 1);
}

#[test]
fn duplicates_are_counted_once_per_extra_copy() {
    let mut path = Path::new(5, 5);
    path.dup_down = |seq| seq.is_multiple_of(20);
    let r = run(config(Limit::Count(100)), &path).finish();
    let sum = r.summary();
    assert_eq!(sum.duplicates, 5);
    assert_eq!(sum.received, 100);
    assert_eq!(r.probes[20].duplicates, 1);
}

#[test]
fn reply_after_timeout_is_late_and_lost() {
    let mut path = Path::new(5, 5);
    path.extra_down = |seq| {
        if seq == 10 {
            Duration::from_secs(4)
        } else {
            Duration::ZERO
        }
    };
    let mut c = config(Limit::Count(50));
    c.timeout = Duration::from_secs(3);
    let r = run(c, &path).finish();
    let sum = r.summary();
    assert_eq!(sum.late, 1);
    assert_eq!(sum.received, 49);
    assert!(r.probes[10].late);
    // the responder saw it, so it was "lost" downstream
    assert_eq!(r.probes[10].lost, Some(LossDirection::Down));
    assert!(r.probes[10].rtt.unwrap() > Duration::from_secs(4));
    // a late RTT stays out of the statistics
    assert!(sum.rtt.unwrap().max.as_millis_f64() < 11.0);
}

#[test]
fn timeout_grows_with_the_largest_rtt() {
    let mut s = Session::new(config(Limit::Count(1)), START);
    let t = s.poll_transmit(START).unwrap();
    let reply = Reply {
        session: Some(99),
        seq: t.seq,
        client_send: t.send_time,
        server_rx: None,
        server_tx: None,
        rx_count: None,
        seen: None,
        clock_domain: 0,
    };
    s.on_reply(START + Duration::from_secs(2), &reply);
    assert_eq!(s.timeout(), Duration::from_secs(6));
}

#[test]
fn late_wakeup_skips_slots_instead_of_bursting() {
    let mut s = Session::new(config(Limit::Count(10)), START);
    assert_eq!(s.poll_transmit(START).map(|t| t.seq), Some(0));
    assert_eq!(s.poll_transmit(START), None);
    assert_eq!(s.poll_timeout(), Some(START + 10 * MS));
    // wake up 35 ms late: slots at 10, 20, 30, 40 are due; one probe for 40, three skipped
    let late = START + 45 * MS;
    assert_eq!(s.poll_transmit(late).map(|t| t.seq), Some(1));
    assert_eq!(s.poll_transmit(late), None);
    assert_eq!(s.poll_timeout(), Some(START + 50 * MS));
    let r = s.finish();
    assert_eq!(r.skipped_slots, 3);
}

#[test]
fn foreign_replies_are_ignored() {
    let mut s = Session::new(config(Limit::Count(2)), START);
    let t = s.poll_transmit(START).unwrap();
    let good = Reply {
        session: Some(99),
        seq: t.seq,
        client_send: t.send_time,
        server_rx: None,
        server_tx: None,
        rx_count: None,
        seen: None,
        clock_domain: 0,
    };
    let now = START + MS;
    for bad in [
        Reply {
            session: Some(98),
            ..good
        },
        Reply { seq: 5, ..good },
        Reply {
            seq: u64::MAX,
            ..good
        },
        Reply {
            client_send: START + MS,
            ..good
        },
    ] {
        assert_eq!(s.on_reply(now, &bad), ReplyEvent::Ignored);
    }
    assert_eq!(
        s.on_reply(now, &good),
        ReplyEvent::Answered { seq: 0, rtt: MS }
    );
    assert_eq!(s.on_reply(now, &good), ReplyEvent::Duplicate { seq: 0 });
}

#[test]
fn count_zero_is_done_immediately() {
    let s = Session::new(config(Limit::Count(0)), START);
    assert!(s.is_done());
    assert_eq!(s.poll_timeout(), None);
}

/// The responder's turnaround (kernel receive stamp to send) is taken out of the RTT, on
/// the responder's own clock, so an offset between the clocks does not enter; without the
/// responder's stamps (ICMP) or with a turnaround that cannot be (negative, or not shorter
/// than the round trip: a stepped clock) the raw round trip stays.
#[test]
fn the_responder_turnaround_is_not_part_of_the_rtt() {
    let us = Duration::from_micros;
    let t1 = START;
    let t4 = START + 2 * MS + us(60);
    // Responder clock 5 s ahead; it held the request 60 us.
    let rx = START + Duration::from_secs(5) + MS;
    assert_eq!(network_rtt(t1, t4, Some(rx), Some(rx + us(60))), 2 * MS);
    assert_eq!(network_rtt(t1, t4, None, None), 2 * MS + us(60));
    assert_eq!(network_rtt(t1, t4, Some(rx), None), 2 * MS + us(60));
    assert_eq!(
        network_rtt(t1, t4, Some(rx), Some(rx - us(1))),
        2 * MS + us(60),
        "negative turnaround"
    );
    assert_eq!(
        network_rtt(t1, t4, Some(rx), Some(rx + 3 * MS)),
        2 * MS + us(60),
        "turnaround longer than the round trip"
    );
    // The session reports it so, per reply and in the results; the timeout still grows
    // with when replies arrive (turnaround included).
    let mut s = Session::new(config(Limit::Count(1)), START);
    let t = s.poll_transmit(START).unwrap();
    let reply = Reply {
        session: Some(99),
        seq: t.seq,
        client_send: t.send_time,
        server_rx: Some(rx),
        server_tx: Some(rx + us(60)),
        rx_count: Some(1),
        seen: Some(0),
        clock_domain: 0,
    };
    assert_eq!(
        s.on_reply(t4, &reply),
        ReplyEvent::Answered {
            seq: 0,
            rtt: 2 * MS
        }
    );
    assert_eq!(s.finish().probes[0].rtt, Some(2 * MS));
}
