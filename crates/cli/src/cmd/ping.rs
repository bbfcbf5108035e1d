//! `bloatlab ping HOST`: isochronous latency probes to a bloatlab responder (or ICMP
//! echo), a per-probe line on request and a summary; `--json` prints a results document
//! (the `bloatlab-results` schema) with the raw samples instead.
//!
//! `--serve ADDR` (hidden) runs the standalone UDP probe responder that `bloatlab server`
//! also runs on its port.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::Context;
use bloatlab_probe::client::{self, ClientConfig, Mode, ProbeLine};
use bloatlab_probe::clock::ClockMethod;
use bloatlab_probe::report::{DelayStats, Ipdv, Summary};
use bloatlab_probe::session::{Limit, ReplyEvent};
use bloatlab_probe::{ProbeError, packet, responder, sys};

use crate::cmd::opts;

use crate::exit;
use bloatlab_probe::results_file;

/// Arguments of `bloatlab ping`.
#[derive(Debug, clap::Args)]
pub struct PingArgs {
    /// The host running `bloatlab server` (or any host with --icmp).
    #[arg(required_unless_present = "serve")]
    pub host: Option<String>,
    /// Server port (UDP; the same number as the server's TCP port).
    #[arg(short = 'p', long = "port", default_value_t = 5001)]
    pub port: u16,
    /// Time between probes, e.g. 10ms (100 Hz), 20ms, 1s, 500us.
    #[arg(short = 'i', long = "interval", default_value = "10ms", value_parser = interval)]
    pub interval: Duration,
    /// Send this many probes.
    #[arg(short = 'c', long = "count", conflicts_with = "time",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Send probes for this many seconds (default 10 unless -c is given).
    #[arg(short = 't', long = "time", value_parser = opts::positive_seconds)]
    pub time: Option<Duration>,
    /// Datagram size in bytes: UDP payload (80..=65507, default 80) or ICMP message
    /// (32..=65507, default 64).
    #[arg(short = 's', long = "size")]
    pub size: Option<usize>,
    /// ICMP echo instead of UDP probes (RTT only; needs root or CAP_NET_RAW; IPv4).
    #[arg(long = "icmp")]
    pub icmp: bool,
    /// Print one JSON results document (raw samples and summary) on stdout.
    #[arg(long = "json")]
    pub json: bool,
    /// IP TOS byte of the probes (e.g. 0xb8 for DSCP EF).
    #[arg(long = "tos", value_parser = opts::tos)]
    pub tos: Option<u8>,
    /// Seconds to wait for a reply before counting a probe lost (at least; grows to
    /// 3 x the largest RTT seen).
    #[arg(long = "timeout", default_value = "3", value_parser = opts::positive_seconds)]
    pub timeout: Duration,
    /// Exit 1 (after the report) when more than this percentage of probes was lost:
    /// a run that mostly failed (a dead link or emulator) is not a measurement.
    #[arg(long = "max-loss", default_value_t = 50.0, value_parser = max_loss)]
    pub max_loss: f64,
    /// Print a line per reply (seq, RTT, one-way delays when the clocks are shared).
    #[arg(short = 'v', long = "per-probe")]
    pub per_probe: bool,
    /// Tag every probe with an HMAC of this key and accept only tagged replies: what a
    /// `bloatlab server --permit-key=KEY` answers (UDP probes; at least 96 bytes each).
    /// With --serve: answer only probes tagged with this key.
    /// Or in $BLOATLAB_PERMIT_KEY, which keeps it out of the command line.
    #[arg(long = "permit-key", value_parser = opts::permit_key, conflicts_with = "icmp")]
    pub permit_key: Option<String>,
    /// Run only the UDP probe responder on PORT or HOST:PORT (what `bloatlab server`
    /// runs alongside its TCP port) until killed.
    #[arg(
        long = "serve",
        value_name = "ADDR",
        hide = true,
        conflicts_with = "host"
    )]
    pub serve: Option<String>,
}

/// `--max-loss`: a percentage in 0..=100.
fn max_loss(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a percentage in 0..=100")),
    }
}

