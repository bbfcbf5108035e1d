//! Any measurements survive save -> load unchanged, through the real file.

use bloatlab_results::schema::{
    DelayKindRecord, DirectionRecord, FlowRecord, FlowTcpRecord, LatencyRecord, PhaseKindRecord,
    PhaseRecord, ProbeRecord, TcpInfoRecord, TransferRecord,
};
use bloatlab_results::{Metadata, Raw, ResultsFile, load, save};
use proptest::prelude::*;

fn probe() -> impl Strategy<Value = ProbeRecord> {
    (
        any::<u64>(),
        prop::option::of(any::<u64>()),
        0u32..3,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(sent_ns, delay_ns, duplicates, late, unfinished)| ProbeRecord {
                sent_ns,
                unfinished: unfinished && delay_ns.is_none(),
                delay_ns,
                duplicates,
                late,
            },
        )
}

fn transfer() -> impl Strategy<Value = TransferRecord> {
    (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(start_ns, end_ns, bytes)| {
        TransferRecord {
            start_ns,
            end_ns,
            bytes,
        }
    })
}

fn raw() -> impl Strategy<Value = Raw> {
    (
        prop::collection::vec(1u64..1_000_000_000_000, 0..4),
        prop::collection::vec(prop::collection::vec(probe(), 0..20), 0..3),
        prop::collection::vec(prop::collection::vec(transfer(), 0..20), 0..3),
    )
        .prop_map(|(lens, lat, thr)| {
            // Phases laid end to end, so the timeline is valid.
            let kinds = [
                PhaseKindRecord::Idle,
                PhaseKindRecord::Loaded,
                PhaseKindRecord::Recovery,
            ];
            let mut t = 0u64;
            let phases = lens
                .iter()
                .enumerate()
                .map(|(i, len)| {
                    let p = PhaseRecord {
                        kind: kinds[i % 3],
                        name: format!("p{i}"),
                        start_ns: t,
                        end_ns: t + len,
                    };
                    t += len;
                    p
                })
                .collect();
            Raw {
                phases,
                latency: lat
                    .into_iter()
                    .enumerate()
                    .map(|(i, samples)| LatencyRecord {
                        name: format!("l{i}"),
                        kind: [
                            DelayKindRecord::Rtt,
                            DelayKindRecord::OwdUp,
                            DelayKindRecord::OwdDown,
                        ][i % 3],
                        samples,
                    })
                    .collect(),
                throughput: thr
                    .into_iter()
                    .enumerate()
                    .map(|(i, samples)| FlowRecord {
                        name: format!("f{i}"),
                        ecn: None,
                        direction: if i % 2 == 0 {
                            DirectionRecord::Up
                        } else {
                            DirectionRecord::Down
                        },
                        samples,
                        // Odd flows: sender sampled, with some fields unknown.
                        tcp: FlowTcpRecord {
                            sender: (i % 2 == 1).then_some(TcpInfoRecord {
                                retransmits: Some(i as u64),
                                delivered_ce: None,
                                min_rtt_ns: Some(1),
                                max_rtt_ns: None,
                                ..TcpInfoRecord::default()
                            }),
                            receiver: None,
                        },
                    })
                    .collect(),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn save_load_is_identity(raw in raw(), interrupted in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let mut meta = Metadata::new("rrul", vec!["bloatlab".into()], "2026-12-02T11:00:00.123456789Z".parse().unwrap());
        meta.interrupted = interrupted;
        let file = ResultsFile::new(meta, raw).with_derived().unwrap();
        save(&path, &file).unwrap();
        prop_assert_eq!(load(&path).unwrap(), file);
    }
}
