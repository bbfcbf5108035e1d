//! The environment `lab exec` gives the commands it runs, written ([`LabEnv::vars`]) and
//! read ([`LabEnv::from_vars`]) here and nowhere else.
//!
//! | variable              | value                                                      |
//! |-----------------------|------------------------------------------------------------|
//! | `BLOATLAB_LAB`        | the lab's name                                             |
//! | `BLOATLAB_HOST`       | the host the command runs on (`client`, `server`, ...)     |
//! | `BLOATLAB_<H>`        | host `h`'s IPv4 address (`BLOATLAB_SERVER=10.77.0.2`)      |
//! | `BLOATLAB_<H>6`       | host `h`'s IPv6 address; absent for labs recorded before IPv6 |
//!
//! `<H>` is the host's name in upper case. A host's two variables are told apart by their
//! values (an IPv4 or an IPv6 address), so `client2`'s IPv6 variable `BLOATLAB_CLIENT26`
//! is not mistaken for a host `client26`. Variables that are not addresses
//! (`BLOATLAB_TEST_TIER`, a permit key) are not hosts.

use std::ffi::OsString;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Names the lab.
pub const LAB: &str = "BLOATLAB_LAB";
/// Names the host.
pub const HOST: &str = "BLOATLAB_HOST";
const PREFIX: &str = "BLOATLAB_";

/// One host's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAddrs {
    /// The host's name (`client`, `client2`, `server`, `peer`).
    pub name: String,
    /// Its IPv4 address.
    pub v4: Ipv4Addr,
    /// Its IPv6 address, when the lab has one.
    pub v6: Option<Ipv6Addr>,
}

/// What a command learns from `lab exec`'s environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabEnv {
    /// The lab (`None`: not run through `lab exec`).
    pub lab: Option<String>,
    /// The host it runs on.
    pub host: Option<String>,
    /// Every host of the lab, in the order written (read back sorted by name).
    pub hosts: Vec<HostAddrs>,
}

impl LabEnv {
    /// The environment of a command run in `host` of lab `lab` with `hosts`.
    pub fn new(lab: &str, host: &str, hosts: Vec<HostAddrs>) -> LabEnv {
        LabEnv {
            lab: Some(lab.to_owned()),
            host: Some(host.to_owned()),
            hosts,
        }
    }

    /// The variables to set, per the table in the module docs.
    pub fn vars(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        if let Some(lab) = &self.lab {
            v.push((LAB.to_owned(), lab.clone()));
        }
        if let Some(host) = &self.host {
            v.push((HOST.to_owned(), host.clone()));
        }
        for h in &self.hosts {
            let key = format!("{PREFIX}{}", h.name.to_uppercase());
            v.push((key.clone(), h.v4.to_string()));
            if let Some(v6) = h.v6 {
                v.push((format!("{key}6"), v6.to_string()));
            }
        }
        v
    }

    /// Reads `vars` (pure; other variables are ignored). An empty `BLOATLAB_LAB` is no lab.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> LabEnv {
        let mut env = LabEnv::default();
        let mut v6s: Vec<(String, Ipv6Addr)> = Vec::new();
        for (k, v) in vars {
            let Some(rest) = k.strip_prefix(PREFIX) else {
                continue;
            };
            if k == LAB {
                env.lab = Some(v).filter(|v| !v.is_empty());
            } else if k == HOST {
                env.host = Some(v).filter(|v| !v.is_empty());
            } else if let Ok(v4) = v.parse::<Ipv4Addr>() {
                env.hosts.push(HostAddrs {
                    name: rest.to_lowercase(),
                    v4,
                    v6: None,
                });
            } else if let (Some(name), Ok(v6)) = (rest.strip_suffix('6'), v.parse::<Ipv6Addr>()) {
                v6s.push((name.to_lowercase(), v6));
            }
        }
        for (name, v6) in v6s {
            if let Some(h) = env.hosts.iter_mut().find(|h| h.name == name) {
                h.v6 = Some(v6);
            }
        }
        env.hosts.sort_by(|a, b| a.name.cmp(&b.name));
        env
    }

    /// This process's environment (variables that are not Unicode are skipped).
    pub fn from_env() -> LabEnv {
        let utf8 = |s: OsString| s.into_string().ok();
        LabEnv::from_vars(std::env::vars_os().filter_map(|(k, v)| Some((utf8(k)?, utf8(v)?))))
    }

    /// Host `name`'s IPv4 address.
    pub fn addr(&self, name: &str) -> Option<Ipv4Addr> {
        self.hosts.iter().find(|h| h.name == name).map(|h| h.v4)
    }

    /// The IPv6 address of the host whose IPv4 address is `v4`.
    pub fn v6_beside(&self, v4: Ipv4Addr) -> Option<Ipv6Addr> {
        self.hosts.iter().find(|h| h.v4 == v4).and_then(|h| h.v6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> LabEnv {
        let h = |name: &str, last: u8, v6: bool| HostAddrs {
            name: name.into(),
            v4: Ipv4Addr::new(10, 77, 0, last),
            v6: v6.then_some(Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, last.into())),
        };
        LabEnv::new(
            "l1",
            "client2",
            vec![
                h("client", 1, true),
                h("client2", 12, true),
                h("server", 2, true),
                h("peer", 3, false),
            ],
        )
    }

    #[test]
    fn written_names_are_the_documented_ones() {
        let vars = plan().vars();
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("BLOATLAB_LAB"), Some("l1"));
        assert_eq!(get("BLOATLAB_HOST"), Some("client2"));
        assert_eq!(get("BLOATLAB_SERVER"), Some("10.77.0.2"));
        assert_eq!(get("BLOATLAB_SERVER6"), Some("fd00:77::2"));
        assert_eq!(get("BLOATLAB_CLIENT26"), Some("fd00:77::c"));
        assert_eq!(get("BLOATLAB_PEER6"), None);
        assert_eq!(vars.len(), 2 + 4 + 3);
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut want = plan();
        want.hosts.sort_by(|a, b| a.name.cmp(&b.name));
        let mut vars = plan().vars();
        // Other variables of the process are not hosts.
        vars.push(("BLOATLAB_TEST_TIER".into(), "full".into()));
        vars.push(("PATH".into(), "/bin".into()));
        vars.reverse();
        assert_eq!(LabEnv::from_vars(vars), want);
    }

    #[test]
    fn lookups_by_name_and_by_address() {
        let env = LabEnv::from_vars(plan().vars());
        assert_eq!(env.addr("server"), Some(Ipv4Addr::new(10, 77, 0, 2)));
        assert_eq!(env.addr("router"), None);
        let v6 = |s: &str| env.v6_beside(s.parse().unwrap());
        assert_eq!(v6("10.77.0.12"), "fd00:77::c".parse().ok());
        assert_eq!(v6("10.77.0.3"), None);
        assert_eq!(v6("10.77.0.9"), None);
    }

    #[test]
    fn outside_a_lab_nothing_is_set() {
        let env = LabEnv::from_vars([("BLOATLAB_LAB".to_owned(), String::new())]);
        assert_eq!(env, LabEnv::default());
        assert_eq!(LabEnv::default().vars(), Vec::<(String, String)>::new());
    }
}
