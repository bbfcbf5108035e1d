//! Version 1 -> 2: the free-form metadata maps become typed records.
//!
//! Version 1 wrote `hosts`, `kernel`, `congestion_control`, `qdisc` and `link` as
//! free-form maps, and the suite's plan and ping's session summary under `extra`.
//! Everything whose meaning is certain is moved into its record; anything else is kept,
//! untouched, under `extra.v1_<field>` so that no information is lost. Values that v1
//! could not know stay `null` (v1's per-flow congestion control was the *requested*
//! algorithm, which download flows' senders never received, so it becomes `requested`,
//! never `used`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::schema::{
    CongestionControlRecord, DirectionRecord, FlowCongestionControl, FlowEnd, HostRecord, HostRole,
    HostsRecord, KernelRecord, PlanFlowRecord, PlanProbeRecord, PlanRecord, ProbeModeRecord,
    ProbeSessionRecord, QdiscRecord,
};

/// The migration step (see [`crate::migrate::MIGRATIONS`]).
pub fn to_v2(mut doc: Value) -> Result<Value, String> {
    let directions = flow_directions(&doc);
    let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
        // Nothing to migrate; the schema check names the missing field.
        return Ok(doc);
    };
    let test = meta
        .get("test")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut extra = match meta.remove("extra") {
        Some(Value::Object(m)) => m,
        Some(Value::Null) | None => Map::new(),
        Some(other) => return Err(format!("metadata.extra is not an object: {other}")),
    };
    let probe = take_typed::<ProbeSessionRecord>(&mut extra, "probe");
    let mut keep = |field: &str, v: Value| {
        extra.insert(format!("v1_{field}"), v);
    };
    let remote_role = match (&probe, test.as_str()) {
        (Some(p), _) if p.mode == ProbeModeRecord::Icmp => HostRole::IcmpEcho,
        (Some(_), _) | (None, "ping") => HostRole::ProbeResponder,
        _ => HostRole::Server,
    };

    let mut hosts = HostsRecord::default();
    for (key, v) in object(meta.remove("hosts")) {
        let (slot, role) = match key.as_str() {
            "local" | "client" => (&mut hosts.local, HostRole::Client),
            "remote" | "server" => (&mut hosts.remote, remote_role),
            _ => {
                keep(&format!("hosts_{key}"), v);
                continue;
            }
        };
        match host(&v, role) {
            Some(h) => *slot = h,
            None => keep(&format!("hosts_{key}"), v),
        }
    }

    let mut kernel = KernelRecord::default();
    for (key, v) in object(meta.remove("kernel")) {
        let s = v.as_str().map(str::to_owned);
        match (key.as_str(), s) {
            ("sysname" | "name", Some(s)) => kernel.sysname = Some(s),
            ("release", Some(s)) => kernel.release = Some(s),
            ("version", Some(s)) => kernel.version = Some(s),
            ("machine", Some(s)) => kernel.machine = Some(s),
            ("nodename", Some(s)) if hosts.local.name.is_none() => hosts.local.name = Some(s),
            _ => keep(&format!("kernel_{key}"), v),
        }
    }

    let mut cc = CongestionControlRecord::default();
    for (key, v) in object(meta.remove("congestion_control")) {
        match (key.as_str(), &v) {
            ("default", Value::String(s)) => cc.default = Some(s.clone()),
            ("per_flow", Value::Object(flows)) => {
                let mut unmatched = Map::new();
                for (flow, algo) in flows {
                    match (directions.get(flow), algo.as_str()) {
                        (Some(d), Some(a)) => cc.per_flow.push(FlowCongestionControl {
                            flow: flow.clone(),
                            sender: match d {
                                DirectionRecord::Up => FlowEnd::Local,
                                DirectionRecord::Down => FlowEnd::Remote,
                            },
                            requested: Some(a.to_owned()),
                            used: None,
                        }),
                        _ => {
                            unmatched.insert(flow.clone(), algo.clone());
                        }
                    }
                }
                if !unmatched.is_empty() {
                    keep("congestion_control_per_flow", Value::Object(unmatched));
                }
            }
            _ => keep(&format!("congestion_control_{key}"), v),
        }
    }

    let mut qdiscs = Vec::new();
    for (iface, v) in object(meta.remove("qdisc")) {
        match qdisc(&iface, &v) {
            Some(q) => qdiscs.push(q),
            None => keep(&format!("qdisc_{iface}"), v),
        }
    }

    // v1 never wrote a lab's link from a producer; whatever is there is kept as it was.
    let link = object(meta.remove("link"));
    if !link.is_empty() {
        keep("link", Value::Object(link));
    }

    let plan = match extra.remove("plan") {
        Some(v) => match serde_json::from_value::<PlanV1>(v.clone()) {
            Ok(p) => Some(p.into_record()),
            Err(_) => {
                extra.insert("plan".into(), v);
                None
            }
        },
        None => None,
    };

    let put = |meta: &mut Map<String, Value>, k: &str, v: Result<Value, serde_json::Error>| {
        v.map(|v| {
            meta.insert(k.to_owned(), v);
        })
        .map_err(|e| format!("writing metadata.{k}: {e}"))
    };
    put(meta, "hosts", serde_json::to_value(&hosts))?;
    put(meta, "kernel", serde_json::to_value(&kernel))?;
    put(meta, "congestion_control", serde_json::to_value(&cc))?;
    put(meta, "qdisc", serde_json::to_value(&qdiscs))?;
    put(meta, "link", Ok(Value::Null))?;
    put(meta, "plan", serde_json::to_value(&plan))?;
    put(meta, "probe", serde_json::to_value(&probe))?;
    meta.insert("extra".into(), Value::Object(extra));
    Ok(doc)
}

