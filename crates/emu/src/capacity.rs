//! Link capacity that changes with time: a rate schedule, or a delivery trace in mahimahi's
//! format. Both are sans-IO: they are functions of the link's virtual time, whose origin is the
//! link's (the lab's `lab up`), and both loop.
//!
//! * **Schedule** (`schedule:0s/20mbit,10s/5mbit,15s/30mbit`): from each offset on, that rate.
//!   The first step starts at `0s` and offsets increase. The schedule starts over after its
//!   last step, which lasts as long as the step before it (so `0s/20mbit,5s/5mbit` alternates
//!   every 5 s), unless it ends with `T/loop`, which says when it starts over
//!   (`0s/20mbit,10s/5mbit,12s/loop`). One step is a fixed rate. The serializer integrates the
//!   rate over the steps, so a packet that straddles a change is sent partly at each rate. Delay
//!   schedules ([`Schedule<Duration>`], `delay=schedule:0s/20ms,10s/200ms`) use the same syntax.
//! * **Trace** (`trace:FILE`, mahimahi's `mm-link` format): one line per delivery opportunity of
//!   one 1500-byte packet, the time in whole milliseconds since the start, non-decreasing (two
//!   equal lines are two opportunities in the same millisecond). The trace loops with a period
//!   of its last time. Blank lines and lines starting with `#` are skipped (our generator writes
//!   how it made the trace there; mahimahi itself has no comments). An opportunity carries 1500
//!   bytes of credit: a packet leaves at the opportunity that completes its wire bytes, credit
//!   left over serves the next packet if it is already waiting, and opportunities on an idle
//!   link are lost, as in mahimahi's `LinkQueue`. A packet waiting for an opportunity is still
//!   in the qdisc: that wait is queueing delay in the sojourn statistics, and the qdisc's AQM
//!   sees it.

use crate::spec::{Problem, SpecError, format_time, parse_rate, parse_time};
use bloatlab_units::BitRate;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Bytes one trace line lets through (mahimahi's `PACKET_SIZE`).
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// Most steps a schedule may have (a typo guard; a trace is the tool for fine detail).
pub const MAX_STEPS: usize = 10_000;

/// Largest trace file read (50 million lines of up to 9 digits and a newline, and comments).
pub const MAX_FILE_BYTES: u64 = 512 << 20;

/// Most opportunities a trace file may hold: 50 million lines is 10 minutes of 1 Gbit/s.
pub const MAX_OPPORTUNITIES: usize = 50_000_000;

/// A value that changes at given offsets and loops.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule<T> {
    /// `(offset, value)`, the first at zero, offsets increasing.
    steps: Vec<(Duration, T)>,
    /// When the schedule starts over; `None` for a single step (a constant).
    period: Option<Duration>,
}

impl<T: Copy> Schedule<T> {
    /// The value in force at `t`.
    pub fn at(&self, t: Duration) -> T {
        let (_, i, _) = self.locate(t);
        self.steps[i].1
    }

    /// The steps, `(offset, value)`.
    pub fn steps(&self) -> &[(Duration, T)] {
        &self.steps
    }

    /// When the schedule starts over (`None`: one step, constant).
    pub fn period(&self) -> Option<Duration> {
        self.period
    }

    /// `(start of the cycle holding t, index of the step in force, absolute end of that
    /// step or None if it never ends)`.
    fn locate(&self, t: Duration) -> (Duration, usize, Option<Duration>) {
        let Some(period) = self.period else {
            return (Duration::ZERO, 0, None);
        };
        let p = period.as_nanos();
        let cycles = t.as_nanos() / p;
        let base = nanos(cycles * p);
        let off = t - base;
        // The last step whose offset is at or before `off` (the first is at zero).
        let i = self.steps.partition_point(|(o, _)| *o <= off) - 1;
        let end = self.steps.get(i + 1).map_or(period, |(o, _)| *o);
        (base, i, Some(base + end))
    }
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

impl Schedule<BitRate> {
    /// When a packet of `bits` that starts at `start` has been sent, the rate integrated over
    /// the steps it spans.
    pub fn finish(&self, start: Duration, bits: u64) -> Duration {
        let mut t = start;
        // Bits left, scaled by 1e9 so that rate x nanoseconds stays exact.
        let mut left = u128::from(bits) * 1_000_000_000;
        loop {
            let (_, i, end) = self.locate(t);
            let rate = u128::from(self.steps[i].1.0);
            let need = left.div_ceil(rate);
            match end {
                Some(end) if t + nanos(need) > end => {
                    left -= (end - t).as_nanos() * rate;
                    t = end;
                }
                _ => return t + nanos(need),
            }
        }
    }

