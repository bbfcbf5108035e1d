//! A chain of link stages: one direction made of several [`Link`]s in series, each with its own
//! rate, delay, loss, queue limit, qdisc and link-layer overhead.
//!
//! ```text
//! enqueue(now) -> [stage 1: loss -> qdisc -> serializer -> delay] -> [stage 2: ...] -> ... -> dequeue(now)
//! ```
//!
//! Report 4 of the field reports is the model: the home router's shaper (fq_codel or cake at
//! rate R, ATM framing + 44 bytes) in front of the modem's DSL line (a deep FIFO at the sync
//! rate). While R is below the line rate the queue builds in the shaper, where the AQM keeps
//! it short; once R exceeds the line rate the FIFO behind it fills instead.
//!
//! **Virtual time.** A packet leaves stage `i` at its virtual delivery time `t` (see
//! [`Link::dequeue_timed`]) and enters stage `i + 1` at that same `t`, whatever time the caller
//! woke up at. Every call hands packets over stage by stage in order, so each stage sees its
//! arrivals in time order. The calling contract is [`Link`]'s: times never go backwards; call
//! [`Chain::dequeue`] until it returns `None`, then sleep until [`Chain::next_event`].
//!
//! **Counters.** Each stage keeps its own [`Counters`]. [`Chain::counters`] sums them into one
//! set for the whole direction; conservation holds for the sum because a packet leaving
//! stage `i` is enqueued into stage `i + 1` in the same call. The direction's `sojourn` is not
//! a merge of the stages' samples: each packet carries the time it waited in queues so far, and
//! the chain records the total once per packet that leaves the last stage.
//!
//! **Shapers.** A stage is store-and-forward by default: a packet reaches the next stage when
//! its last bit is sent. A home router's shaper (HTB, TBF or CAKE in front of an Ethernet port)
//! is not: it sends a packet at wire speed as soon as its token bucket allows, and the *next*
//! packet waits out the slot. The stage key `shaper` ([`LinkConfig::shaper`]) models that. It
//! matters when the next stage is nearly as slow: with report 4's ATM uplink (a 1500-byte
//! packet is 1749 bytes on the wire: 19.0 ms at a 737 kbit/s shaper, 16.2 ms at the 864 kbit/s
//! line), a store-and-forward router hands the modem a full packet and, 1.7 ms later, a ping,
//! which then waits 14.5 ms in the modem's FIFO; a real shaper's modem is idle by then.

use crate::capacity::{Capacity, Schedule};
use crate::config::LinkConfig;
use crate::counters::{Counters, SojournHistogram};
use crate::link::Link;
use crate::spec::{Problem, SpecError};
use crate::trace::TraceFn;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// One stage as the user describes it: an optional name and its link config.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StageConfig {
    /// Shown in counters and status (`router`, `modem`); default its 1-based position (`1`).
    pub name: String,
    /// The stage's link.
    pub link: LinkConfig,
}

/// A stage that could not be built, with its 1-based position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stage {stage}: {source}")]
pub struct StageError {
    /// 1-based position in the chain.
    pub stage: usize,
    /// What was wrong.
    pub source: SpecError,
}

/// Keys a stage takes besides the qdisc's own parameters (see [`LinkConfig::set`]).
pub const STAGE_KEYS: &str = "name, rate (RATE, schedule:STEPS or trace:FILE), delay (TIME or \
     schedule:STEPS), jitter, distribution, reorder, loss, limit, qdisc, overhead, mpu, framing";

/// One stage as written (a `--stage` value), before it has a position in a chain: its name
/// if one was given, and its link. [`StageSpec::at`] places it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StageSpec {
    /// `name=` if given.
    pub name: Option<String>,
    /// The stage's link.
    pub link: LinkConfig,
}

impl StageSpec {
    /// The stage at 1-based `position`, named after it unless it has a name.
    pub fn at(self, position: usize) -> StageConfig {
        StageConfig {
            name: self.name.unwrap_or_else(|| position.to_string()),
            link: self.link,
        }
    }
}

