//! What the `rpm` test does beyond the others (pure): it reads the draft's run from its
//! `bloatlab rpm URL --json` child, through the producer's own types
//! (`bloatlab_rpm::results::parse_json`), and lays that run onto the test's time axis.
//!
//! **Phases follow the draft's runs.** The plan starts the child when the loaded phase
//! starts and bounds it by the phase (`--duration L`), but the draft ends a run as soon as
//! its responsiveness is stable, and spends its first moments on the config and on idle
//! latency (10 GETs on an idle connection). A loaded phase holding those unloaded moments
//! would dilute the probes' loaded figures, so the results' loaded phase is the draft's
//! run itself: `[spawn + run start, spawn + run end)` (`download` and `upload` with
//! `--sequential`, one phase per run), and recovery the `R` seconds after it (within the
//! plan). The probes run over the whole plan as in every test; samples between the
//! phases (the child's config and idle stage) belong to none.

use std::time::Duration;

use bloatlab_results::schema::RpmRecord;
use bloatlab_stats::{Phase, PhaseKind, Timeline};

use crate::driver::Output;

/// The draft's run did not give a result: the message says why, in the child's words
/// where it gave some.
pub fn read(o: &Output) -> Result<RpmRecord, String> {
    match o.status {
        Some(0) => {}
        Some(_) => {
            let line = o.error_line();
            let why = line.trim_start_matches("bloatlab: error: ").trim();
            return Err(if why.is_empty() {
                format!("bloatlab rpm exited with status {:?}", o.status)
            } else {
                why.to_owned()
            });
        }
        None => return Err("bloatlab rpm was killed before it reported".into()),
    }
    let rec = bloatlab_rpm::results::parse_json(&o.stdout).map_err(|e| e.to_string())?;
    if rec.responsiveness.is_empty() {
        return Err("bloatlab rpm reported no run".into());
    }
    if let Some(r) = rec.responsiveness.iter().find(|r| r.rpm.is_none()) {
        return Err(format!(
            "the {} run measured no responsiveness (not one foreign and one self probe \
             completed in {:.1} s)",
            r.run,
            r.end_ns.saturating_sub(r.start_ns) as f64 / 1e9
        ));
    }
    Ok(rec)
}

/// The name of the test's phase for one of the draft's runs: `loaded` for the one run of
/// the default (concurrent) and one-direction modes, so an `rpm` test lines up with the
/// other tests' loaded phase; the run's own name (`download`, `upload`) with
/// `--sequential`, as `speedtest` names its phases.
pub fn phase_name(rec: &RpmRecord, run: &str) -> String {
    if rec.responsiveness.len() > 1 {
        run.to_owned()
    } else {
        "loaded".to_owned()
    }
}