    /// The highest rate of the schedule.
    pub fn max(&self) -> BitRate {
        self.steps.iter().map(|s| s.1).max().unwrap_or(BitRate(0))
    }
}

impl Schedule<Duration> {
    /// The longest delay of the schedule.
    pub fn max(&self) -> Duration {
        self.steps.iter().map(|s| s.1).max().unwrap_or_default()
    }
}

/// Parses the steps after `schedule:` (`0s/20mbit,10s/5mbit[,20s/loop]`) with `value` for each
/// value. Errors are attributed to `field` and name the step (1-based) and its text.
pub fn parse_schedule<T: Copy>(
    field: &str,
    text: &str,
    value: impl Fn(&str) -> Result<T, SpecError>,
) -> Result<Schedule<T>, SpecError> {
    let whole = format!("schedule:{text}");
    let bad = |n: usize, step: &str, why: String| {
        SpecError::new(
            field,
            whole.clone(),
            Problem::Invalid(format!("step {n} ({step:?}): {why}")),
        )
    };
    let mut steps: Vec<(Duration, T)> = Vec::new();
    let mut period = None;
    let words: Vec<&str> = text.split(',').map(str::trim).collect();
    if words.len() > MAX_STEPS + 1 {
        return Err(SpecError::new(
            field,
            whole.clone(),
            Problem::OutOfRange(format!("at most {MAX_STEPS} steps")),
        ));
    }
    for (i, step) in words.iter().enumerate() {
        let n = i + 1;
        if period.is_some() {
            return Err(bad(n, step, "nothing may follow the `T/loop` step".into()));
        }
        let (at, v) = step.split_once('/').ok_or_else(|| {
            bad(
                n,
                step,
                "write OFFSET/VALUE, e.g. 0s/20mbit or 10s/40ms".into(),
            )
        })?;
        let at =
            parse_time(at.trim()).map_err(|e| bad(n, step, format!("offset {}", e.problem)))?;
        match steps.last() {
            None if !at.is_zero() => {
                return Err(bad(n, step, "the first step must start at 0s".into()));
            }
            Some((prev, _)) if at <= *prev => {
                return Err(bad(
                    n,
                    step,
                    format!(
                        "offsets must increase: {} is not after {}",
                        format_time(at),
                        format_time(*prev)
                    ),
                ));
            }
            _ => {}
        }
        if v.trim() == "loop" {
            if steps.is_empty() {
                return Err(bad(n, step, "a schedule needs a step before `loop`".into()));
            }
            period = Some(at);
            continue;
        }
        let v =
            value(v.trim()).map_err(|e| bad(n, step, format!("{:?} {}", e.value, e.problem)))?;
        steps.push((at, v));
    }
    let period = match (period, steps.as_slice()) {
        (Some(p), _) => Some(p),
        (None, [_]) => None,
        // The last step lasts as long as the one before it.
        (None, [.., (a, _), (b, _)]) => Some(*b + (*b - *a)),
        (None, []) => return Err(SpecError::new(field, whole.clone(), Problem::MissingValue)),
    };
    Ok(Schedule { steps, period })
}

/// A delivery trace in mahimahi's format (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityTrace {
    /// The file it was read from, as the user named it.
    name: String,
    /// Opportunity times within one loop, non-decreasing.
    times: Vec<Duration>,
    /// The last line's time: the trace loops with this period.
    period: Duration,
}

/// A trace that could not be read: the file, the line (1-based) when one line is at fault,
/// and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TraceError {
    /// The file as the user named it.
    pub file: String,
    /// The 1-based line at fault, if one is.
    pub line: Option<usize>,
    /// What is wrong.
    pub why: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.why),
            None => write!(f, "{}: {}", self.file, self.why),
        }
    }
}

