//! `bloatlab lab`: build, use, inspect and remove an emulated network lab.
//!
//! The flags, the lab spec built from them, and exit codes for the lab's
//! typed errors. What the subcommands do lives in the lab crate
//! (`bloatlab_lab::control`): `lab up` claims the name
//! (`/run/bloatlab/NAME.json`), then starts the emulator as a background
//! process (this binary again, as the hidden `lab __daemon NAME`) and waits
//! until it reports that the lab is built, or why it is not.
//! `--foreground` builds and runs the lab in this process until Ctrl-C.
//! Every other subcommand works from the state file, so they also work
//! after the emulator died.

use crate::exit::{Exit, FAILURE, PRIVILEGE, USAGE};
use bloatlab_invoke::lab::{UpArgs, absolute_traces};
use bloatlab_lab::control::{self, daemon::SpawnError, exec::ExecError, set::SetRequest};
use bloatlab_lab::spec::LabSpec;
use bloatlab_lab::state::StateDir;
use bloatlab_lab::{LabError, status_text};
use clap::{Args, Subcommand};
use std::io::Write;

/// Arguments of `bloatlab lab`.
#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(Debug, Subcommand)]
enum LabCmd {
    /// Create lab NAME and start its emulator in the background.
    Up(Box<UpArgs>),
    /// Run CMD inside HOST's namespace of lab NAME.
    Exec(ExecArgs),
    /// Show the lab's hosts, emulator health and counters.
    Status(StatusArgs),
    /// Change a running lab's host settings (TCP ECN) and stage rates and
    /// delays without rebuilding it.
    Set(SetArgs),
    /// Write a capacity trace (mahimahi's format) for `rate=trace:FILE`: a
    /// step, an LTE-like random walk or a Starlink-like trace.
    TraceGen(super::trace_gen::TraceGenArgs),
    /// Stop the emulator and remove every object of lab NAME (also after a crash).
    Down(NameArg),
    /// List labs (and leftover lab namespaces without a state file).
    List(ListArgs),
    /// Internal: the background emulator started by `lab up`.
    #[command(name = "__daemon", hide = true)]
    Daemon(NameArg),
}

#[derive(Debug, Args)]
struct ExecArgs {
    /// Lab name.
    name: String,
    /// Host: client, client2.., server or peer.
    host: String,
    /// Command and arguments.
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// Lab name.
    name: String,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SetArgs {
    /// Lab name.
    name: String,
    /// TCP ECN of a host (net.ipv4.tcp_ecn 1 = on, 2 = off, the kernel default):
    /// `HOST=on|off` or `all=on|off`. Repeatable. Applies to connections opened afterwards.
    #[arg(
        long,
        value_name = "HOST=on|off",
        required_unless_present_any = ["stage_rate", "stage_delay", "stage_qdisc"]
    )]
    ecn: Vec<String>,
    /// Rate of a stage of a chained link (`lab up --stage`), by name or
    /// 1-based position: `1=9mbit`, `router=8500kbit`. Repeatable. Applies
    /// to packets serialized from now on; the queues are kept. Both
    /// directions unless `--up` or `--down` is given.
    /// The rate may also be a schedule or a trace (`1=schedule:0s/20mbit,5s/5mbit`,
    /// `1=trace:FILE`), whose time starts now.
    #[arg(long, value_name = "STAGE=RATE")]
    stage_rate: Vec<String>,
    /// One-way delay of a stage, by name or 1-based position (`path` is the
    /// stage `lab up --delay` adds to a chain): `path=40ms`, or a schedule
    /// starting now, `1=schedule:0s/20ms,10s/200ms`. Repeatable. Applies to
    /// packets leaving the stage's serializer from now on; a calibrated lab
    /// keeps its calibration.
    #[arg(long, value_name = "STAGE=DELAY")]
    stage_delay: Vec<String>,
    /// A new queue discipline for a stage, with its parameters as a stage
    /// writes them: `'1=fq_codel target=5ms'`, `router=cake`. Repeatable.
    /// Packets queued in the old one are sent first, under its rules; new
    /// arrivals queue in the new one.
    #[arg(long, value_name = "STAGE=QDISC [KEY=VALUE ...]")]
    stage_qdisc: Vec<String>,
    /// `--stage-rate`/`--stage-delay` apply to the up direction (client to server) only.
    #[arg(long, conflicts_with = "down")]
    up: bool,
    /// `--stage-rate`/`--stage-delay` apply to the down direction (server to client) only.
    #[arg(long)]
    down: bool,
}

