//! One run of the draft's algorithm (draft-ietf-ippm-responsiveness-09 section 5.4,
//! "Final Algorithm"): load in one direction or both at once, probes throughout, and the
//! two stability stages. Sans-IO: every method takes `now` (time since an origin the
//! caller chooses), the run never reads a clock or touches a socket.
//!
//! # Calling contract
//!
//! 1. [`Run::new`] queues the first INP load-generating connections per direction.
//! 2. Call [`Run::poll`] until it returns `None`, carrying out each [`Action`]; then sleep
//!    until [`Run::poll_at`] (or earlier, when something happened) and poll again.
//! 3. Report what happened: [`Run::load_ready`] when a load connection's transfer
//!    started, [`Run::load_progress`] with its cumulative goodput bytes (call it for every
//!    connection right before each poll, so bytes land in the right interval),
//!    [`Run::probe_done`] / [`Run::probe_failed`], [`Run::load_failed`].
//! 4. When [`Run::is_finished`], [`Run::finish`] gives the [`Outcome`] or the error.
//!
//! # The algorithm
//!
//! At every interval boundary (every ID since the start), per direction: the interval's
//! bytes are closed; the moving-average goodput over the last MAD intervals is computed
//! (over the intervals that exist while fewer than MAD have run, so the first values are
//! not diluted by time before the test); while goodput is not yet saturated, it becomes
//! saturated when the moving averages are stable ([`crate::stability`]); INC connections
//! are added up to MNP whatever the stage (the draft adds them "at each interval", and
//! more connections after saturation are what reveal the buffer). Once every direction of
//! the run is saturated, each boundary also computes the responsiveness over the probes
//! that completed in the last MAD intervals ([`crate::aggregate`]); when those values are
//! stable the run ends with that value. At the deadline the run ends with the
//! responsiveness of the last MAD intervals and the confidence the stages reached
//! (section 5.4.1).
//!
//! A direction's reported capacity, once saturated, is its goodput from the end of the
//! saturation interval to the end of the run (at least the last MAD intervals), not the
//! moving average at saturation: see `DirState::loaded_goodput`.
//!
//! A load connection that fails, or moves no byte for the stall timeout, ends the run with
//! an error: "if at any point one of these connections terminates with an error, the test
//! should be aborted" (5.4). Probes are not load-generating connections: a failed probe is
//! counted (on a deeply bloated path a new connection's handshake can outlast a server's
//! handshake timeout, which is part of what the path does to new connections), and the
//! run fails only when probes mostly fail ([`PROBES_MOSTLY_FAILED`]): a server that
//! refuses them gives no measurement.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bloatlab_units::BitRate;
use serde::{Deserialize, Serialize};

use crate::aggregate::{self, Responsiveness, Samples};
use crate::params::Params;
use crate::schedule::{Schedule, Slot};
use crate::stability::{Confidence, is_stable};

/// The run fails when at least this many probes ended and more than half of them failed.
pub const PROBES_MOSTLY_FAILED: usize = 10;

/// The direction of a load-generating connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// GETs of the large object.
    Download,
    /// POSTs to the upload URL.
    Upload,
}

impl Direction {
    /// `download` or `upload`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        }
    }
}

/// A load-generating connection, numbered from 0 in the order they were asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// A probe, numbered from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProbeId(pub u64);

/// What the driver must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Open a load-generating connection and start its endless transfer.
    OpenLoad {
        /// Its number.
        conn: ConnId,
        /// Download or upload.
        direction: Direction,
    },
    /// A foreign probe: new connection, TCP and TLS handshakes, GET of the small object.
    ForeignProbe {
        /// Its number.
        probe: ProbeId,
    },
    /// A self probe: GET of the small object on this load connection.
    SelfProbe {
        /// Its number.
        probe: ProbeId,
        /// The load connection, picked uniformly at random among the running ones.
        conn: ConnId,
    },
}

