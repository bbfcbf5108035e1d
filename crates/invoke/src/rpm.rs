//! `bloatlab rpm URL`: the flags of the draft's responsiveness client
//! (draft-ietf-ippm-responsiveness-09), [`RpmArgs::resolve`]d into an [`RpmConfig`]
//! (the `bloatlab_rpm` client's [`Options`] and where the result goes), and
//! [`to_argv`] back.

use crate::client::secs;
use crate::{UsageError, decimal, opts};
use bloatlab_rpm::Params;
use bloatlab_rpm::client::{Mode, Options, Protocol, Trust};
use std::path::PathBuf;
use std::time::Duration;

/// How long a load connection that moves nothing may last before it fails the run.
/// Not 10 s: through a deep, lossy FIFO an upload's ACKs can stop for over 10 s while
/// its retransmission timer backs off (3.6, 7.2, 14.4 s at a 1.3 s loaded RTT); seen in
/// 4 of 9 lab runs (docs/rpm.md).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Arguments of `bloatlab rpm`.
#[derive(Debug, clap::Args)]
pub struct RpmArgs {
    /// The server's config URL (https://HOST:PORT/.well-known/nq), or a host (then
    /// https://HOST/.well-known/nq).
    pub url: String,
    /// MAD: intervals in each moving average and stability window (draft section 5.2).
    #[arg(long = "mad", default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=100))]
    pub mad: u16,
    /// ID: interval at which stability is re-evaluated, e.g. 5s, 1s, 500ms (draft-09
    /// default 5 s; networkQuality, goresponsiveness and mach use 1 s).
    #[arg(long = "interval", default_value = "5s", value_parser = duration)]
    pub interval: Duration,
    /// TMP: percentage of each kind's samples the trimmed mean keeps (the largest rest
    /// is dropped).
    #[arg(long = "trim", default_value = "95", value_parser = dropped_by_trim)]
    pub trim: f64,
    /// SDT: stable when the standard deviation of the last MAD values is below this
    /// percentage of the current one.
    #[arg(long = "stdev-tolerance", default_value = "5", value_parser = percent)]
    pub stdev_tolerance: f64,
    /// MNP: most load-generating connections per direction.
    #[arg(long = "max-connections", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub max_connections: u16,
    /// MPS: most probes per second (foreign and self together).
    #[arg(long = "max-probes", default_value_t = 100, value_parser = clap::value_parser!(u32).range(2..=10000))]
    pub max_probes: u32,
    /// PTC: most percentage of the measured capacity the probes may use.
    #[arg(long = "probe-capacity", default_value = "5", value_parser = percent)]
    pub probe_capacity: f64,
    /// Download, then upload, each with its own responsiveness (default: both at once).
    #[arg(long = "sequential", group = "directions")]
    pub sequential: bool,
    /// Only the download.
    #[arg(long = "download-only", group = "directions")]
    pub download_only: bool,
    /// Only the upload.
    #[arg(long = "upload-only", group = "directions")]
    pub upload_only: bool,
    /// HTTP/1.1 instead of HTTP/2 (self probes then read the load connection's TCP RTT).
    #[arg(long = "h1")]
    pub h1: bool,
    /// Accept any certificate.
    #[arg(long = "insecure", group = "trust")]
    pub insecure: bool,
    /// Trust only the CA certificates in this PEM file (a self-signed server's
    /// certificate works).
    #[arg(long = "ca", value_name = "FILE", group = "trust")]
    pub ca: Option<PathBuf>,
    /// Trust exactly the certificate with this SHA-256 fingerprint (as `bloatlab
    /// server --https` prints it: AB:CD:...).
    #[arg(long = "fingerprint", value_name = "SHA256", group = "trust")]
    pub fingerprint: Option<String>,
    /// Upper bound of the whole test, e.g. 90 or 90s (default 60 s; 120 s with --sequential).
    #[arg(long = "duration", value_parser = opts::positive_seconds)]
    pub duration: Option<Duration>,
    /// Print the result as one JSON document on stdout (docs/rpm.md).
    #[arg(long = "json")]
    pub json: bool,
    /// Write a bloatlab results file (for `bloatlab report`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A bloatlab server's permit key, sent in the x-bloatlab-permit-key header. Or in
    /// $BLOATLAB_PERMIT_KEY, which keeps it out of the command line.
    #[arg(long = "permit-key", value_parser = opts::permit_key)]
    pub permit_key: Option<String>,
}

/// A responsiveness run: the client's options and where its result goes.
#[derive(Debug, Clone, PartialEq)]
pub struct RpmConfig {
    /// What `bloatlab_rpm::client::run` takes.
    pub options: Options,
    /// Print the result as JSON instead of the report.
    pub json: bool,
    /// Write a results file here.
    pub output: Option<PathBuf>,
}

/// The session's upper bound when `--duration` is not given.
pub fn default_duration(mode: Mode) -> Duration {
    Duration::from_secs(if mode == Mode::Sequential { 120 } else { 60 })
}

impl RpmArgs {
    /// Does this command line read the key from [`opts::PERMIT_KEY_ENV`] (no
    /// `--permit-key`).
    pub fn wants_env_key(&self) -> bool {
        self.permit_key.is_none()
    }

