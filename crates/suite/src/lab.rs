//! A test run inside a bloatlab lab (`bloatlab lab exec NAME HOST -- bloatlab test ...`):
//! the lab's view of the run.
//!
//! `lab exec` names the lab and host in the environment (`bloatlab_lab::LabEnv`,
//! [`LabContext::from_env`]). [`LabWatch`] then reads the emulator's counters through
//! `bloatlab_lab::status` when the run starts (waiting for a snapshot taken after that
//! moment), about twice a second during it (backlog samples and phase edges) and after it
//! ends, and turns the differences into the results file's [`LabRecord`]: the link spec,
//! drops by cause, CE marks, backlog and sojourn percentiles, and the emulator's own
//! release lateness over the run. [`LabWatch::phase_signals`] gives the working-condition
//! check the emulator's drops, marks and utilisation per phase.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bloatlab_emu::Spelled;
use bloatlab_lab::LinkSpec;
use bloatlab_lab::driver::histogram::Histogram;
use bloatlab_lab::hostctl;
use bloatlab_lab::lab::LabStatus;
use bloatlab_lab::state::StateDir;
use bloatlab_lab::status::{self, StatusReport};
use bloatlab_results::lab::{
    BacklogRecord, DropsRecord, EmulatorPhaseRecord, EmulatorRecord, LATE_RELEASE_NS, LabRecord,
    PercentilesRecord, PhaseLatenessRecord, StageCountersRecord,
};
use bloatlab_results::schema::{
    DirectionRecord, LinkDirectionRecord, LinkRecord, QdiscRecord, StageRecord,
};
use bloatlab_stats::Phase;

/// Which lab (and host) this process runs in.
#[derive(Debug, Clone)]
pub struct LabContext {
    /// Lab name.
    pub name: String,
    /// Host the test runs on.
    pub host: String,
    /// Where the lab's state files are.
    pub dir: StateDir,
}

impl LabContext {
    /// The lab named by `lab exec`'s environment, if any.
    pub fn from_env() -> Option<LabContext> {
        let env = bloatlab_lab::LabEnv::from_env();
        Some(LabContext {
            name: env.lab?,
            host: env.host.unwrap_or_default(),
            dir: StateDir::default(),
        })
    }

    /// Sets TCP ECN of this host for the run; returns the previous value to restore.
    pub fn set_ecn(&self, on: bool) -> Result<bool, bloatlab_lab::LabError> {
        let st = self
            .dir
            .read(&self.name)?
            .ok_or_else(|| bloatlab_lab::LabError::NoSuchLab(self.name.clone()))?;
        let was = st.spec.ecn_hosts.contains(&self.host);
        hostctl::set_ecn(&self.dir, &self.name, &[(self.host.clone(), on)])?;
        Ok(was)
    }
}

/// Seconds since the Unix epoch now.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Per direction, the cumulative counters the phases and the backlog need.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct DirSnap {
    /// Run time this direction's counters were taken, seconds.
    t: f64,
    dequeued_bytes: u64,
    congestion_drops: u64,
    ce_marked: u64,
    backlog_packets: u64,
    backlog_bytes: u64,
}

/// One sample of the emulator's counters on the run's time axis.
#[derive(Debug, Clone, PartialEq)]
struct Snap {
    /// Run time of the sample (negative: before the run started), seconds.
    t: f64,
    dirs: Vec<(String, DirSnap)>,
    /// Per direction, the cumulative release-lateness histogram (a phase's lateness is the
    /// difference of the two snapshots nearest its edges).
    late: Vec<(String, Histogram)>,
}

fn snap(s: &LabStatus, run_start_unix: f64) -> Snap {
    let origin = s.unix_time_s - s.uptime_s - run_start_unix;
    Snap {
        t: s.taken_unix_s() - run_start_unix,
        dirs: s
            .directions
            .iter()
            .map(|(n, r)| {
                let l = &r.link.total;
                (
                    n.clone(),
                    DirSnap {
                        t: origin + r.at_s,
                        // A chain's total sums its stages, so a packet counts once
                        // per stage: the link's use is what its bottleneck delivered.
                        dequeued_bytes: bottleneck(&r.link).dequeued.bytes.0,
                        congestion_drops: l.dropped.overflow.packets + l.dropped.aqm.packets,
                        ce_marked: l.ce_marked.packets,
                        backlog_packets: l.backlog.packets,
                        backlog_bytes: l.backlog.bytes.0,
                    },
                )
            })
            .collect(),
        late: s
            .directions
            .iter()
            .map(|(n, r)| (n.clone(), r.lateness_histogram.clone()))
            .collect(),
    }
}

