//! The sans-IO plan of a test: its phases and which runners start and stop when.
//!
//! A [`Plan`] is pure data computed from a [`TestName`] and [`TestParams`]: no clock, no
//! process. The driver ([`crate::driver`]) starts each [`Runner`] at its `start` offset
//! (from the run start) and stops it at `stop`; the phases decide which samples each
//! summary covers (by send time, `docs/statistics.md` §2).
//!
//! Shapes (`L` = `-l`, `I` = idle before, `R` = idle after):
//!
//! | test | phases | load |
//! |---|---|---|
//! | most | idle `[0, I)`, loaded `[I, I+L)`, recovery `[I+L, I+L+R)` | flows run `[I, I+L)` |
//! | `speedtest` | idle, `download` `[I, I+L)`, `upload` `[I+L, I+2L)`, recovery | down flows, then up flows |
//! | `ping` | one idle phase `[0, L)` | none |
//! | `rpm` | as most | the draft's run (`bloatlab rpm`) `[I, I+L)`; phases then follow its runs (`crate::rpm`) |
//!
//! Probes run over the whole timeline. `rrul46` pins each runner to a [`Family`] (half
//! the flows and probes over IPv4, half over IPv6, as flent's `rrul46.conf`); its series
//! names end in `_v4`/`_v6`, so they stay unique and say their family.

use std::time::Duration;

use bloatlab_stats::{Direction, Phase, PhaseKind, Timeline};
use bloatlab_units::{Bytes, CongestionControl};

use crate::catalog::{TestName, Tos};

/// The command-line options of a test, defined with their flags in
/// `bloatlab_invoke::test` (which `suite` and `experiment` both see).
pub use bloatlab_invoke::test::TestParams;

/// Parameters that make no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// `-l 0`.
    #[error("the loaded length (-l) must be more than zero")]
    ZeroLength,
    /// `--flows` out of range.
    #[error("--flows {0} is out of range (1..=64)")]
    Flows(u32),
    /// `--pulses 0`.
    #[error("--pulses must be at least 1")]
    Pulses,
    /// Probe interval zero or above one second.
    #[error("the probe interval must be more than 0 and at most 1 s")]
    ProbeInterval,
    /// Sample interval zero.
    #[error("the sample interval must be more than zero")]
    SampleInterval,
}

impl PlanError {
    /// The flag whose value makes no plan (an experiment file names its key and line).
    pub fn flag(&self) -> &'static str {
        match self {
            PlanError::ZeroLength => "--length",
            PlanError::Flows(_) => "--flows",
            PlanError::Pulses => "--pulses",
            PlanError::ProbeInterval => "--probe-interval",
            PlanError::SampleInterval => "--sample-interval",
        }
    }
}

/// How much a TCP runner transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// One transfer from `start` to `stop` (client `-t stop-start`).
    UntilStop,
    /// Sequential transfers of `bytes` each (client `-n`), `count` of them, each started
    /// when the previous one ends, none started at or after `stop`.
    Pulses {
        /// Bytes per transfer.
        bytes: Bytes,
        /// How many.
        count: u32,
    },
}

/// One TCP load flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpFlow {
    /// Up (client sends) or down (server sends, client `-R`).
    pub direction: Direction,
    /// IP TOS of the flow's packets (client `-S`), `None` = unmarked.
    pub tos: Option<Tos>,
    /// Congestion control (client `-Z`), `None` = system default.
    pub cc: Option<CongestionControl>,
    /// How much to send.
    pub amount: Amount,
    /// The flow asks for ECN on its own (`--ecn mix`: its socket gets the run's fwmark,
    /// whose route has `features ecn`). `false` = the host's `tcp_ecn` decides.
    pub ecn: bool,
}

/// UDP (bloatlab responder) or ICMP echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeMode {
    /// `bloatlab ping`: RTT and one-way delays.
    Udp,
    /// `bloatlab ping --icmp`: RTT only.
    Icmp,
}

