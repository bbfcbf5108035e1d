//! The kernel backend: the same hosts and addresses, joined through a
//! router namespace by veth pairs and shaped by kernel qdiscs.
//!
//! ```text
//!  client --veth-- r-client \                               / r-server --veth-- server
//!  client2 -veth-- r-client2 }- br-c -[bl-up]==[bl-down]- br-s {
//!                                                            \ r-peer ----veth-- peer
//! ```
//!
//! Inside `bl-LAB-router` two bridges collect the client side and the
//! server side; one inner veth pair joins them. The *up* qdiscs sit on
//! `bl-up`'s egress (towards the servers), the *down* qdiscs on
//! `bl-down`'s egress, so every client shares one bottleneck per direction
//! and it sits in a forwarding middlebox, not on a sender's own egress
//! (where TCP Small Queues would hide the queue, emulation.md 4.7).
//! TSO/GSO/GRO are switched off on every veth so qdiscs see wire-sized
//! packets.
//!
//! Qdiscs per direction: `tbf` (rate, burst = max(2 MTU, 1 ms of rate),
//! byte limit) with a `pfifo`/`bfifo` child for `--qdisc fifo` /
//! `--limit`; delay, jitter and loss need `netem`; `codel`, `fq_codel`,
//! `pie` and `cake` need those qdiscs. This kernel has none of netem,
//! codel, fq_codel, pie or cake: asking for them fails with
//! [`LabError::MissingQdisc`] naming the qdisc.

use crate::error::{LabError, Result, SpecField};
use crate::names;
use crate::netlink::Netlink;
use crate::netlink::msg::RTM_NEWQDISC;
use crate::netns;
use crate::spec::{Host, LabSpec, LinkSpec, Side, spec_err};
use bloatlab_emu::{Limit, LinkRate, Qdisc, Spelled};
use bloatlab_units::Bytes;

const TC_H_ROOT: u32 = 0xFFFF_FFFF;
const TC_LINKLAYER_ETHERNET: u8 = 1;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_BURST: u16 = 6;

/// Checks what the kernel backend cannot do at all (independent of the
/// running kernel's qdiscs, which `configure_router` finds out): chained
/// links, qdisc parameters, offloads, per-packet traces, rates its `tbf`
/// cannot hold.
pub fn check(spec: &LabSpec) -> Result<()> {
    for (dir, l) in [("up", &spec.up), ("down", &spec.down)] {
        if !l.stages.is_empty() {
            return Err(spec_err(
                SpecField::flag(&format!("--{dir}-stage")),
                &Spelled::join(&l.stages, " | "),
                "chained links (--stage) need the userspace backend".into(),
            ));
        }
        if !l.params.is_empty() {
            return Err(spec_err(
                SpecField::flag(&format!("--{dir}-qdisc-param")),
                &Spelled::join(&l.params, " "),
                "qdisc parameters are only supported by the userspace backend".into(),
            ));
        }
        if let Some(r) = &l.rate {
            tbf_rate(dir, r)?;
        }
    }
    if spec.driver.offload {
        return Err(spec_err(
            SpecField::flag("--offload"),
            "on",
            "needs the userspace backend (the kernel backend's veth offloads are off)".into(),
        ));
    }
    if let Some(t) = &spec.driver.trace {
        return Err(spec_err(
            SpecField::flag("--trace"),
            &t.display().to_string(),
            "needs the userspace backend (a kernel qdisc cannot report each packet)".into(),
        ));
    }
    Ok(())
}

/// A rate in bytes per second as `tbf` takes it (32 bits).
fn tbf_rate(dir: &str, r: &Spelled<LinkRate>) -> Result<u32> {
    if r.get().capacity.is_some() {
        return Err(spec_err(
            LinkSpec::flag(dir, "rate"),
            r.text(),
            "rate schedules and traces need the userspace backend".into(),
        ));
    }
    u32::try_from(r.get().nominal.0 / 8).map_err(|_| {
        spec_err(
            LinkSpec::flag(dir, "rate"),
            r.text(),
            "at most 34 Gbit/s for the kernel backend".into(),
        )
    })
}

pub fn router_ns(spec: &LabSpec) -> String {
    names::netns(&spec.name, names::ROUTER)
}

/// Creates the veth pair of `host`: `r-HOST` in the router namespace,
/// `bl-HOST` directly in the host's namespace.
pub fn wire_host(spec: &LabSpec, host: &Host) -> Result<()> {
    let host_fd = netns::open(&host.netns)?;
    netns::run_in(&router_ns(spec), || {
        let mut nl = Netlink::open()?;
        nl.add_veth(&router_port(host), &host.ifname, Some(&host_fd))
    })?;
    netns::run_in(&host.netns, || offloads_off(&host.ifname))
}

fn router_port(host: &Host) -> String {
    format!("r-{}", host.name)
}