/// The test's phases as the draft's runs went (module docs): `planned`'s idle phase, one
/// loaded phase per run at `spawned` (the child's start on the run's axis) plus the run's
/// own offsets, then recovery for the planned recovery length, all within the plan. Also
/// sets each run's `phase` in `rec`. `None` when no run left a phase of its own (then the
/// planned phases stand).
pub fn phases(planned: &Timeline, rec: &mut RpmRecord, spawned: Duration) -> Option<Timeline> {
    let end = planned.phases().last()?.end;
    let idle_end = planned
        .first(PhaseKind::Idle)
        .map_or(Duration::ZERO, |p| p.end);
    let recovery = planned
        .first(PhaseKind::Recovery)
        .map_or(Duration::ZERO, Phase::duration);
    let mut out: Vec<Phase> = planned
        .first(PhaseKind::Idle)
        .cloned()
        .into_iter()
        .collect();
    let mut names = Vec::new();
    for r in &rec.responsiveness {
        let at = |ns: u64| (spawned + Duration::from_nanos(ns)).min(end);
        let start = at(r.start_ns).max(out.last().map_or(idle_end, |p| p.end));
        let stop = at(r.end_ns);
        if stop <= start {
            names.push(None);
            continue;
        }
        let mut p = Phase::new(PhaseKind::Loaded, start, stop);
        p.name = phase_name(rec, &r.run);
        names.push(Some(p.name.clone()));
        out.push(p);
    }
    let last = out.last().filter(|p| p.kind == PhaseKind::Loaded)?.end;
    let rec_end = (last + recovery).min(end);
    if rec_end > last {
        out.push(Phase::new(PhaseKind::Recovery, last, rec_end));
    }
    let timeline = Timeline::new(out).ok()?;
    for (r, name) in rec.responsiveness.iter_mut().zip(names) {
        r.phase = name;
    }
    Some(timeline)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bloatlab_results::schema::{RpmFailedRecord, RpmResponsivenessRecord, RpmSamplesRecord};

    fn s(v: f64) -> Duration {
        Duration::from_secs_f64(v)
    }

    /// A run of the draft's test from `start` to `end` s of its session.
    pub(crate) fn run(
        name: &str,
        start: f64,
        end: f64,
        rpm: Option<f64>,
    ) -> RpmResponsivenessRecord {
        RpmResponsivenessRecord {
            run: name.into(),
            start_ns: (start * 1e9) as u64,
            end_ns: (end * 1e9) as u64,
            ended: "stable".into(),
            intervals: 7,
            rpm,
            confidence: "High".into(),
            band: rpm.map(|_| "Good".into()),
            p90_rpm: rpm.map(|r| r / 2.0),
            p90_band: None,
            foreign_rpm: None,
            loaded_rpm: None,
            trimmed: None,
            p90: None,
            samples: RpmSamplesRecord::default(),
            failed_probes: RpmFailedRecord::default(),
            rpm_series: Vec::new(),
            phase: None,
        }
    }

    /// A session of `runs` against a loopback server.
    pub(crate) fn record(runs: Vec<RpmResponsivenessRecord>) -> RpmRecord {
        RpmRecord {
            config_url: "https://127.0.0.1:8443/.well-known/nq".into(),
            address: "127.0.0.1:8443".into(),
            protocol: "h2".into(),
            tls: Some("TLSv1.3".into()),
            mode: if runs.len() > 1 {
                "sequential"
            } else {
                "concurrent"
            }
            .into(),
            self_probes: "h2_stream".into(),
            parameters: bloatlab_rpm::results::parameters(
                &bloatlab_rpm::Params::default(),
                Duration::from_secs(20),
                Duration::from_secs(10),
            ),
            idle: None,
            download: None,
            upload: None,
            responsiveness: runs,
            elapsed_ns: 0,
        }
    }

    fn output(status: Option<i32>, stdout: &[u8], stderr: &str) -> Output {
        Output {
            spawned: s(2.0),
            exited: s(12.0),
            status,
            stdout: stdout.to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    fn json(rec: &RpmRecord) -> Vec<u8> {
        serde_json::to_vec(&bloatlab_rpm::results::json_document(rec).unwrap()).unwrap()
    }

    fn spans(t: &Timeline) -> Vec<(String, PhaseKind, Duration, Duration)> {
        t.phases()
            .iter()
            .map(|p| (p.name.clone(), p.kind, p.start, p.end))
            .collect()
    }

    /// Idle 2 s, loaded 20 s, recovery 3 s; the child spawned at 2.01 s.
    fn planned() -> Timeline {
        Timeline::idle_loaded_recovery(s(2.0), s(20.0), s(3.0))
    }

    #[test]
    fn the_loaded_phase_is_the_drafts_run_and_recovery_follows_it() {
        // Config and idle latency took 0.3 s; the run was stable after 9.7 s.
        let mut rec = record(vec![run("concurrent", 0.3, 10.0, Some(500.0))]);
        let t = phases(&planned(), &mut rec, s(2.01)).unwrap();
        assert_eq!(
            spans(&t),
            [
                ("idle".into(), PhaseKind::Idle, s(0.0), s(2.0)),
                ("loaded".into(), PhaseKind::Loaded, s(2.31), s(12.01)),
                ("recovery".into(), PhaseKind::Recovery, s(12.01), s(15.01)),
            ]
        );
        assert_eq!(rec.responsiveness[0].phase.as_deref(), Some("loaded"));
    }

    #[test]
    fn sequential_runs_are_download_and_upload_phases_and_stay_within_the_plan() {
        // The upload run overran the plan's loaded phase: recovery is what is left.
        let mut rec = record(vec![
            run("download", 0.2, 10.0, Some(400.0)),
            run("upload", 10.05, 21.5, Some(300.0)),
        ]);
        let t = phases(&planned(), &mut rec, s(2.0)).unwrap();
        assert_eq!(
            spans(&t),
            [
                ("idle".into(), PhaseKind::Idle, s(0.0), s(2.0)),
                ("download".into(), PhaseKind::Loaded, s(2.2), s(12.0)),
                ("upload".into(), PhaseKind::Loaded, s(12.05), s(23.5)),
                ("recovery".into(), PhaseKind::Recovery, s(23.5), s(25.0)),
            ]
        );
        let names: Vec<_> = rec.responsiveness.iter().map(|r| r.phase.clone()).collect();
        assert_eq!(names, [Some("download".into()), Some("upload".into())]);
        // Past the plan's end there is no phase left: the planned ones stand.
        let mut late = record(vec![run("concurrent", 30.0, 31.0, Some(1.0))]);
        assert!(phases(&planned(), &mut late, s(2.0)).is_none());
        assert_eq!(late.responsiveness[0].phase, None);
    }

    #[test]
    fn a_failed_or_empty_run_is_an_error_in_the_clients_words() {
        let e = read(&output(
            Some(1),
            b"",
            "config: fetching\nbloatlab: error: config: https://127.0.0.1:8443/.well-known/nq: \
             connection refused\n",
        ))
        .unwrap_err();
        assert_eq!(
            e,
            "config: https://127.0.0.1:8443/.well-known/nq: connection refused"
        );
        assert!(read(&output(None, b"", "")).unwrap_err().contains("killed"));
        assert!(read(&output(Some(0), b"{}", "")).is_err());
        let none = record(vec![run("concurrent", 0.3, 10.0, None)]);
        let e = read(&output(Some(0), &json(&none), "")).unwrap_err();
        assert!(e.contains("measured no responsiveness"), "{e}");
        assert!(read(&output(Some(0), &json(&record(vec![])), "")).is_err());
        let ok = record(vec![run("concurrent", 0.3, 10.0, Some(812.0))]);
        assert_eq!(read(&output(Some(0), &json(&ok), "")).unwrap(), ok);
    }
}
