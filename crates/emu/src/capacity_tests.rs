//! Schedules and traces on a virtual clock: parsing and its errors, looping, the serializer
//! following the capacity per 1-s window, and the wait for an opportunity counted as sojourn.

use super::*;
use crate::tracegen;
use crate::{Link, LinkConfig, TraceEvent, Verdict};
use std::sync::Mutex;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn ipv4(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p
}

fn trace(text: &str) -> Capacity {
    Capacity::Trace(Arc::new(CapacityTrace::parse("t.trace", text).unwrap()))
}

fn link_with(capacity: Capacity) -> Link {
    let cfg = LinkConfig {
        rate: Some(capacity.nominal()),
        capacity: Some(capacity),
        qdisc: crate::QdiscConfig::defaults(crate::Qdisc::Fifo),
        ..LinkConfig::default()
    };
    Link::new(&cfg, 1).unwrap()
}

#[test]
fn the_issue_schedule_parses_and_loops() {
    let s = parse_schedule("rate", "0s/20mbit,10s/5mbit,15s/30mbit", parse_rate).unwrap();
    // The last step lasts as long as the one before it: 5 s, so the loop is 20 s.
    assert_eq!(s.period(), Some(Duration::from_secs(20)));
    for (t, want) in [
        (0, 20),
        (9_999, 20),
        (10_000, 5),
        (15_000, 30),
        (19_999, 30),
        (20_000, 20),
        (35_500, 30),
    ] {
        assert_eq!(s.at(MS(t)), BitRate(want * 1_000_000), "at {t} ms");
    }
    let s = parse_schedule("rate", "0s/20mbit, 10s/5mbit, 12s/loop", parse_rate).unwrap();
    assert_eq!(s.period(), Some(Duration::from_secs(12)));
    assert_eq!(s.at(MS(12_500)), BitRate(20_000_000));
    let one = parse_schedule("rate", "0s/7mbit", parse_rate).unwrap();
    assert_eq!(
        (one.period(), one.at(MS(1_000_000))),
        (None, BitRate(7_000_000))
    );
}