/// `--interval`: a positive duration with a unit (ns, us, ms, s); a bare number is ms.
fn interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 10ms, 1s, 500us)"))?;
    let scale = match unit.trim() {
        "" | "ms" => 1e-3,
        "s" => 1.0,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        u => return Err(format!("unknown unit `{u}` in `{s}` (use ns, us, ms or s)")),
    };
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(format!("`{s}` must be more than 0 and at most 1 hour"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Resolves HOST without ever sending a DNS query for something that is not a host name.
fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
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

fn serve(addr: &str, key: Option<&str>) -> anyhow::Result<()> {
    let bind: SocketAddr = match addr.parse::<u16>() {
        Ok(port) => SocketAddr::from(([0, 0, 0, 0], port)),
        Err(_) => addr
            .parse()
            .map_err(|_| exit::usage(format!("--serve: `{addr}` is not PORT or HOST:PORT")))?,
    };
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
pub fn run(mut args: PingArgs) -> anyhow::Result<()> {
    // ICMP echo takes no key: an exported variable is for UDP probes.
    if args.permit_key.is_none() && !args.icmp {
        args.permit_key = crate::cmd::opts::permit_key_env()?;
    }
    if let Some(addr) = &args.serve {
        return serve(addr, args.permit_key.as_deref());
    }
    let host = args.host.as_deref().unwrap_or_default();
    let target = resolve(host, args.port)?;
    let lab = crate::cmd::inlab::InLab::start()?;
    let mode = if args.icmp { Mode::Icmp } else { Mode::Udp };
    let limit = match (args.count, args.time) {
        (Some(n), _) => Limit::Count(n),
        (None, Some(t)) => Limit::Duration(t),
        (None, None) => Limit::Duration(Duration::from_secs(10)),
    };
    let mut cfg = ClientConfig::new(target, limit);
    cfg.mode = mode;
    cfg.interval = args.interval;
    cfg.timeout = args.timeout;
    cfg.tos = args.tos;
    cfg.size = args
        .size
        .unwrap_or(if args.icmp { 64 } else { packet::HEADER_LEN });
    if args.permit_key.is_some() {
        // Room for the tag (bloatlab_probe::auth).
        cfg.size = cfg.size.max(bloatlab_probe::auth::MIN_LEN);
    }
    let what = if args.icmp {
        "ICMP echo"
    } else {
        "bloatlab UDP probes"
    };
    let shown = if args.icmp {
        target.ip().to_string()
    } else {
        target.to_string()
    };
    if !args.json {
        println!(
            "PING {host} ({shown}): {what}, {} bytes, every {}",
            cfg.size,
            fmt_interval(cfg.interval)
        );
    }
    let stop = crate::cmd::stop_on_interrupt()?;
    let start_wall = sys::now();
    let print_lines = args.per_probe && !args.json;
    let key = args.permit_key.as_deref().map(str::as_bytes);
    let report = client::run_keyed(&cfg, key, stop.flag(), |line| {
        if print_lines {
            println!("{}", format_line(line));
        }
    })
    .map_err(map_probe_error)?;
    let summary = report.summary();
    if args.json {
        let session = results_file::Session {
            host: args.host.as_deref(),
            icmp: args.icmp,
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
    if loss > args.max_loss {
        return Err(anyhow::Error::new(exit::Exit {
            code: exit::FAILURE,
            message: format!(
                "{loss:.1}% of {} probes lost (more than --max-loss {}%): the run mostly failed",
                summary.sent, args.max_loss
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
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: PingArgs,
    }

    fn parse(argv: &[&str]) -> Result<PingArgs, String> {
        Cli::try_parse_from(std::iter::once("ping").chain(argv.iter().copied()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults() {
        let a = parse(&["10.0.0.2"]).unwrap();
        assert_eq!(a.port, 5001);
        assert_eq!(a.interval, Duration::from_millis(10));
        assert_eq!((a.count, a.time, a.size), (None, None, None));
        assert_eq!(a.timeout, Duration::from_secs(3));
    }

    #[test]
    fn interval_units() {
        assert_eq!(interval("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(interval("20"), Ok(Duration::from_millis(20)));
        assert_eq!(interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(interval("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(interval("0.5s"), Ok(Duration::from_millis(500)));
        assert!(interval("0ms").is_err());
        assert!(interval("fast").is_err());
        assert!(interval("10 parsecs").is_err());
        assert!(
            parse(&["h", "--interval", "0"])
                .unwrap_err()
                .contains("--interval")
        );
    }

    #[test]
    fn count_and_time_conflict_and_count_is_positive() {
        assert!(parse(&["h", "-c", "5", "-t", "2"]).is_err());
        assert!(parse(&["h", "-c", "0"]).is_err());
        assert_eq!(parse(&["h", "-c", "5"]).unwrap().count, Some(5));
    }

    #[test]
    fn host_is_required_unless_serving() {
        assert!(parse(&[]).is_err());
        let a = parse(&["--serve", "127.0.0.1:0"]).unwrap();
        assert_eq!(a.serve.as_deref(), Some("127.0.0.1:0"));
    }

    #[test]
    fn tos_accepts_hex() {
        assert_eq!(parse(&["h", "--tos", "0xb8"]).unwrap().tos, Some(0xb8));
    }

    #[test]
    fn resolve_never_queries_dns_for_invalid_names() {
        assert_eq!(
            resolve("127.0.0.1", 7).unwrap(),
            "127.0.0.1:7".parse().unwrap()
        );
        assert_eq!(resolve("[::1]", 7).unwrap(), "[::1]:7".parse().unwrap());
        let e = resolve("no such host!", 7).unwrap_err().to_string();
        assert!(e.contains("not a valid host name"), "{e}");
        assert!(resolve("a..b", 7).is_err());
    }
}