/// Builds the bridges, the inner veth pair and the qdiscs.
pub fn configure_router(spec: &LabSpec) -> Result<()> {
    netns::run_in(&router_ns(spec), || {
        let mut nl = Netlink::open()?;
        let lo = nl.link_index("lo")?;
        nl.set_link(lo, None, None)?;
        nl.add_link("br-c", "bridge")?;
        nl.add_link("br-s", "bridge")?;
        nl.add_veth("bl-up", "bl-down", None)?;
        let brc = nl.link_index("br-c")?;
        let brs = nl.link_index("br-s")?;
        let up = nl.link_index("bl-up")?;
        let down = nl.link_index("bl-down")?;
        nl.set_master(up, brc)?;
        nl.set_master(down, brs)?;
        for host in spec.hosts() {
            let port = router_port(&host);
            let i = nl.link_index(&port)?;
            nl.set_master(i, if host.side == Side::Client { brc } else { brs })?;
            offloads_off(&port)?;
            nl.set_link(i, Some(spec.mtu), None)?;
        }
        for (name, i) in [("bl-up", up), ("bl-down", down)] {
            offloads_off(name)?;
            nl.set_link(i, Some(spec.mtu), None)?;
        }
        nl.set_link(brc, None, None)?;
        nl.set_link(brs, None, None)?;
        add_qdiscs(&mut nl, up, "up", &spec.up, spec.mtu)?;
        add_qdiscs(&mut nl, down, "down", &spec.down, spec.mtu)?;
        Ok(())
    })
}

/// `struct tc_ratespec` (12 bytes) for `bytes_per_sec`, Ethernet link
/// layer so the kernel needs no rate table.
fn ratespec(bytes_per_sec: u32) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[1] = TC_LINKLAYER_ETHERNET;
    b[8..12].copy_from_slice(&bytes_per_sec.to_ne_bytes());
    b
}

/// Nested `TCA_OPTIONS` for tbf: `TCA_TBF_PARMS` + `TCA_TBF_BURST`.
fn tbf_options(bytes_per_sec: u32, burst: u32, limit: u32) -> Vec<u8> {
    let mut parms = Vec::with_capacity(36);
    parms.extend_from_slice(&ratespec(bytes_per_sec));
    parms.extend_from_slice(&[0u8; 12]); // no peak rate
    parms.extend_from_slice(&limit.to_ne_bytes());
    // buffer in psched ticks (64 ns); TCA_TBF_BURST overrides it, but keep
    // it consistent for old readers.
    let ticks = (u64::from(burst) * 1_000_000_000 / u64::from(bytes_per_sec.max(1))) >> 6;
    parms.extend_from_slice(&u32::try_from(ticks).unwrap_or(u32::MAX).to_ne_bytes());
    parms.extend_from_slice(&0u32.to_ne_bytes()); // mtu (peak rate only)
    let mut out = Vec::new();
    push_nla(&mut out, TCA_TBF_PARMS, &parms);
    push_nla(&mut out, TCA_TBF_BURST, &burst.to_ne_bytes());
    out
}