/// What a probe measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Foreign probe: TCP handshake, TLS handshake per TLS round trip (`None` without TLS),
    /// the GET from request to the last byte of the response.
    Foreign {
        /// `tcp_f`.
        tcp: Duration,
        /// `tls_f`.
        tls: Option<Duration>,
        /// `http_f`.
        http: Duration,
    },
    /// Self probe: the GET on a load connection (`http_l`).
    SelfProbe {
        /// `http_l`.
        http: Duration,
    },
}

/// A completed probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRecord {
    /// Its number.
    pub probe: ProbeId,
    /// When it was asked for.
    pub sent: Duration,
    /// When its result was reported.
    pub done: Duration,
    /// What it measured.
    pub timing: Timing,
}

/// Bytes a load connection moved between two progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// Previous report.
    pub start: Duration,
    /// This report.
    pub end: Duration,
    /// Goodput bytes in between.
    pub bytes: u64,
}

/// A load connection over the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnRecord {
    /// Its number.
    pub conn: ConnId,
    /// Download or upload.
    pub direction: Direction,
    /// When it was asked for.
    pub opened: Duration,
    /// Its transfers, one per progress report that saw bytes.
    pub transfers: Vec<Transfer>,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// A load connection ended or failed.
    #[error("{direction} load connection {conn} failed: {why}", direction = .direction.name(), conn = .conn.0)]
    LoadFailed {
        /// Which.
        conn: ConnId,
        /// Its direction.
        direction: Direction,
        /// What happened.
        why: String,
    },
    /// A load connection did not start its transfer in time.
    #[error("{direction} load connection {conn} did not start within {secs:.1} s (connection, TLS and first response)", direction = .direction.name(), conn = .conn.0, secs = .after.as_secs_f64())]
    LoadNotStarted {
        /// Which.
        conn: ConnId,
        /// Its direction.
        direction: Direction,
        /// How long it had.
        after: Duration,
    },
    /// A load connection moved nothing for too long.
    #[error("{direction} load connection {conn} stalled: no data moved for {secs:.1} s", direction = .direction.name(), conn = .conn.0, secs = .after.as_secs_f64())]
    LoadStalled {
        /// Which.
        conn: ConnId,
        /// Its direction.
        direction: Direction,
        /// How long nothing moved.
        after: Duration,
    },
    /// Most probes failed.
    #[error("{failed} of {ended} probes failed; the last {kind} probe: {why}")]
    ProbesFailed {
        /// Probes that failed.
        failed: usize,
        /// Probes that ended (completed or failed).
        ended: usize,
        /// `foreign` or `self`, of the last failure.
        kind: &'static str,
        /// What happened to it.
        why: String,
    },
}

/// Limits of a run that are not the draft's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The run ends here whatever its stage (time since the origin).
    pub deadline: Duration,
    /// A running load connection that moves nothing this long ends the run with an error.
    pub stall_timeout: Duration,
    /// A load connection whose transfer has not started this long after it was asked for
    /// ends the run with an error. Longer than the stall timeout: through a deep,
    /// lossy queue a new connection's handshakes back off for seconds.
    pub setup_timeout: Duration,
    /// Foreign probes in flight at once; a slot finding this many is skipped. Bounds the
    /// connections a run opens on a deeply bloated path (a foreign probe then takes
    /// seconds) below servers' per-source caps (bloatlab's: 128).
    pub max_foreign_in_flight: usize,
    /// Self probes in flight at once.
    pub max_self_in_flight: usize,
}

