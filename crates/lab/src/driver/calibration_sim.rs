//! Calibrated delay in a deterministic simulation: the real link models
//! (`bloatlab_emu::Link` through `model::build`) and the real calibration
//! code (`path_probe::derive`, `calibrate::Calibrated`) on a virtual clock,
//! with a simulated machine around them: every host crossing costs 20-60 us
//! (the hosts' stacks and the forwarding threads' TUN wake-ups), and the
//! forwarding threads wake 0-10 us late, 5 % of the time 2 ms late.
//!
//! Like the lab: at "lab up" echo probes cross the links set to the probe
//! delay, the overhead is derived from their round trips, then a ping every
//! 10 ms crosses the calibrated links. Its median round trip must be the
//! configured one within 0.1 ms (it is ~0.1 ms above without calibration,
//! which is checked too, so the test can fail), for 1 ms to 250 ms each way.

use super::calibrate::Calibrated;
use super::host_track::{HostTracker, SharedShare};
use super::idle_probe::{LinkSnapshot, probe_overhead};
use super::path_probe::{self, BURSTS, PROBE_DELAY, PROBES};
use crate::model::{self, LinkModel};
use crate::spec::LinkSpec;
use std::time::Duration;

const US: fn(u64) -> Duration = Duration::from_micros;

/// The simulated machine's randomness (xorshift; seeded, so every run is
/// the same), and how much slower than at lab up its hosts are now.
struct Machine(u64, Duration);

