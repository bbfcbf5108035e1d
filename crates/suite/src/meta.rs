//! The typed metadata a test run records (pure, apart from [`crate::host`]'s readers):
//! the two ends, the plan as run, and congestion control per flow.

use std::net::IpAddr;

use bloatlab_results::convert::nanos;
use bloatlab_results::schema::{
    CongestionControlRecord, DirectionRecord, FlowCongestionControl, FlowEnd, HostRecord, HostRole,
    HostsRecord, IpFamilyRecord, PlanFlowRecord, PlanProbeRecord, PlanRecord, ProbeModeRecord,
    PulsesRecord,
};
use bloatlab_stats::Direction;

use crate::driver::Target;
use crate::plan::{Amount, Family, Plan, ProbeMode, RunnerKind, TcpFlow, TestParams};

/// The local host (this process) and the server at `host:port`. `node_name` is this
/// host's name (`uname -n`), `peer_software` what a bloatlab server called itself (its
/// hello or report), `peer_version` the iperf version the server announced. The remote
/// software is never empty: "unknown" when the server said neither.
pub fn hosts(
    node_name: Option<String>,
    host: &str,
    port: u16,
    peer_software: Option<&str>,
    peer_version: Option<&str>,
) -> HostsRecord {
    let mut remote = HostRecord {
        port: Some(port),
        role: Some(HostRole::Server),
        // iperf 2's header carries a version, not a program name: an iperf 2 server is
        // known only by the iperf version it speaks.
        software: Some(match (peer_software, peer_version) {
            (Some(s), _) if !s.is_empty() => s.to_owned(),
            (_, Some(v)) => format!("iperf protocol {v}"),
            _ => "unknown".to_owned(),
        }),
        ..HostRecord::default()
    };
    if host.parse::<IpAddr>().is_ok() {
        remote.address = Some(host.to_owned());
    } else {
        remote.name = Some(host.to_owned());
    }
    HostsRecord {
        local: HostRecord {
            name: node_name,
            role: Some(HostRole::Client),
            software: Some(format!("bloatlab {}", env!("CARGO_PKG_VERSION"))),
            ..HostRecord::default()
        },
        remote,
    }
}

fn direction(d: Direction) -> DirectionRecord {
    match d {
        Direction::Up => DirectionRecord::Up,
        Direction::Down => DirectionRecord::Down,
    }
}

/// The end that sends a flow's data: the client for uploads, the server for downloads.
pub fn sender(d: Direction) -> FlowEnd {
    match d {
        Direction::Up => FlowEnd::Local,
        Direction::Down => FlowEnd::Remote,
    }
}

/// A runner's family and server address, when known: a pinned runner's family, else
/// that of the address it was given (a name leaves both unknown).
fn endpoint(target: &Target, family: Option<Family>) -> (Option<IpFamilyRecord>, Option<String>) {
    let host = target.host_for(family);
    let ip = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .ok();
    let from_ip = ip.map(|a| match a {
        IpAddr::V4(_) => IpFamilyRecord::Ipv4,
        IpAddr::V6(_) => IpFamilyRecord::Ipv6,
    });
    let pinned = family.map(|f| match f {
        Family::V4 => IpFamilyRecord::Ipv4,
        Family::V6 => IpFamilyRecord::Ipv6,
    });
    (pinned.or(from_ip), ip.map(|a| a.to_string()))
}

/// The plan as recorded in `metadata.plan`, with each runner's family and address
/// where `target` tells them.
pub fn plan_record(p: &TestParams, plan: &Plan, target: &Target) -> PlanRecord {
    let mut out = PlanRecord {
        idle_before_ns: nanos(p.idle_before),
        loaded_ns: nanos(p.loaded),
        idle_after_ns: nanos(p.idle_after),
        probe_interval_ns: nanos(p.probe_interval),
        sample_interval_ns: nanos(p.sample_interval),
        flows: Vec::new(),
        probes: Vec::new(),
    };
    for r in &plan.runners {
        let (family, address) = endpoint(target, r.family);
        match &r.kind {
            RunnerKind::Tcp(f) => out.flows.push(PlanFlowRecord {
                name: r.name.clone(),
                direction: direction(f.direction),
                start_ns: nanos(r.start),
                stop_ns: nanos(r.stop),
                tos: f.tos.map(|t| t.0),
                congestion_control: f.cc.as_ref().map(ToString::to_string),
                pulses: match f.amount {
                    Amount::UntilStop => None,
                    Amount::Pulses { bytes, count } => Some(PulsesRecord {
                        bytes: bytes.0,
                        count,
                    }),
                },
                family,
                address,
            }),
            RunnerKind::Probe(q) => out.probes.push(PlanProbeRecord {
                name: r.name.clone(),
                mode: match q.mode {
                    ProbeMode::Udp => ProbeModeRecord::Udp,
                    ProbeMode::Icmp => ProbeModeRecord::Icmp,
                },
                start_ns: nanos(r.start),
                stop_ns: nanos(r.stop),
                interval_ns: nanos(q.interval),
                tos: q.tos.map(|t| t.0),
                size_bytes: q.size.map(|s| s as u64),
                voip: q.voip,
                family,
                address,
            }),
            // Its window and settings are in `metadata.rpm` (the runs as they ran).
            RunnerKind::Rpm => {}
        }
    }
    out
}

