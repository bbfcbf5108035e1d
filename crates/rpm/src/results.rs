//! A session as bloatlab results: the [`RpmRecord`] (what `--json` prints and
//! `metadata.rpm` holds) and the whole results file, whose `raw` section keeps every
//! probe and every load connection so `bloatlab report` can redraw the run.
//!
//! Raw layout: phases `idle` (the idle connection) and one loaded phase per run, named
//! after it (`concurrent`, `download`, `upload`); latency series `tcp_f`, `tls_f`,
//! `http_f`, `http_l` (round trips, each probe at its send time; the idle connection's
//! handshakes and first GET count as foreign, its later GETs as `http_l`); one throughput
//! flow per load connection (`download_3`, `upload_4`).
//!
//! The `--json` document ([`json_document`], [`parse_json`]) is the record with two header
//! fields, `"format": "bloatlab-rpm"` and `"version": 1`; `bloatlab test rpm` reads what
//! its `bloatlab rpm --json` child printed through [`parse_json`].

use std::time::Duration;

use bloatlab_results::convert::nanos;
use bloatlab_results::schema::{
    DelayKindRecord, DirectionRecord, FlowRecord, FlowTcpRecord, HostRecord, HostRole,
    LatencyRecord, Metadata, PhaseKindRecord, PhaseRecord, ProbeRecord, Raw, RpmCapacityRecord,
    RpmFailedRecord, RpmIdleRecord, RpmIntervalRecord, RpmParametersRecord, RpmPartsRecord,
    RpmRecord, RpmResponsivenessRecord, RpmSamplesRecord, TransferRecord,
};
use bloatlab_results::{RawError, ResultsFile};
use bloatlab_stats::rpm::{RpmClass, rpm_from_rtt};

use crate::aggregate::Parts;
use crate::client::{Protocol, Report};
use crate::run::{Direction, Timing};

fn parts(p: &Parts) -> RpmPartsRecord {
    RpmPartsRecord {
        tcp_f_ns: nanos(p.tcp_f),
        tls_f_ns: p.tls_f.map(nanos),
        http_f_ns: nanos(p.http_f),
        http_l_ns: nanos(p.http_l),
    }
}

/// The draft's parameters as a session with this `duration` and `stall_timeout` ran them.
pub fn parameters(
    p: &crate::Params,
    duration: Duration,
    stall_timeout: Duration,
) -> RpmParametersRecord {
    RpmParametersRecord {
        mad: p.mad as u64,
        interval_ns: nanos(p.interval),
        trim_fraction: p.trim,
        stdev_tolerance: p.stdev_tolerance,
        max_connections: p.max_connections as u64,
        max_probes_per_second: u64::from(p.max_probes_per_second),
        probe_capacity: p.probe_capacity,
        duration_ns: nanos(duration),
        stall_timeout_ns: nanos(stall_timeout),
    }
}

/// The session's record.
pub fn record(r: &Report, stall_timeout: Duration) -> RpmRecord {
    let p = &r.params;
    let mut download = None;
    let mut upload = None;
    let mut responsiveness = Vec::new();
    for (name, o) in &r.runs {
        for d in &o.directions {
            let rec = RpmCapacityRecord {
                run: name.name().to_owned(),
                capacity_bps: d.capacity.0,
                confidence: d.confidence.to_string(),
                connections: d.connections as u64,
                saturated_at_interval: d.saturated_at.map(|i| i as u64),
                moving_averages_bps: d.moving_averages.iter().map(|r| r.0).collect(),
            };
            match d.direction {
                Direction::Download => download = Some(rec),
                Direction::Upload => upload = Some(rec),
            }
        }
        let t = o.responsiveness.map(|x| x.trimmed);
        let q = o.responsiveness.map(|x| x.p90);
        let counts = o.responsiveness.map_or([0; 4], |x| x.counts);
        responsiveness.push(RpmResponsivenessRecord {
            run: name.name().to_owned(),
            start_ns: nanos(o.start),
            end_ns: nanos(o.end),
            ended: match o.ended {
                crate::run::Ended::Stable => "stable",
                crate::run::Ended::Deadline => "deadline",
            }
            .to_owned(),
            intervals: o.intervals as u64,
            rpm: t.map(|s| s.rpm),
            confidence: o.responsiveness_confidence.to_string(),
            band: t.map(|s| RpmClass::of(s.rpm).to_string()),
            p90_rpm: q.map(|s| s.rpm),
            p90_band: q.map(|s| RpmClass::of(s.rpm).to_string()),
            foreign_rpm: t.map(|s| s.foreign_rpm),
            loaded_rpm: t.map(|s| s.loaded_rpm),
            trimmed: t.map(|s| parts(&s.parts)),
            p90: q.map(|s| parts(&s.parts)),
            samples: RpmSamplesRecord {
                tcp_f: counts[0] as u64,
                tls_f: counts[1] as u64,
                http_f: counts[2] as u64,
                http_l: counts[3] as u64,
            },
            failed_probes: RpmFailedRecord {
                foreign: o.failed_probes.0 as u64,
                self_probes: o.failed_probes.1 as u64,
            },
            rpm_series: o
                .rpm_series
                .iter()
                .map(|i| RpmIntervalRecord {
                    interval: i.interval as u64,
                    end_ns: nanos(i.end),
                    rpm: i.rpm,
                })
                .collect(),
            phase: None,
        });
    }
    RpmRecord {
        config_url: r.config_url.clone(),
        address: r.addr.to_string(),
        protocol: r.protocol.name().to_owned(),
        tls: r.tls_version.map(str::to_owned),
        mode: r.mode.name().to_owned(),
        self_probes: match r.protocol {
            Protocol::H2 => "h2_stream",
            Protocol::H1 => "tcp_info_rtt",
        }
        .to_owned(),
        parameters: parameters(p, r.duration, stall_timeout),
        idle: r.idle.as_ref().and_then(|i| {
            let l = i.latency(p.trim)?;
            Some(RpmIdleRecord {
                latency_ns: nanos(l),
                rpm: rpm_from_rtt(l),
                samples: i.gets.len() as u64,
            })
        }),
        download,
        upload,
        responsiveness,
        elapsed_ns: nanos(r.elapsed),
    }
}

