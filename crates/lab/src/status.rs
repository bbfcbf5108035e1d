//! The lab's status as one typed record, read through one function.
//!
//! [`read`] combines the state file (`NAME.json`: spec, hosts, emulator
//! PID) with the emulator's latest counters (`NAME.status.json`, written
//! ten times a second by [`crate::Lab::run`]). `lab status --json` prints a
//! [`StatusReport`]; `lab status` renders the same value as text; a test
//! run inside a lab reads it at its start and end and keeps the
//! difference ([`window`]), so every consumer sees what the producer wrote.

use crate::driver::direction::IoCounters;
use crate::driver::histogram::Summary;
use crate::error::{LabError, Result};
use crate::lab::LabStatus;
use crate::names;
use crate::spec::{Backend, Host, LabSpec};
use crate::state::{LabState, Phase, StateDir};
use serde::{Deserialize, Serialize};

/// Everything `lab status` knows about a lab.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReport {
    pub name: String,
    pub backend: Backend,
    pub phase: Phase,
    /// PID of the emulator process (0 before it started).
    pub pid: u32,
    /// The recorded emulator process is alive.
    pub emulator_alive: bool,
    /// Why the lab is not usable (the emulator died), if it is not.
    pub problem: Option<String>,
    pub hosts: Vec<Host>,
    pub spec: LabSpec,
    /// The emulator's latest counters; `None` before it wrote any (or when
    /// the file could not be read).
    pub counters: Option<LabStatus>,
}

/// `lab list --json`: every lab with a state file, and namespaces with the lab prefix
/// that no lab owns (leftovers `lab down NAME` removes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabList {
    pub labs: Vec<LabListEntry>,
    pub orphan_namespaces: Vec<String>,
}

/// One lab in [`LabList`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabListEntry {
    pub name: String,
    pub backend: Backend,
    pub phase: Phase,
    /// PID of the emulator process (0 before it started).
    pub pid: u32,
    /// The recorded emulator process is alive.
    pub emulator_alive: bool,
    /// Host names.
    pub hosts: Vec<String>,
}

impl LabListEntry {
    /// The entry of a lab's state.
    pub fn of(st: &LabState) -> LabListEntry {
        LabListEntry {
            name: st.name.clone(),
            backend: st.spec.backend,
            phase: st.phase,
            pid: st.pid,
            emulator_alive: st.emulator_alive(),
            hosts: st.hosts.iter().map(|h| h.name.clone()).collect(),
        }
    }
}

/// Reads every lab in `dir` (unreadable state files are logged and skipped) and the
/// namespaces in `netns` (the names under /run/netns) that carry the lab prefix but
/// belong to no lab.
pub fn list(dir: &StateDir, netns: Vec<String>) -> LabList {
    let mut labs = Vec::new();
    let mut owned: Vec<String> = Vec::new();
    for name in dir.list() {
        match dir.read(&name) {
            Ok(Some(st)) => {
                owned.extend(st.namespaces.iter().cloned());
                labs.push(LabListEntry::of(&st));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("{e}"),
        }
    }
    let orphan_namespaces = netns
        .into_iter()
        .filter(|ns| ns.starts_with(names::PREFIX) && !owned.contains(ns))
        .collect();
    LabList {
        labs,
        orphan_namespaces,
    }
}

/// Reads lab `name`'s state and counters. Fails when the name is invalid,
/// there is no such lab or its state file is unreadable; unreadable
/// counters are `None`.
pub fn read(dir: &StateDir, name: &str) -> Result<StatusReport> {
    names::validate(name)?;
    let st = dir
        .read(name)?
        .ok_or_else(|| LabError::NoSuchLab(name.to_string()))?;
    let counters = read_counters(dir, name);
    Ok(report(st, counters))
}

/// The emulator's counters alone (`NAME.status.json`), if readable.
pub fn read_counters(dir: &StateDir, name: &str) -> Option<LabStatus> {
    let bytes = std::fs::read(dir.status(name)).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("{}: {e}", dir.status(name).display());
            None
        }
    }
}

pub(crate) fn report(st: LabState, counters: Option<LabStatus>) -> StatusReport {
    let alive = st.emulator_alive();
    let problem = (!alive).then(|| {
        format!(
            "lab {}'s emulator (pid {}) is not running: the lab is dead and forwards nothing; \
             `bloatlab lab down {}` removes what is left",
            st.name, st.pid, st.name
        )
    });
    StatusReport {
        name: st.name,
        backend: st.spec.backend,
        phase: st.phase,
        pid: st.pid,
        emulator_alive: alive,
        problem,
        hosts: st.hosts,
        spec: st.spec,
        counters,
    }
}

