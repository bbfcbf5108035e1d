//! The `rpm` test's options, typed: what `bloatlab test rpm` passes to its `bloatlab rpm`
//! child, in the rpm client's own types ([`Trust`], [`Mode`], [`Protocol`]), so the
//! child's command line is [`crate::rpm::to_argv`] of an [`RpmConfig`].

use super::RpmTestArgs;
use crate::client::secs;
use crate::rpm::{RpmConfig, STALL_TIMEOUT};
use bloatlab_rpm::Params;
use bloatlab_rpm::client::{Mode, Options, Protocol, Trust};
use std::time::Duration;

/// `--rpm-url`, `--rpm-port`, the trust options, `--sequential`, `--max-connections`,
/// `--rpm-interval` and `--h1` of `bloatlab test`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpmTestOptions {
    /// `--rpm-url`: a config URL or `HOST[:PORT]`, as `bloatlab rpm` takes it (`None`:
    /// `https://HOST:PORT/.well-known/nq` with the test's host and [`Self::port`]).
    pub url: Option<String>,
    /// `--rpm-port`: the server's HTTPS port when `url` is not given (`None`: 8443).
    pub port: Option<u16>,
    /// `--insecure`, `--ca`, `--fingerprint` (default: the system's CAs).
    pub trust: Trust,
    /// [`Mode::Sequential`] with `--sequential`, else [`Mode::Concurrent`].
    pub mode: Mode,
    /// `--h1`: HTTP/1.1 instead of HTTP/2.
    pub protocol: Protocol,
    /// `--max-connections`: the draft's MNP (`None`: the client's default).
    pub max_connections: Option<u16>,
    /// `--rpm-interval`: the draft's ID (`None`: the client's default).
    pub interval: Option<Duration>,
}

impl Default for RpmTestOptions {
    /// No option given.
    fn default() -> Self {
        RpmTestOptions {
            url: None,
            port: None,
            trust: Trust::System,
            mode: Mode::Concurrent,
            protocol: Protocol::H2,
            max_connections: None,
            interval: None,
        }
    }
}

impl RpmTestArgs {
    /// The options as given (a certificate file's existence, a fingerprint's form and
    /// a URL are checked by the binary, which also refuses them on other tests).
    pub fn resolve(&self) -> RpmTestOptions {
        let trust = if self.insecure {
            Trust::Insecure
        } else if let Some(ca) = &self.ca {
            Trust::Ca(ca.clone())
        } else if let Some(fp) = &self.fingerprint {
            Trust::Fingerprint(fp.clone())
        } else {
            Trust::System
        };
        RpmTestOptions {
            url: self.url.clone(),
            port: self.port,
            trust,
            mode: if self.sequential {
                Mode::Sequential
            } else {
                Mode::Concurrent
            },
            protocol: if self.h1 { Protocol::H1 } else { Protocol::H2 },
            max_connections: self.max_connections,
            interval: self.interval,
        }
    }
}

impl RpmTestOptions {
    /// The flags given, in `bloatlab test`'s spelling (a test other than `rpm` refuses
    /// them).
    pub fn given(&self) -> Vec<&'static str> {
        let trust = |t: fn(&Trust) -> bool| t(&self.trust);
        [
            (trust(|t| *t == Trust::Insecure), "--insecure"),
            (self.mode == Mode::Sequential, "--sequential"),
            (self.protocol == Protocol::H1, "--h1"),
            (trust(|t| matches!(t, Trust::Ca(_))), "--ca"),
            (
                trust(|t| matches!(t, Trust::Fingerprint(_))),
                "--fingerprint",
            ),
            (self.max_connections.is_some(), "--max-connections"),
            (self.interval.is_some(), "--rpm-interval"),
            (self.url.is_some(), "--rpm-url"),
            (self.port.is_some(), "--rpm-port"),
        ]
        .into_iter()
        .filter_map(|(on, f)| on.then_some(f))
        .collect()
    }

    /// The `bloatlab rpm` child's run: fetch the config at `url` (as `bloatlab rpm`
    /// reads its argument), end by `duration` at the latest, print JSON; its key goes by
    /// environment ([`crate::rpm::to_argv`] never writes one). `Err`: `url` is not a
    /// config URL.
    pub fn child(&self, url: &str, duration: Duration) -> Result<RpmConfig, String> {
        let config_url = bloatlab_rpm::config::config_url(url)?;
        let d = Params::default();
        Ok(RpmConfig {
            options: Options {
                config_url,
                params: Params {
                    max_connections: self.max_connections.map_or(d.max_connections, usize::from),
                    interval: self.interval.unwrap_or(d.interval),
                    ..d
                },
                mode: self.mode,
                protocol: self.protocol,
                trust: self.trust.clone(),
                duration,
                permit_key: None,
                stall_timeout: STALL_TIMEOUT,
            },
            json: true,
            output: None,
        })
    }

    /// Appends the `bloatlab test` flags that resolve to `self`.
    pub fn push_argv(&self, a: &mut Vec<String>) {
        let mut opt = |flag: &str, value: String| a.push(format!("{flag}={value}"));
        if let Some(u) = &self.url {
            opt("--rpm-url", u.clone());
        }
        if let Some(p) = self.port {
            opt("--rpm-port", p.to_string());
        }
        match &self.trust {
            Trust::Ca(f) => opt("--ca", f.display().to_string()),
            Trust::Fingerprint(f) => opt("--fingerprint", f.clone()),
            Trust::System | Trust::Insecure => {}
        }
        if let Some(n) = self.max_connections {
            opt("--max-connections", n.to_string());
        }
        if let Some(i) = self.interval {
            opt("--rpm-interval", format!("{}s", secs(i)));
        }
        let flags = [
            (self.trust == Trust::Insecure, "--insecure"),
            (self.mode == Mode::Sequential, "--sequential"),
            (self.protocol == Protocol::H1, "--h1"),
        ];
        crate::push_switches(a, &flags);
    }
}