/// Removes `extra[key]` if it parses as `T`; leaves it otherwise.
fn take_typed<T: for<'de> Deserialize<'de>>(
    extra: &mut Map<String, Value>,
    key: &str,
) -> Option<T> {
    let v = extra.get(key)?;
    let t = serde_json::from_value(v.clone()).ok()?;
    extra.remove(key);
    Some(t)
}

fn object(v: Option<Value>) -> Map<String, Value> {
    match v {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// Flow name -> direction, from `raw.throughput`.
fn flow_directions(doc: &Value) -> BTreeMap<String, DirectionRecord> {
    doc.pointer("/raw/throughput")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let name = f.get("name")?.as_str()?.to_owned();
            let d = serde_json::from_value(f.get("direction")?.clone()).ok()?;
            Some((name, d))
        })
        .collect()
}

/// `"10.0.0.2"`, or `{"address"|"host": …, "name": …, "port": …}`.
fn host(v: &Value, role: HostRole) -> Option<HostRecord> {
    let mut h = HostRecord {
        role: Some(role),
        ..HostRecord::default()
    };
    let place = |h: &mut HostRecord, s: &str| {
        if s.parse::<IpAddr>().is_ok() {
            h.address = Some(s.to_owned());
        } else if let Ok(a) = s.parse::<std::net::SocketAddr>() {
            // v1 ping wrote "address": "IP:PORT".
            h.address = Some(a.ip().to_string());
            h.port = Some(a.port());
        } else {
            h.name = Some(s.to_owned());
        }
    };
    match v {
        Value::String(s) => place(&mut h, s),
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("address" | "host", Value::String(s)) => place(&mut h, s),
                    ("name", Value::String(s)) => h.name = Some(s.clone()),
                    ("port", Value::Number(n)) => {
                        h.port = Some(n.as_u64().and_then(|p| u16::try_from(p).ok())?);
                    }
                    _ => return None,
                }
            }
        }
        _ => return None,
    }
    Some(h)
}

