//! The send and receive loops against each other over loopback.

use super::recv::{self, RecvPlan};
use super::send::{self, SendPlan};
use super::{Event, Sink};
use crate::config::{Amount, StopToken};
use bloatlab_metrics::interval::Span;
use bloatlab_os::clock::realtime_now as wall_now;
use bloatlab_units::Bytes;
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

fn sink() -> (Sink, mpsc::Receiver<Event>) {
    mpsc::channel()
}

fn recv_plan(trip_times: bool) -> RecvPlan {
    RecvPlan {
        stream: 1,
        len: 128 * 1024,
        trip_times,
        rx_copy: false,
        interval: Some(Duration::from_millis(50)),
        deadline: Some(Instant::now() + Duration::from_secs(20)),
        already_read: Vec::new(),
        keep_intervals: true,
        print_intervals: true,
        idle_timeout: None,
        idle_follows_rtt: false,
        first_data_timeout: None,
        meter: None,
        min_progress: false,
        log: None,
        stop: StopToken::new(),
    }
}

/// A plain send of `amount` in writes of `len` bytes: stream 1, no trip-times, pacing,
/// TCP_INFO, intervals or deadlines. Tests override what they exercise.
fn send_plan(len: usize, amount: Amount) -> SendPlan {
    SendPlan {
        stream: 1,
        len,
        amount,
        trip_times: false,
        zerocopy: false,
        start_wall: wall_now(),
        near_congestion: None,
        rate: None,
        tcpinfo: false,
        interval: None,
        already_sent: Bytes(0),
        deadline: None,
        stall: None,
        watch_peer_close: false,
        meter: None,
        stop: StopToken::new(),
    }
}

#[test]
fn trip_times_bursts_are_deframed_counted_and_timed() {
    // Skipping the bodies' copy (the default) and copying every byte
    // (--rx-copy) find the same bursts; a short last burst (-n not a
    // multiple of -l) must not let a skipped body swallow its header.
    for rx_copy in [false, true] {
        for tail in [0u64, 5_000] {
            trip_times_case(rx_copy, tail);
        }
    }
}

fn trip_times_case(rx_copy: bool, tail: u64) {
    let (c, s) = pair();
    let (tx, _rx) = sink();
    let len = 64 * 1024;
    let bursts = 40u64 + u64::from(tail > 0);
    let amount = 40 * len as u64 + tail;
    let plan = SendPlan {
        trip_times: true,
        tcpinfo: true,
        ..send_plan(len, Amount::Bytes(Bytes(amount)))
    };
    let t0 = Instant::now();
    let tx2 = tx.clone();
    let sender = std::thread::spawn(move || {
        let out = send::run(&c, &plan, t0, &tx2).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        out
    });
    let rplan = RecvPlan {
        rx_copy,
        ..recv_plan(true)
    };
    let (mut acc, mut ticker, kept) = recv::run(&s, &rplan, t0, &tx).unwrap();
    let (sacc, _) = sender.join().unwrap();
    let end = t0.elapsed();
    let _ = ticker.partial(end, &mut acc);
    let total = acc.total(Span::from_zero(end));
    let sent = sacc.total(Span::from_zero(end));
    let case = format!("rx_copy {rx_copy}, tail {tail}");
    assert_eq!(total.bytes, Bytes(amount), "{case}");
    assert_eq!(sent.bytes, total.bytes, "{case}");
    let b = total.burst.expect("trip-times data");
    assert_eq!(b.latency.count(), bursts, "{case}");
    assert_eq!(b.latency.negative_count(), 0, "{case}");
    // Latencies are loopback-small: a body byte taken for a header would
    // give nonsense write times (hours off, or negative).
    assert!(
        b.latency.max().unwrap().as_nanos() < 5_000_000_000,
        "{case}"
    );
    assert!(sent.tcp_info.is_some(), "TCP_INFO sampled at the end");
    // Header + first body read count as one read: every read is within -l.
    assert!(total.reads.reads >= bursts, "{case}");
    assert!(kept.iter().all(|k| k.span.len() > Duration::ZERO));
}

