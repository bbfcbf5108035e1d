//! RPM peers no one here wrote, for the interop tests of issue 20:
//!
//! * [`run_mach`]: Cloudflare's client (`mach rpm`, crate cf-mach, built by
//!   scripts/setup.sh into /opt/bloatlab-peers), its JSON report parsed into
//!   [`MachReport`]. It is always given `--config URL` (so it never falls back
//!   to Cloudflare's default URLs), `--disable-aim-scores` (so it uploads no
//!   report to Cloudflare's AIM database) and `--insecure` (our self-signed
//!   certificates).
//! * [`Nginx`]: Debian's nginx configured as network-quality/server's nginx
//!   example (HTTP/2 over TLS, `/files/large`, `/files/small`, `/slurp`, the
//!   config at `/.well-known/nq` and `/config`), in a lab host's namespace,
//!   with its own prefix, certificate and pid file, always stopped by PID.
//!
//! Both are what the comparison with our own client (`bloatlab rpm`, within
//! 15 % RPM and 10 % capacity on the same link) builds on.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use super::lab::LabGuard;
use super::{Proc, openssl_self_signed, stderr, stdout, tempdir, wait_until};

/// Where scripts/setup.sh installs mach (`$BLOATLAB_MACH` overrides).
pub const MACH_DEFAULT: &str = "/opt/bloatlab-peers/bin/mach";

/// The mach binary; panics with the install hint when it is missing.
pub fn mach_bin() -> String {
    let path = std::env::var("BLOATLAB_MACH").unwrap_or_else(|_| MACH_DEFAULT.to_string());
    assert!(
        Path::new(&path).is_file(),
        "mach not found at {path}: run scripts/setup.sh (cargo install cf-mach --root /opt/bloatlab-peers)"
    );
    path
}

/// One direction of a mach report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MachLeg {
    /// mach's capacity: the 90th percentile of its moving-average goodput.
    pub throughput_bps: f64,
    /// Median of its self probes (a 1-byte GET on a loaded connection).
    pub loaded_latency_ms: f64,
    pub rpm: f64,
    /// Load-generating connections that failed (absent in the JSON when 0).
    pub failed_connections: u64,
}

/// `mach rpm`'s JSON: idle latency, then the download and the upload legs
/// (mach runs them one after the other).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MachReport {
    pub unloaded_latency_ms: f64,
    pub download: MachLeg,
    pub upload: MachLeg,
}

/// Parses the JSON `mach rpm` prints on stdout.
pub fn parse_mach(json: &str) -> Result<MachReport, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("mach JSON: {e}: {json}"))?;
    let num = |v: &serde_json::Value, key: &str| {
        v[key]
            .as_f64()
            .ok_or_else(|| format!("mach JSON has no number {key}: {v}"))
    };
    let leg = |name: &str| -> Result<MachLeg, String> {
        let l = &v[name];
        Ok(MachLeg {
            throughput_bps: num(l, "throughput")?,
            loaded_latency_ms: num(l, "loaded_latency_ms")?,
            rpm: num(l, "rpm")?,
            failed_connections: l["failed_connections"].as_u64().unwrap_or(0),
        })
    };
    Ok(MachReport {
        unloaded_latency_ms: num(&v, "unloaded_latency_ms")?,
        download: leg("download")?,
        upload: leg("upload")?,
    })
}

/// What mach 0.4.0 prints when no 4-s window of a leg held a complete set of
/// its serial probes (report.rs): through a queue of most of a second, each
/// probe takes longer than a window, so a leg can end with no RPM at all.
/// That is mach sampling too little, not the server failing; it happened
/// against nginx and against ours alike (once in a CI run through the deep
/// FIFO).
const MACH_NO_SAMPLE: &str = "no rpm measurements";

/// How often [`run_mach`] runs mach when it ends with [`MACH_NO_SAMPLE`].
const MACH_ATTEMPTS: usize = 3;

