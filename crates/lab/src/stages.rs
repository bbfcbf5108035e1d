//! Chained links in the lab: a direction given as `--stage` words becomes a
//! `bloatlab_emu::Chain` (userspace backend only; the kernel backend
//! refuses stages in `kernel::check`).
//!
//! The direction's own `--delay`, `--jitter` and `--loss` stay meaningful
//! with stages: they form one more stage, `path`, after the user's stages
//! (no rate, so it only delays and loses). `--rate`, `--limit`, `--qdisc`
//! and `--qdisc-param` describe a single bottleneck and are refused next to
//! `--stage`, naming both flags (`LinkSpec::check`).

use crate::error::{LabError, Result};
use crate::model::LinkModel;
use crate::spec::LinkSpec;
use bloatlab_emu::qdisc::fifo::FifoConfig;
use bloatlab_emu::{Chain, Limit, LinkConfig, LossModel, QdiscConfig, StageConfig, StageError};
use std::time::Duration;

fn stage_error(dir: &str, text: &str, e: StageError) -> LabError {
    let why = e.source.problem.to_string();
    LabError::Spec {
        field: LinkSpec::flag(dir, "stage")
            .part(format!("{} ({text:?}) key {}", e.stage, e.source.field)),
        value: e.source.value,
        why,
    }
}

/// Stage `stage` (its name or 1-based position; `path`, the stage `--delay` adds, is not
/// counted: it has no rate to control) of direction `dir` (`up`/`down`) of lab `spec`, as
/// `bloatlab autorate --lab NAME --stage STAGE` finds it. The error names `--stage` and
/// lists the stages there are.
pub fn controllable_stage(
    spec: &crate::spec::LabSpec,
    dir: &str,
    stage: &str,
) -> std::result::Result<StageConfig, String> {
    let link = if dir == "up" { &spec.up } else { &spec.down };
    let stages: Vec<StageConfig> = stage_configs(dir, link)
        .map_err(|e| e.to_string())?
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.name != "path")
        .collect();
    if stages.is_empty() {
        return Err(format!(
            "--stage {stage}: the {dir} direction of lab {} has no stages (lab up --stage ...)",
            spec.name
        ));
    }
    let by_position = stage
        .parse::<usize>()
        .ok()
        .filter(|k| (1..=stages.len()).contains(k))
        .map(|k| k - 1);
    let at = stages.iter().position(|s| s.name == stage).or(by_position);
    match at {
        Some(i) => Ok(stages[i].clone()),
        None => {
            let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
            Err(format!(
                "--stage {stage:?}: the {dir} direction of lab {} has no such stage (stages: {})",
                spec.name,
                names.join(", ")
            ))
        }
    }
}

/// The stages of one direction, `path` included, or `None` when the
/// direction is a single link.
pub fn stage_configs(dir: &str, s: &LinkSpec) -> Result<Option<Vec<StageConfig>>> {
    if s.stages.is_empty() {
        return Ok(None);
    }
    s.check(dir)?;
    // Parsed again from the text: a stage read back from the state file
    // may hold a placeholder for a trace whose file has gone
    // (`TcValue::parse_stored`); building a link must read the trace.
    let mut stages: Vec<StageConfig> = s
        .stages
        .iter()
        .zip(1..)
        .map(|(st, pos)| {
            bloatlab_emu::parse_stage(st.text(), pos).map_err(|e| stage_error(dir, st.text(), e))
        })
        .collect::<Result<_>>()?;
    let path = LinkConfig {
        delay: s.delay.as_ref().map_or(Duration::ZERO, |d| *d.get()),
        jitter: s.jitter.as_ref().map_or(Duration::ZERO, |d| *d.get()),
        loss: s.loss.as_ref().map_or(LossModel::None, |l| *l.get()),
        // A huge limit: the path stage has no rate, so nothing ever queues in it.
        qdisc: QdiscConfig::Fifo(FifoConfig {
            limit: Limit::Packets(PATH_LIMIT),
        }),
        ..LinkConfig::default()
    };
    if path.delay > Duration::ZERO || path.jitter > Duration::ZERO || path.loss != LossModel::None {
        stages.push(StageConfig {
            name: "path".into(),
            link: path,
        });
    }
    Ok(Some(stages))
}

