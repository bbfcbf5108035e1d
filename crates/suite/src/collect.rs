//! Turning runner output into series on the run's time axis (pure).
//!
//! * `bloatlab client --json` (METRICS' document, `docs/metrics.md`): only the fields used
//!   here are read, unknown ones are ignored, so the suite depends on the CLI's JSON, not
//!   on library types. Interval times are seconds since the client's own test start.
//! * `bloatlab ping --json` (a `bloatlab-results` document): `sent_ns` are nanoseconds
//!   since the ping session start.
//!
//! Each runner's times are moved onto the run's axis by an offset ([`align`]): the
//! runner's own wall-clock start minus the run's wall-clock start (both CLOCK_REALTIME on
//! this host), checked against the time the driver spawned it.

use std::time::Duration;

use bloatlab_results::schema::{DelayKindRecord, LatencyRecord, ProbeRecord};
use bloatlab_stats::TransferSample;
use bloatlab_units::Bytes;
use serde::Deserialize;

/// Runner output that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// Not the JSON we expect.
    #[error("unreadable {what} output: {source}")]
    Json {
        /// `client` or `ping`.
        what: &'static str,
        /// The parse error (names line and column).
        #[source]
        source: serde_json::Error,
    },
    /// The ping document is not a valid results file.
    #[error("unreadable ping output: {0}")]
    Results(#[from] bloatlab_results::LoadError),
    /// A newer client document.
    #[error("the client wrote JSON schema_version {0}; this bloatlab reads version 1")]
    ClientVersion(u32),
}

#[derive(Debug, Deserialize)]
struct ClientDoc {
    schema_version: u32,
    #[serde(default)]
    test: ClientTest,
    #[serde(default)]
    streams: Vec<ClientStream>,
}

#[derive(Debug, Default, Deserialize)]
struct ClientTest {
    start_unix_us: Option<u64>,
    congestion_control: Option<String>,
    peer_version: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ClientStream {
    #[serde(default)]
    intervals: Vec<ClientInterval>,
    summary: Option<ClientInterval>,
    /// The bloatlab server's own view of this stream (upload flows only).
    server_side: Option<ServerSide>,
}

#[derive(Debug, Deserialize)]
struct ServerSide {
    #[serde(default)]
    intervals: Vec<ClientInterval>,
}

#[derive(Debug, Deserialize)]
struct ClientInterval {
    start_s: f64,
    end_s: f64,
    bytes: u64,
    tcp_send: Option<TcpSend>,
}

#[derive(Debug, Deserialize)]
struct TcpSend {
    retransmits: Option<u64>,
}

/// What one `bloatlab client --json` run measured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientRun {
    /// Transfer intervals, times since the client's test start.
    pub samples: Vec<TransferSample>,
    /// Bytes of the whole test (the summary).
    pub total: Bytes,
    /// Retransmits summed over the sending streams (`None`: this end did not send).
    pub retransmits: Option<u64>,
    /// Congestion control in effect.
    pub congestion_control: Option<String>,
    /// The server's version if it announced one.
    pub peer_version: Option<String>,
    /// Wall-clock start, µs since the UNIX epoch.
    pub start_unix_us: Option<u64>,
}

fn secs(v: f64) -> Duration {
    // Negative, NaN or absurd values from a peer must not panic.
    Duration::try_from_secs_f64(v).unwrap_or_default()
}

