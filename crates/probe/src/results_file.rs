//! A probe session as a `bloatlab-results` document (what `bloatlab ping --json` prints),
//! built from the results crate's types (so `bloatlab test`, which reads it back through the
//! same types, cannot disagree with it about a field's name or meaning).

use std::time::Duration;

use crate::SignedDuration;
use crate::clock::ClockMethod as ProbeClock;
use crate::report::{DelayStats, Ipdv, LossDirection, ProbeResult, Report, Summary};
use bloatlab_results::schema::{
    ClockMethod, ClockRecord, DelayKindRecord, HostRecord, HostRole, IpdvRecord, LatencyRecord,
    LossDirectionRecord, LostProbeRecord, Metadata, PhaseKindRecord, PhaseRecord, ProbeModeRecord,
    ProbeRecord, ProbeSessionRecord, ProbeSummaryRecord, Raw, SignedDelayStats,
};
use bloatlab_results::{ResultsFile, convert::nanos};

/// What the session was asked to do, besides the probe client's own config.
#[derive(Debug)]
pub struct Session<'a> {
    /// The host as given on the command line.
    pub host: Option<&'a str>,
    /// ICMP echo instead of UDP probes.
    pub icmp: bool,
    /// Wall-clock start, since the UNIX epoch.
    pub start: Duration,
    /// Stopped by a signal.
    pub interrupted: bool,
    /// The command line, for the metadata.
    pub argv: Vec<String>,
}

