//! Export to flent's data format (`.flent.gz`, FILEFORMAT_VERSION 4), so flent users
//! can open bloatlab runs with `flent -i FILE -p PLOT` or `flent-gui`.
//!
//! The file is gzip-compressed JSON with the keys flent's `ResultSet.serialise()` writes:
//!
//! | key | what we put there |
//! |---|---|
//! | `version` | 4 |
//! | `metadata` | `NAME` (the test), `TITLE`, `NOTE`, `TIME` and `T0` (run start, UTC, `%Y-%m-%dT%H:%M:%S.%fZ`), `LENGTH` (loaded seconds), `TOTAL_LENGTH`, `STEP_SIZE`, `HOST` and `HOSTS` (the remote end's address, else its name: flent labels series "HOST UDP EF"), `LOCAL_HOST` (this host's name), `IP_VERSION`, `KERNEL_NAME`, `KERNEL_RELEASE`, `SYSCTLS`, `TEST_PARAMETERS`, `SERIES_META` (units per series; for flows `CONG_CONTROL` and `TCPI_TOTAL_RETRANS` when measured), `BLOATLAB_VERSION` and `BLOATLAB_METADATA` (our whole metadata block) |
//! | `x_values` | seconds since `T0` on a `STEP_SIZE` grid (0.2 s, flent's default) |
//! | `results` | series name → one value per `x_values` entry, `null` where there is no data |
//! | `raw_values` | series name → samples: probes `{t, val, seq}` (`t` = send time, UNIX seconds; lost probes are left out, so gaps in `seq` count the loss as flent does), flows `{t, val, dur}` (`t` = interval end) |
//!
//! A grid value is the mean delay of the probes sent in `[x, x + step)` or the rate
//! over that bucket; there is **no interpolation** (flent's own resampling
//! interpolates, issue #265), a bucket without data is `null`.
//!
//! Series names follow flent's RRUL names where ours map onto them (`udp_ef` →
//! `Ping (ms) UDP EF`, `icmp` → `Ping (ms) ICMP`, `tcp_up_cs5` → `TCP upload CS5`; for
//! `rrul46`, `udp_be_v6` → `Ping (ms) UDP6 BE`, `tcp_up_cs5_v6` → `TCP upload CS5`, with
//! each series' `IP_VERSION` in `SERIES_META`), so flent's `rrul` and `rrul46` plots find them; computed series `TCP upload sum`, `TCP download sum`,
//! `TCP totals`, `TCP upload avg`, `TCP download avg` and `Ping (ms) avg` are included
//! (flow sums by the rule of [`crate::plot::throughput`]: a gap inside a flow's span
//! makes the sum null rather than an undercount).
//! Delays are in ms and rates in Mbit/s, flent's units.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use bloatlab_results::schema::{DelayKindRecord, DirectionRecord, IpFamilyRecord, PhaseKindRecord};
use bloatlab_stats::timeseries::{bucketize_flow, bucketize_latency};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Map, Value, json};

use crate::ReportError;
use crate::plot::throughput::{Bucketed, sum_and_count};
use crate::run::Run;

/// flent's FILEFORMAT_VERSION this writer produces.
pub const FILEFORMAT_VERSION: u32 = 4;

/// The grid step (flent's default `STEP_SIZE`).
pub const STEP: Duration = Duration::from_millis(200);

/// Most grid points we write (about 55 hours at 0.2 s); a longer run is refused rather
/// than written as a file no tool could open.
pub const MAX_POINTS: u64 = 1_000_000;

fn class(s: &str) -> String {
    s.replace('_', " ").to_uppercase()
}

/// A series name's IP family suffix (`udp_be_v6` → `("udp_be", Some(6))`), which
/// `rrul46` puts on every series.
fn split_family(name: &str) -> (&str, Option<u8>) {
    match (name.strip_suffix("_v4"), name.strip_suffix("_v6")) {
        (Some(base), _) => (base, Some(4)),
        (_, Some(base)) => (base, Some(6)),
        _ => (name, None),
    }
}

/// flent's name for a latency series. Family-pinned series take flent's `rrul46` names:
/// UDP over IPv4 is `UDP BE`, over IPv6 `UDP6 BE`; flent's rrul46 pings ICMP over
/// IPv6 as `ICMP`, so our IPv4 ICMP series is `ICMP4`.
pub fn latency_name(name: &str, kind: DelayKindRecord) -> String {
    let (base, family) = split_family(name);
    let what = if base.eq_ignore_ascii_case("icmp") {
        if family == Some(4) { "ICMP4" } else { "ICMP" }.to_owned()
    } else if let Some(rest) = base.strip_prefix("udp_") {
        let udp = if family == Some(6) { "UDP6" } else { "UDP" };
        format!("{udp} {}", class(rest))
    } else {
        name.to_owned()
    };
    match kind {
        DelayKindRecord::Rtt => format!("Ping (ms) {what}"),
        DelayKindRecord::OwdUp => format!("One-way delay up (ms) {what}"),
        DelayKindRecord::OwdDown => format!("One-way delay down (ms) {what}"),
    }
}

