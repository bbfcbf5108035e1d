//! `bloatlab server --http PORT / --https PORT`: wires the server's flags to
//! the HTTP test service (crate `bloatlab-http`) and tells the operator
//! where it listens and which certificate it serves.

use bloatlab_engine::config::{OutputFormat, ServerConfig};
use bloatlab_http::{Caps, HttpConfig, Service, TlsSource};
use bloatlab_invoke::server::ServerInvocation;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Starts the HTTP service when --http or --https is given.
pub fn start(server: &ServerInvocation) -> anyhow::Result<Option<Service>> {
    let Some(h) = &server.http else {
        return Ok(None);
    };
    let cfg = &server.engine;
    let ip = listen_ip(cfg);
    let tls = match h.https.as_ref().and_then(|s| s.tls.as_ref()) {
        Some(f) => TlsSource::Files {
            cert: f.cert.clone(),
            key: f.key.clone(),
        },
        None => TlsSource::SelfSigned {
            names: self_signed_names(ip),
        },
    };
    let service = bloatlab_http::start(HttpConfig {
        http: h.http.map(|p| SocketAddr::new(ip, p)),
        https: h.https.as_ref().map(|s| SocketAddr::new(ip, s.port)),
        tls,
        caps: Caps {
            max_connections: cfg.max_connections,
            max_per_source: cfg.max_per_source,
            max_duration: cfg.limits.max_duration,
            idle_timeout: cfg.idle_timeout,
            // Not cfg.header_timeout: the iperf header's 4 s would cut TLS
            // handshakes through the loaded links RPM measures (docs/http.md).
            deadlines: server.http_deadlines,
            download_rate: cfg.limits.send_budget(),
            upload_rate: cfg.limits.receive_budget(),
            max_bytes: cfg.limits.max_bytes,
        },
        permit_key: cfg.permit_key.clone(),
        records: super::server_browser::record_config(&server.browser)?,
    })?;
    let mut lines = Vec::new();
    if let Some(a) = service.http_addr {
        lines.push(format!(
            "HTTP (RPM) service listening on http://{a}/.well-known/nq"
        ));
    }
    if let Some(a) = service.https_addr {
        lines.push(format!(
            "HTTPS (RPM) service listening on https://{a}/.well-known/nq"
        ));
    }
    for (scheme, addr) in [("http", service.http_addr), ("https", service.https_addr)] {
        if let Some(a) = addr {
            lines.push(format!(
                "Browser bufferbloat test page: {}",
                page_url(scheme, a, cfg.permit_key.is_some())
            ));
        }
    }
    if let Some(fp) = &service.fingerprint {
        let kind = if service.self_signed {
            "self-signed"
        } else {
            "from --tls-cert"
        };
        lines.push(format!(
            "HTTPS certificate ({kind}) SHA-256 fingerprint {fp}"
        ));
    }
    if let Some(dir) = &server.browser.results_dir {
        lines.push(format!(
            "Browser test results are kept in {} (shown at /result/ID)",
            dir.display()
        ));
    }
    if cfg.permit_key.is_some() {
        lines.push(
            "HTTP requests need the permit key (header x-bloatlab-permit-key or ?key=)".into(),
        );
    }
    for line in lines {
        // Like the permit key line: stdout stays JSON/CSV-only otherwise.
        if cfg.format == OutputFormat::Console {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    }
    Ok(Some(service))
}

/// Serves `--no-iperf` until SIGINT or SIGTERM, then prints what the service
/// did (its statistics line) where the listen lines went, and stops it.
pub fn serve_until_interrupted(service: Service, cfg: &ServerConfig) -> anyhow::Result<()> {
    let stop = super::stop_on_interrupt()?;
    while !stop.is_stopped() && service.is_running() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let line = service.stats().to_string();
    if cfg.format == OutputFormat::Console {
        println!("{line}");
    } else {
        eprintln!("{line}");
    }
    anyhow::ensure!(stop.is_stopped(), "the HTTP service stopped on its own");
    Ok(())
}

/// The test page's URL on `addr` as a user would type it: a wildcard
/// address becomes this host's name (or `localhost`), and with a permit key
/// the URL shows where the key goes (the key itself is not printed).
fn page_url(scheme: &str, addr: SocketAddr, keyed: bool) -> String {
    let host = if addr.ip().is_unspecified() {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into())
    } else {
        match addr.ip() {
            IpAddr::V6(v6) => format!("[{v6}]"),
            IpAddr::V4(v4) => v4.to_string(),
        }
    };
    let key = if keyed { "?key=PERMIT_KEY" } else { "" };
    format!("{scheme}://{host}:{}/{key}", addr.port())
}

/// The address the iperf service would bind (-B, -V), without its port.
fn listen_ip(cfg: &ServerConfig) -> IpAddr {
    match cfg.socket.bind {
        Some(b) => b.ip(),
        None if cfg.socket.ipv6 => Ipv6Addr::UNSPECIFIED.into(),
        None => Ipv4Addr::UNSPECIFIED.into(),
    }
}

/// Names a self-signed certificate covers: loopback, the bound address and
/// this host's name. Clients pin it by fingerprint or skip verification.
fn self_signed_names(ip: IpAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if !ip.is_unspecified() && !ip.is_loopback() {
        names.push(ip.to_string());
    }
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let h = h.trim();
        if !h.is_empty() && h != "localhost" {
            names.push(h.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_url_names_the_bound_address_and_the_keys_place() {
        let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(page_url("http", a, false), "http://127.0.0.1:8080/");
        let a: SocketAddr = "[::1]:8443".parse().unwrap();
        assert_eq!(
            page_url("https", a, true),
            "https://[::1]:8443/?key=PERMIT_KEY"
        );
        let a: SocketAddr = "0.0.0.0:80".parse().unwrap();
        let u = page_url("http", a, false);
        assert!(u.starts_with("http://") && u.ends_with(":80/"), "{u}");
        assert!(!u.contains("0.0.0.0"), "{u}");
    }
}