impl CapacityTrace {
    /// Parses a trace's text; `name` is how errors call the file.
    pub fn parse(name: &str, text: &str) -> Result<CapacityTrace, TraceError> {
        let err = |line: Option<usize>, why: String| TraceError {
            file: name.to_string(),
            line,
            why,
        };
        let mut times = Vec::new();
        let mut last: Option<(u64, usize)> = None;
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let ms: u64 = l.parse().map_err(|_| {
                err(
                    Some(n),
                    format!("{l:?} is not a time in whole milliseconds"),
                )
            })?;
            if let Some((prev, prev_line)) = last
                && ms < prev
            {
                return Err(err(
                    Some(n),
                    format!(
                        "{ms} ms is earlier than line {prev_line}'s {prev} ms: a trace's times \
                         must not decrease"
                    ),
                ));
            }
            if ms > 1_000_000_000 {
                return Err(err(Some(n), format!("{ms} ms is over 10^9 ms")));
            }
            if times.len() == MAX_OPPORTUNITIES {
                return Err(err(Some(n), format!("more than {MAX_OPPORTUNITIES} lines")));
            }
            times.push(Duration::from_millis(ms));
            last = Some((ms, n));
        }
        let Some((period, line)) = last else {
            return Err(err(
                None,
                "empty trace: no delivery opportunities (one line per 1500-byte packet, \
                 in milliseconds)"
                    .into(),
            ));
        };
        if period == 0 {
            return Err(err(
                Some(line),
                "the last time is 0 ms: a trace loops with the period of its last time, \
                 which must be positive"
                    .into(),
            ));
        }
        Ok(CapacityTrace {
            name: name.to_string(),
            times,
            period: Duration::from_millis(period),
        })
    }

    /// Reads and parses the trace file at `path`. The only file access of this crate, made
    /// while a config is built, never while the link runs.
    pub fn load(path: &str) -> Result<CapacityTrace, TraceError> {
        use std::io::Read;
        let err = |why: String| TraceError {
            file: path.to_string(),
            line: None,
            why,
        };
        // Bounded: `trace:/dev/zero` must be an error, not all the memory there is.
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| err(e.to_string()))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(err(format!("larger than {} MiB", MAX_FILE_BYTES >> 20)));
        }
        let text = String::from_utf8(bytes).map_err(|_| err("not text (UTF-8)".into()))?;
        CapacityTrace::parse(path, &text)
    }

    /// The file's name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The loop period (the last line's time).
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Opportunities per loop.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Always false: an empty trace is refused.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The mean capacity over one loop.
    pub fn mean_rate(&self) -> BitRate {
        let bits = self.times.len() as u128 * u128::from(OPPORTUNITY_BYTES) * 8 * 1_000_000_000;
        BitRate(u64::try_from(bits / self.period.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The highest capacity over any 1 ms (every opportunity of the busiest millisecond).
    pub fn peak_rate(&self) -> BitRate {
        let mut best = 0u64;
        let mut run = 0u64;
        let mut prev = None;
        for t in &self.times {
            run = if prev == Some(*t) { run + 1 } else { 1 };
            best = best.max(run);
            prev = Some(*t);
        }
        BitRate(best * OPPORTUNITY_BYTES * 8 * 1000)
    }

    /// The capacity in each `window` from `start` for `count` windows, bits per second, as the
    /// trace gives it (opportunities x 1500 bytes): what a test compares delivered rates with.
    pub fn rate_per_window(&self, start: Duration, window: Duration, count: usize) -> Vec<f64> {
        let mut out = vec![0u64; count];
        let end = start + window * count as u32;
        let mut cursor = Cursor::default();
        cursor.seek(self, start);
        loop {
            let t = cursor.time(self);
            if t >= end {
                break;
            }
            let w = ((t - start).as_nanos() / window.as_nanos()) as usize;
            out[w] += 1;
            cursor.next(self);
        }
        out.into_iter()
            .map(|n| (n * OPPORTUNITY_BYTES * 8) as f64 / window.as_secs_f64())
            .collect()
    }
}

/// The link's position in a trace: which loop, which opportunity, and how much credit that
/// opportunity has left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    cycle: u64,
    index: usize,
    /// Bytes left in the current opportunity.
    credit: u64,
}

impl Cursor {
    /// The absolute time of the current opportunity.
    fn time(&self, tr: &CapacityTrace) -> Duration {
        nanos(u128::from(self.cycle) * tr.period.as_nanos()) + tr.times[self.index]
    }

    fn next(&mut self, tr: &CapacityTrace) {
        self.index += 1;
        if self.index == tr.times.len() {
            self.index = 0;
            self.cycle += 1;
        }
        self.credit = OPPORTUNITY_BYTES;
    }

    /// Moves to the first opportunity at or after `t` (a full one). Binary search: an idle
    /// link skips any number of lost opportunities in O(log n).
    fn seek(&mut self, tr: &CapacityTrace, t: Duration) {
        let p = tr.period.as_nanos();
        let mut cycle = (t.as_nanos() / p) as u64;
        let off = t - nanos(u128::from(cycle) * p);
        let mut index = tr.times.partition_point(|x| *x < off);
        if index == tr.times.len() {
            index = 0;
            cycle += 1;
        }
        *self = Cursor {
            cycle,
            index,
            credit: OPPORTUNITY_BYTES,
        };
    }

    /// Where the cursor would be for a packet that can start at `t`: the current opportunity
    /// if it is at or after `t` and has credit left, else the first one after.
    fn ready_for(&self, tr: &CapacityTrace, t: Duration) -> Cursor {
        let mut c = *self;
        if c.credit == 0 {
            c.next(tr);
        }
        if c.time(tr) < t {
            c.seek(tr, t);
        }
        c
    }
}

/// A link's capacity when it is not a fixed rate (see the module docs). Cheap to clone: the
/// steps or the trace are shared.
#[derive(Debug, Clone, PartialEq)]
pub enum Capacity {
    /// A rate schedule.
    Schedule(Arc<Schedule<BitRate>>),
    /// A delivery trace.
    Trace(Arc<CapacityTrace>),
}

impl Capacity {
    /// Parses `schedule:STEPS` or `trace:FILE` (reading the file); `None` if `text` is neither
    /// (a plain rate). Errors are attributed to `rate` and name the step, or the file and line.
    pub fn parse(text: &str) -> Option<Result<Capacity, SpecError>> {
        if let Some(steps) = text.strip_prefix("schedule:") {
            return Some(
                parse_schedule("rate", steps, parse_rate).map(|s| Capacity::Schedule(Arc::new(s))),
            );
        }
        let file = text.strip_prefix("trace:")?;
        Some(
            CapacityTrace::load(file.trim())
                .map(|t| Capacity::Trace(Arc::new(t)))
                .map_err(|e| SpecError::new("rate", text, Problem::Invalid(e.to_string()))),
        )
    }

    /// A representative rate: the first step's, or the trace's mean. The qdisc is built with
    /// it (CAKE without `bandwidth`), and status shows it before the link runs.
    pub fn nominal(&self) -> BitRate {
        match self {
            Capacity::Schedule(s) => s.steps[0].1,
            Capacity::Trace(t) => t.mean_rate(),
        }
    }

    /// The highest rate the link can reach (bounds the bytes in flight).
    pub fn max(&self) -> BitRate {
        match self {
            Capacity::Schedule(s) => s.max(),
            Capacity::Trace(t) => t.peak_rate(),
        }
    }
}

impl fmt::Display for Capacity {
    /// `schedule 0s/20mbit,5s/5mbit loop 10s` or `trace FILE (mean 12 Mbit/s, loop 60s)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capacity::Schedule(s) => {
                write!(f, "schedule ")?;
                for (i, (at, r)) in s.steps.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(
                        f,
                        "{sep}{}/{}",
                        format_time(*at),
                        crate::Spelled::<BitRate>::from(*r)
                    )?;
                }
                if let Some(p) = s.period {
                    write!(f, " loop {}", format_time(p))?;
                }
                Ok(())
            }
            Capacity::Trace(t) => write!(
                f,
                "trace {} (mean {}, loop {})",
                t.name,
                t.mean_rate(),
                format_time(t.period)
            ),
        }
    }
}