/// The release lateness of the packets released between two cumulative histograms.
fn lateness_between(a: &Histogram, b: &Histogram) -> PhaseLatenessRecord {
    let h = b.since(a);
    let n = h.count();
    let ns = |q: f64| (n > 0).then(|| u64::try_from(h.quantile(q).as_nanos()).unwrap_or(u64::MAX));
    PhaseLatenessRecord {
        percentiles: PercentilesRecord {
            count: n,
            p50_ns: ns(0.5),
            p90_ns: ns(0.9),
            p99_ns: ns(0.99),
            max_ns: ns(1.0),
        },
        late_packets: h.count_above(LATE_RELEASE_NS),
    }
}

/// The release lateness of each direction's packets released between two counter snapshots
/// of one lab, `a` taken before `b`: what a run that has no phases of its own (an
/// experiment's `[client]` run, one `loaded` phase) records. The snapshots come from
/// outside the run (`lab status --json` before and after it), so the window also holds the
/// few packets sent between a snapshot and the run's start or end. A direction missing
/// from either snapshot is left out.
pub fn lateness_window(a: &LabStatus, b: &LabStatus) -> Vec<(String, PhaseLatenessRecord)> {
    b.directions
        .iter()
        .filter_map(|(n, rb)| {
            let ra = a.direction(n)?;
            Some((
                n.clone(),
                lateness_between(&ra.lateness_histogram, &rb.lateness_histogram),
            ))
        })
        .collect()
}

/// The counters that say how much of a direction's capacity was used: a single link's,
/// or a chain's bottleneck stage (the lowest rate now, the first of equals; the last
/// stage when no stage is shaped).
fn bottleneck(l: &bloatlab_lab::LinkCounters) -> &bloatlab_emu::Counters {
    l.stages
        .iter()
        .filter(|s| s.rate_bit_s.is_some())
        .min_by_key(|s| s.rate_bit_s)
        .or(l.stages.last())
        .map_or(&l.total, |s| &s.link)
}

/// Packets that entered a chain's first stage between the two snapshots (`None`: one link).
fn first_stage_enqueued(a: &Option<LabStatus>, b: &Option<LabStatus>, dir: &str) -> Option<u64> {
    let (a, b) = (a.as_ref()?.direction(dir)?, b.as_ref()?.direction(dir)?);
    let e = b.link.stages.first()?;
    let s = a.link.stages.iter().find(|s| s.name == e.name)?;
    Some(
        e.link
            .enqueued
            .packets
            .saturating_sub(s.link.enqueued.packets),
    )
}

/// Each stage's counters between two snapshots of direction `dir` (empty: one link).
fn stage_windows(a: &LabStatus, b: &LabStatus, dir: &str) -> Vec<StageCountersRecord> {
    let (Some(da), Some(db)) = (a.direction(dir), b.direction(dir)) else {
        return Vec::new();
    };
    db.link
        .stages
        .iter()
        .map(|e| {
            let d = match da.link.stages.iter().find(|s| s.name == e.name) {
                Some(s) => e.link.since(&s.link),
                None => e.link.clone(),
            };
            let soj = d.sojourn.summary();
            StageCountersRecord {
                name: e.name.clone(),
                rate_bps: e.rate_bit_s,
                dequeued_packets: d.dequeued.packets,
                dequeued_bytes: d.dequeued.bytes.0,
                drops: DropsRecord {
                    overflow: d.dropped.overflow.packets,
                    aqm: d.dropped.aqm.packets,
                    loss: d.dropped.loss.packets,
                },
                ce_marked: d.ce_marked.packets,
                sojourn: PercentilesRecord {
                    count: soj.count,
                    p50_ns: soj.p50_ns,
                    p90_ns: soj.p90_ns,
                    p99_ns: soj.p99_ns,
                    max_ns: soj.max_ns,
                },
            }
        })
        .collect()
}

/// Watches the lab's emulator over one run.
#[derive(Debug)]
pub struct LabWatch {
    ctx: LabContext,
    report: StatusReport,
    ecn: BTreeMap<String, String>,
    run_start_unix: f64,
    first: Option<LabStatus>,
    last: Option<LabStatus>,
    samples: Vec<Snap>,
    next_poll: Duration,
}