#[test]
fn impossible_burst_size_stops_deframing_without_losing_bytes() {
    let (mut c, s) = pair();
    let (tx, _rx) = sink();
    let mut junk = vec![0xabu8; 92 + 1000];
    // burst_size (offset 48) = 5: smaller than the header itself.
    junk[48..52].copy_from_slice(&5u32.to_be_bytes());
    c.write_all(&junk).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let t0 = Instant::now();
    let (acc, _, _) = recv::run(&s, &recv_plan(true), t0, &tx).unwrap();
    let total = acc.total(Span::from_zero(t0.elapsed()));
    // Past the broken header the rest is skipped unseen, and still counted.
    assert_eq!(total.bytes, Bytes(junk.len() as u64));
    assert_eq!(total.burst.map_or(0, |b| b.latency.count()), 0);
}

#[test]
fn plain_receiver_fills_reads_dist_and_interval_lines() {
    let (mut c, s) = pair();
    let (tx, rx) = sink();
    let writer = std::thread::spawn(move || {
        for _ in 0..3 {
            c.write_all(&[7u8; 1000]).unwrap();
            std::thread::sleep(Duration::from_millis(60));
        }
    });
    let t0 = Instant::now();
    let (acc, _, _) = recv::run(&s, &recv_plan(false), t0, &tx).unwrap();
    writer.join().unwrap();
    let total = acc.total(Span::from_zero(t0.elapsed()));
    assert_eq!(total.bytes, Bytes(3000));
    assert_eq!(total.reads.bins[0], total.reads.reads);
    drop(tx);
    let intervals = rx
        .iter()
        .filter(|e| matches!(e, Event::RecvInterval { .. }))
        .count();
    assert!(intervals >= 2, "interval reports while idle: {intervals}");
}

#[test]
fn rate_cap_paces_tcp_writes() {
    let (c, s) = pair();
    let (tx, _rx) = sink();
    let reader = std::thread::spawn(move || {
        let (tx, _rx) = sink();
        recv::run(&s, &recv_plan(false), Instant::now(), &tx).unwrap()
    });
    let plan = SendPlan {
        rate: Some(bloatlab_units::BitRate(4_000_000)),
        ..send_plan(10_000, Amount::Bytes(Bytes(100_000)))
    };
    let t0 = Instant::now();
    send::run(&c, &plan, t0, &tx).unwrap();
    // 800 kbit at 4 Mbit/s: the last write is due at 0.2 s.
    let took = t0.elapsed();
    c.shutdown(Shutdown::Write).unwrap();
    reader.join().unwrap();
    assert!(took >= Duration::from_millis(195), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// The stop token in the plan (no process-wide state): raising it ends a 30 s send at once,
/// as `Stopped`, and the receiver sees the connection end.
#[test]
fn a_raised_stop_token_ends_the_send_loop() {
    let (c, s) = pair();
    let (tx, _rx) = sink();
    let reader = std::thread::spawn(move || {
        let (tx, _rx) = sink();
        recv::run(&s, &recv_plan(false), Instant::now(), &tx).unwrap()
    });
    let stop = StopToken::new();
    let plan = SendPlan {
        rate: Some(bloatlab_units::BitRate(8_000_000)),
        stop: stop.clone(),
        ..send_plan(10_000, Amount::Time(Duration::from_secs(30)))
    };
    let raiser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.stop();
    });
    let t0 = Instant::now();
    let (_, _, why) = send::run_with_end(&c, &plan, t0, &tx).unwrap();
    let took = t0.elapsed();
    raiser.join().unwrap();
    assert_eq!(why, send::SendEnd::Stopped);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(c);
    reader.join().unwrap();
}