impl Limits {
    /// Defaults with this deadline: a 10 s stall timeout, a 30 s setup timeout, 32
    /// foreign and 64 self probes in flight.
    pub fn until(deadline: Duration) -> Limits {
        Limits {
            deadline,
            stall_timeout: Duration::from_secs(10),
            setup_timeout: Duration::from_secs(30),
            max_foreign_in_flight: 32,
            max_self_in_flight: 64,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// Responsiveness became stable.
    Stable,
    /// The deadline came first.
    Deadline,
}

/// One direction's result.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionOutcome {
    /// Download or upload.
    pub direction: Direction,
    /// Once goodput was saturated: the goodput from the end of the saturation interval
    /// to the last closed interval, over at least the last MAD intervals (see
    /// `DirState::loaded_goodput` for why). Never saturated: the moving average at the
    /// last interval (before any interval ended: bytes over the time run).
    pub capacity: BitRate,
    /// Low / Medium / High.
    pub confidence: Confidence,
    /// The interval (from 0) at whose end goodput became stable.
    pub saturated_at: Option<usize>,
    /// Load connections asked for.
    pub connections: usize,
    /// Moving-average goodput at the end of each interval.
    pub moving_averages: Vec<BitRate>,
}

/// Responsiveness at the end of one interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalRpm {
    /// The interval, from 0.
    pub interval: usize,
    /// Its end (time since the origin).
    pub end: Duration,
    /// Trimmed-mean RPM over the probes of the last MAD intervals; `None` without probes.
    pub rpm: Option<f64>,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Start (time since the origin).
    pub start: Duration,
    /// End.
    pub end: Duration,
    /// Why it ended.
    pub ended: Ended,
    /// Intervals completed.
    pub intervals: usize,
    /// Per direction.
    pub directions: Vec<DirectionOutcome>,
    /// Responsiveness (the stable value, or at the deadline the last MAD intervals');
    /// `None` when not one foreign and one self probe completed.
    pub responsiveness: Option<Responsiveness>,
    /// Its confidence.
    pub responsiveness_confidence: Confidence,
    /// Responsiveness at each interval of the responsiveness stage.
    pub rpm_series: Vec<IntervalRpm>,
    /// Every completed probe.
    pub probes: Vec<ProbeRecord>,
    /// Probes that failed (foreign, self).
    pub failed_probes: (usize, usize),
    /// Every load connection.
    pub connections: Vec<ConnRecord>,
}

#[derive(Debug)]
struct DirState {
    direction: Direction,
    opened: usize,
    bytes_now: u64,
    total: u64,
    intervals: Vec<u64>,
    /// When each interval's bytes were last sampled (the poll that closed it).
    marks: Vec<Duration>,
    mas: Vec<f64>,
    /// The interval (from 0) at whose end goodput was declared saturated.
    saturated: Option<usize>,
}

impl DirState {
    /// Bytes per second over the last `n` closed intervals (fewer while fewer have run),
    /// over the time the bytes were sampled in, so a late poll (bytes past the boundary
    /// in this interval, fewer in the next) does not bias it; the nominal n x ID when
    /// several boundaries closed in one poll. `start`: the run's start, `id`: ID in
    /// seconds.
    fn goodput_over_last(&self, n: usize, start: Duration, id: f64) -> f64 {
        let n = self.intervals.len().min(n);
        let Some(&sampled) = self.marks.last() else {
            return 0.0;
        };
        let bytes: u64 = self.intervals[self.intervals.len() - n..].iter().sum();
        let from = match self.marks.len().checked_sub(n + 1) {
            Some(k) => self.marks[k],
            None => start,
        };
        let span = sampled.saturating_sub(from).as_secs_f64();
        let span = if span > 0.5 * n as f64 * id {
            span
        } else {
            n as f64 * id
        };
        bytes as f64 / span
    }

