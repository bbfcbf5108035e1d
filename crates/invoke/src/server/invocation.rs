//! A whole `bloatlab server` command line as one typed value: the engine's
//! [`ServerConfig`] (the iperf-compatible service), the latency-probe responder, the
//! HTTP test service and its browser record. [`ServerArgs::resolve`] builds it with
//! the checks that need nothing but the flags; [`to_argv`] writes it back for a child
//! (`bloatlab experiment`'s server in a lab), with the permit key in
//! [`PERMIT_KEY_ENV`] ([`child_env`]), never on the command line.

use super::{BrowserArgs, ServerArgs};
use crate::client::secs;
use crate::opts::PERMIT_KEY_ENV;
use bloatlab_engine::config::{Protocol, ServerConfig};
use bloatlab_http::deadlines::Limits as HttpDeadlines;
use bloatlab_http::{RecordConfig, TestCaps};
use std::path::PathBuf;

/// Everything one `bloatlab server` runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInvocation {
    /// The iperf-compatible service's configuration (its caps and key also bound the
    /// HTTP service).
    pub engine: ServerConfig,
    /// Serve the iperf-compatible service (false: `--no-iperf`, only HTTP; then
    /// [`Self::http`] is `Some`).
    pub iperf: bool,
    /// Answer `bloatlab ping` probes on UDP at the TCP port (false: `--no-probes`).
    pub probes: bool,
    /// `--http` / `--https`: the HTTP test service, when either is given.
    pub http: Option<HttpService>,
    /// `--handshake-timeout`, `--http-header-timeout`, `--http-wait-max` (kept without
    /// an HTTP service too, where they are unused, so nothing given is lost).
    pub http_deadlines: HttpDeadlines,
    /// `--results-dir` (only with an HTTP service) and the `--browser-*` caps.
    pub browser: RecordConfig,
}

/// Where the HTTP test service listens; at least one of the two is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpService {
    /// `--http PORT`: HTTP/1.1 and h2c.
    pub http: Option<u16>,
    /// `--https PORT` and its certificate.
    pub https: Option<Https>,
}

/// `--https PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Https {
    /// The TCP port.
    pub port: u16,
    /// `--tls-cert` and `--tls-key`; `None`: a self-signed certificate is made.
    pub tls: Option<TlsFiles>,
}

/// A PEM certificate chain and its private key (both given, or neither).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `--tls-cert FILE`.
    pub cert: PathBuf,
    /// `--tls-key FILE`.
    pub key: PathBuf,
}

/// A `bloatlab server` command line whose options exclude each other. The binary
/// exits with status 2; an experiment names the option's TOML key ([`Self::flags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    /// `--tls-cert` or `--tls-key` without `--https`.
    #[error("--tls-cert and --tls-key are for --https PORT (the HTTPS service's certificate)")]
    TlsWithoutHttps,
    /// `--tls-cert` without `--tls-key`.
    #[error("--tls-cert needs --tls-key (the certificate's private key)")]
    CertWithoutKey,
    /// `--tls-key` without `--tls-cert`.
    #[error("--tls-key needs --tls-cert (the certificate chain the key belongs to)")]
    KeyWithoutCert,
    /// `--no-iperf` and no HTTP service.
    #[error("--no-iperf needs --http PORT or --https PORT (otherwise nothing would be served)")]
    NothingServed,
    /// `--results-dir` and no HTTP service.
    #[error(
        "--results-dir needs --http PORT or --https PORT (it keeps the browser tests' results)"
    )]
    ResultsWithoutHttp,
    /// `--permit-key` on a UDP server.
    #[error(
        "--permit-key is not supported with -u/--udp (as in iperf 2: the key is a TCP header field)"
    )]
    KeyWithUdp,
}

impl ServerError {
    /// The flags at fault, the one a user should change first.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            ServerError::TlsWithoutHttps => &["--tls-cert", "--tls-key"],
            ServerError::CertWithoutKey => &["--tls-cert"],
            ServerError::KeyWithoutCert => &["--tls-key"],
            ServerError::NothingServed => &["--no-iperf"],
            ServerError::ResultsWithoutHttp => &["--results-dir"],
            ServerError::KeyWithUdp => &["--permit-key"],
        }
    }
}

