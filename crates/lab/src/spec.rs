//! What a lab is made of: hosts, the two directions of the emulated link,
//! per-host settings. A [`LabSpec`] is plain data (stored in the state
//! file and handed to the background emulator); [`LabSpec::validate`]
//! checks the fields against each other, and each backend's `check`
//! (`crate::lab::check` calls both) what that backend can build, before any
//! object is created.
//!
//! Topology (userspace backend):
//!
//! ```text
//!  client  (10.77.0.1)  \                                  / server (10.77.0.2)
//!  client2 (10.77.0.12)  }-- TUN --[ up:   client -> server ]-- TUN --{
//!  clientN (10.77.0.1N) /         [ down: server -> client ]         \ peer   (10.77.0.3)
//! ```
//!
//! Every host lives in its own namespace `bl-LAB-HOST` with one TUN device
//! `bl-HOST` carrying `10.77.0.X/24`. The emulator process holds all TUN
//! fds; the *up* link carries everything the client-side hosts send to the
//! server-side hosts, the *down* link the reverse. The /24 exists only
//! inside the lab's namespaces, so every lab can use the same addresses.

use crate::error::{LabError, Result, SpecField};
use crate::names;
use bloatlab_emu::{Limit, LinkRate, LossModel, Qdisc, QdiscParam, Spelled, StageSpec};
use bloatlab_units::CongestionControl;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// Most client hosts a lab can have.
pub(crate) const MAX_CLIENTS: u32 = 64;

/// How the link is emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// The bloatlab emulator in userspace between TUN devices (default).
    #[default]
    Userspace,
    /// veth pairs through a router namespace with kernel qdiscs.
    Kernel,
}

/// One direction of the link: every value parsed by the emulator's parser
/// for it when it was read (`lab up` does it in clap), kept with the user's
/// spelling ([`Spelled`]), which is what the state file stores and `lab
/// status` shows. `None` means "not limited" / the qdisc's default.
/// Cross-field checks: [`LinkSpec::check`]; what a backend can do: its
/// module's `check` (crate::lab::check).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// Bottleneck rate (`20mbit`, `schedule:0s/20mbit,5s/5mbit`, `trace:FILE`);
    /// `None` = unshaped.
    pub rate: Option<Spelled<LinkRate>>,
    /// One-way propagation delay (`20ms`).
    pub delay: Option<Spelled<Duration>>,
    /// Delay jitter (`1ms`).
    pub jitter: Option<Spelled<Duration>>,
    /// Random loss (`0.5%`, `gemodel 1% 10%`).
    pub loss: Option<Spelled<LossModel>>,
    /// Queue limit (`1000p`, `64kb`).
    pub limit: Option<Spelled<Limit>>,
    /// Queue discipline (`fifo`, `codel`, `fq_codel`, `pie`, `cake`).
    pub qdisc: Option<Spelled<Qdisc>>,
    /// Queue discipline parameters as `key=value` or bare flags
    /// (`target=5ms`, `interval=100ms`, `ecn`, `noecn`).
    pub params: Vec<Spelled<QdiscParam>>,
    /// A chain of stages instead of one bottleneck (userspace backend),
    /// each as `key=value` words (`rate=9mbit qdisc=fq_codel`), in the
    /// order packets cross them; see `bloatlab_emu::parse_stage`. With
    /// stages, `delay`, `jitter` and `loss` form a final stage `path`, and
    /// `rate`, `limit`, `qdisc` and `params` must be empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Spelled<StageSpec>>,
}

impl LinkSpec {
    /// The flag that sets `what` for direction `dir` (`--rate/--up-rate`),
    /// as errors name it.
    pub fn flag(dir: &str, what: &str) -> SpecField {
        SpecField::link(dir, what)
    }

