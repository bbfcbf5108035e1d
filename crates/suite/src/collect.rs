//! Turning runner output into series on the run's time axis (pure).
//!
//! * `bloatlab client --json`: read in [`crate::flow`] through the engine's own
//!   `bloatlab_metrics::json::Document` (validated). Interval times are seconds since the
//!   client's own test start.
//! * `bloatlab ping --json` (a `bloatlab-results` document): `sent_ns` are nanoseconds
//!   since the ping session start.
//!
//! Each runner's times are moved onto the run's axis by an offset ([`align`]): the
//! runner's own wall-clock start minus the run's wall-clock start (both CLOCK_REALTIME on
//! this host), checked against the time the driver spawned it.

use std::time::Duration;

pub use crate::flow::{ClientRun, ReceiverTcpInfo, SenderTcpInfo, client_start, parse_client};
use bloatlab_results::schema::{DelayKindRecord, LatencyRecord, ProbeRecord};
use bloatlab_stats::TransferSample;

/// Runner output that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// Not a client document this build reads.
    #[error(transparent)]
    Client(#[from] crate::flow::ClientDocError),
    /// The ping document is not a valid results file.
    #[error("unreadable ping output: {0}")]
    Results(#[from] bloatlab_results::LoadError),
}

/// What one `bloatlab ping --json` run measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingRun {
    /// The series (RTT, and for UDP one-way up and down), times since the ping start.
    pub series: Vec<LatencyRecord>,
    /// Wall-clock start of the ping session.
    pub start: jiff::Timestamp,
    /// Probe interval.
    pub interval: Option<Duration>,
    /// Send slots the prober skipped because it woke up late.
    pub skipped_slots: u64,
    /// The run was cut short.
    pub interrupted: bool,
}

/// Parses a ping `--json` document.
pub fn parse_ping(json: &[u8]) -> Result<PingRun, CollectError> {
    let file = bloatlab_results::from_slice(json)?;
    let probe = file.metadata.probe.as_ref();
    let interval = probe.map(|p| Duration::from_nanos(p.interval_ns));
    let skipped_slots = probe.map_or(0, |p| p.summary.skipped_slots);
    Ok(PingRun {
        series: file.raw.latency,
        start: file.metadata.start_time,
        interval,
        skipped_slots,
        interrupted: file.metadata.interrupted,
    })
}

impl PingRun {
    /// The series renamed to `name` with every send time moved by `offset`.
    pub fn series_at(&self, name: &str, offset: Duration) -> Vec<LatencyRecord> {
        let off = bloatlab_results::convert::nanos(offset);
        self.series
            .iter()
            .map(|s| LatencyRecord {
                name: name.to_owned(),
                kind: s.kind,
                samples: s
                    .samples
                    .iter()
                    .map(|p| ProbeRecord {
                        sent_ns: p.sent_ns.saturating_add(off),
                        ..*p
                    })
                    .collect(),
            })
            .collect()
    }

    /// How late each probe left after its slot; each skipped slot counts as one probe a
    /// whole interval late. The prober's send grid has period `interval` but an unknown
    /// phase (its first probe may itself be late), so the phase is taken as the start of
    /// the densest 1 ms window of send times modulo the interval: where on-time probes
    /// cluster.
    pub fn lateness(&self) -> Vec<Duration> {
        let Some(iv) = self.interval.filter(|i| !i.is_zero()) else {
            return Vec::new();
        };
        let Some(rtt) = self.series.iter().find(|s| s.kind == DelayKindRecord::Rtt) else {
            return Vec::new();
        };
        let iv_ns = bloatlab_results::convert::nanos(iv);
        let residues: Vec<u64> = rtt.samples.iter().map(|p| p.sent_ns % iv_ns).collect();
        let phase = grid_phase(&residues, iv_ns, 1_000_000.min(iv_ns / 2).max(1));
        let mut out: Vec<Duration> = residues
            .iter()
            .map(|&r| Duration::from_nanos((r + iv_ns - phase) % iv_ns))
            .collect();
        out.extend(std::iter::repeat_n(iv, self.skipped_slots as usize));
        out
    }
}

/// The start of the `window`-wide arc (on a circle of circumference `period`) holding the
/// most `residues`; 0 for no residues.
fn grid_phase(residues: &[u64], period: u64, window: u64) -> u64 {
    let mut r = residues.to_vec();
    r.sort_unstable();
    let n = r.len();
    let (mut best, mut best_count, mut j) = (r.first().copied().unwrap_or(0), 0usize, 0usize);
    for i in 0..n {
        // Advance j (mod n, unrolled as i..i+n) while r[j] lies within [r[i], r[i]+window).
        if j < i {
            j = i;
        }
        while j < i + n {
            let v = if j < n { r[j] } else { r[j - n] + period };
            if v - r[i] < window {
                j += 1;
            } else {
                break;
            }
        }
        if j - i > best_count {
            best_count = j - i;
            best = r[i];
        }
    }
    best
}

/// Where a runner's time zero lies on the run's axis. `reported` is the runner's own
/// wall-clock start, `run_start` the run's; both CLOCK_REALTIME on this host, so the
/// difference is exact. It is used when it falls within 5 s after the moment the driver
/// spawned the runner (`spawned`, measured on the monotonic clock); otherwise (a clock
/// step, a runner that did not say) the spawn time is used.
pub fn align(
    reported: Option<jiff::Timestamp>,
    run_start: jiff::Timestamp,
    spawned: Duration,
) -> Duration {
    let Some(r) = reported else {
        return spawned;
    };
    let diff = r.as_nanosecond() - run_start.as_nanosecond();
    let Ok(d) = u64::try_from(diff) else {
        return spawned;
    };
    let d = Duration::from_nanos(d);
    if d + Duration::from_millis(50) >= spawned && d <= spawned + Duration::from_secs(5) {
        d
    } else {
        spawned
    }
}

