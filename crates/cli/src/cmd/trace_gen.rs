//! `bloatlab lab trace-gen`: writes a capacity trace in mahimahi's format for `rate=trace:FILE`
//! (bloatlab_emu::tracegen does the work; this is its command line). The traces in `traces/`
//! were made with it; each file's header says how.

use bloatlab_emu::tracegen::{self, Segment};
use bloatlab_emu::{Spelled, TcValue};
use bloatlab_units::BitRate;
use clap::{Args, Subcommand};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct TraceGenArgs {
    #[command(subcommand)]
    shape: Shape,
    /// Write the trace to FILE instead of stdout.
    #[arg(short = 'o', long, global = true, value_name = "FILE")]
    output: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Shape {
    /// A step trace: HIGH for EVERY, then LOW for EVERY (one loop; the trace loops).
    Step {
        #[arg(long, default_value = "20mbit", value_parser = value::<BitRate>)]
        high: Spelled<BitRate>,
        #[arg(long, default_value = "5mbit", value_parser = value::<BitRate>)]
        low: Spelled<BitRate>,
        #[arg(long, default_value = "5s", value_parser = value::<Duration>)]
        every: Spelled<Duration>,
    },
    /// An LTE-like random walk: every EVERY the rate is multiplied by exp(SIGMA x a normal
    /// draw), kept within MIN..MAX, from START, for LENGTH; seeded.
    Walk {
        #[arg(long, default_value = "10mbit", value_parser = value::<BitRate>)]
        start: Spelled<BitRate>,
        #[arg(long, default_value = "1mbit", value_parser = value::<BitRate>)]
        min: Spelled<BitRate>,
        #[arg(long, default_value = "30mbit", value_parser = value::<BitRate>)]
        max: Spelled<BitRate>,
        #[arg(long, default_value = "200ms", value_parser = value::<Duration>)]
        every: Spelled<Duration>,
        #[arg(long, default_value_t = 0.15)]
        sigma: f64,
        #[arg(long, default_value = "60s", value_parser = value::<Duration>)]
        length: Spelled<Duration>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// A Starlink-like trace: a new rate every EVERY (15 s, the satellite scheduler's
    /// reallocation interval), log-uniform in MIN..MAX, for LENGTH; seeded.
    Starlink {
        #[arg(long, default_value = "5mbit", value_parser = value::<BitRate>)]
        min: Spelled<BitRate>,
        #[arg(long, default_value = "25mbit", value_parser = value::<BitRate>)]
        max: Spelled<BitRate>,
        #[arg(long, default_value = "15s", value_parser = value::<Duration>)]
        every: Spelled<Duration>,
        #[arg(long, default_value = "60s", value_parser = value::<Duration>)]
        length: Spelled<Duration>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn value<T: TcValue>(s: &str) -> Result<Spelled<T>, String> {
    Spelled::parse(s).map_err(|e| e.problem.to_string())
}

/// Longest trace it writes (a typo guard: an hour at 100 Mbit/s is 30 million lines).
const MAX_LENGTH: Duration = Duration::from_secs(3600);

/// The segments and a one-line description of how they were made.
fn segments(shape: &Shape) -> Result<(Vec<Segment>, String), String> {
    let ms = |d: &Spelled<Duration>, what: &str| {
        let v = *d.get();
        if v < Duration::from_millis(1) || v > MAX_LENGTH {
            Err(format!("--{what} {d}: 1ms to 1h"))
        } else {
            Ok(v)
        }
    };
    Ok(match shape {
        Shape::Step { high, low, every } => (
            tracegen::step(*high.get(), *low.get(), ms(every, "every")?),
            format!("step --high {high} --low {low} --every {every}"),
        ),
        Shape::Walk {
            start,
            min,
            max,
            every,
            sigma,
            length,
            seed,
        } => {
            if min.get() > max.get() || !sigma.is_finite() || *sigma < 0.0 {
                return Err("walk: need --min <= --max and --sigma >= 0".into());
            }
            (
                tracegen::random_walk(
                    *start.get(),
                    *min.get(),
                    *max.get(),
                    ms(every, "every")?,
                    *sigma,
                    ms(length, "length")?,
                    *seed,
                ),
                format!(
                    "walk --start {start} --min {min} --max {max} --every {every} \
                     --sigma {sigma} --length {length} --seed {seed}"
                ),
            )
        }
        Shape::Starlink {
            min,
            max,
            every,
            length,
            seed,
        } => {
            if min.get() > max.get() {
                return Err("starlink: need --min <= --max".into());
            }
            (
                tracegen::reallocations(
                    *min.get(),
                    *max.get(),
                    ms(every, "every")?,
                    ms(length, "length")?,
                    *seed,
                ),
                format!(
                    "starlink --min {min} --max {max} --every {every} --length {length} \
                     --seed {seed}"
                ),
            )
        }
    })
}

/// The trace's text: a header saying how it was made and what it holds, then the lines.
pub fn render(args: &TraceGenArgs) -> Result<String, String> {
    let (segs, how) = segments(&args.shape)?;
    let mut header = vec![
        format!("bloatlab lab trace-gen {how}"),
        "mahimahi format: one line per delivery opportunity of a 1500-byte packet, in ms; \
         the trace loops"
            .to_string(),
    ];
    let mut t = Duration::ZERO;
    for s in &segs {
        header.push(format!(
            "from {:.3}s: {}",
            t.as_secs_f64(),
            Spelled::<BitRate>::from(BitRate(s.rate.0 / 1000 * 1000))
        ));
        t += s.len;
    }
    Ok(tracegen::render(&segs, &header))
}

pub fn run(args: TraceGenArgs) -> anyhow::Result<()> {
    let text = render(&args).map_err(|e| {
        anyhow::Error::new(crate::exit::Exit {
            code: crate::exit::USAGE,
            message: e,
        })
    })?;
    match &args.output {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?,
        None => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(text.as_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TraceGenArgs,
    }

    fn make(argv: &[&str]) -> Result<String, String> {
        let mut v = vec!["trace-gen"];
        v.extend_from_slice(argv);
        render(&Cli::try_parse_from(v).map_err(|e| e.to_string())?.args)
    }

    /// Each shape's output is a trace the emulator reads, with the rates asked for.
    #[test]
    fn every_shape_makes_a_trace_the_emulator_reads() {
        let text = make(&[
            "step", "--high", "20mbit", "--low", "5mbit", "--every", "5s",
        ])
        .unwrap();
        assert!(
            text.starts_with(
                "# bloatlab lab trace-gen step --high 20mbit --low 5mbit --every 5s\n"
            )
        );
        let t = bloatlab_emu::CapacityTrace::parse("step", &text).unwrap();
        assert_eq!(t.period(), Duration::from_secs(10));
        let m = t.mean_rate().0;
        assert!((12_490_000..=12_510_000).contains(&m), "{m}");
        for argv in [
            vec!["walk", "--length", "10s"],
            vec!["starlink", "--length", "30s"],
        ] {
            let text = make(&argv).unwrap();
            let t = bloatlab_emu::CapacityTrace::parse("x", &text).unwrap();
            assert_eq!(
                t.period().as_secs(),
                if argv[0] == "walk" { 10 } else { 30 }
            );
            // The same seed gives the same trace.
            assert_eq!(make(&argv).unwrap(), text);
        }
        assert!(make(&["walk", "--min", "9mbit", "--max", "1mbit"]).is_err());
        assert!(make(&["starlink", "--length", "2h"]).is_err());
        assert!(make(&["step", "--high", "0mbit"]).is_err());
    }
}
