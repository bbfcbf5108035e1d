//! Committed sample files: every schema version bloatlab ever wrote must keep loading.
//!
//! `tests/data/v5.json` is what this build writes for [`sample_run`]; the test
//! `writer_output_matches_committed_v5` fails if the written form drifts without a
//! version bump. To rewrite the file after a deliberate, versioned change, run the tests
//! with `BLOATLAB_REGENERATE_SAMPLES=1` and commit the result. `tests/data/v1.json` is
//! what version 1 wrote for the same run (with its hand-spelled metadata maps),
//! `tests/data/v2.json` what version 2 wrote (the probe RPM named `rpm`) and
//! `tests/data/v3.json` what version 3 wrote and `tests/data/v4.json` what version 4
//! wrote (no headline grade in `derived`); they must keep loading, migrated.
//! `tests/data/old/v3-extra-keys.json` is a version 3 file of a recovered run with the
//! `metadata.extra` keys that version 4 types (`cpu_utilisation`, `notes`, `incomplete`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bloatlab_results::schema::{
    CongestionControlRecord, FlowCongestionControl, FlowEnd, FlowTcpRecord, HostRecord, HostRole,
    KernelRecord, LinkDirectionRecord, LinkRecord, PlanFlowRecord, PlanProbeRecord, PlanRecord,
    ProbeModeRecord, QdiscRecord, TcpInfoRecord,
};
use bloatlab_results::{CURRENT_VERSION, Metadata, Raw, ResultsFile, load, save};
use bloatlab_stats::{
    DelayKind, Direction, FlowSeries, LatencySeries, PhaseKind, ProbeSample, Timeline,
    TransferSample,
};
use bloatlab_units::Bytes;
use serde_json::Value;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A small RRUL-shaped run: 1 s idle, 2 s loaded, 1 s recovery; probes every 100 ms.
fn sample_run() -> ResultsFile {
    let timeline = Timeline::idle_loaded_recovery(ms(1000), ms(2000), ms(1000));
    let mut probes = Vec::new();
    for i in 0..40u64 {
        let sent = ms(100 * i);
        let mut p = match i {
            0..=9 => ProbeSample::received(sent, ms(20 + i % 3)),
            15 | 22 => ProbeSample::lost(sent),
            10..=29 => ProbeSample::received(sent, ms(100 + 5 * (i - 10))),
            _ => ProbeSample::received(sent, ms(20)),
        };
        p.duplicates = u32::from(i == 35);
        p.late = i == 36;
        probes.push(p);
    }
    let rtt = LatencySeries {
        name: "udp_ef".into(),
        kind: DelayKind::RoundTrip,
        samples: probes,
    };
    let owd_up = LatencySeries {
        name: "udp_ef_up".into(),
        kind: DelayKind::OneWayUp,
        samples: vec![
            ProbeSample::received(ms(0), ms(10)),
            ProbeSample::received(ms(1500), ms(90)),
        ],
    };
    let flow = |name: &str, direction, bytes: u64, skip: Option<u64>| FlowSeries {
        name: name.into(),
        direction,
        samples: (0..4u64)
            .filter(|&k| Some(k) != skip)
            .map(|k| TransferSample {
                start: ms(1000 + 500 * k),
                end: ms(1500 + 500 * k),
                bytes: Bytes(bytes),
            })
            .collect(),
    };
    let flows = [
        flow("tcp_up_be", Direction::Up, 625_000, None),
        flow("tcp_down_be", Direction::Down, 1_250_000, Some(2)),
    ];
    let mut meta = Metadata::new(
        "rrul",
        ["bloatlab", "test", "rrul", "-l", "2", "10.0.0.2"]
            .map(String::from)
            .to_vec(),
        "2026-12-02T11:00:00Z".parse().unwrap(),
    );
    meta.bloatlab_version = "0.1.0".into();
    meta.title = Some("sample run for the schema tests".into());
    meta.hosts.local = HostRecord {
        address: Some("10.0.0.1".into()),
        name: Some("client-box".into()),
        port: None,
        role: Some(HostRole::Client),
        software: Some("bloatlab 0.1.0".into()),
    };
    meta.hosts.remote = HostRecord {
        address: Some("10.0.0.2".into()),
        name: None,
        port: Some(5001),
        role: Some(HostRole::Server),
        software: None,
    };
    meta.kernel = KernelRecord {
        sysname: Some("Linux".into()),
        release: Some("6.18.0".into()),
        version: None,
        machine: Some("x86_64".into()),
    };
    meta.sysctls
        .insert("net.ipv4.tcp_congestion_control".into(), "cubic".into());
    meta.sysctls.insert("net.ipv4.tcp_ecn".into(), "2".into());
    meta.congestion_control = CongestionControlRecord {
        default: Some("cubic".into()),
        requested: Some("cubic".into()),
        per_flow: vec![
            FlowCongestionControl {
                flow: "tcp_up_be".into(),
                sender: FlowEnd::Local,
                requested: Some("cubic".into()),
                used: Some("cubic".into()),
            },
            FlowCongestionControl {
                flow: "tcp_down_be".into(),
                sender: FlowEnd::Remote,
                requested: Some("cubic".into()),
                used: None,
            },
        ],
    };
    let tbf = QdiscRecord {
        kind: "tbf".into(),
        interface: Some("bl-veth0".into()),
        parameters: [("rate", "20mbit"), ("limit", "1000000")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
    };
    meta.qdisc = vec![tbf.clone()];
    let direction = LinkDirectionRecord {
        rate_bps: Some(20_000_000),
        delay_ns: Some(40_000_000),
        limit_bytes: Some(1_000_000),
        qdisc: Some(QdiscRecord {
            interface: None,
            ..tbf
        }),
        ..LinkDirectionRecord::default()
    };
    meta.link = Some(LinkRecord {
        lab: Some("sample".into()),
        backend: Some("userspace".into()),
        up: direction.clone(),
        down: direction,
    });
    meta.plan = Some(PlanRecord {
        idle_before_ns: 1_000_000_000,
        loaded_ns: 2_000_000_000,
        idle_after_ns: 1_000_000_000,
        probe_interval_ns: 100_000_000,
        sample_interval_ns: 500_000_000,
        flows: ["tcp_up_be", "tcp_down_be"]
            .iter()
            .map(|n| PlanFlowRecord {
                name: (*n).into(),
                direction: if n.contains("up") {
                    bloatlab_results::schema::DirectionRecord::Up
                } else {
                    bloatlab_results::schema::DirectionRecord::Down
                },
                start_ns: 1_000_000_000,
                stop_ns: 3_000_000_000,
                tos: None,
                congestion_control: Some("cubic".into()),
                pulses: None,
                family: None,
                address: None,
            })
            .collect(),
        probes: vec![PlanProbeRecord {
            name: "udp_ef".into(),
            mode: ProbeModeRecord::Udp,
            start_ns: 0,
            stop_ns: 4_000_000_000,
            interval_ns: 100_000_000,
            tos: Some(0xb8),
            size_bytes: None,
            voip: false,
            family: None,
            address: None,
        }],
    });
    let mut raw = Raw::from_measurements(&timeline, &[rtt, owd_up], &flows);
    // The upload's sender sampled TCP_INFO without ECN; the download's was not sampled.
    raw.throughput[0].tcp = FlowTcpRecord {
        sender: Some(TcpInfoRecord {
            retransmits: Some(7),
            delivered_ce: None,
            min_rtt_ns: Some(20_500_000),
            max_rtt_ns: Some(190_000_000),
            ..TcpInfoRecord::default()
        }),
        receiver: None,
    };
    ResultsFile::new(meta, raw).with_derived().unwrap()
}

#[test]
fn writer_output_matches_committed_v5() {
    let path = data_dir().join("v5.json");
    let written = bloatlab_results::to_vec(&sample_run()).unwrap();
    if std::env::var_os("BLOATLAB_REGENERATE_SAMPLES").is_some() {
        // Committed pretty-printed so a reviewer can read it; compared as JSON values.
        let v: Value = serde_json::from_slice(&written).unwrap();
        let mut pretty = serde_json::to_vec_pretty(&v).unwrap();
        pretty.push(b'\n');
        std::fs::write(&path, pretty).unwrap();
    }
    let committed: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let ours: Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(
        ours, committed,
        "the written form changed; bump the version and add a migration"
    );
}

#[test]
fn committed_v1_migrates_its_maps_into_records() {
    let f = load(&data_dir().join("v1.json")).unwrap();
    assert_eq!(f.version, CURRENT_VERSION);
    let m = &f.metadata;
    // v1 spelled the ends "client" and "server"; v2 has one spelling.
    assert_eq!(m.hosts.remote.address.as_deref(), Some("10.0.0.2"));
    assert_eq!(m.hosts.remote.role, Some(HostRole::Server));
    assert_eq!(m.hosts.local.address.as_deref(), Some("10.0.0.1"));
    assert_eq!(m.kernel.sysname.as_deref(), Some("Linux"));
    assert_eq!(m.kernel.release.as_deref(), Some("6.18.0"));
    assert_eq!(
        m.kernel.machine, None,
        "not in the v1 file: unknown, not empty"
    );
    assert_eq!(m.congestion_control.default.as_deref(), Some("cubic"));
    assert_eq!(m.qdisc.len(), 1);
    assert_eq!(m.qdisc[0].interface.as_deref(), Some("bl-veth0"));
    assert_eq!(m.qdisc[0].kind, "tbf");
    assert_eq!(m.qdisc[0].parameters["limit"], "1000000");
    // The v1 link map had no lab behind it: kept as written, not guessed into a record.
    assert_eq!(m.link, None);
    assert_eq!(m.extra["v1_link"]["rate_bps"], 20_000_000);
    // v1 flows carry no TCP_INFO: not measured.
    assert!(
        f.raw
            .throughput
            .iter()
            .all(|t| t.tcp == FlowTcpRecord::default())
    );
}

#[test]
fn committed_v2_has_typed_records() {
    let f = load(&data_dir().join("v2.json")).unwrap();
    assert_eq!(f, sample_run());
    let text = std::fs::read_to_string(data_dir().join("v2.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    // Not measured is null in the file, never 0.
    assert_eq!(
        v["raw"]["throughput"][0]["tcp"]["sender"]["delivered_ce"],
        Value::Null
    );
    assert_eq!(v["raw"]["throughput"][1]["tcp"]["sender"], Value::Null);
    assert_eq!(v["metadata"]["kernel"]["version"], Value::Null);
    assert_eq!(v["metadata"]["hosts"]["remote"]["address"], "10.0.0.2");
    assert_eq!(v["metadata"]["link"]["up"]["rate_bps"], 20_000_000);
}

#[test]
fn committed_samples_load_with_hand_computed_numbers() {
    for name in ["v1.json", "v2.json", "v3.json", "v4.json", "v5.json"] {
        let f = load(&data_dir().join(name)).unwrap();
        assert_eq!(
            (f.format.as_str(), f.version),
            ("bloatlab-results", CURRENT_VERSION)
        );
        assert_eq!(f.metadata.test, "rrul");
        assert_eq!(f.metadata.start_time.to_string(), "2026-12-02T11:00:00Z");
        assert_eq!(f.metadata.sysctls["net.ipv4.tcp_ecn"], "2");
        assert!(!f.metadata.interrupted);

        // Recompute from raw rather than trusting the stored derived section.
        let timeline = f.raw.timeline().unwrap();
        let series = f.raw.latency_series();
        let loaded = timeline.first(PhaseKind::Loaded).unwrap();
        let idle = timeline.first(PhaseKind::Idle).unwrap();
        let s = series[0].summarize(loaded);
        assert_eq!((s.sent, s.lost, s.received), (20, 2, 18));
        // 18 delays 100..195 ms step 5 without 125 and 160: h = 8.5 -> (145 + 150) / 2.
        assert_eq!(s.delay.unwrap().median, Duration::from_micros(147_500));
        // Idle: 20, 21, 22 repeating -> median 21 ms; induced 126.5 ms -> grade C.
        assert_eq!(series[0].summarize(idle).delay.unwrap().median, ms(21));
        let r = series[0].summarize(&timeline.phases()[2]);
        assert_eq!((r.duplicates, r.late), (1, 1));

        let d = f.derived.as_ref().unwrap();
        let lp = &d.latency[0].phases[1];
        assert_eq!(
            (lp.phase.as_str(), lp.induced_ns),
            ("loaded", Some(126_500_000))
        );
        assert_eq!(lp.grade, Some(bloatlab_results::derived::GradeRecord::C));
        // The headline grade (version 5; migrated into older files from their raw): the
        // one loaded phase of the reference series udp_ef.
        let g = d.run_grade.as_ref().expect("run_grade");
        assert_eq!(
            (g.series.as_str(), g.phase.as_str(), g.increase_ns, g.grade),
            (
                "udp_ef",
                "loaded",
                126_500_000,
                bloatlab_results::derived::GradeRecord::C
            ),
            "{name}"
        );
        // The probe RPM, `rpm` in v1 and v2 files: 60000 / 148.06 ms.
        assert!((lp.probe_rpm.unwrap() - 405.253).abs() < 1e-3, "{name}");
        assert_eq!(lp.probe_rpm_class.as_deref(), Some("Fair"));
        assert_eq!(lp.loss_fraction, Some(0.1));
        // Throughput over the loaded phase: 625 kB / 0.5 s = 10 Mbit/s up; 20 Mbit/s down
        // over the 1.5 s covered (one 0.5 s report missing); fairness 30^2 / (2 * 500) = 0.9.
        let t = &d.throughput[1];
        assert_eq!(
            (t.up_bps, t.down_bps, t.total_bps),
            (10_000_000, 20_000_000, 30_000_000)
        );
        assert_eq!(t.flows[1].coverage, 0.75);
        assert!((t.fairness_all.unwrap() - 0.9).abs() < 1e-12);
        assert_eq!(t.fairness_up, Some(1.0));
        assert_eq!(d.throughput[0].fairness_all, None); // idle: nothing moved
    }
}

#[test]
fn every_committed_version_loads() {
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(v) = name.strip_prefix('v').and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        let f = load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(f.version, CURRENT_VERSION, "{name} was not migrated");
        seen.push(v.parse::<u32>().unwrap());
    }
    seen.sort();
    // One sample per version, none skipped.
    assert_eq!(seen, (1..=CURRENT_VERSION).collect::<Vec<_>>());
}

/// issue 22: version 3 kept CPU use, notes and a recovery's record in `metadata.extra`;
/// loaded now, they are typed fields and only the other keys stay in `extra`.
#[test]
fn committed_v3_extra_keys_become_typed_fields() {
    let f = load(&data_dir().join("old/v3-extra-keys.json")).unwrap();
    assert_eq!(f.version, CURRENT_VERSION);
    let m = &f.metadata;
    assert_eq!(m.cpu_utilisation, [0.25, 0.5, 0.75]);
    assert_eq!(m.cpu_median_max(), Some((0.5, 0.75)));
    assert_eq!(
        m.notes,
        ["flow tcp_down_be: stalled for 3.2 s in phase loaded"]
    );
    let inc = m.incomplete.as_ref().unwrap();
    assert_eq!(inc.phase_reached.as_deref(), Some("loaded"));
    assert_eq!(inc.reached_ns, 2_500_000_000);
    assert_eq!(inc.runners_missing, ["tcp_down_be"]);
    assert!(inc.reason.starts_with("the test process stopped"));
    let left: Vec<&str> = m.extra.keys().map(String::as_str).collect();
    assert_eq!(left, ["flow_failures", "recovered_from_journal"]);
    // Written back, the typed fields sit in the metadata, not in extra.
    let v: Value = serde_json::from_slice(&bloatlab_results::to_vec(&f).unwrap()).unwrap();
    assert_eq!(v["metadata"]["cpu_utilisation"][2], 0.75);
    assert_eq!(v["metadata"]["extra"].get("notes"), None);
    assert_eq!(load_value(v).metadata, f.metadata);
}

fn load_value(v: Value) -> ResultsFile {
    bloatlab_results::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap()
}

#[test]
fn save_then_load_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.bloatlab.json");
    let run = sample_run();
    save(&path, &run).unwrap();
    assert_eq!(load(&path).unwrap(), run);
}

#[test]
fn truncated_sample_is_reported_as_truncated() {
    let bytes = std::fs::read(data_dir().join("v2.json")).unwrap();
    for cut in [1, bytes.len() / 3, bytes.len() - 2] {
        let e = bloatlab_results::from_slice(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(e, bloatlab_results::LoadError::Truncated { .. }),
            "cut at {cut}: {e}"
        );
    }
}

/// issue 18: a chained link's stages are optional fields of version 2 (no bump): absent
/// for a single link, so the committed sample is unchanged (see
/// `writer_output_matches_committed_v4`), and a file with them round-trips.
#[test]
fn chain_stages_are_optional_and_round_trip() {
    use bloatlab_results::schema::StageRecord;
    let text = std::fs::read_to_string(data_dir().join("v4.json")).unwrap();
    assert!(
        !text.contains("\"stages\""),
        "a single link writes no stages"
    );
    let mut run = sample_run();
    let link = run.metadata.link.as_mut().unwrap();
    link.up.framing = Some("atm".into());
    link.up.stages = vec![StageRecord {
        name: "shaper".into(),
        spec: Some("name=shaper rate=20mbit framing=atm".into()),
        rate_bps: Some(20_000_000),
        framing: Some("atm".into()),
        qdisc: "fq_codel".into(),
        ..StageRecord::default()
    }];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.json");
    save(&path, &run).unwrap();
    let back = load(&path).unwrap();
    assert_eq!(back, run);
    assert_eq!(back.version, CURRENT_VERSION);
}