    /// Checks the fields of direction `dir` against each other: `--rate`,
    /// `--limit`, `--qdisc` and `--qdisc-param` describe a single bottleneck
    /// and are refused next to stages, naming both flags; stage names are
    /// unique and not `path` (the stage `--delay` adds).
    pub fn check(&self, dir: &str) -> Result<()> {
        if self.stages.is_empty() {
            return Ok(());
        }
        let single = [
            ("rate", self.rate.as_ref().map(|v| v.text().to_string())),
            ("limit", self.limit.as_ref().map(|v| v.text().to_string())),
            ("qdisc", self.qdisc.as_ref().map(|v| v.text().to_string())),
            (
                "qdisc-param",
                (!self.params.is_empty()).then(|| Spelled::join(&self.params, " ")),
            ),
        ];
        for (what, value) in single {
            if let Some(value) = value {
                return Err(spec_err(
                    LinkSpec::flag(dir, what),
                    &value,
                    format!(
                        "conflicts with {}: with stages, give {what} inside a stage",
                        LinkSpec::flag(dir, "stage")
                    ),
                ));
            }
        }
        let names: Vec<String> = self
            .stages
            .iter()
            .zip(1..)
            .map(|(st, pos)| st.get().name.clone().unwrap_or_else(|| pos.to_string()))
            .collect();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) || name == "path" {
                return Err(spec_err(
                    LinkSpec::flag(dir, "stage").part(format!("{} key name", i + 1)),
                    name,
                    "stage names must be unique and not `path`".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Driver options of the userspace emulator.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DriverSpec {
    /// Longest busy-wait before a release: timer sleeps end early by the
    /// learned timer lateness, up to this, and the rest is spun from a
    /// budget of 25 % of wall time (driver/wake.rs). Zero disables spinning.
    pub spin: Duration,
    /// Run the forwarding threads with SCHED_FIFO (default true).
    pub realtime: bool,
    /// Seed of the emulator's random numbers (loss, jitter, hashing).
    pub seed: u64,
    /// Write the per-packet trace of each direction to `PREFIX.up.csv` and
    /// `PREFIX.down.csv` (trace_file.rs).
    #[serde(default)]
    pub trace: Option<std::path::PathBuf>,
    /// TSO in, GRO-like coalescing out at the TUNs (crate::offload); the
    /// emulated link still sees wire-sized packets. Off by default.
    #[serde(default)]
    pub offload: bool,
    /// Take the measured forwarding and host path overhead out of the
    /// configured delay (driver/calibrate.rs). On by default;
    /// `lab up --no-calibrate` turns it off.
    #[serde(default = "calibrate_default")]
    pub calibrate: bool,
}

fn calibrate_default() -> bool {
    true
}

impl Default for DriverSpec {
    fn default() -> Self {
        DriverSpec {
            spin: Duration::ZERO,
            realtime: true,
            seed: 1,
            trace: None,
            offload: false,
            calibrate: true,
        }
    }
}

/// Everything `lab up` needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LabSpec {
    /// Lab name (see [`names::validate`]).
    pub name: String,
    /// Emulation backend.
    pub backend: Backend,
    /// Number of client hosts (1 = just `client`).
    pub clients: u32,
    /// Add the third host `peer` on the server side.
    pub peer: bool,
    /// Link from the client side to the server side.
    pub up: LinkSpec,
    /// Link from the server side to the client side.
    pub down: LinkSpec,
    /// Hosts that get `net.ipv4.tcp_ecn=1` (others keep the kernel default, 2).
    pub ecn_hosts: Vec<String>,
    /// Default TCP congestion control per host (`net.ipv4.tcp_congestion_control`).
    pub cc: BTreeMap<String, CongestionControl>,
    /// MTU of every lab interface, bytes.
    pub mtu: u32,
    /// Userspace driver options.
    pub driver: DriverSpec,
}

impl LabSpec {
    /// A lab with one client, one server, unshaped links.
    pub fn new(name: &str) -> LabSpec {
        LabSpec {
            name: name.to_string(),
            backend: Backend::Userspace,
            clients: 1,
            peer: false,
            up: LinkSpec::default(),
            down: LinkSpec::default(),
            ecn_hosts: Vec::new(),
            cc: BTreeMap::new(),
            mtu: 1500,
            driver: DriverSpec::default(),
        }
    }

    /// The hosts, client side first.
    pub fn hosts(&self) -> Vec<Host> {
        let mut v = Vec::new();
        for i in 1..=self.clients {
            let name = if i == 1 {
                "client".to_string()
            } else {
                format!("client{i}")
            };
            let last = if i == 1 { 1 } else { 10 + i as u8 };
            v.push(Host::new(&self.name, name, Side::Client, last));
        }
        v.push(Host::new(&self.name, "server".into(), Side::Server, 2));
        if self.peer {
            v.push(Host::new(&self.name, "peer".into(), Side::Server, 3));
        }
        v
    }

    /// Every namespace the lab creates.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.hosts().into_iter().map(|h| h.netns).collect();
        if self.backend == Backend::Kernel {
            v.push(names::netns(&self.name, names::ROUTER));
        }
        v
    }

    /// Checks names, counts, host references and each direction's fields
    /// against each other ([`LinkSpec::check`]). Plain data checks only:
    /// what a backend cannot do is its own `check`'s (crate::lab::check).
    pub fn validate(&self) -> Result<()> {
        names::validate(&self.name)?;
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return Err(spec_err(
                SpecField::flag("--clients"),
                &self.clients.to_string(),
                format!("must be 1 to {MAX_CLIENTS}"),
            ));
        }
        if !(576..=9000).contains(&self.mtu) {
            return Err(spec_err(
                SpecField::flag("--mtu"),
                &self.mtu.to_string(),
                "must be 576 to 9000".into(),
            ));
        }
        let hosts: Vec<String> = self.hosts().into_iter().map(|h| h.name).collect();
        let check_host = |field: &str, h: &str| {
            if hosts.iter().any(|x| x == h) {
                Ok(())
            } else {
                Err(spec_err(
                    SpecField::flag(field),
                    h,
                    format!("no such host (hosts: {})", hosts.join(", ")),
                ))
            }
        };
        for h in &self.ecn_hosts {
            check_host("--ecn", h)?;
        }
        // The names themselves were checked when they became CongestionControls.
        for h in self.cc.keys() {
            check_host("--cc", h)?;
        }
        self.up.check("up")?;
        self.down.check("down")
    }
}

pub(crate) fn spec_err(field: SpecField, value: &str, why: String) -> LabError {
    LabError::Spec {
        field,
        value: value.to_string(),
        why,
    }
}

/// Which side of the bottleneck a host sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Sends on the *up* link, receives from the *down* link.
    Client,
    /// Sends on the *down* link, receives from the *up* link.
    Server,
}