/// The stall rule as the send loop applies it, on loopback with a peer that never reads: a
/// fixed 300 ms limit ends the send after ~300 ms; a path-scaled one with the same floor
/// waits 3 x RFC 6298's RTO (its 1 s minimum on loopback: 3 s) and says so in its stall.
#[test]
fn a_peer_that_reads_nothing_is_a_stall_after_the_rules_limit() {
    let run = |rule: crate::stall::StallRule| {
        let (c, s) = pair();
        let (tx, _rx) = sink();
        let plan = SendPlan {
            stall: Some(rule),
            ..send_plan(64 * 1024, Amount::Time(Duration::from_secs(30)))
        };
        let t0 = Instant::now();
        let (_, _, why) = send::run_with_end(&c, &plan, t0, &tx).unwrap();
        drop(s);
        (why, t0.elapsed())
    };
    let floor = Duration::from_millis(300);
    let (why, took) = run(crate::stall::StallRule::fixed(floor));
    let send::SendEnd::Stalled(st) = why else {
        panic!("{why:?}")
    };
    assert_eq!((st.limit, st.rtt), (floor, None));
    assert!(took < Duration::from_secs(2), "{took:?}");
    let (why, took) = run(crate::stall::StallRule::path_scaled(floor));
    let send::SendEnd::Stalled(st) = why else {
        panic!("{why:?}")
    };
    assert_eq!(st.limit, Duration::from_secs(3), "{st:?}");
    assert!(
        st.rtt.is_some(),
        "the limit followed the flow's RTT: {st:?}"
    );
    assert!(st.silent >= Duration::from_secs(3), "{st:?}");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

/// The receiver's idle rule, on loopback with a sender that goes silent after 128 KiB: a
/// fixed 300 ms limit ends the receive after ~300 ms of silence; one that follows the
/// receiver's RTT estimate waits 3 x RFC 6298's RTO (its 1 s minimum on loopback: 3 s).
#[test]
fn a_silent_sender_is_idle_after_the_receivers_limit() {
    let run = |follow: bool| {
        let (mut c, s) = pair();
        let (tx, _rx) = sink();
        c.write_all(&vec![7u8; 128 * 1024]).unwrap();
        let plan = RecvPlan {
            idle_timeout: Some(Duration::from_millis(300)),
            idle_follows_rtt: follow,
            deadline: Some(Instant::now() + Duration::from_secs(20)),
            ..recv_plan(false)
        };
        let t0 = Instant::now();
        let (_, _, _, why) = recv::run_with_end(&s, &plan, t0, &tx).unwrap();
        drop(c);
        (why, t0.elapsed())
    };
    let (why, took) = run(false);
    let recv::RecvEnd::Idle(st) = why else {
        panic!("{why:?}")
    };
    assert_eq!((st.limit, st.rtt), (Duration::from_millis(300), None));
    assert!(took < Duration::from_secs(2), "{took:?}");
    let (why, took) = run(true);
    let recv::RecvEnd::Idle(st) = why else {
        panic!("{why:?}")
    };
    assert_eq!(st.limit, Duration::from_secs(3), "{st:?}");
    assert!(
        st.rtt.is_some(),
        "the limit followed the receiver's RTT: {st:?}"
    );
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

/// Everything a send of `plan` puts on the wire.
fn bytes_on_the_wire(plan: SendPlan) -> Vec<u8> {
    use std::io::Read;
    let (c, mut s) = pair();
    let (tx, _rx) = sink();
    let sender = std::thread::spawn(move || {
        let out = send::run(&c, &plan, Instant::now(), &tx).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        out
    });
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    sender.join().unwrap();
    got
}

#[test]
fn zerocopy_sends_the_same_bytes_as_copying_writes() {
    // Writes longer than the buffer (issued in pieces from it) and a short
    // last write: sendfile must take every range from the right offset.
    for len in [64 * 1024, 300 * 1024] {
        let amount = Amount::Bytes(Bytes(7 * len as u64 + 5_000));
        let copied = bytes_on_the_wire(send_plan(len, amount));
        let zc = bytes_on_the_wire(SendPlan {
            zerocopy: true,
            ..send_plan(len, amount)
        });
        assert_eq!(copied.len(), 7 * len + 5_000);
        assert!(zc == copied, "len {len}: zero-copy bytes differ");
    }
}