/// A link's rate as the user gives it: a fixed rate (`20mbit`), a schedule
/// (`schedule:0s/20mbit,5s/5mbit`) or a trace (`trace:FILE`, read when parsed).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkRate {
    /// The fixed rate, or the capacity's nominal rate ([`Capacity::nominal`]).
    pub nominal: BitRate,
    /// The schedule or trace, if the rate varies.
    pub capacity: Option<Capacity>,
}

impl crate::spelled::TcValue for LinkRate {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        match Capacity::parse(text.trim()) {
            Some(c) => {
                let c = c?;
                Ok(LinkRate {
                    nominal: c.nominal(),
                    capacity: Some(c),
                })
            }
            None => Ok(LinkRate {
                nominal: parse_rate(text)?,
                capacity: None,
            }),
        }
    }

    /// A stored `trace:FILE` whose file cannot be read any more reads back as a placeholder
    /// (1 bit/s, no capacity): the lab's state stays readable.
    fn parse_stored(text: &str) -> Result<Self, SpecError> {
        match Self::parse_tc(text) {
            Err(_) if text.trim().starts_with("trace:") => Ok(LinkRate {
                nominal: BitRate(1),
                capacity: None,
            }),
            r => r,
        }
    }
}

impl From<BitRate> for LinkRate {
    fn from(r: BitRate) -> Self {
        LinkRate {
            nominal: r,
            capacity: None,
        }
    }
}

