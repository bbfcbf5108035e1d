//! The typed metadata records of a run as one line of text each, for the terminal and
//! the HTML report. Unknown values read "not measured" (or are left out of a list),
//! never `0`.

use bloatlab_results::schema::{
    CongestionControlRecord, FlowEnd, HostRecord, HostRole, HostsRecord, IpFamilyRecord,
    KernelRecord, LinkDirectionRecord, LinkRecord, PlanRecord, ProbeModeRecord, QdiscRecord,
};

use crate::view::{direction_name, mbps, ms};

/// What an unknown value prints as.
pub const NOT_MEASURED: &str = "not measured";

fn role(r: HostRole) -> &'static str {
    match r {
        HostRole::Client => "client",
        HostRole::Server => "server",
        HostRole::ProbeResponder => "probe responder",
        HostRole::IcmpEcho => "ICMP echo",
    }
}

/// `10.0.0.2:5001 (server, bloatlab 0.1.0)`; `None` if nothing is known.
pub fn host(h: &HostRecord) -> Option<String> {
    if *h == HostRecord::default() {
        return None;
    }
    let mut s = match (&h.name, &h.address) {
        (Some(n), Some(a)) if n != a => format!("{n} ({a})"),
        (Some(n), _) => n.clone(),
        (None, Some(a)) => a.clone(),
        (None, None) => "unknown host".to_owned(),
    };
    if let Some(p) = h.port {
        s.push_str(&format!(" port {p}"));
    }
    let details: Vec<&str> = h
        .role
        .map(role)
        .into_iter()
        .chain(h.software.as_deref())
        .collect();
    if !details.is_empty() {
        s.push_str(&format!(", {}", details.join(", ")));
    }
    Some(s)
}