/// flent's name for a load flow. flent's `rrul46` keeps rrul's flow names (its BE and BK
/// flows run over IPv4, CS5 and EF over IPv6), so the family suffix is dropped; the
/// family stays in `SERIES_META` (`IP_VERSION`).
pub fn flow_name(name: &str, direction: DirectionRecord) -> String {
    let (dir, prefix) = match direction {
        DirectionRecord::Up => ("upload", "tcp_up_"),
        DirectionRecord::Down => ("download", "tcp_down_"),
    };
    match split_family(name).0.strip_prefix(prefix) {
        Some(rest) if !rest.is_empty() => format!("TCP {dir} {}", class(rest)),
        _ => format!("TCP {dir} {name}"),
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn num(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |x| json!(round3(x)))
}

/// flent's timestamp format, always UTC.
fn flent_time(ts: jiff::Timestamp) -> String {
    format!(
        "{}.{:06}Z",
        ts.strftime("%Y-%m-%dT%H:%M:%S"),
        ts.subsec_microsecond()
    )
}

/// Adds `name` to `results`, making it unique if a mapped name collides.
fn unique(results: &Map<String, Value>, name: String, original: &str) -> String {
    if results.contains_key(&name) {
        format!("{name} ({original})")
    } else {
        name
    }
}

/// The IP version (4, 6) the plan recorded for the flow or probe series `name`.
fn ip_version_of(run: &Run, name: &str) -> Option<u8> {
    let plan = run.file.metadata.plan.as_ref()?;
    let family = plan
        .flows
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.family)
        .or_else(|| {
            plan.probes
                .iter()
                .find(|q| q.name == name)
                .map(|q| q.family)
        })??;
    Some(match family {
        IpFamilyRecord::Ipv4 => 4,
        IpFamilyRecord::Ipv6 => 6,
    })
}

/// The congestion control a flow's sender used, if it was read back.
fn cc_used<'a>(run: &'a Run, flow: &str) -> Option<&'a str> {
    run.file
        .metadata
        .congestion_control
        .per_flow
        .iter()
        .find(|c| c.flow == flow)?
        .used
        .as_deref()
}

/// A flow's sender's retransmits, if TCP_INFO was sampled.
fn retransmits(run: &Run, flow: &str) -> Option<u64> {
    run.file
        .raw
        .throughput
        .iter()
        .find(|t| t.name == flow)?
        .tcp
        .sender?
        .retransmits
}

