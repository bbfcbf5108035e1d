//! Deterministic synthetic runs for tests, examples and documentation: an RRUL-like run
//! (idle, loaded, recovery) with probe loss, a stretch of missing probes and a flow
//! that stops reporting for a while, so every drawing rule (gaps, loss marks, phases)
//! is exercised. No randomness: the "noise" is a fixed arithmetic pattern.

use std::time::Duration;

use bloatlab_results::ResultsFile;
use bloatlab_results::schema::{HostRecord, HostRole, KernelRecord, Metadata, Raw};
use bloatlab_stats::{
    DelayKind, Direction, FlowSeries, LatencySeries, ProbeSample, Timeline, TransferSample,
};
use bloatlab_units::Bytes;

/// How bloated the synthetic bottleneck is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// A deep FIFO: latency climbs by ~150 ms under load, probes get lost.
    DeepFifo,
    /// An AQM: a few ms of induced latency, no probe loss.
    FqCodel,
}

const IDLE: Duration = Duration::from_secs(2);
const LOADED: Duration = Duration::from_secs(6);
const RECOVERY: Duration = Duration::from_secs(2);
/// 50 Hz probes.
const PROBE: Duration = Duration::from_millis(20);
/// 100 ms transfer samples.
const SAMPLE: Duration = Duration::from_millis(100);

fn jitter(i: u64, span_us: u64) -> Duration {
    Duration::from_micros((i * 7919 + 13) % 17 * span_us / 16)
}

/// A probe series and, for UDP probes, its one-way series as `bloatlab test` records
/// them: the same name, kinds `owd_up` and `owd_down`. Under load the down way rises by
/// 3 ms at most and the up way carries the rest of the queue, so a report that mixed
/// the kinds up would show the small one-way rise instead of the round trip's.
fn probes(name: &str, base: Duration, queue: Queue, offset: u64) -> Vec<LatencySeries> {
    let total = IDLE + LOADED + RECOVERY;
    let n = (total.as_nanos() / PROBE.as_nanos()) as u64;
    let mut samples = Vec::new();
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for i in 0..n {
        let sent = PROBE * i as u32 + Duration::from_micros(offset);
        let loaded = sent >= IDLE && sent < IDLE + LOADED;
        // A stretch with no probe at all in the second series (missing data, not loss).
        if name == "udp_be"
            && sent >= Duration::from_millis(4000)
            && sent < Duration::from_millis(4400)
        {
            continue;
        }
        let extra = match (queue, loaded) {
            (_, false) => Duration::ZERO,
            (Queue::DeepFifo, true) => {
                // Sawtooth: the queue fills over 1.5 s, then a loss burst drains it.
                let into = (sent - IDLE).as_millis() as u64 % 1500;
                Duration::from_millis(into / 10)
            }
            (Queue::FqCodel, true) => Duration::from_millis(3),
        };
        let lost = queue == Queue::DeepFifo && loaded && i % 23 == 5;
        if lost {
            samples.push(ProbeSample::lost(sent));
            up.push(ProbeSample::lost(sent));
            down.push(ProbeSample::lost(sent));
            continue;
        }
        let j = jitter(i, 2000);
        samples.push(ProbeSample::received(sent, base + extra + j));
        let down_extra = extra.min(Duration::from_millis(3));
        down.push(ProbeSample::received(sent, base / 2 + down_extra + j / 2));
        up.push(ProbeSample::received(
            sent,
            base / 2 + (extra - down_extra) + j / 2,
        ));
    }
    let series = |kind, samples| LatencySeries {
        name: name.into(),
        kind,
        samples,
    };
    let mut out = vec![series(DelayKind::RoundTrip, samples)];
    if name.starts_with("udp_") {
        out.push(series(DelayKind::OneWayUp, up));
        out.push(series(DelayKind::OneWayDown, down));
    }
    out
}

fn flow(name: &str, direction: Direction, mbit: u64, hole: bool) -> FlowSeries {
    let n = (LOADED.as_nanos() / SAMPLE.as_nanos()) as u32;
    let samples = (0..n)
        .filter(|&i| !(hole && (30..35).contains(&i)))
        .map(|i| {
            let start = IDLE + SAMPLE * i;
            // Ramp up over the first 0.5 s (slow start), then a steady rate.
            let rate = mbit * 1_000_000 * u64::from(i.min(5) + 1) / 6;
            TransferSample {
                start,
                end: start + SAMPLE,
                bytes: Bytes(rate / 8 / 10 + (u64::from(i) * 7919 % 11) * 1000),
            }
        })
        .collect();
    FlowSeries {
        name: name.into(),
        direction,
        samples,
    }
}