/// Parses one stage from `key=value` words separated by spaces or commas, e.g.
/// `rate=9mbit qdisc=fq_codel overhead=44 framing=atm` or `rate=10mbit qdisc=fifo limit=1000p`.
/// Keys are those of [`LinkConfig::set`] (qdisc parameters as in `--qdisc-param`, flags such
/// as `ecn` bare) plus `name=`. `qdisc` is applied first wherever it stands.
pub fn parse_stage(text: &str, position: usize) -> Result<StageConfig, StageError> {
    parse_stage_words(text)
        .map(|s| s.at(position))
        .map_err(|source| StageError {
            stage: position,
            source,
        })
}

/// [`parse_stage`] without a position: the stage as written.
pub fn parse_stage_words(text: &str) -> Result<StageSpec, SpecError> {
    let mut name = None;
    let mut pairs = Vec::new();
    let words = words(text);
    for word in &words {
        let (k, v) = match word.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (word.as_str(), None),
        };
        if k == "name" {
            let v = v.unwrap_or("");
            if v.is_empty()
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(SpecError::new(
                    "name",
                    v,
                    Problem::OutOfRange("letters, digits, '-' and '_'".into()),
                ));
            }
            name = Some(v.to_string());
        } else {
            pairs.push((k, v));
        }
    }
    if pairs.is_empty() {
        return Err(SpecError::new(
            "stage",
            text,
            Problem::UnknownName(format!("KEY=VALUE words with keys {STAGE_KEYS}")),
        ));
    }
    Ok(StageSpec {
        name,
        link: LinkConfig::from_pairs(pairs)?,
    })
}

/// The words of a stage: split at spaces and commas, except that the commas between the
/// steps of a schedule (`rate=schedule:0s/20mbit,5s/5mbit`) stay in its word: a piece without
/// `=` that holds a `/` continues the schedule before it.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
    {
        let continues = !piece.contains('=')
            && piece.contains('/')
            && out.last().is_some_and(|w| w.contains("=schedule:"));
        match out.last_mut() {
            Some(last) if continues => {
                last.push(',');
                last.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
    }
    out
}

impl crate::spelled::TcValue for StageSpec {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        parse_stage_words(text)
    }

    /// A stored stage whose trace file cannot be read any more reads back without its rate
    /// (see [`crate::TcValue::parse_stored`]).
    fn parse_stored(text: &str) -> Result<Self, SpecError> {
        parse_stage_words(text).or_else(|e| {
            let kept: Vec<String> = words(text)
                .into_iter()
                .filter(|w| !w.starts_with("rate=trace:"))
                .collect();
            if kept.len() == words(text).len() {
                return Err(e);
            }
            parse_stage_words(&kept.join(" ")).or(Err(e))
        })
    }
}

/// Keys of the link itself, which a qdisc change does not take.
const LINK_KEYS: [&str; 11] = [
    "name",
    "rate",
    "delay",
    "jitter",
    "distribution",
    "reorder",
    "loss",
    "overhead",
    "mpu",
    "framing",
    "shaper",
];

/// A change to one stage while the chain runs ([`Chain::set_stage`]).
#[derive(Debug, Clone, PartialEq)]
pub enum StageSetting {
    /// A fixed rate (`None`: unlimited), or with a capacity, a schedule or trace.
    Rate(Option<bloatlab_units::BitRate>, Option<Capacity>),
    /// A fixed one-way delay, or with a schedule, a delay schedule.
    Delay(Duration, Option<Arc<Schedule<Duration>>>),
    /// A new queue discipline ([`Link::set_qdisc`]).
    Qdisc(crate::QdiscConfig),
}