/// Runs `mach rpm --config CONFIG_URL` on `host` of `lab` (two minutes at
/// most per run), asserts it succeeded and returns its report and stderr.
/// A run that ends only because mach sampled no RPM ([`MACH_NO_SAMPLE`]) is
/// run again, up to [`MACH_ATTEMPTS`] runs, and each such run is printed;
/// any other failure fails at once.
pub fn run_mach(lab: &LabGuard, host: &str, config_url: &str) -> (MachReport, String) {
    let mach = mach_bin();
    let mut attempt = 1;
    loop {
        let o: Output = lab.exec(
            host,
            &[
                "timeout",
                "120",
                &mach,
                "rpm",
                "--config",
                config_url,
                "--insecure",
                "--disable-aim-scores",
            ],
        );
        let (out, err) = (stdout(&o), stderr(&o));
        if !o.status.success() && err.contains(MACH_NO_SAMPLE) && attempt < MACH_ATTEMPTS {
            eprintln!(
                "mach run {attempt} of {MACH_ATTEMPTS} against {config_url} sampled no RPM \
                 (mach's serial probes, not a server fault); running it again:\n{err}"
            );
            attempt += 1;
            continue;
        }
        assert!(
            o.status.success(),
            "mach rpm --config {config_url} failed ({}, run {attempt} of at most \
             {MACH_ATTEMPTS}):\n{out}{err}",
            o.status
        );
        let report = parse_mach(&out).unwrap_or_else(|e| panic!("{e}\n{err}"));
        return (report, err);
    }
}

/// Debian's nginx serving network-quality/server's nginx example in a lab
/// host. Dropping it stops nginx (master by PID, then any worker left by
/// PID) and removes its directory.
pub struct Nginx {
    /// `https://IP:PORT/.well-known/nq`.
    pub config_url: String,
    proc: Option<Proc>,
    workers: Vec<u32>,
    _dir: tempfile::TempDir,
}

/// network-quality/server's nginx/conf/nginx.conf, with what a test needs
/// changed: its own prefix, pid file, logs and temp paths, a self-signed
/// certificate, one listen address, no OCSP stapling (it would reach out),
/// and an upload sink inside nginx (the example proxies `/slurp` to a Go or
/// Swift helper; here the echo module reads the body to its end and
/// answers, so the client is never cut short).
fn nginx_conf(dir: &Path, listen: &str) -> String {
    let d = dir.display();
    format!(
        "load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
worker_processes 2;
worker_rlimit_nofile 16384;
pid {d}/nginx.pid;
error_log {d}/logs/error.log;
events {{ worker_connections 4096; multi_accept off; accept_mutex off; }}
http {{
    types {{ application/json json; }}
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65;
    output_buffers 2 128k;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    server {{
        listen {listen} ssl http2 reuseport;
        server_tokens off;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        ssl_session_cache shared:SSL:1m;
        ssl_session_timeout 5m;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers HIGH:AES-128:!aNULL:!MD5;
        ssl_prefer_server_ciphers on;
        location /files/large {{ root {d}/root; }}
        location /files/small {{ root {d}/root; }}
        location /slurp {{
            client_max_body_size 0;
            client_body_buffer_size 1m;
            echo_read_request_body;
            echo ok;
        }}
        location /config {{ alias {d}/root/config; default_type application/json; }}
        location /.well-known/nq {{ alias {d}/root/config; default_type application/json; }}
    }}
}}
"
    )
}

/// The config the example serves (nginx/root/config), for `authority`.
fn nq_config(authority: &str) -> String {
    let u = |path: &str| format!("https://{authority}{path}");
    serde_json::json!({
        "version": 1,
        "urls": {
            "small_https_download_url": u("/files/small"),
            "large_https_download_url": u("/files/large"),
            "https_upload_url": u("/slurp"),
            "small_download_url": u("/files/small"),
            "large_download_url": u("/files/large"),
            "upload_url": u("/slurp"),
        }
    })
    .to_string()
}

