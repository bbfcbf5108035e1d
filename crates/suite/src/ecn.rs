//! `bloatlab test --ecn on|off|mix`: TCP ECN for a run inside a lab.
//!
//! Linux has no per-socket ECN switch: `net.ipv4.tcp_ecn` is per network namespace
//! (1 = ask on outgoing connections, 2 = only accept when asked, RFC 3168 section 6.1.1),
//! but a route may carry `features ecn`, which makes connections using it ask for ECN
//! even with `tcp_ecn=2` (ip-route(8)). So `mix` (some flows with ECN, some without, from
//! one host) sets the host's `tcp_ecn` to 2 for the run, adds a policy rule `fwmark M
//! lookup T` and, in table T, a copy of the route to the server with `features ecn`; the
//! flows that ask for ECN get `--fwmark M` (SO_MARK). The rule and route live in the
//! namespace this process runs in (`lab exec` put it in the lab host's), use a table and
//! mark unique to this process, and are removed when [`EcnRoute`] is dropped, on every
//! exit path. The server accepts ECN when asked (`tcp_ecn=2` there, the kernel default),
//! so downloads negotiate it too.

use std::net::IpAddr;
use std::process::Command;

/// `--ecn`, defined with the flag in `bloatlab_invoke::test`.
pub use bloatlab_invoke::test::EcnMode;

/// Why the ECN route could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EcnRouteError {
    /// `ip` could not run or failed.
    #[error("--ecn mix: `ip {args}` failed: {why}")]
    Ip {
        /// Its arguments.
        args: String,
        /// Its stderr or the spawn error.
        why: String,
    },
    /// The server's name did not resolve.
    #[error("--ecn mix: cannot resolve {0}")]
    Resolve(String),
    /// `ip route get` named no device.
    #[error("--ecn mix: no route to {0} (ip route get printed no device)")]
    NoRoute(IpAddr),
}

/// The server's address (a name is resolved).
pub fn server_ip(host: &str, port: u16) -> Result<IpAddr, EcnRouteError> {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| EcnRouteError::Resolve(host.to_owned()))
}

/// The device and gateway of `ip -o route get` output (pure).
pub fn route_of(route_get: &str) -> Option<(String, Option<String>)> {
    let words: Vec<&str> = route_get.split_whitespace().collect();
    let after = |k: &str| {
        words
            .iter()
            .position(|w| *w == k)
            .and_then(|i| words.get(i + 1))
            .map(|s| s.to_string())
    };
    Some((after("dev")?, after("via")))
}

/// Table and fwmark (one number in 20000..=49999) and rule priority (1000..=30999)
/// unique to process `pid` (pure), so runs in parallel never share a rule. The priority
/// must come before the main table's rule (32766), or the main route wins.
pub fn ids_for(pid: u32) -> (u32, u32) {
    (20_000 + pid % 30_000, 1_000 + pid % 30_000)
}

fn ip(args: &[&str]) -> Result<String, EcnRouteError> {
    let err = |why: String| EcnRouteError::Ip {
        args: args.join(" "),
        why,
    };
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| err(e.to_string()))?;
    if !o.status.success() {
        return Err(err(String::from_utf8_lossy(&o.stderr).trim().to_owned()));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The policy rule and ECN route of a `--ecn mix` run; removed on drop.
#[derive(Debug)]
pub struct EcnRoute {
    /// The fwmark flows that ask for ECN carry.
    pub mark: u32,
    table: String,
    priority: String,
    rule_added: bool,
    route_added: bool,
}

impl EcnRoute {
    /// Adds, in this process's namespace, a route to `server` with `features ecn` in a
    /// private table and a rule sending sockets with the mark there.
    pub fn add(server: IpAddr) -> Result<EcnRoute, EcnRouteError> {
        let (id, priority) = ids_for(std::process::id());
        let mut g = EcnRoute {
            mark: id,
            table: id.to_string(),
            priority: priority.to_string(),
            rule_added: false,
            route_added: false,
        };
        let target = server.to_string();
        let got = ip(&["-o", "route", "get", &target])?;
        let (dev, via) = route_of(&got).ok_or(EcnRouteError::NoRoute(server))?;
        let mut add = vec![
            "route", "add", &target, "dev", &dev, "table", &g.table, "features", "ecn",
        ];
        if let Some(gw) = &via {
            add.extend(["via", gw.as_str()]);
        }
        ip(&add)?;
        g.route_added = true;
        let mark = g.mark.to_string();
        ip(&[
            "rule",
            "add",
            "fwmark",
            &mark,
            "table",
            &g.table,
            "priority",
            &g.priority,
        ])?;
        g.rule_added = true;
        Ok(g)
    }
}

impl Drop for EcnRoute {
    fn drop(&mut self) {
        let mark = self.mark.to_string();
        if self.rule_added
            && let Err(e) = ip(&[
                "rule",
                "del",
                "fwmark",
                &mark,
                "table",
                &self.table,
                "priority",
                &self.priority,
            ])
        {
            tracing::warn!("{e}");
        }
        if self.route_added
            && let Err(e) = ip(&["route", "flush", "table", &self.table])
        {
            tracing::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_routes() {
        assert_eq!(EcnMode::parse("mix"), Some(EcnMode::Mix));
        assert_eq!(EcnMode::parse("MIX"), None);
        assert!(EcnMode::On.host_asks() && !EcnMode::Mix.host_asks());
        assert_eq!(
            route_of("10.77.0.2 via 10.77.1.1 dev eth0 src 10.77.1.2 uid 0 \\    cache"),
            Some(("eth0".into(), Some("10.77.1.1".into())))
        );
        assert_eq!(
            route_of("10.77.0.2 dev c0 src 10.77.0.1 uid 0"),
            Some(("c0".into(), None))
        );
        assert_eq!(route_of("RTNETLINK answers: Network is unreachable"), None);
        assert_eq!(ids_for(0), (20_000, 1_000));
        assert_eq!(ids_for(29_999), (49_999, 30_999));
        assert_eq!(ids_for(30_000), (20_000, 1_000));
    }
}
