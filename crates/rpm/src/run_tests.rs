//! The run on a virtual clock: a link of fixed goodput shared by the ready load
//! connections, probes that take a fixed time, all stepped every 10 ms.

use std::time::Duration;

use crate::params::Params;
use crate::run::{Action, ConnId, Direction, Ended, Limits, ProbeId, Run, RunError, Timing};
use crate::stability::Confidence;

const STEP: Duration = Duration::from_millis(10);

struct Sim {
    run: Run,
    now: Duration,
    /// Bytes per second per direction, shared by its ready connections.
    rate: fn(Direction, Duration) -> f64,
    /// (conn, direction, ready at, bytes so far)
    conns: Vec<(ConnId, Direction, Duration, f64)>,
    /// (done at, probe, timing)
    pending: Vec<(Duration, ProbeId, Timing)>,
    /// Per interval (by the time it was asked for), OpenLoad actions.
    opened_at: Vec<Duration>,
    self_probe_conns: Vec<ConnId>,
    foreign: usize,
    self_probes: usize,
    /// Load connections take this long to start.
    setup: Duration,
    /// Probe times.
    foreign_ms: u64,
    self_ms: fn(Duration) -> u64,
}

impl Sim {
    fn new(params: Params, dirs: &[Direction], deadline: Duration) -> Sim {
        Sim {
            run: Run::new(params, dirs, Duration::ZERO, Limits::until(deadline), 7),
            now: Duration::ZERO,
            rate: |_, _| 2.5e6,
            conns: Vec::new(),
            pending: Vec::new(),
            opened_at: Vec::new(),
            self_probe_conns: Vec::new(),
            foreign: 0,
            self_probes: 0,
            setup: Duration::from_millis(100),
            foreign_ms: 20,
            self_ms: |_| 200,
        }
    }

    fn handle(&mut self) {
        while let Some(a) = self.run.poll(self.now) {
            match a {
                Action::OpenLoad { conn, direction } => {
                    self.opened_at.push(self.now);
                    self.conns
                        .push((conn, direction, self.now + self.setup, 0.0));
                }
                Action::ForeignProbe { probe } => {
                    self.foreign += 1;
                    let ms = Duration::from_millis(self.foreign_ms);
                    self.pending.push((
                        self.now + 3 * ms,
                        probe,
                        Timing::Foreign {
                            tcp: ms,
                            tls: Some(ms),
                            http: ms,
                        },
                    ));
                }
                Action::SelfProbe { probe, conn } => {
                    self.self_probes += 1;
                    self.self_probe_conns.push(conn);
                    let ms = Duration::from_millis((self.self_ms)(self.now));
                    self.pending
                        .push((self.now + ms, probe, Timing::SelfProbe { http: ms }));
                }
            }
        }
    }

    /// Runs until the run finishes or `limit` passes.
    fn go(&mut self, limit: Duration) {
        self.handle();
        while !self.run.is_finished() && self.now < limit {
            self.now += STEP;
            let dt = STEP.as_secs_f64();
            for dir in [Direction::Download, Direction::Upload] {
                let ready = self
                    .conns
                    .iter()
                    .filter(|c| c.1 == dir && c.2 <= self.now)
                    .count();
                let share = (self.rate)(dir, self.now) / ready.max(1) as f64 * dt;
                for c in self.conns.iter_mut().filter(|c| c.1 == dir) {
                    if c.2 <= self.now {
                        if c.3 == 0.0 {
                            self.run.load_ready(self.now, c.0);
                        }
                        c.3 += share;
                    }
                    self.run.load_progress(self.now, c.0, c.3 as u64);
                }
            }
            let now = self.now;
            let (done, rest): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|p| p.0 <= now);
            self.pending = rest;
            for (_, p, t) in done {
                self.run.probe_done(now, p, t);
            }
            self.handle();
        }
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn connections_ramp_one_per_interval_up_to_the_maximum() {
    let params = Params {
        max_connections: 3,
        // Never stable: the test is about the ramp.
        stdev_tolerance: 1e-12,
        ..Params::default()
    };
    let mut sim = Sim::new(params, &[Direction::Download], secs(60));
    sim.rate = |_, t| 1e6 + t.as_secs_f64() * 1e5;
    sim.go(secs(60));
    assert_eq!(
        sim.opened_at,
        [Duration::ZERO, secs(5), secs(10)],
        "1 at the start, +1 at each of the next intervals, then MNP = 3 holds"
    );
    let o = sim.run.finish().unwrap();
    assert_eq!(o.ended, Ended::Deadline);
    assert_eq!(o.intervals, 12);
    assert_eq!(o.directions[0].connections, 3);
}

#[test]
fn steady_link_saturates_then_responsiveness_stabilises_with_high_confidence() {
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(120));
    sim.go(secs(120));
    let o = sim.run.finish().unwrap();
    // Moving averages are stable from the 4th interval (index 3, t = 20 s); the
    // responsiveness stage starts there and is stable after MAD = 4 values: index 6,
    // t = 35 s.
    assert_eq!(o.directions[0].saturated_at, Some(3));
    assert_eq!(o.directions[0].confidence, Confidence::High);
    assert_eq!(o.ended, Ended::Stable);
    assert_eq!(o.end, secs(35));
    assert_eq!(o.rpm_series.len(), 4);
    assert_eq!(o.responsiveness_confidence, Confidence::High);
    // 2.5 MB/s = 20 Mbit/s: the loaded span after saturation (intervals 3-6, the last
    // MAD) holds no part of the 100-ms setup of interval 0, which the moving average at
    // saturation did (19.9 s of transfer in 20 s: 19.9 Mbit/s).
    let cap = o.directions[0].capacity.0 as f64;
    assert!((cap - 20e6).abs() < 0.01e6, "{cap}");
    let at_saturation = o.directions[0].moving_averages[3].0 as f64;
    assert!(
        (at_saturation - 20e6 * 19.9 / 20.0).abs() < 0.01e6,
        "{at_saturation}"
    );
    // Foreign 20 ms per part -> 3000 RPM; self 200 ms -> 300; RPM 1650.
    let r = o.responsiveness.unwrap();
    assert!((r.trimmed.rpm - 1650.0).abs() < 1e-6, "{}", r.trimmed.rpm);
    assert!((r.p90.rpm - 1650.0).abs() < 1e-6);
}