/// Moves samples by `offset`.
pub fn shift(samples: &[TransferSample], offset: Duration) -> Vec<TransferSample> {
    samples
        .iter()
        .map(|s| TransferSample {
            start: s.start + offset,
            end: s.end + offset,
            bytes: s.bytes,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_prefers_the_reported_clock_within_bounds() {
        let run = jiff::Timestamp::from_second(1_796_212_800).unwrap();
        let at = |ms: i64| {
            Some(
                run.checked_add(jiff::SignedDuration::from_millis(ms))
                    .unwrap(),
            )
        };
        let spawned = Duration::from_millis(5000);
        assert_eq!(align(at(5030), run, spawned), Duration::from_millis(5030));
        // A start before the run, or far after the spawn: fall back to the spawn time.
        assert_eq!(align(at(-10), run, spawned), spawned);
        assert_eq!(align(at(60_000), run, spawned), spawned);
        assert_eq!(align(None, run, spawned), spawned);
    }

    /// A ping document as `bloatlab ping --json` writes it: through the results types
    /// (the real ping output is parsed by `parse_ping` in the CLI's ping_loopback test).
    fn ping_doc() -> Vec<u8> {
        use bloatlab_results::schema::{
            ClockMethod, ClockRecord, PhaseKindRecord, PhaseRecord, ProbeModeRecord,
            ProbeSessionRecord, ProbeSummaryRecord,
        };
        let probe = |sent_ns, delay_ns| ProbeRecord {
            sent_ns,
            delay_ns,
            duplicates: 0,
            late: false,
            unfinished: false,
        };
        let mut meta = bloatlab_results::Metadata::new(
            "ping",
            vec!["bloatlab".into(), "ping".into()],
            "2026-12-02T12:00:00Z".parse().unwrap(),
        );
        meta.probe = Some(ProbeSessionRecord {
            mode: ProbeModeRecord::Udp,
            interval_ns: 10_000_000,
            size_bytes: 80,
            tos: None,
            timeout_ns: 3_000_000_000,
            clock: ClockRecord {
                method: ClockMethod::Shared,
                shared: true,
                offset_ns: 0,
                drift_ppm: 0.0,
                samples_used: 0,
            },
            summary: ProbeSummaryRecord {
                sent: 3,
                received: 2,
                lost_up: 0,
                lost_down: 0,
                lost_unknown: 1,
                duplicates: 0,
                late: 0,
                unfinished: 0,
                skipped_slots: 1,
                server_rx_count: Some(2),
                rtt: None,
                owd_up: None,
                owd_down: None,
                ipdv_rtt: None,
                ipdv_up: None,
                ipdv_down: None,
            },
            lost: vec![],
            negative_owd_clamped: 0,
        });
        let raw = bloatlab_results::Raw {
            phases: vec![PhaseRecord {
                kind: PhaseKindRecord::Idle,
                name: "ping".into(),
                start_ns: 0,
                end_ns: 40_000_000,
            }],
            latency: vec![
                LatencyRecord {
                    name: "udp_probe".into(),
                    kind: DelayKindRecord::Rtt,
                    samples: vec![
                        probe(0, Some(1000)),
                        probe(10_000_000, None),
                        probe(22_000_000, Some(3000)),
                    ],
                },
                LatencyRecord {
                    name: "udp_probe".into(),
                    kind: DelayKindRecord::OwdUp,
                    samples: vec![probe(0, Some(500))],
                },
            ],
            throughput: vec![],
        };
        bloatlab_results::to_vec(&bloatlab_results::ResultsFile::new(meta, raw)).unwrap()
    }

    #[test]
    fn ping_document_shifted_and_renamed() {
        let p = parse_ping(&ping_doc()).unwrap();
        assert_eq!(p.interval, Some(Duration::from_millis(10)));
        let s = p.series_at("udp_ef", Duration::from_secs(1));
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|r| r.name == "udp_ef"));
        assert_eq!(s[0].samples[1].sent_ns, 1_010_000_000);
        assert_eq!(s[0].samples[1].delay_ns, None);
        assert_eq!(
            p.lateness(),
            [
                Duration::ZERO,
                Duration::ZERO,
                Duration::from_millis(2),
                Duration::from_millis(10)
            ]
        );
    }

    #[test]
    fn lateness_grid_ignores_a_late_first_probe() {
        // Grid at 3 ms + k*10 ms; the first probe left 1.3 ms late, one other 4 ms late.
        let sent = [
            4_300_000u64,
            13_000_000,
            23_000_000,
            37_000_000,
            43_000_000,
            53_000_000,
        ];
        let p = PingRun {
            series: vec![LatencyRecord {
                name: "x".into(),
                kind: DelayKindRecord::Rtt,
                samples: sent
                    .iter()
                    .map(|&t| ProbeRecord {
                        sent_ns: t,
                        delay_ns: Some(1),
                        duplicates: 0,
                        late: false,
                        unfinished: false,
                    })
                    .collect(),
            }],
            start: jiff::Timestamp::UNIX_EPOCH,
            interval: Some(Duration::from_millis(10)),
            skipped_slots: 0,
            interrupted: false,
        };
        let ms = |v: u64| Duration::from_micros(v * 100);
        assert_eq!(p.lateness(), [ms(13), ms(0), ms(0), ms(40), ms(0), ms(0)]);
        // A cluster straddling the wrap-around point is found too.
        assert_eq!(grid_phase(&[9_900, 9_950, 50, 5_000], 10_000, 1_000), 9_900);
        assert_eq!(grid_phase(&[], 10_000, 1_000), 0);
    }
}