/// The flent document for one run. Fails only for runs longer than [`MAX_POINTS`] steps.
pub fn document(run: &Run, file_name: &str) -> Result<Value, ReportError> {
    let end = run.end().max(STEP);
    let points = end.as_nanos().div_ceil(STEP.as_nanos());
    if points > u128::from(MAX_POINTS) {
        return Err(ReportError::Encode {
            what: "flent data",
            message: format!(
                "the run lasts {:.0} s, more than {MAX_POINTS} steps of {} s",
                end.as_secs_f64(),
                STEP.as_secs_f64()
            ),
        });
    }
    // points <= MAX_POINTS < u32::MAX.
    let n = points as u32;
    let t0 = run.file.metadata.start_time;
    let t0_secs = t0.as_second() as f64 + f64::from(t0.subsec_nanosecond()) / 1e9;
    let grid_end = STEP * n;
    let x_values: Vec<Value> = (0..n)
        .map(|i| json!(round3((STEP * i).as_secs_f64())))
        .collect();
    let mut results = Map::new();
    let mut raw = Map::new();
    let mut series_meta = Map::new();

    let mut ping_cols: Vec<Vec<Option<f64>>> = Vec::new();
    for s in &run.latency {
        let kind = DelayKindRecord::from(s.kind);
        let name = unique(&results, latency_name(&s.name, kind), &s.name);
        let col: Vec<Option<f64>> = bucketize_latency(s, Duration::ZERO, grid_end, STEP)
            .map(|b| {
                b.iter()
                    .map(|b| b.mean.map(|d| d.as_secs_f64() * 1e3))
                    .collect()
            })
            .unwrap_or_else(|_| vec![None; n as usize]);
        let mut sorted: Vec<_> = s.samples.iter().collect();
        sorted.sort_by_key(|p| p.sent);
        let raw_vals: Vec<Value> = sorted
            .iter()
            .enumerate()
            .filter_map(|(seq, p)| {
                p.delay().map(|d| {
                    json!({
                        "t": t0_secs + p.sent.as_secs_f64(),
                        "val": round3(d.as_secs_f64() * 1e3),
                        "seq": seq,
                    })
                })
            })
            .collect();
        results.insert(name.clone(), col.iter().map(|v| num(*v)).collect());
        raw.insert(name.clone(), Value::Array(raw_vals));
        let mut meta = json!({"UNITS": "ms", "BLOATLAB_NAME": s.name});
        if let Some(v) = ip_version_of(run, &s.name) {
            meta["IP_VERSION"] = json!(v);
        }
        series_meta.insert(name, meta);
        if kind == DelayKindRecord::Rtt {
            ping_cols.push(col);
        }
    }

    let mut dir_flows: BTreeMap<&str, Vec<Bucketed>> = BTreeMap::new();
    for f in &run.flows {
        let dir = DirectionRecord::from(f.direction);
        let name = unique(&results, flow_name(&f.name, dir), &f.name);
        let col: Vec<Option<f64>> = bucketize_flow(f, Duration::ZERO, grid_end, STEP)
            .map(|b| {
                b.iter()
                    .map(|b| b.rate.map(|r| r.bits_per_sec_f64() / 1e6))
                    .collect()
            })
            .unwrap_or_else(|_| vec![None; n as usize]);
        let raw_vals: Vec<Value> = f
            .samples
            .iter()
            .map(|s| {
                let dur = s.end.saturating_sub(s.start);
                let mbps = if dur.is_zero() {
                    0.0
                } else {
                    s.bytes.0 as f64 * 8.0 / dur.as_secs_f64() / 1e6
                };
                json!({
                    "t": t0_secs + s.end.as_secs_f64(),
                    "val": round3(mbps),
                    "dur": dur.as_secs_f64(),
                })
            })
            .collect();
        results.insert(name.clone(), col.iter().map(|v| num(*v)).collect());
        raw.insert(name.clone(), Value::Array(raw_vals));
        let mut meta = json!({"UNITS": "Mbits/s", "BLOATLAB_NAME": f.name});
        // flent's netperf series carry these; only what was measured is written.
        if let Some(cc) = cc_used(run, &f.name) {
            meta["CONG_CONTROL"] = json!(cc);
        }
        if let Some(r) = retransmits(run, &f.name) {
            meta["TCPI_TOTAL_RETRANS"] = json!(r);
        }
        if let Some(v) = ip_version_of(run, &f.name) {
            meta["IP_VERSION"] = json!(v);
        }
        series_meta.insert(name, meta);
        let key = match dir {
            DirectionRecord::Up => "upload",
            DirectionRecord::Down => "download",
        };
        if let Some(b) = Bucketed::new(f, grid_end, STEP) {
            dir_flows.entry(key).or_default().push(b);
        }
    }

    // Computed series. Flow sums follow the plots' rule (`sum_active`): a flow adds
    // nothing outside its own span, and a gap inside it makes the sum unknown (null).
    let mbit = |v: Vec<Option<(f64, usize)>>, avg: bool| -> Value {
        v.into_iter()
            .map(|c| num(c.map(|(s, k)| if avg { s / k as f64 } else { s } / 1e6)))
            .collect()
    };
    for (dir, flows) in &dir_flows {
        let v = sum_and_count(flows, STEP);
        results.insert(format!("TCP {dir} sum"), mbit(v.clone(), false));
        results.insert(format!("TCP {dir} avg"), mbit(v, true));
    }
    if !dir_flows.is_empty() {
        let all: Vec<Bucketed> = dir_flows.values().flatten().cloned().collect();
        results.insert("TCP totals".into(), mbit(sum_and_count(&all, STEP), false));
    }
    // Ping average over the RTT series that have a value in the bucket.
    let combine = |cols: &[Vec<Option<f64>>]| -> Vec<Value> {
        (0..n as usize)
            .map(|i| {
                let v: Vec<f64> = cols
                    .iter()
                    .filter_map(|c| c.get(i).copied().flatten())
                    .collect();
                num((!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64))
            })
            .collect()
    };
    if !ping_cols.is_empty() {
        results.insert("Ping (ms) avg".into(), Value::Array(combine(&ping_cols)));
    }

    let m = &run.file.metadata;
    let loaded: u64 = run
        .file
        .raw
        .phases
        .iter()
        .filter(|p| p.kind == PhaseKindRecord::Loaded)
        .map(|p| p.end_ns.saturating_sub(p.start_ns))
        .sum();
    // flent labels a run's series with HOST (its legend reads "HOST series"); the
    // remote end is the host under test.
    let host = m.hosts.remote.label();
    let ip_version = m
        .hosts
        .remote
        .address
        .as_deref()
        .and_then(|a| a.parse::<std::net::IpAddr>().ok())
        .map(|a| if a.is_ipv4() { 4 } else { 6 });
    // A run over both families says 6, as flent's rrul46 does (its unpinned data sets
    // use IPv6); each series has its own IP_VERSION in SERIES_META.
    let families: std::collections::BTreeSet<_> = m
        .plan
        .iter()
        .flat_map(|p| {
            p.flows
                .iter()
                .map(|f| f.family)
                .chain(p.probes.iter().map(|q| q.family))
        })
        .flatten()
        .collect();
    let ip_version = if families.len() > 1 {
        Some(6)
    } else {
        ip_version
    };
    let metadata = json!({
        "NAME": m.test,
        "TITLE": m.title.clone().unwrap_or_default(),
        "NOTE": if m.interrupted { "interrupted run" } else { "" },
        "TIME": flent_time(t0),
        "T0": flent_time(t0),
        "LENGTH": loaded as f64 / 1e9,
        "TOTAL_LENGTH": round3(end.as_secs_f64()),
        "STEP_SIZE": STEP.as_secs_f64(),
        "HOST": host,
        "HOSTS": host.iter().collect::<Vec<_>>(),
        "LOCAL_HOST": m.hosts.local.name.as_deref().or(m.hosts.local.address.as_deref()),
        "IP_VERSION": ip_version,
        "KERNEL_NAME": m.kernel.sysname,
        "KERNEL_RELEASE": m.kernel.release,
        "SYSCTLS": m.sysctls,
        "TEST_PARAMETERS": {},
        "DATA_FILENAME": file_name,
        "SERIES_META": series_meta,
        "BLOATLAB_VERSION": m.bloatlab_version,
        "BLOATLAB_METADATA": serde_json::to_value(m).unwrap_or(Value::Null),
    });
    Ok(json!({
        "version": FILEFORMAT_VERSION,
        "metadata": metadata,
        "x_values": x_values,
        "results": results,
        "raw_values": raw,
    }))
}