/// How often the counters are sampled during the run (the emulator writes them every
/// 0.5 s).
const POLL_EVERY: Duration = Duration::from_millis(500);
/// Longest wait for a snapshot taken after a given moment (files every 0.5 s, direction
/// reports every 0.2 s).
const FRESH_WITHIN: Duration = Duration::from_millis(1500);

/// Polls the counters until a snapshot taken at or after `after_unix` appears (or
/// `FRESH_WITHIN` passes: then the newest one, if any).
fn fresh_counters(ctx: &LabContext, after_unix: f64) -> Option<LabStatus> {
    let deadline = Instant::now() + FRESH_WITHIN;
    let mut newest = None;
    loop {
        if let Some(s) = status::read_counters(&ctx.dir, &ctx.name) {
            if s.taken_unix_s() >= after_unix {
                return Some(s);
            }
            newest = Some(s);
        }
        if Instant::now() >= deadline {
            return newest;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl LabWatch {
    /// Starts watching: reads the lab's state and the host ECN settings, and a counter
    /// snapshot taken now or later. `run_start_unix` is the run's time origin.
    pub fn start(ctx: LabContext, run_start_unix: f64) -> Result<LabWatch, bloatlab_lab::LabError> {
        let report = status::read(&ctx.dir, &ctx.name)?;
        let ecn = match ctx.dir.read(&ctx.name)? {
            Some(st) => hostctl::ecn_of_hosts(&st),
            None => BTreeMap::new(),
        };
        let first = fresh_counters(&ctx, unix_now());
        let mut w = LabWatch {
            ctx,
            report,
            ecn,
            run_start_unix,
            first: None,
            last: None,
            samples: Vec::new(),
            next_poll: Duration::ZERO,
        };
        if let Some(f) = first {
            w.samples.push(snap(&f, run_start_unix));
            w.first = Some(f);
        }
        Ok(w)
    }

    /// Moves the run's time origin (the first snapshot may be taken before the run
    /// start is fixed).
    pub fn set_origin(&mut self, run_start_unix: f64) {
        let shift = self.run_start_unix - run_start_unix;
        for s in &mut self.samples {
            s.t += shift;
            for (_, d) in &mut s.dirs {
                d.t += shift;
            }
        }
        self.run_start_unix = run_start_unix;
    }

    /// The lab's spec and hosts as read at the start.
    pub fn report(&self) -> &StatusReport {
        &self.report
    }

    /// Called often during the run with the run time: samples the counters every 0.5 s.
    pub fn tick(&mut self, now: Duration) {
        if now < self.next_poll {
            return;
        }
        self.next_poll = now + POLL_EVERY;
        if let Some(s) = status::read_counters(&self.ctx.dir, &self.ctx.name) {
            self.push(s);
        }
    }

    fn push(&mut self, s: LabStatus) {
        let sn = snap(&s, self.run_start_unix);
        if self.samples.last().is_none_or(|l| sn.t > l.t) {
            self.samples.push(sn);
        }
        if self.first.is_none() {
            self.first = Some(s.clone());
        }
        self.last = Some(s);
    }

    /// Ends the watch after the run: waits for a snapshot taken after now.
    pub fn finish(&mut self) {
        if let Some(s) = fresh_counters(&self.ctx, unix_now()) {
            self.push(s);
        }
    }

    /// The link settings of direction `dir` (`up`/`down`).
    pub fn link(&self, dir: &str) -> LinkDirectionRecord {
        direction_record(if dir == "up" {
            &self.report.spec.up
        } else {
            &self.report.spec.down
        })
    }

    /// The lab's link for `metadata.link`.
    pub fn link_record(&self) -> LinkRecord {
        LinkRecord {
            lab: Some(self.ctx.name.clone()),
            backend: Some(self.backend().into()),
            up: self.link("up"),
            down: self.link("down"),
        }
    }

    fn backend(&self) -> &'static str {
        match self.report.backend {
            bloatlab_lab::Backend::Userspace => "userspace",
            bloatlab_lab::Backend::Kernel => "kernel",
        }
    }

    /// The link rate of direction `dir` (`up`/`down`), when shaped.
    pub fn rate_bps(&self, dir: &str) -> Option<u64> {
        self.link(dir).rate_bps
    }

    /// The emulator's counters between the first and the last snapshot inside
    /// `[start, end]` (run time), for direction `dir`: `(window start, window end,
    /// delta)`. Inside, so that a loaded phase's utilisation is not diluted by idle time.
    fn window(&self, dir: &str, start: f64, end: f64) -> Option<(f64, f64, DirSnap)> {
        let (a, b) = self.window_snaps(start, end)?;
        let get = |s: &Snap| s.dirs.iter().find(|(n, _)| n == dir).map(|(_, d)| *d);
        let (da, db) = (get(a)?, get(b)?);
        Some((
            da.t,
            db.t,
            DirSnap {
                t: db.t,
                dequeued_bytes: db.dequeued_bytes.saturating_sub(da.dequeued_bytes),
                congestion_drops: db.congestion_drops.saturating_sub(da.congestion_drops),
                ce_marked: db.ce_marked.saturating_sub(da.ce_marked),
                backlog_packets: db.backlog_packets,
                backlog_bytes: db.backlog_bytes,
            },
        ))
    }

    /// The first and the last snapshot inside `[start, end]` (run time).
    fn window_snaps(&self, start: f64, end: f64) -> Option<(&Snap, &Snap)> {
        let a = self.samples.iter().find(|s| s.t >= start && s.t <= end)?;
        let b = self
            .samples
            .iter()
            .rev()
            .find(|s| s.t <= end && s.t >= start)?;
        Some((a, b))
    }

    /// The release lateness of direction `dir` between the same snapshots as [`Self::window`].
    fn lateness(&self, dir: &str, start: f64, end: f64) -> Option<PhaseLatenessRecord> {
        let (a, b) = self.window_snaps(start, end)?;
        let get = |s: &'_ Snap| {
            s.late
                .iter()
                .find(|(n, _)| n == dir)
                .map(|(_, h)| h.clone())
        };
        Some(lateness_between(&get(a)?, &get(b)?))
    }

    /// The emulator's view of phase `p` in direction `dir`.
    pub fn phase(&self, p: &Phase, dir: &str) -> Option<EmulatorPhaseRecord> {
        let (a, b) = (p.start.as_secs_f64(), p.end.as_secs_f64());
        let (wa, wb, d) = self.window(dir, a, b)?;
        if wb <= wa {
            return None;
        }
        let utilisation = self
            .rate_bps(dir)
            .map(|bps| d.dequeued_bytes as f64 * 8.0 / (bps as f64 * (wb - wa)));
        Some(EmulatorPhaseRecord {
            phase: p.name.clone(),
            direction: dir_record(dir),
            start_ns: secs_ns(wa),
            end_ns: secs_ns(wb),
            dequeued_bytes: d.dequeued_bytes,
            drops: d.congestion_drops,
            ce_marked: d.ce_marked,
            utilisation,
            lateness: self.lateness(dir, a, b),
        })
    }

    /// The results record: everything counted between the first and last snapshot,
    /// plus `phases` (from [`LabWatch::phase`]).
    pub fn record(&self, phases: Vec<EmulatorPhaseRecord>) -> LabRecord {
        let (dirs, ring) = match (&self.first, &self.last) {
            (Some(a), Some(b)) => {
                let (d, r) = status::window(a, b);
                (d, Some(r))
            }
            _ => (Vec::new(), None),
        };
        let directions = dirs
            .iter()
            .map(|w| {
                let l = &w.link;
                let s = l.sojourn.summary();
                let start_t = self.first.as_ref().map_or(0.0, |f| {
                    f.unix_time_s - f.uptime_s + f.direction(&w.direction).map_or(0.0, |r| r.at_s)
                        - self.run_start_unix
                });
                let us_ns = |us: f64| (w.lateness.count > 0).then(|| (us * 1e3).round() as u64);
                let stages = match (&self.first, &self.last) {
                    (Some(a), Some(b)) => stage_windows(a, b, &w.direction),
                    _ => Vec::new(),
                };
                // A chain's summed counters count a packet once per stage: what entered
                // is the first stage's, what was delivered the last one's.
                let (enqueued, dequeued_packets, dequeued_bytes) = match (
                    first_stage_enqueued(&self.first, &self.last, &w.direction),
                    stages.last(),
                ) {
                    (Some(e), Some(last)) => (e, last.dequeued_packets, last.dequeued_bytes),
                    _ => (l.enqueued.packets, l.dequeued.packets, l.dequeued.bytes.0),
                };
                EmulatorRecord {
                    direction: dir_record(&w.direction),
                    link: self.link(&w.direction),
                    start_ns: secs_ns(start_t),
                    end_ns: secs_ns(start_t + w.seconds),
                    enqueued_packets: enqueued,
                    dequeued_packets,
                    dequeued_bytes,
                    drops: DropsRecord {
                        overflow: l.dropped.overflow.packets,
                        aqm: l.dropped.aqm.packets,
                        loss: l.dropped.loss.packets,
                    },
                    ce_marked: l.ce_marked.packets,
                    backlog: self.backlog(&w.direction, l.backlog.packets),
                    sojourn: PercentilesRecord {
                        count: s.count,
                        p50_ns: s.p50_ns,
                        p90_ns: s.p90_ns,
                        p99_ns: s.p99_ns,
                        max_ns: s.max_ns,
                    },
                    lateness: PercentilesRecord {
                        count: w.lateness.count,
                        p50_ns: us_ns(w.lateness.p50_us),
                        p90_ns: us_ns(w.lateness.p90_us),
                        p99_ns: us_ns(w.lateness.p99_us),
                        max_ns: us_ns(w.lateness.max_us),
                    },
                    stages,
                }
            })
            .collect();
        LabRecord {
            name: self.ctx.name.clone(),
            host: self.ctx.host.clone(),
            backend: self.backend().into(),
            ecn: self.ecn.clone(),
            tun_ring_drops: ring,
            directions,
            phases,
        }
    }

    /// Backlog percentiles of direction `dir` over the samples taken during the run.
    fn backlog(&self, dir: &str, end_packets: u64) -> BacklogRecord {
        let mut pk: Vec<(u64, u64)> = self
            .samples
            .iter()
            .filter(|s| s.t >= 0.0)
            .filter_map(|s| s.dirs.iter().find(|(n, _)| n == dir))
            .map(|(_, d)| (d.backlog_packets, d.backlog_bytes))
            .collect();
        let n = pk.len();
        let max_bytes = pk.iter().map(|p| p.1).max();
        pk.sort_unstable();
        let at = |q: f64| -> Option<u64> {
            // Nearest rank: the ceil(q n)-th smallest.
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n.max(1));
            pk.get(rank - 1).map(|p| p.0)
        };
        BacklogRecord {
            samples: n as u64,
            p50_packets: at(0.5),
            p90_packets: at(0.9),
            max_packets: pk.last().map(|p| p.0),
            max_bytes,
            end_packets,
        }
    }
}

