//! One measurement: a single-direction load with latency probes (`bloatlab test tcp_upload`
//! or `tcp_download`, from crates/suite), read back from its results file.
//!
//! Induced latency follows docs/statistics.md: the reference series is the first RTT series;
//! induced p50 / p90 = its loaded-phase median / p90 minus its idle-phase median (the idle
//! phase runs just before the load, at the rate being measured, after the queues of the
//! previous measurement drained). Throughput is the loaded phase's goodput in the tuned
//! direction.

use super::search::Measurement;
use bloatlab_invoke::test::TestInvocation;
use bloatlab_results::ResultsFile;
use bloatlab_results::schema::DelayKindRecord;
use std::path::Path;
use std::time::Duration;

/// Which way the load goes (and which shaper is tuned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client to server: `tcp_upload`.
    Up,
    /// Server to client: `tcp_download`.
    Down,
}

impl Direction {
    /// `up` / `down`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }
    /// The test that loads this direction.
    pub fn test(self) -> &'static str {
        match self {
            Direction::Up => "tcp_upload",
            Direction::Down => "tcp_download",
        }
    }
}

/// Each measurement's load: how long its phases last and the flow's congestion control.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Loaded seconds.
    pub load: Duration,
    /// Idle seconds before the load (the baseline).
    pub idle: Duration,
    /// TCP congestion control of the load flow (`cubic` by default: a loss-based flow
    /// fills whatever buffer it finds, which is what a shaper must be tuned against).
    pub cc: bloatlab_units::CongestionControl,
}

/// The `bloatlab test` run of one load in direction `dir` against `host:port`, writing
/// `output` (its command line is [`TestInvocation::to_argv`]).
pub fn test_run(
    t: &Load,
    dir: Direction,
    host: &str,
    port: u16,
    output: &Path,
    title: &str,
) -> TestInvocation {
    let mut run = TestInvocation::new(dir.test(), Some(host));
    run.port = port;
    run.output = Some(output.to_path_buf());
    run.title = Some(title.to_owned());
    run.params.loaded = t.load;
    run.params.idle_before = t.idle;
    // A short recovery phase: the queues drain before the next rate is set.
    run.params.idle_after = Duration::from_secs(1);
    run.params.cc = vec![t.cc.clone()];
    run
}

/// Why a results file gives no measurement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeasureError {
    /// The file has no derived statistics or no RTT series.
    #[error("the results file has no RTT series")]
    NoRtt,
    /// A phase had no probe answered.
    #[error("no latency probe was answered in the {0} phase")]
    NoProbes(&'static str),
    /// The run was interrupted.
    #[error("the run was interrupted")]
    Interrupted,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The measurement in a results file of a load in direction `dir`.
pub fn measurement(file: &ResultsFile, dir: Direction) -> Result<Measurement, MeasureError> {
    if file.metadata.interrupted {
        return Err(MeasureError::Interrupted);
    }
    let d = file.derived.as_ref().ok_or(MeasureError::NoRtt)?;
    let rtt = d
        .latency
        .iter()
        .find(|s| s.kind == DelayKindRecord::Rtt)
        .ok_or(MeasureError::NoRtt)?;
    let phase = |name: &'static str| {
        rtt.phases
            .iter()
            .find(|p| p.phase == name)
            .and_then(|p| p.delay)
            .ok_or(MeasureError::NoProbes(name))
    };
    let idle = phase("idle")?;
    let loaded = phase("loaded")?;
    let base = ms(idle.median_ns);
    let tput = d
        .throughput
        .iter()
        .find(|t| t.phase == "loaded")
        .map_or(0, |t| match dir {
            Direction::Up => t.up_bps,
            Direction::Down => t.down_bps,
        });
    Ok(Measurement {
        induced_p50_ms: ms(loaded.median_ns) - base,
        induced_p90_ms: ms(loaded.p90_ns) - base,
        idle_median_ms: base,
        throughput_mbit: tput as f64 / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed sample results file (a real `bloatlab test` output, see crates/results).
    fn sample() -> ResultsFile {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/tests/data");
        let path = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .find(|p| {
                bloatlab_results::load(p).is_ok_and(|f| {
                    f.derived
                        .as_ref()
                        .is_some_and(|d| d.latency.iter().any(|s| s.kind == DelayKindRecord::Rtt))
                })
            })
            .expect("a sample results file with an RTT series");
        bloatlab_results::load(&path).unwrap()
    }

    #[test]
    fn induced_latency_is_loaded_minus_idle_median_of_the_first_rtt_series() {
        let f = sample();
        let d = f.derived.as_ref().unwrap();
        let rtt = d
            .latency
            .iter()
            .find(|s| s.kind == DelayKindRecord::Rtt)
            .unwrap();
        let get = |n: &str| {
            rtt.phases
                .iter()
                .find(|p| p.phase == n)
                .unwrap()
                .delay
                .unwrap()
        };
        let (idle, loaded) = (get("idle"), get("loaded"));
        let m = measurement(&f, Direction::Up).unwrap();
        let want = (loaded.p90_ns as f64 - idle.median_ns as f64) / 1e6;
        assert!((m.induced_p90_ms - want).abs() < 1e-9, "{m:?} vs {want}");
        let want = (loaded.median_ns as f64 - idle.median_ns as f64) / 1e6;
        assert!((m.induced_p50_ms - want).abs() < 1e-9);
        let up = d
            .throughput
            .iter()
            .find(|t| t.phase == "loaded")
            .unwrap()
            .up_bps;
        assert!((m.throughput_mbit - up as f64 / 1e6).abs() < 1e-9);
        let mut g = f.clone();
        g.metadata.interrupted = true;
        assert_eq!(
            measurement(&g, Direction::Up),
            Err(MeasureError::Interrupted)
        );
        let mut g = f.clone();
        g.derived = None;
        assert_eq!(measurement(&g, Direction::Up), Err(MeasureError::NoRtt));
    }

    #[test]
    fn the_test_loads_the_tuned_direction() {
        assert_eq!(Direction::Up.test(), "tcp_upload");
        assert_eq!(Direction::Down.test(), "tcp_download");
        let load = Load {
            load: Duration::from_millis(4500),
            idle: Duration::from_secs(2),
            cc: bloatlab_units::CongestionControl::new("cubic").unwrap(),
        };
        let out = Path::new("/tmp/x.json");
        let run = test_run(&load, Direction::Up, "10.77.0.2", 5001, out, "t");
        let p = &run.params;
        assert_eq!(run.test, "tcp_upload");
        assert_eq!(run.output.as_deref(), Some(out));
        assert_eq!((p.loaded, p.idle_before), (load.load, load.idle));
        assert_eq!(p.idle_after, Duration::from_secs(1));
        assert_eq!(p.cc, std::slice::from_ref(&load.cc));
        // What the child is given reads back as the same run.
        let s = run.to_argv().join(" ");
        assert!(s.starts_with("test tcp_upload 10.77.0.2 "), "{s}");
        assert!(s.contains("/tmp/x.json") && s.contains("cubic"), "{s}");
    }
}
