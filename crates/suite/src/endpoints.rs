//! The server's address per IP family for a dual-stack test (`rrul46`).
//!
//! flent's `rrul46` gives netperf one host name and forces `-4`/`-6` per data set. Our
//! runners take an address, so a dual-stack run settles both addresses once, before
//! any traffic, and every runner gets a literal: a name that stops resolving mid-run
//! cannot move a flow to the other family, and the results file records which address
//! each series used.
//!
//! The IPv6 address comes from, in order: `--v6 HOST6`; `HOST` itself, when its name
//! has an IPv6 address; the lab (`lab exec` sets `BLOATLAB_<HOST>6` beside
//! `BLOATLAB_<HOST>`, so `HOST` = `$BLOATLAB_SERVER` finds `$BLOATLAB_SERVER6`).

use bloatlab_lab::LabEnv;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};

/// Why a dual-stack test has no address of one family.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// A name did not resolve.
    #[error("cannot resolve {host:?}: {detail}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's message.
        detail: String,
    },
    /// `HOST` has no IPv4 address.
    #[error(
        "{test} needs an IPv4 address for HOST, and {host:?} has none (give HOST as an IPv4 \
         address or a name with one, and the IPv6 address with --v6)"
    )]
    NoIpv4 {
        /// The test.
        test: String,
        /// What was given.
        host: String,
    },
    /// Neither `--v6`, `HOST` nor the lab gave an IPv6 address.
    #[error(
        "{test} needs an IPv6 address of the server too: {host:?} has none; give one with \
         --v6 (e.g. --v6 fd00:77::2), or run it in a lab through `lab exec`, which sets \
         BLOATLAB_SERVER6"
    )]
    NoIpv6 {
        /// The test.
        test: String,
        /// What was given.
        host: String,
    },
    /// `--v6` is not an IPv6 address and has none.
    #[error("--v6 {value:?} has no IPv6 address")]
    V6NotIpv6 {
        /// What was given.
        value: String,
    },
}

/// The server's two addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DualStack {
    /// Where IPv4 runners go.
    pub v4: Ipv4Addr,
    /// Where IPv6 runners go.
    pub v6: Ipv6Addr,
}

/// `host`'s addresses: a literal (brackets allowed around IPv6) without a lookup, else
/// the resolver's answer.
pub fn resolve(host: &str) -> Result<Vec<IpAddr>, EndpointError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    (bare, 0)
        .to_socket_addrs()
        .map(|it| it.map(|a| a.ip()).collect())
        .map_err(|e| EndpointError::Resolve {
            host: host.to_owned(),
            detail: e.to_string(),
        })
}

/// The IPv6 address a lab pairs with `v4`: `BLOATLAB_<X>6` where `BLOATLAB_<X>` is
/// `v4`, from `env` (`lab exec`'s environment, docs/lab.md).
pub fn lab_v6(v4: Ipv4Addr, env: &LabEnv) -> Option<Ipv6Addr> {
    env.v6_beside(v4)
}

/// Picks the two addresses of `test`'s server (pure): `host_addrs` are `host`'s
/// addresses, `v6_arg` is `--v6` with its addresses, `lab` the lab's IPv6 address
/// paired with the chosen IPv4 one ([`lab_v6`]).
pub fn pick(
    test: &str,
    host: &str,
    host_addrs: &[IpAddr],
    v6_arg: Option<(&str, &[IpAddr])>,
    lab: impl FnOnce(Ipv4Addr) -> Option<Ipv6Addr>,
) -> Result<DualStack, EndpointError> {
    let v4 = host_addrs
        .iter()
        .find_map(|a| match a {
            IpAddr::V4(v) => Some(*v),
            IpAddr::V6(_) => None,
        })
        .ok_or_else(|| EndpointError::NoIpv4 {
            test: test.to_owned(),
            host: host.to_owned(),
        })?;
    let first_v6 = |addrs: &[IpAddr]| {
        addrs.iter().find_map(|a| match a {
            IpAddr::V6(v) => Some(*v),
            IpAddr::V4(_) => None,
        })
    };
    let v6 = match v6_arg {
        Some((value, addrs)) => first_v6(addrs).ok_or_else(|| EndpointError::V6NotIpv6 {
            value: value.to_owned(),
        })?,
        None => first_v6(host_addrs)
            .or_else(|| lab(v4))
            .ok_or_else(|| EndpointError::NoIpv6 {
                test: test.to_owned(),
                host: host.to_owned(),
            })?,
    };
    Ok(DualStack { v4, v6 })
}