/// One host of the topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// `client`, `client2`, ..., `server`, `peer`.
    pub name: String,
    /// Its namespace, `bl-LAB-HOST`.
    pub netns: String,
    /// Side of the bottleneck.
    pub side: Side,
    /// Its address on the lab's /24.
    pub addr: Ipv4Addr,
    /// Its IPv6 address on the lab's /64 (`fd00:77::` + the IPv4 address's
    /// last byte).
    #[serde(default = "unspecified6")]
    pub addr6: Ipv6Addr,
    /// Its interface (the TUN device, or the veth end for the kernel backend).
    pub ifname: String,
}

/// The lab's private subnet; it exists only inside lab namespaces.
pub(crate) const SUBNET: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 0);
/// Prefix length of the lab's subnet (10.77.0.0).
pub const PREFIX_LEN: u8 = 24;
/// The lab's private IPv6 subnet (RFC 4193 unique local addresses), also
/// only inside lab namespaces.
pub(crate) const SUBNET6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0);
/// Prefix length of the lab's IPv6 subnet (fd00:77::).
pub(crate) const PREFIX_LEN6: u8 = 64;

fn unspecified6() -> Ipv6Addr {
    Ipv6Addr::UNSPECIFIED
}

impl Host {
    fn new(lab: &str, name: String, side: Side, last: u8) -> Host {
        let o = SUBNET.octets();
        Host {
            netns: names::netns(lab, &name),
            ifname: format!("bl-{name}"),
            addr: Ipv4Addr::new(o[0], o[1], o[2], last),
            addr6: Ipv6Addr::from(u128::from(SUBNET6) | u128::from(last)),
            side,
            name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_addresses_follow_the_documented_plan() {
        let mut s = LabSpec::new("t");
        s.clients = 3;
        s.peer = true;
        let h = s.hosts();
        let names: Vec<_> = h.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["client", "client2", "client3", "server", "peer"]);
        let addrs: Vec<_> = h.iter().map(|h| h.addr.to_string()).collect();
        assert_eq!(
            addrs,
            [
                "10.77.0.1",
                "10.77.0.12",
                "10.77.0.13",
                "10.77.0.2",
                "10.77.0.3"
            ]
        );
        let addrs6: Vec<_> = h.iter().map(|h| h.addr6.to_string()).collect();
        assert_eq!(
            addrs6,
            [
                "fd00:77::1",
                "fd00:77::c",
                "fd00:77::d",
                "fd00:77::2",
                "fd00:77::3"
            ]
        );
        assert_eq!(h[1].netns, "bl-t-client2");
        assert_eq!(h[1].ifname, "bl-client2");
        assert!(h.iter().all(|h| h.ifname.len() < 16));
        assert!(h.iter().all(|h| names::is_lab_netns("t", &h.netns)));
    }

    #[test]
    fn validate_names_the_bad_field() {
        let mut s = LabSpec::new("t");
        s.ecn_hosts = vec!["nobody".into()];
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("--ecn") && e.contains("nobody"), "{e}");
        let mut s = LabSpec::new("t");
        s.clients = 0;
        assert!(s.validate().unwrap_err().to_string().contains("--clients"));
        let s = LabSpec::new("Bad");
        assert!(matches!(s.validate(), Err(LabError::InvalidName { .. })));
    }

