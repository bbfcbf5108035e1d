//! Changing and reading a running lab's per-host settings: TCP ECN
//! (`net.ipv4.tcp_ecn` in the host's namespace) without rebuilding the lab.
//!
//! `tcp_ecn` values (ip-sysctl.rst): 0 never, 1 request ECN on outgoing
//! connections and accept it on incoming ones, 2 (the kernel default) accept
//! it when the peer asks but never ask. A lab host "with ECN" is 1; "without"
//! is the default 2, as `lab up` leaves hosts not named by `--ecn`. Since the
//! client opens every connection of a test (also the download flows), the
//! client's setting decides whether a flow negotiates ECN.

use crate::error::{LabError, Result};
use crate::netns;
use crate::state::{LabState, StateDir};
use crate::sysctl;
use std::collections::BTreeMap;

/// The sysctl behind a host's ECN setting.
pub(crate) const TCP_ECN: &str = "net.ipv4.tcp_ecn";

/// `tcp_ecn` value for a host with ECN on / off.
pub(crate) fn ecn_value(on: bool) -> &'static str {
    if on { "1" } else { "2" }
}

/// Parses `HOST=on|off` (or `all=on|off`) against the lab's hosts.
pub(crate) fn parse_ecn_setting(st: &LabState, v: &str) -> Result<Vec<(String, bool)>> {
    let bad = |why: String| LabError::Spec {
        field: crate::error::SpecField::flag("--ecn"),
        value: v.to_string(),
        why,
    };
    let (host, onoff) = v
        .split_once('=')
        .ok_or_else(|| bad("write HOST=on or HOST=off (or all=on)".into()))?;
    let on = match onoff.trim() {
        "on" | "1" => true,
        "off" | "0" => false,
        other => return Err(bad(format!("{other:?} is neither on nor off"))),
    };
    let host = host.trim();
    if host == "all" {
        return Ok(st.hosts.iter().map(|h| (h.name.clone(), on)).collect());
    }
    if !st.hosts.iter().any(|h| h.name == host) {
        let known: Vec<&str> = st.hosts.iter().map(|h| h.name.as_str()).collect();
        return Err(bad(format!(
            "lab {} has no host {host:?} (hosts: {})",
            st.name,
            known.join(", ")
        )));
    }
    Ok(vec![(host.to_string(), on)])
}

/// Sets TCP ECN on or off for each named host of lab `name` and records it
/// in the state file (so `lab status` shows it). Takes effect for
/// connections opened afterwards.
pub fn set_ecn(dir: &StateDir, name: &str, settings: &[(String, bool)]) -> Result<()> {
    let mut st = dir
        .read(name)?
        .ok_or_else(|| LabError::NoSuchLab(name.to_string()))?;
    for (host, on) in settings {
        let h = st
            .hosts
            .iter()
            .find(|h| &h.name == host)
            .ok_or_else(|| LabError::NoSuchHost {
                lab: name.to_string(),
                host: host.clone(),
                known: st
                    .hosts
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        netns::run_in(&h.netns, || sysctl::write(TCP_ECN, ecn_value(*on)))?;
        st.spec.ecn_hosts.retain(|x| x != host);
        if *on {
            st.spec.ecn_hosts.push(host.clone());
        }
    }
    st.spec.ecn_hosts.sort();
    st.spec.ecn_hosts.dedup();
    dir.write(&st)
}

/// `net.ipv4.tcp_ecn` of every host of the lab, as read in its namespace
/// (hosts whose value cannot be read are left out).
pub fn ecn_of_hosts(st: &LabState) -> BTreeMap<String, String> {
    st.hosts
        .iter()
        .filter_map(|h| {
            let v = netns::run_in(&h.netns, || sysctl::read(TCP_ECN)).ok()?;
            Some((h.name.clone(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::LabSpec;

    #[test]
    fn ecn_settings_name_real_hosts() {
        let st = LabState::new(&LabSpec::new("e1"), &StateDir::default());
        assert_eq!(
            parse_ecn_setting(&st, "server=on").unwrap(),
            [("server".to_string(), true)]
        );
        assert_eq!(parse_ecn_setting(&st, "all=off").unwrap().len(), 2);
        for bad in ["server", "nobody=on", "server=maybe"] {
            let e = parse_ecn_setting(&st, bad).unwrap_err().to_string();
            assert!(e.contains("--ecn") && e.contains(bad), "{e}");
        }
        assert_eq!((ecn_value(true), ecn_value(false)), ("1", "2"));
    }
}