/// The serializer's state for a [`Capacity`]: the steps or the trace, the cursor in a trace,
/// and the link time the capacity's own time starts from (zero from [`crate::Link::new`], the
/// time of the change when `lab set` installs one while the link runs).
#[derive(Debug, Clone)]
pub(crate) struct Varying {
    epoch: Duration,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Schedule(Arc<Schedule<BitRate>>),
    Trace(Arc<CapacityTrace>, Cursor),
}

impl Varying {
    pub(crate) fn new(c: &Capacity, epoch: Duration) -> Varying {
        let kind = match c {
            Capacity::Schedule(s) => Kind::Schedule(s.clone()),
            Capacity::Trace(t) => {
                let mut cursor = Cursor::default();
                cursor.seek(t, Duration::ZERO);
                Kind::Trace(t.clone(), cursor)
            }
        };
        Varying { epoch, kind }
    }

    /// When a packet that could start at link time `t` starts: at once with a schedule, at the
    /// next opportunity with credit left with a trace.
    pub(crate) fn start(&self, t: Duration) -> Duration {
        match &self.kind {
            Kind::Schedule(_) => t,
            Kind::Trace(tr, c) => {
                self.epoch + c.ready_for(tr, t.saturating_sub(self.epoch)).time(tr)
            }
        }
    }

    /// Sends `wire` bytes starting at link time `start` (as [`Varying::start`] gave it);
    /// returns when the last byte has been sent.
    pub(crate) fn send(&mut self, start: Duration, wire: u64) -> Duration {
        let local = start.saturating_sub(self.epoch);
        let end = match &mut self.kind {
            Kind::Schedule(s) => s.finish(local, wire * 8),
            Kind::Trace(tr, c) => {
                *c = c.ready_for(tr, local);
                let mut left = wire;
                loop {
                    let used = left.min(c.credit);
                    c.credit -= used;
                    left -= used;
                    if left == 0 {
                        break c.time(tr);
                    }
                    c.next(tr);
                }
            }
        };
        self.epoch + end
    }

    /// The rate in force at link time `t` (a schedule's step; a trace's mean).
    pub(crate) fn rate_at(&self, t: Duration) -> BitRate {
        match &self.kind {
            Kind::Schedule(s) => s.at(t.saturating_sub(self.epoch)),
            Kind::Trace(tr, _) => tr.mean_rate(),
        }
    }
}

/// A delay schedule running from link time `epoch`.
#[derive(Debug, Clone)]
pub(crate) struct DelayPlan {
    pub(crate) epoch: Duration,
    pub(crate) schedule: Arc<Schedule<Duration>>,
}

impl DelayPlan {
    pub(crate) fn at(&self, t: Duration) -> Duration {
        self.schedule.at(t.saturating_sub(self.epoch))
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