/// `local …; remote …`.
pub fn hosts(h: &HostsRecord) -> Option<String> {
    let parts: Vec<String> = [("local", &h.local), ("remote", &h.remote)]
        .iter()
        .filter_map(|(k, h)| host(h).map(|s| format!("{k} {s}")))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// `Linux 6.18.0 x86_64 #1 SMP …`.
pub fn kernel(k: &KernelRecord) -> Option<String> {
    let parts: Vec<&str> = [&k.sysname, &k.release, &k.machine, &k.version]
        .into_iter()
        .filter_map(|v| v.as_deref())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// `tbf on bl-veth0 (limit 1000000, rate 20mbit)`.
pub fn qdisc(q: &QdiscRecord) -> String {
    let mut s = q.kind.clone();
    if let Some(i) = &q.interface {
        s.push_str(&format!(" on {i}"));
    }
    if !q.parameters.is_empty() {
        let p: Vec<String> = q
            .parameters
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        s.push_str(&format!(" ({})", p.join(", ")));
    }
    s
}

/// All qdiscs, `; `-separated.
pub fn qdiscs(q: &[QdiscRecord]) -> Option<String> {
    (!q.is_empty()).then(|| q.iter().map(qdisc).collect::<Vec<_>>().join("; "))
}

fn link_direction(d: &LinkDirectionRecord) -> String {
    let mut parts = vec![match d.rate_bps {
        Some(r) => format!("{} Mbit/s", mbps(r)),
        None => "unshaped".to_owned(),
    }];
    if let Some(v) = d.delay_ns {
        parts.push(format!("delay {} ms", ms(v)));
    }
    if let Some(v) = d.jitter_ns {
        parts.push(format!("jitter {} ms", ms(v)));
    }
    if let Some(v) = d.loss_fraction {
        parts.push(format!("loss {:.3}%", v * 100.0));
    }
    if let Some(v) = d.limit_packets {
        parts.push(format!("limit {v} packets"));
    }
    if let Some(v) = d.limit_bytes {
        parts.push(format!("limit {v} bytes"));
    }
    if let Some(v) = d.overhead_bytes {
        parts.push(format!("overhead {v} bytes"));
    }
    if let Some(q) = &d.qdisc {
        parts.push(qdisc(q));
    }
    parts.join(", ")
}

/// `lab demo (userspace): up 20.00 Mbit/s, delay 40.0 ms, fifo; down …`.
pub fn link(l: &LinkRecord) -> String {
    let mut s = match &l.lab {
        Some(n) => format!("lab {n}"),
        None => "lab".to_owned(),
    };
    if let Some(b) = &l.backend {
        s.push_str(&format!(" ({b})"));
    }
    format!(
        "{s}: up {}; down {}",
        link_direction(&l.up),
        link_direction(&l.down)
    )
}

fn or_default(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("default")
}

/// `default bbr, requested cubic; tcp_up_be (local sends): requested cubic, used cubic; …`.
pub fn congestion_control(c: &CongestionControlRecord) -> Option<String> {
    if *c == CongestionControlRecord::default() {
        return None;
    }
    let mut parts = vec![format!(
        "host default {}, requested {}",
        c.default.as_deref().unwrap_or(NOT_MEASURED),
        or_default(&c.requested)
    )];
    for f in &c.per_flow {
        let sender = match f.sender {
            FlowEnd::Local => "local",
            FlowEnd::Remote => "remote",
        };
        parts.push(format!(
            "{} ({sender} sends): requested {}, used {}",
            f.flow,
            or_default(&f.requested),
            f.used.as_deref().unwrap_or(NOT_MEASURED)
        ));
    }
    Some(parts.join("; "))
}

fn secs(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// `idle 5.0 s, loaded 60.0 s, idle 5.0 s; probes every 10.00 ms; flows: …`.
pub fn plan(p: &PlanRecord) -> String {
    let mut s = format!(
        "idle {}, loaded {}, idle {}; probes every {} ms; samples every {} ms",
        secs(p.idle_before_ns),
        secs(p.loaded_ns),
        secs(p.idle_after_ns),
        ms(p.probe_interval_ns),
        ms(p.sample_interval_ns)
    );
    if !p.flows.is_empty() {
        let flows: Vec<String> = p
            .flows
            .iter()
            .map(|f| {
                let mut t = format!("{} {}", f.name, direction_name(f.direction));
                if let Some(tos) = f.tos {
                    t.push_str(&format!(" tos 0x{tos:02x}"));
                }
                if let Some(cc) = &f.congestion_control {
                    t.push_str(&format!(" {cc}"));
                }
                if let Some(p) = f.pulses {
                    t.push_str(&format!(" {} x {} bytes", p.count, p.bytes));
                }
                t.push_str(&endpoint(f.family, f.address.as_deref()));
                t
            })
            .collect();
        s.push_str(&format!("; flows: {}", flows.join(", ")));
    }
    if !p.probes.is_empty() {
        let probes: Vec<String> = p
            .probes
            .iter()
            .map(|q| {
                let mode = match q.mode {
                    ProbeModeRecord::Udp => "udp",
                    ProbeModeRecord::Icmp => "icmp",
                };
                let at = endpoint(q.family, q.address.as_deref());
                match q.tos {
                    Some(t) => format!("{} {mode} tos 0x{t:02x}{at}", q.name),
                    None => format!("{} {mode}{at}", q.name),
                }
            })
            .collect();
        s.push_str(&format!("; probes: {}", probes.join(", ")));
    }
    s
}

/// ` over IPv6 to fd00:77::2`: a flow's or probe's family and address, where recorded.
fn endpoint(family: Option<IpFamilyRecord>, address: Option<&str>) -> String {
    match (family, address) {
        (Some(f), Some(a)) => format!(" over {} to {a}", f.label()),
        (Some(f), None) => format!(" over {}", f.label()),
        (None, Some(a)) => format!(" to {a}"),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_is_said_not_zeroed() {
        assert_eq!(hosts(&HostsRecord::default()), None);
        assert_eq!(kernel(&KernelRecord::default()), None);
        let h = HostRecord {
            address: Some("10.0.0.2".into()),
            port: Some(5001),
            role: Some(HostRole::Server),
            ..HostRecord::default()
        };
        assert_eq!(host(&h).unwrap(), "10.0.0.2 port 5001, server");
        let c = CongestionControlRecord {
            default: Some("bbr".into()),
            requested: None,
            per_flow: vec![bloatlab_results::schema::FlowCongestionControl {
                flow: "tcp_down".into(),
                sender: FlowEnd::Remote,
                requested: Some("cubic".into()),
                used: None,
            }],
        };
        assert_eq!(
            congestion_control(&c).unwrap(),
            "host default bbr, requested default; tcp_down (remote sends): requested cubic, used not measured"
        );
        let l = LinkRecord {
            lab: Some("x".into()),
            backend: None,
            up: LinkDirectionRecord {
                rate_bps: Some(20_000_000),
                delay_ns: Some(40_000_000),
                ..LinkDirectionRecord::default()
            },
            down: LinkDirectionRecord::default(),
        };
        assert_eq!(
            link(&l),
            "lab x: up 20.00 Mbit/s, delay 40.00 ms; down unshaped"
        );
    }
}