/// One latency probe stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// UDP or ICMP.
    pub mode: ProbeMode,
    /// IP TOS, `None` = unmarked.
    pub tos: Option<Tos>,
    /// Time between probes.
    pub interval: Duration,
    /// Datagram size in bytes, `None` = the probe tool's default.
    pub size: Option<usize>,
    /// The stream is a VoIP stand-in: assess it with the E-model.
    pub voip: bool,
}

/// What a runner does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerKind {
    /// A TCP flow.
    Tcp(TcpFlow),
    /// A probe stream.
    Probe(Probe),
    /// The draft's responsiveness run, `bloatlab rpm URL --json` (`rpm` test): its load
    /// connections are the load; where it goes is the target's ([`crate::driver::RpmClient`]).
    Rpm,
}

/// The IP family a runner is pinned to (`rrul46` runs half its runners over each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The suffix of series names of pinned runners (`tcp_up_be_v4`, `udp_bk_v6`).
    pub fn suffix(self) -> &'static str {
        match self {
            Family::V4 => "v4",
            Family::V6 => "v6",
        }
    }
}

/// One runner: a subprocess (or a sequence of them, for pulses) between two offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runner {
    /// Series name in the results file (`tcp_up_ef`, `udp_bk`, `icmp`, ...).
    pub name: String,
    /// The family it must use (its name then ends in `_v4`/`_v6`); `None` = whatever
    /// the server's name resolves to.
    pub family: Option<Family>,
    /// Offset from the run start at which it starts.
    pub start: Duration,
    /// Offset at which it should be done.
    pub stop: Duration,
    /// What it runs.
    pub kind: RunnerKind,
}

/// A whole test: phases and runners.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Which test.
    pub test: TestName,
    /// The phases.
    pub timeline: Timeline,
    /// The runners, TCP flows first.
    pub runners: Vec<Runner>,
}

impl Plan {
    /// Offset at which the last phase ends.
    pub fn end(&self) -> Duration {
        self.timeline
            .phases()
            .last()
            .map_or(Duration::ZERO, |p| p.end)
    }

    /// The TCP runners.
    pub fn tcp(&self) -> impl Iterator<Item = (&Runner, &TcpFlow)> {
        self.runners.iter().filter_map(|r| match &r.kind {
            RunnerKind::Tcp(f) => Some((r, f)),
            RunnerKind::Probe(_) | RunnerKind::Rpm => None,
        })
    }

    /// The probe runners.
    pub fn probes(&self) -> impl Iterator<Item = (&Runner, &Probe)> {
        self.runners.iter().filter_map(|r| match &r.kind {
            RunnerKind::Probe(p) => Some((r, p)),
            RunnerKind::Tcp(_) | RunnerKind::Rpm => None,
        })
    }

    /// The draft's responsiveness run, if the test has one.
    pub fn rpm(&self) -> Option<&Runner> {
        self.runners.iter().find(|r| r.kind == RunnerKind::Rpm)
    }
}

const RRUL_MARKS: [Tos; 4] = [Tos::CS0, Tos::CS1, Tos::CS5, Tos::EF];

/// Short label of a marking for flow names (flent's BE/BK/CS5/EF).
fn mark_label(t: Tos) -> String {
    match t {
        Tos::CS0 => "be".into(),
        Tos::CS1 => "bk".into(),
        Tos::CS5 => "cs5".into(),
        Tos::EF => "ef".into(),
        Tos(v) => format!("tos{v:02x}"),
    }
}