/// The gzip-compressed document, ready to be written as `*.flent.gz`.
pub fn to_gzip(run: &Run, file_name: &str) -> Result<Vec<u8>, ReportError> {
    let err = |e: std::io::Error| ReportError::Encode {
        what: "gzip",
        message: e.to_string(),
    };
    let json = serde_json::to_vec(&document(run, file_name)?).map_err(|e| ReportError::Encode {
        what: "flent JSON",
        message: e.to_string(),
    })?;
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(&json).map_err(err)?;
    enc.finish().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_flent_rrul() {
        assert_eq!(
            latency_name("udp_ef", DelayKindRecord::Rtt),
            "Ping (ms) UDP EF"
        );
        assert_eq!(latency_name("icmp", DelayKindRecord::Rtt), "Ping (ms) ICMP");
        assert_eq!(
            latency_name("udp_be", DelayKindRecord::OwdUp),
            "One-way delay up (ms) UDP BE"
        );
        assert_eq!(
            latency_name("probe", DelayKindRecord::Rtt),
            "Ping (ms) probe"
        );
        assert_eq!(
            flow_name("tcp_up_cs5", DirectionRecord::Up),
            "TCP upload CS5"
        );
        assert_eq!(
            flow_name("tcp_down_be", DirectionRecord::Down),
            "TCP download BE"
        );
        assert_eq!(
            flow_name("bulk", DirectionRecord::Down),
            "TCP download bulk"
        );
    }

    #[test]
    fn rrul46_names_follow_flent_rrul46() {
        let rtt = DelayKindRecord::Rtt;
        assert_eq!(latency_name("udp_be_v4", rtt), "Ping (ms) UDP BE");
        assert_eq!(latency_name("udp_bk_v4", rtt), "Ping (ms) UDP BK");
        assert_eq!(latency_name("udp_be_v6", rtt), "Ping (ms) UDP6 BE");
        assert_eq!(latency_name("udp_bk_v6", rtt), "Ping (ms) UDP6 BK");
        assert_eq!(latency_name("icmp_v6", rtt), "Ping (ms) ICMP");
        assert_eq!(latency_name("icmp_v4", rtt), "Ping (ms) ICMP4");
        assert_eq!(
            latency_name("udp_bk_v6", DelayKindRecord::OwdDown),
            "One-way delay down (ms) UDP6 BK"
        );
        let up = DirectionRecord::Up;
        assert_eq!(flow_name("tcp_up_be_v4", up), "TCP upload BE");
        assert_eq!(flow_name("tcp_up_cs5_v6", up), "TCP upload CS5");
        assert_eq!(
            flow_name("tcp_down_ef_v6", DirectionRecord::Down),
            "TCP download EF"
        );
    }

    #[test]
    fn time_format_is_flents_utc_format() {
        let ts: jiff::Timestamp = "2026-12-02T11:00:00.25Z".parse().unwrap();
        assert_eq!(flent_time(ts), "2026-12-02T11:00:00.250000Z");
    }
}