#[test]
fn bad_schedules_name_the_step_and_the_problem() {
    for (text, want) in [
        (
            "0s/20mbit,5s/0mbit",
            r#"step 2 ("5s/0mbit"): "0mbit" must be greater than zero"#,
        ),
        (
            "0s/20mbit,5s/-5mbit",
            r#"step 2 ("5s/-5mbit"): "-5mbit" must not be negative"#,
        ),
        ("1s/20mbit", "the first step must start at 0s"),
        (
            "0s/20mbit,5s/5mbit,5s/1mbit",
            "offsets must increase: 5s is not after 5s",
        ),
        ("0s/20mbit,5s", "write OFFSET/VALUE"),
        ("0s/20mbit,5s/loop,6s/1mbit", "nothing may follow"),
        ("0s/20mbit,5s/fast", r#""fast" is not a number"#),
        ("0s/20mbit,5s/20parsecs", "unknown unit"),
        ("0s/loop", "a step before `loop`"),
    ] {
        let e = parse_schedule("rate", text, parse_rate).unwrap_err();
        let m = e.to_string();
        assert!(m.contains(want), "{text}: {m}");
        assert!(m.starts_with(&format!("rate: \"schedule:{text}\"")), "{m}");
    }
    // Through the config, a schedule error is attributed to the key.
    let mut c = LinkConfig::default();
    let e = c
        .set("rate", Some("schedule:0s/1mbit,1s/0bit"))
        .unwrap_err();
    assert_eq!(e.field, "rate");
    let e = c.set("delay", Some("schedule:0s/1ms,1s/-1ms")).unwrap_err();
    assert_eq!(e.field, "delay");
    assert!(e.to_string().contains("must not be negative"), "{e}");
}

#[test]
fn bad_traces_name_the_file_and_line() {
    let e = CapacityTrace::parse("cell.trace", "# just a comment\n\n").unwrap_err();
    assert_eq!(e.line, None);
    assert!(e.to_string().starts_with("cell.trace: empty trace"), "{e}");
    let e = CapacityTrace::parse("cell.trace", "1\n2\n# c\n7\n5\n9\n").unwrap_err();
    assert_eq!(e.line, Some(5));
    assert_eq!(
        e.to_string(),
        "cell.trace:5: 5 ms is earlier than line 4's 7 ms: a trace's times must not decrease"
    );
    let e = CapacityTrace::parse("cell.trace", "1\n2.5\n").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cell.trace:2: \"2.5\" is not a time"),
        "{e}"
    );
    let e = CapacityTrace::parse("cell.trace", "0\n0\n").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cell.trace:2: the last time is 0 ms"),
        "{e}"
    );
    // Through the config: the file is read, and a missing one is named.
    let mut c = LinkConfig::default();
    let e = c
        .set("rate", Some("trace:/nonexistent/h23r.trace"))
        .unwrap_err();
    assert_eq!(e.field, "rate");
    assert!(e.to_string().contains("/nonexistent/h23r.trace: "), "{e}");
    let dir = std::env::temp_dir().join(format!("h23r-cap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.trace");
    std::fs::write(&f, "3\n2\n").unwrap();
    let e = c
        .set("rate", Some(format!("trace:{}", f.display()).as_str()))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("{}:2: 2 ms is earlier", f.display())),
        "{e}"
    );
    std::fs::write(&f, "1\n1\n2\n").unwrap();
    c.set("rate", Some(format!("trace:{}", f.display()).as_str()))
        .unwrap();
    // 3 packets per 2 ms = 18 Mbit/s nominal; 2 in the busiest ms = 24 Mbit/s peak.
    assert_eq!(c.rate, Some(BitRate(18_000_000)));
    assert_eq!(c.capacity.as_ref().unwrap().max(), BitRate(24_000_000));
    std::fs::remove_dir_all(&dir).unwrap();
    // A device that never ends is refused, not read into memory.
    let e = CapacityTrace::load("/dev/zero").unwrap_err();
    assert_eq!(e.to_string(), "/dev/zero: larger than 512 MiB");
}

#[test]
fn schedules_integrate_the_rate_across_a_change() {
    let s = parse_schedule("rate", "0s/8mbit,1s/4mbit", parse_rate).unwrap();
    // 12 000 bits from 999 ms: 1 ms at 8 Mbit/s (8000 bits) then 1 ms at 4 Mbit/s.
    assert_eq!(s.finish(MS(999), 12_000), MS(1001));
    // Across a whole loop (2 s): 8 + 4 Mbit per loop.
    assert_eq!(s.finish(Duration::ZERO, 24_000_000), MS(4000));
}

/// One opportunity per line, the file looping with the period of its last line; an idle
/// link loses its opportunities.
#[test]
fn a_trace_loops_and_an_idle_link_loses_its_opportunities() {
    let mut l = link_with(trace("5\n10\n"));
    for _ in 0..4 {
        l.enqueue(Duration::ZERO, ipv4(1500));
    }
    let mut out = Vec::new();
    while let Some(t) = l.next_event() {
        if let Some((at, _)) = l.dequeue_timed(t) {
            out.push(at);
        }
    }
    assert_eq!(out, [MS(5), MS(10), MS(15), MS(20)]);
    // Idle from 20 ms to 1000.5 ms: the next opportunity is 1005 ms, in loop 100.
    l.enqueue(Duration::from_micros(1_000_500), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(1005)));
    assert!(l.dequeue(MS(1004)).is_none());
    assert!(l.dequeue(MS(1005)).is_some());
    assert_eq!(l.counters().conservation_gap(), (0, 0));
}