impl ServerArgs {
    /// Resolves the whole command line. `env_key` is the checked key from
    /// [`PERMIT_KEY_ENV`] (`None` when unset), used when `--permit-key` is absent on a
    /// TCP server, as `client` does. What needs the machine (a results directory that
    /// exists, a generated key) is the binary's.
    pub fn resolve(&self, env_key: Option<String>) -> Result<ServerInvocation, ServerError> {
        let mut engine = self.engine();
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (Some(_), None) => return Err(ServerError::CertWithoutKey),
            (None, Some(_)) => return Err(ServerError::KeyWithoutCert),
            (None, None) => None,
        };
        let https = match (self.https, tls) {
            (Some(port), tls) => Some(Https { port, tls }),
            (None, Some(_)) => return Err(ServerError::TlsWithoutHttps),
            (None, None) => None,
        };
        let http = (self.http.is_some() || https.is_some()).then_some(HttpService {
            http: self.http,
            https,
        });
        if self.no_iperf && http.is_none() {
            return Err(ServerError::NothingServed);
        }
        if self.browser.results_dir.is_some() && http.is_none() {
            return Err(ServerError::ResultsWithoutHttp);
        }
        if engine.permit_key.is_none() && engine.protocol == Protocol::Tcp {
            engine.permit_key = env_key;
        }
        if engine.permit_key.is_some() && engine.protocol == Protocol::Udp {
            return Err(ServerError::KeyWithUdp);
        }
        Ok(ServerInvocation {
            engine,
            iperf: !self.no_iperf,
            probes: !self.no_probes,
            http,
            http_deadlines: HttpDeadlines {
                handshake_stall: self.handshake_timeout,
                head_stall: self.http_header_timeout,
                wait_max: self.http_wait_max,
            },
            browser: self.browser.record(),
        })
    }
}

impl BrowserArgs {
    /// The record's configuration as given (the binary checks the directory).
    pub fn record(&self) -> RecordConfig {
        RecordConfig {
            results_dir: self.results_dir.clone(),
            caps: TestCaps {
                per_source_per_hour: self.browser_tests_per_hour,
                concurrent: self.browser_max_tests,
                max_duration: self.browser_max_duration,
                max_result_bytes: self.browser_max_result.0,
            },
        }
    }
}

impl ServerInvocation {
    /// `bloatlab server --port=PORT`: every other option at its flag's default (the
    /// server `demo` and `tune` start in a lab).
    pub fn on_port(port: u16) -> ServerInvocation {
        use clap::{Args, FromArgMatches};
        // Constant flags that a test below parses: these cannot fail.
        let cmd = ServerArgs::augment_args(clap::Command::new("server"));
        let m = cmd
            .try_get_matches_from(["server".to_owned(), format!("--port={port}")])
            .expect("--port alone parses");
        ServerArgs::from_arg_matches(&m)
            .ok()
            .and_then(|a| a.resolve(None).ok())
            .expect("--port alone resolves")
    }
}

/// The environment a child running [`to_argv`]`(s)` needs: the permit key in
/// [`PERMIT_KEY_ENV`] when `s` has one to give (`None`: the variable must be removed,
/// so the child does not take one it inherited). A request to generate a key
/// (`Some("")`) is the bare `--permit-key` flag on the command line instead.
pub fn child_env(s: &ServerInvocation) -> (&'static str, Option<&str>) {
    let key = s.engine.permit_key.as_deref().filter(|k| !k.is_empty());
    (PERMIT_KEY_ENV, key)
}

/// The `bloatlab server` command line (after the program name) whose
/// [`ServerArgs::resolve`], with [`child_env`]'s key, is `s` (its writers are the
/// child's own: stdout, stderr). Every limit and timeout is written, so the child does
/// not depend on the flags' defaults; values are in plain units. A permit key is never
/// written ([`child_env`] carries it): a command line is world-readable in
/// `/proc/PID/cmdline`.
pub fn to_argv(s: &ServerInvocation) -> Vec<String> {
    let mut a = super::engine_argv(&s.engine);
    let mut opt = |flag: &str, value: String| a.push(format!("{flag}={value}"));
    if let Some(h) = &s.http {
        if let Some(p) = h.http {
            opt("--http", p.to_string());
        }
        if let Some(t) = &h.https {
            opt("--https", t.port.to_string());
            if let Some(f) = &t.tls {
                opt("--tls-cert", f.cert.display().to_string());
                opt("--tls-key", f.key.display().to_string());
            }
        }
    }
    let d = &s.http_deadlines;
    opt("--handshake-timeout", secs(d.handshake_stall));
    opt("--http-header-timeout", secs(d.head_stall));
    opt("--http-wait-max", secs(d.wait_max));
    let b = &s.browser;
    if let Some(dir) = &b.results_dir {
        opt("--results-dir", dir.display().to_string());
    }
    opt(
        "--browser-tests-per-hour",
        b.caps.per_source_per_hour.to_string(),
    );
    opt("--browser-max-tests", b.caps.concurrent.to_string());
    opt("--browser-max-duration", secs(b.caps.max_duration));
    opt("--browser-max-result", b.caps.max_result_bytes.to_string());
    if s.engine.permit_key.as_deref() == Some("") {
        a.push("--permit-key".into());
    }
    let flags = [(!s.iperf, "--no-iperf"), (!s.probes, "--no-probes")];
    crate::push_switches(&mut a, &flags);
    a
}