/// A 10 s RRUL-like run through `queue`: 3 probe streams (udp_ef and udp_be with their
/// one-way series, icmp), 2 up and 2 down flows. The shape of the file (series names and
/// kinds, which metadata fields are known) is checked against a real `bloatlab test
/// rrul` run by the CLI's `rrul_writes_a_results_file_with_8_flows_and_every_probe_series`.
pub fn rrul_like(queue: Queue) -> ResultsFile {
    let timeline = Timeline::idle_loaded_recovery(IDLE, LOADED, RECOVERY);
    let base = Duration::from_millis(20);
    let latency: Vec<LatencySeries> = [
        probes("udp_ef", base, queue, 0),
        probes("udp_be", base, queue, 5000),
        probes("icmp", base, queue, 10000),
    ]
    .concat();
    let (up, down) = match queue {
        Queue::DeepFifo => (4, 15),
        Queue::FqCodel => (4, 16),
    };
    let flows = vec![
        flow("tcp_up_be", Direction::Up, up, false),
        flow("tcp_up_ef", Direction::Up, up / 2, false),
        flow("tcp_down_be", Direction::Down, down, true),
        flow("tcp_down_ef", Direction::Down, down / 2, false),
    ];
    let start: jiff::Timestamp = "2026-12-02T11:00:00Z".parse().unwrap_or_default();
    let mut meta = Metadata::new(
        "rrul",
        ["bloatlab", "test", "rrul", "-l", "6", "10.77.0.2"]
            .map(String::from)
            .to_vec(),
        start,
    );
    meta.title = Some(match queue {
        Queue::DeepFifo => "synthetic deep FIFO".into(),
        Queue::FqCodel => "synthetic FQ-CoDel".into(),
    });
    // What `bloatlab test` records for these (crates/suite/src/run.rs, checked against
    // this by the suite's `sample_metadata_matches_the_producer` test).
    meta.hosts.local = HostRecord {
        name: Some("bloatlab-sample".into()),
        role: Some(HostRole::Client),
        software: Some(format!("bloatlab {}", env!("CARGO_PKG_VERSION"))),
        ..HostRecord::default()
    };
    meta.hosts.remote = HostRecord {
        address: Some("10.77.0.2".into()),
        port: Some(5001),
        role: Some(HostRole::Server),
        // A bloatlab server names itself in its hello or report.
        software: Some(format!("bloatlab {}", env!("CARGO_PKG_VERSION"))),
        ..HostRecord::default()
    };
    meta.kernel = KernelRecord {
        sysname: Some("Linux".into()),
        release: Some("6.18.0".into()),
        version: None,
        machine: Some("x86_64".into()),
    };
    ResultsFile::new(meta, Raw::from_measurements(&timeline, &latency, &flows))
}

/// The smallest run with a queue: phases `idle` `[0, 1 s)` and `loaded` `[1 s, end)`,
/// and a `udp_be` round-trip series of one probe every 100 ms up to `end`, each delayed
/// `idle` before 1 s and `loaded` from then on; no flows. Exact figures to assert on:
/// the loaded phase's probe RPM is `60000 / loaded in ms`.
pub fn idle_then_loaded(idle: Duration, loaded: Duration, end: Duration) -> Raw {
    use bloatlab_results::schema::{
        DelayKindRecord, LatencyRecord, PhaseKindRecord, PhaseRecord, ProbeRecord,
    };
    let ns = |d: Duration| d.as_nanos() as u64;
    let (one, step) = (Duration::from_secs(1), Duration::from_millis(100));
    let phase = |kind, name: &str, start_ns, end_ns| PhaseRecord {
        kind,
        name: name.into(),
        start_ns,
        end_ns,
    };
    let samples = (0..ns(end) / ns(step))
        .map(|i| ProbeRecord {
            sent_ns: i * ns(step),
            delay_ns: Some(ns(if i * ns(step) < ns(one) { idle } else { loaded })),
            duplicates: 0,
            late: false,
            unfinished: false,
        })
        .collect();
    Raw {
        phases: vec![
            phase(PhaseKindRecord::Idle, "idle", 0, ns(one)),
            phase(PhaseKindRecord::Loaded, "loaded", ns(one), ns(end)),
        ],
        latency: vec![LatencyRecord {
            name: "udp_be".into(),
            kind: DelayKindRecord::Rtt,
            samples,
        }],
        throughput: Vec::new(),
    }
}

/// A speed test's probes: phases `idle` `[0, 10 s)`, `download` `[10 s, 20 s)` and `upload`
/// `[20 s, 30 s)`, and a `udp_be` round-trip series of one probe a second, delayed `idle`,
/// `download` and `upload` in each phase; no flows. The download's rise is
/// `download - idle`, the upload's `upload - idle`, so a test can make the worst loaded phase
/// differ from the mean over both.
pub fn speedtest_probes(idle: Duration, download: Duration, upload: Duration) -> Raw {
    use bloatlab_results::schema::{
        DelayKindRecord, LatencyRecord, PhaseKindRecord, PhaseRecord, ProbeRecord,
    };
    const S: u64 = 1_000_000_000;
    let ns = |d: Duration| d.as_nanos() as u64;
    let phase = |kind, name: &str, from: u64| PhaseRecord {
        kind,
        name: name.into(),
        start_ns: from * S,
        end_ns: (from + 10) * S,
    };
    let delays = [ns(idle), ns(download), ns(upload)];
    let samples = (0..30u64)
        .map(|i| ProbeRecord {
            sent_ns: i * S,
            delay_ns: Some(delays[i as usize / 10]),
            duplicates: 0,
            late: false,
            unfinished: false,
        })
        .collect();
    Raw {
        phases: vec![
            phase(PhaseKindRecord::Idle, "idle", 0),
            phase(PhaseKindRecord::Loaded, "download", 10),
            phase(PhaseKindRecord::Loaded, "upload", 20),
        ],
        latency: vec![LatencyRecord {
            name: "udp_be".into(),
            kind: DelayKindRecord::Rtt,
            samples,
        }],
        throughput: Vec::new(),
    }
}