impl Machine {
    fn new(seed: u64) -> Machine {
        Machine(seed, Duration::ZERO)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// One host crossing: stack plus TUN wake-up, 20-60 us (plus the
    /// slow-down, when the host got busier after lab up).
    fn host(&mut self) -> Duration {
        US(20 + self.next() % 41) + self.1
    }
    /// How late a forwarding thread wakes for a release.
    fn late(&mut self) -> Duration {
        if self.next().is_multiple_of(20) {
            US(2000)
        } else {
            US(self.next() % 11)
        }
    }
}

/// One packet through a link model driven like the driver drives it: wake
/// at `next_event` (late by the machine's lateness), dequeue.
fn cross(link: &mut dyn LinkModel, m: &mut Machine, at: Duration) -> Duration {
    link.enqueue(at, vec![0x45, 0, 0, 20]);
    let due = link.next_event().expect("a packet is queued");
    let woke = due + m.late();
    assert!(link.dequeue(woke).is_some());
    woke
}

/// A ping's round trip: client host, up link, server host, down link,
/// client host.
fn ping(
    up: &mut dyn LinkModel,
    down: &mut dyn LinkModel,
    m: &mut Machine,
    t: Duration,
) -> Duration {
    let in_up = t + m.host();
    let out_up = cross(up, m, in_up);
    let in_down = out_up + m.host();
    let out_down = cross(down, m, in_down);
    out_down + m.host() - t
}

fn spec(delay: &str) -> LinkSpec {
    LinkSpec {
        delay: Some(delay.parse().expect("a tc time")),
        ..LinkSpec::default()
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// What lab up measures: echo probes through links set to the probe delay,
/// 3 ms apart in bursts 25 ms apart, from `t` on; returns each direction's share.
fn lab_up_share(m: &mut Machine, t: &mut Duration) -> Duration {
    let probe = format!("{}us", PROBE_DELAY.as_micros());
    let mut pu = model::build("up", &spec(&probe), 1, None).unwrap();
    let mut pd = model::build("down", &spec(&probe), 2, None).unwrap();
    let bursts: Vec<Vec<Duration>> = (0..BURSTS)
        .map(|_| {
            *t += US(25_000);
            (0..PROBES / BURSTS)
                .map(|_| {
                    let r = ping(pu.as_mut(), pd.as_mut(), m, *t);
                    *t += r + US(3000);
                    r
                })
                .collect()
        })
        .collect();
    Duration::from_nanos(path_probe::derive(&bursts, US(10)).share_ns)
}

/// Median ping RTT over 2000 pings after a lab up with `delay` each way.
fn idle_median(delay: &str, calibrate: bool, seed: u64) -> Duration {
    let mut m = Machine::new(seed);
    let mut t = Duration::ZERO;
    let mut up = model::build("up", &spec(delay), 1, None).unwrap();
    let mut down = model::build("down", &spec(delay), 2, None).unwrap();
    if calibrate {
        let share = lab_up_share(&mut m, &mut t);
        up = Calibrated::wrap(up, share);
        down = Calibrated::wrap(down, share);
    }
    let rtts: Vec<Duration> = (0..2000)
        .map(|_| {
            let r = ping(up.as_mut(), down.as_mut(), &mut m, t);
            t += r + US(10_000);
            r
        })
        .collect();
    median(rtts)
}

#[test]
fn calibrated_idle_rtt_is_the_configured_one_from_1ms_to_250ms() {
    for (delay, rtt) in [("1ms", 2), ("20ms", 40), ("250ms", 500)] {
        let want = Duration::from_millis(rtt);
        for seed in [1, 7, 42] {
            let raw = idle_median(delay, false, seed);
            let cal = idle_median(delay, true, seed);
            eprintln!(
                "--delay {delay} seed {seed}: median RTT uncalibrated {raw:?}, calibrated {cal:?}"
            );
            assert!(
                raw - want > US(100),
                "the simulated overhead should show without calibration: {raw:?}"
            );
            assert!(
                cal.abs_diff(want) <= US(100),
                "--delay {delay}: calibrated median RTT {cal:?}, want {want:?} +- 0.1 ms"
            );
        }
    }
}

#[test]
fn the_simulation_is_deterministic() {
    assert_eq!(idle_median("20ms", true, 3), idle_median("20ms", true, 3));
}

/// Lab up on the quiet machine, then `probes` idle probes (one every 2 s) after
/// the hosts' crossings changed by `slower`, fed to the tracker as the daemon
/// does when `track` (the share stays at lab up's otherwise). Returns the median
/// ping RTT after the change and the final share.
fn after_host_change(
    delay: &str,
    slower: Duration,
    track: bool,
    seed: u64,
) -> (Duration, Duration) {
    let mut m = Machine::new(seed);
    let mut t = Duration::ZERO;
    let share = SharedShare::new(lab_up_share(&mut m, &mut t));
    let mut up = Calibrated::wrap_tracked(
        model::build("up", &spec(delay), 1, None).unwrap(),
        share.clone(),
    );
    let mut down = Calibrated::wrap_tracked(
        model::build("down", &spec(delay), 2, None).unwrap(),
        share.clone(),
    );
    // Traffic after lab up, then the hosts change.
    for _ in 0..200 {
        t += ping(up.as_mut(), down.as_mut(), &mut m, t) + US(10_000);
    }
    m.1 = slower;
    let mut tracker = HostTracker::new(share.get());
    for _ in 0..40 {
        let rtt = ping(up.as_mut(), down.as_mut(), &mut m, t);
        t += rtt + Duration::from_secs(2);
        if !track {
            continue;
        }
        // What the daemon reads from the threads' reports.
        let (u, d) = (up.calibration().unwrap(), down.calibration().unwrap());
        let after = LinkSnapshot {
            dequeued: 2,
            backlog: 0,
            applied: Duration::from_nanos(u.applied_ns + d.applied_ns),
            lateness: Duration::from_nanos(u.forwarding_ns + d.forwarding_ns),
        };
        let idle = LinkSnapshot {
            dequeued: 0,
            ..after
        };
        let o = probe_overhead(&idle, &after, 1, rtt, Duration::ZERO).expect("a clean probe");
        if let Some(s) = tracker.sample(o) {
            share.set(s);
        }
    }
    let rtts: Vec<Duration> = (0..2000)
        .map(|_| {
            let r = ping(up.as_mut(), down.as_mut(), &mut m, t);
            t += r + US(10_000);
            r
        })
        .collect();
    (median(rtts), share.get())
}

/// Issue 13, "continuously": the hosts get 100 us slower per crossing after
/// lab up (a ping crosses them three times: +0.3 ms). Untracked, the idle
/// RTT stays that far above the configured one (checked, so the test can
/// fail); tracked by idle probes it is back within 0.1 ms. When the hosts
/// get quicker than at lab up, the share follows down, so the lab is never
/// faster than configured by more than 0.1 ms.
#[test]
fn a_host_overhead_change_after_lab_up_is_tracked() {
    for (delay, rtt) in [("1ms", 2), ("20ms", 40), ("250ms", 500)] {
        let want = Duration::from_millis(rtt);
        for seed in [1, 7] {
            let (raw, _) = after_host_change(delay, US(100), false, seed);
            let (tracked, share) = after_host_change(delay, US(100), true, seed);
            eprintln!(
                "--delay {delay} seed {seed}: hosts +100 us: median RTT untracked {raw:?}, \
                 tracked {tracked:?} (share {share:?})"
            );
            assert!(
                raw - want > US(200),
                "untracked {raw:?} should show the change"
            );
            assert!(
                tracked.abs_diff(want) <= US(100),
                "--delay {delay}: tracked median RTT {tracked:?}, want {want:?} +- 0.1 ms"
            );
            // Never more than there is: half of three crossings at their
            // slowest (60 + 100 us each).
            assert!(share <= US(3 * 160 / 2), "share {share:?}");
        }
    }
    // Quicker hosts: a negative change is not possible in the model, so the
    // tracker starts from a share 200 us too large (as if lab up had run on a
    // busy host) and must come down.
    let mut tracker = HostTracker::new(US(240));
    let mut m = Machine::new(3);
    for _ in 0..40 {
        let overhead = m.host() + m.host() + m.host();
        tracker.sample(overhead);
    }
    assert!(tracker.share() <= US(60), "share {:?}", tracker.share());
}

#[test]
fn tracking_is_deterministic() {
    assert_eq!(
        after_host_change("20ms", US(100), true, 3),
        after_host_change("20ms", US(100), true, 3)
    );
}