/// The `raw` section: phases, probe series, load connections.
pub fn raw(r: &Report) -> Raw {
    let mut phases = Vec::new();
    let mut series: [Vec<ProbeRecord>; 4] = Default::default();
    let sample = |sent: Duration, d: Duration| ProbeRecord {
        sent_ns: nanos(sent),
        delay_ns: Some(nanos(d)),
        duplicates: 0,
        late: false,
        unfinished: false,
    };
    if let Some(i) = &r.idle {
        phases.push(PhaseRecord {
            kind: PhaseKindRecord::Idle,
            name: "idle".into(),
            start_ns: nanos(i.start),
            end_ns: nanos(i.end).max(nanos(i.start) + 1),
        });
        series[0].push(sample(i.start, i.tcp));
        if let Some(t) = i.tls {
            series[1].push(sample(i.start, t));
        }
        for (k, &(sent, rtt)) in i.gets.iter().enumerate() {
            series[if k == 0 { 2 } else { 3 }].push(sample(sent, rtt));
        }
    }
    let mut throughput = Vec::new();
    for (name, o) in &r.runs {
        phases.push(PhaseRecord {
            kind: PhaseKindRecord::Loaded,
            name: name.name().to_owned(),
            start_ns: nanos(o.start),
            end_ns: nanos(o.end).max(nanos(o.start) + 1),
        });
        for p in &o.probes {
            match p.timing {
                Timing::Foreign { tcp, tls, http } => {
                    series[0].push(sample(p.sent, tcp));
                    if let Some(t) = tls {
                        series[1].push(sample(p.sent, t));
                    }
                    series[2].push(sample(p.sent, http));
                }
                Timing::SelfProbe { http } => series[3].push(sample(p.sent, http)),
            }
        }
        for c in &o.connections {
            throughput.push(FlowRecord {
                name: format!("{}_{}", c.direction.name(), c.conn.0),
                direction: match c.direction {
                    Direction::Download => DirectionRecord::Down,
                    Direction::Upload => DirectionRecord::Up,
                },
                samples: c
                    .transfers
                    .iter()
                    .filter(|t| t.end > t.start)
                    .map(|t| TransferRecord {
                        start_ns: nanos(t.start),
                        end_ns: nanos(t.end),
                        bytes: t.bytes,
                    })
                    .collect(),
                tcp: FlowTcpRecord::default(),
                ecn: None,
            });
        }
    }
    let latency = ["tcp_f", "tls_f", "http_f", "http_l"]
        .into_iter()
        .zip(series)
        .filter(|(_, s)| !s.is_empty())
        .map(|(name, mut samples)| {
            samples.sort_by_key(|s| s.sent_ns);
            LatencyRecord {
                name: name.to_owned(),
                kind: DelayKindRecord::Rtt,
                samples,
            }
        })
        .collect();
    Raw {
        phases,
        latency,
        throughput,
    }
}