impl StageSetting {
    /// Parses `value` for the stage key `key` (`rate` or `delay`) as a stage's words spell it:
    /// `9mbit`, `schedule:0s/20mbit,5s/5mbit`, `trace:FILE` (read now), `40ms`,
    /// `schedule:0s/20ms,10s/200ms`; for `qdisc`, the kind and its parameters as a stage
    /// writes them (`fq_codel target=5ms limit=1000p`).
    pub fn parse(key: &str, value: &str) -> Result<StageSetting, SpecError> {
        let mut cfg = LinkConfig::default();
        match key {
            "qdisc" => {
                let mut w = value
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .filter(|w| !w.is_empty());
                let kind = w
                    .next()
                    .ok_or_else(|| SpecError::new("qdisc", value, Problem::MissingValue))?;
                cfg.set("qdisc", Some(kind))?;
                for word in w {
                    let (k, v) = match word.split_once('=') {
                        Some((k, v)) => (k, Some(v)),
                        None => (word, None),
                    };
                    // The link's own keys are not the qdisc's.
                    if LINK_KEYS.contains(&k) {
                        return Err(SpecError::new(
                            "qdisc parameter",
                            k,
                            Problem::Conflict("a link key, not a qdisc parameter".into()),
                        ));
                    }
                    cfg.set(k, v)?;
                }
                cfg.qdisc.validate()?;
                Ok(StageSetting::Qdisc(cfg.qdisc))
            }
            "rate" => {
                cfg.set(key, Some(value))?;
                Ok(StageSetting::Rate(cfg.rate, cfg.capacity))
            }
            "delay" => {
                cfg.set(key, Some(value))?;
                Ok(StageSetting::Delay(cfg.delay, cfg.delay_schedule))
            }
            _ => Err(SpecError::new(
                "stage setting",
                key,
                Problem::UnknownName("rate, delay, qdisc".into()),
            )),
        }
    }
}

/// One direction made of stages in series.
pub struct Chain {
    stages: Vec<(String, Link)>,
    /// Per packet that left the last stage: its sojourns in every stage's queue, summed.
    sojourn: SojournHistogram,
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.stages.iter().map(|(n, l)| (n, l)))
            .finish()
    }
}