/// An opportunity is 1500 bytes of credit: three 500-byte packets leave at one opportunity;
/// a 1600-byte packet uses what one left and the next.
#[test]
fn opportunities_are_byte_credit() {
    let mut l = link_with(trace("1\n2\n3\n4\n"));
    for len in [500, 500, 500, 1400, 1600] {
        l.enqueue(Duration::ZERO, ipv4(len));
    }
    let mut out = Vec::new();
    while let Some(t) = l.next_event() {
        while let Some((at, p)) = l.dequeue_timed(t) {
            out.push((at, p.len()));
        }
    }
    assert_eq!(
        out,
        [
            (MS(1), 500),
            (MS(1), 500),
            (MS(1), 500),
            (MS(2), 1400),
            // The 100 bytes left of opportunity 2, then all of 3.
            (MS(3), 1600),
        ]
    );
}

/// The wait for an opportunity is queueing: the packet stays in the qdisc until its
/// opportunity, so its sojourn (and the stage's statistics) count the wait.
#[test]
fn waiting_for_an_opportunity_is_sojourn() {
    let mut l = link_with(trace("10\n20\n"));
    // (time, sojourn) of each departure.
    type Sent = Vec<(Duration, Option<Duration>)>;
    let seen: Arc<Mutex<Sent>> = Arc::default();
    let log = seen.clone();
    l.set_trace(Some(Box::new(move |e: &TraceEvent| {
        if e.verdict == Verdict::Sent {
            log.lock().unwrap().push((e.time, e.sojourn));
        }
    })));
    l.enqueue(MS(3), ipv4(1500));
    l.enqueue(MS(4), ipv4(1500));
    assert_eq!(l.counters().backlog.packets, 2, "both wait in the qdisc");
    while let Some(t) = l.next_event() {
        while l.dequeue(t).is_some() {}
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [(MS(10), Some(MS(7))), (MS(20), Some(MS(16)))]
    );
    let s = &l.counters().sojourn;
    assert_eq!(s.count(), 2);
    assert!(s.max().unwrap() >= MS(15), "{:?}", s.max());
}

/// Delivered bytes per 1-s window of a saturated link, from `from` to `to` seconds.
fn delivered_per_second(l: &mut Link, secs: u64) -> Vec<f64> {
    let mut per = vec![0u64; secs as usize];
    let gap = Duration::from_micros(400); // 30 Mbit/s of 1500-byte packets: above every rate
    let mut now = Duration::ZERO;
    let end = Duration::from_secs(secs);
    while now < end {
        l.enqueue(now, ipv4(1500));
        now += gap;
        while let Some((at, p)) = l.dequeue_timed(now) {
            let w = at.as_secs() as usize;
            if w < per.len() {
                per[w] += p.len() as u64 * 8;
            }
        }
    }
    per.into_iter().map(|b| b as f64).collect()
}

/// The issue's check on a virtual clock: a trace alternating 20 and 5 Mbit/s every 5 s, a
/// sender above both; every 1-s window delivers within 3 % of the trace's capacity there.
#[test]
fn a_saturated_link_follows_a_20_5_trace_within_3_percent_per_second() {
    let text = tracegen::render(
        &tracegen::step(
            BitRate(20_000_000),
            BitRate(5_000_000),
            Duration::from_secs(5),
        ),
        &[],
    );
    let tr = CapacityTrace::parse("step.trace", &text).unwrap();
    let want = tr.rate_per_window(Duration::ZERO, Duration::from_secs(1), 30);
    let mut l = link_with(Capacity::Trace(Arc::new(tr)));
    let got = delivered_per_second(&mut l, 30);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let nominal = if (i / 5).is_multiple_of(2) { 20e6 } else { 5e6 };
        assert!(
            (w - nominal).abs() / nominal < 0.01,
            "trace window {i}: {w}"
        );
        assert!(
            (g - w).abs() / w <= 0.03,
            "window {i}: delivered {g} vs trace {w}"
        );
    }
    let c = l.counters();
    assert!(
        c.dropped.overflow.packets > 0,
        "the sender saturated the link"
    );
    assert_eq!(c.conservation_gap(), (0, 0));
}