    /// A stored spec reads back equal, its link values in the user's spelling.
    #[test]
    fn link_values_are_stored_as_spelled() {
        let mut s = LabSpec::new("t");
        s.up.rate = Some("20mbit".parse().unwrap());
        s.up.loss = Some("gemodel 1% 10%".parse().unwrap());
        s.up.params = vec!["target=5ms".parse().unwrap()];
        s.down.stages = vec!["name=modem rate=10mbit".parse().unwrap()];
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["up"]["rate"], "20mbit");
        assert_eq!(v["up"]["loss"], "gemodel 1% 10%");
        assert_eq!(v["up"]["params"][0], "target=5ms");
        assert_eq!(v["down"]["stages"][0], "name=modem rate=10mbit");
        assert_eq!(v["down"]["rate"], serde_json::Value::Null);
        let back: LabSpec = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }

    /// A lab whose trace file has gone since `lab up` still reads back (so
    /// `lab status` and `lab down` work); building its links says why not.
    #[test]
    fn a_stored_trace_whose_file_has_gone_reads_back() {
        let dir = std::env::temp_dir().join(format!("h23r-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.trace");
        std::fs::write(&f, "1\n2\n").unwrap();
        let mut s = LabSpec::new("t");
        s.up.rate = Some(format!("trace:{}", f.display()).parse().unwrap());
        s.down.stages = vec![
            format!("name=sky rate=trace:{} qdisc=fifo", f.display())
                .parse()
                .unwrap(),
        ];
        let v = serde_json::to_value(&s).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let back: LabSpec = serde_json::from_value(v).unwrap();
        assert_eq!(
            back.up.rate.as_ref().unwrap().text(),
            s.up.rate.unwrap().text()
        );
        assert_eq!(back.down.stages[0].get().name.as_deref(), Some("sky"));
        let e = crate::model::build("up", &back.up, 1, None).err().unwrap();
        assert!(e.to_string().contains("x.trace"), "{e}");
        let e = crate::model::build("down", &back.down, 1, None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("x.trace"), "{e}");
    }
}