fn push_nla(out: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = u16::try_from(4 + payload.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize((out.len() + 3) & !3, 0);
}

fn add_qdiscs(nl: &mut Netlink, ifindex: i32, dir: &str, l: &LinkSpec, mtu: u32) -> Result<()> {
    let nonzero =
        |d: &Option<Spelled<std::time::Duration>>| d.as_ref().is_some_and(|d| !d.get().is_zero());
    if nonzero(&l.delay) || nonzero(&l.jitter) || l.loss.is_some() {
        // Delay, jitter and loss are netem's; probe it so the error names it.
        nl.add_tc(RTM_NEWQDISC, ifindex, 0x0001_0000, TC_H_ROOT, "netem", &[])?;
        return Err(LabError::Sys {
            op: "kernel backend".into(),
            source: std::io::Error::other(
                "netem is present but its configuration is not implemented; use the userspace backend",
            ),
        });
    }
    let qdisc = l.qdisc.as_ref().map_or(Qdisc::Fifo, |q| *q.get());
    let limit = l.limit.as_ref().map(|v| *v.get());
    let child_parent;
    if let Some(rate) = &l.rate {
        let bps = tbf_rate(dir, rate)?;
        let burst = (2 * mtu).max(bps / 1000);
        let limit = match limit {
            Some(Limit::Bytes(Bytes(b))) => u32::try_from(b).unwrap_or(u32::MAX),
            // 1000 packets' worth unless a packet limit below replaces it.
            _ => 1000 * mtu,
        };
        nl.add_tc(
            RTM_NEWQDISC,
            ifindex,
            0x0001_0000,
            TC_H_ROOT,
            "tbf",
            &tbf_options(bps, burst, limit),
        )?;
        child_parent = Some(0x0001_0001);
    } else {
        child_parent = None;
    }
    let parent = child_parent.unwrap_or(TC_H_ROOT);
    let handle = if child_parent.is_some() {
        0x000A_0000
    } else {
        0x0001_0000
    };
    match qdisc {
        Qdisc::Fifo => match limit {
            Some(Limit::Packets(n)) => nl.add_tc(
                RTM_NEWQDISC,
                ifindex,
                handle,
                parent,
                "pfifo",
                &n.to_ne_bytes(),
            )?,
            Some(Limit::Bytes(Bytes(b))) if child_parent.is_none() => {
                let b = u32::try_from(b).unwrap_or(u32::MAX);
                nl.add_tc(
                    RTM_NEWQDISC,
                    ifindex,
                    handle,
                    parent,
                    "bfifo",
                    &b.to_ne_bytes(),
                )?
            }
            _ => {}
        },
        other => {
            nl.add_tc(
                RTM_NEWQDISC,
                ifindex,
                handle,
                parent,
                &other.to_string(),
                &[],
            )?;
        }
    }
    Ok(())
}

/// Switches TSO, GSO and GRO off on `ifname` (legacy ethtool ioctls), in
/// the calling thread's namespace.
fn offloads_off(ifname: &str) -> Result<()> {
    use bloatlab_os::netdev::{ETHTOOL_SGRO, ETHTOOL_SGSO, ETHTOOL_STSO, ethtool_value};
    let fd = bloatlab_os::fdio::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
        .map_err(|e| LabError::io("socket for ethtool", e))?;
    for cmd in [ETHTOOL_STSO, ETHTOOL_SGSO, ETHTOOL_SGRO] {
        ethtool_value(&fd, ifname, cmd, 0)
            .map_err(|e| LabError::io(format!("ethtool offload off on {ifname}"), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What only the userspace backend can do is refused before anything is
    /// built, naming the option; the same spec passes the plain checks.
    #[test]
    fn check_refuses_what_the_kernel_backend_cannot_do() {
        let kernel = |edit: &dyn Fn(&mut LabSpec)| {
            let mut s = LabSpec::new("h15k");
            s.backend = crate::spec::Backend::Kernel;
            edit(&mut s);
            s.validate().unwrap();
            match check(&s) {
                Err(LabError::Spec { field, value, why }) => (field.to_string(), value, why),
                other => panic!("{other:?}"),
            }
        };
        let (field, value, _) = kernel(&|s| s.down.stages = vec!["rate=9mbit".parse().unwrap()]);
        assert_eq!(
            (field.as_str(), value.as_str()),
            ("--down-stage", "rate=9mbit")
        );
        let (field, value, _) =
            kernel(&|s| s.up.params = vec!["ecn".parse().unwrap(), "target=5ms".parse().unwrap()]);
        assert_eq!(
            (field.as_str(), value.as_str()),
            ("--up-qdisc-param", "ecn target=5ms")
        );
        let (field, _, why) = kernel(&|s| s.driver.offload = true);
        assert!(field == "--offload" && why.contains("userspace"), "{why}");
        let (field, value, _) = kernel(&|s| s.driver.trace = Some("/tmp/t".into()));
        assert_eq!((field.as_str(), value.as_str()), ("--trace", "/tmp/t"));
        let (field, value, why) =
            kernel(&|s| s.down.rate = Some("schedule:0s/20mbit,5s/5mbit".parse().unwrap()));
        assert_eq!(
            (field.as_str(), value.as_str()),
            ("--rate/--down-rate", "schedule:0s/20mbit,5s/5mbit")
        );
        assert!(why.contains("userspace"), "{why}");
        let (field, value, why) = kernel(&|s| s.up.rate = Some("40gbit".parse().unwrap()));
        assert_eq!(
            (field.as_str(), value.as_str()),
            ("--rate/--up-rate", "40gbit")
        );
        assert!(why.contains("34 Gbit/s"), "{why}");
        let mut s = LabSpec::new("h15k");
        s.backend = crate::spec::Backend::Kernel;
        s.up.rate = Some("30gbit".parse().unwrap());
        s.down.qdisc = Some("fq_codel".parse().unwrap());
        check(&s).unwrap();
    }

    #[test]
    fn tbf_options_layout() {
        let o = tbf_options(2_500_000, 3000, 30_000);
        // TCA_TBF_PARMS: 4 + 36 bytes, then TCA_TBF_BURST: 4 + 4.
        assert_eq!(o.len(), 40 + 8);
        assert_eq!(u16::from_ne_bytes([o[0], o[1]]), 40);
        assert_eq!(u16::from_ne_bytes([o[2], o[3]]), TCA_TBF_PARMS);
        assert_eq!(o[4 + 1], TC_LINKLAYER_ETHERNET);
        assert_eq!(u32::from_ne_bytes(o[12..16].try_into().unwrap()), 2_500_000);
        assert_eq!(u32::from_ne_bytes(o[28..32].try_into().unwrap()), 30_000);
        // 3000 B at 2.5 MB/s = 1.2 ms = 18750 ticks of 64 ns.
        assert_eq!(u32::from_ne_bytes(o[32..36].try_into().unwrap()), 18_750);
        assert_eq!(u32::from_ne_bytes(o[44..48].try_into().unwrap()), 3000);
    }
}
