//! `bloatlab rpm URL`: responsiveness under working conditions the way
//! draft-ietf-ippm-responsiveness-09 measures it (docs/rpm.md). The algorithm is
//! `bloatlab_rpm`; this module maps flags to its options and prints its report.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use bloatlab_rpm::client::{self, ClientError, Mode, Options, Protocol, Report, Trust, Update};
use bloatlab_rpm::{Params, RunError};

use crate::exit;

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
    #[arg(long = "duration", value_parser = crate::cmd::opts::positive_seconds)]
    pub duration: Option<Duration>,
    /// Print the result as one JSON document on stdout (docs/rpm.md).
    #[arg(long = "json")]
    pub json: bool,
    /// Write a bloatlab results file (for `bloatlab report`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A bloatlab server's permit key, sent in the x-bloatlab-permit-key header. Or in
    /// $BLOATLAB_PERMIT_KEY, which keeps it out of the command line.
    #[arg(long = "permit-key", value_parser = crate::cmd::opts::permit_key)]
    pub permit_key: Option<String>,
}

/// A duration with a unit (ms, s); a bare number is seconds.
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
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

/// A percentage, `5` or `5%`, returned as a fraction.
fn percent(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 100.0 => Ok(v / 100.0),
        _ => Err(format!("`{s}` is not a percentage in (0, 100]")),
    }
}

/// `--trim P` (percent kept) as the fraction dropped, computed from the percentages so
/// that 95 gives exactly 0.05.
fn dropped_by_trim(s: &str) -> Result<f64, String> {
    let kept = percent(s)? * 100.0;
    Ok((100.0 - kept) / 100.0)
}

impl RpmArgs {
    fn options(&self, permit_key: Option<String>) -> anyhow::Result<Options> {
        let config_url = bloatlab_rpm::config::config_url(&self.url).map_err(exit::usage)?;
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
        params.validate().map_err(|e| exit::usage(e.to_string()))?;
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
                .map_err(|e| exit::usage(e.to_string()))?;
            Trust::Fingerprint(fp.clone())
        } else {
            Trust::System
        };
        let duration = self
            .duration
            .unwrap_or(Duration::from_secs(if mode == Mode::Sequential {
                120
            } else {
                60
            }));
        Ok(Options {
            config_url,
            params,
            mode,
            protocol: if self.h1 { Protocol::H1 } else { Protocol::H2 },
            trust,
            duration,
            permit_key,
            // Not 10 s: through a deep, lossy FIFO an upload's ACKs can stop for
            // over 10 s while its retransmission timer backs off (3.6, 7.2,
            // 14.4 s at a 1.3 s loaded RTT); seen in 4 of 9 lab runs (docs/rpm.md).
            stall_timeout: Duration::from_secs(30),
        })
    }
}