/// Builds the plan of `test` with `p`.
pub fn plan(test: TestName, p: &TestParams) -> Result<Plan, PlanError> {
    if p.loaded.is_zero() {
        return Err(PlanError::ZeroLength);
    }
    if !(1..=64).contains(&p.flows) {
        return Err(PlanError::Flows(p.flows));
    }
    if p.pulses == 0 {
        return Err(PlanError::Pulses);
    }
    if p.probe_interval.is_zero() || p.probe_interval > Duration::from_secs(1) {
        return Err(PlanError::ProbeInterval);
    }
    if p.sample_interval.is_zero() {
        return Err(PlanError::SampleInterval);
    }
    let mut b = Builder::new(p);
    let (i, l) = (p.idle_before, p.loaded);
    let load_end = i + l;
    let timeline = match test {
        TestName::Ping => Timeline::idle_loaded_recovery(l, Duration::ZERO, Duration::ZERO),
        TestName::Speedtest => {
            let mut phases = Vec::new();
            if !i.is_zero() {
                phases.push(Phase::new(PhaseKind::Idle, Duration::ZERO, i));
            }
            let mut down = Phase::new(PhaseKind::Loaded, i, load_end);
            down.name = "download".into();
            let mut up = Phase::new(PhaseKind::Loaded, load_end, load_end + l);
            up.name = "upload".into();
            phases.extend([down, up]);
            if !p.idle_after.is_zero() {
                phases.push(Phase::new(
                    PhaseKind::Recovery,
                    load_end + l,
                    load_end + l + p.idle_after,
                ));
            }
            // Ordered, non-empty, uniquely named by construction.
            Timeline::new(phases).map_err(|_| PlanError::ZeroLength)?
        }
        _ => Timeline::idle_loaded_recovery(i, l, p.idle_after),
    };
    let end = timeline.phases().last().map_or(Duration::ZERO, |ph| ph.end);
    let (up, down) = (Direction::Up, Direction::Down);
    match test {
        TestName::Rrul => {
            for dir in [up, down] {
                b.marked_flows(dir, &RRUL_MARKS, i, load_end);
            }
        }
        TestName::Rrul46 => {
            // flent's rrul46: BE and BK over IPv4, CS5 and EF over IPv6.
            for dir in [up, down] {
                b.family = Some(Family::V4);
                b.marked_flows(dir, &RRUL_MARKS[..2], i, load_end);
                b.family = Some(Family::V6);
                b.marked_flows_from(dir, &RRUL_MARKS, 2, i, load_end);
            }
            b.family = None;
        }
        TestName::RrulBe => {
            for dir in [up, down] {
                b.numbered_flows(dir, 4, i, load_end);
            }
        }
        TestName::TcpUpload => b.numbered_flows(up, 1, i, load_end),
        TestName::TcpDownload => b.numbered_flows(down, 1, i, load_end),
        TestName::TcpBidirectional | TestName::Voip => {
            b.numbered_flows(up, 1, i, load_end);
            b.numbered_flows(down, 1, i, load_end);
        }
        TestName::TcpNup => b.numbered_flows(up, p.flows, i, load_end),
        TestName::TcpNdown => b.numbered_flows(down, p.flows, i, load_end),
        TestName::Speedtest => {
            b.numbered_flows(down, p.flows, i, load_end);
            b.numbered_flows(up, p.flows, load_end, load_end + l);
        }
        TestName::Ping => {}
        TestName::Rpm => b.runners.push(Runner {
            name: "rpm".into(),
            family: None,
            start: i,
            stop: load_end,
            kind: RunnerKind::Rpm,
        }),
        TestName::OneVsOne => b.numbered_flows(up, 2, i, load_end),
        TestName::OneVsPulses => {
            b.flow("tcp_up_long".into(), up, 0, Amount::UntilStop, i, load_end);
            let pulses = Amount::Pulses {
                bytes: p.pulse_size,
                count: p.pulses,
            };
            b.flow("tcp_up_pulses".into(), up, 1, pulses, i, load_end);
        }
    }
    let udp = |tos, size, voip| Probe {
        mode: ProbeMode::Udp,
        tos,
        interval: p.probe_interval,
        size,
        voip,
    };
    let icmp = Probe {
        mode: ProbeMode::Icmp,
        ..udp(None, None, false)
    };
    let mut probes: Vec<(String, Option<Family>, Probe)> = match test {
        // flent's rrul46 probes UDP BE and BK over each family (its ICMP is IPv6 only;
        // we ping over both, so each family has a kernel-echo baseline).
        TestName::Rrul46 => [Family::V4, Family::V6]
            .into_iter()
            .flat_map(|f| {
                let n = |base: &str| format!("{base}_{}", f.suffix());
                [
                    (n("udp_be"), Some(f), udp(None, None, false)),
                    (n("udp_bk"), Some(f), udp(Some(Tos::CS1), None, false)),
                    (n("icmp"), Some(f), icmp.clone()),
                ]
            })
            .collect(),
        TestName::Rrul => vec![
            ("udp_ef".into(), None, udp(Some(Tos::EF), None, false)),
            ("udp_bk".into(), None, udp(Some(Tos::CS1), None, false)),
            ("udp_be".into(), None, udp(None, None, false)),
        ],
        TestName::RrulBe => (1..=3)
            .map(|n| (format!("udp_be{n}"), None, udp(None, None, false)))
            .collect(),
        // G.711 at 20 ms packetisation: 50 pps, 160 B of voice + 12 B RTP = 172 B of UDP
        // payload (flent's voip test uses the same size and rate).
        TestName::Voip => vec![(
            "voip".into(),
            None,
            Probe {
                interval: Duration::from_millis(20),
                ..udp(Some(Tos::EF), Some(172), true)
            },
        )],
        _ => vec![("udp_be".into(), None, udp(None, None, false))],
    };
    if test != TestName::Rrul46 {
        probes.push(("icmp".into(), None, icmp));
    }
    for (name, family, probe) in probes {
        b.runners.push(Runner {
            name,
            family,
            start: Duration::ZERO,
            stop: end,
            kind: RunnerKind::Probe(probe),
        });
    }
    Ok(Plan {
        test,
        timeline,
        runners: b.runners,
    })
}

