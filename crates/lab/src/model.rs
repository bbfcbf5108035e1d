//! The driver's view of a link direction: the sans-IO emulator core behind
//! a small trait, so the driver can also run a bare pass-through (the
//! benchmark's floor) and tests can substitute their own models.

use crate::error::{LabError, Result};
use crate::spec::LinkSpec;
#[cfg(test)]
use std::collections::VecDeque;
use std::time::Duration;

/// One direction of an emulated link, driven with explicit time (a
/// `Duration` since the driver's origin). Mirrors `bloatlab_emu::Link`.
pub trait LinkModel: Send {
    /// A packet (an IP packet, no L2 header) arrived at `now`.
    fn enqueue(&mut self, now: Duration, packet: Vec<u8>);
    /// The next packet due at or before `now`, if any.
    fn dequeue(&mut self, now: Duration) -> Option<Vec<u8>>;
    /// Earliest time [`LinkModel::dequeue`] may return something.
    fn next_event(&self) -> Option<Duration>;
    /// The model's counters, for `lab status`.
    fn counters(&self) -> LinkCounters;
    /// The one-way delay applied now, if the model has one that can be
    /// changed (driver/calibrate.rs trims it).
    fn delay(&self) -> Option<Duration> {
        None
    }
    /// Changes the one-way delay for packets from now on.
    fn set_delay(&mut self, _delay: Duration) {}
    /// What the delay calibration did (only calibrated models have one).
    fn calibration(&self) -> Option<crate::driver::calibrate::TrimReport> {
        None
    }
    /// Changes the rate or delay of stage `stage` (name or 1-based
    /// position) at `now` (`lab set --stage-rate/--stage-delay`); returns
    /// the stage's name. Only chains have stages.
    fn set_stage(
        &mut self,
        _now: Duration,
        stage: &str,
        _setting: &bloatlab_emu::StageSetting,
    ) -> std::result::Result<String, String> {
        Err(format!(
            "no stage {stage:?}: this direction is not a chain of stages (lab up --stage)"
        ))
    }
}

/// A direction's counters: the whole direction's (a single link's, or a
/// chain's summed over its stages) and, for a chain (`--up-stage`), each
/// stage's own. Serialises as the totals with a `stages` list added.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LinkCounters {
    #[serde(flatten)]
    pub total: Counters,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageCounters>,
}

/// One stage of a chain.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct StageCounters {
    pub name: String,
    /// The stage's rate now, bits per second (absent: unlimited). It
    /// differs from the `--stage` words after `lab set --stage-rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bit_s: Option<u64>,
    pub link: Counters,
}

impl LinkCounters {
    /// Counters of a single link.
    pub fn single(total: Counters) -> LinkCounters {
        LinkCounters {
            total,
            stages: Vec::new(),
        }
    }
}

/// Forwards every packet immediately: no rate, no delay, no queue limit
/// (the tests' reference model).
#[cfg(test)]
#[derive(Debug, Default)]
pub struct PassThrough {
    queue: VecDeque<(Duration, Vec<u8>)>,
    counters: Counters,
}

#[cfg(test)]
impl LinkModel for PassThrough {
    fn enqueue(&mut self, now: Duration, packet: Vec<u8>) {
        self.counters.enqueued.add(packet.len() as u64);
        self.counters.backlog.add(packet.len() as u64);
        self.queue.push_back((now, packet));
    }
    fn dequeue(&mut self, _now: Duration) -> Option<Vec<u8>> {
        let (_, p) = self.queue.pop_front()?;
        self.counters.backlog.sub(p.len() as u64);
        self.counters.dequeued.add(p.len() as u64);
        Some(p)
    }
    fn next_event(&self) -> Option<Duration> {
        self.queue.front().map(|(t, _)| *t)
    }
    fn counters(&self) -> LinkCounters {
        LinkCounters::single(self.counters.clone())
    }
}

use bloatlab_emu::{Counters, LinkConfig, QdiscConfig, SpecError};

impl LinkModel for bloatlab_emu::Link {
    fn enqueue(&mut self, now: Duration, packet: Vec<u8>) {
        bloatlab_emu::Link::enqueue(self, now, packet)
    }
    fn dequeue(&mut self, now: Duration) -> Option<Vec<u8>> {
        bloatlab_emu::Link::dequeue(self, now)
    }
    fn next_event(&self) -> Option<Duration> {
        bloatlab_emu::Link::next_event(self)
    }
    fn counters(&self) -> LinkCounters {
        LinkCounters::single(bloatlab_emu::Link::counters(self).clone())
    }
    fn delay(&self) -> Option<Duration> {
        Some(bloatlab_emu::Link::delay(self))
    }
    fn set_delay(&mut self, delay: Duration) {
        bloatlab_emu::Link::set_delay(self, delay)
    }
}

/// An emulator error about direction `dir`'s config, attributed to the
/// option that set the field (`SpecError::field` is the emulator's key:
/// `rate`, `delay`, ... or a qdisc parameter's name).
fn flag_error(dir: &str, e: SpecError) -> LabError {
    let why = e.problem.to_string();
    let field = match e.field.as_str() {
        f @ ("rate" | "delay" | "jitter" | "loss" | "limit" | "qdisc") => LinkSpec::flag(dir, f),
        key => LinkSpec::flag(dir, "qdisc-param").part(key),
    };
    LabError::Spec {
        field,
        value: e.value,
        why,
    }
}