fn mbps(bps: u64) -> String {
    format!("{:.2} Mbit/s", bps as f64 / 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn ns_ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

/// A progress line.
fn progress_line(u: &Update) -> Option<String> {
    Some(match u {
        Update::Config { config, addr } => format!(
            "config: {} on {} ({})",
            config.large.authority().map_or("", |a| a.as_str()),
            addr,
            if config.tls { "https" } else { "http" }
        ),
        Update::Idle(i) => format!(
            "idle latency {} ({} GETs)",
            i.latency(0.05).map_or("-".into(), ms),
            i.gets.len()
        ),
        Update::Progress {
            run,
            elapsed,
            progress,
        } => {
            let dirs: Vec<String> = progress
                .directions
                .iter()
                .map(|d| {
                    format!(
                        "{} {} conns {}{}",
                        d.direction.name(),
                        d.connections,
                        d.goodput.map_or("-".into(), |g| mbps(g.0)),
                        if d.saturated { " (stable)" } else { "" }
                    )
                })
                .collect();
            format!(
                "{} {:>5.1} s: {}; {} probes; RPM {}",
                run.name(),
                elapsed.as_secs_f64(),
                dirs.join(", "),
                progress.probes,
                progress.rpm.map_or("-".into(), |r| format!("{r:.0}"))
            )
        }
        Update::RunDone { run, outcome } => format!(
            "{} run ended ({:?}) after {} intervals",
            run.name(),
            outcome.ended,
            outcome.intervals
        ),
    })
}

/// The report for people.
pub fn format_report(report: &Report, rec: &bloatlab_results::schema::RpmRecord) -> String {
    let mut out = format!(
        "bloatlab rpm {} ({}, {}{})\n",
        rec.config_url,
        rec.address,
        rec.protocol,
        rec.tls
            .as_deref()
            .map(|t| format!(", {t}"))
            .unwrap_or_default()
    );
    out += &format!(
        "mode: {}\n",
        match report.mode {
            Mode::Concurrent => "download and upload at once (concurrent)",
            Mode::Sequential => "download, then upload (sequential)",
            Mode::DownloadOnly => "download only",
            Mode::UploadOnly => "upload only",
        }
    );
    if let Some(i) = &rec.idle {
        out += &format!(
            "idle latency:        {:>11} ms ({} GETs on an idle connection; {} RPM)\n",
            ns_ms(i.latency_ns),
            i.samples,
            i.rpm.map_or("-".into(), |r| format!("{r:.0}"))
        );
    }
    for (label, c) in [("download", &rec.download), ("upload", &rec.upload)] {
        if let Some(c) = c {
            out += &format!(
                "{:<21}{:>15}  confidence {} ({} connections)\n",
                format!("{label} capacity:"),
                mbps(c.capacity_bps),
                c.confidence,
                c.connections
            );
        }
    }
    for r in &rec.responsiveness {
        let label = if rec.responsiveness.len() > 1 {
            format!("{} responsiveness", r.run)
        } else {
            "responsiveness".to_owned()
        };
        match (r.rpm, &r.band) {
            (Some(rpm), Some(band)) => {
                out += &format!(
                    "{label}: {rpm:.0} RPM ({band}), confidence {}   P90: {} RPM ({})\n",
                    r.confidence,
                    r.p90_rpm.map_or("-".into(), |p| format!("{p:.0}")),
                    r.p90_band.as_deref().unwrap_or("-")
                );
            }
            _ => {
                out += &format!(
                    "{label}: not measured (no foreign and self probe completed), confidence {}\n",
                    r.confidence
                );
            }
        }
        for (what, parts) in [("trimmed means (ms):", &r.trimmed), ("P90 (ms):", &r.p90)] {
            if let Some(t) = parts {
                out += &format!(
                    "  {what:<20}tcp_f {}  tls_f {}  http_f {}  http_l {}\n",
                    ns_ms(t.tcp_f_ns),
                    t.tls_f_ns.map_or("-".into(), ns_ms),
                    ns_ms(t.http_f_ns),
                    ns_ms(t.http_l_ns)
                );
            }
        }
        if let (Some(f), Some(l)) = (r.foreign_rpm, r.loaded_rpm) {
            out += &format!(
                "  foreign {f:.0} RPM, loaded {l:.0} RPM; samples tcp_f {} tls_f {} http_f {} http_l {}; failed probes {}; ended {} after {} intervals\n",
                r.samples.tcp_f,
                r.samples.tls_f,
                r.samples.http_f,
                r.samples.http_l,
                r.failed_probes.foreign + r.failed_probes.self_probes,
                r.ended,
                r.intervals
            );
        }
    }
    out
}

fn map_error(e: ClientError) -> anyhow::Error {
    match e {
        ClientError::Usage(m) => exit::usage(m),
        ClientError::TlsSetup(e) => exit::usage(e.to_string()),
        e @ ClientError::Run(
            _,
            RunError::LoadStalled { .. }
            | RunError::LoadFailed { .. }
            | RunError::LoadNotStarted { .. },
        ) => anyhow::Error::new(exit::Exit {
            code: exit::FAILURE,
            message: format!("{e} (the draft ends a test whose load connection fails)"),
        }),
        e => anyhow::Error::new(exit::Exit {
            code: exit::FAILURE,
            message: e.to_string(),
        }),
    }
}

/// Runs `bloatlab rpm`.
pub fn run(args: RpmArgs) -> anyhow::Result<()> {
    let permit_key = match &args.permit_key {
        Some(k) => Some(k.clone()),
        None => crate::cmd::opts::permit_key_env()?,
    };
    let opts = args.options(permit_key)?;
    let lab = crate::cmd::inlab::InLab::start()?;
    let lab_ctx = bloatlab_suite::lab::LabContext::from_env();
    let mut watch = match lab_ctx {
        Some(ctx) => Some(
            bloatlab_suite::lab::LabWatch::start(ctx, unix_now())
                .context("reading the lab this runs in")?,
        ),
        None => None,
    };
    if let Some(w) = &mut watch {
        w.set_origin(unix_now());
    }
    let stop = crate::cmd::stop_on_interrupt()?;
    let tty = std::io::stderr().is_terminal();
    let t0 = Instant::now();
    let mut last_intervals = usize::MAX;
    let result = client::run(&opts, stop.flag(), |u| {
        if let Some(w) = &mut watch {
            w.tick(t0.elapsed());
        }
        // Plain lines off a terminal: one per interval, not one per second.
        if let Update::Progress { progress, .. } = &u {
            if !tty && progress.intervals == last_intervals {
                return;
            }
            last_intervals = progress.intervals;
        }
        if let Some(line) = progress_line(&u) {
            let mut err = std::io::stderr().lock();
            if tty {
                let _ = write!(err, "\r\x1b[2K{line}");
                if !matches!(u, Update::Progress { .. }) {
                    let _ = writeln!(err);
                }
            } else {
                let _ = writeln!(err, "{line}");
            }
        }
    });
    if tty {
        eprintln!();
    }
    let report = result.map_err(map_error)?;
    let rec = bloatlab_rpm::results::record(&report, opts.stall_timeout);
    if let Some(path) = &args.output {
        let mut file = bloatlab_rpm::results::results_file(
            &report,
            opts.stall_timeout,
            std::env::args().collect(),
        )
        .context("building the results file")?;
        if let Some(w) = &mut watch {
            w.finish();
            let timeline = file.raw.timeline().context("the run's phases")?;
            let mut per_phase = Vec::new();
            for ph in timeline.phases() {
                for dir in ["up", "down"] {
                    per_phase.extend(w.phase(ph, dir));
                }
            }
            let link = w.link_record();
            file.metadata.qdisc.extend(
                [&link.up, &link.down]
                    .into_iter()
                    .filter_map(|d| d.qdisc.clone()),
            );
            file.metadata.link = Some(link);
            file.metadata.lab = Some(w.record(per_phase));
        }
        bloatlab_results::save(path, &file)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let v = bloatlab_rpm::results::json_document(&rec).context("serialising the result")?;
        println!(
            "{}",
            serde_json::to_string(&v).context("serialising the result")?
        );
    } else {
        print!("{}", format_report(&report, &rec));
    }
    lab.check()?;
    Ok(())
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: RpmArgs,
    }

    fn parse(argv: &[&str]) -> Result<RpmArgs, String> {
        Cli::try_parse_from(std::iter::once("rpm").chain(argv.iter().copied()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_drafts_parameters() {
        let a = parse(&["nq.example"]).unwrap();
        let o = a.options(None).unwrap();
        assert_eq!(o.params, Params::default());
        assert_eq!(o.mode, Mode::Concurrent);
        assert_eq!(o.protocol, Protocol::H2);
        assert_eq!(o.trust, Trust::System);
        assert_eq!(o.duration, Duration::from_secs(60));
        assert_eq!(o.config_url, "https://nq.example/.well-known/nq");
    }

    #[test]
    fn each_parameter_flag_sets_its_parameter() {
        let a = parse(&[
            "https://h:8443/.well-known/nq",
            "--mad",
            "6",
            "--interval",
            "1s",
            "--trim",
            "90",
            "--stdev-tolerance",
            "10%",
            "--max-connections",
            "8",
            "--max-probes",
            "50",
            "--probe-capacity",
            "2",
            "--sequential",
            "--h1",
            "--insecure",
        ])
        .unwrap();
        let o = a.options(None).unwrap();
        let p = o.params;
        assert_eq!(p.mad, 6);
        assert_eq!(p.interval, Duration::from_secs(1));
        assert!((p.trim - 0.10).abs() < 1e-12);
        assert!((p.stdev_tolerance - 0.10).abs() < 1e-12);
        assert_eq!(p.max_connections, 8);
        assert_eq!(p.max_probes_per_second, 50);
        assert!((p.probe_capacity - 0.02).abs() < 1e-12);
        assert_eq!(o.mode, Mode::Sequential);
        assert_eq!(o.duration, Duration::from_secs(120));
        assert_eq!(o.protocol, Protocol::H1);
        assert_eq!(o.trust, Trust::Insecure);
        assert_eq!(
            parse(&["h", "--interval", "500ms"]).unwrap().interval,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn conflicting_and_bad_values_are_refused() {
        assert!(parse(&["h", "--sequential", "--upload-only"]).is_err());
        assert!(parse(&["h", "--insecure", "--ca", "x.pem"]).is_err());
        assert!(parse(&["h", "--mad", "1"]).is_err());
        assert!(parse(&["h", "--trim", "0"]).is_err());
        assert!(parse(&["h", "--probe-capacity", "101"]).is_err());
        assert!(parse(&["h", "--interval", "fast"]).is_err());
        assert!(parse(&["h", "--max-connections", "0"]).is_err());
        // TMP 40 % keeps less than half: refused by the range check.
        let e = parse(&["h", "--trim", "40"])
            .unwrap()
            .options(None)
            .unwrap_err();
        assert!(e.to_string().contains("TMP"), "{e}");
        let e = parse(&["h", "--fingerprint", "AB:CD"])
            .unwrap()
            .options(None)
            .unwrap_err();
        assert!(e.to_string().contains("SHA-256"), "{e}");
        let e = parse(&["ftp://h/"]).unwrap().options(None).unwrap_err();
        assert!(e.to_string().contains("http"), "{e}");
    }
}