#[test]
fn deadline_before_mad_intervals_is_low_and_after_without_stability_medium() {
    // 12 s: two intervals of ID = 5 s: nothing can have a full window.
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(12));
    sim.go(secs(20));
    let o = sim.run.finish().unwrap();
    assert_eq!(o.ended, Ended::Deadline);
    assert_eq!(o.end, secs(12));
    assert_eq!(o.directions[0].confidence, Confidence::Low);
    assert_eq!(o.responsiveness_confidence, Confidence::Low);
    // The responsiveness is still reported, from the probes of the last MAD intervals.
    assert!(o.responsiveness.is_some());
    // A goodput that grows 20 % every interval is never stable: Medium after 4.
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(31));
    sim.rate = |_, t| 1e6 * 1.2f64.powi((t.as_secs() / 5) as i32);
    sim.go(secs(40));
    let o = sim.run.finish().unwrap();
    assert_eq!(o.directions[0].saturated_at, None);
    assert_eq!(o.directions[0].confidence, Confidence::Medium);
    assert_eq!(
        o.responsiveness_confidence,
        Confidence::Low,
        "stage never began"
    );
}

#[test]
fn responsiveness_that_keeps_worsening_is_medium_at_the_deadline() {
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(60));
    // Self probes slow down by 30 % every 5 s, and dominate the figure (foreign probes
    // take 200 ms a part): never stable.
    sim.foreign_ms = 200;
    sim.self_ms = |t| (100.0 * 1.3f64.powi((t.as_secs() / 5) as i32)) as u64;
    sim.go(secs(60));
    let o = sim.run.finish().unwrap();
    assert_eq!(o.ended, Ended::Deadline);
    assert_eq!(o.directions[0].confidence, Confidence::High);
    assert_eq!(o.responsiveness_confidence, Confidence::Medium);
    let series: Vec<f64> = o.rpm_series.iter().map(|r| r.rpm.unwrap()).collect();
    assert!(series.windows(2).all(|w| w[1] < w[0]), "{series:?}");
}

#[test]
fn both_directions_at_once_must_both_saturate_before_responsiveness() {
    let mut sim = Sim::new(
        Params::default(),
        &[Direction::Download, Direction::Upload],
        secs(120),
    );
    // The upload only settles after 20 s.
    sim.rate = |d, t| match d {
        Direction::Download => 2.5e6,
        Direction::Upload if t < secs(20) => 0.1e6 * (1.0 + t.as_secs_f64()),
        Direction::Upload => 1e6,
    };
    sim.go(secs(120));
    let o = sim.run.finish().unwrap();
    let down = &o.directions[0];
    let up = &o.directions[1];
    assert_eq!(down.saturated_at, Some(3));
    let up_sat = up.saturated_at.unwrap();
    assert!(up_sat > 3, "{up_sat}");
    assert_eq!(o.rpm_series[0].interval, up_sat);
    assert_eq!(o.ended, Ended::Stable);
    // Both directions ramp on their own.
    assert_eq!(down.connections, up.connections);
}

