//! `bloatlab ping HOST`: isochronous latency probes to a bloatlab responder (or ICMP
//! echo), a per-probe line on request and a summary; `--json` prints a results document
//! (the `bloatlab-results` schema) with the raw samples instead.
//!
//! `--serve ADDR` (hidden) runs the standalone UDP probe responder that `bloatlab server`
//! also runs on its port.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::Context;
use bloatlab_invoke::ping::{Ping, PingConfig};
use bloatlab_probe::client::{self, Mode, ProbeLine};
use bloatlab_probe::clock::ClockMethod;
use bloatlab_probe::report::{DelayStats, Ipdv, Summary};
use bloatlab_probe::session::ReplyEvent;
use bloatlab_probe::{ProbeError, responder, sys};

use crate::exit;
use bloatlab_probe::results_file;

/// The flags, and their resolution into a [`PingConfig`], are defined once in
/// `bloatlab_invoke::ping` (with `to_argv`, which `bloatlab test` uses for its probers).
pub use bloatlab_invoke::ping::PingArgs;

/// Resolves HOST without ever sending a DNS query for something that is not a host name.
fn lookup(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !valid {
        anyhow::bail!("cannot resolve `{host}`: not a valid host name or address");
    }
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve `{host}`"))?
        .next()
        .with_context(|| format!("cannot resolve `{host}`: no addresses"))
}

fn map_probe_error(e: ProbeError) -> anyhow::Error {
    let code = match &e {
        ProbeError::Privilege { .. } => Some(exit::PRIVILEGE),
        ProbeError::BadSize { .. } | ProbeError::Unsupported(_) => Some(exit::USAGE),
        _ => None,
    };
    match code {
        Some(code) => anyhow::Error::new(exit::Exit {
            code,
            message: e.to_string(),
        }),
        None => anyhow::Error::new(e),
    }
}

fn serve(bind: SocketAddr, key: Option<&str>) -> anyhow::Result<()> {
    let handle = responder::spawn_keyed(bind, key.map(|k| k.as_bytes().to_vec()))
        .map_err(map_probe_error)?;
    println!(
        "bloatlab probe responder listening on {} (UDP)",
        handle.local_addr()
    );
    handle.join();
    Ok(())
}

/// Runs `bloatlab ping`.
pub fn run(args: PingArgs) -> anyhow::Result<()> {
    let env_key = if args.wants_env_key() {
        crate::cmd::opts::permit_key_env()?
    } else {
        None
    };
    match args.resolve(env_key).map_err(|e| exit::usage(e.message))? {
        Ping::Serve { bind, permit_key } => serve(bind, permit_key.as_deref()),
        Ping::Probe(c) => probe(&c),
    }
}

fn probe(c: &PingConfig) -> anyhow::Result<()> {
    let host = c.host.as_str();
    let target = lookup(host, c.port)?;
    let lab = crate::cmd::inlab::InLab::start()?;
    let cfg = c.probe(target);
    let icmp = c.mode == Mode::Icmp;
    let what = if icmp {
        "ICMP echo"
    } else {
        "bloatlab UDP probes"
    };
    let shown = if icmp {
        target.ip().to_string()
    } else {
        target.to_string()
    };
    if !c.json {
        println!(
            "PING {host} ({shown}): {what}, {} bytes, every {}",
            cfg.size,
            fmt_interval(cfg.interval)
        );
    }
    let stop = crate::cmd::stop_on_interrupt()?;
    let start_wall = sys::now();
    let print_lines = c.per_probe && !c.json;
    let key = c.permit_key.as_deref().map(str::as_bytes);
    let report = client::run_keyed(&cfg, key, stop.flag(), |line| {
        if print_lines {
            println!("{}", format_line(line));
        }
    })
    .map_err(map_probe_error)?;
    let summary = report.summary();
    if c.json {
        let session = results_file::Session {
            host: Some(host),
            icmp,
            start: start_wall,
            interrupted: stop.is_stopped(),
            argv: std::env::args().collect(),
        };
        let file = results_file::results_file(&session, &cfg, &report, &summary)?;
        let bytes = bloatlab_results::to_vec(&file).context("serialising the results")?;
        print!("{}", String::from_utf8_lossy(&bytes));
    } else {
        print!("{}", format_summary(&shown, &summary));
    }
    // A dead emulator is the cause of the loss, whatever its amount.
    lab.check()?;
    let loss = pct(summary.lost(), summary.decided());
    if loss > c.max_loss {
        return Err(anyhow::Error::new(exit::Exit {
            code: exit::FAILURE,
            message: format!(
                "{loss:.1}% of {} probes lost (more than --max-loss {}%): the run mostly failed",
                summary.sent, c.max_loss
            ),
        }));
    }
    Ok(())
}