    /// The capacity a saturated direction reports: the goodput over the whole loaded
    /// span, from the end of the interval where saturation was declared to the last
    /// closed interval, and never over fewer than the last MAD intervals (the draft's
    /// moving-average window; it then reaches back into the saturation interval).
    ///
    /// Why not the moving average at saturation, as before: with a short ID (1 s) a
    /// window of MAD intervals is a few seconds, and an application sees a connection's
    /// bytes only in order, so one loss repaired late moves up to a second of that
    /// connection's bytes from one interval into a later one. A window that takes in
    /// such a release without the hole before it reads high (22.56 Mbit/s through a
    /// 20 Mbit/s lab), one that holds the hole but not the release reads low, and the
    /// window at saturation still holds the ramp's held-back bytes. Bytes are only
    /// moved, never made: over a longer span the shift is a smaller part of the total.
    /// The draft (section 5.4) defines the moving average for deciding saturation and
    /// does not say which goodput to report; this one is the goodput the loaded
    /// responsiveness was measured under, over every interval known to be at capacity.
    fn loaded_goodput(&self, saturated_at: usize, mad: usize, start: Duration, id: f64) -> f64 {
        let after = self.intervals.len().saturating_sub(saturated_at + 1);
        self.goodput_over_last(after.max(mad), start, id)
    }
}

#[derive(Debug)]
struct ConnState {
    direction: Direction,
    opened: Duration,
    ready: bool,
    total: u64,
    last_move: Duration,
    transfers: Vec<Transfer>,
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    sent: Duration,
    foreign: bool,
}

#[derive(Debug)]
enum State {
    Running,
    Done(Ended, Duration),
    Failed(RunError),
}

/// One run: see the module docs.
#[derive(Debug)]
pub struct Run {
    params: Params,
    limits: Limits,
    start: Duration,
    next_boundary: Duration,
    intervals: usize,
    dirs: Vec<DirState>,
    conns: BTreeMap<ConnId, ConnState>,
    next_conn: u32,
    next_probe: u64,
    in_flight: BTreeMap<ProbeId, InFlight>,
    probes: Vec<ProbeRecord>,
    failed_probes: (usize, usize),
    schedule: Schedule,
    rpm_values: Vec<f64>,
    rpm_series: Vec<IntervalRpm>,
    stable: Option<Responsiveness>,
    queue: VecDeque<Action>,
    rng: u64,
    state: State,
}

impl Run {
    /// A run loading `directions` (one, or both at once), starting at `start`. `seed`
    /// drives the random pick of self-probe connections.
    pub fn new(
        params: Params,
        directions: &[Direction],
        start: Duration,
        limits: Limits,
        seed: u64,
    ) -> Run {
        let mut run = Run {
            params,
            limits,
            start,
            next_boundary: start + params.interval,
            intervals: 0,
            dirs: directions
                .iter()
                .map(|&direction| DirState {
                    direction,
                    opened: 0,
                    bytes_now: 0,
                    total: 0,
                    intervals: Vec::new(),
                    marks: Vec::new(),
                    mas: Vec::new(),
                    saturated: None,
                })
                .collect(),
            conns: BTreeMap::new(),
            next_conn: 0,
            next_probe: 0,
            in_flight: BTreeMap::new(),
            probes: Vec::new(),
            failed_probes: (0, 0),
            schedule: Schedule::new(start, &params),
            rpm_values: Vec::new(),
            rpm_series: Vec::new(),
            stable: None,
            queue: VecDeque::new(),
            // xorshift needs a non-zero state.
            rng: seed | 1,
            state: State::Running,
        };
        for d in 0..run.dirs.len() {
            run.open(d, params.initial_connections, start);
        }
        run
    }

    fn open(&mut self, d: usize, n: usize, now: Duration) {
        let dir = &mut self.dirs[d];
        let n = n.min(self.params.max_connections.saturating_sub(dir.opened));
        dir.opened += n;
        let direction = dir.direction;
        for _ in 0..n {
            let conn = ConnId(self.next_conn);
            self.next_conn += 1;
            self.conns.insert(
                conn,
                ConnState {
                    direction,
                    opened: now,
                    ready: false,
                    total: 0,
                    last_move: now,
                    transfers: Vec::new(),
                },
            );
            self.queue.push_back(Action::OpenLoad { conn, direction });
        }
    }

    /// Whether the run has ended (stable, deadline or failed).
    pub fn is_finished(&self) -> bool {
        !matches!(self.state, State::Running)
    }