#[test]
fn self_probes_go_to_ready_connections_and_match_foreign_in_number() {
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(30));
    sim.setup = Duration::from_secs(2);
    sim.go(secs(30));
    // 2.5 MB/s: 20.8 pairs per second once the first interval's average is known.
    assert!(
        sim.foreign.abs_diff(sim.self_probes) <= 2 + 20,
        "{} {}",
        sim.foreign,
        sim.self_probes
    );
    let o = sim.run.finish().unwrap();
    // Every self probe went to a connection that had started.
    for c in &sim.self_probe_conns {
        let opened = o.connections.iter().find(|r| r.conn == *c).unwrap().opened;
        assert!(opened + Duration::from_secs(2) <= secs(30));
    }
    // Probe rate: no more than PTC of the capacity at any time.
    let bytes = sim.foreign as f64 * 5000.0 + sim.self_probes as f64 * 1000.0;
    assert!(bytes / 30.0 <= 0.05 * 2.5e6 * 1.05, "{}", bytes / 30.0);
}

#[test]
fn a_stalled_connection_ends_the_run_with_an_error() {
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(60));
    sim.rate = |_, t| if t < secs(7) { 2.5e6 } else { 0.0 };
    sim.go(secs(60));
    let e = sim.run.finish().unwrap_err();
    match e {
        RunError::LoadStalled { after, .. } => assert_eq!(after, secs(10)),
        e => panic!("{e}"),
    }
    assert!(
        e.to_string().contains("stalled: no data moved for 10.0 s"),
        "{e}"
    );
}

#[test]
fn a_connection_that_never_starts_ends_the_run_after_the_setup_timeout() {
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(60));
    // The first connection starts; the one asked for at 5 s never does.
    sim.setup = secs(4);
    sim.go(secs(4) + STEP);
    sim.setup = secs(1000);
    sim.go(secs(60));
    let e = sim.run.finish().unwrap_err();
    assert_eq!(
        e,
        RunError::LoadNotStarted {
            conn: ConnId(1),
            direction: Direction::Download,
            after: secs(30)
        }
    );
    assert!(e.to_string().contains("did not start within 30.0 s"), "{e}");
}

#[test]
fn a_failed_connection_or_probe_ends_the_run_with_its_reason() {
    let mut run = Run::new(
        Params::default(),
        &[Direction::Upload],
        Duration::ZERO,
        Limits::until(secs(30)),
        1,
    );
    let Some(Action::OpenLoad { conn, .. }) = run.poll(Duration::ZERO) else {
        panic!("first action opens a load connection");
    };
    run.load_failed(secs(1), conn, "connection reset by peer".into());
    assert!(run.is_finished());
    assert_eq!(run.poll_at(), None);
    let e = run.finish().unwrap_err();
    assert_eq!(
        e.to_string(),
        "upload load connection 0 failed: connection reset by peer"
    );
    // A failed probe is counted; probes that mostly fail end the run.
    let mut run = Run::new(
        Params::default(),
        &[Direction::Download],
        Duration::ZERO,
        Limits::until(secs(30)),
        1,
    );
    for i in 0..9 {
        run.probe_failed(secs(1), ProbeId(i), "429 Too Many Requests".into());
    }
    assert!(!run.is_finished(), "9 ended: fewer than 10");
    run.probe_failed(secs(1), ProbeId(9), "429 Too Many Requests".into());
    assert!(run.is_finished());
    assert_eq!(
        run.finish().unwrap_err().to_string(),
        "10 of 10 probes failed; the last foreign probe: 429 Too Many Requests"
    );
}

#[test]
fn a_few_failed_probes_are_counted_not_fatal() {
    let mut sim = Sim::new(Params::default(), &[Direction::Download], secs(40));
    sim.go(secs(6));
    // Fail one probe in flight of each kind by hand: the run goes on.
    sim.run
        .probe_failed(sim.now, ProbeId(1_000_000), "handshake timed out".into());
    sim.go(secs(40));
    let o = sim.run.finish().unwrap();
    assert_eq!(o.failed_probes, (1, 0));
    assert_eq!(o.ended, Ended::Stable);
}

#[test]
fn poll_at_names_the_next_boundary_or_probe_slot() {
    let mut run = Run::new(
        Params::default(),
        &[Direction::Download],
        secs(100),
        Limits::until(secs(130)),
        1,
    );
    assert_eq!(run.poll_at(), Some(secs(100)), "an action is queued");
    assert!(run.poll(secs(100)).is_some());
    assert_eq!(
        run.poll(secs(100)),
        None,
        "no capacity measured: no probe yet"
    );
    // The probe schedule looks again in 100 ms; the stall deadline is at 110 s.
    assert_eq!(run.poll_at(), Some(secs(100) + Duration::from_millis(100)));
}

