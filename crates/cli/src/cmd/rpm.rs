//! `bloatlab rpm URL`: responsiveness under working conditions the way
//! draft-ietf-ippm-responsiveness-09 measures it (docs/rpm.md). The algorithm is
//! `bloatlab_rpm`; this module maps flags to its options and prints its report.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::Context;
use bloatlab_rpm::RunError;
use bloatlab_rpm::client::{self, ClientError, Mode, Report, Update};

use crate::exit;

/// The flags, and their resolution into the client's options, are defined once in
/// `bloatlab_invoke::rpm` (with `to_argv`).
pub use bloatlab_invoke::rpm::RpmArgs;

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
    let env_key = if args.wants_env_key() {
        crate::cmd::opts::permit_key_env()?
    } else {
        None
    };
    let cfg = args.resolve(env_key).map_err(|e| exit::usage(e.message))?;
    let opts = &cfg.options;
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
    let result = client::run(opts, stop.flag(), |u| {
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
    if let Some(path) = &cfg.output {
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
    if cfg.json {
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