#[test]
fn a_saturated_link_follows_a_schedule_within_3_percent_per_second() {
    let s = parse_schedule("rate", "0s/20mbit,5s/5mbit", parse_rate).unwrap();
    let mut l = link_with(Capacity::Schedule(Arc::new(s)));
    let got = delivered_per_second(&mut l, 30);
    for (i, g) in got.iter().enumerate() {
        let w = if (i / 5).is_multiple_of(2) { 20e6 } else { 5e6 };
        assert!(
            (g - w).abs() / w <= 0.03,
            "window {i}: delivered {g} vs {w}"
        );
    }
    // The link shows the step in force.
    let s = parse_schedule("rate", "0s/20mbit,5s/5mbit", parse_rate).unwrap();
    let mut l = link_with(Capacity::Schedule(Arc::new(s)));
    l.enqueue(MS(6000), ipv4(1500));
    assert_eq!(l.rate(), Some(BitRate(5_000_000)));
}

/// A delay schedule sets the delay of each packet as it leaves the serializer.
#[test]
fn a_delay_schedule_applies_per_packet_and_loops() {
    let mut c = LinkConfig::default();
    c.set("delay", Some("schedule:0s/10ms,1s/50ms")).unwrap();
    assert_eq!(c.delay, MS(10));
    assert_eq!(
        crate::config::format_delays(c.delay_schedule.as_ref().unwrap()),
        "schedule:0s/10ms,1s/50ms,2s/loop"
    );
    let mut l = Link::new(&c, 1).unwrap();
    let mut out = Vec::new();
    for t in [0, 1_500, 2_200] {
        l.enqueue(MS(t), ipv4(100));
        let due = l.next_event().unwrap();
        out.push(due - MS(t));
        assert!(l.dequeue(due).is_some());
    }
    assert_eq!(out, [MS(10), MS(50), MS(10)]);
    // Live: a fixed delay replaces the schedule; a new schedule starts at `now`.
    l.set_delay_schedule(MS(3000), MS(5), None);
    l.enqueue(MS(3000), ipv4(100));
    assert_eq!(l.next_event(), Some(MS(3005)));
    let s = parse_schedule("delay", "0s/1ms,100ms/2ms", parse_time).unwrap();
    l.set_delay_schedule(MS(3050), Duration::ZERO, Some(Arc::new(s)));
    while l.dequeue(MS(3050)).is_some() {}
    l.enqueue(MS(3160), ipv4(100)); // 110 ms into the new schedule: 2 ms
    assert_eq!(l.next_event(), Some(MS(3162)));
}

/// A trace installed while the link runs starts from its own time zero then.
#[test]
fn a_live_trace_starts_at_the_change() {
    let mut l = link_with(Capacity::Schedule(Arc::new(
        parse_schedule("rate", "0s/12mbit", parse_rate).unwrap(),
    )));
    l.set_capacity(MS(100), None, Some(&trace("5\n10\n")));
    l.enqueue(MS(100), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(105)));
    assert!(l.dequeue(MS(105)).is_some());
    // And a fixed rate replaces it.
    l.set_rate(MS(200), Some(BitRate(12_000_000)));
    l.enqueue(MS(200), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(201)));
}