#[derive(Debug, Args)]
struct NameArg {
    /// Lab name.
    name: String,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: LabArgs) -> anyhow::Result<()> {
    let dir = StateDir::default();
    match args.cmd {
        LabCmd::Up(a) => up(&dir, *a),
        LabCmd::Exec(a) => exec(&dir, a),
        LabCmd::Status(a) => status(&dir, a),
        LabCmd::Set(a) => set(&dir, a),
        LabCmd::Down(a) => down(&dir, &a.name),
        LabCmd::List(a) => list(&dir, a),
        LabCmd::TraceGen(a) => super::trace_gen::run(a),
        LabCmd::Daemon(a) => control::daemon::serve(&dir, &a.name, code_of).map_err(lab_err),
    }
}

/// Exit code of a lab error: 2 for bad input, 3 for a missing privilege.
fn code_of(e: &LabError) -> u8 {
    match e {
        LabError::Spec { .. } | LabError::InvalidName { .. } | LabError::NoSuchHost { .. } => USAGE,
        e if e.is_permission() => PRIVILEGE,
        _ => FAILURE,
    }
}

fn lab_err(e: LabError) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: code_of(&e),
        message: e.to_string(),
    })
}

/// `lab up`: the spec, the name claimed, then the emulator in the
/// background (it reports when the lab works) or in this process.
fn up(dir: &StateDir, a: UpArgs) -> anyhow::Result<()> {
    let spec = a.resolve().map_err(lab_err)?;
    let st = control::up::claim(dir, &spec).map_err(lab_err)?;
    if a.foreground {
        return control::daemon::run(dir, st, |built| {
            if built.is_ok() {
                print_summary(&spec);
                eprintln!("running in the foreground; Ctrl-C tears the lab down");
            }
        })
        .map_err(lab_err);
    }
    control::daemon::spawn(dir, &spec.name, &["lab", "__daemon", &spec.name]).map_err(
        |e| match e {
            SpawnError::Io(e) => anyhow::Error::new(e),
            SpawnError::NotReady { code, message } => anyhow::Error::new(Exit {
                code: code.unwrap_or(FAILURE),
                message,
            }),
        },
    )?;
    print_summary(&spec);
    Ok(())
}

fn print_summary(spec: &LabSpec) {
    control::up::write_summary(spec, &mut std::io::stdout(), &mut std::io::stderr());
}

/// `lab exec`: becomes the command, or exits 127 (not found) / 126 (cannot
/// run) as a shell would, or with the lab error's code.
fn exec(dir: &StateDir, a: ExecArgs) -> anyhow::Result<()> {
    let e = control::exec::exec(dir, &a.name, &a.host, &a.cmd);
    let code = match &e {
        ExecError::Lab(l) => code_of(l),
        ExecError::EmulatorDead { .. } => FAILURE,
        ExecError::Run { .. } if e.is_not_found() => 127,
        ExecError::Run { .. } => 126,
    };
    Err(anyhow::Error::new(Exit {
        code,
        message: e.to_string(),
    }))
}

fn set(dir: &StateDir, a: SetArgs) -> anyhow::Result<()> {
    let req = SetRequest {
        ecn: a.ecn,
        stage_rate: a.stage_rate.iter().map(|v| absolute_traces(v)).collect(),
        stage_delay: a.stage_delay,
        stage_qdisc: a.stage_qdisc,
        up: a.up,
        down: a.down,
    };
    control::set::set(dir, &a.name, &req, &mut std::io::stdout()).map_err(lab_err)
}

/// `lab status`: text or JSON of one record; exits 1 naming the problem
/// when the lab is dead.
fn status(dir: &StateDir, a: StatusArgs) -> anyhow::Result<()> {
    let report = bloatlab_lab::status::read(dir, &a.name).map_err(lab_err)?;
    if a.json {
        print_json(&serde_json::to_value(&report)?)?;
    } else {
        print!("{}", status_text::render(&report));
    }
    match report.problem {
        Some(p) => Err(anyhow::Error::new(Exit {
            code: FAILURE,
            message: p,
        })),
        None => Ok(()),
    }
}

/// JSON on stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(v)?;
    let _ = writeln!(std::io::stdout(), "{text}");
    Ok(())
}

fn down(dir: &StateDir, name: &str) -> anyhow::Result<()> {
    let removed = control::teardown::down(dir, name, &mut std::io::stderr()).map_err(lab_err)?;
    println!("{removed}");
    Ok(())
}