impl Nginx {
    /// Starts nginx on `host` of `lab`, listening on `ip:port`; returns once
    /// it serves its config (checked with curl from inside the host).
    pub fn start_in_lab(lab: &LabGuard, host: &str, ip: &str, port: u16) -> Nginx {
        let dir = tempdir();
        let d = &dir.path().to_path_buf();
        // nginx's workers run as nobody: the tree must be readable by them.
        let mode = |p: &Path, m: u32| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        };
        mode(d, 0o755);
        for sub in ["root/files", "logs", "tmp"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let san = format!("subjectAltName=IP:{ip}");
        openssl_self_signed(
            &d.join("cert.pem"),
            &d.join("key.pem"),
            "/CN=nq.bloatlab.test",
            &["-addext", &san],
        );
        mode(&d.join("key.pem"), 0o644);
        // The example's large object is 4 GiB of 'x'; a sparse 64 GiB file of
        // zeros costs no disk and outlasts any run.
        let large = std::fs::File::create(d.join("root/files/large")).unwrap();
        large.set_len(64 << 30).unwrap();
        std::fs::write(d.join("root/files/small"), "x").unwrap();
        let authority = format!("{ip}:{port}");
        std::fs::write(d.join("root/config"), nq_config(&authority)).unwrap();
        let conf = d.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(d, &authority)).unwrap();
        let prefix = d.display().to_string();
        let conf_s = conf.display().to_string();
        let proc = lab.bg(
            host,
            &["nginx", "-p", &prefix, "-c", &conf_s, "-g", "daemon off;"],
        );
        let config_url = format!("https://{authority}/.well-known/nq");
        let mut n = Nginx {
            config_url: config_url.clone(),
            proc: Some(proc),
            workers: Vec::new(),
            _dir: dir,
        };
        let ready = wait_until(Duration::from_secs(20), || {
            let o = lab.exec(host, &["curl", "-sk", "--max-time", "2", &config_url]);
            stdout(&o).contains("large_download_url")
        });
        let errors =
            std::fs::read_to_string(n._dir.path().join("logs/error.log")).unwrap_or_default();
        assert!(
            ready,
            "nginx never served {config_url}\n{}\nerror.log:\n{errors}",
            n.proc.as_ref().map(Proc::transcript).unwrap_or_default()
        );
        n.workers = children(n.master());
        n
    }

    fn master(&self) -> u32 {
        self.proc.as_ref().map_or(0, Proc::pid)
    }
}

/// The PIDs of `pid`'s children (nginx's workers).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Alive and still the process we think (not a reused PID; a zombie's
/// cmdline is empty, so an exited worker not yet reaped counts as gone).
fn is_nginx(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"nginx"))
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let master = self.master();
        // SIGTERM is nginx's fast shutdown: the master ends its workers and
        // removes its pid file. `lab exec` became nginx, so the PID we
        // started is the master.
        if master != 0 && is_nginx(master) {
            let _ = bloatlab_os::process::signal(master, libc::SIGTERM);
        }
        let t0 = Instant::now();
        let pids: Vec<u32> = std::iter::once(master)
            .chain(self.workers.iter().copied())
            .collect();
        while t0.elapsed() < Duration::from_secs(5) && pids.iter().any(|&p| is_nginx(p)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        // Anything left is killed by PID; the Proc guard then reaps the master.
        for &p in &self.workers {
            if is_nginx(p) {
                let _ = bloatlab_os::process::signal(p, libc::SIGKILL);
            }
        }
        drop(self.proc.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mach_report_is_parsed_with_and_without_failed_connections() {
        // The shape cf-mach 0.4.0 prints (src/report.rs).
        let json = r#"{
  "unloaded_latency_ms": 81.2,
  "jitter_ms": 0.4,
  "download": {"throughput": 19000000, "loaded_latency_ms": 650.5, "rpm": 95},
  "upload": {"throughput": 18500000, "loaded_latency_ms": 700.0, "rpm": 90, "failed_connections": 2}
}"#;
        let r = parse_mach(json).unwrap();
        assert_eq!(r.unloaded_latency_ms, 81.2);
        assert_eq!(r.download.throughput_bps, 19e6);
        assert_eq!(r.download.failed_connections, 0);
        assert_eq!(r.upload.rpm, 90.0);
        assert_eq!(r.upload.failed_connections, 2);
        assert!(parse_mach(r#"{"unloaded_latency_ms": 1}"#).is_err());
        assert!(parse_mach("not json").is_err());
    }

    #[test]
    fn nginx_config_is_the_examples_layout_on_our_address() {
        let v: serde_json::Value = serde_json::from_str(&nq_config("10.77.0.2:8443")).unwrap();
        assert_eq!(
            v["urls"]["large_download_url"],
            "https://10.77.0.2:8443/files/large"
        );
        assert_eq!(v["urls"]["upload_url"], "https://10.77.0.2:8443/slurp");
        let conf = nginx_conf(Path::new("/tmp/x"), "10.77.0.2:8443");
        assert!(conf.contains("listen 10.77.0.2:8443 ssl http2"));
        assert!(!conf.contains("ssl_stapling"), "stapling would reach out");
    }
}