/// One direction's tc-style settings as the typed record (`None` where unset or, for a
/// Gilbert-Elliott loss model, not a single fraction). The qdisc's parameters keep tc's
/// spelling; a bare flag (`ecn`) reads `on`.
pub fn direction_record(l: &LinkSpec) -> LinkDirectionRecord {
    use bloatlab_emu::{Limit, LossModel};
    let time = |v: &Option<Spelled<Duration>>| {
        v.as_ref()
            .map(|t| bloatlab_results::convert::nanos(*t.get()))
    };
    let limit = l.limit.as_ref().map(|v| *v.get());
    let mut parameters = BTreeMap::new();
    let (mut overhead, mut mpu, mut framing) = (None, None, None);
    for p in &l.params {
        let p = p.get();
        let v = p.value.as_deref().unwrap_or("on");
        match p.key.as_str() {
            "overhead" => overhead = v.parse().ok(),
            "mpu" => mpu = v.parse().ok(),
            "framing" if v != "none" => framing = Some(v.to_owned()),
            _ => {}
        }
        parameters.insert(p.key.clone(), v.to_owned());
    }
    if !l.stages.is_empty() {
        return chain_record(l, time(&l.delay));
    }
    LinkDirectionRecord {
        rate_bps: l.rate.as_ref().map(|r| r.get().nominal.0),
        delay_ns: time(&l.delay),
        jitter_ns: time(&l.jitter),
        loss_fraction: l.loss.as_ref().and_then(|v| match v.get() {
            LossModel::None => Some(0.0),
            LossModel::Random { p } => Some(p.get()),
            LossModel::GilbertElliott { .. } => None,
        }),
        limit_packets: match limit {
            Some(Limit::Packets(n)) => Some(u64::from(n)),
            _ => None,
        },
        limit_bytes: match limit {
            Some(Limit::Bytes(b)) => Some(b.0),
            _ => None,
        },
        overhead_bytes: overhead,
        mpu_bytes: mpu,
        framing,
        stages: Vec::new(),
        qdisc: Some(QdiscRecord {
            kind: l
                .qdisc
                .as_ref()
                .map_or_else(|| "fifo".into(), |q| q.text().to_string()),
            interface: None,
            parameters,
        }),
    }
}