/// Queue limit of the `path` stage, packets.
const PATH_LIMIT: u32 = 1_000_000;

/// Builds the chain of one direction.
pub(crate) fn build_chain(
    dir: &str,
    stages: &[StageConfig],
    seed: u64,
    trace: Option<crate::model::TraceOpener<'_>>,
) -> Result<Box<dyn LinkModel>> {
    let mut chain = Chain::new(stages, seed).map_err(|e| {
        let text = stages
            .get(e.stage.saturating_sub(1))
            .map(|s| s.link.to_string())
            .unwrap_or_default();
        stage_error(dir, &text, e)
    })?;
    for s in stages {
        tracing::info!("{dir}: stage {}: {}", s.name, s.link);
    }
    // One trace per stage (`PREFIX.DIR.STAGE.csv`): each queue's drops,
    // marks and sojourns stay apart, as in `lab status`.
    if let Some(open) = trace {
        for (i, s) in stages.iter().enumerate() {
            chain.set_trace(i, Some(open(&format!("{dir}.{}", s.name))?));
        }
    }
    Ok(Box::new(chain))
}

impl LinkModel for Chain {
    fn enqueue(&mut self, now: Duration, packet: Vec<u8>) {
        Chain::enqueue(self, now, packet)
    }
    fn dequeue(&mut self, now: Duration) -> Option<Vec<u8>> {
        Chain::dequeue(self, now)
    }
    fn next_event(&self) -> Option<Duration> {
        Chain::next_event(self)
    }
    /// The direction's summed counters (same shape as a single link's)
    /// plus `stages`: each stage's name, config and own counters.
    fn counters(&self) -> crate::model::LinkCounters {
        crate::model::LinkCounters {
            total: Chain::counters(self),
            stages: self
                .stages()
                .map(|(name, link)| crate::model::StageCounters {
                    name: name.to_string(),
                    rate_bit_s: link.rate().map(|r| r.0),
                    link: link.counters().clone(),
                })
                .collect(),
        }
    }
    /// The delay calibration (driver/calibrate.rs) trims the last stage's
    /// delay (`path` when the direction has `--delay`).
    fn delay(&self) -> Option<Duration> {
        self.stages().last().map(|(_, l)| l.delay())
    }
    fn set_delay(&mut self, delay: Duration) {
        if let Some(l) = self.last_stage_mut() {
            l.set_delay(delay);
        }
    }
    fn set_stage(
        &mut self,
        now: Duration,
        stage: &str,
        setting: &bloatlab_emu::StageSetting,
    ) -> std::result::Result<String, String> {
        Chain::set_stage(self, now, stage, setting).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(stages: &[&str]) -> LinkSpec {
        LinkSpec {
            stages: stages.iter().map(|s| s.parse().unwrap()).collect(),
            ..LinkSpec::default()
        }
    }

    #[test]
    fn the_issue_example_builds_two_stages_and_a_path() {
        let mut s = spec(&[
            "rate=9mbit qdisc=fq_codel",
            "rate=10mbit qdisc=fifo limit=1000p",
        ]);
        s.delay = Some("15ms".parse().unwrap());
        let st = stage_configs("up", &s).unwrap().unwrap();
        let names: Vec<_> = st.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["1", "2", "path"]);
        assert_eq!(st[2].link.delay, Duration::from_millis(15));
        assert!(st[2].link.rate.is_none());
        let m = build_chain("up", &st, 1, None).unwrap();
        let c = serde_json::to_value(m.counters()).unwrap();
        assert_eq!(c["stages"].as_array().unwrap().len(), 3);
        assert_eq!(c["stages"][1]["name"], "2");
        assert_eq!(c["enqueued"]["packets"], 0);
        // Without delay, jitter or loss there is no path stage.
        let st = stage_configs("up", &spec(&["rate=9mbit"]))
            .unwrap()
            .unwrap();
        assert_eq!(st.len(), 1);
        assert!(stage_configs("up", &LinkSpec::default()).unwrap().is_none());
    }