/// Accumulates runners, handing out congestion controls in order.
struct Builder<'a> {
    p: &'a TestParams,
    runners: Vec<Runner>,
    tcp_count: usize,
    /// The family of the flows added next (its suffix ends their names).
    family: Option<Family>,
}

impl<'a> Builder<'a> {
    fn new(p: &'a TestParams) -> Self {
        Builder {
            p,
            runners: Vec::new(),
            tcp_count: 0,
            family: None,
        }
    }

    fn dir_label(dir: Direction) -> &'static str {
        match dir {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }

    /// One flow; `index` is its position within its direction (for `--markings`).
    fn flow(
        &mut self,
        name: String,
        direction: Direction,
        index: usize,
        amount: Amount,
        start: Duration,
        stop: Duration,
    ) {
        self.flow_marked(name, direction, index, None, amount, start, stop);
    }

    #[allow(clippy::too_many_arguments)] // private helper; every argument is distinct
    fn flow_marked(
        &mut self,
        name: String,
        direction: Direction,
        index: usize,
        default_tos: Option<Tos>,
        amount: Amount,
        start: Duration,
        stop: Duration,
    ) {
        let m = &self.p.markings;
        let tos = if m.is_empty() {
            default_tos
        } else {
            Some(m[index % m.len()])
        };
        let cc =
            (!self.p.cc.is_empty()).then(|| self.p.cc[self.tcp_count % self.p.cc.len()].clone());
        self.tcp_count += 1;
        // Deterministic halves: flows 1, 3, ... of each direction ask for ECN.
        let ecn = self.p.ecn_mix && index.is_multiple_of(2);
        self.runners.push(Runner {
            name,
            family: self.family,
            start,
            stop,
            kind: RunnerKind::Tcp(TcpFlow {
                direction,
                tos,
                cc,
                amount,
                ecn,
            }),
        });
    }

    fn numbered_flows(&mut self, dir: Direction, n: u32, start: Duration, stop: Duration) {
        for k in 0..n as usize {
            let name = format!("tcp_{}_{}", Self::dir_label(dir), k + 1);
            self.flow(name, dir, k, Amount::UntilStop, start, stop);
        }
    }

    fn marked_flows(&mut self, dir: Direction, marks: &[Tos], start: Duration, stop: Duration) {
        self.marked_flows_from(dir, marks, 0, start, stop);
    }