/// The emulator configuration of one direction. The qdisc kind comes
/// first, then the limit and the qdisc parameters (in order, so the kind's
/// defaults are set before its parameters override them), then rate,
/// delay, jitter and loss. Besides the qdisc's own parameters (`target`,
/// `ecn`, ...) the link keys `overhead`, `mpu`, `framing`, `distribution`,
/// `reorder` and `shaper` are accepted. A parameter the chosen qdisc does
/// not have, or parameters that contradict each other, are refused here.
pub fn link_config(dir: &str, s: &LinkSpec) -> Result<LinkConfig> {
    let mut cfg = LinkConfig::default();
    if let Some(q) = &s.qdisc {
        cfg.qdisc = QdiscConfig::defaults(*q.get());
    }
    if let Some(l) = &s.limit {
        cfg.qdisc.set_limit(*l.get());
    }
    for p in &s.params {
        let p = p.get();
        cfg.set(&p.key, p.value.as_deref())
            .map_err(|e| flag_error(dir, e))?;
    }
    if let Some(r) = &s.rate {
        // Parsed again: a rate read back from the state file may be a
        // placeholder for a trace whose file has gone (`TcValue::parse_stored`).
        let r = <bloatlab_emu::LinkRate as bloatlab_emu::TcValue>::parse_tc(r.text())
            .map_err(|e| flag_error(dir, e))?;
        cfg.rate = Some(r.nominal);
        cfg.capacity = r.capacity;
    }
    if let Some(d) = &s.delay {
        cfg.delay = *d.get();
    }
    if let Some(j) = &s.jitter {
        cfg.jitter = *j.get();
    }
    if let Some(l) = &s.loss {
        cfg.loss = *l.get();
    }
    cfg.validate().map_err(|e| flag_error(dir, e))?;
    Ok(cfg)
}

/// Opens the per-packet trace of one queue, given the name of its file part: `up` for a
/// single link, `up.router` for stage `router` of a chain (`trace_file::path_for`).
pub type TraceOpener<'a> = &'a mut dyn FnMut(&str) -> Result<bloatlab_emu::TraceFn>;

/// Builds the emulator for one direction. With `trace`, every queue of the direction gets its
/// own trace: the link's, or each stage's of a chain.
pub fn build(
    dir: &str,
    s: &LinkSpec,
    seed: u64,
    trace: Option<TraceOpener<'_>>,
) -> Result<Box<dyn LinkModel>> {
    if let Some(stages) = crate::stages::stage_configs(dir, s)? {
        return crate::stages::build_chain(dir, &stages, seed, trace);
    }
    let cfg = link_config(dir, s)?;
    tracing::info!("{dir}: {cfg}");
    let mut link = bloatlab_emu::Link::new(&cfg, seed).map_err(|e| flag_error(dir, e))?;
    link.set_trace(trace.map(|open| open(dir)).transpose()?);
    Ok(Box::new(link))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_through_releases_in_order_at_arrival_time() {
        let mut m = PassThrough::default();
        assert_eq!(m.next_event(), None);
        m.enqueue(Duration::from_micros(5), vec![1]);
        m.enqueue(Duration::from_micros(7), vec![2]);
        assert_eq!(m.next_event(), Some(Duration::from_micros(5)));
        assert_eq!(m.dequeue(Duration::from_micros(9)), Some(vec![1]));
        assert_eq!(m.dequeue(Duration::from_micros(9)), Some(vec![2]));
        assert_eq!(m.dequeue(Duration::from_micros(9)), None);
        assert_eq!(m.counters().total.dequeued.packets, 2);
        assert_eq!(m.counters().total.backlog.packets, 0);
    }

    fn parsed<T: bloatlab_emu::TcValue>(text: &str) -> Option<bloatlab_emu::Spelled<T>> {
        Some(text.parse().unwrap())
    }

    /// Values were parsed when they were read; what is left for the
    /// emulator's model is how they combine, named by the option.
    #[test]
    fn link_config_applies_the_fields_and_names_the_option_of_a_conflict() {
        let s = LinkSpec {
            rate: parsed("20mbit"),
            delay: parsed("10ms"),
            qdisc: parsed("codel"),
            limit: parsed("100p"),
            params: vec!["target=3ms".parse().unwrap(), "ecn".parse().unwrap()],
            ..LinkSpec::default()
        };
        let c = link_config("up", &s).unwrap();
        assert_eq!(c.to_string(), "rate 20 Mbit/s delay 10ms codel");
        let bloatlab_emu::QdiscConfig::Codel(q) = &c.qdisc else {
            panic!("{c:?}")
        };
        assert_eq!((q.limit, q.ecn), (bloatlab_emu::Limit::Packets(100), true));
        assert_eq!(q.target, Duration::from_millis(3));
        let s = LinkSpec {
            qdisc: parsed("fifo"),
            params: vec!["target=5ms".parse().unwrap()],
            ..LinkSpec::default()
        };
        let LabError::Spec { field, value, .. } = link_config("down", &s).unwrap_err() else {
            panic!()
        };
        assert_eq!(
            field.to_string(),
            "--qdisc-param/--down-qdisc-param qdisc parameter"
        );
        assert_eq!(field.flags, ["--qdisc-param", "--down-qdisc-param"]);
        assert_eq!(value, "target");
        let s = LinkSpec {
            loss: parsed("gemodel 1% 0%"),
            ..LinkSpec::default()
        };
        let LabError::Spec { field, .. } = link_config("up", &s).unwrap_err() else {
            panic!()
        };
        assert_eq!(field.to_string(), "--loss/--up-loss");
    }
}