/// `{"kind": "tbf", "rate": "20mbit", "limit": 1000000}` on interface `iface`.
fn qdisc(iface: &str, v: &Value) -> Option<QdiscRecord> {
    let m = v.as_object()?;
    let kind = m.get("kind")?.as_str()?.to_owned();
    let parameters = m
        .iter()
        .filter(|(k, _)| *k != "kind")
        .map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            Value::Number(n) => Some((k.clone(), n.to_string())),
            Value::Bool(b) => Some((k.clone(), if *b { "on" } else { "off" }.to_owned())),
            _ => None,
        })
        .collect::<Option<BTreeMap<_, _>>>()?;
    Some(QdiscRecord {
        kind,
        interface: Some(iface.to_owned()),
        parameters,
    })
}

/// The suite's version 1 `extra.plan`.
#[derive(Deserialize)]
struct PlanV1 {
    loaded_ns: u64,
    idle_before_ns: u64,
    idle_after_ns: u64,
    probe_interval_ns: u64,
    sample_interval_ns: u64,
    runners: Vec<RunnerV1>,
}

#[derive(Deserialize)]
struct RunnerV1 {
    name: String,
    start_ns: u64,
    stop_ns: u64,
    kind: RunnerKindV1,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum RunnerKindV1 {
    Tcp {
        direction: DirectionRecord,
        tos: Option<u8>,
        cc: Option<String>,
    },
    Probe {
        mode: ProbeModeRecord,
        tos: Option<u8>,
        size: Option<u64>,
        interval_ns: u64,
    },
}

impl PlanV1 {
    fn into_record(self) -> PlanRecord {
        let mut p = PlanRecord {
            idle_before_ns: self.idle_before_ns,
            loaded_ns: self.loaded_ns,
            idle_after_ns: self.idle_after_ns,
            probe_interval_ns: self.probe_interval_ns,
            sample_interval_ns: self.sample_interval_ns,
            flows: Vec::new(),
            probes: Vec::new(),
        };
        for r in self.runners {
            match r.kind {
                RunnerKindV1::Tcp { direction, tos, cc } => p.flows.push(PlanFlowRecord {
                    name: r.name,
                    direction,
                    start_ns: r.start_ns,
                    stop_ns: r.stop_ns,
                    tos,
                    congestion_control: cc,
                    // v1 did not record these.
                    pulses: None,
                    family: None,
                    address: None,
                }),
                RunnerKindV1::Probe {
                    mode,
                    tos,
                    size,
                    interval_ns,
                } => p.probes.push(PlanProbeRecord {
                    name: r.name,
                    mode,
                    start_ns: r.start_ns,
                    stop_ns: r.stop_ns,
                    interval_ns,
                    tos,
                    size_bytes: size,
                    voip: false,
                    family: None,
                    address: None,
                }),
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `bloatlab test` (suite) wrote as version 1.
    fn suite_v1() -> Value {
        json!({"format": "bloatlab-results", "version": 1,
          "metadata": {"bloatlab_version": "0.1.0", "test": "tcp_download",
            "command_line": [], "start_time": "2026-12-02T11:00:00Z",
            "hosts": {"remote": {"host": "10.77.0.2", "port": 5001}},
            "kernel": {"sysname": "Linux", "release": "6.18.0", "version": "#1",
                       "machine": "x86_64", "nodename": "box"},
            "congestion_control": {"default": "bbr", "per_flow": {"tcp_down_1": "cubic"}},
            "qdisc": {}, "link": {},
            "extra": {"cpu_utilisation": [0.5], "tcp_retransmits_up": null,
              "plan": {"loaded_ns": 2, "idle_before_ns": 1, "idle_after_ns": 1,
                "probe_interval_ns": 10, "sample_interval_ns": 20,
                "runners": [
                  {"name": "tcp_down_1", "start_ns": 1, "stop_ns": 3,
                   "kind": {"tcp": {"direction": "down", "tos": null, "cc": "cubic"}}},
                  {"name": "udp_be", "start_ns": 0, "stop_ns": 4,
                   "kind": {"probe": {"mode": "udp", "tos": 0, "size": null, "interval_ns": 10}}}]}}},
          "raw": {"phases": [], "latency": [],
            "throughput": [{"name": "tcp_down_1", "direction": "down", "samples": []}]}})
    }

    #[test]
    fn suite_v1_becomes_records() {
        let v = to_v2(suite_v1()).unwrap();
        let m = &v["metadata"];
        assert_eq!(m["hosts"]["remote"]["address"], "10.77.0.2");
        assert_eq!(m["hosts"]["remote"]["port"], 5001);
        assert_eq!(m["hosts"]["remote"]["role"], "server");
        assert_eq!(m["hosts"]["local"]["name"], "box");
        assert_eq!(m["kernel"]["machine"], "x86_64");
        let cc = &m["congestion_control"];
        assert_eq!(cc["default"], "bbr");
        // The download's server never received "cubic": requested, not used.
        assert_eq!(
            cc["per_flow"],
            json!([{"flow": "tcp_down_1", "sender": "remote", "requested": "cubic", "used": null}])
        );
        assert_eq!(m["plan"]["flows"][0]["congestion_control"], "cubic");
        assert_eq!(m["plan"]["probes"][0]["mode"], "udp");
        assert_eq!(m["link"], Value::Null);
        assert!(m["extra"].get("plan").is_none());
        assert_eq!(m["extra"]["cpu_utilisation"], json!([0.5]));
        // And it is a valid version 2 document.
        let mut v = v;
        v["version"] = json!(2);
        let f: crate::ResultsFile = serde_json::from_value(v).unwrap();
        assert_eq!(f.metadata.plan.unwrap().flows[0].name, "tcp_down_1");
    }

    #[test]
    fn ping_v1_probe_moves_and_unknown_shapes_are_kept() {
        let probe = json!({"mode": "icmp", "interval_ns": 10, "size_bytes": 64, "tos": null,
            "timeout_ns": 5, "clock": {"method": "unknown", "shared": false, "offset_ns": 0,
            "drift_ppm": 0.0, "samples_used": 0},
            "summary": {"sent": 1, "received": 1, "lost_up": 0, "lost_down": 0,
              "lost_unknown": 0, "duplicates": 0, "late": 0, "skipped_slots": 0,
              "server_rx_count": 0, "rtt": null, "owd_up": null, "owd_down": null,
              "ipdv_rtt": null, "ipdv_up": null, "ipdv_down": null},
            "lost": [], "negative_owd_clamped": 0});
        let doc = json!({"metadata": {"test": "ping",
            "hosts": {"remote": {"host": "example.org", "address": "192.0.2.1:0", "odd": 1}},
            "link": {"rate_bps": 5}, "extra": {"probe": probe}}});
        let v = to_v2(doc).unwrap();
        let m = &v["metadata"];
        assert_eq!(m["probe"]["mode"], "icmp");
        assert!(m["extra"].get("probe").is_none());
        // A host entry with a field v1 never defined is kept as written.
        assert_eq!(m["hosts"]["remote"]["address"], Value::Null);
        assert_eq!(m["extra"]["v1_hosts_remote"]["odd"], 1);
        assert_eq!(m["extra"]["v1_link"]["rate_bps"], 5);
        // What v1 ping really wrote for the responder.
        let doc = json!({"metadata": {"test": "ping",
            "hosts": {"remote": {"host": "localhost", "address": "127.0.0.1:5001"}}}});
        let r = &to_v2(doc).unwrap()["metadata"]["hosts"]["remote"];
        assert_eq!(
            (&r["name"], &r["address"], &r["port"], &r["role"]),
            (
                &json!("localhost"),
                &json!("127.0.0.1"),
                &json!(5001),
                &json!("probe_responder")
            )
        );
    }
}