/// [`pick`] with the resolver and this process's environment.
pub fn dual_stack(test: &str, host: &str, v6: Option<&str>) -> Result<DualStack, EndpointError> {
    let host_addrs = resolve(host)?;
    let v6_addrs = v6.map(resolve).transpose()?;
    let v6_arg = v6.zip(v6_addrs.as_deref());
    pick(test, host, &host_addrs, v6_arg, |v4| {
        lab_v6(v4, &LabEnv::from_env())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const NO_LAB: fn(Ipv4Addr) -> Option<Ipv6Addr> = |_| None;

    #[test]
    fn v6_comes_from_the_option_then_the_name_then_the_lab() {
        let both = [ip("10.77.0.2"), ip("fd00:77::2")];
        let want = DualStack {
            v4: "10.77.0.2".parse().unwrap(),
            v6: "fd00:77::2".parse().unwrap(),
        };
        // A name resolving to both.
        assert_eq!(pick("rrul46", "srv", &both, None, NO_LAB), Ok(want));
        // --v6 wins over the name's own.
        let other = [ip("fd00::9")];
        let got = pick("rrul46", "srv", &both, Some(("fd00::9", &other)), NO_LAB).unwrap();
        assert_eq!(got.v6, "fd00::9".parse::<Ipv6Addr>().unwrap());
        // An IPv4 address in a lab: the lab's pair.
        let lab = |v4: Ipv4Addr| (v4 == want.v4).then_some(want.v6);
        assert_eq!(pick("rrul46", "10.77.0.2", &both[..1], None, lab), Ok(want));
    }

    #[test]
    fn a_missing_family_is_an_error_naming_the_fix() {
        let v4 = [ip("10.0.0.2")];
        let e = pick("rrul46", "10.0.0.2", &v4, None, NO_LAB).unwrap_err();
        assert!(matches!(e, EndpointError::NoIpv6 { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("--v6") && msg.contains("BLOATLAB_SERVER6"),
            "{msg}"
        );
        let v6 = [ip("fd00::2")];
        let e = pick("rrul46", "fd00::2", &v6, None, NO_LAB).unwrap_err();
        assert!(matches!(e, EndpointError::NoIpv4 { .. }), "{e}");
        let e = pick("rrul46", "10.0.0.2", &v4, Some(("10.0.0.3", &v4)), NO_LAB).unwrap_err();
        assert_eq!(
            e,
            EndpointError::V6NotIpv6 {
                value: "10.0.0.3".into()
            }
        );
    }

    #[test]
    fn lab_environment_pairs_each_host_s_addresses() {
        let env = [
            ("BLOATLAB_CLIENT", "10.77.0.1"),
            ("BLOATLAB_CLIENT6", "fd00:77::1"),
            ("BLOATLAB_SERVER", "10.77.0.2"),
            ("BLOATLAB_SERVER6", "fd00:77::2"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let env = LabEnv::from_vars(env);
        let get = |a: &str| lab_v6(a.parse().unwrap(), &env);
        assert_eq!(get("10.77.0.2"), Some("fd00:77::2".parse().unwrap()));
        assert_eq!(get("10.77.0.1"), Some("fd00:77::1".parse().unwrap()));
        assert_eq!(get("10.77.0.9"), None);
    }

    #[test]
    fn literals_resolve_without_a_lookup() {
        assert_eq!(resolve("[fd00::2]").unwrap(), [ip("fd00::2")]);
        assert_eq!(resolve("10.0.0.2").unwrap(), [ip("10.0.0.2")]);
    }
}