    /// The delay calibration trims the last stage (`path`): a packet
    /// crossing an idle chain arrives that much earlier.
    #[test]
    fn calibration_trims_the_last_stages_delay() {
        let mut s = spec(&["delay=5ms"]);
        s.delay = Some("15ms".parse().unwrap());
        let st = stage_configs("up", &s).unwrap().unwrap();
        let m = build_chain("up", &st, 1, None).unwrap();
        assert_eq!(m.delay(), Some(Duration::from_millis(15)));
        let mut m = crate::driver::calibrate::Calibrated::wrap(m, Duration::from_micros(70));
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&28u16.to_be_bytes());
        p[9] = 17;
        m.enqueue(Duration::ZERO, p);
        let mut t = Duration::ZERO;
        while m.dequeue(t).is_none() {
            t = m.next_event().expect("the packet is in the chain");
        }
        assert_eq!(t, Duration::from_millis(20) - Duration::from_micros(70));
        let r = m.calibration().unwrap();
        assert_eq!((r.configured_ns, r.host_path_ns), (15_000_000, 70_000));
    }

    /// `--trace` with stages: every stage gets a trace of its own, named
    /// `DIR.STAGE`, holding that stage's events only.
    #[test]
    fn every_stage_is_traced_under_its_own_name() {
        use std::sync::{Arc, Mutex};
        let mut s = spec(&[
            "name=router rate=100mbit qdisc=fq_codel",
            "name=modem rate=1mbit qdisc=fifo limit=2p",
        ]);
        s.delay = Some("5ms".parse().unwrap());
        let st = stage_configs("up", &s).unwrap().unwrap();
        // (file part, events seen) per trace opened.
        type Seen = Vec<(String, Vec<bloatlab_emu::Verdict>)>;
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let log = seen.clone();
        let mut open = move |file: &str| -> Result<bloatlab_emu::TraceFn> {
            let mut v = log.lock().unwrap();
            let i = v.len();
            v.push((file.to_string(), Vec::new()));
            let log = log.clone();
            Ok(Box::new(move |ev: &bloatlab_emu::TraceEvent| {
                log.lock().unwrap()[i].1.push(ev.verdict);
            }))
        };
        let mut m = build_chain("up", &st, 1, Some(&mut open)).unwrap();
        let mut p = vec![0u8; 1500];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&1500u16.to_be_bytes());
        p[9] = 17;
        for _ in 0..5 {
            m.enqueue(Duration::ZERO, p.clone());
        }
        let mut out = 0;
        while let Some(t) = m.next_event() {
            while m.dequeue(t).is_some() {
                out += 1;
            }
        }
        let seen = seen.lock().unwrap();
        let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["up.router", "up.modem", "up.path"]);
        // The router passes all five on within 0.6 ms; the modem sends one,
        // queues two (its limit) and drops two; the path sends the three.
        let count = |i: usize, verdict: bloatlab_emu::Verdict| {
            seen[i].1.iter().filter(|v| **v == verdict).count()
        };
        let sent = bloatlab_emu::Verdict::Sent;
        let dropped = bloatlab_emu::Verdict::Dropped(bloatlab_emu::DropReason::Overflow);
        assert_eq!((count(0, sent), count(1, sent), count(2, sent)), (5, 3, 3));
        assert_eq!((count(0, dropped), count(1, dropped)), (0, 2));
        assert_eq!(out, 3);
    }

    #[test]
    fn conflicts_name_both_flags_and_stage_names_must_differ() {
        let mut s = spec(&["rate=9mbit"]);
        s.rate = Some("5mbit".parse().unwrap());
        let e = stage_configs("up", &s).unwrap_err().to_string();
        assert!(
            e.contains("--rate/--up-rate") && e.contains("--stage"),
            "{e}"
        );
        let mut s = spec(&["rate=9mbit"]);
        s.params = vec!["ecn".parse().unwrap()];
        let e = stage_configs("down", &s).unwrap_err().to_string();
        assert!(e.contains("--qdisc-param/--down-qdisc-param"), "{e}");
        let e = stage_configs("up", &spec(&["name=a rate=1mbit", "name=a rate=2mbit"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unique") && e.contains("--up-stage 2"), "{e}");
        // An unnamed stage is named after its position: `2` is taken.
        let e = stage_configs("up", &spec(&["name=2 rate=1mbit", "rate=2mbit"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unique"), "{e}");
        let e = stage_configs("up", &spec(&["name=path rate=1mbit"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("path"), "{e}");
    }
}