fn fmt_interval(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{} s", d.as_secs_f64())
    } else if d >= Duration::from_millis(1) {
        format!("{} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{} us", d.as_secs_f64() * 1e6)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn format_line(line: &ProbeLine) -> String {
    let owd = |l: &ProbeLine| match l.one_way {
        Some((up, down)) => format!(
            " up={:.3} ms down={:.3} ms",
            up.as_millis_f64(),
            down.as_millis_f64()
        ),
        None => String::new(),
    };
    match line.event {
        ReplyEvent::Answered { seq, rtt } => {
            format!("seq={seq} rtt={:.3} ms{}", ms(rtt), owd(line))
        }
        ReplyEvent::Late { seq, rtt } => format!("seq={seq} rtt={:.3} ms (late)", ms(rtt)),
        ReplyEvent::Duplicate { seq } => format!("seq={seq} (duplicate)"),
        ReplyEvent::Ignored => String::new(),
    }
}

fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

fn stats_row(name: &str, s: &Option<DelayStats>) -> String {
    match s {
        Some(s) => {
            let v = [s.min, s.p10, s.median, s.mean, s.p90, s.p99, s.max];
            let cells: Vec<String> = v
                .iter()
                .map(|d| format!("{:>9.3}", d.as_millis_f64()))
                .collect();
            format!("{name:<6}{}  n={}\n", cells.join(""), s.count)
        }
        None => format!("{name:<6}{:>9}\n", "-"),
    }
}

fn ipdv_cell(i: &Option<Ipdv>) -> String {
    match i {
        Some(i) => format!("{:.3}/{:.3}", ms(i.mean_abs), ms(i.max_abs)),
        None => "-".to_owned(),
    }
}

fn format_summary(target: &str, s: &Summary) -> String {
    let mut out = format!("--- {target} probe statistics ---\n");
    out += &format!(
        "{} sent, {} received, {:.1}% loss (up {}, down {}, unknown direction {}), \
         {} duplicates, {} late, {} send slots skipped\n",
        s.sent,
        s.received,
        pct(s.lost(), s.decided()),
        s.lost_up,
        s.lost_down,
        s.lost_unknown,
        s.duplicates,
        s.late,
        s.skipped_slots
    );
    if s.unfinished > 0 {
        out += &format!(
            "{} probes still unanswered at the stop, before their timeout: in flight, not \
             lost (left out of the loss percentage)\n",
            s.unfinished
        );
    }
    out += &format!(
        "{:<6}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}  (ms)\n",
        "", "min", "p10", "median", "mean", "p90", "p99", "max"
    );
    out += &stats_row("rtt", &s.rtt);
    if s.up.is_some() || s.down.is_some() {
        out += &stats_row("up", &s.up);
        out += &stats_row("down", &s.down);
    }
    out += &format!(
        "ipdv (mean/max |D(i+1)-D(i)|, ms): rtt {}  up {}  down {}\n",
        ipdv_cell(&s.ipdv_rtt),
        ipdv_cell(&s.ipdv_up),
        ipdv_cell(&s.ipdv_down)
    );
    out += &match s.clock.method {
        ClockMethod::Shared => {
            "clock: shared with the responder (same kernel clock): offset 0, one-way delays exact\n"
                .to_owned()
        }
        ClockMethod::Estimated => format!(
            "clock: not shared; responder offset {:+.3} ms, drift {:+.2} ppm (estimated from \
             {} minimum-delay samples; assumes equal base delay both ways)\n",
            s.clock.offset.as_millis_f64(),
            s.clock.drift_ppm,
            s.clock.samples_used
        ),
        ClockMethod::Unknown => "clock: unknown (no responder timestamps)\n".to_owned(),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_never_queries_dns_for_invalid_names() {
        assert_eq!(
            lookup("127.0.0.1", 7).unwrap(),
            "127.0.0.1:7".parse().unwrap()
        );
        assert_eq!(lookup("[::1]", 7).unwrap(), "[::1]:7".parse().unwrap());
        let e = lookup("no such host!", 7).unwrap_err().to_string();
        assert!(e.contains("not a valid host name"), "{e}");
        assert!(lookup("a..b", 7).is_err());
    }
}