/// Bytes per second in 1-s interval `i` of a scripted download (the step ending at `t`
/// belongs to the interval that `t` closes), 2.5 MB/s (20 Mbit/s) outside the script.
fn scripted(t: Duration, script: &[(u64, f64)]) -> f64 {
    let i = (t.as_millis().saturating_sub(1) / 1000) as u64;
    script
        .iter()
        .find(|(j, _)| *j == i)
        .map_or(2.5e6, |&(_, rate)| rate)
}

/// A download on 1-s intervals whose link gives `rate`, run to its end.
fn scripted_run(rate: fn(Direction, Duration) -> f64) -> crate::run::Outcome {
    let params = Params {
        interval: secs(1),
        ..Params::default()
    };
    let mut sim = Sim::new(params, &[Direction::Download], secs(60));
    sim.setup = Duration::ZERO;
    sim.rate = rate;
    sim.go(secs(60));
    sim.run.finish().unwrap()
}

#[test]
fn a_late_release_inside_the_saturation_window_does_not_inflate_the_capacity() {
    // Interval 0 loses 1 MB behind a hole that a late retransmission fills in interval
    // 3: the application sees 1.5 MB, then 3.5 MB. The moving averages read 12, 16,
    // 17.3, 20, then 22, 22, 22 Mbit/s while interval 3 is in the window but interval 0
    // no longer is; the last MAD of them are stable at interval 6, so the moving average
    // at saturation is 22 Mbit/s, 10 % above a link that never carried more than 20.
    let o = scripted_run(|_, t| scripted(t, &[(0, 1.5e6), (3, 3.5e6)]));
    let d = &o.directions[0];
    let s = d.saturated_at.expect("saturated");
    let at_saturation = d.moving_averages[s].0 as f64;
    assert!(
        at_saturation >= 1.09 * 20e6,
        "the old rule (moving average at saturation) reads high here: {at_saturation}, saturated at {s}"
    );
    // The loaded span after saturation holds no part of the shift.
    let cap = d.capacity.0 as f64;
    assert!((cap / 20e6 - 1.0).abs() < 0.01, "capacity {cap}");
    assert_eq!(o.ended, Ended::Stable);
}

#[test]
fn a_hole_inside_the_saturation_window_does_not_deflate_the_capacity() {
    // Interval 3 loses 1 MB behind a hole filled in interval 4: the window of intervals
    // 0-3 averages 18 Mbit/s and is stable (sd 0.87 against 5 % of 18 = 0.9), so the
    // moving average at saturation is 10 % below the link; the bytes arrive one interval
    // later, inside the loaded span.
    let o = scripted_run(|_, t| scripted(t, &[(3, 1.5e6), (4, 3.5e6)]));
    let d = &o.directions[0];
    assert_eq!(d.saturated_at, Some(3));
    let at_saturation = d.moving_averages[3].0 as f64;
    assert!(
        at_saturation <= 0.91 * 20e6,
        "the old rule reads low here: {at_saturation}"
    );
    let cap = d.capacity.0 as f64;
    assert!((cap / 20e6 - 1.0).abs() < 0.01, "capacity {cap}");
    // And the moving averages stay in the outcome.
    assert_eq!(d.moving_averages.len(), o.intervals);
}

#[test]
fn the_loaded_span_grows_with_the_run_and_leaves_out_the_ramp() {
    // Slow start: 0.5, 1.5 MB in the first two intervals, and a late release from
    // interval 8 into 9 later on. Self probes that slow down by 30 % a second keep the
    // responsiveness from becoming stable, so the run goes to its deadline and the
    // loaded span is every interval after saturation: no ramp, the shift inside it.
    let params = Params {
        interval: secs(1),
        ..Params::default()
    };
    let mut sim = Sim::new(params, &[Direction::Download], secs(20));
    sim.setup = Duration::ZERO;
    sim.rate = |_, t| scripted(t, &[(0, 0.5e6), (1, 1.5e6), (8, 2.0e6), (9, 3.0e6)]);
    sim.foreign_ms = 2000;
    sim.self_ms = |t| (100.0 * 1.3f64.powi(t.as_secs() as i32)) as u64;
    sim.go(secs(20));
    let o = sim.run.finish().unwrap();
    assert_eq!(o.ended, Ended::Deadline);
    let d = &o.directions[0];
    let s = d.saturated_at.expect("saturated");
    assert!(s >= 4, "saturated at {s}");
    assert_eq!(o.intervals, 20);
    let cap = d.capacity.0 as f64;
    assert!((cap / 20e6 - 1.0).abs() < 0.005, "capacity {cap}");
}