/// What one direction of the emulator did between two status snapshots.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirectionWindow {
    /// `up` or `down`.
    pub direction: String,
    /// Seconds between the two reports.
    pub seconds: f64,
    /// Driver counters (differences).
    pub io: IoCounters,
    /// Release lateness of the packets released in the window.
    pub lateness: Summary,
    /// The link model's counters (the whole direction's; a chain's summed
    /// over its stages): differences, with `backlog` and `in_transit` as at
    /// the end and the sojourn histogram of the packets that left the qdisc
    /// in the window.
    pub link: bloatlab_emu::Counters,
}

/// The emulator's counters over a window: what happened between the
/// snapshots `start` and `end` of the same lab, per direction, plus TUN
/// ring drops in that time. Directions missing from either snapshot are
/// left out (the kernel backend has none).
pub fn window(start: &LabStatus, end: &LabStatus) -> (Vec<DirectionWindow>, u64) {
    let dirs = end
        .directions
        .iter()
        .filter_map(|(name, e)| {
            let s = start.direction(name)?;
            let io = IoCounters {
                rx_packets: e.io.rx_packets.saturating_sub(s.io.rx_packets),
                rx_bytes: e.io.rx_bytes.saturating_sub(s.io.rx_bytes),
                tx_packets: e.io.tx_packets.saturating_sub(s.io.tx_packets),
                tx_bytes: e.io.tx_bytes.saturating_sub(s.io.tx_bytes),
                rx_errors: e.io.rx_errors.saturating_sub(s.io.rx_errors),
                tx_errors: e.io.tx_errors.saturating_sub(s.io.tx_errors),
                unroutable: e.io.unroutable.saturating_sub(s.io.unroutable),
                rx_batch_full: e.io.rx_batch_full.saturating_sub(s.io.rx_batch_full),
                rx_super: e.io.rx_super.saturating_sub(s.io.rx_super),
                tx_coalesced: e.io.tx_coalesced.saturating_sub(s.io.tx_coalesced),
            };
            Some(DirectionWindow {
                direction: name.clone(),
                seconds: (e.at_s - s.at_s).max(0.0),
                io,
                lateness: e.lateness_histogram.since(&s.lateness_histogram).summary(),
                link: e.link.total.since(&s.link.total),
            })
        })
        .collect();
    (
        dirs,
        end.tun_ring_drops.saturating_sub(start.tun_ring_drops),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::direction::DirectionReport;
    use crate::driver::histogram::Histogram;
    use std::time::Duration;

    fn status(at_s: f64, late_us: &[u64], aqm_drops: u64) -> LabStatus {
        let mut h = Histogram::default();
        for &us in late_us {
            h.record(Duration::from_micros(us));
        }
        let mut link = crate::model::LinkCounters::default();
        for _ in 0..aqm_drops {
            link.total.dropped.aqm.add(1500);
        }
        LabStatus {
            name: "t".into(),
            backend: Backend::Userspace,
            uptime_s: at_s + 0.1,
            unix_time_s: 1000.0 + at_s + 0.1,
            directions: vec![(
                "up".into(),
                DirectionReport {
                    at_s,
                    lateness: h.summary(),
                    lateness_histogram: h,
                    link,
                    running: true,
                    ..DirectionReport::default()
                },
            )],
            devices: vec![],
            tun_ring_drops: 3,
            qdiscs: vec![],
            calibration: None,
            host_tracking: None,
        }
    }

    #[test]
    fn window_is_the_difference_of_two_snapshots() {
        let before: Vec<u64> = vec![20_000; 50];
        let mut after = before.clone();
        after.extend(std::iter::repeat_n(10, 1000));
        let (a, b) = (status(1.0, &before, 4), status(11.0, &after, 10));
        // Through JSON, as the test run reads them.
        let rt = |s: &LabStatus| -> LabStatus {
            serde_json::from_slice(&serde_json::to_vec(s).unwrap()).unwrap()
        };
        let (dirs, ring) = window(&rt(&a), &rt(&b));
        assert_eq!(ring, 0);
        assert_eq!(dirs.len(), 1);
        let d = &dirs[0];
        assert_eq!(d.direction, "up");
        assert!((d.seconds - 10.0).abs() < 1e-9);
        assert_eq!(d.link.dropped.aqm.packets, 6);
        assert_eq!(d.lateness.count, 1000);
        assert!(
            d.lateness.p99_us >= 10.0 && d.lateness.p99_us < 10.5,
            "{:?}",
            d.lateness
        );
        assert!(
            d.lateness.max_us < 10.5,
            "the 20 ms before the window are not in it"
        );
        assert!((b.taken_unix_s() - 1011.0).abs() < 1e-9);
    }
}