/// A chained direction (issue 18): its stages, and as the direction's own figures the
/// bottleneck's (the stage with the lowest rate; the first of equals) with the chain's
/// summed delay, so every check that uses "the link's rate" sees the rate that limits
/// the chain. `path_delay` is the direction's own `--delay` (the `path` stage).
fn chain_record(l: &LinkSpec, path_delay: Option<u64>) -> LinkDirectionRecord {
    use bloatlab_emu::{Framing, Limit, QdiscConfig};
    let limit_of = |q: &QdiscConfig| match q {
        QdiscConfig::Fifo(c) => Some(c.limit),
        QdiscConfig::Codel(c) => Some(c.limit),
        QdiscConfig::FqCodel(c) => Some(c.limit),
        QdiscConfig::Pie(c) => Some(c.limit),
        QdiscConfig::Cake(c) => c.limit,
    };
    let framing = |f: Framing| match f {
        Framing::None => None,
        Framing::Atm => Some("atm".to_owned()),
        Framing::Ptm => Some("ptm".to_owned()),
    };
    let mut stages: Vec<StageRecord> = l
        .stages
        .iter()
        .zip(1..)
        .map(|(st, pos)| {
            let c = st.get().clone().at(pos);
            let k = &c.link;
            let limit = limit_of(&k.qdisc);
            StageRecord {
                name: c.name,
                spec: Some(st.text().to_string()),
                rate_bps: k.rate.map(|r| r.0),
                delay_ns: Some(bloatlab_results::convert::nanos(k.delay)),
                limit_packets: match limit {
                    Some(Limit::Packets(n)) => Some(u64::from(n)),
                    _ => None,
                },
                limit_bytes: match limit {
                    Some(Limit::Bytes(b)) => Some(b.0),
                    _ => None,
                },
                overhead_bytes: (k.overhead.bytes != 0).then_some(i64::from(k.overhead.bytes)),
                mpu_bytes: (k.overhead.mpu != 0).then_some(u64::from(k.overhead.mpu)),
                framing: framing(k.overhead.framing),
                qdisc: k.qdisc.kind().to_string(),
            }
        })
        .collect();
    // The direction's own delay, jitter and loss: the last stage, `path`, as the
    // emulator builds it (`bloatlab_lab::stages`), so the names match its counters.
    if path_delay.is_some_and(|d| d > 0) || l.jitter.is_some() || l.loss.is_some() {
        stages.push(StageRecord {
            name: "path".into(),
            delay_ns: path_delay,
            qdisc: "fifo".into(),
            ..StageRecord::default()
        });
    }
    let bottleneck = stages
        .iter()
        .filter(|s| s.rate_bps.is_some())
        .min_by_key(|s| s.rate_bps);
    let delay: u64 = stages.iter().filter_map(|s| s.delay_ns).sum();
    let time = |v: &Option<Spelled<Duration>>| {
        v.as_ref()
            .map(|t| bloatlab_results::convert::nanos(*t.get()))
    };
    LinkDirectionRecord {
        rate_bps: bottleneck.and_then(|b| b.rate_bps),
        delay_ns: Some(delay),
        jitter_ns: time(&l.jitter),
        loss_fraction: None,
        limit_packets: bottleneck.and_then(|b| b.limit_packets),
        limit_bytes: bottleneck.and_then(|b| b.limit_bytes),
        overhead_bytes: bottleneck.and_then(|b| b.overhead_bytes),
        mpu_bytes: bottleneck.and_then(|b| b.mpu_bytes),
        framing: bottleneck.and_then(|b| b.framing.clone()),
        qdisc: bottleneck.map(|b| QdiscRecord {
            kind: b.qdisc.clone(),
            interface: None,
            parameters: BTreeMap::new(),
        }),
        stages,
    }
}