    /// When to poll next at the latest; `None` once finished.
    pub fn poll_at(&self) -> Option<Duration> {
        if self.is_finished() {
            return None;
        }
        if !self.queue.is_empty() {
            return Some(self.start);
        }
        let stall = self.conns.values().map(|c| self.stall_at(c)).min();
        [
            Some(self.next_boundary),
            Some(self.schedule.next_at()),
            Some(self.limits.deadline),
            stall,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The next action due at `now`, if any.
    pub fn poll(&mut self, now: Duration) -> Option<Action> {
        if self.is_finished() {
            return None;
        }
        if let Some(a) = self.queue.pop_front() {
            return Some(a);
        }
        if let Some((&conn, c)) = self.conns.iter().find(|(_, c)| now >= self.stall_at(c)) {
            self.state = State::Failed(if c.ready {
                RunError::LoadStalled {
                    conn,
                    direction: c.direction,
                    after: now - c.last_move,
                }
            } else {
                RunError::LoadNotStarted {
                    conn,
                    direction: c.direction,
                    after: now - c.opened,
                }
            });
            return None;
        }
        // Intervals that end by the deadline count, the one ending on it included.
        while now >= self.next_boundary && self.next_boundary <= self.limits.deadline {
            let end = self.next_boundary;
            self.close_interval(end, now);
            self.next_boundary += self.params.interval;
            if self.stable.is_some() {
                self.state = State::Done(Ended::Stable, end);
                return None;
            }
        }
        if now >= self.limits.deadline {
            self.state = State::Done(Ended::Deadline, self.limits.deadline);
            return None;
        }
        if let Some(slot) = self.schedule.due(now, self.capacity_estimate(now)) {
            self.probe(slot, now);
        }
        self.queue.pop_front()
    }

    /// When a connection counts as stalled (running) or as not started.
    fn stall_at(&self, c: &ConnState) -> Duration {
        if c.ready {
            c.last_move + self.limits.stall_timeout
        } else {
            c.opened + self.limits.setup_timeout
        }
    }

    fn probe(&mut self, slot: Slot, now: Duration) {
        let foreign = slot == Slot::Foreign;
        let cap = if foreign {
            self.limits.max_foreign_in_flight
        } else {
            self.limits.max_self_in_flight
        };
        let n = self
            .in_flight
            .values()
            .filter(|p| p.foreign == foreign)
            .count();
        if n >= cap {
            return;
        }
        let action = if foreign {
            Action::ForeignProbe {
                probe: ProbeId(self.next_probe),
            }
        } else {
            let ready: Vec<ConnId> = self
                .conns
                .iter()
                .filter(|(_, c)| c.ready)
                .map(|(&id, _)| id)
                .collect();
            if ready.is_empty() {
                return;
            }
            let pick = (self.random() % ready.len() as u64) as usize;
            Action::SelfProbe {
                probe: ProbeId(self.next_probe),
                conn: ready[pick],
            }
        };
        self.in_flight
            .insert(ProbeId(self.next_probe), InFlight { sent: now, foreign });
        self.next_probe += 1;
        self.queue.push_back(action);
    }

    /// xorshift64: a uniform enough pick among at most a few dozen connections.
    fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Bytes per second measured so far over the run's directions: each direction's last
    /// moving average, or before its first interval ended, its bytes over the time run.
    fn capacity_estimate(&self, now: Duration) -> f64 {
        let elapsed = now.saturating_sub(self.start).as_secs_f64();
        self.dirs
            .iter()
            .map(|d| match d.mas.last() {
                Some(&ma) => ma,
                None if elapsed > 0.0 => d.total as f64 / elapsed,
                None => 0.0,
            })
            .sum()
    }

    /// Closes the interval ending at `end`, whose bytes were sampled at `sampled` (at or
    /// after `end`: the poll that closes it).
    fn close_interval(&mut self, end: Duration, sampled: Duration) {
        let i = self.intervals;
        let start = self.start;
        let (mad, sdt, id) = (
            self.params.mad,
            self.params.stdev_tolerance,
            self.params.interval.as_secs_f64(),
        );
        for d in &mut self.dirs {
            d.intervals.push(std::mem::take(&mut d.bytes_now));
            d.marks.push(sampled);
            let ma = d.goodput_over_last(mad, start, id);
            d.mas.push(ma);
            if d.saturated.is_none() && is_stable(&d.mas, mad, sdt) {
                d.saturated = Some(i);
            }
        }
        for d in 0..self.dirs.len() {
            self.open(d, self.params.connections_per_interval, end);
        }
        if self.dirs.iter().all(|d| d.saturated.is_some()) {
            let r = self.responsiveness_until(end);
            let rpm = r.map(|r| r.trimmed.rpm);
            self.rpm_values.push(rpm.unwrap_or(f64::NAN));
            self.rpm_series.push(IntervalRpm {
                interval: i,
                end,
                rpm,
            });
            if is_stable(&self.rpm_values, mad, sdt) {
                self.stable = r;
            }
        }
        self.intervals += 1;
    }

    /// Responsiveness over the probes that completed in the MAD intervals before `end`.
    fn responsiveness_until(&self, end: Duration) -> Option<Responsiveness> {
        let window = self.params.interval * self.params.mad as u32;
        let from = end.saturating_sub(window);
        let mut s = Samples::default();
        for p in self
            .probes
            .iter()
            .filter(|p| p.done > from && p.done <= end)
        {
            match p.timing {
                Timing::Foreign { tcp, tls, http } => {
                    s.tcp_f.push(tcp);
                    s.tls_f.extend(tls);
                    s.http_f.push(http);
                }
                Timing::SelfProbe { http } => s.http_l.push(http),
            }
        }
        aggregate::responsiveness(&s, self.params.trim)
    }

    /// A load connection's transfer started (response headers received, or the upload's
    /// request accepted): it can now carry self probes.
    pub fn load_ready(&mut self, now: Duration, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.ready = true;
            c.last_move = c.last_move.max(now);
        }
    }

    /// A load connection's cumulative goodput bytes (download: body bytes received;
    /// upload: bytes the peer acknowledged).
    pub fn load_progress(&mut self, now: Duration, conn: ConnId, total: u64) {
        if self.is_finished() {
            return;
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if total <= c.total {
            return;
        }
        let delta = total - c.total;
        c.transfers.push(Transfer {
            start: c.transfers.last().map_or(c.opened, |t| t.end),
            end: now,
            bytes: delta,
        });
        c.total = total;
        c.last_move = now;
        let direction = c.direction;
        if let Some(d) = self.dirs.iter_mut().find(|d| d.direction == direction) {
            d.bytes_now += delta;
            d.total += delta;
        }
    }

    /// A load connection failed or its transfer ended: the run fails.
    pub fn load_failed(&mut self, _now: Duration, conn: ConnId, why: String) {
        if self.is_finished() {
            return;
        }
        let direction = self
            .conns
            .get(&conn)
            .map_or(Direction::Download, |c| c.direction);
        self.state = State::Failed(RunError::LoadFailed {
            conn,
            direction,
            why,
        });
    }

    /// A probe completed.
    pub fn probe_done(&mut self, now: Duration, probe: ProbeId, timing: Timing) {
        if self.is_finished() {
            return;
        }
        if let Some(f) = self.in_flight.remove(&probe) {
            self.probes.push(ProbeRecord {
                probe,
                sent: f.sent,
                done: now,
                timing,
            });
        }
    }

    /// A probe failed: counted; the run fails when probes mostly fail.
    pub fn probe_failed(&mut self, _now: Duration, probe: ProbeId, why: String) {
        if self.is_finished() {
            return;
        }
        let foreign = self.in_flight.remove(&probe).is_none_or(|f| f.foreign);
        if foreign {
            self.failed_probes.0 += 1;
        } else {
            self.failed_probes.1 += 1;
        }
        let failed = self.failed_probes.0 + self.failed_probes.1;
        let ended = failed + self.probes.len();
        if ended >= PROBES_MOSTLY_FAILED && 2 * failed > ended {
            self.state = State::Failed(RunError::ProbesFailed {
                failed,
                ended,
                kind: if foreign { "foreign" } else { "self" },
                why,
            });
        }
    }

    /// Ends the run now as if its deadline had come (the user interrupted it).
    pub fn stop(&mut self, now: Duration) {
        if !self.is_finished() {
            self.state = State::Done(Ended::Deadline, now.min(self.limits.deadline));
        }
    }

    /// Where the run is, for progress lines.
    pub fn progress(&self) -> Progress {
        Progress {
            intervals: self.intervals,
            directions: self
                .dirs
                .iter()
                .map(|d| DirectionProgress {
                    direction: d.direction,
                    connections: d.opened,
                    goodput: d.mas.last().map(|&ma| bit_rate(ma)),
                    saturated: d.saturated.is_some(),
                })
                .collect(),
            rpm: self.rpm_series.last().and_then(|r| r.rpm),
            probes: self.probes.len(),
        }
    }

    /// The outcome, once finished (a run still running is ended here, as at its
    /// deadline).
    pub fn finish(self) -> Result<Outcome, RunError> {
        let (ended, end) = match self.state {
            State::Failed(e) => return Err(e),
            State::Done(ended, end) => (ended, end),
            State::Running => (Ended::Deadline, self.limits.deadline),
        };
        let mad = self.params.mad;
        let id = self.params.interval.as_secs_f64();
        let elapsed = end.saturating_sub(self.start).as_secs_f64();
        let directions = self
            .dirs
            .iter()
            .map(|d| {
                let capacity = match (d.saturated, d.mas.last()) {
                    (Some(i), _) => d.loaded_goodput(i, mad, self.start, id),
                    (None, Some(&ma)) => ma,
                    (None, None) if elapsed > 0.0 => d.total as f64 / elapsed,
                    (None, None) => 0.0,
                };
                DirectionOutcome {
                    direction: d.direction,
                    capacity: bit_rate(capacity),
                    confidence: Confidence::of(d.mas.len(), mad, d.saturated.is_some()),
                    saturated_at: d.saturated,
                    connections: d.opened,
                    moving_averages: d.mas.iter().map(|&ma| bit_rate(ma)).collect(),
                }
            })
            .collect();
        let responsiveness = match ended {
            Ended::Stable => self.stable,
            Ended::Deadline => self.responsiveness_until(end),
        };
        let connections = self
            .conns
            .into_iter()
            .map(|(conn, c)| ConnRecord {
                conn,
                direction: c.direction,
                opened: c.opened,
                transfers: c.transfers,
            })
            .collect();
        Ok(Outcome {
            start: self.start,
            end,
            ended,
            intervals: self.intervals,
            directions,
            responsiveness,
            responsiveness_confidence: Confidence::of(
                self.rpm_values.len(),
                mad,
                ended == Ended::Stable,
            ),
            rpm_series: self.rpm_series,
            probes: self.probes,
            failed_probes: self.failed_probes,
            connections,
        })
    }
}

fn bit_rate(bytes_per_s: f64) -> BitRate {
    BitRate((bytes_per_s * 8.0).round().max(0.0) as u64)
}

/// A run's state for a progress line.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Intervals completed.
    pub intervals: usize,
    /// Per direction.
    pub directions: Vec<DirectionProgress>,
    /// Responsiveness at the last interval of the responsiveness stage.
    pub rpm: Option<f64>,
    /// Probes completed.
    pub probes: usize,
}

/// One direction in a [`Progress`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirectionProgress {
    /// Download or upload.
    pub direction: Direction,
    /// Load connections asked for.
    pub connections: usize,
    /// Moving-average goodput at the last interval.
    pub goodput: Option<BitRate>,
    /// Goodput is stable.
    pub saturated: bool,
}