/// Why no results file could be built.
#[derive(Debug, thiserror::Error)]
pub enum ResultsFileError {
    /// The session's start is not a representable timestamp.
    #[error("the system clock is outside the range of a timestamp")]
    ClockOutOfRange(#[source] jiff::Error),
    /// The derived section could not be computed from the samples.
    #[error("computing the derived section of the results: {0}")]
    Derived(#[from] bloatlab_results::RawError),
}

fn signed(s: &Option<DelayStats>) -> Option<SignedDelayStats> {
    s.as_ref().map(|s| SignedDelayStats {
        count: s.count as u64,
        min_ns: s.min.as_nanos(),
        p10_ns: s.p10.as_nanos(),
        median_ns: s.median.as_nanos(),
        mean_ns: s.mean.as_nanos(),
        p90_ns: s.p90.as_nanos(),
        p99_ns: s.p99.as_nanos(),
        max_ns: s.max.as_nanos(),
    })
}

fn ipdv(i: &Option<Ipdv>) -> Option<IpdvRecord> {
    i.as_ref().map(|i| IpdvRecord {
        pairs: i.pairs as u64,
        mean_abs_ns: nanos(i.mean_abs),
        median_abs_ns: nanos(i.median_abs),
        max_abs_ns: nanos(i.max_abs),
    })
}

fn loss_direction(d: LossDirection) -> LossDirectionRecord {
    match d {
        LossDirection::Up => LossDirectionRecord::Up,
        LossDirection::Down => LossDirectionRecord::Down,
        LossDirection::Unknown => LossDirectionRecord::Unknown,
    }
}

/// The results file: one idle phase, the RTT series and (UDP) the two one-way series,
/// each probe with `delay_ns: null` when lost; the session in `metadata.probe`.
pub fn results_file(
    session: &Session,
    cfg: &crate::client::ClientConfig,
    report: &Report,
    s: &Summary,
) -> Result<ResultsFile, ResultsFileError> {
    let name = if session.icmp { "icmp" } else { "udp_probe" };
    // One-way delays computed with an estimated offset can come out slightly negative;
    // the schema holds non-negative ns, so those are written as 0 and counted.
    let mut clamped = 0u64;
    let mut owd = |v: Option<SignedDuration>| -> Option<u64> {
        let v = v?;
        if v.as_nanos() < 0 {
            clamped += 1;
        }
        Some(v.as_nanos().max(0) as u64)
    };
    let record = |p: &ProbeResult, delay: Option<u64>| ProbeRecord {
        sent_ns: nanos(p.sent),
        delay_ns: if p.answered_in_time() { delay } else { None },
        duplicates: p.duplicates,
        late: p.late,
        unfinished: p.unfinished,
    };
    let series = |kind, samples| LatencyRecord {
        name: name.to_owned(),
        kind,
        samples,
    };
    let mut latency = vec![series(
        DelayKindRecord::Rtt,
        report
            .probes
            .iter()
            .map(|p| record(p, p.rtt.map(nanos)))
            .collect(),
    )];
    if !session.icmp {
        let up = report.probes.iter().map(|p| record(p, owd(p.up))).collect();
        let down = report
            .probes
            .iter()
            .map(|p| record(p, owd(p.down)))
            .collect();
        latency.push(series(DelayKindRecord::OwdUp, up));
        latency.push(series(DelayKindRecord::OwdDown, down));
    }
    let end = report
        .probes
        .last()
        .map_or(Duration::ZERO, |p| p.sent)
        .saturating_add(report.interval);
    let start = jiff::Timestamp::new(
        i64::try_from(session.start.as_secs()).unwrap_or(i64::MAX),
        session.start.subsec_nanos() as i32,
    )
    .map_err(ResultsFileError::ClockOutOfRange)?;
    let mut meta = Metadata::new("ping", session.argv.clone(), start);
    meta.interrupted = session.interrupted;
    let mut remote = HostRecord {
        address: Some(cfg.target.ip().to_string()),
        port: (!session.icmp).then_some(cfg.target.port()),
        role: Some(if session.icmp {
            HostRole::IcmpEcho
        } else {
            HostRole::ProbeResponder
        }),
        ..HostRecord::default()
    };
    if let Some(h) = session
        .host
        .filter(|h| h.parse::<std::net::IpAddr>().is_err())
    {
        remote.name = Some(h.to_owned());
    }
    meta.hosts.remote = remote;
    meta.hosts.local = HostRecord {
        role: Some(HostRole::Client),
        software: Some(format!("bloatlab {}", env!("CARGO_PKG_VERSION"))),
        ..HostRecord::default()
    };
    meta.probe = Some(ProbeSessionRecord {
        mode: if session.icmp {
            ProbeModeRecord::Icmp
        } else {
            ProbeModeRecord::Udp
        },
        interval_ns: nanos(cfg.interval),
        size_bytes: cfg.size as u64,
        tos: cfg.tos,
        timeout_ns: nanos(cfg.timeout),
        clock: ClockRecord {
            method: match s.clock.method {
                ProbeClock::Shared => ClockMethod::Shared,
                ProbeClock::Estimated => ClockMethod::Estimated,
                ProbeClock::Unknown => ClockMethod::Unknown,
            },
            shared: s.clock.method == ProbeClock::Shared,
            offset_ns: s.clock.offset.as_nanos(),
            drift_ppm: s.clock.drift_ppm,
            samples_used: s.clock.samples_used as u64,
        },
        summary: ProbeSummaryRecord {
            sent: s.sent,
            received: s.received,
            lost_up: s.lost_up,
            lost_down: s.lost_down,
            lost_unknown: s.lost_unknown,
            duplicates: s.duplicates,
            late: s.late,
            unfinished: s.unfinished,
            skipped_slots: s.skipped_slots,
            server_rx_count: (!session.icmp).then_some(report.server_rx_count),
            rtt: signed(&s.rtt),
            owd_up: signed(&s.up),
            owd_down: signed(&s.down),
            ipdv_rtt: ipdv(&s.ipdv_rtt),
            ipdv_up: ipdv(&s.ipdv_up),
            ipdv_down: ipdv(&s.ipdv_down),
        },
        lost: report
            .probes
            .iter()
            .filter_map(|p| {
                Some(LostProbeRecord {
                    seq: p.seq,
                    direction: loss_direction(p.lost?),
                })
            })
            .collect(),
        negative_owd_clamped: clamped,
    });
    let raw = Raw {
        phases: vec![PhaseRecord {
            kind: PhaseKindRecord::Idle,
            name: "ping".into(),
            start_ns: 0,
            end_ns: nanos(end),
        }],
        latency,
        throughput: vec![],
    };
    Ok(ResultsFile::new(meta, raw).with_derived()?)
}