/// Seed of stage `i`: stage 0 gets the chain's seed, so a one-stage chain behaves exactly as
/// a [`Link`] built with the same seed.
fn stage_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_add((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

impl Chain {
    /// Builds the stages in order. At least one stage is needed.
    pub fn new(stages: &[StageConfig], seed: u64) -> Result<Chain, StageError> {
        if stages.is_empty() {
            return Err(StageError {
                stage: 0,
                source: SpecError::new("stage", "", Problem::MissingValue),
            });
        }
        let stages = stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Link::new(&s.link, stage_seed(seed, i))
                    .map(|l| (s.name.clone(), l))
                    .map_err(|source| StageError {
                        stage: i + 1,
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Chain {
            stages,
            sojourn: SojournHistogram::default(),
        })
    }

    /// A chain of one stage (named `link`): behaves exactly as `Link::new(cfg, seed)`.
    pub fn single(cfg: &LinkConfig, seed: u64) -> Result<Chain, SpecError> {
        let stage = StageConfig {
            name: "link".into(),
            link: cfg.clone(),
        };
        Chain::new(&[stage], seed).map_err(|e| e.source)
    }

    /// Offers a packet to the first stage at `now`.
    pub fn enqueue(&mut self, now: Duration, packet: Vec<u8>) {
        if let Some((_, first)) = self.stages.first_mut() {
            first.enqueue(now, packet);
        }
    }

    /// The next packet out of the last stage due at or before `now`.
    pub fn dequeue(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.dequeue_timed(now).map(|(_, p)| p)
    }

    /// Like [`Chain::dequeue`], with the packet's virtual delivery time.
    pub fn dequeue_timed(&mut self, now: Duration) -> Option<(Duration, Vec<u8>)> {
        self.hand_over(now);
        let d = self.stages.last_mut()?.1.dequeue_waited(now)?;
        self.sojourn.record(d.waited);
        Some((d.at, d.data))
    }

    /// The earliest time any stage has something to do; `None` when the chain is empty.
    pub fn next_event(&self) -> Option<Duration> {
        self.stages.iter().filter_map(|(_, l)| l.next_event()).min()
    }

    /// The stages, in order, with their names.
    pub fn stages(&self) -> impl Iterator<Item = (&str, &Link)> {
        self.stages.iter().map(|(n, l)| (n.as_str(), l))
    }

    /// The last stage, mutable: the lab's delay calibration trims its delay
    /// (`Link::set_delay`), the propagation delay nearest the receiver.
    pub fn last_stage_mut(&mut self) -> Option<&mut Link> {
        self.stages.last_mut().map(|(_, l)| l)
    }

    /// Changes the rate of one stage at `now` ([`Link::set_rate`]): `stage` is its name or,
    /// when no stage has that name, its 1-based position. Packets already handed to later
    /// stages are not affected. Returns the stage's name, or an error listing the names.
    pub fn set_rate(
        &mut self,
        now: Duration,
        stage: &str,
        rate: Option<bloatlab_units::BitRate>,
    ) -> Result<String, SpecError> {
        self.set_stage(now, stage, &StageSetting::Rate(rate, None))
    }

    /// Applies `setting` to one stage at `now` (`lab set --stage-rate/--stage-delay`), the
    /// stage named as in [`Chain::set_rate`]. A schedule or trace given now starts from its
    /// own time zero at `now`.
    pub fn set_stage(
        &mut self,
        now: Duration,
        stage: &str,
        setting: &StageSetting,
    ) -> Result<String, SpecError> {
        let i = self
            .stages
            .iter()
            .position(|(n, _)| n == stage)
            .or_else(|| {
                stage
                    .parse::<usize>()
                    .ok()
                    .filter(|&k| (1..=self.stages.len()).contains(&k))
                    .map(|k| k - 1)
            })
            .ok_or_else(|| {
                let names: Vec<&str> = self.stages.iter().map(|(n, _)| n.as_str()).collect();
                SpecError::new(
                    "stage",
                    stage,
                    Problem::UnknownName(format!("{} or a 1-based position", names.join(", "))),
                )
            })?;
        // Earlier stages hand over what they released by `now` first, so the changed stage
        // sees its arrivals in time order.
        self.hand_over(now);
        let (name, link) = &mut self.stages[i];
        match setting {
            StageSetting::Rate(rate, capacity) => link.set_capacity(now, *rate, capacity.as_ref()),
            StageSetting::Delay(delay, schedule) => {
                link.set_delay_schedule(now, *delay, schedule.clone())
            }
            StageSetting::Qdisc(q) => link.set_qdisc(now, q)?,
        }
        Ok(name.clone())
    }

    /// Number of stages.
    pub fn len(&self) -> usize {
        self.stages.len()
    }

    /// Always false: a chain has at least one stage.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Installs a per-packet trace callback on stage `index` (0-based); ignored out of range.
    pub fn set_trace(&mut self, index: usize, trace: Option<TraceFn>) {
        if let Some((_, l)) = self.stages.get_mut(index) {
            l.set_trace(trace);
        }
    }

    /// The whole direction's counters: input of the first stage, output of the last, drops,
    /// marks, backlog and packets in transit summed over the stages. `sojourn` is per packet
    /// that left the chain: the sum of its sojourns in every stage's queue (entry to exit,
    /// without serialization and propagation), so a one-stage chain's is its link's. Each
    /// stage's own queue sojourn is in [`Chain::stages`].
    pub fn counters(&self) -> Counters {
        let mut total = Counters::default();
        let (Some((_, first)), Some((_, last))) = (self.stages.first(), self.stages.last()) else {
            return total;
        };
        total.enqueued = first.counters().enqueued;
        total.unparsed = first.counters().unparsed;
        total.dequeued = last.counters().dequeued;
        for (_, l) in &self.stages {
            let c = l.counters();
            total.dropped.overflow = total.dropped.overflow.plus(c.dropped.overflow);
            total.dropped.aqm = total.dropped.aqm.plus(c.dropped.aqm);
            total.dropped.loss = total.dropped.loss.plus(c.dropped.loss);
            total.ce_marked = total.ce_marked.plus(c.ce_marked);
            total.backlog = total.backlog.plus(c.backlog);
            total.in_transit = total.in_transit.plus(c.in_transit);
        }
        total.sojourn = self.sojourn.clone();
        total
    }

    /// Moves every packet whose time has come from each stage into the next, at its delivery
    /// time. Stage `i` is drained before stage `i + 1` is touched, so stage `i + 1` receives
    /// its arrivals in time order and never sees a time earlier than one it already saw.
    fn hand_over(&mut self, now: Duration) {
        for i in 0..self.stages.len().saturating_sub(1) {
            let (head, tail) = self.stages.split_at_mut(i + 1);
            let (from, to) = (&mut head[i].1, &mut tail[0].1);
            while let Some(d) = from.dequeue_waited(now) {
                to.enqueue_waited(d.at, d.data, d.waited);
            }
        }
    }
}

#[cfg(test)]
mod capacity_tests {
    use super::*;
    use bloatlab_units::BitRate;

    /// The commas between a schedule's steps stay in its word; the other commas still
    /// separate words.
    #[test]
    fn stage_words_keep_a_schedules_commas() {
        let s = parse_stage(
            "name=sky rate=schedule:0s/20mbit,5s/5mbit,qdisc=fifo,limit=10p \
             delay=schedule:0s/10ms, 2s/30ms",
            1,
        )
        .unwrap();
        assert_eq!(s.name, "sky");
        let Some(crate::Capacity::Schedule(r)) = &s.link.capacity else {
            panic!("{:?}", s.link)
        };
        assert_eq!(r.steps().len(), 2);
        assert_eq!(s.link.rate, Some(BitRate(20_000_000)));
        assert_eq!(s.link.qdisc.kind(), crate::Qdisc::Fifo);
        let d = s.link.delay_schedule.as_ref().unwrap();
        assert_eq!(d.at(Duration::from_secs(3)), Duration::from_millis(30));
        let e = parse_stage("rate=schedule:0s/20mbit,5s/0mbit", 2).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("stage 2: rate: \"schedule:0s/20mbit,5s/0mbit\""),
            "{e}"
        );
    }

    /// `Chain::set_stage` reaches the named stage: a delay there, a schedule starting now.
    #[test]
    fn set_stage_changes_one_stages_delay_or_rate() {
        let st = [
            parse_stage("name=a rate=12mbit", 1).unwrap(),
            parse_stage("name=b delay=10ms", 2).unwrap(),
        ];
        let mut c = Chain::new(&st, 1).unwrap();
        let d = StageSetting::parse("delay", "30ms").unwrap();
        assert_eq!(c.set_stage(Duration::ZERO, "b", &d).unwrap(), "b");
        let r = StageSetting::parse("rate", "schedule:0s/6mbit,1s/12mbit").unwrap();
        assert_eq!(c.set_stage(Duration::ZERO, "1", &r).unwrap(), "a");
        let mut p = vec![0u8; 1500];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&1500u16.to_be_bytes());
        p[9] = 17;
        c.enqueue(Duration::ZERO, p);
        // 2 ms at 6 Mbit/s, then 30 ms.
        let mut t = Duration::ZERO;
        while c.dequeue(t).is_none() {
            t = c.next_event().unwrap();
        }
        assert_eq!(t, Duration::from_millis(32));
        assert!(c.set_stage(t, "c", &d).is_err());
        assert!(StageSetting::parse("colour", "blue").is_err());
    }

    fn udp(port: u16) -> Vec<u8> {
        let mut p = vec![0u8; 1500];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&1500u16.to_be_bytes());
        p[9] = 17;
        p[20..22].copy_from_slice(&port.to_be_bytes());
        p
    }

    /// A qdisc changed while packets wait: they are sent first, in their order, then what
    /// queued in the new one; nothing is lost and the counters balance.
    #[test]
    fn a_new_qdisc_takes_over_after_the_old_one_empties() {
        let st = [parse_stage("name=a rate=12mbit qdisc=fifo limit=100p", 1).unwrap()];
        let mut c = Chain::new(&st, 1).unwrap();
        for port in 1..=4 {
            c.enqueue(Duration::ZERO, udp(port));
        }
        let q = StageSetting::parse("qdisc", "fq_codel limit=50p target=5ms").unwrap();
        let StageSetting::Qdisc(crate::QdiscConfig::FqCodel(f)) = &q else {
            panic!("{q:?}")
        };
        assert_eq!(f.target, Duration::from_millis(5));
        c.set_stage(Duration::from_micros(1500), "a", &q).unwrap();
        // Two flows in the new qdisc; the old FIFO's packets go first.
        for port in [10, 10, 10, 20] {
            c.enqueue(Duration::from_micros(1500), udp(port));
        }
        // Packets 1 and 2 are on the wire by 1.5 ms (1 ms each at 12 Mbit/s).
        assert_eq!(c.counters().backlog.packets, 6, "{:?}", c.counters());
        let mut order = Vec::new();
        while let Some(t) = c.next_event() {
            while let Some(p) = c.dequeue(t) {
                order.push(u16::from_be_bytes([p[20], p[21]]));
            }
        }
        assert_eq!(order[..4], [1, 2, 3, 4], "{order:?}");
        let mut rest = order[4..].to_vec();
        rest.sort_unstable();
        assert_eq!(rest, [10, 10, 10, 20], "{order:?}");
        assert_eq!(c.counters().conservation_gap(), (0, 0));
        for bad in [
            "",
            "sfq",
            "fifo rate=1mbit",
            "codel target=-1ms",
            "fifo interval=1ms",
        ] {
            assert!(StageSetting::parse("qdisc", bad).is_err(), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[9] = 17;
        p
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn stage_words_parse_with_qdisc_first_and_name() {
        let s = parse_stage("limit=50p qdisc=fifo rate=10mbit name=modem", 2).unwrap();
        assert_eq!(s.name, "modem");
        assert_eq!(s.link.rate.map(|r| r.0), Some(10_000_000));
        assert_eq!(s.link.qdisc.kind().to_string(), "fifo");
        assert!(s.link.to_string().contains("10"), "{}", s.link);
        let s = parse_stage("rate=9mbit,qdisc=fq_codel,overhead=44,framing=atm,ecn", 1).unwrap();
        assert_eq!(s.name, "1");
        assert_eq!(s.link.overhead.bytes, 44);
        assert_eq!(s.link.overhead.framing, crate::Framing::Atm);
    }

    #[test]
    fn bad_stage_words_name_the_stage_and_key() {
        let e = parse_stage("rate=9mbit qdisc=fifo bogus=1", 2).unwrap_err();
        assert_eq!(e.stage, 2);
        assert!(
            e.to_string().starts_with("stage 2: ") && e.to_string().contains("bogus"),
            "{e}"
        );
        let e = parse_stage("rate=0mbit", 1).unwrap_err();
        assert!(
            e.to_string().contains("rate") && e.to_string().contains("0mbit"),
            "{e}"
        );
        assert!(parse_stage("  ", 1).is_err());
        assert!(parse_stage("name=a/b rate=1mbit", 1).is_err());
        assert!(Chain::new(&[], 1).is_err());
    }

    /// Two serializers in series: the slower one sets the pace and the delays add up.
    #[test]
    fn packets_cross_every_stage_in_order_with_delays_added() {
        let a = parse_stage("rate=12mbit delay=10ms", 1).unwrap();
        let b = parse_stage("rate=6mbit delay=5ms", 2).unwrap();
        let mut c = Chain::new(&[a, b], 7).unwrap();
        for _ in 0..3 {
            c.enqueue(Duration::ZERO, ipv4(1500));
        }
        // 1500 B: 1 ms at 12 Mbit/s, 2 ms at 6 Mbit/s. First packet: 1 + 10 + 2 + 5 = 18 ms.
        let mut out = Vec::new();
        let mut now = Duration::ZERO;
        while let Some(t) = c.next_event() {
            now = now.max(t);
            while let Some((at, _)) = c.dequeue_timed(now) {
                out.push(at);
            }
            if out.len() == 3 {
                break;
            }
        }
        // Then one every 2 ms: the second stage is the bottleneck.
        assert_eq!(out, [ms(18), ms(20), ms(22)]);
        let t = c.counters();
        assert_eq!(t.enqueued.packets, 3);
        assert_eq!(t.dequeued.packets, 3);
        assert_eq!(t.conservation_gap(), (0, 0));
        let stages: Vec<_> = c
            .stages()
            .map(|(n, l)| (n.to_string(), l.counters().dequeued.packets))
            .collect();
        assert_eq!(stages, [("1".to_string(), 3), ("2".to_string(), 3)]);
    }

    /// Drains `c` in virtual time; delivery times of the packets in order.
    fn drain(c: &mut Chain) -> Vec<Duration> {
        let mut out = Vec::new();
        while let Some(t) = c.next_event() {
            while let Some((at, _)) = c.dequeue_timed(t) {
                out.push(at);
            }
        }
        out
    }

    /// Report 4's uplink: a full packet, then a ping, into a 737 kbit/s router in front of
    /// the 864 kbit/s modem, both ATM + 44. Store-and-forward, the ping reaches the modem
    /// 1.7 ms after the full packet and waits for it there; from a shaper it arrives a whole
    /// slot later, when the modem is idle.
    #[test]
    fn a_shaper_stage_sends_at_slot_start_so_a_ping_does_not_queue_behind_at_the_modem() {
        let t = |rate: u64, wire: u64| {
            bloatlab_units::BitRate(rate * 1000)
                .transmit_time(bloatlab_units::Bytes(wire))
                .unwrap()
        };
        // 1500 + 44 -> 33 cells = 1749 B; a 100-byte ping + 44 -> 3 cells = 159 B.
        let (full_r, ping_r) = (t(737, 1749), t(737, 159));
        let (full_m, ping_m) = (t(864, 1749), t(864, 159));
        let run = |shaper: &str| {
            let a = parse_stage(
                &format!("rate=737kbit qdisc=fq_codel overhead=44 framing=atm {shaper}"),
                1,
            )
            .unwrap();
            let b = parse_stage("rate=864kbit qdisc=fifo overhead=44 framing=atm", 2).unwrap();
            let mut c = Chain::new(&[a, b], 1).unwrap();
            c.enqueue(Duration::ZERO, ipv4(1500));
            c.enqueue(Duration::ZERO, ipv4(100));
            let out = drain(&mut c);
            let modem = c.stages().nth(1).unwrap().1.counters().sojourn.max();
            (out, modem)
        };
        let (out, modem) = run("");
        assert_eq!(out, [full_r + full_m, full_r + full_m + ping_m]);
        assert_eq!(modem, Some(full_m - ping_r));
        let (out, modem) = run("shaper");
        // The router releases each packet when its slot starts: the full one at 0, the ping
        // after the full one's slot; the modem is idle again by then (16.2 < 19.0 ms).
        assert_eq!(out, [full_m, full_r + ping_m]);
        assert_eq!(modem, Some(Duration::ZERO));
        assert!(full_m < full_r);
    }

    /// The direction's sojourn is one sample per packet, its queueing summed over the stages,
    /// not the stages' samples pooled.
    #[test]
    fn chain_sojourn_is_per_packet_summed_over_the_stages() {
        let a = parse_stage("rate=12mbit qdisc=fifo", 1).unwrap();
        let b = parse_stage("rate=6mbit qdisc=fifo", 2).unwrap();
        let mut c = Chain::new(&[a, b], 1).unwrap();
        for _ in 0..3 {
            c.enqueue(Duration::ZERO, ipv4(1500));
        }
        assert_eq!(drain(&mut c).len(), 3);
        // Stage 1 (1 ms a packet) starts them at 0, 1, 2 ms: waits 0, 1, 2. They reach stage 2
        // at 1, 2, 3 ms, which (2 ms a packet) starts them at 1, 3, 5: waits 0, 1, 2.
        let stage_max: Vec<_> = c
            .stages()
            .map(|(_, l)| (l.counters().sojourn.count(), l.counters().sojourn.max()))
            .collect();
        assert_eq!(stage_max, [(3, Some(ms(2))), (3, Some(ms(2)))]);
        // Per packet: 0, 2 and 4 ms.
        let s = c.counters().sojourn;
        assert_eq!(s.count(), 3);
        assert_eq!((s.min(), s.max()), (Some(ms(0)), Some(ms(4))));
        assert_eq!(s.mean(), Some(ms(2)));
    }

    /// A late wake-up does not change when packets reach the next stage.
    #[test]
    fn late_wakeups_do_not_shift_hand_over_times() {
        let build = || {
            let a = parse_stage("rate=12mbit delay=1ms", 1).unwrap();
            let b = parse_stage("rate=12mbit delay=1ms", 2).unwrap();
            Chain::new(&[a, b], 1).unwrap()
        };
        let (mut punctual, mut late) = (build(), build());
        for i in 0..5 {
            punctual.enqueue(ms(i), ipv4(1500));
            late.enqueue(ms(i), ipv4(1500));
        }
        let mut a = Vec::new();
        let mut now = ms(5);
        while let Some(t) = punctual.next_event() {
            now = now.max(t);
            while let Some((at, _)) = punctual.dequeue_timed(now) {
                a.push(at);
            }
        }
        let mut b = Vec::new();
        while let Some((at, _)) = late.dequeue_timed(ms(100)) {
            b.push(at);
        }
        assert_eq!(a, b);
        assert_eq!(a.len(), 5);
    }

    #[test]
    fn drops_are_counted_in_the_stage_that_dropped() {
        let a = parse_stage("rate=100mbit qdisc=fifo limit=100p", 1).unwrap();
        let b = parse_stage("rate=1mbit qdisc=fifo limit=5p name=modem", 2).unwrap();
        let mut c = Chain::new(&[a, b], 1).unwrap();
        for i in 0..20 {
            c.enqueue(Duration::from_micros(10 * i), ipv4(1500));
        }
        while c.dequeue(ms(10)).is_some() {}
        let per: Vec<u64> = c
            .stages()
            .map(|(_, l)| l.counters().dropped.overflow.packets)
            .collect();
        assert_eq!(per[0], 0);
        assert!(per[1] >= 10, "{per:?}");
        assert_eq!(c.counters().dropped.overflow.packets, per[1]);
        assert_eq!(c.counters().conservation_gap(), (0, 0));
    }

    #[test]
    fn single_stage_chain_is_the_link() {
        let cfg = parse_stage("rate=5mbit delay=3ms jitter=1ms loss=5%", 1)
            .unwrap()
            .link;
        let mut link = Link::new(&cfg, 9).unwrap();
        let mut chain = Chain::single(&cfg, 9).unwrap();
        for i in 0..200 {
            link.enqueue(Duration::from_micros(300 * i), ipv4(1000));
            chain.enqueue(Duration::from_micros(300 * i), ipv4(1000));
        }
        let drain = |f: &mut dyn FnMut(Duration) -> Option<(Duration, Vec<u8>)>| {
            let mut v = Vec::new();
            while let Some((t, _)) = f(Duration::from_secs(5)) {
                v.push(t);
            }
            v
        };
        let a = drain(&mut |n| link.dequeue_timed(n));
        let b = drain(&mut |n| chain.dequeue_timed(n));
        assert_eq!(a, b);
        assert!(a.len() > 150 && a.len() < 200, "{}", a.len());
    }
}