/// One flow's congestion control. `sender_cc` is what the flow's sender read back from
/// its socket, as the client reports it (`sender_congestion_control`): the client's own for
/// an upload, the bloatlab server's (its hello, docs/wire.md) for a download; `None` when
/// the server is not bloatlab and could not say.
pub fn flow_cc(name: &str, flow: &TcpFlow, sender_cc: Option<&str>) -> FlowCongestionControl {
    FlowCongestionControl {
        flow: name.to_owned(),
        sender: sender(flow.direction),
        requested: flow.cc.as_ref().map(ToString::to_string),
        used: sender_cc.map(str::to_owned),
    }
}

/// The whole record: the host default, `--cc` as given, and the flows.
pub fn congestion_control(
    default: Option<String>,
    params: &TestParams,
    per_flow: Vec<FlowCongestionControl>,
) -> CongestionControlRecord {
    CongestionControlRecord {
        default,
        requested: (!params.cc.is_empty()).then(|| {
            let names: Vec<&str> = params.cc.iter().map(|c| c.as_str()).collect();
            names.join(",")
        }),
        per_flow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::TestName;

    #[test]
    fn remote_name_or_address() {
        let h = hosts(Some("box".into()), "10.77.0.2", 5001, None, Some("2.1.8"));
        assert_eq!(h.remote.address.as_deref(), Some("10.77.0.2"));
        assert_eq!(h.remote.name, None);
        assert_eq!(h.remote.software.as_deref(), Some("iperf protocol 2.1.8"));
        assert_eq!(h.local.name.as_deref(), Some("box"));
        let h = hosts(None, "server.example", 5001, None, None);
        assert_eq!(h.remote.name.as_deref(), Some("server.example"));
        assert_eq!(h.remote.address, None);
        assert_eq!(h.remote.software.as_deref(), Some("unknown"), "never empty");
        // A bloatlab server's own name wins over the protocol version.
        let h = hosts(
            None,
            "10.77.0.2",
            5001,
            Some("bloatlab 0.1.0"),
            Some("2.1.8"),
        );
        assert_eq!(h.remote.software.as_deref(), Some("bloatlab 0.1.0"));
    }

    fn target(host: &str, host6: Option<&str>) -> Target {
        Target {
            exe: "bloatlab".into(),
            host: host.into(),
            host6: host6.map(str::to_owned),
            port: 5001,
            permit_key: None,
            ecn_fwmark: None,
            rpm: Default::default(),
        }
    }

    #[test]
    fn rrul46_records_each_series_family_and_address() {
        let p = TestParams::default();
        let plan = crate::plan::plan(TestName::Rrul46, &p).unwrap();
        let rec = plan_record(&p, &plan, &target("10.77.0.2", Some("fd00:77::2")));
        let v6 = |f: Option<IpFamilyRecord>, a: Option<&str>| {
            (f, a) == (Some(IpFamilyRecord::Ipv6), Some("fd00:77::2"))
        };
        let v4 = |f: Option<IpFamilyRecord>, a: Option<&str>| {
            (f, a) == (Some(IpFamilyRecord::Ipv4), Some("10.77.0.2"))
        };
        for f in &rec.flows {
            let ok = if f.name.ends_with("_v6") { v6 } else { v4 };
            assert!(ok(f.family, f.address.as_deref()), "{f:?}");
        }
        for q in &rec.probes {
            let ok = if q.name.ends_with("_v6") { v6 } else { v4 };
            assert!(ok(q.family, q.address.as_deref()), "{q:?}");
        }
        // The family is in the file as "ipv6".
        let json = serde_json::to_value(&rec.flows[2]).unwrap();
        assert_eq!(json["family"], "ipv6", "{json}");
        // A single-family test given an IPv6 address records that family too.
        let plan = crate::plan::plan(TestName::Rrul, &p).unwrap();
        let rec = plan_record(&p, &plan, &target("fd00:77::2", None));
        assert!(
            rec.probes
                .iter()
                .all(|q| v6(q.family, q.address.as_deref()))
        );
    }

    #[test]
    fn download_cc_used_is_the_servers() {
        let p = TestParams {
            cc: vec![bloatlab_units::CongestionControl::new("cubic").unwrap()],
            ..TestParams::default()
        };
        let plan = crate::plan::plan(TestName::Rrul, &p).unwrap();
        let rec = plan_record(&p, &plan, &target("server.example", None));
        // A name: family and address unknown, not guessed.
        assert!(
            rec.flows
                .iter()
                .all(|f| f.family.is_none() && f.address.is_none())
        );
        assert_eq!(rec.flows.len(), 8);
        assert!(
            rec.flows
                .iter()
                .all(|f| f.congestion_control.as_deref() == Some("cubic"))
        );
        let down = plan
            .tcp()
            .find(|(_, f)| f.direction == Direction::Down)
            .unwrap();
        // A bloatlab server said what its sender uses; an iperf 2 server could not.
        let c = flow_cc(&down.0.name, down.1, Some("cubic"));
        assert_eq!(c.sender, FlowEnd::Remote);
        assert_eq!(
            (c.requested.as_deref(), c.used.as_deref()),
            (Some("cubic"), Some("cubic"))
        );
        assert_eq!(flow_cc(&down.0.name, down.1, None).used, None);
    }
}