/// Parses a client `--json` document.
pub fn parse_client(json: &[u8]) -> Result<ClientRun, CollectError> {
    let doc: ClientDoc = serde_json::from_slice(json).map_err(|source| CollectError::Json {
        what: "client",
        source,
    })?;
    if doc.schema_version != 1 {
        return Err(CollectError::ClientVersion(doc.schema_version));
    }
    let mut run = ClientRun {
        congestion_control: doc.test.congestion_control,
        peer_version: doc.test.peer_version,
        start_unix_us: doc.test.start_unix_us,
        ..ClientRun::default()
    };
    for s in &doc.streams {
        // Prefer what the receiver counted: a sender's intervals include
        // bytes still sitting in its socket buffer, which overstates an
        // upload's rate on short runs. The server measures at the client's
        // `-i` period when asked (docs/wire.md, BlabExt).
        let received = s.server_side.as_ref().map(|r| &r.intervals);
        let intervals: Vec<&ClientInterval> = match received {
            Some(r) if !r.is_empty() => r.iter().collect(),
            _ if s.intervals.is_empty() => s.summary.iter().collect(),
            _ => s.intervals.iter().collect(),
        };
        for i in intervals {
            run.samples.push(TransferSample {
                start: secs(i.start_s),
                end: secs(i.end_s),
                bytes: Bytes(i.bytes),
            });
        }
        if let Some(sum) = &s.summary {
            run.total = run.total.saturating_add(Bytes(sum.bytes));
            if let Some(r) = sum.tcp_send.as_ref().and_then(|t| t.retransmits) {
                run.retransmits = Some(run.retransmits.unwrap_or(0) + r);
            }
        }
    }
    Ok(run)
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

/// A client's wall-clock start as a timestamp.
pub fn client_start(run: &ClientRun) -> Option<jiff::Timestamp> {
    let us = i64::try_from(run.start_unix_us?).ok()?;
    jiff::Timestamp::from_microsecond(us).ok()
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

    const CLIENT: &str = r#"{"schema_version":1,"tool":{"name":"bloatlab","version":"0.1.0"},
      "role":"client","protocol":"tcp",
      "test":{"start_unix_us":1796212800500000,"congestion_control":"cubic","parallel":1},
      "streams":[{"id":1,"direction":"send",
        "intervals":[{"start_s":0.0,"end_s":0.2,"bytes":1000,"bits_per_second":40000.0,
                      "tcp_send":{"writes":1,"write_errors":0,"retransmits":2}},
                     {"start_s":0.2,"end_s":0.4,"bytes":3000,"bits_per_second":120000.0,
                      "tcp_send":{"writes":1,"write_errors":0,"retransmits":1}}],
        "summary":{"start_s":0.0,"end_s":0.4,"bytes":4000,"bits_per_second":80000.0,
                   "tcp_send":{"writes":2,"write_errors":0,"retransmits":3}},
        "future_field": true}]}"#;

    #[test]
    fn client_document() {
        let r = parse_client(CLIENT.as_bytes()).unwrap();
        assert_eq!(r.samples.len(), 2);
        assert_eq!(r.samples[1].start, Duration::from_millis(200));
        assert_eq!(r.samples[1].bytes, Bytes(3000));
        assert_eq!(r.total, Bytes(4000));
        assert_eq!(r.retransmits, Some(3));
        assert_eq!(r.congestion_control.as_deref(), Some("cubic"));
        let start = client_start(&r).unwrap();
        assert_eq!(start.as_microsecond(), 1_796_212_800_500_000);
    }

    #[test]
    fn upload_samples_come_from_the_receiving_server_when_it_reports() {
        let doc = r#"{"schema_version":1,"streams":[{"direction":"send",
            "intervals":[{"start_s":0.0,"end_s":0.2,"bytes":5000}],
            "summary":{"start_s":0.0,"end_s":0.2,"bytes":5000},
            "server_side":{"schema_version":1,"intervals":[
                {"start_s":0.0,"end_s":0.1,"bytes":1000},
                {"start_s":0.1,"end_s":0.2,"bytes":1500}]}}]}"#;
        let r = parse_client(doc.as_bytes()).unwrap();
        let bytes: Vec<u64> = r.samples.iter().map(|s| s.bytes.0).collect();
        assert_eq!(
            bytes,
            [1000, 1500],
            "the receiver's intervals, not the sender's"
        );
        // A server that sent no intervals leaves the sender's in place.
        let doc = doc.replace(
            r#""intervals":[
                {"start_s":0.0,"end_s":0.1,"bytes":1000},
                {"start_s":0.1,"end_s":0.2,"bytes":1500}]"#,
            r#""intervals":[]"#,
        );
        let r = parse_client(doc.as_bytes()).unwrap();
        assert_eq!(r.samples.len(), 1);
        assert_eq!(r.samples[0].bytes, Bytes(5000));
    }

    #[test]
    fn receiving_client_has_no_retransmits_and_garbage_is_an_error() {
        let doc = r#"{"schema_version":1,"streams":[{"direction":"receive",
            "intervals":[],"summary":{"start_s":0.0,"end_s":1.5,"bytes":9}}]}"#;
        let r = parse_client(doc.as_bytes()).unwrap();
        assert_eq!(r.retransmits, None);
        assert_eq!(
            r.samples.len(),
            1,
            "summary stands in for missing intervals"
        );
        assert!(parse_client(b"{\"schema_version\":1,").is_err());
        assert!(matches!(
            parse_client(br#"{"schema_version":2}"#),
            Err(CollectError::ClientVersion(2))
        ));
        // A negative or non-finite time from a broken peer does not panic: it reads as 0.
        let neg = r#"{"schema_version":1,"streams":[{"intervals":[{"start_s":-1.0,"end_s":0.5,"bytes":1}]}]}"#;
        let r = parse_client(neg.as_bytes()).unwrap();
        assert_eq!(r.samples[0].start, Duration::ZERO);
        assert_eq!(r.samples[0].end, Duration::from_millis(500));
        assert_eq!(secs(f64::NAN), Duration::ZERO);
        assert_eq!(secs(f64::INFINITY), Duration::ZERO);
    }

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