    /// The flows of `marks[first..]`; a flow's index within its direction (for
    /// `--markings`) is its index in `marks`.
    fn marked_flows_from(
        &mut self,
        dir: Direction,
        marks: &[Tos],
        first: usize,
        start: Duration,
        stop: Duration,
    ) {
        for (k, &t) in marks.iter().enumerate().skip(first) {
            // Name after the marking actually used, so `--markings` renames the flows.
            let m = &self.p.markings;
            let used = if m.is_empty() { t } else { m[k % m.len()] };
            let base = format!("tcp_{}_{}", Self::dir_label(dir), mark_label(used));
            // The family suffix stays last: `tcp_up_be_2_v4`.
            let with_family = |n: String| match self.family {
                Some(f) => format!("{n}_{}", f.suffix()),
                None => n,
            };
            let name = with_family(base.clone());
            let name = if self.runners.iter().any(|r| r.name == name) {
                with_family(format!("{base}_{}", k + 1))
            } else {
                name
            };
            self.flow_marked(name, dir, k, Some(t), Amount::UntilStop, start, stop);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    fn short() -> TestParams {
        TestParams {
            loaded: s(30),
            idle_before: s(2),
            idle_after: s(3),
            ..TestParams::default()
        }
    }

    #[test]
    fn rrul_matches_flent() {
        let p = plan(TestName::Rrul, &TestParams::default()).unwrap();
        let ph = p.timeline.phases();
        assert_eq!(ph.len(), 3);
        assert_eq!((ph[0].start, ph[0].end), (s(0), s(5)));
        assert_eq!(
            (ph[1].kind, ph[1].start, ph[1].end),
            (PhaseKind::Loaded, s(5), s(65))
        );
        assert_eq!((ph[2].start, ph[2].end), (s(65), s(70)));
        assert_eq!(p.end(), s(70));
        let tcp: Vec<_> = p.tcp().collect();
        assert_eq!(tcp.len(), 8);
        let names: Vec<&str> = tcp.iter().map(|(r, _)| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "tcp_up_be",
                "tcp_up_bk",
                "tcp_up_cs5",
                "tcp_up_ef",
                "tcp_down_be",
                "tcp_down_bk",
                "tcp_down_cs5",
                "tcp_down_ef"
            ]
        );
        let tos: Vec<u8> = tcp.iter().map(|(_, f)| f.tos.unwrap().0).collect();
        assert_eq!(tos, [0x00, 0x20, 0xa0, 0xb8, 0x00, 0x20, 0xa0, 0xb8]);
        assert!(tcp[..4].iter().all(|(_, f)| f.direction == Direction::Up));
        assert!(tcp[4..].iter().all(|(_, f)| f.direction == Direction::Down));
        assert!(tcp.iter().all(|(r, _)| r.start == s(5) && r.stop == s(65)));
        let probes: Vec<_> = p.probes().collect();
        let pn: Vec<(&str, Option<u8>, ProbeMode)> = probes
            .iter()
            .map(|(r, q)| (r.name.as_str(), q.tos.map(|t| t.0), q.mode))
            .collect();
        assert_eq!(
            pn,
            [
                ("udp_ef", Some(0xb8), ProbeMode::Udp),
                ("udp_bk", Some(0x20), ProbeMode::Udp),
                ("udp_be", None, ProbeMode::Udp),
                ("icmp", None, ProbeMode::Icmp)
            ]
        );
        assert!(
            probes
                .iter()
                .all(|(r, _)| r.start == s(0) && r.stop == s(70))
        );
    }

    #[test]
    fn rrul46_splits_flows_and_probes_between_the_families_as_flent() {
        let p = plan(TestName::Rrul46, &TestParams::default()).unwrap();
        assert_eq!(
            p.timeline,
            plan(TestName::Rrul, &TestParams::default())
                .unwrap()
                .timeline
        );
        let tcp: Vec<_> = p
            .tcp()
            .map(|(r, f)| (r.name.as_str(), r.family, f.direction, f.tos))
            .collect();
        let (v4, v6) = (Some(Family::V4), Some(Family::V6));
        let (up, down) = (Direction::Up, Direction::Down);
        assert_eq!(
            tcp,
            [
                ("tcp_up_be_v4", v4, up, Some(Tos::CS0)),
                ("tcp_up_bk_v4", v4, up, Some(Tos::CS1)),
                ("tcp_up_cs5_v6", v6, up, Some(Tos::CS5)),
                ("tcp_up_ef_v6", v6, up, Some(Tos::EF)),
                ("tcp_down_be_v4", v4, down, Some(Tos::CS0)),
                ("tcp_down_bk_v4", v4, down, Some(Tos::CS1)),
                ("tcp_down_cs5_v6", v6, down, Some(Tos::CS5)),
                ("tcp_down_ef_v6", v6, down, Some(Tos::EF)),
            ]
        );
        let probes: Vec<_> = p
            .probes()
            .map(|(r, q)| (r.name.as_str(), r.family, q.mode, q.tos))
            .collect();
        let (udp, icmp) = (ProbeMode::Udp, ProbeMode::Icmp);
        assert_eq!(
            probes,
            [
                ("udp_be_v4", v4, udp, None),
                ("udp_bk_v4", v4, udp, Some(Tos::CS1)),
                ("icmp_v4", v4, icmp, None),
                ("udp_be_v6", v6, udp, None),
                ("udp_bk_v6", v6, udp, Some(Tos::CS1)),
                ("icmp_v6", v6, icmp, None),
            ]
        );
        // Every other test leaves the family to the server's name.
        for t in TestName::ALL.into_iter().filter(|t| *t != TestName::Rrul46) {
            let p = plan(t, &TestParams::default()).unwrap();
            assert!(p.runners.iter().all(|r| r.family.is_none()), "{t}");
        }
    }

    #[test]
    fn rrul46_names_stay_unique_and_end_in_the_family_under_markings() {
        let params = TestParams {
            markings: vec![Tos::EF],
            ..short()
        };
        let p = plan(TestName::Rrul46, &params).unwrap();
        let names: Vec<&str> = p.runners.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            &names[..4],
            [
                "tcp_up_ef_v4",
                "tcp_up_ef_2_v4",
                "tcp_up_ef_v6",
                "tcp_up_ef_4_v6"
            ]
        );
        let mut uniq = names.clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), names.len(), "{names:?}");
        for r in &p.runners {
            let f = r.family.expect("rrul46 pins every runner");
            assert!(r.name.ends_with(f.suffix()), "{}", r.name);
        }
    }

    #[test]
    fn short_lengths_shift_every_offset() {
        let p = plan(TestName::TcpBidirectional, &short()).unwrap();
        assert_eq!(p.end(), s(35));
        for (r, _) in p.tcp() {
            assert_eq!((r.start, r.stop), (s(2), s(32)));
        }
    }

    #[test]
    fn speedtest_runs_one_direction_at_a_time() {
        let p = plan(TestName::Speedtest, &short()).unwrap();
        let names: Vec<&str> = p
            .timeline
            .phases()
            .iter()
            .map(|ph| ph.name.as_str())
            .collect();
        assert_eq!(names, ["idle", "download", "upload", "recovery"]);
        let dl = p.timeline.by_name("download").unwrap();
        let ul = p.timeline.by_name("upload").unwrap();
        assert_eq!(
            (dl.start, dl.end, ul.start, ul.end),
            (s(2), s(32), s(32), s(62))
        );
        assert_eq!(p.end(), s(65));
        for (r, f) in p.tcp() {
            match f.direction {
                Direction::Down => assert_eq!((r.start, r.stop), (s(2), s(32))),
                Direction::Up => assert_eq!((r.start, r.stop), (s(32), s(62))),
            }
        }
        assert_eq!(p.tcp().count(), 8);
    }

    #[test]
    fn ping_is_one_idle_phase_without_load() {
        let p = plan(TestName::Ping, &short()).unwrap();
        assert_eq!(p.timeline.phases().len(), 1);
        assert_eq!(p.timeline.phases()[0].kind, PhaseKind::Idle);
        assert_eq!(p.end(), s(30));
        assert_eq!(p.tcp().count(), 0);
        assert_eq!(p.probes().count(), 2);
    }

    #[test]
    fn rpm_runs_the_drafts_client_in_the_loaded_phase_and_probes_throughout() {
        let p = plan(TestName::Rpm, &short()).unwrap();
        assert_eq!(
            p.timeline,
            plan(TestName::TcpUpload, &short()).unwrap().timeline
        );
        assert_eq!(p.tcp().count(), 0);
        let r = p.rpm().unwrap();
        assert_eq!((r.name.as_str(), r.start, r.stop), ("rpm", s(2), s(32)));
        let probes: Vec<_> = p
            .probes()
            .map(|(r, q)| (r.name.as_str(), q.mode, r.start, r.stop))
            .collect();
        assert_eq!(
            probes,
            [
                ("udp_be", ProbeMode::Udp, s(0), s(35)),
                ("icmp", ProbeMode::Icmp, s(0), s(35))
            ]
        );
        assert!(plan(TestName::Rrul, &short()).unwrap().rpm().is_none());
    }

    #[test]
    fn nup_flows_cc_and_markings_cycle() {
        let params = TestParams {
            flows: 3,
            cc: ["reno", "bbr"]
                .map(|n| CongestionControl::new(n).unwrap())
                .to_vec(),
            markings: vec![Tos::EF],
            ..short()
        };
        let p = plan(TestName::TcpNup, &params).unwrap();
        let f: Vec<_> = p
            .tcp()
            .map(|(r, f)| (r.name.as_str(), f.cc.as_deref(), f.tos))
            .collect();
        assert_eq!(
            f,
            [
                ("tcp_up_1", Some("reno"), Some(Tos::EF)),
                ("tcp_up_2", Some("bbr"), Some(Tos::EF)),
                ("tcp_up_3", Some("reno"), Some(Tos::EF))
            ]
        );
    }

    #[test]
    fn rrul_markings_override_renames_flows_uniquely() {
        let params = TestParams {
            markings: vec![Tos::CS0],
            ..short()
        };
        let p = plan(TestName::Rrul, &params).unwrap();
        let names: Vec<&str> = p.tcp().map(|(r, _)| r.name.as_str()).collect();
        assert_eq!(
            &names[..4],
            ["tcp_up_be", "tcp_up_be_2", "tcp_up_be_3", "tcp_up_be_4"]
        );
        assert!(p.tcp().all(|(_, f)| f.tos == Some(Tos::CS0)));
    }

    #[test]
    fn pulses_and_voip() {
        let p = plan(TestName::OneVsPulses, &short()).unwrap();
        let f: Vec<_> = p.tcp().map(|(r, f)| (r.name.as_str(), f.amount)).collect();
        assert_eq!(
            f,
            [
                ("tcp_up_long", Amount::UntilStop),
                (
                    "tcp_up_pulses",
                    Amount::Pulses {
                        bytes: Bytes(1 << 20),
                        count: 40
                    }
                )
            ]
        );
        let v = plan(TestName::Voip, &short()).unwrap();
        let (r, q) = v.probes().next().unwrap();
        assert_eq!(r.name, "voip");
        assert!(q.voip);
        assert_eq!((q.interval, q.size), (Duration::from_millis(20), Some(172)));
    }

    #[test]
    fn bad_params() {
        let zero = TestParams {
            loaded: Duration::ZERO,
            ..short()
        };
        assert_eq!(plan(TestName::Rrul, &zero), Err(PlanError::ZeroLength));
        let many = TestParams {
            flows: 65,
            ..short()
        };
        assert_eq!(plan(TestName::TcpNup, &many), Err(PlanError::Flows(65)));
    }
}