/// The whole results file (`metadata.lab` and `link` are the caller's, when in a lab).
pub fn results_file(
    r: &Report,
    stall_timeout: Duration,
    argv: Vec<String>,
) -> Result<ResultsFile, RawError> {
    let since = r
        .start_wall
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let start = jiff::Timestamp::new(
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        since.subsec_nanos() as i32,
    )
    .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let mut meta = Metadata::new("rpm", argv, start);
    meta.interrupted = r.interrupted;
    meta.hosts.local = HostRecord {
        role: Some(HostRole::Client),
        software: Some(format!("bloatlab {}", env!("CARGO_PKG_VERSION"))),
        ..HostRecord::default()
    };
    meta.hosts.remote = HostRecord {
        address: Some(r.addr.ip().to_string()),
        name: (r.config.host.parse::<std::net::IpAddr>().is_err()).then(|| r.config.host.clone()),
        port: Some(r.addr.port()),
        role: Some(HostRole::Server),
        ..HostRecord::default()
    };
    meta.rpm = Some(record(r, stall_timeout));
    ResultsFile::new(meta, raw(r)).with_derived()
}

/// The `format` of the `--json` document.
pub const JSON_FORMAT: &str = "bloatlab-rpm";

/// The `version` of the `--json` document.
pub const JSON_VERSION: u64 = 1;

/// The `--json` document: `format` and `version`, then the record's fields.
pub fn json_document(rec: &RpmRecord) -> Result<serde_json::Value, serde_json::Error> {
    let mut doc = serde_json::Map::new();
    doc.insert("format".into(), JSON_FORMAT.into());
    doc.insert("version".into(), JSON_VERSION.into());
    if let serde_json::Value::Object(fields) = serde_json::to_value(rec)? {
        doc.extend(fields);
    }
    Ok(serde_json::Value::Object(doc))
}

/// A `--json` document that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON, or a field of the record is missing or of the wrong type.
    #[error("not a bloatlab rpm --json document: {0}")]
    Syntax(#[from] serde_json::Error),
    /// Another document (`format` is not `bloatlab-rpm`).
    #[error("not a bloatlab rpm --json document (format {0:?})")]
    Format(Option<String>),
    /// A version this build does not read.
    #[error("bloatlab rpm --json document version {0}, this build reads version {JSON_VERSION}")]
    Version(u64),
}

/// Reads a `--json` document back into its record: the header is checked, unknown
/// fields are ignored (new fields may be added without a version bump).
pub fn parse_json(bytes: &[u8]) -> Result<RpmRecord, JsonError> {
    #[derive(serde::Deserialize)]
    struct Head {
        format: Option<String>,
        version: Option<u64>,
    }
    let v: serde_json::Value = serde_json::from_slice(bytes)?;
    let head: Head = serde_json::from_value(v.clone())?;
    if head.format.as_deref() != Some(JSON_FORMAT) {
        return Err(JsonError::Format(head.format));
    }
    match head.version {
        Some(JSON_VERSION) => Ok(serde_json::from_value(v)?),
        other => Err(JsonError::Version(other.unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RpmRecord {
        RpmRecord {
            config_url: "https://127.0.0.1:8443/.well-known/nq".into(),
            address: "127.0.0.1:8443".into(),
            protocol: "h2".into(),
            tls: Some("TLSv1.3".into()),
            mode: "concurrent".into(),
            self_probes: "h2_stream".into(),
            parameters: parameters(
                &crate::Params::default(),
                Duration::from_secs(10),
                Duration::from_secs(10),
            ),
            idle: None,
            download: None,
            upload: None,
            responsiveness: Vec::new(),
            elapsed_ns: 9_000_000_000,
        }
    }

    #[test]
    fn the_json_document_reads_back_and_its_header_is_checked() {
        let rec = sample();
        let doc = json_document(&rec).unwrap();
        assert_eq!(doc["format"], JSON_FORMAT);
        assert_eq!(doc["version"], JSON_VERSION);
        let bytes = serde_json::to_vec(&doc).unwrap();
        assert_eq!(parse_json(&bytes).unwrap(), rec);
        // A field added by a newer build is ignored.
        let mut newer = doc.clone();
        newer["future_field"] = 1.into();
        assert_eq!(parse_json(newer.to_string().as_bytes()).unwrap(), rec);
        let mut other = doc.clone();
        other["format"] = "bloatlab-results".into();
        let e = parse_json(other.to_string().as_bytes()).unwrap_err();
        assert!(matches!(e, JsonError::Format(Some(_))), "{e}");
        let mut v2 = doc.clone();
        v2["version"] = 2.into();
        let e = parse_json(v2.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("version 2"), "{e}");
        let mut cut = doc;
        cut.as_object_mut().unwrap().remove("parameters");
        let e = parse_json(cut.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("parameters"), "{e}");
        assert!(parse_json(b"").is_err());
        assert!(parse_json(b"[1]").is_err());
    }
}