/// The fixed-rate path (`Link::plain`) is left and taken again as schedules, delay plans
/// and replaced qdiscs come and go: a fixed link given a trace follows it, a link given a
/// delay schedule delays by it, a replaced qdisc's packets go first, and each returns to
/// the fixed rate and delay when the change is undone.
#[test]
fn the_fixed_rate_path_follows_every_change_and_comes_back() {
    let cfg = LinkConfig {
        rate: Some(BitRate(12_000_000)),
        qdisc: crate::QdiscConfig::defaults(crate::Qdisc::Fifo),
        ..LinkConfig::default()
    };
    let mut l = Link::new(&cfg, 1).unwrap();
    // Fixed: 1500 B at 12 Mbit/s = 1 ms.
    l.enqueue(MS(0), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(1)));
    assert!(l.dequeue(MS(1)).is_some());
    // A trace: opportunities 9 and 10 ms after the change (its mean rate would send the
    // first at 15 ms).
    l.set_capacity(MS(10), None, Some(&trace("9\n10\n")));
    l.enqueue(MS(10), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(19)));
    assert!(
        l.dequeue(MS(18)).is_none(),
        "delivered before the trace's opportunity"
    );
    assert!(l.dequeue(MS(19)).is_some());
    // Back to fixed.
    l.set_rate(MS(20), Some(BitRate(12_000_000)));
    l.enqueue(MS(20), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(21)));
    assert!(l.dequeue(MS(21)).is_some());
    // A delay schedule from the change on: 30 ms, 5 ms from its second 1, then fixed 0.
    let mut with_plan = LinkConfig::default();
    with_plan
        .set("delay", Some("schedule:0s/30ms,1s/5ms"))
        .unwrap();
    l.set_delay_schedule(MS(30), Duration::ZERO, with_plan.delay_schedule.clone());
    l.enqueue(MS(30), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(61)));
    assert!(
        l.dequeue(MS(60)).is_none(),
        "delivered before the scheduled delay"
    );
    assert!(l.dequeue(MS(61)).is_some());
    l.enqueue(MS(1230), ipv4(1500));
    assert!(
        l.dequeue(MS(1236)).is_some(),
        "the schedule's second step not followed"
    );
    l.set_delay_schedule(MS(1270), Duration::ZERO, None);
    l.enqueue(MS(1270), ipv4(1500));
    assert_eq!(l.next_event(), Some(MS(1271)));
    assert!(l.dequeue(MS(1271)).is_some());
    let at = |t: u64| MS(1200 + t);
    // A replaced qdisc holding two packets: both leave before the one queued after.
    let mut first = ipv4(1500);
    first[19] = 1;
    let mut second = ipv4(1500);
    second[19] = 2;
    let mut third = ipv4(1500);
    third[19] = 3;
    l.enqueue(at(80), first);
    l.enqueue(at(80), second);
    l.set_qdisc(at(80), &crate::QdiscConfig::defaults(crate::Qdisc::FqCodel))
        .unwrap();
    l.enqueue(at(80), third);
    let order: Vec<u8> = (81..=83)
        .map(|t| l.dequeue(at(t)).expect("a packet each millisecond")[19])
        .collect();
    assert_eq!(order, [1, 2, 3]);
    // And the fixed path again, through the new qdisc.
    l.enqueue(at(90), ipv4(1500));
    assert_eq!(l.next_event(), Some(at(91)));
    assert!(l.dequeue(at(91)).is_some());
}

/// The serializer does not run again for a time it already ran to (a driver draining a link
/// calls `dequeue` until `None` at one time) unless something changed since: a rate set, or a
/// packet enqueued, at that very time is served at once.
#[test]
fn a_change_at_the_time_the_serializer_last_ran_to_is_served() {
    let mut l = link_with(trace("100\n"));
    l.enqueue(MS(1), ipv4(1500));
    assert!(
        l.dequeue(MS(50)).is_none(),
        "waits for the 100-ms opportunity"
    );
    assert!(l.dequeue(MS(50)).is_none());
    // The trace gives way to an unlimited rate at 50 ms: the packet leaves now (its virtual
    // departure is when it could have started at that rate, its arrival).
    l.set_rate(MS(50), None);
    assert_eq!(l.dequeue_timed(MS(50)).map(|(at, _)| at), Some(MS(1)));
    assert!(l.dequeue(MS(50)).is_none());
    // Enqueued at the time just drained to: leaves at once too.
    l.enqueue(MS(50), ipv4(1500));
    assert_eq!(l.dequeue_timed(MS(50)).map(|(at, _)| at), Some(MS(50)));
    assert!(l.dequeue(MS(50)).is_none());
    assert_eq!(l.counters().conservation_gap(), (0, 0));
}