    /// Resolves the arguments: the config URL, the draft's parameters (checked by
    /// [`Params::validate`]) and the trust. `env_key` is the checked key from
    /// [`opts::PERMIT_KEY_ENV`], used when `--permit-key` is absent.
    pub fn resolve(&self, env_key: Option<String>) -> Result<RpmConfig, UsageError> {
        let config_url = bloatlab_rpm::config::config_url(&self.url).map_err(UsageError::new)?;
        let params = Params {
            mad: usize::from(self.mad),
            interval: self.interval,
            trim: self.trim,
            stdev_tolerance: self.stdev_tolerance,
            max_connections: usize::from(self.max_connections),
            max_probes_per_second: self.max_probes,
            probe_capacity: self.probe_capacity,
            ..Params::default()
        };
        params
            .validate()
            .map_err(|e| UsageError::new(e.to_string()))?;
        let mode = if self.sequential {
            Mode::Sequential
        } else if self.download_only {
            Mode::DownloadOnly
        } else if self.upload_only {
            Mode::UploadOnly
        } else {
            Mode::Concurrent
        };
        let trust = if self.insecure {
            Trust::Insecure
        } else if let Some(ca) = &self.ca {
            Trust::Ca(ca.clone())
        } else if let Some(fp) = &self.fingerprint {
            bloatlab_rpm::client::tls::normalize_fingerprint(fp)
                .map_err(|e| UsageError::new(e.to_string()))?;
            Trust::Fingerprint(fp.clone())
        } else {
            Trust::System
        };
        let options = Options {
            config_url,
            params,
            mode,
            protocol: if self.h1 { Protocol::H1 } else { Protocol::H2 },
            trust,
            duration: self.duration.unwrap_or(default_duration(mode)),
            permit_key: self
                .permit_key
                .clone()
                .or(env_key.filter(|_| self.wants_env_key())),
            stall_timeout: STALL_TIMEOUT,
        };
        Ok(RpmConfig {
            options,
            json: self.json,
            output: self.output.clone(),
        })
    }
}

/// The `bloatlab rpm` command line (after the program name) that resolves to `c`.
///
/// The key is never written (a parent passes it in [`opts::PERMIT_KEY_ENV`]);
/// the stall timeout has no flag; options at their defaults are left out.
pub fn to_argv(c: &RpmConfig) -> Vec<String> {
    let o = &c.options;
    let mut a = vec!["rpm".to_owned(), o.config_url.to_string()];
    let mut opt = |flag: &str, value: String| a.extend([flag.to_owned(), value]);
    let (p, d) = (&o.params, Params::default());
    if p.mad != d.mad {
        opt("--mad", p.mad.to_string());
    }
    if p.interval != d.interval {
        opt("--interval", format!("{}s", secs(p.interval)));
    }
    if p.trim != d.trim {
        opt("--trim", decimal::to_rest_percent(p.trim));
    }
    if p.stdev_tolerance != d.stdev_tolerance {
        opt("--stdev-tolerance", decimal::to_percent(p.stdev_tolerance));
    }
    if p.max_connections != d.max_connections {
        opt("--max-connections", p.max_connections.to_string());
    }
    if p.max_probes_per_second != d.max_probes_per_second {
        opt("--max-probes", p.max_probes_per_second.to_string());
    }
    if p.probe_capacity != d.probe_capacity {
        opt("--probe-capacity", decimal::to_percent(p.probe_capacity));
    }
    match &o.trust {
        Trust::System | Trust::Insecure => {}
        Trust::Ca(f) => opt("--ca", f.display().to_string()),
        Trust::Fingerprint(f) => opt("--fingerprint", f.clone()),
    }
    if o.duration != default_duration(o.mode) {
        opt("--duration", secs(o.duration));
    }
    if let Some(f) = &c.output {
        opt("-o", f.display().to_string());
    }
    let mode = match o.mode {
        Mode::Concurrent => None,
        Mode::Sequential => Some("--sequential"),
        Mode::DownloadOnly => Some("--download-only"),
        Mode::UploadOnly => Some("--upload-only"),
    };
    let flags = [
        (o.trust == Trust::Insecure, "--insecure"),
        (o.protocol == Protocol::H1, "--h1"),
        (c.json, "--json"),
    ];
    a.extend(mode.map(str::to_owned));
    crate::push_switches(&mut a, &flags);
    a
}

/// `--interval`: a duration with a unit (ms, s), more than 0 and at most an hour; a
/// bare number is seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 5s, 1s, 500ms)"))?;
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(format!("`{s}` must be more than 0 and at most 1 hour"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A percentage in (0, 100], `5` or `5%`, returned as a fraction.
pub fn percent(s: &str) -> Result<f64, String> {
    match decimal::percent_as_fraction(s.trim().trim_end_matches('%')) {
        Some(v) if v.is_finite() && v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("`{s}` is not a percentage in (0, 100]")),
    }
}

/// `--trim P` (percent kept) as the fraction dropped, computed from the decimal
/// percentage so that 95 gives exactly 0.05.
pub fn dropped_by_trim(s: &str) -> Result<f64, String> {
    percent(s)?;
    decimal::rest_as_fraction(s.trim().trim_end_matches('%'))
        .ok_or_else(|| format!("`{s}` is not a percentage in (0, 100]"))
}

#[cfg(test)]
mod tests;
