//! The driver's view of a link direction: the sans-IO emulator core behind
//! a small trait, so the driver can also run a bare pass-through (the
//! benchmark's floor) and tests can substitute their own models.

use crate::error::{LabError, Result};
use crate::spec::LinkSpec;
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
    /// Changes the rate of stage `stage` (name or 1-based position) at `now`
    /// (`lab set --stage-rate`); returns the stage's name. Only chains have
    /// stages.
    fn set_stage_rate(
        &mut self,
        _now: Duration,
        stage: &str,
        _rate: Option<bloatlab_units::BitRate>,
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

/// Forwards every packet immediately: no rate, no delay, no queue limit.
#[derive(Debug, Default)]
pub struct PassThrough {
    queue: VecDeque<(Duration, Vec<u8>)>,
    counters: Counters,
}

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

use bloatlab_emu::{Counters, LinkConfig, SpecError};
pub use bloatlab_emu::{Limit, Probability, parse_percent, parse_time};

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

/// Maps an emulator error to the CLI flag that carried the value.
fn flag_error(dir: &str, e: SpecError) -> LabError {
    let why = e.problem.to_string();
    let flag = match e.field.as_str() {
        f @ ("rate" | "delay" | "jitter" | "loss" | "limit" | "qdisc") => f.to_string(),
        _ => "qdisc-param".to_string(),
    };
    let field = if flag == "qdisc-param" {
        format!("--qdisc-param/--{dir}-qdisc-param {}", e.field)
    } else if dir.is_empty() {
        format!("--{flag}")
    } else {
        format!("--{flag}/--{dir}-{flag}")
    };
    LabError::Spec {
        field,
        value: e.value.clone(),
        why,
    }
}

/// The emulator configuration of one direction. Fields are applied in the
/// order qdisc, limit, qdisc parameters, rate, delay, jitter, loss, so the
/// qdisc kind's defaults are set before its parameters override them.
/// Parameters are `key=value` or a bare flag; besides the qdisc's own
/// (`target`, `ecn`, ...) the link keys `overhead`, `mpu`, `framing`,
/// `distribution`, `reorder` and `shaper` are accepted.
pub fn link_config(dir: &str, s: &LinkSpec) -> Result<LinkConfig> {
    let mut cfg = LinkConfig::default();
    let err = |e| flag_error(dir, e);
    if let Some(q) = &s.qdisc {
        cfg.set("qdisc", Some(q)).map_err(err)?;
    }
    if let Some(v) = &s.limit {
        cfg.set("limit", Some(v)).map_err(err)?;
    }
    for p in &s.params {
        let (k, v) = match p.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (p.trim(), None),
        };
        if matches!(k, "rate" | "delay" | "jitter" | "loss" | "qdisc") {
            return Err(LabError::Spec {
                field: format!("--qdisc-param/--{dir}-qdisc-param"),
                value: p.clone(),
                why: format!("use --{k} for {k}"),
            });
        }
        cfg.set(k, v).map_err(err)?;
    }
    for (k, v) in [
        ("rate", &s.rate),
        ("delay", &s.delay),
        ("jitter", &s.jitter),
        ("loss", &s.loss),
    ] {
        if let Some(v) = v {
            cfg.set(k, Some(v)).map_err(err)?;
        }
    }
    cfg.validate().map_err(err)?;
    Ok(cfg)
}

/// Checks one direction's fields with the emulator's tc-style parsers.
/// With `--stage`, checks every stage instead (crate::stages).
pub fn validate_direction(dir: &str, s: &LinkSpec) -> Result<()> {
    if crate::stages::stage_configs(dir, s)?.is_some() {
        return Ok(());
    }
    link_config(dir, s).map(|_| ())
}

/// One direction's fields, parsed (for the kernel backend).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Direction {
    pub rate: Option<bloatlab_units::BitRate>,
    pub delay: Option<Duration>,
    pub jitter: Option<Duration>,
    pub loss: Option<String>,
    pub limit: Option<Limit>,
}

/// Parses one direction's tc-style fields.
pub fn parse_direction(s: &LinkSpec) -> Result<Direction> {
    use bloatlab_emu::{parse_limit, parse_rate};
    let err = |e| flag_error("", e);
    Ok(Direction {
        rate: s.rate.as_deref().map(parse_rate).transpose().map_err(err)?,
        delay: s
            .delay
            .as_deref()
            .map(parse_time)
            .transpose()
            .map_err(err)?
            .filter(|d| !d.is_zero()),
        jitter: s
            .jitter
            .as_deref()
            .map(parse_time)
            .transpose()
            .map_err(err)?
            .filter(|d| !d.is_zero()),
        loss: s.loss.clone(),
        limit: s
            .limit
            .as_deref()
            .map(parse_limit)
            .transpose()
            .map_err(err)?,
    })
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

    #[test]
    fn bad_fields_are_named() {
        let s = LinkSpec {
            rate: Some("0mbit".into()),
            ..LinkSpec::default()
        };
        let e = validate_direction("up", &s).unwrap_err().to_string();
        assert!(e.contains("rate") && e.contains("0mbit"), "{e}");
        let s = LinkSpec {
            delay: Some("-5ms".into()),
            ..LinkSpec::default()
        };
        let e = validate_direction("down", &s).unwrap_err().to_string();
        assert!(e.contains("delay") && e.contains("-5ms"), "{e}");
        let s = LinkSpec {
            qdisc: Some("red".into()),
            ..LinkSpec::default()
        };
        let e = validate_direction("up", &s).unwrap_err().to_string();
        assert!(e.contains("qdisc") && e.contains("red"), "{e}");
        let s = LinkSpec {
            qdisc: Some("codel".into()),
            params: vec!["target=-1ms".into()],
            ..LinkSpec::default()
        };
        let e = validate_direction("up", &s).unwrap_err().to_string();
        assert!(e.contains("target") && e.contains("-1ms"), "{e}");
        let s = LinkSpec {
            qdisc: Some("fq_codel".into()),
            params: vec!["bogus=1".into()],
            ..LinkSpec::default()
        };
        let e = validate_direction("up", &s).unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
    }
}