fn dir_record(d: &str) -> DirectionRecord {
    if d == "down" {
        DirectionRecord::Down
    } else {
        DirectionRecord::Up
    }
}

fn secs_ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(samples: Vec<Snap>) -> LabWatch {
        let spec = {
            let mut s = bloatlab_lab::LabSpec::new("w");
            s.up.rate = Some("10mbit".parse().unwrap());
            s
        };
        let st = bloatlab_lab::state::LabState::new(&spec, &StateDir::default());
        LabWatch {
            ctx: LabContext {
                name: "w".into(),
                host: "client".into(),
                dir: StateDir::default(),
            },
            report: StatusReport {
                name: "w".into(),
                backend: spec.backend,
                phase: st.phase,
                pid: 0,
                emulator_alive: false,
                problem: None,
                hosts: st.hosts.clone(),
                spec: spec.clone(),
                counters: None,
            },
            ecn: BTreeMap::new(),
            run_start_unix: 0.0,
            first: None,
            last: None,
            samples,
            next_poll: Duration::ZERO,
        }
    }

    fn s(t: f64, bytes: u64, drops: u64, backlog: u64) -> Snap {
        // Cumulative lateness: one packet per 1000 bytes delivered, every tenth 2 ms late
        // after 1 s of run time (a host that got busy), the rest 50 us late.
        let mut h = Histogram::default();
        for i in 0..bytes / 1000 {
            let late = if t > 1.0 && i >= 1 && i % 10 == 0 {
                2000
            } else {
                50
            };
            h.record(Duration::from_micros(late));
        }
        Snap {
            late: vec![("up".into(), h)],
            t,
            dirs: vec![(
                "up".into(),
                DirSnap {
                    t,
                    dequeued_bytes: bytes,
                    congestion_drops: drops,
                    ce_marked: 0,
                    backlog_packets: backlog,
                    backlog_bytes: backlog * 1500,
                },
            )],
        }
    }

    #[test]
    fn phase_counters_come_from_the_snapshots_at_its_edges() {
        // 10 Mbit/s link: 1.25 MB/s; inside the loaded phase [1, 3) s the snapshots at
        // 1.9 and 2.9 s show 1.2 MB delivered in 1 s (96 %).
        let w = watch(vec![
            s(-0.2, 0, 0, 0),
            s(0.9, 1000, 0, 0),
            s(1.9, 1_201_000, 40, 80),
            s(2.9, 2_401_000, 90, 85),
            s(3.4, 2_500_000, 90, 0),
        ]);
        let p = Phase {
            kind: bloatlab_stats::PhaseKind::Loaded,
            name: "loaded".into(),
            start: Duration::from_secs(1),
            end: Duration::from_secs(3),
        };
        let r = w.phase(&p, "up").unwrap();
        assert_eq!((r.start_ns, r.end_ns), (1_900_000_000, 2_900_000_000));
        assert_eq!(r.drops, 50);
        // The lateness of the packets released between the same two snapshots: 1200
        // packets, 120 of them 2 ms late.
        let l = r.lateness.unwrap();
        assert_eq!((l.percentiles.count, l.late_packets), (1200, 120));
        assert_eq!(l.late_fraction(), Some(0.1));
        assert_eq!(l.percentiles.max_ns, Some(2_000_000));
        assert!(l.percentiles.p50_ns.unwrap() < 60_000, "{l:?}");
        let u = r.utilisation.unwrap();
        assert!((u - 0.96).abs() < 1e-9, "{u}");
        assert!(w.phase(&p, "down").is_none(), "no such direction sampled");
        let b = w.backlog("up", 0);
        assert_eq!(b.samples, 4, "the sample before the run is left out");
        assert_eq!((b.p50_packets, b.max_packets), (Some(0), Some(85)));
        assert_eq!(b.p90_packets, Some(85));
        assert_eq!(w.rate_bps("up"), Some(10_000_000));
        assert_eq!(w.rate_bps("down"), None);
    }

    /// The results record of a direction comes from the typed link values.
    #[test]
    fn direction_record_reads_the_parsed_values() {
        let l = LinkSpec {
            rate: Some("20mbit".parse().unwrap()),
            delay: Some("10ms".parse().unwrap()),
            jitter: Some("250us".parse().unwrap()),
            loss: Some("0.5%".parse().unwrap()),
            limit: Some("64kb".parse().unwrap()),
            qdisc: Some("fq_codel".parse().unwrap()),
            params: vec![
                "target=3ms".parse().unwrap(),
                "ecn".parse().unwrap(),
                "overhead=44".parse().unwrap(),
            ],
            ..LinkSpec::default()
        };
        let r = direction_record(&l);
        assert_eq!(r.rate_bps, Some(20_000_000));
        assert_eq!((r.delay_ns, r.jitter_ns), (Some(10_000_000), Some(250_000)));
        assert_eq!(r.loss_fraction, Some(0.005));
        assert_eq!((r.limit_packets, r.limit_bytes), (None, Some(65_536)));
        assert_eq!(r.overhead_bytes, Some(44));
        let q = r.qdisc.unwrap();
        assert_eq!(q.kind, "fq_codel");
        assert_eq!(q.parameters["target"], "3ms");
        assert_eq!(q.parameters["ecn"], "on");
        let l = LinkSpec {
            loss: Some("gemodel 1% 10%".parse().unwrap()),
            limit: Some("100p".parse().unwrap()),
            ..LinkSpec::default()
        };
        let r = direction_record(&l);
        assert_eq!((r.loss_fraction, r.limit_packets), (None, Some(100)));
        assert_eq!(r.rate_bps, None);
        assert_eq!(r.qdisc.unwrap().kind, "fifo");
    }

    /// issue 18: a chained direction is described as it is: its stages (names, rates,
    /// qdiscs, framing), and as the direction's rate and qdisc its bottleneck's, with the
    /// chain's whole delay. Before, it read rate null, qdisc fifo, no stages.
    #[test]
    fn a_chain_is_recorded_with_its_stages_and_its_bottleneck() {
        let l = LinkSpec {
            delay: Some("10ms".parse().unwrap()),
            stages: vec![
                "name=router rate=9mbit qdisc=fq_codel overhead=44 framing=atm"
                    .parse()
                    .unwrap(),
                "name=modem rate=10mbit qdisc=fifo limit=50kb delay=2ms"
                    .parse()
                    .unwrap(),
            ],
            ..LinkSpec::default()
        };
        let r = direction_record(&l);
        assert_eq!(r.rate_bps, Some(9_000_000));
        assert_eq!(r.qdisc.as_ref().map(|q| q.kind.as_str()), Some("fq_codel"));
        assert_eq!(r.framing.as_deref(), Some("atm"));
        assert_eq!(r.overhead_bytes, Some(44));
        assert_eq!(r.delay_ns, Some(12_000_000));
        let names: Vec<&str> = r.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["router", "modem", "path"]);
        let modem = &r.stages[1];
        assert_eq!(
            (modem.rate_bps, modem.qdisc.as_str(), modem.limit_bytes),
            (Some(10_000_000), "fifo", Some(51_200))
        );
        assert_eq!(modem.framing, None);
        assert!(modem.spec.as_deref().unwrap().contains("limit=50kb"));
    }

    /// A lab's counters with one histogram per direction: `late_us` per direction.
    fn counters(dirs: &[(&str, &[u64])]) -> LabStatus {
        LabStatus {
            name: "w".into(),
            backend: bloatlab_lab::Backend::Userspace,
            uptime_s: 1.0,
            unix_time_s: 1001.0,
            directions: dirs
                .iter()
                .map(|(n, late_us)| {
                    let mut h = Histogram::default();
                    for &us in *late_us {
                        h.record(Duration::from_micros(us));
                    }
                    (
                        n.to_string(),
                        bloatlab_lab::driver::direction::DirectionReport {
                            lateness_histogram: h,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            devices: vec![],
            tun_ring_drops: 0,
            qdiscs: vec![],
            calibration: None,
            host_tracking: None,
        }
    }

    #[test]
    fn a_window_between_two_outside_snapshots_has_each_directions_lateness() {
        // Before: 100 packets released on time. After: 1000 more up, 30 of them 3 ms
        // late; down unchanged; a direction only the second snapshot has is left out.
        let before_up = vec![20u64; 100];
        let mut after_up = before_up.clone();
        after_up.extend(std::iter::repeat_n(40, 970));
        after_up.extend(std::iter::repeat_n(3000, 30));
        let down = vec![10u64; 50];
        let a = counters(&[("up", &before_up), ("down", &down)]);
        let b = counters(&[("up", &after_up), ("down", &down), ("side", &down)]);
        // Through JSON, as the experiment runner reads `lab status --json`.
        let b: LabStatus = serde_json::from_value(serde_json::to_value(&b).unwrap()).unwrap();
        let w = lateness_window(&a, &b);
        let names: Vec<&str> = w.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["up", "down"]);
        let up = w[0].1;
        assert_eq!((up.percentiles.count, up.late_packets), (1000, 30));
        assert!(
            up.fell_behind(),
            "3 % late of 1000 packets is over the bound"
        );
        assert!(up.percentiles.max_ns.unwrap() >= 2_900_000);
        let down = w[1].1;
        assert_eq!(down.percentiles.count, 0);
        assert!(!down.fell_behind());
    }
}