fn list(dir: &StateDir, a: ListArgs) -> anyhow::Result<()> {
    let list = control::list::read(dir);
    if a.json {
        return print_json(&serde_json::to_value(&list)?);
    }
    print!("{}", control::list::render(&list));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_emu::Spelled;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Debug, Parser)]
    struct T {
        #[command(subcommand)]
        cmd: LabCmd,
    }

    fn build_spec(a: &UpArgs) -> Result<LabSpec, LabError> {
        a.resolve()
    }

    fn up_args(argv: &[&str]) -> UpArgs {
        let mut v = vec!["t", "up"];
        v.extend_from_slice(argv);
        match T::try_parse_from(v).unwrap().cmd {
            LabCmd::Up(a) => *a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn direction_flags_override_shared_ones() {
        let a = up_args(&[
            "x",
            "--rate",
            "20mbit",
            "--down-rate",
            "5mbit",
            "--delay",
            "10ms",
            "--qdisc",
            "fq_codel",
            "--qdisc-param",
            "target=5ms",
            "--up-qdisc-param",
            "ecn",
        ]);
        let s = build_spec(&a).unwrap();
        assert_eq!(
            s.up.rate.as_ref().map(|r| r.get().nominal.0),
            Some(20_000_000)
        );
        assert_eq!(s.down.rate.as_ref().map(Spelled::text), Some("5mbit"));
        assert_eq!(s.down.delay, Some(Duration::from_millis(10).into()));
        assert_eq!(Spelled::join(&s.up.params, " "), "target=5ms ecn");
        assert_eq!(Spelled::join(&s.down.params, " "), "target=5ms");
    }

    #[test]
    fn stages_apply_to_both_directions_unless_one_is_given() {
        let a = up_args(&[
            "x",
            "--delay",
            "15ms",
            "--stage",
            "rate=9mbit qdisc=fq_codel",
            "--stage",
            "rate=10mbit qdisc=fifo limit=1000p",
        ]);
        let s = build_spec(&a).unwrap();
        assert_eq!(
            Spelled::join(&s.up.stages, " | "),
            "rate=9mbit qdisc=fq_codel | rate=10mbit qdisc=fifo limit=1000p"
        );
        assert_eq!(s.down.stages, s.up.stages);
        assert_eq!(s.down.delay.as_ref().map(Spelled::text), Some("15ms"));
        let a = up_args(&["x", "--stage", "rate=9mbit", "--down-stage", "rate=2mbit"]);
        let s = build_spec(&a).unwrap();
        assert_eq!(Spelled::join(&s.up.stages, " | "), "rate=9mbit");
        assert_eq!(Spelled::join(&s.down.stages, " | "), "rate=2mbit");
        for (argv, field, value) in [
            (
                vec![
                    "x",
                    "--stage",
                    "rate=9mbit qdisc=fq_codel",
                    "--rate",
                    "5mbit",
                ],
                "--rate",
                "5mbit",
            ),
            (
                vec!["x", "--stage", "rate=9mbit", "--backend", "kernel"],
                "--up-stage",
                "rate=9mbit",
            ),
        ] {
            let e = build_spec(&up_args(&argv)).unwrap_err();
            assert_eq!(code_of(&e), USAGE, "{argv:?}");
            let m = e.to_string();
            assert!(m.contains(field) && m.contains(value), "{argv:?}: {m}");
        }
    }

    #[test]
    fn ecn_and_cc_expand_to_hosts() {
        let a = up_args(&[
            "x",
            "--clients",
            "2",
            "--ecn",
            "all",
            "--cc",
            "reno",
            "--cc",
            "server=bbr",
        ]);
        let s = build_spec(&a).unwrap();
        assert_eq!(s.ecn_hosts, ["client", "client2", "server"]);
        assert_eq!(s.cc["client2"], "reno");
        assert_eq!(s.cc["server"], "bbr");
        for bad in ["cu bic", "server=a-b"] {
            let e = build_spec(&up_args(&["x", "--cc", bad])).unwrap_err();
            assert_eq!(code_of(&e), USAGE, "{bad}");
            assert!(e.to_string().contains("--cc"), "{e}");
        }
    }

    #[test]
    fn offload_is_off_unless_asked_for() {
        assert!(!build_spec(&up_args(&["x"])).unwrap().driver.offload);
        assert!(
            build_spec(&up_args(&["x", "--offload"]))
                .unwrap()
                .driver
                .offload
        );
    }

    #[test]
    fn fast_links_without_offload_get_a_note() {
        use bloatlab_lab::control::up::offload_hint;
        let hint = |argv: &[&str]| offload_hint(&build_spec(&up_args(argv)).unwrap());
        assert!(
            hint(&["x", "--rate", "1gbit"])
                .unwrap()
                .contains("--offload")
        );
        assert!(hint(&["x", "--down-rate", "500mbit"]).is_some());
        assert!(hint(&["x", "--rate", "1gbit", "--offload"]).is_none());
        assert!(hint(&["x", "--rate", "100mbit"]).is_none());
        assert!(hint(&["x"]).is_none(), "unshaped");
        assert!(hint(&["x", "--rate", "1gbit", "--backend", "kernel"]).is_none());
    }

    #[test]
    fn bad_values_are_usage_errors_naming_the_field() {
        for (argv, field, value) in [
            (vec!["x", "--ecn", "nobody"], "--ecn", "nobody"),
            (
                vec!["x", "--backend", "kernel", "--offload"],
                "--offload",
                "userspace",
            ),
            (vec!["Bad"], "name", "Bad"),
        ] {
            let e = build_spec(&up_args(&argv)).unwrap_err();
            assert_eq!(code_of(&e), USAGE, "{argv:?}");
            let m = e.to_string();
            assert!(m.contains(field) && m.contains(value), "{argv:?}: {m}");
        }
    }

    /// Every link flag's value is parsed by clap with the emulator's parser:
    /// a bad one is a clap usage error naming that exact flag and the
    /// emulator's reason, before any spec exists.
    /// A relative trace path is made absolute (the lab's state is read from other
    /// directories); everything else is left as written.
    #[test]
    fn trace_paths_are_made_absolute() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            absolute_traces("name=a rate=trace:t/x.trace,qdisc=fifo"),
            format!("name=a rate=trace:{}/t/x.trace,qdisc=fifo", cwd.display())
        );
        assert_eq!(absolute_traces("trace:/abs/x"), "trace:/abs/x");
        assert_eq!(
            absolute_traces("rate=schedule:0s/1mbit,1s/2mbit"),
            "rate=schedule:0s/1mbit,1s/2mbit"
        );
        assert_eq!(absolute_traces("trace:"), "trace:");
    }

    #[test]
    fn bad_link_values_are_refused_by_clap_naming_the_exact_flag() {
        for (flag, value, why) in [
            ("--rate", "0mbit", "must be greater than zero"),
            ("--up-rate", "20mbits", "unknown unit"),
            ("--up-delay", "5q", "unknown unit"),
            ("--delay", "-5ms", "must not be negative"),
            ("--down-jitter", "1 fortnight", "unknown unit"),
            ("--down-loss", "150%", "out of range"),
            ("--loss", "bursty 1%", "not known"),
            ("--up-limit", "0p", "greater than zero"),
            ("--qdisc", "sfq", "not known"),
            ("--down-qdisc", "red", "not known"),
            ("--qdisc-param", "bogus=1", "\"bogus\" is not known"),
            (
                "--up-qdisc-param",
                "target=-1ms",
                "target: \"-1ms\" must not be negative",
            ),
            ("--down-qdisc-param", "delay=5ms", "use --delay for delay"),
            ("--stage", "rate=9mbit wat=1", "wat"),
            ("--up-stage", "rate=9mbit limit=0p", "limit: \"0p\""),
            ("--down-stage", "name=a/b rate=1mbit", "name"),
            ("--spin", "fast", "not a number"),
            ("--down-rate", "schedule:0s/1mbit,1s/0mbit", "step 2"),
            (
                "--rate",
                "trace:/nonexistent/h23r.trace",
                "/nonexistent/h23r.trace",
            ),
            ("--delay", "schedule:0s/20ms", "a stage's"),
            (
                "--stage",
                "rate=schedule:0s/1mbit,1s/-1mbit",
                "must not be negative",
            ),
        ] {
            let e = T::try_parse_from(["t", "up", "x", flag, value]).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{flag}");
            assert_eq!(e.exit_code(), i32::from(USAGE));
            let m = e.to_string();
            let head = m.lines().next().unwrap_or_default();
            assert!(
                head.contains(&format!("'{value}' for '{flag} <")) && head.contains(why),
                "{flag} {value}: {m}"
            );
        }
    }
}
